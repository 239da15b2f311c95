"""Structured control flow and the kernel op.

``scf.for``  operands (lb, ub, step, *inits); region args (iv, *carried);
             the body yields the next carried values; results = final carried.
``scf.while`` operands (*inits); region 0 ("before") takes the carried values
             and ends in ``scf.condition(cond, *carried)``; region 1 ("after")
             takes them and yields the next ones; results = final carried.
``scf.if``   operand (cond); regions then/else, each yielding the results.
"""
from __future__ import annotations

from ..core import Operation
from ..traits import CONTROL_FLOW, SIDE_EFFECT, TERMINATOR
from ..types import ScalarType, i1
from ._rules import expect_type


def _yield_matches(op, region, types, what: str) -> None:
    term = region.block.terminator
    expected = "scf.condition" if op.name == "scf.while" and what == "before" else "scf.yield"
    if term is None or term.name != expected:
        found = term.name if term is not None else (region.ops[-1].name if region.ops else "nothing")
        raise op.error(f"expected the {what} region to end with {expected}, got {found}")
    got = [v.type for v in term.operands[1:]] if term.name == "scf.condition" \
        else [v.type for v in term.operands]
    if got != list(types):
        raise op.error(f"expected the {what} region to yield ({', '.join(map(str, types))}), "
                       f"got ({', '.join(map(str, got))})")


class KernelOp(Operation):
    """A kernel: ``attrs.sym_name``, ``attrs.arg_names``, ``attrs.num_warps``...

    The body's block arguments are the kernel's runtime parameters (constexpr
    parameters were folded away by the frontend).
    """

    name = "tl.kernel"
    num_regions = 1

    @property
    def body(self):
        return self.regions[0]

    @property
    def sym_name(self) -> str:
        return self.attrs["sym_name"]

    def verify(self):
        if len(self.regions) != 1:
            raise self.error("expected one body region")
        term = self.body.block.terminator
        if term is None or term.name != "tl.return":
            raise self.error("expected the body to end with tl.return")


class ReturnOp(Operation):
    name = "tl.return"
    traits = frozenset({SIDE_EFFECT, TERMINATOR})
    is_terminator = True


class YieldOp(Operation):
    name = "scf.yield"
    traits = frozenset({SIDE_EFFECT, TERMINATOR})
    is_terminator = True


class ConditionOp(Operation):
    """Ends a while's "before" region: continue while operand 0 is true."""

    name = "scf.condition"
    traits = frozenset({SIDE_EFFECT, TERMINATOR})
    is_terminator = True

    def verify(self):
        if not self.operands or self.operands[0].type != i1:
            raise self.error("expected an i1 condition as first operand")


class ForOp(Operation):
    name = "scf.for"
    traits = frozenset({CONTROL_FLOW})
    num_regions = 1

    @property
    def body(self):
        return self.regions[0]

    @property
    def inits(self):
        return self.operands[3:]

    def verify(self):
        if len(self.operands) < 3 or len(self.regions) != 1:
            raise self.error("expected (lb, ub, step, *inits) and one region")
        lb, ub, step = self.operands[:3]
        if not isinstance(lb.type, ScalarType) or not lb.type.is_integer:
            raise self.error(f"expected an integer lower bound, got {lb.type}")
        expect_type(self, ub.type, lb.type, "upper bound")
        expect_type(self, step.type, lb.type, "step")
        carried = [v.type for v in self.inits]
        args = [a.type for a in self.body.args]
        if args != [lb.type] + carried:
            raise self.error(f"expected region args ({lb.type}, {', '.join(map(str, carried))}), "
                             f"got ({', '.join(map(str, args))})")
        if [r.type for r in self.results] != carried:
            raise self.error("expected results of the carried types")
        _yield_matches(self, self.body, carried, "body")


class WhileOp(Operation):
    name = "scf.while"
    traits = frozenset({CONTROL_FLOW})
    num_regions = 2

    def verify(self):
        if len(self.regions) != 2:
            raise self.error("expected before and after regions")
        carried = [v.type for v in self.operands]
        for region, what in zip(self.regions, ("before", "after")):
            if [a.type for a in region.args] != carried:
                raise self.error(f"expected the {what} region to take the carried values")
        if self.regions[0].block.terminator is None or \
                self.regions[0].block.terminator.name != "scf.condition":
            raise self.error("expected the before region to end with scf.condition")
        _yield_matches(self, self.regions[0], carried, "before")
        _yield_matches(self, self.regions[1], carried, "after")
        if [r.type for r in self.results] != carried:
            raise self.error("expected results of the carried types")


class IfOp(Operation):
    name = "scf.if"
    traits = frozenset({CONTROL_FLOW})
    num_regions = 2

    @property
    def then_region(self):
        return self.regions[0]

    @property
    def else_region(self):
        return self.regions[1]

    def verify(self):
        if len(self.operands) != 1 or self.operands[0].type != i1:
            raise self.error(f"expected one i1 condition, got {[str(v.type) for v in self.operands]}")
        if len(self.regions) != 2:
            raise self.error("expected then and else regions")
        types = [r.type for r in self.results]
        _yield_matches(self, self.then_region, types, "then")
        _yield_matches(self, self.else_region, types, "else")
