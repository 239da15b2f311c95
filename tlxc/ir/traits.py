"""Op traits: what the passes, the checker and the code generators ask of an op, declared once
on its class (``Operation.traits``) instead of in lists of op names restated per file.

``has_trait(op, VIEW)`` takes an op or an op name (a name no op registers has no traits).
"""
from __future__ import annotations

from .core import OP_REGISTRY, Operation

VIEW = "view"                 # a view of a shared-memory (or tensor-memory) buffer or barrier array of this CTA
REMOTE_VIEW = "remote_view"   # a view of a peer CTA's buffer or barrier (clusters)
ALLOCATION = "allocation"     # allocates shared memory: buffers, barriers
ELEMENTWISE = "elementwise"   # each result element from the same-position operand elements (a layout passes through)
SIDE_EFFECT = "side_effect"   # writes memory, prints, traps, syncs or ends a region: kept when its results are unused
# computes its result from its operands (and the program id) alone, cheaply and within each thread's
# registers: no memory, no synchronization, no region, so a pass may recompute, move or drop it (every
# arith.* and math.* op, program ids, index ranges, splats, broadcasts, reshapes, transposes, pointer
# offsets, hints).  Pure ops that compute much (tl.dot, tl.sort, reductions) or exchange data between
# threads (tl.convert_layout, tl.join, tl.split, tl.flip) are not marked.
PURE = "pure"
CONTROL_FLOW = "control_flow"  # a structured loop or branch (scf.for, scf.while, scf.if): runs its regions
TERMINATOR = "terminator"      # ends a region (scf.yield, scf.condition, tl.return): no code of its own
NAMED_BARRIER = "named_barrier"  # bar.sync / bar.arrive on a named barrier (an id and a thread count)
BULK_STORE = "bulk_store"      # one thread's asynchronous copy out of shared memory (TMA, cp.async.bulk)
ASYNC_DOT = "async_dot"        # the asynchronous warpgroup MMA (wgmma) and its wait
TCGEN05_MMA = "tcgen05_mma"    # a tcgen05 MMA or the commit of its work to a barrier


def has_trait(op: Operation | str, trait: str) -> bool:
    if isinstance(op, str):
        cls = OP_REGISTRY.get(op)
        return cls is not None and trait in cls.traits
    return trait in op.traits


__all__ = ["ALLOCATION", "ASYNC_DOT", "BULK_STORE", "CONTROL_FLOW", "ELEMENTWISE", "NAMED_BARRIER", "PURE",
           "REMOTE_VIEW", "SIDE_EFFECT", "TCGEN05_MMA", "TERMINATOR", "VIEW", "has_trait"]
