"""Tensor maps encoded in the kernel (in-kernel TMA descriptors).

* ``tlx.make_tensor_descriptor``: encode a tensor map of ``base`` seen as ``shape`` /
  ``strides`` (elements), copied in boxes of the result type's ``block_shape`` with its
  swizzle, into 128 bytes of global memory: the kernel's own scratch (one slot per op and
  program), or ``desc_ptr`` (a slot of ``tlx.allocate_tensor_descriptor``).  Operands:
  base, *shape (i32, outermost first), *strides (i64, elements), [desc_ptr].  Attrs:
  ``padding`` ("zero" or "nan"), ``has_desc_ptr``.  The result is a descriptor like a
  host-encoded one: every TMA op takes it.
* ``tlx.allocate_tensor_descriptor``: ``num`` 128-byte, 128-aligned slots of the program's
  global scratch; the result points to the first (``attrs.num``).
* ``tlx.reinterpret_tensor_descriptor``: the tensor map at ``desc_ptr`` (which a
  ``make_tensor_descriptor`` encoded) as a descriptor of the result type.
* ``tl.descriptor_dim``: a dimension of a descriptor argument's global shape or strides
  (``desc.shape[i]`` / ``desc.strides[i]``), passed by the launch as a hidden parameter.

The encoding and its legality at run time (16-byte aligned base and row strides) are the
backend's (codegen_nvptx/rules_tensormap.py) and the interpreter's (interpreter/tensormap.py);
the box is checked here (``ir/tensormap.py: box_error``).
"""
from __future__ import annotations

from ...ir.tensormap import FILL_CODES, box_error
from ..core import Operation
from ..types import PointerType, ScalarType, TensorDescType, i32, i64


def _expect_scalar_pointer(op, t, what: str) -> None:
    if not isinstance(t, PointerType):
        raise op.error(f"expected {what} to be one global pointer (a scalar), got {t}")


def _expect_descriptor_result(op) -> TensorDescType:
    if len(op.results) != 1 or not isinstance(op.results[0].type, TensorDescType):
        raise op.error("expected one tensor descriptor result")
    t = op.results[0].type
    why = box_error(t.block_shape, t.element)
    if why:
        raise op.error(why)
    return t


class MakeTensorDescriptorOp(Operation):
    name = "tlx.make_tensor_descriptor"

    @property
    def rank(self) -> int:
        return len(self.results[0].type.block_shape)

    @property
    def shape(self):
        return self.operands[1:1 + self.rank]

    @property
    def strides(self):
        return self.operands[1 + self.rank:1 + 2 * self.rank]

    @property
    def desc_ptr(self):
        return self.operands[-1] if self.attrs.get("has_desc_ptr") else None

    def verify(self):
        t = _expect_descriptor_result(self)
        rank = len(t.block_shape)
        if len(self.operands) != 1 + 2 * rank + bool(self.attrs.get("has_desc_ptr")):
            raise self.error(f"expected base, {rank} sizes, {rank} strides and an optional desc_ptr")
        base = self.operands[0].type
        _expect_scalar_pointer(self, base, "base")
        if base.pointee != t.element:
            raise self.error(f"base points to {base.pointee} but the descriptor holds {t.element}")
        for v in self.shape:
            if v.type != i32:
                raise self.error(f"expected i32 sizes, got {v.type}")
        for v in self.strides:
            if v.type != i64:
                raise self.error(f"expected i64 strides, got {v.type}")
        if self.desc_ptr is not None:
            _expect_scalar_pointer(self, self.desc_ptr.type, "desc_ptr")
        if self.attrs.get("padding") not in FILL_CODES:
            raise self.error(f"expected padding 'zero' or 'nan', got {self.attrs.get('padding')!r}")


class AllocateTensorDescriptorOp(Operation):
    name = "tlx.allocate_tensor_descriptor"

    def verify(self):
        num = self.attrs.get("num")
        if not isinstance(num, int) or isinstance(num, bool) or num < 1:
            raise self.error(f"expected a positive 'num', got {num!r}")
        if self.operands or len(self.results) != 1 or not isinstance(self.results[0].type, PointerType) or \
                not isinstance(self.results[0].type.pointee, ScalarType):
            raise self.error("expected no operands and one pointer result")


class ReinterpretTensorDescriptorOp(Operation):
    name = "tlx.reinterpret_tensor_descriptor"

    def verify(self):
        _expect_descriptor_result(self)
        if len(self.operands) != 1:
            raise self.error("expected desc_ptr")
        _expect_scalar_pointer(self, self.operands[0].type, "desc_ptr")


class DescriptorDimOp(Operation):
    """``desc.shape[dim]`` (i32) or ``desc.strides[dim]`` (i64, elements) of a descriptor kernel argument
    (a host ``TensorDescriptor``): the value the launch passes beside its tensor map (a hidden
    parameter of the kernel; codegen_nvptx/rules_tensormap.py).  Attrs: ``kind`` ("shape" or
    "stride"), ``dim`` (outermost first).  Side-effect free (``tl.``): an unused one goes away."""

    name = "tl.descriptor_dim"

    def verify(self):
        if len(self.operands) != 1 or not isinstance(self.operands[0].type, TensorDescType):
            raise self.error("expected one tensor descriptor operand")
        kind, dim = self.attrs.get("kind"), self.attrs.get("dim")
        rank = len(self.operands[0].type.block_shape)
        if kind not in ("shape", "stride") or not isinstance(dim, int) or not 0 <= dim < rank:
            raise self.error(f"expected kind 'shape' or 'stride' and a dim in 0..{rank - 1}, got {kind!r}, {dim!r}")
        if len(self.results) != 1 or self.results[0].type != (i32 if kind == "shape" else i64):
            raise self.error(f"expected one {'i32' if kind == 'shape' else 'i64'} result")

