"""Lowering rules for clusters (``ir/ops/cluster.py``).

A remote barrier (``tlx.remote_view``) is held as its 32-bit address in the
cluster's shared window (``mapa``); arrivals on it use the ``.shared::cluster``
form of ``mbarrier.arrive`` (``rules_tlx.barrier_arrive``).  The cluster
barrier is ``barrier.cluster.arrive`` + ``wait`` (``.aligned``), which every
thread of every CTA must reach: in a warp-specialized kernel the one after the
barrier inits belongs to the uniform prologue and the closing one is lowered
after the task branches (``rules_tlx.lower_warp_specialized``), so every warp
runs both.
"""
from __future__ import annotations

from .lower import lowering


@lowering("tlx.cluster_cta_rank")
def cluster_cta_rank(lw, op):
    lw.declare(op.results[0], init=lw.target.expr("tlx_cluster_ctarank"))


@lowering("tlx.cluster_size")
def cluster_size(lw, op):
    lw.declare(op.results[0], init=lw.target.expr("tlx_cluster_nctarank"))


@lowering("tlx.cluster_barrier")
def cluster_barrier(lw, op):
    lw.out.line(f"{lw.target.call('tlx_cluster_arrive')} {lw.target.call('tlx_cluster_wait')}")


@lowering("tlx.fence_mbarrier_init_cluster")
def fence_mbarrier_init_cluster(lw, op):
    lw.out.line(lw.target.call("tlx_fence_mbarrier_init_cluster"))


@lowering("tlx.remote_view")
def remote_view(lw, op):
    bar, rank = op.operands
    r = op.results[0]
    lw.out.line(f"const unsigned {lw.define(r)} = {lw.target.expr('tlx_mapa_shared', lw.name(bar), lw.name(rank))};")
    if id(bar) in lw.barrier_names:
        lw.barrier_names[id(r)] = lw.barrier_names[id(bar)]
