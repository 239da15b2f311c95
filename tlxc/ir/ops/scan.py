"""Scans, reductions with a user combine function, flips and sorts.

``tl.scan`` and ``tl.reduce_combine`` take n tensors of one shape and one region,
the combine function: a block of 2n scalar arguments (the left operands, then the
right ones, of the operands' element types) ending in ``scf.yield`` of n values of
those types.  The combine is assumed associative (Triton's contract); the order in
which it is applied is the backend's.
"""
from __future__ import annotations

from ..core import Operation
from ..types import TensorType, element_type, shape_of
from ._rules import expect_tensor, expect_type


def _check_operands(op) -> list:
    if not op.operands:
        raise op.error("expected at least one operand")
    first = expect_tensor(op, op.operands[0].type, "operand 0")
    for i, v in enumerate(op.operands[1:], 1):
        t = expect_tensor(op, v.type, f"operand {i}")
        if t.shape != first.shape:
            raise op.error(f"expected operands of one shape, got {list(first.shape)} and {list(t.shape)}")
    axis = op.attrs.get("axis")
    if not isinstance(axis, int) or not 0 <= axis < first.rank:
        raise op.error(f"expected axis in [0, {first.rank}), got {axis!r}")
    return [element_type(v.type) for v in op.operands]


def _check_combine(op, elems: list) -> None:
    if len(op.regions) != 1:
        raise op.error("expected one region (the combine function)")
    block = op.regions[0].block
    args = [a.type for a in block.args]
    if args != elems + elems:
        raise op.error(f"expected combine arguments ({', '.join(map(str, elems + elems))}), "
                       f"got ({', '.join(map(str, args))})")
    terminator = block.terminator
    if terminator is None or terminator.name != "scf.yield":
        raise op.error("expected the combine region to end with scf.yield")
    got = [v.type for v in terminator.operands]
    if got != elems:
        raise op.error(f"expected the combine function to yield ({', '.join(map(str, elems))}), "
                       f"got ({', '.join(map(str, got))})")


class ScanOp(Operation):
    """Inclusive scan along ``attrs.axis`` (from the end when ``attrs.reverse``)."""

    name = "tl.scan"
    num_regions = 1

    def verify(self):
        elems = _check_operands(self)
        _check_combine(self, elems)
        if not isinstance(self.attrs.get("reverse"), bool):
            raise self.error(f"expected a bool 'reverse', got {self.attrs.get('reverse')!r}")
        if len(self.results) != len(self.operands):
            raise self.error(f"expected {len(self.operands)} results, got {len(self.results)}")
        for v, r in zip(self.operands, self.results):
            expect_type(self, shape_of(r.type), shape_of(v.type), "result shape")
            expect_type(self, element_type(r.type), element_type(v.type), "result element")


class ReduceCombineOp(Operation):
    """Reduction along ``attrs.axis`` with the region's combine function."""

    name = "tl.reduce_combine"
    num_regions = 1

    def verify(self):
        elems = _check_operands(self)
        _check_combine(self, elems)
        axis = self.attrs["axis"]
        src = self.operands[0].type
        shape = src.shape[:axis] + src.shape[axis + 1:]
        if len(self.results) != len(self.operands):
            raise self.error(f"expected {len(self.operands)} results, got {len(self.results)}")
        for r, elem in zip(self.results, elems):
            if shape_of(r.type) != shape or element_type(r.type) != elem:
                raise self.error(f"expected a result of shape {list(shape)} and element {elem}, got {r.type}")
            if shape and not isinstance(r.type, TensorType):
                raise self.error("expected a tensor result")


def _one_tensor_along_axis(op: Operation):
    """The single tensor operand of a permuting op (flip, sort) with a valid ``attrs.axis``."""
    if len(op.operands) != 1:
        raise op.error(f"expected 1 operand, got {len(op.operands)}")
    src = expect_tensor(op, op.operands[0].type, "operand")
    axis = op.attrs.get("axis")
    if not isinstance(axis, int) or not 0 <= axis < src.rank:
        raise op.error(f"expected axis in [0, {src.rank}), got {axis!r}")
    return src


class FlipOp(Operation):
    """Reverse the order of the elements along ``attrs.axis``."""

    name = "tl.flip"

    def verify(self):
        src = _one_tensor_along_axis(self)
        expect_type(self, shape_of(self.result.type), src.shape, "result shape")
        expect_type(self, element_type(self.result.type), src.element, "result element")


class SortOp(Operation):
    """Sort along ``attrs.axis`` (ascending unless ``attrs.descending``)."""

    name = "tl.sort"

    def verify(self):
        src = _one_tensor_along_axis(self)
        if not isinstance(self.attrs.get("descending"), bool):
            raise self.error(f"expected a bool 'descending', got {self.attrs.get('descending')!r}")
        expect_type(self, self.result.type, src, "result")
