"""Global-memory ops: pointer arithmetic, loads, stores, atomics.

Optional operands (``mask``, ``other``) follow the required ones; the
``has_mask`` / ``has_other`` attributes say which are present.
"""
from __future__ import annotations

from ..core import Operation
from ..traits import ELEMENTWISE, PURE, SIDE_EFFECT
from ..types import PointerType, ScalarType, i1, shape_of, with_element
from ._rules import expect_operands, expect_pointer, expect_scalar_kind, expect_type, same_shape


class AddPtrOp(Operation):
    """``ptr + offset`` in elements of the pointee type."""

    name = "tl.addptr"
    traits = frozenset({ELEMENTWISE, PURE})

    def verify(self):
        expect_operands(self, 2)
        ptr, offset = self.operands
        expect_pointer(self, ptr.type, "base")
        same_shape(self, ptr.type, offset.type, "base and offset")
        expect_scalar_kind(self, offset.type, lambda t: t.is_integer, "integer", "offset")
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
    traits = frozenset({SIDE_EFFECT})

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


# Triton's memory semantics and scopes (semantic.py: _str_to_sem / _str_to_scope);
# the frontend fills in Triton's defaults, acq_rel and gpu.
ATOMIC_SEMS = ("relaxed", "acquire", "release", "acq_rel")
ATOMIC_SCOPES = ("gpu", "cta", "sys")


def _check_sem_scope(op) -> None:
    if op.attrs.get("sem") not in ATOMIC_SEMS:
        raise op.error(f"expected sem in {ATOMIC_SEMS}, got {op.attrs.get('sem')!r}")
    if op.attrs.get("scope") not in ATOMIC_SCOPES:
        raise op.error(f"expected scope in {ATOMIC_SCOPES}, got {op.attrs.get('scope')!r}")


def atomic_element_problem(kind: str, elem) -> str | None:
    """Why ``atomic_<kind>`` cannot act on ``elem`` elements (Triton's rules), or None.

    16-bit floats only add; integers narrower than 32 bits never; and/or/xor need
    integers; min/max on floats only for f32/f64 (lowered as integer atomics on the
    bits, as Triton does); cas takes any 16-, 32- or 64-bit element."""
    if not isinstance(elem, ScalarType) or elem.is_boolean or elem.is_float8:
        return f"atomic_{kind} does not support {elem} elements"
    if kind == "cas":
        return None if elem.bits in (16, 32, 64) else f"atomic_cas needs 16-, 32- or 64-bit elements, got {elem}"
    if elem.is_integer and elem.bits < 32:
        return f"atomic_{kind} does not support {elem} elements (integers need 32 or 64 bits)"
    if elem.is_float and elem.bits == 16 and kind != "add":
        return f"atomic_{kind} does not support {elem} elements (16-bit floats support only atomic_add)"
    if kind in ("and", "or", "xor") and not elem.is_integer:
        return f"atomic_{kind} needs integer elements, got {elem}"
    return None


class AtomicRMWOp(Operation):
    """Atomic read-modify-write (``attrs.kind``: add, max, min, and, or, xor, xchg)
    with memory semantics ``attrs.sem`` and scope ``attrs.scope``; yields the old values."""

    name = "tl.atomic_rmw"
    traits = frozenset({SIDE_EFFECT})
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
        if problem := atomic_element_problem(self.attrs["kind"], pointee):
            raise self.error(problem)
        _check_sem_scope(self)

    @property
    def mask(self):
        return self.operands[2] if self.attrs.get("has_mask") else None


class AtomicCASOp(Operation):
    """Atomic compare-and-swap: where memory equals ``cmp`` it becomes ``val``;
    yields the old values.  No mask (as in Triton)."""

    name = "tl.atomic_cas"
    traits = frozenset({SIDE_EFFECT})

    def verify(self):
        expect_operands(self, 3)
        ptr, cmp, value = self.operands
        pointee = expect_pointer(self, ptr.type, "pointer").pointee
        expected = with_element(ptr.type, pointee)
        expect_type(self, cmp.type, expected, "cmp")
        expect_type(self, value.type, expected, "value")
        expect_type(self, self.result.type, expected, "result")
        if problem := atomic_element_problem("cas", pointee):
            raise self.error(problem)
        _check_sem_scope(self)


class DebugBarrierOp(Operation):
    """``tl.debug_barrier()``: every thread of the program (of the task, inside
    an async task) waits here, and their memory accesses before it are visible
    to each other after it (``bar.sync``)."""

    name = "tl.debug_barrier"
    traits = frozenset({SIDE_EFFECT})

    def verify(self):
        expect_operands(self, 0)
        if self.results:
            raise self.error("expected no results")


def pointee_of(t) -> object:
    elem = t.element if shape_of(t) else t
    return elem.pointee if isinstance(elem, PointerType) else None
