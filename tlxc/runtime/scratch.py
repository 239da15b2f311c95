"""The global scratch of a launch: kernels with in-kernel tensor maps (``tl.make_tensor_descriptor``,
``tlx.allocate_tensor_descriptor``; codegen_nvptx/rules_tensormap.py) take a hidden last parameter,
``global_scratch_bytes`` (metadata) per program, program ``p`` owning the ``p``-th stretch.

As Triton does, each launch asks the allocator ``tlxc.set_allocator`` / ``triton.set_allocator``
installed for ``size`` bytes (the per-program bytes times the grid's programs) aligned to 128, on
the launch's stream: ``alloc(size, 128, stream)`` returns a tensor (or anything with
``data_ptr()``), kept alive until the launch is issued (a stream-ordered allocator such as
torch's may reuse it for later work on that stream).  Without an allocator, a ``torch.uint8``
tensor on the kernel's device.  The address must be 128-byte aligned: an allocator that returns
less is a ``LaunchError``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import LaunchError

ALIGN = 128

_allocator: list[Callable[[int, int, Any], Any]] = []


def set_allocator(allocator: Callable[[int, int, Any], Any] | None) -> None:
    """Triton's ``set_allocator(fn(size, alignment, stream) -> tensor)``: the allocator a
    launch calls for the kernel's global scratch, where in-kernel TMA descriptors
    (``tl.make_tensor_descriptor``, ``tlx.allocate_tensor_descriptor``) encode their tensor
    maps: ``fn(bytes per program x programs, 128, stream)`` before each launch of such a
    kernel.  Without one, tlxc allocates a torch tensor itself."""
    if allocator is not None and not callable(allocator):
        raise TypeError(f"set_allocator expects a callable (size, alignment, stream) -> tensor, got {allocator!r}")
    _allocator[:] = [allocator] if allocator is not None else []


def get_allocator() -> Callable[[int, int, Any], Any] | None:
    return _allocator[0] if _allocator else None


def scratch_for(name: str, nbytes: int, stream, device: int):
    """(the allocation, its address) of ``nbytes`` of global scratch for a launch of ``name``."""
    allocator = get_allocator()
    if allocator is None:
        import torch
        buffer = torch.empty(nbytes + ALIGN, dtype=torch.uint8, device=f"cuda:{device}")
        address = buffer.data_ptr()
        return buffer, address + (-address % ALIGN)
    buffer = allocator(nbytes, ALIGN, stream)
    try:
        address = int(buffer.data_ptr())
    except AttributeError:
        raise LaunchError(f"{name}: the allocator given to set_allocator returned {type(buffer).__name__}, which has "
                          f"no data_ptr(); return a device tensor of at least the size asked for") from None
    if address % ALIGN:
        raise LaunchError(f"{name}: the allocator given to set_allocator returned address 0x{address:x}, which is "
                          f"not {ALIGN}-byte aligned (in-kernel tensor maps need {ALIGN})")
    return buffer, address


def with_global_scratch(run, name: str, per_program: int, device: int):
    """``run(grid, block, smem, stream, values)`` with the scratch's address appended to ``values``."""
    def launch(grid, block, smem, stream, values, _run=run):
        programs = grid[0] * grid[1] * grid[2]
        buffer, address = scratch_for(name, per_program * programs, stream, device)
        _run(grid, block, smem, stream, (*values, address))
        del buffer          # the launch is issued: a stream-ordered allocator may reuse it
    return launch
