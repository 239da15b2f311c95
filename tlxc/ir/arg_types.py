"""The IR element types of host arguments: what a torch tensor or numpy array passed
to a kernel points to.  Shared by the specialization (``frontend/specialize.py``),
the descriptors (``descriptors.py``) and the interpreter's memory, below all of
them, so that none imports another for it (issue 20: the tma <-> specialize cycle,
the specialization's and descriptors' imports of the interpreter)."""
from __future__ import annotations

import numpy as np

from ..errors import LaunchError
from . import types as T
from .types import ScalarType

_TORCH_DTYPES = {
    "bool": T.i1, "int8": T.i8, "int16": T.i16, "int32": T.i32, "int64": T.i64,
    "uint8": T.u8, "uint16": T.u16, "uint32": T.u32, "uint64": T.u64,
    "float16": T.f16, "bfloat16": T.bf16, "float32": T.f32, "float64": T.f64,
    "float8_e4m3fn": T.f8e4m3, "float8_e5m2": T.f8e5m2,
}


def torch_dtype_name(t: ScalarType) -> str | None:
    """The torch dtype name holding elements of ``t`` (None: torch has none)."""
    return next((name for name, each in _TORCH_DTYPES.items() if each == t), None)


def pointee_of_tensor(value) -> ScalarType:
    """The element type of a torch tensor (anything with ``data_ptr`` and ``dtype``)."""
    name = str(value.dtype).removeprefix("torch.")
    if name not in _TORCH_DTYPES:
        raise LaunchError(f"tensors of dtype {value.dtype} cannot be passed to a kernel")
    return _TORCH_DTYPES[name]


_NUMPY_TYPES = {
    np.dtype(np.bool_): T.i1, np.dtype(np.int8): T.i8, np.dtype(np.int16): T.i16,
    np.dtype(np.int32): T.i32, np.dtype(np.int64): T.i64, np.dtype(np.uint8): T.u8,
    np.dtype(np.uint16): T.u16, np.dtype(np.uint32): T.u32, np.dtype(np.uint64): T.u64,
    np.dtype(np.float16): T.f16, np.dtype(np.float32): T.f32, np.dtype(np.float64): T.f64,
}


def pointee_of_array(array: np.ndarray) -> ScalarType:
    """The element type of a numpy array argument (the interpreter runs kernels on them)."""
    t = _NUMPY_TYPES.get(array.dtype)
    if t is None:
        raise LaunchError(f"numpy arrays of dtype {array.dtype} cannot be passed to a kernel")
    return t
