"""``place-tasks``: where each task of a ``tlx.async_tasks`` runs.

The frontend records what each task asks for (``attrs.tasks``: warps, register
budget, replica; ``attrs.task_locs``: its ``with`` statement) in warp order.  This
pass writes, per region, its first warp, the warps it occupies and the setmaxnreg
budget its warps run (``attrs.task_places``, read back as ``AsyncTasksOp.task_infos``),
by the rules of ``ir/ops/task.py``: ``warp_ranges`` (packed, warp groups padded with
register budgets) and ``register_budgets`` (a warp group's budget is its largest
request; the budgets fit the block's register pool).  Budgets that break a rule leave
every budget 0 and the rule in ``attrs.budget_problem``, which the checker reports
(``check/resources.py``) and the code generator refuses.

The compile driver runs it with the frontend (``compiler.frontend``), so the
interpreter, the checker and the code generator all read the same places.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Module
from ..ir.ops.task import TaskInfo, register_budgets, warp_ranges
from .manager import Pass


@dataclass(frozen=True)
class PlaceTasks(Pass):
    name = "place-tasks"

    def run(self, module: Module, options=None) -> Module:
        for kernel in module.kernels:
            for op in kernel.walk():
                if op.name == "tlx.async_tasks":
                    place(op)
        return module


def place(op) -> None:
    """Write ``task_places`` (and ``budget_problem``) on one ``tlx.async_tasks``."""
    ranges = warp_ranges(op.tasks)
    unbudgeted = [TaskInfo(index, name, warps, registers, replica, start, span, 0, loc)
                  for index, ((name, warps, registers, replica), (start, span), loc)
                  in enumerate(zip(op.tasks, ranges, op.task_locs))]
    budgets, problem = register_budgets(unbudgeted)
    op.attrs["task_places"] = tuple((start, span, budgets.get(index, 0))
                                    for index, (start, span) in enumerate(ranges))
    if problem is not None:
        op.attrs["budget_problem"] = tuple(problem)
    else:
        op.attrs.pop("budget_problem", None)


__all__ = ["PlaceTasks", "place"]
