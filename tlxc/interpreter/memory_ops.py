"""Rules for global-memory ops: ``tl.addptr``, ``tl.load``, ``tl.store``,
``tl.atomic_rmw``.  Addresses are checked before any byte moves; lanes whose
mask is false are never touched (and never checked)."""
from __future__ import annotations

import numpy as np

from ..ir.types import PointerType, ScalarType
from .divergence import poison, restrict
from .registry import impl
from .values import contiguous, from_storage, register_dtype, round_to, scalar_of, storage_dtype, to_storage


def _pointee(op) -> ScalarType | PointerType:
    return scalar_of(op.operands[0].type).pointee


def _itemsize(t) -> int:
    return 8 if isinstance(t, PointerType) else t.bytes


def _optional(op, values, first: int):
    mask = values[first] if op.attrs.get("has_mask") else None
    other = values[-1] if op.attrs.get("has_other") else None
    return mask, other


@impl("tl.addptr")
def addptr(ctx, op, ptr, offset):
    size = _itemsize(_pointee(op))
    return np.add(ptr, np.multiply(np.asarray(offset).astype(np.int64), np.int64(size)))


def _active(addresses: np.ndarray, mask):
    """(addresses to touch, boolean mask or None when all lanes are active)."""
    if mask is None:
        return addresses, None
    mask = np.broadcast_to(np.asarray(mask, dtype=bool), addresses.shape)
    if mask.all():
        return addresses, None
    return addresses[mask], mask


def _check(ctx, op, what: str, addresses: np.ndarray, active: np.ndarray, mask, t, write: bool) -> None:
    problem = ctx.memory.check(active, _itemsize(t), write)
    if problem is None:
        return
    kind, flat = problem
    if mask is not None:
        flat = int(np.flatnonzero(mask)[flat])
    address = int(addresses.reshape(-1)[flat])
    place = ""
    if addresses.ndim:
        index = tuple(int(i) for i in np.unravel_index(flat, addresses.shape))
        place = f" at index {index}"
    target = ctx.memory.describe_address(address, t)
    if kind == "out-of-bounds":
        message = (f"out-of-bounds {what} in {ctx.label}{place}: the address is {target} "
                   f"(mask the access or fix the offset)")
    elif kind == "misaligned":
        message = (f"misaligned {what} in {ctx.label}{place}: the address is {target}, not a multiple "
                   f"of the {_itemsize(t)}-byte element size")
    else:
        message = f"{what} in {ctx.label}{place} writes to a read-only array: the address is {target}"
    raise ctx.error(op, message)


@impl("tl.load")
def load(ctx, op, ptr, *optional):
    mask, other = _optional(op, optional, 0)
    # run for one thread (divergence.py): its elements only, the others poisoned
    mask = restrict(ctx, op, mask, op.operands[0])
    return poison(ctx, op, _load(ctx, op, ptr, mask, other), op.operands[0])


def _load(ctx, op, ptr, mask, other):
    t = _pointee(op)
    addresses = np.asarray(ptr, dtype=np.int64)
    active, lanes = _active(addresses, mask)
    if lanes is not None and not lanes.any():
        return _fill(op, other)
    _check(ctx, op, "load", addresses, active, lanes, t, write=False)
    values = from_storage(ctx.memory.gather(active, storage_dtype(t)), t)
    if isinstance(t, PointerType):          # memory holds real addresses (memory.py)
        values = ctx.memory.to_pointer(values)
    if lanes is None:
        values = np.asarray(values)
        return values if values.ndim else values[()]
    result = _fill(op, other)
    result[lanes] = values
    return result


def _fill(op, other):
    t = op.results[0].type
    if other is not None:
        return np.array(np.broadcast_to(other, np.shape(other)), dtype=register_dtype(t))
    return np.zeros(getattr(t, "shape", ()), dtype=register_dtype(t))


@impl("tl.store")
def store(ctx, op, ptr, value, *optional):
    t = _pointee(op)
    mask, _ = _optional(op, optional, 0)
    mask = restrict(ctx, op, mask, op.operands[0])      # one thread's store: its elements only
    addresses = np.asarray(ptr, dtype=np.int64)
    if isinstance(t, PointerType):          # a pointer lands in memory as its real address
        value = ctx.memory.to_integer(value)
    bits = np.broadcast_to(to_storage(value, t), addresses.shape)
    active, lanes = _active(addresses, mask)
    if lanes is not None:
        if not lanes.any():
            return
        bits = bits[lanes]
    _check(ctx, op, "store", addresses, active, lanes, t, write=True)
    ctx.memory.scatter(active, bits, storage_dtype(t))
    return


def _combine(kind: str, old, value, t: ScalarType):
    if kind == "xchg":
        return value
    if kind == "add":
        if t.is_float and t.bits < 32:
            # f32 has more than 2p + 2 bits for f16/bf16 (p = 11, 8): rounding the f32 sum
            # again is the correctly rounded 16-bit sum, what atom.add.noftz computes.
            return round_to(old.astype(np.float32) + value.astype(np.float32), t)
        return np.add(old, value)
    if kind in ("max", "min") and t.is_float:
        return _float_min_max(kind, old, value, t)
    ufunc = {"max": np.maximum, "min": np.minimum, "and": np.bitwise_and,
             "or": np.bitwise_or, "xor": np.bitwise_xor}[kind]
    return ufunc(old, value)


def _float_min_max(kind: str, old, value, t: ScalarType):
    """Triton's float atomic max (min), bit for bit as the GPU runs it: a signed
    integer max (min) of the bits where ``value``'s sign bit is clear, an unsigned
    min (max) where it is set (so NaNs and signed zeros land as they do there)."""
    signed, unsigned = (np.int32, np.uint32) if t.bits == 32 else (np.int64, np.uint64)
    old, value = np.asarray(old), np.asarray(value)
    old_s, value_s = old.view(signed), value.view(signed)
    old_u, value_u = old.view(unsigned), value.view(unsigned)
    if kind == "max":
        positive, negative = np.maximum(old_s, value_s), np.minimum(old_u, value_u)
    else:
        positive, negative = np.minimum(old_s, value_s), np.maximum(old_u, value_u)
    bits = np.where(value_s < 0, negative.view(signed), positive)
    return bits.view(old.dtype)


def _apply_atomically(ctx, op, what: str, ptr, mask, update) -> np.ndarray:
    """Run a read-modify-write on every active lane, in lane order; lanes that hit
    one address see each other's updates (processed in rounds of distinct
    addresses).  ``update(current, lanes)`` gives the new values of the chosen
    (flat, active) lanes.  Returns the old values (0 in masked-off lanes)."""
    t = _pointee(op)
    addresses = np.asarray(ptr, dtype=np.int64)
    result = np.zeros(addresses.shape, dtype=register_dtype(t))
    active, lanes = _active(addresses, mask)
    if lanes is not None and not lanes.any():
        return result if result.ndim else result[()]
    _check(ctx, op, what, addresses, active, lanes, t, write=True)
    flat_addresses = active.reshape(-1)
    old = np.empty(flat_addresses.shape, dtype=register_dtype(t))
    storage = storage_dtype(t)
    remaining = np.arange(flat_addresses.size)
    while remaining.size:
        _, first = np.unique(flat_addresses[remaining], return_index=True)
        chosen = remaining[first]
        where = flat_addresses[chosen]
        current = from_storage(ctx.memory.gather(where, storage), t)
        old[chosen] = current
        ctx.memory.scatter(where, to_storage(update(current, chosen), t), storage)
        remaining = np.delete(remaining, first)
    if lanes is None:
        result = old.reshape(addresses.shape)
    else:
        result[lanes] = old
    return result if result.ndim else result[()]


def _active_values(value, addresses, lanes, t) -> np.ndarray:
    """``value`` broadcast to the pointer's shape, active lanes only, flat."""
    values = np.broadcast_to(np.asarray(value, dtype=register_dtype(t)), np.shape(addresses))
    return (values[lanes] if lanes is not None else values).reshape(-1)


@impl("tl.atomic_rmw")
def atomic_rmw(ctx, op, ptr, value, *optional):
    """Sequential semantics (sem and scope change nothing on one CPU thread)."""
    t = _pointee(op)
    kind = op.attrs["kind"]
    mask, _ = _optional(op, optional, 0)
    mask = restrict(ctx, op, mask, op.operands[0])      # one thread's atomics: its elements only
    _, lanes = _active(np.asarray(ptr, dtype=np.int64), mask)
    values = _active_values(value, ptr, lanes, t)
    old = _apply_atomically(ctx, op, f"atomic_{kind}", ptr, mask,
                            lambda current, chosen: _combine(kind, current, values[chosen], t))
    return poison(ctx, op, old, op.operands[0])


def _bits(values, t) -> np.ndarray:
    """The bit patterns of ``values`` in memory, as unsigned integers."""
    stored = contiguous(to_storage(values, t))
    return stored.view(f"u{stored.dtype.itemsize}")


@impl("tl.atomic_cas")
def atomic_cas(ctx, op, ptr, cmp, value):
    """Where memory holds ``cmp`` (bit for bit, as atom.cas compares) it becomes ``value``."""
    t = _pointee(op)
    mask = restrict(ctx, op, None, op.operands[0])      # one thread's atomics: its elements only
    _, lanes = _active(np.asarray(ptr, dtype=np.int64), mask)
    compares = _active_values(cmp, ptr, lanes, t)
    values = _active_values(value, ptr, lanes, t)

    def update(current, chosen):
        equal = _bits(current, t) == _bits(compares[chosen], t)
        return np.where(equal, values[chosen], current)
    return poison(ctx, op, _apply_atomically(ctx, op, "atomic_cas", ptr, mask, update), op.operands[0])


@impl("tl.debug_barrier")
def debug_barrier(ctx, op):
    """A program runs as one sequential thread of tiles here: all its accesses
    before the barrier already happened; nothing to wait for."""
    return


@impl("tlx.gdc_wait")
def gdc_wait(ctx, op):
    """Launches run one after another here: the grid waited for has already finished."""
    return


@impl("tlx.gdc_launch_dependents")
def gdc_launch_dependents(ctx, op):
    """Nothing to start early: the next launch runs after this one, as always here."""
    return
