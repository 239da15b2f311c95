"""Lowering of shared-memory buffers (``tlx.local_alloc`` and its views, ``local_load``,
``local_store``, ``local_gather``, ``local_scatter``): the rules CUDA and HIP share.

A buffer value is a C pointer into ``tlx_smem`` plus static element strides
(``lw.views``); slices move the pointer, transposes permute the strides.
A swizzled buffer (``attrs.swizzle`` or ``attrs.xor_swizzle`` of its allocation,
``lw.view_swizzle`` of its views) is addressed through ``shared_address``: the
element's byte offset goes through the XOR of ``passes/shared_layouts.py:swizzle_offset``,
in accesses no wider than the runs the swizzle keeps contiguous (``swizzle_chunk``).
A column-blocked buffer (``attrs.column_block``; ``lw.view_block`` of its
views: (columns per block, elements per block)) has row stride ``cols`` and
its contiguous coordinate ``c`` is addressed as ``(c / cols) * block + c % cols``;
a column slice at a multiple of ``cols`` and at most ``cols`` wide is a plain
(unblocked) tile at its block's start.

Tensor memory (``storage == "tmem"``) and barrier arrays are NVIDIA's: its rules
for these ops (``codegen_nvptx/rules_tlx.py``) handle them and hand the rest here.
"""
from __future__ import annotations

from math import gcd

from ..errors import CompilationError
from ..ir.shared_layout import PaddedSharedLayout, XorSwizzle
from ..passes.shared_layouts import allocation_swizzle, swizzle_chunk, swizzle_expr, swizzle_offset, swizzle_period
from ..passes.shared_memory import buffer_pitch
from . import c_types as C
from .lower import lowering, registers


def row_major(shape) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def _offset_expr(lw, layout, strides, reg: str = "i", block=None) -> str:
    terms = []
    for d, stride in enumerate(strides):
        coord = lw.coord_expr(layout, d, reg)
        if block and stride == 1:           # the contiguous dim of a column-blocked view
            cols, size = block
            terms.append(f"(({coord}) / {cols}) * {size} + (({coord}) % {cols})")
        else:
            terms.append(coord if stride == 1 else f"{coord} * {stride}")
    return " + ".join(terms) or "0"


# -- allocations and views ----------------------------------------------------------------
@lowering("tlx.local_alloc")
def local_alloc(lw, op):
    r = op.results[0]
    t = r.type
    name = lw.define(r)
    ctype = C.storage_type(t.element)
    lw.out.line(f"{ctype}* {name} = reinterpret_cast<{ctype}*>(tlx_smem + {op.attrs['offset']});  "
                f"// {t.num} x {list(t.shape)}")
    lw.views[id(r)] = (name, row_major(t.shape))
    if isinstance(t.layout, PaddedSharedLayout):          # rows row_pitch elements apart
        lw.views[id(r)] = (name, t.layout.strides())
        lw.out.line(f"// {name}: rows of {t.shape[-1]} elements padded to {t.layout.row_pitch} ({t.layout})")
    cols = op.attrs.get("column_block", 0)
    if cols:
        lw.views[id(r)] = (name, (cols, 1))
        lw.view_block[id(r)] = (cols, t.shape[0] * cols)
        lw.out.line(f"// {name}: {t.shape[1] // cols} column blocks of [{t.shape[0]}, {cols}] "
                    f"({t.shape[0] * cols * t.element.bytes} bytes apart)")
    swizzle = allocation_swizzle(op)
    lw.view_swizzle[id(r)] = swizzle
    lw.view_align[id(r)] = 1024 if swizzle else 128
    if isinstance(swizzle, XorSwizzle):
        lw.out.line(f"// {name}: swizzled by {swizzle}, from {t.layout}")
    elif swizzle:
        lw.out.line(f"// {name}: {swizzle}-byte swizzle (16-byte chunk c of 128-byte line l sits at chunk c ^ (l % 8))"
                    if swizzle == 128 else f"// {name}: {swizzle}-byte swizzle")


@lowering("tlx.local_view")
def local_view(lw, op):
    src, idx = op.operands
    r = op.results[0]
    base, strides = lw.views[id(src)]
    ctype = C.storage_type(src.type.element)
    name = lw.define(r)
    pitch = view_pitch(src)
    lw.out.line(f"{ctype}* {name} = {base} + {lw.name(idx)} * {pitch // src.type.element.bytes};")
    lw.views[id(r)] = (name, strides)
    lw.view_swizzle[id(r)] = lw.view_swizzle.get(id(src), 0)
    if id(src) in lw.view_block:
        lw.view_block[id(r)] = lw.view_block[id(src)]
    step = pitch * lw.axis.info(idx).divisibility[0]
    lw.view_align[id(r)] = gcd(lw.view_align.get(id(src), 1), step)


def view_pitch(src) -> int:
    """Bytes between consecutive buffers of the allocation value ``src`` (``passes/shared_memory.py:
    buffer_pitch``: more than a buffer where another allocation's buffers are interleaved)."""
    owner = getattr(src, "owner", None)
    if getattr(owner, "name", None) == "tlx.local_alloc":
        return buffer_pitch(owner)
    return src.type.buffer_bytes


@lowering("tlx.local_slice")
def local_slice(lw, op):
    src = op.operands[0]
    if id(src) in lw.view_block:
        return _blocked_slice(lw, op)
    base, strides = lw.views[id(src)]
    offset = " + ".join(f"{lw.name(o)} * {s}" for o, s in zip(op.operands[1:], strides))
    name = lw.define(op.results[0])
    lw.out.line(f"{C.storage_type(src.type.element)}* {name} = {base} + {offset};")
    lw.views[id(op.results[0])] = (name, strides)
    lw.view_swizzle[id(op.results[0])] = lw.view_swizzle.get(id(src), 0)
    align = lw.view_align.get(id(src), 1)
    for o, stride in zip(op.operands[1:], strides):
        align = gcd(align, lw.axis.info(o).divisibility[0] * stride * src.type.element.bytes)
    lw.view_align[id(op.results[0])] = align


def _blocked_slice(lw, op):
    """A slice of a column-blocked view: the column offset must be a multiple of the block
    width; a slice at most one block wide is a plain tile (row stride = block width)."""
    src = op.operands[0]
    r = op.results[0]
    base, strides = lw.views[id(src)]
    cols, size = lw.view_block[id(src)]
    row_off, col_off = op.operands[1:]
    width = r.type.shape[-1]
    if lw.axis.info(col_off).divisibility[0] % cols or (width > cols and width % cols):
        raise CompilationError(f"tlx.local_slice of a buffer stored as {cols}-column blocks (a wide 128B-swizzled "
                               f"buffer) must start at a multiple of {cols} columns and be at most {cols} or a "
                               f"multiple of {cols} columns wide", op.loc)
    name = lw.define(r)
    lw.out.line(f"{C.storage_type(src.type.element)}* {name} = {base} + {lw.name(row_off)} * {cols} + "
                f"({lw.name(col_off)} / {cols}) * {size};")
    lw.views[id(r)] = (name, strides)
    lw.view_swizzle[id(r)] = lw.view_swizzle.get(id(src), 0)
    if width > cols:
        lw.view_block[id(r)] = (cols, size)
    nbytes = src.type.element.bytes
    align = gcd(lw.view_align.get(id(src), 1), lw.axis.info(row_off).divisibility[0] * cols * nbytes)
    lw.view_align[id(r)] = gcd(align, lw.axis.info(col_off).divisibility[0] // cols * size * nbytes)


@lowering("tlx.local_trans")
def local_trans(lw, op):
    src = op.operands[0]
    if src.type.storage == "tmem":
        raise CompilationError("tlx.local_trans of a tensor-memory buffer is not supported", op.loc)
    base, strides = lw.views[id(src)]
    lw.alias(op.results[0], base)
    lw.views[id(op.results[0])] = (base, tuple(strides[p] for p in op.attrs["perm"]))
    if id(src) in lw.view_block:
        lw.view_block[id(op.results[0])] = lw.view_block[id(src)]
    lw.view_align[id(op.results[0])] = lw.view_align.get(id(src), 1)
    lw.view_swizzle[id(op.results[0])] = lw.view_swizzle.get(id(src), 0)


@lowering("tlx.local_reinterpret")
def local_reinterpret(lw, op):
    src = op.operands[0]
    if src.type.storage == "tmem":
        raise CompilationError("tlx.local_reinterpret of a tensor-memory buffer is not supported", op.loc)
    base, strides = lw.views[id(src)]
    if op.results[0].type.layout is not None:
        return _layout_view(lw, op)
    if strides != row_major(src.type.shape) or id(src) in lw.view_block:
        raise CompilationError("tlx.local_reinterpret (and tlx.local_reshape, which is one) needs a contiguous "
                               "(not sliced, transposed or column-blocked) "
                               "buffer", op.loc)
    t = op.results[0].type
    ctype = C.storage_type(t.element)
    name = lw.define(op.results[0])
    lw.out.line(f"{ctype}* {name} = reinterpret_cast<{ctype}*>({base});")
    lw.views[id(op.results[0])] = (name, row_major(t.shape))
    lw.view_align[id(op.results[0])] = lw.view_align.get(id(src), 1)
    lw.view_swizzle[id(op.results[0])] = lw.view_swizzle.get(id(src), 0)


def _layout_view(lw, op):
    """``local_reinterpret(buf, dtype, shape, layout=L)``: the frontend and shared-layouts checked
    that ``L`` describes the buffer's own bytes (same shape and dtype), so the view is the buffer."""
    src, r = op.operands[0], op.results[0]
    base, strides = lw.views[id(src)]
    ctype = C.storage_type(r.type.element)
    name = lw.define(r)
    lw.out.line(f"{ctype}* {name} = {base};  // viewed through {r.type.layout}")
    lw.views[id(r)] = (name, strides)
    if id(src) in lw.view_block:
        lw.view_block[id(r)] = lw.view_block[id(src)]
    lw.view_align[id(r)] = lw.view_align.get(id(src), 1)
    lw.view_swizzle[id(r)] = lw.view_swizzle.get(id(src), 0)


def shared_address(lw, view, offset: str, element) -> str:
    """A ``T*`` expression for element ``offset`` (elements from the view's
    pointer) of ``view``, through the buffer's swizzle if it has one.

    The swizzle is a function of the address bits, so it is applied to the byte
    offset from a point aligned to its period: the view itself when its
    alignment is known to be a multiple, else the start of shared memory."""
    base = lw.views[id(view)][0]
    swizzle = lw.view_swizzle.get(id(view), 0)
    if not swizzle:
        return f"{base} + {offset}"
    ctype = C.storage_type(element)
    byte_offset = f"({offset}) * {element.bytes}" if element.bytes > 1 else f"({offset})"
    if lw.view_align.get(id(view), 1) % swizzle_period(swizzle) == 0:
        anchor = f"reinterpret_cast<unsigned char*>({base})"
    else:
        anchor = "tlx_smem"
        byte_offset = f"(int)(reinterpret_cast<unsigned char*>({base}) - tlx_smem) + {byte_offset}"
    return f"reinterpret_cast<{ctype}*>({anchor} + {swizzle_expr(byte_offset, swizzle)})"


def register_offsets(lw, view, layout, strides, element, width: int, block=None) -> list[int] | None:
    """Split a swizzled view's addresses into a thread part and a register part: the offsets
    (elements) of register runs 0, width, 2*width.. from run 0 of the same thread, when that
    offset is the same for every thread (checked on every lane and warp of ``layout``), else
    None.  Then ``shared_address`` of run 0 plus a constant addresses every run, which the
    device compiler folds into the instruction's immediate: one address register per buffer
    instead of one per run (the XOR of the swizzle hides that from it).  None too when the
    view is not swizzled or its swizzle's phase is not the view's own."""
    swizzle = lw.view_swizzle.get(id(view), 0)
    if not swizzle or lw.view_align.get(id(view), 1) % swizzle_period(swizzle):
        return None

    def byte_offset(coords) -> int:
        total = 0
        for d, stride in enumerate(strides):
            if block and stride == 1:
                cols, size = block
                total += (coords[d] // cols) * size + coords[d] % cols
            else:
                total += coords[d] * stride
        return swizzle_offset(total * element.bytes, swizzle)

    threads = [(lane, warp) for warp in range(layout.num_warps) for lane in range(layout.num_lanes)]
    first = [byte_offset(layout.apply(0, lane, warp)) for lane, warp in threads]
    offsets = []
    for run in range(0, layout.num_registers, width):
        deltas = {byte_offset(layout.apply(run, lane, warp)) - f for (lane, warp), f in zip(threads, first)}
        if len(deltas) != 1:
            return None
        delta = deltas.pop()
        if delta % element.bytes:
            return None
        offsets.append(delta // element.bytes)
    return offsets


def shared_vector_width(lw, view, layout, element) -> int:
    """Elements per shared-memory access: runs of registers consecutive along the
    layout's fastest dim (``vector_dim``: the last dim, or dim 0 of a transposed
    tile), over unit stride, with every run start aligned (up to 16 bytes)."""
    from .rules_memory import vector_dim
    strides = lw.views[id(view)][1]
    dim = vector_dim(layout)
    if strides[dim] != 1 or element.bits < 8:
        return 1
    chunk = swizzle_chunk(lw.view_swizzle.get(id(view), 0))       # bytes the swizzle keeps together
    width = max(1, min(layout.contiguous_elements_per_thread(dim), 16 // element.bytes, chunk // element.bytes))
    align = lw.view_align.get(id(view), 1)
    for d, stride in enumerate(strides):
        if d != dim:
            align = gcd(align, stride * element.bytes)
    while width > 1 and (align % (width * element.bytes) or width * element.bits < 32):
        width //= 2
    return width


@lowering("tlx.local_load")
def local_load(lw, op):
    view = op.operands[0]
    strides = lw.views[id(view)][1]
    r = op.results[0]
    t = r.type.element
    offset = _offset_expr(lw, r.type.layout, strides, block=lw.view_block.get(id(view)))
    width = shared_vector_width(lw, view, r.type.layout, t)
    if width == 1:
        lw.assign_elementwise(r, lambda i: f"*({shared_address(lw, view, offset, t)})".replace("(i)", f"({i})"))
        return
    name = lw.declare(r)
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int i = 0; i < {registers(r.type)}; i += {width})")
    lw.out.line(lw.target.load_shared_vector(name, shared_address(lw, view, offset, t), t, width))
    lw.out.close()


@lowering("tlx.local_store")
def local_store(lw, op):
    view, value = op.operands
    strides = lw.views[id(view)][1]
    offset = _offset_expr(lw, value.type.layout, strides, block=lw.view_block.get(id(view)))
    t = value.type.element
    width = shared_vector_width(lw, view, value.type.layout, t)
    if width == 1:
        lw.for_registers(value, f"*({shared_address(lw, view, offset, t)}) = {lw.name(value)}[i];")
        return
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int i = 0; i < {registers(value.type)}; i += {width})")
    lw.out.line(lw.target.store_shared_vector(lw.name(value), shared_address(lw, view, offset, t), t, width))
    lw.out.close()


def _indexed_offset(lw, layout, strides, axis: int, index: str, block=None) -> str:
    """``_offset_expr`` with the coordinate along ``axis`` taken from the index register."""
    terms = []
    for d, stride in enumerate(strides):
        coord = f"((int){index})" if d == axis else lw.coord_expr(layout, d)
        if block and stride == 1:
            cols, size = block
            terms.append(f"(({coord}) / {cols}) * {size} + (({coord}) % {cols})")
        else:
            terms.append(coord if stride == 1 else f"{coord} * {stride}")
    return " + ".join(terms) or "0"


@lowering("tlx.local_gather")
def local_gather(lw, op):
    """Each thread reads, per register, the element its index register names (ld.shared)."""
    view, indices = op.operands
    r = op.results[0]
    t = r.type.element
    offset = _indexed_offset(lw, r.type.layout, lw.views[id(view)][1], op.attrs["axis"], f"{lw.name(indices)}[i]",
                             lw.view_block.get(id(view)))
    lw.assign_elementwise(r, lambda i: f"*({shared_address(lw, view, offset, t)})")


@lowering("tlx.local_scatter")
def local_scatter(lw, op):
    """Each thread writes, per register, its value to the element its index register names."""
    view, value, indices = op.operands
    t = value.type.element
    offset = _indexed_offset(lw, value.type.layout, lw.views[id(view)][1], op.attrs["axis"], f"{lw.name(indices)}[i]",
                             lw.view_block.get(id(view)))
    lw.for_registers(value, f"*({shared_address(lw, view, offset, t)}) = {lw.name(value)}[i];")


__all__ = ["shared_address", "shared_vector_width"]
