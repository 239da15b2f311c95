"""cluster-syncs: the cluster barriers a cluster kernel needs and TLX adds.

Run on the frontend's module (the interpreter sees them too) when the kernel
is compiled for clusters (``ctas_per_cga`` with more than one CTA):

* if the kernel signals peer CTAs (a ``tlx.remote_view``, a multicast TMA
  load, or a 2-CTA tcgen05 MMA / commit, whose completion arrives on the odd
  CTA's barrier), ``fence_mbarrier_init_cluster`` + ``cluster_barrier`` after the last
  barrier allocation of the kernel's entry block: no CTA arrives on, or
  multicasts into, a peer's barrier before the peer initialized it;
* a ``cluster_barrier`` before the kernel returns, so that no CTA exits (and
  its shared memory goes away) while a peer still signals it.

A kernel compiled for Triton's ``num_ctas`` (one program per cluster of that many CTAs,
the program on the cluster's first CTA: runtime/launch.py, "num_ctas") may not use the
cluster ops: there the cluster is the program's, not the kernel's (a located error names
``ctas_per_cga``, tlxc's clusters for them).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import CompilationError
from ..ir.builder import Builder
from ..ir.core import Module
from ..ir.traits import TCGEN05_MMA, has_trait
from .manager import Pass

SIGNALS_PEERS = ("tlx.remote_view",)
# Writes into a peer's shared memory (and barrier): they need the fence + barrier after the
# barrier inits too, but rank 0 of a cluster of one is the CTA itself, so no launch error.
WRITES_PEERS = ("tlx.remote_shmem_store", "tlx.async_remote_shmem_store", "tlx.async_remote_shmem_copy")


def _created(block, index: int, name: str, loc):
    op = Builder(None).create(name)
    op.loc = loc
    block.insert(index, op)
    return op


def _peer_signal(kernel):
    return next((op for op in kernel.walk() if op.name in SIGNALS_PEERS or
                 (op.name == "tlx.async_descriptor_load" and op.attrs.get("multicast")) or
                 (has_trait(op, TCGEN05_MMA) and op.attrs.get("two_ctas"))), None)


CLUSTER_OP_PREFIXES = ("tlx.cluster_", "tlx.remote_", "tlx.async_remote_", "tlx.clc_",
                       "tlx.fence_mbarrier_init_cluster")


def _refuse_cluster_ops(kernel) -> None:
    peer = _peer_signal(kernel)         # (a multicast load, a 2-CTA MMA: no name of their own)
    for op in kernel.walk():
        if op.name.startswith(CLUSTER_OP_PREFIXES) or op is peer:
            raise CompilationError(f"{op.name} needs the kernel's own clusters, and this launch has "
                                   f"num_ctas={kernel.attrs['num_ctas']} (each program runs on its own cluster "
                                   f"of that many CTAs): launch with ctas_per_cga=(x, y, z) and num_ctas=1",
                                   op.loc)


def insert_cluster_syncs(module: Module) -> Module:
    for kernel in module.kernels:
        if kernel.attrs.get("num_ctas", 1) > 1:
            _refuse_cluster_ops(kernel)
            continue
        dims = kernel.attrs.get("cluster_dims")
        if not dims or dims[0] * dims[1] * dims[2] == 1:
            op = _peer_signal(kernel)
            if op is not None:
                what = ("arrives on a peer CTA's barrier" if op.name in SIGNALS_PEERS else
                        "multicasts a TMA load" if op.name == "tlx.async_descriptor_load" else
                        "runs a 2-CTA tcgen05 MMA (two_ctas=True)")
                raise CompilationError(f"this kernel {what}, which needs a cluster launch: ctas_per_cga=(x, y, z) "
                                       f"with more than one CTA (tlxc compile/check: --ctas-per-cga)", op.loc)
            continue
        block = kernel.regions[0].block
        if _peer_signal(kernel) is not None or any(op.name in WRITES_PEERS for op in kernel.walk()):
            allocs = [i for i, op in enumerate(block.ops) if op.name == "tlx.alloc_barriers"]
            if allocs:
                where, loc = allocs[-1] + 1, block.ops[allocs[-1]].loc
                _created(block, where, "tlx.fence_mbarrier_init_cluster", loc)
                _created(block, where + 1, "tlx.cluster_barrier", loc)
        end = block.terminator
        _created(block, len(block.ops) - (end is not None), "tlx.cluster_barrier", end.loc if end else kernel.loc)
    return module


@dataclass(frozen=True)
class InsertClusterSyncs(Pass):
    """The cluster barriers a cluster kernel needs.  Run with the frontend (``compiler.frontend_passes``)."""
    name = "cluster-syncs"

    def run(self, module: Module, options=None) -> Module:
        return insert_cluster_syncs(module)
