"""hoist-conversions: a layout conversion of a loop-invariant value runs once, before the loop.

``infer-layouts`` places each ``tl.convert_layout`` at the use that needs it.  When the
use is inside a loop and the value is defined outside (attention backward's ``m`` and
``Di`` rows, loaded once and read every iteration in the MMA accumulator's row layout),
the conversion -- through shared memory with a CTA barrier before and after -- ran every
iteration.  It is pure, so it moves before the outermost loop its operand is invariant
in (a loop that runs zero times then converts once for nothing).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Block, Module, Operation, Value
from .manager import Pass


@dataclass(frozen=True)
class HoistConversions(Pass):
    name = "hoist-conversions"

    def run(self, module: Module, options) -> Module:
        for kernel in module.kernels:
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
