"""``import tlxc.language as tl``: Triton's blocked-tensor language."""
from .core import *  # noqa: F401,F403
from .core import BUILTINS, builtin, constexpr, dtype, pointer_type, range, static_range  # noqa: F401
from .core import abs, max, min, sum  # noqa: F401,A004
