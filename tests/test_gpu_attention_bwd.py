"""The attention backward (tlxc/ops/attention_bwd.py) on the GPU at realistic sizes: dense MHA and
GQA 4:1, head dims 64/96/128/256, causal or not, fp16 and bf16, packed batches of mixed lengths;
against float64 autograd (smaller cases) and float32 torch SDPA's backward (larger ones);
outputs poisoned with NaN."""
from __future__ import annotations

import importlib

import pytest
import torch
from attention_bwd_ref import TOL, dense_inputs, dense_reference, packed_inputs, packed_reference, rel_err

from tlxc.ops.attention_bwd import attention_bwd

pytestmark = pytest.mark.gpu
host = importlib.import_module("tlxc.ops.attention_bwd")


@pytest.fixture
def poisoned(monkeypatch):
    monkeypatch.setattr(host.torch, "empty_like", lambda t: torch.full_like(t, float("nan")))


def _check(got, ref, dtype, what=""):
    for name, g, r in zip(("dq", "dk", "dv"), got, ref):
        err = rel_err(g, r)
        assert err < TOL[dtype], f"{what} {name}: relative error {err:.2e} >= {TOL[dtype]:.0e}"


def _sdpa_fp32(q, k, v, do, causal, scale):
    """o, lse (float32) and the float32 gradients from torch SDPA (math) with enable_gqa."""
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    s = (qf @ kf.repeat_interleave(group, 1).transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s, -1)
    o = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, is_causal=causal, scale=scale,
                                                         enable_gqa=group > 1)
    o.backward(do.float())
    return o.detach(), lse.detach(), qf.grad, kf.grad, vf.grad


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 96, 128, 256])
@pytest.mark.parametrize("H, Hkv", [(8, 8), (8, 2)])
def test_dense(H, Hkv, D, causal, dtype, poisoned):
    """B=2, Sq=Sk=1000 (not a block multiple)."""
    q, k, v, do = dense_inputs(2, H, Hkv, 1000, 1000, D, dtype, device="cuda", seed=D)
    scale = D ** -0.5
    o, lse, *ref = _sdpa_fp32(q, k, v, do, causal, scale)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse, causal=causal, sm_scale=scale)
    torch.cuda.synchronize()
    _check(got, ref, dtype, f"D={D} causal={causal} {H}:{Hkv}")


@pytest.mark.parametrize("causal", [False, True])
def test_dense_sq_ne_sk_float64(causal, poisoned):
    """Sq=333 < Sk=1025 and Sq=1025 > Sk=333 against float64 autograd (top-left causal)."""
    for sq, sk in ((333, 1025), (1025, 333)):
        dtype = torch.bfloat16
        q, k, v, do = dense_inputs(1, 4, 1, sq, sk, 128, dtype, device="cuda", seed=sq)
        o, lse, *ref = dense_reference(q, k, v, do, causal, 0.09)
        got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=causal, sm_scale=0.09)
        _check(got, ref, dtype, f"{sq}x{sk}")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_packed(D, causal, poisoned, monkeypatch):
    """The tl.dot kernels on packed sequences (auto would take the ws kernel at 2048 keys)."""
    monkeypatch.setenv("TLXC_ATTN_BWD", "dot")
    lens_q = [1, 777, 2048, 130, 0, 513]
    lens_k = [1, 777, 2048, 70, 9, 1000]
    dtype = torch.bfloat16
    q, k, v, do, cu_q, cu_k = packed_inputs(lens_q, lens_k, 8, 2, D, dtype, device="cuda", seed=D)
    o, lse, *ref = packed_reference(q, k, v, do, cu_q, cu_k, causal, D ** -0.5)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=causal, sm_scale=D ** -0.5,
                        cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k))
    _check(got, ref, dtype, "packed")


def test_deterministic(monkeypatch):
    """The tl.dot kernels (TLXC_ATTN_BWD=dot) have no atomics: two runs give bit-identical gradients."""
    monkeypatch.setenv("TLXC_ATTN_BWD", "dot")
    q, k, v, do = dense_inputs(2, 8, 2, 2048, 2048, 128, torch.bfloat16, device="cuda")
    o, lse, *_ = _sdpa_fp32(q, k, v, do, True, 0.088)
    a = attention_bwd(do, q, k, v, o.bfloat16(), lse, causal=True, sm_scale=0.088)
    b = attention_bwd(do, q, k, v, o.bfloat16(), lse, causal=True, sm_scale=0.088)
    assert all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("H, Hkv", [(8, 8), (8, 2)])
@pytest.mark.parametrize("dq_rows", [False, True])
def test_ws_dense(H, Hkv, D, causal, dq_rows, poisoned, monkeypatch):
    """The warp-specialized kernel (TLXC_ATTN_BWD=ws): B=2, S=1000, bf16; dQ staged in column blocks
    or in rows (WS_DQ_ROWS)."""
    monkeypatch.setenv("TLXC_ATTN_BWD", "ws")
    monkeypatch.setattr(host, "WS_DQ_ROWS", {64: dq_rows, 128: dq_rows})
    dtype = torch.bfloat16
    q, k, v, do = dense_inputs(2, H, Hkv, 1000, 1000, D, dtype, device="cuda", seed=D + 1)
    scale = D ** -0.5
    o, lse, *ref = _sdpa_fp32(q, k, v, do, causal, scale)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse, causal=causal, sm_scale=scale)
    torch.cuda.synchronize()
    _check(got, ref, dtype, f"ws D={D} causal={causal} {H}:{Hkv}")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("H, Hkv", [(8, 8), (8, 2)])
def test_ws_drifting_consumers_at_head_dim_128(H, Hkv, causal, poisoned, monkeypatch):
    """WS_DRIFT at D = 128 (shipped without a mask; forced on under one here): the tile's dQ consumer computes
    both column halves; B=2, S=1000."""
    monkeypatch.setenv("TLXC_ATTN_BWD", "ws")
    monkeypatch.setattr(host, "WS_DRIFT", dict.fromkeys(host.WS_DRIFT, True))
    dtype = torch.bfloat16
    q, k, v, do = dense_inputs(2, H, Hkv, 1000, 1000, 128, dtype, device="cuda", seed=129)
    o, lse, *ref = _sdpa_fp32(q, k, v, do, causal, 128 ** -0.5)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse, causal=causal, sm_scale=128 ** -0.5)
    torch.cuda.synchronize()
    _check(got, ref, dtype, f"ws drift D=128 causal={causal} {H}:{Hkv}")


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dq_rows", [False, True])
def test_ws_packed_and_bshd(causal, D, dq_rows, poisoned, monkeypatch):
    """Packed sequences with empty ones (programs with no query tile: at D = 64 they still load
    K and V), and BSHD views; dQ staged in column blocks or in rows (WS_DQ_ROWS)."""
    monkeypatch.setenv("TLXC_ATTN_BWD", "ws")
    monkeypatch.setattr(host, "WS_DQ_ROWS", {64: dq_rows, 128: dq_rows})
    lens_q = [1, 777, 2048, 130, 0, 513]
    lens_k = [1, 777, 2048, 70, 9, 1000]
    dtype = torch.bfloat16
    q, k, v, do, cu_q, cu_k = packed_inputs(lens_q, lens_k, 8, 2, D, dtype, device="cuda", seed=3)
    o, lse, *ref = packed_reference(q, k, v, do, cu_q, cu_k, causal, 0.088)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=causal, sm_scale=0.088,
                        cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k))
    _check(got, ref, dtype, f"ws packed D={D}")
    q, k, v, do = (t.transpose(1, 2).contiguous().transpose(1, 2)
                   for t in dense_inputs(2, 8, 2, 1500, 1500, D, dtype, device="cuda", seed=4))
    o, lse, *ref = _sdpa_fp32(q, k, v, do, causal, 0.125)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse, causal=causal, sm_scale=0.125)
    _check(got, ref, dtype, f"ws bshd D={D}")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("sq, sk", [(1000, 1300), (1300, 700)])
def test_ws_persistent_several_items_per_program(sq, sk, D, causal, poisoned, monkeypatch):
    """The persistent ws kernel with 5 programs (``_num_sms`` patched): each walks 4-9 items (K, V
    reloaded per item, the rings and turns running on); GQA 4:2 of B = 2; causal with more keys than
    queries has items without a tile; float64 reference."""
    monkeypatch.setenv("TLXC_ATTN_BWD", "ws")
    monkeypatch.setattr(host, "_num_sms", lambda device: 5)
    monkeypatch.setattr(host, "WS_PERSISTENT", {False: True, True: True})     # shipped: causal only
    dtype = torch.bfloat16
    q, k, v, do = dense_inputs(2, 4, 2, sq, sk, D, dtype, device="cuda", seed=sq + D)
    o, lse, *ref = dense_reference(q, k, v, do, causal, 0.1)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=causal, sm_scale=0.1)
    torch.cuda.synchronize()
    _check(got, ref, dtype, f"ws persistent {sq}x{sk} D={D} causal={causal}")


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_ws_row_stats_in_shared_memory(causal, D, poisoned, monkeypatch):
    """WS_STATS_SMEM (the producer copies each tile's lse2 / delta rows by TMA; columns past a
    sequence's rows read as 0): dense GQA 8:2 at S = 1000 in one program per item and persistent,
    packed sequences with empty ones (each sequence's statistics moved to a 16-byte multiple: a TMA
    box starting between 16-byte chunks was an illegal instruction here, session 15)."""
    monkeypatch.setenv("TLXC_ATTN_BWD", "ws")
    monkeypatch.setattr(host, "WS_STATS_SMEM", dict.fromkeys(host.WS_STATS_SMEM, True))
    monkeypatch.setattr(host, "WS_STATS_SMEM_PACKED", True)
    dtype = torch.bfloat16
    q, k, v, do = dense_inputs(2, 8, 2, 1000, 1000, D, dtype, device="cuda", seed=D + 5)
    o, lse, *ref = _sdpa_fp32(q, k, v, do, causal, D ** -0.5)
    for persistent in (False, True):
        monkeypatch.setattr(host, "WS_PERSISTENT", {False: persistent, True: persistent})
        got = attention_bwd(do, q, k, v, o.to(dtype), lse, causal=causal, sm_scale=D ** -0.5)
        torch.cuda.synchronize()
        _check(got, ref, dtype, f"ws stats in shared memory D={D} causal={causal} persistent={persistent}")
    lens_q = [1, 777, 2048, 130, 0, 513]
    lens_k = [1, 777, 2048, 70, 9, 1000]
    q, k, v, do, cu_q, cu_k = packed_inputs(lens_q, lens_k, 8, 2, D, dtype, device="cuda", seed=6)
    o, lse, *ref = packed_reference(q, k, v, do, cu_q, cu_k, causal, 0.088)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=causal, sm_scale=0.088,
                        cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k))
    _check(got, ref, dtype, f"ws stats in shared memory, packed D={D}")


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_ws_dynamic_schedule(causal, D, poisoned, monkeypatch):
    """WS_DYNAMIC (one program per SM drawing its next item from a device counter): dense MHA and GQA
    8:2 at S = 1000 (not a block multiple), twice in a row (the counter is zeroed per call)."""
    monkeypatch.setenv("TLXC_ATTN_BWD", "ws")
    monkeypatch.setattr(host, "WS_DYNAMIC", {False: True, True: True})
    dtype = torch.bfloat16
    for hkv in (8, 2):
        q, k, v, do = dense_inputs(2, 8, hkv, 1000, 1000, D, dtype, device="cuda", seed=D + hkv)
        o, lse, *ref = _sdpa_fp32(q, k, v, do, causal, D ** -0.5)
        for _ in range(2):
            got = attention_bwd(do, q, k, v, o.to(dtype), lse, causal=causal, sm_scale=D ** -0.5)
            torch.cuda.synchronize()
            _check(got, ref, dtype, f"ws dynamic D={D} causal={causal} 8:{hkv}")
