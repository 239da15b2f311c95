"""``tlx.fast_exp2``: ``2 ** x`` with every k-th register of a thread on the FMA pipe (a polynomial,
``tlx_exp2_fma_f32``) and the rest on ``ex2.approx``.  The interpreter computes ``2 ** x``; the CUDA
text runs on the host emulation (the polynomial as written: relative error <= 7.5e-5, 0 below
2^-125, infinity from 128, NaN kept) and, marked gpu, on the GPU."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.codegen_nvptx.emu import run as emu
from tlxc.errors import CompilationError
from tlxc.language import tlx

SPECIAL = [float("-inf"), -1e30, -200.0, -126.0, -125.5, -125.0, -0.5, -0.25, 0.0, 0.5, 1.0, 100.0, 127.5, 128.0,
           1e30, float("inf"), float("nan")]


@tlxc.kernel
def exp2_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVERY: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, tlx.fast_exp2(x, EVERY), mask=offs < n)


def _inputs(n=2000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, generator=gen, dtype=torch.float64) * -140 + 10       # [-130, 10]: softmax's range and more
    x[:len(SPECIAL)] = torch.tensor(SPECIAL, dtype=torch.float64)
    return x.float()


def _check(x, y):
    want = torch.exp2(x.double())
    huge = torch.isinf(want.float())                    # past float32's range (x >= 128): infinity
    tiny = want.abs() < 2.0 ** -125                     # flushed (0) or kept: either is within 2^-125
    finite = torch.isfinite(want) & ~tiny & ~huge
    rel = ((y.double() - want).abs() / want)[finite]
    assert rel.max().item() <= 8e-5, rel.max().item()
    assert (y.double()[tiny].abs() < 2.0 ** -124).all()
    assert (y[huge] == float("inf")).all()
    assert torch.isnan(y[torch.isnan(x)]).all()


def test_interpreter_is_exp2():
    x = _inputs()
    y = torch.full_like(x, float("nan"))
    tlxc.interpret(exp2_kernel, (2,), (x, y, x.numel()), {"BLOCK": 1024, "EVERY": 4})
    _check(x, y)


def test_the_text_sends_every_kth_register_to_the_polynomial():
    x = _inputs()
    cuda = exp2_kernel.warmup(x, x, x.numel(), grid=(2,), arch="sm_90a", BLOCK=1024, EVERY=4).asm["cuda"]
    assert "% 4 == 3 ? tlx_exp2_fma_f32(" in cuda and "tlx_ex2_approx_ftz_f32(" in cuda


@pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
@pytest.mark.parametrize("every", [2, 8])
def test_cuda_text_on_the_emulation(every):
    x = _inputs(seed=every)
    y = torch.full_like(x, float("nan"))
    handle = exp2_kernel.warmup(x, y, x.numel(), grid=(2,), arch="sm_90a", BLOCK=1024, EVERY=every)
    emu.build(handle.asm["cuda"]).run({"x_ptr": x, "y_ptr": y, "n": x.numel()}, grid=(2,), threads=128)
    _check(x, y)
    exact = torch.exp2(x.double()).float()
    ok = torch.isfinite(exact) & (exact != 0)
    assert (y[ok] != exact[ok]).any(), "no element took the polynomial"


def test_arguments_are_checked():
    x = _inputs()
    with pytest.raises(CompilationError, match="'fma_every' must be at least 2"):
        exp2_kernel.warmup(x, x, x.numel(), grid=(2,), arch="sm_90a", BLOCK=1024, EVERY=1)
    xb = x.to(torch.bfloat16)
    with pytest.raises(CompilationError, match="tlx.fast_exp2 takes float32 values, got bf16"):
        exp2_kernel.warmup(xb, xb, x.numel(), grid=(2,), arch="sm_90a", BLOCK=1024, EVERY=4)


@pytest.mark.gpu
def test_gpu():
    x = _inputs(seed=3).cuda()
    y = torch.full_like(x, float("nan"))
    exp2_kernel[(2,)](x, y, x.numel(), BLOCK=1024, EVERY=4)
    _check(x.cpu(), y.cpu())


@pytest.mark.parametrize("fp8", [False, True], ids=["bf16", "fp8"])
@pytest.mark.parametrize("D,causal", [(64, True), (128, False)])
def test_attention_with_exp_fma_on_the_interpreter(D, causal, fp8):
    import dataclasses
    import importlib

    from attention_checks import check_attention, check_fp8_attention, fp8_inputs
    A = importlib.import_module("tlxc.ops.attention")
    c = dataclasses.replace(A.choose_config(D, causal, 130), exp_fma=4)
    if fp8:
        q, k, v = fp8_inputs((1, 2, 130, D), (1, 1, 130, D), torch.float8_e4m3fn)
        o, lse = A.attention_forward(q, k, v, causal=causal, config=c)
        check_fp8_attention(o, lse, q, k, v, causal=causal)
    else:
        q, k, v = (torch.randn(1, 2, 130, D).to(torch.bfloat16) for _ in range(3))
        o, lse = A.attention_forward(q, k, v, causal=causal, config=c)
        check_attention(o, lse, *A.reference(q, k, v, causal=causal), torch.bfloat16)


@pytest.mark.gpu
@pytest.mark.parametrize("fp8", [False, True], ids=["bf16", "fp8"])
@pytest.mark.parametrize("every", [4, 8])
@pytest.mark.parametrize("D,causal,S", [(64, True, 1000), (64, False, 4096), (128, False, 1500), (256, True, 700)])
def test_gpu_attention_with_exp_fma(D, causal, S, every, fp8):
    import dataclasses
    import importlib

    from attention_checks import check_attention, check_fp8_attention, fp8_inputs
    A = importlib.import_module("tlxc.ops.attention")
    c = dataclasses.replace(A.choose_config(D, causal, S), exp_fma=every)
    if fp8:
        q, k, v = fp8_inputs((2, 4, S, D), (2, 2, S, D), torch.float8_e4m3fn, device="cuda")
        o, lse = A.attention_forward(q, k, v, causal=causal, config=c)
        check_fp8_attention(o, lse, q, k, v, causal=causal)
    else:
        q, k, v = (torch.randn(2, 4, S, D, device="cuda").to(torch.bfloat16) for _ in range(3))
        o, lse = A.attention_forward(q, k, v, causal=causal, config=c)
        check_attention(o, lse, *A.reference(q, k, v, causal=causal), torch.bfloat16, lse_tol=1e-3)
