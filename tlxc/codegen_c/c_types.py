"""IR scalar types → C types, constants, and the storage/compute split.

16-bit and 8-bit floats are stored as their bit patterns (``unsigned short`` /
``unsigned char``) and computed on as ``float``: every op converts its operands
up, computes in f32 and rounds the result back (as the hardware does for
these types).  Generated code therefore needs no ``cuda_fp16.h``.
"""
from __future__ import annotations

import math
import struct

import numpy as np

from ..ir.types import PointerType, ScalarType, TensorDescType

_STORAGE = {
    "i1": "bool", "i8": "signed char", "i16": "short", "i32": "int", "i64": "long long",
    "u8": "unsigned char", "u16": "unsigned short", "u32": "unsigned", "u64": "unsigned long long",
    "f16": "unsigned short", "bf16": "unsigned short", "f8e4m3": "unsigned char", "f8e5m2": "unsigned char",
    "f32": "float", "f64": "double",
}

SMALL_FLOATS = ("f16", "bf16", "f8e4m3", "f8e5m2")


def storage_type(t) -> str:
    if isinstance(t, PointerType):
        return storage_type(t.pointee) + "*"
    if isinstance(t, TensorDescType):       # an in-kernel tensor map (codegen_nvptx/rules_tensormap.py)
        return "const tlx_tensormap*"
    return _STORAGE[t.name]


def compute_type(t) -> str:
    if isinstance(t, ScalarType) and t.name in SMALL_FLOATS:
        return "float"
    return storage_type(t)


def float_to_int(target, value: str, src, dst) -> str:
    """``value`` (a ``float`` or ``double`` expression of the float type ``src``) converted to the integer
    type ``dst`` as Triton's GPU code and the interpreter define it: toward zero, NaN to 0, values past
    ``dst``'s range saturated to its ends (a C cast is undefined there, and wraps 8/16-bit results).  The
    target's ``tlx_cvt_rzi_{s,u}{32,64}_{f32,f64}`` helper converts to 32 or 64 bits with that saturation;
    narrower types clamp its 32-bit result."""
    wide = 64 if dst.bits == 64 else 32
    sign = "u" if dst.is_unsigned else "s"
    out = target.expr(f"tlx_cvt_rzi_{sign}{wide}_{'f64' if src.name == 'f64' else 'f32'}", value)
    if dst.bits < 32:
        hi = (1 << dst.bits) - 1 if dst.is_unsigned else (1 << (dst.bits - 1)) - 1
        if dst.is_unsigned:
            out = f"({out} > {hi}u ? {hi}u : {out})"
        else:
            out = f"({out} > {hi} ? {hi} : {out} < {-hi - 1} ? {-hi - 1} : {out})"
        out = f"({storage_type(dst)})({out})"
    return out


def is_small_float(t) -> bool:
    return isinstance(t, ScalarType) and t.name in SMALL_FLOATS


def float_literal(value: float, ctype: str = "float") -> str:
    if math.isnan(value):
        return "__int_as_float(0x7fc00000)" if ctype == "float" else "__longlong_as_double(0x7ff8000000000000LL)"
    if math.isinf(value):
        if ctype == "float":
            return "__int_as_float(0x7f800000)" if value > 0 else "__int_as_float(0xff800000)"
        return "__longlong_as_double(0x7ff0000000000000LL)" if value > 0 \
            else "__longlong_as_double(0xfff0000000000000LL)"
    text = repr(float(value))
    if "e" not in text and "." not in text:
        text += ".0"
    return text + ("f" if ctype == "float" else "")


def int_literal(value: int, t: ScalarType) -> str:
    if t.name == "i1":
        return "true" if value else "false"
    if t.name in ("i64",):
        return f"{value}LL" if value != -2**63 else "(-9223372036854775807LL - 1)"
    if t.name == "u64":
        return f"{value}ull"
    if t.name == "u32":
        return f"{value}u"
    if t.name == "i32" and value == -2**31:
        return "(-2147483647 - 1)"
    return str(value)


def bits_of_small_float(value: float, t: ScalarType) -> int:
    """The storage bits of ``value`` rounded (to nearest even) into ``t``."""
    if t.name == "f16":
        return int(np.array(value, dtype=np.float16).view(np.uint16))
    f32 = struct.unpack("<I", struct.pack("<f", float(np.float32(value))))[0]
    if t.name == "bf16":
        if math.isnan(value):
            return 0x7FC0
        rounding = 0x7FFF + ((f32 >> 16) & 1)
        return ((f32 + rounding) >> 16) & 0xFFFF
    return _fp8_bits(float(value), t.name)


def _fp8_bits(value: float, name: str) -> int:
    """Round-to-nearest-even with saturation to the finite range (satfinite)."""
    exp_bits, man_bits, bias, max_finite = (4, 3, 7, 448.0) if name == "f8e4m3" else (5, 2, 15, 57344.0)
    if math.isnan(value):
        return 0x7F
    sign = 0x80 if math.copysign(1.0, value) < 0 else 0
    mag = min(abs(value), max_finite)
    if mag == 0:
        return sign
    best, best_err = 0, None
    for code in range(0x80):
        e, m = code >> man_bits, code & ((1 << man_bits) - 1)
        if name == "f8e4m3" and code == 0x7F:
            continue
        if name == "f8e5m2" and e == (1 << exp_bits) - 1:
            continue
        v = (m / (1 << man_bits)) * 2.0 ** (1 - bias) if e == 0 else (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
        err = abs(v - mag)
        if best_err is None or err < best_err or (err == best_err and code % 2 == 0):
            best, best_err = code, err
    return sign | best


def constant_literal(value, t: ScalarType) -> str:
    """A C expression of storage type for ``value`` of IR type ``t``."""
    if is_small_float(t):
        return f"({storage_type(t)}){hex(bits_of_small_float(float(value), t))}"
    if t.is_float:
        return float_literal(float(value), storage_type(t))
    return int_literal(int(value), t)
