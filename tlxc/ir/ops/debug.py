"""Debugging ops: device-side print and assert."""
from __future__ import annotations

from ..core import Operation
from ..traits import SIDE_EFFECT
from ..types import element_type, i1


class PrintOp(Operation):
    """``tl.device_print(prefix, *values)``: every element of every operand."""

    name = "tl.print"
    traits = frozenset({SIDE_EFFECT})

    def verify(self):
        if not isinstance(self.attrs.get("prefix", ""), str):
            raise self.error("expected a string prefix")


class AssertOp(Operation):
    """``tl.device_assert(cond, msg)``: fails the launch where cond is false."""

    name = "tl.assert"
    traits = frozenset({SIDE_EFFECT})

    def verify(self):
        if len(self.operands) != 1 or element_type(self.operands[0].type) != i1:
            raise self.error("expected one i1 (tensor) condition")


class DumpLayoutOp(Operation):
    """``tlx.dump_layout(x)``: the CUDA backend prints the layout chosen for ``x`` (a register
    tensor or a shared buffer) to stderr; no code."""

    name = "tlx.dump_layout"

    def verify(self):
        if len(self.operands) != 1 or self.results:
            raise self.error("expected one operand and no result")
