"""Warp-group tasks.

``tlx.async_tasks`` has one region per task (replicas expanded), in warp
order; ``attrs.tasks`` lists per region ``[name, num_warps, registers,
replica]`` (registers 0 = no ``setmaxnreg``), and ``attrs.task_lines`` the line
of each region's ``with tlx.async_task(...)`` (a name is for display only).
``AsyncTasksOp.task_infos`` gives one typed ``TaskInfo`` per region (its warps,
budget and place), which the code generator, the checker and the interpreter
read; ``register_budgets`` is the one rule for setmaxnreg budgets.  The first region is the
default task, which runs on the kernel's ``num_warps``.  Regions read values
defined before the op (scalars, pointers, buffers, barriers; never register
tensors) and end without a terminator.

Warps are laid out in region order (``warp_ranges``).  With register budgets
(``setmaxnreg``, which works on whole warp groups of 4 warps), every task starts
at a warp group and occupies whole warp groups, as TLX pads them: a 1-warp task
with ``registers=N`` gets a warp group of its own, whose 3 padding warps only take
part in the register reallocation.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core import Operation
from ..types import i32, i64

# The register budgets of setmaxnreg (one rule for the code generator and the checker).
REGISTER_FILE = 65536
MAX_TASKS = 6            # replicas included: the code generator gives each task a named barrier, ids 1..6


@dataclass(frozen=True)
class TaskInfo:
    """One region of a ``tlx.async_tasks``: what it asks for and where it runs."""
    index: int               # the region's index (the default task is 0)
    name: str                # for display: "default", "task<line>", "task<line>.<replica>"
    warps: int               # the warps it runs on
    registers: int           # the setmaxnreg budget it asks for (0: none)
    replica: int
    start: int               # its first warp
    span: int                # the warps it occupies: whole warp groups with register budgets
    line: int | None         # the line of its ``with tlx.async_task(...)`` (None: not recorded)


def launch_registers(total_threads: int) -> int:
    """Registers per thread a one-block-per-SM kernel that uses setmaxnreg starts with."""
    return min(255, REGISTER_FILE // total_threads) // 8 * 8


def default_task_registers(tasks, pool: int) -> int:
    """The budget of a default task given none: what the other tasks leave of
    the pool, per thread, in steps of 8, at most 256 (TLX's donation model).
    ``tasks`` are (name, warps, registers, replica), the default task first."""
    used = sum(regs * warps * 32 for _, warps, regs, _ in tasks[1:])
    left = (pool - used) // (tasks[0][1] * 32)
    return min(256, left // 8 * 8)


class AsyncTasksOp(Operation):
    name = "tlx.async_tasks"
    num_regions = None

    @property
    def tasks(self) -> list[tuple[str, int, int, int]]:
        return [tuple(t) for t in self.attrs.get("tasks", ())]

    @property
    def warp_ranges(self) -> list[tuple[int, int]]:
        return warp_ranges(self.tasks)

    @property
    def task_infos(self) -> list[TaskInfo]:
        lines = list(self.attrs.get("task_lines", ())) or [None] * len(self.tasks)
        return [TaskInfo(index, name, warps, registers, replica, start, span, line)
                for index, ((name, warps, registers, replica), (start, span), line)
                in enumerate(zip(self.tasks, self.warp_ranges, lines))]

    def verify(self):
        tasks = self.tasks
        if len(tasks) != len(self.regions) or not tasks:
            raise self.error(f"expected one task description per region, got {len(tasks)} for "
                             f"{len(self.regions)} regions")
        for name, warps, registers, replica in tasks:
            if warps < 1:
                raise self.error(f"task '{name}' has {warps} warps")
        lines = self.attrs.get("task_lines")
        if lines is not None and (len(lines) != len(tasks) or not all(isinstance(n, int) for n in lines)):
            raise self.error(f"expected one line number per task in 'task_lines', got {lines!r}")
        suspend = self.attrs.get("suspend_ns")
        if suspend is not None and (not isinstance(suspend, int) or suspend < 0):
            raise self.error(f"expected a non-negative 'suspend_ns', got {suspend!r}")


class ThreadIdOp(Operation):
    """``threadIdx.{x,y,z}`` as i32."""

    name = "tlx.thread_id"

    def verify(self):
        if self.result.type != i32 or self.attrs.get("axis") not in (0, 1, 2):
            raise self.error("expected axis 0..2 and an i32 result")


class Clock64Op(Operation):
    """The SM's 64-bit cycle counter (not a synchronization point)."""

    name = "tlx.clock64"

    def verify(self):
        if self.result.type != i64:
            raise self.error("expected an i64 result")


WARP_GROUP = 4


def warp_ranges(tasks) -> list[tuple[int, int]]:
    """(first warp, warps occupied) of each task of an ``attrs.tasks`` list: packed in order,
    and with register budgets (any non-default task has one) padded to whole warp groups."""
    budgets = any(t[2] for t in list(tasks)[1:])
    ranges, start = [], 0
    for _name, warps, _registers, _replica in tasks:
        span = -(-warps // WARP_GROUP) * WARP_GROUP if budgets else warps
        ranges.append((start, span))
        start += span
    return ranges


def register_budgets(tasks: list[TaskInfo]) -> tuple[dict[int, int], tuple[str, str] | None]:
    """The setmaxnreg budget of every task (region index -> registers per thread; empty when no
    task asks for one), or the rule the budgets break, as (check name, message).

    The budgets must fit the pool the block starts with: ptxas gives a kernel that uses
    setmaxnreg ``launch_registers(threads)`` per thread, and setmaxnreg only redistributes
    that pool (a larger request blocks forever in ``setmaxnreg.inc``); padding warps hold
    registers too.  A default task without a budget gets what the others leave, at most 256,
    and at least the 24 setmaxnreg allows.  (Each budget's own range, multiples of 8 from 24
    to 256, is checked where it is written: the frontend and ``check/resources.py``.)"""
    if not any(t.registers for t in tasks[1:]):
        return {}, None
    threads = 32 * sum(t.span for t in tasks)
    per_thread = launch_registers(threads)
    pool = per_thread * threads
    used = sum(t.registers * t.span * 32 for t in tasks[1:])
    budgets = [t.registers for t in tasks]
    if not budgets[0]:
        left = (pool - used) // (tasks[0].span * 32)
        budgets[0] = default_task_registers([(t.name, t.span, t.registers, t.replica) for t in tasks], pool)
        if budgets[0] < 24:
            detail = ", ".join(f"'{t.name}': {t.span * 32} threads x {t.registers}" for t in tasks[1:])
            return {}, ("resource.register-pool",
                        f"the non-default tasks' register budgets ({detail}) use {used} of the {pool} registers "
                        f"the block starts with ({threads} threads x {per_thread}), leaving the default task "
                        f"{max(left, 0)} per thread, fewer than the 24 setmaxnreg allows")
    total = sum(b * t.span * 32 for b, t in zip(budgets, tasks))
    if total > pool:
        detail = ", ".join(f"'{t.name}': {t.span * 32} threads x {b}" for b, t in zip(budgets, tasks))
        return {}, ("resource.register-pool",
                    f"the tasks' register budgets add up to {total} registers, more than the {pool} the block "
                    f"starts with ({threads} threads x {per_thread}); setmaxnreg can only redistribute those "
                    f"({detail})")
    return {t.index: b for t, b in zip(tasks, budgets)}, None
