"""The warp-specialized Hopper GEMM on the GPU against a float32 reference
(marked gpu; written 2026-11-29 and not yet run: the session's device time was
spent)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("m,n,k", [(1000, 1240, 776), (128, 64, 64), (4096, 4096, 4096)])
def test_matmul_ws_matches_float32(m, n, k):
    from hopper_gemm_ws import matmul_ws
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    matmul_ws(a, b, out)
    torch.cuda.synchronize()
    ref = a.float() @ b.float()
    assert torch.isfinite(out).all()
    assert ((out.float() - ref).norm() / ref.norm()).item() < 1e-2


def test_unaligned_rows_are_a_launch_error():
    from hopper_gemm_ws import matmul_ws

    import tlxc
    a = torch.randn(256, 777, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(777, 256, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(tlxc.LaunchError, match="16-byte"):
        matmul_ws(a, b)
