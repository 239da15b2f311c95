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

from ..ir.types import PointerType, ScalarType
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
    if t.is_unsigned or t.is_boolean:
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
    if t.is_unsigned or t.is_boolean:
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


# -- math.*: evaluated in float64, rounded once to f32 (or f64), then to f16/bf16 ----------
#
# float64 has more than twice f32's precision, so for the correctly rounded operations
# (sqrt_rn, div_rn, add/sub/mul_rn, rcp_rn, fma, floor, ...) the f32 result is exact; for
# the others it is the correctly rounded value (up to rare double rounding), which CUDA's
# libdevice reaches within its documented ulp bound (docs/language.md lists them).  Narrow
# floats round twice, f64 -> f32 -> f16, as the GPU computes them in f32.

def _torch_special(name: str):
    def fn(x):
        try:
            import torch
        except ImportError:  # pragma: no cover - torch is optional
            raise NotImplementedError(f"the interpreter needs torch for math.{name}") from None
        op = {"erf": torch.special.erf, "erfc": torch.special.erfc, "erfinv": torch.special.erfinv,
              "erfcx": torch.special.erfcx, "normcdfinv": torch.special.ndtri,
              "lgamma": torch.lgamma, "j0": torch.special.bessel_j0, "j1": torch.special.bessel_j1,
              "y0": torch.special.bessel_y0, "y1": torch.special.bessel_y1,
              "cyl_bessel_i0": torch.special.i0, "cyl_bessel_i1": torch.special.i1}[name]
        result = op(torch.from_numpy(contiguous(x, np.float64))).numpy()
        return _c99_at_infinity(name, np.asarray(x, dtype=np.float64), result)
    return fn


# C99 / CUDA values at +-inf where torch.special returns NaN (Bessel functions decay to 0;
# the modified ones grow without bound; y0/y1 are undefined below 0, so -inf stays NaN).
_AT_INFINITY = {"j0": (0.0, 0.0), "j1": (0.0, -0.0), "y0": (0.0, math.nan), "y1": (0.0, math.nan),
                "cyl_bessel_i0": (math.inf, math.inf), "cyl_bessel_i1": (math.inf, -math.inf)}


def _c99_at_infinity(name: str, x, result):
    if name not in _AT_INFINITY:
        return result
    positive, negative = _AT_INFINITY[name]
    result = np.where(x == np.inf, positive, result)
    return np.where(x == -np.inf, negative, result)


def _erfcinv(y):
    """erfc^-1(y): erfinv(1 - y) where 1 - y is exact (y >= 1/2, Sterbenz); below, where it
    is not, -ndtri(y / 2) / sqrt(2)."""
    small = -_torch_special("normcdfinv")(y / 2) / np.sqrt(2.0)
    return np.where(y >= 0.5, _torch_special("erfinv")(1 - y), small)


def _normcdf(x):
    """0.5 * erfc(-x / sqrt(2)): no cancellation in the lower tail (torch's ndtr loses ~20 ulps)."""
    return 0.5 * _torch_special("erfc")(-x / np.sqrt(2.0))


def _tgamma(x):
    def one(v: float) -> float:
        if math.isnan(v) or v == -math.inf:
            return math.nan
        if v == 0:
            return math.copysign(math.inf, v)
        if v < 0 and v == math.floor(v):
            return math.nan
        try:
            return math.gamma(v)
        except OverflowError:
            return -math.inf if v < 0 and math.floor(v) % 2 == 1 else math.inf   # gamma < 0 on (-1, 0), ...
    return np.vectorize(one, otypes=[np.float64])(x) if x.size else x


def _round_half_away(x):
    """C ``round``: halves away from zero (numpy's ``round`` goes to even)."""
    whole = np.trunc(x)
    return np.where(np.abs(x - whole) >= 0.5, whole + np.copysign(1.0, x), whole)


def _logb(x):
    exponent = np.frexp(x)[1]
    finite = np.isfinite(x) & (x != 0)
    special = np.where(x == 0, -np.inf, np.abs(x))       # inf -> inf, nan -> nan
    return np.where(finite, (exponent - 1).astype(np.float64), special)


def _half_turns(x):
    """x - 2k in [-1, 1] (exact), so that sinpi/cospi of huge or integral x are exact."""
    return x - 2.0 * np.rint(x / 2.0)


def _sin_half_turns(r):
    """sin(pi r) for r in [-1, 1], with the argument folded into [-1/2, 1/2] (exactly, by
    Sterbenz) so that pi*r rounds with a small error relative to the result."""
    folded = np.where(np.abs(r) > 0.5, np.copysign(1.0, r) - r, r)
    return np.sin(np.pi * folded)


def _sinpi(x):
    r = _half_turns(x)
    return np.where(r == np.trunc(r), np.copysign(0.0, x), _sin_half_turns(r))


def _cospi(x):
    r = np.abs(_half_turns(x))
    near_zero = np.cos(np.pi * r)                        # well conditioned near cos = 1
    result = np.where(r <= 0.25, near_zero, _sin_half_turns(0.5 - r))
    return np.where(r == 0.5, 0.0, result)


def _saturate(x):
    return np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0))


_FLOAT_UNARY = {
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x), "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sqrt": np.sqrt, "sqrt_rn": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "rsqrt_rn": lambda x: 1 / np.sqrt(x),
    "rcp_rn": lambda x: 1 / x, "cbrt": np.cbrt, "rcbrt": lambda x: 1 / np.cbrt(x),
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "sinpi": _sinpi, "cospi": _cospi,
    "erfcinv": _erfcinv, "tgamma": _tgamma, "normcdf": _normcdf,
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": _round_half_away,
    "rint": np.rint, "nearbyint": np.rint, "logb": _logb, "saturatef": _saturate,
    # the fast intrinsics approximate these on the GPU; the interpreter gives the exact value
    "fast_expf": np.exp, "fast_exp10f": lambda x: np.power(10.0, x), "fast_logf": np.log,
    "fast_log2f": np.log2, "fast_log10f": np.log10, "fast_sinf": np.sin, "fast_cosf": np.cos,
    "fast_tanf": np.tan,
}
for _name in ("erf", "erfc", "erfinv", "erfcx", "normcdfinv", "lgamma",
              "j0", "j1", "y0", "y1", "cyl_bessel_i0", "cyl_bessel_i1"):
    _FLOAT_UNARY[_name] = _torch_special(_name)


def _remainder_one(x: float, y: float) -> float:
    if math.isnan(x) or math.isnan(y) or math.isinf(x) or y == 0:
        return math.nan
    return x if math.isinf(y) else math.remainder(x, y)


def _remainder(x, y):
    """IEEE remainder: x - n*y with n = x/y rounded to nearest even (exact)."""
    return np.vectorize(_remainder_one, otypes=[np.float64])(x, y) if np.size(x) else x


def _fdim(x, y):
    return np.where(np.isnan(x) | np.isnan(y), np.nan, np.where(x > y, x - y, 0.0))


_FLOAT_BINARY = {
    "pow": np.power, "fast_powf": np.power, "atan2": np.arctan2, "hypot": np.hypot,
    "rhypot": lambda x, y: 1 / np.hypot(x, y), "remainder": _remainder, "fdim": _fdim,
    "div_rn": np.true_divide, "fast_dividef": np.true_divide,
    "add_rn": np.add, "sub_rn": np.subtract, "mul_rn": np.multiply,
}
# exact in the operands' own type (nextafter must step in f32, not in f64)
_FLOAT_BINARY_NATIVE = {"copysign": np.copysign, "nextafter": np.nextafter}


def _compute_dtype(t: ScalarType):
    return np.float64 if t.bits == 64 else np.float32


def _round_result(wide, t: ScalarType):
    """A float64 result rounded as the GPU rounds it: to f32 (or f64), then to ``t``."""
    if t.bits < 64:
        wide = np.asarray(wide).astype(np.float32)
    result = round_to(wide, t)
    return result if result.ndim else result[()]


def _flush_subnormals(x):
    tiny = np.finfo(np.float32).tiny
    return np.where(np.abs(x) < tiny, np.float32(0), x)


def _unary_math(name: str, fn):
    # tl.exp2 is ``ex2.approx.ftz.f32`` on the GPU (as in Triton): f32 subnormal inputs read
    # as 0 and subnormal results are 0; f64 keeps subnormals
    flush = name == "exp2"

    def rule(ctx, op, x):
        t = _type(op)
        work = np.asarray(x, dtype=_compute_dtype(t))
        if flush and t.bits < 64:
            work = _flush_subnormals(work)
        with np.errstate(all="ignore"):
            wide = fn(work.astype(np.float64))
        if flush and t.bits < 64:
            wide = _flush_subnormals(np.asarray(wide).astype(np.float32))
        return _round_result(wide, t)
    rule.__name__ = name
    impl(f"math.{name}")(rule)


def _binary_math(name: str, fn, native: bool):
    def rule(ctx, op, x, y):
        t = _type(op)
        dtype = _compute_dtype(t) if native else np.float64
        with np.errstate(all="ignore"):
            wide = fn(np.asarray(x, dtype=_compute_dtype(t)).astype(dtype),
                      np.asarray(y, dtype=_compute_dtype(t)).astype(dtype))
        return _round_result(wide, t)
    rule.__name__ = name
    impl(f"math.{name}")(rule)


for _name, _fn in _FLOAT_UNARY.items():
    _unary_math(_name, _fn)
for _name, _fn in _FLOAT_BINARY.items():
    _binary_math(_name, _fn, native=False)
for _name, _fn in _FLOAT_BINARY_NATIVE.items():
    _binary_math(_name, _fn, native=True)


@impl("math.powi", "math.ldexp")
def float_int(ctx, op, x, n):
    """``x ** n`` / ``x * 2**n``: the GPU lowers powi to ``pow(x, (float)n)``."""
    t = _type(op)
    wide = np.asarray(x, dtype=_compute_dtype(t)).astype(np.float64)
    n = np.asarray(n).astype(np.int64)
    with np.errstate(all="ignore"):
        if op.name == "math.powi":
            result = np.power(wide, np.asarray(n, dtype=_compute_dtype(t)).astype(np.float64))
        else:
            result = np.ldexp(wide, np.clip(n, -2000, 2000))
    return _round_result(result, t)


_PREDICATE_FNS = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "signbit": np.signbit}


@impl(*(f"math.{name}" for name in _PREDICATE_FNS))
def predicate(ctx, op, x):
    result = _PREDICATE_FNS[op.name.split(".")[1]](np.asarray(x))
    return result if result.ndim else result[()]


def _unsigned_bits(x, t: ScalarType):
    """The elements' bits as unsigned integers of their width (at least 1-D)."""
    return np.atleast_1d(np.asarray(x).astype(register_dtype(t))).view(np.dtype(f"u{t.bytes}"))


def _bit_length(u, bits: int):
    """Index of the highest set bit plus one (0 for 0), exactly, for unsigned ints."""
    length = np.zeros(u.shape, dtype=np.int32)
    remaining = u.copy()
    for shift in (32, 16, 8, 4, 2, 1):
        if shift >= bits:
            continue
        big = remaining >= (np.uint64(1) << np.uint64(shift)).astype(u.dtype)
        length = np.where(big, length + shift, length)
        remaining = np.where(big, remaining >> u.dtype.type(shift), remaining)
    return length + (remaining != 0).astype(np.int32)


def _popcount(u):
    count = np.zeros(u.shape, dtype=np.int32)
    remaining = u.copy()
    one = u.dtype.type(1)
    for _ in range(u.dtype.itemsize * 8):
        count += (remaining & one).astype(np.int32)
        remaining = remaining >> one
    return count


@impl("math.clz", "math.popc", "math.ffs")
def bit_count(ctx, op, x):
    t = _operand_type(op)
    u = _unsigned_bits(x, t)
    if op.name == "math.clz":
        result = t.bits - _bit_length(u, t.bits)
    elif op.name == "math.popc":
        result = _popcount(u)
    else:                                  # ffs: 1 + index of the lowest set bit, 0 for 0
        lowest = u & (~u + u.dtype.type(1))
        result = _bit_length(lowest, t.bits)
    result = np.asarray(result, dtype=np.int32).reshape(np.shape(x))
    return result if result.ndim else result[()]


@impl("math.brev")
def brev(ctx, op, x):
    t = _type(op)
    u = _unsigned_bits(x, t)
    out = np.zeros_like(u)
    one = u.dtype.type(1)
    for i in range(t.bits):
        bit = (u >> u.dtype.type(i)) & one
        out |= bit << u.dtype.type(t.bits - 1 - i)
    result = out.view(register_dtype(t)).reshape(np.shape(x))
    return result if result.ndim else result[()]


@impl("math.mulhi")
def mulhi(ctx, op, lhs, rhs):
    """High half of the signed product: the unsigned high half, corrected for negative operands."""
    t = _type(op)
    high = umulhi(ctx, op, lhs, rhs)
    a = np.asarray(lhs).astype(register_dtype(t))
    b = np.asarray(rhs).astype(register_dtype(t))
    with np.errstate(over="ignore"):
        high = high - np.where(a < 0, b, 0).astype(register_dtype(t)) - np.where(b < 0, a, 0).astype(register_dtype(t))
    return high.astype(register_dtype(t))


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
    if dst.is_boolean:
        return x != 0
    if dst.is_float:
        if src.is_integer and dst.name != "f64":
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
    if isinstance(src, PointerType) != isinstance(dst, PointerType):
        # pointers are virtual addresses here, their integers the real ones (memory.py)
        result = (ctx.memory.to_integer(x) if isinstance(src, PointerType) else ctx.memory.to_pointer(x))
        result = result.astype(register_dtype(dst))
        return result if result.ndim else result[()]
    bits = contiguous(to_storage(x, src))
    result = from_storage(bits.view(f"u{bits.dtype.itemsize}").view(storage_dtype(dst)), dst)
    result = np.asarray(result)
    return result if result.ndim else result[()]
