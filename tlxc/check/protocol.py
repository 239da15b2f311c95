"""The barrier-protocol check: bounded symbolic execution of every task's
barrier, named-barrier and shared-memory operations.

Scenarios: loops with compile-time bounds run their real trip count; loops
whose bounds are runtime values run 1, N, N+1 and 2N+1 times for every ring
size N of the kernel (the sizes of its barrier and buffer arrays) -- the
counts where ring protocols typically break: the first use, a full ring, the
first wrap, a second wrap.  Each scenario's events are replayed under several
schedules (``simulate.py``); the first failure is explained (``explain.py``)
and reported.  A kernel whose protocol depends on runtime values gets a note
instead (``tlxc check --run`` decides it on the interpreter).
"""
from __future__ import annotations

import os

from ..ir.core import Operation
from ..ir.traits import ALLOCATION, has_trait
from .events import EventCollector, TooLong, Undecidable, kernel_uses_protocol
from .explain import Context, explain
from .findings import NOTE, Finding
from .simulate import simulate

MAX_SCENARIOS = 6


def trip_counts(kernel: Operation) -> list[int]:
    sizes = set()
    for op in kernel.walk():
        if has_trait(op, ALLOCATION):
            sizes.add(op.results[0].type.num)
    counts = {1}
    for n in sizes:
        counts |= {n, n + 1, 2 * n + 1}
    ordered = sorted(c for c in counts if c >= 1)
    if len(ordered) > MAX_SCENARIOS:      # keep the smallest ones and the longest
        ordered = ordered[:MAX_SCENARIOS - 1] + [ordered[-1]]
    return ordered


def collect_scenario(kernel: Operation, trips: int, pins: dict, memo: dict):
    """Events with every unknown loop bound pinned; collected again until the pins
    settle (a bound pinned in a later task may be read by an earlier one).  A run whose
    pins no earlier lookup missed would repeat itself: it is not run again."""
    tasks, pinned = None, False
    for _ in range(3):
        before = dict(pins)
        collector = EventCollector(kernel, trips, pins, memo)
        tasks = collector.collect()
        pinned = pinned or collector.pinned
        if pins == before or collector.settled():
            break
    return tasks, pinned


def check_protocol(kernel: Operation) -> list[Finding]:
    if not kernel_uses_protocol(kernel):
        return []
    try:
        return _check(kernel)
    except Exception as exc:   # a checker bug must not stop a compile
        if os.environ.get("TLXC_DEBUG") == "1":
            raise
        return [Finding(f"the barrier checker failed on this kernel ({type(exc).__name__}: {exc}); this is a tlxc "
                        f"bug (TLXC_DEBUG=1 shows it), and the kernel's barrier protocol is unchecked", kernel.loc,
                        check="protocol.internal-error", severity=NOTE)]


def _check(kernel: Operation) -> list[Finding]:
    memo: dict = {}
    for trips in trip_counts(kernel):
        pins: dict = {}
        try:
            tasks, pinned = collect_scenario(kernel, trips, pins, memo)
            failure, sim = simulate(tasks)
        except (Undecidable, TooLong) as exc:
            return [Finding(f"the barrier protocol cannot be checked statically: {exc.message}; "
                            f"'tlxc check --run' checks it on the interpreter", exc.loc, check="protocol.undecidable",
                            severity=NOTE)]
        if failure is not None:
            trip_pins = sum(1 for key in pins if key != "__symbols__")
            return [explain(Context(kernel, tasks, sim, trips, pinned, trip_pins), failure)]
        if not pinned:
            break
    return []
