"""fuse-dot-pairs: wgmma products that share their A and whose B buffers can sit side by side
become one instruction of the summed width (sm_90a).

The rule.  In one block, ops of this shape (``ops/kernels/gemm_ws.py``'s tiles of ``BN + BN_TAIL
(+ BN_TAIL2)`` columns: block shapes are powers of two, so a 160-column tile is a 128-column product
and a 32-column one, a 152-column tile 128 + 16 + 8)::

    %b1 = tlx.local_view %ring1[%slot]     %b2 = tlx.local_view %ring2[%slot]
    %d1 = tlx.async_dot %a, local_trans(%b1), %acc1
    ...                                    # only views (local_view, local_trans) and constants
    %d2 = tlx.async_dot %a, local_trans(%b2), %acc2
    ...                                    # (more products of the same kind: %d3 on %ring3, ...)
    ...                                    # no wgmma op, no region, until
    tlx.async_dot_wait {pendings = 0}      # every group retired

with the same A (one value, or equal views of one buffer; in shared memory), every B a K-major view
of a whole buffer of the same index into allocations that nothing else reads but such views (same
element type, same count, 128-byte rows with the 128-byte swizzle, every part but the last a
multiple of 8 rows, no ``reuse=``), accumulators of the same rows in one ``m64nN`` instruction
column each and ``N1 + N2 + ... <= 256``: product i of the run of n gets ``attrs.fused_dot = (i, n)``;
the last issues ``m64n(N1+N2+...)`` for all of them, reading B from ``%b1`` on, the others emit
nothing. The allocations get ``attrs.interleave = (group, byte offset)``: ``allocate-shared``
stores buffer i of ``%ring2`` right after buffer i of ``%ring1`` (and so on), every allocation of
the group ``N1 + N2 + ...`` rows apart per buffer (``attrs.buffer_pitch``).  K-major B with a
128-byte swizzle is 8-row atoms of 1024 bytes at a stride of 1024 (the descriptor's SBO), so the
rows of ``%b2`` are exactly rows ``N1 ..`` of one operand of the summed width.

Why.  A narrow product costs more than its share: each ``m64nNk16`` reads its 64 x 16 A slice again,
and the 32-column one is issued, tracked and retired like the 128-column one (the swapped 256x160
tile issued 16 wgmmas a consumer-step, eight of them n32, where cuBLAS's 256x152 issues eight
m64n152: +6-9 % fused, docs/performance.md, session 24).

Row slices.  The B operands may instead be row slices of one buffer (``local_trans(local_slice(
local_view(allocation, index), [r, 0], [N, K]))``, the same allocation and index, each slice starting where
the one before ends, whole 128-byte rows): ``ops/kernels/grouped_gemm_swap.py``'s tile of a group's last
rows, ``16 x v`` rows of ``a`` multiplied as parts of 128, 64, 32 and 16 rows (power-of-two register tiles
its epilogue can split) but issued as one ``m64n(16 v)``.  Those rows are already side by side: nothing is
interleaved.

The products become one commit group, so the rule asks for a ``wait_group 0`` after them before
any other wgmma op: a later ``wait_group 1`` would otherwise find one group where the program
counted several.  The interpreter and the barrier checker run before this pass and see the
separate products; the result is the same numbers (each accumulator column is the same dot product).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Module, Operation, users_by_value
from ..ir.layouts_nvidia import wgmma_tiles
from ..ir.traits import ASYNC_DOT, has_trait
from ..ir.types import MemDescType
from ..target import has_feature
from .manager import Pass
from .shared_layouts import allocation_swizzle

_BETWEEN = ("tlx.local_view", "tlx.local_slice", "tlx.local_trans", "arith.constant")


@dataclass(frozen=True)
class FuseDotPairs(Pass):
    name = "fuse-dot-pairs"

    def run(self, module: Module, options) -> Module:
        if not has_feature(options.arch, "wgmma"):
            return module
        for kernel in module.kernels:
            users = users_by_value(kernel)
            rings: dict[int, tuple] = {}                # id(allocation) -> the group it is placed in
            groups: list[tuple] = []
            taken: set[int] = set()                     # id(product) of every fused product
            for op in kernel.walk():
                if op.name != "tlx.async_dot" or id(op) in taken:
                    continue
                run = _run(op, users)
                if run is None:
                    continue
                if run[0][2] is not None:               # row slices of one buffer: already side by side
                    for i, (dot, _, _) in enumerate(run):
                        dot.attrs["fused_dot"] = (i, len(run))
                        taken.add(id(dot))
                    continue
                allocs = tuple(alloc for _, alloc, _ in run)
                # an allocation is interleaved with one fixed set of others, in one order
                if any(rings.get(id(a), allocs) != allocs for a in allocs):
                    continue
                for a in allocs:
                    rings[id(a)] = allocs
                if allocs not in groups:
                    groups.append(allocs)
                for i, (dot, _, _) in enumerate(run):
                    dot.attrs["fused_dot"] = (i, len(run))      # the last issues them all
                    taken.add(id(dot))
            for gid, allocs in enumerate(groups):
                pitch = sum(a.results[0].type.buffer_bytes for a in allocs)
                at = 0
                for alloc in allocs:        # buffer i of each, in product order, then buffer i + 1
                    alloc.attrs["interleave"] = (gid, at)
                    alloc.attrs["buffer_pitch"] = pitch
                    at += alloc.results[0].type.buffer_bytes
        return module


def _run(first: Operation, users) -> list[tuple] | None:
    """[(product, the allocation of its B, its first row in the buffer or None), ...] of the products
    ``first`` begins (two or more): B buffers of distinct allocations indexed alike (row None), or
    adjacent row slices of one buffer; else None."""
    head = _operands(first, users)
    if head is None:
        return None
    block = first.parent
    run = [(first, head[1], head[4])]
    width = head[3]
    for op in block.ops[block.ops.index(first) + 1:]:
        if op.name in _BETWEEN:
            continue
        if op.name != "tlx.async_dot":
            break
        this = _operands(op, users)
        if this is None or not _same_view(this[0], head[0]) or not _same_value(this[2], head[2]):
            break
        if any(op.operands[2] is dot.results[0] for dot, _, _ in run):
            break
        prev_dot, prev_alloc, prev_row = run[-1]
        prev_rows = prev_dot.results[0].type.shape[1]
        if prev_row is None:
            if this[4] is not None or any(this[1] is a for _, a, _ in run):
                break
            prev = prev_alloc.results[0].type
            t = this[1].results[0].type
            if t.num != prev.num or t.shape[1] != prev.shape[1] or t.element != prev.element or prev.shape[0] % 8:
                break
        elif this[1] is not prev_alloc or this[4] != prev_row + prev_rows or prev_rows % 8:
            break
        if not _same_rows(first.results[0].type, op.results[0].type) or width + this[3] > 256:
            break
        run.append((op, this[1], this[4]))
        width += this[3]
    if len(run) < 2 or not _retired_next(run[-1][0]):
        return None
    return run


def _operands(dot: Operation, users):
    """(A, the allocation of B, B's index, N, B's first row in the buffer: None for a whole buffer) of a
    product the rule can fuse, else None."""
    if len(dot.operands) != 3 or dot.attrs.get("max_num_imprecise_acc") is not None:
        return None                                     # (use_acc operands, fp8 split accumulation)
    a, b, _ = dot.operands
    view = _kmajor_buffer(b)
    if not isinstance(a.type, MemDescType) or view is None or not _pairable(view[0], users):
        return None
    acc = dot.results[0].type
    if acc.layout is None or len(acc.shape) != 2 or acc.shape[1] != view[3]:
        return None
    n, tiles = wgmma_tiles(acc.layout)
    if n != acc.shape[1] or any(col for _, col in tiles):
        return None                                     # (one instruction column: N rows of B)
    return a, view[0], view[1], n, view[2]


def _same_value(x, y) -> bool:
    """``x`` and ``y`` are one value, or equal constants."""
    if x is y:
        return True
    cx, cy = getattr(x, "owner", None), getattr(y, "owner", None)
    return (getattr(cx, "name", None) == getattr(cy, "name", None) == "arith.constant"
            and cx.attrs.get("value") == cy.attrs.get("value") and x.type == y.type)


def _same_view(x, y) -> bool:
    """``x`` and ``y`` view the same bytes alike: one value, or the same view op (``local_view``,
    ``local_trans``) of such views with equal indices."""
    if x is y:
        return True
    vx, vy = getattr(x, "owner", None), getattr(y, "owner", None)
    if getattr(vx, "name", None) not in ("tlx.local_view", "tlx.local_trans") or \
            getattr(vy, "name", None) != vx.name or vx.attrs != vy.attrs or x.type != y.type:
        return False
    return _same_view(vx.operands[0], vy.operands[0]) and \
        all(_same_value(p, q) for p, q in zip(vx.operands[1:], vy.operands[1:]))


def _kmajor_buffer(b):
    """(allocation, index, first row or None, rows) when ``b`` is ``local_trans(local_view(allocation,
    index))`` (a whole buffer: first row None) or ``local_trans`` of a constant row slice of such a view
    over whole rows."""
    trans = getattr(b, "owner", None)
    if getattr(trans, "name", None) != "tlx.local_trans":
        return None
    view = getattr(trans.operands[0], "owner", None)
    row = None
    if getattr(view, "name", None) == "tlx.local_slice":
        offsets = [_constant(o) for o in view.operands[1:]]
        whole = view.results[0].type.shape[1] == view.operands[0].type.shape[1]
        if len(offsets) != 2 or offsets[0] is None or offsets[1] != 0 or not whole:
            return None
        row = offsets[0]
        view = getattr(view.operands[0], "owner", None)
    if getattr(view, "name", None) != "tlx.local_view":
        return None
    alloc = getattr(view.operands[0], "owner", None)
    if getattr(alloc, "name", None) != "tlx.local_alloc":
        return None
    return alloc, view.operands[1], row, trans.operands[0].type.shape[0]


def _constant(value):
    """The integer of an ``arith.constant``, else None."""
    owner = getattr(value, "owner", None)
    if getattr(owner, "name", None) != "arith.constant":
        return None
    v = owner.attrs.get("value")
    return v if isinstance(v, int) else None


def _pairable(alloc: Operation, users) -> bool:
    """A plain shared allocation of [rows, 128 bytes] swizzled 128 bytes, read through whole-buffer
    views only (so that no view spans two of its buffers)."""
    t = alloc.results[0].type
    if t.storage != "smem" or alloc.operands or len(t.shape) != 2 or "interleave" in alloc.attrs:
        return False
    if alloc.attrs.get("column_block") or allocation_swizzle(alloc) != 128 or t.shape[1] * t.element.bytes != 128:
        return False
    return all(op.name == "tlx.local_view" for op in users.get(id(alloc.results[0]), []))    # (no reuse=)


def _same_rows(t1, t2) -> bool:
    """Both accumulators over the same tiles of rows, in the same threads."""
    if t1.shape[0] != t2.shape[0]:
        return False
    rows1 = [r for r, _ in wgmma_tiles(t1.layout)[1]]
    rows2 = [r for r, _ in wgmma_tiles(t2.layout)[1]]
    return rows1 == rows2 and list(t1.layout.warp) == list(t2.layout.warp) and \
        list(t1.layout.lane) == list(t2.layout.lane)


def _retired_next(op: Operation) -> bool:
    """Whether, after ``op`` in its block, a ``wait_group 0`` comes before any other wgmma op or
    any op with regions."""
    block = op.parent
    for later in block.ops[block.ops.index(op) + 1:]:
        if later.name == "tlx.async_dot_wait":
            return later.attrs.get("pendings") == 0
        if later.regions or has_trait(later, ASYNC_DOT):
            return False
    return False
