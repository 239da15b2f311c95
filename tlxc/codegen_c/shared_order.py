"""Shared-memory orderings the codegen inserts, as Triton does for TLX kernels.

A TLX kernel says *when* asynchronous work is complete (``async_load_wait_group``,
``async_dot_wait``) and orders its tasks with mbarriers; Triton's compiler adds what
orders the threads *of one task* (its Membar analysis) and what makes writes visible to
the other memory proxy (its fence-insertion passes).  A kernel ported from TLX relies on
them, so tlxc adds the same orderings here, decided once per kernel before lowering:

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
  refill).  Of a run of waits with no shared-memory write between them, only the last
  gets it (``_later_dot_wait``).  The drain of a ``dot_drain`` loop (passes/dot_wait_drain.py) is such a
  wait and gets the same barrier (``drain_syncs``).
* **before** a wgmma (``async_dot``) or a TMA store whose shared operand a
  ``local_store`` of the same task may have written since the last proxy fence:
  ``fence.proxy.async.shared::cta`` (Triton's FenceInsertion pass does the same for
  ``local_store`` followed by wgmma / tcgen05 / TMA store), then a barrier of the
  task's threads that publishes every writer's fence (the TMA store's lowering has
  its own; tcgen05 MMAs get theirs from ``rules_tcgen05``).
* **before** any shared-memory access that conflicts with an access of the same task
  since its last barrier (read after write, write after read, write after write, on
  overlapping buffers): a barrier of the task's threads (``_Membar``, Triton's Membar
  analysis; docs/codegen.md "Ordering shared memory").

The result is two tables, ``before`` and ``after``: op id → list of "fence" / "sync"
(a fence always comes before the barrier at the same point).
"""
from __future__ import annotations

from ..errors import CompilationError
from ..ir.core import Operation
from ..ir.ops.warp_pipeline import END, ENTER, EXIT, pipelined_loop
from ..ir.traits import BULK_STORE, CONTROL_FLOW, has_trait
from ..ir.types import MemDescType
from ..ir.views import view_roots
from ..options import perf_switch
from ..passes.uniformity import Uniformity
from ..target import get_target, has_feature

WARP_PIPELINE_SYNCS = (END, ENTER, EXIT)      # each lowers to work-group barriers (rules_hip)
SHARED_WRITERS = ("tlx.local_store", "tlx.async_load", "tlx.async_descriptor_load", "tlx.async_bulk_load")


def _async_proxy_reader(op) -> bool:
    """Whether ``op`` reads shared memory through the async proxy: wgmma, tcgen05 MMAs, bulk stores."""
    return op.name in ("tlx.async_dot", "tlx.tcgen05_mma") or has_trait(op, BULK_STORE)


class SharedOrder:
    def __init__(self, kernel: Operation, arch: str, warp_size: int = 32):
        self.before: dict[int, list[str]] = {}
        self.after: dict[int, list[str]] = {}
        self._drained: set[int] = set()
        ops = list(kernel.walk())
        self.proxies = has_feature(arch, "async_proxy") and any(_async_proxy_reader(op) for op in ops)
        self.uniformity = Uniformity(kernel)
        self.aliases = _reuse_groups(ops)
        body = kernel.regions[0].block
        warps = kernel.attrs.get("num_warps", 4)
        tasks = next((op for op in body.ops if op.name == "tlx.async_tasks"), None)
        infos = tasks.task_infos if tasks is not None else []
        outer_threads = warp_size * (infos[0].warps if tasks is not None else warps)
        scopes = [(_default_task_ops(body, tasks), outer_threads)]
        self._scope(body, outer_threads)
        if tasks is not None:
            for region, task_warps in zip(tasks.regions, (t.warps for t in infos)):
                self._scope(region.block, warp_size * task_warps)
                if region is not tasks.regions[0]:
                    scopes.append((list(region.block.ops), warp_size * task_warps))
        self._fences(body, set())
        for scope_ops, threads in scopes:
            _Membar(self, kernel, threads, scope_ops)
        if arch and not get_target(arch).is_nvidia:     # (NVIDIA refuses the stages themselves: rules_warp)
            self._no_barrier_inside_warp_pipelines(ops)

    def _no_barrier_inside_warp_pipelines(self, ops) -> None:
        """A warp-pipelined loop's only barriers are its stage ends: one more inside the loop would
        pair the two wave groups' accesses differently from what the stages say."""
        for op in ops:
            if "sync" not in (*self.before.get(id(op), ()), *self.after.get(id(op), ())):
                continue
            loop = pipelined_loop(op)
            if loop is not None:
                raise CompilationError(
                    f"{op.name} needs a work-group barrier here (a shared-memory access that conflicts with "
                    f"another of the same warp-pipeline stage), and a warp-pipelined loop may only "
                    f"synchronize at its stage ends: put the conflicting accesses in different stages", op.loc)

    def drain_syncs(self, loop: Operation) -> bool:
        """Whether the wgmma drain at the end of ``dot_drain`` loop's last iteration needs a
        barrier of the task's threads after it (as an ``async_dot_wait`` would)."""
        return id(loop) in self._drained

    def _add(self, table: dict, op: Operation, what: str) -> None:
        entries = table.setdefault(id(op), [])
        if what not in entries:
            # the fence first: the barrier at the same point publishes every thread's fenced writes
            entries.insert(0, what) if what == "fence" else entries.append(what)

    # -- completion of cp.async copies and of wgmma reads --------------------------------------
    def _scope(self, block, threads: int) -> None:
        """The rules that depend only on one task's code (``threads``: its thread count)."""
        ops = [op for op in _walk_task(block)]
        writes_shared = any(_writes_shared(op) for op in ops)
        for op in ops:
            if op.name == "tlx.async_wait_group":
                if self.proxies and perf_switch("TLXC_CPASYNC_FENCE"):
                    # (TLXC_CPASYNC_FENCE=0 leaves it out, as Triton 3.6 does: for A/B measurements only)
                    self._add(self.after, op, "fence")
                if pipelined_loop(op) is not None:
                    continue                     # the stage ends order it (rules_hip: warp pipelines)
                if not _next_syncs(op):
                    self._add(self.after, op, "sync")
            elif op.name == "tlx.async_dot_wait" and threads > 128 and writes_shared and not _later_dot_wait(op):
                self._add(self.after, op, "sync")
            elif op.name == "scf.for" and "dot_drain" in op.attrs and threads > 128 and writes_shared:
                self._drained.add(id(op))        # the same barrier after the drain of its last iteration

    # -- proxy fences between local_store and async-proxy readers --------------------------------
    def _fences(self, block, unfenced: set) -> set:
        """``unfenced``: allocation ids a local_store wrote since the last proxy fence; returns
        the set after ``block``."""
        unfenced = set(unfenced)
        for op in block.ops:
            if op.name == "tlx.async_tasks":
                for region in op.regions:
                    self._fences(region.block, unfenced)
                continue
            if op.name == "scf.if":
                unfenced = set().union(*(self._fences(region.block, unfenced) for region in op.regions))
                continue
            if op.regions:                       # loops: the body may run again after its own writes
                for _ in range(2):
                    for region in op.regions:
                        unfenced |= self._fences(region.block, unfenced)
                continue
            if op.name == "tlx.fence" and op.attrs.get("scope") == "async_shared":
                unfenced = set()
            elif op.name in ("tlx.local_store", "tlx.local_scatter") and op.operands[0].type.storage == "smem":
                unfenced |= {id(root) for root in view_roots(op.operands[0])}
            elif (op.name == "tlx.async_dot" or has_trait(op, BULK_STORE)) and self.proxies \
                    and unfenced & _read_roots(op):
                self._add(self.before, op, "fence")
                if op.name == "tlx.async_dot":   # (the TMA store's lowering syncs after the fence)
                    self._add(self.before, op, "sync")
                unfenced = set()
            if "fence" in self.after.get(id(op), ()):     # the fence after a cp.async wait
                unfenced = set()
        return unfenced


def _default_task_ops(body, tasks) -> list:
    """The ops the default task (or, without tasks, every thread) runs in order: the kernel
    code around ``tlx.async_tasks`` with the default task's region in its place."""
    ops = []
    for op in body.ops:
        ops.extend(op.regions[0].block.ops if op is tasks else [op])
    return ops


def _reuse_groups(ops) -> dict:
    """id(allocation with ``reuse=``) → the allocation whose bytes it shares."""
    return {id(op): op.operands[0].owner for op in ops if op.name == "tlx.local_alloc" and op.operands}


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
    if has_trait(op, BULK_STORE):
        operands = [op.operands[1]]
    else:
        operands = [v for v in op.operands[:2] if isinstance(v.type, MemDescType)]
    return {id(root) for v in operands for root in view_roots(v)}


def _later_dot_wait(op) -> bool:
    """Whether another ``async_dot_wait`` follows ``op`` in its block with no shared-memory
    write and no nested region in between: that wait's barrier (every warpgroup has passed
    both waits when it lifts) orders this wait's retired reads before any refill, so one
    barrier after the last of a run of waits serves them all (an attention loop waits each of
    its four MMAs in turn)."""
    ops = op.parent.ops
    for following in ops[ops.index(op) + 1:]:
        if following.name == "tlx.async_dot_wait":
            return True
        if following.regions or _writes_shared(following) or not _between_dot_waits(following.name):
            return False
    return False


_VIEWS_AND_MMAS = ("tlx.async_dot", "tlx.local_view", "tlx.local_trans", "tlx.local_slice", "tlx.local_load")


def _between_dot_waits(name: str) -> bool:
    """An op that may sit between two waits sharing one barrier: thread arithmetic and tile
    ops, wgmma issues, shared-memory views and reads; not an mbarrier arrive or anything else
    that could hand a buffer to another task."""
    return name.startswith(("arith.", "math.")) or name.startswith("tl.") or name in _VIEWS_AND_MMAS


def _next_syncs(op) -> bool:
    """Whether the next op of ``op``'s block that touches memory or threads is a barrier of the
    task's threads (a warp-group mbarrier arrive is: its lowering syncs the group first)."""
    ops = op.parent.ops
    for following in ops[ops.index(op) + 1:]:
        if following.name.startswith("arith.") or following.name == "tlx.local_view":
            continue                         # scalar index arithmetic, barrier views
        return following.name == "tlx.barrier_arrive" and not following.operands[0].type.per_thread
    return False


# -- barriers between conflicting shared-memory accesses of one task (Triton's Membar) -------------
class _Pending:
    """Shared-memory accesses since the last barrier of the task's threads, as the slots
    ``_Membar.slots`` gives."""
    __slots__ = ("reads", "writes")

    def __init__(self, reads=frozenset(), writes=frozenset()):
        self.reads, self.writes = frozenset(reads), frozenset(writes)

    def __or__(self, other: _Pending) -> _Pending:
        return _Pending(self.reads | other.reads, self.writes | other.writes)

    def __eq__(self, other) -> bool:
        return self.reads == other.reads and self.writes == other.writes

    __hash__ = None


_CLEAR = _Pending()
_NONE = frozenset()


class _Membar:
    """Walks one task's code in program order with the pending accesses; before an access
    that conflicts with a pending one (read after write, write after read or write) it
    records a barrier in ``order.before`` and clears them.  Loops run to a fixed point (the
    accesses at the bottom are pending at the top of the next iteration); an ``if`` joins
    its branches.  Code under a thread-divergent branch (``tlx.thread_id``) cannot hold a
    barrier: such a branch counts as one access of everything inside it, and the barrier,
    if one is needed, goes before the branch."""

    def __init__(self, order: SharedOrder, kernel: Operation, threads: int, ops: list):
        self.order, self.threads = order, threads
        self.tcgen05_syncs = _tcgen05_syncs(kernel, ops)
        self.walk(ops, _CLEAR)

    # -- control flow --------------------------------------------------------------------------
    def walk(self, ops, state: _Pending) -> _Pending:
        for op in ops:
            state = self.step(op, state)
        return state

    def step(self, op: Operation, state: _Pending) -> _Pending:
        if not op.regions:
            return self.access(op, state, *self.effects(op))
        if self._controls_divergence(op) or not has_trait(op, CONTROL_FLOW):
            return self.access(op, state, *self.summary(op))     # (also a reduction's combine region)
        if op.name == "scf.if":
            then, other = (self.walk(region.block.ops, state) for region in op.regions)
            return then | other
        return self.loop(op, state)

    def loop(self, op: Operation, state: _Pending) -> _Pending:
        """The state at the loop's exit: the join over every iteration count (0 included).
        Barriers decided under a smaller entry state are needed under the larger one too, so
        the tables only grow."""
        entry = state
        while True:
            out = entry
            for region in op.regions:              # while: before, then body; for: body
                out = self.walk(region.block.ops, out)
            joined = entry | _forget_ring_indices(out)
            if joined == entry:
                return joined
            entry = joined

    def _controls_divergence(self, op) -> bool:
        return any(self.order.uniformity.divergent(inner) for region in op.regions for inner in region.ops)

    # -- one access ----------------------------------------------------------------------------
    def access(self, op, state: _Pending, reads, writes, pending: _Pending) -> _Pending:
        if self.syncs_before(op):
            state = _CLEAR
        if _conflict(reads, state.writes) or _conflict(writes, state.reads | state.writes):
            self.order._add(self.order.before, op, "sync")
            state = _CLEAR
        state = state | pending
        return _CLEAR if self.syncs_after(op) else state

    def syncs_before(self, op) -> bool:
        """A barrier of the task's threads right before ``op``'s shared accesses: one decided
        for it already, or the one its lowering has."""
        if "sync" in self.order.before.get(id(op), ()):
            return True
        if op.name == "tlx.barrier_arrive":
            return not op.operands[0].type.per_thread      # (rules_tlx: the group syncs, then arrives)
        if op.name == "tlx.tcgen05_mma":
            return self.tcgen05_syncs                      # (rules_tcgen05)
        return has_trait(op, BULK_STORE)                   # (rules_tlx)

    def syncs_after(self, op) -> bool:
        if "sync" in self.order.after.get(id(op), ()):
            return True
        if op.name == "tlx.named_barrier_wait":             # bar.sync of at least the task's threads
            count = _constant(op.operands[1])
            return isinstance(count, int) and count >= self.threads
        return op.name in ("tlx.async_descriptor_store_wait", "tlx.alloc_barriers", "tl.debug_barrier",
                           *WARP_PIPELINE_SYNCS)

    def effects(self, op):
        """(slots ``op`` reads, slots it writes, what stays pending after it).  An access by an
        asynchronous engine whose completion each thread waits for itself (a TMA load or store:
        its mbarrier or bulk wait; wgmma: ``async_dot_wait``; tcgen05: its mbarrier) is checked
        against the pending accesses when it is issued, but does not stay pending: the waits
        order it (with the barriers ``_scope`` adds after them)."""
        if op.name == "tlx.local_store" and _smem(op.operands[0]):
            slots = self.slots(op.operands[0], op.operands[1].type.layout)
            return _NONE, slots, _Pending(writes=slots)
        if op.name == "tlx.local_load" and _smem(op.operands[0]):
            slots = self.slots(op.operands[0], op.results[0].type.layout)
            return slots, _NONE, _Pending(reads=slots)
        if op.name in ("tlx.local_gather", "tlx.local_scatter"):    # data-dependent: the whole view
            slots = self.slots(op.operands[0])
            if op.name == "tlx.local_gather":
                return slots, _NONE, _Pending(reads=slots)
            return _NONE, slots, _Pending(writes=slots)
        if op.name == "tlx.async_load":                     # cp.async: each thread copies its elements
            slots = self.slots(op.operands[1], op.operands[0].type.layout)
            return _NONE, slots, _Pending(writes=slots)
        if op.name in ("tlx.async_descriptor_load", "tlx.async_bulk_load"):   # issued by one thread
            return _NONE, self.slots(op.operands[1]), _CLEAR
        if op.name in ("tlx.async_dot", "tlx.tcgen05_mma"):
            operands = [*op.operands[:2], *(op.scales if op.name == "tlx.tcgen05_mma" else ())]
            reads = frozenset().union(*(self.slots(v) for v in operands if _smem(v)))
            return reads, _NONE, _CLEAR
        if has_trait(op, BULK_STORE):
            return self.slots(op.operands[1]), _NONE, _CLEAR
        return _NONE, _NONE, _CLEAR

    def summary(self, op):
        """Everything the regions of ``op`` may access, as if at ``op``."""
        reads, writes = set(), set()
        for inner in op.walk():
            if not inner.regions:
                r, w, _ = self.effects(inner)
                reads |= r
                writes |= w
        return frozenset(reads), frozenset(writes), _Pending(reads, writes)

    def slots(self, view, layout=None) -> frozenset:
        """The slots a view may name, ``(id(base allocation), where, thread map)``: ``base`` is
        the allocation itself or the one its ``reuse=`` shares; ``where`` = (id(allocation),
        buffer index or None: any, box or None: all of it) narrows a ``buf[i]`` or a slice of
        one with constant i / offsets; ``thread map``: see ``_thread_map``."""
        where = _constant_part(view)
        thread_map = _thread_map(view, layout)
        keys = set()
        for root in view_roots(view):
            base = self.order.aliases.get(id(root), root)
            part = where if where is not None and where[0] == id(root) else (id(root), None, None)
            keys.add((id(base), part, thread_map))
        return frozenset(keys)


def _conflict(a, b) -> bool:
    """Whether two sets of slots overlap in bytes that different threads access (two accesses
    with the same thread map touch, in any buffer, only bytes the same thread touches)."""
    return any(ra == rb and _overlap(pa, pb) and (ma is None or ma != mb)
               for ra, pa, ma in a for rb, pb, mb in b)


def _overlap(a, b) -> bool:
    """Whether two parts of one allocation group may share bytes (parts named through two
    different allocations of a ``reuse=`` group may)."""
    (alloc_a, index_a, box_a), (alloc_b, index_b, box_b) = a, b
    if alloc_a != alloc_b:
        return True
    if index_a is not None and index_b is not None and index_a != index_b:
        if isinstance(index_a, tuple) or isinstance(index_b, tuple):
            return not _ring_distinct(index_a, index_b)
        return False
    if box_a is None or box_b is None:
        return True
    return all(oa < ob + sb and ob < oa + sa for (oa, sa), (ob, sb) in zip(box_a, box_b))


def _constant_part(view):
    """(id(allocation), i, box) when ``view`` is ``buf[i]`` (i constant, else None), a slice
    of one at constant offsets (box: (offset, size) per dimension, else None) or a transpose
    of one (box None); None when unknown."""
    v, box = view, None
    owner = getattr(v, "owner", None)
    while isinstance(owner, Operation) and owner.name in ("tlx.local_trans", "tlx.local_slice"):
        if owner.name == "tlx.local_slice":
            offsets = [_constant(o) for o in owner.operands[1:]]
            box = None if box is not None or None in offsets else tuple(zip(offsets, owner.results[0].type.shape))
        else:
            box = None                   # (a slice of a transpose: coordinates of the transpose)
        v = owner.operands[0]
        owner = getattr(v, "owner", None)
    if not isinstance(owner, Operation) or owner.name != "tlx.local_view":
        return None
    alloc = getattr(owner.operands[0], "owner", None)
    if not isinstance(alloc, Operation) or alloc.name != "tlx.local_alloc":
        return None
    index = _constant(owner.operands[1])
    if not isinstance(index, int):
        index = _ring_index(owner.operands[1])
    return id(alloc), index, box


# -- ring stages (passes/pipeline.py's carried stage counter) ------------------------------------
def _ring_index(value):
    """A buffer index relative to a value of this iteration: ``("ring", id(x), 0)`` for ``x``
    itself, ``("ring", id(x), -1)`` for ``select(x == 0, c, x - 1)`` with a constant ``c != 0``
    (the stage a ring refills: the one before ``x``); None otherwise.  Both name different
    buffers for every integer ``x`` (``x == 0`` gives ``c``, else ``x - 1``)."""
    owner = getattr(value, "owner", None)
    if isinstance(owner, Operation) and owner.name == "arith.select" and len(owner.operands) == 3:
        cond, wrapped, minus = owner.operands
        cmp, sub = getattr(cond, "owner", None), getattr(minus, "owner", None)
        if isinstance(cmp, Operation) and cmp.name == "arith.cmp" and cmp.attrs.get("predicate") == "eq" \
                and _constant(cmp.operands[1]) == 0 and isinstance(sub, Operation) and sub.name == "arith.sub" \
                and _constant(sub.operands[1]) == 1 and sub.operands[0] is cmp.operands[0] \
                and isinstance(_constant(wrapped), int) and _constant(wrapped) != 0:
            return "ring", id(cmp.operands[0]), -1
    if value is None or _constant(value) is not None:
        return None
    return "ring", id(value), 0


def _ring_distinct(a, b) -> bool:
    """Whether ring indices ``a`` and ``b`` (of one iteration) name different buffers."""
    return isinstance(a, tuple) and isinstance(b, tuple) and a[1] == b[1] and a[2] != b[2]


def _forget_ring_indices(state: _Pending) -> _Pending:
    """The pending accesses as the next iteration sees them: a ring index names a value of the
    iteration that made it, so across the back edge it becomes unknown (any buffer)."""
    def forget(slots):
        out = set()
        for base, part, thread_map in slots:
            if isinstance(part[1], tuple):
                part = (part[0], None, part[2])
            out.add((base, part, thread_map))
        return frozenset(out)
    return _Pending(forget(state.reads), forget(state.writes))


def _thread_map(view, layout):
    """What fixes the bytes each thread accesses, when two accesses with the same one touch
    only their own thread's bytes: every thread accesses its elements of ``layout`` (which
    gives each element to one thread) in a whole buffer ``buf[i]`` (any i: buffers are
    disjoint and alike), through the same transposes and constant slices; None when unknown
    (a loop-carried view, a runtime slice, a one-thread or asynchronous access)."""
    if layout is None or not layout.is_injective():
        return None
    chain = []
    v = view
    while isinstance(getattr(v, "owner", None), Operation) and v.owner.name in ("tlx.local_trans", "tlx.local_slice"):
        if v.owner.name == "tlx.local_slice":
            offsets = [_constant(o) for o in v.owner.operands[1:]]
            if None in offsets:
                return None
            chain.append(("slice", offsets, v.owner.results[0].type.shape))
        else:
            chain.append(("trans", sorted(v.owner.attrs.items(), key=str)))
        v = v.owner.operands[0]
    owner = getattr(v, "owner", None)
    if isinstance(owner, Operation) and owner.name == "tlx.local_view":
        owner = getattr(owner.operands[0], "owner", None)
        chain.append("buffer")
    if not isinstance(owner, Operation) or owner.name != "tlx.local_alloc":
        return None
    return id(owner), str(chain), layout


def _smem(value) -> bool:
    return isinstance(value.type, MemDescType) and value.type.storage == "smem"


def _constant(value):
    owner = getattr(value, "owner", None)
    if isinstance(owner, Operation) and owner.name == "arith.constant":
        return owner.attrs.get("value")
    return None


def _tcgen05_syncs(kernel, ops) -> bool:
    """Whether ``rules_tcgen05`` syncs the task's threads before each of its MMAs (it does when
    the task writes shared memory from registers or touches tensor memory)."""
    if not kernel.attrs.get("tmem_columns"):
        return False
    for top in ops:
        for op in top.walk():
            if op.name == "tlx.async_load" or (op.name == "tlx.local_store" and _smem(op.operands[0])):
                return True
            if op.name in ("tlx.local_load", "tlx.local_store") and op.operands[0].type.storage == "tmem":
                return True
    return False
