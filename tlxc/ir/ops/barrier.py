"""mbarriers, named barriers and fences (TLX semantics, ``tlx_api.md`` §1.2, §2).

A barrier has a pending-arrival count and a phase parity, initially 0; when
the count reaches 0 and the expected transaction bytes have landed, the phase
completes (parity flips) and the count resets.  ``tlx.barrier_wait(bar, p)``
returns once the phase with parity ``p`` has completed, so waiting on parity 1
of a fresh barrier returns at once.  ``tlx.barrier_arrive`` counts once per
arriving warp group (group sync, then one leader thread arrives), or once per
thread for ``per_thread`` (warp) barriers.  Optional ``pred`` operands come last
(``has_pred``).
"""
from __future__ import annotations

from ..core import Operation, OpResult
from ..traits import ALLOCATION, NAMED_BARRIER
from ..types import BarrierType, ScalarType, i1
from ._rules import expect_results


def _first_operand_type(op):
    if not op.operands:
        raise op.error("expected a barrier operand")
    return op.operands[0].type


def expect_barrier(op, t, what: str = "barrier", view: bool = True) -> BarrierType:
    if not isinstance(t, BarrierType):
        raise op.error(f"expected {what} to be an mbarrier, got {t}")
    if view and t.num:
        raise op.error(f"expected one barrier (index the array first), got an array of {t.num}")
    return t


def _check_pred(op, first_optional: int) -> None:
    count = first_optional + bool(op.attrs.get("has_pred"))
    if len(op.operands) != count:
        raise op.error(f"expected {count} operands, got {len(op.operands)}")
    if op.attrs.get("has_pred") and op.operands and op.operands[-1].type != i1:
        raise op.error(f"expected an i1 predicate, got {op.operands[-1].type}")


class AllocBarriersOp(Operation):
    """``num`` mbarriers, each initialized with ``attrs.arrive_count``."""

    name = "tlx.alloc_barriers"
    traits = frozenset({ALLOCATION})

    def verify(self):
        expect_results(self, 1)
        t = expect_barrier(self, self.result.type, "result", view=False)
        count = self.attrs.get("arrive_count")
        if not t.num or not isinstance(count, int) or count < 1:
            raise self.error(f"expected num >= 1 and arrive_count >= 1, got {t.num} and {count!r}")


class BarrierExpectBytesOp(Operation):
    """Arrive once on ``bar`` and expect ``attrs.bytes`` more transaction bytes."""

    name = "tlx.barrier_expect_bytes"

    def verify(self):
        if expect_barrier(self, _first_operand_type(self)).remote:
            raise self.error("expect-bytes on a remote barrier: a barrier counts the bytes that land in its own CTA")
        _check_pred(self, 1)
        if not isinstance(self.attrs.get("bytes"), int) or self.attrs["bytes"] < 0:
            raise self.error(f"expected a non-negative byte count, got {self.attrs.get('bytes')!r}")


class BarrierCompleteTxOp(Operation):
    """Complete ``attrs.bytes`` transaction bytes on ``bar`` (no arrival), once the issuing
    task's own stores of them are done: a TMA load from an in-kernel descriptor, which has
    no tensormap, is a load, a store into the buffer and this (frontend/tlx_rules.py)."""

    name = "tlx.barrier_complete_tx"

    def verify(self):
        if expect_barrier(self, _first_operand_type(self)).remote:
            raise self.error("complete-tx on a remote barrier is not supported")
        if len(self.operands) != 1:
            raise self.error("expected one barrier operand")
        if not isinstance(self.attrs.get("bytes"), int) or self.attrs["bytes"] <= 0:
            raise self.error(f"expected a positive byte count, got {self.attrs.get('bytes')!r}")


class BarrierWaitOp(Operation):
    """Block until the phase of parity ``phase`` (operand 1, i32) has completed."""

    name = "tlx.barrier_wait"

    def verify(self):
        if expect_barrier(self, _first_operand_type(self)).remote:
            raise self.error("a wait on a remote barrier (arrive remote, wait local)")
        _check_pred(self, 2)
        phase = self.operands[1].type if len(self.operands) > 1 else None
        if not isinstance(phase, ScalarType) or not phase.is_integer:
            raise self.error(f"expected an integer phase, got {phase}")


class BarrierArriveOp(Operation):
    """Arrive ``attrs.count`` times (once per arriving warp group, or per thread),
    on a local barrier or on a peer CTA's (a ``remote`` view)."""

    name = "tlx.barrier_arrive"

    def verify(self):
        expect_barrier(self, _first_operand_type(self))
        _check_pred(self, 1)
        if not isinstance(self.attrs.get("count"), int) or self.attrs["count"] < 1:
            raise self.error(f"expected a positive arrive count, got {self.attrs.get('count')!r}")


NAMED_BARRIER_IDS = 16          # bar.sync / bar.arrive ids 0..15


def _verify_named(op) -> None:
    """Two i32 scalars, the barrier id and the thread count; where they are constants, an id in
    0..15 and a count that is a positive multiple of 32 (bar.sync counts whole warps)."""
    if len(op.operands) != 2 or op.results:
        raise op.error(f"expected 2 operands (id, threads) and no results, got {len(op.operands)} and "
                       f"{len(op.results)}")
    for value, what in zip(op.operands, ("id", "thread count")):
        if not isinstance(value.type, ScalarType) or value.type.name != "i32":
            raise op.error(f"expected an i32 {what}, got {value.type}")
    bar, threads = (_constant(v) for v in op.operands)
    if bar is not None and not 0 <= bar < NAMED_BARRIER_IDS:
        raise op.error(f"expected a named barrier id in 0..{NAMED_BARRIER_IDS - 1}, got {bar}")
    if threads is not None and (threads <= 0 or threads % 32):
        raise op.error(f"expected a thread count that is a positive multiple of 32, got {threads}")


def _constant(value):
    """The int value of an ``arith.constant`` result, else None."""
    owner = value.owner if isinstance(value, OpResult) else None
    if owner is None or owner.name != "arith.constant":
        return None
    constant = owner.attrs.get("value")
    return constant if isinstance(constant, int) and not isinstance(constant, bool) else None


class NamedBarrierWaitOp(Operation):
    """``bar.sync id, threads`` (operands: id, threads)."""

    name = "tlx.named_barrier_wait"
    traits = frozenset({NAMED_BARRIER})

    def verify(self):
        _verify_named(self)


class NamedBarrierArriveOp(Operation):
    """``bar.arrive id, threads`` (operands: id, threads)."""

    name = "tlx.named_barrier_arrive"
    traits = frozenset({NAMED_BARRIER})

    def verify(self):
        _verify_named(self)


class FenceOp(Operation):
    """``attrs.scope``: async_shared (generic → async proxy), gpu or sys."""

    name = "tlx.fence"

    def verify(self):
        if self.attrs.get("scope") not in ("async_shared", "gpu", "sys"):
            raise self.error(f"expected scope async_shared, gpu or sys, got {self.attrs.get('scope')!r}")
