"""``tl.dot_scaled`` (microscaled operands, ue8m0 scales per 32 K elements): each operand scaled
and rounded to bfloat16 (exact for fp8), then ``tl.dot`` in float32.  The interpreter against a
float64 reference built from the values and the scales, sm_90a / sm_100a cubins, refusals."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.errors import TlxcError
from tlxc.frontend.specialize import specialization_from_types
from tlxc.interpreter import interpret


@tlxc.kernel
def scaled_dot(a_ptr, sa_ptr, b_ptr, sb_ptr, c_ptr: tl.pointer_type(tl.float32), M: tl.int32,
               BM: tl.constexpr = 64, N: tl.constexpr = 64, K: tl.constexpr = 128, FA: tl.constexpr = "e4m3",
               FB: tl.constexpr = "e4m3", SCALED: tl.constexpr = True):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    ks = tl.arange(0, K)
    kb = tl.arange(0, K // 32)
    ns = tl.arange(0, N)
    a = tl.load(a_ptr + rows[:, None] * K + ks[None, :], mask=rows[:, None] < M, other=0.0)
    b = tl.load(b_ptr + ks[:, None] * N + ns[None, :])
    acc = tl.full((BM, N), 1.0, tl.float32)
    if SCALED:
        sa = tl.load(sa_ptr + rows[:, None] * (K // 32) + kb[None, :], mask=rows[:, None] < M, other=127)
        sb = tl.load(sb_ptr + ns[:, None] * (K // 32) + kb[None, :])
        c = tl.dot_scaled(a, sa, FA, b, sb, FB, acc)
    else:
        c = tl.dot_scaled(a, None, FA, b, None, FB, acc)
    tl.store(c_ptr + rows[:, None] * N + ns[None, :], c, mask=rows[:, None] < M)


_DT = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "bf16": torch.bfloat16}


def _case(fa, fb, M=100, N=64, K=128, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).to(_DT[fa])
    b = torch.randn(K, N, generator=g).to(_DT[fb])
    sa = torch.randint(118, 137, (M, K // 32), generator=g, dtype=torch.int32).to(torch.uint8)
    sb = torch.randint(118, 137, (N, K // 32), generator=g, dtype=torch.int32).to(torch.uint8)
    return a, sa, b, sb


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("fa, fb", [("e4m3", "e4m3"), ("e5m2", "e4m3")])
def test_matches_float64(fa, fb, arch):
    M, N, K = 100, 64, 128                       # M not a multiple of the 64-row tile
    a, sa, b, sb = _case(fa, fb, M, N, K)
    c = torch.full((M, N), float("nan"))
    interpret(scaled_dot, (2,), (a, sa, b, sb, c, M), {"FA": fa, "FB": fb}, arch=arch)
    ref = (1.0 + (a.double() * torch.pow(2.0, sa.double() - 127).repeat_interleave(32, dim=1))
           @ (b.double() * torch.pow(2.0, sb.double() - 127).repeat_interleave(32, dim=1).T))
    assert ((c.double() - ref).abs().max() / ref.abs().max()).item() < 1e-5


def test_fp8_operands_may_be_their_uint8_bytes():
    """Triton's tests pass fp8 operands as uint8 views; the bytes are the format's values."""
    M, N, K = 64, 64, 128
    a, sa, b, sb = _case("e4m3", "e5m2", M, N, K, seed=3)
    c_typed, c_bytes = torch.full((M, N), float("nan")), torch.full((M, N), float("nan"))
    interpret(scaled_dot, (1,), (a, sa, b, sb, c_typed, M), {"FA": "e4m3", "FB": "e5m2"})
    interpret(scaled_dot, (1,), (a.view(torch.uint8), sa, b.view(torch.int8), sb, c_bytes, M),
              {"FA": "e4m3", "FB": "e5m2"})
    assert torch.equal(c_typed, c_bytes)


_FP4 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
                    dtype=torch.float64)       # e2m1 code -> value (sign bit 3, exponent bits 2:1, mantissa bit 0)


def _pack_fp4(codes: torch.Tensor, dim: int) -> torch.Tensor:
    """Two 4-bit codes a byte along ``dim``, the first in the low nibble."""
    first = codes.narrow(dim, 0, codes.shape[dim] // 2 * 2).unfold(dim, 2, 2)
    return (first[..., 0] | (first[..., 1] << 4)).to(torch.uint8)


@tlxc.kernel
def fp4_dot(a_ptr, sa_ptr, b_ptr, sb_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
            A_ROWS: tl.constexpr, A_COLS: tl.constexpr, B_ROWS: tl.constexpr, B_COLS: tl.constexpr,
            A_KPACK: tl.constexpr, B_KPACK: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, A_ROWS)[:, None] * A_COLS + tl.arange(0, A_COLS)[None, :])
    b = tl.load(b_ptr + tl.arange(0, B_ROWS)[:, None] * B_COLS + tl.arange(0, B_COLS)[None, :])
    kb = tl.arange(0, K // 32)
    sa = tl.load(sa_ptr + tl.arange(0, M)[:, None] * (K // 32) + kb[None, :])
    sb = tl.load(sb_ptr + tl.arange(0, N)[:, None] * (K // 32) + kb[None, :])
    c = tl.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", lhs_k_pack=A_KPACK, rhs_k_pack=B_KPACK)
    tl.store(c_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


@pytest.mark.parametrize("a_kpack, b_kpack", [(True, True), (False, False), (True, False)])
def test_packed_fp4_matches_float64(a_kpack, b_kpack):
    M, N, K = 32, 64, 64
    g = torch.Generator().manual_seed(9)
    ca = torch.randint(0, 16, (M, K), generator=g)
    cb = torch.randint(0, 16, (K, N), generator=g)
    sa = torch.randint(120, 134, (M, K // 32), generator=g, dtype=torch.int32).to(torch.uint8)
    sb = torch.randint(120, 134, (N, K // 32), generator=g, dtype=torch.int32).to(torch.uint8)
    a = _pack_fp4(ca, 1 if a_kpack else 0)
    b = _pack_fp4(cb, 0 if b_kpack else 1)
    c = torch.full((M, N), float("nan"))
    interpret(fp4_dot, (1,), (a, sa, b, sb, c), {"M": M, "N": N, "K": K, "A_ROWS": a.shape[0], "A_COLS": a.shape[1],
                                                 "B_ROWS": b.shape[0], "B_COLS": b.shape[1], "A_KPACK": a_kpack,
                                                 "B_KPACK": b_kpack})
    ref = ((_FP4[ca] * torch.pow(2.0, sa.double() - 127).repeat_interleave(32, dim=1))
           @ (_FP4[cb] * torch.pow(2.0, sb.double() - 127).repeat_interleave(32, dim=1).T))
    assert ((c.double() - ref).abs().max() / ref.abs().max()).item() < 1e-6


def test_a_float16_operand_keeps_its_mantissa():
    """e4m3 x fp16: both go to the tensor cores as float16 (bfloat16 would drop 3 bits of the fp16)."""
    M, N, K = 64, 64, 128
    g = torch.Generator().manual_seed(21)
    a = torch.randn(M, K, generator=g).to(torch.float8_e4m3fn)
    sa = torch.randint(124, 130, (M, K // 32), generator=g, dtype=torch.int32).to(torch.uint8)
    b = torch.randn(K, N, generator=g).half()
    c = torch.full((M, N), float("nan"))
    interpret(scaled_dot, (1,), (a, sa, b, sa, c, M), {"FA": "e4m3", "FB": "fp16", "SCALED": False})
    ref = 1.0 + a.double() @ b.double()
    assert ((c.double() - ref).abs().max() / ref.abs().max()).item() < 1e-6


def test_unscaled_bf16():
    M = 64
    a, _, b, _ = _case("bf16", "bf16", M)
    c = torch.full((M, 64), float("nan"))
    interpret(scaled_dot, (1,), (a, a, b, b, c, M), {"FA": "bf16", "FB": "bf16", "SCALED": False})
    ref = 1.0 + a.double() @ b.double()
    assert ((c.double() - ref).abs().max() / ref.abs().max()).item() < 1e-5


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_compiles(arch):
    types = {"a_ptr": tl.pointer_type(tl.float8e4nv), "sa_ptr": tl.pointer_type(tl.uint8),
             "b_ptr": tl.pointer_type(tl.float8e4nv), "sb_ptr": tl.pointer_type(tl.uint8)}
    spec = specialization_from_types(scaled_dot, types, {})
    try:
        compiled = compile_kernel(scaled_dot, spec, arch=arch, num_warps=4, stages=("ir", "ir.opt", "cuda", "cubin"))
    except TlxcError as exc:                        # NVRTC missing: the IR stages still ran
        if "NVRTC" not in str(exc) and "cuda-bindings" not in str(exc):
            raise
        pytest.skip(str(exc))
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


@pytest.mark.parametrize("fmt, text", [
    ("e2m1", "lhs must be a 2-D uint8 tensor of packed fp4 pairs for lhs_format='e2m1'"),
    ("e3m4", "lhs_format must be 'e2m1', 'e4m3', 'e5m2', 'bf16' or 'fp16'"),
    ("e5m2", "lhs must be a 2-D f8e5m2 tensor (or its uint8 bytes, for fp8) for lhs_format='e5m2'"),
])
def test_refusals(fmt, text):
    a, sa, b, sb = _case("e4m3", "e4m3", 64)
    c = torch.zeros(64, 64)
    with pytest.raises(TlxcError, match=text.replace("(", r"\(").replace(")", r"\)")):
        interpret(scaled_dot, (1,), (a, sa, b, sb, c, 64), {"FA": fmt})


@pytest.mark.gpu
@pytest.mark.parametrize("fa, fb", [("e4m3", "e4m3"), ("e5m2", "e4m3")])
def test_gpu_matches_float64(fa, fb):
    """The decomposition on the device (sm_90a: bf16 wgmma after the scaling)."""
    M, N, K = 100, 64, 128
    a, sa, b, sb = _case(fa, fb, M, N, K, seed=4)
    c = torch.full((M, N), float("nan"), device="cuda")
    scaled_dot[(2,)](a.cuda(), sa.cuda(), b.cuda(), sb.cuda(), c, M, FA=fa, FB=fb)
    ref = (1.0 + (a.double() * torch.pow(2.0, sa.double() - 127).repeat_interleave(32, dim=1))
           @ (b.double() * torch.pow(2.0, sb.double() - 127).repeat_interleave(32, dim=1).T))
    assert ((c.cpu().double() - ref).abs().max() / ref.abs().max()).item() < 1e-5
