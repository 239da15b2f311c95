"""drain-dot-wait: a loop that keeps a wgmma group in flight from one iteration to the
next drains it at the end of its last iteration, not after the loop.

The rule.  A loop of this shape (pipeline-loads' K loop, and the hand-written TLX
loops of the same pattern, e.g. TLX's hopper_gemm_pipelined tutorial)::

    %r = scf.for %k = %lb to %ub step %st iter_args(%acc = %init) {
        ...
        %d = tlx.async_dot %a, %b, %acc
        %w = tlx.async_dot_wait %d {pendings = p}          # p >= 1: MMAs stay in flight
        ...                                                # no async_dot / async_dot_wait
        scf.yield ..., %w, ...                             # (carried value number i)
    }
    ...                                                    # no async_dot / async_dot_wait
    %out = tlx.async_dot_wait %r {pendings = 0}

(or the value carried is the result of a top-level ``scf.if`` whose else branch yields ``%w``
and whose regions hold no wgmma op but ``async_dot_wait {pendings = 0}``: a persistent
kernel's epilogue, ``pipeline-loads``) loses the wait after the loop (uses of ``%out`` use ``%r``) and gets the loop
attribute ``dot_drain = i``: after the yield of its last iteration the loop waits
for every wgmma group of the task, as ``async_dot_wait(%r, 0)`` would.  The
interpreter (``interpreter/control.py``) and the static checker (``check/events.py``)
retire the groups there; the codegen (``codegen_c/rules_control.py``) ends the body
with ``if (k + step >= ub) { wgmma.wait_group 0; [barrier]; break; }``, the
barrier being the one ``codegen_c/shared_order.py`` puts after an async_dot_wait.

Why.  ptxas (13.x) serializes every wgmma of a kernel (its note C7514, "wgmma.mma_async
instructions are serialized due to non wgmma instructions reading accumulator
registers of a wgmma between start and end of the pipeline stage") when, on the
path out of the loop, any non-wgmma instruction runs before the wait: LLVM sinks
the epilogue's index arithmetic to the top of the loop-exit block, ahead of a
post-loop wait, and no ordering in the C++ source prevents it.  A serialized wgmma
waits for the previous one to finish (a 1.3-1.6x loss for a 128x256x64 matmul on
the H200, docs/performance.md).  The drain must also leave the loop by its own
edge: a wait chosen by ``if`` that rejoins the loop's back edge makes ptxas insert
its own ``wgmma.wait_group 0`` (note C7517) before the back edge, on every
iteration.  Hence the ``break``.

When the loop runs zero times its result is ``%init`` and the removed wait retired
nothing the loop issued, but it would have retired groups issued *before* the
loop; so the rule applies only when ``%init`` cannot be a pending accumulator (it
is not an async_dot result, an async_dot_wait with pendings > 0, a loop or if
result or a block argument) and no wgmma group of the task can be in flight when
the loop starts (``_nothing_in_flight``: the last wgmma op before the loop, looking
back through the enclosing ifs, tasks, for and while loops up to the kernel, is a plain
``async_dot_wait`` with pendings 0, or there is none; for an enclosing for or while loop
the end of its body counts too, as the previous iteration's; a while's condition region
must hold no wgmma op and the loop must be in its body; inside any other region the loop
is left alone).  Otherwise, and for any other shape, the
loop is left alone.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import BlockArgument, Module, Operation, Value
from ..ir.traits import ASYNC_DOT, has_trait
from ..target import has_feature
from .dot_wgmma import replace_uses
from .manager import Pass


@dataclass(frozen=True)
class DrainDotWait(Pass):
    name = "drain-dot-wait"

    def run(self, module: Module, options) -> Module:
        if not has_feature(options.arch, "wgmma"):
            return module
        for kernel in module.kernels:
            for loop in [op for op in kernel.walk() if op.name == "scf.for"]:      # program order
                match = _match(loop)
                if match is not None and _nothing_in_flight(loop):
                    _rewrite(kernel, loop, *match)
        return module


def _match(loop: Operation):
    """(index of the carried accumulator, the wait after the loop) when ``loop`` has the
    rule's shape, else None."""
    body = loop.regions[0].block
    yielded = body.terminator.operands
    parent = loop.parent
    after = parent.ops[parent.ops.index(loop) + 1:]
    for index, result in enumerate(loop.results):
        inner, epilogue = yielded[index].owner, None
        if getattr(inner, "name", None) == "scf.if" and inner.parent is body:
            epilogue, inner = inner, _else_yielded(inner, yielded[index])
        if not _is_plain_wait(inner) or inner.attrs["pendings"] < 1 or inner.parent is not body:
            continue
        dot = inner.operands[0].owner
        if getattr(dot, "name", None) != "tlx.async_dot" or dot.parent is not body:
            continue
        tail = body.ops[body.ops.index(inner) + 1:]
        if any(_has_wgmma(op) for op in tail if op is not epilogue):
            continue
        if epilogue is not None and not _only_drains(epilogue):
            continue
        final = next((op for op in after if _is_plain_wait(op) and op.operands[0] is result), None)
        if final is None or final.attrs["pendings"] != 0:
            continue
        if any(_has_wgmma(op) for op in after[:after.index(final)]):
            continue
        if _may_be_pending(loop.inits[index]):
            continue
        return index, final
    return None


def _else_yielded(branch: Operation, result: Value):
    """What the else region of ``scf.if`` ``branch`` yields for its result ``result``."""
    if len(branch.regions) != 2 or branch.regions[1].block.terminator is None:
        return None
    return getattr(branch.regions[1].block.terminator.operands[branch.results.index(result)], "owner", None)


def _only_drains(op: Operation) -> bool:
    """Whether the wgmma ops inside ``op`` are only waits for every group (pendings 0)."""
    return all(inner.name != "tlx.async_dot" and (not _is_plain_wait(inner) or inner.attrs["pendings"] == 0)
               for inner in op.walk())


def _rewrite(kernel: Operation, loop: Operation, index: int, final: Operation) -> None:
    loop.attrs["dot_drain"] = index
    final.parent.ops.remove(final)
    replace_uses(kernel, final.result, final.operands[0])


def _is_plain_wait(op) -> bool:
    return getattr(op, "name", None) == "tlx.async_dot_wait"


def _has_wgmma(op: Operation) -> bool:
    return any(has_trait(inner, ASYNC_DOT) for inner in op.walk())


def _may_be_pending(value: Value) -> bool:
    """Whether ``value`` can hold an accumulator whose wgmma is still in flight."""
    if isinstance(value, BlockArgument):
        return True
    op = value.owner
    if op.regions or op.name == "tlx.async_dot":
        return True
    return op.name == "tlx.async_dot_wait" and op.attrs["pendings"] > 0


def _state(op: Operation) -> str | None:
    """What ``op`` leaves behind for the wgmma groups of its task: ``"none"`` (a plain
    wait for all of them), ``"some"`` (it may issue one), or None (it changes nothing
    that matters here: a rewritten loop leaves nothing in flight if nothing was)."""
    if _is_plain_wait(op) and op.attrs["pendings"] == 0:
        return "none"
    if "dot_drain" in op.attrs:          # a loop rewritten already
        return None
    return "some" if any(inner.name == "tlx.async_dot" for inner in op.walk()) else None


def _nothing_in_flight(loop: Operation) -> bool:
    """Whether no wgmma group of the task can be in flight when ``loop`` starts (conservative).

    A ``while`` around the loop (Triton's grouped GEMM tutorial: ``while tile in this
    problem: K loop; store``) is entered from before it or from the end of its body: the loop
    must be in the body (the ``after`` region), the condition region must hold no wgmma op,
    and the body's end must leave nothing in flight.  Such a while then ends with nothing in
    flight whenever it starts so (run zero times, or its body ended drained), which lets an
    enclosing for loop whose body ends with it count as drained too (``drained_nodes``)."""
    node = loop
    drained_nodes = {id(loop)}
    while True:
        block = node.parent
        at = block.ops.index(node)
        for op in reversed(block.ops[:at]):
            state = _state(op)
            if state is not None:
                if state == "some":
                    return False
                break
        else:
            owner = node.parent_op()
            if owner is None or owner.name == "tl.kernel":
                return True            # a kernel starts with none
            if owner.name == "scf.for":
                if not _body_end_drains(block, node, drained_nodes):
                    return False
            elif owner.name == "scf.while":
                before, after = (r.block for r in owner.regions)
                if block is not after or any(_has_wgmma(op) for op in before.ops) or \
                        not _body_end_drains(block, node, drained_nodes):
                    return False
                drained_nodes.add(id(owner))
            elif owner.name not in ("scf.if", "tlx.async_tasks"):
                return False           # (a task of async_tasks: what its warps had in flight before)
            node = owner
            continue
        return True


def _body_end_drains(block, node: Operation, drained_nodes: set[int]) -> bool:
    """For ``node`` inside a loop body: the previous iteration leaves nothing in flight
    (the body's last wgmma op after ``node`` is a wait for all, or it is ``node``
    itself and ``node`` is the loop being rewritten or a while around it that ends drained:
    ``drained_nodes``)."""
    for op in reversed(block.ops[block.ops.index(node) + 1:]):
        state = _state(op)
        if state is not None:
            return state == "none"
    return id(node) in drained_nodes


__all__ = ["DrainDotWait"]
