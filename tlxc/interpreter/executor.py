"""Runs a kernel's IR for one program: contexts, the block executor, the runner.

``run_block`` is a generator: it executes a block's ops in order, driving
blocking rules with ``yield from`` so that whatever they yield reaches the
scheduler, and returns the values its terminator passes on.  Every program
runs its kernel body as the task ``main`` of its own ``Scheduler``.
"""
from __future__ import annotations

import os
import sys
from typing import Any, TextIO

import numpy as np

from ..errors import InterpreterError, TlxcError
from ..ir.core import Block, Module, Operation
from ..target import DEFAULT_ARCH, get_target
from .divergence import DivergenceModel
from .mma_async import guard_pending, needs_guard
from .races import RaceTracker
from .registry import rule_for
from .scheduler import Scheduler
from .values import WARP_SIZE


class Program:
    """One program (CTA) of the grid: its id, the launch's memory, its scheduler.
    The CTAs of a cluster share one scheduler and one race tracker (``cluster.py``)."""

    def __init__(self, pid: tuple[int, int, int], grid: tuple[int, int, int], memory,
                 seed: int | None = None, out: TextIO | None = None, cluster=None, cta_rank: int = 0,
                 scheduler: Scheduler | None = None, races: RaceTracker | None = None):
        self.pid = pid
        self.grid = grid
        self.memory = memory
        self.label = f"program ({pid[0]}, {pid[1]}, {pid[2]})"
        self.scheduler = scheduler or Scheduler(self.label, seed)
        self.races = races or RaceTracker(self.label)
        self.out = out
        self.cluster = cluster      # a cluster.Cluster, or None
        self.cta_rank = cta_rank
        self.state: dict = {}       # per-program objects of op families (barriers, shared buffers...)
        self.divergence = None      # the kernel's divergence.DivergenceModel, when it has thread-varying code
        self.warp_size = WARP_SIZE  # lanes per warp (wave) of the target: KernelRunner sets it from the arch

    def task_name(self, name: str) -> str:
        """How a task is named: in a cluster, with its CTA (the scheduler and the race tracker are shared)."""
        return name if self.cluster is None else f"{name} of CTA {self.cta_rank}"


class TaskContext:
    """What a rule receives as ``ctx``: its program and its task's values.
    ``warps`` is the number of warps the task runs on (arrivals on warp
    barriers and named barriers count its threads); ``first_thread`` is the
    thread id of its first thread; ``thread`` is None at tile level, or the
    task-relative thread an op runs for under a branch on ``tlx.thread_id``
    (``divergence.py``)."""

    __slots__ = ("env", "first_thread", "plans", "program", "task_name", "thread", "warps")

    def __init__(self, program: Program, env: dict, task_name: str, plans: Plans, warps: int = 4,
                 first_thread: int = 0):
        self.program = program
        self.env = env
        self.task_name = task_name
        self.plans = plans
        self.warps = warps
        self.first_thread = first_thread
        self.thread = None

    @property
    def pid(self) -> tuple[int, int, int]:
        return self.program.pid

    @property
    def label(self) -> str:
        return self.program.label

    @property
    def memory(self):
        return self.program.memory

    @property
    def scheduler(self) -> Scheduler:
        return self.program.scheduler

    @property
    def races(self) -> RaceTracker:
        return self.program.races

    @property
    def warp_size(self) -> int:
        return self.program.warp_size

    def task_state(self, kind: str, factory):
        """This task's record of ``kind`` (its wgmma groups, its TMA stores in flight, ...):
        made by ``factory()`` on first use, kept with the program."""
        table = self.program.state.setdefault(kind, {})
        state = table.get(self.task_name)
        if state is None:
            state = table[self.task_name] = factory()
        return state

    def fork(self, task_name: str, warps: int | None = None, first_thread: int | None = None) -> TaskContext:
        """A context for a new task that sees every value defined so far."""
        return TaskContext(self.program, dict(self.env), self.program.task_name(task_name), self.plans,
                           self.warps if warps is None else warps,
                           self.first_thread if first_thread is None else first_thread)

    def for_thread(self, thread: int) -> TaskContext:
        """This task's context run for one of its threads, with its own copy of the values."""
        ctx = TaskContext(self.program, dict(self.env), self.task_name, self.plans, self.warps, self.first_thread)
        ctx.thread = thread
        return ctx

    def error(self, op: Operation, message: str, notes=None, cls=InterpreterError) -> InterpreterError:
        return cls(message, op.loc, notes)


# Iterations one interpreted ``while`` or ``for`` loop may run (TLXC_INTERPRET_MAX_ITERATIONS raises it): a
# loop whose condition never turns false would otherwise hang the interpreter without a word,
# and a loop that does not wait on anything never returns to the scheduler's step bound.
MAX_WHILE_ITERATIONS = 1 << 20


def while_iteration_limit() -> int:
    raw = os.environ.get("TLXC_INTERPRET_MAX_ITERATIONS", "").strip()
    try:
        return int(raw) if raw else MAX_WHILE_ITERATIONS
    except ValueError:
        raise InterpreterError(f"TLXC_INTERPRET_MAX_ITERATIONS must be an int, got {raw!r}") from None


class Plan:
    """A block prepared for execution: (rule, is_generator, op, operands, results)."""

    __slots__ = ("steps", "terminator")

    def __init__(self, block: Block):
        self.steps = []
        self.terminator = None
        for op in block.ops:
            if op.is_terminator:
                self.terminator = op
                continue
            rule = rule_for(op)
            fn = rule.fn
            if needs_guard(op):          # an operand may be an async_dot result still in flight
                fn = guard_pending(fn, rule.is_generator)
            self.steps.append((fn, rule.is_generator, op, tuple(op.operands), tuple(op.results)))


class Plans:
    """Per-kernel caches: the plan of each block (filled on first execution)
    and the values of constant ops (read-only arrays, shared by programs)."""

    def __init__(self):
        self.blocks: dict[int, Plan] = {}
        self.constants: dict[int, object] = {}

    def of(self, block: Block) -> Plan:
        plan = self.blocks.get(id(block))
        if plan is None:
            plan = self.blocks[id(block)] = Plan(block)
        return plan


def run_block(ctx: TaskContext, block: Block, args=()):
    """Execute ``block`` with its arguments bound to ``args``; return the
    terminator's operand values (a list)."""
    env = ctx.env
    for arg, value in zip(block.args, args):
        env[arg] = value
    plan = ctx.plans.of(block)
    divergence = ctx.program.divergence if ctx.thread is None else None
    op = None
    try:
        for fn, is_generator, op, operands, results in plan.steps:
            values = [env[v] for v in operands]
            if divergence is not None and id(op) in divergence.per_thread:
                out = yield from divergence.run(ctx, fn, is_generator, op, values)
            elif is_generator:
                out = yield from fn(ctx, op, *values)
            else:
                out = fn(ctx, op, *values)
            if results:
                if len(results) == 1:
                    env[results[0]] = out
                else:
                    for result, value in zip(results, out):
                        env[result] = value
    except TlxcError:
        raise
    except Exception as exc:
        if os.environ.get("TLXC_DEBUG") == "1" or op is None:
            raise
        raise InterpreterError(
            f"internal interpreter error in {op.name} ({type(exc).__name__}: {exc}) in {ctx.label}; "
            f"this is a tlxc bug, rerun with TLXC_DEBUG=1 for the traceback", op.loc) from None
    terminator = plan.terminator
    if terminator is None:
        return []
    return [env[v] for v in terminator.operands]


def check_rules(module: Module) -> None:
    """Fail before running anything if some op has no interpreter rule."""
    for op in module.walk():
        if op.name != "tl.kernel" and not op.is_terminator:
            rule_for(op)


class KernelRunner:
    """Executes one specialized kernel (a verified IR module) program by program."""

    def __init__(self, module: Module, name: str | None = None, arch: str = DEFAULT_ARCH):
        self.module = module
        self.kernel = module.kernel(name) if name else module.kernels[0]
        check_rules(module)
        self.plans = Plans()
        divergence = DivergenceModel(module, self.kernel, arch)
        self.divergence = divergence if divergence.per_thread else None
        self.warp_size = get_target(arch).warp_size     # 64 on gfx942 / gfx950 (waves)

    @property
    def arg_types(self) -> list:
        return [a.type for a in self.kernel.regions[0].args]

    def run_program(self, pid: tuple[int, int, int], grid: tuple[int, int, int], memory,
                    args: list[Any], seed: int | None = None, out: TextIO | None = None,
                    tracer=None) -> Program:
        """Run one program.  A ``tracer`` (``trace.Tracer``) records its timeline:
        it hooks the program's scheduler and runs it on traced plans."""
        program = Program(pid, grid, memory, seed, out if out is not None else sys.stdout)
        program.divergence = self.divergence
        program.warp_size = self.warp_size
        plans = self.plans if tracer is None else tracer.attach(program)
        ctx = TaskContext(program, {}, "main", plans, int(self.kernel.attrs.get("num_warps", 4)))
        body = run_block(ctx, self.kernel.regions[0].block, args)
        program.scheduler.spawn("main", body, self.kernel.loc)
        with np.errstate(all="ignore"):     # ints wrap and floats overflow silently, as on the GPU
            program.scheduler.run()
        return program

    def run_cluster(self, pids: list[tuple[int, int, int]], dims: tuple[int, int, int],
                    grid: tuple[int, int, int], memory, args: list[Any], seed: int | None = None,
                    out: TextIO | None = None, tracer=None) -> list[Program]:
        """Run the CTAs ``pids`` of one cluster together (``cluster.py``), ``pids`` in rank order.
        A ``tracer`` records the timeline of all of them (they share one scheduler)."""
        from .cluster import Cluster
        cluster = Cluster(dims)
        first, last = pids[0], pids[-1]
        label = f"the cluster of programs ({first[0]}, {first[1]}, {first[2]})..({last[0]}, {last[1]}, {last[2]})"
        scheduler, races = Scheduler(label, seed), RaceTracker(label)
        warps = int(self.kernel.attrs.get("num_warps", 4))
        plans = self.plans
        for rank, pid in enumerate(pids):
            program = Program(pid, grid, memory, seed, out if out is not None else sys.stdout, cluster, rank,
                              scheduler, races)
            program.divergence = self.divergence
            program.warp_size = self.warp_size
            cluster.programs.append(program)
            if tracer is not None and rank == 0:
                plans = tracer.attach(program)
            ctx = TaskContext(program, {}, program.task_name("main"), plans, warps)
            scheduler.spawn(ctx.task_name, run_block(ctx, self.kernel.regions[0].block, args), self.kernel.loc)
        with np.errstate(all="ignore"):
            scheduler.run()
        return cluster.programs
