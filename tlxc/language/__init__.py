"""``import tlxc.language as tl``: Triton's blocked-tensor language."""
from . import extra, math  # noqa: F401  (tl.math, tl.extra.libdevice, tl.extra.cuda.libdevice)
from .core import *
from .core import BUILTINS, abs, builtin, constexpr, dtype, max, min, pointer_type, range, static_range, sum  # noqa: F401  # noqa: F401,A004

# tl.rand, tl.randn, tl.randint, ... are @kernel helpers (random.py); imported on first use
# because the kernel decorator imports the runtime, which imports this package.
_RANDOM_NAMES = ("N_ROUNDS_DEFAULT", "pair_uniform_to_normal", "philox", "philox_impl", "rand", "rand4x",
                 "randint", "randint4x", "randn", "randn4x", "uint_to_uniform_float")


def __getattr__(name):
    if name in _RANDOM_NAMES:
        from . import random
        globals()[name] = getattr(random, name)
        return globals()[name]
    raise AttributeError(f"module 'tlxc.language' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_RANDOM_NAMES))
