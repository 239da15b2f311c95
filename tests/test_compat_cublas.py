"""``tlxc._C.libtriton.nvidia.cublas.CublasLt``: the cuBLAS handle Triton's matmul tutorials time against
(``from triton._C.libtriton import nvidia`` with the import renamed), with Triton's argument rules."""
import pytest
import torch

import tlxc.compat as triton
from tlxc._C.libtriton import nvidia


def _handle():
    return nvidia.cublas.CublasLt(torch.empty(1 << 10, dtype=torch.uint8))


@pytest.mark.parametrize("dtype, tol", [(torch.float16, 2e-3), (torch.bfloat16, 1e-2), (torch.float32, 1e-6),
                                        (torch.float8_e4m3fn, 7e-2)])
def test_matmul_is_a_times_b_transposed(dtype, tol):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(37, 45, generator=g).to(dtype)
    b = torch.randn(29, 45, generator=g).to(dtype)
    c = torch.full((37, 29), float("nan")).to(dtype)          # poisoned
    _handle().matmul(a, b, c)
    ref = a.double() @ b.double().t()
    assert torch.isfinite(c.double()).all()
    assert ((c.double() - ref).abs().max() / ref.abs().max()).item() < tol


def test_gemm_scales_and_adds_c():
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(16, 32, generator=g).half(), torch.randn(24, 32, generator=g).half()
    c = torch.randn(16, 24, generator=g).half()
    d = torch.full((16, 24), float("nan")).half()
    _handle().gemm(a, b, c, d, 0.5, -2.0)
    ref = 0.5 * (a.double() @ b.double().t()) - 2.0 * c.double()
    assert ((d.double() - ref).abs().max() / ref.abs().max()).item() < 2e-3


def test_bad_arguments_are_named():
    h = _handle()
    a, b = torch.randn(4, 8).half(), torch.randn(6, 8).half()
    with pytest.raises(RuntimeError, match=r"one dtype, got a float16, b float16, c float32"):
        h.matmul(a, b, torch.empty(4, 6))
    with pytest.raises(RuntimeError, match=r"a.shape\[1\] must equal b.shape\[1\] \(b is passed transposed"):
        h.matmul(a, b.t().contiguous(), torch.empty(4, 6).half())
    with pytest.raises(RuntimeError, match=r"'c' is \[6, 4\], expected \[4, 6\]"):
        h.matmul(a, b, torch.empty(6, 4).half())
    with pytest.raises(RuntimeError, match="dtype float64 is not supported"):
        h.matmul(a.double(), b.double(), torch.empty(4, 6).double())
    with pytest.raises(RuntimeError, match="'c' must be float16, got bfloat16"):
        h.gemm(a.bfloat16(), b.bfloat16(), torch.empty(4, 6).bfloat16(), torch.empty(4, 6).bfloat16(), 1.0, 0.0)
    with pytest.raises(RuntimeError, match="'workspace' must be a tensor"):
        nvidia.cublas.CublasLt(1024)


def test_reached_through_the_compat_module():
    assert triton._C.libtriton.nvidia.cublas.CublasLt is nvidia.cublas.CublasLt


@pytest.mark.gpu
def test_gpu_matmul_matches_torch():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    h = nvidia.cublas.CublasLt(torch.empty(32 << 20, dtype=torch.uint8, device="cuda"))
    a = torch.randn(300, 512, device="cuda").bfloat16()
    b = torch.randn(200, 512, device="cuda").bfloat16()
    c = torch.full((300, 200), float("nan"), device="cuda").bfloat16()
    h.matmul(a, b, c)
    ref = a.double() @ b.double().t()
    assert ((c.double() - ref).abs().max() / ref.abs().max()).item() < 1e-2
