"""The varlen attention forward's ``sorted`` work table, built on the device in two launches
(``tlxc/ops/attention.py: sorted_varlen_schedule`` is the same table from ~20 torch operations;
the tests check the two agree).

The list: the real items ``(b, h, m)`` (query block ``m`` inside sequence ``b``'s
``lq[b]`` rows), sequences by decreasing key length ``lk`` (ties: batch order), within a
sequence (``n = cdiv(lq[b], BLOCK_M)`` blocks):

* non-causal: head by head, a head's blocks in order (``w = h * n + m``);
* causal: ``GROUP_H`` heads at a time; in a head group of ``G`` heads, pair ``t`` (blocks
  ``n - 1 - t`` and ``t``: one sequence's worth of keys) of every head, long block first, the
  pairs from the outside in (``t = 0, 1, ..``), an odd ``n``'s middle block alone after them.

Position ``pos`` of the list goes to the programs by the snake deal: units of ``PER`` positions
(``PER = 2`` causal: a pair), ``PROGRAMS`` units a round, every other round reversed; program
``p``'s slot ``s`` holds position ``unit * PER + s % PER`` with ``unit = r * PROGRAMS + (p or
PROGRAMS - 1 - p)``, ``r = s // PER``.  Row ``p`` of the table is ``[count, item, ...]`` with
``item = (b * H + h) * NUM_M + m`` and ``count`` its slots below the list's length (slots past
it hold 0, never read).

* ``varlen_rank_kernel``: per sequence its rank in the order and the first list position of
  its items (``start``: the items of every sequence before it), written by rank:
  ``start_sorted[rank] = start``, ``by_rank[rank] = b``; program 0 also writes the list's
  length at ``start_sorted[B]``.  Each program takes ``BLOCK_B`` sequences and compares them
  with all ``B`` in chunks (``O(B^2)`` comparisons in all: a few us at B = 4096).  It checks
  the lengths as ``attention_forward``'s host checks do (non-decreasing offsets inside the
  packed rows, every query length at most ``MAX_Q``): a device assertion, no host sync.
* ``varlen_table_kernel``: program ``p`` fills row ``p``: each slot's position, the rank owning
  it by binary search over ``start_sorted``, the item inside that sequence.
"""
from ... import language as tl
from ...runtime.jit import jit


@jit
def _precedes(lk_other, b_other, lk, b):
    """``[rows, cols]``: sequence ``cols`` comes before sequence ``rows`` in the order."""
    return (lk_other[None, :] > lk[:, None]) | ((lk_other[None, :] == lk[:, None]) & (b_other[None, :] < b[:, None]))


@jit
def varlen_rank_kernel(cu_q_ptr, cu_k_ptr, start_ptr, by_rank_ptr, B, H, TOTAL_Q, TOTAL_K, MAX_Q,
                       BLOCK_M: tl.constexpr, BLOCK_B: tl.constexpr, CHUNK: tl.constexpr):
    pid = tl.program_id(0)
    b = pid * BLOCK_B + tl.arange(0, BLOCK_B)
    mine = b < B
    q0 = tl.load(cu_q_ptr + b, mask=mine, other=0)
    lq = tl.load(cu_q_ptr + b + 1, mask=mine, other=0) - q0
    k0 = tl.load(cu_k_ptr + b, mask=mine, other=0)
    lk = tl.load(cu_k_ptr + b + 1, mask=mine, other=0) - k0
    tl.device_assert((lq >= 0) & (lq <= MAX_Q) & (lk >= 0),
                     "cu_seqlens must be non-decreasing offsets, every query length at most max_seqlen_q")
    rank = tl.zeros((BLOCK_B,), dtype=tl.int32)
    start = tl.zeros((BLOCK_B,), dtype=tl.int32)
    total = tl.zeros((CHUNK,), dtype=tl.int32)
    for c0 in range(0, B, CHUNK):
        bo = c0 + tl.arange(0, CHUNK)
        there = bo < B
        lq_o = tl.load(cu_q_ptr + bo + 1, mask=there, other=0) - tl.load(cu_q_ptr + bo, mask=there, other=0)
        lk_o = tl.load(cu_k_ptr + bo + 1, mask=there, other=0) - tl.load(cu_k_ptr + bo, mask=there, other=0)
        count_o = tl.where(there, H * ((lq_o + (BLOCK_M - 1)) // BLOCK_M), 0)
        before = _precedes(lk_o, bo, lk, b) & there[None, :]
        rank += tl.sum(before.to(tl.int32), 1)
        start += tl.sum(tl.where(before, count_o[None, :], 0), 1)
        total += count_o
    tl.store(start_ptr + rank, start, mask=mine)
    tl.store(by_rank_ptr + rank, b, mask=mine)
    if pid == 0:
        tl.store(start_ptr + B, tl.sum(total, 0))
        first_q = tl.load(cu_q_ptr)
        first_k = tl.load(cu_k_ptr)
        last_q = tl.load(cu_q_ptr + B)
        last_k = tl.load(cu_k_ptr + B)
        tl.device_assert((first_q >= 0) & (first_k >= 0) & (last_q <= TOTAL_Q) & (last_k <= TOTAL_K),
                         "cu_seqlens must be offsets into the packed rows (0 .. total)")


@jit
def varlen_table_kernel(cu_q_ptr, start_ptr, by_rank_ptr, table_ptr, B, H, NUM_M, PROGRAMS, ROUNDS, stride_t,
                        GROUP_H, BLOCK_M: tl.constexpr, SLOTS: tl.constexpr, PER: tl.constexpr,
                        CAUSAL: tl.constexpr, SEARCH_STEPS: tl.constexpr):
    p = tl.program_id(0)
    s = tl.arange(0, SLOTS)
    used = s < ROUNDS * PER
    r = s // PER
    unit = r * PROGRAMS + tl.where(r % 2 == 0, p, PROGRAMS - 1 - p)
    pos = unit * PER + s % PER
    n_real = tl.load(start_ptr + B)
    real = used & (pos < n_real)
    # the rank owning pos: the last with start_sorted[rank] <= pos (ranks of empty sequences share
    # the next one's start, so the last such rank has items)
    lo = tl.zeros((SLOTS,), dtype=tl.int32)
    hi = tl.zeros((SLOTS,), dtype=tl.int32) + B
    for _ in tl.static_range(SEARCH_STEPS):
        open_ = lo < hi
        mid = (lo + hi) // 2
        go = tl.load(start_ptr + mid, mask=open_ & real, other=0) <= pos
        lo = tl.where(open_ & go, mid + 1, lo)
        hi = tl.where(open_ & (go == 0), mid, hi)
    rank = tl.maximum(lo - 1, 0)
    b = tl.load(by_rank_ptr + rank, mask=real, other=0)
    w = pos - tl.load(start_ptr + rank, mask=real, other=0)                # index inside the sequence
    lq = tl.load(cu_q_ptr + b + 1, mask=real, other=0) - tl.load(cu_q_ptr + b, mask=real, other=0)
    n = tl.maximum((lq + (BLOCK_M - 1)) // BLOCK_M, 1)
    if CAUSAL:
        g = w // (GROUP_H * n)                                              # head group
        wg = w - g * (GROUP_H * n)
        size = tl.minimum(GROUP_H, H - g * GROUP_H)                         # heads in this group
        pairs = n // 2
        in_pairs = wg < 2 * size * pairs
        t = wg // tl.maximum(2 * size, 1)
        rem = wg - t * (2 * size)
        head = tl.where(in_pairs, rem // 2, wg - 2 * size * pairs)
        m = tl.where(in_pairs, tl.where(rem % 2 == 0, n - 1 - t, t), pairs)
        h = g * GROUP_H + head
    else:
        h = w // n
        m = w - h * n
    item = tl.where(real, (b * H + h) * NUM_M + m, 0)
    row = table_ptr + p * stride_t
    tl.store(row + 1 + s, item, mask=used)
    tl.store(row, tl.sum(real.to(tl.int32), 0))


@jit
def varlen_check_kernel(cu_q_ptr, cu_k_ptr, B, TOTAL_Q, TOTAL_K, MAX_Q, BLOCK: tl.constexpr):
    """The ``snake`` schedule's check of ``cu_seqlens_q/k`` (the sorted one's rank kernel makes
    the same): offsets from 0 to the packed rows' count, non-decreasing, query lengths at most
    ``MAX_Q``; one launch instead of ~9 torch operations."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    seq = i < B
    lq = tl.load(cu_q_ptr + i + 1, mask=seq, other=0) - tl.load(cu_q_ptr + i, mask=seq, other=0)
    lk = tl.load(cu_k_ptr + i + 1, mask=seq, other=0) - tl.load(cu_k_ptr + i, mask=seq, other=0)
    tl.device_assert((lq >= 0) & (lq <= MAX_Q) & (lk >= 0),
                     "cu_seqlens must be non-decreasing offsets, every query length at most max_seqlen_q")
    if tl.program_id(0) == 0:
        tl.device_assert((tl.load(cu_q_ptr) >= 0) & (tl.load(cu_k_ptr) >= 0) & (tl.load(cu_q_ptr + B) <= TOTAL_Q)
                         & (tl.load(cu_k_ptr + B) <= TOTAL_K), "cu_seqlens must be offsets into the packed rows (0 .. total)")
