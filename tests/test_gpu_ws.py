"""Warp-specialized examples on the GPU (skipped without one)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("n", [1, 1000, 98_432])
def test_ws_vector_add(n):
    from ws_vector_add import add2
    x, y, a, b = (torch.randn(n, device="cuda") for _ in range(4))
    nan = torch.full((n,), float("nan"), device="cuda")
    out1, out2 = add2(x, y, a, b, nan.clone(), nan.clone())
    torch.testing.assert_close(out1, x + y, rtol=0, atol=0)
    torch.testing.assert_close(out2, a + b, rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(1, 64), (5, 100), (333, 4000), (1000, 8192), (4097, 1024)])
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_ws_rmsnorm(shape, stages):
    from rmsnorm import reference
    from ws_rmsnorm import rmsnorm_ws
    x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(shape[1], device="cuda", dtype=torch.bfloat16)
    out = rmsnorm_ws(x, w, 1e-6, torch.full_like(x, float("nan")), num_stages=stages)
    assert torch.isfinite(out).all()
    ref = reference(x, w, 1e-6)
    assert ((out.double() - ref).norm() / ref.norm()).item() < 8e-3


def test_ws_rmsnorm_few_programs_wrap_the_ring_many_times():
    from rmsnorm import reference
    from ws_rmsnorm import rmsnorm_ws
    x = torch.randn(301, 2048, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(2048, device="cuda", dtype=torch.bfloat16)
    out = rmsnorm_ws(x, w, 1e-6, torch.full_like(x, float("nan")), num_stages=2, programs=3)
    ref = reference(x, w, 1e-6)
    assert ((out.double() - ref).norm() / ref.norm()).item() < 8e-3


def test_pingpong_alternates():
    from ws_pingpong import pingpong
    log = pingpong(16)
    assert log.tolist() == [0, 1] * 16


def test_register_reallocation_in_sass(tmp_path):
    """cuobjdump --dump-sass of the register-budget example shows USETMAXREG."""
    if shutil.which("cuobjdump") is None:
        pytest.skip("cuobjdump not installed")
    from ws_rmsnorm import rmsnorm_ws_kernel
    compiled = rmsnorm_ws_kernel.compile(constexprs={"BLOCK": 8192, "CHUNK": 512}, arch="sm_90a")
    cubin = tmp_path / "ws_rmsnorm.cubin"
    cubin.write_bytes(compiled.asm["cubin"])
    sass = subprocess.run(["cuobjdump", "--dump-sass", str(cubin)], capture_output=True, text=True,
                          check=True).stdout
    assert "USETMAXREG" in sass, sass[:2000]
    assert compiled.metadata["spills_bytes"] == 0
