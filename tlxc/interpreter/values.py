"""How the interpreter represents IR values with numpy, and exact number formats.

A runtime value is a numpy array (a 0-d array or numpy scalar for IR scalars)
in the *register dtype* of its IR type:

=============  ===============  ===========================================
IR type        register dtype   storage in memory
=============  ===============  ===========================================
i1             bool             1 byte, nonzero is true
i8 .. u64      int8 .. uint64   same
f16            float16          same
bf16           float32          uint16 bits (upper half of a float32)
f8e4m3/e5m2    float32          uint8 bits
f32, f64       float32/float64  same
ptr<T>         int64            (addresses in the interpreter's memory map)
=============  ===============  ===========================================

bf16 and fp8 values are float32 numbers that are exactly representable in the
narrow format: every op that produces one rounds (round to nearest even) with
``round_to``.  The rounding is done with exact float64 scaling (``frexp`` /
``ldexp`` / ``rint``), so it is bit-exact for every float32 or float64 source
and needs no third-party dtype package.
"""
from __future__ import annotations

import numpy as np

from ..ir.types import PointerType, ScalarType, TensorType, Type
from ..target import DEFAULT_ARCH, get_target

# A program's warp size is its target's (``Program.warp_size``: 32 lanes on NVIDIA, 64 on AMD's
# gfx942 / gfx950); this is the default target's, for programs made without one.
WARP_SIZE = get_target(DEFAULT_ARCH).warp_size

_REGISTER = {
    "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "bf16": np.float32, "f8e4m3": np.float32, "f8e5m2": np.float32,
    "f32": np.float32, "f64": np.float64,
}
_STORAGE = dict(_REGISTER, i1=np.uint8, bf16=np.uint16, f8e4m3=np.uint8, f8e5m2=np.uint8)

POINTER_DTYPE = np.dtype(np.int64)

# Formats emulated on float32 registers: (explicit mantissa bits, min normal
# exponent, largest finite value, saturate on overflow).  fp8 conversions
# saturate like the hardware's ``cvt.rn.satfinite``; bf16 overflows to inf.
_NARROW = {
    "bf16": (7, -126, float.fromhex("0x1.fep127"), False),
    "f8e4m3": (3, -6, 448.0, True),
    "f8e5m2": (2, -14, 57344.0, True),
}
NARROW_FLOATS = frozenset(_NARROW)


def contiguous(x, dtype=None) -> np.ndarray:
    """``x`` as a C-contiguous array (``.view``-able), keeping 0-d shapes
    (``np.ascontiguousarray`` would make them 1-d)."""
    array = np.asarray(x, dtype=dtype)
    return array if array.flags.c_contiguous else array.copy()


def scalar_of(t: Type) -> ScalarType | PointerType:
    return t.element if isinstance(t, TensorType) else t


def register_dtype(t: Type) -> np.dtype:
    """The numpy dtype holding values of IR type ``t`` (scalar or tensor)."""
    s = scalar_of(t)
    if isinstance(s, PointerType):
        return POINTER_DTYPE
    return np.dtype(_REGISTER[s.name])


def storage_dtype(t: ScalarType | PointerType) -> np.dtype:
    """The numpy dtype of one element of type ``t`` in memory."""
    if isinstance(t, PointerType):
        return POINTER_DTYPE
    return np.dtype(_STORAGE[t.name])


def compute_dtype(t: ScalarType) -> np.dtype:
    """Arithmetic on f16/bf16/fp8 happens in float32, then rounds back."""
    if t.is_float and t.bits < 32:
        return np.dtype(np.float32)
    return register_dtype(t)


# -- rounding ------------------------------------------------------------------

def round_narrow(x, name: str) -> np.ndarray:
    """Round float values to the ``bf16`` / ``f8e4m3`` / ``f8e5m2`` grid (RNE).

    Returns float32 values exactly representable in the format.  NaN stays
    NaN; fp8 saturates out-of-range values (and infinities) to ±max finite;
    bf16 overflows to ±inf.
    """
    mantissa, emin, max_finite, saturate = _NARROW[name]
    x64 = np.asarray(x, dtype=np.float64)
    _, exponent = np.frexp(x64)                 # |x| = m * 2**exponent, m in [0.5, 1)
    ulp_exponent = np.maximum(exponent.astype(np.int64) - 1, emin) - mantissa
    finite = np.isfinite(x64)
    ulp_exponent = np.where(finite, ulp_exponent, 0)
    rounded = np.ldexp(np.rint(np.ldexp(x64, -ulp_exponent)), ulp_exponent)
    over = np.abs(rounded) > max_finite         # NaN compares false: stays NaN
    if saturate:
        rounded = np.where(over, np.copysign(max_finite, x64), rounded)
    else:
        rounded = np.where(over, np.copysign(np.inf, x64), rounded)
    return rounded.astype(np.float32)


def round_to(x, t: ScalarType):
    """Round float values (any float dtype) to IR float type ``t``, as register values."""
    if t.name in _NARROW:
        return round_narrow(x, t.name)
    return np.asarray(x).astype(_REGISTER[t.name])


def round_tf32(x) -> np.ndarray:
    """f32 → tf32 (10 explicit mantissa bits), round to nearest, ties away
    from zero (``cvt.rna.tf32.f32``, what tensor cores are fed)."""
    x = contiguous(x, np.float32)
    bits = x.view(np.uint32)
    rounded = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isfinite(x), rounded, x)


# -- memory encoding ------------------------------------------------------------

def _fp8_table(exponent_bits: int, mantissa_bits: int, nan_codes: set[int], inf_codes: set[int]):
    bias = (1 << (exponent_bits - 1)) - 1
    values = np.empty(256, dtype=np.float32)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e = (code >> mantissa_bits) & ((1 << exponent_bits) - 1)
        m = code & ((1 << mantissa_bits) - 1)
        if code in nan_codes:
            values[code] = np.nan
        elif code in inf_codes:
            values[code] = sign * np.inf
        elif e == 0:
            values[code] = sign * m * 2.0 ** (1 - bias - mantissa_bits)
        else:
            values[code] = sign * (1 + m / (1 << mantissa_bits)) * 2.0 ** (e - bias)
    return values


_FP8_DECODE = {
    "f8e4m3": _fp8_table(4, 3, {0x7F, 0xFF}, set()),
    "f8e5m2": _fp8_table(5, 2, {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}, {0x7C, 0xFC}),
}
_FP8_NAN_CODE = {"f8e4m3": 0x7F, "f8e5m2": 0x7E}


def _fp8_sorted_codes(name: str) -> tuple[np.ndarray, np.ndarray]:
    positive = _FP8_DECODE[name][:0x80]
    keep = ~np.isnan(positive)
    order = np.argsort(positive[keep], kind="stable")
    return positive[keep][order], np.arange(0x80, dtype=np.uint8)[keep][order]


_FP8_SORTED = {name: _fp8_sorted_codes(name) for name in _FP8_DECODE}


def _fp8_encode(values, name: str) -> np.ndarray:
    """float32 values on the fp8 grid → codes (search in the sorted code table)."""
    sorted_values, codes = _FP8_SORTED[name]
    v = np.asarray(values, dtype=np.float32)
    index = np.clip(np.searchsorted(sorted_values, np.abs(v)), 0, len(codes) - 1)
    result = codes[index] | np.where(np.signbit(v), np.uint8(0x80), np.uint8(0))
    return np.where(np.isnan(v), np.uint8(_FP8_NAN_CODE[name]), result).astype(np.uint8)


def to_storage(values, t: ScalarType | PointerType) -> np.ndarray:
    """Register values of type ``t`` → their bits in memory (storage dtype)."""
    if isinstance(t, PointerType):
        return np.asarray(values, dtype=np.int64)
    name = t.name
    if name == "bf16":
        return (contiguous(values, np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    if name in _FP8_DECODE:
        return _fp8_encode(values, name)
    if name == "i1":
        return np.asarray(values).astype(np.uint8)
    return np.asarray(values, dtype=_STORAGE[name])


def from_storage(bits, t: ScalarType | PointerType) -> np.ndarray:
    """Bits loaded from memory → register values of type ``t``."""
    if isinstance(t, PointerType):
        return np.asarray(bits, dtype=np.int64)
    name = t.name
    if name == "bf16":
        return (np.asarray(bits, dtype=np.uint32) << np.uint32(16)).view(np.float32)
    if name in _FP8_DECODE:
        return _FP8_DECODE[name][np.asarray(bits, dtype=np.uint8)]
    if name == "i1":
        return np.asarray(bits) != 0
    return np.asarray(bits)


def constant(value, t: Type) -> np.ndarray:
    """A constant of IR type ``t`` (scalar or splat tensor), read-only."""
    s = scalar_of(t)
    dtype = register_dtype(t)
    if isinstance(s, ScalarType) and s.name in _NARROW:
        scalar = round_narrow(np.float64(value), s.name)[()]
    else:
        scalar = dtype.type(value)
    if isinstance(t, TensorType):
        array = np.full(t.shape, scalar, dtype=dtype)
        array.flags.writeable = False
        return array
    return np.asarray(scalar, dtype=dtype)[()]


def as_index(value) -> int:
    return int(np.asarray(value)[()])


def format_element(value, t: ScalarType | PointerType, hex_: bool = False) -> str:
    """One element as ``tl.device_print`` shows it."""
    if isinstance(t, PointerType):
        return f"0x{int(value):x}"
    if hex_:
        bits = np.atleast_1d(to_storage(np.asarray(value), t))
        unsigned = bits.view(f"u{bits.dtype.itemsize}")
        return f"0x{int(unsigned[0]):x}"
    if t.is_boolean:
        return "1" if value else "0"
    if t.is_integer:
        return str(int(value))
    return repr(float(value))
