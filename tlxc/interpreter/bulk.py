"""Bulk copies and prefetch hints on the interpreter (``ir/ops/bulk.py``).

A bulk copy moves ``size`` contiguous bytes, modelled as the TMA copies of
``tma.py`` are:

* ``async_bulk_load`` checks the global bytes and the size when issued (16-byte
  aligned source, a multiple of 16 bytes, no more than the buffer holds: the
  hardware's rules), then posts the copy; when it lands it writes the first
  ``size`` bytes of the buffer and completes them on the barrier
  (``complete_tx``).  Its write is an asynchronous access that only a
  ``barrier_wait`` seeing that phase complete orders (``races.py``), so reading
  the buffer before the wait is a ``RaceError``; bytes past ``size`` stay
  unwritten, and reading them is an error too.
* ``async_bulk_store`` writes global memory at once, but its read of the buffer
  stays in flight in the issuing task's bulk group, with the TMA stores', until
  ``async_descriptor_store_wait(n)`` retires it.

``prefetch`` and ``prefetch_tensormap`` are hints that change no value: they do
nothing here (a prefetch of an invalid address is harmless on the GPU too).
"""
from __future__ import annotations

import numpy as np

from ..ir.ops.bulk import BULK_ALIGN
from ..ir.types import u8
from .memory_ops import _check
from .registry import impl
from .scheduler import PREEMPT
from .shared import SharedView, read_written
from .tensormap import check_usable
from .tma import _stores_in_flight

BYTES = np.dtype(np.uint8)


def _checked_range(ctx, op, what: str, ptr, view: SharedView, size, write: bool) -> tuple[np.ndarray, SharedView]:
    """(global byte addresses, the buffer's first ``size`` bytes as a byte view) of a bulk copy,
    after the checks the hardware's rules call for."""
    nbytes, address = int(size), int(ptr)
    if nbytes <= 0 or nbytes % BULK_ALIGN or nbytes > view.nbytes:
        raise ctx.error(op, f"{what} of {nbytes} bytes in {ctx.label}: cp.async.bulk moves a positive multiple of "
                            f"{BULK_ALIGN} bytes, at most the {view.nbytes} bytes of {view.label}")
    if address % BULK_ALIGN:
        raise ctx.error(op, f"misaligned {what} in {ctx.label}: the global address is "
                            f"{ctx.memory.describe_address(address, u8)}, not a multiple of {BULK_ALIGN} bytes "
                            f"(cp.async.bulk)")
    addresses = address + np.arange(nbytes, dtype=np.int64)
    _check(ctx, op, what, addresses, addresses, None, u8, write=write)
    part = SharedView(view.buffer, view.slot, view.offset, (nbytes,), (1,), u8,
                      view.label if nbytes == view.nbytes else f"{view.label} (first {nbytes} bytes)")
    return addresses, part


@impl("tlx.async_bulk_load")
def async_bulk_load(ctx, op, ptr, view: SharedView, bar, size):
    addresses, part = _checked_range(ctx, op, "bulk load", ptr, view, size, write=False)
    access = ctx.races.begin_async_write(part.key, part.label, "bulk load", op.loc, ctx.task_name, part.region())
    memory = ctx.memory

    def land():
        part.array()[...] = memory.gather(addresses, BYTES)
        part.mark_written()
        ctx.races.signal(access, bar)        # into the phase these bytes help complete
        bar.complete_tx(len(addresses))

    ctx.scheduler.post(f"bulk load into {part.label}", land, op.loc)
    yield PREEMPT


@impl("tlx.async_bulk_store")
def async_bulk_store(ctx, op, ptr, view: SharedView, size):
    addresses, part = _checked_range(ctx, op, "bulk store", ptr, view, size, write=True)
    data = read_written(ctx, op, part, "a bulk store (tlx.async_store) reads it",
                        "copy garbage to global memory")
    access = ctx.races.begin_async_read(part.key, part.label, "bulk store", op.loc, ctx.task_name, part.region())
    access.retired = False
    access.wait_hint = ("the store still reads the buffer until tlx.async_descriptor_store_wait(n) leaves at most "
                        "n newer bulk stores pending")
    _stores_in_flight(ctx).append(access)
    ctx.memory.scatter(addresses, np.asarray(data, dtype=BYTES), BYTES)
    yield PREEMPT


@impl("tlx.prefetch")
def prefetch(ctx, op, *operands):
    """A cache hint: no value changes."""


@impl("tlx.prefetch_tensormap")
def prefetch_tensormap(ctx, op, desc):
    """A cache hint: no value changes (an in-kernel map that breaks TMA's rules is refused, as
    for a copy: interpreter/tensormap.py)."""
    check_usable(ctx, op, desc)
