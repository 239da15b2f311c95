"""``tlx.local_load`` of a 16-bit shared tile into mma.sync operand fragments with ``ldmatrix``.

An mma.sync m16n8k16 operand fragment (``ir/layouts_nvidia.py: mma_operand_layout``) gives
each lane pairs of adjacent elements of 8x8 blocks: in the coordinates of the buffer (``c`` the
contiguous dim, ``r`` the other), either

* register bit 0 -> c+1, lane bits 0, 1 -> c+2, c+4, lane bits 2..4 -> r+1, r+2, r+4
  (the pair runs along memory: ``ldmatrix``), or
* register bit 0 -> r+1, lane bits 0, 1 -> r+2, r+4, lane bits 2..4 -> c+1, c+2, c+4
  (the pair runs across memory rows: ``ldmatrix.trans``; B [K, N] with N contiguous, or A
  stored [K, M]).

Register bits 1 and 2 then pick the four 8x8 matrices of one ``ldmatrix.x4``, the higher
register bits one instruction each.  Lane ``l`` gives the address of row ``l % 8`` of matrix
``l / 8``: the *address layout* (``ldmatrix_plan``) maps (instruction, lane, warp) to that row's
first element, and the codegen addresses it as any other load (swizzle, column blocks:
``codegen_c/rules_buffers.py``).  Each 8-element row must be 16 contiguous, aligned bytes: every
base of the address layout a multiple of 8 along ``c``, the row pitch a multiple of 8 elements,
the view 16-byte aligned; the swizzles move whole 16-byte chunks.  Anything else (8- or 32-bit
elements, other layouts) keeps the element-wise loads of the shared rule.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen_c.rules_buffers import _offset_expr, shared_address
from ..codegen_c.words import unpack_words
from ..ir import layouts as L
from ..ir.types import MemDescType


@dataclass(frozen=True)
class LdmatrixPlan:
    trans: bool             # ldmatrix.trans
    address: L.Layout       # (instruction, lane, warp) -> the first element of the lane's row
    count: int              # ldmatrix.x4 per thread


def _unit(dim: int, value: int) -> tuple[int, int]:
    return (value, 0) if dim == 0 else (0, value)


def ldmatrix_plan(layout: L.Layout, contiguous: int) -> LdmatrixPlan | None:
    """How ldmatrix.x4 loads ``layout`` (2-D) from a buffer contiguous along dim ``contiguous``;
    None when it cannot."""
    if layout is None or layout.ndim != 2 or len(layout.register) < 3 or len(layout.lane) != 5:
        return None
    c, r = contiguous, 1 - contiguous
    reg, lane = layout.register, layout.lane
    along = [_unit(c, 1), _unit(c, 2), _unit(c, 4)]
    across = [_unit(r, 1), _unit(r, 2), _unit(r, 4)]
    if [reg[0], lane[0], lane[1]] == along and list(lane[2:5]) == across:
        trans, rows = False, list(lane[2:5])
    elif [reg[0], lane[0], lane[1]] == across and list(lane[2:5]) == along:
        trans, rows = True, [reg[0], lane[0], lane[1]]
    else:
        return None
    address = L.Layout(layout.shape, tuple(reg[3:]), tuple(rows) + (reg[1], reg[2]), layout.warp)
    if any(basis[c] % 8 for basis in (*address.register, reg[1], reg[2], *address.warp)):
        return None
    return LdmatrixPlan(trans, address, 1 << (len(reg) - 3))


def ldmatrix_load(lw, op) -> bool:
    """Lower ``op`` (``tlx.local_load`` of shared memory) with ldmatrix when it applies (True)."""
    view, result = op.operands[0], op.results[0]
    t = result.type.element
    if not isinstance(view.type, MemDescType) or t.bits != 16 or len(view.type.shape) != 2:
        return False
    strides = lw.views[id(view)][1]
    if sorted(strides)[0] != 1 or 1 not in strides:
        return False
    contiguous = strides.index(1)
    pitch = strides[1 - contiguous]
    if pitch % 8 or lw.view_align.get(id(view), 1) % 16:
        return False
    plan = ldmatrix_plan(result.type.layout, contiguous)
    if plan is None:
        return False
    helper = "tlx_ldmatrix_x4_trans" if plan.trans else "tlx_ldmatrix_x4"
    lw.target.use(helper)
    name = lw.declare(result)
    offset = _offset_expr(lw, plan.address, strides, reg="q", block=lw.view_block.get(id(view)))
    address = shared_address(lw, view, offset, t)
    values = unpack_words(["w0", "w1", "w2", "w3"], t, 8)
    assigns = " ".join(f"{name}[q * 8 + {j}] = {v};" for j, v in enumerate(values))
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int q = 0; q < {plan.count}; ++q)")
    lw.out.line(f"unsigned w0, w1, w2, w3; {helper}({address}, w0, w1, w2, w3); {assigns}")
    lw.out.close()
    return True


__all__ = ["LdmatrixPlan", "ldmatrix_load", "ldmatrix_plan"]
