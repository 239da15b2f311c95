"""tlxc.ops.attention on the CPU: the forward on the interpreter against float64 math (every
head dim, GQA 4:1 and 8:1, S not a multiple of the tiles, Sq != Sk with SDPA's top-left causal
mask, BSHD strides, varlen with lengths 0 and 1), outputs poisoned with NaN, the schedules,
argument errors, the custom op (fake, torch.compile, the autograd hand-off to attention_bwd),
and every configuration compiling for sm_90a."""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import math
import sys
import types

import pytest
import torch
from attention_checks import TOL, check_attention, poison_fresh_tensors
from sass_dump import sass as dump_sass

import tlxc.ops
from tlxc.ops.attention import attention_forward, compile_config, reference, snake_schedule

A = importlib.import_module("tlxc.ops.attention")       # the module (tlxc.ops.attention is the function)


@pytest.fixture
def poisoned(monkeypatch):
    """Fresh float tensors start as NaN: a row the kernel does not write shows up."""
    poison_fresh_tensors(monkeypatch)


def _randn(*shape, seed, dtype=torch.bfloat16):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


_check = check_attention


DENSE = [  # B, H, Hkv, Sq, Sk, D, dtype
    (2, 4, 1, 130, 130, 64, torch.bfloat16),      # GQA 4:1, S past one tile
    (1, 2, 2, 70, 200, 96, torch.bfloat16),       # padded head dim, Sq < Sk
    (1, 8, 1, 65, 65, 128, torch.float16),        # GQA 8:1 (MQA-like)
    (1, 2, 1, 130, 90, 192, torch.float16),       # Sq > Sk
    (1, 2, 1, 65, 129, 256, torch.bfloat16),
]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("B,H,Hkv,Sq,Sk,D,dtype", DENSE, ids=lambda x: str(x).replace("torch.", ""))
def test_dense_matches_float64(B, H, Hkv, Sq, Sk, D, dtype, causal, poisoned):
    q = _randn(B, H, Sq, D, seed=1, dtype=dtype)
    k = _randn(B, Hkv, Sk, D, seed=2, dtype=dtype)
    v = _randn(B, Hkv, Sk, D, seed=3, dtype=dtype)
    o, lse = attention_forward(q, k, v, causal=causal)
    assert o.shape == q.shape and o.dtype == dtype and lse.shape == (B, H, Sq) and lse.dtype == torch.float32
    _check(o, lse, *reference(q, k, v, causal=causal), dtype)


@pytest.mark.parametrize("Sq,Sk", [(50, 130), (130, 50)])
def test_causal_is_top_left_as_sdpa(Sq, Sk):
    """Sq != Sk: the mask of SDPA's is_causal (query i sees keys j <= i), checked against torch."""
    q, k, v = (_randn(1, 2, S, 64, seed=s) for s, S in ((4, Sq), (5, Sk), (6, Sk)))
    o, _ = attention_forward(q, k, v, causal=True, sm_scale=0.3)
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True,
                                                           scale=0.3)
    assert (o.double() - ref).abs().max().item() < TOL[torch.bfloat16]


def test_bshd_strides_read_in_place_and_kept():
    """[B, S, H, D] tensors seen as [B, H, S, D] (transpose(1, 2)): no copy, o in the same layout;
    a last dimension with stride 2 is copied."""
    q = _randn(2, 77, 4, 64, seed=7).transpose(1, 2)
    k = _randn(2, 50, 2, 64, seed=8).transpose(1, 2)
    v = _randn(2, 50, 2, 128, seed=9)[..., ::2].transpose(1, 2)          # last stride 2
    assert A._tma_ready(q) is q and A._tma_ready(v) is not v
    o, lse = attention_forward(q, k, v, causal=True)
    assert o.transpose(1, 2).is_contiguous()
    _check(o, lse, *reference(q, k, v, causal=True), torch.bfloat16)


@pytest.mark.parametrize("order", A.VARLEN_ORDERS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen_uneven_lengths(causal, order, poisoned):
    """Packed sequences of lengths 1, 0, 130, 64, 7 (queries) and 3, 5, 0, 200, 7 (keys): a query
    sequence with no keys gets o = 0 and lse = -inf; GQA 4:1; D = 128."""
    lens_q, lens_k = [1, 0, 130, 64, 7], [3, 5, 0, 200, 7]
    cu_q = torch.tensor([0, *torch.tensor(lens_q).cumsum(0).tolist()], dtype=torch.int32)
    cu_k = torch.tensor([0, *torch.tensor(lens_k).cumsum(0).tolist()], dtype=torch.int32)
    q = _randn(sum(lens_q), 4, 128, seed=10)
    k = _randn(sum(lens_k), 1, 128, seed=11)
    v = _randn(sum(lens_k), 1, 128, seed=12)
    o, lse = attention_forward(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=130,
                               max_seqlen_k=200, varlen_order=order)
    assert o.shape == q.shape and lse.shape == (4, sum(lens_q))
    ref_o, ref_lse = reference(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    _check(o, lse, ref_o, ref_lse, torch.bfloat16)
    assert (o[1:131] == 0).all()                   # the sequence with no keys


def test_varlen_head_dim_64_and_256_one_program():
    """One persistent program walks every item (Q buffers and the K/V ring wrap)."""
    cu = torch.tensor([0, 65, 66, 200], dtype=torch.int32)
    for D in (64, 256):
        q, k, v = (_randn(200, 2, D, seed=13 + i) for i in range(3))
        o, lse = attention_forward(q, k, v, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu, programs=1)
        _check(o, lse, *reference(q, k, v, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu), torch.bfloat16)


OVERLAP_CONFIGS = [A.AttnConfig(64, 128, 128, 2, 2, True), A.AttnConfig(64, 192, 128, 2, 2, True),
                   A.AttnConfig(128, 128, 128, 2, 2, True), A.AttnConfig(256, 128, 64, 2, 1, True)]


@pytest.mark.parametrize("programs", [1, 3])
@pytest.mark.parametrize("config", OVERLAP_CONFIGS, ids=lambda c: f"{c.head_dim}x{c.block_m}")
def test_overlapped_last_pv(config, programs, poisoned):
    """overlap=True: an item's last P V is issued with the next item's first Q K^T (and stored
    there); the program's last one after its loop. Dense GQA causal, then varlen with empty
    sequences between (an empty item leaves the pending product to the next)."""
    D = {64: 64, 128: 96, 256: 256}[config.head_dim]
    q, k, v = _randn(1, 4, 200, D, seed=90), _randn(1, 2, 200, D, seed=91), _randn(1, 2, 200, D, seed=92)
    o, lse = attention_forward(q, k, v, causal=True, config=config, programs=programs)
    _check(o, lse, *reference(q, k, v, causal=True), torch.bfloat16)
    cu_q = torch.tensor([0, 70, 70, 71, 200], dtype=torch.int32)
    cu_k = torch.tensor([0, 3, 90, 90, 200], dtype=torch.int32)
    qv, kv, vv = _randn(200, 2, D, seed=93), _randn(200, 1, D, seed=94), _randn(200, 1, D, seed=95)
    o, lse = attention_forward(qv, kv, vv, config=config, programs=programs, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    _check(o, lse, *reference(qv, kv, vv, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k), torch.bfloat16)


@pytest.mark.parametrize("num_m,BH,causal,programs", [(3, 5, True, 4), (1, 1, False, 132), (7, 33, False, 132),
                                                      (33, 8, True, 7)])
def test_snake_schedule_covers_every_item_once(num_m, BH, causal, programs):
    table = snake_schedule(num_m, BH, causal, programs, 16)
    items = [x for row in table.tolist() for x in row[1:1 + row[0]]]
    assert sorted(items) == list(range(num_m * BH))
    counts = table[:, 0]
    assert counts.max() - counts.min() <= 1


def _real_items(lens_q, H, num_m, block_m):
    return sorted((b * H + h) * num_m + m for b, n in enumerate(lens_q) for h in range(H)
                  for m in range(num_m) if m * block_m < n)


@pytest.mark.parametrize("lens_q,lens_k,H,causal,programs,group_h", [
    ([1, 0, 130, 64, 7], [3, 5, 0, 200, 7], 4, False, 3, 16),
    ([1, 0, 130, 64, 7], [3, 5, 0, 200, 7], 4, True, 3, 2),
    ([300, 1, 0, 1000, 129, 128], None, 5, True, 7, 2),       # H not a multiple of group_h
    ([300, 1, 0, 1000, 129, 128], None, 3, False, 132, 16),   # more programs than items
    ([0, 0], None, 2, True, 4, 16),                           # no real item
])
def test_sorted_varlen_schedule_lists_the_real_items_once(lens_q, lens_k, H, causal, programs, group_h):
    """The device-built varlen table holds each item inside its sequence once, no item past
    a sequence's end; sequences by decreasing key length (ties: batch order); counts differ
    by at most one (causal: two, the deal is in pairs); causal: the longest sequence's last
    block first, each program's items in pairs (block m, then block n - 1 - m of one head)."""
    lens_k = lens_k or lens_q
    cu_q = torch.tensor([0, *torch.tensor(lens_q).cumsum(0).tolist()], dtype=torch.int32)
    cu_k = torch.tensor([0, *torch.tensor(lens_k).cumsum(0).tolist()], dtype=torch.int32)
    num_m = max(1, -(-max(lens_q) // 128))
    table = A.sorted_varlen_schedule(cu_q, cu_k, sum(lens_q), num_m, H, 128, causal, programs, group_h)
    rows = [row[1:1 + row[0]] for row in table.tolist()]
    assert sorted(x for r in rows for x in r) == _real_items(lens_q, H, num_m, 128)
    counts = [len(r) for r in rows]
    assert max(counts) - min(counts) <= (2 if causal else 1)          # causal: pairs of items are dealt
    first_round = [r[0] for r in rows if r]            # the snake's first round: the list's head, in order
    seq_of = [t // num_m // H for t in first_round]
    keys = [(-lens_k[b], b) for b in seq_of]
    assert keys == sorted(keys)
    if causal and rows[0]:
        b, h = seq_of[0], first_round[0] // num_m % H
        assert first_round[0] % num_m == -(-lens_q[b] // 128) - 1 and h == 0   # the longest's last block first
        for r in rows:
            for long, short in zip(r[0::2], r[1::2]):
                nb = -(-lens_q[long // num_m // H] // 128)
                if long // num_m == short // num_m and long % num_m != short % num_m:
                    assert long % num_m + short % num_m == nb - 1                 # a pair: m and n - 1 - m
        pairs = sum(1 for r in rows for a, c in zip(r[0::2], r[1::2]) if a // num_m == c // num_m)
        assert pairs >= sum(len(r) // 2 for r in rows) - len(lens_q) * H                   # nearly all


def test_varlen_order_is_checked():
    q = _randn(1, 2, 8, 64, seed=1)
    with pytest.raises(ValueError, match="'varlen_order' belongs to the varlen layout"):
        attention_forward(q, q, q, varlen_order="snake")
    cu = torch.tensor([0, 8], dtype=torch.int32)
    qv = _randn(8, 2, 64, seed=2)
    with pytest.raises(ValueError, match="must be one of sorted, snake .*got 'lpt'"):
        attention_forward(qv, qv, qv, cu_seqlens_q=cu, cu_seqlens_k=cu, varlen_order="lpt")


@pytest.mark.parametrize("Sq,Sk,causal", [(4096, 4096, True), (300, 1000, False), (1000, 300, True)])
def test_dense_schedule_covers_every_item_once(Sq, Sk, causal):
    table = A.schedule(Sq, Sk, 40, 128, 128, causal, 132, 16)
    items = [x for row in table.tolist() for x in row[1:1 + row[0]]]
    assert sorted(items) == list(range(-(-Sq // 128) * 40))


def test_three_consumers_only_where_the_padding_is_small():
    picks = {S: A.choose_config(64, False, S).block_m for S in (256, 512, 1000, 1024, 2048, 4096, 8192)}
    assert picks == {256: 128, 512: 128, 1000: 128, 1024: 128, 2048: 192, 4096: 192, 8192: 192}
    assert A.choose_config(64, False, 4096, True).block_m == 128                       # varlen
    # under a causal mask four consumers from S = 512 (not varlen, not fp8), two below
    causal = {S: A.choose_config(64, True, S).block_m for S in (256, 512, 600, 1000, 4096)}
    assert causal == {256: 128, 512: 256, 600: 128, 1000: 256, 4096: 256}        # (600: 768 rows against 640)
    assert A.choose_config(64, True, 4096) == A.AttnConfig(64, 256, 64, 6, 2, tma_store=True)
    assert A.choose_config(64, True, 4096, varlen=True).block_m == 128 and A.choose_config(64, True, 4096, fp8=True).block_m == 128
    assert A.choose_config(256, False, 4096) == A.AttnConfig(256, 128, 64, 2, 1, tma_store=True)
    assert A.choose_config(128, False, 4096).prefetch == 0


def test_default_configurations():
    """Dense shapes with 128-row items store O by TMA at every S (session 13: S = 256 and the
    256-wide tiles too, those as two 128-column halves); 192-row items and varlen keep the pointer
    stores by default (varlen's TMA stores measured 0.96 on mixed batches, run 2); nothing
    prefetches by default; every default fits in shared memory."""
    assert A.choose_config(64, True, 256) == A.AttnConfig(64, 128, 64, 4, 2, tma_store=True)     # diag_skip acts
    assert A.choose_config(128, True, 200) == A.AttnConfig(128, 128, 64, 4, 2, tma_store=True)
    assert A.choose_config(128, True, 512) == A.AttnConfig(128, 128, 128, 2, 2, tma_store=True)
    assert A.choose_config(64, True, 256, True) == A.AttnConfig(64, 128, 128, 2, 2)
    assert A.choose_config(128, False, 256) == A.AttnConfig(128, 128, 128, 2, 2, tma_store=True)
    assert A.choose_config(64, True, 512) == A.AttnConfig(64, 256, 64, 6, 2, tma_store=True)     # four consumers
    assert A.choose_config(64, False, 1024) == A.AttnConfig(64, 128, 128, 2, 2, tma_store=True)
    assert A.choose_config(64, False, 4096) == A.AttnConfig(64, 192, 128, 2, 2)
    assert A.choose_config(64, True, 4096) == A.AttnConfig(64, 256, 64, 6, 2, tma_store=True)
    assert A.choose_config(96, True, 2048) == A.AttnConfig(128, 128, 128, 2, 2, tma_store=True)
    assert A.choose_config(256, True, 1024) == A.AttnConfig(256, 128, 64, 2, 1, tma_store=True)
    assert A.choose_config(192, False, 256).o_parts == 2
    assert A.choose_config(64, True, 1024, True) == A.AttnConfig(64, 128, 128, 2, 2)
    assert A.choose_config(256, False, 256, True) == A.AttnConfig(256, 128, 64, 2, 1)
    assert A.choose_config(256, False, 256, True).o_parts == 1
    for shared in (A.choose_config(D, c, S).shared_bytes() for D in (64, 128, 256) for c in (False, True)
                   for S in (256, 1024, 4096)):
        assert shared <= 227 * 1024


PREFETCH_CONFIGS = [A.AttnConfig(64, 128, 128, 4, 2, prefetch=1), A.AttnConfig(64, 192, 128, 2, 2, prefetch=4),
                    A.AttnConfig(128, 128, 64, 4, 2, prefetch=2), A.AttnConfig(256, 128, 64, 2, 1, prefetch=8),
                    A.AttnConfig(64, 128, 128, 4, 2, True, prefetch=4),        # overlap with prefetch at D = 64
                    A.AttnConfig(256, 128, 32, 2, 2, prefetch=16),             # --configs: two Q buffers at D = 256
                    A.AttnConfig(64, 128, 128, 6, 2, prefetch=4)]              # six stages (not 2^k)


TMA_STORE_CONFIGS = [A.AttnConfig(64, 128, 128, 4, 2, prefetch=4, tma_store=True),
                     A.AttnConfig(128, 128, 128, 2, 2, True, 4, True), A.AttnConfig(64, 192, 128, 2, 2, tma_store=True),
                     A.AttnConfig(256, 128, 64, 2, 1, tma_store=True)]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("config", TMA_STORE_CONFIGS, ids=lambda c: f"{c.head_dim}x{c.block_m}{'ov' if c.overlap else ''}")
def test_tma_store_epilogue(config, causal, poisoned):
    """tma_store=True: each consumer stages O in shared memory and TMA-stores it; rows past S
    (131 is no tile multiple) and columns past D = 96 are clipped by the descriptor, a BSHD
    q gives a BSHD output written in place, several items per program reuse the buffer."""
    D = {64: 64, 128: 96, 256: 192}[config.head_dim]
    q = _randn(1, 131, 4, D, seed=100).transpose(1, 2)            # BSHD memory
    k, v = _randn(1, 2, 131, D, seed=101), _randn(1, 2, 131, D, seed=102)
    o, lse = attention_forward(q, k, v, causal=causal, config=config, programs=2)
    assert o.stride(1) < o.stride(2)
    _check(o, lse, *reference(q, k, v, causal=causal), torch.bfloat16)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_tma_store_of_256_wide_tiles_in_two_halves(causal, poisoned):
    """D = 256 with tma_store: two 128-column accumulators per consumer (P V as two products),
    each half staged through one 128-column buffer, the second after the first's stores read
    it; GQA 4:1, S = 200 (no tile multiple), one program walking several items."""
    q, k, v = _randn(2, 4, 200, 256, seed=105), _randn(2, 1, 200, 256, seed=106), _randn(2, 1, 200, 256, seed=107)
    c = A.AttnConfig(256, 128, 64, 2, 1, tma_store=True)
    assert c.o_parts == 2 and c.shared_bytes() == 224 * 1024
    o, lse = attention_forward(q, k, v, causal=causal, config=c, programs=1)
    _check(o, lse, *reference(q, k, v, causal=causal), torch.bfloat16)


SKIP_CONFIGS = [A.AttnConfig(256, 128, 64, 2, 1, tma_store=True), A.AttnConfig(256, 128, 64, 2, 1),
                A.AttnConfig(128, 128, 64, 4, 2, tma_store=True), A.AttnConfig(64, 192, 128, 2, 2)]


@pytest.mark.parametrize("config", SKIP_CONFIGS, ids=lambda c: f"{c.head_dim}x{c.block_m}x{c.block_n}{'t' if c.tma_store else ''}")
def test_causal_consumers_stop_at_their_diagonal(config, poisoned):
    """diag_skip (the default; causal, key blocks smaller than the item): a consumer whose rows
    end before an item's last key blocks passes its turns and releases those slots instead of
    computing them (D = 256: the first consumer skips the diagonal 64-key block; three
    consumers of 192 rows: the first two skip). Sq = Sk, Sq < Sk, Sq > Sk (top-left mask), GQA
    2:1, two programs; varlen with an empty sequence between; the same results with it off."""
    assert config.skips_diagonal(True) and not config.skips_diagonal(False)
    D = {64: 64, 128: 96, 256: 192}[config.head_dim]
    for Sq, Sk in ((200, 200), (131, 300), (300, 131)):
        q, k, v = _randn(1, 4, Sq, D, seed=110), _randn(1, 2, Sk, D, seed=111), _randn(1, 2, Sk, D, seed=112)
        o, lse = attention_forward(q, k, v, causal=True, config=config, programs=2)
        _check(o, lse, *reference(q, k, v, causal=True), torch.bfloat16)
        o2, lse2 = attention_forward(q, k, v, causal=True, config=dataclasses.replace(config, diag_skip=False),
                                     programs=2)
        assert torch.equal(o, o2) and torch.equal(lse, lse2)
    if not config.tma_store or config.head_dim <= 128:
        cu = torch.tensor([0, 70, 70, 71, 200], dtype=torch.int32)
        qv, kv, vv = _randn(200, 2, D, seed=113), _randn(200, 1, D, seed=114), _randn(200, 1, D, seed=115)
        c = config if config.head_dim <= 128 else dataclasses.replace(config, tma_store=False)
        o, lse = attention_forward(qv, kv, vv, causal=True, config=c, programs=2, cu_seqlens_q=cu, cu_seqlens_k=cu)
        _check(o, lse, *reference(qv, kv, vv, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu), torch.bfloat16)


def test_tma_store_halves_refuse_overlap():
    q = _randn(1, 2, 64, 256, seed=108)
    with pytest.raises(ValueError, match="overlap with tma_store at 256-wide tiles"):
        attention_forward(q, q, q, config=A.AttnConfig(256, 128, 64, 2, 1, True, tma_store=True))


def test_varlen_tma_store_keeps_each_sequence_s_rows(poisoned):
    """Varlen with staged TMA stores of O (``tma_store=True``, up to 128-wide tiles; the default
    stays pointer stores):
    a consumer whose 64 rows end exactly at its sequence's end (64, 128) is TMA-stored, one
    whose rows reach past it (1, 70, 7) stores by pointers, so no box writes the next
    sequence's rows (each next sequence's o is checked, the outputs start as NaN); 256-wide
    tiles (two O halves) are refused."""
    lens = [64, 1, 70, 128, 7]
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    assert not A.choose_config(64, False, 128, varlen=True).tma_store
    q, k, v = (_randn(sum(lens), 2, 64, seed=103 + i) for i in range(3))
    for config in (A.AttnConfig(64, 128, 128, 2, 2, tma_store=True),
                   A.AttnConfig(64, 128, 128, 2, 2, overlap=True, tma_store=True)):
        o, lse = attention_forward(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=128, max_seqlen_k=128,
                                   config=config, programs=2)
        _check(o, lse, *reference(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu), torch.bfloat16)
    q256 = _randn(10, 2, 256, seed=107)
    cu2 = torch.tensor([0, 4, 10], dtype=torch.int32)
    assert not A.choose_config(256, False, 6, varlen=True).tma_store
    with pytest.raises(ValueError, match="tma_store for varlen takes tiles up to 128 wide"):
        attention_forward(q256, q256, q256, cu_seqlens_q=cu2, cu_seqlens_k=cu2,
                          config=A.AttnConfig(256, 128, 64, 2, 1, tma_store=True))


@pytest.mark.slow
@pytest.mark.parametrize("config", TMA_STORE_CONFIGS, ids=lambda c: f"{c.head_dim}x{c.block_m}{'ov' if c.overlap else ''}")
def test_tma_store_configurations_compile_for_sm90a(config):
    """The staging tiles fit (D = 128: 224 KB), no spills beyond the base configuration's, and
    the stores are TMA stores."""
    q = _randn(4, 4, 512, config.head_dim, seed=104)
    (h,) = compile_config(q, q, q, causal=False, config=config)
    _check_compiled(h, config)
    assert "tlx_tma_store" in h.asm["cuda"]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("config", PREFETCH_CONFIGS, ids=lambda c: f"{c.head_dim}x{c.block_m}x{c.block_n}p{c.prefetch}{'ov' if c.overlap else ''}")
def test_prefetching_configurations(config, causal, poisoned):
    """prefetch > 0: the producer prefetches the next item's Q and K/V into L2 (a hint: the
    interpreter checks every box's coordinates against the tensor map); the results stay
    those of float64 math, with several items per program (the last item has none to
    prefetch) and an item whose keys are fewer than ``prefetch`` blocks."""
    D = {64: 64, 128: 96, 256: 192}[config.head_dim]
    q, k, v = _randn(1, 4, 131, D, seed=96), _randn(1, 2, 131, D, seed=97), _randn(1, 2, 131, D, seed=98)
    o, lse = attention_forward(q, k, v, causal=causal, config=config, programs=2)
    _check(o, lse, *reference(q, k, v, causal=causal), torch.bfloat16)
    if config.head_dim == 64:       # varlen too (the default there has no prefetch): an empty sequence between
        cu = torch.tensor([0, 70, 70, 131], dtype=torch.int32)
        qv, kv, vv = (t[0].transpose(0, 1).contiguous() for t in (q, k, v))
        o, lse = attention_forward(qv, kv, vv, causal=causal, config=config, programs=2, cu_seqlens_q=cu,
                                   cu_seqlens_k=cu)
        _check(o, lse, *reference(qv, kv, vv, causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cu), torch.bfloat16)


def test_errors_name_the_argument():
    q = torch.zeros(1, 4, 8, 64, dtype=torch.bfloat16)
    cases = [
        ({"q": q.float()}, "'q' must be bfloat16, float16, float8_e4m3fn or float8_e5m2, got torch.float32"),
        ({"k": q.half()}, "'k' must have q's dtype"),
        ({"q": torch.zeros(1, 4, 8, 20, dtype=torch.bfloat16)}, "'q' has head dim 20"),
        ({"v": torch.zeros(1, 4, 8, 128, dtype=torch.bfloat16)}, "'v' has head dim 128"),
        ({"k": torch.zeros(1, 3, 8, 64, dtype=torch.bfloat16), "v": torch.zeros(1, 3, 8, 64, dtype=torch.bfloat16)},
         "must divide q's 4 heads"),
        ({"k": torch.zeros(2, 4, 8, 64, dtype=torch.bfloat16), "v": torch.zeros(2, 4, 8, 64, dtype=torch.bfloat16)},
         "batch 2"),
        ({"v": torch.zeros(1, 4, 9, 64, dtype=torch.bfloat16)}, "must have one shape"),
        ({"q": q[0]}, "'q' must be [B, heads, S, D]"),
        ({"sm_scale": -1.0}, "'sm_scale' must be a positive"),
        ({"sm_scale": True}, "'sm_scale' must be a positive finite number, got True"),
        ({"max_seqlen_q": 8}, "'max_seqlen_q'/'max_seqlen_k' belong to the varlen layout"),
        ({"cu_seqlens_q": torch.tensor([0, 8], dtype=torch.int32)}, "'cu_seqlens_k' is missing"),
    ]
    for overrides, message in cases:
        args = {"q": q, "k": q, "v": q}
        args.update(overrides)
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
            attention_forward(**args)


def test_varlen_errors_name_the_argument():
    q = torch.zeros(10, 2, 64, dtype=torch.bfloat16)
    cu = torch.tensor([0, 4, 10], dtype=torch.int32)
    with pytest.raises(ValueError, match="'cu_seqlens_q' must be a 1-D int32"):
        attention_forward(q, q, q, cu_seqlens_q=cu.long(), cu_seqlens_k=cu)
    with pytest.raises(ValueError, match="'cu_seqlens_k' has 2 entries"):
        attention_forward(q, q, q, cu_seqlens_q=cu, cu_seqlens_k=cu[:2])
    with pytest.raises(ValueError, match="'max_seqlen_q' is 5 but a sequence"):
        attention_forward(q, q, q, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=5)
    with pytest.raises(ValueError, match="'cu_seqlens_k' must be non-decreasing offsets in 0..10"):
        attention_forward(q, q, q, cu_seqlens_q=cu, cu_seqlens_k=torch.tensor([0, 6, 11], dtype=torch.int32))
    with pytest.raises(ValueError, match="with cu_seqlens, 'k' must be"):
        attention_forward(q, q[None], q, cu_seqlens_q=cu, cu_seqlens_k=cu)


def test_varlen_without_sequences_gives_zeros():
    q = torch.ones(5, 2, 64, dtype=torch.bfloat16)
    cu = torch.tensor([0], dtype=torch.int32)
    o, lse = attention_forward(q, q, q, cu_seqlens_q=cu, cu_seqlens_k=cu)
    assert (o == 0).all() and (lse == float("-inf")).all()


def test_empty_inputs():
    q = torch.zeros(1, 2, 0, 64, dtype=torch.bfloat16)
    o, lse = attention_forward(q, q, q)
    assert o.shape == q.shape and lse.shape == (1, 2, 0)
    k = torch.zeros(1, 2, 0, 64, dtype=torch.bfloat16)
    o, lse = attention_forward(torch.ones(1, 2, 3, 64, dtype=torch.bfloat16), k, k)
    assert (o == 0).all() and (lse == float("-inf")).all()
    for headless, cu in ((torch.zeros(1, 0, 16, 64), None), (torch.zeros(20, 0, 64), torch.tensor([0, 5, 20]))):
        x = headless.to(torch.bfloat16).requires_grad_(True)        # no heads at all: empty, forward and backward
        args = {} if cu is None else {"cu_seqlens_q": cu.int(), "cu_seqlens_k": cu.int()}
        o = tlxc.ops.attention(x, x, x, causal=True, **args)
        o.float().sum().backward()
        assert o.shape == x.shape and x.grad.shape == x.shape
    with pytest.raises(ValueError, match="'k'/'v' have 0 heads, which must divide q's 2 heads"):
        attention_forward(torch.zeros(1, 2, 4, 64, dtype=torch.bfloat16), *(torch.zeros(1, 0, 4, 64).bfloat16(),) * 2)


# -- the custom op ------------------------------------------------------------------------------------

def test_fake_gives_shapes_and_strides():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        q = torch.empty(2, 9, 4, 64, dtype=torch.bfloat16).transpose(1, 2)           # BSHD
        k = torch.empty(2, 9, 2, 64, dtype=torch.bfloat16).transpose(1, 2)
        o, lse = torch.ops.tlxc.attention(q, k, k, True)
        assert o.shape == (2, 4, 9, 64) and o.stride() == (9 * 4 * 64, 64, 4 * 64, 1)
        assert lse.shape == (2, 4, 9) and lse.dtype == torch.float32
        qv = torch.empty(30, 4, 96, dtype=torch.float16)
        cu = torch.empty(3, dtype=torch.int32)
        o, lse = torch.ops.tlxc.attention(qv, qv[:, :2], qv[:, :2], False, None, cu, cu, 20, 20)
        assert o.shape == (30, 4, 96) and lse.shape == (4, 30)


def test_fake_checks_the_arguments():
    """Under torch.compile a bad argument fails while tracing, with the same message."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        q = torch.empty(1, 4, 8, 64, dtype=torch.bfloat16)
        with pytest.raises(ValueError, match="must divide q's 4 heads"):
            torch.ops.tlxc.attention(q, q[:, :3], q[:, :3])


def test_real_and_fake_strides_agree():
    q = _randn(1, 9, 2, 64, seed=20).transpose(1, 2)
    o = tlxc.ops.attention(q, q, q)
    assert o.stride() == A._out_like(q).stride()


def test_torch_compile_fullgraph_on_the_cpu():
    q, k, v = (_randn(1, 4, 70, 64, seed=21 + i) for i in range(3))

    def f(q, k, v):
        return tlxc.ops.attention(q, k[:, :2], v[:, :2], causal=True) * 2

    got = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v)
    ref, _ = reference(q, k[:, :2], v[:, :2], causal=True)
    assert (got.double() - 2 * ref).abs().max().item() < 2 * TOL[torch.bfloat16]


def test_backward_hands_off_to_attention_bwd(monkeypatch):
    """The autograd formula calls attention_bwd(do, q, k, v, o, lse, causal=, sm_scale=, ...) of
    tlxc/ops/kernels/attention_bwd.py (a stand-in here, float64 math) and returns its gradients."""
    calls = []

    def attention_bwd(do, q, k, v, o, lse, *, causal, sm_scale, cu_seqlens_q=None, cu_seqlens_k=None,
                      max_seqlen_q=None, max_seqlen_k=None):
        calls.append((o, lse, causal, sm_scale))
        # float64 gradients by hand (a custom op's implementation runs below autograd)
        group = q.shape[1] // k.shape[1]
        qd, kd, vd, dod = (t.double() for t in (q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), do))
        s = qd @ kd.transpose(-1, -2) * sm_scale
        if causal:
            s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
        p = torch.softmax(s, -1)
        dv = p.transpose(-1, -2) @ dod
        dp = dod @ vd.transpose(-1, -2)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        dq, dk = ds @ kd * sm_scale, ds.transpose(-1, -2) @ qd * sm_scale
        fold = lambda g: g.unflatten(1, (k.shape[1], group)).sum(2)          # noqa: E731
        return dq.to(q.dtype), fold(dk).to(k.dtype), fold(dv).to(v.dtype)

    monkeypatch.setitem(sys.modules, "tlxc.ops.kernels.attention_bwd",
                        types.SimpleNamespace(attention_bwd=attention_bwd))
    q = _randn(1, 4, 40, 64, seed=30).requires_grad_(True)
    k = _randn(1, 2, 40, 64, seed=31).requires_grad_(True)
    v = _randn(1, 2, 40, 64, seed=32).requires_grad_(True)
    o = tlxc.ops.attention(q, k, v, causal=True, sm_scale=0.2)
    do = _randn(*o.shape, seed=33)
    o.backward(do)
    (got_o, got_lse, causal, scale), = calls
    assert causal is True and scale == 0.2 and got_lse.shape == (1, 4, 40) and got_o.shape == o.shape
    leaves = [t.detach().double().requires_grad_(True) for t in (q, k, v)]
    ref, _ = reference(*leaves, causal=True, sm_scale=0.2)
    for mine, theirs in zip((q, k, v), torch.autograd.grad(ref, leaves, do.double())):
        assert ((mine.grad.double() - theirs).norm() / theirs.norm()).item() < 1e-2


def test_backward_without_the_kernel_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "tlxc.ops.kernels.attention_bwd", None)     # import fails
    q = _randn(1, 2, 16, 64, seed=40).requires_grad_(True)
    o = tlxc.ops.attention(q, q, q)
    with pytest.raises((NotImplementedError, ImportError)):
        o.sum().backward()


def test_eager_calls_bypass_the_custom_op(monkeypatch):
    """Plain tensors skip torch.library's dispatch (its host time), with the same autograd; fake
    tensors (FakeTensorMode, as tracing makes them) take the custom op and its fake."""
    AO = sys.modules["tlxc.ops.attention_op"]          # (tlxc.ops.attention_op is the op itself)
    calls = []
    real = AO.attention_op
    monkeypatch.setattr(AO, "attention_op", lambda *args: calls.append(len(args)) or real(*args))
    q = _randn(1, 2, 16, 64, seed=42).requires_grad_(True)
    o = tlxc.ops.attention(q, q, q, causal=True)
    assert calls == [] and o.grad_fn is not None
    with torch.no_grad():
        assert torch.equal(o, real(q, q, q, True, None, None, None, None, None, -1, -1, 0.0)[0])
    from torch._subclasses.fake_tensor import FakeTensorMode
    mode = FakeTensorMode()
    fake = mode.from_tensor(q.detach())
    with mode:
        fo = tlxc.ops.attention(fake, fake, fake)
    assert calls == [12] and fo.shape == q.shape


def test_broadcast_inputs_forward_and_backward():
    """Stride-0 (``expand``ed) dimensions -- k/v heads broadcast as MQA, q's batch -- are read
    correctly (copied: a TMA descriptor has positive strides), and gradients flow to the
    unexpanded leaves."""
    q0 = _randn(1, 2, 40, 64, seed=130).requires_grad_(True)
    k0, v0 = (_randn(1, 1, 40, 64, seed=s).requires_grad_(True) for s in (131, 132))
    q, k, v = q0.expand(2, 2, 40, 64), k0.expand(2, 2, 40, 64), v0.expand(2, 2, 40, 64)
    o, lse = tlxc.ops.attention(q, k, v, causal=True, return_lse=True)
    _check(o, lse, *reference(q.detach(), k.detach(), v.detach(), causal=True), torch.bfloat16)
    g = _randn(*o.shape, seed=133, dtype=torch.float32)
    o.backward(g)
    refs = [t.detach().double().requires_grad_(True) for t in (q0, k0, v0)]
    ro = torch.nn.functional.scaled_dot_product_attention(*(t.expand(2, 2, 40, 64) for t in refs), is_causal=True)
    ro.backward(g.double())
    for mine, theirs in zip((q0, k0, v0), refs):
        assert ((mine.grad.double() - theirs.grad).norm() / theirs.grad.norm()).item() < 2e-2


def test_lse_is_not_differentiable():
    q = _randn(1, 2, 16, 64, seed=41).requires_grad_(True)
    o, lse = tlxc.ops.attention(q, q, q, return_lse=True)
    assert not lse.requires_grad and o.requires_grad


# -- sm_90a ---------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 96, 128, 192, 256])
def test_every_configuration_compiles_for_sm90a(D, causal, varlen):
    if varlen:
        q, k = _randn(300, 4, D, seed=50), _randn(300, 1, D, seed=51)
        cu = torch.tensor([0, 100, 300], dtype=torch.int32)
        handles = compile_config(q, k, k, causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cu)
    else:
        q, k = _randn(1, 4, 300, D, seed=50), _randn(1, 1, 300, D, seed=51)
        handles = compile_config(q, k, k, causal=causal)
    (h,) = handles
    c = A.choose_config(D, causal, 300, varlen)
    _check_compiled(h, c)


@pytest.mark.slow
@pytest.mark.parametrize("config", OVERLAP_CONFIGS, ids=lambda c: f"{c.head_dim}x{c.block_m}")
def test_overlap_configurations_compile_for_sm90a(config):
    q = _randn(4, 4, 512, config.head_dim, seed=52)
    (h,) = compile_config(q, q, q, causal=config.block_m == 128, config=config)
    _check_compiled(h, config)


def _check_compiled(h, c):
    assert h.metadata.shared <= 232448 and h.metadata.shared >= c.shared_bytes()
    # three consumers (D = 64, no mask) run at 160 registers and spill a few bytes, as the
    # example does; the 256-wide tiles (a 128-register accumulator) spill up to 11 bytes at 240;
    # overlap keeps the previous item's accumulator and P alive: 1 byte (128 causal) to 23 (192 rows)
    limit = 16 if c.block_m == 192 or c.head_dim == 256 else 0
    assert h.n_spills <= (max(limit, 8) + 16 if c.overlap else limit), h.n_spills
    assert "serializes the wgmma" not in " ".join(h.perf_warnings), h.perf_warnings
    assert math.isfinite(h.n_regs)


@pytest.mark.slow
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_tma_store_defaults_compile_for_sm90a(D, causal):
    """The S = 512 defaults (TMA stores of O; D = 256 in two halves): no more spills than the
    pointer stores, and the stores are TMA stores (the CUDA names the helper)."""
    q = _randn(8, 2, 512, D, seed=53)
    c = A.choose_config(D, causal, 512)
    assert c.tma_store
    (h,) = compile_config(q, q, q, causal=causal)
    _check_compiled(h, c)
    (base,) = compile_config(q, q, q, causal=causal, config=A.AttnConfig(c.head_dim, c.block_m, c.block_n, 2, c.q_bufs))
    assert h.n_spills <= base.n_spills
    assert ("tlx_tma_store" in h.asm["cuda"]) == c.tma_store and "tlx_tma_store" not in base.asm["cuda"]


@pytest.mark.slow
@pytest.mark.parametrize("D", [64, 128])
def test_register_a_product_as_one_group_switch(D, monkeypatch):
    """TLXC_WGMMA_RS_GROUP=1 (an A/B switch, off by default): P V's k steps under one wgmma.fence
    instead of one each (the 240-register consumers), no spills; the default keeps a fence per k step."""
    q = _randn(4, 2, 1024, D, seed=116)
    two = A.AttnConfig(D, 128, 128, 2, 2, tma_store=True)      # two consumers (D = 64's causal default has four)
    (h,) = compile_config(q, q, q, causal=True, config=two)
    monkeypatch.setenv("TLXC_WGMMA_RS_GROUP", "1")
    (g,) = compile_config(q, q, q, causal=True, config=two)
    fences = [x.asm["cuda"].count("tlx_wgmma_fence();") for x in (h, g)]
    assert fences[1] < fences[0] and g.n_spills == 0 and not g.perf_warnings, (fences, g.n_spills)


PIN_CONFIGS = [A.AttnConfig(64, 128, 128, 2, 2, tma_store=True, pin_softmax=True),
               A.AttnConfig(128, 128, 64, 4, 2, tma_store=True, pin_softmax=True),
               A.AttnConfig(256, 128, 64, 2, 1, tma_store=True, pin_softmax=True),
               A.AttnConfig(64, 192, 128, 2, 2, pin_softmax=True),
               A.AttnConfig(64, 128, 128, 2, 2, True, tma_store=True, pin_softmax=True),      # with overlap
               A.AttnConfig(128, 128, 128, 2, 2, True, pin_softmax=True)]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("config", PIN_CONFIGS,
                         ids=lambda c: f"{c.head_dim}x{c.block_m}x{c.block_n}{'ov' if c.overlap else ''}")
def test_pinned_softmax_gives_the_same_results(config, causal, poisoned):
    """pin_softmax (a shared store of each consumer's l_i before P V's wait, only a scheduling
    anchor; with overlap also before the previous item's last P V's wait) changes no result bit:
    against float64 math and against the same config without it; S = 300 (no tile multiple),
    GQA 2:1, two programs walking several items."""
    D = {64: 64, 128: 96, 256: 192}[config.head_dim]
    q, k, v = _randn(1, 4, 300, D, seed=120), _randn(1, 2, 300, D, seed=121), _randn(1, 2, 300, D, seed=122)
    o, lse = attention_forward(q, k, v, causal=causal, config=config, programs=2)
    _check(o, lse, *reference(q, k, v, causal=causal), torch.bfloat16)
    o2, lse2 = attention_forward(q, k, v, causal=causal, config=dataclasses.replace(config, pin_softmax=False),
                                 programs=2)
    assert torch.equal(o, o2) and torch.equal(lse, lse2)



def _softmax_inside_pv_wait(sass: str, first_wait: str) -> list[int]:
    """MUFU.EX2 between each ``first_wait`` (the wait for S_j, P V left running) and the next
    ``WARPGROUP.DEPBAR.LE gsb0, 0x0`` (P V's wait)."""
    counts, inside = [], None
    for line in sass.splitlines():
        if first_wait in line:
            inside = 0
        elif inside is not None and "MUFU.EX2" in line:
            inside += 1
        elif inside is not None and "WARPGROUP.DEPBAR.LE gsb0, 0x0" in line:
            counts.append(inside)
            inside = None
    return counts


@pytest.mark.slow
@pytest.mark.parametrize("D", [64, 128, 256])
def test_pinned_softmax_overlaps_p_v_in_sass(D, tmp_path):
    """Without pin_softmax ptxas hoists P V's wait_group 0 above the softmax of S_j (no exponential
    between the two waits: a consumer's softmax never overlaps its own P V); with it the 64-66
    (D = 256: 32-34) exponentials of a block run between them, no spills, no serialization."""
    q = _randn(4, 2, 1024, D, seed=123)
    c = A.choose_config(D, False, 1024)
    first_wait = f"WARPGROUP.DEPBAR.LE gsb0, 0x{c.o_parts}"
    (h,) = compile_config(q, q, q, config=c)
    (g,) = compile_config(q, q, q, config=dataclasses.replace(c, pin_softmax=True))
    before = _softmax_inside_pv_wait(dump_sass(h.asm["cubin"], tmp_path), first_wait)
    after = _softmax_inside_pv_wait(dump_sass(g.asm["cubin"], tmp_path), first_wait)
    per_block = 64 * c.block_n // 128            # a consumer thread's exponentials of one block's scores
    assert before == [0, 0] and after and len(after) == 2 and min(after) >= per_block, (before, after)
    assert g.n_spills == 0 and not g.perf_warnings


def test_size_one_dimensions_with_odd_strides():
    """torch leaves the stride of a size-1 dimension arbitrary (here 1): still read in place."""
    base = _randn(1, 3, 40, 64, seed=60)
    q = base.as_strided((1, 3, 40, 64), (1, 40 * 64, 64, 1))
    o, lse = attention_forward(q, q, q, causal=True)
    _check(o, lse, *reference(q, q, q, causal=True), torch.bfloat16)


def _grads_vs_float64(leaves, do, **kwargs):
    ref_leaves = [t.detach().double().requires_grad_(True) for t in leaves]
    ref, _ = reference(*ref_leaves, **kwargs)
    ref.backward(do.double())
    return [((a.grad.double() - b.grad).norm() / b.grad.norm()).item() for a, b in zip(leaves, ref_leaves)]


@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
def test_forward_and_backward_end_to_end(varlen):
    """tlxc.ops.attention's autograd with the real attention_bwd (kernels on the interpreter):
    GQA 2:1, causal, S not a multiple of the tiles; varlen lengths 70, 1, 0, 9."""
    if varlen:
        cu = torch.tensor([0, 70, 71, 71, 80], dtype=torch.int32)
        shapes, extra = [(80, 4, 64), (80, 2, 64), (80, 2, 64)], {"cu_seqlens_q": cu, "cu_seqlens_k": cu}
    else:
        shapes, extra = [(1, 4, 70, 64), (1, 2, 70, 64), (1, 2, 70, 64)], {}
    leaves = [_randn(*s, seed=70 + i).requires_grad_(True) for i, s in enumerate(shapes)]
    o = tlxc.ops.attention(*leaves, causal=True, **extra)
    do = _randn(*o.shape, seed=74)
    o.backward(do)
    errs = _grads_vs_float64(leaves, do, causal=True, **extra)
    assert max(errs) < 1e-2, errs


def test_torch_compile_forward_and_backward_on_the_cpu():
    leaves = [_randn(1, 2, 40, 64, seed=80 + i).requires_grad_(True) for i in range(3)]
    do = _randn(1, 2, 40, 64, seed=83)

    def f(q, k, v):
        return tlxc.ops.attention(q, k, v, causal=True) * 1.5

    out = torch.compile(f, fullgraph=True, backend="aot_eager")(*leaves)
    out.backward(do)
    errs = _grads_vs_float64(leaves, do * 1.5, causal=True)
    assert max(errs) < 1e-2, errs


@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 96, 128, 192, 256])
def test_tlxc_check_is_clean(D, causal, varlen, monkeypatch):
    """``tlxc check`` of the launch the host would make on an H200: no finding above a note (the
    barrier protocol under ``if n_blocks > 0`` is left to the interpreter runs above)."""
    from tlxc.compiler import check_function
    from tlxc.frontend.specialize import specialization_from_args
    from tlxc.ops.kernels.attention_fwd import attn_fwd_kernel
    launches = []
    monkeypatch.setattr(A, "_launch", lambda grid, *args, **meta: launches.append((args, meta)))
    if varlen:
        q = torch.zeros(300, 4, D, dtype=torch.bfloat16)
        cu = torch.tensor([0, 100, 300], dtype=torch.int32)
        attention_forward(q, q[:, :2], q[:, :2], causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cu, programs=132)
    else:
        q = torch.zeros(2, 4, 2048, D, dtype=torch.bfloat16)
        attention_forward(q, q[:, :2], q[:, :2], causal=causal, programs=132)
    (args, meta), = launches
    num_warps = meta.pop("num_warps")
    params = dict(zip(attn_fwd_kernel.param_names, args), **meta)
    findings = check_function(attn_fwd_kernel, specialization_from_args(attn_fwd_kernel, params), num_warps=num_warps)
    assert [f for f in findings if f.severity != "note"] == []


@pytest.mark.parametrize("config", [None, A.AttnConfig(128, 128, 128, 2, 2, True, 4, True),
                                    A.AttnConfig(64, 128, 128, 4, 2, False, 4, True)],
                         ids=["s512_default", "tma_overlap_prefetch", "tma_prefetch"])
def test_tlxc_check_is_clean_for_the_session_12_configurations(config, monkeypatch):
    """``tlxc check`` of the S = 512 default (D = 64: TMA stores of O) and of the TMA-store
    epilogue with overlap and prefetches (the staging buffer's store-wait / write / fence /
    store order)."""
    from tlxc.compiler import check_function
    from tlxc.frontend.specialize import specialization_from_args
    from tlxc.ops.kernels.attention_fwd import attn_fwd_kernel
    launches = []
    monkeypatch.setattr(A, "_launch", lambda grid, *args, **meta: launches.append((args, meta)))
    D = config.head_dim if config else 64
    q = torch.zeros(2, 4, 512, D, dtype=torch.bfloat16)
    attention_forward(q, q[:, :2], q[:, :2], causal=True, programs=132, config=config)
    (args, meta), = launches
    num_warps = meta.pop("num_warps")
    params = dict(zip(attn_fwd_kernel.param_names, args), **meta)
    findings = check_function(attn_fwd_kernel, specialization_from_args(attn_fwd_kernel, params), num_warps=num_warps)
    assert [f for f in findings if f.severity != "note"] == []


def test_device_length_check_catches_each_bad_offset():
    """The device-side check the GPU path runs when max_seqlen_q/k are given (one launch of
    kernels/attention_schedule.py: varlen_check_kernel; on CPU tensors the interpreter raises
    the device assertion): every rule of _check_lengths_now, q and k together."""
    from tlxc.errors import InterpreterError

    def cu(*offs):
        return torch.tensor(offs, dtype=torch.int32)
    A._check_lengths_on_device(cu(0, 5, 5, 9), cu(0, 3, 4, 4), 9, 6, 5)           # fine
    A._check_lengths_on_device(cu(0), cu(0), 0, 0, 0)                             # no sequence
    for bad in [(cu(0, 5, 4, 9), cu(0, 3, 4, 4), 9, 6, 5),     # a negative q length
                (cu(0, 5, 5, 9), cu(0, 3, 4, 4), 8, 6, 5),     # past total_q
                (cu(0, 5, 5, 9), cu(0, 3, 4, 4), 9, 6, 4),     # a q length above max_seqlen_q
                (cu(-1, 5, 5, 9), cu(0, 3, 4, 4), 9, 6, 6),    # a negative first offset
                (cu(0, 5, 5, 9), cu(0, 3, 2, 4), 9, 6, 5),     # a negative k length
                (cu(0, 5, 5, 9), cu(0, 3, 4, 7), 9, 6, 5)]:    # past total_k
        with pytest.raises(InterpreterError, match="cu_seqlens must be"):
            A._check_lengths_on_device(*bad)


@pytest.mark.parametrize("order", A.VARLEN_ORDERS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen_with_next_item_prefetch(causal, order, poisoned):
    """The dense default's L2 prefetch of the next item (AttnConfig.prefetch), asked for on a
    varlen batch (the bench's tlxc_sorted_prefetch column): sequences of 0 and 1 rows, GQA 4:1,
    two programs, so that prefetches cross sequences."""
    lens_q, lens_k = [1, 0, 130, 64, 7, 300], [3, 5, 0, 200, 7, 300]
    cu_q = torch.tensor([0, *torch.tensor(lens_q).cumsum(0).tolist()], dtype=torch.int32)
    cu_k = torch.tensor([0, *torch.tensor(lens_k).cumsum(0).tolist()], dtype=torch.int32)
    q, k, v = _randn(sum(lens_q), 4, 128, seed=60), _randn(sum(lens_k), 1, 128, seed=61), _randn(sum(lens_k), 1, 128, seed=62)
    config = dataclasses.replace(A.choose_config(128, causal, 300, varlen=True), prefetch=4)
    o, lse = attention_forward(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, config=config,
                               varlen_order=order, programs=2)
    _check(o, lse, *reference(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k), torch.bfloat16)
