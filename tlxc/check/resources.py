"""Resource checks of warp-specialized kernels: how many tasks, warps and
registers (``setmaxnreg`` budgets) the tasks of a ``tlx.async_tasks`` ask for.

The rules are codegen's (the budgets: ``ir/ops/task.py: register_budgets``, applied once by
the ``place-tasks`` pass, whose verdict both read), checked here so that ``tlxc check``
reports them without generating code:

* at most ``MAX_TASKS`` tasks, replicas included (codegen gives each its own
  named barrier, ids 1..6);
* at most 32 warps (1024 threads) per block;
* a register budget is a multiple of 8 from 24 to 256, given for every
  non-default task or for none;
* with budgets, setmaxnreg works per warp group (4 warps): the default task
  takes whole warp groups, smaller tasks share one whose budget is their largest
  request (as Triton's AllocateWarpGroups; ``ir/ops/task.py: register_budgets``),
  and the warps padding the last warp group hold registers too;
* the budgets fit the registers the block starts with: ptxas gives a kernel
  that uses setmaxnreg ``min(255, 65536 / threads)`` registers per thread
  (rounded down to 8), and setmaxnreg can only redistribute that pool; a
  default task without a budget gets what the others leave, at most 256.

Shared memory is checked by ``allocate-shared`` (``passes/shared_memory.py``).
"""
from __future__ import annotations

from ..errors import Location
from ..ir.core import Operation
from ..ir.ops.task import MAX_TASKS, warp_size
from .findings import Finding

MAX_WARPS = 32


def task_locations(ws: Operation) -> list[Location | None]:
    """The ``with tlx.async_task(...)`` of each region (replicas share it: ``TaskInfo.loc``), or the
    ``tlx.async_tasks`` op's own location."""
    if ws.loc is None:
        return [None] * len(ws.tasks)
    return [loc if loc is not None else ws.loc for loc in ws.task_locs]


def check_tasks(kernel: Operation) -> list[Finding]:
    findings = []
    for op in kernel.walk():
        if op.name == "tlx.async_tasks":
            if warp_size(kernel) != 32:      # AMD (wave64): TLX warp-specializes only gfx1250
                return [Finding("warp specialization (tlx.async_tasks) is not supported on AMD gfx942 / gfx950: "
                                "AMD kernels overlap work with warp-pipeline stages (tlx.warp_pipeline_stage)",
                                op.loc, check="resource.tasks", kind="resource")]
            findings += _check(op)
    return findings


def _check(ws: Operation) -> list[Finding]:
    tasks = ws.task_infos
    locs = task_locations(ws)
    if len(tasks) > MAX_TASKS:
        return [Finding(f"the kernel has {len(tasks)} async tasks (replicas included); tlxc supports at most "
                        f"{MAX_TASKS}, one task-local named barrier each (ids 1..6)", ws.loc, check="resource.tasks",
                        kind="resource")]
    warps = sum(t.span for t in tasks)
    if warps > MAX_WARPS:
        detail = ", ".join(f"'{t.label}': {t.warps}" + (f" (padded to {t.span})" if t.span != t.warps else "")
                           for t in tasks)
        return [Finding(f"the tasks add up to {warps} warps ({warps * 32} threads; {detail}); a block holds at most "
                        f"{MAX_WARPS} warps ({MAX_WARPS * 32} threads)", ws.loc, check="resource.threads",
                        kind="resource")]
    findings = []
    for t, loc in zip(tasks, locs):
        if t.registers and (not 24 <= t.registers <= 256 or t.registers % 8):
            findings.append(Finding(f"task '{t.label}' asks for {t.registers} registers per thread; budgets are "
                                    f"multiples of 8 from 24 to 256", loc, check="resource.registers",
                                    kind="resource"))
    others = list(zip(tasks[1:], locs[1:]))
    given = [(t, loc) for t, loc in others if t.registers]
    missing = [(t, loc) for t, loc in others if not t.registers]
    if given and missing:
        (with_task, with_loc), (without_task, without_loc) = given[0], missing[0]
        findings.append(Finding(f"task '{without_task.label}' has no register budget but task '{with_task.label}' "
                                f"has one: give every non-default task a budget (registers=...) or none of them",
                                without_loc,
                                [(f"task '{with_task.label}' asks for {with_task.registers} registers here",
                                  with_loc)],
                                check="resource.registers", kind="resource"))
    if findings or not given:
        return findings
    return _budgets(ws)


def _budgets(ws: Operation) -> list[Finding]:
    problem = ws.budget_problem      # place-tasks' verdict by register_budgets (ir/ops/task.py), as codegen reads it
    if problem is None:
        return []
    check, message = problem
    return [Finding(message, ws.loc, check=check, kind="resource")]
