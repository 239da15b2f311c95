"""wgmma with an A read from shared memory into registers (``a = tlx.local_load(a_smem)``, then
``tlx.async_dot(a, b, acc)``): a load whose every use is a wgmma's register A takes the operand
layout itself (``infer-layouts``, ``wgmma_a_of``), so the codegen reads the fragments with
``ldmatrix`` (``.trans`` for an M-major A) instead of a coalesced load and a conversion through
scratch (the attention backward's K and V fragments).
Checked on the interpreter, the CUDA text (ldmatrix, no scratch), the text under the host
emulation and, with the ``gpu`` marker, on the GPU, against float64."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.codegen_nvptx.emu import run as emu
from tlxc.language import tlx
from tlxc.runtime.warmup import cuda_source


@tlxc.kernel
def one_a_two_products(a_ptr, b_ptr, c_ptr, t_ptr, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr,
                       TAIL: tl.constexpr, A_MMAJOR: tl.constexpr):
    """c = a @ b[:, :N], t = a @ b[:, N:N + TAIL]: a [M, K] (stored [K, M] when ``A_MMAJOR``), b
    [K, N + TAIL] row-major, both products from one register copy of a."""
    rm = tl.arange(0, M)
    rk = tl.arange(0, K)
    rn = tl.arange(0, N)
    rt = tl.arange(0, TAIL)
    b_main = tlx.local_alloc((K, N), tl.bfloat16, 1)
    b_tail = tlx.local_alloc((K, TAIL), tl.bfloat16, 1)
    tlx.local_store(b_main[0], tl.load(b_ptr + rk[:, None] * (N + TAIL) + rn[None, :]))
    tlx.local_store(b_tail[0], tl.load(b_ptr + rk[:, None] * (N + TAIL) + N + rt[None, :]))
    if A_MMAJOR:
        a_smem = tlx.local_alloc((K, M), tl.bfloat16, 1)
        tlx.local_store(a_smem[0], tl.load(a_ptr + rk[:, None] * M + rm[None, :]))
        a_view = tlx.local_trans(a_smem[0])
    else:
        a_smem = tlx.local_alloc((M, K), tl.bfloat16, 1)
        tlx.local_store(a_smem[0], tl.load(a_ptr + rm[:, None] * K + rk[None, :]))
        a_view = a_smem[0]
    tlx.fence("async_shared")
    a = tlx.local_load(a_view)
    c = tlx.async_dot(a, b_main[0], tl.zeros((M, N), dtype=tl.float32))
    t = tlx.async_dot(a, b_tail[0], tl.zeros((M, TAIL), dtype=tl.float32))
    c = tlx.async_dot_wait(0, c)
    t = tlx.async_dot_wait(0, t)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)
    tl.store(t_ptr + rm[:, None] * TAIL + rt[None, :], t)


CASES = [(64, 64, 128, 32, False), (128, 64, 64, 16, False), (64, 64, 128, 32, True)]


def _case(M, K, N, TAIL, mmajor, seed=0):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=gen).to(torch.bfloat16)
    b = torch.randn(K, N + TAIL, generator=gen).to(torch.bfloat16)
    ref = a.double() @ b.double()
    stored = a.t().contiguous() if mmajor else a
    c = torch.full((M, N), float("nan"))
    t = torch.full((M, TAIL), float("nan"))
    meta = {"M": M, "K": K, "N": N, "TAIL": TAIL, "A_MMAJOR": mmajor}
    return [stored, b, c, t], meta, ref


def _close(c, t, ref, N):
    for got, want in ((c, ref[:, :N]), (t, ref[:, N:])):
        err = (got.double() - want).abs().max().item()
        assert err <= 1e-3 * want.abs().max().item(), err


@pytest.mark.parametrize("M,K,N,TAIL,mmajor", CASES)
def test_interpreter_matches_float64(M, K, N, TAIL, mmajor):
    args, meta, ref = _case(M, K, N, TAIL, mmajor)
    tlxc.interpret(one_a_two_products, (1,), args, meta)
    _close(args[2], args[3], ref, N)


@pytest.mark.parametrize("M,K,N,TAIL,mmajor", CASES)
def test_sm90a_text_reads_a_with_ldmatrix_and_no_scratch(M, K, N, TAIL, mmajor):
    args, meta, _ = _case(M, K, N, TAIL, mmajor)
    text = cuda_source(one_a_two_products, args, dict(meta, num_warps=4), (1,), "sm_90a")
    helper = "tlx_ldmatrix_x4_trans(" if mmajor else "tlx_ldmatrix_x4("
    body = text[text.index("__global__"):]
    assert helper in body
    assert "tlx_scratch" not in body         # no conversion of the loaded A
    assert body.count("_rs<") >= 2 or body.count("_rs(") >= 2      # both products take A from registers


@pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
@pytest.mark.parametrize("M,K,N,TAIL,mmajor", CASES)
def test_cuda_text_matches_float64_on_the_emulation(M, K, N, TAIL, mmajor):
    args, meta, ref = _case(M, K, N, TAIL, mmajor)
    text = cuda_source(one_a_two_products, args, dict(meta, num_warps=4), (1,), "sm_90a")
    emu.build(text).run(dict(zip(("a_ptr", "b_ptr", "c_ptr", "t_ptr"), args)), grid=(1,), threads=128)
    _close(args[2], args[3], ref, N)


@pytest.mark.gpu
@pytest.mark.parametrize("M,K,N,TAIL,mmajor", CASES)
def test_gpu_matches_float64(M, K, N, TAIL, mmajor):
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    args, meta, ref = _case(M, K, N, TAIL, mmajor)
    args = [x.cuda() for x in args]
    one_a_two_products[(1,)](*args, num_warps=4, **meta)
    _close(args[2].cpu(), args[3].cpu(), ref, N)
