"""``tl.dot`` on int8 operands (an int32 accumulator, K a multiple of 32) runs on the tensor cores:
``mma.sync m16n8k32`` s8 fragments (``ir/layouts_nvidia.py``, PTX ISA "Matrix Fragments for
mma.m16n8k32"), not the FMA loop (torchao's int8 GEMM and LMDeploy's w8a8 kernels: 64 registers and
kilobytes of local memory before).  Checked without a GPU: the fragments against the ISA's formulas,
the generated CUDA on the host emulation against exact integer math (a corrupted fragment order fails),
the interpreter; a GPU test for the device."""
from __future__ import annotations

import pytest
import torch
from kernels_dot import tiled_dot_kernel as int8_dot_kernel

from tlxc.codegen_nvptx.emu import run as emu
from tlxc.interpreter import interpret
from tlxc.ir import layouts_nvidia as N
from tlxc.runtime.warmup import cuda_source

SIG = "a_ptr=*i8,b_ptr=*i8,c_ptr=*i32,M=i32,N=i32,K=i32,stride_am=i32,stride_bk=i32,stride_cm=i32"


def test_s8_fragments_follow_the_isa():
    acc = N.mma_accumulator_layout((16, 8), 1, "mma_v2")
    a = N.mma_operand_layout((16, 32), 0, acc, 8).coords_table()[0]
    b = N.mma_operand_layout((32, 8), 1, acc, 8).coords_table()[0]
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(16):
            assert tuple(a[lane, i]) == (g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >= 8))
        for i in range(8):
            assert tuple(b[lane, i]) == (4 * t + (i & 3) + 16 * (i >= 4), g)


@pytest.mark.parametrize("BK,mma", [(32, True), (64, True), (16, False)])
def test_int8_dot_takes_mma_when_k_allows(BK, mma):
    """K a multiple of 32 (one m16n8k32 step) takes the tensor cores; K = 16 keeps the FMA sum."""
    c = int8_dot_kernel.compile(SIG, {"BM": 64, "BN": 64, "BK": BK}, arch="sm_90a")
    assert ("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in c.asm["cuda"]) == mma


def _operands(M, N, K, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-128, 128, (M, K), generator=g, dtype=torch.int8),
            torch.randint(-128, 128, (K, N), generator=g, dtype=torch.int8))


@pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
@pytest.mark.parametrize("BM,BN,BK,warps", [(64, 64, 32, 4), (32, 64, 64, 2)])
def test_int8_mma_cuda_text_matches_exact_math(BM, BN, BK, warps):
    M, N, K = 70, 90, 100
    a, b = _operands(M, N, K, seed=BM + BK)
    ref = a.long() @ b.long()
    meta = {"BM": BM, "BN": BN, "BK": BK}
    grid = (-(-M // BM), -(-N // BN))
    names = list(int8_dot_kernel.signature.parameters)
    out = torch.full((M, N), -7, dtype=torch.int32)
    args = (a, b, out, M, N, K, a.stride(0), b.stride(0), out.stride(0))
    text = cuda_source(int8_dot_kernel, args, {**meta, "num_warps": warps}, grid)
    assert "tlx_mma_m16n8k32_s32_s8(" in text
    emu.build(text).run({**dict(zip(names, args)), **meta}, grid=grid, threads=32 * warps)
    assert torch.equal(out.long(), ref)
    # a corrupted fragment (A's rows g and g + 8 swapped in the packing) must fail
    line = next(ln for ln in text.splitlines() if "_s8[i] = ((unsigned)(unsigned char)" in ln)
    swapped = text.replace(line, line.replace("[4 * i + 0]", "[(4 * i + 4) % 16 + 0]"), 1)
    assert swapped != text
    bad = torch.full((M, N), -7, dtype=torch.int32)
    emu.build(swapped).run({**dict(zip(names, (a, b, bad, *args[3:]))), **meta}, grid=grid, threads=32 * warps)
    assert not torch.equal(bad.long(), ref)


def test_int8_dot_on_the_interpreter():
    M, N, K = 70, 90, 100
    a, b = _operands(M, N, K, seed=9)
    out = torch.full((M, N), -7, dtype=torch.int32)
    interpret(int8_dot_kernel, (2, 2), (a, b, out, M, N, K, a.stride(0), b.stride(0), out.stride(0)),
              {"BM": 64, "BN": 64, "BK": 32})
    assert torch.equal(out.long(), a.long() @ b.long())


@pytest.mark.gpu
@pytest.mark.parametrize("BM,BN,BK,warps", [(64, 64, 32, 4), (128, 128, 64, 8), (32, 64, 64, 2)])
def test_int8_dot_on_the_gpu(BM, BN, BK, warps):
    M, N, K = 300, 170, 200
    a, b = (x.cuda() for x in _operands(M, N, K, seed=BM * BK))
    out = torch.full((M, N), -7, dtype=torch.int32, device="cuda")
    grid = (-(-M // BM), -(-N // BN))
    int8_dot_kernel[grid](a, b, out, M, N, K, a.stride(0), b.stride(0), out.stride(0), BM=BM, BN=BN, BK=BK,
                          num_warps=warps)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu().long(), a.cpu().long() @ b.cpu().long())
