"""Rules for ``arith.*`` and ``math.*``: elementwise numbers, exactly.

Integers wrap at their width (numpy dtypes), divide and take remainders like
C (truncation toward zero), shift with PTX's clamping (amounts at or past the
width give 0, or the sign for arithmetic right shifts).  f16/bf16 (and the
fp8 values a cast produces) compute in float32 and round back to their type
after every op, as the GPU does; ``math.*`` evaluates in float32 (float64 for
f64).
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.types import ScalarType
from .registry import impl
from .values import (
    constant,
    contiguous,
    from_storage,
    register_dtype,
    round_to,
    scalar_of,
    storage_dtype,
    to_storage,
)

_F32 = np.dtype(np.float32)


def _type(op) -> ScalarType:
    return scalar_of(op.results[0].type)


def _operand_type(op, i: int = 0) -> ScalarType:
    return scalar_of(op.operands[i].type)


def _narrow(t) -> bool:
    return isinstance(t, ScalarType) and t.is_float and t.bits < 32


def _float_op(t: ScalarType, fn, *args):
    """Apply ``fn`` in the compute dtype of ``t`` and round the result to ``t``."""
    if _narrow(t):
        return round_to(fn(*[np.asarray(a, dtype=_F32) for a in args]), t)
    return fn(*args)


@impl("arith.constant")
def constant_(ctx, op):
    cache = ctx.plans.constants
    value = cache.get(id(op))
    if value is None:
        value = cache[id(op)] = constant(op.attrs["value"], op.results[0].type)
    return value


def _binary(name: str, fn):
    def rule(ctx, op, lhs, rhs):
        t = _type(op)
        if t.is_float:
            return _float_op(t, fn, lhs, rhs)
        return fn(lhs, rhs)
    rule.__name__ = name
    impl(f"arith.{name}")(rule)


_binary("add", np.add)
_binary("sub", np.subtract)
_binary("mul", np.multiply)
_binary("min", np.fmin)   # IEEE minNum: a NaN operand is ignored (as fminf on the GPU)
_binary("max", np.fmax)
_binary("and", np.bitwise_and)
_binary("or", np.bitwise_or)
_binary("xor", np.bitwise_xor)


def _check_divisor(ctx, op, rhs) -> None:
    zero = np.asarray(rhs) == 0
    if zero.any():
        where = ""
        if zero.ndim:
            index = tuple(int(i) for i in np.unravel_index(int(np.argmax(zero)), zero.shape))
            where = f" at index {index}"
        raise ctx.error(op, f"integer division by zero in {ctx.label}{where} (if those lanes are "
                            f"masked off later, guard the divisor, e.g. tl.where(d == 0, 1, d))")


def c_div(lhs, rhs, t: ScalarType):
    """Integer division truncating toward zero (wraps on INT_MIN / -1)."""
    if t.is_unsigned or t.is_bool:
        return np.floor_divide(lhs, rhs)
    remainder = np.fmod(lhs, rhs)
    return np.floor_divide(np.subtract(lhs, remainder), rhs)


@impl("arith.div")
def div(ctx, op, lhs, rhs):
    t = _type(op)
    if t.is_float:
        return _float_op(t, np.true_divide, lhs, rhs)
    _check_divisor(ctx, op, rhs)
    return c_div(lhs, rhs, t)


@impl("arith.rem")
def rem(ctx, op, lhs, rhs):
    t = _type(op)
    if t.is_float:
        return _float_op(t, np.fmod, lhs, rhs)
    _check_divisor(ctx, op, rhs)
    if t.is_unsigned or t.is_bool:
        return np.remainder(lhs, rhs)
    return np.fmod(lhs, rhs)


def _shift_amount(rhs, t: ScalarType):
    """Shift amounts as unsigned, clamped to the width (PTX ``shl``/``shr``)."""
    unsigned = np.asarray(rhs).astype(f"u{t.bytes}")
    return np.minimum(unsigned, t.bits)


@impl("arith.shl")
def shl(ctx, op, lhs, rhs):
    t = _type(op)
    amount = _shift_amount(rhs, t)
    wide = amount >= t.bits
    safe = np.where(wide, 0, amount).astype(register_dtype(t))
    return np.where(wide, register_dtype(t).type(0), np.left_shift(lhs, safe))


@impl("arith.shr")
def shr(ctx, op, lhs, rhs):
    t = _type(op)
    dtype = register_dtype(t)
    amount = _shift_amount(rhs, t)
    wide = amount >= t.bits
    if t.is_signed:
        amount = np.where(wide, t.bits - 1, amount).astype(dtype)
        return np.right_shift(lhs, amount)
    safe = np.where(wide, 0, amount).astype(dtype)
    return np.where(wide, dtype.type(0), np.right_shift(lhs, safe))


@impl("arith.umulhi")
def umulhi(ctx, op, lhs, rhs):
    """High half of the unsigned product of the operands' bits."""
    t = _type(op)
    unsigned = np.dtype(f"u{t.bytes}")
    a = np.asarray(lhs).astype(unsigned)
    b = np.asarray(rhs).astype(unsigned)
    if t.bits <= 32:
        product = a.astype(np.uint64) * b.astype(np.uint64)
        high = product >> np.uint64(t.bits)
    else:
        high = _mulhi64(a, b)
    return high.astype(unsigned).astype(register_dtype(t))


def _mulhi64(a, b):
    mask = np.uint64(0xFFFFFFFF)
    shift = np.uint64(32)
    a_lo, a_hi = a & mask, a >> shift
    b_lo, b_hi = b & mask, b >> shift
    lo_lo = a_lo * b_lo
    hi_lo = a_hi * b_lo
    lo_hi = a_lo * b_hi
    hi_hi = a_hi * b_hi
    cross = (lo_lo >> shift) + (hi_lo & mask) + lo_hi
    return hi_hi + (hi_lo >> shift) + (cross >> shift)


_PREDICATES = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
               "gt": np.greater, "ge": np.greater_equal}


@impl("arith.cmp")
def cmp(ctx, op, lhs, rhs):
    return _PREDICATES[op.attrs["predicate"]](lhs, rhs)


@impl("arith.select")
def select(ctx, op, cond, a, b):
    result = np.where(cond, a, b)
    return result if result.ndim else result[()]


@impl("arith.neg")
def neg(ctx, op, x):
    t = _type(op)
    if t.is_float:
        return _float_op(t, np.negative, x)
    return np.negative(x)


@impl("arith.not")
def not_(ctx, op, x):
    return np.invert(x)


@impl("arith.abs")
def abs_(ctx, op, x):
    return np.abs(x)


@impl("math.fma")
def fma(ctx, op, a, b, c):
    """``a*b + c``: exact in float64 for f16/bf16/f32 products, one final
    rounding to the type (a float64 sum can, rarely, double-round for f32)."""
    t = _type(op)
    wide = [np.asarray(v, dtype=np.float64) for v in (a, b, c)]
    return round_to(wide[0] * wide[1] + wide[2], t)[()]


def _erf(x):
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is optional
        return np.vectorize(math.erf, otypes=[x.dtype])(x)
    return torch.special.erf(torch.from_numpy(contiguous(x))).numpy()


def _exp2_ftz(x):
    """2^x with what ``ex2.approx.ftz`` flushes, for f32 (the GPU's ``tl.exp2``): subnormal
    inputs read as 0 and subnormal results are 0.  f64 keeps subnormals."""
    if x.dtype != np.float32:
        return np.exp2(x)
    tiny = np.finfo(np.float32).tiny
    with np.errstate(over="ignore", under="ignore"):
        y = np.exp2(np.where(np.abs(x) < tiny, np.float32(0), x))
    return np.where(np.abs(y) < tiny, np.float32(0), y)


_MATH = {
    "exp": np.exp, "exp2": _exp2_ftz, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "sin": np.sin, "cos": np.cos, "floor": np.floor, "ceil": np.ceil, "erf": _erf, "tanh": np.tanh,
}


def _math(name: str, fn):
    def rule(ctx, op, x):
        t = _type(op)
        work = np.asarray(x, dtype=np.float64 if t.bits == 64 else np.float32)
        result = round_to(fn(work), t)
        return result if result.ndim else result[()]
    rule.__name__ = name
    impl(f"math.{name}")(rule)


for _name, _fn in _MATH.items():
    _math(_name, _fn)


# -- conversions ---------------------------------------------------------------------

def _float_to_int(x, t: ScalarType):
    """Truncate toward zero; NaN → 0; out-of-range values clamp (PTX ``cvt.rzi``)."""
    x = np.trunc(np.asarray(x, dtype=np.float64))
    nan = np.isnan(x)
    if t.is_unsigned:
        low_bound, high_bound = 0.0, 2.0 ** t.bits
        lo_value, hi_value = 0, 2 ** t.bits - 1
    else:
        low_bound, high_bound = -(2.0 ** (t.bits - 1)), 2.0 ** (t.bits - 1)
        lo_value, hi_value = -(2 ** (t.bits - 1)), 2 ** (t.bits - 1) - 1
    too_low, too_high = x < low_bound, x >= high_bound
    dtype = register_dtype(t)
    safe = np.where(nan | too_low | too_high, 0.0, x).astype(dtype)
    result = np.where(too_high, dtype.type(hi_value), np.where(too_low, dtype.type(lo_value), safe))
    return result.astype(dtype)


def convert(x, src: ScalarType, dst: ScalarType):
    """Value conversion between scalar types (see ``arith.cast``'s docstring).

    Float sources go through float64 (exact), so each conversion rounds once.
    Integers convert to a float narrower than f64 through f32, as the GPU code
    (``(float)x``, then ``cvt.rn``), Triton and torch do: an integer above
    2^24 rounds twice (e.g. 2^25 + 2^17 + 1 → bf16 is 2^25, not 2^25 + 2^18).
    """
    x = np.asarray(x)
    if dst.is_bool:
        return x != 0
    if dst.is_float:
        if src.is_int and dst.name != "f64":
            return round_to(x.astype(np.float32), dst)  # numpy's int → f32 rounds once, to nearest even
        return round_to(x.astype(np.float64), dst)
    if src.is_float:
        return _float_to_int(x, dst)
    return x.astype(register_dtype(dst))


@impl("arith.cast")
def cast(ctx, op, x):
    src, dst = _operand_type(op), _type(op)
    result = convert(x, src, dst)
    return result if result.ndim else result[()]


@impl("arith.bitcast")
def bitcast(ctx, op, x):
    src, dst = _operand_type(op), _type(op)
    bits = contiguous(to_storage(x, src))
    result = from_storage(bits.view(f"u{bits.dtype.itemsize}").view(storage_dtype(dst)), dst)
    result = np.asarray(result)
    return result if result.ndim else result[()]
