"""hoist-conversions: a layout conversion of a loop-invariant value runs once, before the loop.

``infer-layouts`` places each ``tl.convert_layout`` at the use that needs it.  When the
use is inside a loop and the value is defined outside (attention backward's ``m`` and
``Di`` rows, loaded once and read every iteration in the MMA accumulator's row layout),
the conversion -- through shared memory with a CTA barrier before and after -- ran every
iteration.  It is pure, so it moves before the outermost loop its operand is invariant
in (a loop that runs zero times then converts once for nothing).

A value the loop carries (or an ``scf.if`` yields) that every iteration converts is carried
in the converted layout instead (``_carry_converted``): tutorial 09's persistent matmul
carries its tile's ``rows``/``cols`` in the default blocked layout, recomputes them under
``if kk == 0:`` and converted both to the copies' layouts in every K step (four CTA barriers
per step).  The web of values joined by the loop's and the ``if``'s block arguments, yields
and results takes the layout the conversions want when those conversions are its only other
uses; its sources (the values computed under the ``if`` and before the loop) are converted
where they are computed, which runs once per tile.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.builder import Builder
from ..ir.core import Block, BlockArgument, Module, Operation, OpResult, Value, users_by_value
from ..ir.types import TensorType
from .manager import Pass
from .uniformity import Uniformity


@dataclass(frozen=True)
class HoistConversions(Pass):
    name = "hoist-conversions"

    def run(self, module: Module, options) -> Module:
        for kernel in module.kernels:
            while _carry_converted(kernel):
                pass
            moved = True
            while moved:
                moved = False
                for op in [o for o in kernel.walk() if o.name == "tl.convert_layout"]:
                    loop = op.parent_op()
                    if getattr(loop, "name", None) != "scf.for" or _inside(op.operands[0], loop):
                        continue
                    op.parent.ops.remove(op)
                    outer = loop.parent
                    outer.insert(outer.ops.index(loop), op)
                    moved = True
        return module


def _carry_converted(kernel: Operation) -> bool:
    """One web carried in its conversions' layout (module docstring); whether one was."""
    users = users_by_value(kernel)
    uniformity = None
    for op in kernel.walk():
        if op.name != "tl.convert_layout" or not isinstance(op.operands[0].type, TensorType):
            continue
        loop = op.parent_op()
        if getattr(loop, "name", None) != "scf.for":
            continue
        web = _web(op.operands[0], op.result.type.layout, users)
        if web is None:
            continue
        members, sources, conversions = web
        if any(_hot(source, loop) for source, _ in sources):
            continue
        uniformity = uniformity or Uniformity(kernel)
        if any(uniformity.divergent(source.owner) for source, _ in sources):
            continue            # (a conversion syncs the threads: not under a branch on tlx.thread_id)
        _rewrite_web(members, sources, conversions, op.result.type.layout, users)
        return True
    return False


def _web(seed: Value, layout, users):
    """(members, sources, conversions): the values joined to ``seed`` through scf.for and
    scf.if arguments, yields and results; the (value, use) pairs where a value computed
    otherwise enters the web; the conversions to ``layout`` that read a member.  None when a
    member has another use, another layout, or the web reaches other control flow."""
    members: dict[int, Value] = {}
    sources: list[tuple[Value, tuple[Operation, int]]] = []
    conversions: list[Operation] = []
    todo = [seed]
    source_layout = seed.type.layout

    def join(value: Value, use) -> None:
        if _joined(value):
            todo.append(value)
        elif use is not None:
            sources.append((value, use))
    while todo:
        v = todo.pop()
        if id(v) in members:
            continue
        if not isinstance(v.type, TensorType) or v.type.layout != source_layout or not _joined(v):
            return None
        members[id(v)] = v
        owner = v.owner if isinstance(v, OpResult) else v.owner.parent.parent     # the op, or the arg's loop
        if isinstance(v, BlockArgument):
            if owner is None or owner.name != "scf.for" or v.index == 0:
                return None
            i = v.index - 1
            body = owner.regions[0].block
            join(owner.operands[3 + i], (owner, 3 + i))
            join(body.terminator.operands[i], (body.terminator, i))
            todo.append(owner.results[i])
        elif owner.name == "scf.for":
            i = v.index
            body = owner.regions[0].block
            todo.append(body.args[1 + i])
        else:                                                               # scf.if
            for region in owner.regions:
                term = region.block.terminator
                join(term.operands[v.index], (term, v.index))
        for user in users.get(id(v), []):
            if user.name == "tl.convert_layout" and user.result.type.layout == layout:
                conversions.append(user)
            elif user.name == "scf.yield" and user.parent.parent.parent.name in ("scf.for", "scf.if"):
                region_op = user.parent.parent.parent
                for i, operand in enumerate(user.operands):
                    if operand is v:
                        todo.append(region_op.results[i])
                        if region_op.name == "scf.for":
                            todo.append(region_op.regions[0].block.args[1 + i])
            elif user.name == "scf.for" and v in user.operands[3:]:
                for i, operand in enumerate(user.operands[3:]):
                    if operand is v:
                        todo.append(user.results[i])
                        todo.append(user.regions[0].block.args[1 + i])
            else:
                return None
    return members, sources, conversions


def _joined(v: Value) -> bool:
    """Whether ``v`` is an scf.for iteration argument or result, or an scf.if result."""
    if isinstance(v, BlockArgument):
        region_op = v.owner.parent.parent if v.owner.parent is not None else None
        return region_op is not None and region_op.name == "scf.for" and v.index > 0
    return isinstance(v, OpResult) and v.owner.name in ("scf.for", "scf.if")


def _hot(source: Value, loop: Operation) -> bool:
    """Whether ``source`` is computed in every iteration of ``loop`` (at its body's top
    level); computed before the loop or under an ``if`` inside it is not."""
    if isinstance(source, BlockArgument):
        return True
    block = source.owner.parent
    while block is not None and block.parent is not None:
        op = block.parent.parent
        if op is loop:
            return True
        if op is None or op.name == "scf.if":
            return False
        block = op.parent
    return False


def _rewrite_web(members: dict, sources, conversions, layout, users) -> None:
    converted: dict[int, Value] = {}
    for value, (user, index) in sources:
        if id(value) not in converted:
            op = Builder(None).create("tl.convert_layout", [value], [value.type.with_layout(layout)], {},
                                      result_names=[value.name_hint])
            op.loc = value.owner.loc
            block = value.owner.parent
            block.insert(block.ops.index(value.owner) + 1, op)
            converted[id(value)] = op.result
        user.operands[index] = converted[id(value)]
    for v in members.values():
        v.type = v.type.with_layout(layout)
    for op in conversions:
        source = op.operands[0]
        for user in users.get(id(op.result), []):
            user.operands = [source if operand is op.result else operand for operand in user.operands]
        op.parent.ops.remove(op)


def _inside(value: Value, loop: Operation) -> bool:
    owner = value.owner
    block = owner if isinstance(owner, Block) else owner.parent
    while block is not None and block.parent is not None:
        op = block.parent.parent
        if op is loop:
            return True
        if op is None:
            return False
        block = op.parent
    return False


__all__ = ["HoistConversions"]
