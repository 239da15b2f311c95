"""Semantic rules of the ``tlx.*`` builtins (orchestration layer).

Buffers and barriers are runtime values (``Tensor`` wrappers of ``memdesc`` /
``mbarrier`` IR values); everything shaped (shapes, counts, byte sizes,
scopes) must be compile-time.  ``with tlx.async_tasks()`` itself is handled by
the IR builder (``build_ir.py``), which calls ``async_tasks_op`` here.
"""
from __future__ import annotations

from math import prod

from ..ir import types as T
from ..ir.ops.warp_pipeline import SCHED_BARRIER
from ..ir.types import BarrierType, MemDescType, PointerType, ScalarType, TensorType
from ..language import tlx
from ..target import DEFAULT_ARCH, has_feature
from . import cache_hints as H
from . import semantic as S
from . import storage_alias
from .builtins import RULES, const_dtype, const_int, const_ints, constexpr, grid_axis, tensor_arg
from .values import SemanticError, Tensor

NAMED_BARRIER_RESERVED = range(7)   # ids tlxc uses itself (TLX reserves 0..6 too)


def rule(name: str):
    def register(fn):
        RULES["tlx." + name] = fn
        return fn
    return register


def _memdesc(value, what: str, view: bool | None = None) -> Tensor:
    if not isinstance(value, Tensor) or not isinstance(value.type, MemDescType):
        raise SemanticError(f"'{what}' must be a shared-memory buffer (from tlx.local_alloc), got "
                            f"{S.describe(value)}", param=what)
    if view and value.type.num:
        raise SemanticError(f"'{what}' is an array of {value.type.num} buffers; pick one first "
                            f"({what}[i] or tlx.local_view({what}, i))", param=what)
    return value


def _barrier(value, what: str = "bar", local: bool = True) -> Tensor:
    if not isinstance(value, Tensor) or not isinstance(value.type, BarrierType):
        raise SemanticError(f"'{what}' must be an mbarrier (from tlx.alloc_barriers), got {S.describe(value)}",
                            param=what)
    if value.type.num:
        raise SemanticError(f"'{what}' is an array of {value.type.num} barriers; pick one first "
                            f"({what}[i] or tlx.local_view({what}, i))", param=what)
    if local and value.type.remote:
        raise SemanticError(f"'{what}' is a remote view (a barrier of another CTA of the cluster); only "
                            f"barrier_arrive can use it: arrive remote, wait local", param=what)
    return value


def _i32(b, value, what: str) -> Tensor:
    if isinstance(value, Tensor):
        if value.is_block or not isinstance(value.dtype, ScalarType) or not value.dtype.is_integer:
            raise SemanticError(f"'{what}' must be an integer scalar, got {S.describe(value)}", param=what)
        return S.cast(b, value, T.i32)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SemanticError(f"'{what}' must be an integer, got {S.describe(value)}", param=what)
    return S.constant(b, value, T.i32)


def _pred(b, pred) -> list:
    if pred is None:
        return []
    if isinstance(pred, bool):
        return [S.constant(b, pred, T.i1).value]
    p = tensor_arg(b, pred, "pred")
    if p.is_block:
        raise SemanticError("'pred' must be a scalar", param="pred")
    return [S.to_bool(b, p).value]


def _mma_operands(b, mBarriers, use_acc, pred, force_async) -> tuple[list, list, list, bool]:
    """A tcgen05 MMA's completion and predicate operands: the barriers it arrives on, the
    use-accumulator flag, the issue predicate, and whether it is synchronous (no barriers and
    not ``force_async``)."""
    if isinstance(mBarriers, Tensor):
        mBarriers = [mBarriers]
    if not isinstance(mBarriers, (list, tuple)):
        raise SemanticError(f"'mBarriers' must be a list of mbarriers, got {S.describe(mBarriers)}",
                            param="mBarriers")
    bars = [_barrier(bar, "mBarriers").value for bar in mBarriers]
    if isinstance(use_acc, Tensor) and use_acc.is_block:
        raise SemanticError(f"'use_acc' must be a scalar boolean, got {S.describe(use_acc)}", param="use_acc")
    flag = _pred(b, True if use_acc is None else use_acc)
    preds = _pred(b, pred)
    return bars, flag, preds, not bars and not constexpr(force_async, "force_async")


# -- tasks ----------------------------------------------------------------------------
@rule("async_task_replica_id")
def _replica_id(ctx):
    """The replica index; 0 in a task that is not replicated (``replicate=1``), as in TLX,
    so a kernel whose replica count is a meta-parameter compiles at every value."""
    if ctx.task is None:
        raise SemanticError("tlx.async_task_replica_id() is only meaningful inside a tlx.async_task")
    return ctx.replica_id if ctx.replica_id is not None else 0


# -- shared memory ---------------------------------------------------------------------
@rule("local_alloc")
def _local_alloc(ctx, shape, dtype, num, storage=tlx.storage_kind.smem, reuse=None, layout=None):
    shape = constexpr(shape, "shape")
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise SemanticError(f"'shape' must be a tuple of positive compile-time integers, got {S.describe(shape)}",
                            param="shape")
    shape = tuple(shape)
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise SemanticError(f"'shape' must be positive compile-time integers, got {list(shape)}", param="shape")
    dtype = const_dtype(dtype, "dtype")
    num = const_int(num, "num")
    if num < 1:
        raise SemanticError(f"'num' must be at least 1, got {num}", param="num")
    if layout is not None and storage is not tlx.storage_kind.smem:
        raise SemanticError(f"an explicit 'layout' is only supported for shared memory (storage=smem), got "
                            f"storage={storage}", param="layout")
    layout = _explicit_layout(layout, shape, dtype) if layout is not None else None
    if storage is tlx.storage_kind.tmem:
        from ..ir.ops.tcgen05 import tmem_problem
        _require_blackwell(ctx, "tensor memory (storage=tlx.storage_kind.tmem)", "storage")
        problem = tmem_problem(shape, dtype)
        if problem:
            raise SemanticError(problem, param="shape")
        t = MemDescType(shape, dtype, num, "tmem")
    elif storage is tlx.storage_kind.smem:
        t = MemDescType(shape, dtype, num, layout=layout)
    else:
        raise SemanticError(f"storage={storage} is not a local_alloc storage (tlx.storage_kind.smem or .tmem; "
                            f"smemCluster names remote views)", param="storage")
    if isinstance(reuse, storage_alias.StorageAliasSpec):
        return storage_alias.alloc_peer(ctx, reuse, t)
    aliased = [] if reuse is None else [_reused_allocation(reuse, t.storage).value]
    if aliased:
        storage_alias.check_tmem_rows(aliased[0].type, t)
    return Tensor(ctx.b.value("tlx.local_alloc", aliased, t))


def _explicit_layout(layout, shape: tuple[int, ...], dtype, param: str = "layout"):
    """Check a ``layout=`` argument against the buffer it lays out (``ir/shared_layout.py``):
    an NVMMA layout or a tiling of one, of the buffer's element type, that tlxc can store; a
    swizzled_shared / CuTe swizzle layout becomes the NVMMA layout with the same bytes."""
    from ..ir import shared_layout as SL
    if isinstance(layout, SL.PaddedSharedLayout):
        if tuple(layout.shape) != tuple(shape):
            raise SemanticError(f"the layout {layout} is built for {list(layout.shape)} but the buffer is "
                                f"{list(shape)}", param=param)
        if dtype.bits < 8:
            raise SemanticError(f"padded shared layouts of {dtype} (sub-byte elements) are not supported",
                                param=param)
        return layout
    if isinstance(layout, SL.SwizzledSharedLayout):
        try:
            return SL.resolve_swizzled(layout, tuple(shape), dtype)
        except SL.SharedLayoutError as exc:
            raise SemanticError(str(exc), param=param) from None
    if not isinstance(layout, (SL.NVMMASharedLayout, SL.TiledSharedLayout)):
        raise SemanticError(f"'{param}' must be a tlx.nv_mma_shared_layout_encoding(...) or its "
                            f".tile_to_shape(...), got {S.describe(layout)}; tlxc supports only NVMMA "
                            f"(swizzled) shared layouts", param=param)
    if layout.element != dtype:
        raise SemanticError(f"the layout is built for {layout.element} (its elemType) but the buffer holds "
                            f"{dtype}", param=param)
    if isinstance(layout, SL.TiledSharedLayout) and tuple(layout.shape) != tuple(shape):
        raise SemanticError(f"the layout tiles {list(layout.shape)} but the buffer is {list(shape)}: "
                            f"tile_to_shape() the buffer's own shape", param=param)
    try:
        SL.storable_as(layout, tuple(shape), dtype)
    except SL.SharedLayoutError as exc:
        raise SemanticError(str(exc), param=param) from None
    return layout


def _reused_allocation(reuse, storage: str = "smem") -> Tensor:
    """The allocation whose bytes ``reuse=`` shares: a whole ``local_alloc``
    result (an alias of an alias resolves to the first one, as in TLX)."""
    owner = getattr(getattr(reuse, "value", None), "owner", None)
    if not isinstance(reuse, Tensor) or not isinstance(reuse.type, MemDescType):
        got = "an mbarrier array" if isinstance(getattr(reuse, "type", None), BarrierType) else S.describe(reuse)
        raise SemanticError(f"'reuse' must be a buffer array from tlx.local_alloc, got {got}", param="reuse")
    if getattr(owner, "name", None) != "tlx.local_alloc":
        raise SemanticError("'reuse' must be a whole allocation (the result of tlx.local_alloc), not a view of "
                            "one: the new buffers share all of its bytes", param="reuse")
    if reuse.type.storage != storage:
        where = {"smem": "shared memory", "tmem": "tensor memory"}
        raise SemanticError(f"'reuse' is a {reuse.type.storage} allocation, but the new buffers are in "
                            f"{where.get(storage, storage)}: both must use the same storage", param="reuse")
    return Tensor(owner.operands[0]) if owner.operands else reuse


def _require_blackwell(ctx, what: str, param: str) -> None:
    arch = ctx.options.arch
    if not has_feature(arch, "tcgen05"):
        hint = " (the interpreter emulates sm_90a unless TLXC_INTERPRET_ARCH=sm_100a)" if arch == DEFAULT_ARCH else ""
        raise SemanticError(f"{what} is only available on Blackwell (sm_100a); compiling for {arch}{hint}",
                            param=param)


@rule("local_view")
def local_view(ctx, buf, idx):
    b = ctx.b
    if not isinstance(buf, Tensor) or not isinstance(buf.type, (MemDescType, BarrierType)):
        raise SemanticError(f"'buf' must be a buffer or barrier array, got {S.describe(buf)}", param="buf")
    if not buf.type.num:
        if isinstance(buf.type, MemDescType):
            return element_view(ctx, buf, idx)
        raise SemanticError("'buf' is already a single barrier", param="buf")
    slot, num = storage_alias.peer_index(ctx, buf, idx)     # storage_alias_spec peers: X[i] -> X[scale*i+offset]
    if isinstance(idx, int) and not isinstance(idx, bool) and not 0 <= idx < num:
        raise SemanticError(f"index {idx} is out of range for an array of {num}", param="idx")
    index = _i32(b, slot, "idx")
    return Tensor(b.value("tlx.local_view", [buf.value, index.value], buf.type.view()))


def element_view(ctx, buf: Tensor, idx) -> Tensor:
    """``buf[i]`` of one buffer (TLX's memdesc_index of a single buffer): element ``i`` of a 1-D
    buffer, as a one-element buffer ([1]); row ``i`` of a higher-rank one (its shape minus the
    first dim).  A view into the same bytes: ``local_load`` / ``local_store`` of it move only those."""
    buf = _memdesc(buf, "buf", view=True)
    if buf.type.storage != "smem":
        raise SemanticError(f"indexing one buffer picks its elements in shared memory; this is a "
                            f"{buf.type.storage} buffer (use tlx.local_slice)", param="buf")
    shape = buf.type.shape
    if isinstance(idx, int) and not isinstance(idx, bool) and not 0 <= idx < shape[0]:
        raise SemanticError(f"index {idx} is out of range for a buffer of {shape[0]} "
                            f"{'elements' if len(shape) == 1 else 'rows'}", param="idx")
    if len(shape) == 1:
        return _local_slice(ctx, buf, [idx], [1])
    if buf.type.perm is not None or buf.type.layout is not None:
        raise SemanticError("a row view (buf[i]) of a transposed buffer or of one with an explicit layout is not "
                            "supported: its row is not contiguous; use tlx.local_slice(buf, [i, 0, ...], "
                            "[1, ...])", param="buf")
    row = _local_slice(ctx, buf, [idx] + [0] * (len(shape) - 1), [1, *shape[1:]])
    return Tensor(ctx.b.value("tlx.local_reinterpret", [row.value], MemDescType(tuple(shape[1:]), buf.type.element,
                                                                                 0, "smem")))


@rule("local_slice")
def _local_slice(ctx, buf, offset, shape):
    b = ctx.b
    buf = _memdesc(buf, "buf", view=True)
    shape = constexpr(shape, "shape")
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in shape):
        raise SemanticError(f"'shape' must hold positive compile-time integers, got "
                            f"({', '.join(S.describe(s) for s in shape)})", param="shape")
    offset = tuple(offset) if isinstance(offset, (tuple, list)) else (offset,)
    if len(offset) != len(buf.type.shape) or len(shape) != len(buf.type.shape):
        raise SemanticError(f"'offset' and 'shape' need {len(buf.type.shape)} entries", param="offset")
    for o, s, full in zip(offset, shape, buf.type.shape):
        if isinstance(o, int) and o + s > full:
            raise SemanticError(f"slice [{o}, {o + s}) exceeds the buffer's extent {full}", param="offset")
    if buf.type.storage == "tmem" and (len(shape) != 2 or not all(isinstance(o, int) for o in offset)
                                        or offset[0] != 0 or shape[0] != buf.type.shape[0]):
        raise SemanticError(f"a tensor-memory buffer is sliced by whole rows at constant column offsets "
                            f"([0, col], [{buf.type.shape[0]}, n]), got offset {list(offset)} and shape "
                            f"{list(shape)}", param="offset")
    offsets = [_i32(b, o, "offset").value for o in offset]
    t = MemDescType(shape, buf.type.element, 0, buf.type.storage, buf.type.perm, buf.type.layout)
    return Tensor(b.value("tlx.local_slice", [buf.value] + offsets, t))


@rule("subslice")
def _subslice(ctx, tmem_buf, offset, size):
    buf = _memdesc(tmem_buf, "tmem_buf", view=True)
    if buf.type.storage != "tmem":
        raise SemanticError(f"subslice is only supported for tensor memory, got a {buf.type.storage} buffer",
                            param="tmem_buf")
    offset, size = const_int(offset, "offset"), const_int(size, "size")
    if offset < 0 or size < 1:
        raise SemanticError(f"'offset' must be >= 0 and 'size' >= 1, got {offset} and {size}", param="offset")
    return _local_slice(ctx, buf, [0, offset], [buf.type.shape[0], size])


@rule("local_trans")
def _local_trans(ctx, buf, dims=(1, 0)):
    buf = _memdesc(buf, "buf", view=True)
    dims = const_ints(dims, "dims")
    rank = len(buf.type.shape)
    if sorted(dims) != list(range(rank)):
        raise SemanticError(f"'dims' must be a permutation of {list(range(rank))}, got {list(dims)}", param="dims")
    old = buf.type.perm or tuple(range(rank))
    t = MemDescType(tuple(buf.type.shape[d] for d in dims), buf.type.element, 0, buf.type.storage,
                    tuple(old[d] for d in dims), buf.type.layout)
    return Tensor(ctx.b.value("tlx.local_trans", [buf.value], t, perm=dims))


@rule("local_reshape")
def _local_reshape(ctx, buf, shape):
    """A view of the same elements in another shape.  Row-major order is the buffer's byte order (the
    swizzle is a function of the byte address: passes/shared_layouts.py), so the view is a
    reinterpretation with the buffer's own dtype; a transposed view, a slice or an explicit layout
    does not hold its elements in that order and is refused (the codegen also refuses column blocks)."""
    buf = _memdesc(buf, "buf", view=True)
    if buf.type.storage != "smem":
        raise SemanticError(f"local_reshape only supports shared memory, got a {buf.type.storage} buffer",
                            param="buf")
    shape = const_ints(shape, "shape", positive=True)
    old = buf.type.shape
    if prod(shape) != prod(old):
        raise SemanticError(f"cannot reshape a buffer of shape {list(old)} ({prod(old)} elements) to {list(shape)} "
                            f"({prod(shape)} elements)", param="shape")
    owner = getattr(buf.value.owner, "name", None)
    if buf.type.perm is not None or buf.type.layout is not None or owner == "tlx.local_slice":
        what = ("a transposed view (local_trans)" if buf.type.perm is not None else
                "a view with an explicit layout" if buf.type.layout is not None else "a slice (local_slice)")
        raise SemanticError(f"local_reshape needs a buffer whose elements are consecutive in row-major order; "
                            f"'buf' is {what}", param="buf")
    t = MemDescType(shape, buf.type.element, 0, "smem")
    return Tensor(ctx.b.value("tlx.local_reinterpret", [buf.value], t))


@rule("local_reinterpret")
def _local_reinterpret(ctx, buf, dtype, shape=None, layout=None, pin=True):
    if isinstance(buf, Tensor) and isinstance(buf.type, MemDescType) and buf.type.num and layout is None:
        return _reinterpret_allocation(ctx, buf, const_dtype(dtype, "dtype"), shape)
    buf = _memdesc(buf, "buf", view=True)
    dtype = const_dtype(dtype, "dtype")
    if not isinstance(pin, bool):
        raise SemanticError(f"'pin' must be a compile-time bool, got {S.describe(pin)}", param="pin")
    if layout is not None:
        return _reinterpret_through(ctx, buf, dtype, shape, layout)
    if shape is None:
        if buf.type.buffer_bytes % dtype.bytes:
            raise SemanticError(f"{buf.type.buffer_bytes} bytes do not hold a whole number of {dtype}", param="dtype")
        shape = buf.type.shape[:-1] + (buf.type.shape[-1] * buf.type.element.bytes // dtype.bytes,)
    t = MemDescType(const_ints(shape, "shape", positive=True), dtype, 0, buf.type.storage)
    if t.buffer_bytes > buf.type.buffer_bytes:
        raise SemanticError(f"the view needs {t.buffer_bytes} bytes but the buffer has {buf.type.buffer_bytes}",
                            param="shape")
    return Tensor(ctx.b.value("tlx.local_reinterpret", [buf.value], t))


def _reinterpret_allocation(ctx, buf: Tensor, dtype, shape) -> Tensor:
    """``local_reinterpret(bufs, dtype, shape)`` of a whole ``local_alloc`` (TLX allows it): one
    buffer over the bytes of all its buffers, which lie back to back (a TMA box that lands in
    several sub-tiles at once, for instance)."""
    owner = getattr(buf.value.owner, "name", None)
    if owner != "tlx.local_alloc" or buf.type.storage != "smem":
        raise SemanticError("'buf' is an array of buffers that is not a shared-memory tlx.local_alloc result; "
                            "pick one buffer first (buf[i])", param="buf")
    total = buf.type.num * buf.type.buffer_bytes
    if shape is None:
        if total % dtype.bytes:
            raise SemanticError(f"{total} bytes do not hold a whole number of {dtype}", param="dtype")
        shape = (total // dtype.bytes,)
    t = MemDescType(const_ints(shape, "shape", positive=True), dtype, 0, "smem")
    if t.buffer_bytes > total:
        raise SemanticError(f"the view needs {t.buffer_bytes} bytes but the {buf.type.num} buffers of the allocation "
                            f"hold {total}", param="shape")
    return Tensor(ctx.b.value("tlx.local_reinterpret", [buf.value], t))


def _reinterpret_through(ctx, buf: Tensor, dtype, shape, layout) -> Tensor:
    """``local_reinterpret(buf, dtype, shape, layout=L)``: the same bytes seen through ``L``.

    tlxc moves no data and stores each buffer in one layout, so the view must put every
    element at the byte the buffer's own layout does: checked here when the buffer's
    layout is explicit, and by ``shared-layouts`` (which then stores it so) when inferred.
    ``pin`` only steers Triton's layout propagation; here the view always constrains."""
    from ..ir import shared_layout as SL
    shape = buf.type.shape if shape is None else const_ints(shape, "shape", positive=True)
    if buf.type.storage != "smem":
        raise SemanticError("local_reinterpret with an explicit 'layout' only supports shared memory",
                            param="layout")
    if tuple(shape) != tuple(buf.type.shape) or dtype != buf.type.element:
        raise SemanticError(f"viewing a {list(buf.type.shape)} {buf.type.element} buffer as {list(shape)} "
                            f"{dtype} through an explicit layout is not supported: keep the shape and dtype "
                            f"(layout= re-describes the same elements)", param="shape")
    owner = getattr(buf.value.owner, "name", None)
    if buf.type.perm is not None or owner not in ("tlx.local_view", "tlx.local_reinterpret", "tlx.local_alloc"):
        raise SemanticError("local_reinterpret with an explicit 'layout' needs a whole buffer (buf[i]), not a "
                            "slice or transposed view of one", param="buf")
    layout = _explicit_layout(layout, tuple(shape), dtype)
    own = buf.type.layout
    if own is not None and not SL.same_bytes(own, layout, tuple(shape), dtype):
        raise SemanticError(f"layout {layout} puts the elements of this {list(shape)} {dtype} buffer at other "
                            f"bytes than its own layout {own}; tlxc reinterprets without moving data, so the "
                            f"two must describe the same bytes", param="layout")
    t = MemDescType(tuple(shape), dtype, 0, "smem", None, layout)
    return Tensor(ctx.b.value("tlx.local_reinterpret", [buf.value], t))


@rule("zeros")
def _zeros(ctx, shape, dtype, layout=None):
    from ..ir.layouts_nvidia import NvMmaLayout
    layout = constexpr(layout, "layout")
    if layout is not None and not isinstance(layout, NvMmaLayout):
        raise SemanticError(f"'layout' must be a register layout (tlx.nv_mma_layout(...)), got "
                            f"{S.describe(layout)}", param="layout")
    zeros = RULES["zeros"](ctx, shape, dtype)
    if layout is None:
        return zeros
    if len(zeros.shape) != 2:
        raise SemanticError(f"an NVMMA layout lays out rank-2 tensors, got shape {list(zeros.shape)}",
                            param="layout")
    # pinned: infer-layouts gives the result this layout (and converts it where a consumer wants another)
    return Tensor(ctx.b.value("tl.convert_layout", [zeros.value], zeros.type, **layout.attrs()))


@rule("dump_layout")
def _dump_layout(ctx, x):
    if not isinstance(x, Tensor) or not isinstance(x.type, (TensorType, MemDescType)):
        raise SemanticError(f"'x' must be a register tensor or a shared buffer, got {S.describe(x)}", param="x")
    ctx.b.create("tlx.dump_layout", [x.value], [])


def _indexed_access(ctx, buf, indices, axis, token, what: str):
    buf = _memdesc(buf, "src" if what == "local_gather" else "dst", view=True)
    if buf.type.storage != "smem":
        raise SemanticError(f"{what} only supports shared memory, got a {buf.type.storage} buffer", param="src")
    if token is not None:
        raise SemanticError(f"'token' (an async-copy dependency) is not supported by tlx.{what}: wait for the copy "
                            f"(async_load_wait_group / barrier_wait) before it", param="token")
    rank = len(buf.type.shape)
    axis = const_int(axis, "axis")
    if not -rank <= axis < rank:
        raise SemanticError(f"'axis' must be in [{-rank}, {rank}) for a rank-{rank} buffer, got {axis}", param="axis")
    axis %= rank
    index = tensor_arg(ctx.b, indices, "indices")
    if not index.is_block or not isinstance(index.dtype, ScalarType) or not index.dtype.is_integer or index.dtype.is_boolean:
        raise SemanticError(f"'indices' must be an integer tensor, got {S.describe(indices)}", param="indices")
    if len(index.shape) != rank or any(n != m for d, (n, m) in enumerate(zip(index.shape, buf.type.shape))
                                       if d != axis):
        raise SemanticError(f"'indices' {list(index.shape)} must have the buffer's rank {rank} and its extents "
                            f"{list(buf.type.shape)} outside axis {axis}", param="indices")
    return buf, index, axis


@rule("local_gather")
def _local_gather(ctx, src, indices, axis, token=None):
    buf, index, axis = _indexed_access(ctx, src, indices, axis, token, "local_gather")
    return Tensor(ctx.b.value("tlx.local_gather", [buf.value, index.value], TensorType(index.shape, buf.type.element),
                              axis=axis))


@rule("local_scatter")
def _local_scatter(ctx, dst, src, indices, axis, token=None):
    buf, index, axis = _indexed_access(ctx, dst, indices, axis, token, "local_scatter")
    value = tensor_arg(ctx.b, src, "src")
    if not value.is_block:
        value = S.broadcast_to(ctx.b, S.cast(ctx.b, value, buf.type.element), index.shape)
    if value.shape != index.shape:
        raise SemanticError(f"'src' has shape {list(value.shape)} but 'indices' has {list(index.shape)}", param="src")
    if value.dtype != buf.type.element:
        raise SemanticError(f"'src' holds {value.dtype} but the buffer holds {buf.type.element}; convert with "
                            f".to({buf.type.element})", param="src")
    ctx.b.create("tlx.local_scatter", [buf.value, value.value, index.value], [], {"axis": axis})


@rule("local_load")
def _local_load(ctx, src, token=None, layout=None, relaxed=False, rematerialize_coordinates=False,
                rematerialize_coordinates_group=None):
    src = _memdesc(src, "src", view=True)
    S.check_shape(src.type.shape, "src's shape")
    return Tensor(ctx.b.value("tlx.local_load", [src.value], TensorType(src.type.shape, src.type.element)))


def stored_value(b, dst: Tensor, src) -> Tensor:
    """``src`` as a store into the buffer ``dst`` takes it: a scalar is splat (converted to the
    buffer's dtype); a tensor must have the buffer's shape and dtype."""
    value = tensor_arg(b, src, "src")
    if not value.is_block:
        value = S.broadcast_to(b, S.cast(b, value, dst.type.element), dst.type.shape)
    if value.shape != dst.type.shape:
        raise SemanticError(f"'src' has shape {list(value.shape)} but the buffer is {list(dst.type.shape)}",
                            param="src")
    if value.dtype != dst.type.element:
        raise SemanticError(f"'src' holds {value.dtype} but the buffer holds {dst.type.element}; convert with "
                            f".to({dst.type.element})", param="src")
    return value


@rule("local_store")
def _local_store(ctx, dst, src):
    b = ctx.b
    dst = _memdesc(dst, "dst", view=True)
    b.create("tlx.local_store", [dst.value, stored_value(b, dst, src).value])


@rule("async_load")
def _async_load(ctx, src, result, mask=None, other=None, cache_modifier="", eviction_policy="", is_volatile=False,
                bulk=False, bulk_size=None, barrier=None):
    b = ctx.b
    dst = _memdesc(result, "result", view=True)
    if H.flag(bulk, "bulk"):
        return _bulk_load(ctx, src, dst, mask, other, cache_modifier, eviction_policy, is_volatile, bulk_size,
                          barrier)
    for name, value in (("bulk_size", bulk_size), ("barrier", barrier)):
        if value is not None:
            raise SemanticError(f"'{name}' belongs to a bulk copy (bulk=True); cp.async copies complete through "
                                f"async_load_commit_group / async_load_wait_group, not a barrier", param=name)
    if other not in (None, 0, 0.0):
        raise SemanticError("cp.async zero-fills masked-off elements; 'other' must be None or 0", param="other")
    if not isinstance(src, Tensor) or not isinstance(src.dtype, PointerType) or not src.is_block:
        raise SemanticError(f"'src' must be a tensor of pointers, got {S.describe(src)}", param="src")
    if src.shape != dst.type.shape:
        raise SemanticError(f"'src' has shape {list(src.shape)} but the buffer is {list(dst.type.shape)}",
                            param="src")
    if src.dtype.pointee != dst.type.element:
        raise SemanticError(f"'src' points to {src.dtype.pointee} but the buffer holds {dst.type.element}",
                            param="src")
    operands = [src.value, dst.value]
    if mask is not None:
        m = S.require_mask(tensor_arg(b, mask, "mask"))
        operands.append(S.broadcast_to(b, m, src.shape).value)
    b.create("tlx.async_load", operands, [],
             {"has_mask": mask is not None, **_cp_async_hints(cache_modifier, eviction_policy, is_volatile)})


def _bulk_load(ctx, src, dst, mask, other, cache_modifier, eviction_policy, is_volatile, bulk_size, barrier):
    """TLX's ``async_load(src, buf, bulk=True, barrier=bar[, bulk_size=n])``: one cp.async.bulk of
    ``n`` contiguous bytes (default: the whole 1-D buffer) from the scalar pointer ``src``, whose
    bytes complete on ``bar`` as a TMA box's do (``barrier_expect_bytes`` counts them)."""
    b = ctx.b
    if barrier is None:
        raise SemanticError("a bulk async_load completes on an mbarrier: pass barrier=", param="barrier")
    bar = _barrier(barrier, "barrier")
    for name, value in (("mask", mask), ("other", other)):
        if value is not None:
            raise SemanticError(f"a bulk async_load copies contiguous bytes and takes no '{name}'; shorten "
                                f"bulk_size instead", param=name)
    ptr = _bulk_pointer(src, "src")
    _flat_buffer(dst, "result")
    size = _bulk_size(b, bulk_size, dst)
    if H.flag(is_volatile, "is_volatile"):
        raise SemanticError("cp.async.bulk has no volatile form", param="is_volatile")
    hints = H.attrs(_tma_cache_modifier(cache_modifier), H.eviction_policy(eviction_policy))
    b.create("tlx.async_bulk_load", [ptr.value, dst.value, bar.value, size.value], [], hints)


def _bulk_pointer(value, what: str) -> Tensor:
    if not isinstance(value, Tensor) or value.is_block or not isinstance(value.dtype, PointerType):
        raise SemanticError(f"'{what}' of a bulk copy must be one pointer (the first byte of a contiguous "
                            f"range), got {S.describe(value)}", param=what)
    return value


def _flat_buffer(buf: Tensor, what: str) -> None:
    if len(buf.type.shape) != 1 or buf.type.perm is not None:
        raise SemanticError(f"a bulk copy moves contiguous bytes: '{what}' must be a 1-D buffer, got "
                            f"{list(buf.type.shape)}", param=what)


def _bulk_size(b, size, buf: Tensor, param: str = "bulk_size") -> Tensor:
    """The byte count of a bulk copy as an i32: a constant (default: the buffer's bytes) is
    checked here against the buffer and cp.async.bulk's 16-byte granule."""
    from ..ir.ops.bulk import BULK_ALIGN
    if isinstance(size, Tensor):
        return _i32(b, size, param)
    capacity = buf.type.buffer_bytes
    nbytes = capacity if size is None else const_int(size, param)
    if not 0 < nbytes <= capacity:
        raise SemanticError(f"'{param}' is {nbytes} bytes but the buffer holds {capacity}", param=param)
    if nbytes % BULK_ALIGN:
        raise SemanticError(f"a bulk copy moves a multiple of {BULK_ALIGN} bytes (cp.async.bulk), got {nbytes}",
                            param=param)
    return S.constant(b, nbytes, T.i32)


def _cp_async_hints(cache_modifier, eviction_policy, is_volatile) -> dict[str, object]:
    """cp.async has two cache operators, .ca and .cg (16-byte copies only: the lowering
    says so where a copy is narrower), and no volatile form."""
    cache = H.load_cache_modifier(cache_modifier, allowed=("", ".ca", ".cg"))
    if H.flag(is_volatile, "is_volatile"):
        raise SemanticError("cp.async has no volatile form; load volatile data with tl.load(..., volatile=True) "
                            "and tlx.local_store", param="is_volatile")
    return H.attrs(cache, H.eviction_policy(eviction_policy))


@rule("async_load_commit_group")
def _commit(ctx, tokens=()):
    ctx.b.create("tlx.async_commit_group")


@rule("async_load_wait_group")
def _wait(ctx, pendings, tokens=()):
    pendings = const_int(pendings, "pendings")
    if pendings < 0:
        raise SemanticError(f"'pendings' must be >= 0, got {pendings}", param="pendings")
    ctx.b.create("tlx.async_wait_group", [], [], {"pendings": pendings})


# -- barriers ------------------------------------------------------------------------------
@rule("alloc_barriers")
def _alloc_barriers(ctx, num_barriers, arrive_count=1):
    num = const_int(num_barriers, "num_barriers")
    count = const_int(arrive_count, "arrive_count")
    if num < 1 or count < 1:
        raise SemanticError(f"num_barriers and arrive_count must be >= 1, got {num} and {count}")
    return Tensor(ctx.b.value("tlx.alloc_barriers", [], BarrierType(num), arrive_count=count))


@rule("alloc_warp_barrier")
def _alloc_warp_barrier(ctx, num_barriers, num_warps=1, num_arrivals=1):
    num = const_int(num_barriers, "num_barriers")
    count = const_int(num_warps, "num_warps") * 32 * const_int(num_arrivals, "num_arrivals")
    return Tensor(ctx.b.value("tlx.alloc_barriers", [], BarrierType(num, per_thread=True), arrive_count=count))


@rule("barrier_expect_bytes")
def _expect_bytes(ctx, bar, size, pred=None):
    bar = _barrier(bar)
    size = const_int(size, "size")
    if not 0 <= size < 2**20:
        shown = size if size.bit_length() < 64 else f"an integer of {size.bit_length()} bits"
        raise SemanticError(f"'size' must be from 0 to {2**20 - 1} (an mbarrier's transaction count has 20 "
                            f"bits), got {shown}", param="size")
    preds = _pred(ctx.b, pred)
    ctx.b.create("tlx.barrier_expect_bytes", [bar.value] + preds, [], {"bytes": size, "has_pred": bool(preds)})


@rule("barrier_wait")
def _barrier_wait(ctx, bar, phase, pred=None):
    bar = _barrier(bar)
    phase_v = _i32(ctx.b, phase, "phase")
    preds = _pred(ctx.b, pred)
    ctx.b.create("tlx.barrier_wait", [bar.value, phase_v.value] + preds, [], {"has_pred": bool(preds)})


@rule("barrier_arrive")
def _barrier_arrive(ctx, bar, arrive_count=1, remote_cta_rank=None, pred=None):
    bar = _barrier(bar, local=False)
    if remote_cta_rank is not None:
        if bar.type.remote:
            raise SemanticError("'bar' is already a remote view; pass remote_cta_rank or use "
                                "tlx.remote_view, not both", param="remote_cta_rank")
        bar = _remote_view(ctx, bar, remote_cta_rank)
    count = const_int(arrive_count, "arrive_count")
    if count < 1:
        raise SemanticError(f"'arrive_count' must be >= 1, got {count}", param="arrive_count")
    preds = _pred(ctx.b, pred)
    ctx.b.create("tlx.barrier_arrive", [bar.value] + preds, [], {"count": count, "has_pred": bool(preds)})


def _named(ctx, name, bar, arrive_count):
    if isinstance(bar, int) and not isinstance(bar, bool):
        if not 0 <= bar <= 15:
            raise SemanticError(f"named barrier ids are 0..15, got {bar}", param="bar")
        if bar in NAMED_BARRIER_RESERVED:
            raise SemanticError(f"named barrier ids 0..6 are reserved for tlxc itself; use 7..15, got {bar}",
                                param="bar")
    if isinstance(arrive_count, int) and not isinstance(arrive_count, bool) and \
            (arrive_count <= 0 or arrive_count % 32):
        raise SemanticError(f"'arrive_count' counts threads and must be a positive multiple of 32, got "
                            f"{arrive_count}", param="arrive_count")
    ctx.b.create(name, [_i32(ctx.b, bar, "bar").value, _i32(ctx.b, arrive_count, "arrive_count").value])


@rule("named_barrier_wait")
def _named_wait(ctx, bar, arrive_count):
    _named(ctx, "tlx.named_barrier_wait", bar, arrive_count)


@rule("named_barrier_arrive")
def _named_arrive(ctx, bar, arrive_count):
    _named(ctx, "tlx.named_barrier_arrive", bar, arrive_count)


@rule("fence")
def _fence(ctx, scope):
    scope = constexpr(scope, "scope")
    if scope not in ("async_shared", "gpu", "sys"):
        raise SemanticError(f"scope must be 'async_shared', 'gpu' or 'sys', got {scope!r}", param="scope")
    ctx.b.create("tlx.fence", [], [], {"scope": scope})


@rule("amd_sched_barrier")
def _amd_sched_barrier(ctx, mask=0):
    mask = const_int(mask, "mask")
    if not 0 <= mask < 1 << 11:
        raise SemanticError(f"mask must be a compile-time integer of bits 0..10, got {mask}", param="mask")
    ctx.b.create(SCHED_BARRIER, [], [], {"mask": mask})


@rule("fence_async_shared")
def _fence_async_shared(ctx):
    ctx.b.create("tlx.fence", [], [], {"scope": "async_shared"})


# -- utilities ---------------------------------------------------------------------------
# -- clusters ------------------------------------------------------------------------------------
def _remote_view(ctx, bar, rank):
    rank_v = _i32(ctx.b, rank, "remote_cta_rank")
    if isinstance(rank, int) and not 0 <= rank < 16:
        raise SemanticError(f"a cluster has at most 16 CTAs; rank {rank} is out of range", param="remote_cta_rank")
    return Tensor(ctx.b.value("tlx.remote_view", [bar.value, rank_v.value], BarrierType(0, bar.type.per_thread,
                                                                                         True)))


@rule("remote_view")
def _remote_view_rule(ctx, buf, remote_cta_rank):
    if not isinstance(buf, Tensor) or not isinstance(buf.type, BarrierType):
        raise SemanticError(f"remote_view only supports mbarriers for now, got {S.describe(buf)}", param="buf")
    return _remote_view(ctx, _barrier(buf, "buf"), remote_cta_rank)


@rule("cluster_cta_rank")
def _cluster_cta_rank(ctx):
    return Tensor(ctx.b.value("tlx.cluster_cta_rank", [], T.i32))


@rule("cluster_size_1d")
def _cluster_size_1d(ctx):
    return Tensor(ctx.b.value("tlx.cluster_size", [], T.i32))


@rule("cluster_barrier")
def _cluster_barrier(ctx):
    ctx.b.create("tlx.cluster_barrier", [], [])


@rule("fence_mbarrier_init_cluster")
def _fence_mbarrier_init_cluster(ctx):
    ctx.b.create("tlx.fence_mbarrier_init_cluster", [], [])


@rule("thread_id")
def _thread_id(ctx, axis):
    return Tensor(ctx.b.value("tlx.thread_id", [], T.i32, axis=grid_axis(axis)))


@rule("clock64")
def _clock64(ctx):
    return Tensor(ctx.b.value("tlx.clock64", [], T.i64))


@rule("size_of")
def _size_of(ctx, dtype):
    """TLX's ``size_of``: bytes per element of a dtype, ``bits // 8`` (so ``tl.int1`` is 0, as
    in TLX); a buffer or descriptor is not a dtype: take its ``dtype_of`` first."""
    if isinstance(dtype, Tensor):
        raise SemanticError(f"'dtype' must be a dtype, got {S.describe(dtype)}; for the element size of a "
                            f"tensor, buffer or descriptor write tlx.size_of(tlx.dtype_of(x))", param="dtype")
    return const_dtype(dtype, "dtype").bits // 8


@rule("dtype_of")
def _dtype_of(ctx, value):
    """The element dtype of a tensor (a pointer's pointee), a buffer or a tensor descriptor."""
    from ..ir.types import TensorDescType
    from .tensor_desc import is_device_descriptor
    if is_device_descriptor(value):         # built in the kernel (tl.make_tensor_descriptor)
        return value.element
    if isinstance(value, Tensor):
        t = value.type
        if isinstance(t, (MemDescType, TensorDescType)):
            return t.element
        elem = value.dtype
        if isinstance(elem, PointerType):
            return elem.pointee
        if isinstance(elem, ScalarType):
            return elem
    raise SemanticError(f"'value' must be a tensor, pointer, buffer or tensor descriptor, got "
                        f"{S.describe(value)}", param="value")


# -- TMA --------------------------------------------------------------------------------------
def descriptor_arg(value) -> Tensor:
    from ..ir.types import TensorDescType
    if not isinstance(value, Tensor) or not isinstance(value.type, TensorDescType):
        raise SemanticError(f"'desc' must be a tensor descriptor (a tlxc.TensorDescriptor argument), got "
                            f"{S.describe(value)}", param="desc")
    return value


def box_offsets(desc, offsets) -> tuple:
    """``offsets`` as one entry per dimension of the descriptor, each an integer or an integer
    scalar (checked here, converted to i32 where an op is emitted)."""
    offsets = tuple(offsets) if isinstance(offsets, (tuple, list)) else (offsets,)
    rank = len(desc.type.block_shape)
    if len(offsets) != rank:
        raise SemanticError(f"'offsets' needs {rank} entries (one per dimension of the descriptor), got "
                            f"{len(offsets)}", param="offsets")
    for o in offsets:
        scalar_int = isinstance(o, Tensor) and not o.is_block and isinstance(o.dtype, ScalarType) and o.dtype.is_integer
        if not scalar_int and (isinstance(o, bool) or not isinstance(o, int)):
            raise SemanticError(f"'offsets' must be integers or integer scalars, got {S.describe(o)}",
                                param="offsets")
    return offsets


def _box_offsets(b, desc, offsets) -> list:
    return [_i32(b, o, "offsets").value for o in box_offsets(desc, offsets)]


def _box_buffer(desc, buf, what: str) -> Tensor:
    """The buffer a TMA box lands in (or comes from): the box's shape, or the box's shape
    without leading 1s (a [1, 64, 64] box of a 3-D descriptor fills a [64, 64] buffer)."""
    buf = _memdesc(buf, what, view=True)
    box, squeezed = tuple(desc.type.block_shape), desc.type.squeezed_box
    if not desc.type.fits_buffer(buf.type.shape, buf.type.element):
        also = f" (or {list(squeezed)})" if squeezed != box else ""
        raise SemanticError(f"'{what}' is a {list(buf.type.shape)} x {buf.type.element} buffer but the descriptor "
                            f"moves boxes of {list(box)}{also} x {desc.type.element}", param=what)
    if buf.type.perm is not None:
        raise SemanticError(f"'{what}' must not be a transposed view", param=what)
    return buf


@rule("async_descriptor_load")
def _async_descriptor_load(ctx, desc, result, offsets, barrier, pred=None, cache_modifier="", eviction_policy="",
                           multicast_targets=(), two_ctas=False):
    b = ctx.b
    from .tensor_desc import is_device_descriptor
    if is_device_descriptor(desc) and desc.tma is None:
        return _device_descriptor_load(ctx, desc, result, offsets, barrier, pred, cache_modifier, eviction_policy,
                                       multicast_targets, two_ctas)
    desc = descriptor_arg(desc.tma if is_device_descriptor(desc) else desc)
    dst = _box_buffer(desc, result, "result")
    bar = _barrier(barrier, "barrier")
    if two_ctas:
        raise SemanticError("2-CTA TMA loads pair CTAs for Blackwell's 2-CTA MMA, which is not supported yet",
                            param="two_ctas")
    offs = _box_offsets(b, desc, offsets)
    mask = [_cta_mask(b, multicast_targets)] if multicast_targets else []
    preds = _pred(b, pred)
    hints = H.attrs(_tma_cache_modifier(cache_modifier), H.eviction_policy(eviction_policy))
    b.create("tlx.async_descriptor_load", [desc.value, dst.value, bar.value] + offs + mask + preds, [],
             {"has_pred": bool(preds), "multicast": bool(mask), **hints})


def _device_descriptor_load(ctx, desc, result, offsets, barrier, pred, cache_modifier, eviction_policy,
                            multicast_targets, two_ctas):
    """``async_descriptor_load`` from an in-kernel descriptor (``tl.make_tensor_descriptor``)
    without a tensor map (``desc.no_tma`` says why: tensor_desc.py), so the task loads the box itself
    (zero outside the tensor, as TMA fills it), stores it into ``result``, fences it for the
    async proxy (a tcgen05/wgmma read) and completes the box's bytes on ``barrier``
    (``mbarrier.complete_tx``), where the caller's ``barrier_expect_bytes`` posted them.  The
    copy is synchronous in the issuing task: correct, not asynchronous."""
    from .tensor_desc import load as device_load
    for name, value, default in (("pred", pred, None), ("multicast_targets", multicast_targets, ()),
                                 ("two_ctas", two_ctas, False), ("eviction_policy", eviction_policy, "")):
        if (tuple(value) if isinstance(value, list) else value) != default:
            raise SemanticError(f"'{name}' is not supported on an in-kernel descriptor without a tensor map "
                                f"({desc.no_tma}; the box is loaded by the task itself)", param=name)
    _tma_cache_modifier(cache_modifier)
    dst = _memdesc(result, "result", view=True)
    box = tuple(desc.block_shape)
    squeezed = tuple(d for i, d in enumerate(box) if d != 1 or i == len(box) - 1)
    if tuple(dst.type.shape) not in (box, squeezed) or dst.type.element != desc.element:
        raise SemanticError(f"'result' is a {list(dst.type.shape)} x {dst.type.element} buffer but the descriptor "
                            f"moves boxes of {list(box)} x {desc.element}", param="result")
    bar = _barrier(barrier, "barrier")
    value = device_load(ctx, desc, offsets)
    if tuple(value.shape) != tuple(dst.type.shape):
        value = RULES["reshape"](ctx, value, list(dst.type.shape))
    _local_store(ctx, dst, value)
    _fence_async_shared(ctx)
    ctx.b.create("tlx.barrier_complete_tx", [bar.value], [], {"bytes": dst.type.buffer_bytes})


def _tma_cache_modifier(value) -> str:
    """TLX checks a TMA load's cache_modifier as tl.load's; a TMA copy has no cache operator
    (it moves the box from global memory through L2 into shared memory, never through L1),
    so only .cg, which says just that, can be honoured."""
    cache = H.load_cache_modifier(value)
    if cache in (".ca", ".cv"):
        raise SemanticError(f"a TMA load cannot honour cache_modifier={cache!r}: the copy goes through L2 into "
                            f"shared memory and never through L1 (PTX's cp.async.bulk.tensor has no cache "
                            f"operator); use '' or '.cg'", param="cache_modifier")
    return ""            # ".cg" is what every TMA load does


def _cta_mask(b, targets):
    """The 16-bit CTA mask of a multicast: bit r set for each rank r of ``targets``."""
    if isinstance(targets, Tensor) or not isinstance(targets, (list, tuple)):
        raise SemanticError(f"'multicast_targets' must be a list of CTA ranks, got {S.describe(targets)}",
                            param="multicast_targets")
    mask = None
    for rank in targets:
        if isinstance(rank, int) and not isinstance(rank, bool) and not 0 <= rank < 16:
            raise SemanticError(f"a cluster has at most 16 CTAs; multicast target rank {rank} is out of range",
                                param="multicast_targets")
        bit = S.binary(b, "shl", S.constant(b, 1, T.i32), _i32(b, rank, "multicast_targets"))
        mask = bit if mask is None else S.binary(b, "or", mask, bit)
    return mask.value


@rule("async_descriptor_store")
def _async_descriptor_store(ctx, desc, source, offsets, eviction_policy="", store_reduce=""):
    b = ctx.b
    from .tensor_desc import is_device_descriptor
    from .tensor_desc import store as device_store
    if is_device_descriptor(desc) and desc.tma is not None:
        desc = desc.tma                 # its tensor map: the TMA store below
    if is_device_descriptor(desc):
        # no tensor map (desc.no_tma, tensor_desc.py): the task reads the buffer and stores the box
        # itself, synchronously (elements outside the tensor are not written, as TMA clips them)
        for name, value in (("eviction_policy", eviction_policy), ("store_reduce", store_reduce)):
            if value:
                raise SemanticError(f"'{name}' is not supported on an in-kernel descriptor without a tensor map "
                                    f"({desc.no_tma})", param=name)
        src = _memdesc(source, "source", view=True)
        if src.type.element != desc.element or tuple(d for d in src.type.shape) != tuple(
                d for i, d in enumerate(desc.block_shape) if d != 1 or len(src.type.shape) == len(desc.block_shape)):
            raise SemanticError(f"'source' is a {list(src.type.shape)} x {src.type.element} buffer but the "
                                f"descriptor moves boxes of {list(desc.block_shape)} x {desc.element}", param="source")
        value = _local_load(ctx, src)
        if tuple(value.shape) != tuple(desc.block_shape):
            value = RULES["reshape"](ctx, value, list(desc.block_shape))
        device_store(ctx, desc, offsets, value)
        return
    desc = descriptor_arg(desc)
    src = _box_buffer(desc, source, "source")
    kind = _store_reduce(desc, store_reduce)
    hints = H.attrs(eviction=H.eviction_policy(eviction_policy))
    b.create("tlx.async_descriptor_store", [desc.value, src.value] + _box_offsets(b, desc, offsets), [],
             {"reduce": kind, **hints} if kind else hints)


def _store_reduce(desc, store_reduce) -> str:
    """``store_reduce`` checked against the descriptor's element type: "" (a plain store) or the
    reduction a TMA reduce-store applies (TLX's add/min/max/and/or/xor, and PTX's inc/dec)."""
    from ..ir.ops.shared import tma_reduce_error
    kind = constexpr(store_reduce, "store_reduce")
    if kind is None or kind == "":
        return ""
    if not isinstance(kind, str):
        raise SemanticError(f"'store_reduce' must be a string such as \"add\", got {S.describe(kind)}",
                            param="store_reduce")
    why = tma_reduce_error(kind, desc.type.element)
    if why:
        raise SemanticError(why, param="store_reduce")
    return kind


@rule("async_descriptor_prefetch_tensor")
def _async_descriptor_prefetch_tensor(ctx, desc, offsets, pred=None, eviction_policy=""):
    b = ctx.b
    from .tensor_desc import is_device_descriptor
    if is_device_descriptor(desc):
        if desc.tma is None:      # no tensor map to prefetch through (a hint: nothing to do)
            H.eviction_policy(eviction_policy)
            _pred(b, pred)
            return
        desc = desc.tma
    desc = descriptor_arg(desc)
    hints = H.attrs(eviction=H.eviction_policy(eviction_policy))
    offs = _box_offsets(b, desc, offsets)
    preds = _pred(b, pred)
    b.create("tlx.async_descriptor_prefetch_tensor", [desc.value] + offs + preds, [],
             {"has_pred": bool(preds), **hints})


@rule("async_descriptor_store_wait")
def _async_descriptor_store_wait(ctx, pendings):
    pendings = const_int(pendings, "pendings")
    if pendings < 0:
        raise SemanticError(f"'pendings' must be >= 0, got {pendings}", param="pendings")
    ctx.b.create("tlx.async_descriptor_store_wait", [], [], {"pendings": pendings})


# -- bulk copies and prefetch hints --------------------------------------------------------------
@rule("async_store")
def _async_store(ctx, dst_global_ptr, src_smem, size):
    """TLX's ``async_store``: one cp.async.bulk of ``size`` bytes of a 1-D buffer to global
    memory, in the issuing thread's bulk group (``async_descriptor_store_wait`` waits for it)."""
    b = ctx.b
    ptr = _bulk_pointer(dst_global_ptr, "dst_global_ptr")
    src = _memdesc(src_smem, "src_smem", view=True)
    _flat_buffer(src, "src_smem")
    nbytes = _bulk_size(b, size, src, "size")
    b.create("tlx.async_bulk_store", [ptr.value, src.value, nbytes.value])


@rule("prefetch")
def _prefetch(ctx, pointer, level="L2", mask=None, tensormap=False):
    """TLX's ``prefetch``: ``prefetch.global.L1|L2`` of every (unmasked) address of ``pointer``,
    or with ``tensormap=True`` ``prefetch.tensormap`` of the descriptor ``pointer``."""
    b = ctx.b
    if H.flag(tensormap, "tensormap"):
        if mask is not None:
            raise SemanticError("a tensormap prefetch takes no 'mask' (it prefetches the descriptor itself)",
                                param="mask")
        from .tensor_desc import is_device_descriptor
        if is_device_descriptor(pointer):
            if pointer.tma is None:
                return   # built in the kernel without a tensor map (frontend/tensor_desc.py): nothing to warm up
            pointer = pointer.tma
        desc = descriptor_arg(pointer)
        b.create("tlx.prefetch_tensormap", [desc.value])
        return
    from ..ir.ops.bulk import PREFETCH_LEVELS
    level = constexpr(level, "level")
    if level not in PREFETCH_LEVELS:
        raise SemanticError(f"'level' must be 'L1' or 'L2', got {level!r}", param="level")
    if not isinstance(pointer, Tensor) or not isinstance(pointer.dtype, PointerType):
        raise SemanticError(f"'pointer' must be a pointer or a tensor of pointers (or a tensor descriptor with "
                            f"tensormap=True), got {S.describe(pointer)}", param="pointer")
    operands = [pointer.value]
    if mask is not None:
        m = S.require_mask(tensor_arg(b, mask, "mask"))
        if m.is_block and not pointer.is_block:
            raise SemanticError("'mask' is a tensor but 'pointer' is one pointer", param="mask")
        operands.append((S.broadcast_to(b, m, pointer.shape) if pointer.is_block else m).value)
    b.create("tlx.prefetch", operands, [], {"level": level, "has_mask": mask is not None})


FP8_FORMAT_NAMES = {"f8e5m2": "e5m2", "f8e4m3": "e4m3"}


@rule("get_fp8_format_name")
def _get_fp8_format_name(ctx, dtype):
    """TLX's format string of an fp8 dtype (``"e5m2"`` / ``"e4m3"``), compile-time."""
    dtype = const_dtype(dtype, "dtype")
    if dtype.name not in FP8_FORMAT_NAMES:
        raise SemanticError(f"get_fp8_format_name only supports tl.float8e5 (e5m2) and tl.float8e4nv (e4m3), "
                            f"but got {S.describe(dtype)}", param="dtype")
    return FP8_FORMAT_NAMES[dtype.name]


# -- asynchronous MMA (Hopper wgmma) -----------------------------------------------------------
def _mma_operand(b, value, what: str, registers_allowed: bool) -> Tensor:
    if isinstance(value, Tensor) and isinstance(value.type, MemDescType):
        return _memdesc(value, what, view=True)
    if registers_allowed and isinstance(value, Tensor) and value.is_block:
        return value
    where = "a shared buffer (tlx.local_alloc) or a register tensor" if registers_allowed else \
        "a shared buffer (tlx.local_alloc); wgmma reads B from shared memory only"
    raise SemanticError(f"'{what}' must be {where}, got {S.describe(value)}", param=what)


def _operand_info(t) -> tuple[tuple[int, ...], ScalarType]:
    """(shape, element) of a buffer view or a register tensor."""
    return tuple(t.shape), t.element


def _mma_problem(a_type, b_type, unit: str, input_types, shape_problem, pair: bool = False) -> tuple:
    """(M, N, element) of A [M, K] @ B [K, N] for ``unit`` (wgmma, tcgen05), after
    checking the ranks, the inner dimension, the element type and the shape rules
    (``pair``: a 2-CTA tcgen05 MMA, B is this CTA's half of the pair's N columns)."""
    a_shape, a_elem = _operand_info(a_type)
    b_shape, b_elem = _operand_info(b_type)
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise SemanticError(f"A and B must be 2-D, got shapes {list(a_shape)} and {list(b_shape)}")
    (m, k), (k2, n) = a_shape, b_shape
    if k != k2:
        raise SemanticError(f"inner dimensions differ: A is {m}x{k} but B is {k2}x{n} (K = {k} vs {k2})",
                            param="B")
    mixed_fp8 = unit == "wgmma" and a_elem.is_float8 and b_elem.is_float8      # (wgmma's .atype / .btype)
    if a_elem != b_elem and not mixed_fp8:
        raise SemanticError(f"A and B must have one element type, got {a_elem} and {b_elem}"
                            + (" (wgmma mixes e4m3 and e5m2 only)" if unit == "wgmma" else ""), param="B")
    if a_elem.name not in input_types:
        raise SemanticError(f"{unit} inputs must be float16, bfloat16, float8e4nv, float8e5 or float32 (tf32), got "
                            f"{a_elem}", param="A")
    problem = shape_problem(m, 2 * n, k, a_elem, pair=True) if pair else shape_problem(m, n, k, a_elem)
    if problem:
        raise SemanticError(f"not a {unit} shape: {problem}")
    return m, n, a_elem


def _mma_precision(element, input_precision, unit: str) -> str:
    """``tf32`` for float32 inputs (the tensor cores have no IEEE float32), else ``ieee``."""
    precision = constexpr(input_precision, "input_precision")
    if element == T.f32:
        if precision not in (None, "tf32"):
            raise SemanticError(f"{unit} multiplies float32 inputs as tf32; 'input_precision' must be 'tf32' (or "
                                f"None), got {precision!r}; use tl.dot for IEEE float32", param="input_precision")
        return "tf32"
    if precision not in (None, "ieee", "tf32"):
        raise SemanticError(f"'input_precision' must be 'ieee', 'tf32' or None, got {precision!r}",
                            param="input_precision")
    return "ieee"


@rule("async_dot")
def _async_dot(ctx, A, B, acc=None, use_acc=None, pred=None, mBarriers=(), two_ctas=False, force_async=False,
               input_precision=None, out_dtype=T.f32, a_k_order=None):
    from ..ir.ops.mma_async import INPUT_TYPES, shape_problem
    b = ctx.b
    if isinstance(acc, Tensor) and isinstance(acc.type, MemDescType) and acc.type.storage == "tmem":
        return _tcgen05_mma(ctx, A, B, acc, use_acc, pred, mBarriers, two_ctas, force_async, input_precision,
                            out_dtype)
    if has_feature(ctx.options.arch, "tcgen05"):
        raise SemanticError(f"on Blackwell (sm_100a) async_dot accumulates in tensor memory: 'acc' must be a "
                            f"tensor-memory buffer (tlx.local_alloc((128, N), tl.float32, num, "
                            f"storage=tlx.storage_kind.tmem)), got {S.describe(acc)}", param="acc")
    for name, value in (("mBarriers", mBarriers), ("two_ctas", two_ctas), ("force_async", force_async)):
        if value:
            raise SemanticError(f"'{name}' (tcgen05 MMA completion barriers / 2-CTA MMA) is not supported on "
                                f"Hopper yet; Hopper's async_dot completes through tlx.async_dot_wait", param=name)
    if pred is not None:
        raise SemanticError("'pred' is not supported by async_dot on Hopper yet", param="pred")
    a = _mma_operand(b, A, "A", registers_allowed=True)
    bm = _mma_operand(b, B, "B", registers_allowed=False)
    m, n, a_elem = _mma_problem(a.type, bm.type, "wgmma", INPUT_TYPES, shape_problem)
    precision = _mma_precision(a_elem, input_precision, "wgmma")
    out = const_dtype(out_dtype, "out_dtype")
    if out != T.f32 and not (out == T.f16 and a_elem == T.f16):
        raise SemanticError(f"'out_dtype' must be float32 (or float16 for float16 inputs), got {out}",
                            param="out_dtype")
    if acc is None:
        acc_t = S.constant(b, 0, TensorType((m, n), out))
    else:
        acc_t = tensor_arg(b, acc, "acc")
        if acc_t.shape != (m, n):
            raise SemanticError(f"'acc' has shape {list(acc_t.shape)}, expected {[m, n]} (M x N)", param="acc")
        if acc_t.dtype != out:
            raise SemanticError(f"'acc' holds {acc_t.dtype} but out_dtype is {out}", param="acc")
    operands = [a.value, bm.value, acc_t.value]
    if use_acc is not None:
        if isinstance(use_acc, bool):
            flag = S.constant(b, use_acc, T.i1)
        else:
            flag = tensor_arg(b, use_acc, "use_acc")
            if flag.is_block:
                raise SemanticError(f"'use_acc' must be a scalar boolean, got {S.describe(flag)}", param="use_acc")
            flag = S.to_bool(b, flag)
        operands.append(flag.value)
    order = constexpr(a_k_order, "a_k_order")
    extra = {}
    if order is not None:
        if order != "accumulator" or isinstance(a.type, MemDescType) or not a_elem.is_float8:
            raise SemanticError(f"'a_k_order' takes \"accumulator\" with an fp8 A in registers (its k32 fragments "
                                f"read in the accumulator's in-thread order), got {order!r} with A {a.type}",
                                param="a_k_order")
        if not has_feature(ctx.options.arch, "wgmma"):
            raise SemanticError(f"'a_k_order' is wgmma's (Hopper, sm_90a), not {ctx.options.arch}'s",
                                param="a_k_order")
        extra["a_k_order"] = order
    return Tensor(b.value("tlx.async_dot", operands, acc_t.type, has_use_acc=use_acc is not None,
                          input_precision=precision, **extra))


def _cta_group(ctx, two_ctas, what: str) -> bool:
    """``two_ctas`` as a bool, after checking the launch (clusters of an even number of CTAs)
    and that every tcgen05 MMA and commit of the kernel names the same ``.cta_group`` (PTX
    requires one per kernel; TLX: "all dot ops 2cta together or 1cta together")."""
    pair = constexpr(two_ctas, "two_ctas")
    if not isinstance(pair, bool):
        raise SemanticError(f"'two_ctas' must be a compile-time bool, got {S.describe(pair)}", param="two_ctas")
    if pair:
        dims = ctx.options.cluster
        size = 1 if dims is None else dims[0] * dims[1] * dims[2]
        if size < 2 or size % 2:
            raise SemanticError(f"{what} with two_ctas=True runs on a CTA pair (cta_group::2): launch clusters of "
                                f"an even number of CTAs (ctas_per_cga=(2, 1, 1)); this launch has "
                                f"{'no clusters' if dims is None else f'clusters of {size} CTA(s)'}",
                                param="two_ctas")
    group = 2 if pair else 1
    first = ctx.cta_group.setdefault("group", group)
    if first != group:
        raise SemanticError(f"{what} with two_ctas={pair} in a kernel whose earlier tcgen05 op "
                            f"({ctx.cta_group.get('what')}) used two_ctas={first == 2}: every tcgen05 MMA and commit "
                            f"of a kernel runs on one CTA or on the CTA pair (PTX allows one .cta_group per kernel)",
                            param="two_ctas")
    ctx.cta_group.setdefault("what", what)
    return pair


def _tcgen05_mma(ctx, A, B, acc, use_acc, pred, mBarriers, two_ctas, force_async, input_precision, out_dtype):
    """Blackwell's async_dot: ``acc`` (tensor memory) += A @ B, completion through ``mBarriers``.
    With ``two_ctas`` the MMA is the CTA pair's (``cta_group::2``): each CTA holds its own A
    rows, half of B's columns and its accumulator rows; the even CTA issues for both and the
    completion arrives on the barrier at the same place in both CTAs."""
    from ..ir.ops.tcgen05 import INPUT_TYPES, shape_problem
    b = ctx.b
    _require_blackwell(ctx, "tcgen05 async_dot (an accumulator in tensor memory)", "acc")
    pair = _cta_group(ctx, two_ctas, "tlx.async_dot")
    acc = _memdesc(acc, "acc", view=True)
    if isinstance(A, Tensor) and not isinstance(A.type, MemDescType):
        raise SemanticError(f"register operand is not supported on Blackwell: 'A' must be a shared buffer, got "
                            f"{S.describe(A)}", param="A")
    a = _memdesc(A, "A", view=True)
    bm = _memdesc(B, "B", view=True)
    if bm.type.storage != "smem":
        raise SemanticError(f"'B' must be a shared-memory buffer (tcgen05 reads B through a shared-memory "
                            f"descriptor), got a {bm.type.storage} buffer", param="B")
    if a.type.storage not in ("smem", "tmem"):
        raise SemanticError(f"'A' must be a shared- or tensor-memory buffer, got a {a.type.storage} buffer",
                            param="A")
    if a.type.storage == "tmem":
        # tcgen05.mma [d], [a_tmem], b_desc: A's rows are the lanes, K packed along the columns
        if a.type.perm:
            raise SemanticError("a tensor-memory A operand is read K-major (its rows are the lanes): it cannot "
                                "be a local_trans view", param="A")
        if pair:
            raise SemanticError("a tensor-memory A operand with two_ctas=True is not supported yet: pass A in "
                                "shared memory for the CTA pair's MMA", param="A")
    m, n, element = _mma_problem(a.type, bm.type, "tcgen05", INPUT_TYPES, shape_problem, pair)
    if pair:
        n *= 2                  # each CTA holds half of B's columns; the accumulator has all of them
    if tuple(acc.type.shape) != (m, n):
        half = " (two_ctas: B is this CTA's half, N/2 columns, of the pair's B)" if pair else ""
        raise SemanticError(f"'acc' is {list(acc.type.shape)}, expected {[m, n]} (M x N){half}", param="acc")
    if acc.type.element != T.f32 or const_dtype(out_dtype, "out_dtype") != T.f32:
        raise SemanticError(f"tcgen05 accumulates in float32: 'acc' holds {acc.type.element}", param="acc")
    precision = _mma_precision(element, input_precision, "tcgen05")
    bars, flag, preds, sync = _mma_operands(b, mBarriers, use_acc, pred, force_async)
    if pair and sync:
        raise SemanticError("a 2-CTA async_dot (two_ctas=True) completes through mBarriers: the even CTA issues "
                            "it for the pair, so the odd CTA can only learn of its completion from a barrier; "
                            "pass mBarriers=[...] (or force_async=True and a tlx.tcgen05_commit(..., "
                            "two_ctas=True))", param="mBarriers")
    attrs = {"has_pred": bool(preds), "num_barriers": len(bars), "sync": sync, "input_precision": precision}
    if pair:
        attrs["two_ctas"] = True
    b.create("tlx.tcgen05_mma", [a.value, bm.value, acc.value] + flag + preds + bars, [], attrs)


@rule("async_dot_scaled")
def _async_dot_scaled(ctx, A, B, acc, A_scale, A_format, B_scale, B_format, use_acc=None, pred=None,
                      mBarriers=(), two_ctas=False, force_async=False, out_dtype=T.f32):
    """Blackwell's block-scaled async_dot (mxfp8: ``kind::mxf8f6f4.block_scale``): ``acc`` +=
    (A * 2^(A_scale - 127)) @ (B * 2^(B_scale - 127)), one ue8m0 scale per 32 K elements of a
    row of A / a column of B, the scales in shared memory in the cuBLAS layout TLX loads
    (``ir/ops/tcgen05.py: scale_shape``)."""
    from ..ir.ops.tcgen05 import FORMATS, scale_shape, shape_problem
    b = ctx.b
    _require_blackwell(ctx, "async_dot_scaled (a block-scaled tcgen05 MMA)", "acc")
    if constexpr(two_ctas, "two_ctas"):
        raise SemanticError("async_dot_scaled with two_ctas=True is not supported yet", param="two_ctas")
    acc = _memdesc(acc, "acc", view=True)
    if acc.type.storage != "tmem" or acc.type.element != T.f32 or const_dtype(out_dtype, "out_dtype") != T.f32:
        raise SemanticError(f"'acc' must be a float32 tensor-memory buffer, got {S.describe(acc)}", param="acc")
    a = _memdesc(A, "A", view=True)
    bm = _memdesc(B, "B", view=True)
    for what, buf in (("A", a), ("B", bm)):
        if buf.type.storage != "smem":
            raise SemanticError(f"'{what}' of async_dot_scaled must be a shared-memory buffer (a tensor-memory A "
                                f"is not supported yet), got a {buf.type.storage} buffer", param=what)
    formats = []
    for what, fmt, buf in (("A_format", A_format, a), ("B_format", B_format, bm)):
        fmt = constexpr(fmt, what)
        if fmt == "e2m1":
            raise SemanticError(f"{what}='e2m1' (packed fp4, kind::mxf4) is not supported yet; 'e4m3' and 'e5m2' "
                                f"are", param=what)
        if fmt not in ("e4m3", "e5m2"):
            raise SemanticError(f"{what} must be 'e4m3' or 'e5m2' (or TLX's 'e2m1'), got {fmt!r}", param=what)
        if FORMATS.get(buf.type.element.name) != fmt:
            raise SemanticError(f"{what}={fmt!r} but the buffer holds {buf.type.element}: an '{fmt}' operand is a "
                                f"{'float8e4nv' if fmt == 'e4m3' else 'float8e5'} buffer", param=what)
        formats.append(fmt)
    (m, k), (k2, n) = a.type.shape, bm.type.shape
    if k != k2:
        raise SemanticError(f"inner dimensions differ: A is {m}x{k} but B is {k2}x{n}", param="B")
    if m != 128:
        raise SemanticError(f"M must be 128 for the scaled MMA, got {m}", param="A")
    problem = shape_problem(m, n, k, a.type.element)
    if problem:
        raise SemanticError(f"not a tcgen05 shape: {problem}")
    if k % 128:
        raise SemanticError(f"K must be a multiple of 128 for async_dot_scaled (its scales come in chunks of 4 "
                            f"blocks of 32), got K={k}", param="A")
    if tuple(acc.type.shape) != (m, n):
        raise SemanticError(f"'acc' is {list(acc.type.shape)}, expected {[m, n]} (M x N)", param="acc")
    scales = []
    for what, scale, rows in (("A_scale", A_scale, m), ("B_scale", B_scale, n)):
        sv = _memdesc(scale, what, view=True)
        want = scale_shape(rows, k)
        if sv.type.storage != "smem":
            raise SemanticError(f"'{what}' in tensor memory (tlx.tmem_copy) is not supported yet: pass the shared "
                                f"buffer the scales were loaded into", param=what)
        if sv.type.element != T.u8 or tuple(sv.type.shape) != want:
            raise SemanticError(f"'{what}' must be a uint8 shared buffer of shape {list(want)} (ue8m0 scales in "
                                f"the cuBLAS block-scaling layout: 128 rows x 4 blocks of 32 per 512 bytes), got "
                                f"{S.describe(sv)}", param=what)
        scales.append(sv.value)
    bars, flag, preds, sync = _mma_operands(b, mBarriers, use_acc, pred, force_async)
    attrs = {"has_pred": bool(preds), "num_barriers": len(bars), "sync": sync, "input_precision": "ieee",
             "scale_formats": formats}
    b.create("tlx.tcgen05_mma", [a.value, bm.value, acc.value] + flag + preds + bars + scales, [], attrs)


@rule("tcgen05_commit")
def _tcgen05_commit(ctx, mBarrier, two_ctas=False):
    """With ``two_ctas`` the even CTA of the pair commits and the arrival lands on the
    barrier at the same place in both CTAs (TLX predicates it on the even rank)."""
    _require_blackwell(ctx, "tcgen05_commit", "mBarrier")
    pair = _cta_group(ctx, two_ctas, "tlx.tcgen05_commit")
    ctx.b.create("tlx.tcgen05_commit", [_barrier(mBarrier, "mBarrier").value], [], {"two_ctas": True} if pair else {})


@rule("fast_exp2")
def _fast_exp2(ctx, x, fma_every):
    every = const_int(fma_every, "fma_every")
    if every < 2:
        raise SemanticError(f"'fma_every' must be at least 2 (every k-th register on the FMA pipe), got {every}",
                            param="fma_every")
    x = S.unary_float(ctx.b, "exp2", x)
    if x.dtype.name != "f32":
        raise SemanticError(f"tlx.fast_exp2 takes float32 values, got {x.dtype}", param="x")
    x.value.owner.attrs["fma_every"] = every
    return x


@rule("async_dot_wait")
def _async_dot_wait(ctx, pendings, inp):
    pendings = const_int(pendings, "pendings")
    if pendings < 0:
        raise SemanticError(f"'pendings' must be >= 0, got {pendings}", param="pendings")
    if not isinstance(inp, Tensor) or not inp.is_block:
        raise SemanticError(f"'inp' must be the accumulator returned by tlx.async_dot, got {S.describe(inp)}",
                            param="inp")
    return Tensor(ctx.b.value("tlx.async_dot_wait", [inp.value], inp.type, pendings=pendings))


# cluster launch control (clc_rules: composed of the barrier rules above); DSM stores, warp
# votes and tl.inline_asm_elementwise (cluster_rules): they use the helpers above
from . import clc_rules, cluster_rules  # noqa: E402,F401
