"""Lowering of ``arith.*`` and ``math.*``: elementwise, in the compute type."""
from __future__ import annotations

import re

from ..ir.types import PointerType, TensorType
from . import c_types as C
from .lower import elem, lowering

_INFIX = {"arith.add": "+", "arith.sub": "-", "arith.mul": "*", "arith.and": "&", "arith.or": "|",
          "arith.xor": "^", "arith.shl": "<<", "arith.shr": ">>"}
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _result(lw, op, compute_expr):
    """Declare the result and assign ``from_compute(compute_expr(i))``."""
    t = elem(op.results[0].type)
    lw.assign_elementwise(op.results[0], lambda i: lw.target.from_compute(compute_expr(i), t))


@lowering("arith.constant")
def constant(lw, op):
    r = op.results[0]
    literal = C.constant_literal(op.attrs["value"], elem(r.type))
    if isinstance(r.type, TensorType):
        lw.assign_elementwise(r, lambda i: literal)
    else:
        lw.declare(r, init=literal)


_UNSIGNED = {"i8": "unsigned char", "i16": "unsigned short", "i32": "unsigned", "i64": "unsigned long long"}


@lowering(*_INFIX)
def infix(lw, op):
    a, b = op.operands
    symbol = _INFIX[op.name]
    t = elem(a.type)
    if t.is_boolean and symbol in ("&", "|", "^"):
        lw.assign_elementwise(op.results[0], lambda i: f"({lw.ref(a, i)} {symbol} {lw.ref(b, i)})")
        return
    if symbol in ("<<", ">>") and t.is_integer:
        _result(lw, op, lambda i: _shift(symbol, t, lw.cref(a, i), lw.cref(b, i)))
        return
    _result(lw, op, lambda i: f"({lw.cref(a, i)} {symbol} {lw.cref(b, i)})")


_INT_LITERAL = re.compile(r"\(?(-?\d+)[uUlL]*\)?")


def _shift(symbol: str, t, x: str, amount: str) -> str:
    """``x << amount`` / ``x >> amount`` as PTX ``shl`` / ``shr`` (and the interpreter) define them: the
    amount read as unsigned, one of at least the width shifts every bit out (``>>`` of a signed value
    leaves its sign).  C leaves such amounts undefined (x86 takes them modulo the width), so a
    runtime amount is guarded; a literal one below the width is shifted as it is.  ``<<`` shifts the
    unsigned bits (Triton's shl wraps; C's left shift of a negative value is undefined)."""
    ctype, utype, bits = C.storage_type(t), _UNSIGNED.get(t.name, C.storage_type(t)), t.bits
    if symbol == "<<":
        shifted = f"(({ctype})(({utype})({x}) << {amount}))"
    else:
        shifted = f"({x} >> {amount})"
    m = _INT_LITERAL.fullmatch(amount.strip())
    if m and 0 <= int(m.group(1)) < bits:
        return shifted
    wide = f"(({utype})({amount}) >= {bits}u)"
    if symbol == ">>" and t.is_signed:
        return f"({x} >> ({wide} ? {bits - 1} : {amount}))"
    return f"({wide} ? ({ctype})0 : {shifted})"


@lowering("arith.div")
def div(lw, op):
    """Integer division truncates (C's ``/``); f64 is IEEE; f32 (and f16/bf16, computed in
    f32) is the target's approximate full-range division, as Triton's ``/`` (``tl.math.div_rn``
    and ``tl.math.fdiv(..., ieee_rounding=True)`` are the correctly rounded ones)."""
    a, b = op.operands
    t = elem(a.type)
    if t.is_float and t.name != "f64":
        _result(lw, op, lambda i: lw.target.div_f32(lw.cref(a, i), lw.cref(b, i)))
        return
    _result(lw, op, lambda i: f"({lw.cref(a, i)} / {lw.cref(b, i)})")


@lowering("arith.rem")
def rem(lw, op):
    a, b = op.operands
    t = elem(a.type)
    if t.is_float:
        fn = "fmod" if t.name == "f64" else "fmodf"
        _result(lw, op, lambda i: f"{fn}({lw.cref(a, i)}, {lw.cref(b, i)})")
    else:
        _result(lw, op, lambda i: f"({lw.cref(a, i)} % {lw.cref(b, i)})")


@lowering("arith.min", "arith.max")
def minmax(lw, op):
    a, b = op.operands
    t = elem(a.type)
    if t.is_float:
        fn = ("fmin" if op.name == "arith.min" else "fmax") + ("" if t.name == "f64" else "f")
        _result(lw, op, lambda i: f"{fn}({lw.cref(a, i)}, {lw.cref(b, i)})")
    else:
        cmp = "<" if op.name == "arith.min" else ">"
        _result(lw, op, lambda i: f"({lw.cref(a, i)} {cmp} {lw.cref(b, i)} ? {lw.cref(a, i)} : {lw.cref(b, i)})")


_MULHI = {"arith.umulhi": {32: ("__umulhi", "unsigned"), 64: ("__umul64hi", "unsigned long long")},
          "math.mulhi": {32: ("__mulhi", "int"), 64: ("__mul64hi", "long long")}}


@lowering("arith.umulhi", "math.mulhi")
def mulhi(lw, op):
    """High half of the product: unsigned for arith.umulhi (also on i32/i64 operands, whose
    bits it reads as unsigned, as Triton's tl.umulhi), signed for math.mulhi."""
    a, b = op.operands
    t = elem(a.type)
    if t.bits not in (32, 64):
        raise lw.error_unsupported(op, f"{op.name} on {t}")
    fn, operand = _MULHI[op.name][t.bits]
    ctype = C.storage_type(t)
    _result(lw, op, lambda i: f"(({ctype}){fn}(({operand})({lw.cref(a, i)}), ({operand})({lw.cref(b, i)})))")


@lowering("arith.cmp")
def cmp(lw, op):
    a, b = op.operands
    symbol = _CMP[op.attrs["predicate"]]
    ref = lw.ref if isinstance(elem(a.type), PointerType) else lw.cref
    lw.assign_elementwise(op.results[0], lambda i: f"({ref(a, i)} {symbol} {ref(b, i)})")


@lowering("arith.select")
def select(lw, op):
    c, a, b = op.operands
    lw.assign_elementwise(op.results[0], lambda i: f"({lw.ref(c, i)} ? {lw.ref(a, i)} : {lw.ref(b, i)})")


@lowering("arith.neg")
def neg(lw, op):
    (a,) = op.operands
    _result(lw, op, lambda i: f"(-{lw.cref(a, i)})")


@lowering("arith.not")
def bitnot(lw, op):
    (a,) = op.operands
    if elem(a.type).is_boolean:
        lw.assign_elementwise(op.results[0], lambda i: f"(!{lw.ref(a, i)})")
    else:
        lw.assign_elementwise(op.results[0], lambda i: f"({C.storage_type(elem(a.type))})(~{lw.ref(a, i)})")


@lowering("arith.abs")
def absolute(lw, op):
    (a,) = op.operands
    t = elem(a.type)
    if t.is_float:
        fn = "fabs" if t.name == "f64" else "fabsf"
        _result(lw, op, lambda i: f"{fn}({lw.cref(a, i)})")
    else:
        _result(lw, op, lambda i: f"({lw.cref(a, i)} < 0 ? -{lw.cref(a, i)} : {lw.cref(a, i)})")


# The CUDA math function of each math.* op: (f32, f64).  f16/bf16 compute with the f32 one
# (cref widens, from_compute rounds back).  The *_rn intrinsics stay correctly rounded even
# under --use_fast_math, and are never contracted into an fma.
_CUDA_MATH = {
    "exp": ("expf", "exp"), "exp10": ("exp10f", "exp10"), "expm1": ("expm1f", "expm1"),
    "log": ("logf", "log"), "log2": ("log2f", "log2"), "log10": ("log10f", "log10"),
    "log1p": ("log1pf", "log1p"), "sqrt": ("sqrtf", "sqrt"), "sqrt_rn": ("__fsqrt_rn", "__dsqrt_rn"),
    "rsqrt": ("rsqrtf", "rsqrt"), "rsqrt_rn": ("__frsqrt_rn", None), "rcp_rn": ("__frcp_rn", "__drcp_rn"),
    "cbrt": ("cbrtf", "cbrt"), "rcbrt": ("rcbrtf", "rcbrt"),
    "sin": ("sinf", "sin"), "cos": ("cosf", "cos"), "tan": ("tanf", "tan"),
    "asin": ("asinf", "asin"), "acos": ("acosf", "acos"), "atan": ("atanf", "atan"),
    "sinh": ("sinhf", "sinh"), "cosh": ("coshf", "cosh"), "tanh": ("tanhf", "tanh"),
    "asinh": ("asinhf", "asinh"), "acosh": ("acoshf", "acosh"), "atanh": ("atanhf", "atanh"),
    "sinpi": ("sinpif", "sinpi"), "cospi": ("cospif", "cospi"),
    "erf": ("erff", "erf"), "erfc": ("erfcf", "erfc"), "erfinv": ("erfinvf", "erfinv"),
    "erfcinv": ("erfcinvf", "erfcinv"), "erfcx": ("erfcxf", "erfcx"),
    "normcdf": ("normcdff", "normcdf"), "normcdfinv": ("normcdfinvf", "normcdfinv"),
    "lgamma": ("lgammaf", "lgamma"), "tgamma": ("tgammaf", "tgamma"),
    "j0": ("j0f", "j0"), "j1": ("j1f", "j1"), "y0": ("y0f", "y0"), "y1": ("y1f", "y1"),
    "cyl_bessel_i0": ("cyl_bessel_i0f", "cyl_bessel_i0"), "cyl_bessel_i1": ("cyl_bessel_i1f", "cyl_bessel_i1"),
    "floor": ("floorf", "floor"), "ceil": ("ceilf", "ceil"), "trunc": ("truncf", "trunc"),
    "round": ("roundf", "round"), "rint": ("rintf", "rint"), "nearbyint": ("nearbyintf", "nearbyint"),
    "logb": ("logbf", "logb"), "saturatef": ("__saturatef", None),
    "fast_expf": ("__expf", None), "fast_exp10f": ("__exp10f", None), "fast_logf": ("__logf", None),
    "fast_log2f": ("__log2f", None), "fast_log10f": ("__log10f", None), "fast_sinf": ("__sinf", None),
    "fast_cosf": ("__cosf", None), "fast_tanf": ("__tanf", None),
    # binary
    "pow": ("powf", "pow"), "atan2": ("atan2f", "atan2"), "hypot": ("hypotf", "hypot"),
    "rhypot": ("rhypotf", "rhypot"), "copysign": ("copysignf", "copysign"),
    "remainder": ("remainderf", "remainder"), "fdim": ("fdimf", "fdim"),
    "nextafter": ("nextafterf", "nextafter"), "div_rn": ("__fdiv_rn", "__ddiv_rn"),
    "add_rn": ("__fadd_rn", "__dadd_rn"), "sub_rn": ("__fsub_rn", "__dsub_rn"),
    "mul_rn": ("__fmul_rn", "__dmul_rn"), "fast_dividef": ("__fdividef", None), "fast_powf": ("__powf", None),
    "ldexp": ("ldexpf", "ldexp"),
}


def _cuda_function(lw, op, name: str) -> str:
    t = elem(op.operands[0].type)
    f32, f64 = _CUDA_MATH[name]
    fn = f64 if t.name == "f64" else f32
    if fn is None:
        raise lw.error_unsupported(op, f"{op.name} on {t}")
    return fn


def _math_call(name: str):
    def rule(lw, op):
        fn = _cuda_function(lw, op, name)
        args = op.operands
        _result(lw, op, lambda i: f"{fn}({', '.join(lw.cref(a, i) for a in args)})")
    return rule


for _name in _CUDA_MATH:
    if _name != "sqrt":      # math.sqrt has its own rule below (the target's approximation on f32)
        lowering(f"math.{_name}")(_math_call(_name))


@lowering("math.sqrt")
def sqrt(lw, op):
    """``tl.sqrt``: f64 correctly rounded, f32 the target's approximation as Triton's
    (``tl.sqrt_rn`` is the correctly rounded one)."""
    (a,) = op.operands
    if elem(a.type).name == "f64":
        _result(lw, op, lambda i: f"sqrt({lw.cref(a, i)})")
    else:
        _result(lw, op, lambda i: lw.target.sqrt_f32(lw.cref(a, i)))


@lowering("math.exp2")
def exp2(lw, op):
    (a,) = op.operands
    every = op.attrs.get("fma_every")           # tlx.fast_exp2: every k-th register on the FMA pipe
    if elem(a.type).name == "f64":
        _result(lw, op, lambda i: f"exp2({lw.cref(a, i)})")
    elif every and isinstance(op.results[0].type, TensorType) and hasattr(lw.target, "exp2_f32_fma"):
        _result(lw, op, lambda i: f"(({i}) % {every} == {every - 1} ? {lw.target.exp2_f32_fma(lw.cref(a, i))} : "
                                  f"{lw.target.exp2_f32(lw.cref(a, i))})")
    else:                                            # the target's approximate 2^x, as Triton
        _result(lw, op, lambda i: lw.target.exp2_f32(lw.cref(a, i)))


@lowering("math.powi")
def powi(lw, op):
    """``x ** n`` as ``pow(x, (float)n)``: pow treats integral exponents exactly (signs of
    negative bases, pow(x, 0) = 1), and every i32 up to 2**24 converts exactly."""
    x, n = op.operands
    if elem(x.type).name == "f64":
        _result(lw, op, lambda i: f"pow({lw.cref(x, i)}, (double)({lw.ref(n, i)}))")
    else:
        _result(lw, op, lambda i: f"powf({lw.cref(x, i)}, (float)({lw.ref(n, i)}))")


# Predicates by bit pattern, so they mean the same under --use_fast_math
_INF_BITS = {"f32": "0x7f800000u", "f64": "0x7ff0000000000000ull"}


def _float_bits(lw, x, i) -> tuple[str, str]:
    """(unsigned bits of |x|, bits of +inf) of element ``i`` in its compute type."""
    if elem(x.type).name == "f64":
        return f"((unsigned long long)__double_as_longlong({lw.cref(x, i)}) & 0x7fffffffffffffffull)", _INF_BITS["f64"]
    return f"(__float_as_uint({lw.cref(x, i)}) & 0x7fffffffu)", _INF_BITS["f32"]


@lowering("math.isnan", "math.isinf", "math.isfinite")
def float_class(lw, op):
    (x,) = op.operands
    symbol = {"math.isnan": ">", "math.isinf": "==", "math.isfinite": "<"}[op.name]

    def expr(i):
        magnitude, inf = _float_bits(lw, x, i)
        return f"({magnitude} {symbol} {inf})"
    lw.assign_elementwise(op.results[0], expr)


@lowering("math.signbit")
def signbit(lw, op):
    (x,) = op.operands
    if elem(x.type).name == "f64":
        lw.assign_elementwise(op.results[0], lambda i: f"(__double_as_longlong({lw.cref(x, i)}) < 0)")
    else:
        lw.assign_elementwise(op.results[0], lambda i: f"((int)__float_as_uint({lw.cref(x, i)}) < 0)")


_BIT_INTRINSICS = {"math.clz": ("__clz", "__clzll"), "math.popc": ("__popc", "__popcll"),
                   "math.ffs": ("__ffs", "__ffsll"), "math.brev": ("__brev", "__brevll")}
_BIT_OPERAND = {("math.clz", 32): "int", ("math.clz", 64): "long long", ("math.ffs", 32): "int",
                ("math.ffs", 64): "long long", ("math.popc", 32): "unsigned",
                ("math.popc", 64): "unsigned long long", ("math.brev", 32): "unsigned",
                ("math.brev", 64): "unsigned long long"}


@lowering(*_BIT_INTRINSICS)
def bit_intrinsic(lw, op):
    (x,) = op.operands
    bits = elem(x.type).bits
    fn = _BIT_INTRINSICS[op.name][bits == 64]
    operand = _BIT_OPERAND[(op.name, bits)]
    _result(lw, op, lambda i: f"{fn}(({operand})({lw.ref(x, i)}))")


@lowering("math.fma")
def fma(lw, op):
    a, b, c = op.operands
    fn = "fma" if elem(a.type).name == "f64" else "fmaf"
    _result(lw, op, lambda i: f"{fn}({lw.cref(a, i)}, {lw.cref(b, i)}, {lw.cref(c, i)})")


@lowering("arith.cast")
def cast(lw, op):
    (a,) = op.operands
    src, dst = elem(a.type), elem(op.results[0].type)
    lw.assign_elementwise(op.results[0], lambda i: lw.target.convert(lw.ref(a, i), src, dst))


@lowering("arith.bitcast")
def bitcast(lw, op):
    (a,) = op.operands
    src, dst = elem(a.type), elem(op.results[0].type)
    to = C.storage_type(dst)
    if isinstance(src, PointerType) or isinstance(dst, PointerType):
        lw.assign_elementwise(op.results[0], lambda i: f"(({to}){lw.ref(a, i)})")
    else:
        lw.target.use("tlx_bitcast")
        lw.assign_elementwise(op.results[0], lambda i: f"tlx_bitcast<{to}>({lw.ref(a, i)})")
