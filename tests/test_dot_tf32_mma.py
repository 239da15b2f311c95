"""``tl.dot`` on float32 operands at Triton's default precision (tf32) runs on the tensor cores:
``mma.sync m16n8k8`` tf32 fragments (``ir/layouts_nvidia.py``, PTX ISA "Matrix Fragments for
mma.m16n8k8"), not the FMA loop it took before (a 32-register, kilobyte-stack kernel at 64x64x32).
Checked three ways without a GPU: the fragments against the ISA's formulas, the generated CUDA text
run on the host emulation (codegen_nvptx/emu) against float64, and the interpreter."""
from __future__ import annotations

import pytest
import torch
from kernels_dot import tiled_dot_kernel as fp32_dot_kernel

from tlxc.codegen_nvptx.emu import run as emu
from tlxc.interpreter import interpret
from tlxc.ir import layouts_nvidia as N
from tlxc.runtime.warmup import cuda_source


def test_tf32_fragments_follow_the_isa():
    acc = N.mma_accumulator_layout((16, 8), 1, "mma_v2")
    a = N.mma_operand_layout((16, 8), 0, acc, 32).coords_table()[0]
    b = N.mma_operand_layout((8, 8), 1, acc, 32).coords_table()[0]
    for lane in range(32):
        g, t = lane // 4, lane % 4
        assert [tuple(a[lane, i]) for i in range(4)] == [(g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4)]
        assert [tuple(b[lane, i]) for i in range(2)] == [(t, g), (t + 4, g)]


SIG = "a_ptr=*fp32,b_ptr=*fp32,c_ptr=*fp32,M=i32,N=i32,K=i32,stride_am=i32,stride_bk=i32,stride_cm=i32"


@pytest.mark.parametrize("precision,mma", [("tf32", True), ("ieee", False), ("tf32x3", False)])
def test_float32_dot_picks_mma_at_tf32_only(precision, mma):
    """tf32 (Triton's default for float32) lowers to m16n8k8; ieee and tf32x3 keep the exact FMA sum.
    The tf32 kernel has no local stack (the FMA kernel's operand rows spill)."""
    c = fp32_dot_kernel.compile(SIG, {"BM": 64, "BN": 64, "BK": 32, "PRECISION": precision}, arch="sm_90a")
    assert ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in c.asm["cuda"]) == mma
    if mma:
        assert c.metadata["local_bytes"] == 0 and c.metadata["spills_bytes"] == 0, c.metadata["ptxas_log"]


def _operands(M, N, K, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(M, K, generator=g), torch.randn(K, N, generator=g)


def _tf32(x):
    bits = x.contiguous().view(torch.int32)
    rounded = ((bits + 0x1000) & ~0x1FFF).view(torch.float32)
    return torch.where(torch.isfinite(x), rounded, x)


@pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
@pytest.mark.parametrize("BM,BN,BK,warps", [(64, 64, 32, 4), (32, 64, 16, 2), (16, 32, 32, 1)])
def test_tf32_mma_cuda_text_matches_float64(BM, BN, BK, warps):
    """The generated CUDA text of the tf32 dot on the host emulation: odd sizes (masked tiles), the
    accumulator across K steps; the result equals the float64 product of the tf32-rounded operands to
    float32 summation error.  A swapped pair of A fragment registers fails."""
    M, N, K = 70, 90, 50
    a, b = _operands(M, N, K, seed=BM + BK)
    ref = _tf32(a).double() @ _tf32(b).double()
    meta = {"BM": BM, "BN": BN, "BK": BK, "PRECISION": "tf32"}
    grid = (-(-M // BM), -(-N // BN))
    out = torch.full((M, N), float("nan"))
    args = (a, b, out, M, N, K, a.stride(0), b.stride(0), out.stride(0))
    text = cuda_source(fp32_dot_kernel, args, {**meta, "num_warps": warps}, grid)
    assert "tlx_mma_m16n8k8_f32_tf32(" in text
    names = list(fp32_dot_kernel.signature.parameters)
    emu.build(text).run({**dict(zip(names, args)), **meta}, grid=grid, threads=32 * warps)
    err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-5, err
    # a corrupted fragment order (A's rows g and g + 8 swapped in the tf32 copy) must fail
    line = next(ln for ln in text.splitlines() if "_tf32[i] = tlx_cvt_rna_tf32_f32(" in ln)
    swapped = text.replace(line, line.replace("[i])", "[i ^ 1])"), 1)
    assert swapped != text
    bad = torch.full((M, N), float("nan"))
    emu.build(swapped).run({**dict(zip(names, (a, b, bad, *args[3:]))), **meta}, grid=grid, threads=32 * warps)
    assert ((bad.double() - ref).abs().max() / ref.abs().max()).item() > 1e-2


def test_tf32_dot_on_the_interpreter():
    M, N, K = 70, 90, 50
    a, b = _operands(M, N, K, seed=5)
    out = torch.full((M, N), float("nan"))
    interpret(fp32_dot_kernel, (2, 2), (a, b, out, M, N, K, a.stride(0), b.stride(0), out.stride(0)),
              {"BM": 64, "BN": 64, "BK": 32, "PRECISION": "tf32"})
    ref = _tf32(a).double() @ _tf32(b).double()
    assert ((out.double() - ref).abs().max() / ref.abs().max()).item() < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("BM,BN,BK,warps", [(64, 64, 32, 4), (32, 64, 16, 2), (128, 64, 32, 8)])
def test_tf32_dot_on_the_gpu(BM, BN, BK, warps):
    """The tf32 mma lowering on the device against float64 math of the tf32-rounded operands, on a
    poisoned output with sizes that are not tile multiples."""
    M, N, K = 300, 170, 200
    a, b = (x.cuda() for x in _operands(M, N, K, seed=BM * BN))
    out = torch.full((M, N), float("nan"), device="cuda")
    grid = (-(-M // BM), -(-N // BN))
    fp32_dot_kernel[grid](a, b, out, M, N, K, a.stride(0), b.stride(0), out.stride(0), BM=BM, BN=BN, BK=BK,
                          PRECISION="tf32", num_warps=warps)
    torch.cuda.synchronize()
    ref = _tf32(a.cpu()).double() @ _tf32(b.cpu()).double()
    assert not out.isnan().any()
    assert ((out.cpu().double() - ref).abs().max() / ref.abs().max()).item() < 1e-5
