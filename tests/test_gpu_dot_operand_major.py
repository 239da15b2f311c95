"""tl.dot with transposed operands on the GPU (issues 19, 22): A K-major or M-major x B N-major or
K-major (``b = w.t()``), fp16 and bf16, 128x128x64 / 4 warps and 128x256x64 / 8 warps, against a
float64 matmul, poisoned outputs, shapes that are not tile multiples.  Sizes that are not multiples
of 16 (1000 x 1000 x 520) leave the pointers and masks unproven contiguous: the unvectorized path,
which must be right too; 1008 x 1040 x 528 (multiples of 16, not of the tiles) takes the fast one."""
from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
import kernels_dot_major as KM
import kernels_dot_wgmma as K

pytestmark = pytest.mark.gpu

_ROUNDING = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}


def _operands(m, n, k, dtype, a_major, b_major):
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))    # fresh data each run
    a = torch.randn(m, k, generator=gen).to(dtype).cuda()
    b = torch.randn(k, n, generator=gen).to(dtype).cuda()
    if a_major == "M":
        a = a.t().contiguous().t()
    if b_major == "K":
        b = b.t().contiguous().t()            # b = w.t() of a row-major [N, K] weight
    return a, b


def _check(c, a, b):
    """|c - ref| within an output rounding plus the f32 accumulation bound."""
    assert not c.isnan().any(), "poisoned elements left"
    k = a.shape[1]
    ref = a.double() @ b.double()
    bound = 2 * _ROUNDING[c.dtype] * ref.abs() + k * 2.0 ** -24 * (a.double().abs() @ b.double().abs())
    worst = ((c.double() - ref).abs() - bound).max().item()
    assert worst <= 0, f"error exceeds the {c.dtype} bound by {worst}"


@pytest.mark.parametrize("m, n, k", [(1000, 1000, 520), (1008, 1040, 528)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bn, num_warps", [(128, 4), (256, 8)])
@pytest.mark.parametrize("a_major, b_major", [("K", "N"), ("K", "K"), ("M", "N"), ("M", "K")])
def test_transposed_operands_match_torch(a_major, b_major, bn, num_warps, dtype, m, n, k):
    a, b = _operands(m, n, k, dtype, a_major, b_major)
    grid = ((m + 127) // 128, (n + bn - 1) // bn)
    for _ in range(2):                        # races show up intermittently
        c = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
        K.tile_matmul[grid](a, b, c, m, n, k, *a.stride(), *b.stride(), c.stride(0), BM=128, BN=bn, BK=64,
                            num_warps=num_warps)
        torch.cuda.synchronize()
        _check(c, a, b)


@pytest.mark.parametrize("a_major, b_major", [("K", "K"), ("M", "K"), ("M", "N")])
def test_block_pointers_with_column_major_order_match_torch(a_major, b_major):
    m, n, k = 1008, 1000, 528
    a, b = _operands(m, n, k, torch.bfloat16, a_major, b_major)
    c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    KM.block_ptr_matmul_major[((m + 127) // 128, (n + 127) // 128)](
        a, b, c, m, n, k, *a.stride(), *b.stride(), c.stride(0), BM=128, BN=128, BK=64,
        A_ORDER=(1, 0) if a_major == "K" else (0, 1), B_ORDER=(1, 0) if b_major == "N" else (0, 1), num_warps=4)
    torch.cuda.synchronize()
    _check(c, a, b)


def test_dot_with_trans_of_a_row_major_load_matches_torch():
    m, n, d = 1000, 520, 64
    q = torch.randn(m, d, device="cuda").to(torch.bfloat16)
    k = torch.randn(n, d, device="cuda").to(torch.bfloat16)
    out = torch.full((m, n), float("nan"), device="cuda")
    KM.dot_trans_rows[((m + 127) // 128, (n + 127) // 128)](q, k, out, m, n, d, d, BM=128, BN=128, D=d, num_warps=4)
    torch.cuda.synchronize()
    ref = q.double() @ k.double().t()
    assert not out.isnan().any()
    assert (out.double() - ref).abs().max().item() <= d * 2.0 ** -20 * (q.double().abs() @ k.double().abs().t()).max().item()
