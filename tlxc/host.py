"""Host-side helpers Triton code calls as ``triton.cdiv``, ``triton.next_power_of_2``
and ``triton.set_allocator``."""
from __future__ import annotations


def cdiv(x: int, y: int) -> int:
    """``ceil(x / y)`` for positive ints: the number of blocks of ``y`` covering ``x``."""
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for n <= 1)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


# set_allocator / get_allocator live with the launch that calls the allocator (runtime/scratch.py)
from .runtime.scratch import get_allocator, set_allocator  # noqa: E402

__all__ = ["cdiv", "get_allocator", "next_power_of_2", "set_allocator"]
