"""Memory-bound row kernels (issue 19): f32 `/` and `tl.sqrt` lowered as Triton lowers them,
the cross-warp step of a reduction through shuffles, loads laid out by the width the accesses
can have, and a row's addresses from one base per thread.  CPU: the generated code and the
registers ptxas reports for bench/memory_kernels.py; GPU (marked): results against torch."""
from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.errors import CompilationError
from tlxc.frontend.specialize import specialization_from_args
from tlxc.language import tlx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import memory_kernels as M  # noqa: E402

STAGES = ("ir", "ir.opt", "cuda", "ptx", "cubin", "stats")


def _compile(kernel, args: dict, num_warps: int = 4, stages=STAGES):
    for name, param in kernel.signature.parameters.items():
        if param.default is not param.empty:
            args.setdefault(name, param.default)
    return compile_kernel(kernel, specialization_from_args(kernel, args), arch="sm_90a",
                          num_warps=num_warps, stages=stages)


@tlxc.kernel
def divisions(a_ptr: tl.pointer_type(tl.float32), b_ptr: tl.pointer_type(tl.float32),
              c_ptr: tl.pointer_type(tl.float64), out_ptr: tl.pointer_type(tl.float32),
              out64_ptr: tl.pointer_type(tl.float64), n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    keep = offs < n
    a = tl.load(a_ptr + offs, mask=keep, other=1.0)
    b = tl.load(b_ptr + offs, mask=keep, other=1.0)
    c = tl.load(c_ptr + offs, mask=keep, other=1.0)
    tl.store(out_ptr + offs, a / b, mask=keep)
    tl.store(out_ptr + BLOCK + offs, tl.math.fdiv(a, b, ieee_rounding=True), mask=keep)
    tl.store(out_ptr + 2 * BLOCK + offs, tl.math.div_rn(a, b), mask=keep)
    tl.store(out_ptr + 3 * BLOCK + offs, tl.sqrt(tl.abs(a)), mask=keep)
    tl.store(out_ptr + 4 * BLOCK + offs, tl.math.sqrt_rn(tl.abs(a)), mask=keep)
    tl.store(out64_ptr + offs, c / c.to(tl.float32).to(tl.float64) + tl.sqrt(tl.abs(c)), mask=keep)


def _division_args(n=1000, block=1024, device="cpu"):
    gen = torch.Generator().manual_seed(19)
    a = torch.randn(n, generator=gen) * torch.exp2(torch.randint(-40, 40, (n,), generator=gen).float())
    b = torch.randn(n, generator=gen) * torch.exp2(torch.randint(-40, 40, (n,), generator=gen).float())
    a[:6] = torch.tensor([1e-40, -3e-39, 1.0, 0.0, 3.0e38, 7.0])       # subnormals, a zero, a huge one
    b[:6] = torch.tensor([3.0, 1e-39, 3.0, 2.0, 3.0, 1e-30])
    c = torch.randn(n, generator=gen, dtype=torch.float64)
    out = torch.full((5 * block,), float("nan"))
    out64 = torch.full((block,), float("nan"), dtype=torch.float64)
    args = {"a_ptr": a, "b_ptr": b, "c_ptr": c, "out_ptr": out, "out64_ptr": out64, "n": n, "BLOCK": block}
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in args.items()}


def test_f32_division_and_sqrt_lower_as_triton_does():
    """`/` on f32 is div.full.f32 and tl.sqrt is sqrt.approx.f32 (Triton's lowering, no slow-path
    call); fdiv(ieee_rounding=True), div_rn and sqrt_rn stay correctly rounded; f64 stays IEEE."""
    compiled = _compile(divisions, _division_args())
    cuda, ptx = compiled.asm["cuda"], compiled.asm["ptx"]
    assert cuda.count("tlx_div_full_f32(") == 2          # the helper's definition and the one f32 `/`
    assert cuda.count("tlx_sqrt_approx_f32(") == 2
    assert cuda.count("__fdiv_rn(") == 2                 # fdiv(ieee_rounding=True) and div_rn
    assert "__fsqrt_rn(" in cuda
    assert "div.full.f32" in ptx and "sqrt.approx.f32" in ptx
    assert "div.rn.f64" in ptx and "sqrt.rn.f64" in ptx
    assert "div.rn.f32" in ptx and "sqrt.rn.f32" in ptx   # the correctly rounded ones


@tlxc.kernel
def fdiv_bad_rounding(a_ptr: tl.pointer_type(tl.float32), BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)
    tl.store(a_ptr + offs, tl.math.fdiv(a, a, ieee_rounding="yes"))


def test_fdiv_rounding_must_be_a_bool():
    with pytest.raises(CompilationError, match="'ieee_rounding' must be True or False"):
        _compile(fdiv_bad_rounding, {"a_ptr": torch.empty(64), "BLOCK": 64}, stages=("ir",))


@tlxc.kernel
def row_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(x, axis=0))
    tl.store(out_ptr + 1, tl.argmax(x, axis=0).to(tl.float32))


@tlxc.kernel
def column_sums_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    rows = tl.arange(0, M)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :])
    tl.store(out_ptr + cols, tl.sum(x, axis=0))


def test_cross_warp_step_is_one_shared_read_and_a_butterfly():
    """16 warps to one value: each lane reads one warp's partial and four shuffles combine them
    (one live value, not sixteen)."""
    compiled = _compile(row_sum_kernel, {"x_ptr": torch.empty(8192), "out_ptr": torch.empty(2), "n": 8000,
                                         "BLOCK": 8192}, num_warps=16)
    cuda = compiled.asm["cuda"]
    assert cuda.count("(lane & 15) * 1 + 0]") == 3      # sum, and argmax's value and index
    assert "for (int p = 1; p < 16; ++p)" not in cuda


def test_cross_warp_step_keeps_the_loop_when_lanes_hold_different_outputs():
    """A column sum whose result spreads over the lanes: the butterfly would mix columns, so
    each thread folds the warps' partials of its own columns."""
    compiled = _compile(column_sums_kernel, {"x_ptr": torch.empty(64 * 32), "out_ptr": torch.empty(32),
                                             "M": 64, "N": 32}, num_warps=8)
    cuda = compiled.asm["cuda"]
    assert "(lane & " not in cuda
    assert "for (int p = 1; p < " in cuda


def _layout_line(ir: str) -> str:
    return next(line for line in ir.splitlines() if line.startswith("#L0 ="))


def _softmax(stride: int, num_warps: int = 4):
    x = torch.empty(4, 1024)
    return _compile(M.softmax_rows, {"x_ptr": x, "y_ptr": x, "row_stride": stride, "n_cols": stride,
                                     "BLOCK": 1024}, num_warps=num_warps)


def test_unaligned_rows_get_one_element_per_thread_per_run():
    """Rows at a stride of 1000 floats (not 16-byte aligned, masked against an unknown length):
    scalar accesses, so consecutive lanes take consecutive elements (each warp access covers 128
    contiguous bytes), as Triton's coalescing does; at a stride of 1024 floats, 16-byte vectors."""
    unaligned = _softmax(1000)
    assert "register=[[128],[256],[512]], lane=[[1],[2],[4],[8],[16]]" in _layout_line(unaligned.asm["ir.opt"])
    assert "tlx_ld_global_b32" in unaligned.asm["cuda"]
    aligned = _softmax(1024)
    assert "register=[[1],[2],[512]], lane=[[4]," in _layout_line(aligned.asm["ir.opt"])
    assert "tlx_ld_global_b128" in aligned.asm["cuda"]


@tlxc.kernel
def staged_row(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    tlx.local_store(buf[0], tl.load(x_ptr + offs, mask=offs < n, other=0.0))
    tl.store(out_ptr + offs, tlx.local_load(buf[0]) * 2.0, mask=offs < n)


def test_kernels_with_their_own_layouts_keep_16_byte_rows():
    """A tensor laid out by something else (here shared memory) would meet a narrower load
    layout through a conversion: such kernels keep the 16-byte layout."""
    compiled = _compile(staged_row, {"x_ptr": torch.empty(1024), "out_ptr": torch.empty(1024), "n": 1000,
                                     "BLOCK": 1024})
    assert "register=[[1],[2],[512]]" in compiled.asm["ir.opt"]


def test_row_addresses_come_from_one_base_per_thread():
    cuda = _softmax(1000).asm["cuda"]
    bases = re.findall(r"float\* (row_\d+) = \w+ \+ \(0 \+ tc0\);", cuda)   # the kernel has its own `row`
    assert len(bases) == 2                                  # x's and y's
    assert f"tlx_ld_global_b32(({bases[0]} + ((((i) >> 0 & 1) * 128)" in cuda
    assert f"tlx_st_global_b32(({bases[1]} + ((((i) >> 0 & 1) * 128)" in cuda
    assert "t_1[i] = (t[i] + cols[i])" not in cuda       # no per-register pointers


# Registers of bench/memory_kernels.py at the bench's launches (ptxas 13): each bound is the
# occupancy step that matters -- 3 CTAs of 512 threads need <= 40, 16 CTAs of 128 need <= 32.
def _bench_registers():
    bf = torch.empty(16, 16384, dtype=torch.bfloat16)
    f = torch.empty(4, 1000)
    cases = {
        "swiglu": (M.silu_gate_rows, {"a_ptr": bf, "b_ptr": bf, "c_ptr": bf, "row_stride": 14336,
                                      "n_cols": 14336, "BLOCK": 16384}, 16),
        "softmax": (M.softmax_rows, {"x_ptr": f, "y_ptr": f, "row_stride": 1000, "n_cols": 1000,
                                     "BLOCK": 1024}, 4),
        "rmsnorm": (M.rms_norm_rows, {"x_ptr": bf, "w_ptr": bf, "y_ptr": bf, "row_stride": 8192,
                                      "n_cols": 8192, "eps": 1e-6, "BLOCK": 8192}, 16),
    }
    return {name: _compile(k, args, warps, stages=("ir", "ir.opt", "cuda", "cubin", "stats")).metadata
            for name, (k, args, warps) in cases.items()}


def test_bench_row_kernels_fit_triton_occupancy():
    meta = _bench_registers()
    assert meta["swiglu"]["registers"] <= 40, meta["swiglu"]        # was 114: one CTA per SM
    assert meta["rmsnorm"]["registers"] <= 40, meta["rmsnorm"]      # was 49: two
    assert meta["softmax"]["registers"] <= 32, meta["softmax"]      # was 48: ten of sixteen
    assert all(m["spills_bytes"] == 0 for m in meta.values())


# -- GPU ---------------------------------------------------------------------------------------

def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in f32 ulps of the correctly rounded ``want`` (f64)."""
    rounded = want.astype(np.float32)
    spacing = np.spacing(np.abs(rounded)).astype(np.float64)
    return np.abs(got.astype(np.float64) - rounded.astype(np.float64)) / spacing


@pytest.mark.gpu
def test_gpu_divisions_and_square_roots():
    args = _division_args(device="cuda")
    divisions[(1,)](**args)
    torch.cuda.synchronize()
    n, block = args["n"], args["BLOCK"]
    a = args["a_ptr"].double().cpu().numpy()
    b = args["b_ptr"].double().cpu().numpy()
    out = args["out_ptr"].cpu().numpy()
    assert _ulps(out[:n], a / b).max() <= 2                               # div.full.f32
    assert np.array_equal(out[block:block + n], (a / b).astype(np.float32))        # fdiv(ieee)
    assert np.array_equal(out[2 * block:2 * block + n], (a / b).astype(np.float32))  # div_rn
    assert _ulps(out[3 * block:3 * block + n], np.sqrt(np.abs(a))).max() <= 1      # sqrt.approx
    assert np.array_equal(out[4 * block:4 * block + n], np.sqrt(np.abs(a)).astype(np.float32))
    c = args["c_ptr"].cpu().numpy()
    want64 = c / c.astype(np.float32).astype(np.float64) + np.sqrt(np.abs(c))
    assert np.array_equal(args["out64_ptr"].cpu().numpy()[:n], want64)


@pytest.mark.gpu
@pytest.mark.parametrize("num_warps", [8, 16, 32])
def test_gpu_cross_warp_butterfly(num_warps):
    block = 32 * num_warps * 8
    n = block - 37
    gen = torch.Generator().manual_seed(num_warps)
    x = torch.randn(block, generator=gen).cuda()
    x[n // 3] = 50.0                                            # one clear maximum
    out = torch.full((2,), float("nan"), device="cuda")
    row_sum_kernel[(1,)](x, out, n, BLOCK=block, num_warps=num_warps)
    torch.cuda.synchronize()
    torch.testing.assert_close(out[0], x[:n].double().sum().float(), rtol=1e-5, atol=1e-4)
    assert out[1].item() == n // 3


@pytest.mark.gpu
def test_gpu_column_sums_keep_their_columns():
    m, n = 64, 32
    x = torch.randn(m * n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    column_sums_kernel[(1,)](x, out, M=m, N=n, num_warps=8)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x.view(m, n).sum(0), rtol=1e-5, atol=1e-5)


@tlxc.kernel
def shifted_rows(x_ptr, out_ptr, n, start, BLOCK: tl.constexpr):
    """`pid * BLOCK + start + tl.arange(8, 8 + BLOCK)`: a row from a scalar and an arange that
    does not start at 0."""
    offs = tl.program_id(0) * BLOCK + start + tl.arange(8, 8 + BLOCK)
    keep = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=keep, other=0.0) * 3.0, mask=keep)


@pytest.mark.gpu
@pytest.mark.parametrize("rows, cols", [(300, 1000), (64, 4096), (37, 333)])
def test_gpu_bench_row_kernels_match_torch(rows, cols):
    """The bench's softmax and RMSNorm at aligned and unaligned strides, and a shifted row."""
    block = 1 << (cols - 1).bit_length()
    x = torch.randn(rows, cols, device="cuda")
    y = torch.full_like(x, float("nan"))
    M.softmax_rows[(rows,)](x, y, cols, cols, BLOCK=block, num_warps=4)
    xb = x.to(torch.bfloat16)
    w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
    yb = torch.full_like(xb, float("nan"))
    M.rms_norm_rows[(rows,)](xb, w, yb, cols, cols, 1e-6, BLOCK=block, num_warps=8)
    flat = x.flatten()
    shifted = torch.full_like(flat, float("nan"))
    shifted_rows[(triton_cdiv(flat.numel(), 512),)](flat, shifted, flat.numel(), 0, BLOCK=512)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)
    ref = xb.float() * torch.rsqrt(xb.float().pow(2).mean(1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(yb.float(), ref, rtol=2e-2, atol=2e-2)
    assert torch.isnan(shifted[:8]).all()
    torch.testing.assert_close(shifted[8:], flat[8:] * 3.0)


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b
