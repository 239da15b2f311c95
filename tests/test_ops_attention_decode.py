"""tlxc.ops.attention_decode on the CPU: the split-KV decode kernel on the interpreter against
float64 math (paged caches with shuffled block tables and page sizes that do and do not divide
the key block, contiguous caches, GQA / MQA / MHA, lengths 0, 1 and past one split, odd head
dims, one split and several), outputs poisoned with NaN, the device-side checks of the lengths
and the block table, argument errors, the custom op, and sm_90a compiles with `tlxc check`."""
from __future__ import annotations

import importlib
import itertools

import pytest
import torch

import tlxc.ops
from tlxc.errors import InterpreterError
from tlxc.ops import attention_decode

M = importlib.import_module("tlxc.ops.attention_decode")   # the module (tlxc.ops.attention_decode is the function)
TOL = {torch.bfloat16: 2e-2, torch.float16: 4e-3}


@pytest.fixture
def poisoned(monkeypatch):
    """Fresh float tensors start as NaN: an output row (or a split's partial) the kernels do not
    write shows up."""
    empty, new_empty = torch.empty, torch.Tensor.new_empty

    def fill(t):
        return t.fill_(float("nan")) if t.is_floating_point() else t
    monkeypatch.setattr(torch, "empty", lambda *a, **k: fill(empty(*a, **k)))
    monkeypatch.setattr(torch.Tensor, "new_empty", lambda self, *a, **k: fill(new_empty(self, *a, **k)))


def _randn(*shape, seed, dtype=torch.bfloat16):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _paged(lens, page, Hkv, D, dtype, seed, spare=3):
    """A paged cache holding the sequences' keys in shuffled pages (plus ``spare`` pages no
    sequence owns) and its block table; table entries past a sequence's pages are -1 (never read)."""
    gen = torch.Generator().manual_seed(seed)
    need = [-(-n // page) for n in lens]
    width = max(1, max(need) + 1)
    num_pages = sum(need) + spare
    order = torch.randperm(num_pages, generator=gen)
    table = torch.full((len(lens), width), -1, dtype=torch.int32)
    used = 0
    for b, n in enumerate(need):
        table[b, :n] = order[used:used + n].to(torch.int32)
        used += n
    k = _randn(num_pages, page, Hkv, D, seed=seed + 1, dtype=dtype)
    v = _randn(num_pages, page, Hkv, D, seed=seed + 2, dtype=dtype)
    return k, v, table


def _check(o, lse, ref_o, ref_lse, dtype):
    finite = torch.isfinite(ref_lse)
    assert torch.isfinite(o).all(), "an output row was not written (NaN poison left)"
    assert (o.double() - ref_o).abs().max().item() < TOL[dtype]
    if finite.any():
        assert (lse[finite].double() - ref_lse[finite]).abs().max().item() < 1e-4
    assert (lse[~finite] == float("-inf")).all()
    assert (o.reshape(lse.shape + o.shape[-1:])[~finite].double() == 0).all()


PAGED = [  # lens, H, Hkv, D, page, num_splits, dtype
    ([0, 1, 37, 200], 4, 2, 64, 16, None, torch.bfloat16),     # empty, one key, pages smaller than a block
    ([130, 5], 8, 1, 128, 64, 3, torch.float16),               # MQA 8:1, three splits (one of them empty for b=1)
    ([70, 129, 1], 2, 2, 96, 8, 2, torch.bfloat16),            # MHA, padded head dim, tiny pages
    ([33, 96], 4, 1, 256, 32, 2, torch.bfloat16),              # 32-key blocks at D = 256
    ([300], 2, 1, 64, 128, 5, torch.bfloat16),                 # pages larger than a block, many splits
    ([75, 2], 4, 2, 64, 1, 2, torch.bfloat16),                 # one key per page (token-level paging)
    ([100, 0, 37], 4, 4, 64, 12, None, torch.float16),         # a page size that is not a power of two
]


@pytest.mark.parametrize("lens,H,Hkv,D,page,splits,dtype", PAGED, ids=lambda x: str(x).replace("torch.", ""))
def test_paged_matches_float64(lens, H, Hkv, D, page, splits, dtype, poisoned):
    k, v, table = _paged(lens, page, Hkv, D, dtype, seed=len(lens) + D)
    q = _randn(len(lens), H, D, seed=7, dtype=dtype)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    o, lse = attention_decode(q, k, v, seqlens, block_table=table, num_splits=splits)
    assert o.shape == q.shape and o.dtype == dtype and lse.shape == (len(lens), H)
    _check(o, lse, *M.reference(q, k, v, seqlens, block_table=table), dtype)


STREAM = [  # lens, H, Hkv, D, page, sms (programs: 2 per "SM"), dtype
    ([0, 1, 37, 200], 4, 2, 64, 16, 2, torch.bfloat16),      # rows cut by program boundaries, an empty sequence
    ([130, 5], 8, 1, 128, 64, 3, torch.float16),             # MQA 8:1, pages of a whole block
    ([300, 0, 70], 4, 4, 64, 12, 5, torch.bfloat16),         # MHA, a page size that is not a power of two
    ([2000], 4, 1, 64, 16, 20, torch.bfloat16),              # 40 programs for 32 blocks: one row over 32 programs
    ([2000, 3, 1500], 80, 1, 64, 16, 7, torch.bfloat16),     # two head tiles per kv head (64 + 16 rows)
    ([70, 129, 1], 2, 2, 96, 8, 3, torch.bfloat16),          # padded head dim, tiny pages
    ([33, 96], 4, 1, 256, 32, 3, torch.bfloat16),            # 32-key blocks at D = 256
    ([75, 2], 4, 2, 64, 1, 2, torch.float16),                # one key per page
    ([0, 5, 0, 0, 700, 0], 4, 2, 64, 16, 3, torch.bfloat16),  # empty sequences between and after the work
    ([0, 0], 4, 2, 64, 16, 2, torch.bfloat16),               # no keys at all: every program idle
]


@pytest.mark.parametrize("lens,H,Hkv,D,page,sms,dtype", STREAM, ids=lambda x: str(x).replace("torch.", ""))
def test_stream_schedule_matches_float64(lens, H, Hkv, D, page, sms, dtype, poisoned):
    """The persistent schedule (key blocks shared evenly by ``2 * sms`` programs, the ring running
    across rows, partials merged by the second kernel) against float64 math."""
    k, v, table = _paged(lens, page, Hkv, D, dtype, seed=len(lens) + D + page)
    q = _randn(len(lens), H, D, seed=8, dtype=dtype)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    o, lse = attention_decode(q, k, v, seqlens, block_table=table, schedule="stream", _sms=sms)
    _check(o, lse, *M.reference(q, k, v, seqlens, block_table=table), dtype)


@pytest.mark.parametrize("ring", [(32, 6), (16, 8)])
def test_stream_schedule_with_other_rings(ring, poisoned):
    """The stream schedule with the bench's ring A/B (``_ring``: keys per block, slots)."""
    lens = [300, 0, 77, 5]
    k, v, table = _paged(lens, 12, 2, 128, torch.bfloat16, seed=81)
    q = _randn(4, 8, 128, seed=82)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    o, lse = attention_decode(q, k, v, seqlens, block_table=table, schedule="stream", _sms=3, _ring=ring)
    _check(o, lse, *M.reference(q, k, v, seqlens, block_table=table), torch.bfloat16)


HEADS = [  # lens, H, Hkv, D, page, sms: _heads (a row per sequence, blocks of 64 / Hkv keys x every kv head)
    ([0, 1, 37, 200], 4, 2, 64, 16, 2),
    ([2000], 32, 8, 64, 16, 20),          # one sequence over 40 programs (the merge's 64-partial steps)
    ([70, 129, 1], 32, 32, 96, 8, 3),     # MHA: 2 keys x 32 heads a block, padded head dim, tiny pages
    ([75, 2, 0], 16, 8, 64, 1, 2),        # one key per page
]


@pytest.mark.parametrize("lens,H,Hkv,D,page,sms", HEADS, ids=str)
def test_stream_all_heads_blocks(lens, H, Hkv, D, page, sms, poisoned):
    k, v, table = _paged(lens, page, Hkv, D, torch.bfloat16, seed=91 + H)
    q = _randn(len(lens), H, D, seed=92)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    o, lse = attention_decode(q, k, v, seqlens, block_table=table, schedule="stream", _sms=sms, _heads=True)
    _check(o, lse, *M.reference(q, k, v, seqlens, block_table=table), torch.bfloat16)
    if len(lens) == 3:          # the contiguous cache too
        kc, vc = _randn(3, 80, Hkv, D, seed=93), _randn(3, 80, Hkv, D, seed=94)
        seqlens = torch.tensor([80, 3, 0], dtype=torch.int32)
        o, lse = attention_decode(q, kc, vc, seqlens, schedule="stream", _sms=sms, _heads=True)
        _check(o, lse, *M.reference(q, kc, vc, seqlens), torch.bfloat16)


def test_stream_blocks_are_shared_evenly():
    """The partition the kernels compute: ``TB // P`` blocks per program, the first ``TB % P`` one
    more, and the program of each block its inverse (checked here on the interpreter's helpers'
    formulas, restated in Python)."""
    for TB, P in ((12, 4), (32, 40), (1000, 264), (7, 3), (0, 5)):
        lo = [p * (TB // P) + min(p, TB % P) for p in range(P + 1)]
        assert lo[0] == 0 and lo[P] == TB and all(0 <= b - a - TB // P <= 1 for a, b in itertools.pairwise(lo))
        per, big = TB // P, (TB % P) * (TB // P + 1)
        for f in range(TB):
            p = f // (per + 1) if f < big else TB % P + (f - big) // max(per, 1)
            assert lo[p] <= f < lo[p + 1]


def test_contiguous_cache_and_flash_layout(poisoned):
    """No block table: the cache is [B, S_cache, Hkv, D] (a strided view of a bigger buffer
    here); q as flash-attn's [B, 1, H, D] gives o of that shape; a custom scale."""
    big = _randn(3, 90, 4, 64, seed=3)
    k, v = big[:, :, :2], big[:, :, 2:]
    q = _randn(3, 1, 6, 64, seed=4)
    seqlens = torch.tensor([90, 0, 41], dtype=torch.int32)
    for kwargs in ({"num_splits": 2}, {"schedule": "stream", "_sms": 3}):
        o, lse = attention_decode(q, k, v, seqlens, sm_scale=0.3, **kwargs)
        assert o.shape == (3, 1, 6, 64)
        _check(o, lse, *M.reference(q, k, v, seqlens, sm_scale=0.3), torch.bfloat16)


@pytest.mark.parametrize("combine", M.COMBINES)
def test_combines_agree_and_counters_reset(combine, poisoned):
    """Both ways of merging the splits (the last split of each kv head inline, counted by an
    atomic; a second kernel) give the float64 result; the inline counters are zero again after
    a call, so a second call with other lengths is right too."""
    k, v, table = _paged([300, 129, 64], 16, 2, 64, torch.bfloat16, seed=51)
    q = _randn(3, 8, 64, seed=52)
    for lens in ([300, 0, 64], [1, 129, 17]):
        seqlens = torch.tensor(lens, dtype=torch.int32)
        o, lse = attention_decode(q, k, v, seqlens, block_table=table, num_splits=4, combine=combine)
        _check(o, lse, *M.reference(q, k, v, seqlens, block_table=table), torch.bfloat16)
        if combine == "inline":
            assert (M._split_counters(q.device, 6)[:6] == 0).all()


def test_k_and_v_of_different_strides(poisoned):
    """V laid out [num_pages, Hkv, page, D] (seen through a transpose) while K is
    [num_pages, page, Hkv, D]: the copies' offsets are computed for each."""
    k, v, table = _paged([90, 33], 16, 2, 64, torch.bfloat16, seed=61)
    v_other = v.transpose(1, 2).contiguous().transpose(1, 2)                 # same values, other strides
    assert v_other.stride() != k.stride()
    q = _randn(2, 4, 64, seed=62)
    seqlens = torch.tensor([90, 33], dtype=torch.int32)
    for kwargs in ({"num_splits": 2}, {"schedule": "stream", "_sms": 2}):
        o, lse = attention_decode(q, k, v_other, seqlens, block_table=table, **kwargs)
        _check(o, lse, *M.reference(q, k, v, seqlens, block_table=table), torch.bfloat16)


def test_plans_are_cached_by_shapes_strides_and_options(poisoned):
    """A repeated call reuses its plan (the checks and launch arguments) and reads the new
    values; another stride, dtype or option makes another plan or the error the first call
    would give; operands with a non-unit last stride (a copy per call) are right too."""
    k, v, table = _paged([90, 33], 16, 2, 64, torch.bfloat16, seed=63)
    q = _randn(2, 4, 64, seed=64)
    seqlens = torch.tensor([90, 33], dtype=torch.int32)
    M._PLANS.clear()
    for step, lens in enumerate(([90, 33], [5, 30])):
        seqlens.copy_(torch.tensor(lens, dtype=torch.int32))
        q.copy_(_randn(2, 4, 64, seed=65 + step))
        o, lse = attention_decode(q, k, v, seqlens, block_table=table)
        _check(o, lse, *M.reference(q, k, v, seqlens, block_table=table), torch.bfloat16)
        assert len(M._PLANS) == 1
    with pytest.raises(TypeError, match="'check' must be a bool"):
        attention_decode(q, k, v, seqlens, block_table=table, check=1)
    with pytest.raises(ValueError, match="'v_cache' must have q's dtype"):
        attention_decode(q, k, v.half(), seqlens, block_table=table)
    o2, _ = attention_decode(q, k, v, seqlens, block_table=table, sm_scale=0.5)
    _check(o2, _, *M.reference(q, k, v, seqlens, block_table=table, sm_scale=0.5), torch.bfloat16)
    wide = torch.stack([k, torch.zeros_like(k)], -1).flatten(-2)[..., ::2]       # k's values, last stride 2
    q_wide = torch.stack([q, q], -1).flatten(-2)[..., ::2]
    assert wide.stride(-1) == 2 and torch.equal(wide, k) and q_wide.stride(-1) == 2
    for schedule in M.SCHEDULES:
        o3, lse3 = attention_decode(q_wide, wide, v, seqlens, block_table=table, schedule=schedule)
        _check(o3, lse3, *M.reference(q, k, v, seqlens, block_table=table), torch.bfloat16)
    assert len(M._PLANS) == 4


def test_strided_block_table_and_lengths(poisoned):
    """A block table whose columns are not adjacent (a transposed copy) and lengths taken every
    other element of a longer tensor: read as the values they show."""
    k, v, table = _paged([70, 200, 5], 16, 1, 64, torch.bfloat16, seed=71)
    table_t = table.t().contiguous().t()
    assert table_t.stride(1) != 1
    seqlens = torch.tensor([70, -5, 200, -5, 5], dtype=torch.int32)[::2]
    q = _randn(3, 2, 64, seed=72)
    for kwargs in ({"num_splits": 2}, {"schedule": "stream", "_sms": 2}):
        o, lse = attention_decode(q, k, v, seqlens, block_table=table_t, **kwargs)
        _check(o, lse, *M.reference(q, k, v, seqlens, block_table=table), torch.bfloat16)


def test_default_split_count_runs_the_combine(poisoned):
    """The split schedule's default split count on the interpreter (2 "SMs"): two splits of 1024
    keys or more."""
    lens = [2200, 3]
    k, v, table = _paged(lens, 16, 1, 64, torch.bfloat16, seed=11)
    q = _randn(2, 4, 64, seed=12)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    splits, split_len = M.num_splits_for(table.shape[1] * 16, 2, 1, 1, 64, M.CPU_SMS, 64)
    assert splits > 1 and split_len % 64 == 0 and split_len >= M.MIN_SPLIT
    o, lse = attention_decode(q, k, v, seqlens, block_table=table, schedule="split")
    _check(o, lse, *M.reference(q, k, v, seqlens, block_table=table), torch.bfloat16)


def test_group_larger_than_a_tile(poisoned):
    """80 query heads on one kv head: two 64-row tiles, the second one 16 heads."""
    lens = [20]
    k, v, table = _paged(lens, 16, 1, 64, torch.bfloat16, seed=21)
    q = _randn(1, 80, 64, seed=22)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    o, lse = attention_decode(q, k, v, seqlens, block_table=table)
    _check(o, lse, *M.reference(q, k, v, seqlens, block_table=table), torch.bfloat16)


def test_split_rule():
    """One wave of programs (at least capacity / MIXED_SPLIT splits), no split under MIN_SPLIT
    keys, whole key blocks, and every key covered by exactly one split."""
    for capacity, B, Hkv in ((32768, 1, 8), (4096, 64, 8), (100, 4, 2), (1, 1, 1), (8192, 8, 1)):
        splits, split_len = M.num_splits_for(capacity, B, Hkv, 1, 64, 132)
        assert split_len % 64 == 0 and (splits - 1) * split_len < capacity <= splits * split_len
        assert splits == 1 or split_len >= M.FILL_SPLIT
    assert M.num_splits_for(32768, 1, 8, 1, 64, 132) == (32, 1024)     # a wave (264 programs): 33; 1024 keys
    assert M.num_splits_for(65536, 1, 8, 1, 32, 132, 256) == (32, 2048)  # D = 256: the merge tile holds 32
    assert M.num_splits_for(8192, 8, 8, 1, 64, 132) == (4, 2048)        # 264 / 64 rows
    assert M.num_splits_for(4096, 16, 8, 1, 64, 132) == (2, 2048)       # 264 / 128 rows
    assert M.num_splits_for(8192, 64, 8, 1, 64, 132) == (4, 2048)       # rows > a wave: capacity / 2048
    assert M.num_splits_for(14000, 16, 8, 1, 64, 132) == (6, 2368)      # (a batch of mixed lengths up to 14000)
    assert M.num_splits_for(2000, 64, 8, 1, 64, 132) == (1, 2048)       # splits of 1024 keys at least
    assert M.num_splits_for(8192, 1, 8, 1, 64, 132) == (32, 256)        # ... unless SMs would idle: 264 programs


def test_bad_lengths_and_pages_are_device_errors():
    """A length past the cache's capacity and a block-table entry in use outside the cache stop
    the kernel with a located device assertion (the GPU traps the same way); entries past a
    sequence's pages may hold anything (-1 here)."""
    k, v, table = _paged([40], 16, 1, 64, torch.bfloat16, seed=31)
    q = _randn(1, 2, 64, seed=32)
    with pytest.raises(InterpreterError, match="cache_seqlens"):
        attention_decode(q, k, v, torch.tensor([table.shape[1] * 16 + 1], dtype=torch.int32), block_table=table)
    bad = table.clone()
    bad[0, 1] = k.shape[0]
    with pytest.raises(InterpreterError, match="block_table"):
        attention_decode(q, k, v, torch.tensor([40], dtype=torch.int32), block_table=bad)
    o, _ = attention_decode(q, k, v, torch.tensor([40], dtype=torch.int32), block_table=bad, check=False)
    assert o.shape == q.shape                  # check=False: the caller vouches; the bad page is not read
    k, v, table = _paged([300], 16, 1, 64, torch.bfloat16, seed=33)      # two splits: the combine kernel checks
    bad = table.clone()
    bad[0, 7] = -2
    for combine in M.COMBINES:
        with pytest.raises(InterpreterError, match="block_table"):
            attention_decode(q, k, v, torch.tensor([300], dtype=torch.int32), block_table=bad, num_splits=2,
                             combine=combine)


@pytest.mark.parametrize("entry", [300, 530])
def test_the_combine_checks_every_share_of_the_block_table(entry):
    """The combine kernel's programs of a sequence check its block table in shares (256-entry
    chunks, every H-th from the head's): a bad entry in use in the second head's chunk (300) and
    in the first head's second chunk (530) stops the call; entries past the pages in use do not."""
    k, v, table = _paged([1100], 2, 1, 64, torch.bfloat16, seed=35)        # 550 entries, 2-row pages
    q = _randn(1, 2, 64, seed=36)
    bad = table.clone()
    bad[0, entry] = -3
    with pytest.raises(InterpreterError, match="block_table"):
        attention_decode(q, k, v, torch.tensor([1100], dtype=torch.int32), block_table=bad, num_splits=2)
    o, _ = attention_decode(q, k, v, torch.tensor([2 * entry], dtype=torch.int32), block_table=bad, num_splits=2)
    assert torch.isfinite(o).all()             # the bad entry lies past the pages in use


WINDOWED = [  # lens, window, softcap, num_splits, combine, page
    ([200, 1, 0, 70], (50, 0), None, None, "kernel", 16),     # the window's first block masked; 1 and 0 keys
    ([300, 130], (100, -1), None, 3, "kernel", 16),           # splits before the window do nothing
    ([300, 130], (100, 5), 30.0, 3, "inline", 8),             # with softcap; the right side bounds nothing
    ([64, 65, 128], (0, 0), None, 2, "kernel", 64),           # only the last key
    ([90], (500, -1), 2.0, None, "kernel", 16),               # a window wider than the sequence; a tight cap
    ([257, 40], None, 5.0, 2, "kernel", 16),                  # softcap alone
]


@pytest.mark.parametrize("lens,window,softcap,splits,combine,page", WINDOWED, ids=lambda x: str(x))
def test_windows_and_softcap_match_float64(lens, window, softcap, splits, combine, page, poisoned):
    """Sliding windows (the query is the last token: keys len - 1 - left .. len - 1) and logit
    softcapping on the split schedule, paged, GQA 2:1, against float64 math."""
    k, v, table = _paged(lens, page, 2, 64, torch.bfloat16, seed=sum(lens))
    q = _randn(len(lens), 4, 64, seed=41)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    o, lse = attention_decode(q, k, v, seqlens, block_table=table, window=window, softcap=softcap,
                              num_splits=splits, combine=combine)
    _check(o, lse, *M.reference(q, k, v, seqlens, block_table=table, window=window, softcap=softcap),
           torch.bfloat16)


def test_window_changes_the_result_and_reads_only_its_blocks():
    """A window of 10 keys on a 300-key sequence gives the windowed float64 result (which
    differs from the whole sequence's), and the kernel reads no page before the window's first
    block: block-table entries of keys 0..47 pointing outside the cache change nothing (with
    ``check=False``: those pages are in use, so the input check would refuse them)."""
    k, v, table = _paged([300], 16, 1, 64, torch.bfloat16, seed=43)
    q = _randn(1, 2, 64, seed=44)
    seqlens = torch.tensor([300], dtype=torch.int32)
    o, _ = attention_decode(q, k, v, seqlens, block_table=table, window=(10, 0))
    ref_w, _ = M.reference(q, k, v, seqlens, block_table=table, window=(10, 0))
    ref_all, _ = M.reference(q, k, v, seqlens, block_table=table)
    assert (o.double() - ref_w).abs().max() < 2e-2 < (ref_w - ref_all).abs().max()
    hidden = table.clone()
    hidden[0, :3] = 10 ** 6                    # keys 0..47: before the window's block (keys 256..)
    o2, _ = attention_decode(q, k, v, seqlens, block_table=hidden, window=(10, 0), check=False)
    assert torch.equal(o2, o)


def test_window_and_softcap_arguments():
    q = torch.zeros(2, 4, 64, dtype=torch.bfloat16)
    k = torch.zeros(5, 16, 2, 64, dtype=torch.bfloat16)
    table = torch.zeros(2, 3, dtype=torch.int32)
    lens = torch.zeros(2, dtype=torch.int32)
    for kwargs, message in [
        ({"window": 5}, "tlxc.ops.attention_decode: 'window' must be a pair of ints"),
        ({"window": (-2, 0)}, "tlxc.ops.attention_decode: 'window' sides must be >= 0"),
        ({"softcap": 0.0}, "tlxc.ops.attention_decode: 'softcap' must be a positive finite number"),
        ({"softcap": float("inf")}, "'softcap' must be a positive finite number"),
        ({"window": (4, 0), "schedule": "stream"}, "'window' and 'softcap' take schedule='split'"),
        ({"softcap": 3.0, "schedule": "stream"}, "'window' and 'softcap' take schedule='split'"),
    ]:
        with pytest.raises(ValueError, match=message.replace("(", "\\(").replace(")", "\\)")):
            attention_decode(q, k, k, lens, block_table=table, **kwargs)


@pytest.mark.parametrize("D", [64, 128, 256])
def test_window_and_softcap_compile_for_sm90a(D):
    """The windowed, softcapped split kernel builds for sm_90a without spills or wgmma
    serialization, in the shared memory and registers of the plain one (two programs an SM at
    D <= 128)."""
    q = torch.zeros(8, 32, D, dtype=torch.bfloat16)
    k = torch.zeros(64, 16, 8, D, dtype=torch.bfloat16)
    table = torch.zeros(8, 8192 // 16, dtype=torch.int32)
    lens = torch.zeros(8, dtype=torch.int32)
    plain = M.compile_decode(q, k, k, lens, block_table=table)[0]
    split = M.compile_decode(q, k, k, lens, block_table=table, window=(1000, 0), softcap=30.0)[0]
    assert split.n_spills == 0 and split.perf_warnings == [] and "tanh.approx.f32" in split.asm["cuda"]
    assert split.metadata.shared == plain.metadata.shared and split.n_regs <= max(plain.n_regs, 168)


def test_custom_op_takes_window_and_softcap():
    k, v, table = _paged([150, 20], 16, 2, 64, torch.bfloat16, seed=45)
    q = _randn(2, 4, 64, seed=46)
    seqlens = torch.tensor([150, 20], dtype=torch.int32)
    o, lse = torch.ops.tlxc.attention_decode(q, k, v, seqlens, table, None, 30, 20.0)
    _check(o, lse, *M.reference(q, k, v, seqlens, block_table=table, window=(30, 0), softcap=20.0), torch.bfloat16)
    with torch._subclasses.fake_tensor.FakeTensorMode():
        fq = torch.empty(2, 4, 64, dtype=torch.bfloat16)
        fk = torch.empty(6, 16, 2, 64, dtype=torch.bfloat16)
        with pytest.raises(ValueError, match="'softcap' must be a positive"):
            M._decode_fake(fq, fk, fk, torch.empty(2, dtype=torch.int32), torch.empty(2, 3, dtype=torch.int32),
                           None, -1, -1.0)


def test_argument_errors():
    q = torch.zeros(2, 4, 64, dtype=torch.bfloat16)
    k = torch.zeros(5, 16, 2, 64, dtype=torch.bfloat16)
    table = torch.zeros(2, 3, dtype=torch.int32)
    lens = torch.zeros(2, dtype=torch.int32)
    cases = [
        ((q.float(), k, k, lens), {"block_table": table}, "bfloat16 or float16"),
        ((q, k, k.half(), lens), {"block_table": table}, "'v_cache' must have q's dtype"),
        ((q, k[:, :, :1].expand(5, 16, 3, 64), k[:, :, :1].expand(5, 16, 3, 64), lens), {"block_table": table},
         "must divide q's 4 heads"),
        ((q, k, k, lens.long()), {"block_table": table}, "'cache_seqlens' must be an int32"),
        ((q, k, k, lens), {"block_table": table.long()}, "'block_table' must be an int32"),
        ((q, k, k, lens), {}, "without block_table the cache is \\[B, S_cache"),
        ((q[:, None].expand(2, 2, 4, 64), k, k, lens), {"block_table": table}, "\\[B, 1, H, D\\]"),
        ((q, k, k, lens), {"block_table": table, "sm_scale": -1.0}, "'sm_scale' must be a positive"),
        ((q, k, k, lens), {"block_table": table, "sm_scale": True}, "'sm_scale' must be a positive"),
        ((q, k, k, lens), {"block_table": table, "num_splits": 0}, "'num_splits' must be a positive"),
        ((q, k, k, lens), {"block_table": table, "num_splits": 129}, "takes at most 128 splits"),
        ((q, k, k, lens), {"block_table": table, "combine": "tree"}, "'combine' must be one of kernel, inline"),
        ((q, k[..., :32], k[..., :32], lens), {"block_table": table}, "'k_cache' has head dim 32, 'q' has 64"),
        ((torch.zeros(2, 4, 300, dtype=torch.bfloat16), k, k, lens), {"block_table": table},
         "head dim 300; supported: 1..256"),
        ((q, k, k, lens), {"block_table": table, "_ring": (48, 4)}, "'_ring' must be"),
        ((q, k, k, lens), {"block_table": table, "_heads": True, "schedule": "split"}, "'_heads' is a bool for"),
        ((q, k[:, :, :1], k[:, :, :1], lens), {"block_table": table, "_heads": True, "schedule": "stream"},
         "'_heads' takes H <= 64, 2 <= Hkv"),
        ((q, k, k, lens), {"block_table": table, "schedule": "waves"}, "'schedule' must be one of stream, split"),
        ((q, k, k, lens), {"block_table": table, "schedule": "stream", "num_splits": 2}, "belong to schedule='split'"),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            attention_decode(*args, **kwargs)


def test_custom_op_and_empty_cache():
    """torch.ops.tlxc.attention_decode (fake: shapes only) and a cache of capacity 0."""
    q = _randn(2, 4, 64, seed=41)
    k = torch.zeros(2, 0, 1, 64, dtype=torch.bfloat16)
    o, lse = torch.ops.tlxc.attention_decode(q, k, k, torch.zeros(2, dtype=torch.int32), None, None)
    assert (o == 0).all() and (lse == float("-inf")).all()
    with torch._subclasses.fake_tensor.FakeTensorMode():
        fq = torch.empty(3, 8, 128, dtype=torch.float16)
        fk = torch.empty(10, 16, 2, 128, dtype=torch.float16)
        fo, flse = M._decode_fake(fq, fk, fk, torch.empty(3, dtype=torch.int32), torch.empty(3, 4, dtype=torch.int32))
        assert fo.shape == (3, 8, 128) and flse.shape == (3, 8) and flse.dtype == torch.float32
    assert tlxc.ops.attention_decode is attention_decode


def test_split_kernel_evict_first_copies_are_legal_sass(tmp_path):
    """``_variant`` bit 16 asks the split kernel's cp.async for ``evict_first``: ptxas encoded those
    copies as ``LDGSTS [R+UR6], desc[UR7]`` (the policy's register pair named by its odd half), an
    illegal instruction on the H100.  The lowering drops the policy (a performance warning says so), so
    the SASS has no descriptor named by an odd uniform register, as in every other kernel."""
    import re

    from sass_dump import sass
    q = torch.zeros(1, 32, 128, dtype=torch.bfloat16)
    k = torch.zeros(64, 16, 8, 128, dtype=torch.bfloat16)
    table = torch.zeros(1, 32768 // 16, dtype=torch.int32)
    split, _ = M.compile_decode(q, k, k, torch.zeros(1, dtype=torch.int32), block_table=table, _variant=23)
    assert "L2::cache_hint" not in split.asm["cuda"].split("extern \"C\"")[1]
    assert any("eviction_policy='evict_first'" in w and "attention_decode.py:" in w for w in split.perf_warnings)
    code = sass(split.asm["cubin"], tmp_path)
    assert "LDGSTS" in code and not re.findall(r"desc\[UR\d*[13579]\]", code)
    assert split.n_spills == 0 and 2 * (split.metadata.shared + 1024) <= 232448


@pytest.mark.parametrize("D,page,Hkv", [(64, 16, 8), (128, 16, 8), (128, 64, 32), (256, 32, 2)])
def test_sm90a_compiles_and_check_is_clean(D, page, Hkv, monkeypatch):
    """The H200 launches (both schedules) compile for sm_90a without spills and in shared memory
    two programs per SM share at D <= 128; ``tlxc check`` of the split and stream launches has no
    finding above a note."""
    from tlxc.compiler import check_function
    from tlxc.frontend.specialize import specialization_from_args
    from tlxc.ops.kernels.attention_decode import (
        decode_check_kernel,
        decode_combine_kernel,
        decode_split_kernel,
        decode_stream_combine_kernel,
        decode_stream_kernel,
    )
    q = torch.zeros(8, 32, D, dtype=torch.bfloat16)
    k = torch.zeros(64, page, Hkv, D, dtype=torch.bfloat16)
    table = torch.zeros(8, 8192 // page, dtype=torch.int32)        # 8192 keys: two splits or more
    lens = torch.zeros(8, dtype=torch.int32)
    split, combine = M.compile_decode(q, k, k, lens, block_table=table)
    inline, check = M.compile_decode(q, k, k, lens, block_table=table, combine="inline")    # checks after (PDL)
    assert (split.kfn, combine.kfn, check.kfn, inline.kfn) == (decode_split_kernel, decode_combine_kernel,
                                                               decode_check_kernel, decode_split_kernel)
    handles = [split, combine, check, inline]
    if D <= 128:
        tma, _ = M.compile_decode(q, k, k, lens, block_table=table, _tma=True)
        handles.append(tma)
        assert 2 * (tma.metadata.shared + 1024) <= 232448                    # the TMA ring: two programs per SM too
        stream, merge = M.compile_decode(q, k, k, lens, block_table=table, schedule="stream")
        assert (stream.kfn, merge.kfn) == (decode_stream_kernel, decode_stream_combine_kernel)
        handles += [stream, merge]
        heads, _ = M.compile_decode(q, k, k, lens, block_table=table, schedule="stream", _heads=True)
        handles.append(heads)
        for h in (split, inline, stream, heads):
            assert 2 * (h.metadata.shared + 1024) <= 232448                   # two programs per SM
        assert 2 * stream.n_regs * 128 <= 65536 and 2 * heads.n_regs * 128 <= 65536      # and their registers
    for h in handles:
        assert h.n_spills == 0
        assert h.perf_warnings == []           # no wgmma serialization (a printf call in the kernel causes it)
    launches = []
    monkeypatch.setattr(M, "_launch", lambda kernel, grid, *args, **meta: launches.append((kernel, args, meta)))
    attention_decode(q, k, k, lens, block_table=table, _sms=132)
    attention_decode(q, k, k, lens, block_table=table, schedule="stream", _sms=132) if D <= 128 else None
    assert [kernel for kernel, _, _ in launches] == [decode_split_kernel, decode_combine_kernel] + (
        [decode_stream_kernel, decode_stream_combine_kernel] if D <= 128 else [])
    for kernel, args, meta in launches:
        num_warps = meta.pop("num_warps")
        params = dict(zip(kernel.param_names, args), **meta)
        findings = check_function(kernel, specialization_from_args(kernel, params), num_warps=num_warps)
        assert [f for f in findings if f.severity != "note"] == []


@pytest.mark.parametrize("variant", [1, 3, 4, 7, 23])
def test_split_variants_match_float64(variant, poisoned):
    """``_variant``: session 13's reverted split-kernel changes (1 copy mask in the copy layout, 2
    ``[BLOCK_N, 1]`` page loads, 4 the length mask on the last block only) agree with float64 math
    on the interpreter, on the configuration whose sm_90a build disagreed on the H200 (D = 64, MQA
    8:1, 64-row pages, 3 splits, inline combine); tests/test_gpu_ops_attention_decode.py runs them there.
    23: the default's bits with the copies marked ``evict_first`` (bit 16)."""
    lens = [0, 1, 300, 129]
    k, v, table = _paged(lens, 64, 1, 64, torch.bfloat16, seed=11)
    q = _randn(len(lens), 8, 64, seed=12)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    o, lse = attention_decode(q, k, v, seqlens, block_table=table, num_splits=3, combine="inline", _variant=variant)
    _check(o, lse, *M.reference(q, k, v, seqlens, block_table=table), torch.bfloat16)


TMA_CASES = [  # lens, H, Hkv, D, page, num_splits, combine
    ([0, 1, 37, 200], 4, 2, 64, 16, None, "kernel"),        # 4 pages a block, empty and one-key sequences
    ([130, 5], 8, 1, 128, 64, 3, "inline"),                 # a page a block, MQA, the inline merge
    ([70, 129, 1], 2, 2, 96, 8, 2, "kernel"),               # 8-row pages, padded head dim (zero-filled columns)
    ([300], 2, 1, 64, 128, 5, "kernel"),                    # pages of two blocks (a box at row 64 of a page)
]


@pytest.mark.parametrize("lens,H,Hkv,D,page,splits,combine", TMA_CASES, ids=str)
def test_tma_ring_matches_float64(lens, H, Hkv, D, page, splits, combine, poisoned):
    """``_tma=True``: the split kernel's ring filled by one TMA copy per page box.  The cache rows no
    sequence owns (the spare pages, the rows past a length in its last page) hold NaN: a box past the
    length reads zeros (its page coordinate is outside the descriptor) and the last block's V rows past
    the length are zeroed, so none of them reaches the output (0 x NaN would)."""
    k, v, table = _paged(lens, page, Hkv, D, torch.bfloat16, seed=len(lens) + D + 5)
    owned = torch.zeros(k.shape[:2], dtype=torch.bool)
    for b, n in enumerate(lens):
        for i in range(n):
            owned[table[b, i // page], i % page] = True
    k[~owned], v[~owned] = float("nan"), float("nan")
    q = _randn(len(lens), H, D, seed=8)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    o, lse = attention_decode(q, k, v, seqlens, block_table=table, num_splits=splits, combine=combine, _tma=True)
    _check(o, lse, *M.reference(q, k, v, seqlens, block_table=table), torch.bfloat16)


def test_tma_ring_argument_errors():
    q = torch.zeros(2, 4, 64, dtype=torch.bfloat16)
    lens = torch.tensor([3, 5], dtype=torch.int32)
    k = torch.zeros(4, 12, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="'_tma' takes a paged cache whose page size"):
        attention_decode(q, k, k, lens, block_table=torch.zeros(2, 1, dtype=torch.int32), _tma=True)
    k256 = torch.zeros(4, 16, 2, 256, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="D <= 128"):
        attention_decode(q[..., :1].expand(2, 4, 256).contiguous(), k256, k256, lens,
                         block_table=torch.zeros(2, 1, dtype=torch.int32), _tma=True)
    with pytest.raises(ValueError, match="'_tma' is a bool of the split schedule"):
        attention_decode(q, k, k, lens, block_table=torch.zeros(2, 1, dtype=torch.int32), _tma=True,
                         schedule="stream")
