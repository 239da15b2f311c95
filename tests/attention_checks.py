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


# fp8 attention: P goes to the tensor cores in the inputs' fp8 type, so O is off by up to a rounding
# of P (relative 2^-4 for e4m3, 2^-3 for e5m2) times |v|; a wrong fragment or V^T box is off by ~|v|
P_EPS = {torch.float8_e4m3fn: 2.0 ** -4, torch.float8_e5m2: 2.0 ** -3}


def fp8_inputs(shape_q, shape_kv, dtype, device="cpu", seed=0):
    """q, k, v in ``dtype`` (fp8) from N(0, 1) draws (q scaled by 2: peakier rows)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    q = (torch.randn(shape_q, generator=gen, device=device) * 2).to(dtype)
    k = torch.randn(shape_kv, generator=gen, device=device).to(dtype)
    v = torch.randn(shape_kv, generator=gen, device=device).to(dtype)
    return q, k, v


def check_fp8_attention(o, lse, q, k, v, descales=(1.0, 1.0, 1.0), **kwargs) -> None:
    """fp8 ``o``/``lse`` against float64 math on the dequantized inputs (``descales``: numbers, or
    (B, Hkv) tensors for q, k, v)."""
    from tlxc.ops.attention import reference

    def scaled(t, d):           # a (B, Hkv) descale applies to every query head of its group
        d = torch.as_tensor(d, dtype=torch.float64, device=t.device)
        if d.dim() == 2:
            d = d.repeat_interleave(t.shape[1] // d.shape[1], 1)[:, :, None, None]
        return t.double() * d
    qd, kd, vd = (scaled(t, d) for t, d in zip((q, k, v), descales))
    ref_o, ref_lse = reference(qd, kd, vd, **kwargs)
    finite = torch.isfinite(ref_lse)
    assert torch.isfinite(o).all(), "an output row was not written (NaN poison left)"
    err = (o.double() - ref_o).abs().max().item()
    assert err <= P_EPS[q.dtype] * vd.abs().max().item(), err
    # Hopper's fp8 tensor cores add the products of Q Kᵀ with fewer than float32's bits (DeepSeek-V3
    # reports ~14): the scores, hence lse, are off by up to ~2^-11 of sum_d |q_d k_d| x the scale
    scale = kwargs.get("sm_scale") or q.shape[-1] ** -0.5
    group = qd.shape[-2 if q.dim() == 3 else 1] // kd.shape[-2 if q.dim() == 3 else 1]
    qh, kh = (qd, kd) if q.dim() == 4 else (qd.transpose(0, 1), kd.transpose(0, 1))    # varlen: [H, total, D]
    reach = (qh.abs() @ kh.abs().repeat_interleave(group, -3).transpose(-1, -2)).amax().item()
    lse_err = (lse[finite].double() - ref_lse[finite]).abs().max().item()
    assert lse_err <= 2.0 ** -11 * scale * reach + 1e-5, (lse_err, 2.0 ** -11 * scale * reach)
    assert (lse[~finite] == float("-inf")).all()
