"""Global-memory ops: pointer arithmetic, loads, stores, atomics.

Optional operands (``mask``, ``other``) follow the required ones; the
``has_mask`` / ``has_other`` attributes say which are present.
"""
from __future__ import annotations

from ..core import Operation
from ..types import PointerType, i1, shape_of, with_element
from ._rules import expect_operands, expect_pointer, expect_scalar_kind, expect_type, same_shape


class AddPtrOp(Operation):
    """``ptr + offset`` in elements of the pointee type."""

    name = "tl.addptr"

    def verify(self):
        expect_operands(self, 2)
        ptr, offset = self.operands
        expect_pointer(self, ptr.type, "base")
        same_shape(self, ptr.type, offset.type, "base and offset")
        expect_scalar_kind(self, offset.type, lambda t: t.is_int, "integer", "offset")
        expect_type(self, self.result.type, ptr.type, "result")


def _optional_operands(op, first: int) -> dict[str, object]:
    names = [n for n in ("mask", "other") if op.attrs.get(f"has_{n}")]
    if len(op.operands) != first + len(names):
        raise op.error(f"expected {first + len(names)} operands (has_mask/has_other), "
                       f"got {len(op.operands)}")
    return dict(zip(names, op.operands[first:]))


def _check_mask(op, ptr_type, mask) -> None:
    if mask is not None:
        expect_type(op, mask.type, with_element(ptr_type, i1), "mask")


class LoadOp(Operation):
    """Load through a pointer (tensor); masked-off lanes yield ``other`` (or 0)."""

    name = "tl.load"

    def verify(self):
        if not self.operands:
            raise self.error("expected a pointer operand")
        ptr = self.operands[0]
        pointee = expect_pointer(self, ptr.type, "pointer").pointee
        optional = _optional_operands(self, 1)
        if "other" in optional and "mask" not in optional:
            raise self.error("expected a mask with 'other': other fills the masked-off lanes")
        _check_mask(self, ptr.type, optional.get("mask"))
        expected = with_element(ptr.type, pointee)
        if "other" in optional:
            expect_type(self, optional["other"].type, expected, "other")
        expect_type(self, self.result.type, expected, "result")

    @property
    def mask(self):
        return self.operands[1] if self.attrs.get("has_mask") else None

    @property
    def other(self):
        return self.operands[-1] if self.attrs.get("has_other") else None


class StoreOp(Operation):
    """Store ``value`` through a pointer (tensor) where ``mask`` is true."""

    name = "tl.store"

    def verify(self):
        if len(self.operands) < 2:
            raise self.error("expected a pointer and a value")
        ptr, value = self.operands[:2]
        pointee = expect_pointer(self, ptr.type, "pointer").pointee
        optional = _optional_operands(self, 2)
        _check_mask(self, ptr.type, optional.get("mask"))
        expect_type(self, value.type, with_element(ptr.type, pointee), "value")
        if self.results:
            raise self.error("expected no results")

    @property
    def mask(self):
        return self.operands[2] if self.attrs.get("has_mask") else None


class AtomicRMWOp(Operation):
    """Atomic read-modify-write (``attrs.kind``: add, max, min, xchg...);
    yields the old values."""

    name = "tl.atomic_rmw"
    KINDS = ("add", "max", "min", "and", "or", "xor", "xchg")

    def verify(self):
        if len(self.operands) < 2:
            raise self.error("expected a pointer and a value")
        ptr, value = self.operands[:2]
        pointee = expect_pointer(self, ptr.type, "pointer").pointee
        optional = _optional_operands(self, 2)
        _check_mask(self, ptr.type, optional.get("mask"))
        expect_type(self, value.type, with_element(ptr.type, pointee), "value")
        expect_type(self, self.result.type, value.type, "result")
        if self.attrs.get("kind") not in self.KINDS:
            raise self.error(f"expected kind in {self.KINDS}, got {self.attrs.get('kind')!r}")

    @property
    def mask(self):
        return self.operands[2] if self.attrs.get("has_mask") else None


def pointee_of(t) -> object:
    elem = t.element if shape_of(t) else t
    return elem.pointee if isinstance(elem, PointerType) else None
