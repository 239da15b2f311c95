"""Plain tl.dot matmuls on the GPU after lower-dot-to-wgmma and pipeline-loads: odd shapes
(M, N not multiples of the tile, K tails that are not multiples of 8), fp16 and bf16, 4 and 8
warps, 2 to 4 stages, f16 accumulation, block pointers; poisoned outputs, float64 references."""
from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
import kernels_dot_wgmma as K

pytestmark = pytest.mark.gpu


# half an ulp of the output dtype, relative
_OUTPUT_ROUNDING = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8, torch.float32: 2.0 ** -24}


def _check(c, expected, k, magnitude):
    """|c - ref| <= one ulp of the output (a sum near a rounding boundary may round either way)
    + the f32 accumulation bound k * 2^-24 * (|A| @ |B|) (``magnitude``)."""
    assert not c.isnan().any(), "poisoned elements left"
    err = (c.double() - expected).abs()
    bound = 2 * _OUTPUT_ROUNDING[c.dtype] * expected.abs() + k * 2.0 ** -24 * magnitude
    worst = (err - bound).max().item()
    assert worst <= 0, f"max error {err.max().item()} exceeds the {c.dtype} rounding bound by {worst}"


def _tile_matmul(a, b, c, bm, bn, bk, num_warps, **meta):
    m, k = a.shape
    n = b.shape[1]
    grid = ((m + bm - 1) // bm, (n + bn - 1) // bn)
    K.tile_matmul[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        BM=bm, BN=bn, BK=bk, num_warps=num_warps, **meta)


@pytest.mark.parametrize("m, n, k", [(300, 200, 1000), (1000, 520, 4104), (64, 64, 37), (129, 257, 64)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bm, bn, num_warps, stages", [(128, 128, 4, None), (128, 256, 8, None), (64, 64, 4, 2),
                                                      (128, 128, 8, 4)])
def test_tile_matmul_matches_torch(m, n, k, dtype, bm, bn, num_warps, stages):
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))    # fresh data each run
    a = torch.randn(m, k, generator=gen).to(dtype).cuda()
    b = torch.randn(k, n, generator=gen).to(dtype).cuda()
    expected = a.double() @ b.double()
    magnitude = a.double().abs() @ b.double().abs()
    for _ in range(2):                                   # races show up intermittently
        c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        _tile_matmul(a, b, c, bm, bn, 64, num_warps, STAGES=stages)
        torch.cuda.synchronize()
        _check(c, expected, k, magnitude)


def test_launch_num_stages_option():
    a = torch.randn(200, 300).half().cuda()
    b = torch.randn(300, 100).half().cuda()
    for stages in (2, 3, 4):
        c = torch.full((200, 100), float("nan"), dtype=torch.float16, device="cuda")
        m, k = a.shape
        K.tile_matmul[(2, 1)](a, b, c, m, 100, k, a.stride(0), 1, b.stride(0), 1, c.stride(0), BM=128, BN=128,
                              BK=64, num_warps=4, num_stages=stages)
        torch.cuda.synchronize()
        _check(c, a.double() @ b.double(), k, a.double().abs() @ b.double().abs())


def test_f16_accumulator():
    a = torch.randn(128, 256).half().cuda() / 4
    b = torch.randn(256, 128).half().cuda() / 4
    c = torch.full((128, 128), float("nan"), dtype=torch.float16, device="cuda")
    _tile_matmul(a, b, c, 128, 128, 64, 4, OUT=K.tl.float16)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize("m, n, k", [(100, 70, 75), (256, 128, 1000)])
def test_block_ptr_matmul_matches_torch(m, n, k):
    a = torch.randn(m, k).half().cuda()
    b = torch.randn(k, n).half().cuda()
    c = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
    K.block_ptr_matmul[((m + 127) // 128, (n + 127) // 128)](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0),
                                                             BM=128, BN=128, BK=64, num_warps=8)
    torch.cuda.synchronize()
    _check(c, a.double() @ b.double(), k, a.double().abs() @ b.double().abs())


def test_reused_operand_matmul():
    k = 256
    a, b = torch.randn(64, k).half().cuda(), torch.randn(k, 64).half().cuda()
    c = torch.full((64, 64), float("nan"), device="cuda")
    s = torch.full((64,), float("nan"), device="cuda")
    K.reused_operand_matmul[(1,)](a, b, c, s, k, BM=64, BN=64, BK=32, num_warps=4)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-2)
    torch.testing.assert_close(s, a.float().sum(1), rtol=1e-3, atol=1e-2)
