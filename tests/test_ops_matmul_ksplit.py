"""64-row WS tiles whose two consumers take alternate k-steps (``ksplit``, session 33): the shape
cuBLAS runs at short M (``nvjet_sm90_tst_64x32_64x16``, fp8 ``qqtst_64x64_128x13``). On the
interpreter against float32 math on odd shapes (ragged M and N, K an odd number of steps so that
consumer 0 takes one more, K below one step so that consumer 1 takes none), both operand
major-nesses, the epilogue, fp8 with scales; what they compile to; where they are refused; and
on the GPU."""
from __future__ import annotations

import pytest
import torch
from matmul_checks import fp8_scaled_error, operands

from tlxc.ops import CONFIGS, matmul
from tlxc.ops import matmul_configs as cfgs
from tlxc.ops.matmul import compile_config

KSPLIT = [n for n, c in sorted(CONFIGS.items()) if c.ksplit]
BF16 = [n for n in KSPLIT if not CONFIGS[n].fp8]
FP8 = [n for n in KSPLIT if CONFIGS[n].fp8]


def test_the_table_has_bf16_and_fp8_ksplit_tiles():
    assert BF16 and FP8
    for n in KSPLIT:
        c = CONFIGS[n]
        assert c.bm == 64 and c.sub_m == 64 and c.consumers == 2 and n.endswith("_ks")


@pytest.mark.parametrize("config", BF16)
@pytest.mark.parametrize("shape", [(70, 100, 328), (64, 136, 600), (130, 40, 40), (24, 40, 200)])
@pytest.mark.parametrize("a_mmajor,b_kmajor", [(False, True), (True, False)])
def test_ksplit_tiles_on_odd_shapes_with_the_epilogue(config, shape, a_mmajor, b_kmajor):
    """K = 328 / 600: 6 / 10 steps of 64, the last partial (TMA zero-fill); K = 200: 4 steps; K = 40:
    one step, consumer 1 adds a zero sum; ragged M (24, 70, 130) and N; bias + GELU into NaN."""
    M, N, K = shape
    a, b = operands(M, N, K, a_mmajor=a_mmajor, b_kmajor=b_kmajor, seed=M * N + K)
    bias = torch.randn(N).to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    matmul(a, b, out, bias=bias, activation="gelu", config=config)
    ref = torch.nn.functional.gelu(a.double() @ b.double() + bias.double())
    assert torch.isfinite(out).all(), "poison left in the output"
    assert ((out.double() - ref).norm() / ref.norm()).item() < 8e-3


@pytest.mark.parametrize("config", FP8)
@pytest.mark.parametrize("K", [592, 112])
def test_fp8_ksplit_tiles_with_scales(config, K):
    """fp8 (128 bytes of K a step): K = 592 is five steps (consumer 0 three, consumer 1 two), the
    last partial; K = 112 is one; row-wise scales of A, a tensor scale of B."""
    assert fp8_scaled_error(config, 100, 72, K, seed=K) < 8e-3


@pytest.mark.parametrize("config", KSPLIT)
def test_ksplit_tiles_compile_within_shared_memory(config):
    """sm_90a at the shapes they are for (bf16 M = 64, fp8 M = 128, K-major weights): no spills,
    shared memory under the limit and under the host's estimate (which ``supports`` refuses by)."""
    c = CONFIGS[config]
    M, N, K = (128, 4096, 4096) if c.fp8 else (64, 4096, 4096)
    dtype = torch.float8_e4m3fn if c.fp8 else torch.bfloat16
    a, w = torch.empty(M, K, dtype=dtype), torch.empty(N, K, dtype=dtype)
    kw = {"scale_a": torch.ones(1), "scale_b": torch.ones(1)} if c.fp8 else {}
    (h,) = compile_config(config, a, w.t(), **kw)
    assert h.constexprs["KSPLIT"] is True and h.n_spills == 0
    assert h.metadata.shared <= cfgs.ws_shared_bytes(c, 1 if c.fp8 else 2, 2) <= cfgs.SHARED_LIMIT


def test_ksplit_takes_a_64_row_tile_without_cluster_or_tail():
    with pytest.raises(AssertionError, match="ksplit: a 64-row tile"):
        cfgs._ws(128, 64, 8, ksplit=True)
    with pytest.raises(AssertionError, match="ksplit: a 64-row tile"):
        cfgs._ws(64, 80, 8, subtile=1, ksplit=True)
    with pytest.raises(AssertionError, match="ksplit: a 64-row tile"):
        cfgs._ws(64, 64, 8, ksplit=True, cluster_m=2)           # a stacked pair would share B


def test_the_heuristic_does_not_pick_unmeasured_ksplit_tiles():
    for M, N, K in [(64, 4096, 4096), (16, 14336, 4096), (128, 4096, 4096), (64, 8192, 8192)]:
        for fp8 in (False, True):
            p = cfgs.Problem(M, N, K, 1 if fp8 else 2, 2, b_kmajor=True, fp8=fp8)
            assert not cfgs.choose_config(p).ksplit


@pytest.mark.gpu
@pytest.mark.parametrize("config", BF16)
@pytest.mark.parametrize("shape,b_kmajor", [((64, 4096, 4096), True), ((64, 4096, 4096), False),
                                            ((37, 1000, 520), True), ((130, 300, 72), False)])
def test_gpu_ksplit_tiles(config, shape, b_kmajor):
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    M, N, K = shape
    a, b = operands(M, N, K, b_kmajor=b_kmajor, seed=K, device="cuda")
    bias = torch.randn(N, device="cuda").to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    matmul(a, b, out, bias=bias, activation="gelu", config=config)
    ref = torch.nn.functional.gelu(a.float() @ b.float() + bias.float())
    assert torch.isfinite(out).all(), "poison left in the output"
    assert ((out.float() - ref).norm() / ref.norm()).item() < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("config", FP8)
def test_gpu_fp8_ksplit_tiles(config):
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    M, N, K = 128, 4096, 4096
    a = (torch.randn(M, K, device="cuda") * 4).to(torch.float8_e4m3fn)
    w = (torch.randn(N, K, device="cuda") * 4).to(torch.float8_e4m3fn)
    one = torch.ones(1, device="cuda")
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    matmul(a, w.t(), out, scale_a=one, scale_b=one, config=config)
    ref = a.float() @ w.float().t()
    assert torch.isfinite(out).all(), "poison left in the output"
    assert ((out.float() - ref).norm() / ref.norm()).item() < 1e-2
