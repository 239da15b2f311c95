"""Bulk copies and prefetch hints of the orchestration layer.

* ``tlx.async_bulk_load``: ``cp.async.bulk`` of ``size`` contiguous bytes from a
  global address into a 1-D shared buffer, completing those bytes on an mbarrier
  (``complete_tx``), as a TMA load completes its box's (TLX's
  ``async_load(..., bulk=True, barrier=bar)``);
* ``tlx.async_bulk_store``: ``cp.async.bulk`` of ``size`` bytes of a shared buffer to
  a global address, joining the issuing thread's bulk group as a TMA store does
  (``async_descriptor_store_wait`` waits for it) (TLX's ``async_store``);
* ``tlx.prefetch``: ``prefetch.global.L1|L2`` of each (unmasked) address: a hint;
* ``tlx.prefetch_tensormap``: ``prefetch.tensormap`` of a descriptor: a hint.

Sizes are i32 operands (a constant when the user wrote one, so the checker can
count the bytes against ``barrier_expect_bytes``).  The copy needs 16-byte aligned
addresses and a size that is a multiple of 16 (PTX ISA, cp.async.bulk).
"""
from __future__ import annotations

from ..core import Operation
from ..traits import BULK_STORE
from ..types import BarrierType, PointerType, ScalarType, TensorDescType, TensorType, i1, with_element
from ._rules import expect_operands, expect_pointer, expect_type
from .shared import expect_memdesc

BULK_ALIGN = 16          # bytes: addresses and sizes of cp.async.bulk
PREFETCH_LEVELS = ("L1", "L2")


def _expect_global_address(op, t, what: str) -> None:
    if not isinstance(t, PointerType):
        raise op.error(f"expected {what} to be one global pointer (a scalar), got {t}")


def _expect_size(op, t) -> None:
    if not isinstance(t, ScalarType) or not t.is_integer:
        raise op.error(f"expected an integer byte count, got {t}")


def _expect_flat_buffer(op, t, what: str) -> None:
    view = expect_memdesc(op, t, what, view=True)
    if len(view.shape) != 1 or view.perm is not None:
        raise op.error(f"expected {what} to be a 1-D buffer (a bulk copy moves contiguous bytes), got {view}")


class AsyncBulkLoadOp(Operation):
    """``size`` bytes at global ``ptr`` into buffer ``dst``; they complete on ``bar``.
    Operands: ptr, dst, bar, size."""

    name = "tlx.async_bulk_load"

    def verify(self):
        expect_operands(self, 4)
        ptr, dst, bar, size = self.operands
        _expect_global_address(self, ptr.type, "the source")
        _expect_flat_buffer(self, dst.type, "the destination")
        if not isinstance(bar.type, BarrierType) or bar.type.num or bar.type.remote:
            raise self.error(f"expected one local mbarrier, got {bar.type}")
        _expect_size(self, size.type)


class AsyncBulkStoreOp(Operation):
    """``size`` bytes of buffer ``src`` to global ``ptr``, in the issuing thread's bulk group.
    Operands: ptr, src, size."""

    name = "tlx.async_bulk_store"
    traits = frozenset({BULK_STORE})

    def verify(self):
        expect_operands(self, 3)
        ptr, src, size = self.operands
        _expect_global_address(self, ptr.type, "the destination")
        _expect_flat_buffer(self, src.type, "the source")
        _expect_size(self, size.type)


class PrefetchOp(Operation):
    """Prefetch each address of ``ptrs`` (a pointer or a tensor of pointers) into
    ``attrs.level`` (``L1``: L1 and L2; ``L2``: L2 only).  Operands: ptrs, [mask]."""

    name = "tlx.prefetch"

    def verify(self):
        if len(self.operands) != 1 + bool(self.attrs.get("has_mask")):
            raise self.error("expected ptrs and an optional mask")
        ptrs = self.operands[0]
        expect_pointer(self, ptrs.type, "ptrs")
        if self.attrs.get("level") not in PREFETCH_LEVELS:
            raise self.error(f"expected level 'L1' or 'L2', got {self.attrs.get('level')!r}")
        if self.attrs.get("has_mask"):
            expected = with_element(ptrs.type, i1) if isinstance(ptrs.type, TensorType) else i1
            expect_type(self, self.operands[1].type, expected, "mask")


class PrefetchTensormapOp(Operation):
    """Bring the tensor map of ``desc`` into the cache before the TMA copies that read it."""

    name = "tlx.prefetch_tensormap"

    def verify(self):
        expect_operands(self, 1)
        if not isinstance(self.operands[0].type, TensorDescType):
            raise self.error(f"expected a tensor descriptor, got {self.operands[0].type}")
