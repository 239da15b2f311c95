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

cp.async copies are ordered in two steps, as on the GPU: the issuing task's
``async_load_wait_group`` *retires* the copy (from then on the issuing task
itself may use the slot), and the task's next arrive on an mbarrier
*releases* it into that barrier's phase in progress (``release_task``); a
wait of another task that sees that phase complete orders it for everyone.
Joining tasks, and completing a named barrier, order the retired copies of
the tasks involved.

A read of a slot with an unordered async write is a ``RaceError`` naming both
lines; so is a write to a slot an unordered async access still uses, and a write
(a tcgen05 MMA, a store) to tensor memory another task read without a barrier
ordering that read before it (``read_held``: write after read).  Slots are
any hashable key; ``label`` is how messages name them (``'a_smem'[1]``).  An
access may cover only part of its slot (``region``: any object with an
``overlaps(other)`` and a ``covers(other)`` method; None is the whole slot).
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
    region: object = None          # the part of the slot it touches (None: all of it)
    releases: list = field(default_factory=list)    # [(barrier, absolute phase index)]
    ordered: bool = False
    retired: bool | None = None    # cp.async: None if not waited for per task, else whether it was
    retired_at: Location | None = None
    early_arrival: tuple | None = None   # cp.async: (barrier label, loc) of an arrive before it was retired
    queue: object = None           # accesses of one in-order queue (a task's tcgen05 MMAs) never race each other
    wait_hint: str | None = None   # what the issuing task must wait with before reusing the slot
    held: bool = False             # a synchronous read held until a barrier orders it (``read_held``)

    @property
    def barrier(self):
        """The first barrier whose phase completion orders this access (or None)."""
        return self.releases[0][0] if self.releases else None

    @property
    def phase_index(self) -> int | None:
        return self.releases[0][1] if self.releases else None

    def visible_to(self, task: str) -> bool:
        """A retired copy is visible to the task that waited for it."""
        return bool(self.retired) and task == self.task


def _overlap(a, b) -> bool:
    return a is None or b is None or a.overlaps(b)


def _covers(a, b) -> bool:
    """Whether region ``a`` includes region ``b`` (None is the whole slot)."""
    return a is None or (b is not None and a.covers(b))


@dataclass
class RaceTracker:
    program: str = "program (0, 0, 0)"
    pending: dict = field(default_factory=dict)     # slot -> [AsyncAccess]

    # -- async accesses ----------------------------------------------------------
    def begin_async_write(self, slot, label: str, what: str, loc: Location | None, task: str,
                          region=None, queue=None) -> AsyncAccess:
        self._check_write(slot, label, what, loc, task, region, queue)
        self._drop_superseded(slot, task, region)
        return self._record(AsyncAccess("write", slot, label, what, loc, task, region, queue=queue))

    def begin_async_read(self, slot, label: str, what: str, loc: Location | None, task: str,
                         region=None, queue=None) -> AsyncAccess:
        self._check_read(slot, label, what, loc, task, region, queue)
        return self._record(AsyncAccess("read", slot, label, what, loc, task, region, queue=queue))

    def signal(self, access: AsyncAccess, barrier) -> None:
        """``access`` completes into the phase of ``barrier`` now in progress:
        a wait that sees that phase complete orders it."""
        access.releases.append((barrier, barrier.completed_phases))

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
        for access in self._all():
            if any(b is barrier and index <= last for b, index in access.releases):
                self.order(access)

    # -- cp.async: retire, release ---------------------------------------------------
    def retire(self, access: AsyncAccess, loc: Location | None = None) -> None:
        """The issuing task waited for ``access`` (``async_load_wait_group``)."""
        access.retired = True
        access.retired_at = loc

    def release_task(self, task: str, barrier, loc: Location | None = None) -> None:
        """``task`` arrives on ``barrier``: the copies it retired are released
        into the barrier's phase in progress (those still in flight are not;
        the first such arrive is remembered for the race message)."""
        for access in self._all():
            if access.task != task:
                continue
            if access.retired:
                self.signal(access, barrier)
            elif access.retired is False and access.early_arrival is None:
                access.early_arrival = (barrier.label, loc)

    def order_tasks(self, tasks) -> None:
        """``tasks`` synchronized with everyone who continues (a join, a
        completed named barrier): order the copies they retired."""
        names = set(tasks)
        for access in self._all():
            if access.task in names and access.retired:
                self.order(access)

    # -- synchronous accesses ------------------------------------------------------
    def read(self, slot, label: str, what: str, loc: Location | None, task: str, region=None) -> None:
        self._check_read(slot, label, what, loc, task, region)

    def read_held(self, slot, label: str, what: str, loc: Location | None, task: str, region=None) -> None:
        """A synchronous read that later asynchronous writes must be ordered after (tensor
        memory, which the tcgen05 MMAs of other tasks write): recorded like a retired copy,
        its task's next arrive releases it into that barrier's phase and a wait that sees the
        phase orders it.  An MMA issued into the bytes before that is a write-after-read
        race naming both lines (``_check_write``); the task's own later accesses see it.  A
        newer read of the same bytes by the task replaces its older ones (ordering the newer
        orders them, program order)."""
        self._check_read(slot, label, what, loc, task, region)
        records = self.pending.get(slot)
        if records:
            records[:] = [a for a in records if not (a.kind == "read" and a.held and a.task == task
                                                     and _covers(region, a.region))]
        access = self._record(AsyncAccess("read", slot, label, what, loc, task, region))
        access.retired = True
        access.held = True

    def write(self, slot, label: str, what: str, loc: Location | None, task: str, region=None) -> None:
        self._check_write(slot, label, what, loc, task, region)

    # -- checks --------------------------------------------------------------------
    def _all(self) -> list[AsyncAccess]:
        return [access for records in self.pending.values() for access in records]

    def _drop_superseded(self, slot, task: str, region) -> None:
        """A task's new async write replaces the writes it retired to the same
        bytes: ordering the new one orders them too (program order), so
        forgetting them loses nothing and keeps a loop's records bounded."""
        records = self.pending.get(slot)
        if not records:
            return
        records[:] = [a for a in records
                      if not (a.kind == "write" and a.task == task and a.retired and _covers(region, a.region))]

    def _record(self, access: AsyncAccess) -> AsyncAccess:
        self.pending.setdefault(access.slot, []).append(access)
        return access

    def _conflicts(self, slot, task, region, queue=None):
        for access in list(self.pending.get(slot, ())):
            if queue is not None and access.queue is queue:
                continue
            if not access.visible_to(task) and _overlap(access.region, region):
                yield access

    def _check_read(self, slot, label, what, loc, task, region=None, queue=None) -> None:
        for access in self._conflicts(slot, task, region, queue):
            if access.kind == "write":
                raise self._race(f"{what} of {label} in task '{task}' is not ordered after the asynchronous "
                                 f"{access.what} issued by task '{access.task}' ({self._why(access, task)})",
                                 loc, access)

    def _check_write(self, slot, label, what, loc, task, region=None, queue=None) -> None:
        for access in self._conflicts(slot, task, region, queue):
            if access.held:
                raise RaceError(
                    f"race in {self.program}: {what} of {label} in task '{task}' is not ordered after the "
                    f"{access.what} of it by task '{access.task}': that read may see this write, or miss "
                    f"it (no barrier that task arrived on after the read was waited for before this "
                    f"{what}; a read of a tcgen05 accumulator must wait for the barrier its last MMA "
                    f"arrives on)", loc, [(f"the {access.what} of {access.label} by task '{access.task}' was "
                                           f"here", access.loc)])
            verb = "reading" if access.kind == "read" else "writing"
            remedy = access.wait_hint if access.wait_hint and access.task == task else \
                f"no wait orders that {access.kind} before this write"
            raise self._race(f"{what} of {label} in task '{task}' may overwrite the slot while the "
                             f"asynchronous {access.what} issued by task '{access.task}' is still {verb} it "
                             f"({remedy})", loc, access)

    @staticmethod
    def _why(access: AsyncAccess, reader: str) -> str:
        issuer = f"task '{access.task}'"
        arrival = ""
        if access.early_arrival is not None:
            label, where = access.early_arrival
            arrival = f"{issuer} arrived on barrier {label}" + (f" at {where}" if where is not None else "")
        if access.retired is False:
            if arrival:
                return f"{arrival} while the copy was still in flight, and no async_load_wait_group retired it"
            return f"{issuer} has not waited for it with async_load_wait_group, so no barrier can order it yet"
        if access.retired:
            waited = f"its async_load_wait_group at {access.retired_at}" if access.retired_at else \
                "its async_load_wait_group"
            if arrival:
                return f"{arrival} before {waited} retired the copy"
            return (f"{issuer} waited for it ({waited}), but no barrier phase it arrived on after that wait "
                    f"has been waited for before this read")
        return "no completed barrier wait orders that write before this read"

    def _race(self, message: str, loc, access: AsyncAccess) -> RaceError:
        return RaceError(f"race in {self.program}: {message}", loc,
                         [(f"the asynchronous {access.what} of {access.label} was issued here", access.loc)])
