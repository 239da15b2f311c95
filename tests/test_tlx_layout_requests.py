"""Layouts a TLX kernel asks for by name, one test group per kind:

- ``tlx.nv_mma_layout(warps_per_cta, instr_shape)`` on ``tlx.zeros``: the tensor is built in that
  register layout (``ir/layouts_nvidia.py: NvMmaLayout``) and converted where wgmma takes it as
  its accumulator, also for warp splits that are no whole warpgroups (2 x 2);
- an NVMMA atom one 64-byte (or 32-byte) swizzle span wide tiled over a wider buffer
  (``atom.make_shared_linear`` / ``tile_to_shape``): stored as column blocks of that span, which
  wgmma reads as an N-major B through the descriptor's leading byte offset;
- ``tlx.padded_shared_layout_encoding.with_identity_for([(row, pad)], shape, order)``: rows
  ``row + pad`` elements apart, for register loads/stores and cp.async; TMA, MMA and aliases refuse it.
"""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError, LayoutError
from tlxc.ir import layouts_nvidia as N
from tlxc.ir import shared_layout as SL
from tlxc.ir import types as T
from tlxc.language import tlx

F16 = tl.pointer_type(tl.float16)
F32 = tl.pointer_type(tl.float32)


def _rel(out, ref) -> float:
    out, ref = out.double().cpu(), ref.double().cpu()
    return float((out - ref).norm() / ref.norm())


# -- tlx.nv_mma_layout --------------------------------------------------------------------------------
@tlxc.kernel
def pinned_acc_dot(a_ptr: F16, b_ptr: F16, c_ptr: F32, WM: tl.constexpr, WN: tl.constexpr, M: tl.constexpr,
                   N: tl.constexpr, K: tl.constexpr):
    """c = a @ b with the accumulator started in an explicit NVMMA layout (A from registers,
    B through cp.async into a buffer)."""
    rows, cols, ks = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rows[:, None] * K + ks[None, :])
    b_buf = tlx.local_alloc((K, N), tl.float16, 1)
    tlx.async_load(b_ptr + ks[:, None] * N + cols[None, :], b_buf[0])
    tlx.async_load_commit_group()
    tlx.async_load_wait_group(0)
    start: tl.constexpr = tlx.nv_mma_layout(warps_per_cta=(WM, WN), instr_shape=(16, N, 16))
    acc = tlx.zeros((M, N), tl.float32, layout=start)
    acc = tlx.async_dot_wait(0, tlx.async_dot(a, b_buf[0], acc))
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc)


def _dot_args(m, n, k, device="cpu"):
    g = torch.Generator().manual_seed(5)
    a = torch.randn(m, k, generator=g).half().to(device)
    b = torch.randn(k, n, generator=g).half().to(device)
    return a, b, torch.full((m, n), float("nan"), device=device)


def test_nv_mma_layout_is_a_register_layout_of_its_warps():
    spec = tlx.nv_mma_layout(warps_per_cta=(2, 2), instr_shape=(16, 64, 16))
    layout = N.nv_mma_register_layout(spec, (64, 64), 4)
    # warp 1 starts 16 rows down; warp 2 would start 64 columns right, past N = 64: a copy of warp 0
    assert layout.warp == ((16, 0), (0, 0))
    # 64 values per thread: its 16 x 64 tile (the fragment, 8 columns steps) and again 32 rows down
    assert layout.register == ((0, 1), (8, 0), (0, 8), (0, 16), (0, 32), (32, 0))
    assert N.nv_mma_register_layout(tlx.nv_mma_layout((4, 1), (16, 64, 16)), (64, 64), 4) == \
        N.mma_accumulator_layout((64, 64), 4, "wgmma")              # whole warpgroup: wgmma's own
    with pytest.raises(ValueError, match="is 8 warps, but the code runs on 4"):
        N.nv_mma_register_layout(tlx.nv_mma_layout((4, 2), (16, 64, 16)), (64, 64), 4)


@pytest.mark.parametrize("warps", [(2, 2), (4, 1), (1, 4)])
def test_pinned_accumulator_matches_torch_on_the_interpreter_and_compiles(warps):
    a, b, c = _dot_args(64, 64, 32)
    meta = {"WM": warps[0], "WN": warps[1], "M": 64, "N": 64, "K": 32}
    tlxc.interpret(pinned_acc_dot)[(1,)](a, b, c, **meta)
    assert _rel(c, a.double() @ b.double()) < 1e-6
    compiled = pinned_acc_dot.compile(constexprs=meta, arch="sm_90a", stages=("ir", "ir.opt", "cuda", "cubin"))
    opt = compiled.asm["ir.opt"]
    assert f"warps_per_cta = [{warps[0]}, {warps[1]}]" in opt
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


def test_pinned_layout_for_other_warps_is_a_located_layout_error():
    meta = {"WM": 4, "WN": 2, "M": 64, "N": 64, "K": 32}     # 8 warps asked for, the kernel runs 4
    with pytest.raises(LayoutError, match=r"warpsPerCTA=\[4, 2\].*is 8 warps, but the code runs on 4") as info:
        pinned_acc_dot.compile(constexprs=meta, arch="sm_90a", stages=("ir", "ir.opt"))
    assert "test_tlx_layout_requests.py" in str(info.value)


@pytest.mark.gpu
@pytest.mark.parametrize("warps", [(2, 2), (4, 1)])
def test_gpu_pinned_accumulator(warps):
    a, b, c = _dot_args(64, 64, 32, "cuda")
    pinned_acc_dot[(1,)](a, b, c, WM=warps[0], WN=warps[1], M=64, N=64, K=32, num_warps=4)
    torch.cuda.synchronize()
    assert _rel(c, a.double() @ b.double()) < 1e-6


# -- narrow atoms: column blocks of a 64-byte / 32-byte swizzle ------------------------------------------
@tlxc.kernel
def blocked_b_dot(a_ptr: F16, b_ptr: F16, c_ptr: F32, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                  ATOM_N: tl.constexpr):
    """c = a @ b with B in a buffer built from [K, ATOM_N] NVMMA atoms (ATOM_N * 2 bytes wide)."""
    rows, cols, ks = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    atom: tl.constexpr = tlx.nv_mma_shared_layout_encoding((K, ATOM_N), [1, 0], tl.float16, [1, 1], [1, 1], [1, 0],
                                                           False, True)
    b_buf = tlx.local_alloc((K, N), tl.float16, 1, layout=atom.make_shared_linear(tile_shape=(K, N)))
    tlx.async_load(b_ptr + ks[:, None] * N + cols[None, :], b_buf[0])
    tlx.async_load_commit_group()
    tlx.async_load_wait_group(0)
    a = tl.load(a_ptr + rows[:, None] * K + ks[None, :])
    acc = tlx.async_dot_wait(0, tlx.async_dot(a, b_buf[0]))
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc)


@pytest.mark.parametrize("n, atom_n, span", [(64, 32, 64), (128, 32, 64), (64, 16, 32)])
def test_narrow_atoms_become_column_blocks_read_by_wgmma(n, atom_n, span):
    a, b, c = _dot_args(64, n, 32)
    meta = {"M": 64, "N": n, "K": 32, "ATOM_N": atom_n}
    tlxc.interpret(blocked_b_dot)[(1,)](a, b, c, **meta)
    assert _rel(c, a.double() @ b.double()) < 1e-6
    compiled = blocked_b_dot.compile(constexprs=meta, arch="sm_90a", stages=("ir", "cuda", "cubin"))
    cuda = compiled.asm["cuda"]
    block_bytes = 32 * span                                   # K rows of one span
    assert f"{n // atom_n} column blocks of [32, {atom_n}] ({block_bytes} bytes apart)" in cuda
    assert f"{span}-byte swizzle" in cuda
    # B N-major across the blocks: LBO = the block distance, SBO = 8 rows of one span, swizzle mode
    mode = {64: 2, 32: 3}[span]
    fields = ((block_bytes >> 4) << 16) | ((8 * span >> 4) << 32) | (mode << 62)
    assert f"0x{fields:x}ull" in cuda
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


@pytest.mark.gpu
@pytest.mark.parametrize("n, atom_n", [(64, 32), (128, 32), (64, 16)])
def test_gpu_narrow_atoms(n, atom_n):
    a, b, c = _dot_args(64, n, 32, "cuda")
    blocked_b_dot[(1,)](a, b, c, M=64, N=n, K=32, ATOM_N=atom_n, num_warps=4)
    torch.cuda.synchronize()
    assert _rel(c, a.double() @ b.double()) < 1e-6


# -- padded rows ----------------------------------------------------------------------------------------
@tlxc.kernel
def padded_transpose(x_ptr: F16, y_ptr: F16, n_rows: tl.int32, R: tl.constexpr, C: tl.constexpr, PAD: tl.constexpr):
    """y = 2 * x.T through two padded buffers: cp.async in, register load/store between them, a
    transposed view out (rows past n_rows read as 0)."""
    pad: tl.constexpr = tlx.padded_shared_layout_encoding.with_identity_for([(C, PAD)], [R, C], [1, 0])
    bufs = tlx.local_alloc((R, C), tl.float16, 2, layout=pad)
    r, c = tl.arange(0, R), tl.arange(0, C)
    tlx.async_load(x_ptr + r[:, None] * C + c[None, :], bufs[1], mask=r[:, None] < n_rows, other=0.0)
    tlx.async_load_commit_group()
    tlx.async_load_wait_group(0)
    tlx.local_store(bufs[0], tlx.local_load(bufs[1]) * 2.0)
    out = tlx.local_load(tlx.local_trans(bufs[0]))
    tl.store(y_ptr + c[:, None] * R + r[None, :], out)


def test_padded_layout_is_rows_apart_by_the_pitch():
    layout = tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)], [128, 64], [1, 0])
    assert layout.row_pitch == 72 and layout.strides() == (72, 1) and layout.numel == 128 * 72
    offsets = SL.byte_offsets(layout, (128, 64), T.f16)
    assert offsets[3, 5] == (3 * 72 + 5) * 2
    assert T.MemDescType((128, 64), T.f16, 2, layout=layout).buffer_bytes == 128 * 72 * 2
    for pairs, shape, order, match in [([(32, 8)], [128, 64], [1, 0], "padded rows only"),
                                       ([(64, 8), (128, 4)], [128, 64], [1, 0], "padded rows only"),
                                       ([(64, 8)], [128, 64], [0, 1], "row-major"),
                                       ([(64, 6)], [128, 64], [1, 0], "powers of two")]:
        with pytest.raises(SL.SharedLayoutError, match=match):
            tlx.padded_shared_layout_encoding.with_identity_for(pairs, shape, order)


@pytest.mark.parametrize("pad", [8, 2])
def test_padded_buffers_on_the_interpreter_and_in_cuda(pad):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(128, 64, generator=g).half()
    y = torch.full((64, 128), float("nan")).half()
    tlxc.interpret(padded_transpose)[(1,)](x, y, 100, R=128, C=64, PAD=pad)
    expected = (x * 2).t().clone()
    expected[:, 100:] = 0
    assert torch.equal(y, expected)
    compiled = padded_transpose.compile(constexprs={"R": 128, "C": 64, "PAD": pad}, arch="sm_90a",
                                        stages=("ir", "cuda", "cubin"))
    cuda = compiled.asm["cuda"]
    assert f"rows of 64 elements padded to {64 + pad}" in cuda
    assert f"* {64 + pad}" in cuda                                # the row stride of every access
    assert f"{128 * (64 + pad)}" in cuda                          # the second buffer one padded buffer on
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


@tlxc.kernel
def padded_misuse(x_desc, y_ptr: F16, CASE: tl.constexpr):
    pad: tl.constexpr = tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)], [64, 64], [1, 0])
    bufs = tlx.local_alloc((64, 64), tl.float16, 1, layout=pad)
    if CASE == 0:
        bar = tlx.alloc_barriers(1)
        tlx.barrier_expect_bytes(bar[0], 64 * 64 * 2)
        tlx.async_descriptor_load(x_desc, bufs[0], [0, 0], bar[0])  # CASE 0
        tlx.barrier_wait(bar[0], 0)
    elif CASE == 1:
        other = tlx.local_alloc((64, 64), tl.float16, 1, reuse=bufs)  # noqa: F841
    v = tlx.local_load(bufs[0])
    r, c = tl.arange(0, 64), tl.arange(0, 64)
    tl.store(y_ptr + r[:, None] * 64 + c[None, :], v)


@pytest.mark.parametrize("case, match", [(0, "reads or writes dense boxes"), (1, "cannot share its bytes")])
def test_padded_buffers_refuse_tma_and_aliases(case, match):
    x = torch.zeros(64, 64).half()
    args = {"x_desc": tlxc.TensorDescriptor.from_tensor(x, [64, 64]), "y_ptr": torch.zeros(64, 64).half(),
            "CASE": case}
    from tlxc.compiler import compile_kernel
    from tlxc.frontend.specialize import specialization_from_args
    with pytest.raises((LayoutError, CompilationError), match=match) as info:
        compile_kernel(padded_misuse, specialization_from_args(padded_misuse, args), arch="sm_90a",
                       stages=("ir", "ir.opt"))
    assert "test_tlx_layout_requests.py" in str(info.value)


@pytest.mark.gpu
@pytest.mark.parametrize("pad", [8, 2])
def test_gpu_padded_buffers(pad):
    x = torch.randn(128, 64, device="cuda").half()
    y = torch.full((64, 128), float("nan"), device="cuda").half()
    padded_transpose[(1,)](x, y, 100, R=128, C=64, PAD=pad)
    torch.cuda.synchronize()
    expected = (x * 2).t().clone()
    expected[:, 100:] = 0
    assert torch.equal(y, expected)
