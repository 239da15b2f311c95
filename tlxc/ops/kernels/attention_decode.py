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
* ``decode_check_kernel``: the input checks alone, when there is no combine launch (one split,
  or the inline merge); launched after the split kernel as a dependent launch (PDL), as the
  combine kernel is, so that the checks run while the split kernel's last programs do.

Sliding windows (``WIN_LEFT >= 0``, split kernel): the query is its sequence's last token, so a
split starts at the 64-key block of key ``len - 1 - WIN_LEFT`` (no block before it is read) and
that block's keys left of it are masked (``_capped_window``); ``SOFTCAP > 0``: the scores are
``tanh(s * cap_in)`` in ``SOFTCAP * log2 e`` units (``cap_in = sm_scale / SOFTCAP``), capped
before any mask.

Paged cache (``PAGED``): ``k``/``v`` are ``[num_pages, PAGE, H_KV, D]`` and key ``n`` of
sequence ``b`` lives in page ``block_table[b, n // PAGE]``, row ``n % PAGE``: each key
block gathers its rows' pages from the block table (any page size; pages in any order).
Without pages the cache is ``[B, S_cache, H_KV, D]``.  Any strides with a unit stride
along D.  Rows of ``k``/``v`` past ``len_b`` are never read (masked loads).
"""
from ... import language as tl
from ...language import tlx
from ...runtime.jit import jit
from .aligns import aligned
from .attention_fwd import capped_scores

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
    _copy_rows(k_ptr, v_ptr, k_buf, v_buf, b64, hk64, n0 + tl.arange(0, BLOCK_N), end, pages, offs_d, d_ok,
               sk_p, sk_r, sk_h, sv_p, sv_r, sv_h, NUM_PAGES, PAGE, PAGED, SAME_KV)


@jit
def _copy_rows(k_ptr, v_ptr, k_buf, v_buf, b64, heads, keys, end, pages, offs_d, d_ok, sk_p, sk_r, sk_h, sv_p, sv_r,
               sv_h, NUM_PAGES, PAGE: tl.constexpr, PAGED: tl.constexpr, SAME_KV: tl.constexpr):
    """The cp.async of ``_issue`` for rows ``keys`` of kv heads ``heads`` (a scalar or one per row)."""
    keep = keys < end
    if PAGED:
        keep = keep & (pages >= 0) & (pages < NUM_PAGES)
    mask = keep[:, None] & d_ok[None, :]
    k_offs = _rows(b64, heads, pages, keys, sk_p, sk_r, sk_h, PAGE, PAGED)[:, None] + offs_d[None, :]
    if SAME_KV:
        v_offs = k_offs
    else:
        v_offs = _rows(b64, heads, pages, keys, sv_p, sv_r, sv_h, PAGE, PAGED)[:, None] + offs_d[None, :]
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
def _issue_v(k_ptr, v_ptr, k_buf, v_buf, b64, hk64, n0, end, pages, offs_d, d_ok, sk_p, sk_r, sk_h, sv_p, sv_r, sv_h,
             NUM_PAGES, BLOCK_N: tl.constexpr, PAGE: tl.constexpr, PAGED: tl.constexpr, SAME_KV: tl.constexpr,
             VARIANT: tl.constexpr):
    """``_issue`` as session 13's reverted copies built it (``VARIANT`` bit 1: the mask from the
    rows' indices in the copy layout, pages outside the cache read as page 0; bit 2: the pages
    ``[BLOCK_N, 1]`` and the row offsets built in that shape; V's offsets from V's strides unless
    ``SAME_KV``)."""
    if VARIANT & 2:
        offs_n = (n0 + tl.arange(0, BLOCK_N))[:, None]
    else:
        offs_n = n0 + tl.arange(0, BLOCK_N)
    if PAGED:
        pages = tl.where((pages >= 0) & (pages < NUM_PAGES), pages, 0)
    if VARIANT & 2:
        mask = (offs_n < end) & d_ok[None, :]
    else:
        mask = ((n0 + tl.arange(0, BLOCK_N))[:, None] < end) & d_ok[None, :]
    k_offs = _row_offsets(b64, hk64, pages, offs_n, offs_d, sk_p, sk_r, sk_h, PAGE, PAGED, VARIANT)
    if SAME_KV:
        v_offs = k_offs
    else:
        v_offs = _row_offsets(b64, hk64, pages, offs_n, offs_d, sv_p, sv_r, sv_h, PAGE, PAGED, VARIANT)
    if VARIANT & 16:    # the copies asking for evict_first in L2: the kernel in which ptxas encoded the hinted
                        # cp.async illegally (H100, session 38); the lowering now drops the policy with a warning
        tlx.async_load(k_ptr + k_offs, k_buf, mask=mask, eviction_policy="evict_first")
        tlx.async_load(v_ptr + v_offs, v_buf, mask=mask, eviction_policy="evict_first")
    else:
        tlx.async_load(k_ptr + k_offs, k_buf, mask=mask)
        tlx.async_load(v_ptr + v_offs, v_buf, mask=mask)
    tlx.async_load_commit_group()


@jit
def _row_offsets(b64, heads, pages, offs_n, offs_d, s_p, s_r, s_h, PAGE: tl.constexpr, PAGED: tl.constexpr,
                 VARIANT: tl.constexpr):
    """``_issue_v``'s [BLOCK_N, D] element offsets of one cache (its strides ``s_*``); ``offs_n``
    is already ``[BLOCK_N, 1]`` with ``VARIANT`` bit 2."""
    rows = _rows(b64, heads, pages, offs_n, s_p, s_r, s_h, PAGE, PAGED)
    if VARIANT & 2:
        return rows + offs_d[None, :]
    return rows[:, None] + offs_d[None, :]


@jit
def _pages_of_v(b64, n0, end, bt_ptr, stride_bt, BLOCK_N: tl.constexpr, PAGE: tl.constexpr, PAGED: tl.constexpr,
                VARIANT: tl.constexpr):
    """``_pages_of``, ``[BLOCK_N, 1]`` with ``VARIANT`` bit 2."""
    if PAGED:
        if VARIANT & 2:
            offs_n = (n0 + tl.arange(0, BLOCK_N))[:, None]
            return _pages(b64, offs_n, offs_n < end, bt_ptr, stride_bt, PAGE)
    return _pages_of(b64, n0, end, bt_ptr, stride_bt, BLOCK_N, PAGE, PAGED)


@jit
def _tma_pages(b64, n0, end, bt_ptr, stride_bt, NUM_PAGES, NB: tl.constexpr, PB: tl.constexpr, PAGE: tl.constexpr):
    """The page of each of the ``NB`` boxes of ``PB`` rows of the block from key ``n0``; a box with no key
    below ``end`` (or a table entry outside the cache) gets ``NUM_PAGES``: outside the descriptor, so the
    TMA fills it with zeros (no read)."""
    keys = n0 + tl.arange(0, NB) * PB
    pg = tl.load(bt_ptr + b64 * stride_bt + keys // PAGE, mask=keys < end, other=NUM_PAGES)
    return tl.where((pg >= 0) & (pg < NUM_PAGES), pg, NUM_PAGES)


@jit
def _issue_tma(k_desc, v_desc, k_buf, v_buf, bar, pages, hk, n0, pred, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
               NB: tl.constexpr, PB: tl.constexpr, PAGE: tl.constexpr):
    """TMA of the K and V rows ``n0 .. n0 + BLOCK_N`` of kv head ``hk``: ``NB`` boxes of ``PB`` rows (a page
    or a block's share of one) x 64 columns each, completing on ``bar`` (only where ``pred``)."""
    tlx.barrier_expect_bytes(bar, 2 * BLOCK_N * HEAD_DIM * 2, pred=pred)
    for p in tl.static_range(NB):
        pg = tl.sum(tl.where(tl.arange(0, NB) == p, pages, 0), 0)
        row = (n0 + p * PB) % PAGE
        for d in tl.static_range(HEAD_DIM // 64):
            tlx.async_descriptor_load(k_desc, tlx.local_slice(k_buf, [p * PB, d * 64], [PB, 64]), [pg, hk, row, d * 64],
                                      bar, pred=pred)
            tlx.async_descriptor_load(v_desc, tlx.local_slice(v_buf, [p * PB, d * 64], [PB, 64]), [pg, hk, row, d * 64],
                                      bar, pred=pred)


@jit
def _capped_window(s, cap_in, n0, first, BLOCK_N: tl.constexpr, WIN_LEFT: tl.constexpr, SOFTCAP: tl.constexpr):
    """A block's scores (keys ``n0 ..``) softcapped (``SOFTCAP > 0``: ``tanh(s * cap_in)``, in
    ``SOFTCAP * log2 e`` units; before any mask, so masked keys stay ``-inf``) and, under a
    window, ``-inf`` left of the first key the query sees (``first``: only the window's first
    block has such keys).  Nothing without either."""
    s = capped_scores(s, cap_in, SOFTCAP)
    if WIN_LEFT >= 0:
        if n0 < first:
            s = tl.where((n0 + tl.arange(0, BLOCK_N) >= first)[None, :], s, float("-inf"))
    return s


@jit
def decode_split_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, o_ptr, lse_ptr, fo_ptr, flse_ptr, locks_ptr, H_KV,
                        SPLIT_LEN, CAPACITY, NUM_PAGES, qk_scale, sq_b, sq_h, sk_p, sk_r, sk_h, sv_p, sv_r, sv_h,
                        stride_bt, so_b, so_h, so_s, sl_b, sl_h, sfo_b, sfo_h, sfl_b, sfl_h,
                        D: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_G: tl.constexpr, GROUP: tl.constexpr,
                        BLOCK_N: tl.constexpr, STAGES: tl.constexpr, PAGE: tl.constexpr, PAGED: tl.constexpr,
                        ONE_SPLIT: tl.constexpr, FIXUP: tl.constexpr, SAME_KV: tl.constexpr, DTYPE: tl.constexpr,
                        BLOCK_S: tl.constexpr = 2, VARIANT: tl.constexpr = 0, TMA: tl.constexpr = False,
                        k_desc=None, v_desc=None, PDL: tl.constexpr = False, cap_in=None,
                        WIN_LEFT: tl.constexpr = -1, SOFTCAP: tl.constexpr = 0.0, ALIGN: tl.constexpr = 1):
    G_CHUNKS: tl.constexpr = (GROUP + BLOCK_G - 1) // BLOCK_G     # query-head tiles per kv head
    sq_b, sq_h = aligned(sq_b, ALIGN), aligned(sq_h, ALIGN)       # the host's facts (attention.ints_align):
    sk_p, sk_r, sk_h = aligned(sk_p, ALIGN), aligned(sk_r, ALIGN), aligned(sk_h, ALIGN)   # 16-byte cp.async
    sv_p, sv_r, sv_h = aligned(sv_p, ALIGN), aligned(sv_r, ALIGN), aligned(sv_h, ALIGN)   # at D = 40, 72, ..
    so_b, so_h, so_s = aligned(so_b, ALIGN), aligned(so_h, ALIGN), aligned(so_s, ALIGN)
    if PDL:     # the combine or check kernel (launch_pdl=True) may be scheduled once every program has
        tl.extra.cuda.gdc_launch_dependents()   # started: its checks run in the last programs' shadow
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
    first = 0                   # the first key the query sees (a window: the last token's left reach)
    if WIN_LEFT >= 0:           # the split's blocks from the window's (whole blocks: the page boxes stay aligned)
        first = tl.maximum(seq_len - 1 - WIN_LEFT, 0)
        start = tl.maximum(start, first // BLOCK_N * BLOCK_N)
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
    NB: tl.constexpr = BLOCK_N // PAGE if PAGE < BLOCK_N else 1       # TMA boxes (pages) per block
    PB: tl.constexpr = BLOCK_N // NB                                    # rows per box
    if TMA:     # (paged, PAGE and BLOCK_N multiples of one another): a TMA per page box, no per-row addresses
        full = tlx.alloc_barriers(STAGES, arrive_count=1)
        for i in tl.static_range(STAGES):
            pg_i = _tma_pages(b64, start + i * BLOCK_N, end, bt_ptr, stride_bt, NUM_PAGES, NB, PB, PAGE)
            _issue_tma(k_desc, v_desc, k_smem[i], v_smem[i], full[i], pg_i, hk, start + i * BLOCK_N, i < n_blocks,
                       BLOCK_N, HEAD_DIM, NB, PB, PAGE)
        pages = _tma_pages(b64, start + STAGES * BLOCK_N, end, bt_ptr, stride_bt, NUM_PAGES, NB, PB, PAGE)
    else:
        pages = _pages_of_v(b64, start, table_end, bt_ptr, stride_bt, BLOCK_N, PAGE, PAGED, VARIANT)
    for i in tl.static_range(0 if TMA else STAGES - 1):
        n0 = start + i * BLOCK_N
        later = _pages_of_v(b64, n0 + BLOCK_N, table_end, bt_ptr, stride_bt, BLOCK_N, PAGE, PAGED, VARIANT)
        if VARIANT & 3:
            _issue_v(k_ptr, v_ptr, k_smem[i], v_smem[i], b64, hk64, n0, end, pages, offs_d, d_ok, sk_p, sk_r,
                     sk_h, sv_p, sv_r, sv_h, NUM_PAGES, BLOCK_N, PAGE, PAGED, SAME_KV, VARIANT)
        else:
            _issue(k_ptr, v_ptr, k_smem[i], v_smem[i], b64, hk64, n0, end, pages, offs_d, d_ok, sk_p, sk_r,
                   sk_h, sv_p, sv_r, sv_h, NUM_PAGES, BLOCK_N, PAGE, PAGED, SAME_KV)
        pages = later
    zeros = tl.zeros((BLOCK_G, BLOCK_N), dtype=tl.float32)
    m_i = tl.full((BLOCK_G,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_G,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_G, HEAD_DIM), dtype=tl.float32)
    for j in range(n_blocks):
        ahead = start + (j + STAGES - 1) * BLOCK_N
        slot = j % STAGES
        if TMA:
            tlx.barrier_wait(full[slot], (j // STAGES) & 1)          # block j has landed
        elif VARIANT & 3:
            _issue_v(k_ptr, v_ptr, k_smem[(j + STAGES - 1) % STAGES], v_smem[(j + STAGES - 1) % STAGES], b64,
                     hk64, ahead, end, pages, offs_d, d_ok, sk_p, sk_r, sk_h, sv_p, sv_r, sv_h, NUM_PAGES, BLOCK_N,
                     PAGE, PAGED, SAME_KV, VARIANT)
        else:
            _issue(k_ptr, v_ptr, k_smem[(j + STAGES - 1) % STAGES], v_smem[(j + STAGES - 1) % STAGES], b64,
                   hk64, ahead, end, pages, offs_d, d_ok, sk_p, sk_r, sk_h, sv_p, sv_r, sv_h, NUM_PAGES, BLOCK_N,
                   PAGE, PAGED, SAME_KV)
        if TMA:
            later = _tma_pages(b64, start + (j + STAGES + 1) * BLOCK_N, end, bt_ptr, stride_bt, NUM_PAGES, NB, PB,
                               PAGE)
            if start + j * BLOCK_N + BLOCK_N > end:     # the last block: rows past the length read as zeros
                v_last = tlx.local_load(v_smem[slot])   # (a page's rows past it may hold anything, NaN too)
                keep_v = (start + j * BLOCK_N + tl.arange(0, BLOCK_N) < end)[:, None]
                tlx.local_store(v_smem[slot], tl.where(keep_v, v_last, 0.0).to(DTYPE))
                tlx.fence("async_shared")
                tl.debug_barrier()
        else:
            pages = _pages_of_v(b64, ahead + BLOCK_N, table_end, bt_ptr, stride_bt, BLOCK_N, PAGE, PAGED, VARIANT)
            tlx.async_load_wait_group(STAGES - 1)                        # block j has landed
        if VARIANT & 8:     # diagnostic (bench only, output meaningless): the ring alone, no products, no softmax
            pass
        else:
            s = tlx.async_dot(q, tlx.local_trans(k_smem[slot]), zeros, use_acc=False)    # Q from registers
            s = tlx.async_dot_wait(0, s)
            s = _capped_window(s, cap_in, start + j * BLOCK_N, first, BLOCK_N, WIN_LEFT, SOFTCAP)
            if VARIANT & 4:     # session 13's reverted softmax: the length mask on the last block only
                if start + j * BLOCK_N + BLOCK_N > end:
                    offs_n = start + j * BLOCK_N + tl.arange(0, BLOCK_N)
                    s = tl.where((offs_n < end)[None, :], s, float("-inf"))
                m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
                alpha = tl.math.exp2(m_i - m_new)
                p = tl.math.exp2(s * qk_scale - m_new[:, None])
            else:
                offs_n = start + j * BLOCK_N + tl.arange(0, BLOCK_N)
                s = tl.where((offs_n < end)[None, :], s * qk_scale, float("-inf"))
                m_new = tl.maximum(m_i, tl.max(s, 1))
                alpha = tl.math.exp2(m_i - m_new)
                p = tl.math.exp2(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            m_i = m_new
            acc = tlx.async_dot(p.to(DTYPE), v_smem[slot], acc * alpha[:, None])
            acc = tlx.async_dot_wait(0, acc)
        if TMA:     # every warp is past block j's products: its slot takes block j + STAGES
            tl.debug_barrier()
            _issue_tma(k_desc, v_desc, k_smem[slot], v_smem[slot], full[slot], pages, hk,
                       start + (j + STAGES) * BLOCK_N, j + STAGES < n_blocks, BLOCK_N, HEAD_DIM, NB, PB, PAGE)
            pages = later
    if not TMA:
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
    """The merge of the splits (module docstring); with ``CHECK`` the H programs of each
    sequence also make ``decode_check_kernel``'s checks, each a share (the split kernel clamps
    lengths and reads no row of a page outside the cache: one launch fewer).  Launched with
    ``launch_pdl=True`` after the split kernel: the checks (they read only the inputs) run before
    ``gdc_wait``, while the split kernel's last programs finish; the partials are read after it."""
    pid = tl.program_id(0)
    b = (pid // H).to(tl.int64)
    h = (pid % H).to(tl.int64)
    if CHECK:
        seq_len, offs_t, entries = _share_loads(lens_ptr, bt_ptr, b, h, CAPACITY, stride_bt, PAGE, PAGED, 256)
        _check_share(seq_len, offs_t, entries, bt_ptr, b, h, H, CAPACITY, NUM_PAGES, stride_bt, PAGE, PAGED, 256)
    tl.extra.cuda.gdc_wait()    # the split kernel's partials from here on
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
    assertions (a small launch of its own where no combine launch makes them; the split kernel
    carries none: a ``printf`` call in it makes ptxas serialize its wgmmas): sequence ``b =
    program_id(0)`` has a length in ``0 .. CAPACITY`` and, paged, the block-table entries of
    its pages are in ``0 .. NUM_PAGES - 1``.  Launched with ``launch_pdl=True`` after the split
    kernel (which clamps lengths and reads no page outside the cache), so the checks run while
    its last programs do; the ``gdc_wait`` at the end keeps this launch from completing before
    the split kernel has."""
    _check_sequence(lens_ptr, bt_ptr, tl.program_id(0).to(tl.int64), CAPACITY, NUM_PAGES, stride_bt, PAGE, PAGED,
                    BLOCK)
    tl.extra.cuda.gdc_wait()


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


@jit
def _share_loads(lens_ptr, bt_ptr, b, share, CAPACITY, stride_bt, PAGE: tl.constexpr, PAGED: tl.constexpr,
                 BLOCK: tl.constexpr):
    """The loads of ``_check_share``'s first chunk: sequence ``b``'s length and (paged) entries
    ``share * BLOCK ..`` of its block-table row, issued together (the row is read without waiting
    for the length: entries past it are read, never checked).  Returns (length, the chunk's entry
    indices, its entries)."""
    seq_len = tl.load(lens_ptr + b)
    offs = share * BLOCK + tl.arange(0, BLOCK)
    page = offs
    if PAGED:
        page = tl.load(bt_ptr + b * stride_bt + offs, mask=offs < CAPACITY // PAGE, other=0)
    return seq_len, offs, page


@jit
def _check_share(seq_len, offs, page, bt_ptr, b, share, shares, CAPACITY, NUM_PAGES, stride_bt,
                 PAGE: tl.constexpr, PAGED: tl.constexpr, BLOCK: tl.constexpr):
    """Share ``share`` of ``shares`` of ``_check_sequence``'s checks of sequence ``b``, its first
    chunk loaded by ``_share_loads``: the length (share 0) and the block-table entries in use in
    chunks of ``BLOCK``, every ``shares``-th chunk from the ``share``-th.  (One program walking
    the whole row after loading the length was 4-5 % of a B = 1, 32768-key call on the H200:
    docs/performance.md.)"""
    if share == 0:
        tl.device_assert((seq_len >= 0) & (seq_len <= CAPACITY), "cache_seqlens[b] is outside 0 .. the cache's capacity")
    if PAGED:
        width = CAPACITY // PAGE                                   # the block table's row (capacity = width x page)
        used = (tl.minimum(tl.maximum(seq_len, 0), CAPACITY) + (PAGE - 1)) // PAGE
        tl.device_assert((offs >= used) | ((page >= 0) & (page < NUM_PAGES)),
                         "a block_table entry in use is outside 0 .. num_pages - 1")
        for p0 in range((share + shares) * BLOCK, width, shares * BLOCK):
            more = p0 + tl.arange(0, BLOCK)
            entry = tl.load(bt_ptr + b * stride_bt + more, mask=more < width, other=0)
            tl.device_assert((more >= used) | ((entry >= 0) & (entry < NUM_PAGES)),
                             "a block_table entry in use is outside 0 .. num_pages - 1")


# -- the persistent (stream-K) schedule -----------------------------------------------------------
#
# ``decode_stream_kernel``: a grid of ``P`` programs (two per SM at D <= 128) that share the work
# evenly by key blocks, not by (sequence, kv head, split) items.  The work is the list of every
# row's key blocks, row ``r = b * HG + k`` (``HG = H_KV * G_CHUNKS`` rows of sequence ``b``: kv head
# ``k // G_CHUNKS``, head tile ``k % G_CHUNKS``) holding ``nb_b = cdiv(len_b, BLOCK_N)`` blocks, rows
# in order: ``TB`` blocks in all (from the lengths, on the device).  Program ``p`` takes the blocks
# ``lo(p) .. hi(p)`` of that list (``TB // P`` each, the first ``TB % P`` programs one more), whatever
# rows they fall in, through one cp.async ring that runs across its rows: the next row's first
# blocks are in flight while this row's last ones are computed (no ring fill per item, no waves).
# A row that lies wholly inside one program is finished there (``o``, natural-log ``lse``); a row
# cut by a program boundary leaves a float32 partial in slot ``0`` (the row began before ``lo(p)``,
# or at it) or ``1`` (it began after ``lo(p)``: the program's last row) of ``[P, 2, TILE, D]``, its
# log2-sum-exp in ``[P, 2, TILE]``, and ``decode_stream_combine_kernel`` merges them.

@jit
def _blocks_of(lens_ptr, b, CAPACITY, BLOCK_N: tl.constexpr):
    """(key blocks, clamped length) of sequence ``b``."""
    n = tl.minimum(tl.maximum(tl.load(lens_ptr + b), 0), CAPACITY)
    return tl.cdiv(n, BLOCK_N), n


@jit
def _total_blocks(lens_ptr, B, upto, CAPACITY, BLOCK_N: tl.constexpr, CHUNK: tl.constexpr):
    """Key blocks of the sequences ``0 .. upto - 1`` (one row's worth each)."""
    total = 0
    for c0 in range(0, upto, CHUNK):
        bs = c0 + tl.arange(0, CHUNK)
        n = tl.minimum(tl.maximum(tl.load(lens_ptr + bs, mask=bs < upto, other=0), 0), CAPACITY)
        total += tl.sum(tl.cdiv(n, BLOCK_N), 0)
    return total


@jit
def _locate(lens_ptr, B, f, HG, CAPACITY, BLOCK_N: tl.constexpr, CHUNK: tl.constexpr):
    """The block ``f`` of the list (``f`` < the list's length): ``(b, k, j, nb, len)``: sequence,
    row inside it, block inside the row, the row's blocks and the sequence's clamped length."""
    base = 0                                  # blocks of the sequences before the chunk, all rows
    b = 0
    first = 0
    for c0 in range(0, B, CHUNK):
        bs = c0 + tl.arange(0, CHUNK)
        n = tl.minimum(tl.maximum(tl.load(lens_ptr + bs, mask=bs < B, other=0), 0), CAPACITY)
        rows = tl.cdiv(n, BLOCK_N) * HG
        ends = base + tl.cumsum(rows, 0)
        hit = (ends - rows <= f) & (f < ends)       # one sequence holds f (none in other chunks)
        b += tl.sum(tl.where(hit, bs, 0), 0)
        first += tl.sum(tl.where(hit, ends - rows, 0), 0)
        base += tl.sum(rows, 0)
    nb, n = _blocks_of(lens_ptr, b, CAPACITY, BLOCK_N)
    k = (f - first) // nb
    return b, k, f - first - k * nb, nb, n


@jit
def _next_block(lens_ptr, b, k, j, nb, n, HG, CAPACITY, BLOCK_N: tl.constexpr):
    """The block after ``(b, k, j)`` in the list (one must exist): the next block of the row, the
    next row of the sequence, or the first row of the next sequence with keys."""
    j += 1
    if j == nb:
        j = 0
        k += 1
        if k == HG:
            k = 0
            b += 1
            nb, n = _blocks_of(lens_ptr, b, CAPACITY, BLOCK_N)
            while nb == 0:
                b += 1
                nb, n = _blocks_of(lens_ptr, b, CAPACITY, BLOCK_N)
    return b, k, j, nb, n


@jit
def _pages_any(b64, n0, end, bt_ptr, stride_bt, BLOCK_N: tl.constexpr, KV_HEADS: tl.constexpr, PAGE: tl.constexpr,
               PAGED: tl.constexpr):
    """``_pages_of`` for the tile's rows: keys ``n0 ..`` (one per row, or with ``KV_HEADS`` one per
    ``KV_HEADS`` rows)."""
    if KV_HEADS > 0:
        if PAGED:
            keys = n0 + tl.arange(0, BLOCK_N) // KV_HEADS
            return _pages(b64, keys, keys < end, bt_ptr, stride_bt, PAGE)
        return b64
    return _pages_of(b64, n0, end, bt_ptr, stride_bt, BLOCK_N, PAGE, PAGED)


@jit
def _issue_any(k_ptr, v_ptr, k_buf, v_buf, b64, hk64, n0, end, pages, offs_d, d_ok, sk_p, sk_r, sk_h, sv_p, sv_r, sv_h,
               NUM_PAGES, BLOCK_N: tl.constexpr, KV_HEADS: tl.constexpr, PAGE: tl.constexpr, PAGED: tl.constexpr,
               SAME_KV: tl.constexpr):
    """``_issue`` for the tile's rows: keys ``n0 ..`` of kv head ``hk``, or with ``KV_HEADS`` row
    ``i`` = key ``n0 + i // KV_HEADS`` of kv head ``i % KV_HEADS``."""
    if KV_HEADS > 0:
        rows = tl.arange(0, BLOCK_N)
        _copy_rows(k_ptr, v_ptr, k_buf, v_buf, b64, (rows % KV_HEADS).to(tl.int64), n0 + rows // KV_HEADS, end, pages,
                   offs_d, d_ok, sk_p, sk_r, sk_h, sv_p, sv_r, sv_h, NUM_PAGES, PAGE, PAGED, SAME_KV)
    else:
        _issue(k_ptr, v_ptr, k_buf, v_buf, b64, hk64, n0, end, pages, offs_d, d_ok, sk_p, sk_r, sk_h, sv_p, sv_r, sv_h,
               NUM_PAGES, BLOCK_N, PAGE, PAGED, SAME_KV)


@jit
def _program_start(p, TB, P):
    """``lo(p)``: the first block of program ``p`` (``TB // P`` blocks each, the first ``TB % P``
    programs one more)."""
    return p * (TB // P) + tl.minimum(p, TB % P)


@jit
def _program_of(f, TB, P):
    """The program whose blocks hold block ``f`` (inverse of ``_program_start``)."""
    per = TB // P
    big = (TB % P) * (per + 1)
    return tl.where(f < big, f // (per + 1), TB % P + (f - big) // tl.maximum(per, 1))


@jit
def decode_stream_kernel(q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, o_ptr, lse_ptr, po_ptr, pl_ptr, B, H_KV,
                         CAPACITY, NUM_PAGES, qk_scale, sq_b, sq_h, sk_p, sk_r, sk_h, sv_p, sv_r, sv_h, stride_bt,
                         so_b, so_h, sl_b, sl_h,
                         D: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_G: tl.constexpr, GROUP: tl.constexpr,
                         TILE: tl.constexpr, BLOCK_N: tl.constexpr, STAGES: tl.constexpr, PAGE: tl.constexpr,
                         PAGED: tl.constexpr, SAME_KV: tl.constexpr, DTYPE: tl.constexpr, CHUNK: tl.constexpr,
                         KV_HEADS: tl.constexpr = 0):
    G_CHUNKS: tl.constexpr = (GROUP + BLOCK_G - 1) // BLOCK_G
    # KV_HEADS > 0 ("all heads"): a row is a whole sequence (H_KV = 1, GROUP = every query head) and a
    # block's BLOCK_N tile rows are KEYS keys x KV_HEADS kv heads, key-major (contiguous in a
    # [pages, PAGE, KV_HEADS, D] cache); query row r takes the columns of kv head r // (GROUP // KV_HEADS)
    KEYS: tl.constexpr = BLOCK_N // KV_HEADS if KV_HEADS > 0 else BLOCK_N     # keys per block
    HG = H_KV * G_CHUNKS
    p = tl.program_id(0)
    P = tl.num_programs(0)
    # the merge kernel (launched with launch_pdl=True) may be scheduled now: its programs take an
    # SM's room as this grid's programs leave it, make the input checks and wait (gdc_wait) for
    # this grid's partials there instead of after a launch gap
    tl.extra.cuda.gdc_launch_dependents()
    TB = _total_blocks(lens_ptr, B, B, CAPACITY, KEYS, CHUNK) * HG
    lo = _program_start(p, TB, P)
    hi = _program_start(p + 1, TB, P)
    steps = hi - lo

    k_smem = tlx.local_alloc((BLOCK_N, HEAD_DIM), DTYPE, STAGES)
    v_smem = tlx.local_alloc((BLOCK_N, HEAD_DIM), DTYPE, STAGES)
    offs_d = tl.arange(0, HEAD_DIM)
    d_ok = offs_d < D
    arange_g = tl.arange(0, BLOCK_G)
    arange_n = tl.arange(0, BLOCK_N)

    # the producer's cursor (the next block to copy) and the consumer's (the next block to use)
    # start at lo; the producer runs STAGES - 1 blocks ahead.  Past hi (or with no blocks at all)
    # a cursor stays put and its copies are masked off (empty commit groups keep the count)
    zero = lo * 0
    pb, pk, pj, pnb, pn = zero, zero, zero, zero + 1, zero
    if steps > 0:
        pb, pk, pj, pnb, pn = _locate(lens_ptr, B, lo, HG, CAPACITY, KEYS, CHUNK)
    cb, ck, cj, cnb, cn = pb, pk, pj, pnb, pn
    pf = lo
    pages = _pages_any(pb.to(tl.int64), pj * KEYS, tl.where(pf < hi, pn, 0), bt_ptr, stride_bt, BLOCK_N, KV_HEADS,
                       PAGE, PAGED)
    for i in tl.static_range(STAGES - 1):
        _issue_any(k_ptr, v_ptr, k_smem[i], v_smem[i], pb.to(tl.int64), (pk // G_CHUNKS).to(tl.int64), pj * KEYS,
                   tl.where(pf < hi, pn, 0), pages, offs_d, d_ok, sk_p, sk_r, sk_h, sv_p, sv_r, sv_h, NUM_PAGES,
                   BLOCK_N, KV_HEADS, PAGE, PAGED, SAME_KV)
        if pf + 1 < hi:
            pb, pk, pj, pnb, pn = _next_block(lens_ptr, pb, pk, pj, pnb, pn, HG, CAPACITY, KEYS)
        pf += 1
        pages = _pages_any(pb.to(tl.int64), pj * KEYS, tl.where(pf < hi, pn, 0), bt_ptr, stride_bt, BLOCK_N,
                           KV_HEADS, PAGE, PAGED)

    zeros = tl.zeros((BLOCK_G, BLOCK_N), dtype=tl.float32)
    m_i = tl.full((BLOCK_G,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_G,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_G, HEAD_DIM), dtype=tl.float32)
    q = tl.zeros((BLOCK_G, HEAD_DIM), dtype=DTYPE)
    for t in range(steps):
        ahead = t + STAGES - 1
        _issue_any(k_ptr, v_ptr, k_smem[ahead % STAGES], v_smem[ahead % STAGES], pb.to(tl.int64),
                   (pk // G_CHUNKS).to(tl.int64), pj * KEYS, tl.where(pf < hi, pn, 0), pages, offs_d, d_ok, sk_p,
                   sk_r, sk_h, sv_p, sv_r, sv_h, NUM_PAGES, BLOCK_N, KV_HEADS, PAGE, PAGED, SAME_KV)
        if pf + 1 < hi:
            pb, pk, pj, pnb, pn = _next_block(lens_ptr, pb, pk, pj, pnb, pn, HG, CAPACITY, KEYS)
        pf += 1
        pages = _pages_any(pb.to(tl.int64), pj * KEYS, tl.where(pf < hi, pn, 0), bt_ptr, stride_bt, BLOCK_N,
                           KV_HEADS, PAGE, PAGED)

        hk = ck // G_CHUNKS
        g0 = (ck - hk * G_CHUNKS) * BLOCK_G
        offs_g = g0 + arange_g
        g_ok = offs_g < GROUP
        heads = (hk * GROUP + offs_g).to(tl.int64)
        if (cj == 0) | (t == 0):              # a row starts here: its query heads
            q = tl.load(q_ptr + cb.to(tl.int64) * sq_b + heads[:, None] * sq_h + offs_d[None, :],
                        mask=g_ok[:, None] & d_ok[None, :], other=0.0)
        tlx.async_load_wait_group(STAGES - 1)                        # block t has landed
        slot = t % STAGES
        s = tlx.async_dot(q, tlx.local_trans(k_smem[slot]), zeros, use_acc=False)
        s = tlx.async_dot_wait(0, s)
        if KV_HEADS > 0:        # a column counts for the query rows of its kv head (padding rows: all)
            keep = ((cj * KEYS + arange_n // KV_HEADS < cn)[None, :]
                    & (((arange_n % KV_HEADS)[None, :] == (offs_g // (GROUP // KV_HEADS))[:, None]) | ~g_ok[:, None]))
        else:
            keep = (cj * BLOCK_N + arange_n < cn)[None, :]
        s = tl.where(keep, s * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        pr = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(pr, 1)
        acc = tlx.async_dot(pr.to(DTYPE), v_smem[slot], acc * alpha[:, None])
        acc = tlx.async_dot_wait(0, acc)
        row_end = (cj == cnb - 1) | (t == steps - 1)
        if row_end:                           # the row's last block here: finish it, or leave a partial
            out = acc / l_i[:, None]
            lse2 = m_new + tl.math.log2(l_i)
            first = lo + t - cj               # the row's first block in the list
            if (first >= lo) & (cj == cnb - 1):
                tl.store(o_ptr + cb.to(tl.int64) * so_b + heads[:, None] * so_h + offs_d[None, :], out.to(DTYPE),
                         mask=g_ok[:, None] & d_ok[None, :])
                tl.store(lse_ptr + cb.to(tl.int64) * sl_b + heads * sl_h, lse2 * LN2, mask=g_ok)
            else:
                part = (p * 2 + (first > lo).to(tl.int32)).to(tl.int64) * TILE + arange_g
                tl.store(po_ptr + part[:, None] * D + offs_d[None, :], out, mask=(arange_g < TILE)[:, None]
                         & g_ok[:, None] & d_ok[None, :])
                tl.store(pl_ptr + part, lse2, mask=(arange_g < TILE) & g_ok)
        m_i = tl.where(row_end, float("-inf"), m_new)           # the next row starts afresh (alpha = 0)
        if t + 1 < steps:
            cb, ck, cj, cnb, cn = _next_block(lens_ptr, cb, ck, cj, cnb, cn, HG, CAPACITY, KEYS)
    tlx.async_load_wait_group(0)


@jit
def decode_stream_combine_kernel(po_ptr, pl_ptr, o_ptr, lse_ptr, lens_ptr, bt_ptr, B, H, H_KV, P, CAPACITY,
                                 NUM_PAGES, stride_bt, so_b, so_h, sl_b, sl_h,
                                 D: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_G: tl.constexpr, GROUP: tl.constexpr,
                                 TILE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr,
                                 CHUNK: tl.constexpr, CHECK: tl.constexpr, PAGE: tl.constexpr, PAGED: tl.constexpr):
    """Head ``h`` of sequence ``b`` (program ``b * H + h``) after ``decode_stream_kernel``: a row
    cut by program boundaries gets the merge of its programs' partials, a sequence with no keys
    ``o = 0``, ``lse = -inf``; a row finished in one program is left as it is.  With ``CHECK``
    head 0's program checks the sequence's length and block-table entries."""
    G_CHUNKS: tl.constexpr = (GROUP + BLOCK_G - 1) // BLOCK_G
    HG = H_KV * G_CHUNKS
    pid = tl.program_id(0)
    b = pid // H
    h = pid - b * H
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)
    if CHECK:
        if h == 0:
            _check_sequence(lens_ptr, bt_ptr, b64, CAPACITY, NUM_PAGES, stride_bt, PAGE, PAGED, 1024)
    offs_d = tl.arange(0, HEAD_DIM)
    d_ok = offs_d < D
    nb, _ = _blocks_of(lens_ptr, b, CAPACITY, BLOCK_N)
    TB = _total_blocks(lens_ptr, B, B, CAPACITY, BLOCK_N, CHUNK) * HG
    hk = h // GROUP
    g = h - hk * GROUP
    row0 = _total_blocks(lens_ptr, B, b, CAPACITY, BLOCK_N, CHUNK) * HG + (hk * G_CHUNKS + g // BLOCK_G) * nb
    p_a = _program_of(row0, TB, P)
    p_b = _program_of(row0 + nb - 1, TB, P)
    tl.extra.cuda.gdc_wait()       # the stream kernel's partials and outputs (launch_pdl=True) from here on
    if nb == 0:
        tl.store(o_ptr + b64 * so_b + h64 * so_h + offs_d, tl.zeros((HEAD_DIM,), tl.float32).to(o_ptr.dtype.element_ty),
                 mask=d_ok)
        tl.store(lse_ptr + b64 * sl_b + h64 * sl_h, float("-inf"))
    elif p_a != p_b:
        offs_s = tl.arange(0, BLOCK_S)
        m = tl.full((HEAD_DIM,), float("-inf"), tl.float32)      # (replicated along D)
        total = tl.zeros((HEAD_DIM,), tl.float32)
        acc = tl.zeros((HEAD_DIM,), tl.float32)
        for s0 in range(p_a, p_b + 1, BLOCK_S):
            ps = s0 + offs_s
            s_ok = ps <= p_b
            slot = (_program_start(ps, TB, P) < row0).to(tl.int32)
            part = (ps * 2 + slot).to(tl.int64) * TILE + g % BLOCK_G
            lse_s = tl.load(pl_ptr + part, mask=s_ok, other=float("-inf"))
            parts = tl.load(po_ptr + part[:, None] * D + offs_d[None, :], mask=s_ok[:, None] & d_ok[None, :],
                            other=0.0)
            m_new = tl.maximum(m, tl.max(lse_s, 0))
            scale = tl.math.exp2(m - m_new)
            w = tl.where(s_ok[:, None], tl.math.exp2(lse_s[:, None] - m_new[None, :]), 0.0)
            total = total * scale + tl.sum(w, 0)
            acc = acc * scale + tl.sum(parts * w, 0)
            m = m_new
        tl.store(o_ptr + b64 * so_b + h64 * so_h + offs_d, (acc / total).to(o_ptr.dtype.element_ty), mask=d_ok)
        tl.store(lse_ptr + b64 * sl_b + h64 * sl_h, tl.max((m + tl.math.log2(total)) * LN2, 0))
