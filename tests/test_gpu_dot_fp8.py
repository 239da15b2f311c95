"""tl.dot on fp8 operands on the GPU (issue 19): the tutorial's fp8 matmul (A row-major, B = w.T,
float32 accumulator, float16 result) on wgmma m64nNk32 -- e4m3, e5m2 and mixed -- against a
float64 product of the same fp8 values, with poisoned outputs, fresh data and shapes that are
not tile multiples; ``max_num_imprecise_acc``; and the GPU against the interpreter at a small
size."""
from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
import kernels_dot_fp8 as K

import tlxc

pytestmark = pytest.mark.gpu

TORCH = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def _operands(m, n, k, a_type, b_type, seed=None, positive=False):
    gen = torch.Generator().manual_seed(seed if seed is not None else int.from_bytes(os.urandom(4), "little"))
    a = torch.randn(m, k, generator=gen)
    w = torch.randn(n, k, generator=gen)
    if positive:                               # no cancellation: the accumulator grows with K
        a, w = a.abs(), w.abs()
    return a.to(TORCH[a_type]), w.to(TORCH[b_type]).t()                            # b = w.T: K-major, as the tutorial passes it


def _launch(kernel, a, b, c, bm, bn, bk, num_warps, **meta):
    m, k = a.shape
    n = b.shape[1]
    grid = ((m + bm - 1) // bm, (n + bn - 1) // bn)
    kernel[grid](a, b, c, m, n, k, *a.stride(), *b.stride(), c.stride(0), BM=bm, BN=bn, BK=bk,
                 num_warps=num_warps, **meta)


def _check(c, a, b, imprecise: float, rel_bound: float):
    """Per element, the fp16 rounding of the output plus ``imprecise`` x (|A| @ |B|): Hopper sums
    fp8 products in a reduced-precision accumulator (about 13 mantissa bits); and a norm-wise
    relative error below ``rel_bound``, which a wrong tile or K slice (an O(1) error) cannot pass."""
    c = c.cpu()
    assert not c.isnan().any(), "poisoned elements left"
    ref = a.double() @ b.double()
    magnitude = a.double().abs() @ b.double().abs()
    err = (c.double() - ref).abs()
    worst = (err - (2 * 2.0 ** -11 * ref.abs() + imprecise * magnitude)).max().item()
    assert worst <= 0, f"max error {err.max().item()} exceeds the bound by {worst}"
    rel = ((c.double() - ref).norm() / ref.norm()).item()
    assert rel < rel_bound, rel


@pytest.mark.parametrize("m, n, k", [(1000, 1000, 520), (1008, 1040, 528)])
@pytest.mark.parametrize("bn, num_warps", [(256, 8), (128, 4)])
@pytest.mark.parametrize("a_type, b_type", [("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2")])
def test_fp8_matmul_matches_torch(a_type, b_type, bn, num_warps, m, n, k):
    a, b = _operands(m, n, k, a_type, b_type)
    a, b = a.cuda(), b.cuda()
    for _ in range(2):                         # races show up intermittently
        c = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
        _launch(K.fp8_matmul, a, b, c, 128, bn, 128, num_warps)
        torch.cuda.synchronize()
        _check(c, a.cpu(), b.cpu(), 2.0 ** -7, 1e-2)


@pytest.mark.parametrize("limit", [0, 32, 64])
def test_max_num_imprecise_acc_is_as_precise_as_asked(limit):
    """Positive inputs (the accumulator grows with K = 4096, where a reduced-precision sum loses
    the most): each run of max(32, limit) products is summed imprecisely and added in float32,
    so the relative error is bounded by one run's, about run x 2^-13, not by K's."""
    m, n, k = 1008, 520, 4096
    a, b = _operands(m, n, k, "e4m3", "e4m3", positive=True)
    a, b = a.cuda(), b.cuda()
    c = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
    _launch(K.fp8_matmul, a, b, c, 128, 128, 128, 4, IMPRECISE=limit)
    torch.cuda.synchronize()
    bound = max(32, limit) * 2.0 ** -13
    _check(c, a.cpu(), b.cpu(), bound, bound)


def test_gpu_equals_interpreter_at_a_small_size():
    m, n, k = 200, 136, 320                    # 2 x 2 programs of 128 x 128, K tail of 64
    a, b = _operands(m, n, k, "e4m3", "e5m2", seed=19)
    c_gpu = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
    _launch(K.fp8_matmul, a.cuda(), b.cuda(), c_gpu, 128, 128, 128, 4)
    torch.cuda.synchronize()
    c_cpu = torch.full((m, n), float("nan"), dtype=torch.float16)
    _launch(tlxc.interpret(K.fp8_matmul), a, b, c_cpu, 128, 128, 128, 4)
    assert not c_cpu.isnan().any() and not c_gpu.isnan().any()
    ref = a.double() @ b.double()
    # the interpreter sums in float32, the tensor cores in their fp8 accumulator: a few fp16 ulps apart
    diff = (c_gpu.cpu().double() - c_cpu.double()).abs()
    assert (diff <= 4 * 2.0 ** -11 * ref.abs() + 2.0 ** -7 * (a.double().abs() @ b.double().abs())).all()
    _check(c_cpu, a, b, 2.0 ** -22, 1e-3)
