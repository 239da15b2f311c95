"""Replaying the protocol events of one scenario under one schedule.

Only the protocol runs: mbarriers are the interpreter's ``MBarrier`` state
machine (pending arrivals, transaction bytes, phase parity), named barriers
count threads per round, cp.async copies sit in commit groups until a
``wait_group`` retires them.  Happens-before is tracked with vector clocks: an
arrive releases the task's clock into the barrier's phase in progress, a
passing wait acquires the clock of the completed phase it observed, a named
barrier round joins its participants, spawning and joining tasks order them
with ``main``.

A run ends in one of these ways, each a ``Failure`` (or ``None`` when every
task finishes):

* ``deadlock``: every unfinished task is blocked;
* ``overflow``: an arrive brings more arrivals than its barrier's phase has
  pending (undefined behaviour in PTX);
* ``named``: a named barrier is used with two thread counts, or more threads
  arrive in one round than it counts;
* ``race``: two accesses to one shared-memory slot, one of them a write or a
  cp.async copy, that nothing orders (a copy is ordered by the issuing task's
  ``wait_group``, then by whatever orders that point; an ``async_dot``'s
  operand read likewise by its ``async_dot_wait``, a TMA or bulk store's read
  of its source by the ``async_descriptor_store_wait`` that leaves it no longer
  pending (each store is its own bulk group); a TMA load's write by the
  barrier its bytes complete; a tcgen05 MMA's accesses by a barrier its
  completion arrives on);
* ``txbytes``: TMA loads deliver more bytes into a barrier phase than
  ``barrier_expect_bytes`` announced for it;
* ``open-round``: every task finished, but a named barrier still has a round
  in progress: ``bar.arrive`` threads that no ``bar.sync`` ever consumes (a
  warning, reported only when no schedule fails otherwise).

Schedules: ``in-order`` (the lowest-numbered runnable task runs until it
blocks), ``reverse``, ``round-robin`` and seeded random ones.  A failure under
any schedule is a real possible execution of the kernel.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..ir.mbarrier import MBarrier
from .events import Event, TaskEvents, TooLong

READS = ("read", "mma", "tcread", "tmaread")          # accesses that only read the slot
ASYNC = ("copy", "mma", "tcread", "tcacc", "tmaread")  # accesses in flight until something retires them
ENGINE = ("tcread", "tcacc")     # tcgen05 accesses: retired by the task's MMA engine (see do_tcdone)
SCHEDULES = ("in-order", "reverse", "round-robin", "random-0", "random-1")
MAX_STEPS = 200_000


@dataclass
class Failure:
    kind: str                                   # deadlock, overflow, named, race, txbytes, open-round
    schedule: str
    event: Event | None = None                  # the operation that failed (overflow, named, race)
    blocked: list = field(default_factory=list)  # deadlock: [(task index, event)]
    other: object = None                        # race: the conflicting Access; named: the first use
    detail: str = ""


class _Fail(Exception):
    def __init__(self, failure: Failure):
        super().__init__(failure.kind)
        self.failure = failure


def _join(a: list[int] | None, b: list[int]) -> list[int]:
    if a is None:
        return list(b)
    return [max(x, y) for x, y in zip(a, b)]


def overlaps(a, b) -> bool:
    if a is None or b is None:
        return True
    return all(s1 < s2 + z2 and s2 < s1 + z1 for (s1, z1), (s2, z2) in zip(a, b))


class BarrierSlot:
    """One mbarrier, with the clocks and arrivals of its phases."""

    def __init__(self, array, slot: int):
        self.array = array
        self.bar = MBarrier(array.arrive_count, array.name, slot, array.per_thread)
        self.clock: list[int] | None = None      # released into the phase in progress
        self.arrivals: list = []                 # (task, event) of the phase in progress
        self.completed: list = []                # per completed phase: (clock, arrivals)
        self.expects: list = []                  # expect_bytes events of the phase in progress
        self.expected = 0                        # their bytes
        self.delivered = 0                       # bytes TMA loads delivered into the phase in progress
        self.previous = ([], 0, 0)               # the same three of the last completed phase

    def phase_completed(self) -> None:
        self.completed.append((self.clock, self.arrivals))
        self.clock, self.arrivals = None, []
        self.previous = (self.expects, self.expected, self.delivered)
        self.expects, self.expected, self.delivered = [], 0, 0


class NamedBarrier:
    def __init__(self, ident: int):
        self.ident = ident
        self.expected: int | None = None
        self.arrived = 0
        self.generation = 0
        self.clock: list[int] | None = None
        self.participants: list = []             # (task, event) of the round in progress
        self.completed: dict[int, list[int]] = {}
        self.first: tuple | None = None          # (task, event) that set this round's count


@dataclass(eq=False)
class Access:
    kind: str                 # read, write, copy, mma (an async_dot operand read)
    task: int
    clock: int
    event: Event
    box: tuple | None
    retire: int | None = None
    retire_event: Event | None = None
    early_arrive: Event | None = None           # copies: an arrive of the issuer before the copy retired
    observed: tuple | None = None               # (wait event, phase index) the task last passed


class Simulator:
    def __init__(self, tasks: list[TaskEvents], schedule: str = "in-order"):
        self.tasks = tasks
        self.schedule = schedule
        n = len(tasks)
        self.n = n
        self.pos = [0] * n
        self.started = [False] * n
        self.done = [False] * n
        # entries n..2n-1 of a vector clock are the tasks' tcgen05 engines: an MMA completes
        # on the engine, which only a wait on a barrier the completion arrived on observes
        self.clocks = [[0] * (2 * n) for _ in range(n)]
        self.engines = [[0] * (2 * n) for _ in range(n)]
        self.tc_pending: list[list[Access]] = [[] for _ in range(n)]
        self.barriers: dict = {}
        self.named: dict[int, NamedBarrier] = {}
        self.named_waiting: dict[int, tuple[NamedBarrier, int]] = {}
        self.open_groups: list[list[Access]] = [[] for _ in range(n)]
        self.groups: list[list[list[Access]]] = [[] for _ in range(n)]
        self.unretired: list[list[Access]] = [[] for _ in range(n)]
        self.open_mma: list[list[Access]] = [[] for _ in range(n)]
        self.bulk_groups: list[list[list[Access]]] = [[] for _ in range(n)]   # TMA/bulk stores, one per group
        self.mma_groups: list[list[list[Access]]] = [[] for _ in range(n)]
        self.accesses: dict = {}
        self.observed: dict = {}                 # (task, key) -> phase index of its last passing wait
        self.last_wait: list[tuple | None] = [None] * n
        self.repeats: list = []                  # (task, event, phase index): a wait passed on an old phase
        self.observations: dict[int, int] = {}   # id(event) -> phase index it observed (last execution)
        self.steps = 0
        self.rng = random.Random(int(schedule.split("-")[1])) if schedule.startswith("random") else None
        # the task order of the fixed schedules (round-robin rotates it by the step count)
        self.fixed_order = tuple(reversed(range(n))) if schedule == "reverse" else tuple(range(n))
        self.handlers: dict = {}                 # event kind -> its do_<kind> method

    # -- driver ------------------------------------------------------------------------------------
    def run(self) -> Failure | None:
        self.start(0)
        try:
            while self.advance():
                self.steps += 1
                if self.steps > MAX_STEPS:
                    raise TooLong(f"the protocol simulation exceeded {MAX_STEPS} steps", None)
        except _Fail as fail:
            return fail.failure
        if all(self.done[t] or not self.started[t] for t in range(self.n)):
            return self.open_round()
        blocked = [(t, self.tasks[t].events[self.pos[t]]) for t in range(self.n)
                   if self.started[t] and not self.done[t]]
        return Failure("deadlock", self.schedule, blocked=blocked)

    def order(self) -> list[int] | tuple[int, ...]:
        if self.rng is not None:
            order = list(range(self.n))
            self.rng.shuffle(order)
            return order
        if self.schedule == "round-robin":
            k = self.steps % self.n
            return self.fixed_order[k:] + self.fixed_order[:k]
        return self.fixed_order

    def advance(self) -> bool:
        for t in self.order():
            if self.started[t] and not self.done[t] and self.step(t):
                return True
        return False

    def start(self, t: int, clock: list[int] | None = None) -> None:
        self.started[t] = True
        if clock is not None:
            self.clocks[t] = list(clock)
        if not self.tasks[t].events:
            self.done[t] = True

    def step(self, t: int) -> bool:
        event = self.tasks[t].events[self.pos[t]]
        handler = self.handlers.get(event.kind)
        if handler is None:
            handler = self.handlers[event.kind] = getattr(self, "do_" + event.kind)
        if not handler(t, event):
            return False
        self.pos[t] += 1
        if self.pos[t] == len(self.tasks[t].events):
            self.done[t] = True
        return True

    def tick(self, t: int) -> list[int]:
        clock = self.clocks[t]
        clock[t] += 1
        return clock

    def fail(self, kind: str, event: Event, **fields) -> None:
        raise _Fail(Failure(kind, self.schedule, event, **fields))

    # -- mbarriers -------------------------------------------------------------------------------
    def slot(self, event: Event) -> BarrierSlot:
        state = self.barriers.get(event.key)
        if state is None:
            state = self.barriers[event.key] = BarrierSlot(event.array, event.slot)
        return state

    def do_wait(self, t: int, e: Event) -> bool:
        state = self.slot(e)
        if not state.bar.phase_done(e.parity):
            return False
        clock = self.tick(t)
        phase = state.bar.completed_phases - 1
        if phase % 2 != e.parity:
            phase -= 1
        if phase >= 0:
            self.clocks[t] = _join(clock, state.completed[phase][0])
        key = (t, e.key)
        if self.observed.get(key, -2) == phase:
            self.repeats.append((t, e, phase))
        self.observed[key] = phase
        self.observations[id(e)] = phase
        self.last_wait[t] = (e, phase)
        return True

    def arrival_weight(self, t: int, e: Event) -> int:
        if e.kind == "expect":
            return 1
        return e.amount * (self.tasks[t].threads if e.array.per_thread else 1)

    def do_arrive(self, t: int, e: Event) -> bool:
        state = self.slot(e)
        weight = self.arrival_weight(t, e)
        if weight > state.bar.pending:
            self.fail("overflow", e, detail=state.bar.state())
        clock = self.tick(t)
        for access in self.unretired[t]:
            if access.early_arrive is None:
                access.early_arrive = e
        if e.kind == "expect":
            state.bar.expect_tx(e.amount)
            state.expects.append(e)
            state.expected += e.amount
        state.clock = _join(state.clock, clock)
        state.arrivals.append((t, e))
        before = state.bar.completed_phases
        state.bar.arrive(weight)
        if state.bar.completed_phases > before:
            state.phase_completed()
        return True

    do_expect = do_arrive

    def do_tma(self, t: int, e: Event) -> bool:
        """A TMA load's bytes land on its barrier (complete_tx)."""
        state = self.slot(e)
        state.delivered += e.amount
        if state.delivered > state.expected:
            expects, expected, delivered = state.expects, state.expected, state.delivered
            if not expects and state.previous[0]:     # the expected bytes completed the phase before this load
                expects, expected, delivered = state.previous[0], state.previous[1], state.previous[2] + delivered
            self.fail("txbytes", e, other=list(expects), detail=f"{expected} {delivered}")
        clock = self.tick(t)
        state.clock = _join(state.clock, clock)
        before = state.bar.completed_phases
        state.bar.complete_tx(e.amount)
        if state.bar.completed_phases > before:
            state.phase_completed()
        return True

    def do_tmawrite(self, t: int, e: Event) -> bool:
        """The TMA load's box lands in its slot; its barrier orders it for readers."""
        self.access(t, e, "write")
        return True

    def do_tmastore(self, t: int, e: Event) -> bool:
        """A TMA (or bulk) store reads its source slot asynchronously: the read is in
        flight, in a bulk group of its own, until a store wait retires it."""
        access = self.access(t, e, "tmaread")
        self.bulk_groups[t].append([access])
        self.unretired[t].append(access)
        return True

    def do_storewait(self, t: int, e: Event) -> bool:
        """``async_descriptor_store_wait(n)``: all but the ``n`` newest stores have read their source."""
        self.retire_groups(t, e, self.bulk_groups)
        return True

    def do_fence(self, t: int, e: Event) -> bool:
        return True

    # -- wgmma (async_dot) ---------------------------------------------------------------------
    def do_mma(self, t: int, e: Event) -> bool:
        access = self.access(t, e, "mma")
        self.open_mma[t].append(access)
        self.unretired[t].append(access)
        return True

    def do_mmacommit(self, t: int, e: Event) -> bool:
        self.mma_groups[t].append(self.open_mma[t])
        self.open_mma[t] = []
        return True

    def do_mmawait(self, t: int, e: Event) -> bool:
        self.retire_groups(t, e, self.mma_groups)
        return True

    # -- tcgen05 (Blackwell MMA) -------------------------------------------------------------------
    def do_tcread(self, t: int, e: Event) -> bool:
        self.tc_pending[t].append(self.access(t, e, "tcread"))
        return True

    def do_tcacc(self, t: int, e: Event) -> bool:
        self.tc_pending[t].append(self.access(t, e, "tcacc"))
        return True

    def complete_engine(self, t: int, e: Event) -> list[int]:
        """Task ``t``'s MMAs issued so far complete: the engine learns the issuer's
        clock, ticks, and retires their accesses at that tick."""
        engine = self.engines[t] = _join(self.engines[t], self.tick(t))
        engine[self.n + t] += 1
        for access in self.tc_pending[t]:
            access.retire, access.retire_event = engine[self.n + t], e
        self.tc_pending[t] = []
        return engine

    def do_tcdone(self, t: int, e: Event) -> bool:
        """The completion of the task's MMAs so far arrives once on a barrier
        (``mBarriers=``, ``tcgen05_commit``), carrying the engine's clock."""
        state = self.slot(e)
        if state.bar.pending < 1:
            self.fail("overflow", e, detail=state.bar.state())
        engine = self.complete_engine(t, e)
        state.clock = _join(state.clock, engine)
        state.arrivals.append((t, e))
        before = state.bar.completed_phases
        state.bar.arrive(1)
        if state.bar.completed_phases > before:
            state.phase_completed()
        return True

    def do_tcsync(self, t: int, e: Event) -> bool:
        """A synchronous MMA: the task waits for its engine."""
        self.clocks[t] = _join(self.clocks[t], self.complete_engine(t, e))
        return True

    def retire_groups(self, t: int, e: Event, table: list) -> None:
        """Retire all but the newest ``e.amount`` committed groups of task ``t``
        (``async_load_wait_group`` and ``async_dot_wait`` alike)."""
        clock = self.tick(t)
        groups = table[t]
        keep = max(e.amount, 0)
        retired, table[t] = (groups[:-keep], groups[-keep:]) if keep else (groups, [])
        for group in retired:
            for access in group:
                access.retire, access.retire_event = clock[t], e
        if retired:
            self.unretired[t] = [a for a in self.unretired[t] if a.retire is None]

    # -- named barriers --------------------------------------------------------------------------
    def open_round(self) -> Failure | None:
        """A named-barrier round still in progress when every task has
        finished: its arrivals are all ``bar.arrive`` (a ``bar.sync`` would
        still be blocked), and nothing ever completes it."""
        for barrier in sorted(self.named.values(), key=lambda b: b.ident):
            if barrier.arrived:
                _, last = barrier.participants[-1]
                return Failure("open-round", self.schedule, last, other=list(barrier.participants),
                               detail=f"{barrier.arrived} {barrier.expected}")
        return None

    def named_barrier(self, t: int, e: Event, waits: bool) -> bool:
        if t in self.named_waiting:
            barrier, generation = self.named_waiting[t]
            if barrier.generation <= generation:
                return False
            del self.named_waiting[t]
            self.clocks[t] = _join(self.tick(t), barrier.completed[generation])
            return True
        barrier = self.named.get(e.ident)
        if barrier is None:
            barrier = self.named[e.ident] = NamedBarrier(e.ident)
        threads = self.tasks[t].threads
        if barrier.expected is None:
            barrier.expected, barrier.first = e.amount, (t, e)
        elif barrier.expected != e.amount:
            self.fail("named", e, other=barrier.first, detail="count")
        if barrier.arrived == 0 and threads > e.amount and threads % e.amount == 0:
            # bar.sync counts warps: the task fills threads // amount rounds by itself (as the interpreter)
            clock = self.tick(t)
            for _ in range(threads // e.amount):
                barrier.completed[barrier.generation] = clock
                barrier.generation += 1
            barrier.expected, barrier.clock, barrier.participants = None, None, []
            return True
        if barrier.arrived + threads > barrier.expected:
            self.fail("named", e, other=barrier.first, detail="overflow")
        clock = self.tick(t)
        barrier.clock = _join(barrier.clock, clock)
        barrier.participants.append((t, e))
        generation = barrier.generation
        barrier.arrived += threads
        if barrier.arrived == barrier.expected:
            barrier.completed[generation] = barrier.clock
            barrier.generation += 1
            barrier.expected, barrier.arrived, barrier.clock, barrier.participants = None, 0, None, []
        if not waits:
            return True
        if barrier.generation > generation:
            self.clocks[t] = _join(self.clocks[t], barrier.completed[generation])
            return True
        self.named_waiting[t] = (barrier, generation)
        return False

    def do_nwait(self, t: int, e: Event) -> bool:
        return self.named_barrier(t, e, True)

    def do_narrive(self, t: int, e: Event) -> bool:
        return self.named_barrier(t, e, False)

    # -- tasks -----------------------------------------------------------------------------------
    def do_spawn(self, t: int, e: Event) -> bool:
        clock = self.tick(t)
        for child in e.tasks:
            self.start(child, clock)
        return True

    def do_join(self, t: int, e: Event) -> bool:
        if not all(self.done[child] for child in e.tasks):
            return False
        clock = self.tick(t)
        for child in e.tasks:
            clock = _join(clock, self.clocks[child])
        self.clocks[t] = clock
        return True

    # -- cp.async and shared memory ------------------------------------------------------------------
    def do_commit(self, t: int, e: Event) -> bool:
        self.tick(t)
        if self.open_groups[t]:
            self.groups[t].append(self.open_groups[t])
            self.open_groups[t] = []
        return True

    def do_waitgroup(self, t: int, e: Event) -> bool:
        self.retire_groups(t, e, self.groups)
        return True

    def do_copy(self, t: int, e: Event) -> bool:
        access = self.access(t, e, "copy")
        self.open_groups[t].append(access)
        self.unretired[t].append(access)
        return True

    def do_read(self, t: int, e: Event) -> bool:
        self.access(t, e, "read")
        return True

    def do_write(self, t: int, e: Event) -> bool:
        self.access(t, e, "write")
        return True

    def access(self, t: int, e: Event, kind: str) -> Access:
        clock = self.tick(t)
        new = Access(kind, t, clock[t], e, e.box, observed=self.last_wait[t])
        records = self.accesses.setdefault(e.key, [])
        for old in records:
            if not overlaps(old.box, new.box) or (kind in READS and old.kind in READS):
                continue
            if old.kind in ENGINE:
                if old.task == t and kind in ENGINE:
                    continue              # one task's MMAs run in issue order
                if old.retire is None or clock[self.n + old.task] < old.retire:
                    self.fail("race", e, other=old)
                continue
            if old.task == t:
                if old.kind == "copy" and kind != "copy" and old.retire is None:
                    self.fail("race", e, other=old)
                if old.kind in ("mma", "tmaread") and kind not in READS and old.retire is None:
                    self.fail("race", e, other=old)
                continue
            if old.kind in ASYNC:
                ordered = old.retire is not None and clock[old.task] >= old.retire
            else:
                ordered = clock[old.task] >= old.clock
            if not ordered:
                self.fail("race", e, other=old)
        records[:] = [old for old in records if not _dominated(old, new)]
        records.append(new)
        return new


def _dominated(old: Access, new: Access) -> bool:
    """Whether ``new`` makes ``old`` redundant for later checks (same task,
    same region, and ``old`` no longer in flight)."""
    if old.task != new.task or old.box != new.box:
        return False
    if old.kind in ASYNC:
        return new.kind == old.kind and old.retire is not None
    return old.kind == new.kind


def simulate(tasks: list[TaskEvents], schedules=SCHEDULES) -> tuple[Failure | None, Simulator]:
    """The first failure over ``schedules`` (and the simulator that found
    it); an ``open-round`` only when no schedule fails otherwise."""
    sim, open_round = None, None
    for schedule in schedules:
        sim = Simulator(tasks, schedule)
        failure = sim.run()
        if failure is not None and failure.kind != "open-round":
            return failure, sim
        open_round = open_round or (failure and (failure, sim))
    return open_round or (None, sim)
