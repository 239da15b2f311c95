"""The host's divisibility facts (``ALIGNS``, ``matmul.dot_aligns``) in the two other pointer
kernels with the trap of tests/test_ops_matmul_alignment.py: the grouped GEMM
(kernels/grouped_gemm.py) and the split-K reduction (``splitk_reduce_kernel``,
TLXC_OPS_SPLITK_REDUCE=1).  On rows of 3000 / 776 bf16 (multiples of 8 elements, not 16)
their loads and stores are 16-byte vectors, not element copies; and both stay correct in the
interpreter on sizes that are multiples of 8, 4 and 2 elements."""
from __future__ import annotations

import re

import pytest
import torch

import tlxc.ops.grouped as grouped_module
from tlxc.ops import grouped_matmul, matmul
from tlxc.ops.grouped import GROUPED_CONFIGS, grouped_aligns, is_fp8_config
from tlxc.ops.matmul import compile_config

BF16_TOL = 8e-3


def _body(handle) -> str:
    """The kernel's generated CUDA past the helper definitions (tlx_ld_global_b32 and co.)."""
    src = handle.asm["cuda"]
    return src[src.index("__global__"):]


def _compile_grouped(monkeypatch, *args, **kwargs):
    """The handles of the kernels ``grouped_matmul(*args, **kwargs)`` launches, compiled for
    sm_90a with the launch's arguments instead of run."""
    handles = []
    kernel = grouped_module.grouped_gemm_kernel

    class _Compile:
        def __getitem__(self, grid):
            return lambda *a, **meta: handles.append(kernel.warmup(*a, grid=grid, **meta))

    monkeypatch.setattr(grouped_module, "grouped_gemm_kernel", _Compile())
    grouped_matmul(*args, **kwargs)
    return handles


def test_grouped_facts():
    a = torch.empty(100, 776, dtype=torch.bfloat16)
    b = torch.empty(4, 3000, 776, dtype=torch.bfloat16).transpose(1, 2)      # K-major experts
    out = torch.empty(100, 3000, dtype=torch.bfloat16)
    # (am, ak, bk, bn, cm, cn, N, K, be): be = 3000 * 776 is a multiple of 16 already
    assert grouped_aligns(3000, 776, a, b, out) == (8, 1, 1, 8, 8, 1, 8, 8, 1)
    b = torch.empty(3, 776, 3004, dtype=torch.bfloat16)[1:]                   # N-major, be = 776 * 3004
    out = torch.empty(100, 3004, dtype=torch.bfloat16)
    assert grouped_aligns(3004, 776, a, b, out) == (8, 1, 4, 1, 4, 1, 4, 8, 1)


@pytest.mark.parametrize("transposed", [False, True])
def test_grouped_operands_of_8_element_rows_load_16_bytes(monkeypatch, transposed):
    E, K, N = 4, 776, 3000
    a = torch.empty(1000, K, dtype=torch.bfloat16)
    b = (torch.empty(E, N, K, dtype=torch.bfloat16).transpose(1, 2) if transposed
         else torch.empty(E, K, N, dtype=torch.bfloat16))
    sizes = torch.tensor([300, 0, 500, 200], dtype=torch.int32)
    (h,) = _compile_grouped(monkeypatch, a, b, sizes, config="g_128x128x64")
    src = _body(h)
    scalar = len(re.findall(r"\? \*\w+\[i\] : \(unsigned short\)", src))    # element copies into smem
    narrow = len(re.findall(r"\btlx_cp_async_(?:4|8)\(", src))
    assert scalar == 0 and narrow == 0, (scalar, narrow)
    assert len(re.findall(r"\btlx_cp_async_16\(", src)) >= 2
    assert not re.search(r"\*\w+\[i\] = ", src)                                  # C: no element stores
    assert re.search(r"\btlx_st_global_b128\(", src)
    assert h.n_spills == 0 and h.n_regs < 255, (h.n_regs, h.n_spills)


def _reference(a, b, sizes):
    offs = [0] + sizes.cumsum(0).tolist()
    return torch.cat([a[offs[g]:offs[g + 1]].double() @ b[g].double() for g in range(b.shape[0])])


@pytest.mark.parametrize("config", sorted(c for c in GROUPED_CONFIGS if not is_fp8_config(c)))
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("unit", [8, 4, 2])
def test_grouped_interpreter_on_sizes_of_8_4_2_elements(config, transposed, unit):
    g = torch.Generator().manual_seed(unit)
    E, K, N = 4, unit * (90 // unit | 1), 25 * unit        # K: 2 tiles of 64 and a tail
    sizes = torch.tensor([7, 0, 3 * unit + 61, 13], dtype=torch.int32)
    M = int(sizes.sum())
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    b = (torch.randn(E, N, K, generator=g).to(torch.bfloat16).transpose(1, 2) if transposed
         else torch.randn(E, K, N, generator=g).to(torch.bfloat16))
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    grouped_matmul(a, b, sizes, out, config=config)
    ref = _reference(a, b, sizes)
    assert torch.isfinite(out).all()
    assert ((out.double() - ref).norm() / ref.norm()).item() < BF16_TOL


def test_split_k_reduction_reads_and_writes_16_bytes(monkeypatch):
    monkeypatch.setenv("TLXC_OPS_SPLITK_REDUCE", "1")
    a = torch.empty(1000, 776, dtype=torch.bfloat16)
    b = torch.empty(776, 3000, dtype=torch.bfloat16)
    _, reduce = compile_config("dot_128x128x64_s3_w4_k4", a, b)
    src = _body(reduce)
    assert not re.search(r"\btlx_(?:st_global|ld_global\w*)_b(?:16|32)\(", src)   # element by element
    assert not re.search(r"\*\w+\[i\] = ", src)                                   # C: element stores
    assert re.search(r"\btlx_ld_global\w*_b128\(", src)
    assert reduce.n_spills == 0, reduce.n_spills


@pytest.mark.parametrize("unit", [8, 4, 2])
def test_split_k_reduction_interpreter_on_sizes_of_8_4_2_elements(monkeypatch, unit):
    monkeypatch.setenv("TLXC_OPS_SPLITK_REDUCE", "1")
    g = torch.Generator().manual_seed(unit)
    M, N, K = 17 * unit, 25 * unit, unit * (450 // unit | 1)
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    b = torch.randn(K, N, generator=g).to(torch.bfloat16)
    bias = torch.randn(N, generator=g).to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    matmul(a, b, out, bias=bias, config="dot_64x64x64_s4_w4_k4")
    ref = a.double() @ b.double() + bias.double()
    assert torch.isfinite(out).all()
    assert ((out.double() - ref).norm() / ref.norm()).item() < BF16_TOL


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("transposed", [False, True])
def test_grouped_on_the_gpu_at_8_element_rows(transposed):
    g = torch.Generator(device="cuda").manual_seed(3)
    E, K, N = 4, 776, 3000
    sizes = torch.tensor([300, 0, 517, 211], dtype=torch.int32, device="cuda")
    M = int(sizes.sum())
    a = torch.randn(M, K, generator=g, device="cuda").to(torch.bfloat16)
    b = (torch.randn(E, N, K, generator=g, device="cuda").to(torch.bfloat16).transpose(1, 2) if transposed
         else torch.randn(E, K, N, generator=g, device="cuda").to(torch.bfloat16))
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
    grouped_matmul(a, b, sizes, out, config="g_128x128x64")
    ref = _reference(a.cpu(), b.cpu(), sizes.cpu())
    assert torch.isfinite(out).all()
    assert ((out.cpu().double() - ref).norm() / ref.norm()).item() < BF16_TOL


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_split_k_reduction_on_the_gpu_at_8_element_rows(monkeypatch):
    monkeypatch.setenv("TLXC_OPS_SPLITK_REDUCE", "1")
    g = torch.Generator(device="cuda").manual_seed(4)
    a = torch.randn(1000, 776, generator=g, device="cuda").to(torch.bfloat16)
    b = torch.randn(776, 3000, generator=g, device="cuda").to(torch.bfloat16)
    out = torch.full((1000, 3000), float("nan"), dtype=torch.bfloat16, device="cuda")
    matmul(a, b, out, config="dot_128x128x64_s3_w4_k4")
    ref = a.double() @ b.double()
    assert torch.isfinite(out).all()
    assert ((out.double() - ref).norm() / ref.norm()).item() < BF16_TOL
