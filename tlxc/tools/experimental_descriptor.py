"""``tlxc.tools.experimental_descriptor``: the host descriptor helpers of Triton 3.1-3.3
(``triton.tools.experimental_descriptor``), for code ported by changing its imports.

``create_2d_tma_descriptor(ptr, dim1, dim0, block_dim1, block_dim0, element_size)`` (and the
1-D form) returns a kernel argument that ``tl._experimental_descriptor_load/store`` read: a
128-byte CPU buffer filled by ``driver.active.utils.fill_*_tma_descriptor``
(runtime/tma_legacy.py says what a fill records), with ``tma_desc_cpu_ptr()``.  New code
should build a ``tlxc.TensorDescriptor`` instead.
"""
from __future__ import annotations

from ..runtime.tma_legacy import MAP_BYTES, fill_1d_tma_descriptor, fill_2d_tma_descriptor


class TmaDescKernelParam:
    """A filled descriptor buffer, passed to a kernel as one argument."""

    TMA_DESC_SIZE = MAP_BYTES

    def __init__(self, ptr: int, dims, block_dims, element_size: int):
        import torch
        dims, block_dims = [int(d) for d in dims], [int(b) for b in block_dims]
        if len(dims) != len(block_dims) or len(dims) not in (1, 2):
            raise ValueError(f"TmaDescKernelParam: dims {dims} and block_dims {block_dims} must both have "
                             f"1 or 2 entries")
        self.desc = torch.empty(MAP_BYTES, dtype=torch.uint8, device="cpu")
        if len(dims) == 1:
            fill_1d_tma_descriptor(ptr, dims[0], block_dims[0], element_size, self.desc.data_ptr())
        else:
            fill_2d_tma_descriptor(ptr, dims[0], dims[1], block_dims[0], block_dims[1], element_size,
                                   self.desc.data_ptr())

    def tma_desc_cpu_ptr(self) -> int:
        return self.desc.data_ptr()


def create_1d_tma_descriptor(ptr: int, dim: int, block_dim: int, element_size: int) -> TmaDescKernelParam:
    return TmaDescKernelParam(ptr, [dim], [block_dim], element_size)


def create_2d_tma_descriptor(ptr: int, dim1: int, dim0: int, block_dim1: int, block_dim0: int,
                             element_size: int) -> TmaDescKernelParam:
    return TmaDescKernelParam(ptr, [dim1, dim0], [block_dim1, block_dim0], element_size)


__all__ = ["TmaDescKernelParam", "create_1d_tma_descriptor", "create_2d_tma_descriptor"]
