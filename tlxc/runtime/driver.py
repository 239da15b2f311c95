"""The CUDA driver layer: load cubins, look up kernels, launch them fast.

Why ctypes and not ``cuda.bindings.driver``: a ``cuLaunchKernel`` through
cuda.bindings costs about 7.7 us of host time on an H200 machine (it wraps
every argument in Python objects), while tlxc's budget for a whole launch is
4 us.  So the driver library is opened with ctypes, the prototypes are set once,
and a ``Launcher`` pre-allocates the kernel's argument storage and launch
config: a launch packs the argument values with one ``struct.pack_into``, the
shape with another, and makes one four-argument foreign call.

Nothing here touches the driver at import time: a machine without a GPU or
without ``libcuda.so.1`` imports this module fine and gets a ``CudaError`` at
the first call that needs the driver.

Contexts: every device is used through its primary context, the one PyTorch
uses too.  Cold-path calls (module loads, attribute queries) push that context
for their duration, so they work on any thread.  Launches use whatever context
is current on the calling thread, as PyTorch's own launches do; if the thread
has none yet, the function's primary context is made current and the launch is
retried once.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tlxc.errors import CudaError, LaunchError

# --------------------------------------------------------------------------
# Constants from cuda.h (stable ABI values)

CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_CONTEXT = 201
CUDA_ERROR_NO_BINARY_FOR_GPU = 209

CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2
CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3
CU_FUNC_ATTRIBUTE_NUM_REGS = 4
CU_FUNC_ATTRIBUTE_PTX_VERSION = 5
CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14

CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81
CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97

CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6

_DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024

_LAUNCH_HINTS = {
    1: "a grid, block or shared-memory size is out of range for this kernel or device",
    400: "the function's context is not current on this thread (wrong device?)",
    701: "the block needs more registers or threads than an SM offers",
    719: "an earlier kernel on this context faulted; the context is unusable",
}


# --------------------------------------------------------------------------
# ctypes mirrors of the launch structs


class _ClusterDim(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class _LaunchAttributeValue(ctypes.Union):
    # The C union is 64 bytes and 8-aligned (one member holds a pointer).
    _fields_ = [("pad", ctypes.c_char * 64), ("clusterDim", _ClusterDim),
                ("programmaticStreamSerializationAllowed", ctypes.c_int), ("_align", ctypes.c_void_p)]


class CUlaunchAttribute(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("value", _LaunchAttributeValue)]


class CUlaunchConfig(ctypes.Structure):
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(CUlaunchAttribute)), ("numAttrs", ctypes.c_uint)]


# The launch-dependent head of CUlaunchConfig (grid, block, smem, stream): what a bad
# launch shape is checked against.
_CONFIG_HEAD = struct.Struct("<7I4xQ")
assert CUlaunchConfig.hStream.offset == _CONFIG_HEAD.size - 8
# The whole CUlaunchConfig (the head, the attributes pointer and count), as Launcher packs
# it with the arguments, in the _CONFIG_SPAN bytes before them.
_CONFIG = "7I4xQQI4x"
_CONFIG_SIZE = struct.calcsize("<" + _CONFIG)
_CONFIG_SPAN = 64
assert _CONFIG_SIZE == ctypes.sizeof(CUlaunchConfig) <= _CONFIG_SPAN
assert CUlaunchConfig.attrs.offset == 40 and CUlaunchConfig.numAttrs.offset == 48
assert ctypes.sizeof(CUlaunchAttribute) == 72


# --------------------------------------------------------------------------
# The driver library

_VOIDP, _UINT, _INT = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
_PVOIDP = ctypes.POINTER(ctypes.c_void_p)

# name -> argtypes; every function returns CUresult (int).  The _v2 names are
# the symbols cuda.h's macros map the plain names to.
_PROTOTYPES: dict[str, list[Any]] = {
    "cuInit": [_UINT],
    "cuDriverGetVersion": [ctypes.POINTER(_INT)],
    "cuGetErrorName": [_INT, ctypes.POINTER(ctypes.c_char_p)],
    "cuDeviceGet": [ctypes.POINTER(_INT), _INT],
    "cuDeviceGetCount": [ctypes.POINTER(_INT)],
    "cuDeviceGetName": [ctypes.c_char_p, _INT, _INT],
    "cuDeviceGetAttribute": [ctypes.POINTER(_INT), _INT, _INT],
    "cuDevicePrimaryCtxRetain": [_PVOIDP, _INT],
    "cuCtxGetCurrent": [_PVOIDP],
    "cuCtxSetCurrent": [_VOIDP],
    "cuCtxPushCurrent_v2": [_VOIDP],
    "cuCtxPopCurrent_v2": [_PVOIDP],
    "cuModuleLoadData": [_PVOIDP, ctypes.c_char_p],
    "cuModuleUnload": [_VOIDP],
    "cuModuleGetFunction": [_PVOIDP, _VOIDP, ctypes.c_char_p],
    "cuFuncGetAttribute": [ctypes.POINTER(_INT), _INT, _VOIDP],
    "cuFuncSetAttribute": [_VOIDP, _INT, _INT],
    # Hot path: function, grid xyz, block xyz, smem, stream, params, extra.
    "cuLaunchKernel": [_VOIDP, _UINT, _UINT, _UINT, _UINT, _UINT, _UINT, _UINT,
                       _VOIDP, _VOIDP, _VOIDP],
    # config*, function, params, extra.
    "cuLaunchKernelEx": [_VOIDP, _VOIDP, _VOIDP, _VOIDP],
}

_driver_lib: ctypes.CDLL | None = None


def _driver() -> ctypes.CDLL:
    """The initialized driver library, loaded on first use."""
    global _driver_lib
    if _driver_lib is None:
        _driver_lib = _load_driver()
    return _driver_lib


def _load_driver() -> ctypes.CDLL:
    errors = []
    for name in ("libcuda.so.1", ctypes.util.find_library("cuda")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError as exc:
            errors.append(str(exc))
    else:
        raise CudaError(f"no CUDA driver found: could not load libcuda.so.1 ({'; '.join(errors)})")
    for fn_name, argtypes in _PROTOTYPES.items():
        try:
            fn = getattr(lib, fn_name)
        except AttributeError as exc:
            raise CudaError(f"no CUDA driver found: libcuda lacks {fn_name} "
                            "(the driver is older than CUDA 12)") from exc
        fn.argtypes = argtypes
        fn.restype = _INT
    _check(lib.cuInit(0), "cuInit", lib)
    return lib


def _error_name(result: int, lib: ctypes.CDLL | None = None) -> str:
    name = ctypes.c_char_p()
    try:
        if (lib or _driver()).cuGetErrorName(result, ctypes.byref(name)) == CUDA_SUCCESS:
            return name.value.decode()
    except CudaError:
        pass
    return f"CUresult {result}"


def _check(result: int, call: str, lib: ctypes.CDLL | None = None) -> None:
    if result != CUDA_SUCCESS:
        raise CudaError(f"{call} failed: {_error_name(result, lib)} ({result})")


def driver_version() -> tuple[int, int]:
    """(major, minor) of the CUDA version the installed driver supports."""
    version = _INT()
    _check(_driver().cuDriverGetVersion(ctypes.byref(version)), "cuDriverGetVersion")
    return version.value // 1000, version.value % 1000 // 10


# --------------------------------------------------------------------------
# Devices and contexts


def current_device_index() -> int:
    """PyTorch's current CUDA device (0 when PyTorch is absent)."""
    try:
        import torch
    except ImportError:
        return 0
    if not torch.cuda.is_available():
        return 0
    return torch.cuda.current_device()


@functools.cache
def _device_handle(device_index: int) -> int:
    device = _INT()
    _check(_driver().cuDeviceGet(ctypes.byref(device), device_index),
           f"cuDeviceGet({device_index})")
    return device.value


@functools.cache
def primary_context(device_index: int) -> int:
    """The device's primary context (retained for the life of the process)."""
    context = _VOIDP()
    _check(_driver().cuDevicePrimaryCtxRetain(ctypes.byref(context), _device_handle(device_index)),
           f"cuDevicePrimaryCtxRetain(device {device_index})")
    return context.value


class _ContextPushed:
    """``with _ContextPushed(i):`` runs the body with device i's primary context current."""

    def __init__(self, device_index: int):
        self.context = primary_context(device_index)

    def __enter__(self) -> None:
        _check(_driver().cuCtxPushCurrent_v2(self.context), "cuCtxPushCurrent")

    def __exit__(self, *exc_info: object) -> None:
        popped = _VOIDP()
        _check(_driver().cuCtxPopCurrent_v2(ctypes.byref(popped)), "cuCtxPopCurrent")


@dataclass(frozen=True)
class DeviceProperties:
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    max_shared_memory_per_block_optin: int
    max_shared_memory_per_sm: int
    max_registers_per_sm: int
    l2_cache_bytes: int
    warp_size: int


@functools.cache
def device_properties(device_index: int) -> DeviceProperties:
    """The properties tlxc plans against, read once per device."""
    device = _device_handle(device_index)

    def attribute(attr: int) -> int:
        value = _INT()
        _check(_driver().cuDeviceGetAttribute(ctypes.byref(value), attr, device),
               f"cuDeviceGetAttribute({attr}, device {device_index})")
        return value.value

    name = ctypes.create_string_buffer(256)
    _check(_driver().cuDeviceGetName(name, len(name), device), "cuDeviceGetName")
    return DeviceProperties(
        name=name.value.decode(errors="replace"),
        compute_capability=(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                            attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),
        sm_count=attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        max_shared_memory_per_block_optin=attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        max_shared_memory_per_sm=attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
        max_registers_per_sm=attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR),
        l2_cache_bytes=attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
        warp_size=attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE),
    )


# --------------------------------------------------------------------------
# Streams

_raw_stream_getter: Callable[[int], int] | None = None


def stream_getter() -> Callable[[int], int]:
    """The fastest ``device_index -> current torch stream handle`` function.

    Launch paths should fetch this once and call it directly.
    """
    global _raw_stream_getter
    if _raw_stream_getter is None:
        import torch
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is None:  # older or non-CUDA PyTorch builds
            def raw(device_index: int) -> int:
                return torch.cuda.current_stream(device_index).cuda_stream
        _raw_stream_getter = raw
    return _raw_stream_getter


def current_stream_handle(device_index: int) -> int:
    """The ``CUstream`` of PyTorch's current stream on ``device_index``."""
    return stream_getter()(device_index)


# --------------------------------------------------------------------------
# Modules and functions


class CudaModule:
    """A cubin, loaded lazily into each device's primary context that uses it."""

    def __init__(self, cubin: bytes):
        self.cubin = bytes(cubin)
        self._handles: dict[int, int] = {}
        self._functions: dict[tuple[int, str], CudaFunction] = {}

    @classmethod
    def load(cls, cubin: bytes, device_index: int | None = None) -> CudaModule:
        """Load ``cubin`` on ``device_index`` (default: torch's current device) now,
        so that a cubin the device cannot run fails here rather than at launch."""
        module = cls(cubin)
        module.handle(device_index)
        return module

    def handle(self, device_index: int | None = None) -> int:
        """The ``CUmodule`` on ``device_index``, loading it on first use."""
        if device_index is None:
            device_index = current_device_index()
        handle = self._handles.get(device_index)
        if handle is None:
            handle = self._load_on(device_index)
            self._handles[device_index] = handle
        return handle

    def _load_on(self, device_index: int) -> int:
        module = _VOIDP()
        with _ContextPushed(device_index):
            result = _driver().cuModuleLoadData(ctypes.byref(module), self.cubin)
        if result == CUDA_ERROR_NO_BINARY_FOR_GPU:
            major, minor = device_properties(device_index).compute_capability
            raise CudaError(f"cuModuleLoadData failed: CUDA_ERROR_NO_BINARY_FOR_GPU: the cubin "
                            f"was not built for this device (compute capability {major}.{minor})")
        _check(result, f"cuModuleLoadData(device {device_index})")
        return module.value

    def function(self, name: str, device_index: int | None = None) -> CudaFunction:
        """The kernel ``name`` (an ``extern "C"`` name) on ``device_index``."""
        if device_index is None:
            device_index = current_device_index()
        function = self._functions.get((device_index, name))
        if function is None:
            handle = _VOIDP()
            _check(_driver().cuModuleGetFunction(ctypes.byref(handle), self.handle(device_index),
                                                 name.encode()),
                   f"cuModuleGetFunction({name!r})")
            function = CudaFunction(self, name, handle.value, device_index)
            self._functions[(device_index, name)] = function
        return function

    def unload(self) -> None:
        """Unload from every device; functions taken from it become invalid."""
        for device_index, handle in self._handles.items():
            with _ContextPushed(device_index):
                _check(_driver().cuModuleUnload(handle), "cuModuleUnload")
        self._handles.clear()
        self._functions.clear()


class CudaFunction:
    """One kernel of a loaded module on one device."""

    def __init__(self, module: CudaModule, name: str, handle: int, device_index: int):
        self.module = module  # keeps the module (and so the handle) alive
        self.name = name
        self.handle = handle
        self.device_index = device_index
        self.dynamic_smem_limit = self.attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)

    def attribute(self, attribute: int) -> int:
        value = _INT()
        with _ContextPushed(self.device_index):
            _check(_driver().cuFuncGetAttribute(ctypes.byref(value), attribute, self.handle),
                   f"cuFuncGetAttribute({attribute}) of {self.name}")
        return value.value

    def set_attribute(self, attribute: int, value: int) -> None:
        with _ContextPushed(self.device_index):
            _check(_driver().cuFuncSetAttribute(self.handle, attribute, value),
                   f"cuFuncSetAttribute({attribute}, {value}) of {self.name}")

    def attributes(self) -> dict[str, int]:
        """What the driver says the compiled kernel uses."""
        return {
            "registers": self.attribute(CU_FUNC_ATTRIBUTE_NUM_REGS),
            "shared_static": self.attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
            "local_bytes": self.attribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            "const_bytes": self.attribute(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES),
            "max_threads_per_block": self.attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            "binary_version": self.attribute(CU_FUNC_ATTRIBUTE_BINARY_VERSION),
            "max_dynamic_shared": self.dynamic_smem_limit,
        }

    def set_dynamic_smem(self, nbytes: int) -> None:
        """Allow launches with up to ``nbytes`` of dynamic shared memory.

        Above 48 KiB the driver refuses a launch until this opt-in is raised.
        """
        if nbytes <= self.dynamic_smem_limit:
            return
        static = self.attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
        device_max = device_properties(self.device_index).max_shared_memory_per_block_optin
        if static + nbytes > device_max:
            raise LaunchError(
                f"kernel {self.name} needs {static} bytes of static and {nbytes} bytes of "
                f"dynamic shared memory; the device allows {device_max} per block")
        self.set_attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)
        self.dynamic_smem_limit = nbytes

    def make_launcher(self, param_kinds: Sequence[str],
                      cluster: tuple[int, int, int] = (1, 1, 1), *,
                      classic: bool = False, pdl: bool = False) -> Launcher:
        """A launcher for this kernel's C signature (see ``PARAM_KINDS``)."""
        return Launcher(self, param_kinds, cluster, classic=classic, pdl=pdl)


# --------------------------------------------------------------------------
# Argument packing

# kind -> (struct code, size, alignment).  "bytes128" is a CUtensorMap passed
# by value as a __grid_constant__ parameter: 128 bytes, 64-byte aligned.
PARAM_KINDS: dict[str, tuple[str, int, int]] = {
    "u64": ("Q", 8, 8),
    "i64": ("q", 8, 8),
    "u32": ("I", 4, 4),
    "i32": ("i", 4, 4),
    "f32": ("f", 4, 4),
    "f64": ("d", 8, 8),
    "bytes128": ("128s", 128, 64),
}


class ArgumentBuffer:
    """Pre-allocated storage for one kernel's parameters and the ``void*[]``
    array that points into it, as ``cuLaunchKernel`` wants them.

    All parameters live in one 64-byte-aligned block, each at its natural
    alignment, so that one ``struct.pack_into`` writes a whole launch's values.
    """

    def __init__(self, param_kinds: Sequence[str], head: int = 0):
        unknown = [kind for kind in param_kinds if kind not in PARAM_KINDS]
        if unknown:
            raise LaunchError(f"Expected parameter kinds among {', '.join(PARAM_KINDS)}, "
                              f"got {', '.join(map(repr, unknown))}")
        if head % 64:
            raise ValueError(f"the head before the parameters must be a multiple of 64 bytes, got {head}")
        self.kinds = tuple(param_kinds)
        format_parts, self.offsets = [], []
        size = 0
        for kind in self.kinds:
            code, width, align = PARAM_KINDS[kind]
            padding = -size % align
            if padding:
                format_parts.append(f"{padding}x")
            self.offsets.append(size + padding)
            format_parts.append(code)
            size += padding + width
        self.size = size
        self.format = "".join(format_parts)       # without the byte-order mark: Launcher appends it to its head
        self.packer = struct.Struct("<" + self.format)
        # Over-allocate so that the block can start on a 64-byte boundary.  ``head`` bytes
        # before the parameters belong to the caller (Launcher keeps its CUlaunchConfig there,
        # so that one pack_into writes a launch's shape and arguments together).
        self.storage = ctypes.create_string_buffer(head + max(size, 1) + 64)
        self.head_offset = -ctypes.addressof(self.storage) % 64
        self.base_offset = self.head_offset + head
        base = ctypes.addressof(self.storage) + self.base_offset
        self.pointers = (ctypes.c_void_p * max(len(self.kinds), 1))(
            *[base + offset for offset in self.offsets])
        self.pointers_address = ctypes.addressof(self.pointers)
        self.blob_indices = tuple(i for i, kind in enumerate(self.kinds) if kind == "bytes128")

    def pack(self, values: Sequence[Any]) -> None:
        """Write ``values`` into the storage; LaunchError if one does not fit."""
        try:
            self.packer.pack_into(self.storage, self.base_offset, *values)
        except (struct.error, TypeError, OverflowError) as exc:
            raise self.explain(values, exc) from None
        if self.blob_indices:
            self.check_blobs(values)

    def check_blobs(self, values: Sequence[Any]) -> None:
        # struct's "128s" silently pads or truncates; a descriptor must be exact.
        for i in self.blob_indices:
            if len(values[i]) != 128:
                raise LaunchError(f"argument {i} must be a 128-byte tensor map, "
                                  f"got {len(values[i])} bytes")

    def packed_bytes(self) -> bytes:
        """The parameter block as the driver will read it (for tests and dumps)."""
        return self.storage.raw[self.base_offset:self.base_offset + self.size]

    def explain(self, values: Sequence[Any], exc: Exception) -> LaunchError:
        if len(values) != len(self.kinds):
            return LaunchError(f"the kernel takes {len(self.kinds)} arguments, got {len(values)}")
        for i, (kind, value) in enumerate(zip(self.kinds, values)):
            try:
                struct.pack("<" + PARAM_KINDS[kind][0], value)
            except (struct.error, TypeError, OverflowError) as arg_exc:
                return LaunchError(f"argument {i} ({value!r}) does not fit C kind {kind}: {arg_exc}")
        return LaunchError(f"cannot pack the kernel arguments: {exc}")


class Launcher:
    """Launches one kernel with a fixed C signature and cluster shape.

    ``launcher(grid_xyz, block_xyz, smem_bytes, stream_handle, arg_values)``, or
    faster, ``launcher.launch(...)`` with the same arguments.

    Every launch goes through ``cuLaunchKernelEx``, with a cluster-dimension
    attribute only when ``cluster != (1, 1, 1)``: its four pointer arguments
    cost about 0.3 us to pass through ctypes, against about 1.1 us for the
    eleven of ``cuLaunchKernel``.  The ``CUlaunchConfig`` lives in the same
    pre-allocated block as the parameters, just before them, so that one
    ``struct.pack_into`` (``pack_all``) writes a launch's grid, block, shared
    memory, stream and argument values together.
    ``classic=True`` uses ``cuLaunchKernel`` instead (for comparison only).

    Not thread-safe: the argument storage and launch config are shared by
    every call, so two threads launching through one Launcher at once could
    mix their arguments.  Use one Launcher per thread (they are cheap) or a
    lock around calls.
    """

    def __init__(self, function: CudaFunction, param_kinds: Sequence[str],
                 cluster: tuple[int, int, int] = (1, 1, 1), *, classic: bool = False, pdl: bool = False):
        self.function = function
        self.arguments = ArgumentBuffer(param_kinds, head=_CONFIG_SPAN)
        self.cluster = tuple(cluster)
        self.pdl = pdl     # programmatic dependent launch (launch_pdl=True): may start before the previous kernel ends
        if classic and (self.cluster != (1, 1, 1) or pdl):
            raise LaunchError("cluster and PDL launches need cuLaunchKernelEx (classic=False)")
        self.classic = classic
        self._handle = function.handle
        self._pointers_address = self.arguments.pointers_address
        lib = _driver()
        self._launch_kernel = lib.cuLaunchKernel
        self._launch_kernel_ex = lib.cuLaunchKernelEx
        self._attributes = (CUlaunchAttribute * 2)()  # referenced by the config: keep alive
        self._config = CUlaunchConfig.from_buffer(self.arguments.storage, self.arguments.head_offset)
        self._config_address = ctypes.addressof(self._config)
        self._attrs_address, self._num_attrs = self._set_attributes()
        # grid xyz, block xyz, smem, stream, attrs, numAttrs, then the parameters
        self.pack_all = struct.Struct(f"<{_CONFIG}{_CONFIG_SPAN - _CONFIG_SIZE}x{self.arguments.format}").pack_into
        self.launch = self._hot_path()

    def _set_attributes(self) -> tuple[int, int]:
        """Fill the launch attributes; (their address, their count) as the config holds them."""
        count = 0
        if self.cluster != (1, 1, 1):
            if self.cluster[0] * self.cluster[1] * self.cluster[2] > 8:
                # More than 8 CTAs per cluster is "non-portable" and needs an opt-in.
                self.function.set_attribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
            self._attributes[count].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            dims = self._attributes[count].value.clusterDim
            dims.x, dims.y, dims.z = self.cluster
            count += 1
        if self.pdl:
            # the kernel may begin while the previous one on the stream runs; its
            # griddepcontrol.wait (tl.extra.cuda.gdc_wait) waits for that one's memory
            self._attributes[count].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            self._attributes[count].value.programmaticStreamSerializationAllowed = 1
            count += 1
        return (ctypes.addressof(self._attributes) if count else 0), count

    def direct(self) -> dict[str, Any]:
        """What a caller needs to launch without ``launch``'s Python frame (the launch path's
        per-specialization fast path, runtime/launch.py): ``pack_all(storage, offset, gx, gy, gz,
        bx, by, bz, smem, stream, attrs, num_attrs, *values)``, then ``raw(config, function,
        params, None)``, which returns the CUresult; ``failed(result, grid, block, smem, stream)``
        retries or raises.  Only for cuLaunchKernelEx launchers; the dynamic shared memory must
        already be allowed (``CudaFunction.set_dynamic_smem``)."""
        if self.classic:
            raise LaunchError("direct launches need cuLaunchKernelEx (classic=False)")
        return {"pack_all": self.pack_all, "storage": self.arguments.storage,
                "offset": self.arguments.head_offset, "attrs": self._attrs_address, "num_attrs": self._num_attrs,
                "raw": self._launch_kernel_ex, "config": self._config_address, "function": self._handle,
                "params": self._pointers_address, "failed": self._launch_failed}

    def __call__(self, grid: Sequence[int], block: Sequence[int], smem_bytes: int,
                 stream: int, args: Sequence[Any]) -> None:
        """Launch; ``grid`` and ``block`` are 3-sequences, ``stream`` a CUstream handle."""
        self.launch(grid, block, smem_bytes, stream, args)

    def _hot_path(self) -> Callable[[Sequence[int], Sequence[int], int, int, Sequence[Any]], None]:
        """The launch function proper, a closure over everything it touches.

        Closure variables are read faster than instance attributes, which
        saves about 0.3 us a launch over a method; callers on a hot path bind
        ``launcher.launch`` once and call it directly.
        """
        pack_all, storage, offset = self.pack_all, self.arguments.storage, self.arguments.head_offset
        attrs, num_attrs = self._attrs_address, self._num_attrs
        explain, check_blobs = self.arguments.explain, self.arguments.check_blobs
        has_blobs = bool(self.arguments.blob_indices)
        function, launch_failed, shape_error = self.function, self._launch_failed, self._shape_error
        launch_one = self._launch_one()

        def launch(grid: Sequence[int], block: Sequence[int], smem_bytes: int, stream: int,
                   args: Sequence[Any]) -> None:
            try:
                pack_all(storage, offset, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem_bytes,
                         stream or 0, attrs, num_attrs, *args)
            except (struct.error, TypeError, IndexError, OverflowError) as exc:
                try:                    # the shape, or the arguments?
                    _CONFIG_HEAD.pack(grid[0], grid[1], grid[2], block[0], block[1], block[2], smem_bytes,
                                      stream or 0)
                except (struct.error, TypeError, IndexError, OverflowError) as shape_exc:
                    raise shape_error(grid, block, smem_bytes, stream, shape_exc) from None
                raise explain(args, exc) from None
            if has_blobs:
                check_blobs(args)
            if smem_bytes > function.dynamic_smem_limit:
                function.set_dynamic_smem(smem_bytes)
            result = launch_one()
            if result != CUDA_SUCCESS:
                launch_failed(result, grid, block, smem_bytes, stream)

        return launch

    def _launch_one(self) -> Callable[[], int]:
        """A no-argument call that launches what the config and storage hold now."""
        handle, params = self._handle, self._pointers_address
        if not self.classic:
            return functools.partial(self._launch_kernel_ex, self._config_address, handle,
                                     params, None)
        config, launch_kernel = self._config, self._launch_kernel

        def launch_classic() -> int:
            return launch_kernel(handle, config.gridDimX, config.gridDimY, config.gridDimZ,
                                 config.blockDimX, config.blockDimY, config.blockDimZ,
                                 config.sharedMemBytes, config.hStream, params, None)
        return launch_classic

    @staticmethod
    def _shape_error(grid: Sequence[int], block: Sequence[int], smem_bytes: int, stream: int,
                     exc: Exception) -> LaunchError:
        return LaunchError(f"grid {tuple(grid)}, block {tuple(block)}, smem {smem_bytes} or "
                           f"stream {stream!r} is not a valid launch shape: {exc}")

    def _launch_failed(self, result: int, grid: Sequence[int], block: Sequence[int],
                       smem_bytes: int, stream: int) -> None:
        if result == CUDA_ERROR_INVALID_CONTEXT and _no_current_context():
            # A thread that never used CUDA: adopt the function's primary
            # context (what PyTorch would do) and try once more.
            _check(_driver().cuCtxSetCurrent(primary_context(self.function.device_index)),
                   "cuCtxSetCurrent")
            result = self._launch_one()()
            if result == CUDA_SUCCESS:
                return
        call = "cuLaunchKernel" if self.classic else "cuLaunchKernelEx"
        where = (f"{call}({self.function.name}, grid={tuple(grid)}, block={tuple(block)}, "
                 f"smem={smem_bytes}, cluster={self.cluster}, stream={stream or 0:#x})")
        hint = _LAUNCH_HINTS.get(result)
        message = f"{where} failed: {_error_name(result)} ({result})"
        raise CudaError(f"{message}: {hint}" if hint else message)


def _no_current_context() -> bool:
    context = _VOIDP()
    return (_driver().cuCtxGetCurrent(ctypes.byref(context)) == CUDA_SUCCESS
            and not context.value)


# Triton code reaches host queries as ``triton.runtime.driver.active.<query>()``;
# ported code says ``tlxc.runtime.driver.active`` (runtime/driver_api.py).
from .driver_api import active  # noqa: F401
