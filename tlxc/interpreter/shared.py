"""Rules for shared-memory buffers and cp.async (``ir/ops/shared.py``).

Each ``tlx.local_alloc`` of a program owns a byte array (``SharedBuffer``:
``num`` slots of ``buffer_bytes`` each), created the first time the op runs
and reused if it runs again, as the one static allocation it is on the GPU.
An allocation with ``reuse=`` shares the bytes (``SharedBytes``) of the one
it names, grown to the largest member, and the race tracker keys the group's
accesses by those bytes.  A buffer value is a ``SharedView``: a strided
window (byte offset, shape, byte strides, element type) into one slot, so
indexing, slicing at runtime
offsets, transposing (``perm``) and reinterpreting (a byte view) move no data,
and ``local_load`` / ``local_store`` copy tiles through numpy views of the
bytes.  Elements are kept in their memory encoding (``values.to_storage``), so
a reinterpreting view sees the real bits.

Fresh shared memory holds garbage on the GPU; here every byte starts
unwritten and reading one is an error naming the element.

cp.async (``tlx.async_load``): the copy is checked against global memory when
issued, posts an ``AsyncEvent`` that lands the data (masked-off elements are
zero-filled), and records an asynchronous write of its slot with the race
tracker.  ``async_commit_group`` closes the issuing task's open group;
``async_wait_group(k)`` lands every copy of all but the newest ``k`` committed
groups and *retires* them (``races.py``: from then on the issuing task may use
the slot, and its next barrier arrive releases them to the tasks that wait
for that barrier).  Groups are per task, as they are per thread on the GPU.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.ops.tcgen05 import place_tensor_memory, tmem_columns
from ..ir.types import BarrierType, MemDescType, ScalarType
from .divergence import poison_value
from .memory_ops import _active, _check
from .registry import impl
from .scheduler import PREEMPT
from .values import as_index, from_storage, storage_dtype, to_storage


class SharedBytes:
    """The bytes behind one allocation, or behind a group of allocations that
    alias each other (``reuse=``): the group's buffers all start at byte 0,
    so a write through one buffer is seen by the others, bit for bit."""

    def __init__(self, nbytes: int):
        self.data = np.zeros(nbytes, dtype=np.uint8)
        self.written = np.zeros(nbytes, dtype=bool)
        self.aliased = False            # shared by several allocations

    def grow(self, nbytes: int) -> None:
        """Make room for a larger alias (TLX sizes the group for its largest member)."""
        extra = nbytes - self.data.size
        if extra > 0:
            self.data = np.concatenate([self.data, np.zeros(extra, dtype=np.uint8)])
            self.written = np.concatenate([self.written, np.zeros(extra, dtype=bool)])


class SharedBuffer:
    """The bytes of one ``tlx.local_alloc``: ``num`` slots of ``shape`` x ``element``
    in ``memory`` (its own, or those of the allocation it reuses)."""

    def __init__(self, name: str, shape: tuple[int, ...], element: ScalarType, num: int,
                 memory: SharedBytes | None = None, pitch: int | None = None):
        self.name = name
        self.shape = tuple(shape)
        self.element = element
        self.num = num
        self.buffer_bytes = math.prod(self.shape) * element.bytes
        # tensor memory (``pitch``: bytes per lane of the allocation group): lane-major, each
        # buffer a band of 32-bit columns, so aliases of other shapes and types meet the same
        # bits the hardware would show them (``tmem_buffer``)
        self.pitch = pitch
        self.slot_bytes = self.buffer_bytes if pitch is None else self.buffer_bytes // self.shape[0]
        self.memory = memory or SharedBytes(num * self.buffer_bytes)
        self.memory.grow(num * self.buffer_bytes)
        self.cta: int | None = None     # its CTA's rank, when the kernel runs in clusters
        self.origin = None              # the tlx.local_alloc op (how a peer CTA finds its copy)
        self.storage = "smem"           # or "tmem": Blackwell's tensor memory (same model, own namespace)

    @property
    def data(self) -> np.ndarray:
        return self.memory.data

    @property
    def written(self) -> np.ndarray:
        return self.memory.written

    def race_key(self, slot: int):
        """Aliased buffers are one memory to the race tracker: their accesses
        share a key and are told apart by byte region (offsets into ``data``)."""
        return (self.memory, "bytes") if self.memory.aliased else (self, slot)

    def view(self, slot: int) -> SharedView:
        strides = _row_major(self.shape, self.element.bytes)
        if self.pitch is not None:
            strides = (self.pitch,) + strides[1:]
        where = " (tensor memory)" if self.storage == "tmem" else ""
        where += "" if self.cta is None else f" of CTA {self.cta}"
        return SharedView(self, slot, slot * self.slot_bytes, self.shape, strides, self.element,
                          f"'{self.name}'[{slot}]{where}")

    def __repr__(self) -> str:
        return f"<SharedBuffer '{self.name}' {self.num} x {list(self.shape)} {self.element}>"


def _row_major(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


class ByteRegion:
    """The bytes of a slot a view covers, for race checks (``overlaps``)."""

    __slots__ = ("_bytes", "box", "dense", "hi", "lo", "view")

    def __init__(self, view: SharedView):
        self.view = view
        self.lo = view.offset
        self.hi = view.offset + view.span
        self.dense = view.dense
        self._bytes = None
        self.box = _box(view)

    def _boxes(self, other: ByteRegion):
        if self.box is not None and other.box is not None and self.box[0] == other.box[0]:
            return self.box[1:], other.box[1:]
        return None

    def bytes(self) -> np.ndarray:
        if self._bytes is None:
            self._bytes = np.unique(self.view.byte_offsets())
        return self._bytes

    def covers(self, other: ByteRegion) -> bool:
        """Whether every byte of ``other`` is one of this region's."""
        if self.dense:
            return self.lo <= other.lo and other.hi <= self.hi
        boxes = self._boxes(other)
        if boxes is not None:
            (r0, r1, c0, c1), (s0, s1, d0, d1) = boxes
            return r0 <= s0 and s1 <= r1 and c0 <= d0 and d1 <= c1
        return bool(np.isin(other.bytes(), self.bytes(), assume_unique=True).all())

    def overlaps(self, other: ByteRegion) -> bool:
        if self.hi <= other.lo or other.hi <= self.lo:
            return False
        if self.dense and other.dense:
            return True
        boxes = self._boxes(other)
        if boxes is not None:
            (r0, r1, c0, c1), (s0, s1, d0, d1) = boxes
            return r0 < s1 and s0 < r1 and c0 < d1 and d0 < c1
        return bool(np.intersect1d(self.bytes(), other.bytes(), assume_unique=True).size)


def _box(view: SharedView):
    """(pitch, first row, end row, first byte, end byte) of a 2-D view whose rows are
    contiguous runs of one ``pitch``-byte line each (a tensor-memory band of columns, a
    slice of a row-major buffer), or None: two such regions overlap where their row and
    byte ranges both do, no byte lists needed."""
    if len(view.shape) != 2 or view.strides[1] != view.element.bytes:
        return None
    pitch, width = view.strides[0], view.shape[1] * view.element.bytes
    if pitch < width or pitch <= 0:
        return None
    first = view.offset % pitch
    if first + width > pitch:
        return None
    row = view.offset // pitch
    return pitch, row, row + view.shape[0], first, first + width


class SharedView:
    """One buffer (or a part of one): ``shape`` elements at byte ``offset`` of
    ``buffer.data`` with byte ``strides``, inside slot ``slot``."""

    __slots__ = ("_region", "buffer", "element", "label", "offset", "shape", "slot", "strides")

    def __init__(self, buffer: SharedBuffer, slot: int, offset: int, shape, strides, element: ScalarType,
                 label: str):
        self.buffer = buffer
        self.slot = slot
        self.offset = offset
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.element = element
        self.label = label
        self._region = None

    @property
    def key(self):
        """The race tracker's slot key."""
        return self.buffer.race_key(self.slot)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.element.bytes

    @property
    def span(self) -> int:
        """Bytes from the first to one past the last byte the view touches."""
        if not self.nbytes:
            return 0
        return sum((n - 1) * s for n, s in zip(self.shape, self.strides)) + self.element.bytes

    @property
    def dense(self) -> bool:
        """Whether the view covers exactly ``[offset, offset + nbytes)``."""
        return self.span == self.nbytes

    def array(self) -> np.ndarray:
        """A writable numpy view of the elements (storage encoding)."""
        return np.ndarray(self.shape, dtype=storage_dtype(self.element), buffer=self.buffer.data,
                          offset=self.offset, strides=self.strides)

    def element_offsets(self) -> np.ndarray:
        """Byte offset of each element, in the view's shape."""
        offsets = np.full(self.shape, self.offset, dtype=np.int64)
        for axis, (n, stride) in enumerate(zip(self.shape, self.strides)):
            index = [1] * len(self.shape)
            index[axis] = n
            offsets = offsets + (np.arange(n, dtype=np.int64) * stride).reshape(index)
        return offsets

    def byte_offsets(self) -> np.ndarray:
        """Every byte of every element: shape ``self.shape + (itemsize,)``."""
        return self.element_offsets()[..., None] + np.arange(self.element.bytes, dtype=np.int64)

    def region(self) -> ByteRegion:
        if self._region is None:
            self._region = ByteRegion(self)
        return self._region

    def mark_written(self) -> None:
        if self.dense:
            self.buffer.written[self.offset:self.offset + self.nbytes] = True
        else:
            self.buffer.written[self.byte_offsets()] = True

    def unwritten_index(self) -> tuple[int, ...] | None:
        """The first element with a byte nothing has written, or None."""
        if self.dense and self.buffer.written[self.offset:self.offset + self.nbytes].all():
            return None
        complete = self.buffer.written[self.byte_offsets()].all(axis=-1)
        if complete.all():
            return None
        return tuple(int(i) for i in np.unravel_index(int(np.argmin(complete)), self.shape))

    def __repr__(self) -> str:
        return f"<SharedView {self.label} {list(self.shape)} {self.element}>"


# -- allocation and views --------------------------------------------------------------------
def _reused_memory(ctx, first: SharedBuffer | None) -> SharedBytes | None:
    """``reuse=``: the bytes of the allocation ``first`` this one aliases (None:
    its own).  From now on the race tracker keys the group's accesses by
    memory, so the first allocation's records so far move to that key."""
    if first is None:
        return None
    memory = first.memory
    if not memory.aliased:
        memory.aliased = True
        pending = ctx.races.pending
        for key in [k for k in pending if isinstance(k, tuple) and k and k[0] is first]:
            for access in pending.pop(key):
                access.slot = first.race_key(0)
                pending.setdefault(access.slot, []).append(access)
    return memory


@impl("tlx.local_alloc")
def local_alloc(ctx, op, reused=None):
    t: MemDescType = op.results[0].type
    if t.storage not in ("smem", "tmem"):
        raise ctx.error(op, f"the interpreter has no {t.storage} storage (only shared and tensor memory)")
    buffers = ctx.program.state.setdefault(t.storage, {})
    buffer = buffers.get(op)
    if buffer is None:
        name = op.results[0].name_hint or t.storage
        memory = _reused_memory(ctx, reused)
        pitch = _tmem_pitch(ctx, op) if t.storage == "tmem" else None
        if pitch is not None and memory is None:
            memory = SharedBytes(t.shape[0] * pitch)
        buffer = buffers[op] = SharedBuffer(name, t.shape, t.element, t.num, memory, pitch)
        buffer.storage = t.storage
        buffer.origin = op
        if ctx.program.cluster is not None:
            buffer.cta = ctx.program.cta_rank
    return buffer


def _tmem_pitch(ctx, op) -> int:
    """Bytes per lane of the tensor-memory group ``op`` belongs to: the columns that
    ``place_tensor_memory`` gives it (the widest member's), 4 bytes each."""
    base = op.operands[0].owner if op.operands else op
    kernel = base.parent_op()
    cache = ctx.program.state.setdefault("tmem_widths", {})
    if id(kernel) not in cache:
        cache[id(kernel)] = place_tensor_memory(kernel)[1] if kernel is not None else {}
    width = cache[id(kernel)].get(id(base))
    if width is None:               # not a top-level allocation: its own columns
        width = base.results[0].type.num * tmem_columns(base.results[0].type)
    return 4 * width


@impl("tlx.local_view")
def local_view(ctx, op, source, index):
    i = as_index(index)
    if isinstance(op.operands[0].type, BarrierType):
        if not 0 <= i < len(source):
            name = op.operands[0].name_hint or source[0].name
            raise ctx.error(op, f"barrier index {i} is out of range in {ctx.label}: '{name}' is an array of "
                                f"{len(source)} barriers")
        return source[i]
    if not 0 <= i < source.num:
        raise ctx.error(op, f"buffer index {i} is out of range in {ctx.label}: '{source.name}' is an array of "
                            f"{source.num} buffers")
    return source.view(i)


@impl("tlx.local_slice")
def local_slice(ctx, op, view: SharedView, *offsets):
    shape = op.results[0].type.shape
    starts = [as_index(o) for o in offsets]
    for dim, (start, size, extent) in enumerate(zip(starts, shape, view.shape)):
        if start < 0 or start + size > extent:
            raise ctx.error(op, f"shared-memory slice out of bounds in {ctx.label}: dimension {dim} takes "
                                f"[{start}, {start + size}) of {view.label}, whose extent is {extent} "
                                f"(offsets {starts}, shape {list(shape)})")
    offset = view.offset + sum(s * stride for s, stride in zip(starts, view.strides))
    ranges = ", ".join(f"{s}:{s + n}" for s, n in zip(starts, shape))
    return SharedView(view.buffer, view.slot, offset, shape, view.strides, view.element,
                      f"{view.label}[{ranges}]")


@impl("tlx.local_trans")
def local_trans(ctx, op, view: SharedView):
    perm = tuple(op.attrs["perm"])
    return SharedView(view.buffer, view.slot, view.offset, tuple(view.shape[p] for p in perm),
                      tuple(view.strides[p] for p in perm), view.element,
                      f"{view.label}.trans({', '.join(map(str, perm))})")


@impl("tlx.local_reinterpret")
def local_reinterpret(ctx, op, view: SharedView):
    t: MemDescType = op.results[0].type
    if isinstance(view, SharedBuffer):          # a whole allocation: all its slots, one buffer
        _reused_memory(ctx, view)               # accesses now span slots: the race tracker goes by bytes
        return SharedView(view, 0, 0, t.shape, _row_major(t.shape, t.element.bytes), t.element,
                          f"'{view.name}'.reinterpret({t.element})")
    if not view.dense:
        raise ctx.error(op, f"the interpreter can only reinterpret a view whose elements are contiguous in "
                            f"shared memory; {view.label} is a strided part of its buffer")
    if view.offset % t.element.bytes:
        raise ctx.error(op, f"misaligned reinterpretation in {ctx.label}: {view.label} starts at byte "
                            f"{view.offset - view.slot * view.buffer.buffer_bytes} of its buffer, not a "
                            f"multiple of the {t.element.bytes}-byte {t.element}")
    return SharedView(view.buffer, view.slot, view.offset, t.shape, _row_major(t.shape, t.element.bytes),
                      t.element, f"{view.label}.reinterpret({t.element})")


# -- synchronous copies --------------------------------------------------------------------


@impl("tlx.local_load")
def local_load(ctx, op, view: SharedView):
    yield PREEMPT                    # another task may act between a wait and this read
    if view.buffer.storage == "tmem":
        # held until a barrier orders it: an MMA of another task writing these bytes before
        # that is a write-after-read race (a read that did not wait for the MMA it meant to see)
        ctx.races.read_held(view.key, view.label, "tensor-memory read", op.loc, ctx.task_name, view.region())
        return read_poisoned(view)
    ctx.races.read(view.key, view.label, "read", op.loc, ctx.task_name, view.region())
    return read_written(ctx, op, view, f"task '{ctx.task_name}' reads {view.label}", "return garbage")


def read_poisoned(view: SharedView) -> np.ndarray:
    """A tensor-memory tile whose never-written elements read as poison (NaN, the most
    negative integer): what TMEM holds before its first write is garbage, and TLX's kernels
    load it on purpose where the value is then discarded (the attention correction step of
    the first iteration scales the accumulator by alpha = 0 before the first P @ V MMA
    overwrites it, use_acc=False).  A result that depends on such a value comes out NaN.
    Shared memory stays strict (``read_written``)."""
    values = from_storage(np.array(view.array()), view.element)
    if view.unwritten_index() is None:
        return values
    complete = view.buffer.written[view.byte_offsets()].all(axis=-1)
    values = np.array(values, copy=True)
    values[~complete] = poison_value(view.element)
    return values


def read_written(ctx, op, view: SharedView, reader: str, consequence: str) -> np.ndarray:
    """The view's values, or an error naming the first element nothing has
    written (``reader`` and ``consequence`` complete the sentence)."""
    missing = view.unwritten_index()
    if missing is not None:
        memory = "tensor" if view.buffer.storage == "tmem" else "shared"
        raise ctx.error(op, f"read of uninitialized {memory} memory in {ctx.label}: {reader} at index {missing}, "
                            f"which nothing has written yet (the GPU would {consequence})")
    return from_storage(np.array(view.array()), view.element)


@impl("tlx.local_store")
def local_store(ctx, op, view: SharedView, value):
    ctx.races.write(view.key, view.label, "store", op.loc, ctx.task_name, view.region())
    view.array()[...] = np.broadcast_to(to_storage(value, view.element), view.shape)
    view.mark_written()
    yield PREEMPT


def _gather_index(ctx, op, view: SharedView, indices) -> np.ndarray:
    axis = op.attrs["axis"]
    index = np.asarray(indices).astype(np.int64)
    bad = (index < 0) | (index >= view.shape[axis])
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ctx.error(op, f"index {int(index[where])} at {where} is out of range in {ctx.label}: dimension {axis} of "
                            f"{view.label} has {view.shape[axis]} elements")
    return index


@impl("tlx.local_gather")
def local_gather(ctx, op, view: SharedView, indices):
    yield PREEMPT
    axis = op.attrs["axis"]
    index = _gather_index(ctx, op, view, indices)
    ctx.races.read(view.key, view.label, "gather", op.loc, ctx.task_name, view.region())
    complete = np.take_along_axis(view.buffer.written[view.byte_offsets()].all(axis=-1), index, axis)
    if not complete.all():
        where = tuple(int(i) for i in np.argwhere(~complete)[0])
        raise ctx.error(op, f"read of uninitialized shared memory in {ctx.label}: task '{ctx.task_name}' gathers "
                            f"element {int(index[where])} of dimension {axis} of {view.label} (at {where}), which "
                            f"nothing has written yet (the GPU would return garbage)")
    return from_storage(np.take_along_axis(np.array(view.array()), index, axis), view.element)


@impl("tlx.local_scatter")
def local_scatter(ctx, op, view: SharedView, values, indices):
    axis = op.attrs["axis"]
    index = _gather_index(ctx, op, view, indices)
    flat = np.take_along_axis(view.element_offsets(), index, axis)
    unique, counts = np.unique(flat, return_counts=True)
    if (counts > 1).any():
        twice = np.argwhere(flat == unique[counts > 1][0])
        raise ctx.error(op, f"tlx.local_scatter in {ctx.label} writes one element of {view.label} twice (from "
                            f"{tuple(int(i) for i in twice[0])} and {tuple(int(i) for i in twice[1])}): which value "
                            f"lands is undefined on the GPU")
    ctx.races.write(view.key, view.label, "scatter", op.loc, ctx.task_name, view.region())
    array = view.array()
    np.put_along_axis(array, index, to_storage(np.asarray(values), view.element), axis)
    written = np.take_along_axis(view.byte_offsets(), index[..., None], axis)
    view.buffer.written[written.reshape(-1)] = True
    yield PREEMPT


# -- cp.async --------------------------------------------------------------------------------


class CpAsyncGroups:
    """One task's cp.async copies: the open group and the committed ones."""

    def __init__(self):
        self.open: list = []             # [(event, access)]
        self.committed: list[list] = []  # oldest first


def _groups(ctx) -> CpAsyncGroups:
    return ctx.task_state("cp_async", CpAsyncGroups)


@impl("tlx.async_load")
def async_load(ctx, op, pointers, view: SharedView, *optional):
    mask = optional[0] if op.attrs.get("has_mask") else None
    addresses = np.asarray(pointers, dtype=np.int64)
    active, lanes = _active(addresses, mask)
    if lanes is None or lanes.any():
        _check(ctx, op, "cp.async load", addresses, active, lanes, view.element, write=False)
    access = ctx.races.begin_async_write(view.key, view.label, "cp.async copy", op.loc, ctx.task_name,
                                         view.region())
    access.retired = False
    memory, storage = ctx.memory, storage_dtype(view.element)

    def land():
        bits = np.zeros(view.shape, dtype=storage)
        if lanes is None:
            bits[...] = memory.gather(active, storage)
        elif active.size:
            bits[lanes] = memory.gather(active, storage)
        view.array()[...] = bits
        view.mark_written()

    event = ctx.scheduler.post(f"cp.async copy into {view.label}", land, op.loc)
    _groups(ctx).open.append((event, access))
    yield PREEMPT


@impl("tlx.async_commit_group")
def async_commit_group(ctx, op):
    groups = _groups(ctx)
    groups.committed.append(groups.open)
    groups.open = []


@impl("tlx.async_wait_group")
def async_wait_group(ctx, op):
    """Land and retire all but the newest ``pendings`` committed groups.  The
    wait itself makes the copies land (rather than blocking until the
    scheduler lands them) so that the issuing task runs on as far as the
    barriers allow."""
    groups = _groups(ctx)
    keep = op.attrs["pendings"]
    retiring = groups.committed[:max(len(groups.committed) - keep, 0)]
    groups.committed = groups.committed[len(retiring):]
    for group in retiring:
        for event, access in group:
            ctx.scheduler.finish(event)
            ctx.races.retire(access, op.loc)
    yield PREEMPT
