"""canonicalize: fold what the frontend left foldable and drop dead ops.

Pure ops whose results nobody uses are removed (loads included: a load
without a use has no observable effect in this memory model; and an in-kernel tensor map
nothing copies through, which writes only its own scratch slot), except ``tl.hint``:
a hint describes the hinted value too (``axis_info.py``), so Triton's
``tl.multiple_of(a_ptrs, [16, 16])`` written as a statement keeps its meaning.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Module, Region
from ..ir.traits import SIDE_EFFECT, has_trait
from .manager import Pass


def has_side_effects(op) -> bool:
    if op.name == "tlx.make_tensor_descriptor" and not op.attrs.get("has_desc_ptr"):
        return False        # writes only its own scratch slot: unused, nothing reads it
    if has_trait(op, SIDE_EFFECT) or op.name.startswith("tlx."):       # (tlx.* ops: buffers, barriers, tasks)
        return True
    if op.name == "tl.inline_asm_elementwise" and not op.attrs.get("pure"):   # is_pure=False: keep it
        return True
    return any(has_side_effects(inner) for region in op.regions for inner in region.ops)


@dataclass(frozen=True)
class Canonicalize(Pass):
    name = "canonicalize"

    def run(self, module: Module, options) -> Module:
        for kernel in module.kernels:
            changed = True
            while changed:
                used = {id(v) for op in kernel.walk() for v in op.operands}
                changed = _remove_dead(kernel.regions[0], used)
        return module


def _remove_dead(region: Region, used: set[int]) -> bool:
    changed = False
    kept = []
    for op in region.ops:
        for inner in op.regions:
            changed |= _remove_dead(inner, used)
        # a hint stays: it describes its operand too (axis_info.py), as a statement in Triton code
        dead = (op.results and op.name != "tl.hint" and not has_side_effects(op)
                and not any(id(r) in used for r in op.results))
        if dead:
            changed = True
        else:
            kept.append(op)
    region.block.ops[:] = kept
    return changed
