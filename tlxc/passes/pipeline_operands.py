"""pipeline-operand-loads: cp.async rings for the loaded operands of a loop whose other dot
operands are not loads.

``pipeline-loads`` rewrites a loop only when *every* dot operand of its body is a
``tl.load`` used by nothing else (a matmul's K loop).  An attention loop is not of that
shape: ``q`` (forward) or ``k``/``v`` (backward) are loop-invariant and stored once before
the loop (``hoist-operand-stores``), and ``p`` / ``ds`` come from registers.  Its loaded
tiles (``k``/``v`` of the forward, ``qT``/``do`` and ``kT``/``vT`` of the backward) were
therefore read with synchronous global loads, stored to shared memory and only then fed
to the wgmma: each iteration waited a full global-memory latency.

This pass gives such a loop the same ring as ``pipeline-loads`` (``num_stages`` deep,
``pipeline.py``'s prologue, refill and drain, which it reuses) for the operands that
qualify -- a ``tl.load`` of the body whose only use is the one ``local_store`` into a
one-slot ``lower-dot-to-wgmma`` buffer, read by wgmmas of the body waited with
``pendings = 0`` (possibly through several views: ``dedupe-operand-stores`` lets ``qT``
and ``tl.trans(qT)`` share one buffer) -- and leaves the other operands' stores where
they are.  Every wgmma of the body is still waited before the iteration ends, so a stage
is refilled only after its last reader retired.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.core import Module, Operation, users_by_value
from ..ir.traits import PURE, has_trait
from ..target import has_feature
from .manager import Pass
from .pipeline import (
    _OPERAND_NOT_LOADED,
    DEFAULT_STAGES,
    OPERAND_VIEWS,
    NotPipelinable,
    RingOptions,
    _fitting_stages,
    _is_zero,
    _Operand,
    _Plan,
    _use_counts,
    _where,
    not_pipelined,
    pipelined,
)


@dataclass(frozen=True)
class PipelineOperandLoads(Pass):
    """Its options are pipeline-loads': ``num_stages`` (None: the compile's) and ``ring``."""
    name = "pipeline-operand-loads"
    num_stages: int | None = None
    ring: RingOptions = field(default_factory=RingOptions.from_environment)

    def run(self, module: Module, options) -> Module:
        if not has_feature(options.arch, "wgmma"):
            return module
        default = self.num_stages if self.num_stages is not None else options.num_stages
        default = DEFAULT_STAGES if default is None else default
        for kernel in module.kernels:
            if any(op.name == "tlx.async_tasks" for op in kernel.walk()):
                continue
            for loop in [op for op in kernel.walk() if op.name == "scf.for"]:
                stages = loop.attrs.get("num_stages", default)
                if stages < 2 or any(op.name.startswith("tlx.async_load") for op in loop.walk()):
                    continue
                try:
                    plan = _PartialPlan(kernel, loop)
                except NotPipelinable as why:
                    if _OPERAND_NOT_LOADED in module.remarks.get(id(loop), ""):     # not a matmul-shaped loop:
                        not_pipelined(module, loop, stages, why.reason)             # this pass's reason is the one
                    continue
                stages = _fitting_stages(kernel, plan, stages)
                if stages >= 2:
                    plan.rewrite(stages, self.ring)
                    plan.index_other_views()
                    pipelined(module, loop, stages, plan.every_load_taken)
        return module


class _PartialPlan(_Plan):
    def __init__(self, kernel: Operation, loop: Operation):       # super().__init__ not called
        self.kernel, self.loop = kernel, loop
        self.body = loop.regions[0].block
        nested = next((op for op in self.body.ops if op.regions and (op.name != "scf.if" or _has_side_effects(op))),
                      None)
        if nested is not None:
            raise NotPipelinable(f"the body holds {nested.name} at {_where(nested)}: a loop whose dot reads "
                                 f"loop-invariant or computed operands is pipelined only when its body has no "
                                 f"nested loop and its ifs only compute values")
        self.iv, self.args = self.body.args[0], self.body.args[1:]
        self.yielded = self.body.terminator.operands
        self.uses = _use_counts(kernel)
        self.dots = [op for op in self.body.ops if op.name == "tlx.async_dot"]
        if not self.dots:
            raise NotPipelinable()
        self._check_body_ops()
        if not all(self._waited_at_once(dot) for dot in self.dots):
            raise NotPipelinable("a tl.dot's result is read other than by one wait in the same iteration")
        users = users_by_value(kernel)
        self.operands, self.views = [], {}
        for dot in self.dots:
            for index in (0, 1):
                found = self._loaded_operand(dot.operands[index], users)
                if found is not None and all(o.alloc is not found[0].alloc for o in self.operands):
                    self.operands.append(found[0])
                    self.views[id(found[0].alloc)] = found[1]
        self.variant = self._variant_values()
        kept = []
        for o in self.operands:
            try:
                self._check_load(o.load)
            except NotPipelinable:
                continue
            kept.append(o)
        stored_loads = [op for op in self.body.ops if op.name == "tlx.local_store"
                        and getattr(op.operands[1].owner, "name", None) == "tl.load"]
        self.every_load_taken = len(kept) == len(stored_loads)     # else a loaded operand stays synchronous
        if not kept:
            raise NotPipelinable("no dot operand is a tl.load whose address is a pure function of the loop "
                                 "index and of pointers advanced by loop-invariant increments")
        self.operands = kept
        self.allocs = [o.alloc for o in kept]

    def _waited_at_once(self, dot: Operation) -> bool:
        waits = [op for op in self.body.ops if dot.result in op.operands]
        return (len(waits) == 1 and waits[0].name == "tlx.async_dot_wait" and waits[0].attrs.get("pendings") == 0
                and self.uses[id(dot.result)] == 1)

    def _loaded_operand(self, operand, users):
        """(_Operand, every local_view of its buffer) when ``operand`` is read from a
        dedicated one-slot buffer whose only writer stores a single-use load of the body."""
        op = operand.owner
        while getattr(op, "name", None) in OPERAND_VIEWS:
            op = op.operands[0].owner
        alloc = op
        if getattr(alloc, "name", None) != "tlx.local_alloc" or "dot_operand" not in alloc.attrs or alloc.operands:
            return None
        if alloc.result.type.num != 1:
            return None
        views = users.get(id(alloc.result), [])
        if not views or any(v.name != "tlx.local_view" or v.parent is not self.body for v in views):
            return None
        stores = []
        for view in views:
            for user in users.get(id(view.result), []):
                if user.name == "tlx.local_trans" and user.parent is self.body:
                    for inner in users.get(id(user.result), []):
                        if inner.name == "tlx.local_store" and inner.operands[0] is user.result:
                            stores.append((inner, view, user))
                        elif inner.name != "tlx.async_dot" or user.result not in inner.operands[:2]:
                            return None
                elif user.name == "tlx.local_store" and user.operands[0] is view.result:
                    stores.append((user, view, None))
                elif user.name != "tlx.async_dot" or view.result not in user.operands[:2]:
                    return None
        if len(stores) != 1:
            return None
        store, view, trans = stores[0]
        load = store.operands[1].owner
        if getattr(load, "name", None) != "tl.load" or load.parent is not self.body or self.uses[id(load.result)] != 1:
            return None
        if load.attrs.get("has_other") and not _is_zero(load.operands[-1]):
            return None
        if load.attrs.get("volatile") or load.attrs.get("cache") == ".cv":
            return None
        if self.body.ops.index(store) > min(self.body.ops.index(d) for d in self.dots if _reads(d, alloc, users)):
            return None                    # a reader before the store would read the previous tile
        return _Operand(load, store, view, alloc, trans), views

    def _overlap_one_mma(self):
        """Never: an operand left out of the ring is rewritten by the next iteration's store,
        which must not happen while a wgmma still reads it (pendings stays 0)."""
        return None

    def index_other_views(self) -> None:
        """Every view of a ring (not only the store's) reads this iteration's stage."""
        for o in self.operands:
            for view in self.views[id(o.alloc)]:
                if view is not o.view:
                    view.operands[1] = o.view.operands[1]


def _reads(dot: Operation, alloc: Operation, users) -> bool:
    for operand in dot.operands[:2]:
        op = operand.owner
        while getattr(op, "name", None) in OPERAND_VIEWS:
            op = op.operands[0].owner
        if op is alloc:
            return True
    return False



__all__ = ["PipelineOperandLoads"]


def _has_side_effects(op: Operation) -> bool:
    """Whether an op of ``op``'s regions writes memory, synchronizes or is a TLX op (an ``if`` that only
    computes values, e.g. a mask on the last block, leaves the ring's order alone)."""
    return any(inner is not op and inner.name not in ("scf.yield", "tl.load") and not has_trait(inner, PURE)
               for inner in op.walk())
