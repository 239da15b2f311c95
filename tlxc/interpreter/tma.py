"""TMA (bulk tensor copies through a descriptor) on the interpreter.

A descriptor's runtime value is the host ``tlxc.TensorDescriptor`` (``base``:
its CPU tensor, ``shape``, ``strides``, ``block_shape``, ``padding``).  ``async_descriptor_load`` posts an
asynchronous copy that, when it lands, writes the box (zero-filled outside
the tensor, or NaN with ``padding="nan"``, as the hardware does) into the shared buffer and completes the
box's bytes on the barrier (``complete_tx``), so a consumer's ``barrier_wait``
on that barrier's phase is what orders the read.  ``async_descriptor_store``
copies the buffer to the tensor at once (clipped to the tensor), but its read
of the buffer stays in flight, as on the GPU, until the issuing task's
``async_descriptor_store_wait(n)`` leaves at most ``n`` newer stores pending:
writing the buffer before that (a ``local_store``, a TMA load into it) is a
``RaceError`` naming the store (the retired read is released to other tasks
by the issuer's next barrier arrive, as a retired cp.async copy is).  A
reduce-store (``store_reduce="add"``, ...) combines the box with the tensor's
elements instead (``reduce_elements``), as one atomic update when issued, so
tasks or CTAs reducing into the same rows agree with the GPU up to the order
of float roundings.

A load checks, when issued, that no unordered asynchronous access (an
``async_dot`` operand read, an earlier load nothing waited for) still uses
the slot, and its own write is tracked as an asynchronous access
(``races.py``): it lands into the barrier phase in progress, and only a
``barrier_wait`` that sees that phase complete orders it, so a read before
the wait is a ``RaceError`` naming the read and the load, whether or not the
bytes happen to have landed.  A load or store whose box starts at an innermost coordinate
that is not a 16-byte multiple (``check_inner_start``) is refused, located: the GPU
raises an illegal instruction there (H200, session 15: a row of float32 statistics copied
from a packed sequence's first row, at any column).  A multicast (``multicast_targets``) lands the box
in every target CTA of the cluster, completing each one's barrier.  Not
modelled: L2 promotion.
"""
from __future__ import annotations

import numpy as np

from ..ir.tensormap import ALIGNMENT
from .cluster import peer_barrier, peer_view
from .registry import impl
from .scheduler import PREEMPT
from .tensormap import check_storable, check_usable
from .values import from_storage, round_to, storage_dtype, to_storage


def _global_view(desc):
    """The descriptor's tensor as a strided numpy array (writes go through)."""
    import torch
    base = desc.base
    if isinstance(base, torch.Tensor):
        if base.device.type != "cpu":
            raise ValueError("the interpreter needs descriptors over CPU tensors")
        full = base.as_strided(tuple(desc.shape), tuple(desc.strides))
        return full.numpy() if full.dtype not in (torch.bfloat16,) and not str(full.dtype).startswith(
            "torch.float8") else full.view(_same_width_int(full.dtype)).numpy()
    return np.lib.stride_tricks.as_strided(base, tuple(desc.shape),
                                           tuple(s * base.itemsize for s in desc.strides))


def _same_width_int(dtype):
    import torch
    return torch.int16 if dtype == torch.bfloat16 else torch.int8


def _box_slices(desc, offsets):
    """(slices into the tensor, slices into the box) for the part of the box inside the tensor."""
    src, dst = [], []
    for off, size, extent in zip(offsets, desc.block_shape, desc.shape):
        lo, hi = max(int(off), 0), min(int(off) + size, extent)
        if hi <= lo:
            return None
        src.append(slice(lo, hi))
        dst.append(slice(lo - int(off), hi - int(off)))
    return tuple(src), tuple(dst)


def _bits_of(array: np.ndarray, element) -> np.ndarray:
    """Elements of the tensor as the interpreter's storage bits (same width)."""
    return array.view(storage_dtype(element))


def _targets(ctx, op, view, bar, mask) -> list:
    """(view, barrier) pairs the box lands in: this CTA's, or with a multicast every
    CTA of the cluster whose bit is set in ``mask``, at the same place."""
    if mask is None:
        return [(view, bar)]
    mask = int(mask) & 0xFFFF
    cluster = ctx.program.cluster
    size = 1 if cluster is None else cluster.size
    if mask == 0 or mask >> size:
        raise ctx.error(op, f"multicast CTA mask {mask:#x} in {ctx.label} names no CTA or CTAs outside its "
                            f"cluster of {size}")
    return [(peer_view(ctx, op, view, r), peer_barrier(ctx, op, bar, r)) for r in range(size) if mask >> r & 1]


def check_inner_start(ctx, op, what: str, offsets, element) -> None:
    """A TMA box starts at a 16-byte multiple of its innermost dimension (``offsets[-1]`` elements
    of ``element``); the GPU raises an illegal instruction on any other start (Triton's TMA rules
    say so too), whatever the base address and row strides."""
    start = int(offsets[-1])
    if (start * element.bytes) % ALIGNMENT:
        raise ctx.error(op, f"a TMA {what} in {ctx.label} starts its box at innermost coordinate {start} "
                            f"({start * element.bytes} bytes of {element}): TMA needs the innermost start at a "
                            f"multiple of {ALIGNMENT} bytes (a multiple of {ALIGNMENT // element.bytes} elements); "
                            f"the GPU raises an illegal instruction")


@impl("tlx.async_descriptor_load")
def async_descriptor_load(ctx, op, desc, view, bar, *rest):
    if op.attrs.get("has_pred") and not bool(rest[-1]):
        return
    check_usable(ctx, op, desc)
    offsets = rest[:len(op.offsets)]
    check_inner_start(ctx, op, "load", offsets, view.element)
    targets = _targets(ctx, op, view, bar, rest[len(offsets)] if op.attrs.get("multicast") else None)
    # The box overwrites the slot: an asynchronous access still in flight (an
    # async_dot not yet retired by async_dot_wait, released and waited for) races with it.
    accesses = [ctx.races.begin_async_write(v.key, v.label, "TMA load", op.loc, ctx.task_name, v.region())
                for v, _ in targets]
    parts = _box_slices(desc, offsets)
    nbytes = int(np.prod(view.shape)) * view.element.bytes
    source = _global_view(desc)

    def land():
        box = np.zeros(tuple(desc.block_shape), dtype=storage_dtype(view.element))
        if getattr(desc, "padding", "zero") == "nan":          # out-of-bounds elements read as NaN
            box[...] = to_storage(np.full(box.shape, np.nan), view.element)
        if parts is not None:
            src, dst = parts
            box[dst] = _bits_of(np.ascontiguousarray(source[src]), view.element)
        for (target, barrier), access in zip(targets, accesses):
            target.array()[...] = box.reshape(view.shape)      # a box's leading 1s may be dropped
            target.mark_written()
            ctx.races.signal(access, barrier)  # into the phase these bytes help complete
            barrier.complete_tx(nbytes)

    ctx.scheduler.post(f"TMA load into {view.label}" + (" (multicast)" if len(targets) > 1 else ""), land, op.loc)
    yield PREEMPT


def _stores_in_flight(ctx) -> list:
    """The issuing task's TMA stores whose shared-memory reads no store wait has retired, oldest first."""
    return ctx.task_state("tma_store", list)


@impl("tlx.async_descriptor_store")
def async_descriptor_store(ctx, op, desc, view, *offsets):
    check_usable(ctx, op, desc)
    check_storable(ctx, op, desc)
    check_inner_start(ctx, op, "store", offsets, view.element)
    access = ctx.races.begin_async_read(view.key, view.label, "TMA store", op.loc, ctx.task_name, view.region())
    access.retired = False
    access.wait_hint = ("the store still reads the buffer until tlx.async_descriptor_store_wait(n) leaves at most "
                        "n newer stores pending")
    _stores_in_flight(ctx).append(access)
    parts = _box_slices(desc, offsets)
    if parts is not None:
        src, dst = parts
        target = _global_view(desc)
        box = np.array(view.array()).reshape(tuple(desc.block_shape))[dst]   # the box's storage bits
        kind = op.attrs.get("reduce")
        if kind:      # a reduce-store: one atomic read-modify-write of the rows in the tensor
            old = _bits_of(np.ascontiguousarray(target[src]), view.element)
            box = to_storage(reduce_elements(kind, from_storage(old, view.element),
                                             from_storage(box, view.element), view.element), view.element)
        target[src] = box.view(target.dtype)
    yield PREEMPT


def reduce_elements(kind: str, old, new, element):
    """What a TMA reduce-store ``kind`` leaves in global memory where it held ``old`` and the
    box holds ``new`` (register values of ``element``), in the element type's arithmetic: floats
    computed in float32 and rounded once (exact for f16/bf16: float32 has more than twice their
    precision), min/max ignoring a NaN operand as PTX's min/max do, integers wrapping;
    inc/dec are PTX's ``atom.inc``/``atom.dec`` (wrap to 0 past ``new``, to ``new`` below 1)."""
    if element.is_float:
        old, new = np.asarray(old, np.float32), np.asarray(new, np.float32)
        combined = {"add": np.add, "min": np.fmin, "max": np.fmax}[kind](old, new)
        return round_to(combined, element)
    old, new = np.asarray(old), np.asarray(new)
    if kind == "inc":
        return np.where(old >= new, np.zeros_like(old), old + 1)
    if kind == "dec":
        return np.where((old == 0) | (old > new), new, old - 1)
    ops = {"add": np.add, "min": np.minimum, "max": np.maximum,
           "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
    return ops[kind](old, new).astype(old.dtype)


@impl("tlx.async_descriptor_store_wait")
def async_descriptor_store_wait(ctx, op):
    """Retire the reads of all but the newest ``pendings`` stores of this task."""
    in_flight = _stores_in_flight(ctx)
    keep = int(op.attrs.get("pendings", 0))
    done = in_flight[:max(len(in_flight) - keep, 0)]
    del in_flight[:len(done)]
    for access in done:
        ctx.races.retire(access, op.loc)


@impl("tlx.async_descriptor_prefetch_tensor")
def async_descriptor_prefetch_tensor(ctx, op, desc, *rest):
    """An L2 prefetch changes no value: nothing to do (out-of-bounds boxes are fine on the GPU too),
    but an in-kernel map that breaks TMA's rules traps on the GPU (interpreter/tensormap.py)."""
    check_usable(ctx, op, desc)
