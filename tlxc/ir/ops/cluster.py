"""Thread-block clusters (TLX semantics, ``tlx_api.md`` §1.6).

A launch with ``ctas_per_cga=(x, y, z)`` groups the grid's CTAs into
clusters that run at the same time on one GPC and can reach each other's
shared memory.  ``tlx.cluster_cta_rank`` is a CTA's rank in its cluster
(x fastest), ``tlx.cluster_size`` the number of CTAs in it (both i32).
``tlx.remote_view`` names the barrier at the same place in CTA ``rank``'s
shared memory: it can be arrived on, never waited on ("arrive remote, wait
local").  ``tlx.cluster_barrier`` waits until every thread of every CTA of
the cluster has reached it; ``tlx.fence_mbarrier_init_cluster`` makes
barrier inits visible to the cluster before peers arrive on them.  The
compiler adds both after the barrier allocations of a cluster kernel, and a
cluster barrier at its end, so no CTA exits while a peer still signals it
(``passes.cluster_syncs``).
"""
from __future__ import annotations

from ..core import Operation
from ..traits import REMOTE_VIEW
from ..types import BarrierType, ScalarType, i32
from ._rules import expect_results


def _expect_i32_result(op) -> None:
    expect_results(op, 1)
    if op.result.type != i32:
        raise op.error(f"expected an i32 result, got {op.result.type}")


class ClusterCtaRankOp(Operation):
    name = "tlx.cluster_cta_rank"
    verify = _expect_i32_result


class ClusterSizeOp(Operation):
    name = "tlx.cluster_size"
    verify = _expect_i32_result


class ClusterBarrierOp(Operation):
    name = "tlx.cluster_barrier"


class FenceMbarrierInitClusterOp(Operation):
    name = "tlx.fence_mbarrier_init_cluster"


class RemoteViewOp(Operation):
    """Operands: one local barrier, the peer's rank (i32)."""

    name = "tlx.remote_view"
    traits = frozenset({REMOTE_VIEW})

    def verify(self):
        expect_results(self, 1)
        if len(self.operands) != 2:
            raise self.error("expected a barrier and a CTA rank")
        bar, rank = self.operands
        if not isinstance(bar.type, BarrierType) or bar.type.num or bar.type.remote:
            raise self.error(f"expected one local mbarrier, got {bar.type}")
        if not isinstance(rank.type, ScalarType) or not rank.type.is_integer:
            raise self.error(f"expected an integer CTA rank, got {rank.type}")
        if self.result.type != BarrierType(0, bar.type.per_thread, True):
            raise self.error(f"expected a remote mbarrier result, got {self.result.type}")
