"""LDS swizzles chosen from the MFMA readers (issue 24): the bank model (ir/layouts_amd.py), the
swizzle it picks for each MFMA operand fragment (conflict-free reads, writers kept conflict-free),
and kernels whose buffers get it, run on the CPU emulation of their HIP against torch."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tlxc
import tlxc.language as tl
import tlxc.language.tlx as tlx
from tlxc.codegen_amdgcn.emu import run as emu
from tlxc.compiler import compile_kernel
from tlxc.frontend.specialize import specialization_from_args
from tlxc.ir import layouts_amd as A
from tlxc.ir.layouts import Layout, default_blocked
from tlxc.runtime.hip import emulate

ROOT = Path(__file__).resolve().parent.parent


def _one_wave(lanes_basis, regs=()):
    """A 1-wave layout of a [64, 64] f32 tile: lane bases as given."""
    return Layout((64, 64), tuple(regs), tuple(lanes_basis), ())


def test_the_bank_model():
    # 64 lanes reading 64 consecutive f32 of one row: two groups of 32 distinct banks, conflict-free
    row = _one_wave([(0, 1), (0, 2), (0, 4), (0, 8), (0, 16), (0, 32)])
    assert A.lds_access_cycles(row, 4) == (2, 2)
    # 64 lanes reading one column (rows 256 bytes apart): every lane of a group in bank 0
    column = _one_wave([(1, 0), (2, 0), (4, 0), (8, 0), (16, 0), (32, 0)])
    assert A.lds_access_cycles(column, 4) == (64, 2)
    # the same word read by every lane is a broadcast
    same = _one_wave([(0, 0)] * 6)
    assert A.lds_access_cycles(same, 4) == (2, 2)


# (block, k per instruction, element bytes) of the MFMAs tl.dot uses: f16/bf16 on both archs,
# gfx950's f16 K=16/32, fp8
MFMAS = [(32, 8, 2), (16, 16, 2), (32, 16, 2), (16, 32, 2), (32, 16, 1), (16, 32, 1)]


@pytest.mark.parametrize("block, k, elem", MFMAS)
def test_the_chosen_swizzle_makes_the_a_operand_reads_conflict_free(block, k, elem):
    """A (M x K, K contiguous) is read lane by lane down the rows: unswizzled, the lanes of a group hit
    few banks; the chosen XOR swizzle spreads them over all 32, and the 16-byte row-major writes
    (local_store, register-staged async_load) stay conflict-free."""
    bk = 64 // elem                                   # 64-byte rows
    shape, acc = (64, bk), (64, 64)
    reader = A.mfma_operand_layout(shape, 0, acc, 4, A.MfmaShape(block, k))
    writer = default_blocked(shape, 4, 8 * elem, vector_bytes=16, lanes=64)
    plain, ideal = A.lds_access_cycles(reader, elem)
    assert plain > ideal                               # the unswizzled reads conflict
    swizzle = A.choose_lds_swizzle([reader], [writer], bk * elem, elem)
    assert swizzle is not None and swizzle.chunk >= A.lds_vector_bytes(reader, elem)
    assert A.lds_access_cycles(reader, elem, swizzle) == (ideal, ideal)
    assert A.lds_access_cycles(writer, elem, swizzle)[0] == A.lds_access_cycles(writer, elem)[1]
    # a bijection of the tile's bytes (each period maps onto itself)
    offsets = np.arange(64 * bk * elem)
    assert sorted(swizzle.apply(offsets).tolist()) == offsets.tolist()


def test_no_swizzle_where_none_helps():
    # B (K x N, N contiguous) of a 32x32 MFMA: one element per lane per read, already conflict-free
    reader = A.mfma_operand_layout((32, 64), 1, (64, 64), 4, A.MfmaShape(32, 8))
    plain, ideal = A.lds_access_cycles(reader, 2)
    assert plain == ideal and A.choose_lds_swizzle([reader], [], 128, 2) is None


@tlxc.kernel
def staged_gemm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Operands through LDS (local_store, then local_load straight into the MFMA fragments)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_buf = tlx.local_alloc((BM, BK), tl.float16, 2)
    b_buf = tlx.local_alloc((BK, BN), tl.float16, 2)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(tl.cdiv(K, BK)):
        kk = k * BK + rk
        tlx.local_store(tlx.local_view(a_buf, k % 2), tl.load(a_ptr + rm[:, None] * K + kk[None, :],
                                                               mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0))
        tlx.local_store(tlx.local_view(b_buf, k % 2), tl.load(b_ptr + kk[:, None] * N + rn[None, :],
                                                               mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0))
        acc = tl.dot(tlx.local_load(tlx.local_view(a_buf, k % 2)), tlx.local_load(tlx.local_view(b_buf, k % 2)), acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _allocs(kfn, arch, *args, **kwargs):
    bound = kfn.signature.bind(*args, **kwargs)
    bound.apply_defaults()
    spec = specialization_from_args(kfn, dict(bound.arguments))
    text = compile_kernel(kfn, spec, arch=arch, stages=("ir.opt",)).asm["ir.opt"]
    return [line for line in text.splitlines() if "tlx.local_alloc" in line]


@pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_a_kernel_gets_the_swizzle_and_still_computes_the_product(arch):
    m, n, k = 80, 70, 100
    a, b = torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)
    c = torch.full((m, n), float("nan"))
    args = (a, b, c, m, n, k)
    allocs = _allocs(staged_gemm, arch, *args, BM=64, BN=64, BK=32)
    assert "xor_swizzle" in allocs[0] and "xor_swizzle" not in allocs[1], allocs     # A swizzled, B left alone
    emulate(staged_gemm, (2, 2), *args, BM=64, BN=64, BK=32, arch=arch)
    ref = a.double() @ b.double()
    assert torch.allclose(c.double(), ref, rtol=1e-5, atol=1e-3), (c.double() - ref).abs().max()


def test_direct_to_lds_buffers_keep_no_swizzle_on_gfx950():
    """gfx950's global_load_lds writes lane l's 16 bytes at base + 16 l: its buffers stay unswizzled
    (gfx942's register-staged copies take the swizzle)."""
    path = ROOT / "examples" / "amd_gemm_pingpong.py"
    spec = importlib.util.spec_from_file_location("amd_gemm_pingpong_swizzle", path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(path.parent))
    _grid, args = mod.check_inputs()
    assert not any("xor_swizzle" in line for line in _allocs(mod.gemm_pingpong_kernel, "gfx950", *args))
    assert any("xor_swizzle" in line for line in _allocs(mod.gemm_pingpong_kernel, "gfx942", *args))
