"""Race tracking per shared-memory buffer slot.

Asynchronous operations (TMA and cp.async copies, wgmma/tcgen05 operand
reads, TMA stores) touch shared memory at a time the program does not
control.  Their accesses are recorded here from issue until something orders
them:

* an async **write** (a copy into a slot) is ordered by a completed
  ``barrier_wait`` on the barrier phase its completion signalled (or
  explicitly, e.g. by ``cp.async.wait_group``);
* an async **read** (an MMA or a TMA store reading a slot) is ordered when the
  op that waits for it completes (``warpgroup_mma_wait``, a barrier the MMA
  commits to, ``tma_store_wait``).

A read of a slot with an unordered async write is a ``RaceError`` naming both
lines; so is a write to a slot an unordered async access still uses.  Slots are
any hashable key; ``label`` is how messages name them (``'a_smem'[1]``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Location, RaceError


@dataclass(eq=False)
class AsyncAccess:
    kind: str                      # "write" or "read"
    slot: object
    label: str
    what: str                      # e.g. "TMA load", "wgmma operand read"
    loc: Location | None
    task: str
    barrier: object = None         # barrier whose phase completion orders it
    phase_index: int | None = None  # absolute index of that phase
    ordered: bool = False


@dataclass
class RaceTracker:
    program: str = "program (0, 0, 0)"
    pending: dict = field(default_factory=dict)     # slot -> [AsyncAccess]

    # -- async accesses ----------------------------------------------------------
    def begin_async_write(self, slot, label: str, what: str, loc: Location | None, task: str) -> AsyncAccess:
        self._check_write(slot, label, what, loc, task)
        return self._record(AsyncAccess("write", slot, label, what, loc, task))

    def begin_async_read(self, slot, label: str, what: str, loc: Location | None, task: str) -> AsyncAccess:
        self._check_read(slot, label, what, loc, task)
        return self._record(AsyncAccess("read", slot, label, what, loc, task))

    def signal(self, access: AsyncAccess, barrier) -> None:
        """``access`` completes into the phase of ``barrier`` now in progress:
        a wait that sees that phase complete orders it."""
        access.barrier = barrier
        access.phase_index = barrier.completed_phases

    def order(self, access: AsyncAccess) -> None:
        access.ordered = True
        records = self.pending.get(access.slot)
        if records and access in records:
            records.remove(access)

    def on_wait(self, barrier, parity: int) -> None:
        """A ``barrier_wait(barrier, parity)`` passed: order every access that
        signalled a completed phase up to the last one of that parity."""
        last = barrier.completed_phases - 1
        if last >= 0 and last % 2 != parity % 2:
            last -= 1
        for records in self.pending.values():
            for access in list(records):
                if access.barrier is barrier and access.phase_index is not None \
                        and access.phase_index <= last:
                    self.order(access)

    # -- synchronous accesses ------------------------------------------------------
    def read(self, slot, label: str, what: str, loc: Location | None, task: str) -> None:
        self._check_read(slot, label, what, loc, task)

    def write(self, slot, label: str, what: str, loc: Location | None, task: str) -> None:
        self._check_write(slot, label, what, loc, task)

    # -- checks --------------------------------------------------------------------
    def _record(self, access: AsyncAccess) -> AsyncAccess:
        self.pending.setdefault(access.slot, []).append(access)
        return access

    def _check_read(self, slot, label, what, loc, task) -> None:
        for access in self.pending.get(slot, ()):
            if access.kind == "write":
                raise self._race(f"{what} of {label} in task '{task}' is not ordered after the asynchronous "
                                 f"{access.what} issued by task '{access.task}' (no completed barrier wait "
                                 f"orders that write before this read)", loc, access)

    def _check_write(self, slot, label, what, loc, task) -> None:
        for access in self.pending.get(slot, ()):
            verb = "reading" if access.kind == "read" else "writing"
            raise self._race(f"{what} of {label} in task '{task}' may overwrite the slot while the "
                             f"asynchronous {access.what} issued by task '{access.task}' is still {verb} it "
                             f"(no wait orders that {access.kind} before this write)", loc, access)

    def _race(self, message: str, loc, access: AsyncAccess) -> RaceError:
        return RaceError(f"race in {self.program}: {message}", loc,
                         [(f"the asynchronous {access.what} of {access.label} was issued here", access.loc)])
