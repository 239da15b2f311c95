"""wgmma with an fp8 A from registers (``tlx.async_dot(p.to(fp8), b)``): the scores of one product,
scaled and cast to fp8 in the accumulator's pattern, multiply a K-major fp8 B -- attention's
``P V`` in fp8.  Checked on the interpreter, on the CUDA text under the host emulation (where the
quad exchange of ``tlx_wgmma_a8_fragment`` runs as written) and, with the ``gpu`` marker, on the
GPU."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.codegen_nvptx.emu import run as emu
from tlxc.errors import CompilationError
from tlxc.language import tlx

FP8 = {"e4m3": (torch.float8_e4m3fn, tl.float8e4nv), "e5m2": (torch.float8_e5m2, tl.float8e5)}


@tlxc.kernel
def scores_times_b(x_ptr, y_ptr, b_ptr, out_ptr, scale, p_ptr,
                   M: tl.constexpr, D: tl.constexpr, K: tl.constexpr, N: tl.constexpr,
                   P_TYPE: tl.constexpr, B_TYPE: tl.constexpr, P_LOADED: tl.constexpr = False,
                   ORDERED: tl.constexpr = False):
    """out[M, N] = fp8(scale * x y^T) @ b^T: x [M, D], y [K, D] bf16 (S = x y^T on the tensor
    cores, x from registers: the emulation runs register-A wgmma only), b [N, K] fp8 (K-major, as
    wgmma wants an 8-bit B); P = fp8(scale * S) from registers (``P_LOADED``: P read from ``p_ptr``
    instead, fp8 values that are not a cast of float32 ones; ``ORDERED``: ``a_k_order="accumulator"``,
    out = P[:, π] @ bᵀ)."""
    ys = tlx.local_alloc((K, D), tl.bfloat16, 1)
    bs = tlx.local_alloc((N, K), B_TYPE, 1)
    rm = tl.arange(0, M)
    rk = tl.arange(0, K)
    rn = tl.arange(0, N)
    rd = tl.arange(0, D)
    x = tl.load(x_ptr + rm[:, None] * D + rd[None, :])
    tlx.local_store(ys[0], tl.load(y_ptr + rk[:, None] * D + rd[None, :]))
    tlx.local_store(bs[0], tl.load(b_ptr + rn[:, None] * K + rk[None, :]))
    tlx.fence("async_shared")
    s = tlx.async_dot(x, tlx.local_trans(ys[0]), tl.zeros((M, K), dtype=tl.float32), use_acc=False)
    s = tlx.async_dot_wait(0, s)
    if P_LOADED:
        p = tl.load(p_ptr + rm[:, None] * K + rk[None, :])
    else:
        p = (s * scale).to(P_TYPE)
    if ORDERED:
        acc = tlx.async_dot(p, tlx.local_trans(bs[0]), tl.zeros((M, N), dtype=tl.float32), a_k_order="accumulator")
    else:
        acc = tlx.async_dot(p, tlx.local_trans(bs[0]), tl.zeros((M, N), dtype=tl.float32))
    acc = tlx.async_dot_wait(0, acc)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc)


def _case(p_type="e4m3", b_type="e4m3", M=64, D=64, K=128, N=64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(M, D, generator=gen).to(torch.bfloat16)
    y = torch.randn(K, D, generator=gen).to(torch.bfloat16)
    b = (torch.randn(N, K, generator=gen) * 2).to(FP8[b_type][0])
    out = torch.full((M, N), float("nan"))
    scale = 0.25
    p = (x.double() @ y.double().T * scale).float().to(FP8[p_type][0])
    ref = p.double() @ b.double().T                    # exact in float64; the tensor cores add in f32
    meta = {"M": M, "D": D, "K": K, "N": N, "P_TYPE": FP8[p_type][1], "B_TYPE": FP8[b_type][1]}
    return (x, y, b, out, scale, p), meta, ref


def _close(out, ref):
    # P is the same fp8 value everywhere: only float32 accumulation (and, where S rounds near a
    # code boundary, one fp8 step of a P element) separates the result from float64
    err = (out.double() - ref).abs().max().item()
    assert err <= 2e-2 * ref.abs().max().item(), err


@pytest.mark.parametrize("p_type,b_type", [("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2")])
def test_interpreter_matches_float64(p_type, b_type):
    args, meta, ref = _case(p_type, b_type)
    tlxc.interpret(scores_times_b, (1,), args, meta)
    _close(args[3], ref)


@pytest.mark.parametrize("p_type,b_type", [("e4m3", "e4m3"), ("e4m3", "e5m2")])
def test_sm90a_text_exchanges_the_fragment_and_names_no_imm_trans(p_type, b_type):
    args, meta, _ = _case(p_type, b_type)
    cuda = scores_times_b.warmup(*args, grid=(1,), num_warps=4, arch="sm_90a", **meta).asm["cuda"]
    mixed = "" if p_type == b_type else f"_f8{b_type}"
    assert f"tlx_wgmma_m64n64k32_f32_f8{p_type}{mixed}_rs(" in cuda
    assert cuda.count("tlx_wgmma_a8_fragment(") == 1 + 4          # the helper and one call per k32 step
    assert f"f8{p_type}{mixed}_rs<" not in cuda                     # (8-bit B: K-major, no TB)


@pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
@pytest.mark.parametrize("p_type,b_type,N", [("e4m3", "e4m3", 128), ("e5m2", "e5m2", 64), ("e4m3", "e5m2", 64)])
def test_cuda_text_matches_float64_on_the_emulation(p_type, b_type, N):
    # (K = 128: 128-byte fp8 rows, the one swizzle the emulation reads)
    args, meta, ref = _case(p_type, b_type, K=128, N=N)
    handle = scores_times_b.warmup(*args, grid=(1,), num_warps=4, arch="sm_90a", **meta)
    emu.build(handle.asm["cuda"]).run(dict(zip(("x_ptr", "y_ptr", "b_ptr", "out_ptr", "scale", "p_ptr"), args)),
                                      grid=(1,), threads=128)
    _close(args[3], ref)


@pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
def test_loaded_fp8_a_on_the_emulation():
    """An fp8 A that is not a cast of float32 values: its bytes are packed into the source words."""
    args, meta, ref = _case("e4m3", "e4m3", K=128, N=64, seed=7)
    handle = scores_times_b.warmup(*args, grid=(1,), num_warps=4, arch="sm_90a", P_LOADED=True, **meta)
    assert "satfinite_e4m3x4" not in handle.asm["cuda"]
    emu.build(handle.asm["cuda"]).run(dict(zip(("x_ptr", "y_ptr", "b_ptr", "out_ptr", "scale", "p_ptr"), args)),
                                      grid=(1,), threads=128)
    _close(args[3], ref)


@pytest.mark.gpu
@pytest.mark.parametrize("p_type,b_type,K,N", [("e4m3", "e4m3", 128, 64), ("e5m2", "e5m2", 64, 128),
                                              ("e4m3", "e5m2", 128, 128)])
def test_gpu_matches_float64(p_type, b_type, K, N):
    args, meta, ref = _case(p_type, b_type, K=K, N=N, seed=3)
    args = tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in args)
    scores_times_b[(1,)](*args, num_warps=4, **meta)
    _close(args[3].cpu(), ref)


@tlxc.kernel
def dot_p8_v(q_ptr, k_ptr, v_ptr, out_ptr, M: tl.constexpr, D: tl.constexpr, K: tl.constexpr,
             P_TYPE: tl.constexpr):
    """Triton's fp8 attention step in plain ``tl.dot``: ``S = q kᵀ`` (bf16), ``P = fp8(S)``,
    ``out = P @ v`` with v [K, D] fp8 -- P from registers after ``register-a-operand``."""
    rm = tl.arange(0, M)
    rk = tl.arange(0, K)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    kt = tl.load(k_ptr + rk[None, :] * D + rd[:, None])
    s = tl.dot(q, kt)
    p = (s * 0.125).to(P_TYPE)
    v = tl.load(v_ptr + rk[:, None] * D + rd[None, :])
    tl.store(out_ptr + rm[:, None] * D + rd[None, :], tl.dot(p, v))


def _dot_case(p_type="e5m2", M=64, D=64, K=128, seed=0, device="cpu"):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(M, D, generator=gen).to(torch.bfloat16)
    k = torch.randn(K, D, generator=gen).to(torch.bfloat16)
    v = torch.randn(K, D, generator=gen).to(FP8[p_type][0])
    p = (q.double() @ k.double().T * 0.125).float().to(FP8[p_type][0])
    ref = p.double() @ v.double()
    out = torch.full((M, D), float("nan"))
    args = tuple(t.to(device) for t in (q, k, v, out))
    return args, {"M": M, "D": D, "K": K, "P_TYPE": FP8[p_type][1]}, ref


def test_tl_dot_takes_a_computed_fp8_a_from_registers():
    args, meta, ref = _dot_case()
    handle = dot_p8_v.warmup(*args, grid=(1,), num_warps=4, arch="sm_90a", **meta)
    assert "tlx_wgmma_a8_fragment(" in handle.asm["cuda"] and "f8e5m2_rs(" in handle.asm["cuda"]
    tlxc.interpret(dot_p8_v, (1,), args, meta)
    _close(args[3], ref)


@pytest.mark.gpu
@pytest.mark.parametrize("p_type", ["e4m3", "e5m2"])
def test_gpu_tl_dot_with_a_computed_fp8_a(p_type):
    args, meta, ref = _dot_case(p_type, seed=4, device="cuda")
    dot_p8_v[(1,)](*args, num_warps=4, **meta)
    _close(args[3].cpu(), ref)


def _ordered_case(seed=0, N=64):
    from tlxc.ir.ops.mma_async import k32_accumulator_order
    args, meta, _ = _case("e4m3", "e4m3", K=128, N=N, seed=seed)
    b, p = args[2], args[5]
    order = [32 * (k // 32) + k32_accumulator_order()[k % 32] for k in range(128)]
    ref = p.double()[:, order] @ b.double().T
    return args, {**meta, "ORDERED": True}, ref


def test_ordered_a_on_the_interpreter_and_text():
    args, meta, ref = _ordered_case()
    tlxc.interpret(scores_times_b, (1,), args, meta)
    _close(args[3], ref)
    cuda = scores_times_b.warmup(*args, grid=(1,), num_warps=4, arch="sm_90a", **meta).asm["cuda"]
    assert "tlx_wgmma_a8_fragment(" not in cuda and "f8e4m3_rs(" in cuda


@pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
def test_ordered_a_on_the_emulation():
    args, meta, ref = _ordered_case(seed=5, N=128)
    handle = scores_times_b.warmup(*args, grid=(1,), num_warps=4, arch="sm_90a", **meta)
    emu.build(handle.asm["cuda"]).run(dict(zip(("x_ptr", "y_ptr", "b_ptr", "out_ptr", "scale", "p_ptr"), args)),
                                      grid=(1,), threads=128)
    _close(args[3], ref)


def test_a_k_order_is_checked():
    args, _, _ = _case("e4m3", "e4m3")
    with pytest.raises(CompilationError, match="'a_k_order' takes .accumulator. with an fp8 A in registers"):
        bad_order.warmup(args[0], grid=(1,), num_warps=4, arch="sm_90a")


@tlxc.kernel
def bad_order(x_ptr):
    """``a_k_order`` with A in shared memory: refused at the call."""
    a = tlx.local_alloc((64, 32), tl.float8e4nv, 1)
    b = tlx.local_alloc((64, 32), tl.float8e4nv, 1)
    acc = tlx.async_dot(a[0], tlx.local_trans(b[0]), tl.zeros((64, 64), dtype=tl.float32), a_k_order="accumulator")
    acc = tlx.async_dot_wait(0, acc)
    tl.store(x_ptr + tl.arange(0, 64), tl.sum(acc, 1))


@pytest.mark.gpu
def test_gpu_ordered_a():
    args, meta, ref = _ordered_case(seed=8, N=128)
    args = tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in args)
    scores_times_b[(1,)](*args, num_warps=4, **meta)
    _close(args[3].cpu(), ref)
