"""Module verification: each op's own rules plus SSA dominance.

Structured control flow makes dominance simple: a value is visible after its
definition in its block and in every region nested below that point.
"""
from __future__ import annotations

from ..errors import VerificationError
from .core import Module, Operation, Region


def verify_module(module: Module) -> None:
    for kernel in module.kernels:
        if kernel.name != "tl.kernel":
            raise VerificationError(f"expected tl.kernel at module level, got {kernel.name}", kernel.loc)
        _verify_region(kernel.regions[0], set())
        kernel.verify()


def _verify_region(region: Region, visible: set[int]) -> None:
    visible = set(visible)
    visible.update(id(a) for a in region.args)
    ops = region.ops
    for index, op in enumerate(ops):
        for i, operand in enumerate(op.operands):
            if id(operand) not in visible:
                raise op.error(f"operand #{i} does not dominate its use (defined later or in another region)")
        if op.is_terminator and index != len(ops) - 1:
            raise op.error("terminator must be the last op of its block")
        if op.num_regions is not None and len(op.regions) != op.num_regions:
            raise op.error(f"expected {op.num_regions} regions, got {len(op.regions)}")
        for inner in op.regions:
            _verify_region(inner, visible)
        op.verify()
        visible.update(id(r) for r in op.results)


def verify_op_tree(op: Operation) -> None:
    for inner in op.walk():
        inner.verify()
