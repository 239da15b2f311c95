"""NVIDIA's lowering of the orchestration layer: tensor-memory and barrier views
(the shared-memory buffer rules are ``codegen_c/rules_buffers.py``), mbarriers,
named barriers, fences, cp.async, TMA and warp-group tasks.

Buffers are addressed as ``codegen_c/rules_buffers.py`` describes.  A TMA box
wider than its swizzle span is one copy per block (``_tma_pieces``).
Warp specialization (``lower_warp_specialized``) splits the kernel body:

* the uniform prologue (allocations, barrier inits, the scalars the tasks
  capture) runs in every warp, followed by ``__syncthreads()``;
* then each warp branches to its task: the default task's warps also run the
  kernel code before and after ``tlx.async_tasks`` (as in TLX, where that code
  belongs to the default partition); every task syncs with its own named
  barrier (ids 1..6; 7..15 are the user's) and has its own scratch space.
"""
from __future__ import annotations

import itertools
import os

from ..codegen_c import c_types as C
from ..codegen_c import rules_buffers as buffers
from ..codegen_c.lower import Scope, const_table, elem, lowering, registers
from ..codegen_c.rules_buffers import _offset_expr, register_offsets, shared_address, shared_vector_width
from ..errors import CompilationError, ResourceError
from ..ir.ops.task import MAX_TASKS, launch_registers
from ..ir.traits import ALLOCATION, has_trait
from ..ir.types import BarrierType, MemDescType, TensorType
from ..options import perf_switch
from . import rules_tcgen05 as tcgen05
from .rules_ldmatrix import ldmatrix_load
from .rules_tensormap import tensormap_address


# -- buffers: tensor memory and barrier arrays here, shared memory in codegen_c/rules_buffers.py --
@lowering("tlx.local_alloc", vendor="nvidia")
def local_alloc(lw, op):
    if op.results[0].type.storage == "tmem":
        return tcgen05.tmem_alloc(lw, op)
    return buffers.local_alloc(lw, op)


@lowering("tlx.alloc_barriers", vendor="nvidia")
def alloc_barriers(lw, op):
    r = op.results[0]
    name = lw.define(r)
    count = op.attrs["arrive_count"]
    lw.out.line(f"unsigned long long* {name} = reinterpret_cast<unsigned long long*>(tlx_smem + "
                f"{op.attrs['offset']});")
    lw.out.open(f"if ({lw.scope.tid_var} == 0)")
    lw.out.line("#pragma unroll")
    lw.out.line(f"for (int i = 0; i < {r.type.num}; ++i) {lw.target.mbarrier_init(f'{name} + i', count)}")
    lw.out.line(lw.target.fence("async_shared"))
    lw.out.close()
    lw.out.line(lw.sync())


@lowering("tlx.local_view", vendor="nvidia")
def local_view(lw, op):
    src, idx = op.operands
    r = op.results[0]
    if isinstance(src.type, BarrierType):
        lw.out.line(f"unsigned long long* {lw.define(r)} = {lw.name(src)} + {lw.name(idx)};")
        lw.barrier_names[id(r)] = (src.name_hint or lw.name(src), lw.name(idx))
        return
    if src.type.storage == "tmem":
        return tcgen05.tmem_view(lw, op)
    return buffers.local_view(lw, op)


def _tmem_or_shared(name: str, tmem_rule, shared_rule) -> None:
    """NVIDIA's rule for a buffer op: tensor memory (tcgen05) is NVIDIA's own, shared memory
    goes to the shared rule every backend uses."""
    def rule(lw, op):
        if op.operands[0].type.storage == "tmem":
            return tmem_rule(lw, op)
        return shared_rule(lw, op)
    rule.__name__ = name.split(".")[-1]
    lowering(name, vendor="nvidia")(rule)


_tmem_or_shared("tlx.local_slice", tcgen05.tmem_slice, buffers.local_slice)
_tmem_or_shared("tlx.local_load", tcgen05.tmem_load,
                lambda lw, op: ldmatrix_load(lw, op) or buffers.local_load(lw, op))
_tmem_or_shared("tlx.local_store", tcgen05.tmem_store, buffers.local_store)


@lowering("tlx.async_load", vendor="nvidia")
def async_load(lw, op):
    ptrs, view = op.operands[:2]
    mask = op.operands[2] if op.attrs.get("has_mask") else None
    strides = lw.views[id(view)][1]
    t = ptrs.type.element.pointee
    from ..codegen_c.rules_memory import vector_dim, vector_width
    width = vector_width(lw, ptrs, mask, t.bytes) if strides[vector_dim(ptrs.type.layout)] == 1 else 1
    width = min(width, shared_vector_width(lw, view, ptrs.type.layout, t)) if width > 1 else 1
    while width * t.bytes > 16:
        width //= 2
    nbytes = width * t.bytes
    block = lw.view_block.get(id(view))
    offset = _offset_expr(lw, ptrs.type.layout, strides, block=block)
    pred = lw.ref(mask) if mask is not None else "true"
    _check_cp_async_cache(op, nbytes)
    runs = None
    if perf_switch("TLXC_SHARED_IMM"):     # (tlxc/options.py: PERF_SWITCHES)
        runs = register_offsets(lw, view, ptrs.type.layout, strides, t, width, block)
    table = const_table(lw, runs, "run") if runs and len(runs) > 1 else None
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int i = 0; i < {registers(ptrs.type)}; i += {width})")
    if table is not None:        # run 0's address plus a constant per run (register_offsets)
        offset0 = _offset_expr(lw, ptrs.type.layout, strides, reg="0", block=block)
        dst = f"({shared_address(lw, view, offset0, t)} + {table}[(i) / {width}])"
    else:
        dst = shared_address(lw, view, offset, t)
    zero = C.constant_literal(0, t)
    if nbytes in (4, 8, 16):
        lw.out.line(lw.target.cp_async(dst, lw.ref(ptrs), pred, nbytes, _cp_async_hints(lw, op)))
    elif op.attrs.get("eviction") or op.attrs.get("cache"):
        # the synchronous copy below, through a load that carries the hints
        read = lw.target.load_hinted(["v"], lw.ref(ptrs), pred, [zero], t, op.attrs)
        lw.out.line(f"{{ {C.storage_type(t)} v; {read} *({dst}) = v; }}")
    else:
        # cp.async moves 4, 8 or 16 bytes; narrower pieces (pointers not provably contiguous
        # and aligned) are copied synchronously, which is a valid (early) completion.
        lw.out.line(f"*({dst}) = ({pred}) ? *{lw.ref(ptrs)} : {zero};")
    lw.out.close()


def _cp_async_hints(lw, op) -> dict:
    """The hints a cp.async carries: the op's cache operator, not its L2 eviction policy.  ptxas (NVRTC
    13.0 and 13.5) can encode a cp.async with an L2::cache_hint operand and a shared address split into
    a register plus a uniform register as ``LDGSTS [R+UR6], desc[UR7]``: the policy's register pair
    named by its odd half, which stops the GPU with an illegal instruction (the H100, 2026-12-06, the
    decode split kernel; docs/performance.md session 38).  Triton's cp.async carries no policy
    either.  The dropped policy is reported as a performance warning naming the source line."""
    if not op.attrs.get("eviction"):
        return op.attrs
    where = f"{os.path.basename(op.loc.file)}:{op.loc.line}" if op.loc else "an unknown line"
    notes = lw.metadata_extra.setdefault("lowering_notes", [])
    note = (f"tlx.async_load(eviction_policy={op.attrs['eviction']!r}) at {where}: cp.async is emitted without "
            f"the L2 policy (ptxas encodes hinted cp.async into an illegal instruction in some kernels)")
    if note not in notes:
        notes.append(note)
    return {**op.attrs, "eviction": ""}


def _check_cp_async_cache(op, nbytes: int) -> None:
    """cache_modifier=".cg" (L2 only) exists for 16-byte cp.async copies only; refuse rather
    than quietly copy through L1."""
    if op.attrs.get("cache") == ".cg" and nbytes != 16:
        raise CompilationError(f"tlx.async_load(cache_modifier='.cg'): cp.async.cg copies 16 bytes per thread, "
                               f"but these copies move {nbytes} bytes each (the pointers are not provably 16-byte "
                               f"contiguous and aligned: see tl.multiple_of / tl.max_contiguous, or the buffer's "
                               f"layout); use '.ca' or ''", op.loc)


@lowering("tlx.async_commit_group", vendor="nvidia")
def async_commit_group(lw, op):
    lw.out.line(lw.target.cp_async_commit())


@lowering("tlx.async_wait_group", vendor="nvidia")
def async_wait_group(lw, op):
    lw.out.line(lw.target.cp_async_wait(op.attrs["pendings"]))


# -- TMA ---------------------------------------------------------------------------------------
def _tma_coords(lw, offsets) -> list[str]:
    # TMA coordinates run innermost dimension first; the IR's offsets outermost first.
    return [lw.name(o) for o in reversed(offsets)]


def _tma_pieces(lw, op, desc_type, view, offsets) -> list[tuple[str, str]]:
    """The copies one TMA box takes: (shared pointer, coordinates) per copy.

    The TMA unit lays the box out with the descriptor's swizzle; the buffer's readers must
    use the same one (``shared-layouts`` makes them agree).  A box is copied in pieces of the
    map's box (``TensorDescType.copy_box``): along an outer dimension longer than 256 elements,
    piece ``i`` (its rows ``i * 256 ..``) into the rows it covers of the row-major buffer; along
    the inner dimension, a box wider than its swizzle span as span-wide sub-boxes, sub-box ``j``
    (columns ``j * cols ..``) into column block ``j`` of the buffer, or a single-row box wider
    than 256 elements as consecutive 256-element runs."""
    swizzle = lw.view_swizzle.get(id(view), 0)
    if desc_type.swizzle != swizzle:
        raise CompilationError(f"the TMA descriptor ({desc_type}) swizzles its box by {desc_type.swizzle} bytes "
                               f"but the shared buffer is laid out with swizzle {swizzle} (a tlxc bug: the "
                               f"shared-layouts pass should have made them agree)", op.loc)
    base = lw.views[id(view)][0]
    coords = _tma_coords(lw, offsets)
    box, copy = desc_type.block_shape, desc_type.copy_box
    copy_cols, box_cols = copy[-1], box[-1]
    block = lw.view_block.get(id(view))
    if copy_cols == box_cols and block:
        raise CompilationError(f"this shared buffer is stored as {block[0]}-column blocks (its rows are wider "
                               f"than the 128-byte swizzle); a TMA copy of a {box_cols}-column box must "
                               f"target one block: tlx.local_slice(buf, [0, j * {block[0]}], [rows, "
                               f"{block[0]}]), or copy a box as wide as the buffer", op.loc)
    if desc_type.splits_columns and (not block or block[0] != copy_cols or view.type.shape[-1] != box_cols):
        raise CompilationError(f"the TMA box of {desc_type} is copied as {box_cols // copy_cols} sub-boxes "
                               f"{copy_cols} columns wide, into a buffer stored as {copy_cols}-column blocks "
                               f"as wide as the box; got {view.type} (a tlxc bug if the shapes agree: the "
                               f"shared-layouts pass stores such buffers column-blocked)", op.loc)
    strides = tuple(lw.views[id(view)][1])
    if not desc_type.splits_columns and strides != buffers.row_major(view.type.shape) and \
            any(n > 1 for n in view.type.shape[:-1]):
        raise CompilationError(f"a TMA copy lays its box out as dense rows of {box_cols} elements, but this "
                               f"shared view of {view.type} has rows {strides[-2]} elements apart (a column "
                               f"slice of a wider buffer, or a padded layout); copy into a buffer (or a row "
                               f"slice of one) exactly as wide as the box", op.loc)
    # rows of the box below each outer dimension (the buffer is row-major in them)
    below = [1] * (len(box) - 1)
    for d in range(len(box) - 3, -1, -1):
        below[d] = below[d + 1] * box[d + 1]
    row_width = copy_cols if desc_type.splits_columns else box_cols       # elements of a buffer row
    pieces = []
    for starts in itertools.product(*(range(0, b, c) for b, c in zip(box[:-1], copy[:-1]))):
        row = sum(s * n for s, n in zip(starts, below))
        for j, col in enumerate(range(0, box_cols, copy_cols)):
            offset = row * row_width + (j * block[1] if desc_type.splits_columns else col)
            pieces.append((f"{base} + {offset}" if offset else base, _shifted(coords, [*starts, col])))
    return pieces


def _shifted(coords: list[str], shifts: list[int]) -> str:
    """TMA coordinates (innermost first) with each IR dimension's moved ``shifts[d]`` elements on
    (``shifts`` outermost first, as the IR's offsets)."""
    moved = [f"{c} + {s}" if s else c for c, s in zip(coords, reversed(shifts))]
    return ", ".join(moved + coords[len(moved):])


@lowering("tlx.async_descriptor_load", vendor="nvidia")
def async_descriptor_load(lw, op):
    desc, dst, bar = op.operands[:3]
    has_pred = op.attrs.get("has_pred")
    offsets = op.offsets
    pieces = _tma_pieces(lw, op, desc.type, dst, offsets)
    rank = len(offsets)
    cond = f"{lw.scope.tid_var} == 0" + (f" && {lw.name(op.operands[-1])}" if has_pred else "")
    multicast = op.attrs.get("multicast")
    helper = _tma_helper(lw, op, "tlx_tma_load_multicast" if multicast else "tlx_tma_load", rank)
    mask = f"(unsigned short){lw.name(op.cta_mask)}, " if multicast else ""
    calls = [f"{helper}({ptr}, {tensormap_address(lw, desc)}, {lw.name(bar)}, {mask}{coords});" for ptr, coords in pieces]
    _issue(lw, cond, calls)


def _tma_helper(lw, op, base: str, rank: int, template: str = "") -> str:
    """``<base>_<rank>d``, or with an eviction_policy its ``_hint`` twin, which takes the L2
    policy (after ``template``, the helper's other template arguments) as a template argument."""
    eviction = lw.target.eviction_index(op.attrs)
    if not eviction:
        lw.target.use(f"{base}_{rank}d")
        return f"{base}_{rank}d"
    lw.target.use(f"{base}_hint_{rank}d")
    return f"{base}_hint_{rank}d<{template}{eviction}>"


def _issue(lw, cond: str, calls: list[str]) -> None:
    """``if (cond) call;`` -- one line per copy of a split box under one guard."""
    if len(calls) == 1:
        lw.out.line(f"if ({cond}) {calls[0]}")
        return
    lw.out.open(f"if ({cond})")
    for call in calls:
        lw.out.line(call)
    lw.out.close()


@lowering("tlx.async_descriptor_prefetch_tensor", vendor="nvidia")
def async_descriptor_prefetch_tensor(lw, op):
    desc = op.operands[0]
    offsets = op.offsets
    cond = f"{lw.scope.tid_var} == 0" + (f" && {lw.name(op.operands[-1])}" if op.attrs.get("has_pred") else "")
    helper = _tma_helper(lw, op, "tlx_tma_prefetch", len(offsets))
    coords = _tma_coords(lw, offsets)
    box, copy = desc.type.block_shape, desc.type.copy_box
    # the map's box is a piece of a split box: prefetch each one
    calls = [f"{helper}({tensormap_address(lw, desc)}, {_shifted(coords, list(starts))});"
             for starts in itertools.product(*(range(0, b, c) for b, c in zip(box, copy)))]
    _issue(lw, cond, calls)


@lowering("tlx.async_descriptor_store", vendor="nvidia")
def async_descriptor_store(lw, op):
    desc, src = op.operands[:2]
    offsets = op.operands[2:]
    pieces = _tma_pieces(lw, op, desc.type, src, offsets)
    # a reduce-store (store_reduce=) is the same copy, combining with global memory;
    # each sub-box of a split box is reduced by its own copy, like a plain store's
    kind = op.attrs.get("reduce")
    rank = len(offsets)
    if kind and lw.target.eviction_index(op.attrs):     # one hinted helper for every reduction
        helper = _tma_helper(lw, op, "tlx_tma_reduce", rank, f"{lw.target.tma_reduce_index(kind)}, ")
    else:
        helper = _tma_helper(lw, op, f"tlx_tma_reduce_{kind}" if kind else "tlx_tma_store", rank)
    lw.target.use("tlx_bulk_commit_group")
    stores = " ".join(f"{helper}({tensormap_address(lw, desc)}, {ptr}, {coords});" for ptr, coords in pieces)
    # Every thread's shared-memory writes (fenced by the user's fence("async_shared")) must be
    # done before the one thread issues the copy; bulk groups belong to the issuing thread, so
    # the store, its commit and its waits stay on thread 0; the copies of a split box are one
    # bulk group, so store waits count boxes.
    lw.out.line(lw.sync())
    lw.out.line(f"if ({lw.scope.tid_var} == 0) {{ {stores} tlx_bulk_commit_group(); }}")
    wait_stores_at_exit(lw)


def wait_stores_at_exit(lw) -> None:
    """A kernel with bulk (TMA) stores waits for their reads of shared memory before it exits:
    PTX does not promise that a CTA's exit waits for its bulk async-groups, and the shared
    memory they read is released (and may go to the next CTA).  TLX's tutorials end with an
    ``async_descriptor_store`` and no ``async_descriptor_store_wait(0)`` (Triton's own
    descriptor stores always wait), so, as for the proxy fences, tlxc inserts it: every thread
    runs ``cp.async.bulk.wait_group.read 0`` at the kernel's end (after every task joined),
    which is immediate for threads without groups in flight.  ``tlxc check`` notes where."""
    if "bulk_wait_at_exit" in lw.rule_state:
        return
    lw.rule_state["bulk_wait_at_exit"] = True
    lw.target.use("tlx_bulk_wait_group_read")
    lw.epilogue += ["// bulk (TMA) stores still reading shared memory: wait before the CTA exits",
                    "tlx_bulk_wait_group_read<0>();"]


@lowering("tlx.async_descriptor_store_wait", vendor="nvidia")
def async_descriptor_store_wait(lw, op):
    # Only thread 0 has bulk groups to wait for; the others must not write the buffer the
    # store is still reading, so the whole task waits for thread 0 at a barrier.
    lw.target.use("tlx_bulk_wait_group_read")
    lw.out.line(f"if ({lw.scope.tid_var} == 0) tlx_bulk_wait_group_read<{op.attrs['pendings']}>();")
    lw.out.line(lw.sync())


# -- bulk copies (non-tensor cp.async.bulk) and prefetch hints -------------------------------
def _bulk_buffer(lw, op, view) -> str:
    """The shared pointer of a bulk copy's buffer, which cp.async.bulk wants 16-byte aligned."""
    from ..ir.ops.bulk import BULK_ALIGN
    align = lw.view_align.get(id(view), BULK_ALIGN)
    what = "tlx.async_load(bulk=True)" if op.name == "tlx.async_bulk_load" else "tlx.async_store"
    swizzle = lw.view_swizzle.get(id(view), 0)
    if swizzle:
        # a bulk copy moves the bytes as they lie; the buffer's elements do not lie in order
        shown = f"{swizzle}-byte swizzle" if isinstance(swizzle, int) else str(swizzle)
        raise CompilationError(f"{what}: the buffer is stored swizzled ({shown}, for its other users or its "
                               f"explicit layout), and a bulk copy moves its bytes unswizzled; copy it through "
                               f"a TMA descriptor, or use a separate unswizzled buffer for the bulk copy", op.loc)
    if align % BULK_ALIGN:
        raise CompilationError(f"{what}: the buffer is only known to start on a {align}-byte boundary; "
                               f"cp.async.bulk needs 16-byte aligned shared addresses (make each buffer of the "
                               f"array a multiple of 16 bytes)", op.loc)
    return lw.views[id(view)][0]


@lowering("tlx.async_bulk_load", vendor="nvidia")
def async_bulk_load(lw, op):
    ptr, dst, bar, size = op.operands
    eviction = lw.target.eviction_index(op.attrs)
    helper = f"tlx_bulk_load_hint<{eviction}>" if eviction else "tlx_bulk_load"
    lw.target.use("tlx_bulk_load_hint" if eviction else "tlx_bulk_load")
    # one thread issues the copy, as a TMA load; its bytes complete on the barrier
    lw.out.line(f"if ({lw.scope.tid_var} == 0) {helper}({_bulk_buffer(lw, op, dst)}, {lw.name(ptr)}, "
                f"(unsigned){lw.name(size)}, {lw.name(bar)});")


@lowering("tlx.async_bulk_store", vendor="nvidia")
def async_bulk_store(lw, op):
    ptr, src, size = op.operands
    lw.target.use("tlx_bulk_store")
    lw.target.use("tlx_bulk_commit_group")
    # as a TMA store: every thread's writes of the buffer before thread 0 issues the copy,
    # which joins thread 0's bulk group (async_descriptor_store_wait waits for it)
    lw.out.line(lw.sync())
    lw.out.line(f"if ({lw.scope.tid_var} == 0) {{ tlx_bulk_store({lw.name(ptr)}, {_bulk_buffer(lw, op, src)}, "
                f"(unsigned){lw.name(size)}); tlx_bulk_commit_group(); }}")
    wait_stores_at_exit(lw)


@lowering("tlx.prefetch", vendor="nvidia")
def prefetch(lw, op):
    ptrs = op.operands[0]
    helper = f"tlx_prefetch_global_{op.attrs['level']}"
    lw.target.use(helper)
    guard = f"if ({lw.ref(op.operands[1])}) " if op.attrs.get("has_mask") else ""
    lw.for_registers(ptrs, f"{guard}{helper}({lw.ref(ptrs)});")


@lowering("tlx.prefetch_tensormap", vendor="nvidia")
def prefetch_tensormap(lw, op):
    lw.target.use("tlx_prefetch_tensormap")
    lw.out.line(f"if ({lw.scope.tid_var} == 0) tlx_prefetch_tensormap({tensormap_address(lw, op.operands[0])});")


# -- barriers ------------------------------------------------------------------------------
def _guard(lw, op, first_optional: int) -> str:
    return lw.name(op.operands[first_optional]) if op.attrs.get("has_pred") else ""


@lowering("tlx.barrier_expect_bytes", vendor="nvidia")
def barrier_expect_bytes(lw, op):
    pred = _guard(lw, op, 1)
    cond = f"{lw.scope.tid_var} == 0" + (f" && {pred}" if pred else "")
    lw.out.line(f"if ({cond}) {lw.target.mbarrier_expect_tx(lw.name(op.operands[0]), op.attrs['bytes'])}")


@lowering("tlx.barrier_complete_tx", vendor="nvidia")
def barrier_complete_tx(lw, op):
    # every thread of the task stored (and fenced) its part of the box before one completes the bytes
    lw.out.line(lw.sync())
    lw.out.line(f"if ({lw.scope.tid_var} == 0) "
                f"{lw.target.call('tlx_mbarrier_complete_tx', lw.name(op.operands[0]), str(op.attrs['bytes']) + 'u')}")


WATCHDOG_NS = 2_000_000_000      # TLXC_DEBUG_BARRIERS builds trap a wait stuck for 2 s


def suspend_ns(kernel) -> int | None:
    """The suspend hint of every barrier wait in ``kernel``: the smallest
    ``mbarrier_try_wait_suspend_ns`` given to a ``tlx.async_tasks`` region (TLX's rule for
    several regions), None if none gives one or it is 0 (no hint)."""
    hints = [op.attrs["suspend_ns"] for op in kernel.walk()
             if op.name == "tlx.async_tasks" and op.attrs.get("suspend_ns") is not None]
    return min(hints) if hints and min(hints) > 0 else None


@lowering("tlx.barrier_wait", vendor="nvidia")
def barrier_wait(lw, op):
    pred = _guard(lw, op, 2)
    watchdog = None
    if lw.kernel.attrs.get("debug_barriers"):
        bar = op.operands[0]
        name, index = lw.barrier_names.get(id(bar), (bar.name_hint or "barrier", "0"))
        where = f"{os.path.basename(op.loc.file)}:{op.loc.line}" if op.loc else "?"
        watchdog = (WATCHDOG_NS, where, lw.scope.task_name, name, index)
    stmt = lw.target.mbarrier_wait(lw.name(op.operands[0]), lw.name(op.operands[1]), watchdog,
                                   suspend_ns(lw.kernel))
    lw.out.line(f"if ({pred}) {stmt}" if pred else stmt)
    for line in tcgen05.fence_after_wait(lw):
        lw.out.line(line)


@lowering("tlx.barrier_arrive", vendor="nvidia")
def barrier_arrive(lw, op):
    bar = op.operands[0]
    pred = _guard(lw, op, 1)
    # A warp barrier counts every thread: the 32 threads of a warp (converged: a scalar
    # predicate is uniform) arrive as one arrival of 32 x count by lane 0, so the warp's
    # earlier work (its own async_dot_wait) is all that orders it; no group sync.
    count = op.attrs["count"] * (32 if bar.type.per_thread else 1)
    if bar.type.remote:           # a peer CTA's barrier, by its cluster address (rules_cluster.remote_view)
        stmt = lw.target.mbarrier_arrive_remote(lw.name(bar), count)
    else:
        stmt = lw.target.mbarrier_arrive(lw.name(bar), count)
    for line in tcgen05.fence_before_arrive(lw):
        lw.out.line(line)
    if bar.type.per_thread:
        lw.out.line("__syncwarp();")
        lw.out.line(f"if (lane == 0{f' && {pred}' if pred else ''}) {stmt}")
        return
    # One arrival per warp group: the group's threads sync, then its leader arrives. Arrives
    # back to back (TLX's GEMM releases a stage's A and B barriers one after the other) share
    # one sync: between them the group ran nothing that a sync orders.
    sync = lw.sync()
    if not _still_synced(lw, op, sync):
        lw.out.line(sync)
    cond = f"{lw.scope.tid_var} == 0" + (f" && {pred}" if pred else "")
    lw.out.line(f"if ({cond}) {stmt}")
    lw.last_group_arrive = (lw.out, len(lw.out.lines), sync, op)


# Ops a group sync need not order: scalar arithmetic and barrier/buffer views (addresses).
_PURE_PREFIXES = ("arith.",)
_PURE_OPS = {"tlx.local_view", "tlx.async_task_replica_id"}


def _still_synced(lw, op, sync: str) -> bool:
    """Whether the group's last arrive (same output, same sync) is ``op``'s predecessor up
    to pure ops, and the lines emitted since hold no call, fence or barrier."""
    mark = getattr(lw, "last_group_arrive", None)
    if mark is None or mark[0] is not lw.out or mark[2] != sync or len(lw.out.lines) < mark[1]:
        return False
    if any(("tlx_" in line or "__" in line or "asm" in line or "{" in line or "}" in line)
           and not line.lstrip().startswith("//") for line in lw.out.lines[mark[1]:]):
        return False
    block = op.parent
    if block is None or mark[3].parent is not block:
        return False
    for prev in reversed(block.ops[:next(i for i, o in enumerate(block.ops) if o is op)]):
        if prev is mark[3]:
            return True
        if not (prev.name.startswith(_PURE_PREFIXES) or prev.name in _PURE_OPS):
            return False
    return False


@lowering("tlx.named_barrier_wait", vendor="nvidia")
def named_barrier_wait(lw, op):
    for line in tcgen05.fence_before_arrive(lw):
        lw.out.line(line)
    lw.out.line(lw.target.named_sync(*(lw.name(v) for v in op.operands)))
    for line in tcgen05.fence_after_wait(lw):
        lw.out.line(line)


@lowering("tlx.named_barrier_arrive", vendor="nvidia")
def named_barrier_arrive(lw, op):
    for line in tcgen05.fence_before_arrive(lw):
        lw.out.line(line)
    lw.out.line(lw.target.named_arrive(*(lw.name(v) for v in op.operands)))


@lowering("tlx.fence", vendor="nvidia")
def fence(lw, op):
    lw.out.line(lw.target.fence(op.attrs["scope"]))


@lowering("tlx.thread_id", vendor="nvidia")
def thread_id(lw, op):
    lw.declare(op.results[0], init=f"(int)threadIdx.{'xyz'[op.attrs['axis']]}")


@lowering("tlx.clock64", vendor="nvidia")
def clock64(lw, op):
    lw.declare(op.results[0], init="(long long)clock64()")


@lowering("tlx.async_tasks", vendor="nvidia")
def async_tasks(lw, op):
    raise CompilationError("tlx.async_tasks must be at the top level of the kernel (not inside a loop or "
                           "branch)", op.loc)


# -- warp specialization -------------------------------------------------------------------
_UNIFORM = ("arith.", "math.", "tl.program_id", "tl.num_programs", "tl.addptr", "tlx.local_alloc", "tlx.alloc_barriers",
            # a scalar's divisibility hint (tl.multiple_of / max_contiguous: an alias) and a scalar load
            # (every warp reads the same word: e.g. a problem size from a device array)
            "tl.hint", "tl.load", "tl.descriptor_dim",
            "tlx.cluster_", "tlx.fence_mbarrier_init_cluster", "tlx.remote_view",
            "tlx.local_view", "tlx.local_slice", "tlx.local_trans", "tlx.local_reinterpret", "tlx.thread_id",
            # in-kernel tensor maps: every warp takes part in the encode's CTA barrier (rules_tensormap.py)
            "tlx.make_tensor_descriptor", "tlx.allocate_tensor_descriptor", "tlx.reinterpret_tensor_descriptor")


def _is_uniform(op) -> bool:
    if any(isinstance(r.type, TensorType) for r in op.results):
        return False
    if op.name == "scf.if":         # a scalar if: uniform when both branches are
        return all(_is_uniform(inner) for region in op.regions for inner in region.block.ops)
    if op.name == "scf.yield":
        return True
    return op.name.startswith(_UNIFORM) and not op.regions


def _used_values(op):
    """The values ``op`` reads, including those its regions read from outside."""
    yield from op.operands
    for region in op.regions:
        for inner in region.block.ops:
            yield from _used_values(inner)


def lower_warp_specialized(lw, block, ws_op) -> int:
    """Lower a kernel body containing one top-level ``tlx.async_tasks``;
    returns the total number of threads."""
    ops = block.ops
    index = ops.index(ws_op)
    # The closing cluster barrier (passes.cluster_syncs) is run by every warp, after its task.
    end = len(ops)
    while end > index + 1 and ops[end - 1].name in ("tlx.cluster_barrier", "tl.return"):
        end -= 1
    ops, closing = ops[:end], ops[end:]
    plan = ws_op.task_infos
    if len(plan) > MAX_TASKS:
        raise ResourceError(f"at most {MAX_TASKS} async tasks (replicas included) are supported, "
                            f"got {len(plan)}")
    total_threads = 32 * sum(t.span for t in plan)
    problem = ws_op.budget_problem      # place-tasks' verdict (the check-barriers pass reported it first)
    if problem is not None:
        raise ResourceError(problem[1], ws_op.loc)
    base_regs = launch_registers(total_threads)
    uniform = _uniform_slice(ops[:index], ws_op)
    lw.scope.threads = lw.launch_threads = total_threads
    for op in ops[:index]:
        if id(op) in uniform:
            lw.lower_op(op)
    lw.out.line("__syncthreads();  // barriers initialized; tasks may start")
    for task in plan:
        region = ws_op.regions[task.index]
        first, last = task.start, task.start + task.warps
        padded = task.span > task.warps
        lw.out.open(f"if (warp >= {first} && warp < {first + task.span})")
        lw.out.line(f"// task '{task.code_name}': warps {first}..{last - 1}"
                    + (f" (warps {last}..{first + task.span - 1} pad the warp group)" if padded else ""))
        scope = Scope(f"t{task.index}", task.warps * 32, 1 + task.index, "task_warp", "task_tid", first)
        scope.task_name = task.code_name
        scope.budget = task.budget
        lw.out.line(f"const int task_warp = warp - {first};")
        lw.out.line(f"const int task_tid = tid - {first * 32};")
        if task.budget:
            # its warp group's budget (place-tasks: tasks sharing a warp group run the same value, as
            # Triton's partitions do; the padding warps of the last group run the last task's)
            lw.out.line(lw.target.setmaxnreg(task.budget, task.budget > base_regs))
        if padded:                          # the padding warps only took part in setmaxnreg
            lw.out.open(f"if (task_warp < {task.warps})")
        token = lw.enter_scope(scope)
        if task.index == 0:
            for op in ops[:index]:
                if id(op) not in uniform:
                    lw.lower_op(op)
        lw.lower_block(region.block)
        if task.index == 0:
            for op in ops[index + 1:]:
                lw.lower_op(op)
        lw.exit_scope(token)
        if padded:
            lw.out.close()
        lw.out.close()
    for op in closing:
        lw.lower_op(op)
    lw.metadata_extra.update({"tasks": [{"name": t.label, "warps": t.warps, "registers": t.budget or t.registers}
                                        for t in plan], "base_registers": base_regs})
    return total_threads


def _uniform_slice(pre_ops, ws_op) -> set[int]:
    """Pre-task ops every warp runs: allocations and the scalar computations the
    non-default tasks capture (they must not depend on register tensors)."""
    defined_by = {id(r): op for op in pre_ops for r in op.results}
    wanted: set[int] = set()
    # every thread of the CTA takes part in a cluster barrier (and the fence before it)
    stack = [op for op in pre_ops if has_trait(op, ALLOCATION) or
             op.name in ("tlx.cluster_barrier", "tlx.fence_mbarrier_init_cluster")]
    for region in ws_op.regions[1:]:
        for inner in region.ops:
            for nested in inner.walk():
                for v in nested.operands:
                    if id(v) in defined_by:
                        stack.append(defined_by[id(v)])
    while stack:
        op = stack.pop()
        if id(op) in wanted:
            continue
        if not _is_uniform(op):
            raise CompilationError(f"a non-default async task uses a value computed by {op.name} before "
                                   f"'tlx.async_tasks'; only scalars, pointers, buffers and barriers computed "
                                   f"without register tensors can be shared with tasks", op.loc)
        wanted.add(id(op))
        for v in _used_values(op):
            if id(v) in defined_by:
                stack.append(defined_by[id(v)])
    return wanted


__all__ = ["MemDescType", "elem", "lower_warp_specialized"]
