"""Cooperative scheduling of the tasks of one program (CTA).

Each task is a Python generator: the executor running a region.  A rule that
must wait yields a ``Blocked`` object (what it waits for, where, and a
``ready()`` predicate); a rule that only offers the scheduler a chance to
interleave yields ``PREEMPT``.  Asynchronous operations (copies, async MMAs)
are ``AsyncEvent``s posted to the scheduler: they complete later, at a point
the scheduler picks.

The scheduler repeatedly picks one runnable task (running it up to its next
yield) or one ready event (completing it):

* ``seed=None`` — deterministic: each task runs until it blocks (``PREEMPT``
  is ignored), then the next one, round-robin; events complete only when no
  task can run.  Producers thus run as far ahead, and memory is as slow, as
  the barriers allow: the order that best exposes missing waits;
* ``seed=k`` — a seeded random choice among runnable tasks and ready events,
  so several seeds explore several interleavings.

When live tasks remain but none can run and no event can complete, that is a
deadlock: ``DeadlockError`` names every blocked task, its line, the barrier
(name and index) and phase it waits for, and that barrier's state.

``tracer`` (None unless a timeline is being recorded, ``trace.py``) is told
of every spawn, resume, yield, posted and completed event, and a deadlock:
one ``is None`` test per scheduling step when nobody traces.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Generator

from ..errors import DeadlockError, InterpreterError, Location


class Blocked:
    """Yielded by a task that cannot continue until ``ready()`` holds."""

    __slots__ = ("barrier", "loc", "phase", "ready", "reason")

    def __init__(self, reason: str, ready: Callable[[], bool], loc: Location | None = None,
                 barrier=None, phase: int | None = None):
        self.reason = reason
        self.ready = ready
        self.loc = loc
        self.barrier = barrier
        self.phase = phase

    @classmethod
    def on_barrier(cls, barrier, phase: int, loc: Location | None = None) -> Blocked:
        """Wait until the phase of ``barrier`` with parity ``phase`` has completed."""
        return cls(f"waits for phase {phase} of barrier {barrier.label}",
                   lambda: barrier.phase_done(phase), loc, barrier, phase)

    def describe(self) -> str:
        if self.barrier is not None:
            return f"{self.reason}; the barrier is {self.barrier.state()}"
        return self.reason


class Preempt:
    """Yielded at a point where another task may run first (no condition)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "PREEMPT"


PREEMPT = Preempt()


class Task:
    """One coroutine of a program: the kernel body or an async task's region."""

    def __init__(self, name: str, body: Generator, loc: Location | None = None, title: str | None = None):
        self.name = name
        self.title = title or f"task '{name}'"     # how diagnostics name it (with its replica)
        self.body = body
        self.loc = loc
        self.blocked: Blocked | None = None
        self.done = False

    def runnable(self) -> bool:
        return not self.done and (self.blocked is None or self.blocked.ready())

    def __repr__(self) -> str:
        state = "done" if self.done else (self.blocked.describe() if self.blocked else "runnable")
        return f"<Task {self.name}: {state}>"


class AsyncEvent:
    """An asynchronous operation in flight: ``complete()`` runs when the
    scheduler decides it lands (not before ``ready()`` holds)."""

    def __init__(self, name: str, complete: Callable[[], None], loc: Location | None = None,
                 ready: Callable[[], bool] | None = None):
        self.name = name
        self.complete = complete
        self.loc = loc
        self.ready = ready
        self.done = False

    def is_ready(self) -> bool:
        return not self.done and (self.ready is None or self.ready())

    def __repr__(self) -> str:
        return f"<AsyncEvent {self.name} at {self.loc}{' done' if self.done else ''}>"


class Scheduler:
    """Runs the tasks of one program to completion (or to a deadlock)."""

    def __init__(self, label: str = "program (0, 0, 0)", seed: int | None = None,
                 max_steps: int | None = None):
        self.label = label
        self.rng = random.Random(seed) if seed is not None else None
        self.tasks: list[Task] = []
        self.events: list[AsyncEvent] = []
        self.current: Task | None = None
        self.max_steps = max_steps
        self.steps = 0
        self.hints: list[tuple[str, Location | None]] = []   # extra notes for a deadlock report
        self.tracer = None          # a trace.Tracer while a timeline is recorded
        self._next = 0

    # -- what rules call ------------------------------------------------------------
    def spawn(self, name: str, body: Generator, loc: Location | None = None, title: str | None = None) -> Task:
        task = Task(name, body, loc, title)
        self.tasks.append(task)
        if self.tracer is not None:
            self.tracer.spawned(task)
        return task

    def post(self, name: str, complete: Callable[[], None], loc: Location | None = None,
             ready: Callable[[], bool] | None = None) -> AsyncEvent:
        event = AsyncEvent(name, complete, loc, ready)
        self.events.append(event)
        if self.tracer is not None:
            self.tracer.posted(event)
        return event

    def finish(self, event: AsyncEvent) -> None:
        """Complete ``event`` now (a wait that needs it landed), if not done yet."""
        if not event.done:
            self._complete(event)

    def hint(self, text: str, loc: Location | None = None, limit: int = 4) -> None:
        """Remember a suspicious event; a deadlock report lists it as a note."""
        if (text, loc) not in self.hints and len(self.hints) < limit:
            self.hints.append((text, loc))

    def join(self, tasks: list[Task], loc: Location | None = None) -> Blocked:
        """A ``Blocked`` that waits for ``tasks`` to finish (for ``async_tasks``)."""
        names = ", ".join(f"'{t.name}'" for t in tasks)
        return Blocked(f"waits for task(s) {names} to finish", lambda: all(t.done for t in tasks), loc)

    # -- the loop -------------------------------------------------------------------
    def run(self) -> None:
        while True:
            live = [t for t in self.tasks if not t.done]
            ready_events = [e for e in self.events if e.is_ready()]
            if not live:
                if not ready_events:
                    return
                self._complete(ready_events[0])
                continue
            runnable = [t for t in live if t.runnable()]
            if not runnable and not ready_events:
                raise self.deadlock(live)
            self._step_limit()
            if self.rng is not None:
                choice = self.rng.choice(runnable + ready_events)
            elif runnable:
                choice = self._round_robin(runnable)
            else:
                choice = ready_events[0]
            if isinstance(choice, Task):
                preempted = self._resume(choice)
                while preempted and self.rng is None:
                    self._step_limit()
                    preempted = self._resume(choice)
            else:
                self._complete(choice)

    def _round_robin(self, runnable: list[Task]) -> Task:
        for offset in range(len(self.tasks)):
            index = (self._next + offset) % len(self.tasks)
            task = self.tasks[index]
            if task in runnable:
                self._next = index + 1
                return task
        return runnable[0]

    def _resume(self, task: Task) -> bool:
        """Run ``task`` to its next yield; True if it only offered a preemption."""
        task.blocked = None
        self.current = task
        if self.tracer is not None:
            self.tracer.resumed(task)
        try:
            item = task.body.send(None)
        except StopIteration:
            task.done = True
        finally:
            self.current = None
        if self.tracer is not None:
            self.tracer.yielded(task, None if task.done else item)
        if task.done:
            return False
        if item is PREEMPT:
            return True
        if isinstance(item, Blocked):
            task.blocked = item
            return False
        raise InterpreterError(f"internal interpreter error: task '{task.name}' yielded {item!r} "
                               f"(expected Blocked or PREEMPT)", task.loc)

    def _complete(self, event: AsyncEvent) -> None:
        self.events.remove(event)
        event.done = True
        event.complete()
        if self.tracer is not None:
            self.tracer.completed(event)

    def _step_limit(self) -> None:
        self.steps += 1
        if self.max_steps is not None and self.steps > self.max_steps:
            raise InterpreterError(f"{self.label} did not finish within {self.max_steps} scheduling steps "
                                   f"(a livelock, or raise max_steps)")

    def deadlock(self, live: list[Task]) -> DeadlockError:
        if self.tracer is not None:
            self.tracer.deadlocked(live)
        count = f"all {len(live)} live tasks are" if len(live) > 1 else "its only live task is"
        notes = []
        for task in live:
            blocked = task.blocked
            text = f"{task.title} {blocked.describe() if blocked else 'cannot run'}"
            notes.append((text, blocked.loc if blocked else task.loc))
        for event in self.events:
            notes.append((f"asynchronous {event.name} is still waiting to start", event.loc))
        notes.extend(self.hints)
        return DeadlockError(f"deadlock in {self.label}: {count} blocked", None, notes)
