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
