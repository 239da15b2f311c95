"""Thread-block clusters on the interpreter (``ir/ops/cluster.py``).

The CTAs of one cluster run together: their tasks share one ``Scheduler``
(so a wait in one CTA can be satisfied by another) and one ``RaceTracker``
(so a multicast into a peer's slot that its MMA still reads is a race, and a
peer's remote arrive orders what it released).  Each CTA keeps its own shared
memory and barriers; a peer's copy of an allocation is found through the
allocating op (``Program.state["smem"]`` / ``["barriers"]``).

* ``remote_view(bar, r)`` is a ``RemoteBarrier``: CTA r's barrier at the same
  place.  Arrivals on it count on that barrier; waiting on it is rejected by
  the frontend.
* ``cluster_barrier`` blocks until every CTA of the cluster has reached it
  (one arrival per CTA: it belongs outside ``tlx.async_tasks``, where every
  thread of the CTA runs).
* ``fence_mbarrier_init_cluster`` orders nothing here: barriers exist from
  their allocation on, and a peer that signals one not yet allocated is an
  error naming the missing cluster barrier.
"""
from __future__ import annotations

import numpy as np

from .barrier import MBarrier
from .registry import impl
from .scheduler import PREEMPT, Blocked
from .shared import SharedView


class Cluster:
    """The CTAs of one cluster (``programs[rank]``) and its cluster barrier."""

    def __init__(self, dims: tuple[int, int, int]):
        self.dims = dims
        self.programs: list = []
        self.generation = 0          # cluster barriers completed so far
        self.arrived = 0             # CTAs at the cluster barrier in progress

    @property
    def size(self) -> int:
        return len(self.programs)


def peer(ctx, op, rank) -> object:
    cluster = ctx.program.cluster
    r = int(rank)
    if cluster is None:
        raise ctx.error(op, f"CTA rank {r} names a peer CTA, but {ctx.label} does not run in a cluster "
                            f"(launch with ctas_per_cga=(x, y, z))")
    if not 0 <= r < cluster.size:
        raise ctx.error(op, f"CTA rank {r} is out of range in {ctx.label}: its cluster has {cluster.size} CTAs")
    return cluster.programs[r]


def _allocated(ctx, op, program, table: str, origin, what: str):
    found = program.state.get(table, {}).get(origin)
    if found is None:
        raise ctx.error(op, f"{ctx.label} reaches {what} of CTA {program.cta_rank} of its cluster before that CTA "
                            f"allocated it: a tlx.cluster_barrier() after the allocations (tlxc adds one for "
                            f"remote arrives and multicasts) orders them")
    return found


def peer_barrier(ctx, op, bar: MBarrier, rank) -> MBarrier:
    """The barrier at the place of ``bar`` in CTA ``rank``."""
    program = peer(ctx, op, rank)
    if program is ctx.program:
        return bar
    return _allocated(ctx, op, program, "barriers", bar.origin, f"barrier {bar.label}")[bar.index]


def peer_view(ctx, op, view: SharedView, rank) -> SharedView:
    """The same bytes as ``view`` in CTA ``rank``'s copy of the buffer."""
    program = peer(ctx, op, rank)
    if program is ctx.program:
        return view
    buffer = _allocated(ctx, op, program, "smem", view.buffer.origin, f"buffer {view.label}")
    label = view.label.replace(f" of CTA {ctx.program.cta_rank}", f" of CTA {program.cta_rank}")
    return SharedView(buffer, view.slot, view.offset, view.shape, view.strides, view.element, label)


class RemoteBarrier:
    """``remote_view(bar, rank)``: arrivals go to ``target``."""

    __slots__ = ("target",)

    def __init__(self, target: MBarrier):
        self.target = target


@impl("tlx.remote_view")
def remote_view(ctx, op, bar: MBarrier, rank):
    return RemoteBarrier(peer_barrier(ctx, op, bar, rank))


@impl("tlx.cluster_cta_rank")
def cluster_cta_rank(ctx, op):
    return np.int32(ctx.program.cta_rank)


@impl("tlx.cluster_size")
def cluster_size(ctx, op):
    cluster = ctx.program.cluster
    return np.int32(1 if cluster is None else cluster.size)


@impl("tlx.fence_mbarrier_init_cluster")
def fence_mbarrier_init_cluster(ctx, op):
    return None


@impl("tlx.cluster_barrier")
def cluster_barrier(ctx, op):
    cluster = ctx.program.cluster
    if ctx.task_name != "main" and not ctx.task_name.startswith("main "):
        raise ctx.error(op, f"tlx.cluster_barrier() in task '{ctx.task_name}': every thread of every CTA of "
                            f"the cluster must reach it, so it belongs outside tlx.async_tasks")
    if cluster is None or cluster.size == 1:
        yield PREEMPT
        return
    generation = cluster.generation
    cluster.arrived += 1
    if cluster.arrived == cluster.size:
        cluster.arrived = 0
        cluster.generation += 1
    yield Blocked(f"waits at the cluster barrier for {cluster.size} CTAs",
                  lambda: cluster.generation > generation, op.loc)

