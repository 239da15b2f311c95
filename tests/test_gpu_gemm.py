"""The warp-specialized Hopper GEMMs (cooperative and ping-pong) on the GPU
against a float32 reference: odd shapes, poisoned outputs (marked gpu)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
pytestmark = pytest.mark.gpu


# Bound on the relative (Frobenius) error against the float32 product: the
# output's rounding (unit roundoff 2^-8 for bf16, 2^-11 for fp16) dominates.
BOUND = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


def _matmul(kind):
    if kind == "ws":
        from hopper_gemm_ws import matmul_ws
        return matmul_ws
    from hopper_gemm_ws_pingpong import matmul_ws_pingpong
    return matmul_ws_pingpong


@pytest.mark.parametrize("kind", ["ws", "pingpong"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("m,n,k", [(1000, 1240, 776), (128, 64, 64), (72, 520, 64), (4096, 4096, 4096)])
def test_matmul_matches_float32(kind, dtype, m, n, k):
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    _matmul(kind)(a, b, out)
    torch.cuda.synchronize()
    ref = a.float() @ b.float()
    assert torch.isfinite(out).all()
    assert ((out.float() - ref).norm() / ref.norm()).item() < BOUND[dtype]


@pytest.mark.parametrize("config", [{"num_stages": 4, "epilogue_subtile": 2},
                                    {"num_stages": 3, "epilogue_subtile": 1},
                                    {"num_stages": 4, "epilogue_subtile": 2, "cluster_m": 2, "group_m": 16},
                                    {"cluster_m": 2}],
                         ids=["halves", "whole", "pairs", "pairs-default"])
@pytest.mark.parametrize("m,n,k", [(1000, 1240, 776), (128, 64, 64), (72, 520, 64), (4096, 4096, 4096),
                                   (3000, 256, 512)])
def test_matmul_configurations(config, m, n, k):
    """Subtiled epilogues and pairs of CTAs sharing B (odd tile-row counts leave a CTA of a pair with
    rows past M: it still loads and multicasts its half of B)."""
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    _matmul("ws")(a, b, out, **config)
    torch.cuda.synchronize()
    ref = a.float() @ b.float()
    assert torch.isfinite(out).all()
    assert ((out.float() - ref).norm() / ref.norm()).item() < BOUND[torch.bfloat16]


@pytest.mark.parametrize("m,n,k", [(1000, 1240, 784), (128, 256, 128), (4096, 4096, 4096)])
def test_fp8_matches_float64(m, n, k):
    from hopper_gemm_fp8 import fp8_inputs, matmul_fp8
    a, b_nk, sa, sb = fp8_inputs(m, n, k, "cuda")
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    matmul_fp8(a, b_nk, sa, sb, out)
    ref = (a.double() @ b_nk.double().t()) * (sa.double() * sb.double())
    assert torch.isfinite(out).all()
    assert ((out.double() - ref).norm() / ref.norm()).item() < BOUND[torch.bfloat16]


def test_output_view_with_row_stride():
    """C may be a column slice of a wider tensor (16-byte aligned row stride):
    TMA clips the boxes at N, the columns beyond stay untouched."""
    from hopper_gemm_ws import matmul_ws
    a = torch.randn(300, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 200, device="cuda", dtype=torch.bfloat16)
    wide = torch.full((300, 264), 7.0, device="cuda", dtype=torch.bfloat16)
    matmul_ws(a, b, wide[:, :200])
    ref = a.float() @ b.float()
    assert ((wide[:, :200].float() - ref).norm() / ref.norm()).item() < BOUND[torch.bfloat16]
    assert (wide[:, 200:] == 7.0).all()


def test_unaligned_rows_are_a_launch_error():
    from hopper_gemm_ws import matmul_ws

    import tlxc
    a = torch.randn(256, 777, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(777, 256, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(tlxc.LaunchError, match="16-byte"):
        matmul_ws(a, b)
