"""tlxc.ops.grouped_matmul in swapped tiles (``gws_*_swap``, kernels/grouped_gemm_swap.py): out^T = W a^T per
tile, a group's last tile its rows rounded up to 16.  On the interpreter against float64
(poisoned outputs): group sizes that reach every tile variant (ten of 256x160, sixteen of 128x256) and both
sides of each 16-row chunk, empty groups, rows past the groups' sum, K and N tails, the epilogue's bias /
activation / scales in the swapped coordinates, the pointer-store path; fp8; the arguments the kernel refuses,
by name; the choice's switch; every configuration compiles for sm_90a (no spills, the host's shared-memory count,
one fused wgmma a variant); the GPU against float32 math (``gpu`` marker)."""
from __future__ import annotations

import re

import pytest
import torch

import tlxc.ops.grouped as grouped_module
from tlxc.ops import grouped_matmul
from tlxc.ops.grouped import GROUPED_SWAP_CONFIGS, swap_config, swap_shared_bytes

BF16 = "gws_128x256x64_s4_e16d_swap"
FP8 = "gws8_128x256x128_s4_e16d_swap"
BF16_SHAPES = ["gws_256x160x64_s4_e16d_swap", "gws_128x256x64_s4_e16d_swap"]
# 1 .. 16 chunks of 16 in a group's last tile (of 160 or 256 rows), a chunk's last row and the next one's first,
# whole tiles
SIZES = [1, 16, 17, 47, 0, 64, 80, 99, 128, 143, 159, 160, 161, 240, 255, 256, 257, 530]


def _reference(a, w, sizes, bias=None, scale_a=None, scale_b=None):
    """float64 ``a[rows of g] @ w[g].T`` (``w`` ``[E, N, K]``) with the scales and bias of each group."""
    parts = []
    lo = 0
    for g, size in enumerate(sizes):
        hi = lo + size
        y = a[lo:hi].double() @ w[g].double().t()
        if scale_a is not None:
            y = y * (scale_a.double().reshape(-1)[lo:hi, None] if scale_a.numel() > 1 else scale_a.double())
        if scale_b is not None:
            y = y * scale_b[g].double()
        if bias is not None:
            y = y + (bias[g] if bias.dim() == 2 else bias).double()
        parts.append(y)
        lo = hi
    return torch.cat(parts)


def _close(out, ref, tol):
    assert torch.isfinite(out[:ref.shape[0]]).all()
    err = ((out[:ref.shape[0]].double() - ref).norm() / ref.norm()).item()
    assert err < tol, err


@pytest.fixture
def few_programs(monkeypatch):
    monkeypatch.setattr(grouped_module, "CPU_SMS", 5)     # the dynamic schedule's draws, ring phases over tiles


@pytest.mark.parametrize("config", BF16_SHAPES)
@pytest.mark.parametrize("dtype,K,N", [(torch.bfloat16, 136, 300), (torch.float16, 64, 256)])
def test_every_tile_variant_matches_float64(config, dtype, K, N, few_programs):
    g = torch.Generator().manual_seed(K + N)
    a = torch.randn(sum(SIZES), K, generator=g).to(dtype)
    w = torch.randn(len(SIZES), N, K, generator=g).to(dtype)
    out = torch.full((sum(SIZES), N), float("nan"), dtype=dtype)
    grouped_matmul(a, w.transpose(1, 2), torch.tensor(SIZES, dtype=torch.int32), out, config=config)
    _close(out, _reference(a, w, SIZES), 8e-3)


def test_cta_pairs_share_the_rows_of_a(monkeypatch):
    """``_c2_swap``: two pairs (4 programs) on adjacent weight tiles, each CTA loading half of a tile's rows of
    ``a`` (a whole tile: one half box each; a group's last tile: alternate 16-row boxes) into both by multicast;
    N = 600 is three weight tiles, so the second pair's rank 1 lies past N and only walks the ring.  A
    per-expert bias and SiLU, odd K; rank 1's tile draws come through its mailbox."""
    monkeypatch.setattr(grouped_module, "CPU_SMS", 5)
    sizes = [1, 17, 0, 80, 159, 160, 161, 255, 330]
    g = torch.Generator().manual_seed(2)
    K, N = 136, 600
    a = torch.randn(sum(sizes), K, generator=g).to(torch.bfloat16)
    w = torch.randn(len(sizes), N, K, generator=g).to(torch.bfloat16)
    bias = torch.randn(len(sizes), N, generator=g)
    out = torch.full((sum(sizes), N), float("nan"), dtype=torch.bfloat16)
    grouped_matmul(a, w.transpose(1, 2), torch.tensor(sizes, dtype=torch.int32), out, bias=bias, activation="silu",
                   config="gws_256x160x64_s4_e16d_c2_swap")
    _close(out, torch.nn.functional.silu(_reference(a, w, sizes, bias)), 8e-3)


@pytest.mark.parametrize("config", ["gws_256x160x64_s4_e16d_swap", "gws_256x160x64_s4_e16d_c2_swap"])
def test_launch_checks_clean(config, monkeypatch):
    """``tlxc check`` of the kernel as the host launches it (a pair: in clusters of 2): nothing above a note."""
    from launch_check import check_findings, record_launch
    monkeypatch.setattr(grouped_module, "CPU_SMS", 5)
    sizes = torch.tensor([100, 0, 50], dtype=torch.int32)
    a, w = torch.randn(150, 64).to(torch.bfloat16), torch.randn(3, 600, 64).to(torch.bfloat16)
    kernel, args, meta = record_launch(monkeypatch, grouped_module, "grouped_gemm_swap_kernel",
                                       lambda: grouped_matmul(a, w.transpose(1, 2), sizes, config=config))
    findings = check_findings(kernel, args, meta, cluster=meta["ctas_per_cga"])
    assert [f for f in findings if f.severity != "note"] == []


@pytest.mark.parametrize("config,bias_kind,activation", [(BF16, "expert", "silu"), (BF16, "shared", None),
                                                          (BF16, None, "gelu_tanh"), (BF16_SHAPES[0], "expert", "silu")])
def test_epilogue_in_swapped_coordinates(config, bias_kind, activation, few_programs):
    """The bias (a row per expert, or one for all) and the activation run on the accumulator's rows
    (the output's columns); bf16 and float32 outputs (128x256: float32 TMA-stored in 32-column boxes;
    256x160: its float32 staging does not fit beside the ring, every chunk through the pointer path)."""
    g = torch.Generator().manual_seed(7)
    sizes = [33, 0, 170, 8]
    K, N = 96, 280
    a = torch.randn(sum(sizes), K, generator=g).to(torch.bfloat16)
    w = torch.randn(len(sizes), N, K, generator=g).to(torch.bfloat16)
    bias = {"expert": torch.randn(len(sizes), N, generator=g), "shared": torch.randn(N, generator=g),
            None: None}[bias_kind]
    for out_dtype in (torch.bfloat16, torch.float32):
        out = grouped_matmul(a, w.transpose(1, 2), torch.tensor(sizes), bias=bias, activation=activation,
                             out_dtype=out_dtype, config=config)
        ref = _reference(a, w, sizes, bias)
        ref = {None: ref, "silu": torch.nn.functional.silu(ref),
               "gelu_tanh": torch.nn.functional.gelu(ref, approximate="tanh")}[activation]
        _close(out, ref, 8e-3 if out_dtype == torch.bfloat16 else 1e-5)


def test_rows_past_the_groups_and_a_strided_output(few_programs):
    """Rows of ``a`` past the groups' sum give zero rows; an output whose columns are not contiguous (no
    TMA store: the masked pointer path with the column stride)."""
    g = torch.Generator().manual_seed(3)
    sizes = [20, 50]
    K, N, M = 64, 256, 90
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    w = torch.randn(2, N, K, generator=g).to(torch.bfloat16)
    base = torch.full((N, M), float("nan"), dtype=torch.bfloat16)
    out = base.t()                                          # (M, N) with column stride M
    grouped_matmul(a, w.transpose(1, 2), torch.tensor(sizes), out, config=BF16)
    _close(out, _reference(a, w, sizes), 8e-3)
    assert (out[70:] == 0).all()


def test_fp8_with_row_and_column_scales(few_programs):
    g = torch.Generator().manual_seed(11)
    sizes = [5, 150, 0, 161]
    K, N = 256, 272
    a32 = torch.randn(sum(sizes), K, generator=g)
    w32 = torch.randn(len(sizes), N, K, generator=g)
    a, w = a32.to(torch.float8_e4m3fn), w32.to(torch.float8_e4m3fn)
    scale_a = torch.rand(sum(sizes), 1, generator=g) + 0.5
    scale_b = torch.rand(len(sizes), N, generator=g) + 0.5
    out = grouped_matmul(a, w.transpose(1, 2), torch.tensor(sizes), scale_a=scale_a, scale_b=scale_b, config=FP8)
    assert out.dtype == torch.bfloat16
    _close(out, _reference(a.float(), w.float(), sizes, None, scale_a, scale_b), 8e-3)


@pytest.mark.parametrize("call,message", [
    (lambda a, w, s: grouped_matmul(a, w.transpose(1, 2).contiguous(), s, config=BF16), "w.transpose"),
    (lambda a, w, s: grouped_matmul(a, w.transpose(1, 2), s, activation="swiglu", config=BF16), "swiglu"),
    (lambda a, w, s: grouped_matmul(a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn).transpose(1, 2), s,
                                    use_fast_accum=False, config=FP8), "use_fast_accum"),
    (lambda a, w, s: grouped_matmul(a, w.transpose(1, 2), s, config=FP8), "fp8"),
])
def test_refusals_name_the_argument(call, message):
    a = torch.randn(10, 64).to(torch.bfloat16)
    w = torch.randn(2, 32, 64).to(torch.bfloat16)
    with pytest.raises(ValueError, match=message):
        call(a, w, torch.tensor([4, 6]))


def test_the_choice_takes_swapped_tiles_only_where_told(monkeypatch):
    """``SWAPPED_TILES_UP_TO`` (0: never) sets the mean group up to which the choice takes the swapped tiles
    ``SWAPPED_TILE``: 16-bit K-major weights, N >= 4096, no GLU pairs; the launch then runs them."""
    choose = grouped_module.choose_grouped_config
    tile = grouped_module.SWAPPED_TILE
    monkeypatch.setattr(grouped_module, "SWAPPED_TILES_UP_TO", 0)
    assert choose(2048, 8, 14336, "kmajor") == "gws_128x256x64_s4_e16d_c2"
    monkeypatch.setattr(grouped_module, "SWAPPED_TILES_UP_TO", 320)
    assert choose(2048, 8, 14336, "kmajor") == tile
    assert choose(2048, 8, 14336, "kmajor", fp8=True) == "gws8_128x256x128_s4_e16d_c2"
    assert choose(4096, 8, 14336, "kmajor") == "gws_128x256x64_s4_e16d_c2"          # 512 rows an expert
    assert choose(2048, 8, 14336, "nmajor") == "gws_128x256x64_s4_e16d_c2"
    assert choose(2048, 8, 1408, "kmajor") == "gws_128x128x64_s5"
    assert choose(2048, 8, 14336, "kmajor", glu=True) == "gws_128x256x64_s4_e16d_c2"
    assert choose(2048, 8, 14336, "kmajor", fp8=True, promote=True) == "gws8_128x128x128_s5"
    picks = []
    launch = grouped_module._launch_swap
    monkeypatch.setattr(grouped_module, "_launch_swap", lambda config, *a, **k: (picks.append(config),
                                                                                   launch(config, *a, **k)))
    monkeypatch.setattr(grouped_module, "CPU_SMS", 4)
    g = torch.Generator().manual_seed(5)
    sizes = [100, 0, 60]
    a = torch.randn(160, 64, generator=g).to(torch.bfloat16)
    w = torch.randn(3, 4096, 64, generator=g).to(torch.bfloat16)
    out = grouped_matmul(a, w.transpose(1, 2), torch.tensor(sizes))
    assert picks == [tile]
    _close(out, _reference(a, w, sizes), 8e-3)
    grouped_matmul(a, w.transpose(1, 2), torch.tensor(sizes), activation="swiglu")
    assert picks == [tile]                                                  # GLU pairs: the other kernel


def _warmup_args(config):
    from tlxc import language as tl
    from tlxc.descriptors import TensorDescriptor
    c = swap_config(config)
    fp8 = config.startswith("gws8_")
    dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
    E, M, K, N = 8, 8192, 4096, 4096
    a = torch.empty(M, K, dtype=dtype)
    out = torch.empty(M, N, dtype=torch.bfloat16)
    args = [TensorDescriptor.from_tensor(torch.empty(E * N, K, dtype=dtype), [c.bw, c.bk], swizzle=128),
            TensorDescriptor.from_tensor(a, [16, c.bk], swizzle=128),
            TensorDescriptor.from_tensor(a, [c.br // c.cluster_n, c.bk], swizzle=128), out,
            TensorDescriptor.from_tensor(out, [16, 64], swizzle=128), torch.empty(2 * E + 1, dtype=torch.int32), E, N,
            K, 132, N, 1]
    meta = {"BW": c.bw, "BR": c.br, "BK": c.bk, "GROUP_M": c.expert_group_m, "NUM_STAGES": c.stages,
            "DTYPE": tl.float8e4nv if fp8 else tl.bfloat16, "E_PAD": E, "SEARCH_STEPS": E.bit_length(),
            "OUT_DTYPE": tl.bfloat16, "C_TMA": True, "C_BOX_N": 64, "C_STAGING": c.staging, "num_warps": 4}
    if c.cluster_n > 1:
        meta.update(CLUSTER_N=c.cluster_n, ctas_per_cga=(c.cluster_n, 1, 1))
    return c, args, meta


def test_staging_buffers_halve_until_they_fit():
    """A consumer's staging buffers: the configuration's eight for a 16-bit output of 128x256, four for a
    float32 one (twice the bytes), none for 256x160's float32 output (two do not fit: pointer stores)."""
    from tlxc.ops.grouped import swap_staging
    a = torch.empty(64, 64, dtype=torch.bfloat16)
    bf16, f32 = torch.empty(64, 4096, dtype=torch.bfloat16), torch.empty(64, 4096, dtype=torch.float32)
    assert [swap_staging(BF16, a, bf16), swap_staging(BF16, a, f32, True)] == [8, 4]
    assert [swap_staging("gws_256x160x64_s4_e16d_swap", a, out) for out in (bf16, f32)] == [2, 0]
    assert swap_staging(BF16, a, bf16.t().contiguous().t()) == 0           # column-major: no TMA stores


PAIRS = "gws_256x160x64_s4_e16d_c2_swap"
COMPILED = [PAIRS]      # (128x256 compiled without spills, 229,584 bytes, 2026-12-06: 20 s of the suite)


@pytest.mark.parametrize("config", COMPILED)
def test_configs_compile_for_sm90a(config):
    """As the host launches it (the pairs: in clusters of 2): no spills, the shared memory ``swap_shared_bytes``
    counts, and one fused ``m64n(16 v)`` wgmma for each variant.  The TMA store path without an epilogue (a
    compile is 10-20 s of the suite's CPU, 40-65 s with a bias or scales in the variants' chunks: the interpreter
    checks those, the GPU tests run a bias and an activation through both store paths); the other
    configurations' CUDA text below."""
    from tlxc.ops.kernels.grouped_gemm_swap import grouped_gemm_swap_kernel
    c, args, meta = _warmup_args(config)
    h = grouped_gemm_swap_kernel.warmup(*args, **meta, grid=(132,))
    assert h.n_spills == 0 and h.perf_warnings == []
    assert h.metadata.shared == swap_shared_bytes(config, 2, 2, True) <= 232448
    widths = {int(n) for n in re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k", h.asm["cuda"])}
    assert widths == {16 * v for v in range(1, c.br // 16 + 1)}, sorted(widths)
    assert h.metadata.shared - swap_shared_bytes(config, 2, 2, False) == 2 * (c.staging - 1) * 16 * c.bw // 2 * 2


@pytest.mark.parametrize("config", sorted(c for c in GROUPED_SWAP_CONFIGS if c not in COMPILED))
def test_other_configs_issue_one_fused_product_a_variant(config):
    """The other configurations' CUDA text (fp8: the 16-bit kernel with 8-bit operands, 128-byte k-steps): one
    fused ``m64n(16 v)`` wgmma a variant, e4m3 for fp8 (NVRTC's compile of each, 10-20 s, is left to the GPU
    tests)."""
    from tlxc.ops.kernels.grouped_gemm_swap import grouped_gemm_swap_kernel
    from tlxc.runtime.warmup import cuda_source
    c, args, meta = _warmup_args(config)
    text = cuda_source(grouped_gemm_swap_kernel, args, meta, (132,), "sm_90a")
    kind = "k32_f32_f8e4m3" if config.startswith("gws8_") else "k16_f32_bf16"
    widths = {int(n) for n in re.findall(rf"tlx_wgmma_m64n(\d+){kind}\b", text)}
    assert widths == {16 * v for v in range(1, c.br // 16 + 1)}, sorted(widths)


@pytest.mark.gpu
@pytest.mark.parametrize("config", sorted(GROUPED_SWAP_CONFIGS))
@pytest.mark.parametrize("E,M,K,N", [(8, 2048, 1024, 1536), (64, 4000, 512, 768)])
def test_swapped_tiles_on_the_gpu(config, E, M, K, N):
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    torch.manual_seed(E + M)
    sizes = torch.distributions.Multinomial(M, torch.rand(E) + 0.05).sample().to(torch.int32)
    sizes[E // 2] = 0
    sizes[0] += M - int(sizes.sum())
    fp8 = config.startswith("gws8_")
    a32, w32 = torch.randn(M, K, device="cuda"), torch.randn(E, N, K, device="cuda") * 0.05
    dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
    a, w = a32.to(dtype), w32.to(dtype)
    bias = torch.randn(E, N, device="cuda")
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    grouped_matmul(a, w.transpose(1, 2), sizes.cuda(), out, bias=bias, activation="relu", config=config)
    ref = torch.relu(_reference(a.float().cpu(), w.float().cpu(), sizes.tolist(), bias.cpu())).cuda()
    _close(out, ref, 1e-2)
