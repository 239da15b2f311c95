"""Axis info of ``x[:, None]``: along the new dim every element starts a run, so the
divisibility claimed there must hold for every element.  ``rows[:, None] * stride`` with a
runtime stride not known to be divisible by 16 (all that specialization records) is not
16-byte aligned from row to row: its loads must not go 16 bytes wide (they did: a misaligned
vector access on the GPU)."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.frontend.specialize import specialization_from_args


@tlxc.kernel
def strided_rows(x_ptr, y_ptr, M, N, stride_x, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    tile = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=inside)
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], tile, mask=inside)


def _args(x, y, stride):
    return {"x_ptr": x, "y_ptr": y, "M": 50, "N": 64, "stride_x": stride, "BM": 32, "BN": 64}


@pytest.mark.parametrize("stride,load", [(65, "tlx_ld_global_b32("), (66, "tlx_ld_global_b32("),
                                         (64, "tlx_ld_global_b128(")])
def test_row_stride_bounds_the_load_width(stride, load):
    x, y = torch.zeros(64 * stride), torch.zeros(64 * 64)
    cuda = compile_kernel(strided_rows, specialization_from_args(strided_rows, _args(x, y, stride)),
                          stages=("ir", "cuda")).asm["cuda"]
    assert load in cuda and "tlx_st_global_b128(" in cuda
    if stride != 64:
        assert "tlx_ld_global_b128(" not in cuda


@pytest.mark.gpu
@pytest.mark.parametrize("stride", [65, 66, 64])
def test_gpu_odd_row_stride(stride):
    x = torch.randn(50 * stride, device="cuda")
    y = torch.full((64 * 64,), 77.0, device="cuda")
    strided_rows[(2,)](**_args(x, y, stride))
    torch.testing.assert_close(y[:50 * 64].view(50, 64), x.view(50, stride)[:, :64], rtol=0, atol=0)
    assert (y[50 * 64:] == 77).all()
