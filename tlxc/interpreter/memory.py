"""A flat model of global memory for one launch.

Every pointer argument (a torch CPU tensor or a numpy array) becomes an
*allocation*: the whole storage behind it (a view's base array, a tensor's
untyped storage), so that pointer arithmetic may move anywhere inside it, as
on the GPU.  Arguments that share storage share one allocation.  Each
allocation is mapped at its own virtual base address, far from every other
one (``ALLOCATION_SPACING``), and keeps the low 12 bits of its real address,
so alignment facts (``ptr % 16``) are the real ones.

Pointer values in the interpreter are int64 virtual addresses.  Loads and
stores translate them to byte offsets and gather/scatter with numpy fancy
indexing directly on the user's memory (no copies), so writes land in the
user's tensors.  An access outside every allocation, or a misaligned one, is
an ``InterpreterError``: foreign memory is never read silently.

Integers hold *real* addresses, as on the GPU: a pointer converted to int64
is its host address (``tensor.data_ptr()`` plus the offset), and an integer
converted to a pointer (``tl.load(table + i).to(tl.pointer_type(tl.float16))``,
where the host filled ``table`` with ``t.data_ptr()`` values) is resolved
against, in order: the launch's allocations, then the storage of any *live*
CPU torch tensor (found once per launch through the garbage collector's object
list, only when an address is no argument's; mapped as a new allocation named
after the tensor).  An address inside neither (a freed tensor, a numpy array
that is not an argument, raw memory) becomes a pointer into an unmapped range
(``FOREIGN_BASE`` plus the address): converting it back gives the same integer,
and any access through it is an out-of-bounds error naming the host address.
"""
from __future__ import annotations

import ctypes
import gc
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import LaunchError
from ..ir import types as T
from ..ir.arg_types import pointee_of_array
from ..ir.types import ScalarType

ALLOCATION_SPACING = 1 << 40
PAGE = 1 << 12
# Integers that are no reachable tensor's address become pointers at FOREIGN_BASE + address:
# above every allocation's virtual range (2**22 allocations of < 1 TiB fit below it), and
# host addresses (< 2**47 on every 64-bit OS) fit below 2**62 after it.
FOREIGN_BASE = 1 << 62

try:  # numpy >= 2
    from numpy.lib.array_utils import byte_bounds as _byte_bounds
except ImportError:  # pragma: no cover - numpy 1.x
    _byte_bounds = np.byte_bounds

def _torch_types() -> dict:
    import torch
    table = {torch.bool: T.i1, torch.int8: T.i8, torch.int16: T.i16, torch.int32: T.i32,
             torch.int64: T.i64, torch.uint8: T.u8, torch.float16: T.f16, torch.bfloat16: T.bf16,
             torch.float32: T.f32, torch.float64: T.f64}
    for name, ir in (("uint16", T.u16), ("uint32", T.u32), ("uint64", T.u64),
                     ("float8_e4m3fn", T.f8e4m3), ("float8_e5m2", T.f8e5m2)):
        if hasattr(torch, name):
            table[getattr(torch, name)] = ir
    return table


def is_torch_tensor(obj: Any) -> bool:
    cls = type(obj)
    return cls.__module__.startswith("torch") and hasattr(obj, "untyped_storage")


def is_array_argument(obj: Any) -> bool:
    """Whether ``obj`` is passed to a kernel as a pointer (tensor or array)."""
    return isinstance(obj, np.ndarray) or is_torch_tensor(obj)


def element_type_of(obj: Any) -> ScalarType:
    """The IR element type of a torch tensor or numpy array argument."""
    if isinstance(obj, np.ndarray):
        return pointee_of_array(obj)
    t = _torch_types().get(obj.dtype)
    if t is None:
        raise LaunchError(f"torch tensors of dtype {obj.dtype} cannot be passed to a kernel")
    return t


def _extent(obj: Any, name: str) -> tuple[int, int, int, bool]:
    """(low, high, data_ptr, writeable) in real host addresses."""
    if isinstance(obj, np.ndarray):
        owner = obj
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        low, high = _byte_bounds(owner)
        data = obj.__array_interface__["data"][0]
        return low, high, data, bool(obj.flags.writeable)
    if obj.device.type != "cpu":
        raise LaunchError(f"argument '{name}' is on {obj.device}; the interpreter runs on CPU tensors "
                          f"(move it with .cpu() or launch on the GPU)")
    storage = obj.untyped_storage()
    low = storage.data_ptr()
    return low, low + storage.nbytes(), obj.data_ptr(), True


@dataclass
class Allocation:
    """One contiguous range of user memory, mapped at ``base`` (virtual)."""

    names: list[str]
    base: int                     # virtual address of the first byte
    nbytes: int
    host: int                     # real address of the first byte
    writeable: bool
    keepalive: list = field(default_factory=list)
    arg_offsets: dict[str, int] = field(default_factory=dict)   # name -> byte offset of its pointer
    arg_types: dict[str, ScalarType] = field(default_factory=dict)
    _bytes: np.ndarray | None = None
    _views: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.names[0]

    @property
    def end(self) -> int:
        return self.base + self.nbytes

    def bytes(self) -> np.ndarray:
        if self._bytes is None:
            if self.nbytes == 0:
                self._bytes = np.zeros(0, dtype=np.uint8)
            else:
                buffer = (ctypes.c_uint8 * self.nbytes).from_address(self.host)
                self._bytes = np.frombuffer(buffer, dtype=np.uint8)
        return self._bytes

    def view(self, dtype: np.dtype) -> np.ndarray:
        """The allocation as a flat array of ``dtype`` (elements from its first byte)."""
        view = self._views.get(dtype)
        if view is None:
            usable = self.nbytes - self.nbytes % dtype.itemsize
            view = self.bytes()[:usable].view(dtype)
            self._views[dtype] = view
        return view


class GlobalMemory:
    """The allocations of one launch and the address translation over them."""

    def __init__(self):
        self.allocations: list[Allocation] = []     # in order of virtual base
        self._starts = np.zeros(0, dtype=np.int64)
        self._next_base = ALLOCATION_SPACING
        self._live: list[tuple[int, int, Any]] | None = None   # (low, high, tensor): see _live_storages
        self.tensormaps: dict[int, Any] = {}     # address -> the in-kernel descriptor encoded there

    def add_argument(self, name: str, obj: Any) -> None:
        """Map the storage of ``obj``, merging it with any overlapping one.
        Addresses are final once every argument is added: see ``pointer_of``."""
        low, high, data, writeable = _extent(obj, name)
        merged = [a for a in self.allocations if a.host < high and low < a.host + a.nbytes]
        if merged:
            low = min([low] + [a.host for a in merged])
            high = max([high] + [a.host + a.nbytes for a in merged])
        alloc = Allocation([], 0, high - low, low, writeable)
        for old in merged:
            self.allocations.remove(old)
            alloc.names += old.names
            alloc.keepalive += old.keepalive
            alloc.writeable = alloc.writeable and old.writeable
            for arg, offset in old.arg_offsets.items():
                alloc.arg_offsets[arg] = offset + old.host - low
            alloc.arg_types.update(old.arg_types)
        alloc.names.append(name)
        alloc.keepalive.append(obj)
        alloc.arg_offsets[name] = data - low
        alloc.arg_types[name] = element_type_of(obj)
        self.allocations.append(alloc)
        self.allocations.sort(key=lambda a: a.host)
        self._renumber()

    def add_scratch(self, name: str, nbytes: int, align: int) -> int:
        """A zeroed global allocation of ``nbytes`` made during the launch (the kernel's own
        scratch: ``tlx.allocate_tensor_descriptor``), aligned to ``align``; its address."""
        raw = np.zeros(nbytes + align, dtype=np.uint8)
        skip = -raw.ctypes.data % align
        alloc = Allocation([name], 0, nbytes, raw.ctypes.data + skip, True, keepalive=[raw])
        self._append(alloc)
        return alloc.base          # aligned as the host address is (mappings keep its low 12 bits)

    def _renumber(self) -> None:
        base = ALLOCATION_SPACING
        for alloc in self.allocations:
            alloc.base = base + alloc.host % PAGE
            base += ALLOCATION_SPACING * (1 + alloc.nbytes // ALLOCATION_SPACING)
        self._next_base = base
        self._starts = np.array([a.base for a in self.allocations], dtype=np.int64)

    def _append(self, alloc: Allocation) -> None:
        """Map ``alloc`` after every existing allocation, during the launch: pointers
        already computed keep their meaning (``_renumber`` would move them)."""
        alloc.base = self._next_base + alloc.host % PAGE
        self._next_base += ALLOCATION_SPACING * (1 + alloc.nbytes // ALLOCATION_SPACING)
        self.allocations.append(alloc)
        self._starts = np.append(self._starts, np.int64(alloc.base))

    # -- integers <-> pointers -------------------------------------------------------
    def to_integer(self, pointers) -> np.ndarray:
        """The real host addresses of virtual ``pointers`` (``ptr.to(tl.int64)``).
        A pointer outside every allocation is taken relative to the nearest one."""
        v = np.asarray(pointers, dtype=np.int64)
        real = np.where(v >= FOREIGN_BASE, v - FOREIGN_BASE, v)
        if self.allocations:
            index = self._nearest_index(v)
            hosts = np.array([a.host for a in self.allocations], dtype=np.int64)
            real = np.where((v >= FOREIGN_BASE) | (v < 0), real, hosts[index] + (v - self._starts[index]))
        return real

    def _nearest_index(self, v: np.ndarray) -> np.ndarray:
        """Index of the allocation nearest each virtual address (by distance to its bytes)."""
        ends = np.array([a.end for a in self.allocations], dtype=np.int64)
        below = np.clip(np.searchsorted(self._starts, v, side="right") - 1, 0, len(self.allocations) - 1)
        above = np.minimum(below + 1, len(self.allocations) - 1)
        d_below = np.maximum(v - (ends[below] - 1), 0)
        d_above = np.maximum(self._starts[above] - v, 0)
        return np.where(d_above < d_below, above, below)

    def to_pointer(self, integers) -> np.ndarray:
        """Virtual pointers for real host addresses (``tl.load(table + i).to(tl.pointer_type(...))``):
        inside an allocation, or a live torch tensor's storage (mapped now), else foreign."""
        r = np.asarray(integers).astype(np.int64)
        virtual, found = self._translate(r)
        if not found.all() and self._map_live(np.unique(r[~found])):
            virtual, found = self._translate(r)
        foreign = (r >= 0) & (r < FOREIGN_BASE)
        return np.where(found, virtual, np.where(foreign, FOREIGN_BASE + r, r))

    def _translate(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        virtual = np.zeros(r.shape, dtype=np.int64)
        found = np.zeros(r.shape, dtype=bool)
        for alloc in self.allocations:
            inside = ~found & (r >= alloc.host) & (r < alloc.host + alloc.nbytes)
            virtual = np.where(inside, alloc.base + (r - alloc.host), virtual)
            found |= inside
        return virtual, found

    def _map_live(self, addresses: np.ndarray) -> bool:
        """Map the storage of the live tensor holding each address, if any; whether one was."""
        mapped = False
        for address in addresses.tolist():
            if any(a.host <= address < a.host + a.nbytes for a in self.allocations):
                continue                      # mapped for an earlier address of this call
            holders = [(low, high, t) for low, high, t in self._live_storages() if low <= address < high]
            if holders:
                # name it after a tensor whose own elements hold the address (not a view beside it)
                holders.sort(key=lambda h: not _holds(h[2], address))
                self._append(_found_allocation(*holders[0]))
                mapped = True
        return mapped

    def _live_storages(self) -> list[tuple[int, int, Any]]:
        """Every live CPU torch tensor's storage range, once per launch.  Only torch
        tensors: numpy arrays are not tracked by the garbage collector."""
        if self._live is None:
            torch = sys.modules.get("torch")
            self._live = []
            if torch is not None:
                tensor_type = torch.Tensor
                for obj in gc.get_objects():
                    if issubclass(type(obj), tensor_type):
                        extent = _live_extent(obj)
                        if extent is not None:
                            self._live.append((*extent, obj))
        return self._live

    def pointer_of(self, name: str) -> int:
        for alloc in self.allocations:
            if name in alloc.arg_offsets:
                return alloc.base + alloc.arg_offsets[name]
        raise KeyError(name)

    # -- translation ---------------------------------------------------------------
    def locate(self, addresses: np.ndarray, itemsize: int) -> tuple[np.ndarray, np.ndarray]:
        """For each address: (allocation index or -1, True where the whole
        element lies inside that allocation)."""
        index = np.searchsorted(self._starts, addresses, side="right") - 1
        if not self.allocations:
            return index, np.zeros(addresses.shape, dtype=bool)
        safe = np.maximum(index, 0)
        ends = np.array([a.end for a in self.allocations], dtype=np.int64)
        inside = (index >= 0) & (addresses >= self._starts[safe]) & (addresses + itemsize <= ends[safe])
        return np.where(inside, index, -1), inside

    def nearest(self, address: int) -> Allocation | None:
        if address >= FOREIGN_BASE:
            return None
        best, distance = None, None
        for alloc in self.allocations:
            d = 0 if alloc.base <= address < alloc.end else min(abs(address - alloc.base),
                                                                  abs(address - (alloc.end - 1)))
            if distance is None or d < distance:
                best, distance = alloc, d
        return best

    def describe_address(self, address: int, element: ScalarType) -> str:
        """``element 1024 of x_ptr's allocation of 1000 elements`` (or bytes)."""
        if address >= FOREIGN_BASE:
            return (f"host address 0x{address - FOREIGN_BASE:x}, converted from an integer, which is inside "
                    f"no tensor the launch reaches (its pointer arguments, the storage of a live CPU torch "
                    f"tensor)")
        alloc = self.nearest(address)
        if alloc is None:
            return f"address 0x{address:x} (the launch has no allocations)"
        size = element.bytes if isinstance(element, ScalarType) else 8
        name = alloc.name
        origin = alloc.base + alloc.arg_offsets[name]
        rel = address - origin
        if rel % size == 0 and alloc.nbytes % size == 0:
            start = (alloc.base - origin) // size
            count = alloc.nbytes // size
            where = f"element {rel // size} of {name}'s allocation of {count} elements"
            if start != 0:
                where += f" (elements {start} to {start + count - 1} relative to {name})"
            return where
        return f"byte {rel} of {name}'s allocation of {alloc.nbytes} bytes"

    # -- access ------------------------------------------------------------------
    def gather(self, addresses: np.ndarray, storage: np.dtype) -> np.ndarray:
        """Elements at validated ``addresses`` (see ``check``), as storage dtype."""
        out = np.empty(addresses.shape, dtype=storage)
        if addresses.size == 0:
            return out
        for index, alloc in self._groups(addresses):
            selected = addresses if index is None else addresses[index]
            values = alloc.view(storage)[(selected - alloc.base) // storage.itemsize]
            if index is None:
                return values.reshape(addresses.shape)
            out[index] = values
        return out

    def scatter(self, addresses: np.ndarray, values: np.ndarray, storage: np.dtype) -> None:
        values = np.broadcast_to(values, addresses.shape)
        for index, alloc in self._groups(addresses):
            view = alloc.view(storage)
            if index is None:
                view[(addresses - alloc.base) // storage.itemsize] = values
            else:
                view[(addresses[index] - alloc.base) // storage.itemsize] = values[index]

    def _groups(self, addresses: np.ndarray):
        """Yield (selector or None for all, allocation) covering ``addresses``."""
        lo = int(addresses.min())
        first = int(np.searchsorted(self._starts, lo, side="right")) - 1
        alloc = self.allocations[first]
        if int(addresses.max()) < alloc.end:
            yield None, alloc
            return
        index, _ = self.locate(addresses, 1)
        for i in np.unique(index):
            yield index == i, self.allocations[int(i)]

    def _within_one(self, addresses: np.ndarray, itemsize: int, write: bool) -> bool:
        """The common case, cheaply: all addresses aligned inside one allocation."""
        lo, hi = int(addresses.min()), int(addresses.max())
        first = int(np.searchsorted(self._starts, lo, side="right")) - 1
        if first < 0:
            return False
        alloc = self.allocations[first]
        if lo < alloc.base or hi + itemsize > alloc.end or (write and not alloc.writeable):
            return False
        return itemsize == 1 or not np.any(addresses % itemsize)

    def check(self, addresses: np.ndarray, itemsize: int, write: bool) -> tuple[str, int] | None:
        """None if every address is a valid, aligned element; else
        (problem, flat index of the first offending address)."""
        if addresses.size == 0:
            return None
        if self._within_one(addresses, itemsize, write):
            return None
        flat = addresses.reshape(-1)
        index, inside = self.locate(flat, itemsize)
        bad = ~inside
        if bad.any():
            return "out-of-bounds", int(np.argmax(bad))
        misaligned = flat % itemsize != 0
        if misaligned.any():
            return "misaligned", int(np.argmax(misaligned))
        if write:
            readonly = np.array([not a.writeable for a in self.allocations])[index]
            if readonly.any():
                return "read-only", int(np.argmax(readonly))
        return None


def _live_extent(tensor: Any) -> tuple[int, int] | None:
    """(low, high) host range of a live tensor's storage; None where it has none we may read
    (another device, sparse, meta or fake tensors)."""
    try:
        if tensor.device.type != "cpu" or str(tensor.layout) != "torch.strided":
            return None
        storage = tensor.untyped_storage()
        low = storage.data_ptr()
        return (low, low + storage.nbytes()) if low else None
    except Exception:  # noqa: BLE001 - any tensor without readable storage is simply not mappable
        return None


def _holds(tensor: Any, address: int) -> bool:
    start = tensor.data_ptr()
    return start <= address < start + tensor.numel() * tensor.element_size()


def _found_allocation(low: int, high: int, tensor: Any) -> Allocation:
    """An allocation for a live tensor's storage, named after the tensor (no argument name)."""
    dtype = str(tensor.dtype).removeprefix("torch.")
    name = f"the {dtype}{list(tensor.shape)} tensor at 0x{tensor.data_ptr():x}"
    alloc = Allocation([name], 0, high - low, low, True, keepalive=[tensor])
    alloc.arg_offsets[name] = tensor.data_ptr() - low
    try:
        alloc.arg_types[name] = element_type_of(tensor)
    except LaunchError:
        pass
    return alloc
