"""Warp-group tasks.

``tlx.async_tasks`` has one region per task (replicas expanded), in warp
order.  The frontend records what each task asks for: ``attrs.tasks`` lists per
region ``[name, num_warps, registers, replica]`` (``name`` is ``"default"`` for
the default task and ``none`` for the others, which TLX does not name;
``registers`` 0 = no ``setmaxnreg``; ``replica`` ``none`` unless the task is
replicated), and ``attrs.task_locs`` the ``[line, column]`` of each region's
``with tlx.async_task(...)`` (in the file of the op's own location).  The
``place-tasks`` pass (``passes/place_tasks.py``) then writes where each task
runs: ``attrs.task_places``, per region ``[first warp, warps occupied, register
budget]``, and ``attrs.budget_problem`` (``[check, message]``) when the budgets
break a rule.  ``AsyncTasksOp.task_infos`` gives one typed ``TaskInfo`` per region
(its warps, place, budget and location), which the code generator, the checker
and the interpreter read; ``register_budgets`` is the one rule for setmaxnreg
budgets, applied by ``place-tasks`` only.  A task is shown as ``default``,
``task@LINE`` or ``task@LINE.REPLICA`` (``TaskInfo.label``); its line lives in
its location, never in a name.  The first region is the
default task, which runs on the kernel's ``num_warps``.  Regions read values
defined before the op (scalars, pointers, buffers, barriers; never register
tensors) and end without a terminator.

Warps are laid out in region order (``warp_ranges``), packed.  With register
budgets (``setmaxnreg``, which works on whole warp groups of 4 warps) the default
task occupies whole warp groups, the frontend puts the other tasks largest first
(so 4-warp tasks stay aligned to warp groups) and small tasks share warp groups,
as Triton's ``AllocateWarpGroups`` packs TLX's partitions: a warp group's budget
is the largest request of the tasks in it (``register_budgets``), and the last
task's span covers the warps that pad the last warp group, which only take part
in the register reallocation.  (Each small task padded to a warp group of its
own held 4x its registers: TLX's Blackwell GEMMs ask 232 for two 1-warp tasks,
which left their epilogue 40 and ptxas failed with C7600.)
"""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import Location
from ..core import Operation
from ..types import i32, i64

# The register budgets of setmaxnreg (one rule for the code generator and the checker).
REGISTER_FILE = 65536
MAX_TASKS = 6            # replicas included: the code generator gives each task a named barrier, ids 1..6


@dataclass(frozen=True)
class TaskInfo:
    """One region of a ``tlx.async_tasks``: what it asks for, where it runs and where it is written."""
    index: int               # the region's index (the default task is 0)
    name: str | None         # the task's own name: "default" for the default task, None for the others
    warps: int               # the warps it runs on
    registers: int           # the setmaxnreg budget it asks for (0: none)
    replica: int | None      # its replica index when the task is replicated, else None
    start: int               # its first warp
    span: int                # the warps it occupies: its own, the default task's rounded up to whole warp groups
    #                          with register budgets, the last task's up to the end of the last warp group
    budget: int              # the setmaxnreg value its warps run (its warp group's, ``register_budgets``; 0: none)
    loc: Location | None     # its ``with tlx.async_task(...)`` (None: not recorded)

    @property
    def line(self) -> int | None:
        return self.loc.line if self.loc is not None else None

    @property
    def base_label(self) -> str:
        """How messages name the task, replicas together: ``default`` or ``task@LINE``."""
        if self.name is not None:
            return self.name
        return f"task@{self.line}" if self.line is not None else f"task#{self.index}"

    @property
    def label(self) -> str:
        """How messages name this region: ``default``, ``task@LINE``, ``task@LINE.REPLICA``."""
        return self.base_label if self.replica is None else f"{self.base_label}.{self.replica}"

    @property
    def code_name(self) -> str:
        """The task's name in generated code (comments, debug-build trap messages): ``default``,
        ``task<LINE>`` or ``task<LINE>.<REPLICA>``, the spelling generated code has always carried
        (generated code stays byte-identical; messages use ``label``)."""
        base = self.name if self.name is not None else \
            f"task{self.line}" if self.line is not None else f"task_{self.index}"
        return base if self.replica is None else f"{base}.{self.replica}"


def warp_size(kernel: Operation) -> int:
    """Lanes per warp of the kernel's target: 32 on NVIDIA, 64 on AMD (a wave), recorded by the
    frontend as the kernel's ``warp_size`` attribute where it is not 32."""
    return int(kernel.attrs.get("warp_size", 32))


def task_region(op: Operation):
    """The ``tlx.async_tasks`` region (one task's body) that ``op`` sits in, or None outside warp
    specialization (the kernel's own body)."""
    node = op
    while node is not None:
        block = node.parent
        region = getattr(block, "parent", None) if block is not None else None
        owner = getattr(region, "parent", None) if region is not None else None
        if owner is None:
            return None
        if owner.name == "tlx.async_tasks":
            return region
        node = owner
    return None


def launch_registers(total_threads: int) -> int:
    """Registers per thread a one-block-per-SM kernel that uses setmaxnreg starts with."""
    return min(255, REGISTER_FILE // total_threads) // 8 * 8


class AsyncTasksOp(Operation):
    name = "tlx.async_tasks"
    num_regions = None

    @property
    def tasks(self) -> list[tuple[str | None, int, int, int | None]]:
        """What each region asks for: (name, warps, registers, replica), as the frontend wrote it."""
        return [tuple(t) for t in self.attrs.get("tasks", ())]

    @property
    def task_locs(self) -> list[Location | None]:
        """The ``with tlx.async_task(...)`` of each region (None where not recorded)."""
        locs = self.attrs.get("task_locs")
        if not locs or self.loc is None:
            return [None] * len(self.tasks)
        return [Location(self.loc.file, line, col) for line, col in locs]

    @property
    def task_infos(self) -> list[TaskInfo]:
        """One ``TaskInfo`` per region; the ``place-tasks`` pass must have run."""
        places = self.attrs.get("task_places")
        if places is None:
            raise self.error("the tasks have no places yet: the place-tasks pass (passes/place_tasks.py) "
                             "writes them after the frontend")
        return [TaskInfo(index, name, warps, registers, replica, start, span, budget, loc)
                for index, ((name, warps, registers, replica), (start, span, budget), loc)
                in enumerate(zip(self.tasks, places, self.task_locs))]

    @property
    def budget_problem(self) -> tuple[str, str] | None:
        """The rule the tasks' register budgets break, as (check name, message), written by
        ``place-tasks`` (``register_budgets``); None when they fit."""
        problem = self.attrs.get("budget_problem")
        return tuple(problem) if problem is not None else None

    def verify(self):
        tasks = self.tasks
        if len(tasks) != len(self.regions) or not tasks:
            raise self.error(f"expected one task description per region, got {len(tasks)} for "
                             f"{len(self.regions)} regions")
        for index, (name, warps, registers, replica) in enumerate(tasks):
            if warps < 1:
                raise self.error(f"task {index} has {warps} warps")
            if index == 0 and name != "default" or not (name is None or isinstance(name, str)):
                raise self.error(f"task {index}: expected the name 'default' (first region), a string or none, "
                                 f"got {name!r}")
            if replica is not None and (not isinstance(replica, int) or replica < 0):
                raise self.error(f"task {index}: expected a replica index or none, got {replica!r}")
        for key, width in (("task_locs", 2), ("task_places", 3)):
            rows = self.attrs.get(key)
            if rows is not None and (len(rows) != len(tasks) or
                                     not all(len(r) == width and all(isinstance(n, int) for n in r) for r in rows)):
                raise self.error(f"expected one [{', '.join(['int'] * width)}] per task in '{key}', got {rows!r}")
        problem = self.attrs.get("budget_problem")
        if problem is not None and (len(problem) != 2 or not all(isinstance(p, str) for p in problem)):
            raise self.error(f"expected 'budget_problem' = [check, message], got {problem!r}")
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
    """(first warp, warps occupied) of each task of an ``attrs.tasks`` list: packed in order;
    with register budgets (any non-default task has one) the default task and the block end
    on whole warp groups (the last task's span takes the padding warps)."""
    tasks = list(tasks)
    budgets = any(t[2] for t in tasks[1:])
    ranges, start = [], 0
    for index, (_name, warps, _registers, _replica) in enumerate(tasks):
        last = index == len(tasks) - 1
        span = -(-(start + warps) // WARP_GROUP) * WARP_GROUP - start if budgets and (index == 0 or last) else warps
        ranges.append((start, span))
        start += span
    return ranges


def warp_groups(tasks: list[TaskInfo]) -> list[list[int]]:
    """The indices of the tasks whose warps are in each warp group [4g, 4g + 4)."""
    end = max(t.start + t.span for t in tasks)
    groups: list[list[int]] = [[] for _ in range(-(-end // WARP_GROUP))]
    for t in tasks:
        for g in range(t.start // WARP_GROUP, (t.start + t.warps - 1) // WARP_GROUP + 1):
            groups[g].append(t.index)
    return groups


def register_budgets(tasks: list[TaskInfo]) -> tuple[dict[int, int], tuple[str, str] | None]:
    """The setmaxnreg budget of every task (region index -> registers per thread; empty when no
    task asks for one), or the rule the budgets break, as (check name, message).  The budget
    of a task is its warp group's: the largest request of the tasks sharing the group (Triton's
    ``AllocateWarpGroups``); ``group_budgets`` gives them per warp group.

    The budgets must fit the pool the block starts with: ptxas gives a kernel that uses
    setmaxnreg ``launch_registers(threads)`` per thread, and setmaxnreg only redistributes
    that pool (a larger request blocks forever in ``setmaxnreg.inc``); padding warps hold
    registers too.  A default task without a budget gets what the others leave, at most 256,
    and at least the 24 setmaxnreg allows.  (Each budget's own range, multiples of 8 from 24
    to 256, is checked where it is written: the frontend and ``check/resources.py``.)"""
    groups, problem = group_budgets(tasks)
    if problem is not None or not groups:
        return {}, problem
    return {t.index: groups[t.start // WARP_GROUP] for t in tasks}, None


def group_budgets(tasks: list[TaskInfo]) -> tuple[list[int], tuple[str, str] | None]:
    """setmaxnreg value per warp group (empty when no task asks for a budget), or the rule
    the budgets break (see ``register_budgets``)."""
    if not any(t.registers for t in tasks[1:]):
        return [], None
    default = tasks[0]
    if default.warps % WARP_GROUP:
        return [], ("resource.registers",
                    f"the default task has {default.warps} warps: register reallocation (setmaxnreg) works on "
                    f"whole warp groups of 4 warps, so with register budgets it needs a multiple of 4")
    groups = warp_groups(tasks)
    for t in tasks[1:]:
        touched = range(t.start // WARP_GROUP, (t.start + t.warps - 1) // WARP_GROUP + 1)
        if len(touched) > 1 and any(len(groups[g]) > 1 for g in touched):
            return [], ("resource.registers",
                        f"task '{t.label}' ({t.warps} warps from warp {t.start}) shares a warp group with another "
                        f"task and reaches into the next one, so its warps would get two register budgets "
                        f"(setmaxnreg works per warp group)")
    threads = 32 * WARP_GROUP * len(groups)
    per_thread = launch_registers(threads)
    pool = per_thread * threads
    requests = [max(tasks[i].registers for i in members) if members else 0 for members in groups]
    ours = [g for g, members in enumerate(groups) if 0 in members]

    def describe(budgets, skip_default):
        return ", ".join(f"warps {WARP_GROUP * g}..{WARP_GROUP * g + 3} "
                         f"({', '.join(repr(tasks[i].label) for i in groups[g]) or 'padding'}): "
                         f"{WARP_GROUP * 32} threads x {b}"
                         for g, b in enumerate(budgets) if not (skip_default and g in ours))

    used = sum(b * WARP_GROUP * 32 for g, b in enumerate(requests) if g not in ours)
    default_regs = default.registers
    if not default_regs:
        left = (pool - used) // (len(ours) * WARP_GROUP * 32)
        default_regs = min(256, left // 8 * 8)
        if default_regs < 24:
            return [], ("resource.register-pool",
                        f"the non-default tasks' register budgets ({describe(requests, True)}) use {used} of the "
                        f"{pool} registers the block starts with ({threads} threads x {per_thread}), leaving the "
                        f"default task {max(left, 0)} per thread, fewer than the 24 setmaxnreg allows")
    budgets = [default_regs if g in ours else b for g, b in enumerate(requests)]
    total = sum(b * WARP_GROUP * 32 for b in budgets)
    if total > pool:
        return [], ("resource.register-pool",
                    f"the tasks' register budgets add up to {total} registers, more than the {pool} the block "
                    f"starts with ({threads} threads x {per_thread}); setmaxnreg can only redistribute those "
                    f"({describe(budgets, False)})")
    return budgets, None
