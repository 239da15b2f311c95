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

A block-scaled MMA (``attrs.scale_formats``, ``tlx.async_dot_scaled``) reads its two scale
buffers at issue as well (asynchronous reads, like the operands) and multiplies each
32-element K block of a row of A / a column of B by 2^(scale - 127) before the product (a
power of two: exact in float32 unless it overflows, as on the hardware's wide product).

A 2-CTA MMA (``attrs.two_ctas``) is issued by the even CTA of the pair for both:
at issue it reads A and B in both CTAs (B is the two CTAs' halves side by side,
the even CTA's first), at completion it writes each CTA's accumulator rows
(its A rows times the whole B) and arrives on each barrier operand in both
CTAs.  The odd CTA's op does nothing, as does its ``tcgen05_commit(...,
two_ctas=True)``; the even CTA's commit arrives in both CTAs.  A read of the odd
CTA's operands before they landed, or without a barrier ordering its load
before the issue, is the usual uninitialized-read or race error.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import Location
from ..ir.ops.tcgen05 import SCALE_BLOCK, scale_offset
from .cluster import peer_barrier, peer_view
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


def _pair(ctx, op) -> int | None:
    """The odd CTA of this CTA's pair, or None when this CTA is the odd one (it issues nothing)."""
    rank = ctx.program.cta_rank
    cluster = ctx.program.cluster
    if cluster is None or cluster.size % 2:
        raise ctx.error(op, f"a 2-CTA tcgen05 op (two_ctas=True) in {ctx.label}, which does not run in a cluster "
                            f"of an even number of CTAs")
    return None if rank % 2 else rank + 1


def _scale_factors(ctx, op, view: SharedView, rows: int, k: int, what: str) -> np.ndarray:
    """[rows, k] float32 factors 2^(s - 127) of the ue8m0 scales in ``view`` (the cuBLAS
    layout, ``ir/ops/tcgen05.py: scale_offset``), each repeated over its 32 K elements; a
    scale of 255 is NaN (e8m0 has no other special value)."""
    data = np.asarray(read_written(ctx, op, view, f"async_dot_scaled in task '{ctx.task_name}' reads {what} from "
                                                  f"{view.label}", "scale by garbage")).reshape(-1)
    r = np.arange(rows)[:, None]
    kb = np.arange(k // SCALE_BLOCK)[None, :]
    codes = data[scale_offset(r, kb, view.shape[2])].astype(np.int32)
    factors = np.ldexp(np.float32(1), codes - 127).astype(np.float32)
    factors[codes == 255] = np.nan
    return np.repeat(factors, SCALE_BLOCK, axis=1)


@impl("tlx.tcgen05_mma")
def tcgen05_mma(ctx, op, a: SharedView, b: SharedView, acc: SharedView, use_acc, *rest):
    yield PREEMPT                    # another task may act between a wait and this issue
    has_pred = bool(op.attrs.get("has_pred"))
    if has_pred and not bool(rest[0]):
        return                       # predicated off: no MMA, no arrivals
    rest = rest[has_pred:]
    scales = rest[len(rest) - 2:] if op.attrs.get("scale_formats") else ()
    barriers = list(rest[:op.attrs.get("num_barriers", 0)])
    ctas = [(a, b, acc)]
    if op.attrs.get("two_ctas"):
        odd = _pair(ctx, op)
        if odd is None:
            return                   # the even CTA issues the pair's MMA
        ctas.append(tuple(peer_view(ctx, op, v, odd) for v in (a, b, acc)))
        barriers += [peer_barrier(ctx, op, bar, odd) for bar in barriers]
    queue = _queue(ctx)
    accumulate = bool(use_acc)
    accesses, operands = [], []
    for a_v, b_v, acc_v in ctas:
        if accumulate and acc_v.unwritten_index() is not None and not queue.writes.get(acc_v.key):
            read_written(ctx, op, acc_v, f"async_dot in task '{ctx.task_name}' accumulates (use_acc) into "
                                         f"{acc_v.label}", "accumulate onto garbage")
        accesses += [ctx.races.begin_async_read(v.key, v.label, "tcgen05 MMA operand read", op.loc, ctx.task_name,
                                                v.region(), queue=queue) for v in (a_v, b_v)]
        accesses.append(ctx.races.begin_async_write(acc_v.key, acc_v.label, "tcgen05 MMA accumulator write",
                                                    op.loc, ctx.task_name, acc_v.region(), queue=queue))
        a32 = np.asarray(read_operand(ctx, op, a_v, "A"), dtype=np.float32)
        b32 = np.asarray(read_operand(ctx, op, b_v, "B"), dtype=np.float32)
        if scales:                   # block-scaled: each 32-element K block of a row / column times 2^(s - 127)
            accesses += [ctx.races.begin_async_read(v.key, v.label, "tcgen05 MMA scale read", op.loc,
                                                    ctx.task_name, v.region(), queue=queue) for v in scales]
            (m, k), n = a32.shape, b32.shape[1]
            a32 = a32 * _scale_factors(ctx, op, scales[0], m, k, "A_scale")
            b32 = b32 * _scale_factors(ctx, op, scales[1], n, k, "B_scale").T
        operands.append((a32, b32))
    # B of the pair: the CTAs' halves side by side (the even CTA's columns first)
    b32 = np.concatenate([b_part for _, b_part in operands], axis=1)
    products = []
    for (a32, _), (_, _, acc_v) in zip(operands, ctas):
        b_used = b32
        if op.attrs.get("input_precision") == "tf32":
            a32, b_used = round_tf32(a32), round_tf32(b32)
        products.append(np.matmul(a32, b_used))
        queue.writes[acc_v.key] = queue.writes.get(acc_v.key, 0) + 1
    sync = bool(op.attrs.get("sync"))

    def complete():
        for product, (_, _, acc_v) in zip(products, ctas):
            result = product
            if accumulate:
                result = product + read_written(ctx, op, acc_v, f"async_dot in task '{ctx.task_name}' accumulates "
                                                                f"into {acc_v.label}", "accumulate onto garbage")
            acc_v.array()[...] = to_storage(result.astype(np.float32), acc_v.element)
            acc_v.mark_written()
            queue.writes[acc_v.key] -= 1
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
    bars = [bar]
    if op.attrs.get("two_ctas"):
        odd = _pair(ctx, op)
        if odd is None:
            yield PREEMPT
            return                   # the even CTA commits for the pair
        bars.append(peer_barrier(ctx, op, bar, odd))
    _post(ctx, queue, f"tcgen05_commit to {bar.label}", lambda: _arrive(ctx, queue, bars), op.loc)
    yield PREEMPT
