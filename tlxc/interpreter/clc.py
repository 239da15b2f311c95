"""Cluster launch control on the interpreter (``ir/ops/clc.py``).

A launch hands its programs (clusters: their first CTA) out of one ``WorkQueue``:
the launch loop takes the next program to start, and ``tlx.clc_try_cancel`` takes
the next one *instead of* the loop (the hardware cancels a cluster that has not
started; the program that cancelled it does its work).  When none is left the
request fails and the answer decodes to -1.  Without a queue (a program run on its
own, e.g. by a trace) every request fails, which the hardware also allows.

The answer lands asynchronously (an event, as TMA data does) in the response
buffer as four i32 (1, x, y, z) or (0, 0, 0, 0) and completes its 16 bytes on the
full barrier; with ``multicast`` CTA 0's request writes every CTA's copy of the
buffer and completes every CTA's barrier, and the other CTAs' ops issue nothing.
"""
from __future__ import annotations

import numpy as np

from ..ir.mbarrier import MBarrier
from .cluster import _land_remote, peer_barrier, peer_view
from .registry import impl
from .scheduler import PREEMPT
from .shared import SharedView, read_written


class WorkQueue:
    """The programs of a launch not started yet, in launch order (an iterator of first-CTA ids)."""

    def __init__(self, programs):
        self._programs = iter(programs)
        self.cancelled: list[tuple[int, int, int]] = []

    def take(self):
        """The next program to start, or None."""
        return next(self._programs, None)

    def cancel(self):
        """try_cancel: the next program, which the launch then never starts; None if none is left."""
        pid = self.take()
        if pid is not None:
            self.cancelled.append(pid)
        return pid


@impl("tlx.clc_try_cancel")
def clc_try_cancel(ctx, op, view: SharedView, bar: MBarrier):
    multicast = op.attrs["multicast"]
    if multicast and ctx.program.cta_rank != 0:
        yield PREEMPT                        # CTA 0 asks for the whole cluster
        return
    queue = getattr(ctx.program.memory, "clc_queue", None)
    pid = queue.cancel() if queue is not None else None
    answer = np.array([0, 0, 0, 0] if pid is None else [1, *pid], dtype=np.int32)
    cluster = ctx.program.cluster
    if cluster is None:
        places = [(view, bar)]
    else:
        ranks = range(cluster.size) if multicast else [ctx.program.cta_rank]
        places = [(peer_view(ctx, op, view, r), peer_barrier(ctx, op, bar, r)) for r in ranks]
    for target, barrier in places:
        _land_remote(ctx, op, target, barrier, "clusterlaunchcontrol.try_cancel", lambda: answer.copy())
    yield PREEMPT


@impl("tlx.clc_query")
def clc_query(ctx, op, view: SharedView):
    words = read_written(ctx, op, view, "tlx.clc_query reads the try_cancel answer",
                         "decode garbage (wait on the full barrier first)")
    return np.int32(words[1] if words[0] else -1)
