"""Distributed shared memory: stores into a peer CTA's shared memory (TLX semantics).

The destination is always named by a *local* buffer view: the same place in
CTA ``rank``'s copy of that buffer receives the data (``mapa``), as in TLX.

* ``tlx.remote_shmem_store(dst, value, rank)``: each thread stores its
  elements of ``value`` (a register tensor) into the peer's buffer; ordered
  for the peer by a later ``cluster_barrier`` (``st.shared::cluster``).
* ``tlx.async_remote_shmem_store(dst, value, rank, bar)``: the same, with
  ``st.async``; every byte that lands completes transaction bytes on the
  barrier at ``bar``'s place in the *peer* CTA (``mbarrier::complete_tx``), so
  the peer waits on its own barrier after ``barrier_expect_bytes``.
* ``tlx.async_remote_shmem_copy(dst, src, rank, bar)``: one bulk copy of the
  local buffer ``src`` into the peer's ``dst`` (``cp.async.bulk.shared::cluster
  .shared::cta``), completing ``src``'s bytes on the peer's ``bar``.
"""
from __future__ import annotations

from ..core import Operation
from ..types import BarrierType, MemDescType, ScalarType, TensorType
from ._rules import expect_results


def _expect_view(op, t, what: str) -> MemDescType:
    if not isinstance(t, MemDescType) or t.num or t.storage != "smem":
        raise op.error(f"expected {what} to be one shared-memory buffer, got {t}")
    return t


def _expect_rank(op, t) -> None:
    if not isinstance(t, ScalarType) or not t.is_integer:
        raise op.error(f"expected an integer CTA rank, got {t}")


def _expect_local_barrier(op, t) -> None:
    if not isinstance(t, BarrierType) or t.num or t.remote:
        raise op.error(f"expected one local mbarrier (the peer's barrier at its place completes), got {t}")


def _expect_value_for(op, view: MemDescType, value) -> None:
    if not isinstance(value, TensorType) or value.shape != view.shape or value.element != view.element:
        raise op.error(f"expected a {list(view.shape)} tensor of {view.element} to store into {view}, got {value}")


class RemoteShmemStoreOp(Operation):
    """Operands: destination view, value, peer rank."""

    name = "tlx.remote_shmem_store"

    def verify(self):
        expect_results(self, 0)
        if len(self.operands) != 3:
            raise self.error("expected a buffer view, a value and a CTA rank")
        dst, value, rank = (v.type for v in self.operands)
        _expect_value_for(self, _expect_view(self, dst, "the destination"), value)
        _expect_rank(self, rank)


class AsyncRemoteShmemStoreOp(Operation):
    """Operands: destination view, value, peer rank, barrier (completed in the peer)."""

    name = "tlx.async_remote_shmem_store"

    def verify(self):
        expect_results(self, 0)
        if len(self.operands) != 4:
            raise self.error("expected a buffer view, a value, a CTA rank and a barrier")
        dst, value, rank, bar = (v.type for v in self.operands)
        _expect_value_for(self, _expect_view(self, dst, "the destination"), value)
        _expect_rank(self, rank)
        _expect_local_barrier(self, bar)


class AsyncRemoteShmemCopyOp(Operation):
    """Operands: destination view (its place in the peer), local source view, peer rank, barrier."""

    name = "tlx.async_remote_shmem_copy"

    def verify(self):
        expect_results(self, 0)
        if len(self.operands) != 4:
            raise self.error("expected two buffer views, a CTA rank and a barrier")
        dst, src, rank, bar = (v.type for v in self.operands)
        dst = _expect_view(self, dst, "the destination")
        src = _expect_view(self, src, "the source")
        if dst.buffer_bytes != src.buffer_bytes or dst.perm or src.perm:
            raise self.error(f"expected source and destination of the same bytes, untransposed, got {src} "
                             f"and {dst}")
        _expect_rank(self, rank)
        _expect_local_barrier(self, bar)
