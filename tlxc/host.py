"""Host-side helpers Triton code calls as ``triton.cdiv``, ``triton.next_power_of_2``
and ``triton.set_allocator``."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any


def cdiv(x: int, y: int) -> int:
    """``ceil(x / y)`` for positive ints: the number of blocks of ``y`` covering ``x``."""
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for n <= 1)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


_allocator: list[Callable[[int, int, Any], Any]] = []


def set_allocator(allocator: Callable[[int, int, Any], Any] | None) -> None:
    """Triton's ``set_allocator(fn(size, alignment, stream) -> tensor)``: the allocator
    Triton calls for the global scratch memory of device-side TMA descriptors and
    profiling.  tlxc kernels take host-encoded descriptors and never need global
    scratch, so tlxc keeps the allocator (``get_allocator()``) but never calls it."""
    if allocator is not None and not callable(allocator):
        raise TypeError(f"set_allocator expects a callable (size, alignment, stream) -> tensor, got {allocator!r}")
    _allocator[:] = [allocator] if allocator is not None else []


def get_allocator() -> Callable[[int, int, Any], Any] | None:
    return _allocator[0] if _allocator else None


__all__ = ["cdiv", "get_allocator", "next_power_of_2", "set_allocator"]
