"""tlxc.ops.attention's sliding windows and logit softcapping on the GPU (marked gpu), against
float64 math: every tile width, GQA, causal or not, Sq != Sk, lengths off the blocks, rows
without keys, varlen; the op under autograd once the backward takes them."""
from __future__ import annotations

import pytest
import torch
from attention_checks import TOL, check_attention, check_op_gradients, poison_fresh_tensors

import tlxc.ops
from tlxc.ops.attention import attention_forward, reference

pytestmark = pytest.mark.gpu



def _poison_empty(monkeypatch):
    poison_fresh_tensors(monkeypatch)


def _check(o, lse, ref_o, ref_lse, dtype):
    check_attention(o, lse, ref_o, ref_lse, dtype, lse_tol=1e-3)


@pytest.mark.parametrize("softcap", [None, 30.0], ids=["nocap", "cap30"])
@pytest.mark.parametrize("causal,window", [(True, (255, 0)), (False, (100, 300)), (False, (-1, 70)),
                                           (True, (1000, -1))], ids=str)
@pytest.mark.parametrize("D", [64, 96, 128, 256])
@pytest.mark.parametrize("B,H,Hkv,Sq,Sk", [(2, 8, 2, 1000, 1000), (1, 4, 1, 700, 300), (1, 4, 4, 257, 1100)])
def test_window_softcap_match_float64(B, H, Hkv, Sq, Sk, D, causal, window, softcap, monkeypatch):
    _poison_empty(monkeypatch)
    dtype = torch.bfloat16
    q = torch.randn(B, H, Sq, D, device="cuda", dtype=dtype) * 3
    k = torch.randn(B, Hkv, Sk, D, device="cuda", dtype=dtype)
    v = torch.randn(B, Hkv, Sk, D, device="cuda", dtype=dtype)
    o, lse = attention_forward(q, k, v, causal=causal, window=window, softcap=softcap)
    _check(o, lse, *reference(q, k, v, causal=causal, window=window, softcap=softcap), dtype)


@pytest.mark.parametrize("causal,window", [(True, (63, 0)), (False, (200, 17))], ids=str)
def test_varlen_window_softcap(causal, window, monkeypatch):
    _poison_empty(monkeypatch)
    lens_q, lens_k = [700, 0, 1300, 129, 1], [700, 40, 900, 2000, 1]
    cu_q = torch.tensor([0] + torch.tensor(lens_q).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + torch.tensor(lens_k).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    q = torch.randn(sum(lens_q), 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(sum(lens_k), 2, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(sum(lens_k), 2, 128, device="cuda", dtype=torch.bfloat16)
    o, lse = attention_forward(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, window=window,
                               softcap=15.0)
    _check(o, lse, *reference(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, window=window,
                              softcap=15.0), torch.bfloat16)


def test_public_op_under_torch_compile():
    q = torch.randn(2, 4, 600, 64, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(2, 2, 600, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))

    def f(q, k, v):
        return tlxc.ops.attention(q, k, v, causal=True, window=(127, 0), softcap=20.0, scale=0.1)
    o = torch.compile(f, fullgraph=True)(q, k, v)
    ref, _ = reference(q, k, v, causal=True, window=(127, 0), softcap=20.0, sm_scale=0.1)
    assert (o.double() - ref).abs().max().item() < TOL[torch.bfloat16]


@pytest.mark.parametrize("causal,window,softcap", [(True, (255, 0), None), (False, (100, 300), 30.0),
                                                   (True, None, 20.0)], ids=str)
@pytest.mark.parametrize("D", [64, 128])
def test_autograd_through_the_op(D, causal, window, softcap):
    q0 = torch.randn(2, 8, 1000, D, device="cuda", dtype=torch.bfloat16) * 2
    k0, v0 = (torch.randn(2, 2, 900, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    check_op_gradients(q0, k0, v0, torch.randn_like(q0), causal=causal, window=window, softcap=softcap)
