"""fuse-dot-pairs: two wgmma products that share their A and whose B buffers can sit side by side
become one instruction of the summed width (sm_90a).

The rule.  In one block, ops of this shape (``ops/kernels/gemm_ws.py``'s tiles of ``BN + BN_TAIL``
columns: block shapes are powers of two, so a 160-column tile is a 128-column product and a
32-column one)::

    %b1 = tlx.local_view %ring1[%slot]     %b2 = tlx.local_view %ring2[%slot]
    %d1 = tlx.async_dot %a, local_trans(%b1), %acc1
    ...                                    # only views (local_view, local_trans) and constants
    %d2 = tlx.async_dot %a, local_trans(%b2), %acc2
    ...                                    # no wgmma op, no region, until
    tlx.async_dot_wait {pendings = 0}      # every group retired

with the same A (one value, or equal views of one buffer; in shared memory), both B K-major views of whole buffers of the same
index into two allocations that nothing else reads but such views (same element type, same count,
128-byte rows with the 128-byte swizzle, ``N1`` a multiple of 8 rows, no ``reuse=``), accumulators
of the same rows in one ``m64nN`` instruction column each and ``N1 + N2 <= 256``: ``%d1`` gets
``attrs.fused_dot = "first"`` (it emits nothing) and ``%d2`` ``"second"`` (the lowering issues
``m64n(N1+N2)`` for both, reading B from ``%b1`` on) and the two allocations get ``attrs.interleave = (group, byte offset)``:
``allocate-shared`` stores buffer i of ``%ring2`` right after buffer i of ``%ring1``, both
allocations ``N1 + N2`` rows apart per buffer (``attrs.buffer_pitch``).  K-major B with a 128-byte
swizzle is 8-row atoms of 1024 bytes at a stride of 1024 (the descriptor's SBO), so the rows of
``%b2`` are exactly rows ``N1 ..`` of one ``N1 + N2``-row operand.

Why.  A narrow product costs more than its share: each ``m64nNk16`` reads its 64 x 16 A slice again,
and the 32-column one is issued, tracked and retired like the 128-column one (the swapped 256x160
tile issued 16 wgmmas a consumer-step, eight of them n32, where cuBLAS's 256x152 issues eight
m64n152: docs/performance.md, session 24).

The two products become one commit group, so the rule asks for a ``wait_group 0`` after them
before any other wgmma op: a later ``wait_group 1`` would otherwise find one group where the
program counted two.  The interpreter and the barrier checker run before this pass and see the two
products; the result is the same numbers (each accumulator column is the same dot product).
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

_BETWEEN = ("tlx.local_view", "tlx.local_trans", "arith.constant")


@dataclass(frozen=True)
class FuseDotPairs(Pass):
    name = "fuse-dot-pairs"

    def run(self, module: Module, options) -> Module:
        if not has_feature(options.arch, "wgmma"):
            return module
        for kernel in module.kernels:
            users = users_by_value(kernel)
            partner: dict[int, Operation] = {}          # id(allocation) -> the one it is paired with
            order = {id(op): i for i, op in enumerate(kernel.walk())}
            pairs = []
            for op in kernel.walk():
                if op.name != "tlx.async_dot":
                    continue
                match = _match(op, users)
                if match is None:
                    continue
                dot, first, second = match
                if any(partner.get(id(x), y) is not y for x, y in ((first, second), (second, first))):
                    continue                            # (each allocation pairs with one other only)
                if any(dot is o or dot is d for o, d, _, _ in pairs):
                    continue                            # (a product is in one pair at most)
                partner[id(first)], partner[id(second)] = second, first
                pairs.append((op, dot, first, second))
            groups = {}
            for op, dot, first, second in pairs:
                dot.attrs["fused_dot"] = "first"        # emits nothing: the second issues both
                op.attrs["fused_dot"] = "second"
                if id(first) in groups:
                    continue
                gid = len(groups)
                groups[id(first)] = gid
                leading, trailing = sorted((first, second), key=lambda a: order[id(a)])
                pitch = first.results[0].type.buffer_bytes + second.results[0].type.buffer_bytes
                # first's rows come first in each buffer; the allocator places the group when it
                # meets the earlier allocation of the two (leading)
                leading.attrs["interleave"] = (gid, 0 if leading is first else first.results[0].type.buffer_bytes)
                trailing.attrs["interleave"] = (gid, 0 if trailing is first else first.results[0].type.buffer_bytes)
                for alloc in (first, second):
                    alloc.attrs["buffer_pitch"] = pitch
        return module


def _match(second: Operation, users) -> tuple[Operation, Operation, Operation] | None:
    """(the first product, the allocation of its B, of the second's) when ``second`` closes a pair."""
    block = second.parent
    at = block.ops.index(second)
    first = next((op for op in reversed(block.ops[:at]) if op.name not in _BETWEEN), None)
    if first is None or first.name != "tlx.async_dot":
        return None
    for op in (first, second):
        if len(op.operands) != 3 or op.attrs.get("max_num_imprecise_acc") is not None:
            return None                                 # (use_acc operands, fp8 split accumulation)
    a1, b1, acc1 = first.operands
    a2, b2, acc2 = second.operands
    if not _same_view(a1, a2) or not isinstance(a1.type, MemDescType) or acc2 is first.results[0]:
        return None
    if b1.type.element != b2.type.element:
        return None
    views = [_kmajor_buffer(b) for b in (b1, b2)]
    if None in views or not _same_value(views[0][1], views[1][1]):
        return None                                     # (not one index into both)
    (alloc1, _), (alloc2, _) = views
    if alloc1 is alloc2 or not all(_pairable(a, users) for a in (alloc1, alloc2)):
        return None
    t1, t2 = alloc1.results[0].type, alloc2.results[0].type
    if t1.num != t2.num or t1.shape[1] != t2.shape[1] or t1.shape[0] % 8:
        return None
    if not _same_rows(first.results[0].type, second.results[0].type, t1.shape[0], t2.shape[0]):
        return None
    if not _retired_next(second):
        return None
    return first, alloc1, alloc2


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
    """(allocation, index) when ``b`` is ``local_trans(local_view(allocation, index))``."""
    trans = getattr(b, "owner", None)
    if getattr(trans, "name", None) != "tlx.local_trans":
        return None
    view = getattr(trans.operands[0], "owner", None)
    if getattr(view, "name", None) != "tlx.local_view":
        return None
    alloc = getattr(view.operands[0], "owner", None)
    if getattr(alloc, "name", None) != "tlx.local_alloc":
        return None
    return alloc, view.operands[1]


def _pairable(alloc: Operation, users) -> bool:
    """A plain shared allocation of [rows, 128 bytes] swizzled 128 bytes, read through whole-buffer
    views only (so that no view spans two of its buffers)."""
    t = alloc.results[0].type
    if t.storage != "smem" or alloc.operands or len(t.shape) != 2 or "interleave" in alloc.attrs:
        return False
    if alloc.attrs.get("column_block") or allocation_swizzle(alloc) != 128 or t.shape[1] * t.element.bytes != 128:
        return False
    return all(op.name == "tlx.local_view" for op in users.get(id(alloc.results[0]), []))    # (no reuse=)


def _same_rows(t1, t2, n1: int, n2: int) -> bool:
    """Both accumulators one instruction column wide (N1 and N2) over the same tiles of rows, and
    N1 + N2 a wgmma width."""
    if t1.layout is None or t2.layout is None or t1.shape[0] != t2.shape[0]:
        return False
    if list(t1.shape) != [t1.shape[0], n1] or list(t2.shape) != [t2.shape[0], n2]:
        return False
    (w1, tiles1), (w2, tiles2) = wgmma_tiles(t1.layout), wgmma_tiles(t2.layout)
    if (w1, w2) != (n1, n2) or n1 + n2 > 256 or (n1 + n2) % 8:
        return False
    if any(col for _, col in tiles1 + tiles2) or [r for r, _ in tiles1] != [r for r, _ in tiles2]:
        return False
    return list(t1.layout.warp) == list(t2.layout.warp) and list(t1.layout.lane) == list(t2.layout.lane)


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
