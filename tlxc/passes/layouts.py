"""infer-layouts: give every register tensor a distributed layout.

A tensor of pointers that no anchor lays out (the pointers of a load, a store, a
cp.async, a loop-carried pointer tile) gets the default blocked layout *ordered by
its contiguity* (``axis_info.py``): when another dim is more contiguous than the
last one -- a column-major tile such as ``b = w.t()`` read as ``[K, N]`` with
``stride_bk == 1`` -- that dim becomes the fastest one, each thread holding a
16-byte run along it, so the access is vectorized along the contiguous axis (as
Triton's coalescing orders its load layouts).

Values fall in two classes:

* anchors have a layout of their own: loads (coalesced blocked layout),
  reduction results (slice of their operand), dot results (MMA accumulator),
  loop-carried values, and elementwise results that use an anchor;
* flexible values (constants, ``arange``, ``splat``, ``expand_dims``,
  ``broadcast`` and elementwise ops of flexible values) cost nothing to
  recompute, so they are *rematerialized* in whatever layout each consumer
  wants, right before it.

A consumer that needs an anchor in another layout gets a
``tl.convert_layout``.  Broadcasts are materialized by collapsing the wanted
layout (``collapse_dims``), so ``x - tl.max(x, 1)[:, None]`` needs no
conversion: the max already lives in the slice of ``x``'s layout.  Loop-carried
values take the layout the loop body yields (a fixpoint over the body).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import LayoutError
from ..ir import layouts as L
from ..ir import layouts_amd as A
from ..ir import layouts_nvidia as N
from ..ir.builder import Builder
from ..ir.core import OP_REGISTRY, Block, BlockArgument, Module, Operation, Region, Value, users_by_value
from ..ir.traits import ELEMENTWISE, has_trait
from ..ir.types import PointerType, ScalarType, TensorType
from ..options import perf_switch
from ..target import target_of
from .axis_info import AxisAnalysis
from .manager import Pass

_FLEXIBLE_SOURCES = {"arith.constant", "tl.arange", "tl.splat", "tl.expand_dims", "tl.broadcast"}


def is_elementwise(name: str) -> bool:
    return has_trait(name, ELEMENTWISE)       # arith.* but constant, math.*, tl.addptr, tl.hint


def _owns_layout(op: Operation) -> bool:
    """Whether ``op`` makes a tensor whose layout is its own choice rather than a global
    access's (tl.load), an operand's (elementwise, tl.reduce) or free (flexible sources)."""
    if not any(isinstance(r.type, TensorType) for r in op.results):
        return False
    return not (op.name in _FLEXIBLE_SOURCES or is_elementwise(op.name)
                or op.name in ("tl.load", "tl.reduce") or op.name.startswith("scf."))


def element_bits(t) -> int:
    """Bits of one element as the memory access will see it: for a tensor of
    pointers, its pointees (so the blocked layout of a loop-carried pointer
    tensor gives each thread a 16-byte run of what it loads)."""
    elem = t.element if isinstance(t, TensorType) else t
    if isinstance(elem, PointerType):
        elem = elem.pointee
        if isinstance(elem, PointerType):
            return 64
    return max(8, elem.bits)


@dataclass
class Anchor:
    value: Value          # the rewritten value, whose type carries the layout

    @property
    def layout(self):
        return self.value.type.layout if isinstance(self.value.type, TensorType) else None


@dataclass
class Flexible:
    op: Operation         # the original op, re-emitted on demand


@dataclass
class Scalar:
    value: Value


@dataclass(frozen=True)
class InferLayouts(Pass):
    name = "infer-layouts"

    def run(self, module: Module, options) -> Module:
        for kernel in module.kernels:
            _KernelRewriter(kernel, options).run()
        return module


class _KernelRewriter:
    def __init__(self, kernel: Operation, options):
        self.kernel = kernel
        self.num_warps = kernel.attrs.get("num_warps", 4)
        self.target = target_of(options)
        self.lanes = self.target.warp_size            # 32, or 64 on AMD (wave64)
        self._users = None                            # users_by_value of the kernel, on demand
        self.entries: dict[int, object] = {}
        self.scopes: list[dict] = []
        self.b = Builder()
        self.axis = AxisAnalysis(kernel)      # facts of the original values (pointer orders)

    # -- driver ----------------------------------------------------------------------
    def run(self) -> None:
        old_block = self.kernel.regions[0].block
        new_block = Block()
        for arg in old_block.args:
            new = new_block.add_arg(arg.type, arg.name_hint)
            self.entries[id(arg)] = Scalar(new)
        self.rewrite_ops(old_block, new_block)
        self.kernel.regions[0] = Region(new_block)
        self.kernel.regions[0].parent = self.kernel

    def rewrite_ops(self, old: Block, new: Block, stop_before_terminator: bool = False) -> None:
        self.scopes.append({})
        try:
            with self.b.at(new):
                ops = old.ops[:-1] if stop_before_terminator and old.terminator else old.ops
                for op in ops:
                    with self.b.location(op.loc):
                        self.rewrite(op)
        finally:
            if not stop_before_terminator:
                self.scopes.pop()

    def default_layout(self, t: TensorType, old: Value | None = None):
        """The default blocked layout of ``t``; for ``old`` a tensor of pointers, ordered by
        its contiguity (``memory_order``), each thread holding as many consecutive elements
        as the kernel's accesses of that shape can move at once (``access_elements``)."""
        order = self.memory_order(old) if old is not None else None
        bits = element_bits(t)
        vector_bytes = 16
        if old is not None and isinstance(old.type, TensorType) and isinstance(old.type.element, PointerType):
            found = self.access_elements()
            elements = found.get(tuple(t.shape), 16)
            if found:
                # Triton's coalescing spreads a small tile over all the threads (of this task)
                # before it vectorizes: at most numel / threads elements each (1 for a 32-element
                # tile on one warp), so a thread-divergent access (`if tlx.thread_id(0) == 0:
                # tl.store(...)`) touches the elements it does in Triton.
                numel = 1
                for extent in t.shape:
                    numel *= extent
                elements = min(elements, max(1, numel // (self.num_warps * self.lanes)))
            vector_bytes = min(16, elements * (bits // 8))
        return L.default_blocked(t.shape, self.num_warps, bits, vector_bytes=vector_bytes, order=order,
                                 lanes=self.lanes)

    def access_elements(self) -> dict[tuple[int, ...], int]:
        """For each shape of a tensor of pointers that tl.load / tl.store access, the most
        consecutive elements one of those accesses can move as one vector: the pointers'
        contiguity and alignment and the mask's constancy along the fastest dim, at most 16
        bytes (Triton's coalescing takes the same maximum over the accesses of a shape).
        Where none can be vectorized (rows at an unknown stride, a mask against an unknown
        length), each thread holds one element per 32 lanes' run, so every warp-wide access
        covers consecutive addresses instead of one element of every 16-byte chunk."""
        found = getattr(self, "_access_elements", None)
        if found is not None:
            return found
        found = self._access_elements = {}
        ops = list(self.kernel.walk())
        # Only where global accesses, elementwise ops and reductions make every tensor: a
        # tensor laid out by anything else (shared memory, a dot, a reshape) would meet the
        # narrower layout through a conversion, which costs more than the wider one's accesses.
        if any(_owns_layout(op) for op in ops):
            return found
        for op in ops:
            if op.name not in ("tl.load", "tl.store") or not isinstance(op.operands[0].type, TensorType):
                continue
            ptr = op.operands[0]
            if not isinstance(ptr.type.element, PointerType):
                continue
            ebytes = element_bits(ptr.type) // 8
            order = self.memory_order(ptr)
            dim = order[0] if order else ptr.type.rank - 1
            info = self.axis.info(ptr)
            if len(info.contiguity) != ptr.type.rank:
                continue
            width = min(info.contiguity[dim], max(1, info.divisibility[dim] // ebytes), max(1, 16 // ebytes))
            if op.attrs.get("has_mask"):
                mask = op.operands[1 if op.name == "tl.load" else 2]
                constancy = self.axis.info(mask).constancy
                if len(constancy) == ptr.type.rank:
                    width = min(width, constancy[dim])
            elements = 1
            while elements * 2 <= width:
                elements *= 2
            shape = tuple(ptr.type.shape)
            found[shape] = max(found.get(shape, 1), elements)
        return found

    def memory_order(self, old: Value):
        """The dims of pointer tensor ``old`` fastest first when a dim other than the last is
        strictly more contiguous (axis info) than the last one; None (row-major) otherwise."""
        t = old.type
        if not isinstance(t, TensorType) or t.rank < 2 or not isinstance(t.element, PointerType):
            return None
        contiguity = self.axis.info(old).contiguity
        if len(contiguity) != t.rank:
            return None
        rank = t.rank
        best = max(range(rank), key=lambda d: (contiguity[d], d))      # ties go to the later dim
        if best == rank - 1 or contiguity[best] <= contiguity[-1]:
            return None
        return (best,) + tuple(d for d in reversed(range(rank)) if d != best)

    # -- materialization -------------------------------------------------------------
    def memo_get(self, key):
        for scope in reversed(self.scopes):
            if key in scope:
                return scope[key]
        return None

    def get(self, old: Value, layout=None) -> Value:
        """The rewritten value of ``old``, in ``layout`` for tensors."""
        entry = self.entries[id(old)]
        if isinstance(entry, Scalar):
            return entry.value
        if layout is None:
            layout = self.natural(old) or self.default_layout(old.type, old)
        key = (id(old), layout)
        found = self.memo_get(key)
        if found is not None:
            return found
        if isinstance(entry, Anchor):
            if entry.layout == layout:
                return entry.value
            value = self.b.value("tl.convert_layout", [entry.value], old.type.with_layout(layout))
            value.name_hint = old.name_hint
        else:
            value = self.rematerialize(entry.op, old, layout)
        self.scopes[-1][key] = value
        return value

    def natural(self, old: Value):
        entry = self.entries[id(old)]
        return entry.layout if isinstance(entry, Anchor) else None

    def rematerialize(self, op: Operation, old: Value, layout) -> Value:
        rtype = old.type.with_layout(layout)
        if op.name in ("arith.constant", "tl.arange"):
            operands = []
        elif op.name == "tl.splat":
            operands = [self.get(op.operands[0])]
        elif op.name == "tl.expand_dims":
            operands = [self.get(op.operands[0], L.slice_layout(layout, op.attrs["axis"]))]
        elif op.name == "tl.broadcast":
            src = op.operands[0].type
            grown = [d for d, (s, n) in enumerate(zip(src.shape, old.type.shape)) if s != n]
            operands = [self.get(op.operands[0], L.collapse_dims(layout, grown))]
        else:
            operands = [self.get(v, layout if isinstance(v.type, TensorType) else None) for v in op.operands]
        new = self.b.create(op.name, operands, [rtype], dict(op.attrs), result_names=[old.name_hint])
        new.loc = op.loc
        return new.results[0]

    # -- per-op rules ------------------------------------------------------------------
    def rewrite(self, op: Operation) -> None:
        name = op.name
        if name == "scf.for":
            return self.rewrite_for(op)
        if name == "scf.while":
            return self.rewrite_while(op)
        if name == "scf.if":
            return self.rewrite_if(op)
        if name == "tlx.async_tasks":
            return self.rewrite_async_tasks(op)
        tensor_results = [r for r in op.results if isinstance(r.type, TensorType)]
        if tensor_results and (name in _FLEXIBLE_SOURCES or is_elementwise(name) and all(
                not isinstance(self.entries[id(v)], Anchor) for v in op.operands)):
            self.entries[id(op.results[0])] = Flexible(op)
            return
        rule = getattr(self, "rule_" + name.replace(".", "_"), None)
        if rule is not None:
            return rule(op)
        if is_elementwise(name) and tensor_results:
            return self.rule_elementwise(op)
        if tensor_results:
            raise LayoutError(f"no layout rule for {name}", op.loc)
        # scalar-only op (program_id, scalar arithmetic, print of scalars...)
        self.copy(op, [self.get(v) for v in op.operands])

    def copy(self, op: Operation, operands: list[Value], result_types=None) -> Operation:
        types = result_types if result_types is not None else [r.type for r in op.results]
        new = self.b.create(op.name, operands, types, dict(op.attrs),
                            result_names=[r.name_hint for r in op.results])
        new.loc = op.loc
        for old_r, new_r in zip(op.results, new.results):
            self.entries[id(old_r)] = Anchor(new_r) if isinstance(new_r.type, TensorType) else Scalar(new_r)
        return new

    def anchor_layout(self, values, fallback_type):
        """The layout an elementwise op takes: that of an operand computed by an op
        (load, reduction, dot...) in preference to a loop-carried argument, so that
        `acc += tl.sum(x, 1)` keeps the reduction's layout and the loop settles there."""
        def rank(v):
            entry = self.entries[id(v)]
            return 1 if isinstance(entry, Anchor) and isinstance(entry.value, BlockArgument) else 0
        for v in sorted(values, key=rank):
            layout = self.natural(v) if isinstance(v.type, TensorType) else None
            if layout is not None:
                return layout
        return self.default_layout(fallback_type)

    def rule_elementwise(self, op):
        tensors = [v for v in op.operands if isinstance(v.type, TensorType)]
        if not tensors and not isinstance(op.results[0].type, TensorType):
            # a scalar use of an elementwise op (tl.multiple_of(n, 16) on a scalar): nothing to lay out
            self.copy(op, [self.get(v, None) for v in op.operands], [r.type for r in op.results])
            return
        layout = self.anchor_layout(tensors, op.results[0].type)
        operands = [self.get(v, layout if isinstance(v.type, TensorType) else None) for v in op.operands]
        self.copy(op, operands, [r.type.with_layout(layout) for r in op.results])

    def rule_tl_load(self, op):
        ptr = op.operands[0]
        if not isinstance(ptr.type, TensorType):
            return self.copy(op, [self.get(v) for v in op.operands])
        layout = self.natural(ptr) or self.default_layout(ptr.type, ptr)
        operands = [self.get(v, layout) for v in op.operands]
        self.copy(op, operands, [op.results[0].type.with_layout(layout)])

    def rule_tl_store(self, op):
        ptr, value = op.operands[:2]
        if not isinstance(ptr.type, TensorType):
            return self.copy(op, [self.get(v) for v in op.operands])
        layout = self.natural(ptr) or self.coalesced_store_layout(op, ptr, value) or self.natural(value) \
            or self.default_layout(ptr.type, ptr)
        self.copy(op, [self.get(v, layout) for v in op.operands])

    def coalesced_store_layout(self, op: Operation, ptr: Value, value: Value):
        """The default blocked layout for a store whose value comes in a layout that writes
        4 or fewer contiguous bytes per thread (an MMA accumulator cast to 16 bits) while the
        blocked one writes 16: one conversion through shared memory (which the epilogue of a
        matmul takes over its dead operand ring, codegen_c/lower.py) buys 16-byte stores, as
        Triton's epilogues do; measured on the H200, 128x256 fp16 tiles at 4096^3, 5-9% of the
        kernel (docs/performance.md).  An fp32 accumulator (8 contiguous bytes) is stored as
        it is.  Only for tiles of at least 4096 elements, and not inside a warp-specialized
        task (its scratch cannot take over dead buffers and its registers are budgeted: the
        attention consumer spilled); None otherwise."""
        if _inside_async_task(op):
            return None
        have = self.natural(value)
        if have is None or value.type.rank != 2 or value.type.numel < 4096:
            return None
        want = self.default_layout(ptr.type, ptr)
        order = self.memory_order(ptr)
        fastest = order[0] if order else value.type.rank - 1
        if self.axis.info(ptr).contiguity[fastest] < 8:
            return None
        bits = element_bits(value.type)
        if have.contiguous_elements_per_thread(fastest) * bits > 32:
            return None
        if want.contiguous_elements_per_thread(fastest) * bits < 128:
            return None
        return want

    rule_tl_atomic_rmw = rule_tl_load
    rule_tl_atomic_cas = rule_tl_load
    rule_tl_hint = rule_elementwise
    rule_tl_flip = rule_elementwise       # the lowering moves the elements (rules_scan.py)
    rule_tl_sort = rule_elementwise

    def rule_tl_scan(self, op):
        """The operands share the first one's layout; so do the results.  The combine
        region holds scalars only and moves to the new op as it is."""
        layout = self.natural(op.operands[0]) or self.default_layout(op.operands[0].type)
        operands = [self.get(v, layout) for v in op.operands]
        self.emit_region_op(op, operands, list(op.regions), [layout] * len(op.results))

    def rule_tl_reduce_combine(self, op):
        layout = self.natural(op.operands[0]) or self.default_layout(op.operands[0].type)
        operands = [self.get(v, layout) for v in op.operands]
        tensor_result = isinstance(op.results[0].type, TensorType)
        out = L.slice_layout(layout, op.attrs["axis"]) if tensor_result else None
        self.emit_region_op(op, operands, list(op.regions), [out] * len(op.results))

    def rule_tl_reduce(self, op):
        src = op.operands[0]
        layout = self.natural(src) or self.default_layout(src.type)
        operand = self.get(src, layout)
        rtype = op.results[0].type
        if isinstance(rtype, TensorType):
            rtype = rtype.with_layout(L.slice_layout(layout, op.attrs["axis"]))
        self.copy(op, [operand], [rtype])

    def rule_tl_reshape(self, op):
        src = op.operands[0]
        layout = self.natural(src) or self.default_layout(src.type)
        rtype = op.results[0].type
        self.copy(op, [self.get(src, layout)], [rtype.with_layout(L.reshape(layout, rtype.shape))])

    def rule_tl_split(self, op):
        """The halves keep the operand's layout minus its last dim, which must be held in
        registers (then splitting only picks registers); otherwise the operand is first
        converted to the default blocked layout, whose last dim is in registers."""
        src = op.operands[0]
        layout = self.natural(src) or self.default_layout(src.type)
        if not L.dim_in_registers(layout, src.type.rank - 1):
            layout = self.default_layout(src.type)
            if not L.dim_in_registers(layout, src.type.rank - 1):
                raise LayoutError(f"tl.split of {src.type}: no layout holds its last dim in registers", op.loc)
        half = L.slice_layout(layout, src.type.rank - 1)
        self.copy(op, [self.get(src, layout)], [r.type.with_layout(half) for r in op.results])

    def rule_tl_join(self, op):
        """Both operands in one layout (the first's); the new last dim is the result's highest
        register bit: registers 0..n-1 hold ``a``, n..2n-1 hold ``b``."""
        a, b = op.operands
        layout = self.natural(a) or self.natural(b) or self.default_layout(a.type)
        self.copy(op, [self.get(a, layout), self.get(b, layout)],
                  [op.results[0].type.with_layout(L.join_layout(layout))])

    def rule_tl_trans(self, op):
        src = op.operands[0]
        layout = self.natural(src) or self.default_layout(src.type)
        rtype = op.results[0].type
        self.copy(op, [self.get(src, layout)],
                  [rtype.with_layout(L.transpose(layout, op.attrs["perm"]))])

    def rule_tl_convert_layout(self, op):
        """A conversion the frontend asked for (``tlx.zeros(..., layout=tlx.nv_mma_layout(...))``
        carries the layout in its attrs) makes its result an anchor in that layout."""
        if "warps_per_cta" not in op.attrs:
            self.copy(op, [self.get(op.operands[0])])
            return
        rtype = op.results[0].type
        try:
            layout = N.nv_mma_register_layout(N.NvMmaLayout.from_attrs(op.attrs), rtype.shape, self.num_warps)
        except ValueError as exc:
            raise LayoutError(f"{N.NvMmaLayout.from_attrs(op.attrs)}: {exc}", op.loc) from None
        self.copy(op, [self.get(op.operands[0], layout)], [rtype.with_layout(layout)])

    def rule_tl_dot(self, op):
        a, b, acc = op.operands
        precision = op.attrs.get("input_precision")
        acc_layout, a_layout, b_layout = dot_layouts(a.type, b.type, acc.type, self.num_warps, self.target,
                                                     precision)
        operands = [self.get(a, a_layout), self.get(b, b_layout), self.get(acc, acc_layout)]
        new = self.copy(op, operands, [acc.type.with_layout(acc_layout)])
        mfma = _mfma_of(a.type, acc.type, self.target, b.type)
        if mfma is not None:
            new.attrs.update(algorithm="mfma", mfma_block=mfma.block, mfma_k=mfma.k)
        else:
            m, n = acc.type.shape
            mma = _mma_bits(a.type, precision, b.type, acc.type) is not None and self.target.is_nvidia and \
                m >= 16 and n >= 8
            new.attrs["algorithm"] = "mma_v2" if mma else "fma"

    def rule_tlx_local_gather(self, op):
        """The result takes the indices' layout (each thread reads the elements its indices name)."""
        view, indices = op.operands
        layout = self.natural(indices) or self.default_layout(indices.type)
        self.copy(op, [self.get(view), self.get(indices, layout)], [op.results[0].type.with_layout(layout)])

    def rule_tlx_local_scatter(self, op):
        view, value, indices = op.operands
        layout = self.natural(indices) or self.natural(value) or self.default_layout(indices.type)
        self.copy(op, [self.get(view), self.get(value, layout), self.get(indices, layout)])

    def rule_tlx_local_load(self, op):
        rtype = op.results[0].type
        layout = (self.tmem_layout(op, op.operands[0]) or self.mfma_operand_of(op.results[0])
                  or self.wgmma_a_of(op.results[0]) or self.default_layout(rtype))
        self.copy(op, [self.get(op.operands[0])], [rtype.with_layout(layout)])

    def wgmma_a_of(self, value: Value):
        """The wgmma register-A layout of a 16-bit buffer load whose every use is the A of a
        ``tlx.async_dot`` (the attention backward's K and V, a ``tl.dot`` on loaded operands
        built for sm_90a): the load reads shared memory straight into the fragments
        (``ldmatrix``), not through a conversion in scratch between two barriers.  None otherwise."""
        if self._users is None:
            self._users = users_by_value(self.kernel)
        users = self._users.get(id(value), [])
        if not self.target.is_nvidia or not users or value.type.element.bits != 16 \
                or not perf_switch("TLXC_WGMMA_A_LDMATRIX"):
            return None
        layouts = set()
        for user in users:
            if user.name != "tlx.async_dot" or user.operands[0] is not value or value in user.operands[1:]:
                return None
            try:
                acc = N.mma_accumulator_layout(user.operands[2].type.shape, self.num_warps, "wgmma")
                layouts.add(N.mma_operand_layout(value.type.shape, 0, acc, 16))
            except ValueError:
                return None
        return layouts.pop() if len(layouts) == 1 else None

    def mfma_operand_of(self, value: Value):
        """The MFMA (AMD) or mma.sync (NVIDIA, read by ldmatrix) operand layout of a buffer load
        whose one use is such a dot: the load reads shared memory straight into the fragments (no
        conversion through scratch).  None otherwise."""
        if self._users is None:
            self._users = users_by_value(self.kernel)
        users = self._users.get(id(value), [])
        if len(users) != 1 or users[0].name != "tl.dot":
            return None
        a, b, acc = users[0].operands
        if (value is a) == (value is b):
            return None
        if self.target.is_nvidia:
            if users[0].attrs.get("algorithm", "mma_v2") != "mma_v2" or not _uses_mma(a.type):
                return None
        elif _mfma_of(a.type, acc.type, self.target, b.type) is None:
            return None
        _, a_layout, b_layout = dot_layouts(a.type, b.type, acc.type, self.num_warps, self.target)
        return a_layout if value is a else b_layout

    def rule_tlx_local_store(self, op):
        view, value = op.operands
        layout = self.tmem_layout(op, view) or self.natural(value) or self.default_layout(value.type)
        self.copy(op, [self.get(view), self.get(value, layout)])

    def rule_tlx_remote_shmem_store(self, op):        # (and async_: ir/ops/cluster_mem.py) as local_store
        view, value, *rest = op.operands
        layout = self.natural(value) or self.default_layout(value.type)
        self.copy(op, [self.get(view), self.get(value, layout)] + [self.get(v) for v in rest])

    rule_tlx_async_remote_shmem_store = rule_tlx_remote_shmem_store

    def rule_tlx_vote_ballot_sync(self, op):          # (and inline asm: ir/ops/warp.py) elementwise
        if isinstance(op.results[0].type, TensorType):
            return self.rule_elementwise(op)
        self.copy(op, [self.get(v) for v in op.operands])

    rule_tl_inline_asm_elementwise = rule_tlx_vote_ballot_sync

    def tmem_layout(self, op, view):
        """The tcgen05.ld/st register layout when ``view`` is in tensor memory, else None."""
        if getattr(view.type, "storage", "smem") != "tmem":
            return None
        try:
            return N.tmem_layout(view.type.shape, self.num_warps)
        except ValueError as exc:
            raise LayoutError(f"{op.name} of tensor memory in a task of {self.num_warps} warps: {exc}",
                              op.loc) from None

    def rule_tlx_async_load(self, op):
        ptrs = op.operands[0]
        layout = self.natural(ptrs) or self.default_layout(ptrs.type, ptrs)
        operands = [self.get(v, layout if isinstance(v.type, TensorType) else None) for v in op.operands]
        self.copy(op, operands)

    def rule_tlx_prefetch(self, op):
        """Pointers and mask in one layout: the lowering walks their registers together."""
        if not isinstance(op.operands[0].type, TensorType):
            return self.copy(op, [self.get(v) for v in op.operands])
        return self.rule_tlx_async_load(op)

    def rule_tlx_async_dot(self, op):
        """wgmma: the accumulator (and result) in the wgmma accumulator layout of the
        task's warps (whole warpgroups); a register A in the matching operand layout."""
        a, b, acc = op.operands[:3]
        try:
            acc_layout = N.mma_accumulator_layout(acc.type.shape, self.num_warps, "wgmma")
            a_layout = None
            if isinstance(a.type, TensorType):   # (an 8-bit A keeps the 16-bit pattern, the accumulator's:
                bits = a.type.element.bits      # the codegen exchanges its bytes into k32 fragments)
                a_layout = N.mma_operand_layout(a.type.shape, 0, acc_layout, 16 if bits == 8 else bits)
        except ValueError as exc:
            raise LayoutError(f"tlx.async_dot of a {list(acc.type.shape)} accumulator with {self.num_warps} "
                              f"warps: {exc} (wgmma runs on whole warpgroups of 4 warps, 64 rows each)",
                              op.loc) from None
        operands = [self.get(a, a_layout), self.get(b), self.get(acc, acc_layout)]
        operands += [self.get(v) for v in op.operands[3:]]
        self.copy(op, operands, [acc.type.with_layout(acc_layout)])

    def rule_tlx_async_dot_wait(self, op):
        src = op.operands[0]
        layout = self.natural(src) or self.default_layout(src.type)
        self.copy(op, [self.get(src, layout)], [op.results[0].type.with_layout(layout)])

    def rewrite_async_tasks(self, op):
        """Each task's region gets layouts for its own number of warps."""
        regions = []
        saved = self.num_warps
        try:
            for region, task in zip(op.regions, op.task_infos):
                self.num_warps = task.warps
                new = Block()
                self.rewrite_ops(region.block, new)
                regions.append(Region(new))
        finally:
            self.num_warps = saved
        new_op = OP_REGISTRY[op.name]([], [], dict(op.attrs), regions, op.loc)
        self.b.block.append(new_op)

    def rule_tl_print(self, op):
        self.copy(op, [self.get(v) for v in op.operands])

    rule_tl_assert = rule_tl_print

    # -- control flow -------------------------------------------------------------------
    def carried_layouts(self, values) -> list:
        return [self.natural(v) if isinstance(v.type, TensorType) else None for v in values]

    def fill_defaults(self, layouts, values) -> list:
        return [lay if lay is not None or not isinstance(v.type, TensorType) else self.default_layout(v.type, v)
                for lay, v in zip(layouts, values)]

    def with_layouts(self, values, layouts) -> list:
        return [v.type.with_layout(lay) if isinstance(v.type, TensorType) else v.type
                for v, lay in zip(values, layouts)]

    def rewrite_body(self, old: Block, arg_types, extra_first=0):
        """Rewrite ``old`` into a fresh block with ``arg_types``; returns
        (block, terminator's old operands, their natural layouts)."""
        new = Block()
        for arg, t in zip(old.args, arg_types):
            a = new.add_arg(t, arg.name_hint)
            self.entries[id(arg)] = Anchor(a) if isinstance(t, TensorType) else Scalar(a)
        self.rewrite_ops(old, new, stop_before_terminator=True)
        term = old.terminator
        yielded = list(term.operands)
        return new, term, yielded

    def finish_body(self, new: Block, term: Operation, yielded, layouts) -> None:
        """Emit the terminator of ``new`` with operands in ``layouts`` (scope still open)."""
        with self.b.at(new), self.b.location(term.loc):
            operands = [self.get(v, lay) for v, lay in zip(yielded, layouts)]
            self.b.create(term.name, operands, [], dict(term.attrs))
        self.scopes.pop()

    def solve_loop(self, body: Block, inits, arg_offset: int, first_types=()):
        """Fixpoint: carried layouts = the layouts the body yields."""
        layouts = self.fill_defaults(self.carried_layouts(inits), inits)
        for _ in range(4):
            saved_scopes = len(self.scopes)
            new, term, yielded = self.rewrite_body(
                body, list(first_types) + self.with_layouts(inits, layouts))
            start = 1 if term.name == "scf.condition" else 0
            produced = self.carried_layouts(yielded[start:])
            wanted = [p if p is not None else cur for p, cur in zip(produced, layouts)]
            if wanted == layouts:
                return new, term, yielded, layouts
            del self.scopes[saved_scopes:]
            layouts = wanted
        raise LayoutError("loop-carried layouts do not settle (tlxc bug)", term.loc)

    def rewrite_for(self, op):
        lb, ub, step = (self.get(v) for v in op.operands[:3])
        inits = op.operands[3:]
        new, term, yielded, layouts = self.solve_loop(op.regions[0].block, inits, 1, [lb.type])
        self.finish_body(new, term, yielded, layouts)
        operands = [lb, ub, step] + [self.get(v, lay) for v, lay in zip(inits, layouts)]
        self.emit_region_op(op, operands, [Region(new)], layouts)

    def rewrite_while(self, op):
        inits = op.operands
        before_old, after_old = op.regions[0].block, op.regions[1].block
        layouts = self.fill_defaults(self.carried_layouts(inits), inits)
        for _ in range(4):
            saved_scopes = len(self.scopes)
            before, bterm, byielded = self.rewrite_body(before_old, self.with_layouts(inits, layouts))
            self.finish_body(before, bterm, byielded, [None] + layouts)
            after, aterm, ayielded = self.rewrite_body(after_old, self.with_layouts(inits, layouts))
            produced = self.carried_layouts(ayielded)
            wanted = [p if p is not None else cur for p, cur in zip(produced, layouts)]
            if wanted == layouts:
                break
            self.scopes.pop()
            del self.scopes[saved_scopes:]
            layouts = wanted
        self.finish_body(after, aterm, ayielded, layouts)
        operands = [self.get(v, lay) for v, lay in zip(inits, layouts)]
        self.emit_region_op(op, operands, [Region(before), Region(after)], layouts)

    def rewrite_if(self, op):
        cond = self.get(op.operands[0])
        then_new, then_term, then_y = self.rewrite_body(op.regions[0].block, [])
        then_scope = self.scopes.pop()
        else_new, else_term, else_y = self.rewrite_body(op.regions[1].block, [])
        else_scope = self.scopes.pop()
        layouts = []
        for r, tv, ev in zip(op.results, then_y, else_y):
            if isinstance(r.type, TensorType):
                layouts.append(self.natural(tv) or self.natural(ev) or self.default_layout(r.type))
            else:
                layouts.append(None)
        self.scopes.append(then_scope)
        self.finish_body(then_new, then_term, then_y, layouts)
        self.scopes.append(else_scope)
        self.finish_body(else_new, else_term, else_y, layouts)
        self.emit_region_op(op, [cond], [Region(then_new), Region(else_new)], layouts)

    def emit_region_op(self, op, operands, regions, layouts):
        types = [r.type.with_layout(lay) if isinstance(r.type, TensorType) else r.type
                 for r, lay in zip(op.results, layouts)]
        new = OP_REGISTRY[op.name](operands, types, dict(op.attrs), regions, op.loc,
                                   [r.name_hint for r in op.results])
        self.b.block.append(new)
        for old_r, new_r in zip(op.results, new.results):
            self.entries[id(old_r)] = Anchor(new_r) if isinstance(new_r.type, TensorType) else Scalar(new_r)


def _inside_async_task(op: Operation) -> bool:
    owner = op.parent_op()
    while owner is not None and owner.name not in ("tlx.async_task", "tlx.async_tasks"):
        owner = owner.parent_op()
    return owner is not None


# -- dot layouts ---------------------------------------------------------------------------

def _uses_mma(a_type: TensorType) -> bool:
    """16-bit operands: ``mma.sync m16n8k16`` (and ldmatrix fragments from shared memory)."""
    return a_type.element.name in ("f16", "bf16")


def _mma_bits(a_type: TensorType, precision: str | None, b_type: TensorType | None = None,
              acc_type: TensorType | None = None) -> int | None:
    """The operand width of the ``mma.sync`` a dot takes: 16 (f16/bf16, m16n8k16), 32 (float32 at
    ``input_precision="tf32"``, Triton's default: m16n8k8 tf32), 8 (int8 x int8 into int32, K a
    multiple of 32: m16n8k32 s8), None (FMA: ieee / tf32x3 float32, other integers, fp8 outside
    wgmma)."""
    if _uses_mma(a_type):
        return 16
    if a_type.element.name == "f32" and precision == "tf32":
        return 32
    if a_type.element.name == "i8" and (b_type is None or b_type.element.name == "i8") and \
            (acc_type is None or acc_type.element.name == "i32") and a_type.shape[1] % 32 == 0:
        return 8
    return None


def _mfma_of(a: TensorType, acc: TensorType, target, b: TensorType | None = None) -> A.MfmaShape | None:
    """The MFMA instruction of an AMD dot (None: not AMD, or no instruction tiles it: FMA).  A and B
    have one type, except that fp8 MFMAs take E4M3 and E5M2 in any pair."""
    if target is None or target.is_nvidia or acc.element.name != "f32":
        return None
    if b is not None and b.element.name != a.element.name and not (a.element.is_float8 and b.element.is_float8):
        return None
    m, n = acc.shape
    return A.mfma_shape(a.element.name, m, n, a.shape[1], target.has("mfma_cdna4"))


def dot_layouts(a: TensorType, b: TensorType, acc: TensorType, num_warps: int, target=None,
                precision: str | None = None):
    """(acc, a, b) layouts of a tile-level dot.

    f16/bf16 use ``mma.sync m16n8k16`` fragments on NVIDIA and MFMA fragments on AMD
    (``ir/layouts_amd.py``), float32 at ``precision="tf32"`` ``mma.sync m16n8k8`` tf32 ones on
    NVIDIA; other input types use an FMA layout where each thread holds whole K-rows of A and
    K-columns of B for the accumulator elements it owns.
    """
    m, n = acc.shape
    lanes = target.warp_size if target is not None else L.LANES_PER_WARP
    mfma = _mfma_of(a, acc, target, b)
    if mfma is not None:
        return (A.mfma_accumulator_layout(acc.shape, num_warps, mfma),
                A.mfma_operand_layout(a.shape, 0, acc.shape, num_warps, mfma),
                A.mfma_operand_layout(b.shape, 1, acc.shape, num_warps, mfma))
    bits = _mma_bits(a, precision, b, acc)
    if bits is not None and m >= 16 and n >= 8 and (target is None or target.is_nvidia):
        acc_layout = N.mma_accumulator_layout(acc.shape, num_warps, "mma_v2")
        a_layout = N.mma_operand_layout(a.shape, 0, acc_layout, bits)
        b_layout = N.mma_operand_layout(b.shape, 1, acc_layout, bits)
        return acc_layout, a_layout, b_layout
    acc_layout = L.default_blocked(acc.shape, num_warps, 32, vector_bytes=16, lanes=lanes)
    return acc_layout, fma_operand_layout(acc_layout, a.shape, 0), fma_operand_layout(acc_layout, b.shape, 1)


def fma_operand_layout(acc_layout, shape, op_idx: int):
    """A thread holds, in registers, the whole K extent of the rows (A) or
    columns (B) of the accumulator elements it owns."""
    keep = 0 if op_idx == 0 else 1           # the accumulator dim this operand shares
    k_dim = 1 if op_idx == 0 else 0

    def project(basis):
        coords = [0, 0]
        coords[1 - k_dim] = basis[keep]
        return tuple(coords)

    k = shape[k_dim]
    k_bases = []
    bit = 1
    while bit < k:
        coords = [0, 0]
        coords[k_dim] = bit
        k_bases.append(tuple(coords))
        bit <<= 1
    registers = k_bases + [project(bb) for bb in acc_layout.register if project(bb) != (0, 0)]
    return L.Layout(tuple(shape), tuple(registers), tuple(project(bb) for bb in acc_layout.lane),
                    tuple(project(bb) for bb in acc_layout.warp))


__all__ = ["InferLayouts", "ScalarType", "dot_layouts", "fma_operand_layout"]
