"""``import tlxc.language as tl``: Triton's blocked-tensor language."""
from . import extra, math  # noqa: F401  (tl.math, tl.extra.libdevice, tl.extra.cuda.libdevice)
from .core import *
from .core import BUILTINS, abs, builtin, constexpr, dtype, max, min, pointer_type, range, static_range, sum  # noqa: F401  # noqa: F401,A004
