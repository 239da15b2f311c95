"""``import tlxc.language as tl``: Triton's blocked-tensor language."""
from . import extra, math, target_info  # noqa: F401  (tl.math, tl.extra.libdevice, tl.extra.cuda.libdevice)
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
from .math import div_rn, fdiv, sqrt_rn  # noqa: F401  (Triton exports them at the top level too)
from .tlx import async_task, async_tasks  # noqa: F401  (TLX's older spelling: tl.async_tasks())

# tl.rand, tl.randn, tl.randint, ... are @kernel helpers (random.py); imported on first use
# because the kernel decorator imports the runtime, which imports this package.
_RANDOM_NAMES = ("N_ROUNDS_DEFAULT", "pair_uniform_to_normal", "philox", "philox_impl", "rand", "rand4x",
                 "randint", "randint4x", "randn", "randn4x", "uint_to_uniform_float")
# tl.ravel, tl.interleave, tl.cat, ... are @kernel helpers too (standard.py), imported the same way
_STANDARD_NAMES = ("cat", "gather", "histogram", "interleave", "ravel", "reduce_or", "softmax", "swizzle2d",
                   "topk")


def __getattr__(name):
    for module_name, names in (("random", _RANDOM_NAMES), ("standard", _STANDARD_NAMES)):
        if name in names:
            import importlib
            module = importlib.import_module(f"{__name__}.{module_name}")
            globals()[name] = getattr(module, name)
            return globals()[name]
    raise AttributeError(f"module 'tlxc.language' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_RANDOM_NAMES) | set(_STANDARD_NAMES))
