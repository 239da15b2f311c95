"""fp8 ``tlxc.ops.grouped_matmul`` (the MoE product of DeepSeek-style fp8 experts): e4m3 / e5m2 operands,
row-wise scales of ``a`` and per-expert (column) scales of the weights, on the interpreter against
float64 math of the same 8-bit values (poisoned outputs; uneven, empty and single-row groups, N and K
that are not multiples of the tile); the scales on 16-bit operands; the argument checks; the fp8
configurations compile for sm_90a without spills; the GPU run against float64 and
``torch._scaled_grouped_mm``."""
from __future__ import annotations

import pytest
import torch

import tlxc.ops.grouped as grouped_module
from tlxc.ops import grouped_matmul
from tlxc.ops.grouped import GROUPED_CONFIGS, GROUPED_WS_CONFIGS, choose_grouped_config, is_fp8_config

FP8_WS = sorted(c for c in GROUPED_WS_CONFIGS if is_fp8_config(c))
FP8_POINTER = sorted(c for c in GROUPED_CONFIGS if is_fp8_config(c))
SIZES = [130, 0, 70, 300, 1]          # groups ending inside a row tile, an empty one, one of a single row


def _operands(sizes, K, N, g, dtype=torch.float8_e4m3fn, device="cpu"):
    """8-bit ``a`` ``[sum(sizes), K]`` and ``[E, N, K]`` weights read as ``w.transpose(1, 2)``."""
    M, E = sum(sizes), len(sizes)
    a = (torch.randn(M, K, generator=g) * 2).to(dtype).to(device)
    w = (torch.randn(E, N, K, generator=g) * 2).to(dtype).to(device)
    return a, w.transpose(1, 2)


def _reference(a, b, sizes, scale_a=None, scale_b=None, bias=None, activation=None):
    """float64 ``activation(a_g @ b_g * scale_a * scale_b_g + bias_g)`` per group (rows past the groups: 0)."""
    out = torch.zeros(a.shape[0], b.shape[2], dtype=torch.float64, device=a.device)
    start = 0
    for e, n in enumerate(sizes):
        rows = slice(start, start + n)
        r = a[rows].double() @ b[e].double()
        if scale_a is not None:
            r = r * (scale_a.double().reshape(-1)[rows, None] if scale_a.numel() > 1 else scale_a.double())
        if scale_b is not None:
            s = scale_b.double()
            r = r * (s if s.numel() == 1 else s.reshape(b.shape[0], -1)[e])
        if bias is not None:
            r = r + bias.double()[e]
        if activation == "silu":
            r = torch.nn.functional.silu(r)
        out[rows] = r
        start += n
    return out


def _rel(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("config", FP8_WS + FP8_POINTER)
@pytest.mark.parametrize("scales", ["rows_columns", "tensor_expert", "none"])
def test_fp8_groups_match_float64(config, scales, monkeypatch):
    """Every fp8 configuration over 3-5 programs (the pair config: two pairs), the bf16 output
    poisoned: e4m3 operands whose products float64 computes exactly, so the error is the output's
    rounding (bf16: ~2e-3 relative); K = 144 leaves a partial 128-byte k-step (TMA zero-fill / masks)."""
    monkeypatch.setattr(grouped_module, "CPU_SMS", 5)
    g = torch.Generator().manual_seed(len(config) + len(scales))
    K, N = 144, 600 if "c2" in config else 200
    a, b = _operands(SIZES, K, N, g)
    M, E = a.shape[0], b.shape[0]
    kw = {}
    if scales == "rows_columns":
        kw = {"scale_a": torch.rand(M, generator=g) + 0.5, "scale_b": torch.rand(E, N, generator=g) + 0.5}
    elif scales == "tensor_expert":
        kw = {"scale_a": torch.tensor([0.75]), "scale_b": torch.rand(E, 1, generator=g) + 0.5}
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    grouped_matmul(a, b, torch.tensor(SIZES, dtype=torch.int32), out, config=config, **kw)
    assert torch.isfinite(out).all()
    assert _rel(out, _reference(a, b, SIZES, kw.get("scale_a"), kw.get("scale_b"))) < 4e-3


@pytest.mark.parametrize("config", [None, "gws8_128x128x128_s5", "gws8_128x128x128_s5_e8d", "g8_64x128x128",
                                    "g8_128x128x128"])
def test_fp8_promoted_sums_match_float64(config, monkeypatch):
    """``use_fast_accum=False``: each k-step's products added to the tile's sum in float32 (the default
    pick then a 128x128 tile), the same values as float64 math up to the output's rounding."""
    monkeypatch.setattr(grouped_module, "CPU_SMS", 3)
    g = torch.Generator().manual_seed(9)
    K, N = 400, 136
    a, b = _operands(SIZES, K, N, g)
    M, E = a.shape[0], b.shape[0]
    scale_a, scale_b = torch.rand(M, generator=g) + 0.5, torch.rand(E, N, generator=g) + 0.5
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    grouped_matmul(a, b, torch.tensor(SIZES, dtype=torch.int32), out, config=config, scale_a=scale_a, scale_b=scale_b,
                   use_fast_accum=False)
    assert torch.isfinite(out).all()
    assert _rel(out, _reference(a, b, SIZES, scale_a, scale_b)) < 4e-3


@pytest.mark.parametrize("config", ["gws8_128x128x128_s5", "g8_64x128x128"])
def test_fp8_e5m2_float32_output_bias_silu_and_rows_past_the_groups(config, monkeypatch):
    """e5m2 operands, a float32 output (the WS kernel's pointer stores), a per-expert bias and SiLU
    after the scales, and group sizes adding up to less than ``a``'s rows: those rows are zeros."""
    monkeypatch.setattr(grouped_module, "CPU_SMS", 3)
    g = torch.Generator().manual_seed(7)
    K, N = 256, 136
    sizes = [64, 0, 129, 3]
    a, b = _operands(sizes + [40], K, N, g, torch.float8_e5m2)        # 40 rows past the groups' sum
    b = b[:4]
    E = 4
    M = a.shape[0]
    scale_a, scale_b = torch.rand(M, generator=g) + 0.5, torch.rand(E, N, generator=g) + 0.5
    bias = torch.randn(E, N, generator=g)
    out = torch.full((M, N), float("nan"), dtype=torch.float32)
    grouped_matmul(a, b, torch.tensor(sizes, dtype=torch.int32), out, config=config, scale_a=scale_a, scale_b=scale_b,
                   bias=bias, activation="silu")
    ref = _reference(a, b, sizes, scale_a, scale_b, bias, "silu")
    assert (out[sum(sizes):] == 0).all()
    assert _rel(out, ref) < 1e-5


def test_scales_on_16_bit_operands_and_the_default_choice(monkeypatch):
    """The scales apply to bf16 operands too (the WS pick and the pointer kernel); fp8 inputs default
    to a bfloat16 output and the fp8 tiles."""
    monkeypatch.setattr(grouped_module, "CPU_SMS", 3)
    g = torch.Generator().manual_seed(3)
    sizes = [300, 0, 260]
    a = torch.randn(560, 128, generator=g).to(torch.bfloat16)
    b = torch.randn(3, 192, 128, generator=g).to(torch.bfloat16).transpose(1, 2)
    scale_a, scale_b = torch.rand(560, generator=g) + 0.5, torch.rand(3, generator=g) + 0.5
    ref = _reference(a, b, sizes, scale_a, scale_b)
    for config in ("gws_128x128x64_s5", "g_64x128x64"):
        out = grouped_matmul(a, b, torch.tensor(sizes), config=config, scale_a=scale_a, scale_b=scale_b)
        assert out.dtype == torch.bfloat16 and _rel(out, ref) < 8e-3
    a8, b8 = _operands(sizes, 128, 4096, g)
    assert grouped_matmul(a8[:8], b8, torch.tensor([8, 0, 0]), config="g8_64x128x128").dtype == torch.bfloat16
    assert choose_grouped_config(2048, 8, 14336, "kmajor", fp8=True) == "gws8_128x256x128_s4_e16d_c2"
    assert choose_grouped_config(2048, 8, 1408, "kmajor", fp8=True) == "gws8_128x128x128_s5"
    assert choose_grouped_config(8192, 128, 768, "kmajor", fp8=True) == "gws8_128x128x128_s5"
    assert choose_grouped_config(4096, 128, 768, "kmajor", fp8=True) == "g8_64x128x128"
    assert choose_grouped_config(4096, 8, 14336, None, fp8=True) == "g8_128x128x128"


@pytest.mark.parametrize("call,message", [
    (lambda a, b, s: grouped_matmul(a, b.contiguous(), s), "fp8 operands must be K-major"),
    (lambda a, b, s: grouped_matmul(a, b.to(torch.float8_e5m2), s), "both float8_e4m3fn or both float8_e5m2"),
    (lambda a, b, s: grouped_matmul(a, b, s, config="gws_128x128x64_s5"), "runs 16-bit operands"),
    (lambda a, b, s: grouped_matmul(a.to(torch.bfloat16), b.to(torch.bfloat16), s, config="g8_64x128x128"),
     "runs fp8 operands"),
    (lambda a, b, s: grouped_matmul(a, b, s, scale_a=torch.ones(5)), "'scale_a' must have one element or one per row"),
    (lambda a, b, s: grouped_matmul(a, b, s, scale_b=torch.ones(2, 3)), "'scale_b' must have one element, one per "
                                                                        "expert"),
    (lambda a, b, s: grouped_matmul(a, b, s, scale_b=torch.ones(2, dtype=torch.float16)), "'scale_b' must be a "
                                                                                           "float32 tensor"),
    (lambda a, b, s: grouped_matmul(a, b, s, config="gws8_128x256x128_s4_e16d", use_fast_accum=False),
     "use_fast_accum=False keeps a second accumulator"),
])
def test_fp8_arguments_are_checked_by_name(call, message):
    g = torch.Generator().manual_seed(0)
    a, b = _operands([16, 16], 64, 32, g)
    with pytest.raises(ValueError, match=message):
        call(a, b, torch.tensor([16, 16]))


def test_use_fast_accum_must_be_a_bool():
    g = torch.Generator().manual_seed(0)
    a, b = _operands([16, 16], 64, 32, g)
    with pytest.raises(TypeError, match="use_fast_accum must be a bool"):
        grouped_matmul(a, b, torch.tensor([16, 16]), use_fast_accum=0)


def test_no_backward_through_the_scales():
    """A scaled product is forward-only (as ``torch._scaled_grouped_mm``): the backward says so."""
    a = torch.randn(8, 64, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(2, 32, 64, dtype=torch.bfloat16).transpose(1, 2)
    y = grouped_matmul(a, b, torch.tensor([5, 3]), scale_a=torch.tensor([2.0]))
    with pytest.raises(NotImplementedError, match="no backward through scale_a / scale_b"):
        y.float().sum().backward()


@pytest.mark.parametrize("config", FP8_WS)
def test_fp8_ws_configs_compile_for_sm90a(config):
    """The fp8 WS tiles as the host launches them (row-wise and per-expert column scales, both store
    paths): no spills, the shared memory the host computes, 8-bit wgmma."""
    from tlxc import language as tl
    from tlxc.descriptors import TensorDescriptor
    from tlxc.ops.kernels.grouped_gemm_ws import grouped_gemm_ws_kernel
    meta = grouped_module.ws_schedule_meta(config)
    bm, bn, bk = meta["BM"], meta["BN"], meta["BK"]
    E, M, K, N = 8, 8192, 4096, 4096
    a = torch.empty(M, K, dtype=torch.float8_e4m3fn)
    b_desc = TensorDescriptor.from_tensor(torch.empty(E * N, K, dtype=torch.float8_e4m3fn), [bn, bk], swizzle=128)
    out = torch.empty(M, N, dtype=torch.bfloat16)
    for c_tma in (False, True):
        h = grouped_gemm_ws_kernel.warmup(
            TensorDescriptor.from_tensor(a, [bm // 2, bk], swizzle=128), b_desc, out,
            TensorDescriptor.from_tensor(out, [bm // 2, 64], swizzle=128) if c_tma else None,
            torch.empty(2 * E + 1, dtype=torch.int32), E, N, K, M // bm + E, 132, N, 1, **meta, DTYPE=tl.float8e4nv,
            B_KMAJOR=True, B_BOX_N=128, E_PAD=E, SEARCH_STEPS=E.bit_length(), C_TMA=c_tma,
            OUT_DTYPE=tl.bfloat16 if c_tma else None, C_BOX_N=64, SPLIT_TAIL=meta["CLUSTER_N"] == 1, num_warps=4,
            grid=(132,), ctas_per_cga=(2, 1, 1) if meta["CLUSTER_N"] == 2 else None,
            scale0_ptr=torch.empty(M), scale1_ptr=torch.empty(E * N), stride_scale1=N, SCALE0=2, SCALE1=2,
            PROMOTE=bn <= 128)                  # (promoted sums: the 128-wide tiles only)
        code = h.asm["cuda"]
        assert h.n_spills == 0 and h.metadata.shared <= 232448 and h.perf_warnings == []
        assert h.metadata.shared == grouped_module.ws_shared_bytes(config, 1, 2, c_tma, True)
        assert "wgmma.mma_async" in code and ".e4m3.e4m3" in code


@pytest.mark.parametrize("config", FP8_POINTER)
@pytest.mark.parametrize("promote", [False, True])
def test_fp8_pointer_configs_compile_for_sm90a(config, promote):
    from tlxc.ops.kernels.grouped_gemm import grouped_gemm_kernel
    bm, bn, bk, warps, stages = GROUPED_CONFIGS[config]
    E, K, N, M = 8, 4096, 4096, 8192
    a = torch.empty(M, K, dtype=torch.float8_e4m3fn)
    b = torch.empty(E, N, K, dtype=torch.float8_e4m3fn).transpose(1, 2)
    out = torch.empty(M, N, dtype=torch.bfloat16)
    h = grouped_gemm_kernel.warmup(a, b, out, torch.empty(E, dtype=torch.int32), M, E, N, K, a.stride(0), a.stride(1),
                                   b.stride(0), b.stride(1), b.stride(2), out.stride(0), out.stride(1), M // bm + E,
                                   BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, E_PAD=E, num_warps=warps,
                                   num_stages=stages, grid=(1,), scale0_ptr=torch.empty(M), scale1_ptr=torch.empty(E),
                                   stride_scale1=1, SCALE0=2, SCALE1=1, PROMOTE=promote)
    assert h.n_spills == 0 and "wgmma.mma_async" in h.asm["cuda"] and h.perf_warnings == []


@pytest.mark.gpu
@pytest.mark.parametrize("config,fast", [(c, True) for c in [None] + FP8_WS + FP8_POINTER] +
                         [(c, False) for c in [None, "gws8_128x128x128_s5_e8d", "g8_128x128x128"]])
def test_fp8_grouped_on_the_gpu(config, fast):
    """On the GPU: every fp8 configuration (and the default pick) against float64 math of the same
    8-bit values at an MoE-like draw (an empty expert, groups ending mid-tile), and against
    ``torch._scaled_grouped_mm`` where this torch runs it."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    g = torch.Generator().manual_seed(11)
    sizes = [300, 0, 517, 64, 1, 1166]
    K, N = 1024, 4096 + 136
    a, b = _operands(sizes, K, N, g, device="cuda")
    M, E = a.shape[0], b.shape[0]
    scale_a = torch.rand(M, generator=g).cuda() + 0.5
    scale_b = torch.rand(E, N, generator=g).cuda() * 0.01 + 0.005
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    grouped_matmul(a, b, torch.tensor(sizes, dtype=torch.int32, device="cuda"), out, config=config,
                   scale_a=scale_a, scale_b=scale_b, use_fast_accum=fast)
    ref = _reference(a, b, sizes, scale_a, scale_b)
    assert torch.isfinite(out).all()
    assert _rel(out, ref) < 4e-3
    sgm = getattr(torch, "_scaled_grouped_mm", None)
    if config is None and fast and sgm is not None:
        offs = torch.tensor(sizes, device="cuda").cumsum(0).to(torch.int32)
        try:
            theirs = sgm(a, b, scale_a, scale_b, offs=offs, out_dtype=torch.bfloat16, use_fast_accum=True)
        except (RuntimeError, TypeError, ValueError):
            return
        assert _rel(theirs, ref) < 4e-3


def test_fp8_scaled_product_under_torch_compile_fullgraph():
    """``tlxc.ops.grouped_matmul`` with fp8 operands and both scales inside ``torch.compile(fullgraph=True)``:
    the traced call goes through the custom op (its fake gives the bfloat16 output) and matches the
    eager call bit for bit."""
    g = torch.Generator().manual_seed(4)
    sizes = torch.tensor([40, 0, 24], dtype=torch.int32)
    a, b = _operands([40, 0, 24], 128, 96, g)
    scale_a, scale_b = torch.rand(64, generator=g) + 0.5, torch.rand(3, 96, generator=g) + 0.5

    def f(a, b, scale_a, scale_b):
        return grouped_matmul(a, b, sizes, scale_a=scale_a, scale_b=scale_b, use_fast_accum=False)
    got = torch.compile(f, backend="aot_eager", fullgraph=True)(a, b, scale_a, scale_b)
    assert got.dtype == torch.bfloat16 and torch.equal(got, f(a, b, scale_a, scale_b))
