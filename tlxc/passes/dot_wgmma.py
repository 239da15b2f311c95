"""lower-dot-to-wgmma: ``tl.dot`` on Hopper becomes the TLX ops a TLX user writes.

On sm_90a, ``%r = tl.dot %a, %b, %acc`` (register operands, as Triton code gives
them) becomes::

    %a_smem = tlx.local_alloc : memdesc<MxK, num=1>      (at the kernel's entry)
    %b_smem = tlx.local_alloc : memdesc<KxN, num=1>
    tlx.local_store (tlx.local_view %a_smem, 0), %a
    tlx.local_store (tlx.local_view %b_smem, 0), %b
    %0 = tlx.async_dot %a_view, %b_view, %acc             (wgmma, accumulator in registers)
    %r = tlx.async_dot_wait %0 {pendings = 0}

*Operand majorness.*  A loaded operand whose pointers are contiguous along dim 0
(axis info; through ``tl.trans`` of a load, the permuted contiguity) -- A with ``stride_am == 1`` (M-major), B with ``stride_bk == 1``
(K-major: ``b = w.t()``, the layout of every ``nn.Linear`` weight) -- is stored
transposed, so that both the global reads and the shared writes run along the
contiguous axis in 16-byte pieces (``infer-layouts`` orders the load layout by
the same contiguity): its buffer is allocated ``[K, M]`` (A) or ``[N, K]`` (B)
and the store and the wgmma go through ``tlx.local_trans`` of its view::

    %b_smem = tlx.local_alloc : memdesc<NxK, num=1>
    %bt = tlx.local_trans (tlx.local_view %b_smem, 0) {perm = [1, 0]}   : KxN
    tlx.local_store %bt, %b

The wgmma reads such a buffer directly: a transposed A is MN-major (imm-trans-a
= 1), a transposed B K-major (imm-trans-b = 0), the descriptors following from
the view's strides (``codegen_nvptx/rules_mma_async.py``).  MN-major operands exist
for 16-bit inputs only; an fp8/tf32 operand (when wgmma runs them) is always
stored K-major -- A as [M, K], B as [N, K] -- its store then being the
transposing copy.

so layout inference, the shared-layout choice (swizzle from the wgmma consumer),
the checker, the codegen's orderings (the proxy fence and barrier between the
stores and the wgmma, the barrier after the wait in a two-warpgroup kernel:
``codegen_c/shared_order.py``) and the interpreter apply unchanged.  The
``pipeline-loads`` pass then turns the stores of loaded tiles into cp.async rings.

*fp8* (e4m3, e5m2, and e4m3 x e5m2 mixed: wgmma's ``.atype`` and ``.btype`` are
independent) runs m64nNk32 from shared memory.  wgmma has no transpose bits for 8-bit
inputs (PTX ISA: "imm-trans" exists for .f16/.bf16 only), so both operands are K-major
buffers: A [M, K], B [N, K] behind a ``local_trans`` view.  Triton's matmul tutorial feeds
fp8 as A row-major and ``b = w.T`` of a row-major [N, K] ``w``: both contiguous along K,
read by 16-byte cp.async straight into those buffers.  An operand contiguous along M or N
instead (A with ``stride_am == 1``, B row-major [K, N]) is still correct -- its store is the
transposing copy through registers, element by element -- but slow.  A computed fp8 A
(attention's ``p.to(tl.float8e5)``) comes from registers (``register-a-operand``; the codegen
exchanges bytes within each quad into the k32 fragments).
``max_num_imprecise_acc`` (an explicit value <= K, as Triton allows) goes on the
``tlx.async_dot``: the codegen sums each run of that many K elements into a zeroed
accumulator and adds it to the result in float32 (``rules_mma_async.py``); without it the
tensor cores accumulate the whole K, as Triton's default on sm_90 (2**30) does.

A dot is left to mma.sync (``rules_mma.py``) when wgmma cannot run it: inputs
other than f16/bf16/fp8, an accumulator other than f32 (an f16 one, ``out_dtype=tl.float16``,
is future work: it runs on the fallback, still honoured), a
shape wgmma rejects (M a multiple of 64 per warpgroup, N a multiple of 8 up to
256, K a multiple of 16, 32 for fp8), a kernel whose warps do not form whole warpgroups, or
a dot inside ``tlx.async_tasks`` (a warp-specialized kernel orchestrates its
own MMAs).  ``input_precision`` does not change f16/bf16/fp8 code (Triton ignores
it there too: the products are exact); ``out_dtype`` is the accumulator's type.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import layouts_nvidia as N
from ..ir.builder import Builder
from ..ir.core import Module, Operation, Value
from ..ir.ops.mma_async import shape_problem, transposable
from ..ir.types import MemDescType, PointerType, TensorType, i32
from ..target import get_target, has_feature
from .axis_info import AxisAnalysis
from .manager import Pass

WGMMA_INPUTS = ("f16", "bf16", "f8e4m3", "f8e5m2")


@dataclass(frozen=True)
class LowerDotToWgmma(Pass):
    name = "lower-dot-to-wgmma"

    def run(self, module: Module, options) -> Module:
        wgmma = has_feature(options.arch, "wgmma")
        if not wgmma and not mma_sync_ring_target(options.arch):
            return module
        limit = get_target(options.arch).shared_limit
        problem = wgmma_problem if wgmma else (lambda dot, warps: mma_sync_problem(dot, warps, limit))
        for kernel in module.kernels:
            if any(op.name == "tlx.async_tasks" for op in kernel.walk()):
                continue
            dots = [op for op in kernel.walk() if op.name == "tl.dot"]
            axis = AxisAnalysis(kernel) if dots else None
            for index, dot in enumerate(dots):
                if problem(dot, options.num_warps) is None:
                    _lower(kernel, dot, index, axis, mma_sync=not wgmma)
        return module


def mma_sync_ring_target(arch: str) -> bool:
    """Whether ``arch`` runs tl.dot on mma.sync through shared operand buffers read by ldmatrix
    (sm_80, sm_89: NVIDIA, cp.async, neither wgmma nor tcgen05)."""
    target = get_target(arch)
    return target.is_nvidia and not target.has("wgmma") and not target.has("tcgen05")


def mma_sync_problem(dot: Operation, num_warps: int, shared_limit: int = 49152) -> str | None:
    """Why ``dot`` keeps its register operands on sm_80/sm_89 (converted through scratch),
    or None when it goes through shared operand buffers and ldmatrix: f16/bf16 inputs, an f32
    accumulator, M a multiple of 16 and N of 8 per the mma_v2 tiling, K a multiple of 16, and
    both operands together within half the block's shared memory (``shared_limit`` bytes)."""
    a, b, acc = (v.type for v in dot.operands)
    if a.element.name not in ("f16", "bf16") or b.element != a.element:
        return f"{a.element} x {b.element} inputs"
    if acc.element.name != "f32":
        return f"a {acc.element} accumulator"
    m, k = a.shape
    n = b.shape[1]
    if m % 16 or n % 8 or k % 16:
        return f"a {m}x{n}x{k} product (mma.sync m16n8k16 tiles)"
    if (m * k + k * n) * a.element.bytes * 2 > shared_limit:
        return f"{m}x{k} and {k}x{n} operands larger than half the shared memory"
    return None


def wgmma_problem(dot: Operation, num_warps: int) -> str | None:
    """Why ``dot`` stays on mma.sync, or None when wgmma runs it."""
    a, b, acc = (v.type for v in dot.operands)
    for element in {a.element.name, b.element.name}:
        if element not in WGMMA_INPUTS:
            return f"{element} inputs"
    if acc.element.name != "f32":       # the wgmma lowering holds f32 accumulators only (rules_mma_async)
        return f"a {acc.element} accumulator"
    m, k = a.shape
    n = b.shape[1]
    problem = shape_problem(m, n, k, a.element)
    if problem:
        return problem
    try:
        N.mma_accumulator_layout((m, n), num_warps, "wgmma")
    except ValueError as exc:
        return str(exc)
    return None


def stored_transposed(operand: Value, which: str, axis: AxisAnalysis) -> bool:
    """Whether dot operand ``operand`` (A [M, K] or B [K, N]) gets a transposed buffer:
    a 16-bit operand when it is loaded through pointers more contiguous along dim 0 than
    along dim 1 (A M-major, B K-major in memory); any other type when it is B (wgmma
    reads fp8/tf32 K-major only)."""
    if not transposable(operand.type.element):
        return which == "b"
    contiguity = _memory_contiguity(operand, axis)
    return contiguity is not None and len(contiguity) == 2 and contiguity[0] > contiguity[1]


def _memory_contiguity(value: Value, axis: AxisAnalysis):
    """Per dim, the contiguity in global memory of the elements of ``value``: of a load's
    pointers, permuted through ``tl.trans``; None for any other value."""
    op = value.owner
    name = getattr(op, "name", None)
    if name == "tl.trans":
        inner = _memory_contiguity(op.operands[0], axis)
        return None if inner is None else tuple(inner[p] for p in op.attrs["perm"])
    if name != "tl.load":
        return None
    ptrs = op.operands[0]
    if not isinstance(ptrs.type, TensorType) or not isinstance(ptrs.type.element, PointerType):
        return None
    return axis.info(ptrs).contiguity


def _lower(kernel: Operation, dot: Operation, index: int, axis: AxisAnalysis, mma_sync: bool = False) -> None:
    a, b, acc = dot.operands
    entry = kernel.regions[0].block
    buffers = []
    flips = [stored_transposed(a, "a", axis), stored_transposed(b, "b", axis)]
    for operand, which, flip in ((a, "a", flips[0]), (b, "b", flips[1])):
        shape = tuple(operand.type.shape)
        alloc = _op("tlx.local_alloc", [], [MemDescType(shape[::-1] if flip else shape, operand.type.element, 1)],
                    {"dot_operand": which}, dot.loc, [f"dot{index}_{which}_smem"])
        entry.insert(len(buffers), alloc)
        buffers.append(alloc.result)
    block = dot.parent
    at = block.ops.index(dot)
    zero = _op("arith.constant", [], [i32], {"value": 0}, dot.loc)
    new_ops = [zero]
    views = []
    for buffer, operand, flip in zip(buffers, (a, b), flips):
        view = _op("tlx.local_view", [buffer, zero.result], [buffer.type.view()], {}, dot.loc)
        new_ops.append(view)
        target = view.result
        if flip:
            t = buffer.type
            trans = _op("tlx.local_trans", [view.result],
                        [MemDescType(tuple(operand.type.shape), t.element, 0, t.storage, (1, 0), t.layout)],
                        {"perm": (1, 0)}, dot.loc)
            new_ops.append(trans)
            target = trans.result
        new_ops.append(_op("tlx.local_store", [target, operand], [], {}, dot.loc))
        views.append(target)
    attrs = {"has_use_acc": False, "input_precision": "ieee"}
    if mma_sync:            # async-dot-on-mfma makes it local_loads (ldmatrix) and a tl.dot (mma.sync)
        attrs["mma_sync"] = True
    if dot.attrs.get("max_num_imprecise_acc") is not None:
        attrs["max_num_imprecise_acc"] = dot.attrs["max_num_imprecise_acc"]
    issue = _op("tlx.async_dot", [views[0], views[1], acc], [_plain(acc.type)], attrs, dot.loc)
    wait = _op("tlx.async_dot_wait", [issue.result], [_plain(acc.type)], {"pendings": 0}, dot.loc,
               [dot.result.name_hint])
    new_ops += [issue, wait]
    block.ops[at:at + 1] = []
    for offset, op in enumerate(new_ops):
        block.insert(at + offset, op)
    replace_uses(kernel, dot.result, wait.result)


def _plain(t: TensorType) -> TensorType:
    return TensorType(tuple(t.shape), t.element)


def _op(name: str, operands, result_types, attrs, loc, names=None) -> Operation:
    op = Builder(None).create(name, operands, result_types, attrs, result_names=names)
    op.loc = loc
    return op


def replace_uses(root: Operation, old: Value, new: Value) -> None:
    """Every use of ``old`` under ``root`` becomes a use of ``new``."""
    for op in root.walk():
        op.operands = [new if v is old else v for v in op.operands]


__all__ = ["LowerDotToWgmma", "mma_sync_problem", "mma_sync_ring_target", "replace_uses", "stored_transposed",
           "wgmma_problem"]
