"""tlxc.ops.matmul on the GPU: every configuration against a float32 product at a shape
it can run (poisoned outputs), both B layouts, the heuristic's choice on a few shapes of
the issue-22 sweep, the fused epilogue, fp8 with row-wise scales."""
from __future__ import annotations

import importlib

import pytest
import torch

from tlxc.ops import CONFIGS, matmul
from tlxc.ops import matmul_configs as cfgs

pytestmark = pytest.mark.gpu


def _rel(out, ref):
    assert torch.isfinite(out).all(), "poison left in the output"
    return ((out.float() - ref).norm() / ref.norm()).item()


def _bf16(M, N, K, b_kmajor, seed=0, a_mmajor=False):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
    if a_mmajor:
        a = a.t().contiguous().t()
    if b_kmajor:
        b = torch.randn(N, K, device="cuda", generator=g).to(torch.bfloat16).t()
    else:
        b = torch.randn(K, N, device="cuda", generator=g).to(torch.bfloat16)
    return a, b


@pytest.mark.parametrize("b_kmajor", [False, True])
@pytest.mark.parametrize("name", sorted(n for n, c in CONFIGS.items() if not c.fp8 and c.kernel != "gemv"))
def test_every_16bit_config(name, b_kmajor):
    c = CONFIGS[name]
    # split-K configurations run only problems with fewer output tiles than two per SM
    M, N, K = ((300 if c.share_a else 13), 1000, 2056) if c.swap else (1000, 1240, 2056) if c.split_k == 1 else \
        (200, 1240, 2056)                     # (a swapped pair side by side: two tiles of M)
    a, b = _bf16(M, N, K, b_kmajor, seed=1)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    matmul(a, b, out, config=name)
    assert _rel(out, a.float() @ b.float()) < 1e-2


@pytest.mark.parametrize("name", sorted(n for n, c in CONFIGS.items() if c.kernel == "gemv"))
@pytest.mark.parametrize("N,K", [(1000, 2056), (4096, 4096), (130, 14341)])
def test_every_single_row_config(name, N, K):
    """M = 1 against w.t(): N not a multiple of the program's columns, K of the step, with
    bias + SiLU + residual, float32 out; and bf16 out on the decode shape."""
    a, b = _bf16(1, N, K, True, seed=N)
    bias = torch.randn(N, device="cuda")
    res = torch.randn(1, N, device="cuda")
    out = torch.full((1, N), float("nan"), device="cuda")
    matmul(a, b, out, bias=bias, activation="silu", residual=res, config=name)
    assert _rel(out, torch.nn.functional.silu(a.float() @ b.float() + bias) + res) < 1e-4
    plain = torch.full((1, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    matmul(a, b, plain, config=name)
    assert _rel(plain, a.float() @ b.float()) < 1e-2


@pytest.mark.parametrize("b_kmajor", [False, True])
@pytest.mark.parametrize("name", sorted(n for n, c in CONFIGS.items() if c.kernel == "ws" and not c.fp8))
def test_ws_configs_with_a_column_major_a(name, b_kmajor):
    """A M-major (a.t() of a row-major [K, M]): the [BK, BM/2] boxes read through the transpose bit;
    a configuration that cannot read it (the three-part swapped tile: its second tail's B is A,
    K-major only) refuses it by name."""
    M, N, K = 1000, 1240, 2056
    a, b = _bf16(M, N, K, b_kmajor, seed=6, a_mmajor=True)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    why = cfgs.supports(CONFIGS[name], importlib.import_module("tlxc.ops.matmul")._problem(a, b, out))
    if why is not None:
        assert cfgs.tail_parts(CONFIGS[name].bn)[2] and "K-major" in why, why
        with pytest.raises(ValueError, match=f"{name}.*cannot run"):
            matmul(a, b, out, config=name)
        return
    matmul(a, b, out, config=name)
    assert _rel(out, a.float() @ b.float()) < 1e-2


@pytest.mark.parametrize("shape", [(1, 4096, 4096), (1, 14336, 4096), (16, 14336, 4096), (64, 4096, 14336),
                                   (64, 4096, 4096), (128, 8192, 8192),
                                   (512, 512, 512), (1000, 1000, 1000), (4095, 4097, 4093), (4096, 4096, 4096),
                                   (2048, 128256, 4096)])
@pytest.mark.parametrize("b_kmajor", [False, True])
def test_heuristic_choice(shape, b_kmajor):
    M, N, K = shape
    a, b = _bf16(M, N, K, b_kmajor, seed=2)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    matmul(a, b, out)
    assert _rel(out, a.float() @ b.float()) < 1e-2


@pytest.mark.parametrize("name,with_residual", [("ws_128x256x64_s4", False), ("ws_128x128x64_s5", True),
                                                ("dot_128x128x64_s3_w4", True), ("dot_64x128x64_s4_w4_k4", True),
                                                ("swap_64x16x128_s4_w4_k4", True)])
def test_fused_epilogue(name, with_residual):
    c = CONFIGS[name]
    M, N, K = (7, 1536, 2048) if c.swap else (1000, 1536, 2048)
    a, b = _bf16(M, N, K, True, seed=3)
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    res = torch.randn(M, N, device="cuda", dtype=torch.bfloat16) if with_residual else None
    out_dtype = torch.float32 if c.bn <= 128 or c.kernel == "dot" else torch.bfloat16
    out = matmul(a, b, bias=bias, activation="gelu", residual=res, out_dtype=out_dtype, config=name)
    ref = torch.nn.functional.gelu(a.float() @ b.float() + bias.float()) + (res.float() if res is not None else 0)
    assert _rel(out, ref) < (1e-4 if out_dtype == torch.float32 else 1e-2)


@pytest.mark.parametrize("name", sorted(n for n, c in CONFIGS.items() if c.fp8) + [None])
def test_fp8_row_wise_scales(name):
    M, N, K = 1000, 1280, 1024
    a = (torch.randn(M, K, device="cuda") * 8).to(torch.float8_e4m3fn)
    w = (torch.randn(N, K, device="cuda") * 8).to(torch.float8_e4m3fn)
    sa = torch.rand(M, device="cuda") + 0.5
    sb = torch.rand(N, device="cuda") * 0.01
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    matmul(a, w.t(), out, scale_a=sa, scale_b=sb, config=name)
    assert _rel(out, (a.float() @ w.float().t()) * sa[:, None] * sb) < 1e-2


def test_autotune_on_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("TLXC_CACHE_DIR", str(tmp_path))
    a, b = _bf16(256, 512, 1024, True, seed=4)
    out = matmul(a, b, config="autotune")
    assert _rel(out, a.float() @ b.float()) < 1e-2
    assert (tmp_path / "ops" / "matmul.json").exists()
    assert cfgs.CONFIGS


@pytest.mark.parametrize("E", [8, 64, 128])
@pytest.mark.parametrize("transposed", [False, True])
def test_grouped_matmul_uneven_groups(E, transposed):
    from tlxc.ops import grouped_matmul
    g = torch.Generator(device="cuda").manual_seed(E)
    K, N, M = 1024, 1408, 4096
    sizes = torch.distributions.Multinomial(M, torch.rand(E) + 0.1).sample().to(torch.int32)
    sizes[E // 2] = 0                                          # an empty expert
    sizes[0] += M - int(sizes.sum())
    sizes = sizes.cuda()
    a = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
    if transposed:
        b = torch.randn(E, N, K, device="cuda", generator=g).to(torch.bfloat16).transpose(1, 2)
    else:
        b = torch.randn(E, K, N, device="cuda", generator=g).to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    grouped_matmul(a, b, sizes, out)
    offs = [0] + sizes.cumsum(0).tolist()
    ref = torch.cat([a[offs[i]:offs[i + 1]].float() @ b[i].float() for i in range(E)])
    assert _rel(out, ref) < 1e-2


@pytest.mark.parametrize("config", ["gws_128x256x64_s4", "gws_128x128x64_s5", "g_128x256x64", "gws_128x256x64_s4_e16",
                                    "gws_128x128x64_s5_e8", "gws_128x256x64_s4_e16d", "gws_128x128x64_s5_e8d",
                                    "gws_128x256x64_s4_n8d", "gws_128x256x64_s4_n4d", "gws_128x256x64_s4_e16d_c2"])
@pytest.mark.parametrize("transposed", [False, True])
def test_grouped_matmul_ws_kernel(config, transposed):
    """Few large groups (the warp-specialized TMA kernel's case) and the pointer kernel on the
    same problem: groups ending inside row tiles, an empty one, N not a tile multiple."""
    from tlxc.ops import grouped_matmul
    g = torch.Generator(device="cuda").manual_seed(7)
    E, K, N = 8, 2048, 4160
    sizes = torch.tensor([700, 0, 1290, 333, 2048, 5, 901, 1000], dtype=torch.int32)
    M = int(sizes.sum())
    a = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
    if transposed:
        b = torch.randn(E, N, K, device="cuda", generator=g).to(torch.bfloat16).transpose(1, 2)
    else:
        b = torch.randn(E, K, N, device="cuda", generator=g).to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    grouped_matmul(a, b, sizes.cuda(), out, config=config)
    offs = [0] + sizes.cumsum(0).tolist()
    ref = torch.cat([a[offs[i]:offs[i + 1]].float() @ b[i].float() for i in range(E)])
    assert _rel(out, ref) < 1e-2


@pytest.mark.parametrize("config", ["gws_128x256x64_s4_e16d_c2", "gws_128x128x64_s5", "gws_128x256x64_s4_e16d_swap"])
def test_grouped_pdl_launches_in_a_chain(config):
    """Back-to-back calls, each main kernel a PDL launch under its table kernel: before each call the sizes
    are rewritten on the device, and each call's ``a`` is the previous call's output.  A main kernel that
    read its table, or ``a``, before the launches ahead of it had finished would multiply stale rows."""
    from tlxc.ops import grouped_matmul
    g = torch.Generator(device="cuda").manual_seed(11)
    E, M, K = 8, 2048, 1024
    w = (torch.randn(E, K, K, device="cuda", generator=g) / K ** 0.5).to(torch.bfloat16).transpose(1, 2)
    draws = []
    for step in range(6):
        sizes = torch.distributions.Multinomial(M, torch.rand(E) + 0.05).sample().to(torch.int32)
        sizes[step % E] = 0                                    # an empty expert, a different one each call
        sizes[(step + 1) % E] += M - int(sizes.sum())
        draws.append(sizes)
    staged = torch.stack(draws).cuda()                         # on the device before the chain starts
    sizes_dev = torch.empty(E, device="cuda", dtype=torch.int32)
    x = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
    inputs, outs = [], []
    for step in range(len(draws)):
        sizes_dev.copy_(staged[step])                          # stream-ordered: the table kernel reads these
        out = torch.full((M, K), float("nan"), device="cuda", dtype=torch.bfloat16)
        grouped_matmul(x, w, sizes_dev, out, config=config)
        inputs.append(x)
        outs.append(out)
        x = out                                                # the next main kernel's TMA reads it
    torch.cuda.synchronize()
    for x, out, sizes in zip(inputs, outs, draws):
        offs = [0] + sizes.cumsum(0).tolist()
        ref = torch.cat([x[offs[i]:offs[i + 1]].float() @ w[i].float() for i in range(E)])
        assert _rel(out, ref) < 1e-2


@pytest.mark.parametrize("split_tails", [False, True])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("transposed", [True, False])
def test_grouped_matmul_ws_kernel_split_tails(split_tails, out_dtype, transposed, monkeypatch):
    """Groups whose last rows fit one consumer (2, 5, 60 rows past a whole block: split by columns
    between the two consumers, ``split_tail``) or not (77, 104), with and without the split; a
    float32 output (128x256 tiles store by pointers: the C tile does not fit) and a bf16 one (TMA
    stores inside a group, staged masked stores of the last rows); K-major and N-major weights."""
    import tlxc.ops.grouped as grouped_module
    from tlxc.ops import grouped_matmul
    monkeypatch.setattr(grouped_module, "SPLIT_TAILS", split_tails)
    _, sizes, a, b, out = _uneven_groups(11, transposed, out_dtype)
    grouped_matmul(a, b, sizes.cuda(), out, config="gws_128x256x64_s4_e16d")
    offs = [0] + sizes.cumsum(0).tolist()
    ref = torch.cat([a[offs[i]:offs[i + 1]].float() @ b[i].float() for i in range(len(sizes))])
    assert _rel(out, ref) < (1e-4 if out_dtype == torch.float32 else 1e-2)


def _uneven_groups(seed: int, transposed: bool, out_dtype):
    """Six experts' groups whose last rows fit one consumer (2, 5, 60 rows past a whole block) or not
    (77, 104), an empty one; N = 4160 (17 column tiles of 256); weights K- or N-major; a poisoned output.
    Returns the generator for further draws too."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    E, K, N = 6, 1024, 4160
    sizes = torch.tensor([700, 0, 333, 130, 5, 1000], dtype=torch.int32)
    M = int(sizes.sum())
    a = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
    w = torch.randn(E, N, K, device="cuda", generator=g).to(torch.bfloat16)
    b = w.transpose(1, 2) if transposed else w.transpose(1, 2).contiguous()
    return g, sizes, a, b, torch.full((M, N), float("nan"), device="cuda", dtype=out_dtype)


@pytest.mark.parametrize("E,M", [(64, 16384), (128, 32768)])
def test_grouped_matmul_many_groups_on_the_ws_kernel(E, M):
    """64 / 128 experts of 256 rows on average (uneven, one empty): the heuristic takes the WS
    kernel (device table + binary search per tile)."""
    from tlxc.ops import grouped_matmul
    from tlxc.ops.grouped import _ws_layout, choose_grouped_config
    g = torch.Generator(device="cuda").manual_seed(E)
    K, N = 512, 768
    sizes = torch.distributions.Multinomial(M, torch.rand(E) + 0.1).sample().to(torch.int32)
    sizes[E // 2] = 0
    sizes[0] += M - int(sizes.sum())
    a = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(E, N, K, device="cuda", generator=g).to(torch.bfloat16).transpose(1, 2)
    assert choose_grouped_config(M, E, N, _ws_layout(a, b)).startswith("gws")
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    grouped_matmul(a, b, sizes.cuda(), out)
    offs = [0] + sizes.cumsum(0).tolist()
    ref = torch.cat([a[offs[i]:offs[i + 1]].float() @ b[i].float() for i in range(E)])
    assert _rel(out, ref) < 1e-2


def test_custom_op_under_torch_compile_with_backward():
    """torch.ops.tlxc.matmul inside torch.compile(fullgraph=True) (Inductor when Triton is
    installed, else aot_eager), forward and backward against torch on a Linear + GELU."""
    import importlib.util

    from tlxc.ops import matmul_op
    backend = "inductor" if importlib.util.find_spec("triton") else "aot_eager"
    lin = torch.nn.Linear(512, 768, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(4, 100, 512, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def f(x):
        return matmul_op(x, lin.weight.t(), bias=lin.bias, activation="gelu").float().square().mean()

    loss = torch.compile(f, fullgraph=True, backend=backend)(x)
    loss.backward()
    xr = x.detach().float().requires_grad_(True)
    wr = lin.weight.detach().float().requires_grad_(True)
    ref = torch.nn.functional.gelu(xr @ wr.t() + lin.bias.float()).square().mean()
    ref.backward()
    assert abs(loss.item() - ref.item()) < 1e-2 * abs(ref.item())
    assert _rel(x.grad, xr.grad) < 2e-2
    assert _rel(lin.weight.grad, wr.grad) < 2e-2


@pytest.mark.parametrize("name", ["ws_128x256x64_s4", "ws_128x128x64_s5_c2", None])
@pytest.mark.parametrize("a_mmajor,b_kmajor", [(False, False), (True, True)])
def test_staged_operands_and_pointer_stores(name, a_mmajor, b_kmajor):
    """Odd M, N, K (no row 16-byte aligned): A and B are copied into aligned buffers for TMA,
    C is stored through pointers; bias + SiLU fused.  None: the heuristic (staging at this size)."""
    M, N, K = 1531, 2047, 1029
    a, b = _bf16(M, N, K, b_kmajor, seed=7, a_mmajor=a_mmajor)
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    matmul(a, b, out, bias=bias, activation="silu", config=name)
    ref = torch.nn.functional.silu(a.float() @ b.float() + bias.float())
    assert _rel(out, ref) < 1e-2


@pytest.mark.parametrize("name", ["dot_64x128x64_s4_w4_k4", "dot_128x128x64_s3_w4_k4", "swap_64x16x128_s4_w4_k4",
                                  "swap_128x64x64_s4_w4_k4"])
def test_split_k_last_split_sums(name, monkeypatch):
    """The tile's last split sums the partials (no second kernel): deterministic, within 1e-6 of the
    separate reduction (TLXC_OPS_SPLITK_REDUCE=1), right on repeated calls (the arrival counters
    return to zero), with a bias and a residual."""
    c = CONFIGS[name]
    M, N, K = (9, 3000, 8192) if c.swap else (200, 1000, 8192)
    outs = []
    a, b = _bf16(M, N, K, True, seed=8)
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16)     # the same inputs for all four runs
    for env in ("1", "0", "0", "0"):
        monkeypatch.setenv("TLXC_OPS_SPLITK_REDUCE", env)
        out = matmul(a, b, bias=bias, residual=bias.expand(M, N), out_dtype=torch.float32, config=name)
        outs.append(out)
        assert _rel(out, a.float() @ b.float() + 2 * bias.float()) < 1e-4
    # the in-kernel sum is deterministic (its three runs are bit-equal); against the separate reduction
    # kernel it may differ in the last bits (the H200 run of 2026-12-03: the two kernels' epilogues are
    # compiled separately, e.g. a contracted multiply-add in one), so that comparison is relative
    assert all(torch.equal(outs[1], o) for o in outs[2:]), "the in-kernel split-K sum is not deterministic"
    assert _rel(outs[1], outs[0]) < 1e-6, f"in-kernel sum vs reduction kernel: {_rel(outs[1], outs[0])}"
    assert all(int(t.abs().sum()) == 0 for t in importlib.import_module("tlxc.ops.matmul")._COUNTERS.values())


def test_a_plan_serves_new_tensors_of_the_same_geometry():
    """The second call of a geometry reuses the plan's TMA descriptors, pointed at the new
    tensors: both calls right, outputs at different addresses."""
    outs = []
    for seed in (10, 11):
        a, b = _bf16(1024, 1536, 512, True, seed=seed)
        out = matmul(a, b, config="ws_128x256x64_s4")
        assert _rel(out, a.float() @ b.float()) < 1e-2
        outs.append(out)
    assert not torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("name", ["ws_128x256x64_s4", "ws_128x128x64_s5_c2", "dot_64x128x64_s4_w4_k4",
                                  "swap_64x16x128_s4_w4_k4", None])
@pytest.mark.parametrize("activation", ["swiglu", "geglu"])
def test_glu_epilogue(name, activation):
    """GLU pairs (gate 2j, up 2j + 1) of a [M, 2N] product with a bias, the [M, N] output."""
    c = CONFIGS.get(name)
    # split-K configurations run only problems with few output tiles (fewer than two per SM)
    M, N2, K = (7, 2816, 2048) if c is not None and c.swap else (200, 1024, 4096) if c is not None and c.split_k > 1 \
        else (1000, 2816, 2048)
    a, b = _bf16(M, N2, K, True, seed=12)
    bias = torch.randn(N2, device="cuda", dtype=torch.bfloat16)
    out = matmul(a, b, bias=bias, activation=activation, out_dtype=torch.float32, config=name)
    z = a.float() @ b.float() + bias.float()
    gate = torch.nn.functional.silu if activation == "swiglu" else torch.nn.functional.gelu
    assert out.shape == (M, N2 // 2) and _rel(out, gate(z[:, 0::2]) * z[:, 1::2]) < 1e-4


@pytest.mark.parametrize("config", [None, "ws8_128x128x128_s4", "dot8_64x128x128_s4_w4"])
def test_mixed_fp8_on_the_gpu(config):
    """e4m3 x e5m2 (the WS kernel's B keeps its own type) against float32 math of the same fp8 values."""
    g = torch.Generator(device="cuda").manual_seed(61)
    a = (torch.randn(1000, 1024, device="cuda", generator=g) * 4).to(torch.float8_e4m3fn)
    w = (torch.randn(784, 1024, device="cuda", generator=g) * 4).to(torch.float8_e5m2)  # cuBLAS: N % 16 == 0
    out = matmul(a, w.t(), out_dtype=torch.float32, config=config)
    ref = a.float() @ w.float().t()
    # tlxc accumulates fp8 in the wgmma accumulator alone, as cuBLAS does with use_fast_accum=True: Hopper
    # keeps fewer bits there than float32 (4.4e-4 relative here on an H100, 2026-12-05, equal to cuBLAS fast
    # accumulation; cuBLAS's default promotes partial sums and gets 1.0e-4). So the bound is that mode's error.
    one = torch.ones((), device="cuda")
    fast = torch._scaled_mm(a, w.t(), scale_a=one, scale_b=one, out_dtype=torch.float32, use_fast_accum=True)
    err, fast_err = _rel(out, ref), _rel(fast, ref)
    assert err < 1.25 * fast_err + 1e-6, f"tlxc {err:.2e} vs cuBLAS fast accumulation {fast_err:.2e}"


@pytest.mark.parametrize("config", ["g_128x128x64", "gws_128x128x64_s5"])
def test_grouped_sizes_past_the_rows_fail_the_launch_by_name(config):
    """group_sizes summing past M with a negative entry: the device assertion fails the launch with a
    message naming group_sizes.  A trap ends the CUDA context, so the call runs in a child process."""
    import subprocess
    import sys
    code = f"""
import torch
from tlxc.ops import grouped_matmul
a = torch.randn(300, 128, device="cuda").to(torch.bfloat16)
b = torch.randn(3, 128, 256, device="cuda").to(torch.bfloat16)
sizes = torch.tensor([-7, 200, 400], device="cuda", dtype=torch.int32)
grouped_matmul(a, b, sizes, config={config!r})
torch.cuda.synchronize()
print("NO FAILURE")
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    text = run.stdout + run.stderr
    assert run.returncode != 0 and "NO FAILURE" not in text, text[-2000:]
    assert "group_sizes must be non-negative and add up to at most a's rows" in text, text[-2000:]


@pytest.mark.parametrize("config", ["g_128x128x64", "gws_128x128x64_s5", "gws_128x256x64_s4_e8d"])
def test_grouped_rows_past_the_groups_sum_are_zeros(config):
    """group_sizes summing to less than M (capacity padding): the rows after the sum are zeros in a
    NaN-poisoned out, nothing lands in the guard rows after it, the groups' rows are their products."""
    from tlxc.ops import grouped_matmul
    g = torch.Generator(device="cuda").manual_seed(62)
    M, K, N = 700, 128, 256
    a = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(3, K, N, device="cuda", generator=g).to(torch.bfloat16)
    buffer = torch.full((M + 256, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    sizes = torch.tensor([0, 200, 131], device="cuda", dtype=torch.int32)
    grouped_matmul(a, b, sizes, buffer[:M], config=config)
    torch.cuda.synchronize()
    assert buffer[M:].isnan().all(), "a store landed past out's rows"
    assert _rel(buffer[:200], a[:200].float() @ b[1].float()) < 1e-2
    assert _rel(buffer[200:331], a[200:331].float() @ b[2].float()) < 1e-2
    assert (buffer[331:M] == 0).all(), "rows past the groups' sum must be zeros"


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("transposed", [True, False])
def test_grouped_cta_pairs_with_epilogue(out_dtype, transposed):
    """CTA pairs sharing ``a`` by multicast (``gws_128x256x64_s4_e16d_c2``) with a per-expert bias and
    GELU: groups ending inside row tiles (5, 60, 77 rows past a block), an empty one, N = 4160 (17
    column tiles: the last pair's second CTA past N); float32 output (pointer stores) or bf16 (TMA
    stores inside a group)."""
    from tlxc.ops import grouped_matmul
    g, sizes, a, b, out = _uneven_groups(13, transposed, out_dtype)
    bias = torch.randn(len(sizes), out.shape[1], device="cuda", generator=g)
    grouped_matmul(a, b, sizes.cuda(), out, bias=bias, activation="gelu", config="gws_128x256x64_s4_e16d_c2")
    offs = [0] + sizes.cumsum(0).tolist()
    ref = torch.cat([a[offs[i]:offs[i + 1]].float() @ b[i].float() + bias[i] for i in range(len(sizes))])
    ref = torch.nn.functional.gelu(ref)
    assert _rel(out, ref) < (1e-4 if out_dtype == torch.float32 else 1e-2)
