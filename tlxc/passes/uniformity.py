"""Analysis: which ops run under thread-divergent control flow.

Tile-level code is uniform: every thread of a program (of a task) takes the same
branches, so lowerings may put barriers in it and pick one thread to act for the
program (a scalar atomic).  ``tlx.thread_id`` breaks that: a branch on it runs in
some threads only.  A value is *thread-varying* when it derives from
``tlx.thread_id``; an op is *divergent* when it sits in an ``scf.if`` on a varying
condition, or in a loop whose bounds or continuation condition vary.  Lowerings
must neither sync nor elect a thread there: the threads that reach such an op
are the ones the user chose.
"""
from __future__ import annotations

from ..ir.core import Operation
from ..ir.types import TensorType

_SOURCES = ("tlx.thread_id",)


class Uniformity:
    """``divergent(op)`` for the ops of one kernel (computed once, at construction)."""

    def __init__(self, kernel: Operation):
        self.varying: set[int] = set()
        while self._propagate(kernel):
            pass
        self.divergent_ops: set[int] = set()
        self._mark(kernel, inside=False)

    def divergent(self, op: Operation) -> bool:
        return id(op) in self.divergent_ops

    def per_thread(self, op: Operation) -> bool:
        """True when each thread must perform memory op ``op`` itself: it runs under divergent
        control, or an operand differs between threads.  A scalar store of a varying value to
        one uniform address stays with one thread (the threads would race for it; the
        interpreter models the first thread's store)."""
        if self.divergent(op):
            return True
        if op.name == "tl.store" and not isinstance(op.operands[0].type, TensorType):
            mask = op.operands[2:3] if op.attrs.get("has_mask") else []
            return self._is_varying([op.operands[0], *mask])
        return self._is_varying(op.operands)

    def _is_varying(self, values) -> bool:
        return any(id(v) in self.varying for v in values)

    def _add(self, values) -> bool:
        new = [id(v) for v in values if id(v) not in self.varying]
        self.varying.update(new)
        return bool(new)

    def _propagate(self, root: Operation) -> bool:
        """One forward sweep; True when it marked something new (iterate to a fixpoint:
        loop-carried values flow back through yields)."""
        changed = False
        for op in root.walk():
            # a branch or loop controlled by a varying value leaves different values in
            # different threads, even when what it yields is uniform (``x = 0; if tid == 0: x = 1``)
            if op.name in _SOURCES or self._is_varying(op.operands) or self._controls_divergence(op):
                changed |= self._add(op.results)
                for region in op.regions:
                    changed |= self._add(region.block.args)
            for region in op.regions:
                terminator = region.block.terminator
                if terminator is not None and self._is_varying(terminator.operands):
                    changed |= self._add(op.results)
                    for inner in op.regions:
                        changed |= self._add(inner.block.args)
        return changed

    def _mark(self, op: Operation, inside: bool) -> None:
        if inside:
            self.divergent_ops.add(id(op))
        branches = inside or self._controls_divergence(op)
        for region in op.regions:
            for inner in region.ops:
                self._mark(inner, branches)

    def _controls_divergence(self, op: Operation) -> bool:
        if op.name == "scf.if":
            return self._is_varying(op.operands[:1])
        if op.name == "scf.for":
            return self._is_varying(op.operands[:3])
        if op.name == "scf.while":
            condition = op.regions[0].block.terminator
            return condition is not None and self._is_varying(condition.operands[:1])
        return False
