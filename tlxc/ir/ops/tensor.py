"""Block-level tensor ops: program ids, ranges, shape manipulation, reductions."""
from __future__ import annotations

from ..core import Operation
from ..traits import ELEMENTWISE, PURE
from ..types import TensorType, element_type, i32, shape_of
from ._rules import expect_operands, expect_tensor, expect_type


class ProgramIdOp(Operation):
    """``tl.program_id(axis)``: this program's index along grid ``axis``."""

    name = "tl.program_id"
    traits = frozenset({PURE})

    def verify(self):
        expect_operands(self, 0)
        if self.attrs.get("axis") not in (0, 1, 2):
            raise self.error(f"expected axis 0, 1 or 2, got {self.attrs.get('axis')!r}")
        expect_type(self, self.result.type, i32, "result")


class NumProgramsOp(ProgramIdOp):
    """``tl.num_programs(axis)``: the grid's size along ``axis``."""

    name = "tl.num_programs"
    traits = frozenset({PURE})


class ArangeOp(Operation):
    """``tl.arange(start, end)``: ``[start, end)`` as an i32 tensor."""

    name = "tl.arange"
    traits = frozenset({PURE})

    def verify(self):
        expect_operands(self, 0)
        start, end = self.attrs.get("start"), self.attrs.get("end")
        if not isinstance(start, int) or not isinstance(end, int) or end <= start:
            raise self.error(f"expected integer attributes start < end, got start={start!r}, end={end!r}")
        result = expect_tensor(self, self.result.type, "result")
        if result.shape != (end - start,) or result.element != i32:
            raise self.error(f"expected tensor<{end - start}xi32>, got {result}")


class SplatOp(Operation):
    """A scalar broadcast to every element of a tensor."""

    name = "tl.splat"
    traits = frozenset({PURE})

    def verify(self):
        expect_operands(self, 1)
        result = expect_tensor(self, self.result.type, "result")
        expect_type(self, self.operands[0].type, result.element, "scalar operand")


class BroadcastOp(Operation):
    """Expand size-1 dims of a tensor to the result's (same-rank) shape."""

    name = "tl.broadcast"
    traits = frozenset({PURE})

    def verify(self):
        expect_operands(self, 1)
        src = expect_tensor(self, self.operands[0].type, "operand")
        result = expect_tensor(self, self.result.type, "result")
        if src.rank != result.rank or src.element != result.element:
            raise self.error(f"expected same rank and element type, got {src} and {result}")
        for s, r in zip(src.shape, result.shape):
            if s != r and s != 1:
                raise self.error(f"cannot broadcast {src} to {result}")


class ExpandDimsOp(Operation):
    """Insert a size-1 dim at ``attrs.axis``."""

    name = "tl.expand_dims"
    traits = frozenset({PURE})

    def verify(self):
        expect_operands(self, 1)
        src = expect_tensor(self, self.operands[0].type, "operand")
        axis = self.attrs.get("axis")
        if not isinstance(axis, int) or not 0 <= axis <= src.rank:
            raise self.error(f"expected axis in [0, {src.rank}], got {axis!r}")
        shape = list(src.shape)
        shape.insert(axis, 1)
        result = expect_tensor(self, self.result.type, "result")
        if result.shape != tuple(shape):
            raise self.error(f"expected shape {tuple(shape)}, got {result.shape}")


class ReshapeOp(Operation):
    """Row-major reshape to a shape with the same number of elements."""

    name = "tl.reshape"
    traits = frozenset({PURE})

    def verify(self):
        expect_operands(self, 1)
        src = expect_tensor(self, self.operands[0].type, "operand")
        result = expect_tensor(self, self.result.type, "result")
        if src.numel != result.numel:
            raise self.error(f"cannot reshape {src} ({src.numel} elements) to {result}")


class SplitOp(Operation):
    """Split a tensor whose last dim has size 2 into its two halves along it
    (``tl.split``): results ``x[..., 0]`` and ``x[..., 1]``."""

    name = "tl.split"

    def verify(self):
        expect_operands(self, 1)
        src = expect_tensor(self, self.operands[0].type, "operand")
        if src.rank < 1 or src.shape[-1] != 2:
            raise self.error(f"expected a last dim of size 2, got {src}")
        if len(self.results) != 2:
            raise self.error(f"expected 2 results, got {len(self.results)}")
        for r in self.results:
            result = expect_tensor(self, r.type, "result")
            if result.shape != src.shape[:-1] or result.element != src.element:
                raise self.error(f"expected results tensor<{'x'.join(map(str, src.shape[:-1]))}x{src.element}>, "
                                 f"got {result}")


class JoinOp(Operation):
    """Stack two tensors of one shape and type along a new last dim of size 2
    (``tl.join``): ``result[..., 0] = a``, ``result[..., 1] = b``."""

    name = "tl.join"

    def verify(self):
        expect_operands(self, 2)
        a = expect_tensor(self, self.operands[0].type, "operand a")
        b = expect_tensor(self, self.operands[1].type, "operand b")
        if a.shape != b.shape or a.element != b.element:
            raise self.error(f"expected operands of one type, got {a} and {b}")
        result = expect_tensor(self, self.result.type, "result")
        if result.shape != a.shape + (2,) or result.element != a.element:
            raise self.error(f"expected result tensor<{'x'.join(map(str, a.shape + (2,)))}x{a.element}>, got {result}")


class TransOp(Operation):
    """Permute dims by ``attrs.perm``."""

    name = "tl.trans"
    traits = frozenset({PURE})

    def verify(self):
        expect_operands(self, 1)
        src = expect_tensor(self, self.operands[0].type, "operand")
        perm = self.attrs.get("perm", ())
        if not isinstance(perm, (tuple, list)) or not all(isinstance(p, int) for p in perm) or \
                sorted(perm) != list(range(src.rank)):
            raise self.error(f"expected a permutation of {list(range(src.rank))}, got {list(perm)}")
        expected = tuple(src.shape[p] for p in perm)
        result = expect_tensor(self, self.result.type, "result")
        if result.shape != expected or result.element != src.element:
            raise self.error(f"expected result tensor<{'x'.join(map(str, expected))}x{src.element}>, got {result}")


class ReduceOp(Operation):
    """Reduce ``attrs.axis`` with ``attrs.kind`` (sum, max, min, argmax, argmin).

    For arg-reductions the result holds i32 indices (the first one on ties).
    """

    name = "tl.reduce"
    KINDS = ("sum", "max", "min", "argmax", "argmin", "and", "or", "xor")

    def verify(self):
        expect_operands(self, 1)
        src = expect_tensor(self, self.operands[0].type, "operand")
        kind, axis = self.attrs.get("kind"), self.attrs.get("axis")
        if kind not in self.KINDS:
            raise self.error(f"expected kind in {self.KINDS}, got {kind!r}")
        if not isinstance(axis, int) or not 0 <= axis < src.rank:
            raise self.error(f"expected axis in [0, {src.rank}), got {axis!r}")
        shape = src.shape[:axis] + src.shape[axis + 1:]
        elem = i32 if kind.startswith("arg") else src.element
        if shape_of(self.result.type) != shape or element_type(self.result.type) != elem:
            raise self.error(f"expected result of shape {shape} and element {elem}, got {self.result.type}")
        if shape and not isinstance(self.result.type, TensorType):
            raise self.error("expected a tensor result")


class ConvertLayoutOp(Operation):
    """Redistribute a tensor to another register layout (same shape/element)."""

    name = "tl.convert_layout"

    def verify(self):
        expect_operands(self, 1)
        src = expect_tensor(self, self.operands[0].type, "operand")
        result = expect_tensor(self, self.result.type, "result")
        if src.shape != result.shape or src.element != result.element:
            raise self.error(f"expected same shape and element, got {src} and {result}")


class HintOp(Operation):
    """Pass-through carrying ``multiple_of`` / ``max_contiguous`` facts."""

    name = "tl.hint"
    traits = frozenset({ELEMENTWISE, PURE})

    def verify(self):
        expect_operands(self, 1)
        expect_type(self, self.result.type, self.operands[0].type, "result")
