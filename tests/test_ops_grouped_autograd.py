"""tlxc.ops.grouped_matmul_op (torch.ops.tlxc.grouped_matmul) on the CPU interpreter: forward and
both gradients against float64 autograd of the per-expert products (uneven and empty groups,
sizes off the tiles, both weight layouts), the weight-gradient kernel alone, torch.compile
(fullgraph, AOT autograd) through forward and backward, the weight-gradient kernel compiling for
sm_90a; a GPU case (marked gpu)."""
from __future__ import annotations

import pytest
import torch

import tlxc.ops as ops
from tlxc.ops.grouped import WGRAD_CONFIGS, grouped_weight_grad
from tlxc.ops.kernels.grouped_wgrad import grouped_wgrad_kernel


def _randn(*shape, seed, device="cpu", dtype=torch.bfloat16):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(device=device, dtype=dtype)


def _reference_grads(a, w_t, sizes, grad):
    """(y, da, db) in float64: per-expert products of ``a``'s groups with ``w_t[g]`` ([K, N])."""
    offs = [0] + sizes.cumsum(0).tolist()
    ad = a.detach().double().requires_grad_()
    wd = w_t.detach().double().requires_grad_()
    y = torch.cat([ad[offs[g]:offs[g + 1]] @ wd[g] for g in range(wd.shape[0])])
    y.backward(grad.double())
    return y.detach(), ad.grad, wd.grad


def _rel(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


@pytest.mark.parametrize("layout", ["kmajor", "nmajor"])
@pytest.mark.parametrize("sizes", [[70, 0, 130, 5], [1, 200], [0, 0, 64]], ids=str)
def test_forward_and_gradients_match_float64(sizes, layout):
    sizes = torch.tensor(sizes, dtype=torch.int32)
    E, M, K, N = len(sizes), int(sizes.sum()), 96, 72
    a = _randn(M, K, seed=1).requires_grad_()
    if layout == "kmajor":                          # nn.Linear experts: w [E, N, K], used as w^T
        w = _randn(E, N, K, seed=2).requires_grad_()
        w_t = w.transpose(1, 2)
    else:
        w = _randn(E, K, N, seed=2).requires_grad_()
        w_t = w
    y = ops.grouped_matmul_op(a, w_t, sizes)
    grad = _randn(M, N, seed=3)
    y.backward(grad)
    ref_y, ref_da, ref_dw_t = _reference_grads(a, w_t, sizes, grad)
    assert _rel(y, ref_y) < 1e-2 and _rel(a.grad, ref_da) < 1e-2
    dw = w.grad.transpose(1, 2) if layout == "kmajor" else w.grad
    assert _rel(dw, ref_dw_t) < 1e-2
    for g in range(E):                              # an empty expert gets exactly zero
        if sizes[g] == 0:
            assert (dw[g] == 0).all()


def test_the_public_grouped_matmul_is_differentiable():
    """``tlxc.ops.grouped_matmul`` on inputs that require grad records the custom op (its
    gradients, not a detached result); ``out=``/``config=`` are refused there by name."""
    sizes = torch.tensor([30, 0, 45], dtype=torch.int32)
    a = _randn(75, 64, seed=7).requires_grad_()
    w = _randn(3, 40, 64, seed=8).requires_grad_()
    y = ops.grouped_matmul(a, w.transpose(1, 2), sizes)
    assert y.grad_fn is not None
    grad = _randn(75, 40, seed=9)
    y.backward(grad)
    ref_y, ref_da, ref_dw_t = _reference_grads(a, w.transpose(1, 2), sizes, grad)
    assert _rel(y, ref_y) < 1e-2 and _rel(a.grad, ref_da) < 1e-2 and _rel(w.grad.transpose(1, 2), ref_dw_t) < 1e-2
    with pytest.raises(ValueError, match="'config=' applies to calls autograd does not record"):
        ops.grouped_matmul(a, w.transpose(1, 2), sizes, config="g_128x128x64")
    with torch.no_grad():
        assert ops.grouped_matmul(a, w.transpose(1, 2), sizes).grad_fn is None


def test_out_dtype_float32_gradient():
    sizes = torch.tensor([40, 90], dtype=torch.int32)
    a = _randn(130, 64, seed=1).requires_grad_()
    w = _randn(2, 64, 48, seed=2).requires_grad_()
    y = ops.grouped_matmul_op(a, w, sizes, torch.float32)
    assert y.dtype == torch.float32
    grad = _randn(130, 48, seed=3, dtype=torch.float32)
    y.backward(grad)
    _, ref_da, ref_dw = _reference_grads(a, w, sizes, grad.to(torch.bfloat16))
    assert a.grad.dtype == torch.bfloat16 and w.grad.dtype == torch.bfloat16
    assert _rel(a.grad, ref_da) < 1e-2 and _rel(w.grad, ref_dw) < 1e-2


@pytest.mark.parametrize("config", sorted(WGRAD_CONFIGS))
@pytest.mark.parametrize("M,K,N", [(1, 8, 8), (300, 200, 136), (129, 64, 257)])
def test_weight_grad_alone(M, K, N, config):
    sizes = torch.tensor([M // 3, 0, M - M // 3], dtype=torch.int64)
    a, g = _randn(M, K, seed=4), _randn(M, N, seed=5)
    out = grouped_weight_grad(a, g, sizes, config=config)
    offs = [0] + sizes.cumsum(0).tolist()
    ref = torch.stack([a[offs[e]:offs[e + 1]].double().T @ g[offs[e]:offs[e + 1]].double() for e in range(3)])
    assert out.shape == (3, K, N) and out.dtype == torch.bfloat16
    assert _rel(out, ref) < 1e-2 and (out[1] == 0).all()
    a_t = _randn(K, M, seed=4).t()                   # a column-major 'a' read by its strides
    assert _rel(grouped_weight_grad(a_t, g, sizes, config=config), torch.stack(
        [a_t[offs[e]:offs[e + 1]].double().T @ g[offs[e]:offs[e + 1]].double() for e in range(3)])) < 1e-2


def test_weight_grad_argument_errors():
    a, g = torch.zeros(10, 8, dtype=torch.bfloat16), torch.zeros(9, 8, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"a \[total_M, K\] and grad \[total_M, N\]"):
        grouped_weight_grad(a, g, torch.tensor([10]))
    with pytest.raises(ValueError, match="'group_sizes' must be an int32/int64 vector"):
        grouped_weight_grad(a, a, torch.tensor([10.0]))
    with pytest.raises(ValueError, match="both bfloat16 or both float16"):
        grouped_weight_grad(a, a.float(), torch.tensor([10]))
    with pytest.raises(ValueError, match="tensors on cpu, meta and cpu"):
        grouped_weight_grad(a, torch.zeros(10, 8, dtype=torch.bfloat16, device="meta"), torch.tensor([10]))
    with pytest.raises(ValueError, match="unknown config 'w_1'"):
        grouped_weight_grad(a, a, torch.tensor([10]), config="w_1")


def test_torch_compile_fullgraph_forward_and_backward():
    sizes = torch.tensor([50, 30], dtype=torch.int32)
    a = _randn(80, 64, seed=1).requires_grad_()
    w = _randn(2, 48, 64, seed=2).requires_grad_()

    def loss(a, w):
        return ops.grouped_matmul_op(a, w.transpose(1, 2), sizes).float().square().sum()
    compiled = torch.compile(loss, backend="aot_eager", fullgraph=True)
    compiled(a, w).backward()
    got = a.grad.clone(), w.grad.clone()
    a.grad = w.grad = None
    loss(a, w).backward()
    assert torch.equal(got[0], a.grad) and torch.equal(got[1], w.grad)


@pytest.mark.slow
@pytest.mark.parametrize("config", sorted(WGRAD_CONFIGS))
def test_weight_grad_kernel_compiles_for_sm90a(config):
    bk, bn, bm, warps, stages = WGRAD_CONFIGS[config]
    a, g = torch.empty(8192, 4096, dtype=torch.bfloat16), torch.empty(8192, 14336, dtype=torch.bfloat16)
    out, sizes = torch.empty(8, 4096, 14336, dtype=torch.bfloat16), torch.empty(8, dtype=torch.int32)
    h = grouped_wgrad_kernel.warmup(a, g, out, sizes, 8192, 8, 4096, 14336, a.stride(0), a.stride(1), g.stride(0),
                                    g.stride(1), out.stride(0), out.stride(1), out.stride(2), BLOCK_K=bk, BLOCK_N=bn,
                                    BLOCK_M=bm, E_PAD=8, num_warps=warps, num_stages=stages, grid=(1,))
    code = h.asm.get("ptx") or h.asm["cuda"]
    assert h.n_spills == 0 and "wgmma.mma_async" in code
    assert h.perf_warnings == []       # no assertion in the kernel (check_sizes_kernel): ptxas C7510 serialized it


@pytest.mark.gpu
@pytest.mark.parametrize("config", sorted(WGRAD_CONFIGS))
def test_weight_grad_configs_on_the_gpu(config):
    sizes = torch.tensor([700, 0, 1300, 129, 1], dtype=torch.int32)
    M, K, N = int(sizes.sum()), 1024, 768
    a, g = _randn(M, K, seed=4, device="cuda"), _randn(M, N, seed=5, device="cuda")
    out = grouped_weight_grad(a, g, sizes.cuda(), config=config)
    offs = [0] + sizes.cumsum(0).tolist()
    ref = torch.stack([a[offs[e]:offs[e + 1]].double().T @ g[offs[e]:offs[e + 1]].double() for e in range(5)])
    assert _rel(out, ref) < 1e-2 and (out[1] == 0).all()


@pytest.mark.gpu
@pytest.mark.parametrize("E,M,K,N", [(8, 4096, 1024, 2048), (32, 5000, 512, 768)])
def test_gradients_on_the_gpu(E, M, K, N):
    sizes = torch.distributions.Multinomial(M, torch.rand(E, generator=torch.Generator().manual_seed(E)) + 0.05) \
        .sample().to(torch.int32)
    sizes[E // 2] = 0
    sizes[0] += M - int(sizes.sum())
    sizes = sizes.cuda()
    a = _randn(M, K, seed=1, device="cuda").requires_grad_()
    w = (_randn(E, N, K, seed=2, device="cuda") * 0.05).requires_grad_()
    y = ops.grouped_matmul_op(a, w.transpose(1, 2), sizes)
    grad = _randn(M, N, seed=3, device="cuda")
    y.backward(grad)
    ref_y, ref_da, ref_dw_t = _reference_grads(a, w.transpose(1, 2), sizes.cpu(), grad)
    assert _rel(y, ref_y) < 1e-2 and _rel(a.grad, ref_da) < 1e-2
    assert _rel(w.grad.transpose(1, 2), ref_dw_t) < 1e-2 and (w.grad[E // 2] == 0).all()


def _reference_epilogue(a, w_t, sizes, bias, activation):
    """float64 ``activation(a_g @ w_t[g] + bias_g)`` per expert (GLU: gate 2j, up 2j + 1)."""
    import torch.nn.functional as F
    acts = {None: lambda z: z, "relu": F.relu, "silu": F.silu, "gelu": F.gelu,
            "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
            "swiglu": lambda z: F.silu(z[:, 0::2]) * z[:, 1::2], "geglu": lambda z: F.gelu(z[:, 0::2]) * z[:, 1::2]}
    offs = [0] + sizes.cumsum(0).tolist()
    out = []
    for g in range(w_t.shape[0]):
        z = a[offs[g]:offs[g + 1]].double() @ w_t[g].double()
        if bias is not None:
            z = z + (bias[g] if bias.dim() == 2 else bias).double()
        out.append(acts[activation](z))
    return torch.cat(out)


EPILOGUE_CONFIGS = ["g_64x128x64", "g_128x128x64", "gws_128x128x64_s5", "gws_128x256x64_s4_e16d",
                    "gws_128x256x64_s4_e16d_c2"]


@pytest.mark.parametrize("config", EPILOGUE_CONFIGS)
@pytest.mark.parametrize("bias_kind,activation", [("expert", "silu"), ("shared", None), (None, "gelu_tanh"),
                                                  ("expert", "swiglu"), ("shared", "geglu"), ("expert", "relu")],
                         ids=str)
def test_epilogue_in_each_kernel(config, bias_kind, activation):
    sizes = torch.tensor([300, 0, 130, 290], dtype=torch.int32)
    E, M, K, N = 4, int(sizes.sum()), 128, 256
    a = _randn(M, K, seed=1)
    w_t = (_randn(E, N, K, seed=2) * 0.1).transpose(1, 2)
    bias = None if bias_kind is None else \
        _randn(E, N, seed=3, dtype=torch.float32) if bias_kind == "expert" else _randn(N, seed=3)
    out = torch.full((M, N // 2 if activation in ("swiglu", "geglu") else N), float("nan"), dtype=torch.bfloat16)
    ops.grouped_matmul(a, w_t, sizes, out, bias=bias, activation=activation, config=config)
    assert _rel(out, _reference_epilogue(a, w_t, sizes, bias, activation)) < 1e-2


@pytest.mark.parametrize("activation", [None, "silu", "swiglu"])
@pytest.mark.parametrize("bias_kind", ["expert", "shared"])
def test_epilogue_gradients(bias_kind, activation):
    sizes = torch.tensor([70, 0, 130, 5], dtype=torch.int32)
    E, M, K, N = 4, 205, 64, 48
    a = _randn(M, K, seed=1).requires_grad_()
    w = (_randn(E, N, K, seed=2) * 0.2).requires_grad_()
    bias = (_randn(E, N, seed=3, dtype=torch.float32) if bias_kind == "expert" else _randn(N, seed=3)).requires_grad_()
    y = ops.grouped_matmul_op(a, w.transpose(1, 2), sizes, None, bias, activation)
    grad = _randn(*y.shape, seed=4)
    y.backward(grad)
    ad, wd, bd = (t.detach().double().requires_grad_() for t in (a, w, bias))
    ref = _reference_epilogue(ad, wd.transpose(1, 2), sizes, bd, activation)
    ref.backward(grad.double())
    assert _rel(y, ref.detach()) < 1e-2
    for got, want in ((a.grad, ad.grad), (w.grad, wd.grad), (bias.grad, bd.grad)):
        assert got.dtype == (torch.bfloat16 if got is not bias.grad else bias.dtype) and _rel(got, want) < 1e-2
    if bias_kind == "expert":
        assert (bias.grad[1] == 0).all()                # the empty expert's bias gets nothing


@pytest.mark.parametrize("kwargs,message", [
    ({"activation": "tanh"}, "'activation' must be one of"),
    ({"activation": "swiglu", "n": 47}, "N must be even"),
    ({"bias": "ones"}, "'bias' must be a float tensor of shape"),
    ({"bias": torch.zeros(3, 48)}, "'bias' must be a float tensor of shape"),
    ({"bias": torch.zeros(48, dtype=torch.int32)}, "'bias' must be a float tensor of shape"),
])
def test_epilogue_arguments_are_checked(kwargs, message):
    n = kwargs.pop("n", 48)
    if kwargs.get("bias") == "ones":
        kwargs["bias"] = [1.0] * n
    a = torch.zeros(10, 16, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=message):
        ops.grouped_matmul(a, torch.zeros(2, 16, n, dtype=torch.bfloat16), torch.tensor([4, 6]), **kwargs)


@pytest.mark.gpu
@pytest.mark.parametrize("config", [None, "g_128x128x64", "gws_128x128x64_s5"])
def test_epilogue_on_the_gpu(config):
    E, M, K, N = 8, 4096, 1024, 4096
    sizes = torch.distributions.Multinomial(M, torch.rand(E, generator=torch.Generator().manual_seed(3)) + 0.05) \
        .sample().to(torch.int32)
    sizes[3] = 0
    sizes[0] += M - int(sizes.sum())
    a = _randn(M, K, seed=1, device="cuda")
    w_t = (_randn(E, N, K, seed=2, device="cuda") * 0.05).transpose(1, 2)
    bias = _randn(E, N, seed=3, device="cuda")
    for activation in ("silu", "swiglu"):
        out = ops.grouped_matmul(a, w_t, sizes.cuda(), bias=bias, activation=activation, config=config)
        assert _rel(out, _reference_epilogue(a, w_t, sizes, bias, activation)) < 1e-2


def test_gradients_through_the_cta_pair_pick(monkeypatch):
    """Groups of more than ``SWAPPED_TILES_UP_TO`` rows on average against N = 4096 take the warp-specialized
    kernel in CTA pairs (``gws_128x256x64_s4_e16d_c2``) forward; forward and both gradients against float64,
    with the programs of two pairs."""
    import tlxc.ops.grouped as grouped_module
    monkeypatch.setattr(grouped_module, "CPU_SMS", 4)
    picks = []
    launch = grouped_module._launch_ws
    monkeypatch.setattr(grouped_module, "_launch_ws", lambda config, *a, **k: (picks.append(config),
                                                                               launch(config, *a, **k))[1])
    sizes = torch.tensor([400, 361], dtype=torch.int32)
    E, M, K, N = 2, 761, 64, 4096
    a = _randn(M, K, seed=21).requires_grad_()
    w = _randn(E, N, K, seed=22).requires_grad_()
    y = ops.grouped_matmul_op(a, w.transpose(1, 2), sizes)
    grad = _randn(M, N, seed=23)
    y.backward(grad)
    assert picks[0] == "gws_128x256x64_s4_e16d_c2"
    ref_y, ref_da, ref_dw_t = _reference_grads(a, w.transpose(1, 2), sizes, grad)
    assert _rel(y, ref_y) < 1e-2 and _rel(a.grad, ref_da) < 1e-2 and _rel(w.grad.transpose(1, 2), ref_dw_t) < 1e-2
