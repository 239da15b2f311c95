"""pipeline-loads: software pipelining of the loads that feed a wgmma ``tl.dot``.

After ``lower-dot-to-wgmma``, the K loop of a Triton matmul reads::

    for k in range(lb, ub, step):            # carries acc, a_ptrs, b_ptrs
        a = tl.load(a_ptrs, mask_a(k))
        b = tl.load(b_ptrs, mask_b(k))
        local_store(a_smem[0], a); local_store(b_smem[0], b)
        acc = async_dot_wait(async_dot(a_smem[0], b_smem[0], acc), 0)
        a_ptrs += inc_a; b_ptrs += inc_b

This pass makes it a ``num_stages``-deep cp.async ring, as TLX's
hopper_gemm_pipelined tutorial does by hand (S = num_stages)::

    a_smem, b_smem: S buffers each
    for s in 0 .. S-2:   async_load(tile s into stage s, masked by lb + s*step < ub); commit
    for k ...:           j = (k - lb) / step
        async_load_wait_group(S - 2)                    # tile j has landed
        acc = async_dot(a_smem[j % S], b_smem[j % S], acc)
        acc = async_dot_wait(acc, 1)                    # the MMA of tile j - 1 retired
        async_load(tile j + S - 1 into stage (j + S - 1) % S, masked by k + (S-1)*step < ub); commit
    async_load_wait_group(0); acc = async_dot_wait(acc, 0)

``TLXC_RING_COUNTER=1`` (opt-in, for A/B measurements) carries the stage the body reads as a
loop value that wraps at S (``_stage_counter``) instead of computing ``j % S`` and
``(j + S - 1) % S`` in every iteration.  ``TLXC_RING_BASE=1`` (opt-in, likewise) addresses
the body's copies of tile ``j + S - 1`` as Triton's loop does: the pointer before the loop
plus ``(j + S - 1)`` increments (``_from_start``), that pointer opaque to the device compiler
(``tl.addptr {opaque_base}``), so that each copy's address is one 64-bit add into a fresh
register pair (no carried pointers, no moves into aligned pairs; NVVM would otherwise
re-derive the pointer from its 32-bit offsets and sign-extend and scale it every iteration).

Tile ``j + d``'s pointers and mask are the loop body's own computation with the
loop variable advanced by ``d`` steps and each pointer (or offset) the loop
advances by a loop-invariant increment (``a_ptrs += BLOCK_K``, block pointers'
``tl.advance``) advanced by ``d`` increments; cp.async zero-fills masked-off
elements, which is the K tail.  The fences and barriers the ring needs (after the
cp.async wait, after the wgmma wait in a two-warpgroup kernel) are the codegen's
(``codegen_c/shared_order.py``).

Only when safe: every ``tlx.async_dot`` of the body comes from a ``tl.dot`` whose
two operands are ``tl.load`` results used by nothing else, each load's ``other``
is zero, its pointer and mask are pure functions of the loop variable, of values
defined before the loop and of loop-carried values advanced by invariant
increments, and the body has no other TLX op.  Otherwise the loop is left alone.
The accumulator waits with one wgmma in flight (``pendings = 1``) only when it is
the loop's carried value and nothing else in the body reads it, or when only an ``if`` reads
it (a persistent kernel's epilogue): that ``if`` then starts with ``async_dot_wait {pendings =
0, epilogue}`` and the next tile's copies are issued before it (``TLXC_EPILOGUE_OVERLAP=0``
keeps the wait for every wgmma there instead, for A/B measurements).

Run-ahead state (a persistent kernel's flattened tile x K loop, Triton's tutorial 09): when
a pointer or mask depends on carried values that are not advanced by invariant increments
(``ki = tl.where(ki == last, 0, ki + 1)``, offsets recomputed under ``if ki == 0:``), the
pass finds the *state*: the carried values the addresses depend on, closed under their own
updates, every op of which is pure (``scf.if`` included when its regions are).  The ring's
copies then read a second copy of that state, ``S - 1`` iterations ahead: the prologue steps
it from the initial values (issuing tiles 0 .. S-2 on the way), the body issues tile
``j + S - 1`` from it and steps it once more, as new carried values.  The loop's own state
and its other uses (the epilogue under ``if ki == last:``) are untouched.

``num_stages`` is the loop's ``tl.range(num_stages=)`` or the compile's
``num_stages`` option (Triton's default 3); below 2 nothing is pipelined, and it
is lowered (down to 2) until the rings fit the shared memory.

Part two (``pipeline_prefetch.py``, every sm_* target): the plain loads of a loop given
``tl.range(num_stages=S)`` that no ring took (Triton's fused softmax: one row per
iteration) are loaded ``S - 1`` iterations ahead into registers.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..ir.builder import Builder
from ..ir.core import Block, Module, Operation, OpResult, Region, Value
from ..ir.traits import PURE, has_trait
from ..ir.types import PointerType, ScalarType, TensorType, i1, i32, i64
from ..options import perf_switch
from ..target import has_feature, target_of
from .dot_wgmma import mma_sync_ring_target, replace_uses
from .manager import Pass

DEFAULT_STAGES = 3
SHARED_CAPACITY = 232448             # bytes of shared memory a Hopper CTA may use (227 KB)
OPERAND_VIEWS = ("tlx.local_view", "tlx.local_trans")     # the views a dot operand's buffer is read through
DOT_OPS = (*OPERAND_VIEWS, "tlx.local_store", "tlx.async_dot", "tlx.async_dot_wait")


class NotPipelinable(Exception):
    """The loop does not have the shape this pass rewrites (it is left alone); ``reason``
    says why in the user's terms (``not_pipelined`` remarks, ``perf_warnings``)."""

    def __init__(self, reason: str = "the loop's shape is not one the pipeliner rewrites"):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class RingOptions:
    """How pipeline-loads writes a ring's loop (opt-in variants for A/B measurements,
    docs/performance.md); ``from_environment`` reads the switches a compile was started with."""
    from_start: bool = False          # TLXC_RING_FROM_START=1: the body's copies addressed from the loop's start
    base: bool = False                # TLXC_RING_BASE: from an opaque initial pointer plus the tile's offset
    counter: bool = False             # TLXC_RING_COUNTER: the stage as a carried, wrapping counter
    epilogue_overlap: bool = True     # TLXC_EPILOGUE_OVERLAP=0: no overlap of the last MMA with the epilogue

    @classmethod
    def from_environment(cls) -> RingOptions:
        return cls(from_start=os.environ.get("TLXC_RING_FROM_START") == "1", base=perf_switch("TLXC_RING_BASE"),
                   counter=perf_switch("TLXC_RING_COUNTER"),
                   epilogue_overlap=os.environ.get("TLXC_EPILOGUE_OVERLAP", "1") != "0")


@dataclass(frozen=True)
class PipelineLoads(Pass):
    """Its options: ``num_stages``, the ring depth of loops without their own (None: the
    compile's ``num_stages``, else ``DEFAULT_STAGES``), and ``ring`` (``RingOptions``)."""
    name = "pipeline-loads"
    num_stages: int | None = None
    ring: RingOptions = field(default_factory=RingOptions.from_environment)

    def run(self, module: Module, options) -> Module:
        from .pipeline_prefetch import prefetch_loops
        default = self.num_stages if self.num_stages is not None else options.num_stages
        default = DEFAULT_STAGES if default is None else default
        for kernel in module.kernels:
            rewritten: set[int] = set()
            for loop in [op for op in kernel.walk() if op.name == "scf.for"]:
                stages = loop.attrs.get("num_stages", default)
                if not (has_feature(options.arch, "wgmma") or mma_sync_ring_target(options.arch)) or stages < 2:
                    continue
                try:
                    plan = _Plan(kernel, loop)
                except NotPipelinable as why:
                    not_pipelined(module, loop, stages, why.reason)
                    continue
                stages = _fitting_stages(kernel, plan, stages, min(SHARED_CAPACITY, target_of(options).shared_limit))
                if stages >= 2:
                    plan.rewrite(stages, self.ring)
                    rewritten.add(id(loop))
            if target_of(options).is_nvidia:
                prefetch_loops(kernel, options.num_warps, rewritten)     # pipeline_prefetch.py
        return module


def _fitting_stages(kernel: Operation, plan: _Plan, stages: int, capacity: int = SHARED_CAPACITY) -> int:
    """The deepest ring (at most ``stages``) that fits beside the kernel's other buffers in
    ``capacity`` bytes (the target's shared memory per CTA)."""
    others = sum(op.result.type.buffer_bytes * op.result.type.num for op in kernel.walk()
                 if op.name == "tlx.local_alloc" and not op.operands and op not in plan.allocs)
    per_stage = sum(op.result.type.buffer_bytes for op in plan.allocs)
    while stages > 2 and others + stages * per_stage > capacity:
        stages -= 1
    return stages


class _Operand:
    """One pipelined dot operand: its load, the store into its buffer, the buffer (``trans``:
    the ``local_trans`` the store and the dot go through, for a transposed buffer)."""

    def __init__(self, load: Operation, store: Operation, view: Operation, alloc: Operation,
                 trans: Operation | None = None):
        self.load, self.store, self.view, self.alloc, self.trans = load, store, view, alloc, trans


class _Plan:
    """What the rewrite of one loop needs; raises NotPipelinable when it does not apply."""

    state: list[int] | None = None         # carried indices stepped ahead (run-ahead mode)
    lead_inits: dict | None = None         # their values S - 1 iterations on, before the loop

    def __init__(self, kernel: Operation, loop: Operation):
        self.kernel, self.loop = kernel, loop
        self.body: Block = loop.regions[0].block
        self.iv, self.args = self.body.args[0], self.body.args[1:]
        self.yielded = self.body.terminator.operands
        self.uses = _use_counts(kernel)
        self.dots = [op for op in self.body.ops if op.name == "tlx.async_dot"]
        if not self.dots:
            raise NotPipelinable("the loop's body has no tl.dot of its own (one nested in an if or a loop "
                                 "is not pipelined)")
        self._check_body_ops()
        self.operands = [self._operand(dot, i) for dot in self.dots for i in (0, 1)]
        self.allocs = [o.alloc for o in self.operands]
        self.variant = self._variant_values()
        try:
            for o in self.operands:
                self._check_load(o.load)
        except NotPipelinable as direct:
            try:
                self.state = self._run_ahead_state()
            except NotPipelinable:
                raise direct from None

    # -- analysis -----------------------------------------------------------------------------
    def _check_body_ops(self) -> None:
        for op in self.body.ops:
            for inner in op.walk():
                if inner.name.startswith("tlx.") and (inner is not op or op.name not in DOT_OPS):
                    if inner.name in _TMA_COPY_OPS:       # what a host descriptor's load/store lowers to
                        what = "a TMA copy (a tensor descriptor's load or store, or tlx.async_descriptor_*)"
                    else:
                        what = f"{inner.name} (a tl.dot nested in an if or a loop, or a TLX op)"
                    raise NotPipelinable(f"the body holds {what} at {_where(inner)}: only tl.dot loops whose "
                                         f"operands are pointer loads are pipelined")

    def _operand(self, dot: Operation, index: int) -> _Operand:
        view = dot.operands[index].owner
        trans = None
        if getattr(view, "name", None) == "tlx.local_trans" and view.parent is self.body:
            trans, view = view, view.operands[0].owner      # a transposed buffer (lower-dot-to-wgmma)
            if self.uses[id(view.result)] != 1:
                raise NotPipelinable(_OPERAND_NOT_LOADED)
        if getattr(view, "name", None) != "tlx.local_view" or view.parent is not self.body:
            raise NotPipelinable(_OPERAND_NOT_LOADED)
        alloc = view.operands[0].owner
        if getattr(alloc, "name", None) != "tlx.local_alloc" or "dot_operand" not in alloc.attrs:
            raise NotPipelinable(_OPERAND_NOT_LOADED)
        target = (trans or view).result          # what the store writes and the dot reads
        stores = [op for op in self.body.ops if op.name == "tlx.local_store" and op.operands[0] is target]
        if len(stores) != 1 or self.uses[id(target)] != 2 or self.uses[id(alloc.result)] != 1:
            raise NotPipelinable(_OPERAND_NOT_LOADED)
        load = stores[0].operands[1].owner
        if getattr(load, "name", None) != "tl.load" or load.parent is not self.body:
            raise NotPipelinable(_OPERAND_NOT_LOADED)
        if self.uses[id(load.result)] != 1:
            raise NotPipelinable(f"the tl.load at {_where(load)} feeds the tl.dot and is also read elsewhere in "
                                 f"the loop: a pipelined operand may only feed the dot")
        if load.attrs.get("has_other") and not _is_zero(load.operands[-1]):
            raise NotPipelinable(f"the tl.load at {_where(load)} has a nonzero `other`: cp.async fills "
                                 f"masked-off elements with zeros only")
        if load.attrs.get("volatile") or load.attrs.get("cache") == ".cv":      # stays a synchronous ld
            raise NotPipelinable(f"the tl.load at {_where(load)} is volatile or uncached (.cv)")
        return _Operand(load, stores[0], view, alloc, trans)

    def _variant_values(self) -> set[int]:
        """Values of the body that change from one iteration to the next."""
        variant = {id(self.iv)} | {id(a) for a in self.args}
        for op in self.body.ops:
            if op.regions or not has_trait(op, PURE) or \
                    any(id(v) in variant for v in op.operands):
                variant |= {id(r) for r in op.results}
        return variant

    def _check_load(self, load: Operation) -> None:
        for value in load.operands[:1 + bool(load.attrs.get("has_mask"))]:
            self._check_shiftable(value, set())

    def _check_shiftable(self, value: Value, seen: set[int]) -> None:
        if id(value) in seen or not self._in_body(value) or value is self.iv:
            return
        seen.add(id(value))
        if value in self.args:
            self.increment(value)
            return
        op = value.owner
        if op.regions or not has_trait(op, PURE):
            raise NotPipelinable(f"a dot operand's address or mask depends on {op.name} at {_where(op)}, "
                                 f"which is not a pure function of the loop index")
        for v in op.operands:
            self._check_shiftable(v, seen)

    def _in_body(self, value: Value) -> bool:
        owner = value.owner
        if owner is self.body:
            return True
        if isinstance(owner, Operation):
            if owner.parent is self.body:
                return True
            return _inside(owner, self.loop)
        return _inside_block(owner, self.loop)

    def increment(self, arg: Value) -> Value | None:
        """The loop-invariant value the loop adds to carried ``arg`` each iteration (None: unchanged)."""
        index = self.args.index(arg)
        step = self.yielded[index]
        if step is arg:
            return None
        op = step.owner
        name = arg.name_hint or "a loop-carried value"
        if not isinstance(op, Operation) or op.parent is not self.body:
            raise NotPipelinable(f"{name}, which a dot operand's address or mask reads, is not advanced by an "
                                 f"addition at the loop's top level (e.g. it is updated inside an if)")
        if op.name == "tl.addptr" and op.operands[0] is arg:
            inc = op.operands[1]
        elif op.name == "arith.add" and arg in op.operands and isinstance(arg.type, ScalarType | TensorType):
            inc = op.operands[1] if op.operands[0] is arg else op.operands[0]
        else:
            raise NotPipelinable(f"{name}, which a dot operand's address or mask reads, is updated by "
                                 f"{op.name} at {_where(op)}, not by adding a loop-invariant increment")
        if id(inc) in self.variant:
            raise NotPipelinable(f"{name} is advanced by an amount that changes from iteration to iteration "
                                 f"(at {_where(op)})")
        if self._in_body(inc):
            self._check_invariant_pure(inc)
        return inc

    def _check_invariant_pure(self, value: Value) -> None:
        if not self._in_body(value):
            return
        op = value.owner
        if not isinstance(op, Operation) or op.regions or not has_trait(op, PURE):
            raise NotPipelinable("a pointer increment is computed by an op that is not pure")
        for v in op.operands:
            self._check_invariant_pure(v)

    def _run_ahead_state(self) -> list[int]:
        """The carried indices the loads' pointers and masks depend on, closed under the
        values that update them; NotPipelinable unless every op on the way is pure."""
        state: set[int] = set()
        seen: set[int] = set()
        work = [v for o in self.operands for v in o.load.operands[:1 + bool(o.load.attrs.get("has_mask"))]]
        while work:
            value = work.pop()
            if id(value) in seen or value is self.iv or not self._in_body(value):
                continue
            seen.add(id(value))
            if value in self.args:
                index = self.args.index(value)
                state.add(index)
                work.append(self.yielded[index])
                continue
            op = self._top_level_owner(value)
            if id(op) in seen:
                continue
            seen.add(id(op))
            self._check_pure(op)
            work.extend(self._free_operands(op))
        if not state:
            raise NotPipelinable("no loop-carried state drives the dot operands' addresses")
        return sorted(state)

    def _top_level_owner(self, value: Value) -> Operation:
        op = value.owner
        while isinstance(op, Operation) and op.parent is not self.body:
            op = op.parent_op()
        if not isinstance(op, Operation):
            raise NotPipelinable("a dot operand's address is computed outside the loop's top level")
        return op

    def _check_pure(self, op: Operation) -> None:
        for inner in op.walk():
            if inner.name in ("scf.if", "scf.yield") or has_trait(inner, PURE):
                continue
            raise NotPipelinable(f"a dot operand's address depends on {inner.name} at {_where(inner)}, "
                                 f"which is not pure")

    def _free_operands(self, op: Operation) -> list[Value]:
        """The values ``op`` (its regions included) reads that are defined outside it."""
        inside = {id(r) for inner in op.walk() for r in inner.results}
        inside |= {id(a) for inner in op.walk() for region in inner.regions for a in region.block.args}
        return [v for inner in op.walk() for v in inner.operands if id(v) not in inside]

    # -- rewrite ------------------------------------------------------------------------------
    def rewrite(self, stages: int, ring: RingOptions | None = None) -> None:
        self.ring = ring if ring is not None else RingOptions.from_environment()
        self.from_start = self.ring.from_start
        self.ring_base = self.ring.base
        rings = {id(o.alloc): self._ring(o.alloc, stages) for o in self.operands}
        parent = self.loop.parent
        at = parent.ops.index(self.loop)
        prologue = _Emitter(self.loop.loc)
        ahead = None
        if self.state is not None:       # tiles 0 .. S-2 from the stepped state, then the lead copy
            ahead = {id(self.args[i]): self.loop.inits[i] for i in self.state}
        for s in range(stages - 1):
            subst, memo = self._issue(prologue, stages, rings, s, None, ahead)
            if ahead is not None:
                ahead = {id(self.args[i]): self._shifted(prologue, self.yielded[i], s, subst, memo, False)
                         for i in self.state}
        self.lead_inits = ahead
        parent.ops[at:at] = prologue.ops
        for op in prologue.ops:
            op.parent = parent
        self._rewrite_body(stages, rings)
        self._after_loop(stages)

    def _ring(self, alloc: Operation, stages: int) -> Value:
        t = alloc.result.type
        ring = _op("tlx.local_alloc", [], [type(t)(t.shape, t.element, stages, t.storage, t.perm, t.layout)],
                   dict(alloc.attrs), alloc.loc, [alloc.result.name_hint])
        block = alloc.parent
        block.ops[block.ops.index(alloc)] = ring
        ring.parent = block
        replace_uses(self.kernel, alloc.result, ring.result)
        return ring.result

    def _issue(self, em: _Emitter, stages: int, rings: dict, ahead: int, stage: Value | None,
               state: dict | None = None) -> tuple[dict, dict]:
        """Issue the copies of one tile: in the prologue (``stage`` None) tile ``ahead``
        into stage ``ahead``; in the body, the tile ``ahead`` iterations on into ``stage``.
        ``state`` (run-ahead mode) maps the state's carried values to theirs at that tile.
        Returns the substitution and memo of that tile's values."""
        lb, ub, step = self.loop.operands[:3]
        in_body = stage is not None
        base = self.iv if in_body else lb
        index = em.add(base, em.mul(step, em.const(ahead, lb.type))) if ahead else base
        live = em.cmp(index, ub, "lt")
        subst = {id(self.iv): index, **(state or {})}
        if in_body:
            self.tile_index = index
        if stage is None:
            stage = em.const(ahead, lb.type)
        memo: dict[int, Value] = {}
        for o in self.operands:
            load = o.load
            ptrs = self._shifted(em, load.operands[0], ahead, subst, memo, in_body)
            shape = tuple(ptrs.type.shape)
            guard = em.splat(live, TensorType(shape, i1))
            if load.attrs.get("has_mask"):
                mask = self._shifted(em, load.operands[1], ahead, subst, memo, in_body)
                guard = em.emit("arith.and", [mask, guard], mask.type)
            view = em.emit("tlx.local_view", [rings[id(o.alloc)], em.index(stage)], o.view.result.type)
            if o.trans is not None:
                view = em.emit("tlx.local_trans", [view], o.trans.result.type, dict(o.trans.attrs))
            em.effect("tlx.async_load", [ptrs, view, guard], {"has_mask": True, **_copy_hints(load)}, load.loc)
        em.effect("tlx.async_commit_group", [], {}, self.loop.loc)
        return subst, memo

    def _shifted(self, em: _Emitter, value: Value, ahead: int, subst: dict, memo: dict, in_body: bool) -> Value:
        """``value`` as the body computes it ``ahead`` iterations on (in the prologue: at
        iteration ``ahead``), emitted into ``em``."""
        if id(value) in subst:
            return subst[id(value)]
        if id(value) in memo:
            return memo[id(value)]
        if not self._in_body(value) or (in_body and id(value) not in self.variant):
            return value
        if value in self.args:
            result = self._shifted_arg(em, value, ahead, memo, in_body)
        elif value.owner.regions:                  # an scf.if of the run-ahead state
            op = value.owner
            copy = self._clone_with_regions(em, op, ahead, subst, memo, in_body)
            for old_result, new_result in zip(op.results, copy.results):
                memo[id(old_result)] = new_result
            return memo[id(value)]
        else:
            op = value.owner
            operands = [self._shifted(em, v, ahead, subst, memo, in_body) for v in op.operands]
            result = em.emit(op.name, operands, value.type, dict(op.attrs), op.loc, value.name_hint)
        memo[id(value)] = result
        return result

    def _clone_with_regions(self, em: _Emitter, op: Operation, ahead: int, subst: dict, memo: dict,
                            in_body: bool) -> Operation:
        """A copy of pure region op ``op`` (an ``scf.if``) into ``em``: the values it reads from
        outside are shifted first; its regions' own ops are copied as they are."""
        outside = {id(v): self._shifted(em, v, ahead, subst, memo, in_body) for v in self._free_operands(op)}

        def copy(inner: Operation) -> Operation:
            regions = []
            for region in inner.regions:
                block = Block([a.type for a in region.block.args], [a.name_hint for a in region.block.args])
                for old_arg, new_arg in zip(region.block.args, block.args):
                    outside[id(old_arg)] = new_arg
                for nested in region.block.ops:
                    block.append(copy(nested))
                regions.append(Region(block))
            new = _op(inner.name, [outside.get(id(v), v) for v in inner.operands], [r.type for r in inner.results],
                      dict(inner.attrs), inner.loc, [r.name_hint for r in inner.results])
            new.regions = regions
            for region in regions:
                region.parent = new
            for old_result, new_result in zip(inner.results, new.results):
                outside[id(old_result)] = new_result
            return new
        cloned = copy(op)
        em.ops.append(cloned)
        return cloned

    def _shifted_arg(self, em: _Emitter, arg: Value, ahead: int, memo: dict, in_body: bool) -> Value:
        start = arg if in_body else self.loop.inits[self.args.index(arg)]
        inc = self.increment(arg)
        if inc is None or ahead == 0:
            return self._hinted_like(em, arg, start)
        if in_body and (self.from_start or self.ring_base) and isinstance(_element(arg.type), PointerType) and \
                self.yielded[self.args.index(arg)].owner.name == "tl.addptr":
            return self._hinted_like(em, arg, self._from_start(em, arg, inc))
        if not in_body:
            inc = self._shifted(em, inc, 0, {}, memo, False)
        scaled = em.mul(inc, em.const(ahead, inc.type))
        if isinstance(_element(arg.type), PointerType):
            return self._hinted_like(em, arg, em.emit("tl.addptr", [start, scaled], arg.type, {}, None, arg.name_hint))
        return self._hinted_like(em, arg, em.emit("arith.add", [start, scaled], arg.type, {}, None, arg.name_hint))

    from_start = False           # TLXC_RING_FROM_START=1: _from_start for the body's copies
    ring_base = False            # TLXC_RING_BASE=1: _from_start over an opaque initial pointer
    tile_index: Value | None = None

    def _from_start(self, em: _Emitter, arg: Value, inc: Value) -> Value:
        """Pointer ``arg`` at the tile the body copies, as its value before the loop plus n
        increments (n: that tile's iteration number, 64-bit products): no carried pointer and
        no moves of its halves into an aligned register pair before each cp.async, the way
        Triton's pipelined loads address their tiles."""
        lb, _, step = self.loop.operands[:3]
        n = self.tile_index
        if _constant(lb) != 0:
            n = em.emit("arith.sub", [n, lb], lb.type)
        if _constant(step) != 1:
            n = em.emit("arith.div", [n, step], lb.type)
        n64 = em.emit("arith.cast", [n], i64)
        if isinstance(inc.type, TensorType):
            wide = TensorType(inc.type.shape, i64)
            offsets = em.mul(em.emit("arith.cast", [inc], wide), em.splat(n64, wide))
        else:
            offsets = em.mul(em.emit("arith.cast", [inc], i64), n64)
        init = self.loop.inits[self.args.index(arg)]
        attrs = {"opaque_base": True} if self.ring_base else {}
        return em.emit("tl.addptr", [init, offsets], arg.type, attrs, None, arg.name_hint)

    def _hinted_like(self, em: _Emitter, arg: Value, value: Value) -> Value:
        """``value`` (carried ``arg`` some iterations on) under the hints the body gives ``arg``
        (``tl.multiple_of(a_ptrs, [16, 16])`` as a statement: axis_info.py), which promise
        them for every iteration's value: the prologue's copies vectorize as the body's."""
        if value is arg:
            return value
        for op in self.body.ops:
            if op.name == "tl.hint" and op.operands[0] is arg:
                value = em.emit("tl.hint", [value], value.type, dict(op.attrs), op.loc, arg.name_hint)
        return value

    def _rewrite_body(self, stages: int, rings: dict) -> None:
        lb, _, step = self.loop.operands[:3]
        head = _Emitter(self.loop.loc)
        head.effect("tlx.async_wait_group", [], {"pendings": stages - 2}, self.loop.loc)
        j = self.iv
        if not (_constant(lb) == 0 and _constant(step) == 1):
            j = head.emit("arith.div", [head.emit("arith.sub", [self.iv, lb], lb.type), step], lb.type)
        counter = self.ring.counter
        if counter:
            stage = self._stage_counter(head, stages)
        else:
            stage = head.emit("arith.rem", [j, head.const(stages, lb.type)], lb.type)
        for o in self.operands:
            o.view.operands[1] = head.index(stage)
        dead = {id(o.load) for o in self.operands} | {id(o.store) for o in self.operands}
        self.body.ops[:] = [op for op in self.body.ops if id(op) not in dead]
        self.body.ops[0:0] = head.ops
        self.overlap = self._overlap_one_mma()
        tail = _Emitter(self.loop.loc)
        if counter:             # (stage + S - 1) % S: the stage read one iteration before
            refill = tail.emit("arith.select", [tail.cmp(stage, tail.const(0, i32), "eq"),
                                                tail.const(stages - 1, i32), tail.sub(stage, tail.const(1, i32))], i32)
        else:
            refill = tail.emit("arith.rem", [tail.add(j, tail.const(stages - 1, lb.type)),
                                             tail.const(stages, lb.type)], lb.type)
        if self.state is None:
            self._issue(tail, stages, rings, stages - 1, refill)
        else:
            leads = [self.body.add_arg(self.args[i].type, self.args[i].name_hint) for i in self.state]
            subst, memo = self._issue(tail, stages, rings, stages - 1, refill,
                                      {id(self.args[i]): lead for i, lead in zip(self.state, leads)})
            stepped = [self._shifted(tail, self.yielded[i], stages - 1, subst, memo, True) for i in self.state]
            self.body.terminator.operands.extend(stepped)
            self.loop.operands.extend(self.lead_inits[id(self.args[i])] for i in self.state)
            for i, lead in zip(self.state, leads):
                self.loop.results.append(OpResult(lead.type, self.loop, len(self.loop.results), None))
        at = len(self.body.ops) - 1
        if self.epilogue is not None and self._defined_before(tail.ops, self.epilogue):
            at = self.body.ops.index(self.epilogue)     # the next tile's copies fly during the epilogue
        self.body.ops[at:at] = tail.ops
        for op in self.body.ops:
            op.parent = self.body

    def _stage_counter(self, head: _Emitter, stages: int) -> Value:
        """``TLXC_RING_COUNTER=1``: the ring stage the body reads as a carried i32 that wraps
        with a select (0, 1, .., S-1, 0, ..), as Triton's pipeliner carries it, instead of
        ``j % S`` by a multiply-high in every iteration.  Added to the loop (init 0, the
        next value computed at the top of the body) and returned."""
        parent = self.loop.parent
        init = _op("arith.constant", [], [i32], {"value": 0}, self.loop.loc, ["stage"])
        parent.ops.insert(parent.ops.index(self.loop), init)
        init.parent = parent
        stage = self.body.add_arg(i32, "stage")
        bumped = head.add(stage, head.const(1, i32))
        wrapped = head.emit("arith.select", [head.cmp(bumped, head.const(stages, i32), "eq"),
                                             head.const(0, i32), bumped], i32, hint="stage")
        self.body.terminator.operands.append(wrapped)
        self.loop.operands.append(init.result)
        self.loop.results.append(OpResult(i32, self.loop, len(self.loop.results), None))
        return stage

    def _defined_before(self, ops: list[Operation], point: Operation) -> bool:
        """Whether every value ``ops`` read from the body is defined above ``point``."""
        later = {id(r) for op in self.body.ops[self.body.ops.index(point):] for inner in op.walk()
                 for r in inner.results}
        return not any(id(v) in later for op in ops for v in op.operands)

    epilogue: Operation | None = None      # the scf.if that reads the accumulator (_overlap_one_mma)

    def _overlap_one_mma(self):
        """Let one wgmma stay in flight across iterations (wait pendings = 1) when the loop
        has one dot whose accumulator is only carried from one iteration to the next, or is
        read only by a top-level ``scf.if`` (a persistent kernel's epilogue under ``if ki ==
        last:``) whose else branch yields it as it is: that branch's wait moves into the
        then branch (``pendings = 0`` at its top), as Triton's pipeliner does.  The index
        of the carried value, or None."""
        if len(self.dots) != 1:
            return None
        dot = self.dots[0]
        wait = next((op for op in self.body.ops if op.name == "tlx.async_dot_wait" and
                     op.operands[0] is dot.result), None)
        acc = dot.operands[2]
        if wait is None or acc not in self.args or self.uses[id(dot.result)] != 1 or self.uses[id(acc)] != 1:
            return None
        index = self.args.index(acc)
        if self.yielded[index] is wait.result and self.uses[id(wait.result)] == 1:
            wait.attrs["pendings"] = 1
            return index
        epilogue = self._epilogue_if(wait, index)
        if epilogue is None or not self.ring.epilogue_overlap:
            return None
        then = epilogue.regions[0].block
        drained = _op("tlx.async_dot_wait", [wait.result], [wait.result.type], {"pendings": 0, "epilogue": True},
                      wait.loc, [wait.result.name_hint])
        for op in epilogue.regions[0].ops:
            for inner in op.walk():
                inner.operands = [drained.result if v is wait.result else v for v in inner.operands]
        then.ops.insert(0, drained)
        drained.parent = then
        wait.attrs["pendings"] = 1
        self.epilogue = epilogue
        return index

    def _epilogue_if(self, wait: Operation, index: int) -> Operation | None:
        """The top-level ``scf.if`` of the body that holds every use of ``wait``'s result, reads
        it in its then branch and only yields it (at one position r) in its else branch,
        whose result r the loop yields as the accumulator and nothing else reads."""
        result = wait.result
        users = [op for op in self.body.ops if any(result in inner.operands for inner in op.walk())]
        if len(users) != 1 or users[0].name != "scf.if" or len(users[0].regions) != 2:
            return None
        epilogue = users[0]
        if self.body.ops.index(epilogue) < self.body.ops.index(wait):
            return None
        then, other = (region.block for region in epilogue.regions)
        else_yield = other.terminator
        if else_yield is None or else_yield.operands.count(result) != 1:
            return None
        r = else_yield.operands.index(result)
        in_else = sum(inner.operands.count(result) for op in other.ops for inner in op.walk())
        in_then = sum(inner.operands.count(result) for op in then.ops for inner in op.walk())
        if in_else != 1 or in_else + in_then != self.uses[id(result)]:
            return None
        if then.terminator is not None and then.terminator.operands[r] is result:
            return None
        out = epilogue.results[r]
        if self.yielded[index] is not out or self.uses[id(out)] != 1:
            return None
        return epilogue

    def _after_loop(self, stages: int) -> None:
        parent = self.loop.parent
        at = parent.ops.index(self.loop) + 1
        em = _Emitter(self.loop.loc)
        em.effect("tlx.async_wait_group", [], {"pendings": 0}, self.loop.loc)
        if self.overlap is not None:
            result = self.loop.results[self.overlap]
            drained = em.emit("tlx.async_dot_wait", [result], result.type, {"pendings": 0}, self.loop.loc,
                              result.name_hint)
            for op in self.kernel.walk():
                if op is not drained.owner:
                    op.operands = [drained if v is result else v for v in op.operands]
        parent.ops[at:at] = em.ops
        for op in em.ops:
            op.parent = parent


class _Emitter:
    """Builds a straight list of ops (inserted by the caller), at one location."""

    def __init__(self, loc):
        self.loc = loc
        self.ops: list[Operation] = []
        self._indices: dict[int, Value] = {}

    def emit(self, name, operands, result_type, attrs=None, loc=None, hint=None) -> Value:
        op = _op(name, operands, [result_type], attrs or {}, loc or self.loc, [hint])
        self.ops.append(op)
        return op.result

    def effect(self, name, operands, attrs, loc) -> None:
        self.ops.append(_op(name, operands, [], attrs, loc))

    def const(self, value: int, t) -> Value:
        return self.emit("arith.constant", [], t, {"value": value})

    def add(self, x: Value, y: Value) -> Value:
        return self.emit("arith.add", [x, y], x.type)

    def sub(self, x: Value, y: Value) -> Value:
        return self.emit("arith.sub", [x, y], x.type)

    def mul(self, x: Value, y: Value) -> Value:
        return self.emit("arith.mul", [x, y], x.type)

    def cmp(self, x: Value, y: Value, predicate: str) -> Value:
        return self.emit("arith.cmp", [x, y], i1, {"predicate": predicate})

    def splat(self, x: Value, t: TensorType) -> Value:
        return self.emit("tl.splat", [x], t)

    def index(self, value: Value) -> Value:
        """``value`` as the i32 a local_view takes."""
        if value.type.name == "i32":
            return value
        if id(value) not in self._indices:
            self._indices[id(value)] = self.emit("arith.cast", [value], i32)
        return self._indices[id(value)]


_OPERAND_NOT_LOADED = ("a tl.dot operand is not a tl.load of the loop's body used only by the dot (a value computed "
                       "from a load, a load outside the loop, or one shared by two dots)")


# the ops of a staged TMA copy: a descriptor's load/store (frontend/tensor_desc.py) lowers to these
_TMA_COPY_OPS = ("tlx.alloc_barriers", "tlx.barrier_expect_bytes", "tlx.async_descriptor_load",
                 "tlx.async_descriptor_store", "tlx.barrier_wait", "tlx.async_descriptor_store_wait")


def _where(op: Operation) -> str:
    """``file:line`` of ``op`` for a remark; "an unknown line" when it has no location."""
    loc = getattr(op, "loc", None)
    return f"{os.path.basename(loc.file)}:{loc.line}" if loc is not None else "an unknown line"


def not_pipelined(module: Module, loop: Operation, stages: int, reason: str) -> None:
    """Remember why the ``tl.dot`` loop ``loop`` was left unpipelined (``module.remarks``, keyed by the
    loop; ``pipelined`` settles it when pipeline-operand-loads takes the loop after all)."""
    if _from_tl_dot(loop):
        module.remarks[id(loop)] = _remark(loop, stages, reason)


def pipelined(module: Module, loop: Operation, stages: int, all_operands: bool) -> None:
    """pipeline-operand-loads gave ``loop`` a ring: the remark goes, unless it named an operand of a
    matmul-shaped loop that stays a synchronous load (``all_operands`` False)."""
    remark = module.remarks.pop(id(loop), None)
    if remark is not None and not all_operands and _OPERAND_NOT_LOADED not in remark:
        reason = remark.split("): ", 1)[1].rsplit("; each iteration", 1)[0]
        module.remarks[id(loop)] = _remark(loop, stages, reason, partly=True)


def _remark(loop: Operation, stages: int, reason: str, partly: bool = False) -> str:
    if partly:
        return (f"the tl.dot loop at {_where(loop)} is software-pipelined only in part (num_stages={stages}): "
                f"{reason}; each iteration waits for that load")
    return (f"the tl.dot loop at {_where(loop)} is not software-pipelined (num_stages={stages}): {reason}; "
            f"each iteration waits for its loads")


def _from_tl_dot(loop: Operation) -> bool:
    """Whether ``loop`` holds a wgmma that ``lower-dot-to-wgmma`` made of a ``tl.dot`` (its operand
    buffers carry ``dot_operand``), not only TLX code of the user's."""
    for op in loop.walk():
        if op.name != "tlx.async_dot" or _enclosing_loop(op) is not loop:
            continue
        view = op.operands[0].owner
        while isinstance(view, Operation) and view.name in ("tlx.local_view", "tlx.local_trans"):
            view = view.operands[0].owner
        if isinstance(view, Operation) and "dot_operand" in view.attrs:
            return True
    return False


def _enclosing_loop(op: Operation) -> Operation | None:
    parent = op.parent_op()
    while isinstance(parent, Operation) and parent.name not in ("scf.for", "scf.while"):
        parent = parent.parent_op()
    return parent if isinstance(parent, Operation) else None


def _copy_hints(load: Operation) -> dict:
    """The tl.load's hints carried to its cp.async: the eviction policy, and ``.ca`` (``.cg``
    is the copy's default where it is legal, 16-byte copies; elsewhere it would be refused)."""
    hints = {"eviction": load.attrs["eviction"]} if load.attrs.get("eviction") else {}
    if load.attrs.get("cache") == ".ca":
        hints["cache"] = ".ca"
    return hints


def _op(name: str, operands, result_types, attrs, loc, names=None) -> Operation:
    op = Builder(None).create(name, operands, result_types, attrs, result_names=names)
    op.loc = loc
    return op


def _element(t):
    return t.element if isinstance(t, TensorType) else t


def _constant(value: Value):
    op = value.owner
    return op.attrs.get("value") if getattr(op, "name", None) == "arith.constant" else None


def _is_zero(value: Value) -> bool:
    op = value.owner
    if getattr(op, "name", None) == "tl.splat":
        op = op.operands[0].owner
    return getattr(op, "name", None) == "arith.constant" and op.attrs.get("value") == 0


def _inside(op: Operation, ancestor: Operation) -> bool:
    while op is not None:
        if op is ancestor:
            return True
        op = op.parent_op()
    return False


def _inside_block(block: Block, ancestor: Operation) -> bool:
    region = block.parent
    return region is not None and region.parent is not None and _inside(region.parent, ancestor)


def _use_counts(kernel: Operation) -> dict[int, int]:
    counts: dict[int, int] = {}
    for op in kernel.walk():
        for v in op.operands:
            counts[id(v)] = counts.get(id(v), 0) + 1
    return counts


__all__ = ["PipelineLoads"]
