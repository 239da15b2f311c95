"""The fp8 attention forward on the GPU (marked gpu) against float64 math on the dequantized inputs:
e4m3 and e5m2, every tile width, causal or not, GQA, lengths off the blocks, per-head descales, a
window with softcapping, BSHD inputs; NaN-poisoned fresh tensors (o and Vᵀ's padding)."""
from __future__ import annotations

import importlib

import pytest
import torch
from attention_checks import check_fp8_attention, fp8_inputs, poison_fresh_tensors

import tlxc.ops

A = importlib.import_module("tlxc.ops.attention")
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", [E4M3, E5M2], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 96, 128, 192, 256])
@pytest.mark.parametrize("B,H,Hkv,Sq,Sk", [(2, 8, 2, 1000, 1000), (1, 4, 4, 257, 700), (1, 2, 1, 4096, 4096)],
                         ids=str)
def test_forward_matches_float64(B, H, Hkv, Sq, Sk, D, causal, dtype, monkeypatch):
    poison_fresh_tensors(monkeypatch)
    q, k, v = fp8_inputs((B, H, Sq, D), (B, Hkv, Sk, D), dtype, device="cuda", seed=D + Sq)
    o, lse = A.attention_forward(q, k, v, causal=causal)
    check_fp8_attention(o, lse, q, k, v, causal=causal)


@pytest.mark.parametrize("D", [64, 128])
def test_descales_window_softcap_bshd(D, monkeypatch):
    poison_fresh_tensors(monkeypatch)
    q, k, v = fp8_inputs((2, 1500, 8, D), (2, 1500, 2, D), E4M3, device="cuda", seed=5)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    dq = torch.tensor([[0.5, 2.0], [1.0, 0.25]], device="cuda")
    o, lse = tlxc.ops.attention(q, k, v, causal=True, window=(300, 0), softcap=30.0, q_descale=dq, k_descale=0.5,
                                v_descale=torch.tensor(2.0, device="cuda"), return_lse=True)
    check_fp8_attention(o, lse, q, k, v, descales=(dq, 0.5, 2.0), causal=True, window=(300, 0), softcap=30.0)


def test_transposed_v_on_the_gpu(monkeypatch):
    poison_fresh_tensors(monkeypatch)
    v = torch.randn(3, 1000, 4, 192, device="cuda").to(E4M3).transpose(1, 2)
    vt = A.transposed_v(v)
    assert vt.shape == (3, 4, 192, 1024)
    cols = A.k32_position(torch.arange(1000, device="cuda"))
    assert torch.equal(vt.view(torch.uint8)[..., cols], v.transpose(-1, -2).view(torch.uint8))
    pad = torch.ones(1024, dtype=torch.bool, device="cuda")
    pad[cols] = False
    assert (vt.view(torch.uint8)[..., pad] == 0).all()


@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen(D, causal, monkeypatch):
    poison_fresh_tensors(monkeypatch)
    lens_q, lens_k = [700, 0, 1300, 129, 1, 333], [700, 40, 900, 2000, 1, 0]
    cu_q = torch.tensor([0, *torch.tensor(lens_q).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, *torch.tensor(lens_k).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    q, k, v = fp8_inputs((sum(lens_q), 8, D), (sum(lens_k), 2, D), E4M3, device="cuda", seed=D)
    o, lse = tlxc.ops.attention(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=1300,
                                max_seqlen_k=2000, v_descale=2.0, return_lse=True)
    check_fp8_attention(o, lse, q, k, v, descales=(1.0, 1.0, 2.0), causal=causal, cu_seqlens_q=cu_q,
                        cu_seqlens_k=cu_k)
