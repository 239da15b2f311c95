"""``import tlxc.language as tl``: Triton's blocked-tensor language."""
from . import extra, math  # noqa: F401  (tl.math, tl.extra.libdevice, tl.extra.cuda.libdevice)
from .core import *
from .core import (  # noqa: F401  (the underscored names: Triton 3.1-3.3 spellings, not in *)
    BUILTINS,
    _experimental_descriptor_load,
    _experimental_descriptor_store,
    _experimental_make_tensor_descriptor,
    abs,
    builtin,
    constexpr,
    dtype,
    max,
    min,
    pointer_type,
    range,
    static_range,
    sum,
)

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
