"""The mbarrier state machine, with TLX's phase semantics: one model shared by the interpreter
(``interpreter/barrier_ops.py``) and the checker's simulation (``check/simulate.py``).

An mbarrier counts down *pending arrivals* (reset to ``arrive_count`` at the
start of each phase) and *transaction bytes* (raised by ``expect_tx``, lowered
by the async copies that signal it with ``complete_tx``; it may dip below zero
when a copy lands before its expectation is posted, as in PTX).  The current
phase completes when both reach zero: the phase parity flips and the counts
reset.

``wait(bar, phase)`` waits until *the phase with parity ``phase`` has
completed*, which PTX's ``mbarrier.try_wait.parity`` checks as "the current
phase's parity differs from ``phase``".  So a fresh barrier (phase 0 in
progress) lets ``wait(bar, 1)`` pass at once — "the previous phase, parity 1,
has completed" — the idiom producers use for their first wait on an empty
slot.
"""
from __future__ import annotations

from ..errors import BarrierError, Location


class MBarrier:
    """One mbarrier.  ``name``/``index`` identify it in diagnostics.
    ``per_thread`` barriers (``alloc_warp_barrier``) count each thread's arrival."""

    def __init__(self, arrive_count: int, name: str = "bar", index: int = 0, per_thread: bool = False):
        if arrive_count < 1:
            raise ValueError(f"an mbarrier needs an arrive count of at least 1, got {arrive_count}")
        self.arrive_count = arrive_count
        self.name = name
        self.index = index
        self.per_thread = per_thread
        self.parity = 0                 # parity of the phase in progress
        self.completed_phases = 0       # phases completed so far (absolute count)
        self.pending = arrive_count     # arrivals still missing in this phase
        self.tx_bytes = 0               # transaction bytes still expected in this phase
        self.listeners: list = []       # callables(barrier, completed_phase_index)
        self.cta: int | None = None     # its CTA's rank, when the kernel runs in clusters
        self.origin = None              # the tlx.alloc_barriers op (how a peer CTA finds its copy)

    @property
    def label(self) -> str:
        where = "" if self.cta is None else f" of CTA {self.cta}"
        return f"'{self.name}'[{self.index}]{where}"

    # -- the PTX operations --------------------------------------------------------
    def arrive(self, count: int = 1, loc: Location | None = None) -> None:
        if count < 1:
            raise BarrierError(f"arrive count must be positive, got {count}", loc)
        if count > self.pending:
            raise BarrierError(
                f"barrier {self.label} received {count} arrival(s) but only {self.pending} of "
                f"{self.arrive_count} were pending in its phase {self.parity}: more arrivals than its "
                f"arrive count", loc)
        self.pending -= count
        self._maybe_complete()

    def expect_tx(self, nbytes: int) -> None:
        self.tx_bytes += nbytes

    def arrive_expect_tx(self, nbytes: int, count: int = 1, loc: Location | None = None) -> None:
        """``mbarrier.arrive.expect_tx``: post the bytes, then arrive."""
        self.expect_tx(nbytes)
        self.arrive(count, loc)

    def complete_tx(self, nbytes: int) -> None:
        self.tx_bytes -= nbytes
        self._maybe_complete()

    def phase_done(self, parity: int) -> bool:
        """Whether ``wait(bar, parity)`` passes now."""
        return self.parity != (parity & 1)

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx_bytes == 0:
            finished = self.completed_phases
            self.completed_phases += 1
            self.parity ^= 1
            self.pending = self.arrive_count
            for listener in list(self.listeners):
                listener(self, finished)

    # -- diagnostics -------------------------------------------------------------
    def state(self) -> str:
        """``in phase 0 (0 phases completed), 1 of 2 arrivals pending, 0 tx bytes pending``."""
        completed = "1 phase" if self.completed_phases == 1 else f"{self.completed_phases} phases"
        return (f"in phase {self.parity} ({completed} completed), "
                f"{self.pending} of {self.arrive_count} arrivals pending, "
                f"{self.tx_bytes} tx bytes pending")

    def __repr__(self) -> str:
        return f"<MBarrier {self.label}: {self.state()}>"


def alloc_barriers(num: int, arrive_count: int, name: str = "bar", per_thread: bool = False) -> list[MBarrier]:
    """``tlx.alloc_barriers(num, arrive_count)``: ``num`` fresh barriers."""
    return [MBarrier(arrive_count, name, i, per_thread) for i in range(num)]
