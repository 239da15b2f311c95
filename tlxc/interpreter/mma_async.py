"""Rules for the asynchronous warp-group MMA (``tlx.async_dot`` /
``tlx.async_dot_wait``, Hopper wgmma).

``async_dot`` computes at issue, as ``tl.dot`` does (inputs exact in their
dtype, tf32 rounding for f32, float32 accumulation), but delivers the result
asynchronously: it returns a ``PendingResult`` that belongs to a new wgmma
group of the issuing task, and records an asynchronous *read* of each shared
operand with the race tracker.  ``async_dot_wait(k)`` retires every group of
the task but the newest ``k``: their results become readable and their
operand reads are retired (``races.py``: the task's next barrier arrive
releases the slots to whoever waits for that barrier).

A pending result may be passed on (loop-carried, into ``async_dot_wait``, or
as the ``acc`` of the next ``async_dot``: wgmma chains accumulators in
order); any other op that reads it before a wait retired it is a
``RaceError`` naming both lines (``guard_pending``, applied by the executor's
plans to ops whose operands may hold one).  Overwriting a shared operand
before the wait (``local_store``, a TMA or cp.async copy) is a race reported
by the tracker.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import Location, RaceError
from ..ir.core import BlockArgument
from ..ir.ops.mma_async import k32_accumulator_order
from ..ir.traits import ASYNC_DOT, CONTROL_FLOW, has_trait
from ..ir.types import TensorType
from .registry import impl
from .scheduler import PREEMPT
from .shared import SharedView, read_written
from .values import round_tf32, round_to, scalar_of

# Ops that may hold a pending accumulator without reading it.


@dataclass(eq=False)
class DotGroup:
    """One ``async_dot`` in flight: where it was issued and the operand reads it holds."""
    loc: Location | None
    task: str
    accesses: list = field(default_factory=list)
    retired: bool = False


@dataclass(eq=False)
class PendingResult:
    """The accumulator of an ``async_dot`` whose group may still be in flight."""
    value: np.ndarray
    group: DotGroup


def _groups(ctx) -> list[DotGroup]:
    return ctx.task_state("wgmma", list)


def _settled(ctx, op, value, what: str):
    """``value`` as an array; a pending result of a retired group is unwrapped."""
    if not isinstance(value, PendingResult):
        return value
    if not value.group.retired:
        raise _early_read(ctx, op, value.group, what)
    return value.value


def _early_read(ctx, op, group: DotGroup, what: str) -> RaceError:
    return RaceError(f"async_dot result read before async_dot_wait in {ctx.label}: {op.name} in task "
                     f"'{ctx.task_name}' reads{' ' + what if what else ''} the accumulator of the async_dot issued at {group.loc}, which "
                     f"no async_dot_wait has retired yet (its registers are still being written by the tensor "
                     f"cores); call acc = tlx.async_dot_wait(0, acc) first", op.loc,
                     [("the async_dot is issued here", group.loc)])


def read_operand(ctx, op, value, what: str) -> np.ndarray:
    """An MMA operand's values: a shared view (which must be written) or a settled register tensor."""
    if isinstance(value, SharedView):
        return read_written(ctx, op, value, f"async_dot in task '{ctx.task_name}' reads operand {what} from "
                                            f"{value.label}", "multiply garbage")
    return _settled(ctx, op, value, f"as its register operand {what}")


@impl("tlx.async_dot")
def async_dot(ctx, op, a, b, acc, *use_acc):
    yield PREEMPT                    # another task may act between a wait and this issue
    group = DotGroup(op.loc, ctx.task_name)
    for value in (a, b):
        if isinstance(value, SharedView):
            access = ctx.races.begin_async_read(value.key, value.label, "async_dot operand read", op.loc,
                                                ctx.task_name, value.region())
            access.retired = False
            group.accesses.append(access)
    a_values = read_operand(ctx, op, a, "A")
    b_values = read_operand(ctx, op, b, "B")
    if isinstance(acc, PendingResult):
        acc = acc.value              # wgmma chains in order: the previous group's result feeds this one
    element = scalar_of(op.operands[1].type.element)
    a32 = np.asarray(a_values, dtype=np.float32)
    b32 = np.asarray(b_values, dtype=np.float32)
    if element.name == "f32" and op.attrs.get("input_precision") == "tf32":
        a32, b32 = round_tf32(a32), round_tf32(b32)
    if op.attrs.get("a_k_order") == "accumulator":         # A's columns in k32 fragment order (see the op)
        order = k32_accumulator_order()
        a32 = a32[:, [32 * (k // 32) + order[k % 32] for k in range(a32.shape[1])]]
    result = np.matmul(a32, b32)
    if not op.attrs.get("has_use_acc") or bool(use_acc[0]):
        result = result + np.asarray(acc, dtype=np.float32)
    _groups(ctx).append(group)
    return PendingResult(round_to(result, scalar_of(op.results[0].type)), group)


@impl("tlx.async_dot_wait")
def async_dot_wait(ctx, op, value):
    return retire(ctx, op.loc, value, op.attrs["pendings"])


def retire(ctx, loc, value, keep: int):
    """Retire every wgmma group of the task but the newest ``keep``; ``value`` unwrapped if
    its group is retired (``async_dot_wait``, and the drain of a ``dot_drain`` loop)."""
    groups = _groups(ctx)
    retiring = groups[:max(len(groups) - keep, 0)]
    del groups[:len(retiring)]
    for group in retiring:
        group.retired = True
        for access in group.accesses:
            ctx.races.retire(access, loc)
    if isinstance(value, PendingResult) and value.group.retired:
        return value.value
    return value


# -- the executor's guard ----------------------------------------------------------------------
def may_be_pending(v) -> bool:
    """Whether IR value ``v`` can hold a pending accumulator at run time."""
    if not isinstance(v.type, TensorType):
        return False
    if isinstance(v, BlockArgument):
        return True
    name = getattr(v.owner, "name", "")
    return has_trait(name, ASYNC_DOT) or name.startswith("scf.")


def needs_guard(op) -> bool:
    passes_through = has_trait(op, ASYNC_DOT) or has_trait(op, CONTROL_FLOW)
    return not passes_through and any(may_be_pending(v) for v in op.operands)


def guard_pending(fn, is_generator: bool):
    """Wrap rule ``fn`` so that a pending accumulator among its operands is an
    error unless its group has been retired (then it is unwrapped)."""
    def settle(ctx, op, values):
        if any(isinstance(v, PendingResult) for v in values):
            return [_settled(ctx, op, v, "") for v in values]
        return values

    if is_generator:
        def guarded_generator(ctx, op, *values):
            return (yield from fn(ctx, op, *settle(ctx, op, values)))
        return guarded_generator

    def guarded(ctx, op, *values):
        return fn(ctx, op, *settle(ctx, op, values))
    return guarded
