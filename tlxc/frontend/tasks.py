"""``with tlx.async_tasks():`` in a kernel body: the ``with tlx.async_task(...)`` blocks, their
warps, register budgets and order (``warp_group_start_id``), and the building of each task's body
into its region of ``tlx.async_tasks`` (ir/ops/task.py), in warp order.  Where each task then runs
(first warp, warps occupied, setmaxnreg budget) is the ``place-tasks`` pass's (passes/place_tasks.py).  ``TaskStatements`` is the part of
``FunctionBuilder`` (frontend/build_ir.py) that handles them: a mixin, its methods use the
visitor's ``visit``, ``error``, ``vars`` and ``ctx``."""
from __future__ import annotations

import ast

from ..ir.core import Block, Region
from . import semantic as S
from .source import first_node
from .values import Tensor, unwrap


class TaskStatements:
    def visit_With(self, node):
        from ..language import tlx
        only = ("the only 'with' blocks a kernel may contain are 'with tlx.async_tasks():' (and, inside it, "
                "'with tlx.async_task(...):') and 'with tlx.warp_pipeline_stage(...):'")
        if len(node.items) != 1 or not isinstance(node.items[0].context_expr, ast.Call):
            raise self.error(only, node)
        call = node.items[0].context_expr
        fn = unwrap(self.visit(call.func))
        if fn is tlx.async_task:
            raise self.error("tlx.async_task must appear directly inside 'with tlx.async_tasks():'", call)
        if fn is tlx.warp_pipeline_stage:
            return self.warp_pipeline_stage(node, call)
        if fn is not tlx.async_tasks:
            raise self.error(only, node)
        if call.args:
            raise self.error("tlx.async_tasks() takes only keyword arguments", call.args[0])
        for kw in call.keywords:
            if kw.arg not in ("exclusive", "no_ending_cluster_sync", "mbarrier_try_wait_suspend_ns",
                              "warp_specialize"):
                raise self.error(f"tlx.async_tasks() got an unexpected keyword argument '{kw.arg}'", kw)
            if kw.arg == "warp_specialize" and unwrap(self.visit(kw.value)) is not True:
                # TLX's option; True is what tlxc always does (each task on its own warps)
                raise self.error("tlx.async_tasks(warp_specialize=...) must be True: tlxc always runs the tasks "
                                 "warp-specialized (running them one after another is not supported)", kw.value)
        if node.items[0].optional_vars is not None:
            raise self.error("tlx.async_tasks() does not bind a name ('as ...')", node.items[0].optional_vars)
        self.async_tasks(node, self.suspend_ns(call))

    def suspend_ns(self, call) -> int | None:
        """``mbarrier_try_wait_suspend_ns=``: None (no hint) or a non-negative constexpr int."""
        for kw in call.keywords:
            if kw.arg != "mbarrier_try_wait_suspend_ns":
                continue
            value = unwrap(self.visit(kw.value))
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2 ** 32:
                raise self.error(f"tlx.async_tasks(mbarrier_try_wait_suspend_ns=...) must be None or a compile-time "
                                 f"integer number of nanoseconds in [0, 2**32), got {value!r}", kw.value)
            return value
        return None

    def collect_tasks(self, stmts, tasks: list) -> None:
        """The ``with tlx.async_task(...)`` blocks of an async_tasks body, with
        ``if CONSTEXPR:`` guards resolved."""
        from ..language import tlx
        for stmt in stmts:
            if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
                continue
            if isinstance(stmt, ast.If):
                cond = unwrap(self.visit(stmt.test))
                if isinstance(cond, Tensor):
                    raise self.error("only compile-time 'if' conditions may guard async tasks", stmt.test)
                self.collect_tasks(stmt.body if cond else stmt.orelse, tasks)
                continue
            call = stmt.items[0].context_expr if isinstance(stmt, ast.With) and len(stmt.items) == 1 else None
            if not isinstance(call, ast.Call) or unwrap(self.visit(call.func)) is not tlx.async_task:
                raise self.error("only 'with tlx.async_task(...):' blocks (optionally under 'if CONSTEXPR:') may "
                                 "appear inside 'with tlx.async_tasks():'", stmt)
            tasks.append(self.task_description(call, stmt))

    def task_description(self, call: ast.Call, stmt) -> dict:
        args = [unwrap(self.visit(a)) for a in call.args]
        kwargs = {k.arg: unwrap(self.visit(k.value)) for k in call.keywords}
        for key in kwargs:
            if key not in ("num_warps", "num_regs", "registers", "replicate", "warp_group_start_id"):
                raise self.error(f"tlx.async_task() got an unexpected keyword argument '{key}'", call)
        for value in list(args) + list(kwargs.values()):
            if isinstance(value, Tensor):
                raise self.error("tlx.async_task() arguments must be compile-time constants", call)
        default = bool(args) and args[0] == "default"
        if args and not default:
            raise self.error(f"tlx.async_task's positional argument must be \"default\", got {args[0]!r}", call)
        if default and kwargs.get("num_warps") is not None:
            raise self.error("the default task runs on the kernel's num_warps; do not pass num_warps", call)
        warps = self.ctx.options.num_warps if default else kwargs.get("num_warps")
        if isinstance(warps, bool) or not isinstance(warps, int) or warps < 1:
            raise self.error(f"tlx.async_task needs num_warps=N (a positive integer), got {warps!r}", call)
        if not S.is_power_of_two(warps):    # layouts distribute a tensor over a power-of-two warp count
            raise self.error(f"a task's num_warps must be a power of two (1, 2, 4, 8, ...), got {warps}", call)
        regs = kwargs.get("registers") if kwargs.get("registers") is not None else kwargs.get("num_regs")
        if regs is not None and (not isinstance(regs, int) or regs % 8 or not 24 <= regs <= 256):
            raise self.error(f"a task's register budget must be a multiple of 8 from 24 to 256, got {regs!r}", call)
        replicate = kwargs.get("replicate", 1)
        if not isinstance(replicate, int) or replicate < 1:
            raise self.error(f"replicate must be a positive integer, got {replicate!r}", call)
        if stmt.items[0].optional_vars is not None:
            raise self.error("tlx.async_task(...) does not bind a name ('as ...')", stmt.items[0].optional_vars)
        start = kwargs.get("warp_group_start_id")
        if start is not None and (isinstance(start, bool) or not isinstance(start, int) or start < 0):
            raise self.error(f"warp_group_start_id must be a non-negative integer (the task's first warp), got "
                             f"{start!r}", call)
        # TLX tasks have no names: messages call one by its line (its location keeps it)
        label = "default" if default else f"task@{self.src.loc(stmt).line}"
        return {"label": label, "default": default, "warps": warps, "regs": regs or 0, "replicate": replicate,
                "body": stmt.body, "node": stmt, "start": start}

    def order_tasks(self, default: dict, others: list[dict], node) -> list[dict]:
        """The non-default tasks in warp order.  Without ``warp_group_start_id`` they
        follow the default task in source order; with it (given for all of them, or
        none, as TLX requires) the ranges ``[start, start + num_warps * replicate)``
        must not overlap each other or the default task's ``[0, num_warps)``, and
        must leave no unused warps between them (tlxc packs the tasks).  With register
        budgets and no placement, the largest tasks come first, so that 4-warp tasks stay
        aligned to warp groups and small ones share one (ir/ops/task.py, as Triton's
        AllocateWarpGroups)."""
        given = [t for t in others if t["start"] is not None]
        if not given:
            if any(t["regs"] for t in others):
                return sorted(others, key=lambda t: -t["warps"])
            return others
        if len(given) != len(others):
            missing = next(t for t in others if t["start"] is None)
            raise self.error(f"warp_group_start_id must be set for every non-default task or for none; task "
                             f"'{missing['label']}' has none but task '{given[0]['label']}' starts at warp "
                             f"{given[0]['start']}", missing["node"])

        budgets = any(t["regs"] for t in others)      # the default task then takes whole warp groups (ir/ops/task.py)

        def span(t):
            first = 0 if t["default"] else t["start"]
            warps = -(-t["warps"] // 4) * 4 if budgets and t["default"] else t["warps"]
            return first, first + warps * t["replicate"]

        placed = [default]
        for task in sorted(others, key=lambda t: t["start"]):
            lo, hi = span(task)
            for other in placed:
                olo, ohi = span(other)
                if lo < ohi and olo < hi:
                    raise self.error(f"overlapping warp ranges: task '{task['label']}' uses warps [{lo}, {hi}) and "
                                     f"task '{other['label']}' uses warps [{olo}, {ohi})", task["node"])
            end = span(placed[-1])[1]
            if lo != end:
                raise self.error(f"task '{task['label']}' starts at warp {lo}, leaving warps [{end}, {lo}) to no task; "
                                 f"tlxc packs the tasks without gaps (warp_group_start_id={end})", task["node"])
            placed.append(task)
        return placed[1:]

    def async_tasks(self, node, suspend_ns: int | None = None) -> None:
        tasks: list[dict] = []
        self.collect_tasks(node.body, tasks)
        defaults = [t for t in tasks if t["default"]]
        if len(defaults) != 1:
            raise self.error(f"tlx.async_tasks needs exactly one 'default' task, found {len(defaults)}", node)
        non_default = self.order_tasks(defaults[0], [t for t in tasks if not t["default"]], node)
        regs_given = [t["regs"] > 0 for t in non_default]
        if any(regs_given) and not all(regs_given):
            raise self.error("give every non-default task a register budget, or none of them", node)
        ordered = defaults + non_default
        if not non_default and ordered[0]["replicate"] == 1:
            self.run_task_body(ordered[0], None)       # only the default task: no warp specialization
            return
        regions, descriptions, locs = [], [], []
        for task in ordered:
            for replica in range(task["replicate"]):
                block = Block()
                with self.b.at(block):
                    self.run_task_body(task, replica if task["replicate"] > 1 else None)
                regions.append(Region(block))
                descriptions.append(("default" if task["default"] else None, task["warps"], task["regs"],
                                     replica if task["replicate"] > 1 else None))
                loc = self.src.loc(task["node"])
                locs.append((loc.line, loc.col))
        # what each task asks for; the place-tasks pass (passes/place_tasks.py) adds where it runs
        attrs = {"tasks": tuple(descriptions), "task_locs": tuple(locs)}
        if suspend_ns is not None:
            attrs["suspend_ns"] = suspend_ns
        self.b.create("tlx.async_tasks", [], [], attrs, regions)

    def run_task_body(self, task: dict, replica) -> None:
        saved = self.vars, self.ctx.replica_id, self.ctx.captured, self.returned, self.partial_return, self.ctx.task
        # The default task runs on the kernel's own warps and may use register tensors computed
        # before the tasks (as TLX's default region); the other tasks may not (they are isolated).
        outside = set() if task["default"] else \
            {id(v.value) for v in self.vars.values() if isinstance(v, Tensor) and v.is_block}
        self.vars = dict(self.vars)
        self.ctx.replica_id = replica
        self.ctx.captured = frozenset(outside)
        self.ctx.task = (task["node"], replica)
        try:
            if first_node(task["body"], (ast.Return,)):
                raise self.error("'return' inside an async task is not supported",
                                 first_node(task["body"], (ast.Return,)))
            self.visit_stmts(task["body"])
        finally:
            self.vars, self.ctx.replica_id, self.ctx.captured, self.returned, self.partial_return, self.ctx.task = saved
