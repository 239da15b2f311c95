"""Recording the timeline of one program: what each task does, step by step.

A ``Tracer`` attaches to one ``Program`` (``KernelRunner.run_program(...,
tracer=)``) and records ``TraceEvent``s from two sources:

* the scheduler (``Scheduler.tracer``): every resume of a task (the task
  computes in that step), every ``Blocked`` it yields (a wait begins), every
  asynchronous event posted (a cp.async copy is issued) and completed (it
  lands), and the deadlock;
* the ops: the program runs on ``TracedPlans``, whose rules are wrapped to
  note barrier waits (with the phase asked for), arrives, expect-bytes,
  cp.async commit/wait groups and named-barrier arrivals, and to count the
  other ops each task executes; every mbarrier gets a listener that records
  each phase completion.

Nothing of this exists in a run without a tracer: untraced plans hold the bare
rules, and the scheduler's hooks cost one ``is None`` test per step.

Time is the scheduler's step counter (``Scheduler.steps``): in one step one
task runs up to its next yield, or one asynchronous event completes.  It is a
logical clock — it orders what happened and shows what overlapped, not how
long anything takes on a GPU.  Intervals are half-open in steps: a task that
blocks in step 5 and is resumed in step 9 waited during ``[6, 9)``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..errors import DeadlockError, LaunchError, Location, TlxcError
from ..ir.mbarrier import MBarrier
from .executor import Plan, Plans
from .scheduler import Blocked
from .values import as_index

# What the renderer draws.  Intervals: run (a step the task executed), wait
# (a blocked barrier wait; ``blocked`` False: it passed at once, a mark),
# named_wait, join (waits for tasks), copy (issued → landed).  Marks: arrive,
# expect, commit, wait_group, named_arrive, phase (an mbarrier phase completed),
# round (a named-barrier round completed), error.
KINDS = ("run", "wait", "named_wait", "join", "blocked", "copy", "arrive", "expect", "commit", "wait_group",
         "named_arrive", "phase", "round", "error")

# Ops counted apart in a step's tooltip (the rest are "other ops").
NOTABLE_OPS = {"tl.load": "global load", "tl.store": "global store", "tl.atomic_rmw": "atomic",
               "tl.atomic_cas": "atomic", "tlx.local_load": "shared load", "tlx.local_store": "shared store", "tl.dot": "dot",
               "tlx.async_load": "cp.async"}


@dataclass
class TraceEvent:
    """One thing that happened.  ``start``/``end`` are steps: an interval
    ``[start, end)`` for runs, blocked waits and copies (a copy's ``end`` is
    the step it landed in), ``start == end`` for marks.  ``seq`` orders events
    recorded in the same step."""

    kind: str
    task: str | None
    start: int
    end: int
    seq: int
    loc: Location | None = None
    barrier: str | None = None       # 'full'[0], named barrier 9
    target: str | None = None        # copy: the shared-memory view it writes
    phase: int | None = None         # wait: parity asked for; phase: absolute index completed
    text: str = ""                   # one sentence for the tooltip
    blocked: bool = False            # waits: whether it had to block
    stuck: bool = False              # waits still blocked at a deadlock
    ops: Counter = field(default_factory=Counter)   # run: ops executed, by NOTABLE_OPS label / "other"
    lines: list[int] = field(default_factory=list)  # run: first and last source line executed

    @property
    def line(self) -> int | None:
        return self.loc.line if self.loc is not None else None


@dataclass
class TraceTask:
    """A task of the traced program, in spawn order (``main`` first)."""

    name: str
    title: str
    loc: Location | None
    warps: int | None = None
    registers: int | None = None
    replica: int | None = None
    spawned: int = 0                 # the step it was spawned in
    finished: int | None = None      # the step it finished in


@dataclass
class BarrierInfo:
    """An mbarrier or a named barrier, in order of first appearance."""

    label: str
    kind: str                        # "mbarrier" or "named"
    arrive_count: int | None = None  # mbarrier: arrivals per phase; named: None
    loc: Location | None = None


@dataclass
class Trace:
    """The timeline of one program of a launch (``trace_launch``)."""

    kernel: str
    program: tuple[int, int, int]
    grid: tuple[int, int, int]
    seed: int | None
    tasks: list[TraceTask]
    barriers: list[BarrierInfo]
    events: list[TraceEvent]
    steps: int
    error: TlxcError | None = None

    @property
    def deadlocked(self) -> bool:
        return isinstance(self.error, DeadlockError)

    def of_kind(self, *kinds: str) -> list[TraceEvent]:
        return [e for e in self.events if e.kind in kinds]


class Tracer:
    """Collects the events of one program run (see the module docstring)."""

    def __init__(self, max_steps: int | None = None):
        self.max_steps = max_steps                   # bounds the traced program's scheduling steps
        self.events: list[TraceEvent] = []
        self.tasks: dict[str, TraceTask] = {}
        self.barriers: dict[str, BarrierInfo] = {}
        self.program = None
        self.scheduler = None
        self.running = None                          # the Task in its step, or None
        self._run: TraceEvent | None = None          # the running task's step
        self._attempt: dict[str, TraceEvent] = {}    # a wait op begun, not yet known to block
        self._waiting: dict[str, TraceEvent] = {}    # blocked waits, by task
        self._copies: dict[object, TraceEvent] = {}  # AsyncEvent -> its copy event
        self._issuing: tuple | None = None           # (view label, bytes) of the async_load being issued
        self._task_meta: dict[str, tuple[int, int | None, int]] = {}
        self._named_rounds: dict[int, int] = {}
        self._groups: Counter = Counter()            # cp.async groups committed, by task

    # -- setup ------------------------------------------------------------------------
    def attach(self, program) -> Plans:
        """Hook ``program``'s scheduler; return the plans to run it on."""
        self.program = program
        self.scheduler = program.scheduler
        self.scheduler.tracer = self
        if self.max_steps is not None:
            self.scheduler.max_steps = self.max_steps
        return TracedPlans(self)

    @property
    def now(self) -> int:
        return self.scheduler.steps

    def _event(self, kind: str, task: str | None, start: int | None = None, end: int | None = None,
               **fields) -> TraceEvent:
        start = self.now if start is None else start
        event = TraceEvent(kind, task, start, start if end is None else end, len(self.events), **fields)
        self.events.append(event)
        return event

    # -- scheduler hooks ----------------------------------------------------------------
    def spawned(self, task) -> None:
        warps, registers, replica = self._task_meta.get(task.name, (None, None, None))
        self.tasks[task.name] = TraceTask(task.name, task.title, task.loc, warps, registers, replica, self.now)

    def resumed(self, task) -> None:
        self.running = task
        wait = self._waiting.pop(task.name, None)
        if wait is not None:
            wait.end = self.now
            wait.text += (f" (blocked after step {wait.start - 1}, resumed in step {self.now}: "
                          f"waited {wait.end - wait.start} step(s))")
        self._run = self._event("run", task.name, self.now, self.now + 1)

    def yielded(self, task, item) -> None:
        """``item``: what the task yielded (a Blocked, PREEMPT), None when it finished."""
        self.running = None
        self._run = None
        self._note_named_rounds()
        if item is None:
            self.tasks[task.name].finished = self.now
        elif isinstance(item, Blocked):
            self._blocked(task, item)

    def _blocked(self, task, blocked: Blocked) -> None:
        wait = self._attempt.pop(task.name, None)
        label = getattr(blocked.barrier, "label", None)
        if wait is None or wait.barrier != label:
            kind = "join" if blocked.reason.startswith("waits for task") else "blocked"
            wait = self._event(kind, task.name, loc=blocked.loc, barrier=label, phase=blocked.phase)
        wait.blocked = True
        wait.start = self.now + 1
        wait.end = self.now + 1
        wait.text = f"{task.title} {blocked.describe()}"
        self._waiting[task.name] = wait

    def posted(self, event) -> None:
        task = self.running.name if self.running is not None else None
        label, nbytes = self._issuing or (None, None)
        self._issuing = None
        size = f", {nbytes} bytes" if nbytes is not None else ""
        who = f" by task '{task}'" if task is not None else ""
        self._copies[event] = self._event("copy", task, loc=event.loc, target=label,
                                          text=f"{event.name}{size}: issued{who} in step {self.now}")

    def completed(self, event) -> None:
        copy = self._copies.pop(event, None)
        if copy is not None:
            copy.end = self.now
            copy.text += f", landed in step {self.now}"

    def deadlocked(self, live) -> None:
        """The stuck waits reach into one more step, the deadlock's (``steps + 1``)."""
        end = self.now + 2
        for task in live:
            wait = self._waiting.get(task.name)
            if wait is None:
                continue
            wait.end = end
            wait.stuck = True
            if task.blocked is not None:
                wait.text = f"stuck at the deadlock: {task.title} {task.blocked.describe()}"

    def failed(self, error: TlxcError) -> None:
        """The run stopped on ``error``: a deadlock (its waits are already
        marked stuck) or an error raised in the running task's step."""
        if isinstance(error, DeadlockError):
            return
        task = self.running.name if self.running is not None else None
        self._event("error", task, loc=error.loc, text=f"error: {error.message}")
        for wait in self._waiting.values():     # waits cut short by the error
            wait.end = self.now + 1

    # -- op hooks (TracedPlans) -------------------------------------------------------------
    def count(self, ctx, op) -> None:
        run = self._run
        if run is None:
            return
        run.ops[NOTABLE_OPS.get(op.name, "other")] += 1
        info = self.tasks.get(ctx.task_name)
        if info is not None and info.warps is None:
            info.warps = ctx.warps
        # Lines of the kernel's own file (not of inlined library helpers).
        if op.loc is not None and op.loc.line > 0 and info is not None and info.loc is not None \
                and op.loc.file == info.loc.file:
            line = op.loc.line
            if not run.lines:
                run.lines = [line, line]
            else:
                run.lines = [min(run.lines[0], line), max(run.lines[1], line)]

    def before(self, ctx, op, values) -> None:
        """Note a synchronization op about to run (``values``: its operands)."""
        noter = _NOTERS.get(op.name)
        if noter is not None:
            noter(self, ctx, op, values)

    def after(self, ctx, op, values, result) -> None:
        if op.name == "tlx.alloc_barriers":
            for bar in result:
                self._register_mbarrier(bar, op.loc)
        elif op.name in ("tlx.barrier_wait", "tlx.named_barrier_wait"):
            self._attempt.pop(ctx.task_name, None)     # it passed without blocking

    def _register_mbarrier(self, bar: MBarrier, loc: Location | None) -> None:
        if bar.label in self.barriers:
            return
        self.barriers[bar.label] = BarrierInfo(bar.label, "mbarrier", bar.arrive_count, loc)
        bar.listeners.append(self._phase_completed)

    def _phase_completed(self, bar: MBarrier, finished: int) -> None:
        by = f"task '{self.running.name}'" if self.running is not None else "a landing copy"
        self._event("phase", None, barrier=bar.label, phase=finished,
                    text=f"phase {finished} (parity {finished % 2}) of barrier {bar.label} completed in step "
                         f"{self.now} (by {by})")

    def _register_named(self, label: str, loc: Location | None) -> None:
        if label not in self.barriers:
            self.barriers[label] = BarrierInfo(label, "named", None, loc)

    def _note_named_rounds(self) -> None:
        table = self.program.state.get("named_barriers") if self.program is not None else None
        for ident, barrier in (table or {}).items():
            seen = self._named_rounds.get(ident, 0)
            for generation in range(seen, barrier.generation):
                self._event("round", None, barrier=barrier.label, phase=generation,
                            text=f"round {generation} of {barrier.label} completed in step {self.now}")
            self._named_rounds[ident] = barrier.generation

    # -- the program's result ----------------------------------------------------------
    def result(self, kernel: str, program: tuple, grid: tuple, seed: int | None,
               error: TlxcError | None) -> Trace:
        steps = self.now
        return Trace(kernel, tuple(program), tuple(grid), seed, list(self.tasks.values()),
                     list(self.barriers.values()), self.events, steps, error)


# -- noting the synchronization ops ----------------------------------------------------------


def _pred(op, values) -> bool:
    return bool(values[-1]) if op.attrs.get("has_pred") else True


def _note_wait(tracer: Tracer, ctx, op, values) -> None:
    bar, phase = values[0], values[1]
    if not _pred(op, values):
        return
    parity = as_index(phase) & 1
    passes = bar.phase_done(parity)
    state = bar.state()
    text = (f"task '{ctx.task_name}' waits for phase {parity} of barrier {bar.label}: "
            + ("passes at once" if passes else "blocks") + f"; the barrier is {state}")
    tracer._attempt[ctx.task_name] = tracer._event("wait", ctx.task_name, loc=op.loc, barrier=bar.label,
                                                   phase=parity, text=text)


def _note_arrive(tracer: Tracer, ctx, op, values) -> None:
    bar = values[0]
    if not _pred(op, values):
        return
    remote = getattr(bar, "target", None)        # a RemoteBarrier: the arrival lands in a peer CTA
    bar = remote if remote is not None else bar
    count = op.attrs["count"] * (ctx.warps * ctx.warp_size if bar.per_thread else 1)     # as barrier_ops.barrier_arrive
    left = bar.pending - count
    tracer._event("arrive", ctx.task_name, loc=op.loc, barrier=bar.label, phase=bar.completed_phases,
                  text=f"task '{ctx.task_name}' arrives on barrier {bar.label} ({count} arrival(s)) in its phase "
                       f"{bar.completed_phases} (parity {bar.parity}): {max(left, 0)} of {bar.arrive_count} "
                       f"arrivals left")


def _note_expect(tracer: Tracer, ctx, op, values) -> None:
    bar = values[0]
    if not _pred(op, values):
        return
    tracer._event("expect", ctx.task_name, loc=op.loc, barrier=bar.label, phase=bar.completed_phases,
                  text=f"task '{ctx.task_name}' expects {op.attrs['bytes']} bytes on barrier {bar.label} and "
                       f"arrives once, in its phase {bar.completed_phases} (parity {bar.parity})")


def _note_async_load(tracer: Tracer, ctx, op, values) -> None:
    view = values[1]
    tracer._issuing = (view.label, view.nbytes)


def _note_commit(tracer: Tracer, ctx, op, values) -> None:
    group = tracer._groups[ctx.task_name]
    tracer._groups[ctx.task_name] += 1
    tracer._event("commit", ctx.task_name, loc=op.loc,
                  text=f"task '{ctx.task_name}' commits its cp.async group {group}")


def _note_wait_group(tracer: Tracer, ctx, op, values) -> None:
    pendings = op.attrs["pendings"]
    tracer._event("wait_group", ctx.task_name, loc=op.loc, phase=pendings,
                  text=f"task '{ctx.task_name}' waits for its cp.async groups but the newest {pendings} "
                       f"(async_load_wait_group({pendings}))")


def _named(tracer: Tracer, op, values) -> tuple[str, int]:
    ident, threads = as_index(values[0]), as_index(values[1])
    label = f"named barrier {ident}"
    tracer._register_named(label, op.loc)
    return label, threads


def _note_named_wait(tracer: Tracer, ctx, op, values) -> None:
    label, threads = _named(tracer, op, values)
    tracer._attempt[ctx.task_name] = tracer._event(
        "named_wait", ctx.task_name, loc=op.loc, barrier=label,
        text=f"task '{ctx.task_name}' syncs at {label} (bar.sync, {threads} threads): passes at once")


def _note_named_arrive(tracer: Tracer, ctx, op, values) -> None:
    label, threads = _named(tracer, op, values)
    tracer._event("named_arrive", ctx.task_name, loc=op.loc, barrier=label,
                  text=f"task '{ctx.task_name}' arrives at {label} (bar.arrive, {threads} threads)")


def _note_tasks(tracer: Tracer, ctx, op, values) -> None:
    for task in op.task_infos:
        tracer._task_meta[task.label] = (task.warps, task.registers, task.replica)


_NOTERS = {
    "tlx.barrier_wait": _note_wait,
    "tlx.barrier_arrive": _note_arrive,
    "tlx.barrier_expect_bytes": _note_expect,
    "tlx.async_load": _note_async_load,
    "tlx.async_commit_group": _note_commit,
    "tlx.async_wait_group": _note_wait_group,
    "tlx.named_barrier_wait": _note_named_wait,
    "tlx.named_barrier_arrive": _note_named_arrive,
    "tlx.async_tasks": _note_tasks,
}


class TracedPlans(Plans):
    """Plans whose rules tell the tracer what they do."""

    def __init__(self, tracer: Tracer):
        super().__init__()
        self.tracer = tracer

    def of(self, block) -> Plan:
        plan = self.blocks.get(id(block))
        if plan is None:
            plan = self.blocks[id(block)] = Plan(block)
            plan.steps = [(self._wrap(fn, is_generator), is_generator, op, operands, results)
                          for fn, is_generator, op, operands, results in plan.steps]
        return plan

    def _wrap(self, fn, is_generator: bool):
        tracer = self.tracer
        if is_generator:
            def traced_generator(ctx, op, *values):
                tracer.count(ctx, op)
                tracer.before(ctx, op, values)
                result = yield from fn(ctx, op, *values)
                tracer.after(ctx, op, values, result)
                return result
            return traced_generator

        def traced(ctx, op, *values):
            tracer.count(ctx, op)
            tracer.before(ctx, op, values)
            result = fn(ctx, op, *values)
            tracer.after(ctx, op, values, result)
            return result
        return traced


def trace_launch(kfn, grid, args: tuple = (), kwargs: dict | None = None, *,
                 program: tuple[int, ...] = (0, 0, 0), seed: int | None = None, num_warps: int | None = None,
                 max_steps: int | None = 20000, out=None) -> Trace:
    """Run one program of ``kfn[grid](*args, **kwargs)`` on the interpreter
    and return its timeline.  Only that program runs (programs are
    independent in the interpreter's model) -- or, with ``ctas_per_cga``, the
    cluster that holds it, its CTAs' tasks named ``... of CTA r``; ``seed``
    picks the task interleaving exactly as ``interpret(..., seed=seed)`` would.
    A run that deadlocks or fails returns the timeline up to that point, with
    the error in ``Trace.error``; launch errors (bad arguments) are raised."""
    from ..runtime.launch import check_cluster_grid, cluster_dims
    from .launch import prepare_launch, program_seed
    runner, grid3, memory, values = prepare_launch(kfn, grid, tuple(args), dict(kwargs or {}),
                                                   num_warps=num_warps, check_barriers=False)
    pid = tuple(int(p) for p in program) + (0,) * (3 - len(program))
    if len(pid) != 3 or not all(0 <= p < g for p, g in zip(pid, grid3)):
        raise LaunchError(f"program {pid} is not in the grid {grid3}")
    dims = cluster_dims((kwargs or {}).get("ctas_per_cga"))
    tracer = Tracer(max_steps)
    error = None
    try:
        if dims is not None:                 # the cluster holding pid, its CTAs in rank order
            check_cluster_grid(kfn.__name__, dims, grid3)
            base = tuple(p - p % d for p, d in zip(pid, dims))
            members = [(base[0] + x, base[1] + y, base[2] + z) for z in range(dims[2]) for y in range(dims[1])
                       for x in range(dims[0])]
            runner.run_cluster(members, dims, grid3, memory, values, program_seed(seed, base), out, tracer=tracer)
        else:
            runner.run_program(pid, grid3, memory, values, program_seed(seed, pid), out, tracer=tracer)
    except TlxcError as exc:
        tracer.failed(exc)
        error = exc
    return tracer.result(kfn.__name__, pid, grid3, seed, error)

