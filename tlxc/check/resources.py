"""Resource checks of warp-specialized kernels: how many tasks, warps and
registers (``setmaxnreg`` budgets) the tasks of a ``tlx.async_tasks`` ask for.

The rules are codegen's (the budgets: ``ir/ops/task.py: register_budgets``, which both
apply), checked here so that ``tlxc check`` reports them without generating code:

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

import linecache

from ..errors import Location
from ..ir.core import Operation
from ..ir.ops.task import MAX_TASKS, REGISTER_FILE, register_budgets, warp_ranges  # noqa: F401
from .findings import Finding

MAX_WARPS = 32


def task_locations(ws: Operation) -> list[Location | None]:
    """The ``with tlx.async_task(...)`` line of each region (replicas share it; the frontend
    records them in ``attrs.task_lines``), or the ``tlx.async_tasks`` op's own location."""
    if ws.loc is None:
        return [None] * len(ws.attrs.get("tasks", ()))
    return [_with_location(ws.loc.file, t.line) if t.line is not None else ws.loc for t in ws.task_infos]


def _with_location(file: str, line: int) -> Location:
    text = linecache.getline(file, line)
    col = text.find("with") if "with" in text else 0
    return Location(file, line, max(col, 0))


def check_tasks(kernel: Operation) -> list[Finding]:
    findings = []
    for op in kernel.walk():
        if op.name == "tlx.async_tasks":
            findings += _check(op)
    return findings


def _check(ws: Operation) -> list[Finding]:
    tasks = [tuple(t) for t in ws.attrs.get("tasks", ())]
    locs = task_locations(ws)
    if len(tasks) > MAX_TASKS:
        return [Finding(f"the kernel has {len(tasks)} async tasks (replicas included); tlxc supports at most "
                        f"{MAX_TASKS}, one task-local named barrier each (ids 1..6)", ws.loc, check="resource.tasks",
                        kind="resource")]
    ranges = warp_ranges(tasks)
    warps = sum(span for _, span in ranges)
    if warps > MAX_WARPS:
        detail = ", ".join(f"'{name}': {w}" + (f" (padded to {span})" if span != w else "")
                           for (name, w, *_), (_, span) in zip(tasks, ranges))
        return [Finding(f"the tasks add up to {warps} warps ({warps * 32} threads; {detail}); a block holds at most "
                        f"{MAX_WARPS} warps ({MAX_WARPS * 32} threads)", ws.loc, check="resource.threads",
                        kind="resource")]
    findings = []
    for (name, _, regs, _), loc in zip(tasks, locs):
        if regs and (not 24 <= regs <= 256 or regs % 8):
            findings.append(Finding(f"task '{name}' asks for {regs} registers per thread; budgets are multiples of "
                                    f"8 from 24 to 256", loc, check="resource.registers", kind="resource"))
    others = list(zip(tasks[1:], locs[1:]))
    given = [(t, loc) for t, loc in others if t[2]]
    missing = [(t, loc) for t, loc in others if not t[2]]
    if given and missing:
        (with_name, *_), with_loc = given[0]
        (without_name, *_), without_loc = missing[0]
        findings.append(Finding(f"task '{without_name}' has no register budget but task '{with_name}' has one: give "
                                f"every non-default task a budget (registers=...) or none of them", without_loc,
                                [(f"task '{with_name}' asks for {given[0][0][2]} registers here", with_loc)],
                                check="resource.registers", kind="resource"))
    if findings or not given:
        return findings
    return _budgets(ws)


def _budgets(ws: Operation) -> list[Finding]:
    _, problem = register_budgets(ws.task_infos)      # the rule the code generator applies (ir/ops/task.py)
    if problem is None:
        return []
    check, message = problem
    return [Finding(message, ws.loc, check=check, kind="resource")]
