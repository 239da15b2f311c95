"""Checks shared by the attention test files: fresh float tensors poisoned with NaN (a row the
kernel does not write shows up), and the output/LSE comparison with float64 math."""
from __future__ import annotations

import torch

TOL = {torch.bfloat16: 2e-2, torch.float16: 4e-3}     # max |o - ref|: o is an average of N(0, 1) rows


def poison_fresh_tensors(monkeypatch) -> None:
    """``torch.empty`` and ``Tensor.new_empty`` return NaN-filled float tensors for the test."""
    empty, new_empty = torch.empty, torch.Tensor.new_empty

    def fill(t):
        return t.fill_(float("nan")) if t.is_floating_point() else t
    monkeypatch.setattr(torch, "empty", lambda *a, **k: fill(empty(*a, **k)))
    monkeypatch.setattr(torch.Tensor, "new_empty", lambda self, *a, **k: fill(new_empty(self, *a, **k)))


def check_attention(o, lse, ref_o, ref_lse, dtype, lse_tol: float = 1e-4) -> None:
    """``o`` written everywhere and within ``TOL[dtype]`` of ``ref_o``; ``lse`` within ``lse_tol``
    where the reference is finite, ``-inf`` exactly where it is (rows that see no key)."""
    finite = torch.isfinite(ref_lse)
    assert torch.isfinite(o).all(), "an output row was not written (NaN poison left)"
    assert (o.double() - ref_o).abs().max().item() < TOL[dtype]
    assert (lse[finite].double() - ref_lse[finite]).abs().max().item() < lse_tol
    assert (lse[~finite] == float("-inf")).all(), "a row that sees no key must have lse = -inf"


def check_op_gradients(q0, k0, v0, do, tol: float = 2e-2, **kwargs) -> None:
    """``tlxc.ops.attention(q, k, v, **kwargs)``'s gradients for the output gradient ``do``, finite
    and within ``tol`` (relative norm) of float64 autograd through ``attention.reference``."""
    import tlxc.ops
    from tlxc.ops.attention import reference
    q, k, v = (t.clone().requires_grad_() for t in (q0, k0, v0))
    tlxc.ops.attention(q, k, v, **kwargs).backward(do)
    qd, kd, vd = (t.double().requires_grad_() for t in (q0, k0, v0))
    reference(qd, kd, vd, **kwargs)[0].backward(do.double())
    for got, want in ((q.grad, qd.grad), (k.grad, kd.grad), (v.grad, vd.grad)):
        assert torch.isfinite(got).all()
        assert ((got.double() - want).norm() / want.norm()).item() < tol
