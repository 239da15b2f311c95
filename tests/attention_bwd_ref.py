"""Reference math and inputs for the attention backward tests (tests/test_ops_attention_bwd.py on
the interpreter, tests/test_gpu_attention_bwd.py on the GPU): float64 autograd of plain softmax
attention, the forward's o (rounded to the input dtype, as a forward returns it) and lse
(float32), dense [B, H, S, D] or packed [total, H, D] with cu_seqlens."""
from __future__ import annotations

import math

import torch


def dense_reference(q, k, v, do, causal: bool, scale: float):
    """(o, lse, dq, dk, dv) in float64 for q [B, H, Sq, D], k/v [B, Hkv, Sk, D] (GQA by
    repeating k/v heads; their gradients summed back by autograd); causal top-left aligned."""
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    kk, vv = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = q @ kk.transpose(-1, -2) * scale
    if causal:
        sq, sk = s.shape[-2:]
        s = s.masked_fill(torch.ones(sq, sk, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s, -1)
    o = torch.softmax(s, -1) @ vv
    o.backward(do.double())
    return o.detach(), lse.detach(), q.grad, k.grad, v.grad


def packed_reference(q, k, v, do, cu_q, cu_k, causal: bool, scale: float):
    """The same for packed q [total_q, H, D], k/v [total_k, Hkv, D]: each sequence alone.
    lse comes back [H, total_q]."""
    outs = [torch.zeros(q.shape, dtype=torch.float64, device=q.device) for _ in range(2)]
    o, dq = outs
    dk = torch.zeros(k.shape, dtype=torch.float64, device=q.device)
    dv = torch.zeros_like(dk)
    lse = torch.zeros(q.shape[1], q.shape[0], dtype=torch.float64, device=q.device)
    cu_q, cu_k = cu_q.tolist(), cu_k.tolist()
    for b in range(len(cu_q) - 1):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        if qs.stop == qs.start:
            continue
        if ks.stop == ks.start:        # no key: o = 0, lse = -inf, no gradient
            lse[:, qs] = float("-inf")
            continue
        r = dense_reference(*(t[s].transpose(0, 1)[None] for t, s in ((q, qs), (k, ks), (v, ks), (do, qs))),
                            causal, scale)
        o[qs], lse[:, qs], dq[qs], dk[ks], dv[ks] = (r[0][0].transpose(0, 1), r[1][0], r[2][0].transpose(0, 1),
                                                     r[3][0].transpose(0, 1), r[4][0].transpose(0, 1))
    return o, lse, dq, dk, dv


def rel_err(out, ref) -> float:
    """Normwise relative error; the output must be finite (poison left behind fails)."""
    assert torch.isfinite(out).all(), "NaN/inf (poison or overflow) in the output"
    denom = ref.double().norm().clamp_min(1e-30)
    return ((out.double() - ref.double()).norm() / denom).item()


# normwise relative error of a gradient: P and dS rounded to the dtype before their MMAs,
# dq/dk/dv rounded at the end (bf16 measured ~2.5e-3 on the interpreter)
TOL = {torch.bfloat16: 1.2e-2, torch.float16: 3e-3}


def dense_inputs(B, H, Hkv, Sq, Sk, D, dtype, device="cpu", seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(B, H, Sq, D, generator=g, device=device).to(dtype)
    k = torch.randn(B, Hkv, Sk, D, generator=g, device=device).to(dtype)
    v = torch.randn(B, Hkv, Sk, D, generator=g, device=device).to(dtype)
    do = torch.randn(B, H, Sq, D, generator=g, device=device).to(dtype)
    return q, k, v, do


def packed_inputs(lens_q, lens_k, H, Hkv, D, dtype, device="cpu", seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    tq, tk = sum(lens_q), sum(lens_k)
    q = torch.randn(tq, H, D, generator=g, device=device).to(dtype)
    k = torch.randn(tk, Hkv, D, generator=g, device=device).to(dtype)
    v = torch.randn(tk, Hkv, D, generator=g, device=device).to(dtype)
    do = torch.randn(tq, H, D, generator=g, device=device).to(dtype)
    cu_q = torch.tensor([0] + list(_cumsum(lens_q)), dtype=torch.int32, device=device)
    cu_k = torch.tensor([0] + list(_cumsum(lens_k)), dtype=torch.int32, device=device)
    return q, k, v, do, cu_q, cu_k


def _cumsum(xs):
    total = 0
    for x in xs:
        total += x
        yield total


def default_scale(D: int) -> float:
    return 1.0 / math.sqrt(D)
