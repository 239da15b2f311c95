"""pipeline-loads, part two: register prefetch of the plain loads of a ``tl.range`` loop.

Triton pipelines the loads of a loop written ``tl.range(lb, ub, step, num_stages=S)`` even
when no ``tl.dot`` consumes them (its fused-softmax tutorial: persistent programs stride
over the rows, one row load per iteration).  This pass gives such a loop that overlap by
loading ``D = S - 1`` iterations ahead into registers::

    for i in range(lb, ub, step):                 # num_stages = S
        x = tl.load(p(i), m(i), other)
        ... x ...

becomes (``D = 1`` shown; D values are carried and rotate for ``D > 1``)::

    x0 = tl.load(p(lb), m(lb) & (lb < ub), other)
    for i in range(lb, ub, step) carrying xc = x0:
        xn = tl.load(p(i + step), m(i + step) & (i + step < ub), other)    # where x's load was
        ... xc ...
        yield xn

so the next row's global load is in flight while this row is reduced and stored.  A
load's pointer, mask and ``other`` must be pure functions of the loop variable, of values
defined before the loop and of carried values the loop advances by a loop-invariant
increment (``_Plan``'s rule in ``pipeline.py``); the shifted copies are the body's own
computation at a later iteration, guarded by that iteration being in range (so nothing
past the last row is read).

When: only loops whose ``num_stages`` was given on the loop (``tl.range(num_stages=S)``,
``S >= 2``) and that ``pipeline-loads``' cp.async rings left alone; no TLX op, atomic,
barrier or nested loop in the body; loads neither volatile nor ``.cv``.  Registers: the
prefetched values of all the loop's loads stay within ``BUDGET_BYTES`` per thread (D is
lowered, down to skipping the loop), since a row of 64 floats a thread would spill.

Memory order: a load moves ahead of the stores of earlier iterations.  As Triton does, loads
and stores through different kernel arguments are taken not to overlap; a loop that stores
through the kernel argument it loads from (or through a pointer whose argument is not
known) is left alone, so a loop that reads what its previous iteration wrote keeps its
order.  The interpreter runs the frontend's IR and is unaffected.
"""
from __future__ import annotations

from ..ir.core import BlockArgument, Operation, OpResult, Value
from ..ir.types import PointerType, TensorType, i1
from .pipeline import NotPipelinable, _Emitter, _Plan, _use_counts

BUDGET_BYTES = 64                    # prefetched bytes a thread may hold (16 registers)
_BARRIERS = ("tl.atomic_rmw", "tl.atomic_cas", "tl.debug_barrier", "scf.for", "scf.while")
_POINTER_PATH = ("tl.addptr", "tl.splat", "tl.broadcast", "tl.expand_dims", "tl.reshape", "tl.hint",
                 "tl.trans", "tl.convert_layout")


def prefetch_loops(kernel: Operation, num_warps: int, rewritten: set[int]) -> None:
    """Register-prefetch every eligible loop of ``kernel`` (module docstring); ``rewritten``:
    ids of the loops pipeline-loads already turned into cp.async rings."""
    for loop in [op for op in kernel.walk() if op.name == "scf.for"]:
        stages = loop.attrs.get("num_stages")
        if stages is None or stages < 2 or id(loop) in rewritten:
            continue
        try:
            plan = _PrefetchPlan(kernel, loop)
        except NotPipelinable:
            continue
        per_iteration = sum(_bytes_per_thread(o.result.type, num_warps) for o in plan.loads)
        distance = min(stages - 1, BUDGET_BYTES // max(per_iteration, 1))
        if distance >= 1:
            plan.rewrite(distance)


def _bytes_per_thread(t, num_warps: int) -> int:
    if isinstance(t, TensorType):
        return max(1, -(-t.numel // (32 * num_warps))) * max(1, t.element.bytes)
    return max(1, t.bytes)


class _PrefetchPlan(_Plan):
    """The loads of one loop that can be issued ahead; NotPipelinable when there are none or
    the loop breaks a rule."""

    def __init__(self, kernel: Operation, loop: Operation):      # super().__init__ wants dots
        self.kernel, self.loop = kernel, loop
        self.body = loop.regions[0].block
        self.iv, self.args = self.body.args[0], list(self.body.args[1:])
        self.yielded = self.body.terminator.operands
        self.uses = _use_counts(kernel)
        for op in self.body.ops:
            for inner in op.walk():
                if inner.name.startswith("tlx.") or inner.name in _BARRIERS:
                    raise NotPipelinable()
        self.variant = self._variant_values()
        self.loads = []
        for op in self.body.ops:
            if op.name != "tl.load" or op.attrs.get("volatile") or op.attrs.get("cache") == ".cv":
                continue
            if not isinstance(_element(op.operands[0].type), PointerType) or not self.uses.get(id(op.result)):
                continue
            try:
                for value in op.operands:
                    self._check_shiftable(value, set())
            except NotPipelinable:
                continue
            self.loads.append(op)
        if not self.loads:
            raise NotPipelinable()
        self._check_memory_order()

    def _check_memory_order(self) -> None:
        loaded = {_root(op.operands[0]) for op in self.loads}
        if None in loaded:
            raise NotPipelinable()
        for op in self.body.ops:
            for inner in op.walk():
                if inner.name == "tl.store":
                    root = _root(inner.operands[0])
                    if root is None or root in loaded:
                        raise NotPipelinable()

    # -- rewrite ------------------------------------------------------------------------------
    def rewrite(self, distance: int) -> None:
        parent = self.loop.parent
        prologue = _Emitter(self.loop.loc)
        inits = {id(load): [self._issue(prologue, load, ahead, False) for ahead in range(distance)]
                 for load in self.loads}
        at = parent.ops.index(self.loop)
        parent.ops[at:at] = prologue.ops
        for op in prologue.ops:
            op.parent = parent
        block, yield_op = self.body, self.body.terminator
        for load in self.loads:
            carried = []
            for init in inits[id(load)]:
                self.loop.operands.append(init)
                carried.append(block.add_arg(init.type, load.result.name_hint))
                self.loop.results.append(OpResult(init.type, self.loop, len(self.loop.results),
                                                  load.result.name_hint))
            # the load of the iteration `distance` on takes the load's place, or comes after the
            # last body op it reads (a carried pointer's increment is often computed later)
            issue = _Emitter(self.loop.loc)
            ahead = self._issue(issue, load, distance, True)
            at = block.ops.index(load)
            block.ops.pop(at)
            position = {id(op): i for i, op in enumerate(block.ops)}
            emitted = {id(op) for op in issue.ops}
            for op in issue.ops:
                for v in op.operands:
                    owner = getattr(v, "owner", None)
                    if id(owner) in position and id(owner) not in emitted:
                        at = max(at, position[id(owner)] + 1)
            block.ops[at:at] = issue.ops
            yield_op.operands.extend(carried[1:] + [ahead])
            old = load.result
            for op in self.kernel.walk():
                if any(v is old for v in op.operands):
                    op.operands = [carried[0] if v is old else v for v in op.operands]
        for op in block.ops:
            op.parent = block

    def _issue(self, em: _Emitter, load: Operation, ahead: int, in_body: bool) -> Value:
        """The load of iteration ``ahead`` (prologue) / ``ahead`` iterations on (body),
        masked off past the loop's end."""
        lb, ub, step = self.loop.operands[:3]
        base = self.iv if in_body else lb
        index = em.add(base, em.mul(step, em.const(ahead, lb.type))) if ahead else base
        live = em.cmp(index, ub, "lt")
        subst = {id(self.iv): index}
        memo: dict[int, Value] = {}
        operands = [self._shifted(em, v, ahead, subst, memo, in_body) for v in load.operands]
        ptr_type = load.operands[0].type
        guard = em.splat(live, TensorType(ptr_type.shape, i1)) if isinstance(ptr_type, TensorType) else live
        attrs = dict(load.attrs)
        if attrs.get("has_mask"):
            operands[1] = em.emit("arith.and", [operands[1], guard], operands[1].type)
        else:
            operands.insert(1, guard)
            attrs["has_mask"] = True
        return em.emit("tl.load", operands, load.result.type, attrs, load.loc, load.result.name_hint)


def _root(value: Value):
    """The kernel argument a pointer is derived from (through address arithmetic, splats,
    hints and loop-carried values), or None when it is not one."""
    seen = 0
    while seen < 256:
        seen += 1
        if isinstance(value, BlockArgument):
            block = value.owner
            region = block.parent
            owner = region.parent if region is not None else None
            if owner is None or owner.name == "tl.kernel":
                return id(value)
            if owner.name == "scf.for" and value.index > 0:
                value = owner.operands[3 + value.index - 1]
                continue
            return None
        op = value.owner
        if not isinstance(op, Operation) or op.name not in _POINTER_PATH:
            return None
        value = op.operands[0]
    return None


def _element(t):
    return t.element if isinstance(t, TensorType) else t


__all__ = ["BUDGET_BYTES", "prefetch_loops"]
