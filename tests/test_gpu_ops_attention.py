"""tlxc.ops.attention on the GPU (marked gpu): the forward against float64 math for every head
dim, GQA, causal (top-left, Sq != Sk), BSHD strides and varlen; the custom op under
torch.compile; the backward against float64 gradients once tlxc/ops/kernels/attention_bwd.py
exists (skipped before)."""
from __future__ import annotations

import importlib.util

import pytest
import torch
from attention_checks import TOL, check_attention, poison_fresh_tensors

import tlxc.ops
from tlxc.ops.attention import attention_forward, reference

pytestmark = pytest.mark.gpu



def _poison_empty(monkeypatch):
    poison_fresh_tensors(monkeypatch)


def _check(o, lse, ref_o, ref_lse, dtype):
    check_attention(o, lse, ref_o, ref_lse, dtype, lse_tol=1e-3)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 96, 128, 192, 256])
@pytest.mark.parametrize("B,H,Hkv,Sq,Sk", [(2, 8, 2, 1000, 1000), (1, 8, 1, 257, 513), (3, 4, 4, 513, 129),
                                           (1, 2, 1, 1, 1)])
def test_dense_matches_float64(B, H, Hkv, Sq, Sk, D, causal, dtype, monkeypatch):
    _poison_empty(monkeypatch)
    q = torch.randn(B, H, Sq, D, device="cuda", dtype=dtype)
    k = torch.randn(B, Hkv, Sk, D, device="cuda", dtype=dtype)
    v = torch.randn(B, Hkv, Sk, D, device="cuda", dtype=dtype)
    o, lse = attention_forward(q, k, v, causal=causal)
    _check(o, lse, *reference(q, k, v, causal=causal), dtype)


@pytest.mark.parametrize("D", [64, 128, 256])
def test_bshd_layout_in_place(D):
    q = torch.randn(2, 300, 8, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    kv = torch.randn(2, 300, 2, 2, D, device="cuda", dtype=torch.bfloat16)          # packed k, v
    k, v = kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)
    o, lse = attention_forward(q, k, v, causal=True)
    assert o.transpose(1, 2).is_contiguous()
    _check(o, lse, *reference(q, k, v, causal=True), torch.bfloat16)


@pytest.mark.parametrize("Sq,Sk", [(100, 1000), (1000, 100)])
def test_causal_top_left_as_sdpa(Sq, Sk):
    q = torch.randn(1, 4, Sq, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, 4, Sk, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o, _ = attention_forward(q, k, v, causal=True)
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    assert (o.double() - ref).abs().max().item() < TOL[torch.bfloat16]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("given_max", [True, False], ids=["max_given", "max_computed"])
@pytest.mark.parametrize("order", ["sorted", "snake"])
def test_varlen_matches_float64(D, causal, given_max, order, monkeypatch):
    _poison_empty(monkeypatch)
    lens_q = [1, 0, 700, 129, 64, 2048, 3]
    lens_k = [5, 9, 700, 0, 300, 2048, 1]
    cu_q = torch.tensor([0, *torch.tensor(lens_q).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0, *torch.tensor(lens_k).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    q = torch.randn(sum(lens_q), 8, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(sum(lens_k), 2, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(sum(lens_k), 2, D, device="cuda", dtype=torch.bfloat16)
    extra = {"max_seqlen_q": max(lens_q), "max_seqlen_k": max(lens_k)} if given_max else {}
    o, lse = attention_forward(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, varlen_order=order,
                               **extra)
    ref = reference(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    _check(o, lse, *ref, torch.bfloat16)


def test_neighbouring_heads_and_sequences_do_not_leak():
    """Keys of a sequence's neighbours (varlen: the next rows) and of other heads never reach it."""
    q = torch.randn(1, 4, 200, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, 4, 200, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    big = torch.full((1, 4, 56, 128), 1e4, device="cuda", dtype=torch.bfloat16)
    o1, _ = attention_forward(q, k, v)
    o2, _ = attention_forward(q, torch.cat([k, big], 2)[:, :, :200], torch.cat([v, big], 2)[:, :, :200])
    assert torch.equal(o1, o2)
    cu = torch.tensor([0, 200, 256], dtype=torch.int32, device="cuda")
    qv = torch.cat([q[0].transpose(0, 1), q[0, :, :56].transpose(0, 1)])
    kv = torch.cat([k[0].transpose(0, 1), big[0].transpose(0, 1)])
    vv = torch.cat([v[0].transpose(0, 1), big[0].transpose(0, 1)])
    o3, _ = attention_forward(qv, kv, vv, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=200, max_seqlen_k=200)
    assert torch.equal(o3[:200], o1[0].transpose(0, 1))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("cfg", [(64, 128, 128, 2, 2, True), (128, 128, 128, 2, 2, True), (128, 128, 64, 4, 2, True),
                                 (256, 128, 64, 2, 1, True), (128, 128, 128, 3, 1, False), (64, 128, 64, 4, 2, False),
                                 (64, 128, 128, 4, 2, True, 4), (128, 128, 64, 4, 2, False, 8),
                                 (256, 128, 32, 2, 2, False, 16), (256, 128, 64, 2, 1, True, 8),
                                 (64, 128, 128, 4, 2, False, 4, True), (128, 128, 128, 2, 2, True, 4, True),
                                 (64, 128, 128, 6, 2, False, 4),
                                 (256, 128, 64, 2, 1, False, 0, False), (64, 128, 128, 2, 2, True, 0, True),
                                 (128, 128, 64, 4, 2, False, 0, True), (64, 128, 64, 4, 2, False, 0, True),
                                 (256, 128, 64, 2, 1, False, 0, True, False),
                                 (64, 128, 128, 2, 2, False, 0, True, True, True),        # pin_softmax
                                 (128, 128, 128, 2, 2, False, 0, True, True, True),
                                 (256, 128, 64, 2, 1, False, 0, True, True, True), (64, 192, 128, 2, 2, False, 0, False, True, True),
                                 (64, 128, 128, 2, 2, True, 0, True, True, True), (128, 128, 128, 2, 2, True, 0, True, True, True)],
                         ids=lambda c: "_".join(map(str, c)))
def test_other_configurations(cfg, causal, monkeypatch):
    """The configurations bench/ops_attention_bench.py --configs and its `ov` column time
    (overlap: an item's last P V issued with the next item's first Q K^T; a seventh field:
    L2 prefetches of the next item), dense S = 256 / 1000 and varlen."""
    from tlxc.ops.attention import AttnConfig
    _poison_empty(monkeypatch)
    c = AttnConfig(*cfg)
    D = {64: 64, 128: 128, 256: 256}[c.head_dim]
    for S in (256, 1000):
        q = torch.randn(4, 8, S, D, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(4, 2, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        o, lse = attention_forward(q, k, v, causal=causal, config=c)
        _check(o, lse, *reference(q, k, v, causal=causal), torch.bfloat16)
    if c.tma_store:     # dense only (the eighth field): a BSHD output stored in place instead of varlen
        q = torch.randn(4, 1000, 8, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        o, lse = attention_forward(q, k, v, causal=causal, config=c)
        assert o.stride(1) < o.stride(2)
        _check(o, lse, *reference(q, k, v, causal=causal), torch.bfloat16)
        return
    lens = [300, 0, 1, 777, 64]
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    q = torch.randn(sum(lens), 8, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(sum(lens), 2, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o, lse = attention_forward(q, k, v, causal=causal, config=c, cu_seqlens_q=cu, cu_seqlens_k=cu)
    _check(o, lse, *reference(q, k, v, causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cu), torch.bfloat16)


def test_torch_compile_fullgraph():
    q = torch.randn(2, 8, 512, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(2, 2, 512, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))

    def f(q, k, v):
        return tlxc.ops.attention(q, k, v, causal=True).sum(1)

    got = torch.compile(f, fullgraph=True)(q, k, v)
    ref = reference(q, k, v, causal=True)[0].sum(1)
    assert (got.double() - ref).abs().max().item() < 8 * TOL[torch.bfloat16]


def test_cuda_graph_capture_after_a_warm_up_call():
    q, k, v = (torch.randn(1, 4, 777, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = tlxc.ops.attention(q, k, v, causal=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o2 = tlxc.ops.attention(q, k, v, causal=True)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(o, o2)


@pytest.mark.parametrize("order", ["snake", "sorted"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen_graph_replay_with_new_lengths(causal, order, monkeypatch):
    """The varlen schedules read no lengths on the host (snake: from the shapes; sorted: built
    on the device from cu_seqlens): a captured graph replayed with other lengths (same batch,
    total and max_seqlen) is still right."""
    monkeypatch.setenv("TLXC_ATTN_VARLEN", order)
    cu = torch.tensor([0, 300, 301, 301, 1000], dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(1000, 4, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    args = {"causal": causal, "cu_seqlens_q": cu, "cu_seqlens_k": cu, "max_seqlen_q": 900, "max_seqlen_k": 900}
    tlxc.ops.attention(q, k, v, **args)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = tlxc.ops.attention(q, k, v, **args)
    cu.copy_(torch.tensor([0, 1, 100, 100, 1000], dtype=torch.int32))    # lengths 1, 99, 0, 900
    graph.replay()
    torch.cuda.synchronize()
    ref, _ = reference(q, k, v, causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cu)
    assert (o.double() - ref).abs().max().item() < TOL[torch.bfloat16]


HAS_BWD = importlib.util.find_spec("tlxc.ops.kernels.attention_bwd") is not None


@pytest.mark.skipif(not HAS_BWD, reason="tlxc/ops/kernels/attention_bwd.py is not there yet")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
def test_backward_matches_float64(D, causal, varlen):
    B, H, Hkv, S = 2, 8, 2, 300
    leaves = [torch.randn(B, h, S, D, device="cuda", dtype=torch.bfloat16).requires_grad_(True)
              for h in (H, Hkv, Hkv)]
    do = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
    if varlen:
        cu = torch.tensor([0, S, 2 * S], dtype=torch.int32, device="cuda")
        packed = [t.transpose(1, 2).reshape(B * S, t.shape[1], D) for t in leaves]
        o = tlxc.ops.attention(*packed, causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=S,
                               max_seqlen_k=S)
        o.backward(do.transpose(1, 2).reshape(B * S, H, D))
    else:
        tlxc.ops.attention(*leaves, causal=causal).backward(do)
    ref_leaves = [t.detach().double().requires_grad_(True) for t in leaves]
    ref, _ = reference(*ref_leaves, causal=causal)
    ref.backward(do.double())
    for mine, theirs in zip(leaves, ref_leaves):
        err = ((mine.grad.double() - theirs.grad).norm() / theirs.grad.norm()).item()
        assert err < 2e-2, err
