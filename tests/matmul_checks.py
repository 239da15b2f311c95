"""Operands and fp8 checks the tlxc.ops.matmul test files share."""
from __future__ import annotations

import torch

from tlxc.ops import matmul


def operands(M, N, K, *, a_mmajor=False, b_kmajor=False, seed=0, device="cpu"):
    """bf16 ``a`` [M, K] and ``b`` [K, N] from a seeded generator: A M-major (``a.t()`` of a
    row-major [K, M]) or K-major, B K-major (``w.t()``) or N-major, on ``device``."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    b = torch.randn(K, N, generator=g).to(torch.bfloat16)
    if a_mmajor:
        a = a.t().contiguous().t()
    if b_kmajor:
        b = b.t().contiguous().t()
    return a.to(device), b.to(device)


def fp8_scaled_error(config, M, N, K, seed):
    """The relative error of an fp8 e4m3 product with row-wise scales of A and a tensor scale of B
    through ``config``, into a NaN-poisoned bf16 output, against float64 math."""
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(M, K, generator=g) * 8).to(torch.float8_e4m3fn)
    w = (torch.randn(N, K, generator=g) * 8).to(torch.float8_e4m3fn)
    scale_a = torch.rand(M, generator=g) + 0.5
    scale_b = torch.tensor([0.01])
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    matmul(a, w.t(), out, scale_a=scale_a, scale_b=scale_b, config=config)
    ref = (a.double() @ w.double().t()) * scale_a.double()[:, None] * 0.01
    assert torch.isfinite(out).all(), "poison left in the output"
    return ((out.double() - ref).norm() / ref.norm()).item()
