"""From a failed simulation to one precise finding.

The simulator says *that* the protocol breaks (a deadlock, an arrival
overflow, a named-barrier mismatch, a race) under some schedule; the
explainers here say *why*, by reading the tasks' events, which do not depend on the
schedule.  They are tried from the most specific to the most general:

1. transaction bytes nothing delivers (``barrier.tx-bytes``);
2. a barrier nobody arrives on (``barrier.no-arrival``);
3. arrival accounting per barrier array over the whole run: fewer or more
   arrivals than ``arrive_count`` per use of a slot (``barrier.arrive-count``,
   ``barrier.missing-arrive``, ``barrier.extra-arrive``);
4. the slot sequences of the two sides of a ring (``ring.slot-mismatch``);
5. the phase progression of each task on each slot (``ring.phase-not-flipped``,
   ``ring.phase-flipped-twice``);
6. a consumer whose first wait is for phase 1 (``ring.initial-phase``), a
   barrier whose arrivers ran a whole round ahead of a wait (``ring.lapped``),
   a reader that released its slot before reading it (``race.early-release``);
7. the wait-for graph of the blocked tasks: a producer whose first wait
   cannot pass (``ring.initial-phase``, ``ring.producer-phase``) or a cycle
   (``barrier.wait-cycle``, mbarriers and named barriers);
8. what the failure itself shows (``barrier.deadlock``,
   ``barrier.too-many-arrivals``, ``named.count-mismatch``,
   ``named.too-many-threads``, ``race.cp-async``, ``race.overwrite``,
   ``race.mma-early-release``, ``race.async-dot``, ``race.tma-store``, ``race.shared``,
   ``barrier.expect-bytes``), and, as an info remark, ``named.open-round``.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ..ir.core import BlockArgument, Operation
from ..ir.views import view_roots
from .describe import assignment_location, barrier_use, bindings, ordinal, phase_use, task_label, times, where
from .events import BarrierArray, Event, TaskEvents, clean_name
from .findings import INFO, Finding
from .simulate import Failure, Simulator

# findings about how often tasks arrive and wait: the ones that unrelated pinned trip counts can fake
COUNT_FINDINGS = ("barrier.missing-arrive", "barrier.extra-arrive", "barrier.arrive-count", "barrier.deadlock",
                  "ring.lapped")
ARRIVALS = ("arrive", "expect", "tcdone")    # tcdone: a tcgen05 completion (mBarriers=, tcgen05_commit)
WRITES = ("copy", "write", "tmawrite")


@dataclass
class Context:
    kernel: Operation
    tasks: list[TaskEvents]
    sim: Simulator
    trips: int
    pinned: bool
    pins: int = 0               # distinct runtime trip counts pinned (more than one: they may be related)

    def task(self, index: int) -> TaskEvents:
        return self.tasks[index]

    def events(self, kinds, array=None):
        """{task index: [events of these kinds (on ``array``)]}, in program order."""
        found = defaultdict(list)
        for task in self.tasks:
            for e in task.events:
                if e.kind in kinds and (array is None or e.array is array):
                    found[task.index].append(e)
        return found

    def weight(self, e: Event) -> int:
        if e.kind in ("expect", "tcdone"):
            return 1
        return e.amount * (self.task(e.task).threads if e.array.per_thread else 1)

    def barrier_arrays(self) -> list[BarrierArray]:
        seen = []
        for task in self.tasks:
            for e in task.events:
                if isinstance(e.array, BarrierArray) and all(e.array is not a for a in seen):
                    seen.append(e.array)
        return seen


def explain(ctx: Context, failure: Failure) -> Finding:
    finding = _explain(ctx, failure)
    if ctx.pinned:
        how = (f"found by running every loop whose trip count is a runtime value {times(ctx.trips)} "
               f"(schedule: {failure.schedule})")
        finding.notes.append((how, None))
    if ctx.pins > 1 and finding.check in COUNT_FINDINGS:
        hint = ("runtime trip counts the checker cannot relate to each other (say, one task's at most "
                "another's) are run as if independent; if that is what happened here, 'tlxc check --run' "
                "decides on the interpreter, and TLXC_CHECK_BARRIERS=warn compiles the kernel anyway")
        finding.notes.append((hint, None))
    return finding


def _explain(ctx: Context, failure: Failure) -> Finding:
    if failure.kind == "deadlock":
        waits = [(t, e) for t, e in failure.blocked if e.kind == "wait"]
        for t, e in waits:
            found = tx_bytes(ctx, t, e) or no_arrival(ctx, t, e)
            if found:
                return found
        involved = _unique([e.array for _, e in waits])
        found = _protocol(ctx, involved, anchor=waits[0] if waits else None)
        if found:
            return found
        return (consumer_free_pass(ctx) or lapped(ctx, failure, waits) or wait_cycle(ctx, failure)
                or deadlock(ctx, failure))
    if failure.kind == "overflow":
        return _protocol(ctx, [failure.event.array], anchor=None) or too_many_arrivals(ctx, failure)
    if failure.kind == "named":
        return named_mismatch(ctx, failure)
    if failure.kind == "open-round":
        return named_open_round(ctx, failure)
    if failure.kind == "txbytes":
        return expect_too_small(ctx, failure)
    return (_protocol(ctx, [], anchor=None) or consumer_free_pass(ctx) or early_release(ctx, failure)
            or race(ctx, failure))


def _unique(items: list) -> list:
    out = []
    for item in items:
        if all(item is not o for o in out):
            out.append(item)
    return out


def _protocol(ctx: Context, first: list, anchor) -> Finding | None:
    arrays = _unique(first + ctx.barrier_arrays())
    for check in (accounting, slot_mismatch, phase_progression):
        for array in arrays:
            found = check(ctx, array, anchor) if check is accounting else check(ctx, array)
            if found:
                return found
    return None


def _at(task: TaskEvents, e: Event) -> str:
    return f"{task_label(task)} ({where(e.loc)})"


def _state(ctx: Context, key) -> str:
    state = ctx.sim.barriers.get(key)
    if state is None:
        return "in phase 0 (0 phases completed), no arrivals yet"
    return state.bar.state()


# -- 1, 2: nothing can complete the phase ----------------------------------------------------------
def tx_bytes(ctx: Context, t: int, e: Event) -> Finding | None:
    state = ctx.sim.barriers.get(e.key)
    if state is None or state.bar.pending != 0 or state.bar.tx_bytes <= 0:
        return None
    if state.delivered and state.expects:
        expect = state.expects[0]
        return Finding(f"barrier_expect_bytes posts {state.expected} bytes on {e.array.label(e.slot)} but the TMA loads "
                       f"that complete on it in this phase deliver {state.delivered} bytes (their boxes), so the "
                       f"phase never completes and {task_label(ctx.task(t))} waits forever ({where(e.loc)}); "
                       f"expect exactly the bytes of the boxes", expect.loc,
                       [(f"{task_label(ctx.task(t))} waits here", e.loc)], "barrier.expect-bytes")
    expects = [x for xs in ctx.events(("expect",), e.array).values() for x in xs if x.slot == e.slot]
    notes = [(f"barrier_expect_bytes posts {x.amount} transaction bytes on {e.array.label(e.slot)} here", x.loc)
             for x in expects[:1]]
    return Finding(f"{task_label(ctx.task(t))} waits for phase {e.parity} of {barrier_use(e)}, which also waits "
                   f"for {state.bar.tx_bytes} transaction bytes that no copy delivers: only TMA/bulk copies "
                   f"complete mbarrier transactions, and this kernel issues none (cp.async copies do not)",
                   e.loc, notes, "barrier.tx-bytes")


def _arrived_arrays(op: Operation) -> list:
    """The barrier allocations ``op`` arrives on (an arrive, an expect, a tcgen05 completion);
    a view reassigned in a loop or an ``if`` may name several (``views.view_roots``)."""
    if op.name in ("tlx.barrier_arrive", "tlx.barrier_expect_bytes", "tlx.tcgen05_commit"):
        return [_array_op(op)] + view_roots(op.operands[0] if op.operands else None)
    if op.name == "tlx.tcgen05_mma":
        return [_view_owner(v) for v in op.barriers] + [r for v in op.barriers for r in view_roots(v)]
    return []


def no_arrival(ctx: Context, t: int, e: Event) -> Finding | None:
    alloc = e.array.op
    for op in ctx.kernel.walk():
        if alloc in _arrived_arrays(op):
            return None
    return Finding(f"{task_label(ctx.task(t))} waits for phase {e.parity} of {barrier_use(e)}, but no task ever "
                   f"arrives on {e.array.label()} (no tlx.barrier_arrive, tlx.barrier_expect_bytes, "
                   f"tlx.tcgen05_commit or async_dot mBarriers= names it anywhere in the kernel): the wait can never "
                   f"return",
                   e.loc, [(f"{e.array.label()} is allocated here", e.array.loc)], "barrier.no-arrival")


def _array_op(op: Operation):
    return _view_owner(op.operands[0] if op.operands else None)


def _view_owner(bar):
    """The allocation a barrier value (or a view of one) comes from."""
    owner = getattr(bar, "owner", None)
    if isinstance(owner, Operation) and owner.name == "tlx.local_view":
        owner = getattr(owner.operands[0], "owner", None)
    return owner


# -- 3: arrival accounting ---------------------------------------------------------------------------
def _base(task: TaskEvents) -> str:
    """The task ``task`` is a replica of (itself when not replicated)."""
    return task.base or task.name


def _ops(events: list[Event]) -> list[Event]:
    """The first event of each distinct op, in program order."""
    seen, out = set(), []
    for e in events:
        if id(e.op) not in seen:
            seen.add(id(e.op))
            out.append(e)
    return out


def accounting(ctx: Context, array: BarrierArray, anchor) -> Finding | None:
    waits = ctx.events(("wait",), array)
    arrivals = ctx.events(ARRIVALS, array)
    if not waits:
        return None
    uses = max(len(v) for v in waits.values())
    waiter = ctx.task(max(waits, key=lambda t: len(waits[t])))
    count = array.arrive_count
    if not arrivals:
        return _none_run(ctx, array, waiter, uses, anchor)
    total = {t: sum(ctx.weight(e) for e in evs) for t, evs in arrivals.items()}
    if sum(total.values()) == count * uses:
        return None
    alloc = (f"{array.label()} is allocated with arrive_count={count} here", array.loc)
    if sum(total.values()) < count * uses:
        return _too_few(ctx, array, arrivals, total, uses, waiter, alloc, anchor)
    return _too_many(ctx, array, arrivals, uses, waiter, alloc)


def _none_run(ctx, array, waiter, uses, anchor) -> Finding | None:
    """Arrives on the array exist in the kernel, but none runs in this execution."""
    ops = [op for op in ctx.kernel.walk()
           if array.op in _arrived_arrays(op)]
    if not ops or anchor is None:
        return None
    lines = ", ".join(where(op.loc) for op in ops)
    return Finding(f"{task_label(waiter)} waits on {array.label()} {times(uses)}, but none of the arrives on it "
                   f"({lines}) runs in this execution: a use of the ring is never signalled (a missing "
                   f"tlx.barrier_arrive, or one under a condition that skips it), so this wait never returns",
                   anchor[1].loc,
                   [(f"this arrive on {array.label()} does not run", op.loc) for op in ops[:3]],
                   "barrier.missing-arrive")


def _too_few(ctx, array, arrivals, total, uses, waiter, alloc, anchor) -> Finding:
    count = array.arrive_count
    arriving = {ctx.task(t).name for t in arrivals}
    for t in arrivals:                                # replicas of an arriving task that never arrive
        base = _base(ctx.task(t))
        silent = [task for task in ctx.tasks if task.replica is not None and _base(task) == base
                  and task.name not in arriving]
        if silent and count > 1:
            e = arrivals[t][0]
            names = ", ".join(f"'{task.name}'" for task in silent)
            return Finding(f"{array.label()} counts {count} arrivals per phase, but of the replicas of task "
                           f"'{base}' only '{ctx.task(t).name}' arrives on it ({where(e.loc)}); {names} never "
                           f"do{'es' if len(silent) == 1 else ''}, so no phase of {array.label()} ever completes",
                           e.loc, [alloc], "barrier.arrive-count")
    per_use = sum(max(ctx.weight(e) for e in evs) for evs in arrivals.values())
    if per_use < count:
        who = ", ".join(f"{task_label(ctx.task(t))} ({where(evs[0].loc)})" for t, evs in arrivals.items())
        return Finding(f"{array.label()} counts {count} arrivals per phase (arrive_count={count}), but at most "
                       f"{per_use} arrive per use of a slot: {who}; give arrive_count={per_use} or make "
                       f"{count} warp groups arrive", array.loc,
                       [(f"{task_label(ctx.task(t))} arrives here", evs[0].loc) for t, evs in arrivals.items()],
                       "barrier.arrive-count")
    short = min(arrivals, key=lambda t: total[t] / max(ctx.weight(arrivals[t][0]), 1))
    done = len(arrivals[short])
    loc = anchor[1].loc if anchor else arrivals[short][-1].loc
    notes = [(f"{task_label(ctx.task(short))} arrives on {array.label()} here", e.loc) for e in _ops(arrivals[short])]
    return Finding(f"{task_label(waiter)} waits on {array.label()} {times(uses)}, but {task_label(ctx.task(short))} "
                   f"arrives on it only {times(done)}: a use of the ring is never signalled (a missing "
                   f"tlx.barrier_arrive), so a wait for it never returns", loc, notes, "barrier.missing-arrive")


def _too_many(ctx, array, arrivals, uses, waiter, alloc) -> Finding:
    count = array.arrive_count
    extra = [t for t, evs in arrivals.items() if len(evs) > uses]
    if extra:
        t = extra[0]
        ops = _ops(arrivals[t])
        e = ops[-1] if len(ops) > 1 else ops[0]
        lines = " and ".join(where(x.loc) for x in ops)
        return Finding(f"{task_label(ctx.task(t))} arrives on {array.label()} {times(len(arrivals[t]))} ({lines}) "
                       f"while {task_label(waiter)} waits on it {times(uses)}: an extra arrive completes a phase "
                       f"that no use of the slot produced ({array.label()} counts {count} "
                       f"arrival{'s' if count > 1 else ''} per phase)", e.loc,
                       [(f"{task_label(waiter)} waits on {array.label()} here", _first_wait(ctx, array, waiter).loc),
                        alloc], "barrier.extra-arrive")
    first = next(iter(arrivals.values()))[0]
    if array.per_thread:
        task = ctx.task(first.task)
        return Finding(f"warp barrier {array.label()} counts {count} thread arrivals per phase, but "
                       f"{task_label(task)} arrives with all its {task.threads} threads ({task.warps} warp"
                       f"{'s' if task.warps > 1 else ''} x {task.lanes}{f' x {first.amount}' if first.amount > 1 else ''}) "
                       f"at {where(first.loc)}: a warp barrier counts every thread of the arriving task, so "
                       f"alloc_warp_barrier needs num_warps={task.warps}", array.loc,
                       [(f"{task_label(task)} arrives here", first.loc)], "barrier.arrive-count")
    per_use = sum(max(ctx.weight(e) for e in evs) for evs in arrivals.values())
    who = " and ".join(task_label(ctx.task(t)) for t in arrivals)
    return Finding(f"{array.label()} counts {count} arrival{'s' if count > 1 else ''} per phase "
                   f"(arrive_count={count}), but {per_use} arrive per use of a slot ({who}, {where(first.loc)}): "
                   f"each use completes {per_use // count if per_use % count == 0 else 'more than one'} phases, "
                   f"so the other side's phases run ahead; count one arrival per arriving warp group: "
                   f"arrive_count={per_use}", array.loc,
                   [(f"{task_label(ctx.task(t))} arrives here", evs[0].loc) for t, evs in arrivals.items()],
                   "barrier.arrive-count")


def _first_wait(ctx: Context, array, task: TaskEvents) -> Event:
    return next(e for e in task.events if e.kind == "wait" and e.array is array)


# -- 4: slot sequences ------------------------------------------------------------------------------------
def _collapse(events: list[Event]) -> list[Event]:
    out = []
    for e in events:
        if not out or out[-1].slot != e.slot:
            out.append(e)
    return out


def _regular(events: list[Event], num: int) -> bool:
    return all(e.slot == k % num for k, e in enumerate(events))


def slot_mismatch(ctx: Context, array: BarrierArray) -> Finding | None:
    if array.num < 2:
        return None
    waits = ctx.events(("wait",), array)
    arrivals = ctx.events(ARRIVALS, array)
    for w, wevs in waits.items():
        for a, aevs in arrivals.items():
            if a == w:
                continue
            wslots, aslots = {e.slot for e in wevs}, {e.slot for e in aevs}
            if wslots & aslots:       # compare on the slots both use (replica-specific slots)
                wevs = [e for e in wevs if e.slot in aslots]
                aevs = [e for e in aevs if e.slot in wslots]
            ws, as_ = _collapse(wevs), _collapse(aevs)
            for k, (we, ae) in enumerate(zip(ws, as_)):
                if we.slot == ae.slot:
                    continue
                waiter, arriver = ctx.task(w), ctx.task(a)
                nth = ordinal(k + 1)
                if _regular(ws, array.num) and not _regular(as_, array.num):
                    return Finding(f"{_at(arriver, ae)} makes its {nth} arrival on {array.label()} at "
                                   f"{barrier_use(ae)}, but {_at(waiter, we)} waits for its {nth} use of "
                                   f"{array.label()} at {barrier_use(we)}: the two sides of the ring disagree on "
                                   f"the slot index", ae.loc,
                                   [(f"{task_label(waiter)} waits here", we.loc)], "ring.slot-mismatch")
                return Finding(f"{_at(waiter, we)} waits for its {nth} use of {array.label()} at {barrier_use(we)} "
                               f"with {phase_use(we)}, but {_at(arriver, ae)} makes its {nth} arrival on "
                               f"{barrier_use(ae)}: the two sides of the ring disagree on the slot index", we.loc,
                               [(f"{task_label(arriver)} arrives here", ae.loc)], "ring.slot-mismatch")
    return None


# -- 5: phase progression --------------------------------------------------------------------------------
def phase_progression(ctx: Context, array: BarrierArray) -> Finding | None:
    for task in ctx.tasks:
        last: dict[int, tuple[int, Event]] = {}
        progress = 0                        # arrivals/writes so far: a new use of the slot since the last wait?
        marks: dict[int, int] = {}
        for e in task.events:
            if e.kind in ARRIVALS + WRITES:
                progress += 1
            if e.kind != "wait" or e.array is not array:
                continue
            previous = last.get(e.slot)
            if previous is not None and previous[1].parity == e.parity and marks[e.slot] != progress:
                return _stale_phase(task, array, previous[1], e, previous[0] + 1)
            last[e.slot] = ((previous[0] + 1) if previous else 0, e)
            marks[e.slot] = progress
    return None


def _stale_phase(task: TaskEvents, array, before: Event, e: Event, use: int) -> Finding:
    flips = e.flips - before.flips
    context = ""
    a, b = bindings(before), bindings(e)
    if a and b and a != b:
        context = f" ({a} → {b})"
    head = (f"{_at(task, e)} waits {barrier_use(e)} with {phase_use(e)} for its {ordinal(use + 1)} use of "
            f"{array.label(e.slot)}, the same phase as for its previous use{context}")
    if flips >= 2 and flips % 2 == 0:
        return Finding(f"{head}: the phase was flipped {times(flips)} between the two uses, so it is back where it "
                       f"was; flip it once per pass over the ring", e.loc, [], "ring.phase-flipped-twice")
    return Finding(f"{head}: the phase was never flipped when the slot index wrapped around, so the wait passes on "
                   f"an old phase or blocks forever; flip it once per pass over the ring", e.loc, [],
                   "ring.phase-not-flipped")


# -- 6: the wait-for graph -----------------------------------------------------------------------------------
def _completers(ctx: Context, t: int, e: Event, blocked: dict) -> list[tuple[int, Event]]:
    """Blocked tasks whose remaining events could complete what ``e`` waits for."""
    out = []
    for u in blocked:
        rest = ctx.task(u).events[ctx.sim.pos[u]:]
        if e.kind == "wait":
            hit = next((x for x in rest if x.kind in ARRIVALS and x.key == e.key), None)
        elif e.kind == "nwait":
            hit = next((x for x in rest if x.kind in ("nwait", "narrive") and x.ident == e.ident
                        and (u != t or x is not e)), None)
        elif e.kind == "join":
            hit = rest[0] if u in e.tasks else None
        else:
            hit = None
        if hit is not None and u != t:
            out.append((u, hit))
    return out


def wait_cycle(ctx: Context, failure: Failure) -> Finding | None:
    blocked = {t: e for t, e in failure.blocked}
    edges = {t: _completers(ctx, t, e, blocked) for t, e in blocked.items()}
    cycle = _find_cycle(edges)
    if cycle is None:
        return None
    found = _initial_phase(ctx, cycle, blocked, edges)
    if found:
        return found
    parts, notes = [], []
    for i, t in enumerate(cycle):
        e = blocked[t]
        nxt = cycle[(i + 1) % len(cycle)]
        hit = next(h for u, h in edges[t] if u == nxt)
        parts.append(f"{task_label(ctx.task(t))} waits for {_waited(e)} ({where(e.loc)}), which only "
                     f"{task_label(ctx.task(nxt))} can complete, at {where(hit.loc)} after its own wait")
        notes.append((f"{task_label(ctx.task(t))} waits here", e.loc))
    return Finding("cycle of waits between tasks: " + "; ".join(parts), blocked[cycle[0]].loc, notes[1:],
                   "barrier.wait-cycle")


def _waited(e: Event) -> str:
    if e.kind == "wait":
        return f"phase {e.parity} of {barrier_use(e)}"
    if e.kind == "nwait":
        return f"named barrier {e.ident} ({e.amount} threads, bar.sync)"
    return "its tasks to finish"


def _find_cycle(edges: dict) -> list[int] | None:
    for start in edges:
        path, seen = [start], {start}
        while True:
            nexts = [u for u, _ in edges[path[-1]] if u in edges]
            if not nexts:
                break
            u = nexts[0]
            if u == start:
                return path
            if u in seen:
                break
            path.append(u)
            seen.add(u)
    return None


def _initial_phase(ctx: Context, cycle: list[int], blocked: dict, edges: dict) -> Finding | None:
    for t in cycle:
        e = blocked[t]
        if e.kind != "wait" or e.parity != 0 or _state_completed(ctx, e.key) != 0:
            continue
        task = ctx.task(t)
        if any(x.kind == "wait" and x.key == e.key for x in task.events[:ctx.sim.pos[t]]):
            continue                                    # not its first wait on that slot
        if not _fills_after(task, ctx.sim.pos[t]):
            continue
        u, hit = next((u, h) for u, h in edges[t] if u in cycle)
        other = blocked[u]
        why = (f"a fresh barrier's phase 0 completes only when {task_label(ctx.task(u))} arrives on it "
               f"({where(hit.loc)}), after waiting for {barrier_use(other)} ({where(other.loc)}), which this task "
               f"signals only after this wait")
        origin = _phase_origin(e.op.operands[1])
        if origin is not None:
            value, loc = origin
            start = f"starts its phase at {value}, so its" if value is not None else "starts its phase so that its"
            notes = [("the phase starts here", loc)] if loc is not None else []
            return Finding(f"producer {task_label(task)} {start} first wait on {barrier_use(e)} is for phase 0 "
                           f"({phase_use(e)}) and blocks: {why}. A producer's first wait on a free slot must pass at "
                           f"once: make it wait for phase 1 (the phase before a fresh barrier's first counts as "
                           f"completed)", e.loc, notes, "ring.initial-phase")
        return Finding(f"producer {task_label(task)} waits {barrier_use(e)} with {phase_use(e)}, the phase a "
                       f"consumer waits for, where it needs phase ^ 1: its first wait blocks, because {why}. A "
                       f"producer waits for its free slots with phase ^ 1 (a wait for phase 1 on a fresh barrier "
                       f"passes at once)", e.loc, [], "ring.producer-phase")
    return None


def _state_completed(ctx: Context, key) -> int:
    state = ctx.sim.barriers.get(key)
    return state.bar.completed_phases if state is not None else 0


def _fills_after(task: TaskEvents, pos: int) -> bool:
    """Whether the task writes shared memory after ``pos`` before it next arrives."""
    for x in task.events[pos + 1:]:
        if x.kind in WRITES:
            return True
        if x.kind in ARRIVALS:
            return False
    return False


def _phase_origin(value, depth: int = 6):
    """(initial value or None, its location) when the phase is a loop-carried variable."""
    if depth == 0:
        return None
    if isinstance(value, BlockArgument):
        block = value.owner
        region = getattr(block, "parent", None)
        loop = getattr(region, "parent", None)
        if isinstance(loop, Operation) and loop.name == "scf.for" and value.index >= 1:
            init = loop.operands[3 + value.index - 1]
            owner = getattr(init, "owner", None)
            if isinstance(owner, Operation) and owner.name == "arith.constant":
                v = owner.attrs.get("value")
                v = int(v) if isinstance(v, (bool, int)) else None
                loc = owner.loc
                if v is not None and value.name_hint and loc is not None and loop.loc is not None \
                        and loc.line == loop.loc.line:
                    loc = assignment_location(loop.loc, clean_name(value.name_hint), v)
                return v, loc
            return None, getattr(owner, "loc", None)
        return None
    owner = getattr(value, "owner", None)
    if isinstance(owner, Operation) and owner.name in ("arith.xor", "arith.select", "arith.cast", "arith.sub",
                                                      "arith.not", "arith.and", "arith.or"):
        for operand in owner.operands:
            found = _phase_origin(operand, depth - 1)
            if found is not None:
                return found
    return None


# -- 7: what the failure shows --------------------------------------------------------------------------------
def deadlock(ctx: Context, failure: Failure) -> Finding:
    notes = []
    for t, e in failure.blocked:
        task = ctx.task(t)
        if e.kind == "wait":
            text = (f"{task_label(task)} waits for phase {e.parity} of {barrier_use(e)}; the barrier is "
                    f"{_state(ctx, e.key)}")
            notes.append((text, e.loc))
        elif e.kind == "nwait":
            barrier = ctx.sim.named.get(e.ident)
            state = f"{barrier.arrived} of {barrier.expected}" if barrier and barrier.expected else "0"
            text = f"{task_label(task)} waits at named barrier {e.ident} ({e.amount} threads); {state} threads arrived"
            notes.append((text, e.loc))
        elif e.kind == "join":
            notes.append((f"{task_label(task)} waits for its tasks to finish", e.loc))
    live = len(failure.blocked)
    first = next((e for _, e in failure.blocked if e.kind != "join"), failure.blocked[0][1])
    return Finding(f"deadlock: all {live} live tasks are blocked and nothing can unblock them"
                   if live > 1 else "deadlock: the only live task is blocked and nothing can unblock it",
                   first.loc, notes, "barrier.deadlock")


def too_many_arrivals(ctx: Context, failure: Failure) -> Finding:
    e = failure.event
    task = ctx.task(e.task)
    weight = ctx.weight(e)
    return Finding(f"{task_label(task)} arrives {times(weight)} on {barrier_use(e)}, but the barrier is "
                   f"{failure.detail}: more arrivals than its phase has pending (undefined behaviour on the GPU)",
                   e.loc, [(f"{e.array.label()} is allocated with arrive_count={e.array.arrive_count} here",
                            e.array.loc)], "barrier.too-many-arrivals")


def named_mismatch(ctx: Context, failure: Failure) -> Finding:
    e = failure.event
    task = ctx.task(e.task)
    first_task, first = failure.other
    how = "bar.sync" if e.kind == "nwait" else "bar.arrive"
    if failure.detail == "count":
        return Finding(f"{task_label(task)} uses named barrier {e.ident} with {e.amount} threads ({how}), but "
                       f"{task_label(ctx.task(first_task))} uses it with {first.amount} in the same round: both sides "
                       f"of a named barrier must count the same threads", e.loc,
                       [(f"{task_label(ctx.task(first_task))} uses it here", first.loc)], "named.count-mismatch")
    return Finding(f"{task_label(task)} brings {task.threads} threads to named barrier {e.ident} ({how}), more than "
                   f"the {e.amount} it counts still miss in this round", e.loc, [], "named.too-many-threads")


def named_open_round(ctx: Context, failure: Failure) -> Finding:
    """Every task finished with a named-barrier round still open: the
    arrive side made more passes than the sync side took turns.  That is
    the ping-pong idiom as TLX writes it (the last hand-off goes to a turn
    nobody takes), and harmless: ``bar.arrive`` does not block, and a named
    barrier's count does not outlive the CTA.  So it is an ``info`` remark
    (``tlxc check --verbose``), not a warning that fails the check."""
    e = failure.event
    arrived, expected = failure.detail.split()
    who = _unique([ctx.task(t) for t, _ in failure.other])
    by = " and ".join(task_label(task) for task in who)
    notes = [(f"{task_label(ctx.task(t))} arrives here (bar.arrive)", x.loc) for t, x in failure.other if x is not e]
    return Finding(f"named barrier {e.ident} still has a round open when every task has finished: {by} brought "
                   f"{arrived} of the {expected} threads it counts (bar.arrive), and no bar.sync consumes them. "
                   f"This is the ping-pong hand-off to a turn nobody takes, harmless at the kernel's end (bar.arrive "
                   f"does not block; the count dies with the CTA); to close it anyway, absorb the last pass with a "
                   f"final named_barrier_wait by the task it falls to, or skip the last arrive", e.loc, notes[:3],
                   "named.open-round", severity=INFO)


def consumer_free_pass(ctx: Context) -> Finding | None:
    """A consumer (it reads a slot after the wait, writes none) whose first wait
    on a barrier is for phase 1: on a fresh barrier that wait returns at once,
    before any arrival; on later uses it waits one phase late."""
    for task in ctx.tasks:
        seen = set()
        for i, e in enumerate(task.events):
            if e.kind != "wait" or e.key in seen:
                continue
            seen.add(e.key)
            if e.parity != 1 or not _reads_after(task, i):
                continue
            return Finding(f"consumer {task_label(task)} waits {barrier_use(e)} with {phase_use(e)} on its first use "
                           f"of {e.array.label(e.slot)}: a wait for phase 1 on a fresh barrier returns at once, before "
                           f"any arrival, so the task reads the slot before it is filled (and later waits one phase "
                           f"late); a consumer's first wait is for phase 0", e.loc, [], "ring.initial-phase")
    return None


def _reads_after(task: TaskEvents, pos: int) -> bool:
    """Whether the task reads shared memory after ``pos``, writing none, before it next arrives."""
    reads = False
    for x in task.events[pos + 1:]:
        if x.kind in WRITES:
            return False
        if x.kind in ("read", "mma"):
            reads = True
        if x.kind in ARRIVALS or x.kind == "wait":
            break
    return reads


def early_release(ctx: Context, failure: Failure) -> Finding | None:
    """A race on a slot that a reader released (arrived on a barrier) after its
    wait but before its read: the producer may refill the slot under the read."""
    reads = []
    if failure.event is not None and failure.event.kind == "read":
        reads.append(failure.event)
    other = failure.other
    if getattr(other, "kind", None) == "read":
        reads.append(other.event)
    for read in reads:
        task = ctx.task(read.task)
        pos = next(i for i, x in enumerate(task.events) if x is read)
        arrive = None
        for x in reversed(task.events[:pos]):
            if x.kind == "wait":
                break
            if x.kind in ARRIVALS:
                arrive = x
        if arrive is None:
            continue
        return Finding(f"{task_label(task)} releases {barrier_use(arrive)} ({where(arrive.loc)}) before it reads "
                       f"{read.array.label(read.slot)} ({where(read.loc)}): once released, the producer may refill "
                       f"the slot while this read is in progress; arrive after the last read of the slot",
                       arrive.loc, [(f"{task_label(task)} reads the slot here", read.loc)], "race.early-release")
    return None


def lapped(ctx: Context, failure: Failure, waits: list) -> Finding | None:
    """A blocked wait on a barrier that already completed phases beyond the one
    it waits for: its arrivers ran a whole phase ahead (no throttling wait)."""
    for t, e in waits:
        task = ctx.task(t)
        k = sum(1 for x in task.events[:ctx.sim.pos[t]] if x.kind == "wait" and x.key == e.key)
        state = ctx.sim.barriers.get(e.key)
        if state is None or state.bar.completed_phases < k + 2:
            continue
        arrivals = [x for _clock, phase_arrivals in state.completed for _task, x in phase_arrivals]
        arriver = ctx.task(arrivals[0].task)
        ops = _ops([x for x in arrivals if x.task == arriver.index])
        return Finding(f"{_at(task, e)} waits for phase {e.parity} of {barrier_use(e)} for its {ordinal(k + 1)} use "
                       f"of the slot, but {e.array.label(e.slot)} has already completed "
                       f"{state.bar.completed_phases} phases: {task_label(arriver)} arrived on it "
                       f"{times(len([x for x in arrivals if x.task == arriver.index]))} "
                       f"({', '.join(where(x.loc) for x in ops)}) without waiting in between for the slot to be "
                       f"released, so its phases ran a whole round ahead of this wait; a producer must wait for the "
                       f"release of a slot (its empty barrier) before it fills the slot again", e.loc,
                       [(f"{task_label(arriver)} arrives here", ops[0].loc)], "ring.lapped")
    return None


def expect_too_small(ctx: Context, failure: Failure) -> Finding:
    e, expects = failure.event, failure.other
    expected, delivered = (int(x) for x in failure.detail.split())
    where_expect = [(f"barrier_expect_bytes posts {x.amount} bytes here", x.loc) for x in expects[:1]]
    return Finding(f"TMA loads deliver {delivered} bytes into one phase of {e.array.label(e.slot)} but "
                   f"barrier_expect_bytes announced {expected}: the phase completes before this load lands (and the "
                   f"surplus bytes corrupt the next phase's count); expect exactly the bytes of the boxes",
                   e.loc, where_expect or [("no barrier_expect_bytes precedes this load in the phase", None)],
                   "barrier.expect-bytes")


def _mma_race(ctx: Context, e: Event, other, task: TaskEvents, owner: TaskEvents, slot: str) -> Finding:
    notes = [("the async_dot reads the slot here", other.event.loc)]
    doing = "overwrites" if e.kind in WRITES else "reads"
    if other.task == e.task:
        why = "no async_dot_wait retires the async_dot first"
    elif other.early_arrive is not None:
        arrive = other.early_arrive
        retired = (f"before its async_dot_wait at {where(other.retire_event.loc)} retires the MMA"
                   if other.retire_event is not None else "before any async_dot_wait retires the MMA")
        why = (f"{task_label(owner)} releases the slot on {arrive.array.label(arrive.slot)} at {where(arrive.loc)} "
               f"{retired}; release a slot after async_dot_wait")
        notes.append((f"{task_label(owner)} arrives here before the MMA that reads the slot completed", arrive.loc))
        return Finding(f"race: slot released before the MMA that reads it completed: {task_label(task)} {doing} "
                       f"{slot} ({where(e.loc)}) while the async_dot of {task_label(owner)} "
                       f"({where(other.event.loc)}) may still read it: {why}", e.loc, notes, "race.mma-early-release")
    else:
        why = "nothing orders the MMA's completion (async_dot_wait, then a barrier) before this access"
    return Finding(f"race: {task_label(task)} {doing} {slot} ({where(e.loc)}) while the async_dot of "
                   f"{task_label(owner)} ({where(other.event.loc)}) may still read it: {why}", e.loc, notes,
                   "race.async-dot")


def _tcgen05_race(ctx: Context, e: Event, other, task: TaskEvents, owner: TaskEvents, slot: str) -> Finding:
    """An access that conflicts with a tcgen05 MMA still in flight: only a wait on a
    barrier its completion arrives on (mBarriers=, tcgen05_commit) orders it."""
    what = "reads" if other.kind == "tcread" else "writes its accumulator in"
    doing = "reads" if e.kind in ("read", "tmastore", "mma", "tcread") else "overwrites"
    notes = [(f"the tcgen05 MMA that {what} {slot} is issued here", other.event.loc)]
    released = [x for x in owner.events if x.kind == "arrive" and x.op is not None
                and owner.events.index(x) > owner.events.index(other.event)][:1]
    if released and e.task != other.task:
        arrive = released[0]
        notes.append(((f"{task_label(owner)} arrives on {arrive.array.label(arrive.slot)} here, while the MMA "
                       f"may still run"), arrive.loc))
        why = (f"{task_label(owner)} releases {barrier_use(arrive)} with tlx.barrier_arrive ({where(arrive.loc)}) "
               f"right after issuing the MMA, which says nothing about the MMA's completion; signal it from the "
               f"MMA's completion instead (async_dot(..., mBarriers=[...]) or tlx.tcgen05_commit)")
        return Finding(f"race: slot released before the MMA that reads it completed: {task_label(task)} {doing} "
                       f"{slot} ({where(e.loc)}) while the tcgen05 MMA of {task_label(owner)} "
                       f"({where(other.event.loc)}) may still be running: {why}", e.loc, notes,
                       "race.mma-early-release")
    why = ("no wait on a barrier that the MMA's completion arrives on (async_dot mBarriers=, tlx.tcgen05_commit) "
           "orders the MMA before this access")
    return Finding(f"race: {task_label(task)} {doing} {slot} ({where(e.loc)}) while the tcgen05 MMA of "
                   f"{task_label(owner)} ({where(other.event.loc)}) {what} it: {why}", e.loc, notes, "race.tcgen05")


def race(ctx: Context, failure: Failure) -> Finding:
    e, other = failure.event, failure.other
    task, owner = ctx.task(e.task), ctx.task(other.task)
    slot = e.array.label(e.slot)
    if other.kind == "mma":
        return _mma_race(ctx, e, other, task, owner, slot)
    if other.kind in ("tcread", "tcacc"):
        return _tcgen05_race(ctx, e, other, task, owner, slot)
    if e.kind in ("tcread", "tcacc"):
        what = "reads" if e.kind == "tcread" else "accumulates into"
        verb = {"read": "reads", "tmastore": "TMA-stores"}.get(other.kind, "writes")
        return Finding(f"race: the tcgen05 MMA of {task_label(task)} {what} {slot} ({where(e.loc)}) while "
                       f"{task_label(owner)} may still be accessing it ({verb}, {where(other.event.loc)}): nothing "
                       f"orders that access before the MMA is issued; wait for the slot's release (the barrier "
                       f"{task_label(owner)} arrives on when done with it) before issuing the MMA", e.loc,
                       [(f"{task_label(owner)} accesses the slot here", other.event.loc)], "race.tcgen05")
    if other.kind == "tmaread":
        return _store_race(ctx, e, other, task, owner, slot)
    if other.kind == "copy":
        verb = "reads" if e.kind == "read" else "writes"
        if other.task == e.task:
            wait = _last_wait_group(task, e)
            why = (f"async_load_wait_group({wait.amount}) at {where(wait.loc)} leaves the {wait.amount} newest "
                   f"group{'s' if wait.amount != 1 else ''} in flight" if wait is not None else
                   "no async_load_wait_group retires it first")
            return Finding(f"race: {task_label(task)} {verb} {slot} before the cp.async copy into it "
                           f"({where(other.event.loc)}) is complete: {why}", e.loc,
                           [("the cp.async copy is issued here", other.event.loc)], "race.cp-async")
        notes = [("the cp.async copy is issued here", other.event.loc)]
        if other.early_arrive is not None:
            arrive = other.early_arrive
            retired = (f"before its async_load_wait_group at {where(other.retire_event.loc)} retires the copy"
                       if other.retire_event is not None else "before any async_load_wait_group retires the copy")
            why = f"{task_label(owner)} arrives on {arrive.array.label(arrive.slot)} at {where(arrive.loc)} {retired}"
            notes.append((f"{task_label(owner)} arrives here before the copy is complete", arrive.loc))
        else:
            why = "no barrier orders the copy's completion before this access"
        return Finding(f"race: {task_label(task)} {verb} {slot} ({where(e.loc)}) before the cp.async copy into it by "
                       f"{task_label(owner)} ({where(other.event.loc)}) is known to be complete: {why}", e.loc,
                       notes, "race.cp-async")
    if e.kind == "copy":
        what = "reading" if other.kind == "read" else "writing"
        return Finding(f"race: {task_label(task)} overwrites {slot} with a cp.async copy while {task_label(owner)} "
                       f"may still be {what} it ({where(other.event.loc)}): nothing orders that access before this "
                       f"copy (the slot must be released and its release waited for before it is refilled)",
                       e.loc, [(f"{task_label(owner)} accesses the slot here", other.event.loc)], "race.overwrite")
    verbs = {"read": "reads", "write": "writes", "tmawrite": "overwrites with a TMA load", "mma":
             "reads with an async_dot", "tmastore": "TMA-stores", "tcread": "reads with a tcgen05 MMA",
             "tcacc": "accumulates into"}
    return Finding(f"race: {task_label(task)} {verbs[e.kind]} {slot} ({where(e.loc)}) while {task_label(owner)} "
                   f"{verbs.get(other.event.kind, verbs[other.kind])} it ({where(other.event.loc)}) with nothing ordering the two accesses",
                   e.loc, [(f"{task_label(owner)} accesses the slot here", other.event.loc)], "race.shared")


def _store_race(ctx: Context, e: Event, other, task: TaskEvents, owner: TaskEvents, slot: str) -> Finding:
    """A slot rewritten while a TMA (or bulk) store may still read it: only the issuing
    task's ``async_descriptor_store_wait`` retires that read (then a barrier, for others)."""
    store = "TMA store" if other.event.op is None or other.event.op.name == "tlx.async_descriptor_store" \
        else "bulk store"
    doing = {"tmawrite": "overwrites {} with a TMA load", "copy": "overwrites {} with a cp.async copy",
             "tcacc": "accumulates into {}"}.get(e.kind, "writes {}").format(slot)
    notes = [(f"the {store} that reads {slot} is issued here", other.event.loc)]
    if other.task == e.task:
        wait = _last_wait_group(task, e, "storewait")
        why = (f"tlx.async_descriptor_store_wait({wait.amount}) at {where(wait.loc)} leaves the {wait.amount} newest "
               f"store{'s' if wait.amount != 1 else ''} in flight, this one among them" if wait is not None else
               "no tlx.async_descriptor_store_wait retires it first")
        why += "; wait for the store (tlx.async_descriptor_store_wait) before rewriting its source buffer"
    elif other.early_arrive is not None:
        arrive = other.early_arrive
        why = (f"{task_label(owner)} arrives on {arrive.array.label(arrive.slot)} at {where(arrive.loc)} before "
               + (f"its tlx.async_descriptor_store_wait at {where(other.retire_event.loc)} retires the store"
                  if other.retire_event is not None else "any tlx.async_descriptor_store_wait retires the store")
               + "; release the slot after the store wait")
        notes.append((f"{task_label(owner)} arrives here while the store may still read the slot", arrive.loc))
    else:
        why = ("nothing orders the store's read (tlx.async_descriptor_store_wait, then a barrier) before this "
               "access")
    return Finding(f"race: {task_label(task)} {doing} ({where(e.loc)}) while the {store} of "
                   f"{task_label(owner)} ({where(other.event.loc)}) may still be reading it: {why}", e.loc, notes,
                   "race.tma-store")


def _last_wait_group(task: TaskEvents, e: Event, kind: str = "waitgroup") -> Event | None:
    found = None
    for x in task.events:
        if x is e:
            break
        if x.kind == kind:
            found = x
    return found
