"""Rules for mbarriers, named barriers and fences (``ir/ops/barrier.py``).

mbarriers are ``MBarrier`` objects (``barrier.py``), TLX semantics:

* ``alloc_barriers`` makes ``num`` fresh barriers (phase 0 in progress),
  named after the IR value (``full = tlx.alloc_barriers(...)`` → ``'full'[i]``);
* ``barrier_arrive(bar, count)`` is one arrival of ``count`` by the task that
  executes it: the interpreter runs a task's ops once for the whole warp group
  (TLX's leader thread), so one call counts ``count``; on a per-thread (warp)
  barrier every thread arrives: ``warps * 32 * count``;
* ``barrier_expect_bytes`` is one arrival plus expected transaction bytes
  (cp.async does not signal barriers; only TMA-style copies will complete
  them);
* ``barrier_wait(bar, p)`` passes once the phase of parity ``p`` has
  completed (``p`` is taken modulo 2); with a false ``pred`` it does nothing.

Arrivals release the cp.async copies the task has retired (``races.py``);
a passing wait orders what was released into the phases it observed.

Named barriers (``bar.sync id, n`` / ``bar.arrive id, n``) count threads: each
task execution contributes its ``warps * 32``.  When ``n`` threads have
arrived the barrier completes, its waiters continue and it resets.
"""
from __future__ import annotations

from ..errors import BarrierError
from ..ir.mbarrier import MBarrier, alloc_barriers
from .cluster import RemoteBarrier
from .registry import impl
from .scheduler import PREEMPT, Blocked
from .values import as_index


def _predicate(op, values) -> bool:
    return bool(values[-1]) if op.attrs.get("has_pred") else True


@impl("tlx.alloc_barriers")
def alloc(ctx, op):
    t = op.results[0].type
    name = op.results[0].name_hint or "mbarrier"
    barriers = alloc_barriers(t.num, op.attrs["arrive_count"], name, t.per_thread)
    ctx.program.state.setdefault("barriers", {})[op] = barriers     # where peers of a cluster find them
    for bar in barriers:
        bar.origin = op
        if ctx.program.cluster is not None:
            bar.cta = ctx.program.cta_rank
    return barriers


def _arrive(ctx, op, bar: MBarrier, count: int) -> None:
    if count > bar.pending:
        raise BarrierError(
            f"too many arrivals on barrier {bar.label} in phase {bar.parity} in {ctx.label}: task "
            f"'{ctx.task_name}' arrives {count} time(s) but only {bar.pending} of {bar.arrive_count} arrivals "
            f"are pending{_arrival_hint(ctx, bar, count)}", op.loc)
    ctx.races.release_task(ctx.task_name, bar, op.loc)
    bar.arrive(count, op.loc)


def _arrival_hint(ctx, bar: MBarrier, count: int) -> str:
    if bar.per_thread:
        return (f" (a warp barrier counts every thread: this task's {ctx.warps} warp(s) x {ctx.warp_size} threads; "
                f"alloc_warp_barrier's num_warps must match the arriving task)")
    return ""


@impl("tlx.barrier_arrive")
def barrier_arrive(ctx, op, bar, *pred):
    if not _predicate(op, pred):
        return
    if isinstance(bar, RemoteBarrier):
        bar = bar.target
    count = op.attrs["count"]
    if bar.per_thread:
        count *= ctx.warps * ctx.warp_size
    _arrive(ctx, op, bar, count)
    yield PREEMPT


@impl("tlx.barrier_expect_bytes")
def barrier_expect_bytes(ctx, op, bar: MBarrier, *pred):
    if not _predicate(op, pred):
        return
    bar.expect_tx(op.attrs["bytes"])
    _arrive(ctx, op, bar, 1)
    yield PREEMPT


@impl("tlx.barrier_complete_tx")
def barrier_complete_tx(ctx, op, bar: MBarrier):
    bar.complete_tx(op.attrs["bytes"])
    yield PREEMPT


def _satisfying_phase(bar: MBarrier, parity: int) -> int:
    """Absolute index of the completed phase a passing ``wait(bar, parity)``
    observes (-1: the barrier's initial state, for parity 1)."""
    last = bar.completed_phases - 1
    if last % 2 != parity:
        last -= 1
    return last


@impl("tlx.barrier_wait")
def barrier_wait(ctx, op, bar: MBarrier, phase, *pred):
    if not _predicate(op, pred):
        return
    parity = as_index(phase) & 1
    if not bar.phase_done(parity):
        yield Blocked.on_barrier(bar, parity, op.loc)
    ctx.races.on_wait(bar, parity)
    _note_repeated_wait(ctx, op, bar, parity)


def _note_repeated_wait(ctx, op, bar: MBarrier, parity: int) -> None:
    """A task whose wait passes on the very phase its previous wait on that
    barrier observed has usually lost track of the phase (an index that
    wrapped without flipping it); legal, so only a note for a later deadlock."""
    seen = ctx.program.state.setdefault("observed_phases", {})
    key = (ctx.task_name, id(bar))
    observed = _satisfying_phase(bar, parity)
    if seen.get(key) == observed:
        ctx.scheduler.hint(
            f"task '{ctx.task_name}' passed this wait for phase {parity} of barrier {bar.label} again on the "
            f"same completed phase as its previous wait on that barrier (no new phase of parity {parity} "
            f"completed in between): a ring index that wrapped without flipping its phase?", op.loc)
    seen[key] = observed


# -- named barriers -------------------------------------------------------------------------


class NamedBarrier:
    """A hardware named barrier (``bar.sync`` / ``bar.arrive``) of one program."""

    def __init__(self, ident: int):
        self.ident = ident
        self.expected: int | None = None      # the thread count of this round
        self.arrived = 0
        self.generation = 0                   # completed rounds
        self.participants: list[tuple[str, int, str]] = []   # (task, threads, "bar.sync"/"bar.arrive")

    @property
    def label(self) -> str:
        return f"named barrier {self.ident}"

    def state(self) -> str:
        who = ", ".join(f"task '{task}' ({threads}, {how})" for task, threads, how in self.participants)
        return f"at {self.arrived} of {self.expected} threads" + (f": {who}" if who else "")


def _named(ctx, op, ident, threads) -> tuple[NamedBarrier, int, int]:
    ident, threads = as_index(ident), as_index(threads)
    if not 0 <= ident <= 15:
        raise ctx.error(op, f"named barrier ids are 0..15, got {ident} in {ctx.label}")
    if threads <= 0 or threads % ctx.warp_size:
        raise ctx.error(op, f"a named barrier's thread count must be a positive multiple of {ctx.warp_size}, got {threads} "
                            f"in {ctx.label}")
    table = ctx.program.state.setdefault("named_barriers", {})
    barrier = table.get(ident)
    if barrier is None:
        barrier = table[ident] = NamedBarrier(ident)
    return barrier, ident, threads


def _join_named(ctx, op, barrier: NamedBarrier, threads: int, how: str) -> int:
    """Add this task's threads; complete the round when all have arrived.
    Returns the generation the caller belongs to."""
    mine = ctx.warps * ctx.warp_size
    if barrier.expected is None:
        barrier.expected = threads
    elif barrier.expected != threads:
        first = barrier.participants[0][0] if barrier.participants else "?"
        raise BarrierError(
            f"mismatched thread counts on {barrier.label} in {ctx.label}: task '{ctx.task_name}' uses "
            f"{threads} ({how}) but task '{first}' arrived with {barrier.expected}", op.loc)
    if barrier.arrived == 0 and mine > threads and mine % threads == 0:
        # bar.sync counts warps: a task with more threads than the count fills the barrier
        # by itself, its warps completing mine // threads generations one after another
        # (TLX's 32-thread barrier waited by a 4-warp task); its last warp's is the caller's
        ctx.races.order_tasks([ctx.task_name])
        barrier.generation += mine // threads
        barrier.expected = None
        return barrier.generation - 1
    if barrier.arrived + mine > threads:
        raise BarrierError(
            f"too many threads on {barrier.label} in {ctx.label}: task '{ctx.task_name}' adds {mine} "
            f"({ctx.warps} warp(s)) to {barrier.arrived} already arrived, for a count of {threads}", op.loc)
    generation = barrier.generation
    barrier.arrived += mine
    barrier.participants.append((ctx.task_name, mine, how))
    if barrier.arrived == threads:
        ctx.races.order_tasks(task for task, _, _ in barrier.participants)
        barrier.generation += 1
        barrier.expected = None
        barrier.arrived = 0
        barrier.participants = []
    return generation


@impl("tlx.named_barrier_wait")
def named_barrier_wait(ctx, op, ident, threads):
    barrier, ident, threads = _named(ctx, op, ident, threads)
    generation = _join_named(ctx, op, barrier, threads, "bar.sync")
    if barrier.generation == generation:
        yield Blocked(f"waits at {barrier.label} (bar.sync, {threads} threads)",
                      lambda: barrier.generation > generation, op.loc, barrier)
    else:
        yield PREEMPT


@impl("tlx.named_barrier_arrive")
def named_barrier_arrive(ctx, op, ident, threads):
    barrier, ident, threads = _named(ctx, op, ident, threads)
    _join_named(ctx, op, barrier, threads, "bar.arrive")
    yield PREEMPT


@impl("tlx.fence")
def fence(ctx, op):
    """Memory ordering between proxies and scopes is not modelled (the
    interpreter's memory is sequentially consistent)."""
