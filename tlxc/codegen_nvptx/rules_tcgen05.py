"""Lowering of Blackwell's tensor memory and MMA (tcgen05, sm_100a).

Tensor memory (TMEM)
--------------------
A kernel with ``tlx.local_alloc(..., storage=tmem)`` buffers allocates
``kernel.attrs.tmem_columns`` columns once (``allocate_tensor_memory``, at the
first such allocation, which is top-level code every warp runs): warp 0 runs
``tcgen05.alloc`` (the hardware writes the base address into a shared word of
the kernel's reserved ``tlx_tcgen05_area``) and ``relinquish_alloc_permit``;
a CTA barrier and ``tcgen05.fence::after_thread_sync`` later every thread reads
the base.  At the kernel's end (``lw.epilogue``, after every task joined)
every thread fences (``before_thread_sync``), a CTA barrier, and warp 0
fences (``after_thread_sync``) and runs ``tcgen05.dealloc``.  Every tcgen05 op
must be complete by then: a kernel waits for its MMAs (their barriers) before
it reads the accumulator, which is the only way to use one.

A TMEM view is a C ``unsigned`` holding its TMEM address, ``(lane << 16) |
column``: buffer ``j`` of an allocation is ``base + attrs.column + j * N``; a
``local_slice`` (whole rows, constant column offset) adds its column.

``tlx.local_load`` / ``local_store`` use the ``32x32b`` shape: warp ``w`` of a
4-warp task reaches lanes ``32 * (w % 4) ..`` (the hardware fixes this by the
warp's id modulo 4, so the task must start at a warp that is a multiple of
4), each thread one lane (= one row) and ``.xN`` consecutive columns, which
is ``ir/layouts_nvidia.py:tmem_layout``.  A 64-row buffer (an M = 64
accumulator: PTX's data-path layout F, row ``16 * w + i`` at lane ``32 * w + i``,
``i < 16``) uses ``16x32bx2``: lanes 0-15 of warp ``w`` read their row's first
half of the columns, lanes 16-31 the same rows ``immHalfSplitoff`` = half the
columns further (lanes 16-31 of each warp's 32 stay unused by such a buffer).  Loads are ``tcgen05.ld`` chunks of at most
128 columns then ``tcgen05.wait::ld`` (whose helper pins the registers after
the wait); stores are ``tcgen05.st`` then ``tcgen05.wait::st``.

MMA
---
``tlx.tcgen05_mma`` (``M = 128`` or 64, ``cta_group::1``) is issued by one thread,
the task's thread 0 (``tlx.tcgen05_commit`` uses the same one: a commit
tracks the MMAs of the thread that issues it): K / k instructions
(k = 16 bf16/f16 ``kind::f16``, 8 tf32 ``kind::tf32``, 32 fp8
``kind::f8f6f4``), the first with ``enable-input-d = use_acc``, the rest
accumulating; then one ``tcgen05.commit ... mbarrier::arrive::one`` per
barrier operand.  A false ``pred`` issues nothing (no MMA, no arrival).
A synchronous MMA (``attrs.sync``) commits to a barrier of its own in the
reserved area, thread 0 waits for it (a phase bit in a local variable), then
the task syncs and fences ``after_thread_sync``: only the issuing thread ever
waits on that barrier, so no phase can be missed.

Block-scaled MMAs (``attrs.scale_formats``, ``tlx.async_dot_scaled``, mxfp8): the issuing
thread copies the scales from shared memory to the op's tensor-memory columns
(``attrs.scale_column``, ``_copy_scales``: ``tcgen05.cp .32x128b.warpx4``) and issues one
``kind::mxf8f6f4.block_scale.scale_vec::1X`` MMA per K step of 32 with that step's scale
columns and byte (the scale-factor IDs of ``scaled_instruction_descriptor``).

2-CTA MMAs (``attrs.two_ctas``, ``cta_group::2``): the kernel's every tcgen05
instruction names ``cta_group::2`` (``cta_group``; alloc and dealloc by warp 0 of
each CTA); the even CTA of each pair issues one MMA of M = 256 and N = twice its
B buffer's columns with its own descriptors and accumulator address (the
hardware reads the odd CTA's A rows and B columns, and writes its accumulator
rows, at the same places there); the odd CTA issues nothing.  Each completion
barrier gets ``tcgen05.commit.cta_group::2 ... multicast::cluster`` with the
pair's CTA mask, as does ``tcgen05_commit(..., two_ctas=True)``.

Shared matrix descriptors (PTX ISA 9.7.16.4.1): start address >> 4 (bits
0-13), LBO >> 4 (16-29), SBO >> 4 (32-45), the fixed 0b001 (46-48), base offset
(49-51, 0: tiles start in phase with the swizzle), LBO mode 0 (52, relative),
swizzle mode (61-63: 0 none, 1 128B with 32B atoms, 2 128B, 4 64B, 6 32B).
LBO and SBO mean what they mean for wgmma (9.7.16.3 and 9.7.15.5.1.2), so
``rules_mma_async.operand_plan`` derives them, and the start-address offset of
every k step, from the canonical layouts; only the fixed bits and the swizzle
encoding are re-done here (``descriptor_fields``).

Instruction descriptor (9.7.16.4.2, ``kind::f16/tf32/f8f6f4``): D type (4-5,
F32 = 1), A type (7-9) and B type (10-12) (f16 0, bf16 1, tf32 2, e4m3 0,
e5m2 1), transpose A (15, 1 = M-major) and B (16, 1 = N-major), N >> 3
(17-22), M >> 4 (24-28); sparsity, saturation, negation and shift stay 0.
MN-major tf32 needs the 128B swizzle with 32-byte atoms (9.7.16.10.1), which
no tlxc buffer has: it is refused.

Fences (PTX ISA 9.7.16.6): a task that issues tcgen05 MMAs or reads/writes
TMEM fences ``after_thread_sync`` after each of its mbarrier (and named
barrier) waits; a task that reads/writes TMEM fences ``before_thread_sync``
before each of its arrives (``tcgen05.commit`` fences implicitly).  When the
task issuing an MMA itself accessed TMEM or wrote shared memory from
registers, its threads sync (with both fences) before thread 0 issues.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..codegen_c import c_types as C
from ..codegen_c.lower import lowering, registers
from ..errors import CompilationError, InternalCompilerError
from ..ir import layouts_nvidia as N
from ..ir.ops.tcgen05 import TMEM_COLUMNS, k_step, tmem_columns
from ..ir.traits import TCGEN05_MMA, has_trait
from ..ir.types import MemDescType
from ..target import has_feature
from .rules_mma_async import operand_plan

AREA = "tlx_tcgen05_area"           # reserved shared memory: the TMEM base word, then the sync barriers
BASE = "tlx_tmem_base"
SYNC_BARRIERS = "tlx_mma_sync_bar"
SYNC_BARRIER_OFFSET = 8
MAX_LDST_COLUMNS = 128               # tcgen05.ld/st .32x32b.x128: the widest access

SWIZZLE_MODE = {128: 2, 64: 4, 32: 6}       # descriptor bits 61-63 (sm_100 encoding)
DESCRIPTOR_VERSION = 1 << 46                # the fixed 0b001 of bits 46-48
# tlxc element name -> (.kind, A/B type code of the instruction descriptor)
INPUTS = {"f16": ("f16", 0), "bf16": ("f16", 1), "f32": ("tf32", 2), "f8e4m3": ("f8f6f4", 0),
          "f8e5m2": ("f8f6f4", 1)}
D_TYPE_F32 = 1


@dataclass
class Tcgen05State:
    """What the rules of one kernel share: the sync-MMA barriers and each scope's tcgen05 use."""
    allocated: bool = False
    group: int | None = None                                        # the kernel's .cta_group (1 or 2)
    sync_barriers: dict[int, int] = field(default_factory=dict)     # id(sync tcgen05_mma) -> barrier index
    scope_uses: dict[str, set[str]] = field(default_factory=dict)   # scope key -> uses (see _uses_of)


def _state(lw) -> Tcgen05State:
    return lw.rule_state.setdefault("tcgen05", Tcgen05State())


def require_tcgen05(lw, op) -> None:
    arch = lw.target.arch
    if not has_feature(arch, "tcgen05"):
        raise CompilationError(f"{op.name} needs Blackwell's tensor memory and tcgen05 instructions (sm_100a); "
                               f"they do not exist on {arch}", op.loc)


def cta_group(lw) -> int:
    """The kernel's ``.cta_group``: 2 when its tcgen05 MMAs are the CTA pair's
    (``two_ctas=True``; the frontend keeps a kernel to one kind), else 1."""
    state = _state(lw)
    if state.group is None:
        state.group = 2 if any(o.attrs.get("two_ctas") for o in lw.kernel.walk()
                               if has_trait(o, TCGEN05_MMA)) else 1
    return state.group


def _pair_mask(lw) -> str:
    """The CTA mask of this CTA's pair (ranks 2i, 2i + 1 of the cluster)."""
    return f"(unsigned short)(3u << ({lw.target.expr('tlx_cluster_ctarank')} & ~1))"


# -- encodings -----------------------------------------------------------------------------
def descriptor_fields(lbo: int, sbo: int, swizzle: int) -> int:
    """Every field of a tcgen05 shared-memory descriptor but the start address (byte
    quantities; encoded >> 4, 14 bits each)."""
    if swizzle not in SWIZZLE_MODE or lbo % 16 or sbo % 16 or lbo >> 4 >= 1 << 14 or sbo >> 4 >= 1 << 14:
        raise InternalCompilerError(f"tcgen05 descriptor out of range: LBO={lbo}, SBO={sbo}, swizzle={swizzle}")
    return ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | DESCRIPTOR_VERSION | (SWIZZLE_MODE[swizzle] << 61)


def _from_wgmma_fields(fields: int, swizzle: int) -> int:
    """The tcgen05 fields with the LBO and SBO of ``operand_plan``'s wgmma fields."""
    lbo = ((fields >> 16) & 0x3FFF) << 4
    sbo = ((fields >> 32) & 0x3FFF) << 4
    return descriptor_fields(lbo, sbo, swizzle)


def instruction_descriptor(element, m: int, n: int, a_mn_major: int, b_mn_major: int) -> int:
    """The 32-bit instruction descriptor of ``kind::f16/tf32/f8f6f4`` with an f32 accumulator."""
    _, code = INPUTS[element.name]
    return ((D_TYPE_F32 << 4) | (code << 7) | (code << 10) | (a_mn_major << 15) | (b_mn_major << 16)
            | ((n >> 3) << 17) | ((m >> 4) << 24))


def scaled_instruction_descriptor(a_element, b_element, m: int, n: int, a_mn_major: int, b_mn_major: int) -> int:
    """The 32-bit instruction descriptor of ``kind::mxf8f6f4`` (block-scaled fp8, ue8m0 scales):
    A type (7-9) and B type (10-12) (e4m3 0, e5m2 1), transpose A (15) and B (16), N >> 3
    (17-22), the scale type UE8M0 (23 = 1), M >> 7 (27-28); the scale-factor IDs (A's bits
    29-30, B's 4-5: which byte of each scale column) are 0 here and set per K step."""
    return ((INPUTS[a_element.name][1] << 7) | (INPUTS[b_element.name][1] << 10) | (a_mn_major << 15)
            | (b_mn_major << 16) | ((n >> 3) << 17) | (1 << 23) | ((m >> 7) << 27))


def _copy_scales(lw, op, out) -> tuple[str, str, int]:
    """A block-scaled MMA's scale copies (``tcgen05.cp .32x128b.warpx4``, issued by the MMA's
    thread before its MMAs): A's chunks at ``attrs.scale_column`` + 4 * kc, B's row block rb
    of chunk kc at + 4 * rep_k + 4 * (kc * rep_n + rb), each 512-byte chunk 32 rows of 16
    bytes (no swizzle: SBO 128 between 8-row core matrices).  Returns the TMEM address
    expressions of A's and B's scales for K chunk 0 and B's columns per K chunk."""
    a_scale, b_scale = op.scales
    rep_k, rep_n = a_scale.type.shape[2], b_scale.type.shape[1]
    first = op.attrs["scale_column"]
    fields = (0 << 16) | ((128 >> 4) << 32) | DESCRIPTOR_VERSION       # no swizzle, SBO 128 bytes
    lw.target.use("tlx_wgmma_desc")
    helper = "tlx_tcgen05_cp_32x128b_warpx4"
    out.line(f"// the scales to tensor memory (columns {first}..{first + 4 * rep_k * (1 + rep_n) - 1}): "
             f"tcgen05.cp, in order with the MMAs below")
    for which, view, blocks, column in (("A", a_scale, 1, first), ("B", b_scale, rep_n, first + 4 * rep_k)):
        src = f"reinterpret_cast<unsigned char*>({lw.views[id(view)][0]})"
        for kc in range(rep_k):
            for rb in range(blocks):
                chunk = (rb * rep_k + kc) * 512
                out.line(lw.target.call(helper, f"{BASE} + {column + 4 * (kc * blocks + rb)}u",
                                        f"tlx_wgmma_desc({src}, {chunk}u, {fields:#x}ull)"))
    return f"{BASE} + {first}u", f"{BASE} + {first + 4 * rep_k}u", 4 * rep_n


# -- which scopes use tcgen05 -----------------------------------------------------------------
def _scope_ops(lw):
    """The ops lowered in the current scope: one task's region (the default task's also
    the kernel code around ``tlx.async_tasks``), or the whole kernel."""
    body = lw.kernel.regions[0].block
    tasks = next((op for op in body.ops if op.name == "tlx.async_tasks"), None)
    key = lw.scope.key
    if tasks is None or not key.startswith("t"):
        yield from lw.kernel.walk()
        return
    index = int(key[1:])                   # rules_tlx.lower_warp_specialized names task scopes t<index>
    for op in tasks.regions[index].ops:
        yield from op.walk()
    if index == 0:
        for op in body.ops:
            if op is not tasks:
                yield from op.walk()


def _uses_of(op) -> set[str]:
    if has_trait(op, TCGEN05_MMA):
        return {"mma"}
    if op.name in ("tlx.local_load", "tlx.local_store"):
        storage = getattr(op.operands[0].type, "storage", "smem")
        return {"tmem"} if storage == "tmem" else ({"smem_write"} if op.name == "tlx.local_store" else set())
    if op.name == "tlx.async_load":
        return {"smem_write"}
    return set()


def scope_uses(lw) -> set[str]:
    """How the current scope uses tcgen05: ``mma`` (issues MMAs or commits), ``tmem``
    (tcgen05.ld/st), ``smem_write`` (writes shared memory from registers)."""
    state = _state(lw)
    key = lw.scope.key
    if key not in state.scope_uses:
        uses: set[str] = set()
        if lw.kernel.attrs.get("tmem_columns"):
            for op in _scope_ops(lw):
                uses |= _uses_of(op)
        state.scope_uses[key] = uses
    return state.scope_uses[key]


def fence_after_wait(lw) -> list[str]:
    """After an mbarrier or named-barrier wait: order the scope's later tcgen05 ops after it."""
    if scope_uses(lw) & {"mma", "tmem"}:
        return [lw.target.call("tlx_tcgen05_fence_after_thread_sync")]
    return []


def fence_before_arrive(lw) -> list[str]:
    """Before an arrive: order the scope's earlier tcgen05.ld/st (waited for) before it."""
    if "tmem" in scope_uses(lw):
        return [lw.target.call("tlx_tcgen05_fence_before_thread_sync")]
    return []


# -- allocation ---------------------------------------------------------------------------
def allocate_tensor_memory(lw, op) -> None:
    """The kernel's one TMEM allocation, its base address for every thread, the sync-MMA
    barriers, and the deallocation at the kernel's end."""
    state = _state(lw)
    columns = lw.kernel.attrs.get("tmem_columns")
    if not columns or columns > TMEM_COLUMNS:
        raise InternalCompilerError(f"tensor-memory allocation of {columns} columns (a tlxc bug: "
                                    f"allocate-shared sets kernel.attrs.tmem_columns)", op.loc)
    if lw.scope.bar_id is not None:
        raise InternalCompilerError("tensor memory allocated inside an async task (a tlxc bug: allocations "
                                    "are top-level code every warp runs)", op.loc)
    sync_mmas = [o for o in lw.kernel.walk() if o.name == "tlx.tcgen05_mma" and o.attrs.get("sync")]
    state.sync_barriers = {id(o): i for i, o in enumerate(sync_mmas)}
    lw.reserve_shared(AREA, SYNC_BARRIER_OFFSET + 8 * len(sync_mmas))
    target, out = lw.target, lw.out
    cg = "" if cta_group(lw) == 1 else "_cg2"
    out.line(f"// tensor memory: {columns} of {TMEM_COLUMNS} columns, allocated by warp 0 (tcgen05.alloc writes "
             f"the base address to shared memory)" + ("; cta_group::2: warp 0 of each CTA of the pair" if cg else ""))
    out.line(f"unsigned* tlx_tmem_slot = reinterpret_cast<unsigned*>({AREA});")
    out.line(f"if (warp == 0) {{ {target.call('tlx_tcgen05_alloc' + cg, 'tlx_tmem_slot', f'{columns}u')} "
             f"{target.call('tlx_tcgen05_relinquish_alloc_permit' + cg)} }}")
    if sync_mmas:
        out.line(f"// completion barriers of the synchronous MMAs ({len(sync_mmas)}), each waited for by its "
                 f"issuing thread only")
        out.line(f"unsigned long long* {SYNC_BARRIERS} = reinterpret_cast<unsigned long long*>({AREA} + "
                 f"{SYNC_BARRIER_OFFSET});")
        out.open("if (tid == 0)")
        out.line("#pragma unroll")
        out.line(f"for (int i = 0; i < {len(sync_mmas)}; ++i) {target.mbarrier_init(f'{SYNC_BARRIERS} + i', 1)}")
        out.line(target.fence("async_shared"))
        out.close()
        for i in range(len(sync_mmas)):
            out.line(f"unsigned tlx_mma_sync_phase{i} = 0;")
    out.line(lw.sync())
    out.line(target.call("tlx_tcgen05_fence_after_thread_sync"))
    out.line(f"const unsigned {BASE} = *tlx_tmem_slot;")
    lw.epilogue += [
        "// tensor memory back: every thread's tcgen05 ops are ordered before the barrier, then warp 0 frees it",
        target.call("tlx_tcgen05_fence_before_thread_sync"),
        "__syncthreads();",
        (f"if (warp == 0) {{ {target.call('tlx_tcgen05_fence_after_thread_sync')} "
         f"{target.call('tlx_tcgen05_dealloc' + cg, BASE, f'{columns}u')} }}"),
    ]
    state.allocated = True


def tmem_alloc(lw, op) -> None:
    """``tlx.local_alloc`` of tensor memory: the TMEM address of its first buffer."""
    require_tcgen05(lw, op)
    if not _state(lw).allocated:
        allocate_tensor_memory(lw, op)
    r = op.results[0]
    t = r.type
    column = op.attrs["column"]
    name = lw.define(r)
    lw.out.line(f"const unsigned {name} = {BASE} + {column}u;  // {t.num} x {list(t.shape)} {t.element}: columns "
                f"{column}..{column + t.num * tmem_columns(t) - 1}")
    lw.tmem_views[id(r)] = name


def tmem_view(lw, op) -> None:
    """``tlx.local_view`` of tensor memory: buffer ``idx``, N columns further per buffer."""
    src, idx = op.operands
    name = lw.define(op.results[0])
    lw.out.line(f"const unsigned {name} = {lw.tmem_views[id(src)]} + (unsigned)({lw.name(idx)}) * "
                f"{tmem_columns(src.type)}u;")
    lw.tmem_views[id(op.results[0])] = name


def tmem_slice(lw, op) -> None:
    """``tlx.local_slice`` of tensor memory: whole rows from a column offset (the frontend
    allows no other slice of it)."""
    src, row, col = op.operands
    if lw.axis.info(row).value != 0:
        raise CompilationError("a tensor-memory slice keeps every row (offset [0, column])", op.loc)
    per = 4 // src.type.element.bytes           # elements per 32-bit column (packed 16/8-bit)
    name = lw.define(op.results[0])
    lw.out.line(f"const unsigned {name} = {lw.tmem_views[id(src)]} + (unsigned)({lw.name(col)})"
                + (f" / {per}u;" if per != 1 else ";"))
    lw.tmem_views[id(op.results[0])] = name


# -- tcgen05.ld / tcgen05.st ----------------------------------------------------------------
def _widest(lw) -> int:
    """The widest tcgen05.ld/st access: 128 columns, or 64 when the kernel's threads leave
    fewer than 160 registers each (ptxas needs an .x128 access's 128 destination registers
    at once: C7602 under a 128-register cap, as for TLX's 14-warp attention kernels)."""
    return MAX_LDST_COLUMNS if 65536 // lw.launch_threads >= 160 else MAX_LDST_COLUMNS // 2


def _chunks(columns: int, widest: int = MAX_LDST_COLUMNS) -> list[tuple[int, int]]:
    """(first column, .xN) of the accesses covering ``columns``: powers of two, at most
    ``widest`` wide."""
    chunks, start = [], 0
    while start < columns:
        width = widest
        while width > columns - start:
            width //= 2
        chunks.append((start, width))
        start += width
    return chunks


def _warp_address(lw, op, view_type: MemDescType, register_type) -> str:
    """The TMEM address of this warp's 32 lanes of ``view``, after checking that the
    register layout is the 32x32b one and the warps are a warp group."""
    scope = lw.scope
    warps = scope.threads // 32
    if warps != 4 or scope.warp_start % 4:
        raise CompilationError(f"{op.name} of tensor memory needs a task of 4 warps starting at a multiple of "
                               f"4 (warp w reaches lanes 32 * (w % 4) .. + 31); this one has {warps} warps "
                               f"starting at warp {scope.warp_start}", op.loc)
    expected = N.tmem_layout(view_type.shape, 4)
    if register_type.layout != expected:
        raise InternalCompilerError(f"{op.name} of tensor memory with layout {register_type.layout} (a tlxc bug: "
                                    f"infer-layouts gives it the 32x32b layout {expected})", op.loc)
    return f"((unsigned)(32 * {scope.warp_var}) << 16)"


def _to_word(expr: str, element) -> str:
    return f"__float_as_uint({expr})" if element.name == "f32" else f"(unsigned)({expr})"


def _from_word(expr: str, element) -> str:
    return f"__uint_as_float({expr})" if element.name == "f32" else f"({C.storage_type(element)})({expr})"


def _unpack_words(lw, r, words: str) -> None:
    """Registers of ``r`` from its row's 32-bit TMEM words: one element per word, or 16-bit
    (8-bit) elements packed two (four) to a word, the lowest bits first (TLX's colStride=1)."""
    element = r.type.element
    name = lw.declare(r)
    if element.bytes == 4:
        lw.for_registers(r, f"{name}[i] = {_from_word(f'{words}[i]', element)};")
        return
    per, bits = 4 // element.bytes, 8 * element.bytes
    lw.for_registers(r, f"{name}[i] = ({C.storage_type(element)})(({words}[i / {per}] >> ({bits} * (i % {per}))) & "
                        f"{(1 << bits) - 1:#x}u);")


def _pack_words(lw, value, words: str, count: int) -> None:
    """The 32-bit TMEM words of this thread's row from the registers of ``value`` (see
    ``_unpack_words``)."""
    element = value.type.element
    if element.bytes == 4:
        lw.for_registers(value, f"{words}[i] = {_to_word(lw.ref(value), element)};")
        return
    per, bits = 4 // element.bytes, 8 * element.bytes
    name = lw.name(value)
    parts = " | ".join(f"((unsigned)({name}[{per} * i + {q}]) & {(1 << bits) - 1:#x}u)" + (f" << {bits * q}" if q else "")
                       for q in range(per))
    lw.for_registers(count, f"{words}[i] = {parts};")


def tmem_load(lw, op) -> None:
    """``tlx.local_load`` of tensor memory: this thread's row, every column, into registers."""
    require_tcgen05(lw, op)
    view, r = op.operands[0], op.results[0]
    lane_part = _warp_address(lw, op, view.type, r.type)
    columns = registers(r.type) * r.type.element.bytes // 4
    words, taddr = lw.fresh("tm_words"), lw.fresh("tm_addr")
    half = view.type.shape[0] == 64
    if half:
        lw.out.line(f"// tcgen05.ld .16x32bx2 (M = 64): row 16 * {lw.scope.warp_var} + lane % 16 at lane 32 * "
                    f"{lw.scope.warp_var} + lane % 16, {columns} of its {2 * columns} columns (lanes 16-31: the "
                    f"second half)")
    else:
        lw.out.line(f"// tcgen05.ld: row 32 * {lw.scope.warp_var} + lane, {columns} columns")
    lw.out.line(f"const unsigned {taddr} = {lw.tmem_views[id(view)]} + {lane_part};")
    lw.out.line(f"unsigned {words}[{columns}];")
    for start, width in _chunks(columns, _widest(lw)):
        address = f"{taddr} + {start}u" if start else taddr
        if half:
            lw.target.use(f"tlx_tcgen05_ld_16x32bx2_x{width}")
            lw.out.line(f"tlx_tcgen05_ld_16x32bx2_x{width}<{columns}>({address}, &{words}[{start}]);")
        else:
            lw.out.line(lw.target.call(f"tlx_tcgen05_ld_32x32b_x{width}", address, f"&{words}[{start}]"))
    lw.target.use("tlx_tcgen05_wait_ld")
    lw.out.line(f"tlx_tcgen05_wait_ld<{columns}>({words});")
    _unpack_words(lw, r, words)


def tmem_store(lw, op) -> None:
    """``tlx.local_store`` to tensor memory: this thread's registers into its row."""
    require_tcgen05(lw, op)
    view, value = op.operands
    lane_part = _warp_address(lw, op, view.type, value.type)
    columns = registers(value.type) * value.type.element.bytes // 4
    words, taddr = lw.fresh("tm_words"), lw.fresh("tm_addr")
    half = view.type.shape[0] == 64
    if half:
        lw.out.line(f"// tcgen05.st .16x32bx2 (M = 64): row 16 * {lw.scope.warp_var} + lane % 16, {columns} of "
                    f"its {2 * columns} columns (lanes 16-31: the second half)")
    else:
        lw.out.line(f"// tcgen05.st: row 32 * {lw.scope.warp_var} + lane, {columns} columns")
    lw.out.line(f"const unsigned {taddr} = {lw.tmem_views[id(view)]} + {lane_part};")
    lw.out.line(f"unsigned {words}[{columns}];")
    _pack_words(lw, value, words, columns)
    for start, width in _chunks(columns, _widest(lw)):
        address = f"{taddr} + {start}u" if start else taddr
        if half:
            lw.target.use(f"tlx_tcgen05_st_16x32bx2_x{width}")
            lw.out.line(f"tlx_tcgen05_st_16x32bx2_x{width}<{columns}>({address}, &{words}[{start}]);")
        else:
            lw.out.line(lw.target.call(f"tlx_tcgen05_st_32x32b_x{width}", address, f"&{words}[{start}]"))
    lw.out.line(lw.target.call("tlx_tcgen05_wait_st"))


# -- MMA ------------------------------------------------------------------------------------
def _operand(lw, op, view, is_b: bool, element) -> dict:
    """Major-ness, tcgen05 descriptor fields and byte offsets of an A or B operand."""
    swizzle = lw.view_swizzle.get(id(view), 0)
    plan = operand_plan(view.type, lw.views[id(view)][1], swizzle, is_b, element, op.loc,
                        lw.view_block.get(id(view)))
    if plan["trans"] and element.name == "f32":
        name, hint = ("B", "store B as [N, K] and pass tlx.local_trans(b_buffer)") if is_b else \
            ("A", "store A as [M, K]")
        raise CompilationError(f"tcgen05 reads tf32 operands {'N' if is_b else 'M'}-major only from buffers with "
                               f"the 128-byte swizzle of 32-byte atoms, which tlxc does not build; {name} is "
                               f"{view.type}: {hint}", op.loc)
    plan["fields"] = _from_wgmma_fields(plan["fields"], swizzle)
    return plan


@lowering("tlx.tcgen05_mma", vendor="nvidia")
def tcgen05_mma(lw, op):
    require_tcgen05(lw, op)
    a, b, acc, use_acc = op.operands[:4]
    pred = op.operands[4] if op.attrs.get("has_pred") else None
    element = a.type.element
    kind, _ = INPUTS[element.name]
    scaled = bool(op.attrs.get("scale_formats"))
    if scaled:
        kind = "mxf8f6f4.block_scale"
    tmem_a = a.type.storage == "tmem"
    plan_a = {"trans": False} if tmem_a else _operand(lw, op, a, False, element)
    plan_b = _operand(lw, op, b, True, element)
    (m, k), n = a.type.shape, b.type.shape[1]
    pair = bool(op.attrs.get("two_ctas"))
    if pair:
        m, n = 2 * m, 2 * n          # the pair's MMA: A's rows of both CTAs, B's columns of both
    step = k_step(element)
    if scaled:
        idesc = scaled_instruction_descriptor(element, b.type.element, m, n, plan_a["trans"], plan_b["trans"])
    else:
        idesc = instruction_descriptor(element, m, n, plan_a["trans"], plan_b["trans"])
    sync_index = _state(lw).sync_barriers.get(id(op)) if op.attrs.get("sync") else None
    if op.attrs.get("sync") and sync_index is None:
        raise InternalCompilerError("a synchronous tcgen05 MMA without its completion barrier (a tlxc bug)",
                                    op.loc)
    target, out, tid = lw.target, lw.out, lw.scope.tid_var
    uses = scope_uses(lw)
    if uses & {"tmem", "smem_write"}:
        # the task's threads wrote the operands or touched the accumulator: all of that before the issue
        if "tmem" in uses:
            out.line(target.call("tlx_tcgen05_fence_before_thread_sync"))
        out.line(lw.sync())
        if "tmem" in uses:
            out.line(target.call("tlx_tcgen05_fence_after_thread_sync"))
    a_where = "in tensor memory, K-major" if tmem_a else f"{'M' if plan_a['trans'] else 'K'}-major"
    out.line(f"// tcgen05.mma.cta_group::{2 if pair else 1}.kind::{kind}: {m}x{n}x{step} x {k // step} k-steps by "
             f"thread 0 of the task{' of the even CTA of the pair' if pair else ''}; A "
             f"{a_where}, B {'N' if plan_b['trans'] else 'K'}-major, idesc {idesc:#010x}")
    cond = f"{tid} == 0" + (f" && {lw.name(pred)}" if pred is not None else "")
    if pair:
        cond += f" && ({target.expr('tlx_cluster_ctarank')} & 1) == 0"
    out.open(f"if ({cond})")
    helper = f"tlx_tcgen05_mma_cg2_{kind}" if pair else f"tlx_tcgen05_mma_{kind}"
    if tmem_a:
        helper = f"tlx_tcgen05_mma_tmem_a_{kind}"
    if scaled:
        helper = "tlx_tcgen05_mma_mxf8f6f4_block_scale"
        sfa, sfb, sfb_per_chunk = _copy_scales(lw, op, out)
    target.use(helper)
    target.use("tlx_wgmma_desc")          # the start-address encoding is wgmma's (matrix-descriptor-encode)
    b_bytes = f"reinterpret_cast<unsigned char*>({lw.views[id(b)][0]})"
    out.line("#pragma unroll")
    out.open(f"for (int kk = 0; kk < {k // step}; ++kk)")
    if tmem_a:
        # A's k-th step is the next K / (32 / element bits) columns of its lanes
        da = f"{lw.tmem_views[id(a)]} + (unsigned)({step * element.bytes // 4} * kk)"
    else:
        a_bytes = f"reinterpret_cast<unsigned char*>({lw.views[id(a)][0]})"
        da = f"tlx_wgmma_desc({a_bytes}, {plan_a['offset']('0', f'{step} * kk')}, {plan_a['fields']:#x}ull)"
    db = f"tlx_wgmma_desc({b_bytes}, {plan_b['offset']('0', f'{step} * kk')}, {plan_b['fields']:#x}ull)"
    enable = f"kk == 0 ? (int)({lw.name(use_acc)}) : 1"
    if scaled:
        # k step kk: K chunk kk / 4 of the scales, byte kk % 4 of each column (the scale-factor IDs)
        out.line(f"{helper}({lw.tmem_views[id(acc)]}, {da}, {db}, {idesc:#010x}u | ((unsigned)(kk % 4) << 29) | "
                 f"((unsigned)(kk % 4) << 4), {sfa} + (unsigned)(4 * (kk / 4)), {sfb} + (unsigned)({sfb_per_chunk} * "
                 f"(kk / 4)), {enable});")
    else:
        out.line(f"{helper}({lw.tmem_views[id(acc)]}, {da}, {db}, {idesc:#010x}u, {enable});")
    out.close()
    for bar in op.barriers:
        if pair:            # the completion arrives on this barrier's place in both CTAs
            out.line(target.call("tlx_tcgen05_commit_cg2", lw.name(bar), _pair_mask(lw)))
        else:
            out.line(target.call("tlx_tcgen05_commit", lw.name(bar)))
    if sync_index is not None:
        phase = f"tlx_mma_sync_phase{sync_index}"
        out.line(target.call("tlx_tcgen05_commit", f"{SYNC_BARRIERS} + {sync_index}"))
        out.line(f"{target.mbarrier_wait(f'{SYNC_BARRIERS} + {sync_index}', phase)} {phase} ^= 1;")
    out.close()
    if sync_index is not None:
        out.line(f"{lw.sync()}  // the synchronous MMA is done: thread 0 saw its barrier")
        out.line(target.call("tlx_tcgen05_fence_after_thread_sync"))


@lowering("tlx.tcgen05_commit", vendor="nvidia")
def tcgen05_commit(lw, op):
    require_tcgen05(lw, op)
    # thread 0 issued the task's MMAs, and a commit tracks the issuing thread's tcgen05 ops
    if op.attrs.get("two_ctas"):
        # the even CTA issued the pair's MMAs: it commits, arriving on the barrier in both CTAs
        lw.out.line(f"if ({lw.scope.tid_var} == 0 && ({lw.target.expr('tlx_cluster_ctarank')} & 1) == 0) "
                    f"{lw.target.call('tlx_tcgen05_commit_cg2', lw.name(op.operands[0]), _pair_mask(lw))}")
        return
    lw.out.line(f"if ({lw.scope.tid_var} == 0) {lw.target.call('tlx_tcgen05_commit', lw.name(op.operands[0]))}")


__all__ = ["descriptor_fields", "fence_after_wait", "fence_before_arrive", "instruction_descriptor",
           "tmem_alloc", "tmem_load", "tmem_slice", "tmem_store", "tmem_view"]
