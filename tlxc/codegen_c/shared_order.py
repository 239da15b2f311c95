"""Shared-memory orderings the codegen inserts, as Triton does for TLX kernels.

A TLX kernel says *when* asynchronous work is complete (``async_load_wait_group``,
``async_dot_wait``); Triton's compiler adds what makes that completion visible to
the other threads and to the other memory proxy (its Membar analysis and its
fence-insertion passes).  A kernel ported from TLX relies on them, so tlxc adds
the same orderings here, decided once per kernel before lowering:

* **after** ``async_load_wait_group``: a ``fence.proxy.async.shared::cta`` (sm_90+,
  when the kernel reads shared memory through the async proxy: wgmma, TMA store,
  tcgen05) and a barrier of the task's threads.  Each thread's wait retires only its
  own cp.async copies, which are generic-proxy writes; the wgmma that reads the
  tile reads every thread's copies, through the async proxy.  The fence is run by
  every writer before the barrier, so the barrier publishes fenced writes.
* **after** ``async_dot_wait`` in a task of more than one warpgroup that writes
  shared memory: a barrier.  The wait retires this warpgroup's wgmma groups only;
  another warpgroup's wgmma may still read the stage this one is about to refill
  (the write-after-read hazard Triton's Membar closes with a barrier before the
  refill).
* **before** a wgmma (``async_dot``) or a TMA store whose shared operand a
  ``local_store`` of the same task may have written since the last proxy fence:
  ``fence.proxy.async.shared::cta`` (Triton's FenceInsertion pass does the same for
  ``local_store`` followed by wgmma / tcgen05 / TMA store); and before the wgmma a
  barrier of the task's threads when such a store happened since the last barrier
  (also after a user's ``tlx.fence("async_shared")``: the wgmma reads every thread's
  stores; Triton's Membar).  The TMA store's lowering has its own barrier; tcgen05
  MMAs get theirs from ``rules_tcgen05``.

The result is two tables, ``before`` and ``after``: op id → list of "fence" / "sync".
"""
from __future__ import annotations

from ..check.views import view_roots
from ..ir.core import Operation
from ..ir.types import MemDescType

PROXY_ARCHS = ("sm_90", "sm_100", "sm_103", "sm_120")
ASYNC_PROXY_READERS = ("tlx.async_dot", "tlx.async_descriptor_store", "tlx.tcgen05_mma")
SHARED_WRITERS = ("tlx.local_store", "tlx.async_load", "tlx.async_descriptor_load")


class SharedOrder:
    def __init__(self, kernel: Operation, arch: str):
        self.before: dict[int, list[str]] = {}
        self.after: dict[int, list[str]] = {}
        ops = list(kernel.walk())
        self.proxies = arch.startswith(PROXY_ARCHS) and any(op.name in ASYNC_PROXY_READERS for op in ops)
        body = kernel.regions[0].block
        warps = kernel.attrs.get("num_warps", 4)
        tasks = next((op for op in body.ops if op.name == "tlx.async_tasks"), None)
        outer_threads = 32 * (tasks.attrs["tasks"][0][1] if tasks is not None else warps)
        self._scope(body, outer_threads)
        if tasks is not None:
            for region, (_, task_warps, _, _) in zip(tasks.regions, tasks.attrs["tasks"]):
                self._scope(region.block, 32 * task_warps)
        self._fences(body, (set(), set()))

    def _add(self, table: dict, op: Operation, what: str) -> None:
        entries = table.setdefault(id(op), [])
        if what not in entries:
            entries.append(what)

    # -- completion of cp.async copies and of wgmma reads --------------------------------------
    def _scope(self, block, threads: int) -> None:
        """The rules that depend only on one task's code (``threads``: its thread count)."""
        ops = [op for op in _walk_task(block)]
        writes_shared = any(_writes_shared(op) for op in ops)
        for op in ops:
            if op.name == "tlx.async_wait_group":
                if self.proxies:
                    self._add(self.after, op, "fence")
                if not _next_syncs(op):
                    self._add(self.after, op, "sync")
            elif op.name == "tlx.async_dot_wait" and threads > 128 and writes_shared:
                self._add(self.after, op, "sync")

    # -- proxy fences between local_store and async-proxy readers --------------------------------
    def _fences(self, block, state: tuple) -> tuple:
        """``state`` = (allocation ids a local_store wrote since the last proxy fence, since the
        last barrier of the task's threads); returns the state after ``block``."""
        unfenced, unsynced = set(state[0]), set(state[1])
        for op in block.ops:
            if op.name == "tlx.async_tasks":
                for region in op.regions:
                    self._fences(region.block, (unfenced, unsynced))
                continue
            if op.name == "scf.if":
                outs = [self._fences(region.block, (unfenced, unsynced)) for region in op.regions]
                unfenced = set().union(*(o[0] for o in outs))
                unsynced = set().union(*(o[1] for o in outs))
                continue
            if op.regions:                       # loops: the body may run again after its own writes
                for _ in range(2):
                    for region in op.regions:
                        out = self._fences(region.block, (unfenced, unsynced))
                        unfenced, unsynced = unfenced | out[0], unsynced | out[1]
                continue
            if op.name == "tlx.fence" and op.attrs.get("scope") == "async_shared":
                unfenced = set()
            elif op.name == "tlx.local_store" and op.operands[0].type.storage == "smem":
                roots = {id(root) for root in view_roots(op.operands[0])}
                unfenced, unsynced = unfenced | roots, unsynced | roots
            elif op.name == "tlx.async_dot" and unsynced & _read_roots(op):
                if self.proxies and unfenced & _read_roots(op):
                    self._add(self.before, op, "fence")
                    unfenced = set()
                self._add(self.before, op, "sync")
                unsynced = set()
            elif op.name == "tlx.async_descriptor_store":
                if self.proxies and unfenced & _read_roots(op):
                    self._add(self.before, op, "fence")
                    unfenced = set()
                unsynced = set()                 # (its lowering syncs the task's threads)
            elif op.name == "tlx.barrier_arrive" and not op.operands[0].type.per_thread:
                unsynced = set()                 # (its lowering syncs the task's threads)
            if "fence" in self.after.get(id(op), ()):     # the fence after a cp.async wait
                unfenced = set()
            if "sync" in self.after.get(id(op), ()):
                unsynced = set()
        return unfenced, unsynced


def _walk_task(block):
    """The ops of ``block`` and of its loops and ifs, not those of nested task regions."""
    for op in block.ops:
        if op.name == "tlx.async_tasks":
            continue
        yield op
        for region in op.regions:
            yield from _walk_task(region.block)


def _writes_shared(op) -> bool:
    if op.name not in SHARED_WRITERS:
        return False
    view = op.operands[1] if op.name != "tlx.local_store" else op.operands[0]
    return isinstance(view.type, MemDescType) and view.type.storage == "smem"


def _read_roots(op) -> set:
    """Allocations an async-proxy reader reads (wgmma: A in shared memory and B; TMA store: its source)."""
    if op.name == "tlx.async_descriptor_store":
        operands = [op.operands[1]]
    else:
        operands = [v for v in op.operands[:2] if isinstance(v.type, MemDescType)]
    return {id(root) for v in operands for root in view_roots(v)}


def _next_syncs(op) -> bool:
    """Whether the next op of ``op``'s block that touches memory or threads is a barrier of the
    task's threads (a warp-group mbarrier arrive is: its lowering syncs the group first)."""
    ops = op.parent.ops
    for following in ops[ops.index(op) + 1:]:
        if following.name.startswith("arith.") or following.name == "tlx.local_view":
            continue                         # scalar index arithmetic, barrier views
        return following.name == "tlx.barrier_arrive" and not following.operands[0].type.per_thread
    return False
