"""Code that threads run differently: branches and loops on ``tlx.thread_id``, and
memory ops whose addresses or masks derive from it, run thread by thread.

The interpreter runs tiles: one sequence of tile ops per task.  That is exact while
every thread of the task does the same thing.  A branch on ``tlx.thread_id`` (found by
``passes.uniformity``) breaks it: on the GPU only the threads that take the branch run
its body, and each of them touches only the elements its registers hold under the
tile's register layout.  So the interpreter runs such an op once per thread of the
task, in thread order, with:

* ``tlx.thread_id`` evaluating to that thread's id, and every thread-varying value
  defined before the op re-evaluated for that thread (``_Thread.value``);
* tile loads, stores and atomics acting only on the elements the thread holds in the
  layout the GPU pipeline (``infer-layouts``) gives them (``owned``); a load leaves the
  other elements poisoned (NaN, or the type's most negative integer): on the GPU the
  thread does not hold them, and a value computed from them is undefined;
* scalar memory ops done by every thread that reaches them, as the GPU code does, and
  ``tl.device_print`` of scalars printed by each such thread (a tile print is refused).

After the op the threads' results are merged: a scalar must be the same in every
thread, and every element of a tile must be the same in every thread that holds it.
Anything else -- an op the GPU runs across threads (a reduction, a barrier, a layout
conversion through shared memory, a dot) under such a branch, values that differ
between the threads after it, a thread-varying loop-carried value -- cannot be modelled
at tile level and is a located ``InterpreterError``, never a silent difference.
"""
from __future__ import annotations

import numpy as np

from ..errors import InterpreterError
from ..ir.core import Operation, Value, users_by_value
from ..ir.types import PointerType, TensorType
from ..passes.uniformity import Uniformity
from ..target import get_target
from .registry import rule_for
from .values import register_dtype

MEMORY_OPS = ("tl.load", "tl.store", "tl.atomic_rmw", "tl.atomic_cas")
# Ops whose effect, thread by thread, is the tile-level rule's on the thread's own elements
# (elementwise, or index bookkeeping that never moves data between threads).
_PER_THREAD_PREFIXES = ("arith.", "math.", "scf.")
_PER_THREAD_OPS = frozenset(MEMORY_OPS + (
    "tl.splat", "tl.arange", "tl.broadcast", "tl.expand_dims", "tl.addptr", "tl.program_id", "tl.num_programs",
    "tl.where", "tl.hint", "tl.convert_layout", "tlx.thread_id", "tlx.fence", "tlx.clock64",
    "tlx.vote_ballot_sync"))     # (interpreter/warp.py: a thread's run gives its own warp's ballot)
_LOCAL_CONVERSIONS = ("identity", "register_permute")


def _allowed(op: Operation) -> bool:
    if op.name == "tl.print":       # scalars only: each thread that runs it prints its own line, as on the GPU
        return not any(isinstance(v.type, TensorType) for v in op.operands)
    return op.name.startswith(_PER_THREAD_PREFIXES) or op.name in _PER_THREAD_OPS


def _where(op: Operation) -> str:
    return f"line {op.loc.line}" if op.loc is not None else "its line"


class DivergenceModel:
    """Per kernel: the ops run thread by thread, and the layouts of the values they
    touch (from the GPU pipeline run on a copy of the module)."""

    def __init__(self, module, kernel: Operation, arch: str):
        self.uniformity = Uniformity(kernel)
        self.warp_size = get_target(arch).warp_size     # lanes per warp: the layouts' (64 on AMD)
        self.per_thread: set[int] = set()
        self.layouts: dict[int, object] = {}        # id(value) -> its register layout on the GPU
        self._tables: dict[int, np.ndarray] = {}
        self.free: dict[int, list[Value]] = {}     # id(per-thread op) -> varying values it uses from before it
        self.used: set[int] = set(users_by_value(kernel))   # ids of the values some op reads
        self._find_per_thread_ops(kernel)
        if self.per_thread:
            self._gpu_layouts(module, kernel, arch)

    # -- which ops ------------------------------------------------------------------------------
    def _find_per_thread_ops(self, root: Operation) -> None:
        u = self.uniformity
        for region in root.regions:
            for op in region.ops:
                if u.divergent(op):
                    continue
                if u._controls_divergence(op) or self._varying_access(op):
                    self.per_thread.add(id(op))
                    self.free[id(op)] = self._free_varying(op)
                else:
                    self._find_per_thread_ops(op)

    def _free_varying(self, op: Operation) -> list[Value]:
        """The thread-varying values the regions of ``op`` read that are defined before it."""
        defined, used = set(), {}
        for inner in op.walk():
            if inner is not op:
                defined.update(id(r) for r in inner.results)
                used.update((id(v), v) for v in inner.operands)
            for region in inner.regions:
                defined.update(id(a) for a in region.block.args)
                terminator = region.block.terminator
                if terminator is not None:
                    used.update((id(v), v) for v in terminator.operands)
        return [v for key, v in used.items() if key not in defined and key in self.uniformity.varying]

    def _varying_access(self, op: Operation) -> bool:
        """A memory op whose pointer or mask (or a tile of values) differs between threads.  A
        scalar store of a varying value to one address is a race between the threads: the
        tile-level store (the first thread's value) is one of the GPU's outcomes."""
        if op.name not in MEMORY_OPS:
            return False
        varying = [id(v) in self.uniformity.varying for v in op.operands]
        if not any(varying):
            return False
        if op.name == "tl.store" and not isinstance(op.operands[0].type, TensorType):
            return varying[0] or (op.attrs.get("has_mask") and varying[2])
        return True

    # -- layouts from the GPU pipeline ----------------------------------------------------------
    def _gpu_layouts(self, module, kernel: Operation, arch: str) -> None:
        """The layouts the GPU pipeline gives the values of the per-thread ops.  Layout
        inference rebuilds the kernel, so an op is paired with its GPU twin by (name,
        source location, occurrence): a twin that is missing (or a location whose ops
        the pipeline added or removed) leaves the layouts unknown, an error where needed."""
        from ..compiler import copy_module, optimize
        gpu_module = optimize(copy_module(module), arch, int(kernel.attrs.get("num_warps", 4)),
                              check_barriers=False)
        gpu_kernel = gpu_module.kernels[module.kernels.index(kernel)]
        self._check_gpu_code(gpu_kernel)
        twins = _occurrences(gpu_kernel)
        for key, ops in _occurrences(kernel).items():
            gpu_ops = twins.get(key, [])
            if len(gpu_ops) != len(ops):
                continue
            for op, twin in zip(ops, gpu_ops):
                if id(op) in self.per_thread or self.uniformity.divergent(op):
                    self._take_layouts(op, twin)

    def _take_layouts(self, op: Operation, twin: Operation) -> None:
        for value, gpu_value in zip(list(op.operands) + list(op.results),
                                    list(twin.operands) + list(twin.results)):
            layout = getattr(gpu_value.type, "layout", None)
            if isinstance(value.type, TensorType) and layout is not None:
                self.layouts[id(value)] = layout

    def _check_gpu_code(self, gpu_kernel: Operation) -> None:
        """Every op the GPU runs under a thread branch must be one the interpreter can run
        thread by thread (checked on the GPU's IR: it has the layout conversions)."""
        u = Uniformity(gpu_kernel)
        for op in gpu_kernel.walk():
            if not u.divergent(op):
                continue
            if not _allowed(op):
                raise InterpreterError(f"the interpreter cannot model {op.name} under a branch on tlx.thread_id "
                                       f"({_where(op)}): on the GPU it works across threads, and only some "
                                       f"threads run this code; move it out of the branch", op.loc)
            if op.name == "tl.convert_layout":
                from ..ir.layouts import conversion_kind
                kind = conversion_kind(op.operands[0].type.layout, op.results[0].type.layout)
                if kind not in _LOCAL_CONVERSIONS:
                    raise InterpreterError(f"the interpreter cannot model a layout conversion ({kind}) that the "
                                           f"GPU needs under a branch on tlx.thread_id ({_where(op)}): it moves "
                                           f"data between threads, and only some threads run this code", op.loc)

    # -- which elements a thread holds ----------------------------------------------------------
    def owned(self, value: Value, thread: int, warps: int, op: Operation) -> np.ndarray:
        """Boolean mask (the tile's shape) of the elements task-relative ``thread`` holds."""
        table = self._tables.get(id(value))
        if table is None:
            layout = self.layouts.get(id(value))
            if layout is None:
                raise InterpreterError(f"the interpreter cannot model {op.name} under a branch on tlx.thread_id: "
                                       f"the register layout of its tile is unknown", op.loc)
            table = self._tables[id(value)] = layout.flat_table()
        warp, lane = divmod(thread, self.warp_size)
        if table.shape[0] != warps or table.shape[1] != self.warp_size:
            raise InterpreterError(f"the interpreter cannot model {op.name} under a branch on tlx.thread_id: its "
                                   f"layout spans {table.shape[0]} warps, the task runs on {warps}", op.loc)
        mask = np.zeros(int(np.prod(value.type.shape)), dtype=bool)
        mask[table[warp, lane]] = True
        return mask.reshape(value.type.shape)

    # -- running an op thread by thread ---------------------------------------------------------
    def run(self, ctx, fn, is_generator: bool, op: Operation, values: list):
        """Run ``op`` once per thread of the task; return its merged results."""
        outputs = []
        threads = range(ctx.warps * ctx.warp_size)
        for thread in threads:
            tctx = ctx.for_thread(thread)
            state = _Thread(self, tctx)
            for v in self.free[id(op)]:
                tctx.env[v] = state.value(v, ctx.env[v])
            tvalues = [state.value(v, cached) for v, cached in zip(op.operands, values)]
            if is_generator:
                out = yield from fn(tctx, op, *tvalues)
            else:
                out = fn(tctx, op, *tvalues)
            outputs.append(out if len(op.results) != 1 else [out])
        if not op.results:
            return None
        merged = [self._merge(ctx, op, i, [out[i] for out in outputs]) for i in range(len(op.results))]
        self._remember(ctx, op, outputs)
        return merged[0] if len(op.results) == 1 else merged

    def _remember(self, ctx, op: Operation, outputs: list) -> None:
        """Each thread's results of a varying op, for the per-thread runs of later ops."""
        table = thread_values(ctx)
        for i, result in enumerate(op.results):
            table[id(result)] = [out[i] for out in outputs]

    def _merge(self, ctx, op: Operation, index: int, per_thread: list):
        """The tile-level value of result ``index``: each element from the threads that hold it."""
        result = op.results[index]
        if not isinstance(result.type, TensorType):
            first = per_thread[0]
            if id(result) not in self.used:
                return first            # nobody reads it (an atomic's old value, say): nothing to model
            for thread, value in enumerate(per_thread):
                if not _same(value, first):
                    raise self._differ(ctx, op, result, f"it is {_show(first)} in thread 0 and {_show(value)} in "
                                                        f"thread {thread} of the task")
            return first
        merged = np.array(per_thread[0], copy=True)
        seen = np.zeros(merged.shape, dtype=bool)
        for thread, value in enumerate(per_thread):
            mine = self.owned(result, thread, ctx.warps, op)
            value = np.asarray(value)
            clash = mine & seen & ~_equal(merged, value)
            if clash.any():
                at = tuple(int(i) for i in np.argwhere(clash)[0])
                raise self._differ(ctx, op, result, f"element {at} is {_show(merged[at])} in one thread that holds "
                                                    f"it and {_show(value[at])} in thread {thread} of the task")
            merged[mine] = value[mine]
            seen |= mine
        return merged

    @staticmethod
    def _differ(ctx, op: Operation, result: Value, detail: str) -> InterpreterError:
        name = result.name_hint or f"result {result.index}"
        return ctx.error(op, f"the interpreter cannot model the value '{name}' that this {op.name} leaves in "
                             f"{ctx.label}: it differs between threads ({detail}), and the interpreter runs "
                             f"one value per task")


class _Thread:
    """One thread's view of the thread-varying values defined before a per-thread op."""

    def __init__(self, model: DivergenceModel, ctx):
        self.model, self.ctx = model, ctx
        self.memo: dict[int, object] = {}
        self.recorded = thread_values(ctx)

    def value(self, v: Value, cached):
        if id(v) not in self.model.uniformity.varying:
            return cached
        if id(v) in self.recorded:
            return self.recorded[id(v)][self.ctx.thread]
        if id(v) not in self.memo:
            self.memo[id(v)] = self._evaluate(v)
        return self.memo[id(v)]

    def _evaluate(self, v: Value):
        op = v.owner
        if not _recomputable(op):
            what = op.name if isinstance(op, Operation) else "a block argument"
            where = op.loc if isinstance(op, Operation) else None
            raise InterpreterError(f"the interpreter cannot model the thread-varying value '{v.name_hint or '?'}' "
                                   f"(from {what}) in {self.ctx.label}: it cannot recompute it for each thread",
                                   where)
        env = self.ctx.env
        operands = [self.value(o, env[o]) for o in op.operands]
        out = rule_for(op).fn(self.ctx, op, *operands)
        return out if len(op.results) == 1 else out[v.index]


def _occurrences(kernel: Operation) -> dict[tuple, list[Operation]]:
    """The memory ops and branches/loops of ``kernel`` by (name, location), in program order."""
    found: dict[tuple, list[Operation]] = {}
    for op in kernel.walk():
        if op.loc is not None and (op.name in MEMORY_OPS or op.name.startswith("scf.") and op.results):
            found.setdefault((op.name, op.loc.file, op.loc.line, op.loc.col), []).append(op)
    return found


def _recomputable(op) -> bool:
    """Whether a thread-varying value can be recomputed for one thread: a pure op (or a
    load: it reads, and a thread reads only what it holds) with no regions."""
    if not isinstance(op, Operation) or op.regions or rule_for(op).is_generator:
        return False
    return op.name == "tl.load" or (_allowed(op) and op.name not in MEMORY_OPS)


def thread_values(ctx) -> dict:
    return ctx.program.state.setdefault("divergence.thread_values", {})


def restrict(ctx, op: Operation, mask, ptr_value: Value):
    """The mask of a memory op run for one thread: ``mask`` and the elements the thread holds
    (``mask`` itself where the op is not run thread by thread, or touches a scalar)."""
    if ctx.thread is None or not isinstance(ptr_value.type, TensorType):
        return mask
    mine = ctx.program.divergence.owned(ptr_value, ctx.thread, ctx.warps, op)
    return mine if mask is None else np.logical_and(np.broadcast_to(mask, mine.shape), mine)


def poison(ctx, op: Operation, result, ptr_value: Value):
    """A tile loaded by one thread, its other elements poisoned (the thread does not hold them)."""
    if ctx.thread is None or not isinstance(ptr_value.type, TensorType):
        return result
    mine = ctx.program.divergence.owned(ptr_value, ctx.thread, ctx.warps, op)
    result = np.array(result, copy=True)
    result[~mine] = poison_value(op.results[0].type)
    return result


def poison_value(t):
    """NaN for floats, the most negative (unsigned: largest) integer, 0 for pointers (no allocation)."""
    element = t.element if isinstance(t, TensorType) else t
    if isinstance(element, PointerType):
        return 0
    dtype = register_dtype(element)
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "b":
        return True
    info = np.iinfo(dtype)
    return info.max if dtype.kind == "u" else info.min


def _equal(a, b) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b)
    same = a == b
    if a.dtype.kind == "f":
        same |= np.isnan(a) & np.isnan(b)
    return same


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray | np.generic) or isinstance(b, np.ndarray | np.generic):
        try:
            return bool(np.all(_equal(a, b)))
        except (TypeError, ValueError):
            return False
    return a is b or a == b


def _show(value) -> str:
    return repr(value.item()) if isinstance(value, np.generic) else repr(value)
