"""Rules for warp-group tasks (``ir/ops/task.py``).

``tlx.async_tasks`` spawns one coroutine per region (replicas are separate
regions), each running on its own context: it sees every value defined
before the op, and knows its warp count and first thread id (warps are laid
out in region order, the default task first).  The task executing the op
waits until every task has finished, then continues after it; the join
orders the cp.async copies the tasks retired.

Diagnostics name a task by its label (``TaskInfo.label``) and, when replicated, its
replica: ``task 'task@48.1' (replica 1)``.
"""
from __future__ import annotations

import numpy as np

from .executor import run_block
from .registry import impl


def _title(task) -> str:
    return f"task '{task.label}'" + (f" (replica {task.replica})" if task.replica is not None else "")


@impl("tlx.async_tasks")
def async_tasks(ctx, op):
    infos = op.task_infos
    names = [info.label for info in infos]
    tasks = []
    where = "" if ctx.program.cluster is None else f" of CTA {ctx.program.cta_rank}"
    for info, region in zip(infos, op.regions):
        # padding warps of a task with a register budget run nothing (ir/ops/task.py: warp_ranges)
        child = ctx.fork(info.label, warps=info.warps, first_thread=ctx.first_thread + info.start * ctx.warp_size)
        tasks.append(ctx.scheduler.spawn(child.task_name, run_block(child, region.block), op.loc,
                                         _title(info) + where))
    yield ctx.scheduler.join(tasks, op.loc)
    ctx.races.order_tasks([ctx.program.task_name(name) for name in names])


@impl("tlx.thread_id")
def thread_id(ctx, op):
    """At tile level a task is one sequence of ops: its thread id along x is
    that of its first thread (the leader TLX's arrives use); 0 along y and z.
    Code run thread by thread (``divergence.py``) sees its thread's id."""
    if op.attrs["axis"] != 0:
        return np.int32(0)
    return np.int32(ctx.first_thread + (ctx.thread or 0))


@impl("tlx.clock64")
def clock64(ctx, op):
    """A per-program counter that increases on every read (not a time)."""
    state = ctx.program.state
    state["clock64"] = state.get("clock64", 0) + 1
    return np.int64(state["clock64"])
