"""The cp.async + wgmma pipelined GEMM (tests/kernels_pipelined.py, the pattern of TLX's
hopper_gemm_pipelined tutorial) on the GPU against the interpreter and torch: two
warpgroups share every stage, K is not a multiple of BK (masked, zero-filled copies),
M and N are not multiples of the tile.  Without the barrier after the cp.async wait, the
proxy fence, or the barrier after async_dot_wait(1) it reads stale or half-written tiles."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import kernels_pipelined as K

import tlxc

pytestmark = pytest.mark.gpu


def _launch(a, b, c, bm, bn, bk, stages, num_warps, interpret=False):
    m, k = a.shape
    n = b.shape[1]
    grid = ((m + bm - 1) // bm, (n + bn - 1) // bn)
    kernel = tlxc.interpret(K.cp_async_wgmma_gemm) if interpret else K.cp_async_wgmma_gemm
    kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0), BM=bm, BN=bn, BK=bk, STAGES=stages,
                 num_warps=num_warps)


@pytest.mark.parametrize("m, n, k", [(300, 200, 1000), (1000, 520, 4104)])
@pytest.mark.parametrize("bm, num_warps, stages", [(128, 8, 3), (64, 4, 3), (128, 8, 4)])
def test_pipelined_gemm_matches_torch(m, n, k, bm, num_warps, stages):
    gen = torch.Generator().manual_seed(m + n + k + stages)
    a = torch.randn(m, k, generator=gen).half().cuda()
    b = torch.randn(k, n, generator=gen).half().cuda()
    expected = a.double().matmul(b.double())
    for _ in range(3):                                   # races show up intermittently
        c = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
        _launch(a, b, c, bm, 128, 64, stages, num_warps)
        torch.cuda.synchronize()
        err = (c.double() - expected).abs().max().item()
        assert err < 0.05 * (k ** 0.5) / 8, f"max error {err}"
        torch.testing.assert_close(c.double(), expected, rtol=1e-2, atol=0.02 * (k ** 0.5))


def test_pipelined_gemm_gpu_matches_interpreter():
    gen = torch.Generator().manual_seed(5)
    m, n, k = 200, 136, 200                               # K = 3 tiles of 64 + 8
    a = torch.randn(m, k, generator=gen).half()
    b = torch.randn(k, n, generator=gen).half()
    c_cpu = torch.full((m, n), float("nan"), dtype=torch.float16)
    _launch(a, b, c_cpu, 128, 128, 64, 3, 8, interpret=True)
    c_gpu = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
    _launch(a.cuda(), b.cuda(), c_gpu, 128, 128, 64, 3, 8)
    torch.cuda.synchronize()
    torch.testing.assert_close(c_gpu.cpu().float(), c_cpu.float(), rtol=2e-3, atol=2e-2)
