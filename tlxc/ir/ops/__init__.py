"""IR ops grouped by domain.  Importing this package registers every op."""
from . import arith, barrier, control, debug, memory, mma, shared, task, tensor  # noqa: F401
