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
* ``cluster_barrier`` blocks until every thread of every CTA of the cluster
  has reached it (``barrier.cluster.arrive`` + ``wait``, TLX's semantics).
  Arrivals count threads: outside ``tlx.async_tasks`` the task ``main`` stands
  for all the CTA's threads, inside it a task for its own warps, so a kernel
  whose every task runs one ``cluster_barrier`` (TLX's ``test_explicit_cluster
  _sync_ws``) completes it, and one where a task skips it deadlocks naming the
  tasks that wait.  A CTA outside a cluster launch is a cluster of one.
* ``remote_shmem_store`` writes the peer's copy of the buffer at once;
  ``async_remote_shmem_store`` / ``async_remote_shmem_copy`` land later (an
  async event, as TMA does) and then complete their bytes on the barrier at
  the same place in the peer CTA, where ``barrier_expect_bytes`` posted them.
* ``fence_mbarrier_init_cluster`` orders nothing here: barriers exist from
  their allocation on, and a peer that signals one not yet allocated is an
  error naming the missing cluster barrier.
"""
from __future__ import annotations

import numpy as np

from ..ir.mbarrier import MBarrier
from .registry import impl
from .scheduler import PREEMPT, Blocked
from .shared import SharedView, read_written
from .values import to_storage


class Cluster:
    """The CTAs of one cluster (``programs[rank]``) and its cluster barrier."""

    def __init__(self, dims: tuple[int, int, int]):
        self.dims = dims
        self.programs: list = []
        self.generation = 0          # cluster barriers completed so far
        self.arrived = 0             # threads at the cluster barrier in progress

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


def _static_allocation(program, origin) -> None:
    """Shared memory is allocated for the whole kernel (its layout is fixed at compile time),
    so a peer's buffer exists before the peer's ``local_alloc`` runs (TLX's multi-CTA
    layernorm sends into a buffer its peers allocate later in program order); the peer's
    ``local_alloc`` then finds this one (``shared.local_alloc``), its bytes still unwritten
    or holding what landed.  Aliased allocations (``reuse=``) are not created ahead."""
    from .shared import SharedBuffer
    t = origin.results[0].type
    buffer = SharedBuffer(origin.results[0].name_hint or t.storage, t.shape, t.element, t.num, None)
    buffer.storage, buffer.origin, buffer.cta = t.storage, origin, program.cta_rank
    program.state.setdefault(t.storage, {})[origin] = buffer


def peer_view(ctx, op, view: SharedView, rank) -> SharedView:
    """The same bytes as ``view`` in CTA ``rank``'s copy of the buffer."""
    program = peer(ctx, op, rank)
    if program is ctx.program:
        return view
    origin, storage = view.buffer.origin, view.buffer.storage
    if program.state.get(storage, {}).get(origin) is None and not origin.operands:
        _static_allocation(program, origin)
    buffer = _allocated(ctx, op, program, storage, origin, f"buffer {view.label}")
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


def cta_threads(op, warp_size: int) -> int:
    """Threads of one CTA of ``op``'s kernel: its ``num_warps``, or the warps of all the
    tasks of its ``tlx.async_tasks`` (the default task has ``num_warps`` of them)."""
    kernel = op
    while kernel.parent_op() is not None:
        kernel = kernel.parent_op()
    warps = int(kernel.attrs.get("num_warps", 4))
    for inner in kernel.walk():
        if inner.name == "tlx.async_tasks":
            warps = max(warps, sum(task.warps for task in inner.task_infos))
    return warps * warp_size


class _LoneCta:
    """The cluster barrier state of a CTA launched without a cluster (a cluster of one)."""

    def __init__(self):
        self.generation = 0
        self.arrived = 0
        self.size = 1


@impl("tlx.cluster_barrier")
def cluster_barrier(ctx, op):
    cluster = ctx.program.cluster or ctx.program.state.setdefault("lone_cluster", _LoneCta())
    expected = cluster.size * cta_threads(op, ctx.warp_size)
    inside_task = ctx.task_name != "main" and not ctx.task_name.startswith("main ")
    threads = ctx.warps * ctx.warp_size if inside_task else cta_threads(op, ctx.warp_size)
    generation = cluster.generation
    cluster.arrived += threads
    if cluster.arrived > expected:
        raise ctx.error(op, f"tlx.cluster_barrier() in {ctx.label}, task '{ctx.task_name}': {cluster.arrived} "
                            f"thread arrivals for a barrier of {expected} threads ({cluster.size} CTA(s) x "
                            f"{expected // cluster.size}); every thread must arrive once per cluster barrier")
    if cluster.arrived == expected:
        cluster.arrived = 0
        cluster.generation += 1
        yield PREEMPT
        return
    yield Blocked(f"waits at the cluster barrier ({cluster.arrived} of {expected} threads of "
                  f"{cluster.size} CTA(s) arrived; every task of every CTA must reach it)",
                  lambda: cluster.generation > generation, op.loc)


# -- distributed shared memory (ir/ops/cluster_mem.py) ------------------------------------------
@impl("tlx.remote_shmem_store")
def remote_shmem_store(ctx, op, view: SharedView, value, rank):
    target = peer_view(ctx, op, view, rank)
    ctx.races.write(target.key, target.label, "remote store", op.loc, ctx.task_name, target.region())
    target.array()[...] = np.broadcast_to(to_storage(value, target.element), target.shape)
    target.mark_written()
    yield PREEMPT


def _land_remote(ctx, op, target: SharedView, barrier: MBarrier, what: str, data_of):
    """Post the asynchronous write of ``data_of()`` into ``target``, completing its bytes on
    the peer's ``barrier`` when it lands."""
    access = ctx.races.begin_async_write(target.key, target.label, what, op.loc, ctx.task_name, target.region())
    nbytes = target.nbytes

    def land():
        target.array()[...] = data_of()
        target.mark_written()
        ctx.races.signal(access, barrier)
        barrier.complete_tx(nbytes)

    ctx.scheduler.post(f"{what} into {target.label}", land, op.loc)


@impl("tlx.async_remote_shmem_store")
def async_remote_shmem_store(ctx, op, view: SharedView, value, rank, bar: MBarrier):
    target, barrier = peer_view(ctx, op, view, rank), peer_barrier(ctx, op, bar, rank)
    data = np.array(np.broadcast_to(to_storage(value, target.element), target.shape))   # the registers now
    _land_remote(ctx, op, target, barrier, "remote st.async", lambda: data)
    yield PREEMPT


@impl("tlx.async_remote_shmem_copy")
def async_remote_shmem_copy(ctx, op, dst: SharedView, src: SharedView, rank, bar: MBarrier):
    read_written(ctx, op, src, "tlx.async_remote_shmem_copy reads its source", "copy garbage to the peer")
    target, barrier = peer_view(ctx, op, dst, rank), peer_barrier(ctx, op, bar, rank)
    # the bulk copy reads the source when it runs, not when it is issued
    _land_remote(ctx, op, target, barrier, "remote bulk copy", lambda: np.array(src.array()).reshape(target.shape))
    yield PREEMPT
