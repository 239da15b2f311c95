"""Lowering of block-level tensor ops: ids, ranges, shape ops, layout
conversions and reductions."""
from __future__ import annotations

import numpy as np

from ..errors import InternalCompilerError
from ..ir import layouts as L
from ..ir.types import TensorType
from ..options import perf_switch
from . import c_types as C
from .lower import const_table, is_identity, lowering, registers, same_thread_map


@lowering("tl.program_id")
def program_id(lw, op):
    axis = op.attrs["axis"]
    lw.declare(op.results[0], "pid" if not op.results[0].name_hint else None,
               init=f"(int){_per_program(lw, axis, f'blockIdx.{chr(120 + axis)}')}")


@lowering("tl.num_programs")
def num_programs(lw, op):
    axis = op.attrs["axis"]
    lw.declare(op.results[0], init=f"(int){_per_program(lw, axis, f'gridDim.{chr(120 + axis)}')}")


def _per_program(lw, axis: int, index: str) -> str:
    """A CTA index or count in programs: under Triton's ``num_ctas`` (kernel attribute) a
    program is a cluster of that many CTAs along x."""
    num_ctas = lw.kernel.attrs.get("num_ctas", 1)
    return f"({index} / {num_ctas}u)" if axis == 0 and num_ctas > 1 else index


@lowering("tl.arange")
def arange(lw, op):
    r = op.results[0]
    start = op.attrs["start"]
    coord = lw.coord_expr(r.type.layout, 0)
    lw.assign_elementwise(r, lambda i: f"{start} + {coord}" if start else coord)


@lowering("tl.splat")
def splat(lw, op):
    (s,) = op.operands
    lw.assign_elementwise(op.results[0], lambda i: lw.name(s))


@lowering("tl.hint")
def hint(lw, op):
    lw.alias(op.results[0], lw.name(op.operands[0]))


def _remap(lw, op, project) -> None:
    """Result register r = operand register map[r] (same thread)."""
    src, dst = op.operands[0], op.results[0]
    mapping = same_thread_map(src.type.layout, dst.type.layout, project)
    if mapping is None:
        raise InternalCompilerError(f"{op.name}: layouts {src.type.layout} and {dst.type.layout} "
                                    f"need data movement (a tlxc layout-inference bug)", op.loc)
    if is_identity(mapping) and registers(src.type) == registers(dst.type):
        lw.alias(dst, lw.name(src))
        return
    table = const_table(lw, mapping, "map")
    lw.assign_elementwise(dst, lambda i: f"{lw.name(src)}[{table}[{i}]]")


@lowering("tl.broadcast")
def broadcast(lw, op):
    old, new = op.operands[0].type.shape, op.results[0].type.shape
    grown = [d for d, (o, n) in enumerate(zip(old, new)) if o != n]

    def project(table):
        table = table.copy()
        table[..., grown] = 0
        return table
    _remap(lw, op, project)


@lowering("tl.expand_dims")
def expand_dims(lw, op):
    axis = op.attrs["axis"]
    _remap(lw, op, lambda table: np.delete(table, axis, axis=-1))


@lowering("tl.trans")
def trans(lw, op):
    perm = list(op.attrs["perm"])
    inverse = [perm.index(d) for d in range(len(perm))]
    _remap(lw, op, lambda table: table[..., inverse])


@lowering("tl.split")
def split(lw, op):
    """Each half picks the operand's registers whose last coordinate is 0 (or 1)."""
    src = op.operands[0]
    for half, result in enumerate(op.results):
        def project(table, half=half):
            return np.concatenate([table, np.full(table.shape[:-1] + (1,), half, dtype=table.dtype)], axis=-1)
        mapping = same_thread_map(src.type.layout, result.type.layout, project)
        if mapping is None:
            raise InternalCompilerError(f"tl.split: layouts {src.type.layout} and {result.type.layout} need data "
                                        f"movement (a tlxc layout-inference bug)", op.loc)
        table = const_table(lw, mapping, "map")
        lw.assign_elementwise(result, lambda i, table=table: f"{lw.name(src)}[{table}[{i}]]")


@lowering("tl.join")
def join(lw, op):
    """The result's highest register bit is the new dim (``layouts.join_layout``): its
    registers are ``a``'s, then ``b``'s."""
    a, b = op.operands
    n = registers(a.type)
    lw.assign_elementwise(op.results[0], lambda i: f"(({i}) < {n} ? {lw.name(a)}[{i}] : {lw.name(b)}[({i}) - {n}])")


@lowering("tl.reshape")
def reshape(lw, op):
    src_shape, dst_shape = op.operands[0].type.shape, op.results[0].type.shape

    def project(table):
        flat = np.zeros(table.shape[:-1], dtype=np.int64)
        for d, size in enumerate(dst_shape):
            flat = flat * size + table[..., d]
        out = np.zeros(table.shape[:-1] + (len(src_shape),), dtype=np.int64)
        for d in reversed(range(len(src_shape))):
            out[..., d] = flat % src_shape[d]
            flat //= src_shape[d]
        return out
    _remap(lw, op, project)


@lowering("tl.convert_layout")
def convert_layout(lw, op):
    src, dst = op.operands[0], op.results[0]
    mapping = same_thread_map(src.type.layout, dst.type.layout)
    if mapping is not None:
        if is_identity(mapping) and registers(src.type) == registers(dst.type):
            lw.alias(dst, lw.name(src))
            return
        table = const_table(lw, mapping, "map")
        lw.assign_elementwise(dst, lambda i: f"{lw.name(src)}[{table}[{i}]]")
        return
    convert_through_shared(lw, src, dst, op)


def convert_through_shared(lw, src, dst, op=None) -> None:
    """Every thread writes its elements to shared memory at their flat index,
    then reads the ones its new layout holds."""
    t = dst.type
    ctype = C.storage_type(t.element)
    size = t.numel * max(1, t.element.bytes)
    plan = _vector_plan(lw, src.type, t)
    if plan is not None:
        _convert_vectorized(lw, op, src, dst, size, *plan)
        return
    smem = lw.need_scratch(size)
    buf = lw.fresh("cvt")
    lw.out.line(f"{ctype}* {buf} = reinterpret_cast<{ctype}*>({smem});")
    lw.out.line(lw.sync())
    src_flat = lw.flat_expr(src.type.layout)
    lw.for_registers(src, f"{buf}[{src_flat}] = {lw.name(src)}[i];")
    lw.out.line(lw.sync())
    dst_flat = lw.flat_expr(t.layout)
    lw.assign_elementwise(dst, lambda i: f"{buf}[{dst_flat.replace('(i)', f'({i})')}]")


def _vector_plan(lw, src_t: TensorType, dst_t: TensorType):
    """(element bytes, write width, read width, swizzle shift) of a conversion through shared memory that
    moves whole 4-16-byte vectors, or None (the element-wise path).

    Elements sit at their row-major flat byte address ``a``, with the 16-byte chunk inside
    each 128-byte segment XOR-ed by the row (``a ^ (((a >> shift) & 7) << 4)``, ``shift`` =
    log2 of the row's bytes, or 7 when rows are short or not a power of two): the eight rows
    an MMA accumulator's warp writes at one column land in eight different chunks (no bank
    conflicts), and a 16-byte vector never crosses a chunk, so it stays contiguous."""
    element = dst_t.element
    bits = 8 if element.is_boolean else element.bits
    if bits not in (8, 16, 32, 64) or not hasattr(lw.target, "store_shared_vector"):
        return None
    last = dst_t.rank - 1
    ebytes = bits // 8
    total = dst_t.numel * ebytes
    if total % 128:
        return None

    def width(layout):
        w = min(layout.contiguous_elements_per_thread(last), 16 // ebytes)
        # a lane or warp that moves inside a vector would break its alignment
        if any(basis[last] % w for name in ("lane", "warp") for basis in layout.bases(name)):
            return 1
        return w if w * ebytes >= 4 else 1
    write, read = width(src_t.layout), width(dst_t.layout)
    if write == 1 and read == 1:
        return None
    row_bytes = dst_t.shape[last] * ebytes
    shift = row_bytes.bit_length() - 1 if row_bytes >= 128 and row_bytes & (row_bytes - 1) == 0 else 7
    return ebytes, write, read, shift


def _convert_vectorized(lw, op, src, dst, size: int, ebytes: int, write: int, read: int, shift: int) -> None:
    t = dst.type
    element = t.element
    ctype = C.storage_type(element)
    base = lw.fresh("cvt")
    smem = lw.need_scratch(size) if op is None else lw.need_scratch_over_dead_buffers(op, size)
    lw.out.line(f"unsigned char* {base} = {smem};")
    lw.out.line(lw.sync())

    def address(layout) -> str:
        a = f"({lw.flat_expr(layout)} * {ebytes})"
        return f"({base} + ({a} ^ ((({a} >> {shift}) & 7) << 4)))"

    def loop(count: int, step: int, body: str) -> None:
        lw.out.line("#pragma unroll")
        lw.out.line(f"for (int i = 0; i < {count}; i += {step}) {body}")

    at = address(src.type.layout)
    if write > 1:
        loop(registers(src.type), write, lw.target.store_shared_vector(lw.name(src), at, element, write))
    else:
        loop(registers(src.type), 1, f"*reinterpret_cast<{ctype}*>{at} = {lw.name(src)}[i];")
    lw.out.line(lw.sync())
    name = lw.declare(dst)
    at = address(t.layout)
    if read > 1:
        loop(registers(t), read, lw.target.load_shared_vector(name, at, element, read))
    else:
        loop(registers(t), 1, f"{name}[i] = *reinterpret_cast<const {ctype}*>{at};")


# -- reductions ------------------------------------------------------------------------------

def _combine(kind: str, t, a: str, b: str) -> str:
    if kind == "sum":
        return f"({a} + {b})"
    if kind in ("and", "or", "xor"):
        return f"({a} {'&|^'[('and', 'or', 'xor').index(kind)]} {b})"
    fn = "fmaxf" if kind == "max" else "fminf"
    if t.is_float:
        return f"{fn if t.name != 'f64' else fn[:-1]}({a}, {b})"
    cmp = ">" if kind == "max" else "<"
    return f"({a} {cmp} {b} ? {a} : {b})"


def _fold(lw, kind: str, t, ctype: str, acc: str, idx: str | None, value: str, index: str | None) -> None:
    """Emit ``acc[j] = combine(acc[j], value)`` (and the index for arg-reductions)."""
    if idx is None and kind in ("max", "min") and not t.is_float:
        # the integer select names its operand twice: a shuffle there would run twice, the second
        # time in only the lanes whose comparison picks it (divergent __shfl_xor_sync: a hang)
        lw.out.line(f"{{ const {ctype} v = {value}; {acc}[j] = {_combine(kind, t, f'{acc}[j]', 'v')}; }}")
        return
    if idx is None:
        lw.out.line(f"{acc}[j] = {_combine(kind, t, f'{acc}[j]', value)};")
        return
    lw.out.line(f"const {ctype} v = {value}; const int vi = {index};")
    lw.out.line(f"if {_arg_better(kind, t, f'{acc}[j]', f'{idx}[j]', 'v', 'vi')} {{ {acc}[j] = v; {idx}[j] = vi; }}")


def _tree_fold(lw, kind: str, t, ctype: str, acc: str, table: str, width: int, src_c) -> None:
    """Emit ``acc[j]`` = the combination of the thread's ``width`` registers of output ``j`` as a
    pairwise tree (register ``g`` with ``g + s`` for s = 1, 2, 4, ..): the same ``width - 1``
    instructions as a left fold, a dependency chain ``ceil(log2(width))`` deep instead of
    ``width - 1``; sums rounded in that order.  Opt-in (``TLXC_REDUCE_TREE`` for max/min/bitwise,
    ``TLXC_REDUCE_TREE_SUM`` for sums): on the H100 the attention forward at D = 64 ran 1-3 %
    slower with tree sums and no faster with tree maxima, softmax/layernorm unchanged
    (docs/performance.md, session 29), so the left fold stays the default."""
    part = lw.fresh("rtree")
    lw.out.line(f"{ctype} {part}[{width}];")
    lw.out.line("#pragma unroll")
    lw.out.line(f"for (int g = 0; g < {width}; ++g) {part}[g] = {src_c(f'{table}[j][g]')};")
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int s = 1; s < {width}; s *= 2)")
    lw.out.line("#pragma unroll")
    lw.out.line(f"for (int g = 0; g + s < {width}; g += 2 * s) "
                f"{part}[g] = {_combine(kind, t, f'{part}[g]', f'{part}[g + s]')};")
    lw.out.close()
    lw.out.line(f"{acc}[j] = {part}[0];")


def _arg_better(kind: str, t, va: str, ia: str, vb: str, ib: str) -> str:
    """True when (vb, ib) should replace (va, ia): strictly better value, a
    number beats NaN (NaN is ignored, as tl.max's fmaxf does), ties go to the
    lower index."""
    cmp = ">" if kind == "argmax" else "<"
    if t.is_float:
        return (f"(({vb} {cmp} {va}) || ({va} != {va} && {vb} == {vb}) || "
                f"(({vb} == {va} || ({vb} != {vb} && {va} != {va})) && {ib} < {ia}))")
    return f"(({vb} {cmp} {va}) || ({vb} == {va} && {ib} < {ia}))"


@lowering("tl.reduce")
def reduce(lw, op):
    (src,) = op.operands
    result = op.results[0]
    kind, axis = op.attrs["kind"], op.attrs["axis"]
    layout = src.type.layout
    t = src.type.element
    ctype = C.compute_type(t)
    is_arg = kind.startswith("arg")
    out_layout = result.type.layout if isinstance(result.type, TensorType) else None
    groups = _register_groups(layout, out_layout, axis)
    n_out = len(groups)
    acc = lw.fresh("red")
    idx = lw.fresh("ridx") if is_arg else None
    lw.out.line(f"{ctype} {acc}[{n_out}];")
    if is_arg:
        lw.out.line(f"int {idx}[{n_out}];")
    # 1. inside the thread
    group_table = np.array(groups)
    table = lw.fresh("rgrp")
    rows = ", ".join("{" + ", ".join(map(str, g)) + "}" for g in groups)
    lw.out.line(f"const int {table}[{n_out}][{len(groups[0])}] = {{{rows}}};")
    src_c = lambda r: lw.target.to_compute(f"{lw.name(src)}[{r}]", t)
    coord = lw.coord_expr(layout, axis, "r") if is_arg else None
    width = group_table.shape[1]
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int j = 0; j < {n_out}; ++j)")
    if not is_arg and width > 2 and perf_switch("TLXC_REDUCE_TREE_SUM" if kind == "sum" else "TLXC_REDUCE_TREE"):
        _tree_fold(lw, kind, t, ctype, acc, table, width, src_c)
    else:
        lw.out.line(f"{acc}[j] = {src_c(f'{table}[j][0]')};")
        if is_arg:
            lw.out.line(f"{{ const int r = {table}[j][0]; {idx}[j] = {coord}; }}")
        if width > 1:
            lw.out.line("#pragma unroll")
            lw.out.open(f"for (int g = 1; g < {width}; ++g)")
            lw.out.line(f"const int r = {table}[j][g];")
            _fold(lw, kind, t, ctype, acc, idx, src_c("r"), coord)
            lw.out.close()
    lw.out.close()
    # 2. across lanes
    plan = layout.reduction_plan(axis)
    for mask in plan.shuffle_xor_masks:
        lw.out.line("#pragma unroll")
        lw.out.open(f"for (int j = 0; j < {n_out}; ++j)")
        other = lw.target.shfl_xor(f"{acc}[j]", mask, ctype)
        other_index = lw.target.shfl_xor(f"{idx}[j]", mask, "int") if is_arg else None
        _fold(lw, kind, t, ctype, acc, idx, other, other_index)
        lw.out.close()
    # 3. across warps, through shared memory
    if plan.warp_bits:
        _reduce_across_warps(lw, plan, out_layout, acc, idx, n_out, ctype, kind, t)
    # 4. result
    out_t = result.type.element if isinstance(result.type, TensorType) else result.type
    if is_arg:
        value = lambda j: f"{idx}[{j}]"
    else:
        value = lambda j: lw.target.from_compute(f"{acc}[{j}]", out_t)
    if isinstance(result.type, TensorType):
        lw.assign_elementwise(result, lambda i: value(i))
    else:
        lw.declare(result, init=value(0))


def _register_groups(layout: L.Layout, out_layout, axis: int) -> list[list[int]]:
    """For each output register, the input registers (same thread) it combines."""
    table = layout.coords_table()[0, 0]                      # thread (0, 0): [R, rank]
    projected = np.delete(table, axis, axis=-1)
    if out_layout is None:
        return [list(range(layout.num_registers))]
    out_table = out_layout.coords_table()[0, 0]
    groups: list[list[int]] = [[] for _ in range(out_layout.num_registers)]
    for r, coords in enumerate(projected):
        hits = np.nonzero(np.all(out_table == coords, axis=-1))[0]
        if len(hits) == 0:
            raise InternalCompilerError("reduction result layout does not match its operand (tlxc bug)")
        groups[int(hits[0])].append(r)
    width = max(len(g) for g in groups)
    if any(len(g) != width for g in groups):
        raise InternalCompilerError("uneven reduction groups (tlxc bug)")
    return groups


def _reduce_across_warps(lw, plan, out_layout, acc, idx, n_out, ctype, kind, t) -> None:
    warp_bits = list(plan.warp_bits)
    n_parts = 1 << len(warp_bits)
    out_numel = out_layout.numel if out_layout is not None else 1
    part = " | ".join(f"(((warp >> {b}) & 1) << {k})" for k, b in enumerate(warp_bits))
    elem_bytes = 4 if ctype in ("float", "int", "unsigned", "bool") else 8
    total = n_parts * out_numel * elem_bytes * (2 if idx else 1)
    smem = lw.need_scratch(total)
    buf = lw.fresh("wred")
    store_t = "int" if ctype == "bool" else ctype
    lw.out.line(f"{store_t}* {buf} = reinterpret_cast<{store_t}*>({smem});")
    ibuf = None
    if idx:
        ibuf = lw.fresh("wridx")
        lw.out.line(f"int* {ibuf} = reinterpret_cast<int*>({smem} + {n_parts * out_numel * elem_bytes});")
    flat = lw.flat_expr(out_layout, "j") if out_layout is not None else "0"
    lw.out.line(lw.sync())
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int j = 0; j < {n_out}; ++j)")
    lw.out.line(f"{buf}[({part}) * {out_numel} + {flat}] = {acc}[j];")
    if idx:
        lw.out.line(f"{ibuf}[({part}) * {out_numel} + {flat}] = {idx}[j];")
    lw.out.close()
    lw.out.line(lw.sync())
    if _lanes_share_outputs(out_layout, len(warp_bits)):
        # Lane l reads warp part l % n_parts and a butterfly over the low lane bits combines
        # the parts, as Triton does: one shared load and log2(n_parts) shuffles per output
        # instead of n_parts loads, whose values would all be live at once (16 warps: 16
        # registers more, the difference between 2 and 3 CTAs of an RMSNorm row kernel).
        lw.out.line("#pragma unroll")
        lw.out.open(f"for (int j = 0; j < {n_out}; ++j)")
        lw.out.line(f"{acc}[j] = {buf}[(lane & {n_parts - 1}) * {out_numel} + {flat}];")
        if idx:
            lw.out.line(f"{idx}[j] = {ibuf}[(lane & {n_parts - 1}) * {out_numel} + {flat}];")
        lw.out.close()
        mask = n_parts >> 1
        while mask:
            lw.out.line("#pragma unroll")
            lw.out.open(f"for (int j = 0; j < {n_out}; ++j)")
            other = lw.target.shfl_xor(f"{acc}[j]", mask, ctype)
            other_index = lw.target.shfl_xor(f"{idx}[j]", mask, "int") if idx else None
            _fold(lw, kind, t, ctype, acc, idx, other, other_index)
            lw.out.close()
            mask >>= 1
        return
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int j = 0; j < {n_out}; ++j)")
    lw.out.line(f"{acc}[j] = {buf}[{flat}];")
    if idx:
        lw.out.line(f"{idx}[j] = {ibuf}[{flat}];")
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int p = 1; p < {n_parts}; ++p)")
    other_index = f"{ibuf}[p * {out_numel} + {flat}]" if idx else None
    _fold(lw, kind, t, ctype, acc, idx, f"{buf}[p * {out_numel} + {flat}]", other_index)
    lw.out.close()
    lw.out.close()


def _lanes_share_outputs(out_layout, n_warp_bits: int) -> bool:
    """Whether the lanes that differ only in their low ``n_warp_bits`` bits hold the same
    output registers (a scalar result, or an output layout broadcast over those lane bits),
    so that a butterfly over those bits may combine the warps' partial results."""
    if n_warp_bits == 0 or n_warp_bits > 5:
        return False
    if out_layout is None:
        return True
    if len(out_layout.lane) < n_warp_bits:
        return False
    return all(not any(out_layout.lane[b]) for b in range(n_warp_bits))

