"""IR ops grouped by domain.  Importing this package registers every op."""
from . import arith, control, debug, memory, mma, tensor  # noqa: F401
