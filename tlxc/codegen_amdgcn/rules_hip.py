"""The AMD lowering rules: the ops whose HIP differs from the shared C-style rule
(``@lowering(..., vendor="amd")``, codegen_c/lower.py).  Everything else uses the shared rule.
"""
from __future__ import annotations

from ..codegen_c.lower import RULES, elem, lowering, registers
from ..codegen_c.rules_arith import _CUDA_MATH
from ..errors import InternalCompilerError
from . import amdgcn
from .prelude import MATH_F32, MATH_F64

_AXES = "xyz"


@lowering("tl.program_id", vendor="amd")
def program_id(lw, op):
    axis = _AXES[op.attrs["axis"]]
    init = lw.target.expr(f"tlx_workgroup_id_{axis}")
    lw.declare(op.results[0], "pid" if not op.results[0].name_hint else None, init=init)


@lowering("tl.num_programs", vendor="amd")
def num_programs(lw, op):
    lw.declare(op.results[0], init=lw.target.expr("tlx_num_workgroups", op.attrs["axis"]))


@lowering("tlx.thread_id", vendor="amd")
def thread_id(lw, op):
    if op.attrs["axis"] != 0:
        raise lw.error_unsupported(op, "a work-item id along y or z (tlxc launches 1-D work-groups)")
    lw.declare(op.results[0], init="tid")


@lowering("tl.print", "tl.assert", "tlx.dump_layout", vendor="amd")
def debug_output(lw, op):
    raise lw.error_unsupported(op, f"{op.name} (device printf/assert)")


def _checked_math(name: str):
    """The shared math rule, once the function it writes is one the HIP prelude provides
    (the others would need AMD's device library, which the offline build does not link)."""
    shared = RULES[(f"math.{name}", None)]

    def rule(lw, op):
        f32, f64 = _CUDA_MATH[name]
        is_f64 = elem(op.operands[0].type).name == "f64"
        fn = f64 if is_f64 else f32
        if fn not in (MATH_F64 if is_f64 else MATH_F32):
            raise lw.error_unsupported(op, f"{op.name} on {elem(op.operands[0].type)}")
        shared(lw, op)
    return rule


for _name in _CUDA_MATH:
    lowering(f"math.{_name}", vendor="amd")(_checked_math(_name))


@lowering("tl.dot", vendor="amd")
def dot(lw, op):
    """``tl.dot`` on MFMA: per (M block, N block, K step) of this wave, one instruction on the
    fragments ``ir/layouts_amd.py`` placed in registers (A: P values, then K steps, then M blocks;
    B: P, K steps, N blocks; the accumulator: the block's registers, N blocks, M blocks)."""
    if op.attrs.get("algorithm") != "mfma":
        return RULES[("tl.dot", None)](lw, op)       # the FMA fallback (no MFMA tiles the shapes)
    a, b, acc = op.operands
    result = op.results[0]
    block, k_ins = op.attrs["mfma_block"], op.attrs["mfma_k"]
    element, b_element = a.type.element.name, b.type.element.name
    try:
        helper = amdgcn.mfma_helper(block, k_ins, element, b_element, lw.target.arch)
    except KeyError:
        raise lw.error_unsupported(op, f"an MFMA {block}x{block}x{k_ins} on {element} x {b_element}") from None
    per_lane, regs = k_ins * block // 64, block * block // 64
    kt = a.type.shape[1] // k_ins
    ra, rb, rc = registers(a.type), registers(b.type), registers(acc.type)
    mt, nt = ra // (per_lane * kt), rb // (per_lane * kt)
    if mt * nt * regs != rc:
        raise InternalCompilerError(f"MFMA fragment counts do not match (A {ra}, B {rb}, C {rc}, K steps {kt}): "
                                    f"a tlxc layout bug", op.loc)
    ab_type, acc_type = amdgcn.mfma_vector_types(helper)
    lw.target.use(helper)
    work = lw.fresh("dacc")
    lw.out.line(f"float {work}[{rc}];")
    lw.for_registers(rc, f"{work}[i] = {lw.target.to_compute(lw.ref(acc), acc.type.element)};")
    as_operand = {"f16": "__builtin_bit_cast(_Float16, {})", "bf16": "(short)({})"}.get(element, "(unsigned char)({})")
    av, bv, cv = lw.fresh("mfa"), lw.fresh("mfb"), lw.fresh("mfc")
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int mi = 0; mi < {mt}; ++mi)")
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int ni = 0; ni < {nt}; ++ni)")
    lw.out.line(f"{acc_type} {cv};")
    lw.out.line(f"for (int r = 0; r < {regs}; ++r) {cv}[r] = {work}[{regs} * (ni + {nt} * mi) + r];")
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int ki = 0; ki < {kt}; ++ki)")
    lw.out.line(f"{ab_type} {av}, {bv};")
    lw.out.line(f"for (int e = 0; e < {per_lane}; ++e) {{ "
                f"{av}[e] = {as_operand.format(f'{lw.name(a)}[{per_lane} * (ki + {kt} * mi) + e]')}; "
                f"{bv}[e] = {as_operand.format(f'{lw.name(b)}[{per_lane} * (ki + {kt} * ni) + e]')}; }}")
    lw.out.line(f"{cv} = {helper}({av}, {bv}, {cv});")
    lw.out.close()
    lw.out.line(f"for (int r = 0; r < {regs}; ++r) {work}[{regs} * (ni + {nt} * mi) + r] = {cv}[r];")
    lw.out.close()
    lw.out.close()
    t = result.type.element
    lw.assign_elementwise(result, lambda i: lw.target.from_compute(f"{work}[{i}]", t))


# -- TLX async copies to LDS --------------------------------------------------------------------
# gfx950 (``lds_dma16``): direct-to-LDS when the copy's layout puts lane l's 16 bytes at the
# wave's base + 16 l in the buffer (global_load_lds_dwordx4 writes there; masked-off lanes load
# 16 zero bytes from a global constant, so the whole wave issues the one load); async_load_wait_group then waits with s_waitcnt vmcnt(0) (all of the wave's
# loads: a conservative wait for any count).  Otherwise register-staged: each work-item loads its
# pieces into registers and writes them to LDS at once (TLX measured this the fastest route on
# gfx942), a valid early completion, so commit/wait have nothing to wait for.  In both cases
# shared_order puts the work-group barrier after the wait, which orders the LDS writes before
# other waves read them.
@lowering("tlx.async_load", vendor="amd")
def async_load(lw, op):
    from ..codegen_c import c_types as C
    from ..codegen_c.rules_buffers import _offset_expr, shared_address, shared_vector_width
    from ..codegen_c.rules_memory import vector_dim, vector_width
    if op.attrs.get("eviction") or op.attrs.get("cache") or op.attrs.get("volatile"):
        raise lw.error_unsupported(op, "tlx.async_load with cache_modifier / eviction_policy / volatile")
    ptrs, view = op.operands[:2]
    mask = op.operands[2] if op.attrs.get("has_mask") else None
    strides = lw.views[id(view)][1]
    t = ptrs.type.element.pointee
    width = vector_width(lw, ptrs, mask, t.bytes) if strides[vector_dim(ptrs.type.layout)] == 1 else 1
    width = min(width, shared_vector_width(lw, view, ptrs.type.layout, t)) if width > 1 else 1
    while width * t.bytes > 16:
        width //= 2
    if width * t.bytes < 4:
        width = 1
    offset = _offset_expr(lw, ptrs.type.layout, strides, block=lw.view_block.get(id(view)))
    pred = lw.ref(mask) if mask is not None else "true"
    if (lw.target.has("lds_dma16") and width * t.bytes == 16 and not lw.view_swizzle.get(id(view))
            and id(view) not in lw.view_block and _wave_contiguous(ptrs.type.layout, strides, width, t.bytes)):
        lw.out.line("#pragma unroll")
        lw.out.open(f"for (int i = 0; i < {registers(ptrs.type)}; i += {width})")
        dst = shared_address(lw, view, offset, t)
        src = lw.ref(ptrs)
        if mask is not None:       # masked-off lanes read 16 zero bytes: no divergence around the wave's load
            lw.target.use("tlx_zero16")
            src = f"({pred}) ? (const void*)({src}) : (const void*)tlx_zero16"
        lw.out.line(lw.target.call("tlx_global_load_lds_b128", src, f"(unsigned char*)({dst}) - 16 * lane"))
        lw.out.close()
        return
    staged = lw.fresh("stage")
    lw.out.line(f"{C.storage_type(t)} {staged}[{width}];")
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int i = 0; i < {registers(ptrs.type)}; i += {width})")
    dst = shared_address(lw, view, offset, t)
    zero = C.constant_literal(0, t)
    if width == 1:
        lw.out.line(f"*({dst}) = ({pred}) ? *{lw.ref(ptrs)} : {zero};")
    else:
        # the vector load/store helpers with the element loop's index 0 (stage[i + j] -> stage[j])
        load = lw.target.load_vector(staged, lw.ref(ptrs), pred, zero, t, width, None).replace("[i + ", "[0 + ")
        lw.out.line(load.replace(f"{staged}[i]", f"{staged}[0]"))
        store = lw.target.store_shared_vector(staged, dst, t, width).replace("[i + ", "[0 + ")
        lw.out.line(store)
    lw.out.close()


@lowering("tlx.async_commit_group", vendor="amd")
def async_commit_group(lw, op):
    lw.out.line("// async_load_commit_group: the register-staged copies above are complete")


@lowering("tlx.async_wait_group", vendor="amd")
def async_wait_group(lw, op):
    if lw.target.has("lds_dma16"):      # any async_load of the kernel may be direct-to-LDS (decided per copy)
        lw.out.line(f"{lw.target.call('tlx_s_waitcnt_vmcnt0')}  // async_load_wait_group({op.attrs['pendings']}): "
                    f"direct-to-LDS loads have landed")
        return
    lw.out.line(f"// async_load_wait_group({op.attrs['pendings']}): nothing in flight (register-staged copies)")


def _wave_contiguous(layout, strides, width: int, elem_bytes: int) -> bool:
    """Whether, for every wave and every ``width``-element piece of the layout, lane l's piece sits
    at the wave's first lane's + 16 l bytes of the buffer (element ``strides``)."""
    import numpy as np
    table = layout.coords_table()                        # [warps, lanes, registers, rank]
    if table.shape[1] != 64:
        return False
    offsets = (table * np.asarray(strides, dtype=np.int64)).sum(axis=-1) * elem_bytes
    pieces = offsets[:, :, ::width]                      # [warps, lanes, pieces]
    want = 16 * np.arange(64, dtype=np.int64)[None, :, None]
    return bool(((pieces - pieces[:, :1, :]) == want).all())


# -- TLX barriers in LDS software (amdgcn.py: tlx_lds_barrier) ----------------------------------
# A kernel without warp specialization arrives as one group (TLX: one arrival per arriving warp
# group): the work-group syncs, then work-item 0 adds the arrival.  Every work-item waits.
@lowering("tlx.alloc_barriers", vendor="amd")
def alloc_barriers(lw, op):
    r = op.results[0]
    if r.type.per_thread:
        raise lw.error_unsupported(op, "tlx.alloc_warp_barrier (per-thread arrivals)")
    name = lw.define(r)
    lw.out.line(f"unsigned* {name} = reinterpret_cast<unsigned*>(tlx_smem + {op.attrs['offset']});")
    lw.target.use("tlx_lds_barrier")
    lw.out.line(f"if (tid == 0) for (int i = 0; i < {r.type.num}; ++i) "
                f"tlx_lds_barrier_init({name} + 2 * i, {op.attrs['arrive_count']}u);")
    lw.out.line(lw.sync())


@lowering("tlx.local_view", vendor="amd")
def local_view(lw, op):
    from ..codegen_c import rules_buffers as buffers
    from ..ir.types import BarrierType
    src, idx = op.operands
    if isinstance(src.type, BarrierType):
        r = op.results[0]
        lw.out.line(f"unsigned* {lw.define(r)} = {lw.name(src)} + 2 * ({lw.name(idx)});")
        return
    return buffers.local_view(lw, op)


def _pred(lw, op, first_optional: int) -> str:
    return lw.name(op.operands[first_optional]) if op.attrs.get("has_pred") else ""


@lowering("tlx.barrier_arrive", vendor="amd")
def barrier_arrive(lw, op):
    bar = op.operands[0]
    if bar.type.per_thread or bar.type.remote:
        raise lw.error_unsupported(op, "a per-thread or remote barrier arrive")
    pred = _pred(lw, op, 1)
    lw.out.line(lw.sync())          # the group's work before the arrival
    cond = "tid == 0" + (f" && {pred}" if pred else "")
    lw.target.use("tlx_lds_barrier")
    lw.out.line(f"if ({cond}) tlx_lds_barrier_arrive({lw.name(bar)}, {op.attrs['count']}u);")


@lowering("tlx.barrier_wait", vendor="amd")
def barrier_wait(lw, op):
    pred = _pred(lw, op, 2)
    lw.target.use("tlx_lds_barrier")
    stmt = f"tlx_lds_barrier_wait({lw.name(op.operands[0])}, (unsigned)({lw.name(op.operands[1])}));"
    lw.out.line(f"if ({pred}) {stmt}" if pred else stmt)


@lowering("tlx.barrier_expect_bytes", vendor="amd")
def barrier_expect_bytes(lw, op):
    raise lw.error_unsupported(op, "tlx.barrier_expect_bytes (a transaction count: TMA has no AMD equivalent)")


# -- warp-pipeline ("ping-pong") stages (ir/ops/warp_pipeline.py) ------------------------------
# The work-group's waves run as two groups: waves [0, W/2) and [W/2, W).  Before the loop the upper
# group takes one extra barrier, so from then on it meets the lower group's barrier k at its own
# barrier k - 1: while the lower group runs stage s, the upper one runs stage s - 1.  Each stage
# opens with its s_setprio (when given) and a scheduling fence (sched_barrier 0: the compiler moves
# nothing across a stage boundary) and ends with a fence and a work-group barrier (LDS fences
# included: HIP's __syncthreads); after the loop the lower group takes the extra barrier that
# aligns the groups again, and the priority returns to 0.  Each group still runs every barrier the
# same number of times, so the phase shift cannot deadlock; which LDS accesses the stages order is
# the kernel's design (docs/codegen.md, "Warp-pipeline stages").
def _half(lw) -> int:
    return int(lw.kernel.attrs.get("num_warps", 4)) // 2


@lowering("tlx.warp_pipeline_begin", vendor="amd")
def warp_pipeline_begin(lw, op):
    priority = op.attrs.get("priority")
    label = op.attrs.get("label") or f"stage {op.attrs.get('stage', '?')}"
    lw.out.line(f"// warp-pipeline stage '{label}'")
    if priority is not None:
        lw.target.use("tlx_s_setprio")
        lw.out.line(f"tlx_s_setprio<{priority}>();")
    lw.target.use("tlx_sched_barrier")
    lw.out.line("tlx_sched_barrier<0>();")


@lowering("tlx.warp_pipeline_end", vendor="amd")
def warp_pipeline_end(lw, op):
    lw.target.use("tlx_sched_barrier")
    lw.out.line("tlx_sched_barrier<0>();")
    lw.out.line(lw.sync() + f"  // end of stage '{op.attrs.get('label') or op.attrs.get('stage', '?')}'")


@lowering("tlx.amd_sched_barrier", vendor="amd")
def amd_sched_barrier(lw, op):
    lw.target.use("tlx_sched_barrier")
    lw.out.line(f"tlx_sched_barrier<{op.attrs['mask']}>();")


@lowering("tlx.warp_pipeline_enter", vendor="amd")
def warp_pipeline_enter(lw, op):
    half = _half(lw)
    if half == 0:
        lw.out.line("// warp pipeline on one wave: no second group to shift")
        return
    lw.out.line(lw.sync() + "  // warp pipeline: what the loop reads is written")
    lw.out.line(f"if (warp >= {half}) {lw.sync()}  // phase shift: the upper waves run one stage behind")


@lowering("tlx.warp_pipeline_exit", vendor="amd")
def warp_pipeline_exit(lw, op):
    half = _half(lw)
    if half == 0:
        return
    lw.out.line(f"if (warp < {half}) {lw.sync()}  // warp pipeline: the groups aligned again")
    lw.target.use("tlx_s_setprio")
    lw.out.line("tlx_s_setprio<0>();")
