"""Rules for Blackwell's tensor-core MMA (``tlx.tcgen05_mma``, ``tlx.tcgen05_commit``).

Tensor memory is modelled like shared memory (``shared.py``: a
``SharedBuffer`` per ``local_alloc(..., storage=tmem)``, storage ``"tmem"``),
so ``local_load`` / ``local_store`` of it are checked for uninitialized reads
and races the same way.

A tcgen05 MMA is asynchronous.  At issue it reads its shared operands (they
must have been written, and no unordered asynchronous write may still be
landing in them) and computes ``A @ B`` (inputs exact in their dtype, tf32
rounding for f32, float32 accumulation); it records an asynchronous read of
each operand slot and an asynchronous write of the accumulator with the race
tracker, and posts an event.  The events of one task complete in issue order
(the hardware runs a thread's tcgen05 ops in order): completing one adds the
product into the accumulator (or overwrites it, ``use_acc`` false) and then
arrives once on each of its ``mBarriers``.  ``tcgen05_commit(bar)`` posts an
arrival on ``bar`` that completes after every MMA the task issued before it.
An arrival made at completion carries the accesses of every MMA completed so
far (``races.signal``), so a wait that sees its phase orders them: the
producer may then refill the operand slots, the epilogue read the
accumulator.  Anything earlier is a ``RaceError`` naming both lines.  A
synchronous MMA (no barriers) completes before the task goes on; its
accesses are then the task's own, released by its next barrier arrive like a
retired cp.async copy.  MMAs of one task on one accumulator never race each
other (``AsyncAccess.queue``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import Location
from .mma_async import read_operand
from .registry import impl
from .scheduler import PREEMPT
from .shared import SharedView, read_written
from .values import round_tf32, to_storage


@dataclass(eq=False)
class Tcgen05Queue:
    """One task's tcgen05 ops in flight, oldest first, and the accesses of the
    completed MMAs that no barrier wait has ordered yet."""
    events: list = field(default_factory=list)
    completed: list = field(default_factory=list)
    writes: dict = field(default_factory=dict)      # accumulator slot -> MMAs in flight writing it


def _queue(ctx) -> Tcgen05Queue:
    return ctx.task_state("tcgen05", Tcgen05Queue)


def _post(ctx, queue: Tcgen05Queue, name: str, complete, loc: Location | None):
    """Post ``complete`` to run after every earlier tcgen05 event of the task."""
    previous = queue.events[-1] if queue.events else None

    def done():
        queue.events.remove(event)
        complete()

    event = ctx.scheduler.post(name, done, loc, ready=lambda: previous is None or previous.done)
    queue.events.append(event)
    return event


def _arrive(ctx, queue: Tcgen05Queue, barriers) -> None:
    """Arrive once on each barrier, carrying the completed MMAs' accesses into its phase."""
    queue.completed = [a for a in queue.completed if not a.ordered]
    for bar in barriers:
        for access in queue.completed:
            ctx.races.signal(access, bar)
        bar.arrive(1)


@impl("tlx.tcgen05_mma")
def tcgen05_mma(ctx, op, a: SharedView, b: SharedView, acc: SharedView, use_acc, *rest):
    yield PREEMPT                    # another task may act between a wait and this issue
    has_pred = bool(op.attrs.get("has_pred"))
    if has_pred and not bool(rest[0]):
        return                       # predicated off: no MMA, no arrivals
    barriers = rest[1:] if has_pred else rest
    queue = _queue(ctx)
    accumulate = bool(use_acc)
    if accumulate and acc.unwritten_index() is not None and not queue.writes.get(acc.key):
        read_written(ctx, op, acc, f"async_dot in task '{ctx.task_name}' accumulates (use_acc) into "
                                   f"{acc.label}", "accumulate onto garbage")
    accesses = [ctx.races.begin_async_read(v.key, v.label, "tcgen05 MMA operand read", op.loc, ctx.task_name,
                                           v.region(), queue=queue) for v in (a, b)]
    write = ctx.races.begin_async_write(acc.key, acc.label, "tcgen05 MMA accumulator write", op.loc,
                                        ctx.task_name, acc.region(), queue=queue)
    accesses.append(write)
    a32 = np.asarray(read_operand(ctx, op, a, "A"), dtype=np.float32)
    b32 = np.asarray(read_operand(ctx, op, b, "B"), dtype=np.float32)
    if op.attrs.get("input_precision") == "tf32":
        a32, b32 = round_tf32(a32), round_tf32(b32)
    product = np.matmul(a32, b32)
    queue.writes[acc.key] = queue.writes.get(acc.key, 0) + 1
    sync = bool(op.attrs.get("sync"))

    def complete():
        result = product
        if accumulate:
            result = product + read_written(ctx, op, acc, f"async_dot in task '{ctx.task_name}' accumulates "
                                                          f"into {acc.label}", "accumulate onto garbage")
        acc.array()[...] = to_storage(result.astype(np.float32), acc.element)
        acc.mark_written()
        queue.writes[acc.key] -= 1
        queue.completed.extend(accesses)
        if sync:
            for access in accesses:          # the issuing task waited: its own, released by its next arrive
                ctx.races.retire(access, op.loc)
        _arrive(ctx, queue, barriers)

    event = _post(ctx, queue, f"tcgen05 MMA into {acc.label}", complete, op.loc)
    if sync:
        _drain(ctx, queue, event)
        yield PREEMPT


def _drain(ctx, queue: Tcgen05Queue, last) -> None:
    """Complete the task's tcgen05 events up to ``last``, in order."""
    while not last.done:
        ctx.scheduler.finish(queue.events[0])


@impl("tlx.tcgen05_commit")
def tcgen05_commit(ctx, op, bar):
    queue = _queue(ctx)
    _post(ctx, queue, f"tcgen05_commit to {bar.label}", lambda: _arrive(ctx, queue, [bar]), op.loc)
    yield PREEMPT
