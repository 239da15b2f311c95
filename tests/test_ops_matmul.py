"""tlxc.ops.matmul on the CPU: interpreter correctness of every kernel family on odd shapes
and transposed operands (float32 reference, NaN-poisoned outputs), the fused epilogue, the
configuration choice, argument errors, and every configuration compiling for sm_90a."""
from __future__ import annotations

import importlib
import json

import pytest
import torch
from matmul_checks import fp8_scaled_error

from tlxc.ops import CONFIGS, matmul
from tlxc.ops import matmul_configs as cfgs
from tlxc.ops.matmul import autotune_config, chosen_config, compile_config

BF16_TOL = 8e-3        # normwise relative error of a bf16 result: rounding alone gives ~2e-3


def _operands(M, N, K, *, a_mmajor=False, b_kmajor=False, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).to(dtype)
    if a_mmajor:
        a = a.t().contiguous().t()
    b = torch.randn(K, N, generator=g).to(dtype)
    if b_kmajor:
        b = b.t().contiguous().t()            # w.t() of a row-major [N, K] w: an nn.Linear weight
    return a, b


def _rel(out, ref):
    assert torch.isfinite(out).all(), "poison left in the output"
    return ((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()


LAYOUTS = [(False, False), (False, True), (True, False), (True, True)]


@pytest.mark.parametrize("config", ["dot_64x128x64_s4_w4", "dot_64x128x64_s4_w4_k4", "swap_64x16x128_s4_w4",
                                    "swap_128x64x64_s4_w4_k4", "dot_64x64x64_s4_w4_k4", "dot_128x64x64_s4_w4_k2",
                                    "dot_128x64x64_s4_w4_k4", "swap_64x64x64_s4_w4_k4"])
@pytest.mark.parametrize("a_mmajor,b_kmajor", LAYOUTS)
def test_pointer_kernels_on_odd_shapes(config, a_mmajor, b_kmajor):
    M, N, K = (37, 70, 555) if not CONFIGS[config].swap else (5, 70, 555)
    a, b = _operands(M, N, K, a_mmajor=a_mmajor, b_kmajor=b_kmajor)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    assert matmul(a, b, out, config=config) is out
    assert _rel(out, a.float() @ b.float()) < BF16_TOL


@pytest.mark.parametrize("M", [1, 3])
def test_decode_rows_with_a_linear_weight(M):
    """M = 1 / 3 against an nn.Linear weight (b = w.t()), the heuristic's choice."""
    a, b = _operands(M, 72, 200, b_kmajor=True, seed=M)
    out = torch.full((M, 72), float("nan"), dtype=torch.bfloat16)
    matmul(a, b, out)
    assert _rel(out, a.float() @ b.float()) < BF16_TOL


GEMV = sorted(n for n, c in CONFIGS.items() if c.kernel == "gemv")


@pytest.mark.parametrize("config", GEMV)
@pytest.mark.parametrize("N,K", [(70, 555), (300, 1030), (8, 512)])
def test_single_row_kernel_on_odd_shapes(config, N, K):
    """M = 1 against an nn.Linear weight: N not a multiple of the program's columns (wrapped
    loads, masked store), K not a multiple of the step (the masked last step; K = 512 has
    none), bias + GELU + residual + both scales, float32 output."""
    g = torch.Generator().manual_seed(N + K)
    a = torch.randn(1, K, generator=g).to(torch.bfloat16)
    w = torch.randn(N, K, generator=g).to(torch.bfloat16)
    bias, res = torch.randn(N, generator=g), torch.randn(1, N, generator=g)
    sa, sb = torch.tensor([0.5]), torch.rand(N, generator=g) + 0.5
    out = torch.full((1, N), float("nan"))
    matmul(a, w.t(), out, bias=bias, activation="gelu", residual=res, scale_a=sa, scale_b=sb, config=config)
    ref = torch.nn.functional.gelu((a.float() @ w.float().t()) * 0.5 * sb + bias) + res
    assert _rel(out, ref) < 1e-5


def test_single_row_kernel_reads_a_strided_row_and_stores_a_strided_output():
    a = torch.randn(3, 2 * 700).to(torch.bfloat16)[1:2, ::2]          # K stride 2, offset base
    w = torch.randn(90, 700).to(torch.bfloat16)
    out = torch.full((90, 2), float("nan"), dtype=torch.bfloat16).t()[:1]     # N stride 2
    matmul(a, w.t(), out, config="gemv_8x512_s1_w4_u2")
    assert _rel(out, a.float() @ w.float().t()) < BF16_TOL


def test_fp8_configurations_take_fp8_operands_only():
    assert "fp8 operands only" in cfgs.supports(CONFIGS["dot8_64x128x128_s4_w4_k4"], cfgs.Problem(128, 4096, 4096))
    fp8 = cfgs.Problem(128, 4096, 4096, elt=1, b_kmajor=True, fp8=True)
    assert cfgs.choose_config(fp8).name == "dot8_64x64x128_s6_w4"            # 32 tiles of 128x128: 128 of 64x64
    assert cfgs.rule_based(fp8).name == "ws8_128x64x128_s6_np_sub1"          # the rules, without the table
    assert cfgs.rule_based(cfgs.Problem(1024, 1024, 1024, elt=1, b_kmajor=True, fp8=True)).name == \
        "dot8_64x128x128_s4_w4"                                                 # 64 tiles of 128x128: 64x128 ones


def test_single_row_kernel_is_for_one_row_of_16_bit_operands_against_a_linear_weight():
    c = CONFIGS["gemv_8x512_s1_w4_u2"]
    assert cfgs.supports(c, cfgs.Problem(1, 4096, 4096, b_kmajor=True)) is None
    assert "M = 1" in cfgs.supports(c, cfgs.Problem(2, 4096, 4096, b_kmajor=True))
    assert "K-major" in cfgs.supports(c, cfgs.Problem(1, 4096, 4096, b_kmajor=False))
    assert "16-bit" in cfgs.supports(c, cfgs.Problem(1, 4096, 4096, elt=1, b_kmajor=True, fp8=True))
    assert cfgs.rule_based(cfgs.Problem(1, 5000, 3000, b_kmajor=True)).kernel == "gemv"
    a, b = _operands(1, 64, 64, b_kmajor=False)
    with pytest.raises(ValueError, match="K-major"):
        matmul(a, b, config="gemv_8x512_s1_w4_u2")


@pytest.mark.parametrize("a_mmajor,b_kmajor", LAYOUTS)
def test_ws_kernel_reads_either_major_ness_with_the_epilogue(a_mmajor, b_kmajor):
    """The TMA kernel: M-major A and K-major B through local_trans, ragged edge tiles
    (200 x 264), bias + SiLU + residual fused."""
    M, N, K = 200, 264, 136
    a, b = _operands(M, N, K, a_mmajor=a_mmajor, b_kmajor=b_kmajor, seed=3)
    bias = torch.randn(N).to(torch.bfloat16)
    residual = torch.randn(M, N).to(torch.bfloat16).t().contiguous().t()        # any strides
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    matmul(a, b, out, bias=bias, activation="silu", residual=residual, config="ws_128x128x64_s5")
    ref = torch.nn.functional.silu(a.float() @ b.float() + bias.float()) + residual.float()
    assert _rel(out, ref) < BF16_TOL


@pytest.mark.parametrize("a_mmajor,b_kmajor", LAYOUTS)
def test_ws_kernel_stages_unaligned_operands_and_stores_through_pointers(a_mmajor, b_kmajor):
    """Odd K, M and N: no operand row and no output row is 16-byte aligned.  The host copies
    A and B into aligned buffers (TMA reads those), the kernel stores C through pointers
    (masked), with the epilogue fused; an offset view of A (a[:, 1:]) is staged too."""
    M, N, K = 131, 77, 93
    a, b = _operands(M, N, K + 1, a_mmajor=a_mmajor, b_kmajor=b_kmajor, seed=11)
    a, b = a[:, 1:], b[1:]                        # base 2 bytes past the allocation's start
    bias = torch.randn(N).to(torch.bfloat16)
    residual = torch.randn(M, N).to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    p = importlib.import_module("tlxc.ops.matmul")._problem(a, b, out, True)
    assert not (p.tma_a or p.tma_b or p.tma_c) and p.stage_bytes == (M * K + K * N) * 2
    matmul(a, b, out, bias=bias, activation="gelu", residual=residual, config="ws_128x128x64_s5")
    ref = torch.nn.functional.gelu(a.float() @ b.float() + bias.float()) + residual.float()
    assert _rel(out, ref) < BF16_TOL


def test_staging_is_chosen_where_the_copies_pay():
    """The 4095x4097x4093 shape of the sweep takes the WS kernel on staged copies; a small
    odd shape keeps the pointer kernel (the copies' launches would cost more than they save)."""
    big = cfgs.Problem(4095, 4097, 4093, tma_a=False, tma_b=False, tma_c=False)
    assert cfgs.staging_pays(big) and cfgs.choose_config(big).kernel == "ws"
    small = cfgs.Problem(301, 299, 303, tma_a=False, tma_b=False, tma_c=False)
    assert not cfgs.staging_pays(small) and cfgs.choose_config(small).kernel == "dot"
    aligned_out_only = cfgs.Problem(4096, 4097, 4096, tma_c=False)
    assert aligned_out_only.stage_bytes == 0 and cfgs.choose_config(aligned_out_only).kernel == "ws"


def test_ws_with_pointer_stores_compiles_without_the_c_tile():
    """sm_90a: an output TMA cannot store (odd row) is stored with st.global from the
    accumulator's registers; the shared C tile shrinks to a stub, no spills."""
    a = torch.empty(4095, 4093, dtype=torch.bfloat16)
    b = torch.empty(4093, 4097, dtype=torch.bfloat16)
    (h,) = compile_config("ws_128x256x64_s4", a, b, activation="relu")
    assert h.n_spills == 0
    c = CONFIGS["ws_128x256x64_s4"]
    assert h.metadata.shared <= cfgs.ws_shared_bytes(c, 2, 2, c_tma=False) < cfgs.ws_shared_bytes(c, 2, 2)
    assert "cp.async.bulk.tensor" in h.asm["cuda"] and "bulk_group" not in h.asm["cuda"]


def test_ws_persistent_walk_over_several_tiles(monkeypatch):
    """Two programs walk 3 x 3 tiles (the ring's phases wrap across tiles)."""
    monkeypatch.setattr(importlib.import_module("tlxc.ops.matmul"), "CPU_SMS", 2)
    a, b = _operands(320, 328, 200, b_kmajor=True, seed=9)
    out = torch.full((320, 328), float("nan"), dtype=torch.bfloat16)
    matmul(a, b, out, config="ws_128x128x64_s5")
    assert _rel(out, a.float() @ b.float()) < BF16_TOL


def test_ws_cluster_pair_and_float32_output():
    a, b = _operands(300, 264, 136, b_kmajor=True, seed=4)
    out = torch.full((300, 264), float("nan"))
    matmul(a, b, out, config="ws_128x128x64_s5_c2", out_dtype=torch.float32)
    assert _rel(out, a.float() @ b.float()) < 1e-5


@pytest.mark.parametrize("config", ["ws8_128x128x128_s4", "dot_64x128x64_s4_w4", "dot8_64x128x128_s4_w4",
                                    "dot8_64x128x128_s4_w4_k4", "ws8_128x64x128_s6_np_sub1", "ws8_128x256x128_s4",
                                    "ws8_128x256x128_s3_c2"])
def test_fp8_with_row_wise_and_tensor_scales(config):
    M, N, K = (200, 264, 272) if CONFIGS[config].split_k == 1 else (70, 136, 1100)     # split-K: 9 K steps
    assert fp8_scaled_error(config, M, N, K, seed=5) < BF16_TOL


@pytest.mark.parametrize("config", [None, "ws8_128x128x128_s4", "ws8_128x64x128_s6_np_sub1", "dot8_64x128x128_s4_w4"])
@pytest.mark.parametrize("types", [(torch.float8_e4m3fn, torch.float8_e5m2), (torch.float8_e5m2, torch.float8_e4m3fn)],
                         ids=["e4m3_e5m2", "e5m2_e4m3"])
def test_mixed_fp8_operands(types, config):
    """e4m3 x e5m2 (an fp8 backward's gradient times a weight): each operand keeps its own type in
    shared memory (the WS kernel's ``B_DTYPE``); products of fp8 values are exact in float32."""
    g = torch.Generator().manual_seed(17)
    a = (torch.randn(150, 160, generator=g) * 4).to(types[0])
    w = (torch.randn(72, 160, generator=g) * 4).to(types[1])
    out = torch.full((150, 72), float("nan"))
    matmul(a, w.t(), out, config=config)
    assert _rel(out, a.double() @ w.double().t()) < 1e-6


@pytest.mark.slow
def test_mixed_fp8_ws_compiles_to_a_mixed_wgmma():
    a = torch.empty(1024, 1024).to(torch.float8_e4m3fn)
    w = torch.empty(1024, 1024).to(torch.float8_e5m2)
    (h,) = compile_config("ws8_128x128x128_s4", a, w.t())
    assert h.n_spills == 0 and "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2" in h.asm["cuda"]


@pytest.mark.parametrize("activation,fn", [("relu", torch.relu), ("gelu", torch.nn.functional.gelu),
                                           ("gelu_tanh", lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
                                           ("silu", torch.nn.functional.silu)])
def test_each_activation_and_bias(activation, fn):
    a, b = _operands(40, 48, 96, seed=6)
    bias = torch.randn(48)
    out = matmul(a, b, bias=bias, activation=activation, out_dtype=torch.float32)
    ref = fn(a.float() @ b.float() + bias)
    assert out.dtype == torch.float32 and _rel(out, ref) < 1e-5


@pytest.mark.parametrize("reduce_kernel", [False, True])
def test_split_k_last_split_sums_in_a_fixed_order(reduce_kernel, monkeypatch):
    """The last split of each tile sums the partials in split order: bit-identical to the
    two-kernel path (TLXC_OPS_SPLITK_REDUCE=1), and the arrival counters are zero again
    afterwards (a second call with other data is right too)."""
    m = importlib.import_module("tlxc.ops.matmul")
    a, b = _operands(70, 130, 1000, b_kmajor=True, seed=12)
    outs = []
    for env in ("0", "1"):
        monkeypatch.setenv("TLXC_OPS_SPLITK_REDUCE", env)
        outs.append(matmul(a, b, config="dot_64x128x64_s4_w4_k4", out_dtype=torch.float32))
    assert torch.equal(outs[0], outs[1])
    assert _rel(outs[0], a.float() @ b.float()) < 1e-5
    monkeypatch.setenv("TLXC_OPS_SPLITK_REDUCE", "1" if reduce_kernel else "0")
    a2, b2 = _operands(70, 130, 1000, b_kmajor=True, seed=13)
    out = matmul(a2, b2, config="dot_64x128x64_s4_w4_k4", out_dtype=torch.float32)
    assert _rel(out, a2.float() @ b2.float()) < 1e-5
    assert all(int(t.abs().sum()) == 0 for t in m._COUNTERS.values())


def test_split_k_applies_the_epilogue_once_after_the_sum():
    a, b = _operands(20, 40, 1024, seed=7)
    bias, res = torch.randn(40), torch.randn(20, 40)
    out = matmul(a, b, bias=bias, activation="relu", residual=res, out_dtype=torch.float32,
                 config="dot_64x128x64_s4_w4_k8")
    assert _rel(out, torch.relu(a.float() @ b.float() + bias) + res) < 1e-5


def test_batched_input_and_k_zero():
    a, b = _operands(6, 24, 40, seed=8)
    out = matmul(a.view(2, 3, 40), b)
    assert out.shape == (2, 3, 24) and _rel(out.view(6, 24), a.float() @ b.float()) < BF16_TOL
    bias = torch.randn(24).to(torch.bfloat16)
    empty = matmul(torch.empty(6, 0, dtype=torch.bfloat16), torch.empty(0, 24, dtype=torch.bfloat16), bias=bias)
    assert torch.equal(empty, bias.expand(6, 24))


def test_errors_name_the_argument():
    a, b = _operands(8, 8, 16)
    with pytest.raises(ValueError, match=r"\[\.\.\., K\] @ \[K, N\]"):
        matmul(a, b.t()[:, :4].t())
    with pytest.raises(ValueError, match="same 16-bit dtype"):
        matmul(a, b.half())
    with pytest.raises(ValueError, match="activation must be one of"):
        matmul(a, b, activation="tanh")
    with pytest.raises(ValueError, match="'bias' must have 8 elements"):
        matmul(a, b, bias=torch.zeros(9))
    with pytest.raises(TypeError, match="'bias' must be a tensor of 8 elements, got float"):
        matmul(a, b, bias=1.0)
    with pytest.raises(ValueError, match="unknown config"):
        matmul(a, b, config="nope")
    with pytest.raises(ValueError, match="cannot run .*: K is below one 16-byte TMA row"):
        matmul(a[:, :4], b[:4], config="ws_128x128x64_s5")
    with pytest.raises(ValueError, match="'scale_a' must be a float32 tensor"):
        matmul(a, b, scale_a=torch.ones(1, dtype=torch.float16))


SWEEP = ([(s, s, s) for s in (256, 512, 1024, 2048, 3072, 4096, 8192, 16384)]
         + [(m, n, k) for m in (1, 16, 64, 128, 512, 2048, 8192)
            for n, k in ((4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096))]
         + [(5000, 3000, 2000), (1000, 1000, 1000), (4095, 4097, 4093), (128, 8192, 8192)])


def _meta(M, N, K, b_kmajor=False, dtype=torch.bfloat16):
    a = torch.empty(M, K, device="meta", dtype=dtype)
    b = torch.empty(N, K, device="meta", dtype=dtype).t() if b_kmajor else torch.empty(K, N, device="meta",
                                                                                           dtype=dtype)
    return a, b


@pytest.mark.parametrize("b_kmajor", [False, True])
def test_the_heuristic_picks_a_valid_config_for_every_sweep_shape(b_kmajor):
    for M, N, K in SWEEP:
        a, b = _meta(M, N, K, b_kmajor)
        c = chosen_config(a, b)
        p = cfgs.Problem(M, N, K, b_kmajor=b_kmajor, tma_a=K % 8 == 0, tma_b=(K if b_kmajor else N) % 8 == 0,
                         tma_c=N % 8 == 0)
        assert cfgs.supports(c, p) is None, (M, N, K, c.name)
        if M == 1 and b_kmajor:
            assert c.kernel == "gemv", (M, N, K, c.name)     # one row against a weight: CUDA cores
        elif M <= 16:
            assert c.swap, (M, N, K, c.name)       # decode shapes take the swapped kernel


def test_measured_table_names_existing_configs_and_is_used():
    for row in cfgs.MEASURED:
        assert row[4] in CONFIGS, row
    p = cfgs.Problem(4096, 4096, 4096)
    table = [(4096, 4096, 4096, "16_bn", "ws_128x128x64_s4_np", "test")]
    assert cfgs.choose_config(p, table).name == "ws_128x128x64_s4_np"
    # an output TMA cannot store through: the WS kernel stores through pointers
    assert cfgs.choose_config(cfgs.Problem(4096, 4096, 4096, tma_c=False), table).name == "ws_128x128x64_s4_np"
    # operands TMA cannot read: staged copies pay at 4096^3, not at 256^3
    assert cfgs.choose_config(cfgs.Problem(4096, 4096, 4096, tma_a=False, tma_b=False), table).kernel == "ws"
    small = cfgs.Problem(256, 256, 256, tma_a=False, tma_b=False)
    assert cfgs.choose_config(small, [(256, 256, 256, "16_bn", "ws_128x128x64_s4_np", "t")]).kernel == "dot"


def test_a_cards_own_rows_come_first_on_that_card_only():
    """``MEASURED_BY_CARD``: the H100's rows decide on an H100 (``Problem.card``), the H200's table
    everywhere else; each row names a configuration that runs its own shape."""
    assert cfgs.card_of("NVIDIA H100 80GB HBM3") == "H100" and cfgs.card_of("NVIDIA H200") == ""
    for card, rows in cfgs.MEASURED_BY_CARD.items():
        for M, N, K, kind, name, _ in rows:
            p = cfgs.Problem(M, N, K, elt=1 if kind.startswith("fp8") else 2, b_kmajor=kind.endswith("_bk"),
                             fp8=kind.startswith("fp8"), card=card)
            assert name in CONFIGS and cfgs.usable(CONFIGS[name], p), (card, M, N, K, name)
            assert cfgs.choose_config(p).name == name, (card, M, N, K)
    square = {"M": 16384, "N": 16384, "K": 16384}
    assert cfgs.choose_config(cfgs.Problem(**square)).name == "ws_128x128x64_s5"              # the H200's row
    assert cfgs.choose_config(cfgs.Problem(**square, card="H100")).name == "ws_128x256x64_s3_sub1"
    fp8 = {"M": 2048, "N": 2048, "K": 2048, "elt": 1, "b_kmajor": True, "fp8": True}
    assert cfgs.choose_config(cfgs.Problem(**fp8)).name == "ws8_128x128x128_s4"              # the H200's row
    assert cfgs.choose_config(cfgs.Problem(**fp8, card="H100")).name == "ws8_128x256x128_s3"
    # a neighbour of an H100 row borrows it there (1500 rows: log2 distance 0.45 from 2048)
    assert cfgs.choose_config(cfgs.Problem(**{**fp8, "M": 1500}, card="H100")).name == "ws8_128x256x128_s3"
    assert cfgs.choose_config(cfgs.Problem(**{**fp8, "M": 1500})).name == "ws8_128x128x128_s4"


def test_autotune_times_candidates_and_persists(tmp_path, monkeypatch):
    monkeypatch.setenv("TLXC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TLXC_CACHE_DISABLE", raising=False)
    m = importlib.import_module("tlxc.ops.matmul")      # the module (the package exports the function)
    monkeypatch.setattr(m, "_TUNED", {})
    p = cfgs.Problem(512, 512, 4096)
    order = [c.name for c in cfgs.candidates(p)]
    fastest = order[len(order) // 2]
    ran = []
    best = autotune_config(p, "key1", lambda c: ran.append(c.name), time_fn=lambda fn: (fn(), 1.0 if ran[-1] ==
                                                                                          fastest else 2.0)[1])
    assert best.name == fastest and ran == order
    assert json.loads((tmp_path / "ops" / "matmul.json").read_text()) == {"key1": fastest}
    monkeypatch.setattr(m, "_TUNED", {})                  # a new process reads the file, times nothing
    assert autotune_config(p, "key1", lambda c: pytest.fail("timed again"), time_fn=None).name == fastest


def _compile_operands(c):
    if c.kernel == "gemv":
        return torch.empty(1, 4096, dtype=torch.bfloat16), torch.empty(4096, 4096, dtype=torch.bfloat16).t()
    M, N, K = ((400 if c.share_a else 16), 1024, 1024) if c.swap else (1024, 1024, 1024)   # (a pair: two tiles of M)
    if c.fp8:
        return torch.empty(M, K).to(torch.float8_e4m3fn), torch.empty(N, K).to(torch.float8_e4m3fn).t()
    return torch.empty(M, K, dtype=torch.bfloat16), torch.empty(K, N, dtype=torch.bfloat16)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_config_compiles_for_sm90a(name):
    c = CONFIGS[name]
    a, b = _compile_operands(c)
    handles = compile_config(name, a, b, bias=torch.empty(b.shape[1], dtype=torch.bfloat16), activation="gelu")
    assert len(handles) == 1              # split-K: the tile's last split sums, no second kernel
    for h in handles:
        assert h.n_spills == 0, (name, h.n_spills)
        assert "serializes the wgmma" not in " ".join(h.perf_warnings), (name, h.perf_warnings)
        assert h.metadata.shared <= cfgs.SHARED_LIMIT, (name, h.metadata.shared)
        ptx = h.asm.get("ptx") or h.asm["cuda"]
        if c.kernel == "ws" or h.metadata.shared > 16384:
            assert "wgmma.mma_async" in ptx, name


@pytest.mark.parametrize("name", ["ws_128x256x64_s4", "ws_128x128x64_s5_c2"])
def test_ws_transposed_operands_compile_with_the_transpose_bit(name):
    a = torch.empty(1024, 1024, dtype=torch.bfloat16).t()          # M-major A
    b = torch.empty(1024, 1024, dtype=torch.bfloat16).t()          # K-major B
    (h,) = compile_config(name, a, b)
    assert h.n_spills == 0 and "wgmma.mma_async" in (h.asm.get("ptx") or h.asm["cuda"])


def test_the_bench_sweep_covers_the_issue():
    """bench/ops_matmul_bench.py: >= 30 shapes, squares 256-16384, the 28 Llama shapes with
    B = w.t(), odd sizes, transposed B on squares."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import ops_matmul_bench
    shapes = ops_matmul_bench.sweep()
    assert len(shapes) >= 30
    squares = {m for m, n, k, _ in shapes if m == n == k}
    assert {256, 16384} <= squares
    llama = {(m, n, k) for m, n, k, bk in shapes if bk}
    assert all((m, n, k) in llama for m in (1, 16, 64, 128, 512, 2048, 8192)
               for n, k in ((4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096)))
    assert any(m % 16 and n % 16 and k % 16 for m, n, k, _ in shapes)
    assert any(bk and m == n == k for m, n, k, bk in shapes)
    assert (64, 4096, 4096, False) in shapes       # M = 64 against an N-major B (0.80x in session 13)


def test_a_residual_keeps_the_ws_kernel_within_shared_memory():
    """The residual's layout conversion costs a float32 scratch per consumer: 128x256 tiles
    no longer fit, the choice falls back to 128x128 (and what it compiles fits)."""
    a = torch.empty(4096, 4096, dtype=torch.bfloat16)
    b = torch.empty(4096, 4096, dtype=torch.bfloat16).t()
    res = torch.empty(4096, 4096, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="exceed 227 KB"):
        compile_config("ws_128x256x64_s4", a, b, residual=res)
    p = cfgs.Problem(4096, 4096, 4096, b_kmajor=True, residual=True)
    c = cfgs.choose_config(p)
    assert c.kernel == "ws" and c.bn == 128
    (h,) = compile_config(c.name, a, b, residual=res, bias=torch.empty(4096))
    assert h.metadata.shared <= cfgs.SHARED_LIMIT and h.n_spills == 0


def test_tlxc_ops_is_an_attribute_of_the_package():
    import tlxc
    assert tlxc.ops.matmul is matmul
    with pytest.raises(AttributeError, match="no attribute 'opz'"):
        tlxc.opz  # noqa: B018


def _glu_ref(a, b, bias, residual, activation):
    z = a.float() @ b.float() + bias.float()
    gate = torch.nn.functional.silu if activation == "swiglu" else torch.nn.functional.gelu
    return gate(z[:, 0::2]) * z[:, 1::2] + residual.float()


@pytest.mark.parametrize("config", ["dot_64x128x64_s4_w4", "swap_64x16x128_s4_w4", "dot_64x128x64_s4_w4_k4",
                                    "swap_128x64x64_s4_w4_k4", "ws_128x128x64_s5", "gemv_8x512_s1_w4_u2"])
@pytest.mark.parametrize("activation", ["swiglu", "geglu"])
def test_glu_pairs_columns_in_every_kernel_family(config, activation):
    """activation="swiglu"/"geglu" on a [M, 2N] product: out[:, j] = act(y[:, 2j]) * y[:, 2j+1]
    (y after the bias), then the [M, N] residual; odd N, ragged tiles, poisoned output."""
    M = 1 if CONFIGS[config].kernel == "gemv" else 5 if CONFIGS[config].swap else 37
    g = torch.Generator().manual_seed(14)
    a = torch.randn(M, 600, generator=g).to(torch.bfloat16)
    b = torch.randn(154, 600, generator=g).to(torch.bfloat16).t()
    bias = torch.randn(154, generator=g).to(torch.bfloat16)
    residual = torch.randn(M, 77, generator=g).to(torch.bfloat16)
    out = torch.full((M, 77), float("nan"))
    matmul(a, b, out, bias=bias, residual=residual, activation=activation, config=config, out_dtype=torch.float32)
    assert _rel(out, _glu_ref(a, b, bias, residual, activation)) < 1e-5


def test_glu_needs_an_even_product_and_a_half_width_output():
    a, b = _operands(8, 9, 16)
    with pytest.raises(ValueError, match="even number of columns, got 9"):
        matmul(a, b, activation="swiglu")
    a, b = _operands(8, 10, 16)
    with pytest.raises(ValueError, match=r"'out' must be a \(8, 5\)"):
        matmul(a, b, torch.empty(8, 10, dtype=torch.bfloat16), activation="geglu")
    assert matmul(a, b, activation="geglu").shape == (8, 5)


@pytest.mark.parametrize("name", ["ws_128x256x64_s4", "dot_128x256x64_s3_w8", "swap_64x16x128_s4_w4_k4",
                                  "dot_128x128x64_s3_w4_k4", "gemv_8x512_s1_w4_u2", "ws_256x152x64_s4_swap",
                                  "ws_128x152x64_s6_swap"])
def test_glu_compiles_for_sm90a(name):
    c = CONFIGS[name]
    a, b = _compile_operands(c)
    (h,) = compile_config(name, a, b, bias=torch.empty(b.shape[1], dtype=torch.bfloat16), activation="swiglu")
    assert h.n_spills == 0 and h.metadata.shared <= cfgs.SHARED_LIMIT, (name, h.n_spills)


def test_a_plan_is_reused_for_new_tensors_and_keeps_none_alive():
    """Two calls of one geometry share a plan (problem, config, descriptors); the second
    call's descriptors point at its own tensors, and after each call they hold none."""
    m = importlib.import_module("tlxc.ops.matmul")
    results = []
    for seed in (15, 16):
        a, b = _operands(130, 136, 72, b_kmajor=True, seed=seed)
        out = torch.full((130, 136), float("nan"), dtype=torch.bfloat16)
        matmul(a, b, out, config="ws_128x128x64_s5")
        assert _rel(out, a.float() @ b.float()) < BF16_TOL
        results.append(out)
    plans = [p for k, p in m._PLANS.items() if k[0] == "ws_128x128x64_s5" and k[3][0] == (130, 72)]
    assert len(plans) == 1 and set(plans[0].descs) == {"a", "b", "c"}
    assert all(d.base is None for d in plans[0].descs.values())
    assert not torch.equal(results[0], results[1])


def test_cluster_checks_count_the_kernels_rows_on_a_swapped_tile():
    """``supports`` judges a swapped WS tile on the kernel's problem (Cᵀ = Bᵀ Aᵀ: N rows, M columns).
    The stacked pair (sharing the kernel's B) is built here: ``_ws`` makes swapped pairs side by side only."""
    from dataclasses import replace
    pair = replace(CONFIGS["ws_256x160x64_s4_swap"], cluster_m=2)
    few_cols_many_rows = cfgs.Problem(100, 4096, 4096, a_kmajor=True, b_kmajor=True)
    assert cfgs.supports(pair, few_cols_many_rows) is None
    assert "two tile rows" in cfgs.supports(pair, cfgs.Problem(100, 200, 4096, a_kmajor=True, b_kmajor=True))
    sharing_a = replace(pair, share_a=True)
    assert "two tile columns" in cfgs.supports(sharing_a, few_cols_many_rows)       # 100 columns: one tile of 160


def test_batched_out_whose_rows_do_not_fold_into_one_dimension():
    """``out`` of any strides: a [B, S, N] view of a [S, B, N] buffer (rows not one dimension) is
    written through a copy, with the epilogue; the 2-D and foldable cases write in place."""
    a, b = _operands(2 * 37, 24, 40, seed=31)
    a3 = a.reshape(2, 37, 40)
    bias, res = torch.randn(24), torch.randn(2, 37, 24).to(torch.bfloat16)
    out = torch.full((37, 2, 24), float("nan"), dtype=torch.bfloat16).transpose(0, 1)
    got = matmul(a3, b, out, bias=bias, activation="silu", residual=res)
    assert got is out
    ref = torch.nn.functional.silu(a3.double() @ b.double() + bias.double()) + res.double()
    assert _rel(out, ref) < BF16_TOL
