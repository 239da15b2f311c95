"""Tensor descriptors as values with methods, as Triton writes them in a kernel:
``desc.load(offsets)``, ``desc.store(offsets, value)``, ``desc.atomic_add(offsets, value)`` (and
``atomic_min/max/and/or/xor``), ``desc.dtype``, ``desc.block_shape``.

Both methods are composed from the explicit TLX ops (no op of their own), staging the box
through a shared buffer the compiler allocates at the top of the kernel, so the checker, the
interpreter, the shared-layout pass and the TMA lowering see exactly what a hand-written TLX
kernel would show them:

- load:  ``expect_bytes(bar, box)``, ``async_descriptor_load(desc, buf, offsets, bar)``,
  ``barrier_wait(bar, 0)``, ``local_load(buf)``, then ``barrier_arrive(bar)``.  The arrive
  completes the barrier's second phase once every thread of the task has read the buffer, so
  each load leaves the barrier at parity 0 again (every load waits on phase 0, in loops too)
  and the next load cannot overwrite a buffer still being read.
- store: ``local_store(buf, value)``, ``fence("async_shared")``,
  ``async_descriptor_store(desc, buf, offsets)``, ``async_descriptor_store_wait(0)``: the
  store has read the buffer when the method returns, as in Triton.

One staging buffer (and barrier) serves every call with the same box in one task (replica),
since each call is complete when it returns; tasks and replicas run concurrently, so each has
its own.
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.builder import Builder
from ..ir.core import BlockArgument
from ..ir.ops.shared import tma_reduce_error
from ..ir.tensormap import narrow_for_stores
from ..ir.types import BarrierType, MemDescType, TensorDescType
from ..language.core import outside_kernel_error
from . import semantic as S
from . import tensor_desc
from . import tlx_rules as X
from .builtins import RULES, reshape
from .values import SemanticError, Tensor


def _method(name: str):
    def register(signature):
        def outside_kernel(*args, **kwargs):
            raise outside_kernel_error(f"tensor_descriptor.{name}")

        outside_kernel.__tlxc_builtin__ = "tensor_descriptor." + name
        outside_kernel.__tlxc_signature__ = signature
        return outside_kernel
    return register


@_method("load")
def _load_signature(self, offsets):
    """The box of ``block_shape`` at ``offsets`` as a register tensor; elements outside the
    tensor read as zero."""


@_method("store")
def _store_signature(self, offsets, value):
    """Write ``value`` (``block_shape``, converted to the descriptor's dtype) to the box at
    ``offsets``; elements outside the tensor are not written."""


ATOMICS = ("add", "min", "max", "and", "or", "xor")


def _atomic_signature(kind: str):
    def signature(self, offsets, value):
        """Combine ``value`` (``block_shape``, converted to the descriptor's dtype) into the box at
        ``offsets`` element by element, atomically; elements outside the tensor are not touched."""
    signature.__name__ = f"atomic_{kind}"
    return _method(f"atomic_{kind}")(signature)


METHODS = {"load": _load_signature, "store": _store_signature,
           **{f"atomic_{kind}": _atomic_signature(kind) for kind in ATOMICS}}


def is_descriptor(value) -> bool:
    return isinstance(value, Tensor) and isinstance(value.type, TensorDescType)


def attribute(desc: Tensor, attr: str, ctx):
    """``desc.dtype`` / ``desc.block_shape`` (compile-time), ``desc.shape`` / ``desc.strides`` (a tuple
    of i32 / i64 scalars: ``tl.descriptor_dim``, hidden parameters of the launch); methods are bound by
    the caller."""
    t = desc.type
    if attr == "dtype":
        return t.element
    if attr == "block_shape":
        return tuple(t.block_shape)
    if attr in ("shape", "strides"):
        made = getattr(desc.value, "owner", None)
        if getattr(made, "name", None) == "tlx.make_tensor_descriptor":   # (TLX's op): the sizes it was made with
            return tuple(Tensor(v) for v in (made.shape if attr == "shape" else made.strides))
        if not (isinstance(desc.value, BlockArgument) and desc.value.owner is ctx.entry):
            raise SemanticError(f"a tensor descriptor's '{attr}' is known of a descriptor kernel argument (a "
                                f"tlxc.TensorDescriptor) or of one tl.make_tensor_descriptor / "
                                f"tlx.make_tensor_descriptor built; this one is neither (reinterpreted from a "
                                f"slot, or carried through a loop or a branch): use the sizes it was made with")
        kind, result = ("shape", T.i32) if attr == "shape" else ("stride", T.i64)
        return tuple(Tensor(ctx.b.value("tl.descriptor_dim", [desc.value], result, kind=kind, dim=d))
                     for d in range(len(t.block_shape)))
    known = ", ".join(["dtype", "block_shape", "shape", "strides", *METHODS])
    raise SemanticError(f"a tensor descriptor has no attribute '{attr}' (it has {known})")


# -- the staging buffer ---------------------------------------------------------------------
def _staging(ctx, desc: Tensor, with_barrier: bool) -> tuple[Tensor, Tensor | None]:
    """The buffer view (and barrier view) the calls on boxes like ``desc``'s use in the current
    task; allocated once per (task, box) at the top of the kernel."""
    t = desc.type
    box = t.squeezed_box
    key = (ctx.task, t.element, box, t.swizzle)
    entry = ctx.staging.setdefault(key, {})
    if "buf" not in entry:
        entry["buf"] = _allocate(ctx, "tlx.local_alloc", MemDescType(box, t.element, 1), {}, "tma_staging")
    if with_barrier and "bar" not in entry:
        entry["bar"] = _allocate(ctx, "tlx.alloc_barriers", BarrierType(1), {"arrive_count": 1},
                                 "tma_landed")
    buf = _tlx(ctx, "local_view", Tensor(entry["buf"]), 0)
    bar = _tlx(ctx, "local_view", Tensor(entry["bar"]), 0) if with_barrier else None
    return buf, bar


def _allocate(ctx, name: str, result_type, attrs: dict, hint: str):
    """An allocation at the top of the kernel (the uniform prologue every task runs), in the
    order the calls that need them were built."""
    detached = Builder()
    with detached.location(ctx.b.loc):
        op = detached.create(name, [], [result_type], attrs, result_names=[hint])
    ctx.entry.insert(ctx.staging_allocs, op)
    ctx.staging_allocs += 1
    return op.results[0]


# -- the methods ------------------------------------------------------------------------------
def _tlx(ctx, name: str, *args):
    """Apply the rule of ``tlx.<name>``: the methods build what a TLX kernel would write."""
    return RULES["tlx." + name](ctx, *args)


def _load(ctx, desc, offsets):
    if tensor_desc.is_device_descriptor(desc):     # built in the kernel: element loads, for speed
        if desc.tma is None or not tensor_desc.DESC_LOAD_BY_TMA:     # (tensor_desc.DESC_LOAD_BY_TMA)
            return tensor_desc.load(ctx, desc, offsets)
        desc = desc.tma
    desc = X.descriptor_arg(desc)
    offsets = _offsets(desc, offsets)          # checked before anything is emitted
    buf, bar = _staging(ctx, desc, with_barrier=True)
    _tlx(ctx, "barrier_expect_bytes", bar, desc.type.box_bytes)
    _tlx(ctx, "async_descriptor_load", desc, buf, offsets, bar)
    _tlx(ctx, "barrier_wait", bar, 0)
    value = _tlx(ctx, "local_load", buf)
    _tlx(ctx, "barrier_arrive", bar)           # the second phase: parity 0 again, the buffer free
    block = tuple(desc.type.block_shape)
    return value if value.shape == block else reshape(ctx.b, value, block)


def _store(ctx, desc, offsets, value):
    if tensor_desc.is_device_descriptor(desc):     # built in the kernel: its tensor map, if it has one
        if desc.tma is None:
            return tensor_desc.store(ctx, desc, offsets, value)
        return _store_by_width(ctx, desc, offsets, value)
    _store_by_tma(ctx, desc, offsets, value)


def _store_by_width(ctx, desc, offsets, value) -> None:
    """An in-kernel descriptor's store: by TMA where the map's inner size is known to be a
    16-byte multiple (a constant, or a kernel argument specialized as divisible by 16, as a
    launch with such a size is), else the element store, exact for any shape (a TMA store
    would write the innermost dimension up to its next 16-byte boundary: ir/tensormap.py
    ``store_width_message``).  No run-time branch between the two: keeping both stores in
    the kernel costs registers (a persistent GEMM epilogue spilled)."""
    if narrow_for_stores(_known_extent(ctx, desc.shape[-1]), desc.element.bytes):
        return tensor_desc.store(ctx, desc, offsets, value)
    return _store_by_tma(ctx, desc.tma, offsets, value)


def _known_extent(ctx, inner) -> int:
    """What ``narrow_for_stores`` judges of an inner size: a constant's value, else the divisor a
    kernel argument is known to have (``_known_divisor``)."""
    return inner if not isinstance(inner, Tensor) else _known_divisor(ctx, inner)


def _known_divisor(ctx, value: Tensor) -> int:
    """A number ``value`` is known to be a multiple of: a constant's value, the specialized
    divisibility of a kernel argument, else 1."""
    owner = getattr(value.value, "owner", None)
    if getattr(owner, "name", None) == "arith.constant" and isinstance(owner.attrs.get("value"), int):
        return abs(owner.attrs["value"]) or 1
    args = ctx.entry.args
    for index, arg in enumerate(args):
        if arg is value.value:
            kernel = ctx.entry.parent.parent if ctx.entry.parent is not None else None
            divisibility = kernel.attrs.get("arg_divisibility", ()) if kernel is not None else ()
            return divisibility[index] if index < len(divisibility) else 1
    return 1


def _store_by_tma(ctx, desc, offsets, value, reduce: str = "") -> None:
    """The box staged through shared memory and TMA-stored; ``reduce`` (a kind of
    ``ir/ops/shared.py:TMA_REDUCE_TYPES``): a reduce-store, each element combined atomically
    with the tensor's."""
    desc = X.descriptor_arg(desc)
    offsets = _offsets(desc, offsets)
    value = _store_value(ctx, desc, value)
    buf, _ = _staging(ctx, desc, with_barrier=False)
    _tlx(ctx, "local_store", buf, value)
    _tlx(ctx, "fence", "async_shared")
    _tlx(ctx, "async_descriptor_store", desc, buf, offsets, "", reduce)
    _tlx(ctx, "async_descriptor_store_wait", 0)


def _atomic(kind: str):
    """``desc.atomic_<kind>(offsets, value)`` (Triton's descriptor atomics; nothing returned): a
    host descriptor's box by a TMA reduce-store (``cp.reduce.async.bulk.tensor``: the element types
    of ``TMA_REDUCE_TYPES``; others are refused naming the kind and type); an in-kernel
    descriptor's by the same where its map may store and TMA reduces the type, else by element
    atomics through its base pointer, masked to the tensor (any type ``tl.atomic_<kind>`` takes,
    64-bit bitwise ones too)."""
    def rule(ctx, desc, offsets, value):
        if not tensor_desc.is_device_descriptor(desc):
            return _store_by_tma(ctx, desc, offsets, value, kind)
        # an in-kernel map: by TMA where it may store (_store_by_width's rule) and TMA reduces the type
        # (16-bit float min/max: element atomics have none), else by element atomics
        if desc.tma is not None and tma_reduce_error(kind, desc.element) is None and \
                not narrow_for_stores(_known_extent(ctx, desc.shape[-1]), desc.element.bytes):
            return _store_by_tma(ctx, desc.tma, offsets, value, kind)
        return tensor_desc.atomic(ctx, desc, offsets, value, kind)
    return rule


def _offsets(desc: Tensor, offsets) -> tuple:
    if isinstance(offsets, Tensor) and offsets.is_block:
        raise SemanticError(f"'offsets' must be a list of {len(desc.type.block_shape)} integer scalars, got "
                            f"{S.describe(offsets)}", param="offsets")
    return X.box_offsets(desc, offsets)


def _store_value(ctx, desc: Tensor, value) -> Tensor:
    """``value`` as the staging buffer holds it: Triton's rule (the shape is the block's, the
    dtype converts implicitly), then without the box's leading 1s."""
    block = tuple(desc.type.block_shape)
    value = tensor_desc.block_value(ctx.b, value, block, desc.type.element)
    box = desc.type.squeezed_box
    return value if box == block else reshape(ctx.b, value, box)


RULES["tensor_descriptor.load"] = _load
RULES["tensor_descriptor.store"] = _store
for _kind in ATOMICS:
    RULES[f"tensor_descriptor.atomic_{_kind}"] = _atomic(_kind)
