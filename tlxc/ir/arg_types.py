"""The IR element types of host arguments: what a torch tensor passed to a kernel
points to.  Shared by the specialization (``frontend/specialize.py``) and the
descriptors (``runtime/tma.py``), below both, so that neither imports the other
for it (issue 20: the tma <-> specialize cycle)."""
from __future__ import annotations

from ..errors import LaunchError
from . import types as T
from .types import ScalarType

_TORCH_DTYPES = {
    "bool": T.i1, "int8": T.i8, "int16": T.i16, "int32": T.i32, "int64": T.i64,
    "uint8": T.u8, "uint16": T.u16, "uint32": T.u32, "uint64": T.u64,
    "float16": T.f16, "bfloat16": T.bf16, "float32": T.f32, "float64": T.f64,
    "float8_e4m3fn": T.f8e4m3, "float8_e5m2": T.f8e5m2,
}


def pointee_of_tensor(value) -> ScalarType:
    """The element type of a torch tensor (anything with ``data_ptr`` and ``dtype``)."""
    name = str(value.dtype).removeprefix("torch.")
    if name not in _TORCH_DTYPES:
        raise LaunchError(f"tensors of dtype {value.dtype} cannot be passed to a kernel")
    return _TORCH_DTYPES[name]
