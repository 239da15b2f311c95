"""Elementwise arithmetic on scalars and tensors (ints and floats alike).

Operands of a binary op have one type (the frontend inserts casts, splats and
broadcasts first); ``arith.cmp`` yields ``i1`` of the same shape.
"""
from __future__ import annotations

from ..core import OP_REGISTRY, Operation
from ..traits import ELEMENTWISE, PURE
from ..types import ScalarType, i1, i32, with_element
from ._rules import expect_operands, expect_results, expect_scalar_kind, expect_type, same_shape


class ConstantOp(Operation):
    """A scalar constant or a tensor filled with one value (``attrs.value``)."""

    name = "arith.constant"

    def verify(self):
        expect_operands(self, 0)
        expect_results(self, 1)
        value = self.attrs.get("value")
        if not isinstance(value, (int, float, bool)):
            raise self.error(f"expected an int/float/bool 'value' attribute, got {value!r}")


def _is_number(t: ScalarType) -> bool:
    return True


def _is_int(t: ScalarType) -> bool:
    return t.is_integer


def _is_float(t: ScalarType) -> bool:
    return t.is_float


class BinaryOp(Operation):
    """``result = lhs <op> rhs`` with lhs, rhs and result of one type."""
    traits = frozenset({ELEMENTWISE})

    element_rule = staticmethod(_is_number)
    element_description = "numeric"

    def verify(self):
        expect_operands(self, 2)
        expect_results(self, 1)
        lhs, rhs = self.operands
        expect_type(self, rhs.type, lhs.type, "rhs")
        expect_type(self, self.result.type, lhs.type, "result")
        expect_scalar_kind(self, lhs.type, self.element_rule, self.element_description, "operands")


class IntBinaryOp(BinaryOp):
    element_rule = staticmethod(_is_int)
    element_description = "integer"


class AddOp(BinaryOp):
    name = "arith.add"


class SubOp(BinaryOp):
    name = "arith.sub"


class MulOp(BinaryOp):
    name = "arith.mul"


class DivOp(BinaryOp):
    """Float: IEEE division.  Integer: C division (truncates toward zero)."""

    name = "arith.div"


class RemOp(BinaryOp):
    """Float: fmod.  Integer: C remainder (sign of the dividend)."""

    name = "arith.rem"


class MinOp(BinaryOp):
    """Float minimum ignores a NaN operand (IEEE minNum, ``fminf``), as
    ``tl.minimum``'s default does on the GPU; ints compare by signedness."""

    name = "arith.min"


class MaxOp(BinaryOp):
    name = "arith.max"


class AndOp(IntBinaryOp):
    name = "arith.and"


class OrOp(IntBinaryOp):
    name = "arith.or"


class XorOp(IntBinaryOp):
    name = "arith.xor"


class ShlOp(IntBinaryOp):
    name = "arith.shl"


class ShrOp(IntBinaryOp):
    """Arithmetic shift for signed types, logical for unsigned."""

    name = "arith.shr"


class UMulHiOp(IntBinaryOp):
    name = "arith.umulhi"


class CmpOp(Operation):
    """``attrs.predicate`` in eq/ne/lt/le/gt/ge; signedness from the type."""

    name = "arith.cmp"
    traits = frozenset({ELEMENTWISE})
    PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")

    def verify(self):
        expect_operands(self, 2)
        expect_results(self, 1)
        lhs, rhs = self.operands
        expect_type(self, rhs.type, lhs.type, "rhs")
        if self.attrs.get("predicate") not in self.PREDICATES:
            raise self.error(f"expected predicate in {self.PREDICATES}, got {self.attrs.get('predicate')!r}")
        expect_type(self, self.result.type, with_element(lhs.type, i1), "result")


class SelectOp(Operation):
    """``cond ? a : b`` elementwise; cond is i1 of the same shape."""

    name = "arith.select"
    traits = frozenset({ELEMENTWISE})

    def verify(self):
        expect_operands(self, 3)
        cond, a, b = self.operands
        expect_type(self, cond.type, with_element(a.type, i1), "condition")
        expect_type(self, b.type, a.type, "false value")
        expect_type(self, self.result.type, a.type, "result")


class UnaryOp(Operation):
    traits = frozenset({ELEMENTWISE})
    element_rule = staticmethod(_is_number)
    element_description = "numeric"

    def verify(self):
        expect_operands(self, 1)
        expect_results(self, 1)
        expect_type(self, self.result.type, self.operands[0].type, "result")
        expect_scalar_kind(self, self.operands[0].type, self.element_rule,
                           self.element_description, "operand")


class FloatUnaryOp(UnaryOp):
    element_rule = staticmethod(_is_float)
    element_description = "floating-point"


class NegOp(UnaryOp):
    name = "arith.neg"


class NotOp(UnaryOp):
    """Bitwise complement (logical not on i1)."""

    name = "arith.not"
    element_rule = staticmethod(_is_int)
    element_description = "integer"


class AbsOp(UnaryOp):
    name = "arith.abs"


class FmaOp(Operation):
    """``a * b + c`` with one rounding."""

    name = "math.fma"
    traits = frozenset({ELEMENTWISE})

    def verify(self):
        expect_operands(self, 3)
        for i, operand in enumerate(self.operands):
            expect_type(self, operand.type, self.result.type, f"operand #{i}")
        expect_scalar_kind(self, self.result.type, _is_float, "floating-point", "operands")


# -- math.*: the CUDA math library, one op per function ----------------------------------
# Names follow the user's spelling (``tl.math.*`` / libdevice).  f16/bf16 operands compute
# in f32 and round back, as every other float op; ``fast_*`` are f32-only intrinsics.

MATH_FUNCTIONS = (
    "exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p",
    "sqrt", "sqrt_rn", "rsqrt", "rsqrt_rn", "rcp_rn", "cbrt", "rcbrt",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
    "sinpi", "cospi", "erf", "erfc", "erfinv", "erfcinv", "erfcx", "normcdf", "normcdfinv",
    "lgamma", "tgamma", "j0", "j1", "y0", "y1", "cyl_bessel_i0", "cyl_bessel_i1",
    "floor", "ceil", "trunc", "round", "rint", "nearbyint", "logb", "saturatef",
    "fast_expf", "fast_exp10f", "fast_logf", "fast_log2f", "fast_log10f",
    "fast_sinf", "fast_cosf", "fast_tanf")
"""Elementwise float -> float of the same type."""

MATH_BINARY_FUNCTIONS = (
    "pow", "atan2", "hypot", "rhypot", "copysign", "remainder", "fdim", "nextafter",
    "div_rn", "add_rn", "sub_rn", "mul_rn", "fast_dividef", "fast_powf")
"""Elementwise (float, float) -> float, all of one type."""

MATH_FLOAT_INT_FUNCTIONS = ("powi", "ldexp")
"""Elementwise (float, i32) -> float: ``x ** n`` and ``x * 2 ** n``."""

MATH_PREDICATES = ("isnan", "isinf", "isfinite", "signbit")
"""Elementwise float -> i1."""

MATH_BIT_COUNTS = ("clz", "popc", "ffs")
"""Elementwise 32/64-bit integer -> i32."""

MATH_F32_ONLY = frozenset([fn for fn in MATH_FUNCTIONS + MATH_BINARY_FUNCTIONS if fn.startswith("fast_")]
                          + ["saturatef", "rsqrt_rn"])
"""CUDA has these for f32 only (as Triton's libdevice)."""


def _is_f32_or_narrower(t: ScalarType) -> bool:
    return t.is_float and t.bits <= 32


def _is_wide_int(t: ScalarType) -> bool:
    return t.is_integer and t.bits in (32, 64)


def _float_rule(function: str):
    if function in MATH_F32_ONLY:
        return staticmethod(_is_f32_or_narrower), "float32 (or narrower floating-point)"
    return staticmethod(_is_float), "floating-point"


def _make_math_op(function: str) -> type[FloatUnaryOp]:
    rule, description = _float_rule(function)
    cls = type(f"{function.capitalize()}Op", (FloatUnaryOp,),
               {"name": f"math.{function}", "element_rule": rule, "element_description": description})
    cls.__doc__ = f"Elementwise ``{function}`` on floats."
    return cls


def _make_math_binary_op(function: str) -> type[BinaryOp]:
    rule, description = _float_rule(function)
    cls = type(f"{function.capitalize()}Op", (BinaryOp,),
               {"name": f"math.{function}", "element_rule": rule, "element_description": description})
    cls.__doc__ = f"Elementwise ``{function}(lhs, rhs)`` on floats of one type."
    return cls


class FloatIntOp(Operation):
    """``f(x, n)`` with a float ``x``, an i32 ``n`` of the same shape and a result of x's type."""
    traits = frozenset({ELEMENTWISE})

    def verify(self):
        expect_operands(self, 2)
        expect_results(self, 1)
        x, n = self.operands
        expect_scalar_kind(self, x.type, _is_float, "floating-point", "operand #0")
        expect_type(self, n.type, with_element(x.type, i32), "operand #1")
        expect_type(self, self.result.type, x.type, "result")


class PredicateOp(Operation):
    """A test of each float element, giving i1 of the same shape."""
    traits = frozenset({ELEMENTWISE})

    def verify(self):
        expect_operands(self, 1)
        expect_results(self, 1)
        (x,) = self.operands
        expect_scalar_kind(self, x.type, _is_float, "floating-point", "operand")
        expect_type(self, self.result.type, with_element(x.type, i1), "result")


class BitCountOp(Operation):
    """A count over the bits of each 32/64-bit integer, giving i32 of the same shape."""
    traits = frozenset({ELEMENTWISE})

    def verify(self):
        expect_operands(self, 1)
        expect_results(self, 1)
        (x,) = self.operands
        expect_scalar_kind(self, x.type, _is_wide_int, "32/64-bit integer", "operand")
        expect_type(self, self.result.type, with_element(x.type, i32), "result")


class BrevOp(UnaryOp):
    """Reverse the bits of each 32/64-bit integer."""

    name = "math.brev"
    element_rule = staticmethod(_is_wide_int)
    element_description = "32/64-bit integer"


class MulHiOp(IntBinaryOp):
    """High half of the *signed* product (``arith.umulhi`` is the unsigned one)."""

    name = "math.mulhi"
    element_rule = staticmethod(_is_wide_int)
    element_description = "32/64-bit integer"


def _make_op(function: str, base: type[Operation], what: str) -> type[Operation]:
    cls = type(f"{function.capitalize()}Op", (base,), {"name": f"math.{function}"})
    cls.__doc__ = f"Elementwise ``{function}``: {what}."
    return cls


MATH_OPS = {fn: _make_math_op(fn) for fn in MATH_FUNCTIONS}
MATH_OPS.update({fn: _make_math_binary_op(fn) for fn in MATH_BINARY_FUNCTIONS})
MATH_OPS.update({fn: _make_op(fn, FloatIntOp, "float and i32") for fn in MATH_FLOAT_INT_FUNCTIONS})
MATH_OPS.update({fn: _make_op(fn, PredicateOp, "float -> i1") for fn in MATH_PREDICATES})
MATH_OPS.update({fn: _make_op(fn, BitCountOp, "integer -> i32") for fn in MATH_BIT_COUNTS})
MATH_OPS.update({"brev": BrevOp, "mulhi": MulHiOp})


class CastOp(Operation):
    """Value conversion between numeric types of one shape.

    Float→int truncates toward zero; float narrowing rounds to nearest even;
    conversions to fp8 saturate to the finite range (as the hardware's
    ``.satfinite``); int narrowing wraps; bool→x yields 0/1; x→bool is ``x != 0``.
    """

    name = "arith.cast"
    traits = frozenset({ELEMENTWISE})

    def verify(self):
        expect_operands(self, 1)
        expect_results(self, 1)
        same_shape(self, self.operands[0].type, self.result.type, "source and result")
        expect_scalar_kind(self, self.operands[0].type, _is_number, "numeric", "source")
        expect_scalar_kind(self, self.result.type, _is_number, "numeric", "result")


class BitcastOp(Operation):
    """Reinterpret the bits of each element as another type of equal width."""

    name = "arith.bitcast"
    traits = frozenset({ELEMENTWISE})

    def verify(self):
        expect_operands(self, 1)
        src, dst = self.operands[0].type, self.result.type
        same_shape(self, src, dst, "source and result")
        from ..types import element_type
        s, d = element_type(src), element_type(dst)
        sbits = s.bits if isinstance(s, ScalarType) else 64
        dbits = d.bits if isinstance(d, ScalarType) else 64
        if sbits != dbits:
            raise self.error(f"expected equal bit widths, got {s} ({sbits} bits) and {d} ({dbits} bits)")


BINARY_OPS = {cls.name.split(".")[1]: cls for cls in (
    AddOp, SubOp, MulOp, DivOp, RemOp, MinOp, MaxOp, AndOp, OrOp, XorOp, ShlOp, ShrOp, UMulHiOp)}


# every arith.* and math.* op (all defined here) is pure (ir/traits.py: PURE)
for _name, _cls in OP_REGISTRY.items():
    if _name.startswith(("arith.", "math.")):
        _cls.traits = _cls.traits | {PURE}
