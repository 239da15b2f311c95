"""The attention backward (tlxc/ops/attention_bwd.py) on the CPU: the interpreter against float64
autograd at shapes that are not block multiples (dense with GQA 4:1 and Sq != Sk, packed with
uneven lengths including 1 and 0), every head dim class, both dtypes, causal or not; outputs
poisoned; argument errors; every configuration compiled for sm_90a without spills."""
from __future__ import annotations

import importlib

import pytest
import torch
from attention_bwd_ref import (
    TOL,
    default_scale,
    dense_inputs,
    dense_reference,
    packed_inputs,
    packed_reference,
    rel_err,
)

import tlxc
import tlxc.language as tl
from tlxc.interpreter import interpret
from tlxc.ops.attention_bwd import attention_bwd, compile_kernels
from tlxc.ops.kernels.attention_bwd import section_tile

host = importlib.import_module("tlxc.ops.attention_bwd")


@pytest.fixture
def poisoned(monkeypatch):
    """Outputs start as NaN (torch.empty_like / zeros_like in the host code): a row the kernels
    forget to write fails the finiteness check."""
    monkeypatch.setattr(host.torch, "empty_like", lambda t: torch.full_like(t, float("nan")))


def _check(got, ref, dtype):
    for name, g, r in zip(("dq", "dk", "dv"), got, ref):
        err = rel_err(g, r)
        assert err < TOL[dtype], f"{name}: relative error {err:.2e} >= {TOL[dtype]:.0e}"


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 96, 128, 256])
def test_dense_gqa_odd_lengths(D, causal, poisoned):
    """GQA 4:1, Sq = 70 and Sk = 133: neither a block multiple, Sq < Sk (causal: the keys past
    the last query get zero gradients)."""
    dtype = torch.bfloat16
    q, k, v, do = dense_inputs(1, 4, 1, 70, 133, D, dtype, seed=D)
    scale = default_scale(D)
    o, lse, *ref = dense_reference(q, k, v, do, causal, scale)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=causal, sm_scale=scale)
    assert all(g.dtype == dtype for g in got)
    assert got[0].shape == q.shape and got[1].shape == k.shape and got[2].shape == v.shape
    _check(got, ref, dtype)


@pytest.mark.parametrize("causal", [False, True])
def test_dense_more_queries_than_keys_fp16(causal, poisoned):
    """Sq = 150 > Sk = 45, two batches, MHA, fp16, a non-default scale."""
    dtype = torch.float16
    q, k, v, do = dense_inputs(2, 2, 2, 150, 45, 64, dtype, seed=3)
    o, lse, *ref = dense_reference(q, k, v, do, causal, 0.3)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=causal, sm_scale=0.3)
    _check(got, ref, dtype)


def test_dense_bshd_views_in_place(poisoned):
    """q/k/v/do as transpose(1, 2) views of [B, S, H, D] tensors: read through their strides."""
    dtype = torch.bfloat16
    q, k, v, do = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in dense_inputs(1, 2, 2, 65, 65, 64, dtype))
    o, lse, *ref = dense_reference(q, k, v, do, True, 0.125)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=True, sm_scale=0.125)
    _check(got, ref, dtype)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_packed_uneven_lengths(D, causal, poisoned):
    """Packed sequences of lengths (q, k): (1, 1), (67, 130), (130, 67), (5, 0), (0, 9), GQA 2:1."""
    dtype = torch.bfloat16
    lens_q, lens_k = [1, 67, 130, 5, 0], [1, 130, 67, 0, 9]
    q, k, v, do, cu_q, cu_k = packed_inputs(lens_q, lens_k, 4, 2, D, dtype, seed=D + causal)
    scale = default_scale(D)
    o, lse, *ref = packed_reference(q, k, v, do, cu_q, cu_k, causal, scale)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=causal, sm_scale=scale, cu_seqlens_q=cu_q,
                        cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k))
    _check(got, ref, dtype)


def test_packed_max_seqlen_from_cu_seqlens():
    dtype = torch.float16
    q, k, v, do, cu_q, cu_k = packed_inputs([3, 40], [3, 40], 2, 1, 64, dtype)
    o, lse, *ref = packed_reference(q, k, v, do, cu_q, cu_k, True, 0.125)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=True, sm_scale=0.125, cu_seqlens_q=cu_q,
                        cu_seqlens_k=cu_k)
    _check(got, ref, dtype)


@tlxc.jit
def _section_order(out_ptr, n_blocks, heads_per_section):
    pid_bh, block = section_tile(tl.program_id(0), n_blocks, heads_per_section)
    tl.store(out_ptr + 2 * tl.program_id(0), pid_bh)
    tl.store(out_ptr + 2 * tl.program_id(0) + 1, block)


@pytest.mark.parametrize("n_bh, n_blocks, heads", [(5, 3, 2), (8, 4, 4), (3, 5, 1), (2, 3, 8)])
def test_section_order(n_bh, n_blocks, heads):
    """Programs in sections of ``heads`` (batch, head) pairs, block-major inside a section (the
    last section holds the rest): every (pair, block) once, in that order."""
    out = torch.full((n_bh * n_blocks, 2), -1, dtype=torch.int32)
    interpret(_section_order, (n_bh * n_blocks,), (out, n_blocks, heads), {})
    want = [(bh, blk) for s0 in range(0, n_bh, heads) for blk in range(n_blocks)
            for bh in range(s0, min(n_bh, s0 + heads))]
    assert [tuple(r) for r in out.tolist()] == want


@pytest.mark.parametrize("kernels", ["dot", "ws"])
@pytest.mark.parametrize("D", [64, 128])
def test_causal_sections_with_a_partial_last_one(kernels, D, poisoned, monkeypatch):
    """Causal programs go in sections of (batch, head) pairs sized from the SM count: with 16 SMs,
    4 pairs a section for the 3 key blocks of 128 (ws, dot's dK/dV: 6 pairs, B = 3, Hkv = 2) and 8
    for the 2 query blocks of dot's dQ (12 pairs; D = 64: 16, two programs per SM), so the last
    section is partial; the gradients against float64."""
    monkeypatch.setattr(host, "CPU_SMS", 16)
    monkeypatch.setenv("TLXC_ATTN_BWD", kernels)
    dtype = torch.bfloat16
    q, k, v, do = dense_inputs(3, 4, 2, 150, 300, D, dtype, seed=D + 3)
    assert [host._heads_per_section(n, True, False, q.device) for n in (3, 2)] == [4, 8]
    assert host._heads_per_section(3, False, False, q.device) == host._heads_per_section(3, True, True, q.device) == 1
    o, lse, *ref = dense_reference(q, k, v, do, True, 0.11)
    _check(attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=True, sm_scale=0.11), ref, dtype)


def test_ws_schedule_table():
    """The persistent ws kernel's table: every (pair, key block) item once, in ``section_tile``'s
    order per program, each program's count first; causal loads (tiles + the item cost) within one
    longest item of each other."""
    for causal, pairs, blocks, q_tiles, group, programs, heads in [(True, 6, 5, 10, 2, 4, 2),
                                                                   (False, 3, 4, 8, 1, 5, 1),
                                                                   (True, 1, 3, 2, 4, 8, 1)]:
        host._ws_schedule.cache_clear()
        table = host._ws_schedule(pairs, blocks, q_tiles, group, causal, programs, heads, "cpu")
        assert table.dtype == torch.int32 and table.shape[0] == min(programs, pairs * blocks)
        rows = [table[p, 1:1 + table[p, 0]].tolist() for p in range(table.shape[0])]
        assert sorted(i for r in rows for i in r) == list(range(pairs * blocks))
        order = [(s0 + i) * blocks + b for s0 in range(0, pairs, heads) for b in range(blocks)
                 for i in range(min(heads, pairs - s0))]
        for r in rows:
            assert r == sorted(r, key=order.index)

        cost = {i: group * max(q_tiles - (2 * (i % blocks) if causal else 0), 0) + host.WS_ITEM_COST for i in order}
        loads = [sum(cost[i] for i in r) for r in rows]
        assert max(loads) - min(loads) <= max(cost.values())


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_ws_persistent_programs_walk_several_items(D, causal, ws_kernel, poisoned, monkeypatch):
    """Three programs (``CPU_SMS`` = 3) walk all 2 x 2 x 3 items (B = 2, Hkv = 2, 300 keys): K and V
    reloaded per item, the Q / dO ring, the dS^T and dQ turns running on across items; causal
    with fewer queries than keys, so the last key block's items have no tile; float64 reference."""
    monkeypatch.setattr(host, "CPU_SMS", 3)
    monkeypatch.setattr(host, "WS_PERSISTENT", {False: True, True: True})     # shipped: causal only
    host._ws_schedule.cache_clear()
    dtype = torch.bfloat16
    q, k, v, do = dense_inputs(2, 4, 2, 200, 300, D, dtype, seed=D + causal)
    o, lse, *ref = dense_reference(q, k, v, do, causal, 0.1)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=causal, sm_scale=0.1)
    assert ws_kernel[-1] == "bwd_ws_kernel"
    table = host._ws_schedule(4, 3, 4, 2, causal, 3, host._heads_per_section(3, causal, False, q.device), "cpu")
    assert table.shape[0] == 3 and table[:, 0].sum() == 12
    _check(got, ref, dtype)


@pytest.mark.parametrize("D", [64, 128])
def test_ws_persistent_programs_of_two_items(D, ws_kernel, poisoned, monkeypatch):
    """WS_PROGRAM_ITEMS = 2 without a mask: the 2 x 2 x 3 items (B = 2, Hkv = 2, 300 keys) go to six
    programs of two items each (not one program per SM), one launch of the persistent kernel; a count
    that is not a multiple of k (2 x 2 x 1 items at 100 keys, k = 3) gives ceil(4 / 3) = 2 programs."""
    monkeypatch.setattr(host, "WS_PERSISTENT", {False: True, True: True})
    launches = []
    real = host._ws_schedule

    def schedule(*args):
        launches.append(real(*args))
        return launches[-1]
    monkeypatch.setattr(host, "_ws_schedule", schedule)
    dtype = torch.bfloat16
    for keys, per_program in ((300, 2), (100, 3)):
        monkeypatch.setattr(host, "WS_PROGRAM_ITEMS", {False: per_program, True: 0})
        q, k, v, do = dense_inputs(2, 4, 2, 200, keys, D, dtype, seed=D + keys)
        o, lse, *ref = dense_reference(q, k, v, do, False, 0.1)
        got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=False, sm_scale=0.1)
        assert ws_kernel[-1] == "bwd_ws_kernel"
        table = launches[-1]
        items = 4 * -(-keys // host.WS_BLOCK_N)
        assert table.shape[0] == -(-items // per_program) and table[:, 0].sum() == items
        walked = [item for row in table.tolist() for item in row[1:1 + row[0]]]
        assert sorted(walked) == list(range(items))
        _check(got, ref, dtype)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_ws_dynamic_programs_draw_their_items(D, causal, ws_kernel, poisoned, monkeypatch):
    """WS_DYNAMIC: three programs (``CPU_SMS`` = 3) draw the 2 x 2 x 3 items from the device counter
    (the interpreter runs them one after another, so the first draws most), K and V reloaded per item,
    the rings and turns running on; the counter is zeroed with dq_acc, so a second call draws again;
    causal with fewer queries than keys (items without a tile); float64 reference."""
    monkeypatch.setattr(host, "CPU_SMS", 3)
    monkeypatch.setattr(host, "WS_DYNAMIC", {False: True, True: True})
    dtype = torch.bfloat16
    q, k, v, do = dense_inputs(2, 4, 2, 200, 300, D, dtype, seed=D + causal + 30)
    o, lse, *ref = dense_reference(q, k, v, do, causal, 0.1)
    for _ in range(2):
        got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=causal, sm_scale=0.1)
        assert ws_kernel[-1] == "bwd_ws_kernel"
        _check(got, ref, dtype)


def test_no_keys_and_no_queries():
    q, k, v, do = dense_inputs(1, 2, 1, 5, 0, 64, torch.bfloat16)
    lse = torch.full((1, 2, 5), float("-inf"))
    dq, dk, dv = attention_bwd(do, q, k, v, torch.zeros_like(q), lse, causal=False, sm_scale=0.1)
    assert torch.equal(dq, torch.zeros_like(q)) and dk.numel() == 0
    q, k, v, do = dense_inputs(1, 2, 1, 0, 7, 64, torch.bfloat16)
    dq, dk, dv = attention_bwd(do, q, k, v, q, torch.zeros(1, 2, 0), causal=True, sm_scale=0.1)
    assert dq.numel() == 0 and torch.equal(dk, torch.zeros_like(k)) and torch.equal(dv, torch.zeros_like(v))


def _args(**over):
    q, k, v, do = dense_inputs(1, 4, 2, 8, 8, 64, torch.bfloat16)
    args = {"do": do, "q": q, "k": k, "v": v, "o": q.clone(), "lse": torch.zeros(1, 4, 8)}
    args.update(over)
    return args


@pytest.mark.parametrize("over, match", [
    ({"k": torch.zeros(1, 3, 8, 64, dtype=torch.bfloat16), "v": torch.zeros(1, 3, 8, 64, dtype=torch.bfloat16)},
     "multiple of the key/value heads"),
    ({"v": torch.zeros(1, 2, 8, 64, dtype=torch.float16)}, "float16 or all bfloat16"),
    ({"lse": torch.zeros(1, 4, 8, dtype=torch.float16)}, "lse must be float32"),
    ({"lse": torch.zeros(4, 8)}, "lse must have shape"),
    ({"v": torch.zeros(1, 2, 8, 32, dtype=torch.bfloat16)}, "v must have k's shape"),
    ({"o": torch.zeros(1, 4, 9, 64, dtype=torch.bfloat16)}, "o and do must have q's shape"),
    ({"q": torch.zeros(1, 4, 8, 300, dtype=torch.bfloat16)}, "o and do must have q's shape"),
])
def test_argument_errors(over, match):
    a = _args(**over)
    with pytest.raises(ValueError, match=match):
        attention_bwd(a["do"], a["q"], a["k"], a["v"], a["o"], a["lse"], causal=False, sm_scale=0.1)


def test_argument_errors_packed():
    q, k, v, do, cu_q, cu_k = packed_inputs([3, 4], [3, 4], 2, 1, 64, torch.bfloat16)
    lse = torch.zeros(2, 7)
    with pytest.raises(ValueError, match="go together"):
        attention_bwd(do, q, k, v, q, lse, causal=False, sm_scale=0.1, cu_seqlens_q=cu_q)
    with pytest.raises(ValueError, match="1-D int32"):
        attention_bwd(do, q, k, v, q, lse, causal=False, sm_scale=0.1, cu_seqlens_q=cu_q.long(), cu_seqlens_k=cu_k)
    with pytest.raises(ValueError, match="belong to the packed layout"):
        a = _args()
        attention_bwd(a["do"], a["q"], a["k"], a["v"], a["o"], a["lse"], causal=False, sm_scale=0.1,
                      max_seqlen_q=8)
    with pytest.raises(ValueError, match="head dims 1..256"):
        q2 = torch.zeros(7, 2, 320, dtype=torch.bfloat16)
        k2 = torch.zeros(7, 1, 320, dtype=torch.bfloat16)
        attention_bwd(q2, q2, k2, k2, q2, lse, causal=False, sm_scale=0.1, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 96, 128, 256])
def test_every_configuration_compiles_for_sm90a(D, causal, packed, monkeypatch):
    """The three tl.dot kernels at a realistic size (GQA 4:1), sm_90a, no spills, shared memory
    within the H200's 227 KB, and the MMAs on wgmma."""
    monkeypatch.setenv("TLXC_ATTN_BWD", "dot")           # auto: the ws kernel from 1024 keys at D = 128
    dtype = torch.bfloat16
    if packed:
        q, k, v, do, cu_q, cu_k = packed_inputs([1000, 24], [1000, 24], 8, 2, D, dtype)
        lse = torch.zeros(8, 1024)
        kw = {"cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k, "max_seqlen_q": 1000, "max_seqlen_k": 1000}
    else:
        q, k, v, do = dense_inputs(2, 8, 2, 1024, 1024, D, dtype)
        lse = torch.zeros(2, 8, 1024)
        kw = {}
    handles = compile_kernels(do, q, k, v, q, lse, causal=causal, sm_scale=0.1, **kw)
    assert len(handles) == 3
    for h in handles:
        assert h.n_spills == 0, h.n_spills
        assert h.metadata.shared <= 227 * 1024
        assert "serializes the wgmma" not in " ".join(h.perf_warnings), h.perf_warnings
    for h in handles[1:]:
        assert "wgmma" in h.asm["cuda"]


def test_fp16_compiles_for_sm90a(monkeypatch):
    """fp16 at S = 512: the tl.dot kernels without spills; the ws kernel (auto's choice there) within
    8 spilled registers (6 under the causal mask at D = 128 with dQ staged in rows, as in bf16; 4 with
    the column blocks)."""
    q, k, v, do = dense_inputs(1, 4, 4, 512, 512, 128, torch.float16)
    monkeypatch.setenv("TLXC_ATTN_BWD", "dot")
    handles = compile_kernels(do, q, k, v, q, torch.zeros(1, 4, 512), causal=True, sm_scale=0.1)
    assert [h.n_spills for h in handles] == [0, 0, 0]
    monkeypatch.setenv("TLXC_ATTN_BWD", "auto")
    *_, ws = compile_kernels(do, q, k, v, q, torch.zeros(1, 4, 512), causal=True, sm_scale=0.1)
    assert ws.name.startswith("bwd_ws_kernel") and ws.n_spills <= 8
    assert "serializes the wgmma" not in " ".join(ws.perf_warnings), ws.perf_warnings


# -- the warp-specialized kernel (TLXC_ATTN_BWD=ws) ---------------------------------------------------

def _check_causal_gqa(D, seed):
    """Dense GQA 2:1 under a causal mask with a partial last query tile (200 queries, 90 keys), bf16,
    against float64."""
    dtype = torch.bfloat16
    q, k, v, do = dense_inputs(2, 4, 2, 200, 90, D, dtype, seed=seed)
    o, lse, *ref = dense_reference(q, k, v, do, True, 0.1)
    _check(attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=True, sm_scale=0.1), ref, dtype)


def _check_packed_uneven(D, seed):
    """Packed sequences of uneven lengths (steps of zero, one and many tiles), bf16, against float64."""
    dtype = torch.bfloat16
    lens_q, lens_k = [1, 67, 130, 5, 0], [1, 130, 67, 0, 9]
    q, k, v, do, cu_q, cu_k = packed_inputs(lens_q, lens_k, 4, 2, D, dtype, seed=seed)
    o, lse, *ref = packed_reference(q, k, v, do, cu_q, cu_k, False, 0.09)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=False, sm_scale=0.09, cu_seqlens_q=cu_q,
                        cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k))
    _check(got, ref, dtype)


@pytest.fixture
def ws_kernel(monkeypatch):
    """Select the warp-specialized kernel and record which kernels launch."""
    monkeypatch.setenv("TLXC_ATTN_BWD", "ws")
    launched = []
    real = host._launch

    def spy(kernel, grid, *args, **meta):
        launched.append(kernel.__name__)
        return real(kernel, grid, *args, **meta)

    monkeypatch.setattr(host, "_launch", spy)
    return launched


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("sq, sk", [(70, 150), (200, 90)])
def test_ws_dense_gqa(sq, sk, D, causal, ws_kernel, poisoned):
    dtype = torch.bfloat16
    q, k, v, do = dense_inputs(2, 4, 2, sq, sk, D, dtype, seed=sq + D)
    scale = default_scale(D)
    o, lse, *ref = dense_reference(q, k, v, do, causal, scale)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=causal, sm_scale=scale)
    assert ws_kernel == ["bwd_preprocess_kernel", "bwd_ws_kernel"]
    _check(got, ref, dtype)


@pytest.mark.parametrize("D", [64, 128])
def test_ws_prefetched_row_stats(D, ws_kernel, poisoned, monkeypatch):
    """WS_PREFETCH_STATS on at both head dims (lse2 / delta of a tile loaded during the previous
    one; the other tests run the shipped choice, off at D = 64), WS_DEFER_DQ and WS_DRIFT off:
    dense GQA causal and packed uneven lengths (steps of zero, one and many tiles) against float64."""
    monkeypatch.setattr(host, "WS_PREFETCH_STATS", {64: True, 128: True})
    monkeypatch.setattr(host, "WS_DEFER_DQ", {64: False, 128: False})       # the other tests: on at 128
    monkeypatch.setattr(host, "WS_DRIFT", dict.fromkeys(host.WS_DRIFT, False))   # the others: shipped
    _check_causal_gqa(D, seed=D + 11)
    _check_packed_uneven(D, seed=D + 12)
    assert ws_kernel[-1] == "bwd_ws_kernel"


@pytest.mark.parametrize("D", [64, 128])
def test_ws_row_stats_in_shared_memory(D, ws_kernel, poisoned, monkeypatch):
    """WS_STATS_SMEM: the producer copies each tile's lse2 / delta rows by TMA with Q / dO (rows past a
    head's end read as 0 or as the next head's, and are masked); dense GQA causal with a partial last
    query tile, both persistent and one program per item, packed uneven lengths (steps of zero, one
    and many tiles, the last tile past total_q), against float64.  Packed, each sequence's statistics
    are moved to a 16-byte multiple: a TMA box starting between 16-byte chunks is an illegal
    instruction on the H200 (the interpreter refuses it: this test failed so before session 15's fix)."""
    monkeypatch.setattr(host, "WS_STATS_SMEM", dict.fromkeys(host.WS_STATS_SMEM, True))
    monkeypatch.setattr(host, "WS_STATS_SMEM_PACKED", True)
    stats = []
    spied = host._launch

    def spy(kernel, grid, *args, **meta):
        if kernel.__name__ == "bwd_ws_kernel":
            stats.append(meta["STATS_SMEM"])
        return spied(kernel, grid, *args, **meta)
    monkeypatch.setattr(host, "_launch", spy)
    dtype = torch.bfloat16
    _check_causal_gqa(D, seed=D + 21)
    monkeypatch.setattr(host, "WS_PERSISTENT", {False: True, True: True})
    q, k, v, do = dense_inputs(1, 2, 2, 130, 250, D, dtype, seed=D + 22)
    o, lse, *ref = dense_reference(q, k, v, do, False, 0.1)
    _check(attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=False, sm_scale=0.1), ref, dtype)
    lens_q, lens_k = [1, 67, 130, 5, 0], [1, 130, 67, 0, 9]
    q, k, v, do, cu_q, cu_k = packed_inputs(lens_q, lens_k, 4, 2, D, dtype, seed=D + 23)
    o, lse, *ref = packed_reference(q, k, v, do, cu_q, cu_k, True, 0.09)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=True, sm_scale=0.09, cu_seqlens_q=cu_q,
                        cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k))
    assert ws_kernel[-1] == "bwd_ws_kernel"
    _check(got, ref, dtype)
    assert stats == [True, True, True]


@pytest.mark.parametrize("D", [64, 128])
def test_ws_row_stats_read_in_the_products_layout(D, monkeypatch, tmp_path):
    """WS_STATS_SMEM on sm_90a: the rows the producer copied are read from shared memory in the
    products' layout (load-in-use-layout on tlx.local_load): the optimized IR converts no row of
    statistics (the loaded rows went through a shared-memory round trip before), 0 spills in the
    tile loop's kernel (non-causal; at D = 128 its consumers drift, WS_DRIFT, which spills 9 there)."""
    monkeypatch.setattr(host, "WS_STATS_SMEM", dict.fromkeys(host.WS_STATS_SMEM, True))
    monkeypatch.setattr(host, "WS_STATS_SMEM_PACKED", True)
    monkeypatch.setenv("TLXC_ATTN_BWD", "ws")
    monkeypatch.setenv("TLXC_DUMP_DIR", str(tmp_path))
    q = torch.empty(2, 4, 512, D, dtype=torch.bfloat16)
    k = torch.empty(2, 1, 512, D, dtype=torch.bfloat16)
    ws = compile_kernels(q, q, k, k, q, torch.empty(2, 4, 512), causal=False, sm_scale=0.1)[-1]
    assert ws.n_spills <= (9 if D == 128 else 0)
    assert "serializes the wgmma" not in " ".join(ws.perf_warnings), ws.perf_warnings
    (ir,) = [f.read_text() for f in tmp_path.glob("bwd_ws_kernel*.opt.ir")]
    assert "local_load" in ir and "1x64xf32" in ir
    assert not [line for line in ir.splitlines() if "convert_layout" in line and "1x64xf32" in line]


def test_ws_bshd_views_fp16(ws_kernel, poisoned):
    """[B, S, H, D] tensors seen as BHSD: rows of a head at stride H*D, the head's columns at h*D."""
    dtype = torch.float16
    q, k, v, do = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in dense_inputs(2, 4, 1, 130, 77, 64, dtype))
    o, lse, *ref = dense_reference(q, k, v, do, True, 0.125)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=True, sm_scale=0.125)
    assert ws_kernel[-1] == "bwd_ws_kernel"
    _check(got, ref, dtype)


@pytest.mark.parametrize("causal", [False, True])
def test_ws_packed_uneven_lengths(causal, ws_kernel, poisoned):
    dtype = torch.bfloat16
    lens_q, lens_k = [1, 67, 130, 5, 0], [1, 130, 67, 0, 9]
    q, k, v, do, cu_q, cu_k = packed_inputs(lens_q, lens_k, 4, 2, 128, dtype, seed=7 + causal)
    o, lse, *ref = packed_reference(q, k, v, do, cu_q, cu_k, causal, 0.09)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=causal, sm_scale=0.09, cu_seqlens_q=cu_q,
                        cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k))
    assert ws_kernel[-1] == "bwd_ws_kernel"
    _check(got, ref, dtype)


@pytest.mark.parametrize("D", [64, 128])
def test_ws_dq_staged_in_rows(D, ws_kernel, poisoned, monkeypatch):
    """WS_DQ_ROWS (shipped on): dQ's float32 tiles staged as [64, 2, 32] (a row's 64 floats in one run)
    and added by one 3-D TMA box each: dense causal GQA with a partial last query tile (D = 128: each consumer its column
    half, deferred a tile; D = 64: the consumers take turns), BSHD views (head columns at h * D of a row
    H * D wide), packed uneven lengths (steps of zero, one and many tiles), against float64."""
    monkeypatch.setattr(host, "WS_DQ_ROWS", {64: True, 128: True})
    launched = []
    real = host.TensorDescriptor

    def spy(base, shape, strides, block_shape, **kw):
        launched.append(len(block_shape))
        return real(base, shape, strides, block_shape, **kw)

    monkeypatch.setattr(host, "TensorDescriptor", spy)
    _check_causal_gqa(D, seed=D + 21)
    assert 3 in launched                                    # dq_desc: the 3-D box
    dtype = torch.bfloat16
    q, k, v, do = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in dense_inputs(1, 4, 4, 130, 77, D, dtype))
    o, lse, *ref = dense_reference(q, k, v, do, False, 0.125)
    _check(attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=False, sm_scale=0.125), ref, dtype)
    _check_packed_uneven(D, seed=D + 22)
    assert ws_kernel.count("bwd_ws_kernel") == 3


@pytest.mark.parametrize("dq_rows", [False, True])
def test_ws_drifting_consumers_at_head_dim_128(dq_rows, ws_kernel, poisoned, monkeypatch):
    """WS_DRIFT at D = 128 (shipped without a mask, forced on here): only tile t's dQ consumer (t % 2) waits
    for the other's dS^T half and computes both 64-column halves of the tile's dQ (two reduce-adds;
    WS_DEFER_DQ is off with it): dense causal GQA with a partial last query tile and packed uneven lengths
    (odd and even tile counts an item, so either consumer ends an item one tile ahead) against float64, in
    both dQ stagings."""
    monkeypatch.setattr(host, "WS_DRIFT", dict.fromkeys(host.WS_DRIFT, True))
    monkeypatch.setattr(host, "WS_DQ_ROWS", {64: dq_rows, 128: dq_rows})
    _check_causal_gqa(128, seed=131)
    _check_packed_uneven(128, seed=132)
    assert ws_kernel.count("bwd_ws_kernel") == 2


def test_ws_dq_rows_keep_the_column_blocks_for_odd_row_strides(ws_kernel, poisoned, monkeypatch):
    """A row stride that is not a multiple of 32 floats (q a column slice of a wider tensor) cannot be seen
    as [rows, stride / 32, 32]: WS_DQ_ROWS falls back to the column blocks there, still exact."""
    monkeypatch.setattr(host, "WS_DQ_ROWS", {64: True, 128: True})
    dtype = torch.bfloat16
    wide = [t.detach() for t in dense_inputs(1, 2, 2, 150, 150, 72, dtype, seed=31)]   # rows of 72 elements
    q, k, v, do = (t[..., :64] for t in wide)
    assert q.stride(2) == 72
    o, lse, *ref = dense_reference(q, k, v, do, True, 0.125)
    _check(attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=True, sm_scale=0.125), ref, dtype)
    assert ws_kernel[-1] == "bwd_ws_kernel"


@pytest.mark.parametrize("D,causal", [(64, False), (128, False), (128, True)])
def test_ws_dq_rows_compile_without_spills(D, causal, monkeypatch):
    """sm_90a: the staging in rows (shipped) takes the same shared memory as the column blocks and no new
    spills (D = 128 causal, which spills 4 registers with the column blocks and 6 in rows, within 8)."""
    monkeypatch.setenv("TLXC_ATTN_BWD", "ws")
    q = torch.empty(2, 4, 1024, D, dtype=torch.bfloat16)
    lse = torch.zeros(2, 4, 1024)
    monkeypatch.setattr(host, "WS_DQ_ROWS", {64: False, 128: False})
    *_, blocks = compile_kernels(q, q, q, q, q, lse, causal=causal, sm_scale=0.1)
    monkeypatch.setattr(host, "WS_DQ_ROWS", {64: True, 128: True})
    *_, rows = compile_kernels(q, q, q, q, q, lse, causal=causal, sm_scale=0.1)
    assert rows.name != blocks.name                         # another specialization (DQ_ROWS)
    assert rows.n_spills <= max(blocks.n_spills, 8) and rows.metadata.shared == blocks.metadata.shared


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_tlxc_check_is_clean_for_the_ws_launch(D, causal, monkeypatch):
    """``tlxc check`` of the ws kernel's launch as the host makes it (shipped options: dQ staged in rows,
    the statistics through shared memory; GQA 2:1, S = 1024): no finding above a note (the ring's slot
    indices are runtime values, so the barrier protocol is the interpreter runs' above)."""
    import inspect

    from tlxc.compiler import check_function
    from tlxc.frontend.specialize import specialization_from_args
    from tlxc.ops.kernels.attention_bwd_ws import bwd_ws_kernel
    monkeypatch.setenv("TLXC_ATTN_BWD", "ws")
    launches = []
    monkeypatch.setattr(host, "_launch", lambda kernel, grid, *args, **meta: launches.append((kernel, args, meta)))
    q = torch.zeros(2, 4, 1024, D, dtype=torch.bfloat16)
    k = torch.zeros(2, 2, 1024, D, dtype=torch.bfloat16)
    attention_bwd(q, q, k, k, q, torch.zeros(2, 4, 1024), causal=causal, sm_scale=0.1)
    (args, meta), = [(args, meta) for kernel, args, meta in launches if kernel is bwd_ws_kernel]
    assert meta["DQ_ROWS"] and meta["STATS_SMEM"]
    num_warps = meta.pop("num_warps")
    defaults = {n: p.default for n, p in inspect.signature(bwd_ws_kernel.fn).parameters.items()
                if p.default is not inspect.Parameter.empty}
    params = {**defaults, **dict(zip(bwd_ws_kernel.param_names, args)), **meta}
    findings = check_function(bwd_ws_kernel, specialization_from_args(bwd_ws_kernel, params), num_warps=num_warps)
    assert [f.render() for f in findings if f.severity != "note"] == []


def test_ws_falls_back_where_it_does_not_apply(ws_kernel):
    """Head dim 96 (not whole 64-column boxes) runs the tl.dot kernels."""
    q, k, v, do = dense_inputs(1, 2, 2, 40, 40, 96, torch.bfloat16)
    o, lse, *ref = dense_reference(q, k, v, do, False, 0.1)
    got = attention_bwd(do, q, k, v, o.to(torch.bfloat16), lse.float(), causal=False, sm_scale=0.1)
    assert ws_kernel == ["bwd_preprocess_kernel", "bwd_dkdv_kernel", "bwd_dq_kernel"]
    _check(got, ref, torch.bfloat16)


def test_auto_choice(monkeypatch):
    """TLXC_ATTN_BWD unset (auto): the ws kernel from WS_MIN_KEYS keys up at head dims 64 / 128,
    the tl.dot kernels below that, at other head dims, and under torch's deterministic mode.
    The launches are recorded, not compiled (one real compile at the end checks the wiring)."""
    monkeypatch.delenv("TLXC_ATTN_BWD", raising=False)
    launched = []
    real_launch = host._launch
    monkeypatch.setattr(host, "_launch", lambda kernel, grid, *args, **meta: launched.append(kernel.__name__))

    def last_kernel(D, S, Hkv=2):
        q, k, v, do = dense_inputs(1, 2, Hkv, S, S, D, torch.bfloat16)
        attention_bwd(do, q, k, v, q, torch.zeros(1, 2, S), causal=True, sm_scale=0.1)
        return launched[-1]

    n = host.WS_MIN_KEYS[64, False]
    assert last_kernel(64, n) == "bwd_ws_kernel"
    assert last_kernel(64, n - 1) == "bwd_dq_kernel"
    mha, gqa = host.WS_MIN_KEYS[128, False], host.WS_MIN_KEYS[128, True]
    assert gqa < mha                        # an MHA item has a quarter of a GQA-4 item's tiles
    assert last_kernel(128, mha) == "bwd_ws_kernel"
    assert last_kernel(128, mha - 1) == "bwd_dq_kernel"
    assert last_kernel(128, gqa, Hkv=1) == "bwd_ws_kernel"
    assert last_kernel(128, gqa - 1, Hkv=1) == "bwd_dq_kernel"
    assert last_kernel(96, max(host.WS_MIN_KEYS.values())) == "bwd_dq_kernel"

    def last_packed_kernel(D, S):
        q, k, v, do, cu_q, cu_k = packed_inputs([S, 7], [S, 7], 2, 2, D, torch.bfloat16)
        attention_bwd(do, q, k, v, q, torch.zeros(2, S + 7), causal=True, sm_scale=0.1, cu_seqlens_q=cu_q,
                      cu_seqlens_k=cu_k, max_seqlen_q=S, max_seqlen_k=S)
        return launched[-1]

    for D in (64, 128):                     # packed: the longest sequence against WS_MIN_KEYS_PACKED
        least = host.WS_MIN_KEYS_PACKED[D]
        assert last_packed_kernel(D, least) == "bwd_ws_kernel"
        assert last_packed_kernel(D, least - 1) == "bwd_dq_kernel"
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        assert last_kernel(64, n) == "bwd_dq_kernel"
    finally:
        torch.use_deterministic_algorithms(before)
    monkeypatch.setattr(host, "_launch", real_launch)
    q, k, v, do = dense_inputs(1, 2, 2, n, n, 64, torch.bfloat16)
    assert compile_kernels(do, q, k, v, q, torch.zeros(1, 2, n), causal=True,
                           sm_scale=0.1)[-1].name.startswith("bwd_ws_kernel")


def test_ws_unknown_choice(monkeypatch):
    monkeypatch.setenv("TLXC_ATTN_BWD", "fast")
    a = _args()
    with pytest.raises(ValueError, match="TLXC_ATTN_BWD must be"):
        attention_bwd(a["do"], a["q"], a["k"], a["v"], a["o"], a["lse"], causal=False, sm_scale=0.1)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_ws_compiles_for_sm90a(D, causal, packed, monkeypatch):
    """sm_90a: shared memory within 227 KB, at most 32 bytes spilled (a few scalars of the
    consumers at 240 registers: dK, dV and the dQ half take 160), no wgmma serialization."""
    monkeypatch.setenv("TLXC_ATTN_BWD", "ws")
    dtype = torch.bfloat16
    if packed:
        q, k, v, do, cu_q, cu_k = packed_inputs([1000, 24], [1000, 24], 8, 2, D, dtype)
        lse = torch.zeros(8, 1024)
        kw = {"cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k, "max_seqlen_q": 1000, "max_seqlen_k": 1000}
    else:
        q, k, v, do = dense_inputs(2, 8, 2, 1024, 1024, D, dtype)
        lse = torch.zeros(2, 8, 1024)
        kw = {}
    handles = compile_kernels(do, q, k, v, q, lse, causal=causal, sm_scale=0.1, **kw)
    ws = handles[-1]
    assert "bwd_ws_kernel" in ws.asm["cuda"]
    assert ws.n_spills <= 32 and ws.metadata.shared <= 227 * 1024
    assert not [w for w in ws.perf_warnings if "serializ" in w]


def test_ws_consumer_schedule_and_swizzled_dq_staging(monkeypatch):
    """The generated CUDA of the ws kernel (D = 128): each consumer commits S^T and dP^T before
    its first wgmma wait, and that wait leaves one group in flight (the exponentials run under
    dP^T); the float32 dQ staging tile is 128-byte swizzled in rows of 64 floats (WS_DQ_ROWS), so its
    64 columns leave as one 3-D reduce-add ([64, 2, 32]; the column blocks took two 2-D copies), and the
    previous tile's dQ leaves while S^T runs."""
    monkeypatch.setenv("TLXC_ATTN_BWD", "ws")
    monkeypatch.setattr(host, "WS_DRIFT", dict.fromkeys(host.WS_DRIFT, False))    # in step (shipped under a mask)
    q, k, v, do = dense_inputs(1, 2, 2, 1024, 1024, 128, torch.bfloat16)
    cuda = compile_kernels(do, q, k, v, q, torch.zeros(1, 2, 1024), causal=False, sm_scale=0.1)[-1].asm["cuda"]
    consumers = cuda.split("// task 'task")[1:]          # [0]: up to the first consumer
    assert len(consumers) == 2
    for body in consumers:
        first_wait = body.index("tlx_wgmma_wait_group<")
        assert body.count("tlx_wgmma_commit_group()", 0, first_wait) == 2
        assert body[first_wait:].startswith("tlx_wgmma_wait_group<1,")
        # WS_DEFER_DQ: the previous tile's dQ leaves between S^T's and dP^T's commits, the last
        # tile's after the loop: two sites of one 3-D copy
        s_commit = body.index("tlx_wgmma_commit_group()")
        assert s_commit < body.index("tlx_tma_reduce_add_3d(") < body.index("tlx_wgmma_commit_group()", s_commit + 1)
        assert body.count("tlx_tma_reduce_add_3d(") == 2 and "tlx_tma_reduce_add_2d(" not in body


def test_ws_head_dim_64_register_kv_and_alternating_dq(monkeypatch):
    """D = 64: K_c and V_c are loaded into registers once (S^T and dP^T are wgmmas with register A,
    the ``_rs`` form), and one consumer per
    query tile computes dQ from the shared dS^T tile (a branch on ``t % 2``: that consumer waits
    at a named barrier, the other only arrives), so each consumer's code has one reduce-add (one 3-D
    copy of the tile staged in rows, WS_DQ_ROWS)."""
    monkeypatch.setenv("TLXC_ATTN_BWD", "ws")
    q, k, v, do = dense_inputs(1, 2, 2, 1024, 1024, 64, torch.bfloat16)
    cuda = compile_kernels(do, q, k, v, q, torch.zeros(1, 2, 1024), causal=False, sm_scale=0.1)[-1].asm["cuda"]
    for body in cuda.split("// task 'task")[1:]:
        loop = body.index("for (int t")
        first_wgmma = body.index("tlx_wgmma_m64n64k16", loop)
        assert body.startswith("tlx_wgmma_m64n64k16_f32_bf16_rs<", first_wgmma)        # S^T: register A
        assert body.count("tlx_tma_reduce_add_3d(") == 1          # one [64, 2, 32] box of 64 float32 columns
        dq_mma = body.index("tlx_wgmma_m64n64k16_f32_bf16<1, 1>", loop)              # dQ = dS K (A transposed)
        arrive = body.index("tlx_bar_arrive(", loop)       # the tile's other consumer only signals its dS^T half
        assert "if (" in body[body.rindex("tlx_bar_sync(", 0, arrive):dq_mma]
