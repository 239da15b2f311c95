"""IR ops grouped by domain.  Importing this package registers every op."""
from . import arith, barrier, cluster, control, debug, memory, mma, mma_async, scan, shared, task, tcgen05, tensor  # noqa: F401
