"""Warp-level ops and user inline assembly on the interpreter (``ir/ops/warp.py``).

``vote_ballot_sync`` is exact where the tile-level model knows every lane's
predicate:

* a scalar predicate that does not derive from ``tlx.thread_id`` holds in all
  lanes or in none, so the ballot is ``mask`` or 0;
* a scalar predicate that derives from ``tlx.thread_id`` through scalar
  arithmetic is recomputed for each lane of the warp of the task's leading
  thread (the thread whose values a task's scalars are: ``task.thread_id``);
* a tensor predicate whose elements are all true (or all false) gives ``mask``
  (or 0) in every element, whatever the register layout.

A tensor predicate whose elements differ gives each element the ballot of the
lanes holding its register: that depends on the layout the GPU pipeline picks,
which tile-level IR does not have, so it is refused (a located error), as is a
thread-varying scalar computed by anything but scalar arithmetic.

``tl.inline_asm_elementwise`` is PTX: the interpreter runs it only when it is made
of the statements ``inline_ptx.py`` models exactly (``nanosleep``, ``mov``), and
otherwise says so at the user's line.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Operation
from ..ir.types import TensorType
from ..passes.uniformity import Uniformity
from .inline_ptx import UnsupportedPtx, run_inline_ptx
from .registry import impl, rule_for
from .values import register_dtype, scalar_of


def _kernel_of(op: Operation) -> Operation:
    while op.parent_op() is not None:
        op = op.parent_op()
    return op


def _varying(ctx, op: Operation) -> set[int]:
    """Ids of the values of ``op``'s kernel that derive from ``tlx.thread_id`` (cached per kernel)."""
    kernel = _kernel_of(op)
    cache = vars(ctx.plans).setdefault("warp_varying", {})
    found = cache.get(id(kernel))
    if found is None:
        found = cache[id(kernel)] = Uniformity(kernel).varying
    return found


class _Lanes:
    """Recompute a thread-varying scalar for the 32 lanes of one warp (numpy vectors)."""

    def __init__(self, ctx, op: Operation, warp_first_thread: int):
        self.ctx, self.op = ctx, op
        self.varying = _varying(ctx, op)
        self.first = warp_first_thread
        self.memo: dict[int, object] = {}

    def value(self, v):
        if id(v) not in self.varying:
            return self.ctx.env[v]
        if id(v) not in self.memo:
            self.memo[id(v)] = self._evaluate(v)
        return self.memo[id(v)]

    def _evaluate(self, v):
        owner = v.owner
        if isinstance(owner, Operation) and owner.name == "tlx.thread_id":
            if owner.attrs["axis"] != 0:
                return np.int32(0)
            return np.arange(self.ctx.warp_size, dtype=np.int32) + np.int32(self.first)
        if not (isinstance(owner, Operation) and owner.name.startswith("arith.") and not owner.regions
                and not isinstance(v.type, TensorType)):
            what = owner.name if isinstance(owner, Operation) else "a block argument"
            raise self.ctx.error(self.op, f"tlx.vote_ballot_sync in {self.ctx.label}: its predicate derives from "
                                          f"tlx.thread_id through {what}, which the interpreter cannot recompute "
                                          f"lane by lane (only scalar arithmetic on tlx.thread_id is modelled)")
        operands = [self.value(o) for o in owner.operands]
        out = rule_for(owner).fn(self.ctx, owner, *operands)
        return out if len(owner.results) == 1 else out[v.index]


def _as_i32(bits: int) -> np.int32:
    return np.uint32(bits & 0xFFFFFFFF).view(np.int32)


@impl("tlx.vote_ballot_sync")
def vote_ballot_sync(ctx, op, pred):
    mask = int(op.attrs["mask"])
    if isinstance(op.operands[0].type, TensorType):
        votes = np.asarray(pred, dtype=bool)
        if votes.all() or not votes.any():
            return np.full(votes.shape, _as_i32(mask if votes.all() else 0), dtype=np.int32)
        raise ctx.error(op, f"tlx.vote_ballot_sync in {ctx.label}: the predicate tensor holds both true and "
                            f"false elements; each element's ballot then collects the lanes that hold its "
                            f"register, which depends on the register layout the GPU pipeline picks, and the "
                            f"interpreter runs tiles without layouts (ballot a scalar predicate, e.g. one "
                            f"computed from tlx.thread_id, or check this kernel on the GPU)")
    if id(op.operands[0]) not in _varying(ctx, op):
        return _as_i32(mask if bool(pred) else 0)
    thread = getattr(ctx, "thread", None)
    leader = ctx.first_thread + (thread or 0)
    lanes_per_warp = ctx.warp_size
    warp_first = leader - leader % lanes_per_warp
    lanes = np.broadcast_to(np.asarray(_Lanes(ctx, op, warp_first).value(op.operands[0]), dtype=bool),
                            (lanes_per_warp,))
    bits = sum(1 << lane for lane in range(lanes_per_warp) if lanes[lane] and mask >> lane & 1)
    return _as_i32(bits)


@impl("tl.inline_asm_elementwise")
def inline_asm_elementwise(ctx, op, *args):
    """Only asm made of the statements ``inline_ptx.py`` models (``nanosleep``, ``mov``, f32 arithmetic)."""
    types = [scalar_of(r.type) for r in op.results]
    shape = tuple(op.results[0].type.shape) if isinstance(op.results[0].type, TensorType) else ()
    try:
        out = run_inline_ptx(op.attrs["asm"], types, list(args), shape, register_dtype, len(op.results),
                             op.attrs.get("pack", 1), [scalar_of(v.type) for v in op.operands])
    except UnsupportedPtx as exc:
        raise ctx.error(op, f"tl.inline_asm_elementwise in {ctx.label}: inline PTX cannot run on the interpreter "
                            f"(it runs nanosleep, mov, f32/f32x2 add, sub, mul, fma.rn, tanh.approx, "
                            f"ex2.approx and 32-bit and, or, xor, not, shl, shr, add, sub, mul.lo, prmt, lop3 "
                            f"(interpreter/inline_ptx.py); here: '{exc}'); run this kernel on the GPU "
                            f"(or give the interpreter a tl.* equivalent of the asm)") from None
    return out[0] if len(out) == 1 else tuple(out)


@impl("tlx.warp_pipeline_begin", "tlx.warp_pipeline_end", "tlx.warp_pipeline_enter", "tlx.warp_pipeline_exit",
      "tlx.amd_sched_barrier")
def warp_pipeline_marker(ctx, op):
    """Warp-pipeline stages schedule AMD waves; the interpreter runs a program as one sequence of
    tiles, in which every stage of every wave group has already happened in program order."""
    return None
