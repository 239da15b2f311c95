"""TaskInfo (ir/ops/task.py): one typed description per region of a tlx.async_tasks -- warps,
budget, place and the line of its ``with`` -- that the code generator, the checker and the
interpreter read, and ``register_budgets``, the one rule for setmaxnreg budgets (issue 20 item 3)."""
from __future__ import annotations

import inspect

from test_padded_budgets import small_tasks

from tlxc.compiler import frontend
from tlxc.frontend.specialize import specialization_from_types
from tlxc.ir.ops.task import TaskInfo, register_budgets


def _async_tasks(kfn):
    module = frontend(kfn, specialization_from_types(kfn, {}, {"BLOCK": 128}))
    return next(op for op in module.kernels[0].walk() if op.name == "tlx.async_tasks")


def test_task_infos_carry_place_budget_and_line():
    infos = _async_tasks(small_tasks).task_infos
    lines, first = inspect.getsourcelines(small_tasks.fn)
    with_lines = [first + i for i, text in enumerate(lines) if "with tlx.async_task(" in text]
    # with budgets the larger task comes first (small tasks share a warp group: ir/ops/task.py)
    assert [t.line for t in infos] == [with_lines[0], with_lines[2], with_lines[1]]
    assert [(t.index, t.warps, t.registers, t.start, t.span) for t in infos] == \
        [(0, 4, 0, 0, 4), (1, 2, 56, 4, 2), (2, 1, 56, 6, 2)]
    assert infos[0].name == "default"


def test_place_tasks_writes_places_budgets_and_locations_names_hold_no_line():
    op = _async_tasks(small_tasks)
    lines, first = inspect.getsourcelines(small_tasks.fn)
    two_warps = first + next(i for i, text in enumerate(lines) if "num_warps=2" in text)
    # the frontend records requests and locations; place-tasks (passes/place_tasks.py) the places
    assert [t[0] for t in op.attrs["tasks"]] == ["default", None, None]
    assert op.attrs["task_places"] == ((0, 4, 256), (4, 2, 56), (6, 2, 56))
    assert "budget_problem" not in op.attrs
    task = op.task_infos[1]
    assert task.name is None and task.replica is None and task.budget == 56
    assert (task.loc.line, task.loc.file) == (two_warps, inspect.getsourcefile(small_tasks.fn))
    assert lines[two_warps - first][task.loc.col:].startswith("with tlx.async_task(")
    # a line is shown, never parsed: task@LINE in messages, task<LINE> in generated code
    assert (task.label, task.code_name) == (f"task@{two_warps}", f"task{two_warps}")
    replica = TaskInfo(2, None, 4, 0, 1, 8, 4, 0, task.loc)
    assert (replica.label, replica.base_label, replica.code_name) == \
        (f"task@{two_warps}.1", f"task@{two_warps}", f"task{two_warps}.1")


def test_place_tasks_records_a_budget_problem_for_the_checker_and_codegen():
    from tlxc.passes.place_tasks import place
    op = _async_tasks(small_tasks)
    op.attrs["tasks"] = tuple((name, warps, 256, replica) for name, warps, _, replica in op.attrs["tasks"])
    place(op)
    check, message = op.budget_problem      # 2 warp groups x 128 threads x 256 > 256 threads x 248
    assert check == "resource.register-pool" and f"'{op.task_infos[1].label}'" in message
    assert all(t.budget == 0 for t in op.task_infos)


def test_task_infos_need_place_tasks():
    import pytest

    from tlxc.errors import TlxcError
    op = _async_tasks(small_tasks)
    del op.attrs["task_places"]
    with pytest.raises(TlxcError, match="place-tasks"):
        _ = op.task_infos


def _task(index, warps, registers, start, span):
    return TaskInfo(index, "default" if index == 0 else f"t{index}", warps, registers, None, start, span, 0, None)


def test_register_budgets_fill_the_default_task_and_refuse_an_overfull_pool():
    # 384 threads start with 168 registers each: 64512 in all
    tasks = [_task(0, 4, 0, 0, 4), _task(1, 4, 240, 4, 4), _task(2, 4, 240, 8, 4)]
    budgets, problem = register_budgets(tasks)
    assert problem is None and budgets == {0: 24, 1: 240, 2: 240}
    assert register_budgets([_task(0, 4, 0, 0, 4), _task(1, 4, 0, 4, 4)]) == ({}, None)
    tasks = [_task(0, 4, 256, 0, 4), _task(1, 4, 256, 4, 4), _task(2, 4, 256, 8, 4)]
    budgets, (check, message) = register_budgets(tasks)
    assert budgets == {} and check == "resource.register-pool" and "add up to 98304 registers" in message
    tasks = [_task(0, 4, 0, 0, 4), _task(1, 4, 248, 4, 4), _task(2, 4, 248, 8, 4)]
    _, (check, message) = register_budgets(tasks)
    assert check == "resource.register-pool" and "fewer than the 24 setmaxnreg allows" in message

