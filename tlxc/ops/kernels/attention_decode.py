"""Attention decode on ``tl.dot``: one query token per sequence against a (paged) KV cache.

    o[b, h] = softmax(q[b, h] . k[b, :len_b, h // GROUP]^T * sm_scale) v[b, :len_b, h // GROUP]

Split-KV ("flash-decoding"): program ``(b * H_KV + hk, s)`` takes keys
``s * SPLIT_LEN .. (s + 1) * SPLIT_LEN`` (below ``len_b = cache_seqlens[b]``) of sequence
``b`` and the ``GROUP`` query heads that share kv head ``hk``.  Those heads are the rows of
one ``[BLOCK_G, HEAD_DIM]`` query tile (GQA packed into the MMA's M dimension: the keys
are read once for the whole group; rows past ``GROUP`` are zeros, never stored), so each
key block costs two MMAs ``S = Q K^T``, ``O += P V`` and an online softmax over its
``BLOCK_N`` columns.  Decode is bound by the cache's bytes, not by the MMAs.

* ``decode_split_kernel`` writes each split's normalized partial output (float32
  ``[B, H, n_splits, D]``) and its log-sum-exp in log2 units (``-inf`` for a split with no
  keys); with ``ONE_SPLIT`` (a single split covers every sequence) it writes ``o`` and the
  natural-log ``lse`` directly instead and no combine runs.  With ``FIXUP`` each split then
  counts itself in ``locks[program]`` (an acq_rel atomic, as the split-K GEMM's in-kernel
  sum), and the last one to arrive combines the splits (``_combine_splits``) and resets the
  count: no second launch.
* ``decode_combine_kernel`` (without ``FIXUP``; the default, measured faster on the H200):
  per ``(b, h)``, ``o = sum_s 2^(lse_s - M) o_s / sum_s 2^(lse_s - M)`` over the splits, the
  lse their log-sum-exp (a sequence with no keys: ``o = 0``, ``lse = -inf``); it also checks
  the inputs (``CHECK``), so a call with several splits is two launches.
* ``decode_check_kernel``: the input checks alone, launched first when there is no combine
  launch (one split, or the inline merge).

Paged cache (``PAGED``): ``k``/``v`` are ``[num_pages, PAGE, H_KV, D]`` and key ``n`` of
sequence ``b`` lives in page ``block_table[b, n // PAGE]``, row ``n % PAGE``: each key
block gathers its rows' pages from the block table (any page size; pages in any order).
Without pages the cache is ``[B, S_cache, H_KV, D]``.  Any strides with a unit stride
along D.  Rows of ``k``/``v`` past ``len_b`` are never read (masked loads).
"""
from ... import language as tl
from ...language import tlx
from ...runtime.jit import jit

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@jit
def _pages(b64, offs_n, keep, bt_ptr, stride_bt, PAGE: tl.constexpr):
    """The cache page of each key ``offs_n`` of sequence ``b`` (0 where not ``keep``)."""
    return tl.load(bt_ptr + b64 * stride_bt + offs_n // PAGE, mask=keep, other=0)


@jit
def _rows(b64, hk64, page, offs_n, s_page, s_row, s_h, PAGE: tl.constexpr, PAGED: tl.constexpr):
    """Element offsets of rows ``offs_n`` of sequence ``b`` (kv head ``hk``) in a cache whose
    strides are ``s_page`` (the page, or the batch without pages), ``s_row``, ``s_h``."""
    if PAGED:
        return page.to(tl.int64) * s_page + (offs_n % PAGE).to(tl.int64) * s_row + hk64 * s_h
    return b64 * s_page + offs_n.to(tl.int64) * s_row + hk64 * s_h


@jit
def _issue(k_ptr, v_ptr, k_buf, v_buf, b64, hk64, n0, end, pages, offs_d, d_ok, sk_p, sk_r, sk_h, sv_p, sv_r, sv_h,
           NUM_PAGES, BLOCK_N: tl.constexpr, PAGE: tl.constexpr, PAGED: tl.constexpr, SAME_KV: tl.constexpr):
    """cp.async of the K and V rows ``n0 .. n0 + BLOCK_N`` (those below ``end``; the rest
    zero-filled) into ``k_buf``/``v_buf``, as one commit group; ``pages`` were loaded a
    block earlier.  A row whose page is outside the cache is not read (the combine kernel, or
    ``decode_check_kernel``, stops the stream with a located assertion; no assertion here: its
    ``printf`` call would make ptxas serialize every wgmma of the kernel, C7510).
    ``SAME_KV``: K and V have one set of strides, so the V copies reuse the K offsets (one
    row-offset layout conversion per block instead of two)."""
    offs_n = n0 + tl.arange(0, BLOCK_N)
    keep = offs_n < end
    if PAGED:
        keep = keep & (pages >= 0) & (pages < NUM_PAGES)
    mask = keep[:, None] & d_ok[None, :]
    k_offs = _rows(b64, hk64, pages, offs_n, sk_p, sk_r, sk_h, PAGE, PAGED)[:, None] + offs_d[None, :]
    if SAME_KV:
        v_offs = k_offs
    else:
        v_offs = _rows(b64, hk64, pages, offs_n, sv_p, sv_r, sv_h, PAGE, PAGED)[:, None] + offs_d[None, :]
    tlx.async_load(k_ptr + k_offs, k_buf, mask=mask)
    tlx.async_load(v_ptr + v_offs, v_buf, mask=mask)
    tlx.async_load_commit_group()


@jit
def _pages_of(b64, n0, end, bt_ptr, stride_bt, BLOCK_N: tl.constexpr, PAGE: tl.constexpr,
              PAGED: tl.constexpr):
    """The pages of rows ``n0 .. n0 + BLOCK_N`` below ``end`` (paged; entries past a sequence's
    length may hold anything and are never used), else the batch index."""
    if PAGED:
        offs_n = n0 + tl.arange(0, BLOCK_N)
        return _pages(b64, offs_n, offs_n < end, bt_ptr, stride_bt, PAGE)
    return b64


@jit
def decode_split_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, o_ptr, lse_ptr, fo_ptr, flse_ptr, locks_ptr, H_KV,
                        SPLIT_LEN, CAPACITY, NUM_PAGES, qk_scale, sq_b, sq_h, sk_p, sk_r, sk_h, sv_p, sv_r, sv_h,
                        stride_bt, so_b, so_h, so_s, sl_b, sl_h, sfo_b, sfo_h, sfl_b, sfl_h,
                        D: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_G: tl.constexpr, GROUP: tl.constexpr,
                        BLOCK_N: tl.constexpr, STAGES: tl.constexpr, PAGE: tl.constexpr, PAGED: tl.constexpr,
                        ONE_SPLIT: tl.constexpr, FIXUP: tl.constexpr, SAME_KV: tl.constexpr, DTYPE: tl.constexpr,
                        BLOCK_S: tl.constexpr = 2):
    G_CHUNKS: tl.constexpr = (GROUP + BLOCK_G - 1) // BLOCK_G     # query-head tiles per kv head
    pid = tl.program_id(0)                      # (sequence, kv head, head tile): up to 2^31 - 1 of them
    split = tl.program_id(1)
    pid_bh = pid // G_CHUNKS
    g0 = (pid - pid_bh * G_CHUNKS) * BLOCK_G
    b = pid_bh // H_KV
    hk = pid_bh - b * H_KV
    b64 = b.to(tl.int64)
    hk64 = hk.to(tl.int64)
    seq_len = tl.minimum(tl.maximum(tl.load(lens_ptr + b), 0), CAPACITY)     # checked by the combine or check kernel
    start = split * SPLIT_LEN
    table_end = tl.minimum(CAPACITY, start + SPLIT_LEN)     # block-table entries read: not waiting for seq_len
    end = tl.minimum(seq_len, start + SPLIT_LEN)
    n_blocks = tl.maximum(tl.cdiv(end - start, BLOCK_N), 0)

    k_smem = tlx.local_alloc((BLOCK_N, HEAD_DIM), DTYPE, STAGES)
    v_smem = tlx.local_alloc((BLOCK_N, HEAD_DIM), DTYPE, STAGES)
    offs_g = g0 + tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, HEAD_DIM)
    g_ok = offs_g < GROUP
    d_ok = offs_d < D
    heads = (hk * GROUP + offs_g).to(tl.int64)

    # the ring: blocks 0 .. STAGES - 2 in flight before the loop, block j + STAGES - 1 issued at
    # the top of iteration j (into the slot block j - 1 used), the pages one block further ahead.
    # The prologue's loads (q, the first blocks' pages) go out together: they need no length, so
    # the fill waits for one memory latency before its first copies, not one per block
    q = tl.load(q_ptr + b64 * sq_b + heads[:, None] * sq_h + offs_d[None, :], mask=g_ok[:, None] & d_ok[None, :],
                other=0.0)
    pages = _pages_of(b64, start, table_end, bt_ptr, stride_bt, BLOCK_N, PAGE, PAGED)
    for i in tl.static_range(STAGES - 1):
        n0 = start + i * BLOCK_N
        later = _pages_of(b64, n0 + BLOCK_N, table_end, bt_ptr, stride_bt, BLOCK_N, PAGE, PAGED)
        _issue(k_ptr, v_ptr, k_smem[i], v_smem[i], b64, hk64, n0, end, pages, offs_d, d_ok, sk_p, sk_r,
               sk_h, sv_p, sv_r, sv_h, NUM_PAGES, BLOCK_N, PAGE, PAGED, SAME_KV)
        pages = later
    zeros = tl.zeros((BLOCK_G, BLOCK_N), dtype=tl.float32)
    m_i = tl.full((BLOCK_G,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_G,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_G, HEAD_DIM), dtype=tl.float32)
    for j in range(n_blocks):
        ahead = start + (j + STAGES - 1) * BLOCK_N
        _issue(k_ptr, v_ptr, k_smem[(j + STAGES - 1) % STAGES], v_smem[(j + STAGES - 1) % STAGES], b64,
                            hk64, ahead, end, pages, offs_d, d_ok, sk_p, sk_r, sk_h, sv_p, sv_r, sv_h, NUM_PAGES, BLOCK_N,
                            PAGE, PAGED, SAME_KV)
        pages = _pages_of(b64, ahead + BLOCK_N, table_end, bt_ptr, stride_bt, BLOCK_N, PAGE, PAGED)
        tlx.async_load_wait_group(STAGES - 1)                        # block j has landed
        slot = j % STAGES
        s = tlx.async_dot(q, tlx.local_trans(k_smem[slot]), zeros, use_acc=False)    # Q from registers
        s = tlx.async_dot_wait(0, s)
        offs_n = start + j * BLOCK_N + tl.arange(0, BLOCK_N)
        s = tl.where((offs_n < end)[None, :], s * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_new
        acc = tlx.async_dot(p.to(DTYPE), v_smem[slot], acc * alpha[:, None])
        acc = tlx.async_dot_wait(0, acc)
    tlx.async_load_wait_group(0)

    has_keys = l_i > 0.0
    out = acc / tl.where(has_keys, l_i, 1.0)[:, None]                 # no keys: acc = 0 -> o = 0
    lse2 = tl.where(has_keys, m_i + tl.math.log2(tl.where(has_keys, l_i, 1.0)), float("-inf"))
    o_at = o_ptr + b64 * so_b + heads[:, None] * so_h + split.to(tl.int64) * so_s + offs_d[None, :]
    lse_at = lse_ptr + b64 * sl_b + heads * sl_h + split
    if ONE_SPLIT:
        tl.store(o_at, out.to(DTYPE), mask=g_ok[:, None] & d_ok[None, :])
        tl.store(lse_at, lse2 * LN2, mask=g_ok)
    else:
        tl.store(o_at, out, mask=g_ok[:, None] & d_ok[None, :])
        tl.store(lse_at, lse2, mask=g_ok)
        if FIXUP:       # the last split of this (sequence, kv head, head tile) to arrive combines them
            arrived = tl.atomic_add(locks_ptr + pid, 1, sem="acq_rel")   # the partials are visible before the count
            if arrived == tl.num_programs(1) - 1:
                tl.store(locks_ptr + pid, 0)                            # zero again for the next launch
                _combine_splits(o_ptr, lse_ptr, fo_ptr, flse_ptr, b64, (hk * GROUP + g0).to(tl.int64),
                                tl.minimum(BLOCK_G, GROUP - g0), offs_d, d_ok, tl.num_programs(1), so_b, so_h, so_s,
                                sl_b, sl_h, sfo_b, sfo_h, sfl_b, sfl_h, HEAD_DIM, BLOCK_S)


@jit
def _combine_splits(o_ptr, lse_ptr, fo_ptr, flse_ptr, b64, h0, n_heads, offs_d, d_ok, n_splits,
                    so_b, so_h, so_s, sl_b, sl_h, sfo_b, sfo_h, sfl_b, sfl_h, HEAD_DIM: tl.constexpr,
                    BLOCK_S: tl.constexpr):
    """For each of the ``n_heads`` heads from ``h0`` of sequence ``b``: ``o = sum_s 2^(lse_s -
    M) o_s / sum_s 2^(lse_s - M)`` over the ``n_splits`` partials, loaded as one ``[BLOCK_S,
    HEAD_DIM]`` tile per head (one memory latency a head, not one a split), and the
    natural-log lse; a head whose splits all had no keys gets ``o = 0``, ``lse = -inf``.  The
    partials are read past L1 (``.cg``: other programs wrote them)."""
    offs_s = tl.arange(0, BLOCK_S)
    s_ok = offs_s < n_splits
    for i in range(n_heads):
        h = h0 + i
        lse_s = tl.load(lse_ptr + b64 * sl_b + h * sl_h + offs_s, mask=s_ok, other=float("-inf"),
                        cache_modifier=".cg")
        parts = tl.load(o_ptr + b64 * so_b + h * so_h + offs_s[:, None] * so_s + offs_d[None, :],
                        mask=(s_ok & (lse_s > float("-inf")))[:, None] & d_ok[None, :], other=0.0,
                        cache_modifier=".cg")
        top = tl.max(lse_s, 0)
        some = top > float("-inf")
        w = tl.where(lse_s > float("-inf"), tl.math.exp2(lse_s - tl.where(some, top, 0.0)), 0.0)
        total = tl.sum(w, 0)
        o = tl.sum(parts * w[:, None], 0) / tl.where(some, total, 1.0)
        tl.store(fo_ptr + b64 * sfo_b + h * sfo_h + offs_d, o.to(fo_ptr.dtype.element_ty), mask=d_ok)
        tl.store(flse_ptr + b64 * sfl_b + h * sfl_h,
                 tl.where(some, (top + tl.math.log2(tl.where(some, total, 1.0))) * LN2, float("-inf")))


@jit
def decode_combine_kernel(op_ptr, lp_ptr, o_ptr, lse_ptr, lens_ptr, bt_ptr, H, n_splits, CAPACITY, NUM_PAGES, stride_bt,
                          sp_b, sp_h, sp_s, slp_b, slp_h, so_b, so_h, sl_b, sl_h,
                          D: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr, CHECK: tl.constexpr,
                          PAGE: tl.constexpr, PAGED: tl.constexpr):
    """The merge of the splits (module docstring); with ``CHECK`` the first head's program of
    each sequence also makes ``decode_check_kernel``'s checks (after the split kernel, which
    clamps lengths and reads no row of a page outside the cache: one launch fewer)."""
    pid = tl.program_id(0)
    b = (pid // H).to(tl.int64)
    h = (pid % H).to(tl.int64)
    if CHECK:
        if h == 0:
            _check_sequence(lens_ptr, bt_ptr, b, CAPACITY, NUM_PAGES, stride_bt, PAGE, PAGED, 1024)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, HEAD_DIM)
    s_ok = offs_s < n_splits
    d_ok = offs_d < D
    lse_s = tl.load(lp_ptr + b * slp_b + h * slp_h + offs_s, mask=s_ok, other=float("-inf"))
    top = tl.max(lse_s, 0)
    top_ok = top > float("-inf")
    w = tl.where(s_ok & (lse_s > float("-inf")), tl.math.exp2(lse_s - tl.where(top_ok, top, 0.0)), 0.0)
    total = tl.sum(w, 0)
    parts = tl.load(op_ptr + b * sp_b + h * sp_h + offs_s[:, None] * sp_s + offs_d[None, :],
                    mask=(w > 0.0)[:, None] & d_ok[None, :], other=0.0)
    o = tl.sum(parts * w[:, None], 0) / tl.where(top_ok, total, 1.0)
    tl.store(o_ptr + b * so_b + h * so_h + offs_d, o.to(o_ptr.dtype.element_ty), mask=d_ok)
    tl.store(lse_ptr + b * sl_b + h * sl_h, tl.where(top_ok, (top + tl.math.log2(tl.where(top_ok, total, 1.0))) * LN2,
                                                     float("-inf")))


@jit
def decode_check_kernel(lens_ptr, bt_ptr, B, CAPACITY, NUM_PAGES, stride_bt, PAGE: tl.constexpr,
                        PAGED: tl.constexpr, BLOCK: tl.constexpr):
    """The checks of ``attention_decode``'s inputs that read their values, as located device
    assertions (one small launch before the split kernel, which carries none: a ``printf``
    call in it makes ptxas serialize its wgmmas): sequence ``b = program_id(0)`` has a length
    in ``0 .. CAPACITY`` and, paged, the block-table entries of its pages are in ``0 ..
    NUM_PAGES - 1``."""
    _check_sequence(lens_ptr, bt_ptr, tl.program_id(0).to(tl.int64), CAPACITY, NUM_PAGES, stride_bt, PAGE, PAGED,
                    BLOCK)


@jit
def _check_sequence(lens_ptr, bt_ptr, b, CAPACITY, NUM_PAGES, stride_bt, PAGE: tl.constexpr, PAGED: tl.constexpr,
                    BLOCK: tl.constexpr):
    """Sequence ``b``'s length in ``0 .. CAPACITY`` and (paged) its pages' block-table entries
    in ``0 .. NUM_PAGES - 1``, as located device assertions."""
    seq_len = tl.load(lens_ptr + b)
    tl.device_assert((seq_len >= 0) & (seq_len <= CAPACITY), "cache_seqlens[b] is outside 0 .. the cache's capacity")
    if PAGED:
        used = (tl.minimum(tl.maximum(seq_len, 0), CAPACITY) + (PAGE - 1)) // PAGE
        for p0 in range(0, used, BLOCK):
            offs = p0 + tl.arange(0, BLOCK)
            page = tl.load(bt_ptr + b * stride_bt + offs, mask=offs < used, other=0)
            tl.device_assert((page >= 0) & (page < NUM_PAGES), "a block_table entry in use is outside 0 .. num_pages - 1")
