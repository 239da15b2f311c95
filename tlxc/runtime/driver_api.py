"""``tlxc.runtime.driver.active``: the host queries Triton code makes through
``triton.runtime.driver.active`` (which device torch should allocate on, what
the current target is, device properties).

The answers describe the machine the process runs on, never the target of an
ahead-of-time compile: on a machine without a CUDA device,
``get_active_torch_device()`` is ``torch.device("cpu")`` (launches on CPU
tensors run on the interpreter) and ``get_current_target()`` is
``GPUTarget("cpu", "interpreter", 1)``, so that a Triton tutorial's import-time
``is_cuda()`` test is False instead of failing on a CPU-only torch.
"""
from __future__ import annotations

from typing import Any, NamedTuple


class GPUTarget(NamedTuple):
    """Triton's ``GPUTarget``: backend ("cuda", or "cpu" without a GPU), arch (90 for
    sm_90, as Triton spells it) and warp size."""

    backend: str
    arch: Any
    warp_size: int


def _torch():
    import torch
    return torch


def _has_cuda() -> bool:
    torch = _torch()
    return torch.cuda.is_available() and torch.cuda.device_count() > 0


# What get_device_properties answers on a machine without a CUDA device (launches run on
# the interpreter): the GPU of tlxc's default compile target, sm_90a (an H100 SXM), so that a
# tutorial's occupancy arithmetic with ``kernel.warmup(...)``'s numbers (which describe the
# sm_90a compile) gives what it gives on that GPU.  Clock rates in kHz, bus width in bits,
# as CUDA reports them.
INTERPRETER_DEVICE_PROPERTIES: dict[str, Any] = {
    "max_shared_mem": 232448, "max_num_regs": 65536, "multiprocessor_count": 132, "warpSize": 32,
    "sm_clock_rate": 1980000, "mem_clock_rate": 2619000, "mem_bus_width": 5120,
    "name": "tlxc interpreter (describing sm_90a: NVIDIA H100 SXM)", "compute_capability": (9, 0),
    "l2_cache_bytes": 52428800,
}

# cuda.h device attributes for the keys driver.device_properties does not read.
_CLOCK_RATE, _MEMORY_CLOCK_RATE, _GLOBAL_MEMORY_BUS_WIDTH = 13, 36, 37


def _device_attribute(device_index: int, attr: int) -> int:
    import ctypes

    from . import driver
    value = ctypes.c_int()
    driver._check(driver._driver().cuDeviceGetAttribute(ctypes.byref(value), attr,
                                                       driver._device_handle(device_index)),
                  f"cuDeviceGetAttribute({attr}, device {device_index})")
    return value.value


class DeviceUtils:
    """``driver.active.utils``: ``get_device_properties(device)`` with Triton's keys, and Triton's
    pre-3.4 host TMA fills ``fill_1d_tma_descriptor`` / ``fill_2d_tma_descriptor``
    (runtime/tma_legacy.py; ``desc_ptr`` an address, or Triton 3.0's writable buffer)."""

    @staticmethod
    def fill_1d_tma_descriptor(ptr: int, dim: int, block_dim: int, element_size: int, desc_ptr) -> None:
        from .tma_legacy import fill_1d_tma_descriptor
        fill_1d_tma_descriptor(ptr, dim, block_dim, element_size, desc_ptr)

    @staticmethod
    def fill_2d_tma_descriptor(ptr: int, dim1: int, dim0: int, block_dim1: int, block_dim0: int,
                               element_size: int, desc_ptr) -> None:
        from .tma_legacy import fill_2d_tma_descriptor
        fill_2d_tma_descriptor(ptr, dim1, dim0, block_dim1, block_dim0, element_size, desc_ptr)

    @staticmethod
    def get_device_properties(device: int | None = None) -> dict[str, Any]:
        """Triton's keys (``multiprocessor_count``, ``max_shared_mem``, ``max_num_regs``,
        ``warpSize``, ``sm_clock_rate``, ``mem_clock_rate``, ``mem_bus_width``) plus ``name``,
        ``compute_capability`` and ``l2_cache_bytes``.  Without a CUDA device: a copy of
        ``INTERPRETER_DEVICE_PROPERTIES`` for any ``device`` (None, as ``torch.device("cpu").index``
        is, included)."""
        if not _has_cuda():
            return dict(INTERPRETER_DEVICE_PROPERTIES)
        from .driver import device_properties
        if device is None or int(device) < 0:
            device = _torch().cuda.current_device()
        props = device_properties(int(device))
        return {"max_shared_mem": props.max_shared_memory_per_block_optin,
                "max_num_regs": props.max_registers_per_sm,
                "multiprocessor_count": props.sm_count,
                "warpSize": props.warp_size,
                "sm_clock_rate": _device_attribute(int(device), _CLOCK_RATE),
                "mem_clock_rate": _device_attribute(int(device), _MEMORY_CLOCK_RATE),
                "mem_bus_width": _device_attribute(int(device), _GLOBAL_MEMORY_BUS_WIDTH),
                "name": props.name,
                "compute_capability": props.compute_capability,
                "l2_cache_bytes": props.l2_cache_bytes}


class ActiveDriver:
    """What ``triton.runtime.driver.active`` answers, for the machine tlxc runs on."""

    utils = DeviceUtils()

    def is_active(self) -> bool:
        return True

    def get_active_torch_device(self):
        torch = _torch()
        if _has_cuda():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def get_current_device(self) -> int:
        """torch's current CUDA device; -1 without one (``get_device_properties(-1)`` is then the
        interpreter's description)."""
        return _torch().cuda.current_device() if _has_cuda() else -1

    def set_current_device(self, device: int) -> None:
        _torch().cuda.set_device(device)

    def get_current_stream(self, device: int | None = None) -> int:
        """The raw handle of torch's current stream on ``device`` (what tlxc launches on)."""
        from .driver import stream_getter
        return stream_getter()(self.get_current_device() if device is None else device)

    def get_current_target(self) -> GPUTarget:
        if not _has_cuda():
            return GPUTarget("cpu", "interpreter", 1)
        major, minor = _torch().cuda.get_device_capability()
        return GPUTarget("cuda", major * 10 + minor, 32)

    def get_device_interface(self):
        return _torch().cuda

    def get_benchmarker(self):
        from ..testing import do_bench
        return do_bench

    def get_empty_cache_for_benchmark(self):
        torch = _torch()
        return torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int, device=self.get_active_torch_device())

    def clear_cache(self, cache) -> None:
        cache.zero_()


active = ActiveDriver()

__all__ = ["INTERPRETER_DEVICE_PROPERTIES", "ActiveDriver", "DeviceUtils", "GPUTarget", "active"]
