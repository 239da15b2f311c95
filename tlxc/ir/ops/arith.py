"""Elementwise arithmetic on scalars and tensors (ints and floats alike).

Operands of a binary op have one type (the frontend inserts casts, splats and
broadcasts first); ``arith.cmp`` yields ``i1`` of the same shape.
"""
from __future__ import annotations

from ..core import Operation
from ..types import ScalarType, i1, with_element
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
    return t.is_int


def _is_float(t: ScalarType) -> bool:
    return t.is_float


class BinaryOp(Operation):
    """``result = lhs <op> rhs`` with lhs, rhs and result of one type."""

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

    def verify(self):
        expect_operands(self, 3)
        cond, a, b = self.operands
        expect_type(self, cond.type, with_element(a.type, i1), "condition")
        expect_type(self, b.type, a.type, "false value")
        expect_type(self, self.result.type, a.type, "result")


class UnaryOp(Operation):
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

    def verify(self):
        expect_operands(self, 3)
        for i, operand in enumerate(self.operands):
            expect_type(self, operand.type, self.result.type, f"operand #{i}")
        expect_scalar_kind(self, self.result.type, _is_float, "floating-point", "operands")


MATH_FUNCTIONS = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos",
                  "floor", "ceil", "erf", "tanh")


def _make_math_op(function: str) -> type[FloatUnaryOp]:
    cls = type(f"{function.capitalize()}Op", (FloatUnaryOp,), {"name": f"math.{function}"})
    cls.__doc__ = f"Elementwise ``{function}`` on floats."
    return cls


MATH_OPS = {fn: _make_math_op(fn) for fn in MATH_FUNCTIONS}


class CastOp(Operation):
    """Value conversion between numeric types of one shape.

    Float→int truncates toward zero; float narrowing rounds to nearest even;
    conversions to fp8 saturate to the finite range (as the hardware's
    ``.satfinite``); int narrowing wraps; bool→x yields 0/1; x→bool is ``x != 0``.
    """

    name = "arith.cast"

    def verify(self):
        expect_operands(self, 1)
        expect_results(self, 1)
        same_shape(self, self.operands[0].type, self.result.type, "source and result")
        expect_scalar_kind(self, self.operands[0].type, _is_number, "numeric", "source")
        expect_scalar_kind(self, self.result.type, _is_number, "numeric", "result")


class BitcastOp(Operation):
    """Reinterpret the bits of each element as another type of equal width."""

    name = "arith.bitcast"

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
