"""Warp-group tasks.

``tlx.async_tasks`` has one region per task (replicas expanded), in warp
order; ``attrs.tasks`` lists per region ``[name, num_warps, registers,
replica]`` (registers 0 = no ``setmaxnreg``).  The first region is the
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

from ..core import Operation
from ..types import i32, i64

# The register budgets of setmaxnreg (one rule for the code generator and the checker).
REGISTER_FILE = 65536


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

    def verify(self):
        tasks = self.tasks
        if len(tasks) != len(self.regions) or not tasks:
            raise self.error(f"expected one task description per region, got {len(tasks)} for "
                             f"{len(self.regions)} regions")
        for name, warps, registers, replica in tasks:
            if warps < 1:
                raise self.error(f"task '{name}' has {warps} warps")
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
