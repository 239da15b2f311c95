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


class DeviceUtils:
    """``driver.active.utils``: ``get_device_properties(device)`` with Triton's keys."""

    @staticmethod
    def get_device_properties(device: int | None = None) -> dict[str, Any]:
        from .driver import device_properties
        if device is None:
            device = _torch().cuda.current_device()
        props = device_properties(int(device))
        return {"max_shared_mem": props.max_shared_memory_per_block_optin,
                "max_num_regs": props.max_registers_per_sm,
                "multiprocessor_count": props.sm_count,
                "warpSize": props.warp_size,
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

__all__ = ["ActiveDriver", "DeviceUtils", "GPUTarget", "active"]
