"""torch.ops.tlxc.matmul: the custom op's fake (shapes under FakeTensorMode), autograd (the
backward is two tlxc matmuls after the epilogue's backward) against torch's, and
torch.compile(fullgraph=True) on the CPU (aot_eager backend; the real launch runs the
interpreter)."""
from __future__ import annotations

import pytest
import torch

import tlxc.ops
from tlxc.ops import matmul_op


def _leaf(*shape, seed, dtype=torch.float32, transpose=False):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g).to(torch.bfloat16).to(dtype)
    if transpose:
        t = t.t().contiguous().t()
    return t.requires_grad_(True)


def test_fake_gives_shape_and_dtype():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        a = torch.empty(2, 5, 24, dtype=torch.bfloat16)
        b = torch.empty(24, 40, dtype=torch.bfloat16)
        out = torch.ops.tlxc.matmul(a, b, None, "gelu", torch.float32)
    assert out.shape == (2, 5, 40) and out.dtype == torch.float32


@pytest.mark.parametrize("activation", [None, "gelu", "silu"])
def test_backward_is_two_matmuls_through_the_epilogue(activation):
    a = _leaf(3, 7, 48, seed=1, dtype=torch.bfloat16)
    w = _leaf(40, 48, seed=2, dtype=torch.bfloat16)               # nn.Linear weight: b = w.t()
    bias = _leaf(40, seed=3, dtype=torch.bfloat16)
    res = _leaf(3, 7, 40, seed=4)
    out = matmul_op(a, w.t(), bias=bias, activation=activation, out_dtype=torch.float32, residual=res)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(5))
    out.backward(g)
    refs = [t.detach().float().requires_grad_(True) for t in (a, w, bias, res)]
    ra, rw, rb, rr = refs
    act = {None: lambda z: z, "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu}[activation]
    ref = act(ra @ rw.t() + rb) + rr
    ref.backward(g)
    assert torch.allclose(out.detach(), ref.detach(), rtol=1e-4, atol=1e-4)
    for mine, theirs in zip((a, w, bias, res), refs):
        err = ((mine.grad.double() - theirs.grad.double()).norm() / theirs.grad.double().norm()).item()
        assert err < 1e-2, err


@pytest.mark.parametrize("activation", [None, "relu", "swiglu"])
@pytest.mark.parametrize("scales", ["tensor", "rows_and_columns"])
def test_backward_through_the_scales(scales, activation):
    """16-bit operands with float32 scales (not differentiated themselves): the operands' gradients
    carry them, the bias's does not (it is added after them)."""
    a = _leaf(2, 9, 40, seed=11, dtype=torch.bfloat16)
    w = _leaf(24, 40, seed=12, dtype=torch.bfloat16)
    bias = _leaf(24, seed=13, dtype=torch.bfloat16)
    gen = torch.Generator().manual_seed(14)
    if scales == "tensor":
        sa, sb = torch.tensor([2.5]), torch.tensor([0.75])
    else:
        sa, sb = torch.rand(18, generator=gen) + 0.5, torch.rand(24, generator=gen) + 0.5
    out = matmul_op(a, w.t(), bias=bias, activation=activation, out_dtype=torch.float32, scale_a=sa, scale_b=sb)
    g = torch.randn(out.shape, generator=gen)
    out.backward(g)
    ra, rw, rb = (t.detach().double().requires_grad_(True) for t in (a, w, bias))
    per_row = sa.double().reshape(-1, 1) if sa.numel() == 1 else sa.double().reshape(2, 9, 1)   # a's rows
    z = (ra @ rw.t()) * per_row * sb.double() + rb
    if activation == "relu":
        z = torch.relu(z)
    elif activation == "swiglu":
        z = torch.nn.functional.silu(z[..., 0::2]) * z[..., 1::2]
    z.backward(g.double())
    for mine, theirs in zip((a, w, bias), (ra, rw, rb)):
        err = ((mine.grad.double() - theirs.grad).norm() / theirs.grad.norm()).item()
        assert err < 1e-2, err


def test_torch_compile_fullgraph_on_the_cpu():
    """One opaque op in the graph: Dynamo traces the fake, the real function runs the interpreter."""
    lin = torch.nn.Linear(32, 48).to(torch.bfloat16)

    def f(x):
        return matmul_op(x, lin.weight.t(), bias=lin.bias, activation="relu") * 2

    x = torch.randn(5, 32).to(torch.bfloat16)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    got = compiled(x)
    ref = torch.relu(x.float() @ lin.weight.float().t() + lin.bias.float()) * 2
    assert ((got.float() - ref).norm() / ref.norm()).item() < 1e-2


@pytest.mark.parametrize("activation", ["swiglu", "geglu"])
def test_glu_backward_matches_torch(activation):
    """The custom op's backward through a GLU pair (gate 2j, up 2j + 1) against autograd of
    the same function in float32."""
    from tlxc.ops import matmul_op
    g = torch.Generator().manual_seed(21)
    x = torch.randn(6, 32, generator=g).requires_grad_(True)
    w = torch.randn(20, 32, generator=g).requires_grad_(True)
    bias = torch.randn(20, generator=g).requires_grad_(True)
    xb, wb, bb = (t.detach().to(torch.bfloat16).requires_grad_(True) for t in (x, w, bias))
    out = matmul_op(xb, wb.t(), bias=bb, activation=activation, out_dtype=torch.float32)
    assert out.shape == (6, 10)
    out.square().sum().backward()
    z = xb.detach().float() @ wb.detach().float().t() + bb.detach().float()
    z.requires_grad_(True)
    gate = torch.nn.functional.silu if activation == "swiglu" else torch.nn.functional.gelu
    (gate(z[:, 0::2]) * z[:, 1::2]).square().sum().backward()
    gz = z.grad
    for got, want in ((bb.grad, gz.sum(0)), (xb.grad, gz @ wb.detach().float()), (wb.grad, gz.t() @ xb.detach().float())):
        assert ((got.float() - want).norm() / want.norm()).item() < 2e-2


def test_the_public_matmul_is_differentiable_and_compiles():
    """``tlxc.ops.matmul`` on inputs that require grad goes through the custom op (a graph node
    with the op's backward, not a silently detached result); ``out=``/``config=`` are refused
    there by name; under no_grad it launches directly; ``torch.compile(fullgraph=True)`` traces it."""
    lin = torch.nn.Linear(32, 24).to(torch.bfloat16)
    x = _leaf(6, 32, seed=21, dtype=torch.bfloat16)
    y = tlxc.ops.matmul(x, lin.weight.t(), bias=lin.bias, activation="gelu")
    assert y.grad_fn is not None
    y.float().square().sum().backward()
    rx, rw, rb = (t.detach().double().requires_grad_(True) for t in (x, lin.weight, lin.bias))
    torch.nn.functional.gelu(rx @ rw.t() + rb).square().sum().backward()
    for mine, theirs in zip((x, lin.weight, lin.bias), (rx, rw, rb)):
        assert ((mine.grad.double() - theirs.grad).norm() / theirs.grad.norm()).item() < 2e-2
    for kwargs in ({"out": torch.empty(6, 24, dtype=torch.bfloat16)}, {"config": "dot_64x128x64_s4_w4"}):
        name = next(iter(kwargs))
        with pytest.raises(ValueError, match=f"'{name}=' applies to calls autograd does not record"):
            tlxc.ops.matmul(x, lin.weight.t(), **kwargs)
    with torch.no_grad():
        assert tlxc.ops.matmul(x, lin.weight.t(), config="dot_64x128x64_s4_w4").grad_fn is None
    compiled = torch.compile(lambda t: tlxc.ops.matmul(t, lin.weight.t(), activation="relu") * 2, fullgraph=True,
                             backend="aot_eager")
    got = compiled(x.detach())
    ref = torch.relu(x.detach().float() @ lin.weight.detach().float().t()) * 2
    assert ((got.float() - ref).norm() / ref.norm()).item() < 1e-2
