"""``tlxc.ops.matmul(..., use_fast_accum=False)``: fp8 products summed per k-step in their own
wgmma accumulator and added to a float32 one (cuBLAS's default for fp8; ``torch._scaled_mm``'s
``use_fast_accum`` spelling), on the WS kernel (a second accumulator, ``PROMOTE``) and the pointer
kernel (``tl.dot(..., max_num_imprecise_acc=BLOCK_K)``).  On the CPU the interpreter sums in float32
either way, so these tests check the plumbing and the results; the precision itself is the GPU's
(``test_gpu_promoted_fp8_is_as_precise_as_cublas``)."""
from __future__ import annotations

import pytest
import torch

from tlxc.ops import CONFIGS, matmul
from tlxc.ops import matmul_configs as cfgs
from tlxc.ops.matmul import chosen_config, compile_config


def _rel(out, ref):
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def _fp8(M, N, K, seed, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(M, K, generator=g) * 4).to(torch.float8_e4m3fn).to(device)
    w = (torch.randn(N, K, generator=g) * 4).to(torch.float8_e4m3fn).to(device)
    return a, w


@pytest.mark.parametrize("config", [None, "ws8_128x128x128_s4", "ws8_128x256x128_s3", "dot8_64x128x128_s4_w4",
                                    "dot8_64x128x128_s4_w4_k4", "dot_64x64x128_s5_w4"])
def test_promoted_fp8_matches_float64_on_the_interpreter(config):
    M, N, K = (70, 136, 1100) if config and CONFIGS[config].split_k > 1 else (200, 392, 400)   # K: partial k-steps
    a, w = _fp8(M, N, K, seed=11)
    out = torch.full((M, N), float("nan"))
    matmul(a, w.t(), out, config=config, use_fast_accum=False)
    assert _rel(out, a.double() @ w.double().t()) < 1e-6


def test_configurations_whose_two_accumulators_do_not_fit_are_refused():
    a, w = _fp8(256, 512, 256, seed=12)
    with pytest.raises(ValueError, match=r"dot_128x256x64_s3_w8.*use_fast_accum=False keeps a second accumulator.*"
                                         r"256 registers a thread, where 128 fit"):
        matmul(a, w.t(), config="dot_128x256x64_s3_w8", use_fast_accum=False)
    matmul(a, w.t(), config="dot_128x256x64_s3_w8")                  # fast accumulation: one accumulator


def test_a_256_wide_ws_tile_promotes_in_two_halves():
    """128 + 64 registers a thread (the sum and one 128-column half's products), not 128 x 2."""
    c = CONFIGS["ws8_128x256x128_s3"]
    assert cfgs.accumulator_registers(c) == 128 and cfgs.promoted_registers(c) == 192
    assert cfgs.supports(c, cfgs.Problem(4096, 4096, 4096, elt=1, b_kmajor=True, fp8=True, promote=True)) is None


@pytest.mark.parametrize("M,N,K", [(8192, 8192, 8192), (4096, 4096, 4096), (2048, 14336, 4096), (128, 4096, 4096),
                                   (1024, 1024, 1024)])
@pytest.mark.parametrize("card", ["", "H100"])
def test_the_heuristic_picks_a_configuration_that_can_promote(M, N, K, card):
    p = cfgs.Problem(M, N, K, elt=1, b_kmajor=True, fp8=True, card=card, promote=True)
    c = cfgs.choose_config(p)
    assert cfgs.supports(c, p) is None, c.name
    assert cfgs.promoted_registers(c) <= cfgs.promote_limit(c)
    a = torch.empty(M, K).to(torch.float8_e4m3fn)
    w = torch.empty(N, K).to(torch.float8_e4m3fn)
    if not card:
        assert cfgs.supports(chosen_config(a, w.t(), use_fast_accum=False),
                             cfgs.Problem(M, N, K, elt=1, b_kmajor=True, fp8=True, promote=True)) is None


def test_use_fast_accum_is_a_bool_and_changes_nothing_for_16_bit_operands():
    g = torch.Generator().manual_seed(13)
    a, b = torch.randn(64, 96, generator=g).bfloat16(), torch.randn(96, 80, generator=g).bfloat16()
    assert torch.equal(matmul(a, b, use_fast_accum=False), matmul(a, b))
    with pytest.raises(TypeError, match="use_fast_accum must be a bool"):
        matmul(a, b, use_fast_accum="no")


def test_the_custom_op_takes_use_fast_accum():
    """Through ``torch.ops.tlxc.matmul`` (a bias that requires grad records the call)."""
    a, w = _fp8(40, 72, 160, seed=14)
    bias = torch.randn(72, requires_grad=True)
    out = matmul(a, w.t(), bias=bias, out_dtype=torch.float32, use_fast_accum=False)
    assert out.grad_fn is not None
    assert _rel(out.detach(), a.double() @ w.double().t() + bias.detach().double()) < 1e-6
    out.sum().backward()
    assert torch.allclose(bias.grad, torch.full((72,), 40.0))


@pytest.mark.slow
def test_promoted_kernels_compile_without_spills():
    a, w = _fp8(1024, 1024, 1024, seed=15)
    (ws,) = compile_config("ws8_128x128x128_s4", a, w.t(), use_fast_accum=False)
    assert ws.n_spills == 0
    assert ws.asm["cuda"].count("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3") >= 1
    (wide,) = compile_config("ws8_128x256x128_s3", a, w.t(), use_fast_accum=False)
    assert wide.n_spills == 0
    assert "m64n256k32" not in wide.asm["cuda"] and "m64n128k32.f32.e4m3.e4m3" in wide.asm["cuda"]
    (dot,) = compile_config("dot8_64x128x128_s4_w4", a, w.t(), use_fast_accum=False)
    assert dot.n_spills == 0 and "max_num_imprecise_acc: runs of 4 k-step(s)" in dot.asm["cuda"]


@pytest.mark.gpu
@pytest.mark.parametrize("config", [None, "ws8_128x128x128_s4", "ws8_128x256x128_s3", "dot8_64x128x128_s4_w4",
                                    "dot8_64x128x128_s4_w4_k4"])
def test_gpu_promoted_fp8_is_as_precise_as_cublas(config):
    """Against float64: use_fast_accum=False within 1.5x cuBLAS's default (promoted) error, and
    well under the fast accumulation's (H100, session 28: 1.3e-4 vs 1.3e-3 at 4096^3)."""
    M, N, K = (128, 1024, 8192) if config and CONFIGS[config].split_k > 1 else (2000, 2048, 4096)
    a, w = _fp8(M, N, K, seed=16, device="cuda")
    ref = a.double() @ w.double().t()
    one = torch.ones((), device="cuda")
    cublas = torch._scaled_mm(a, w.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
    precise = matmul(a, w.t(), out_dtype=torch.float32, config=config, use_fast_accum=False)
    fast = matmul(a, w.t(), out_dtype=torch.float32, config=config)
    err, cublas_err, fast_err = _rel(precise, ref), _rel(cublas, ref), _rel(fast, ref)
    assert err < 1.5 * cublas_err + 1e-7, f"promoted {err:.2e} vs cuBLAS {cublas_err:.2e}"
    assert err < 0.5 * fast_err, f"promoted {err:.2e} vs fast {fast_err:.2e}"
