"""2-CTA tcgen05 MMA misuse (``async_dot(..., two_ctas=True)``, ``frontend/tlx_rules.py``).

The even CTA of a pair issues the MMA for both CTAs: at issue the tensor cores read the odd
CTA's A rows and B half in the odd CTA's shared memory.  Nothing orders the odd CTA's writes of
them (its TMA loads completing on its own barriers, its ``local_store``) before that issue
unless the issuing task first waits on a barrier the other CTA arrives on
(``barrier_arrive(..., remote_cta_rank=...)`` or a ``remote_view``: TLX's tutorials have each
CTA's MMA task arrive on CTA 0's barrier once its loads landed, and CTA 0 wait for both), or
passes a ``tlx.cluster_barrier()`` after its own operand writes.  ``pair.unordered-peer-operands``
(error) is the first 2-CTA MMA of a task with neither before it in program order (a static
check: whether the wait covers the right phase is the barrier protocol's business,
``tlxc check --run`` on the interpreter).
The cluster barrier tlxc inserts after the barrier initialisation (``passes/cluster_syncs.py``)
orders no operand, so it does not count."""
from __future__ import annotations

from ..ir.core import Operation
from ..ir.ops.task import task_region
from ..ir.views import view_roots
from .findings import Finding


def _remotely_arrived(kernel: Operation) -> set[int]:
    """ids of the barrier allocations some CTA arrives on through a remote view."""
    found = set()
    for op in kernel.walk():
        if op.name == "tlx.barrier_arrive":
            owner = getattr(op.operands[0], "owner", None)
            through_remote = False
            while owner is not None and owner.name in ("tlx.remote_view", "tlx.local_view"):
                through_remote |= owner.name == "tlx.remote_view"
                owner = getattr(owner.operands[0], "owner", None)
            if through_remote:
                found.update(id(root) for root in view_roots(op.operands[0]))
    return found


def _orders_peer(ops: list[Operation], remote: set[int]) -> bool:
    previous = None
    for op in ops:
        if op.name == "tlx.barrier_wait" and any(id(r) in remote for r in view_roots(op.operands[0])):
            return True
        if op.name == "tlx.cluster_barrier" and (previous is None or previous.name != "tlx.fence_mbarrier_init_cluster"):
            return True
        previous = op
    return False


def check_pairs(kernel: Operation) -> list[Finding]:
    mmas = [op for op in kernel.walk() if op.name == "tlx.tcgen05_mma" and op.attrs.get("two_ctas")]
    if not mmas:
        return []
    remote = _remotely_arrived(kernel)
    findings, seen = [], set()
    for mma in mmas:
        region = task_region(mma)
        key = id(region)
        if key in seen:
            continue
        seen.add(key)
        if region is not None:
            ops = [inner for op in region.ops for inner in op.walk()]
        else:
            ops = [o for o in kernel.walk() if o is not kernel and task_region(o) is None]
        ops = ops[:next(i for i, o in enumerate(ops) if o is mma)]      # what runs before it (the closing
        if not _orders_peer(ops, remote):                                # cluster barrier orders nothing here)
            findings.append(Finding(
                "a 2-CTA async_dot (two_ctas=True) is issued by the even CTA for the pair and reads the odd CTA's "
                "operands in the odd CTA's shared memory, but this task never waits on a barrier the other CTA "
                "arrives on (or passes a tlx.cluster_barrier()): nothing orders the odd CTA's loads or stores of its "
                "A rows and B half before the issue; have each CTA arrive on the even CTA's barrier once its operands "
                "are in place (tlx.barrier_arrive(bar, 1, remote_cta_rank=...)) and wait on it before the async_dot",
                mma.loc, [], "pair.unordered-peer-operands"))
    return findings
