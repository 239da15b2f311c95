"""hoist-allocations: allocations inside branches move to the kernel's top level.

Shared buffers and mbarriers are static: ``allocate-shared`` gives each one a
fixed place in the kernel's shared memory, and codegen initializes a
barrier where its ``tlx.alloc_barriers`` stands.  A kernel may still write
an allocation inside an ``if`` -- most often without meaning to: code after
an early ``return`` (``if pid >= n: return``) is built into the ``else``
branch of that ``if`` (``frontend/build_ir.py:visit_stmts``).  Such an
allocation runs at most once per program, so it means the same at the top
level, just before the outermost ``scf.if`` holding it: the buffer exists
either way, and initializing a barrier earlier is unobservable (nothing can
use it before its definition).

Run on the frontend's module (as ``cluster-syncs``), so the interpreter,
``tlxc check`` and codegen all see the hoisted IR.  Allocations inside loops
(one allocation per iteration would need a fresh barrier each time) and
inside ``tlx.async_tasks`` stay where they are, for ``allocate-shared`` to
report.  The order of allocations is kept, so a ``reuse=`` allocation still
follows the one it reuses.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Module
from ..ir.traits import ALLOCATION, has_trait
from .manager import Pass


def _allocations_in_branches(op, found: list) -> None:
    """The allocations nested in ``op``'s regions through ``scf.if`` regions only, in order."""
    for region in op.regions:
        for inner in region.ops:
            if has_trait(inner, ALLOCATION):
                found.append(inner)
            elif inner.name == "scf.if":
                _allocations_in_branches(inner, found)


def _defined_before(value, top, hoisted: set[int]) -> bool:
    owner = getattr(value, "owner", None)
    if id(owner) in hoisted:
        return True
    block = getattr(owner, "parent", None)          # an op's block (a block argument's owner is a block)
    return block is top or owner is top


def hoist_allocations(module: Module) -> Module:
    for kernel in module.kernels:
        top = kernel.regions[0].block
        index = 0
        while index < len(top.ops):
            op = top.ops[index]
            found: list = []
            if op.name == "scf.if":
                _allocations_in_branches(op, found)
            hoisted: set[int] = set()
            for alloc in found:
                if not all(_defined_before(v, top, hoisted) for v in alloc.operands):
                    continue                                 # left for allocate-shared to report
                alloc.parent.ops.remove(alloc)
                top.insert(index, alloc)
                hoisted.add(id(alloc))
                index += 1
            index += 1
    return module



@dataclass(frozen=True)
class HoistAllocations(Pass):
    """Allocations in branches hoisted to the kernel's top level.  Run with the frontend (``compiler.frontend_passes``)."""
    name = "hoist-allocations"

    def run(self, module: Module, options=None) -> Module:
        return hoist_allocations(module)


__all__ = ["HoistAllocations", "hoist_allocations"]
