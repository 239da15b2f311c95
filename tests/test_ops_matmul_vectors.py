"""tlxc.ops.matmul with 1-D operands, read as torch.matmul reads them: a vector ``a`` is one row, a
vector ``b`` one column, and the added dimension leaves the result (``[K] @ [K, N]`` is ``[N]``,
``[..., M, K] @ [K]`` is ``[..., M]``, ``[K] @ [K]`` is 0-d), with ``out`` (poisoned, written in place),
the epilogue, autograd and torch.compile; on the interpreter against float64 products."""
from __future__ import annotations

import pytest
import torch

import tlxc.ops


def _bf16(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def _rel(got, ref):
    return ((got.double() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("a_shape, b_shape", [((40,), (40, 24)), ((37, 40), (40,)), ((3, 5, 40), (40,)),
                                              ((40,), (40,)), ((1,), (1, 9))])
def test_vector_operands_match_torch_matmul(a_shape, b_shape):
    a, b = _bf16(*a_shape, seed=1), _bf16(*b_shape, seed=2)
    ref = torch.matmul(a.double(), b.double())
    got = tlxc.ops.matmul(a, b)
    assert got.shape == ref.shape and got.dtype == torch.bfloat16
    assert _rel(got, ref) < 1e-2
    out = torch.full(ref.shape, float("nan"), dtype=torch.float32)
    assert tlxc.ops.matmul(a, b, out) is out
    assert _rel(out, ref) < 1e-5


def test_vector_a_with_bias_activation_and_residual():
    a, w, bias, res = _bf16(40, seed=3), _bf16(40, 24, seed=4), _bf16(24, seed=5), _bf16(24, seed=6)
    got = tlxc.ops.matmul(a, w, bias=bias, activation="gelu", residual=res, out_dtype=torch.float32)
    ref = torch.nn.functional.gelu(a.double() @ w.double() + bias.double()) + res.double()
    assert got.shape == (24,) and _rel(got, ref) < 1e-5


def test_vector_gradients_and_compile():
    a = _bf16(40, seed=7).requires_grad_()
    w = _bf16(40, 24, seed=8).requires_grad_()
    tlxc.ops.matmul(a, w).float().square().sum().backward()
    ra, rw = a.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    (ra @ rw).square().sum().backward()
    assert _rel(a.grad, ra.grad) < 2e-2 and _rel(w.grad, rw.grad) < 2e-2
    compiled = torch.compile(lambda x, m: tlxc.ops.matmul(m, x), fullgraph=True, backend="aot_eager")
    x, m = _bf16(40, seed=9), _bf16(6, 40, seed=10)
    got = compiled(x, m)
    assert got.shape == (6,) and _rel(got, m.double() @ x.double()) < 1e-2


def test_vector_shape_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"got \(40,\) @ \(2, 40, 3\)"):
        tlxc.ops.matmul(_bf16(40, seed=1), _bf16(2, 40, 3, seed=2))
    with pytest.raises(ValueError, match=r"got \(40,\) @ \(39,\)"):
        tlxc.ops.matmul(_bf16(40, seed=1), _bf16(39, seed=2))
    with pytest.raises(ValueError, match="'out' must be"):
        tlxc.ops.matmul(_bf16(40, seed=1), _bf16(40, 24, seed=2), torch.empty(1, 24, dtype=torch.bfloat16))
