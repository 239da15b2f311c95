"""Semantic rules of ``tl.math.*`` and ``libdevice.*`` (``tlxc/language/math.py``).

Both namespaces share one rule per function, registered as ``RULES["math.<name>"]``.
Typing follows Triton's libdevice dispatch, with one deliberate leniency: where Triton
accepts only f32/f64, tlxc also accepts f16/bf16 (computed in f32, rounded back, as every
other float op) and integers (converted to f32 first, as ``tl.exp`` does).  ``fast_*``
are f32 intrinsics: an f64 operand is an error naming the precise function to use.
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.ops.arith import MATH_F32_ONLY, MATH_FUNCTIONS
from . import semantic as S
from .builtins import RULES, constexpr, numeric_arg
from .semantic import SemanticError
from .values import Tensor


def _float_operand(b, value, what: str) -> Tensor:
    """A float tensor: ints convert to f32 (as Triton's tl.exp), fp8 is refused."""
    x = numeric_arg(b, value, what)
    if not x.dtype.is_float:
        x = S.cast(b, x, T.f32)
    if x.dtype.is_float8:
        raise SemanticError(f"{x.dtype} is not supported; convert to float32 first", param=what)
    return x


_F64_INSTEAD = {"saturatef": "tl.clamp(x, 0.0, 1.0)", "rsqrt_rn": "1.0 / libdevice.sqrt_rn(x)",
                "fast_dividef": "div_rn"}


def _check_f32_only(name: str, x: Tensor) -> None:
    if name in MATH_F32_ONLY and x.dtype == T.f64:
        instead = _F64_INSTEAD.get(name, name.removeprefix("fast_").removesuffix("f"))
        raise SemanticError(f"{name} is a float32 function, got float64; use {instead} for float64")


def _create(b, ir_name: str, operands: list[Tensor], result_type) -> Tensor:
    return Tensor(b.value(ir_name, [x.value for x in operands], result_type))


def _unary(ir_name: str):
    def rule(ctx, x):
        x = _float_operand(ctx.b, x, "x")
        _check_f32_only(ir_name, x)
        return _create(ctx.b, f"math.{ir_name}", [x], x.type)
    return rule


def _common_float(b, x, y) -> tuple[Tensor, Tensor]:
    """Both operands converted (Triton's promotion; weak literals adopt the other's type) to
    one float type and broadcast to one shape."""
    for value, what in ((x, "x"), (y, "y")):
        numeric_arg(b, value, what)
    (xt, xw), (yt, yw) = S._scalar_of(x), S._scalar_of(y)
    target = S.computation_type(xt, xw, yt, yw, False)
    if not target.is_float:
        target = T.f32
    if target.is_float8:
        raise SemanticError(f"{target} is not supported; convert to float32 first")
    return S._unify(b, x, y, target)


def _binary(ir_name: str):
    def rule(ctx, x, y):
        x, y = _common_float(ctx.b, x, y)
        _check_f32_only(ir_name, x)
        return _create(ctx.b, ir_name if "." in ir_name else f"math.{ir_name}", [x, y], x.type)
    return rule


def _is_int_exponent(y) -> bool:
    if isinstance(y, Tensor):
        return y.dtype.is_integer and not y.dtype.is_boolean and y.dtype.bits <= 32
    return isinstance(y, int) and not isinstance(y, bool) and -2**31 <= y < 2**31


def _float_and_int(b, ir_name: str, x, n) -> Tensor:
    x = _float_operand(b, x, "x")
    n = S.cast(b, n, T.i32) if isinstance(n, Tensor) else S.constant(b, n, T.i32)
    shape = S.broadcast_shapes(x.shape, n.shape)
    x, n = S.broadcast_to(b, x, shape), S.broadcast_to(b, n, shape)
    return _create(b, ir_name, [x, n], x.type)


def _pow(ctx, x, y):
    """``pow(x, n)`` with an i32 (or Python int) exponent is powi, as Triton's dispatch
    picks ``__nv_powif``; otherwise both operands promote to one float type."""
    if _is_int_exponent(y):
        return _float_and_int(ctx.b, "math.powi", x, y)
    return _binary("pow")(ctx, x, y)


def _ldexp(ctx, x, n):
    if isinstance(n, Tensor) and not n.dtype.is_integer or isinstance(n, float):
        raise SemanticError(f"the exponent must be an integer, got {S.describe(n)}", param="arg1")
    return _float_and_int(ctx.b, "math.ldexp", x, n)


def _fdiv(ctx, x, y, ieee_rounding=False):
    """Triton's ``tl.math.fdiv``: ``x / y`` (approximate on f32), or with ``ieee_rounding``
    the correctly rounded ``div_rn``."""
    ieee = constexpr(ieee_rounding, "ieee_rounding")
    if not isinstance(ieee, (bool, int)):
        raise SemanticError(f"'ieee_rounding' must be True or False, got {ieee!r}", param="ieee_rounding")
    x, y = _common_float(ctx.b, x, y)
    if ieee:
        return _create(ctx.b, "math.div_rn", [x, y], x.type)
    return S.binary(ctx.b, "truediv", x, y)


def _predicate(ir_name: str, result: T.ScalarType):
    """isnan/isinf give i1 (Triton converts them to int1); signbit/finitef/isfinited give
    Triton's int32, here exactly 0 or 1."""
    def rule(ctx, x):
        x = numeric_arg(ctx.b, x, "x")
        if not x.dtype.is_float or x.dtype.is_float8:
            raise SemanticError(f"needs a floating-point operand, got {S.describe(x)}", param="x")
        flag = _create(ctx.b, f"math.{ir_name}", [x], T.with_element(x.type, T.i1))
        return flag if result == T.i1 else S.cast(ctx.b, flag, result)
    return rule


def _int_operand(b, value, what: str) -> Tensor:
    x = numeric_arg(b, value, what)
    if not x.dtype.is_integer or x.dtype.bits not in (32, 64):
        raise SemanticError(f"needs a 32- or 64-bit integer operand, got {S.describe(x)}", param=what)
    return x


def _bit_count(ir_name: str):
    def rule(ctx, x):
        x = _int_operand(ctx.b, x, "x")
        return _create(ctx.b, f"math.{ir_name}", [x], T.with_element(x.type, T.i32))
    return rule


def _brev(ctx, x):
    x = _int_operand(ctx.b, x, "x")
    return _create(ctx.b, "math.brev", [x], x.type)


def _mulhi(ctx, x, y):
    """libdevice.mulhi: the signed high half for signed operands, unsigned for unsigned."""
    b = ctx.b
    x, y = _int_operand(b, x, "x"), _int_operand(b, y, "y")
    target = S.computation_type(x.dtype, False, y.dtype, False, False)
    x, y = S._unify(b, x, y, target)
    return _create(b, "arith.umulhi" if target.is_unsigned else "math.mulhi", [x, y], x.type)


def _fmod(ctx, x, y):
    x, y = _common_float(ctx.b, x, y)
    return _create(ctx.b, "arith.rem", [x, y], x.type)


# float_as_int & co: reinterpret the bits (Triton gives int32 for float_as_uint too)
_BITCASTS = {"float_as_int": (T.f32, T.i32), "float_as_uint": (T.f32, T.i32),
             "int_as_float": (T.i32, T.f32), "uint_as_float": (T.u32, T.f32),
             "double_as_longlong": (T.f64, T.i64), "longlong_as_double": (T.i64, T.f64)}


def _bitcast(name: str):
    source, dest = _BITCASTS[name]

    def rule(ctx, x):
        x = numeric_arg(ctx.b, x, "x")
        if x.dtype.bits != source.bits or x.dtype.is_float != source.is_float:
            raise SemanticError(f"needs a {source} operand, got {S.describe(x)}", param="x")
        return S.cast(ctx.b, x, dest, bitcast=True)
    return rule


def _to_integer(rounding: str, result):
    """``llrint`` / ``lrint`` (to nearest, ties to even: ``rint``) and ``llround`` / ``lround`` (ties away
    from zero: ``round``), as an integer (``long`` and ``long long`` are 64-bit on CUDA and ROCm): the
    rounded float converted, exact wherever the value fits (out of range and NaN are undefined in C)."""
    def rule(ctx, x):
        x = _float_operand(ctx.b, x, "x")
        return S.cast(ctx.b, _create(ctx.b, f"math.{rounding}", [x], x.type), result)
    return rule


def _register() -> None:
    for name in MATH_FUNCTIONS:
        RULES[f"math.{name}"] = _unary(name)
    for name in ("atan2", "hypot", "rhypot", "copysign", "remainder", "fdim", "nextafter", "div_rn",
                 "add_rn", "sub_rn", "mul_rn", "fast_dividef", "fast_powf"):
        RULES[f"math.{name}"] = _binary(name)
    RULES["math.pow"] = _pow
    RULES["math.ldexp"] = RULES["math.scalbn"] = _ldexp     # radix 2: the same function
    RULES["math.fdiv"] = _fdiv
    RULES["math.fmod"] = _fmod
    for name, result in (("isnan", T.i1), ("isinf", T.i1), ("signbit", T.i32)):
        RULES[f"math.{name}"] = _predicate(name, result)
    RULES["math.finitef"] = RULES["math.isfinited"] = _predicate("isfinite", T.i32)
    for name in ("clz", "popc", "ffs"):
        RULES[f"math.{name}"] = _bit_count(name)
    RULES["math.brev"] = _brev
    for name, rounding in (("llrint", "rint"), ("lrint", "rint"), ("llround", "round"), ("lround", "round")):
        RULES[f"math.{name}"] = _to_integer(rounding, T.i64)
    RULES["math.mulhi"] = _mulhi
    for name in _BITCASTS:
        RULES[f"math.{name}"] = _bitcast(name)
    # the same semantics as the tl.* builtins
    RULES["math.abs"] = RULES["abs"]
    RULES["math.umulhi"] = RULES["umulhi"]
    RULES["math.fma"] = RULES["math.fma_rn"] = RULES["fma"]  # fmaf is already single-rounded


_register()
