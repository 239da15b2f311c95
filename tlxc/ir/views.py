"""Where a buffer or barrier view comes from, through views and control flow.

A view may be reassigned in a loop (``bar = tlx.local_view(bars, i % N)``) or an
``if``: it is then a loop-carried block argument or an ``scf`` result, and the
allocations it can name are those of every value that flows into it (the
loop's initial value and its yields, the branches' yields).
"""
from __future__ import annotations

from .core import Block, Operation, Value
from .traits import ALLOCATION, CONTROL_FLOW, REMOTE_VIEW, VIEW, has_trait


def view_roots(value: Value | None) -> list[Operation]:
    """The allocation ops ``value`` may be a view of, in discovery order (empty if none is known)."""
    roots: list[Operation] = []
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if v is None or id(v) in seen:
            continue
        seen.add(id(v))
        owner = getattr(v, "owner", None)
        if isinstance(owner, Operation):
            if has_trait(owner, ALLOCATION):
                if owner not in roots:
                    roots.append(owner)
            elif has_trait(owner, VIEW) or has_trait(owner, REMOTE_VIEW):
                stack.append(owner.operands[0])
            elif has_trait(owner, CONTROL_FLOW):
                stack.extend(_merged_into_result(owner, v.index))
        elif isinstance(owner, Block):
            stack.extend(_merged_into_argument(owner, v.index))
    return roots


def _merged_into_result(op: Operation, index: int) -> list[Value]:
    if op.name == "scf.for":
        return [op.operands[3 + index], op.regions[0].block.terminator.operands[index]]
    if op.name == "scf.while":
        return [op.regions[0].block.terminator.operands[1 + index]]
    return [region.block.terminator.operands[index] for region in op.regions
            if region.block.terminator is not None and len(region.block.terminator.operands) > index]


def _merged_into_argument(block: Block, index: int) -> list[Value]:
    op = block.parent.parent if block.parent is not None else None
    if not isinstance(op, Operation):
        return []
    if op.name == "scf.for":
        if index == 0:
            return []                    # the induction variable
        return [op.operands[3 + index - 1], block.terminator.operands[index - 1]]
    if op.name == "scf.while":
        before, after = op.regions[0].block, op.regions[1].block
        if block is before:
            return [op.operands[index], after.terminator.operands[index]]
        return [before.terminator.operands[1 + index]]
    return []
