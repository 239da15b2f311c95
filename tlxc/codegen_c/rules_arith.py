"""Lowering of ``arith.*`` and ``math.*``: elementwise, in the compute type."""
from __future__ import annotations

from ..ir.types import PointerType, TensorType
from . import ctypes_ as C
from .lower import elem, lowering

_INFIX = {"arith.add": "+", "arith.sub": "-", "arith.mul": "*", "arith.and": "&", "arith.or": "|",
          "arith.xor": "^", "arith.shl": "<<", "arith.shr": ">>"}
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_MATH_F32 = {"exp": "expf", "exp2": "exp2f", "log": "logf", "log2": "log2f", "sqrt": "sqrtf",
             "rsqrt": "rsqrtf", "sin": "sinf", "cos": "cosf", "floor": "floorf", "ceil": "ceilf",
             "erf": "erff", "tanh": "tanhf"}


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
    if t.is_bool and symbol in ("&", "|", "^"):
        lw.assign_elementwise(op.results[0], lambda i: f"({lw.ref(a, i)} {symbol} {lw.ref(b, i)})")
        return
    if symbol == "<<" and t.name in _UNSIGNED:
        # Triton's shl wraps; C++ leaves a signed left shift of a negative value (or one that
        # overflows) undefined, so shift the unsigned bits and convert back
        ctype = C.storage_type(t)
        _result(lw, op, lambda i: f"(({ctype})(({_UNSIGNED[t.name]})({lw.cref(a, i)}) << {lw.cref(b, i)}))")
        return
    _result(lw, op, lambda i: f"({lw.cref(a, i)} {symbol} {lw.cref(b, i)})")


@lowering("arith.div")
def div(lw, op):
    a, b = op.operands
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


@lowering("arith.umulhi")
def umulhi(lw, op):
    a, b = op.operands
    t = elem(a.type)
    fn = {"u32": "__umulhi", "i32": "__mulhi", "u64": "__umul64hi", "i64": "__mul64hi"}.get(t.name)
    if fn is None:
        raise lw.error_unsupported(op, f"umulhi on {t}")
    _result(lw, op, lambda i: f"{fn}({lw.cref(a, i)}, {lw.cref(b, i)})")


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
    if elem(a.type).is_bool:
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


def _math(name: str):
    def rule(lw, op):
        (a,) = op.operands
        t = elem(a.type)
        if name == "exp2" and t.name != "f64":      # the target's approximate 2^x
            _result(lw, op, lambda i: lw.target.exp2_f32(lw.cref(a, i)))
            return
        fn = _MATH_F32[name]
        if t.name == "f64":
            fn = fn[:-1] if name not in ("rsqrt",) else "rsqrt"
        _result(lw, op, lambda i: f"{fn}({lw.cref(a, i)})")
    return rule


for _name in _MATH_F32:
    lowering(f"math.{_name}")(_math(_name))


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
