"""Triton's host TMA API before 3.4, on tlxc's descriptors.

Triton code of that time (the fused-attention and persistent-matmul tutorials, libraries
written for Triton 3.1-3.3) fills a 128-byte ``CUtensorMap`` into a CPU buffer on the host:

    desc = torch.empty(128, dtype=torch.int8)                 # CPU
    triton.runtime.driver.active.utils.fill_2d_tma_descriptor(
        t.data_ptr(), rows, cols, block_rows, block_cols, t.element_size(), desc.data_ptr())

and passes an object with ``tma_desc_cpu_ptr()`` (returning ``desc.data_ptr()``) as the
kernel argument, which the kernel reads with ``tl._experimental_descriptor_load/store``.
``tlxc.tools.experimental_descriptor.create_1d/2d_tma_descriptor`` make such objects.

tlxc types a descriptor parameter by its element type, box and swizzle (the kernel's shared
memory layout follows from them), which a raw ``CUtensorMap`` does not say.  So a fill here
builds the ``tlxc.TensorDescriptor`` of the same geometry (the row-major ``rows x cols``
tensor at ``ptr``, box ``block_rows x block_cols``), writes into the buffer the map that
descriptor encodes (a tensor on a CUDA device) or a tlxc marker (a CPU tensor: the
interpreter reads the tensor itself, and no map can be encoded without a GPU), and records
the descriptor under the buffer's address.  A launch argument with ``tma_desc_cpu_ptr()``
becomes the recorded descriptor (``resolve``), after the launch's grid function has run (the
tutorials fill their descriptors there, once the autotuner has picked the block sizes).  Its
128 bytes must still be the ones the fill wrote: bytes from anywhere else are refused with a
``LaunchError`` naming the argument, never launched blind.

Triton 3.0 spelled the same flow differently, and tlxc takes that too: the fill's last argument
was a writable buffer (``np.empty(128, dtype=np.int8)``; a ``bytearray`` or CPU tensor works as
well), and the kernel received a device copy of those bytes (``torch.tensor(desc, device="cuda")``)
as a plain pointer.  A launch argument that is a one-dimensional int8/uint8 tensor of 128 to
1024 bytes whose first 128 are exactly the bytes of one of the recent fills (``is_copy``) becomes
that fill's descriptor (``resolve_copy``; the bytes are read back from the device, a synchronizing
copy of 128 bytes, and only while fills have been made).  Fills on CPU tensors write a marker with a serial number, so that each one's
bytes name it.  The records keep the last ``RECENT`` fills.

The element type follows ``element_size`` as Triton's fills choose it (1: uint8, 2: float16,
4: float32, 8: float64) for device memory, and is the dtype of the tensor holding ``ptr`` (of
that size) for host memory; TMA copies bits, and the kernel's
``_experimental_descriptor_load(..., dtype)`` reinterprets a same-width dtype.  A device
address is looked up with ``cuPointerGetAttribute`` and viewed without a search (a fill
costs microseconds, as it runs on every launch of the tutorials' wrappers); a host address
must lie in a live torch tensor, found once by a scan of the garbage collector's objects.
"""
from __future__ import annotations

import ctypes
import gc
import itertools
import weakref
from collections import OrderedDict
from typing import Any

from ..descriptors import TensorDescriptor
from ..errors import LaunchError

MAP_BYTES = 128
_MARKER = b"tlxc host-filled TMA descriptor of a CPU tensor (interpreter)\0"
RECENT = 4096            # fills remembered (by buffer address and by bytes); older ones are forgotten

# buffer address -> (descriptor, the 128 bytes written there); the 128 bytes -> descriptor
_FILLED: OrderedDict[int, tuple[TensorDescriptor, bytes]] = OrderedDict()
_BY_BYTES: OrderedDict[bytes, TensorDescriptor] = OrderedDict()
_SERIAL = itertools.count(1)
# tensor address -> the tensor found holding it (a weak reference: no tensor is kept alive)
_HOLDERS: dict[int, Any] = {}


def _fail(call: str, message: str) -> LaunchError:
    return LaunchError(f"{call}: {message}")


def _covers(t, address: int, nbytes: int) -> bool:
    """Whether ``t``'s storage holds the bytes; tensors without real storage (torch.compile's
    fake and functional tensors, which the scan of live objects meets) hold none."""
    if _is_traced(t):
        return False
    try:
        storage = t.untyped_storage()
        low = storage.data_ptr()
    except (RuntimeError, NotImplementedError):
        return False
    return low <= address and address + nbytes <= low + storage.nbytes()


def _is_traced(t) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor
    return isinstance(t, (FakeTensor, FunctionalTensor)) or t.device.type == "meta"


def _holder(call: str, address: int, nbytes: int, element_size: int):
    """The live torch tensor whose storage holds the ``nbytes`` at ``address`` (one whose
    elements are ``element_size`` bytes, when several do)."""
    ref = _HOLDERS.get(address)
    t = ref() if ref is not None else None
    if t is not None and _covers(t, address, nbytes):
        return t
    import torch
    found = None
    for obj in gc.get_objects():
        if issubclass(type(obj), torch.Tensor) and _covers(obj, address, nbytes):
            if obj.element_size() == element_size:
                found = obj
                break
            found = found if found is not None else obj
    if found is None:
        raise _fail(call, f"no live torch tensor holds the {nbytes} bytes at 0x{address:x} that the "
                          f"descriptor describes (pass the data_ptr() of a tensor that stays alive, "
                          f"with at least the described extent)")
    _HOLDERS[address] = weakref.ref(found)
    return found


_BY_SIZE = {1: "uint8", 2: "float16", 4: "float32", 8: "float64"}


_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, _CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, _CU_MEMORYTYPE_DEVICE = 2, 9, 2


def _device_ordinal(address: int) -> int | None:
    """The CUDA device whose memory holds ``address``; None for host memory (or no GPU)."""
    import torch
    if not torch.cuda.is_available():
        return None
    from . import driver
    lib = driver._driver()
    kind, ordinal = ctypes.c_uint(0), ctypes.c_int(-1)
    if lib.cuPointerGetAttribute(ctypes.byref(kind), _CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 ctypes.c_uint64(address)) != 0 or kind.value != _CU_MEMORYTYPE_DEVICE:
        return None
    if lib.cuPointerGetAttribute(ctypes.byref(ordinal), _CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 ctypes.c_uint64(address)) != 0:
        return None
    return ordinal.value


class _DeviceBytes:
    """``nbytes`` of device memory at ``address``, for ``torch.as_tensor`` (no copy, no ownership:
    the memory stays the caller's, as Triton's raw pointer is)."""

    def __init__(self, address: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False),
                                         "version": 3}


def _view(call: str, address: int, shape: tuple[int, ...], element_size: int):
    """A tensor viewing the row-major ``shape`` at ``address``: on a CUDA device, a view of the
    raw device memory (the address is taken on trust, as Triton takes it); in host memory, a
    view of the live tensor that holds it (the interpreter reads tensors, never raw memory)."""
    import torch
    if element_size not in _BY_SIZE:
        raise _fail(call, f"element_size must be 1, 2, 4 or 8 bytes, got {element_size}")
    for dim, size in enumerate(shape):
        if int(size) < 1:
            raise _fail(call, f"dimension {dim} of the tensor is {size}; it must be at least 1")
    count = 1
    for size in shape:
        count *= int(size)
    ordinal = _device_ordinal(address)
    if ordinal is not None:
        if address % element_size:
            raise _fail(call, f"address 0x{address:x} is not a multiple of element_size ({element_size})")
        raw = torch.as_tensor(_DeviceBytes(address, count * element_size), device=f"cuda:{ordinal}")
        return raw.view(getattr(torch, _BY_SIZE[element_size])).view(tuple(int(s) for s in shape))
    holder = _holder(call, address, count * element_size, element_size)
    dtype = holder.dtype if holder.element_size() == element_size else getattr(torch, _BY_SIZE[element_size])
    storage = holder.untyped_storage()
    offset = address - storage.data_ptr()
    if offset % element_size:
        raise _fail(call, f"address 0x{address:x} is not a multiple of element_size ({element_size}) "
                          f"past the start of its tensor's storage")
    strides = tuple(int(s) for s in _row_major(shape))
    return torch.empty(0, dtype=dtype, device=holder.device).set_(storage, offset // element_size,
                                                                   tuple(int(s) for s in shape), strides)


def _row_major(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= int(size)
    return tuple(reversed(strides))


def _buffer_address(call: str, buffer) -> int:
    """The address of the 128 writable host bytes the fill writes: an int (Triton 3.1-3.3:
    ``desc.data_ptr()``), or (Triton 3.0) a numpy array, a ``bytearray`` or a CPU tensor."""
    import numpy as np
    import torch
    if isinstance(buffer, int) and not isinstance(buffer, bool) and buffer > 0:
        return buffer
    nbytes, address = None, None
    if isinstance(buffer, np.ndarray) and buffer.flags.c_contiguous and buffer.flags.writeable:
        nbytes, address = buffer.nbytes, buffer.ctypes.data
    elif isinstance(buffer, bytearray):
        nbytes = len(buffer)
        address = ctypes.addressof((ctypes.c_char * max(nbytes, 1)).from_buffer(buffer)) if nbytes else None
    elif isinstance(buffer, torch.Tensor) and buffer.device.type == "cpu" and buffer.is_contiguous():
        nbytes, address = buffer.numel() * buffer.element_size(), buffer.data_ptr()
    if address is None or nbytes is None:
        raise _fail(call, f"the descriptor buffer must be the data_ptr() of a 128-byte CPU buffer, or (Triton "
                          f"3.0) a writable C-contiguous numpy array, bytearray or CPU tensor; got "
                          f"{type(buffer).__name__} {buffer!r:.60}")
    if nbytes < MAP_BYTES:
        raise _fail(call, f"the descriptor buffer holds {nbytes} bytes; a TMA descriptor takes {MAP_BYTES}")
    return address


def _remember(table: OrderedDict, key, value) -> None:
    table.pop(key, None)
    table[key] = value
    while len(table) > RECENT:
        table.popitem(last=False)


def _fill(call: str, address: int, shape: tuple, box: tuple, element_size: int, desc_buffer) -> None:
    desc_address = _buffer_address(call, desc_buffer)
    view = _view(call, int(address), shape, int(element_size))
    try:
        desc = TensorDescriptor(view, shape, _row_major(shape), box)
        desc.ir_type()                                     # checks the box now, not at the launch
    except LaunchError as exc:
        raise _fail(call, str(exc)) from None
    if view.is_cuda:
        blob = desc.encode()
    else:
        blob = (_MARKER + next(_SERIAL).to_bytes(8, "little")).ljust(MAP_BYTES, b"\0")
    ctypes.memmove(desc_address, blob, MAP_BYTES)
    _remember(_FILLED, desc_address, (desc, blob))
    _remember(_BY_BYTES, blob, desc)


def fill_1d_tma_descriptor(ptr: int, dim: int, block_dim: int, element_size: int, desc_ptr) -> None:
    """Triton's ``driver.active.utils.fill_1d_tma_descriptor``: the ``dim`` elements at ``ptr``,
    copied ``block_dim`` at a time (module docstring)."""
    _fill("fill_1d_tma_descriptor", ptr, (int(dim),), (int(block_dim),), element_size, desc_ptr)


def fill_2d_tma_descriptor(ptr: int, dim1: int, dim0: int, block_dim1: int, block_dim0: int,
                           element_size: int, desc_ptr) -> None:
    """Triton's ``driver.active.utils.fill_2d_tma_descriptor``: the row-major ``dim1 x dim0``
    tensor at ``ptr`` (``dim0`` contiguous), copied in ``block_dim1 x block_dim0`` boxes."""
    _fill("fill_2d_tma_descriptor", ptr, (int(dim1), int(dim0)), (int(block_dim1), int(block_dim0)),
          element_size, desc_ptr)


def is_legacy(value: Any) -> bool:
    """Whether a launch argument is a host-filled descriptor (an object with ``tma_desc_cpu_ptr``)."""
    return hasattr(value, "tma_desc_cpu_ptr") and not isinstance(value, TensorDescriptor)


def resolve(kernel: str, name: str, value: Any) -> TensorDescriptor:
    """The ``TensorDescriptor`` recorded for the buffer ``value.tma_desc_cpu_ptr()`` points to."""
    address = int(value.tma_desc_cpu_ptr())
    entry = _FILLED.get(address)
    where = f"argument '{name}' of {kernel}"
    if entry is None:
        raise LaunchError(f"{where}: the TMA descriptor at 0x{address:x} (tma_desc_cpu_ptr()) was not "
                          f"filled by tlxc's driver.active.utils.fill_1d/2d_tma_descriptor; tlxc types a "
                          f"descriptor parameter by its geometry, which raw CUtensorMap bytes do not "
                          f"carry: fill it with those functions, or pass a tlxc.TensorDescriptor")
    desc, blob = entry
    if ctypes.string_at(address, MAP_BYTES) != blob:
        # The address alone cannot tell a rewrite of a filled buffer from a new buffer that
        # took a freed filled one's memory: the message names both.
        raise LaunchError(f"{where}: the 128 bytes of the TMA descriptor at 0x{address:x} changed after "
                          f"tlxc's fill_*_tma_descriptor wrote them, or are a buffer not filled by tlxc "
                          f"at the address of a freed one; fill it again before the launch")
    return desc


COPY_MAX_BYTES = 1024     # Triton 3.0 code copies buffers of 128 bytes (its tutorial) or 512 (applied-ai)


def is_copy(value: Any) -> bool:
    """Whether a launch argument may be a Triton 3.0 copy of a fill's buffer: a contiguous int8/uint8
    tensor of 128 to ``COPY_MAX_BYTES`` bytes while fills are remembered (its first 128 bytes decide,
    in ``resolve_copy``)."""
    if not _BY_BYTES:
        return False
    import torch
    return isinstance(value, torch.Tensor) and value.dtype in (torch.int8, torch.uint8) and \
        MAP_BYTES <= value.numel() <= COPY_MAX_BYTES and value.dim() == 1 and value.is_contiguous()


def resolve_copy(value: Any) -> Any:
    """The descriptor whose fill wrote ``value``'s first 128 bytes, or ``value`` itself (a tensor of
    other bytes is an ordinary pointer argument)."""
    import torch
    data = value.detach()[:MAP_BYTES].view(torch.uint8).cpu().numpy().tobytes()
    return _BY_BYTES.get(data, value)


__all__ = ["fill_1d_tma_descriptor", "fill_2d_tma_descriptor", "is_copy", "is_legacy", "resolve", "resolve_copy"]
