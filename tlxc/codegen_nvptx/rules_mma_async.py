"""Lowering of ``tlx.async_dot`` / ``tlx.async_dot_wait`` to Hopper wgmma (sm_90a).

One ``tlx.async_dot`` is one wgmma group of the issuing warps:
``wgmma.fence``, then per accumulator tile and per k step one
``wgmma.mma_async.m64nNkK`` with both operands in shared memory, then
``wgmma.commit_group``.  K is 32 bytes of input: k16 for bf16/f16, k32 for
fp8 (e4m3, e5m2; A and B may be of different fp8 types), k8 for tf32; only
16-bit inputs may be MN-major; 16-bit and fp8 A may come from registers
(``_register_a_fragments``: fp8's k32 fragments are exchanged within each quad from
the accumulator pattern, ``tlx_wgmma_a8_fragment``, or -- ``attrs.a_k_order ==
"accumulator"`` -- read in that pattern's own order, ``_register_a8_words``).
``tlx.async_dot_wait`` is ``wgmma.wait_group``.

*max_num_imprecise_acc* (fp8, ``attrs``): Hopper sums fp8 products in a
reduced-precision accumulator.  With the attribute, each accumulator tile is
computed in runs of ``max(1, ceil(limit / 32))`` k32 steps into a zeroed
scratch tile (``wgmma.fence``, the run's MMAs, commit, ``wait_group 0``) that is
then added to the result in float32 -- the incoming accumulator included -- as
Triton's wgmma lowering does.  The op is then synchronous (every group of the
warps retired when it ends; a later ``async_dot_wait`` finds nothing pending)
and holds one more tile of registers.

Accumulator registers (``ir/layouts_nvidia.py``, ``mma_accumulator_layout(...,
"wgmma")``): registers ``0 .. N_instr/2 - 1`` are the instruction's
``d0 .. d(N/2-1)``, then repetitions along N, then along M.  Warps 0-3 of a
warpgroup are the instruction's own (rows 16w); warp bits above those move
whole warpgroups along M (64 rows) or N.

Shared operands and their matrix descriptors
--------------------------------------------
A descriptor (PTX ISA, "Matrix Descriptor Format") packs, in a u64,
start address >> 4 (bits 0-13), leading-dimension byte offset (LBO) >> 4
(bits 16-29), stride-dimension byte offset (SBO) >> 4 (bits 32-45), base
offset (bits 49-51) and the layout type (bits 62-63: 1 = 128-byte swizzle,
2 = 64-byte, 3 = 32-byte, 0 = interleaved/none).

tlxc's wgmma operands are row-major shared buffers whose physical rows (the
contiguous dimension) are exactly S = 32, 64 or 128 bytes, swizzled with
span S (``passes/shared_layouts.py`` asks for that).  Measured in 16-byte
units T, the PTX canonical layouts for a swizzle of S bytes are

* K-major (``imm-trans = 0``; A [M, K] row-major, B stored N x K, i.e. a
  ``local_trans`` view): ``((8, m), (T, 2k)) : ((S/16·T, SBO), (1, T))``.
  Eight MN-rows sit S bytes apart -- our row pitch -- so the swizzle atom is
  8 rows x S bytes, stored contiguously, and the next 8 rows start 8·S bytes
  later: **SBO = 8·S** (1024 for 128B).  The K extent of one instruction
  (16 elements of 2 bytes = 32 bytes) stays inside one S-byte row, so LBO is
  not used for swizzled K-major layouts (the ISA says "assumed 1"): **LBO = 1**
  (encoded value).  The k-th k16 step starts 32·k bytes further along the row:
  the start address advances by 32 bytes and the hardware applies the
  address-based swizzle, the same XOR the TMA unit wrote with.
* MN-major (``imm-trans = 1``; B [K, N] row-major, or A stored K x M):
  ``((T, S/16, m), (8, k)) : ((1, T, LBO), (S/16·T, SBO))``.  Along MN, S bytes
  are contiguous (one of our rows) and LBO steps to the next S-byte block of
  MN; along K, 8 rows sit S bytes apart and the next 8 rows start **SBO = 8·S**
  bytes later.  When our rows hold the whole MN extent (MN·2 <= S) only one
  MN block is ever addressed and LBO (set to the size of a [K, S-byte] column
  block) is never used.  The k-th k16 step starts 16 rows = 16·S bytes on.

*Block-stacked (column-blocked) buffers* (``attrs.column_block``; 128B swizzle,
or 64B/32B when an explicit layout's atom is that narrow: the same with S-byte blocks,
LBO = R·S, SBO = 8·S): a 16-bit [R, C] buffer with C·2 > 128 is stored as C/64 blocks of
[R, 64], block j (columns 64j..64j+63) at byte j·R·128, each a 128B-swizzled
tile with 128-byte rows.  As an MN-major B ([K, N], N > 64) this is exactly the
canonical ``((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO))`` (T = 8 elements =
16 bytes) with m = N_instr/64 > 1: within a block, 8 chunks of 16 bytes are one
128-byte row (MN), rows are 128 bytes apart (8T) along K, 8 rows form a
1024-byte swizzle atom and the next 8 rows start **SBO = 1024** bytes on; the
next 64 MN elements are the next block, **LBO = R·128** bytes on (8192 for
R = 64).  (CUTLASS's ``make_gmma_desc<Major::MN>`` reads LBO from the stride of
the m mode for swizzled layouts, SBO from the k mode.)  So one
``m64nNk16`` with N = 128 or 256 covers 2 or 4 blocks from one start address:
the start of the first block plus 16·128·kk for k-step kk, plus, for an
accumulator tile at column n0, (n0/64)·R·128 + (n0%64)·2.  Every block starts
at a multiple of 1024 (R % 8 == 0), so the pattern is in phase in each.  As a
K-major operand (A [M, K] with K > 64) each k16 step (32 bytes) lies inside
one block: the start address is block (k/64) plus (k%64)·2 and LBO is unused.

The allocation is 1024-byte aligned and tiles start at multiples of 8 rows,
so the swizzle pattern is in phase at every start address: **base offset 0**.
"""
from __future__ import annotations

import re

from ..codegen_c.lower import lowering, registers
from ..errors import CompilationError, InternalCompilerError
from ..ir.core import BlockArgument
from ..ir.layouts_nvidia import wgmma_tiles
from ..ir.ops.mma_async import k_multiple, transposable
from ..ir.traits import PURE, has_trait
from ..ir.types import MemDescType, TensorType
from ..options import perf_switch
from ..target import has_feature
from . import ptx

SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}


def descriptor(start_address: int, lbo: int, sbo: int, swizzle: int, base_offset: int = 0) -> int:
    """The 64-bit wgmma matrix descriptor (byte quantities; the 16-byte units are applied here)."""
    fields = descriptor_fields(lbo, sbo, swizzle, base_offset)
    return fields | ((start_address & 0x3FFFF) >> 4)


def descriptor_fields(lbo: int, sbo: int, swizzle: int, base_offset: int = 0) -> int:
    """Everything but the start address: LBO and SBO in bytes (encoded >> 4, 14 bits each),
    base offset (3 bits) and the swizzle mode (2 bits)."""
    if sbo % 16 or sbo >> 4 >= 1 << 14 or lbo >> 4 >= 1 << 14:
        raise InternalCompilerError(f"wgmma descriptor offsets out of range: LBO={lbo}, SBO={sbo}")
    mode = SWIZZLE_MODE.get(swizzle, 0)
    return ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | ((base_offset & 7) << 49) | (mode << 62)


def operand_plan(view_type: MemDescType, strides, swizzle: int, is_b: bool, element, where, block=None) -> dict:
    """How to address operand A ([M, K]) or B ([K, N]): major-ness, descriptor fields and
    ``offset(mn, k)``, the C byte offset of element (mn, k) from the view's start.  ``block``
    (columns, elements per block) describes a column-blocked view (``rules_tlx.py``)."""
    k_dim, mn_dim = (0, 1) if is_b else (1, 0)
    row = None
    if strides[k_dim] == 1:
        trans, row = 0, strides[mn_dim] * element.bytes
    elif strides[mn_dim] == 1:
        trans, row = 1, strides[k_dim] * element.bytes
    if row is None or swizzle not in SWIZZLE_MODE or row != swizzle:
        name = "B" if is_b else "A"
        raise CompilationError(
            f"tlx.async_dot: operand {name} ({view_type}) must be a shared buffer whose rows (its contiguous "
            f"dimension) are 32, 64 or 128 bytes, or a multiple of 128 bytes stored as 128B-swizzled column "
            f"blocks, swizzled to match (got {row} -byte rows, swizzle {swizzle})", where)

    def contiguous(x: str) -> str:      # byte offset along the contiguous dim
        if block:
            cols, size = block
            return f"(({x}) / {cols}) * {size * element.bytes} + (({x}) % {cols}) * {element.bytes}"
        return f"({x}) * {element.bytes}"

    if trans == 0:      # K-major: rows along MN, S bytes apart; LBO unused ("assumed 1")
        fields = descriptor_fields(16, 8 * swizzle, swizzle)

        def offset(mn, k):
            return f"({mn}) * {swizzle} + {contiguous(k)}"
    else:               # MN-major: rows along K; LBO = distance of S-byte MN blocks
        lbo = block[1] * element.bytes if block else view_type.shape[k_dim] * swizzle
        fields = descriptor_fields(lbo, 8 * swizzle, swizzle)

        def offset(mn, k):
            return f"{contiguous(mn)} + ({k}) * {swizzle}"
    return {"trans": trans, "fields": fields, "offset": offset}


def _warpgroup_offsets(lw, layout) -> tuple[str, str]:
    """Row and column of this warpgroup's part of the accumulator (warp bits >= 2)."""
    terms = ([], [])
    for bit, basis in enumerate(layout.warp):
        if bit < 2:
            if tuple(basis) != ((16, 0), (32, 0))[bit]:
                raise InternalCompilerError(f"wgmma accumulator layout with warp bit {bit} = {list(basis)}")
            continue
        for dim in (0, 1):
            if basis[dim]:
                terms[dim].append(f"((({lw.scope.warp_var}) >> {bit}) & 1) * {basis[dim]}")
    return tuple(" + ".join(t) if t else "0" for t in terms)


@lowering("tlx.async_dot", vendor="nvidia")
def async_dot(lw, op):
    arch = lw.target.arch
    if has_feature(arch, "tcgen05"):
        raise CompilationError(f"tlx.async_dot with a register accumulator is Hopper's wgmma (sm_90a only); on "
                               f"{arch} the accumulator lives in tensor memory (tcgen05)", op.loc)
    if not has_feature(arch, "wgmma"):
        raise CompilationError(f"tlx.async_dot needs wgmma (sm_90a), not {arch}", op.loc)
    fused = op.attrs.get("fused_dot")
    if fused is not None:           # products issued as one instruction by the last (passes/dot_pairs.py)
        index, count = fused
        return None if index < count - 1 else _fused_products(lw, _fused_run(op, count))
    a, b, acc = op.operands[:3]
    result = op.results[0]
    element = b.type.element
    a_element = a.type.element          # differs from B's for mixed fp8 (e4m3 x e5m2) only
    a_in_registers = not isinstance(a.type, MemDescType)
    if a_in_registers and element.name == "f32":
        raise CompilationError(f"tlx.async_dot with {element} A in registers is not implemented yet (16-bit "
                               f"and fp8 inputs are); store A to a shared buffer (tlx.local_store) and pass the "
                               f"buffer", op.loc)
    k_step = k_multiple(element)
    if acc.type.element.name != "f32":
        raise CompilationError(f"tlx.async_dot with a {acc.type.element} accumulator is not implemented yet "
                               f"(f32 is)", op.loc)
    layout = result.type.layout
    plan_a = None if a_in_registers else operand_plan(a.type, lw.views[id(a)][1], lw.view_swizzle.get(id(a), 0),
                                                      False, a_element, op.loc, lw.view_block.get(id(a)))
    plan_b = operand_plan(b.type, lw.views[id(b)][1], lw.view_swizzle.get(id(b), 0), True, element, op.loc,
                          lw.view_block.get(id(b)))
    instr_n, tiles = wgmma_tiles(layout)
    per_tile = instr_n // 2
    total = registers(result.type)
    if total % per_tile or (instr_n not in range(8, 257, 8)):
        raise InternalCompilerError(f"wgmma accumulator layout {layout} does not split into m64n{instr_n} tiles",
                                    op.loc)
    if not transposable(element):           # (8-bit and tf32: K-major operands only)
        for name, operand, plan, major, hint in (
                ("A", a, plan_a, "M", "store A as [M, K]"),
                ("B", b, plan_b, "N", "store B as [N, K] and pass tlx.local_trans(b_buffer)")):
            if plan is not None and plan["trans"]:      # (plan None: A in registers)
                raise CompilationError(f"tlx.async_dot: wgmma reads {element} operands K-major only, but {name} "
                                       f"is {major}-major ({operand.type}); {hint}", op.loc)
    wg_row, wg_col = _warpgroup_offsets(lw, layout)
    k_steps = a.type.shape[1] // k_step

    work = lw.fresh("dacc")
    a_kind = "A in registers" if a_in_registers else f"A {'M' if plan_a['trans'] else 'K'}-major"
    lw.out.line(f"// wgmma: {len(tiles)} tile(s) of m64n{instr_n}k{k_step} x {k_steps} k-steps per warpgroup; "
                f"{a_kind}, B {'N' if plan_b['trans'] else 'K'}-major")
    lw.out.line(f"float {work}[{total}];")
    scale = lw.name(op.operands[3]) if op.attrs.get("has_use_acc") else "true"
    limit = op.attrs.get("max_num_imprecise_acc")
    if limit is not None and (a_in_registers or not element.is_float8):
        raise InternalCompilerError(f"max_num_imprecise_acc on a wgmma of {a.type} x {b.type}: fp8 operands from "
                                    f"shared memory only", op.loc)
    if limit is not None and op.attrs.get("has_use_acc"):
        lw.for_registers(total, f"{work}[i] = ({scale}) ? {lw.ref(acc)} : 0.0f;")
    else:
        lw.for_registers(total, f"{work}[i] = {lw.ref(acc)};")
    mixed = f"_{element.name}" if a_element != element else ""
    helper = f"tlx_wgmma_m64n{instr_n}k{k_step}_f32_{a_element.name}{mixed}" + ("_rs" if a_in_registers else "")
    for name in (helper, "tlx_wgmma_desc", "tlx_wgmma_fence", "tlx_wgmma_commit_group"):
        lw.target.use(name)
    a_bytes = None if a_in_registers else f"reinterpret_cast<unsigned char*>({lw.views[id(a)][0]})"
    b_bytes = f"reinterpret_cast<unsigned char*>({lw.views[id(b)][0]})"
    a_regs = _register_a_fragments(lw, a, k_steps, {row for row, _ in tiles},
                                   op.attrs.get("a_k_order") == "accumulator") if a_in_registers else None
    fresh = a_in_registers and loop_invariant(a, op)     # (_pinned: ptxas 13.0)
    if limit is not None:
        _split_accumulation(lw, helper, work, tiles, per_tile, k_steps, k_step, max(1, -(-limit // k_step)),
                            (wg_row, wg_col), (a_bytes, plan_a), (b_bytes, plan_b))
        lw.alias(result, work)
        return
    if not a_in_registers:      # register A: a fence before each MMA, after its packed A (below)
        lw.out.line("tlx_wgmma_fence();")
    b_major = f"<{plan_b['trans']}>" if transposable(element) else ""     # (8-bit: K-major B, no TB)
    for t, (row, col) in enumerate(tiles):
        m0 = f"{wg_row} + {row}" if row else wg_row
        n0 = f"{wg_col} + {col}" if col else wg_col
        def db(k: str, n0=n0) -> str:
            return f"tlx_wgmma_desc({b_bytes}, {plan_b['offset'](n0, k)}, {plan_b['fields']:#x}ull)"
        if a_in_registers and rs_group(lw):     # every k step's A packed first, one fence for the group
            pinned = [", ".join(_pinned(lw, a_regs[row, kk], fresh)) for kk in range(k_steps)]
            lw.out.line("tlx_wgmma_fence();")
            for kk in range(k_steps):
                lw.out.line(f"{helper}{b_major}(&{work}[{t * per_tile}], {pinned[kk]}, "
                            f"{db(str(k_step * kk))}, {f'(int)({scale})' if kk == 0 else '1'});")
            continue
        if a_in_registers:      # the k steps unrolled here: each names its own A registers
            for kk in range(k_steps):
                regs = ", ".join(_pinned(lw, a_regs[row, kk], fresh))
                lw.out.line("tlx_wgmma_fence();")
                lw.out.line(f"{helper}{b_major}(&{work}[{t * per_tile}], {regs}, "
                            f"{db(str(k_step * kk))}, {f'(int)({scale})' if kk == 0 else '1'});")
            continue
        _shared_k_steps(lw, helper, element, f"&{work}[{t * per_tile}]", (a_bytes, plan_a, m0),
                        (b_bytes, plan_b, n0), k_steps, k_step, scale)
    lw.out.line("tlx_wgmma_commit_group();")
    lw.alias(result, work)


def _shared_k_steps(lw, helper, element, d, a, b, k_steps, k_step, scale) -> None:
    """One accumulator tile's ``m64nNkK`` over ``k_steps`` with both operands in shared memory:
    ``a`` / ``b`` are (bytes pointer, operand plan, first row / column of the tile)."""
    (a_bytes, plan_a, m0), (b_bytes, plan_b, n0) = a, b
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int kk = 0; kk < {k_steps}; ++kk)")
    da = f"tlx_wgmma_desc({a_bytes}, {plan_a['offset'](m0, f'{k_step} * kk')}, {plan_a['fields']:#x}ull)"
    db = f"tlx_wgmma_desc({b_bytes}, {plan_b['offset'](n0, f'{k_step} * kk')}, {plan_b['fields']:#x}ull)"
    majors = f"<{plan_a['trans']}, {plan_b['trans']}>" if transposable(element) else ""
    lw.out.line(f"{helper}{majors}({d}, {da}, {db}, kk == 0 ? (int)({scale}) : 1);")
    lw.out.close()


def _fused_run(last, count: int) -> list:
    """The ``count`` products ``fuse-dot-pairs`` fused, ``last`` the last of them, in issue order."""
    block = last.parent
    run = [op for op in block.ops[:block.ops.index(last) + 1] if op.name == "tlx.async_dot"][-count:]
    if [op.attrs.get("fused_dot") for op in run] != [(i, count) for i in range(count)]:
        raise InternalCompilerError("fuse-dot-pairs: the products before a fused last one are not its run",
                                    last.loc)
    return run


def _fused_products(lw, run):
    """Products on one A whose B buffers sit side by side (``passes/dot_pairs.py``): one
    ``m64n(N1+N2+...)`` per row tile and k step, B read from the first buffer on; the
    instruction's registers are the first accumulator's tile, then the second's, ... (the
    fragment's registers go along N eight columns at a time)."""
    first = run[0]
    a, b1 = first.operands[:2]
    element, a_element = b1.type.element, a.type.element
    if element.name == "f32" or element != a_element:
        raise InternalCompilerError(f"fuse-dot-pairs on {a.type} x {b1.type}", first.loc)
    k_step = k_multiple(element)
    plan_a = operand_plan(a.type, lw.views[id(a)][1], lw.view_swizzle.get(id(a), 0), False, element, first.loc,
                          lw.view_block.get(id(a)))
    plan_b = operand_plan(b1.type, lw.views[id(b1)][1], lw.view_swizzle.get(id(b1), 0), True, element, first.loc,
                          lw.view_block.get(id(b1)))
    if plan_b["trans"]:
        raise InternalCompilerError("fuse-dot-pairs: an N-major B", first.loc)
    widths = [wgmma_tiles(op.results[0].type.layout)[0] for op in run]
    tiles = wgmma_tiles(first.results[0].type.layout)[1]
    per = [w // 2 for w in widths]                  # each product's registers per row tile
    step = sum(per)
    n = sum(widths)
    wg_row, wg_col = _warpgroup_offsets(lw, first.results[0].type.layout)
    k_steps = a.type.shape[1] // k_step
    helper = f"tlx_wgmma_m64n{n}k{k_step}_f32_{element.name}"
    for name in (helper, "tlx_wgmma_desc", "tlx_wgmma_fence", "tlx_wgmma_commit_group"):
        lw.target.use(name)
    work = lw.fresh("dacc")
    lw.out.line(f"// wgmma: {len(tiles)} tile(s) of m64n{n}k{k_step} x {k_steps} k-steps per warpgroup: "
                f"{len(run)} products on one A (n{' + n'.join(map(str, widths))}, B buffers side by side); "
                f"A {'M' if plan_a['trans'] else 'K'}-major, B K-major")
    lw.out.line(f"float {work}[{len(tiles) * step}];")
    for t in range(len(tiles)):
        at = t * step
        for op, p in zip(run, per):
            lw.out.line("#pragma unroll")
            lw.out.line(f"for (int i = 0; i < {p}; ++i) {work}[{at} + i] = {lw.name(op.operands[2])}[{t * p} + i];")
            at += p
    a_bytes = f"reinterpret_cast<unsigned char*>({lw.views[id(a)][0]})"
    b_bytes = f"reinterpret_cast<unsigned char*>({lw.views[id(b1)][0]})"
    lw.out.line("tlx_wgmma_fence();")
    for t, (row, _) in enumerate(tiles):
        m0 = f"{wg_row} + {row}" if row else wg_row
        _shared_k_steps(lw, helper, element, f"&{work}[{t * step}]", (a_bytes, plan_a, m0), (b_bytes, plan_b, wg_col),
                        k_steps, k_step, "true")
    lw.out.line("tlx_wgmma_commit_group();")
    offset = 0
    for op, p in zip(run, per):
        out = lw.fresh("dacc")
        lw.out.line(f"float {out}[{len(tiles) * p}];")
        for t in range(len(tiles)):
            lw.out.line("#pragma unroll")
            lw.out.line(f"for (int i = 0; i < {p}; ++i) {out}[{t * p} + i] = {work}[{t * step + offset} + i];")
        lw.alias(op.results[0], out)
        offset += p


def _split_accumulation(lw, helper, work, tiles, per_tile, k_steps, k_step, run, wg, a_operand, b_operand):
    """fp8 with ``max_num_imprecise_acc``: per accumulator tile, runs of ``run`` k steps into a
    zeroed scratch tile, each retired (``wait_group 0``) and added to ``work`` in float32."""
    (a_bytes, plan_a), (b_bytes, plan_b) = a_operand, b_operand
    part = lw.fresh("dpart")
    lw.target.use("tlx_wgmma_wait_group")
    lw.out.line(f"// max_num_imprecise_acc: runs of {run} k-step(s) of {k_step}, each added in float32")
    lw.out.line(f"float {part}[{per_tile}];")
    lw.for_registers(per_tile, f"{part}[i] = 0.0f;")
    for t, (row, col) in enumerate(tiles):
        m0 = f"{wg[0]} + {row}" if row else wg[0]
        n0 = f"{wg[1]} + {col}" if col else wg[1]
        for first in range(0, k_steps, run):
            lw.out.line("tlx_wgmma_fence();")
            lw.out.line("#pragma unroll")
            lw.out.open(f"for (int kk = {first}; kk < {min(first + run, k_steps)}; ++kk)")
            da = f"tlx_wgmma_desc({a_bytes}, {plan_a['offset'](m0, f'{k_step} * kk')}, {plan_a['fields']:#x}ull)"
            db = f"tlx_wgmma_desc({b_bytes}, {plan_b['offset'](n0, f'{k_step} * kk')}, {plan_b['fields']:#x}ull)"
            lw.out.line(f"{helper}(&{part}[0], {da}, {db}, kk == {first} ? 0 : 1);")
            lw.out.close()
            lw.out.line("tlx_wgmma_commit_group();")
            lw.out.line(f"tlx_wgmma_wait_group<0, {per_tile}>({part});")
            lw.for_registers(per_tile, f"{work}[{t * per_tile} + i] += {part}[i];")


RS_GROUP_BUDGET = 232      # the smallest task budget (setmaxnreg) TLXC_WGMMA_RS_GROUP=1 acts in


def rs_group(lw) -> bool:
    """``TLXC_WGMMA_RS_GROUP=1`` (a PERF_SWITCHES entry, off by default; for A/B measurements):
    register A in a task of at least ``RS_GROUP_BUDGET`` registers packs and pins every k step's
    four registers first, then one ``wgmma.fence`` covers all the MMAs.  ptxas then keeps the
    product one group (``gsb0`` on its last HGMMA only), so a later ``wait_group 1`` waits for the
    groups before it alone.  With a fence per k step (below, the default) each HGMMA is its own
    group (a ``WARPGROUP.ARRIVE`` before each, ``gsb0`` on every one) and the attention forward's
    ``wait_group 1`` after ``S_j`` (``WARPGROUP.DEPBAR.LE gsb0, 0x1``) also waits for 7 of the
    8 k steps of ``P_{j-1} V``: the softmax of ``S_j`` does not overlap that product.  Spills
    (sm_90a, ptxas 13.5): attention forward defaults 0 -> 0; the backward ws kernel 0-1 -> 4
    bytes (D = 64), 8-12 -> 12 (D = 128); three 160-register consumers: 564 bytes (hence the
    budget floor)."""
    return perf_switch("TLXC_WGMMA_RS_GROUP") and lw.scope.budget >= RS_GROUP_BUDGET


def loop_invariant(value, op) -> bool:
    """Whether ``value`` is the same on every iteration of the innermost loop around ``op``:
    defined outside it, or computed inside it by pure ops (``ir/traits.py``: ``PURE``) from
    such values alone (the device compiler may hoist those).  False outside any loop."""
    loop = op.parent_op()
    while loop is not None and loop.name not in ("scf.for", "scf.while"):
        loop = loop.parent_op()
    return loop is not None and _invariant_in(value, loop)


def _inside(op, loop) -> bool:
    while op is not None:
        if op is loop:
            return True
        op = op.parent_op()
    return False


def _invariant_in(value, loop) -> bool:
    if isinstance(value, BlockArgument):        # an argument of the loop's (or a nested op's) block varies
        block = value.owner
        return not _inside(block.parent.parent if block.parent is not None else None, loop)
    owner = value.owner
    if not _inside(owner, loop):
        return True
    return has_trait(owner, PURE) and all(_invariant_in(v, loop) for v in owner.operands)


def _pinned(lw, halves: list[tuple[str, str]], fresh: bool = False) -> list[str]:
    """One MMA's A registers (register A), packed into an ``unsigned`` array and pinned by
    empty asm statements that "rewrite" them, so that the ``wgmma.fence`` emitted next
    follows every instruction that writes them.

    ``fresh`` (A is loop-invariant: ``loop_invariant``): rewritten instead in place by
    ``tlx_fresh_registers`` (an identity ``prmt`` per register) and the two halves stored back
    into the operand's elements, so the operand is a loop-carried value that an instruction in
    the loop defines (a copy beside the invariant instead spilled the D = 256 decode kernel:
    64 more registers of Q at 255).
    With the pin alone ptxas 13.0 (NVRTC 13.0, the H200 machine's) kept the invariant
    fragment in fixed registers across the loop and reused them for the loop's other
    register-A fragment: the decode split kernel with the length mask on the last block only
    (``_variant=4``) multiplied K by the previous block's P instead of Q from the second block
    on (SASS: ``F2FP.BF16.F32.PACK_AB R88`` .. ``R103`` for P V, read again by the next
    Q K^T HGMMA); ptxas 13.5 copies Q into the MMA's registers each iteration (the same
    MOVs; with ``prmt`` PRMTs in their place).

    PTX wants the fence after the register writes an MMA reads.  Packed inline into the MMA
    call (after one fence for all k steps, as before), the packing ran between the fence
    and the MMAs; ptxas then inserted its own warpgroup arrive after it, and where that
    arrive followed a barrier wait (a try-wait loop) it serialized every wgmma of the kernel
    (note C7519: TLX's hopper_fa_ws tutorial, two consumer groups).  Packing all k steps
    before one fence fixed that but kept 32 more registers live across the MMAs (spills in
    the pipelined attention tutorials); a fence per MMA after its own four registers does
    neither."""
    if isinstance(halves, A8Words):     # 8-bit elements: the source words of tlx_wgmma_a8_fragment
        return _exchanged_a8(lw, halves, fresh)
    if isinstance(halves, A8Fragment):  # 8-bit, a_k_order="accumulator": the fragment's own words
        return _pin_words(lw, list(halves), fresh)
    packed = [f"((unsigned)({lo}) & 0xFFFFu) | ((unsigned)({hi}) << 16)" for lo, hi in halves]
    regs = _pin_words(lw, packed, fresh)
    if fresh:       # written back: the operand's registers become loop-carried, no second copy of them
        for reg, (lo, hi) in zip(regs, halves):
            lw.out.line(f"{lo} = (unsigned short)({reg}); {hi} = (unsigned short)({reg} >> 16);")
    return regs


def _pin_words(lw, words: list[str], fresh: bool) -> list[str]:
    """``words`` (an MMA's A registers) in an ``unsigned`` array pinned by ``tlx_pin_registers``,
    or (``fresh``) rewritten in place by ``tlx_fresh_registers``; the array's elements."""
    name = lw.fresh("afrag")
    lw.out.line(f"unsigned {name}[{len(words)}] = {{{', '.join(words)}}};")
    pin = "tlx_fresh_registers" if fresh else "tlx_pin_registers"
    lw.target.use(pin)
    lw.out.line(f"{pin}<{len(words)}>({name});")
    return [f"{name}[{i}]" for i in range(len(words))]


class A8Words(tuple):
    """The four source words (C expressions) of one 8-bit k32 fragment (``tlx_wgmma_a8_fragment``)."""


class A8Fragment(tuple):
    """The four registers (C expressions) of one 8-bit k32 fragment read in the accumulator's
    in-thread order (``a_k_order="accumulator"``): no exchange."""


def _exchanged_a8(lw, words: A8Words, fresh: bool) -> list[str]:
    """One k32 step's A registers of 8-bit elements: the four words of this thread's bytes in
    the accumulator pattern (``_register_a8_words``) exchanged within the quad by
    ``tlx_wgmma_a8_fragment``, then pinned (the fence after them, as ``_pinned``).  ``fresh``
    (a loop-invariant A): the source words are rewritten by ``tlx_fresh_registers`` so that
    the exchange is not hoisted out of the loop (its results are then never loop-invariant
    registers; see ``_pinned``)."""
    src = lw.fresh("a8src")
    lw.out.line(f"unsigned {src}[4] = {{{', '.join(words)}}};")
    if fresh:
        lw.target.use("tlx_fresh_registers")
        lw.out.line(f"tlx_fresh_registers<4>({src});")
    name = lw.fresh("afrag")
    lw.target.use("tlx_wgmma_a8_fragment")
    lw.target.use("tlx_pin_registers")
    lw.out.line(f"unsigned {name}[4]; tlx_wgmma_a8_fragment({src}[0], {src}[1], {src}[2], {src}[3], {name});")
    lw.out.line(f"tlx_pin_registers<4>({name});")
    return [f"{name}[{i}]" for i in range(4)]


def _register_a_fragments(lw, a, k_steps: int, tile_rows, ordered: bool = False) -> dict:
    """wgmma's A operand from registers (16-bit inputs): per (tile row, k step), the four
    32-bit registers a0..a3 as their (low, high) elements of ``a``.  Thread (lane l)
    holds rows g = l/4 and g + 8 and columns 2(l%4) + {0, 1} and + 8 of each 64 x 16 step,
    in the order a0 = (g, c), a1 = (g + 8, c), a2 = (g, c + 8), a3 = (g + 8, c + 8) -- the
    accumulator's own pattern, which is why layout inference gives ``a`` the accumulator
    layout of [M, K].  Found by evaluating the layout for thread 0 (lanes and warps add
    the same offset to every register)."""
    layout = a.type.layout
    where = {tuple(layout.apply(register=r)): r for r in range(layout.num_registers)}
    fragments = {}
    name = lw.name(a)
    if a.type.element.bits == 8:
        return _register_a8_words(lw, a, k_steps, tile_rows, where, ordered)
    for row in tile_rows:
        for kk in range(k_steps):
            regs = []
            for dr, dc in ((0, 0), (8, 0), (0, 8), (8, 8)):
                lo, hi = (where.get((row + dr, 16 * kk + dc + i)) for i in (0, 1))
                if lo is None or hi is None:
                    raise InternalCompilerError(f"wgmma register A: layout {layout} does not hold the fragment "
                                                f"of rows {row}+, k step {kk}")
                regs.append((f"{name}[{lo}]", f"{name}[{hi}]"))
            fragments[row, kk] = regs
    return fragments


def _register_a8_words(lw, a, k_steps: int, tile_rows, where: dict, ordered: bool = False) -> dict:
    """8-bit register A (fp8, k32 steps): ``a`` has the same accumulator layout as a 16-bit A,
    which does not hold wgmma's 8-bit fragment (four consecutive K elements per register) in
    one thread.  Per (tile row, k step), the four source words of ``tlx_wgmma_a8_fragment``
    (the step's 16-column half h, its 8-column part m): this thread's elements (row, 8m + c),
    (row, 8m + c + 1), (row + 8, 8m + c), (row + 8, 8m + c + 1), c = 32 kk + 16 h + the
    thread's own column offset (found at thread 0), lowest byte first.  When ``a`` is the cast
    of float32 values (attention's ``p.to(fp8)``) the words are converted from those floats
    directly, two elements per ``cvt`` (``tlx_cvt_rn_satfinite_<type>x4_f32``; the cast's own
    one-element conversions are then dead code).  ``ordered`` (``a_k_order="accumulator"``): the
    fragment's registers themselves, row (r, r + 8) by half h: this thread's columns 16h + {0, 1,
    8, 9} (+ its own offset), which ``k32_accumulator_order`` assigns to positions 16h + 4q + {0..3}."""
    cast = a.owner if getattr(a.owner, "name", None) == "arith.cast" else None
    source = cast.operands[0] if cast is not None else None
    if source is not None and source.type.element.name == "f32" and source.type.layout == a.type.layout:
        convert = f"tlx_cvt_rn_satfinite_{ptx.WGMMA_INPUTS[a.type.element.name][0]}x4_f32"
        lw.target.use(convert)

        def word(regs):
            return f"{convert}({', '.join(lw.ref(source, r) for r in regs)})"
    else:
        name = lw.name(a)

        def word(regs):
            return " | ".join(f"((unsigned)({name}[{r}]) << {8 * i})" if i else f"(unsigned)({name}[{r}])"
                              for i, r in enumerate(regs))
    fragments = {}
    for row in tile_rows:
        for kk in range(k_steps):
            if ordered:             # a0 .. a3: (row, h0), (row + 8, h0), (row, h1), (row + 8, h1)
                regs = [[where.get((row + dr, 32 * kk + 16 * half + dc)) for dc in (0, 1, 8, 9)]
                        for half in (0, 1) for dr in (0, 8)]
                if any(None in r for r in regs):
                    raise InternalCompilerError(f"wgmma register A: layout {a.type.layout} does not hold the "
                                                f"8-bit fragment of rows {row}+, k step {kk}")
                fragments[row, kk] = A8Fragment(word(r) for r in regs)
                continue
            words = []
            for half in (0, 1):
                for part in (0, 1):
                    col = 32 * kk + 16 * half + 8 * part
                    regs = [where.get((row + dr, col + dc)) for dr in (0, 8) for dc in (0, 1)]
                    if None in regs:
                        raise InternalCompilerError(f"wgmma register A: layout {a.type.layout} does not hold the "
                                                    f"8-bit fragment of rows {row}+, k step {kk}")
                    words.append(word(regs))
            fragments[row, kk] = A8Words(words)
    return fragments


@lowering("tlx.async_dot_wait", vendor="nvidia")
def async_dot_wait(lw, op):
    src, result = op.operands[0], op.results[0]
    lw.out.line(wgmma_wait_line(lw, op.attrs["pendings"], src))
    if op.attrs.get("epilogue"):
        lw.out.line(PIN_MARK)
    lw.alias(result, lw.name(src))


# An epilogue's wait (``pipeline-loads``: ``async_dot_wait {pendings = 0, epilogue}`` at the top of
# the ``if`` that reads an accumulator whose wgmma is still in flight) must stay the first
# arithmetic of its basic block: ptxas 13.x serializes every wgmma of the kernel (C7514) when
# any ALU instruction precedes it there, and LLVM sinks the address arithmetic of the block's
# shared/global accesses that derives from the kernel's thread coordinates (``tid``, ``lane``,
# ``warp``, ``tcN``/``tfN``: loop-invariant, used only in the block) to the block's top.  So the
# coordinates the rest of the block reads are re-bound after the wait through an opaque copy
# the arithmetic must follow (``ptx.opaque_int``), and ``tid`` is made opaque where it is read, so that
# ``mov %tid.x`` is not rematerialized there either (``pin_thread_values``).
PIN_MARK = "// tlxc: thread coordinates re-bound here (an epilogue's wgmma wait)"
_COORDINATE = re.compile(r"\b(tid|lane|warp|t[cf]\d+)\b")


def pin_thread_values(lw, lines: list[str]) -> tuple[list[str], bool]:
    """``lines`` with each ``PIN_MARK`` replaced by the re-binding of the thread coordinates the
    rest of its block reads; True when there was one (the kernel then pins ``tid``)."""
    if not any(line.strip() == PIN_MARK for line in lines):
        return lines, False
    known = {"tid", "lane", "warp"} | {name for scope in lw.scopes for name in scope.thread_terms.values()}
    out = list(lines)
    for at in reversed([i for i, line in enumerate(out) if line.strip() == PIN_MARK]):
        indent = out[at][:len(out[at]) - len(out[at].lstrip())]
        end = at + 1
        while end < len(out) and (not out[end].strip() or out[end].startswith(indent)):
            end += 1
        names = sorted({m for line in out[at + 1:end] for m in _COORDINATE.findall(line)} & known)
        out[at:at + 1] = [f"{indent}int {n}__pin = {n}; {ptx.opaque_int(n + '__pin')} const int {n} = {n}__pin;"
                          for n in names]
    return out, True


def wgmma_wait_line(lw, pendings: int, acc, name: str | None = None) -> str:
    """``wgmma.wait_group pendings``, pinning the f32 accumulator ``acc`` (C variable ``name``,
    default its own) after it: no read of its registers moves above the wait."""
    lw.target.use("tlx_wgmma_wait_group")
    if isinstance(acc.type, TensorType) and acc.type.element.name == "f32":
        return f"tlx_wgmma_wait_group<{pendings}, {registers(acc.type)}>({name or lw.name(acc)});"
    return f"tlx_wgmma_wait_group<{pendings}, 0>(nullptr);"


__all__ = ["PIN_MARK", "descriptor", "descriptor_fields", "operand_plan", "pin_thread_values", "wgmma_wait_line"]
