"""The attention backward, warp-specialized for Hopper: one kernel for dK, dV and dQ.

Same math as ``attention_bwd.py`` (whose preprocess kernel gives ``delta`` and the LSE in
log2 units), organized as FlashAttention-3 does on sm_90, in this project's words:

* work items of (block of ``BLOCK_N`` = 128 keys, batch, kv head): ``PERSISTENT`` (dense), one
  program per SM walks its row of the host's table (count, items; ``attention_bwd._ws_schedule``);
  ``DYNAMIC`` (dense), one program per SM starts with item number ``program_id`` and draws the next
  number from a device counter (``sched_ptr``; ``sched_stride`` = the number of items) as it starts
  an item, handing each to the consumers through two shared slots; else one program per item.  In
  ``section_tile``'s order (causal: the longest walks first within sections of heads).  The default task (4 warps) is the TMA producer: per item it waits until
  both consumers are done with the previous item's K and V (``kv_empty``), loads the block's K and
  V, then streams the ``BLOCK_M``-row tiles of Q and dO of every query block of every query head
  of the GQA group through a ring of ``NUM_BUF`` slots (``q_full`` / ``do_full`` with expected
  bytes, ``q_empty`` / ``do_empty`` released by both consumers) whose phases run on across items,
  so the next item's loads overlap the consumers' dK / dV stores;
* two consumer warp groups (``replicate=2``) own 64 keys each.  Per query tile:
  ``S^T = K_c Q^T`` and ``dP^T = V_c dO^T`` are issued together (wgmma; K_c and V_c from
  registers at D = 64, loaded once, so that the tensor cores read only Q^T and dO^T from shared
  memory), ``P^T = exp2(S^T * qk_scale - lse2)`` (masked) is computed while dP^T runs,
  ``dV += P^T dO`` (P^T from registers) is issued, ``dS^T = P^T (dP^T - delta) * sm_scale`` (the
  factor of both dK and dQ, applied once) is computed while dV runs, ``dK += dS^T Q``
  (registers), then both consumers' dS^T halves go to one [128, BLOCK_M] shared tile (two such
  tiles in turn, a named barrier of the 256 consumer threads between the stores and the reads)
  and dQ = dS K over all 128 keys is added into a float32 ``dq_acc`` by TMA reduce-adds (the order
  of the additions is not fixed: dQ's float32 sum is not bit-reproducible) from a 128-byte
  swizzled staging tile: ``DQ_ROWS`` (shipped), ``[64, 2, 32]`` rows of 64 floats leaving as one
  3-D box, whose 8-byte stores are free of bank conflicts; else two ``[64, 32]`` column blocks
  leaving as two copies, whose stores are two-way conflicts (a half-warp's four rows share four of
  the swizzle's eight chunk positions).  D = 128: consumer c computes dQ's 64 columns c*64..;
  D = 64: consumer ``t % 2`` computes all of query tile t's dQ.  Either way one reduce-add of 16 KB per consumer and two
  tiles (D = 64) or per tile (D = 128), instead of one partial sum per consumer.  ``DRIFT``: only
  tile t's dQ consumer (``t % 2``) waits for the other's dS^T half, which only signals (named
  barriers 7 + c / 8 - c), so the consumers run up to a tile apart; at D = 128 that consumer
  then computes both column halves (two reduce-adds);
* the tiles are addressed through 2-D descriptors over each tensor's rows (``[rows, row
  stride]``: (batch, head, row) -> row ``b * r_b + h * r_h + first + m``, column ``h * c_h``),
  so dense BHSD, BSHD and packed layouts share the kernel.  A tile that runs past its sequence
  reads the next head's or sequence's rows: they are masked out of every product (LSE +inf
  for queries, P = 0 for keys), so dQ adds zeros there; dK and dV leave by masked stores.

Head dims 64 and 128 (whole 64-column boxes); the host falls back to the ``tl.dot`` kernels
otherwise.  ``WINDOW`` and ``SOFTCAP`` as in ``attention_bwd.py``: an item walks only the query
blocks whose rows see its keys, and only a tile across a window's edge is masked (``_hide``;
causal: the diagonal is the right edge, one mask for both); under softcapping the masks apply
to t, and ``P (1 - t^2)`` replaces P once dV's MMA has its operand, so no tile of registers is
live beyond those of plain attention (spills within 5 registers at sm_90a).
"""
from ... import language as tl
from ...language import tlx
from ...runtime.jit import jit
from .attention_bwd import (
    capped_probs,
    capped_slope,
    query_blocks,
    section_tile,
    section_tile_of,
    tanh_approx,
    window_keep,
)

D_BOX = 64            # columns of one TMA box: 64 x 2 bytes, the 128-byte swizzle's span
DQ_SPAN = 32          # float32 columns in the 128-byte swizzle's span (the dQ staging tiles)


@jit
def _publish_item(ids, ids_full, ids_empty, n, idx):
    """``DYNAMIC``: the producer hands both consumers the index of its ``n``-th work item through a
    ring of two shared int32 slots."""
    slot, phase = tlx.get_bufidx_phase(n, 2)
    tlx.barrier_wait(ids_empty[slot], phase ^ 1)
    tlx.local_store(ids[slot], tl.full((1,), 0, tl.int32) + idx)
    tlx.barrier_arrive(ids_full[slot])


@jit
def _take_item(ids, ids_full, ids_empty, n):
    """``DYNAMIC``: a consumer's ``n``-th work item index from the producer's ring."""
    slot, phase = tlx.get_bufidx_phase(n, 2)
    tlx.barrier_wait(ids_full[slot], phase)
    idx = tl.sum(tlx.local_load(ids[slot]), axis=0)
    tlx.barrier_arrive(ids_empty[slot])
    return idx


@jit
def _dynamic_item(idx, n_blocks, n_total, heads_per_section):
    """``DYNAMIC``: work item number ``idx`` (of ``n_total``) in ``section_tile``'s order, as
    ``pair * n_blocks + block``."""
    pid_bh, block = section_tile_of(idx, n_blocks, n_total // n_blocks, heads_per_section)
    return pid_bh * n_blocks + block


@jit
def _tile_rows(b, h, first, r_b, r_h):
    """First descriptor row of (batch ``b``, head ``h``) whose sequence starts at ``first``."""
    return b * r_b + h * r_h + first


@jit
def _item(sched_ptr, sched_stride, j, n_blocks, heads_per_section, PERSISTENT: tl.constexpr):
    """Work item ``j`` of this program, as ``pair * n_blocks + block`` ((batch, kv head) pair,
    key block): ``PERSISTENT``, entry ``j`` of the program's row of the host's table (its count
    first); else the program's one item in ``section_tile``'s order."""
    if PERSISTENT:
        item = tl.load(sched_ptr + tl.program_id(0) * sched_stride + 1 + j)
    else:
        pid_bh, block = section_tile(tl.program_id(0), n_blocks, heads_per_section)
        item = pid_bh * n_blocks + block + j
    return item


@jit
def _n_items(sched_ptr, sched_stride, PERSISTENT: tl.constexpr):
    """How many work items this program walks: its row's count (``PERSISTENT``), else 1."""
    if PERSISTENT:
        n = tl.load(sched_ptr + tl.program_id(0) * sched_stride)
    else:
        n = tl.program_id(0) * 0 + 1
    return n


@jit
def _work(cu_q_ptr, cu_k_ptr, seqlen_q, seqlen_k, H_KV, item, window_left, window_right, BLOCK_M: tl.constexpr,
          BLOCK_N: tl.constexpr, GROUP: tl.constexpr, CAUSAL: tl.constexpr, VARLEN: tl.constexpr,
          WINDOW: tl.constexpr):
    """Work item ``item``'s (batch, kv head, first key, first query row and length of its
    sequence, first key row and length, first query block, query blocks per head, steps).  Each
    task computes it (a task cannot read registers loaded before ``async_tasks``)."""
    n_blocks = tl.cdiv(seqlen_k, BLOCK_N)
    pid_bh = item // n_blocks
    b = pid_bh // H_KV
    hk = pid_bh % H_KV
    start_n = (item - pid_bh * n_blocks) * BLOCK_N
    if VARLEN:
        q_first = tl.load(cu_q_ptr + b)
        len_q = tl.load(cu_q_ptr + b + 1) - q_first
        k_first = tl.load(cu_k_ptr + b)
        len_k = tl.load(cu_k_ptr + b + 1) - k_first
        b = b * 0
    else:
        q_first = b * 0
        len_q = seqlen_q
        k_first = b * 0
        len_k = seqlen_k
    first_m, per_head = query_blocks(start_n, len_q, window_left, window_right, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    steps = GROUP * per_head
    if start_n >= len_k:
        steps = steps * 0                               # a key block past its sequence: nothing to do
    return b, hk, start_n, q_first, len_q, k_first, len_k, first_m, per_head, steps


@jit
def _row_stats(lse2_ptr, delta_ptr, h, m0, valid, b, q_first, len_q, sd_b, sd_h, sm_scale, BLOCK_M: tl.constexpr):
    """lse2 and ``delta * sm_scale`` of the query rows ``m0..`` of head ``h`` (+inf and 0 past the
    sequence, or everywhere when not ``valid``: nothing is read).  The tile's offset is one 64-bit
    scalar; the rows add 32-bit offsets to it."""
    base = b.to(tl.int64) * sd_b + h.to(tl.int64) * sd_h + (q_first + m0)
    rows = tl.arange(0, BLOCK_M)
    row_ok = (rows < len_q - m0) & valid
    lse2 = tl.load(lse2_ptr + base + rows, mask=row_ok, other=float("inf"))
    delta = tl.load(delta_ptr + base + rows, mask=row_ok, other=0.0)
    return lse2, delta * sm_scale


@jit
def _hide(pT, hidden, offs_m, offs_n, key_ok, m0, start_n, len_q, len_k, window_left, window_right,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
          ROWS: tl.constexpr):
    """A consumer's ``[keys, queries]`` tile ``pT`` (P^T, or t under softcapping) with ``hidden``
    where a query does not see a key: (``ROWS``) the queries past the sequence, (causal) keys past
    the diagonal, (``WINDOW``) keys outside the window, keys past the sequence.  Only the tiles
    that reach an edge pay for a mask."""
    if ROWS:
        if m0 + BLOCK_M > len_q:                            # queries past the sequence
            pT = tl.where(offs_m[None, :] < len_q, pT, hidden)
    if CAUSAL and WINDOW:   # the diagonal is the window's right edge: one mask for a tile on either edge
        if m0 < start_n + BLOCK_N or start_n < m0 + BLOCK_M - 1 - window_left:
            pT = tl.where((offs_m[None, :] >= offs_n[:, None]) & (offs_n[:, None] >= offs_m[None, :] - window_left),
                          pT, hidden)
    elif CAUSAL:
        if m0 < start_n + BLOCK_N:                          # a block on the diagonal
            pT = tl.where(offs_m[None, :] >= offs_n[:, None], pT, hidden)
    elif WINDOW:            # a tile across the window's left or right edge
        if start_n < m0 + BLOCK_M - 1 - window_left or start_n + BLOCK_N - 1 > m0 + window_right:
            pT = tl.where(window_keep(offs_m[None, :], offs_n[:, None], window_left, window_right), pT, hidden)
    if start_n + BLOCK_N > len_k:                           # keys past the sequence
        pT = tl.where(key_ok[:, None], pT, hidden)
    return pT


@jit
def _next_tile(g, mb, first_m, per_head, GROUP: tl.constexpr):
    """The walk's next (query head in the group, query block): the blocks ``first_m ..
    first_m + per_head - 1`` of head 0, then of head 1, ... (counters, not a division per tile)."""
    mb = mb + 1
    if GROUP > 1:
        if mb == first_m + per_head:
            mb = first_m
            g = g + 1
    return g, mb


@jit
def _add_dq(dq_desc, dq_smem, dq, slot, row, col, DQ_ROWS: tl.constexpr):
    """Add the float32 tile ``dq`` into ``dq_acc`` at (row, col) by a TMA reduce-add from staging
    tile ``slot`` (two per consumer, used in turn: the add before last has read this one).
    ``DQ_ROWS``: the staging tile is ``[rows, 2, 32]`` (a row's 64 floats in one 256-byte run, a
    3-D box) instead of two 32-column blocks of ``[rows, 32]``: the 128-byte swizzle then differs
    between the four rows one half-warp's 8-byte stores cover (lines 2r apart, not r), so the
    stores are free of bank conflicts (two-way before), and one copy moves the tile instead of two."""
    tlx.async_descriptor_store_wait(1)
    if DQ_ROWS:
        tlx.local_store(dq_smem[slot], tl.reshape(dq, (dq.shape[0], D_BOX // DQ_SPAN, DQ_SPAN)))
        tlx.fence("async_shared")
        tlx.async_descriptor_store(dq_desc, dq_smem[slot], [row, col // DQ_SPAN, 0], store_reduce="add")
    else:
        tlx.local_store(dq_smem[slot], dq)
        tlx.fence("async_shared")
        tlx.async_descriptor_store(dq_desc, dq_smem[slot], [row, col], store_reduce="add")


@jit
def _exchange_ds(ds_tile, dsT, cid, u, HALF_N: tl.constexpr, BLOCK_M: tl.constexpr, DRIFT: tl.constexpr):
    """Consumer ``cid``'s dS^T half into rows ``cid * HALF_N ..`` of the tile's shared ``[128, BLOCK_M]``
    dS^T, then the exchange: both consumers meet at named barrier 7, or (``DRIFT``) only the tile's dQ
    consumer (``u % 2``) waits for both halves (barrier 7 + cid) and the other only signals (8 - cid), so
    it can run up to a tile ahead (a slot is rewritten only after its reader passed the next barrier)."""
    tlx.local_store(tlx.local_slice(ds_tile, [cid * HALF_N, 0], [HALF_N, BLOCK_M]), dsT)
    tlx.fence("async_shared")
    if not DRIFT:
        tlx.named_barrier_wait(7, 256)
    elif u % 2 == cid:
        tlx.named_barrier_wait(7 + cid, 256)
    else:
        tlx.named_barrier_arrive(8 - cid, 256)


@jit
def _tile_dq(ds_tile, k_smem, dk, dq, dq_row, dq_col, dq_desc, dq_smem, q_empty, buf, cid, u, q_row, h, qc_h,
             dq_col0, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_COLS: tl.constexpr, DRIFT: tl.constexpr,
             DEFER_DQ: tl.constexpr, DQ_ROWS: tl.constexpr):
    """Consumer ``cid``'s share of the tile's dQ = dS K (all 128 keys) and the wait for its dK product, which
    releases the tile's Q slot; returns dK and the carried dQ (``DEFER_DQ``: this tile's, added at the top of
    the next; else passed through).  In step at D = 128 (``SPLIT_COLS``) each consumer computes its 64
    columns ``dq_col0 ..``; ``DRIFT`` at D = 128, consumer ``u % 2`` computes both halves, one after the other
    (both in flight spill 12-28 registers); D = 64, consumer ``u % 2`` computes the tile's dQ."""
    if SPLIT_COLS and DRIFT:
        if u % 2 == cid:
            for half in tl.static_range(2):
                dq_h = tlx.async_dot(tlx.local_trans(ds_tile),
                                     tlx.local_slice(k_smem[0], [0, half * D_BOX], [BLOCK_N, D_BOX]),
                                     tl.zeros((BLOCK_M, D_BOX), dtype=tl.float32), use_acc=False)
                if half == 0:
                    dk = tlx.async_dot_wait(1, dk)
                    tlx.barrier_arrive(q_empty[buf])
                dq_h = tlx.async_dot_wait(0, dq_h)
                _add_dq(dq_desc, dq_smem, dq_h, cid * 2 + half, q_row, h * qc_h + half * D_BOX, DQ_ROWS)
        else:
            dk = tlx.async_dot_wait(0, dk)
            tlx.barrier_arrive(q_empty[buf])
    elif SPLIT_COLS or u % 2 == cid:
        k_cols = tlx.local_slice(k_smem[0], [0, dq_col0], [BLOCK_N, D_BOX])
        dq_t = tlx.async_dot(tlx.local_trans(ds_tile), k_cols,
                             tl.zeros((BLOCK_M, D_BOX), dtype=tl.float32), use_acc=False)
        dk = tlx.async_dot_wait(1, dk)
        tlx.barrier_arrive(q_empty[buf])
        dq_t = tlx.async_dot_wait(0, dq_t)
        if DEFER_DQ:
            dq = dq_t
            dq_row = q_row
            dq_col = h * qc_h + dq_col0
        else:
            if SPLIT_COLS:
                slot = cid * 2 + u % 2                       # two staging tiles per consumer, in turn
            else:
                slot = cid * 2 + (u // 2) % 2
            _add_dq(dq_desc, dq_smem, dq_t, slot, q_row, h * qc_h + dq_col0, DQ_ROWS)
    else:
        dk = tlx.async_dot_wait(0, dk)
        tlx.barrier_arrive(q_empty[buf])
    return dk, dq, dq_row, dq_col


@jit
def _load_kv(k_desc, v_desc, k_smem, v_smem, bar, row, col, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    """TMA loads of the program's K and V blocks (64-column boxes), completing on ``bar``."""
    tlx.barrier_expect_bytes(bar, 2 * BLOCK_N * HEAD_DIM * 2)
    for d in tl.static_range(HEAD_DIM // D_BOX):
        k_box = tlx.local_slice(k_smem[0], [0, d * D_BOX], [BLOCK_N, D_BOX])
        tlx.async_descriptor_load(k_desc, k_box, [row, col + d * D_BOX], bar)
        v_box = tlx.local_slice(v_smem[0], [0, d * D_BOX], [BLOCK_N, D_BOX])
        tlx.async_descriptor_load(v_desc, v_box, [row, col + d * D_BOX], bar)


@jit
def _produce_item(item, j, t0, q_desc, k_desc, v_desc, do_desc, lse2_desc, delta_desc, k_smem, v_smem, q_smem, do_smem,
                  lse2_smem, delta_smem, kv_full, kv_empty, q_full, q_empty, do_full, do_empty, cu_q_ptr, cu_k_ptr,
                  seqlen_q, seqlen_k, H_KV, qr_b, qr_h, qc_h, kr_b, kr_h, kc_h, window_left, window_right,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP: tl.constexpr,
                  CAUSAL: tl.constexpr, VARLEN: tl.constexpr, NUM_BUF: tl.constexpr, STATS_SMEM: tl.constexpr,
                  WINDOW: tl.constexpr):
    """The producer's ``j``-th work item ``item``: K / V (once both consumers are done with the
    previous item's), then the item's Q / dO tiles (and their statistics' rows with ``STATS_SMEM``)
    into the ring from its ``t0``-th slot on.  Returns the ring's tiles after the item."""
    N_BOX: tl.constexpr = HEAD_DIM // D_BOX
    b, hk, start_n, q_first, _len_q, k_first, _len_k, first_m, per_head, steps = _work(
        cu_q_ptr, cu_k_ptr, seqlen_q, seqlen_k, H_KV, item, window_left, window_right, BLOCK_M, BLOCK_N, GROUP,
        CAUSAL, VARLEN, WINDOW)
    k_row = _tile_rows(b, hk, k_first, kr_b, kr_h) + start_n
    # STATS_SMEM: the first column of the sequence's statistics, a 16-byte multiple (a TMA box's start):
    # packed, sequence s's rows start at (q_first + 3 s) // 4 * 4 (attention_bwd._stat_first)
    if VARLEN:
        seq = item // tl.cdiv(seqlen_k, BLOCK_N) // H_KV
        stat_col = (q_first + 3 * seq) // 4 * 4
    else:
        stat_col = q_first
    tlx.barrier_wait(kv_empty[0], (j % 2) ^ 1)     # the previous item's K, V are read
    _load_kv(k_desc, v_desc, k_smem, v_smem, kv_full[0], k_row, hk * kc_h, BLOCK_N, HEAD_DIM)
    g = hk * 0                              # the tile's query head in the group
    mb = first_m                            # and query block
    for t in range(steps):
        h = hk * GROUP + g
        m0 = mb * BLOCK_M
        q_row = _tile_rows(b, h, q_first, qr_b, qr_h) + m0
        buf, phase = tlx.get_bufidx_phase(t0 + t, NUM_BUF)
        tlx.barrier_wait(q_empty[buf], phase ^ 1)
        if STATS_SMEM:
            stat_row = b * (H_KV * GROUP) + h       # packed: b is 0, the rows are the heads
            tlx.barrier_expect_bytes(q_full[buf], BLOCK_M * HEAD_DIM * 2 + BLOCK_M * 4)
            tlx.async_descriptor_load(lse2_desc, lse2_smem[buf], [stat_row, stat_col + m0], q_full[buf])
        else:
            tlx.barrier_expect_bytes(q_full[buf], BLOCK_M * HEAD_DIM * 2)
        for d in tl.static_range(N_BOX):
            q_box = tlx.local_slice(q_smem[buf], [0, d * D_BOX], [BLOCK_M, D_BOX])
            tlx.async_descriptor_load(q_desc, q_box, [q_row, h * qc_h + d * D_BOX], q_full[buf])
        tlx.barrier_wait(do_empty[buf], phase ^ 1)
        if STATS_SMEM:
            tlx.barrier_expect_bytes(do_full[buf], BLOCK_M * HEAD_DIM * 2 + BLOCK_M * 4)
            tlx.async_descriptor_load(delta_desc, delta_smem[buf], [stat_row, stat_col + m0], do_full[buf])
        else:
            tlx.barrier_expect_bytes(do_full[buf], BLOCK_M * HEAD_DIM * 2)
        for d in tl.static_range(N_BOX):
            do_box = tlx.local_slice(do_smem[buf], [0, d * D_BOX], [BLOCK_M, D_BOX])
            tlx.async_descriptor_load(do_desc, do_box, [q_row, h * qc_h + d * D_BOX], do_full[buf])
        g, mb = _next_tile(g, mb, first_m, per_head, GROUP)
    t0 = t0 + steps
    return t0


@jit
def _consume_item(item, j, t0, dq, dq_row, dq_col, cid, k_c, v_c, dq_col0, k_smem, q_smem, do_smem, ds_smem, dq_smem,
                  lse2_smem, delta_smem, kv_full, kv_empty, q_full, q_empty, do_full, do_empty, dq_desc, lse2_ptr,
                  delta_ptr, dk_ptr, dv_ptr, cu_q_ptr, cu_k_ptr, seqlen_q, seqlen_k, H_KV, qr_b, qr_h, qc_h, sd_b,
                  sd_h, sdk_b, sdk_h, sdk_r, sdv_b, sdv_h, sdv_r, qk_scale, sm_scale, window_left, window_right,
                  softcap, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  GROUP: tl.constexpr, CAUSAL: tl.constexpr, VARLEN: tl.constexpr, NUM_BUF: tl.constexpr,
                  DTYPE: tl.constexpr, PREFETCH_STATS: tl.constexpr, DEFER_DQ: tl.constexpr, DRIFT: tl.constexpr,
                  STATS_SMEM: tl.constexpr, WINDOW: tl.constexpr, SOFTCAP: tl.constexpr, DQ_ROWS: tl.constexpr):
    """Consumer ``cid``'s ``j``-th work item ``item``: its tiles from the ring's ``t0``-th slot on
    (see the module docstring), then its dK / dV rows.  ``DEFER_DQ``: (dq, dq_row, dq_col) is the
    last tile's dQ, added at the top of the next tile (placeholders otherwise).  Returns the ring's
    tiles after the item and the carried dQ."""
    HALF_N: tl.constexpr = BLOCK_N // 2
    SPLIT_COLS: tl.constexpr = HEAD_DIM == 2 * D_BOX
    KV_IN_REGS: tl.constexpr = HEAD_DIM == D_BOX
    b, hk, start_n, q_first, len_q, k_first, len_k, first_m, per_head, steps = _work(
        cu_q_ptr, cu_k_ptr, seqlen_q, seqlen_k, H_KV, item, window_left, window_right, BLOCK_M, BLOCK_N, GROUP,
        CAUSAL, VARLEN, WINDOW)
    offs_n = start_n + cid * HALF_N + tl.arange(0, HALF_N)
    key_ok = offs_n < len_k
    dk = tl.zeros((HALF_N, HEAD_DIM), dtype=tl.float32)
    dv = tl.zeros((HALF_N, HEAD_DIM), dtype=tl.float32)
    tlx.barrier_wait(kv_full[0], j % 2)
    if KV_IN_REGS:
        k_op = tlx.local_load(k_c)         # wgmma's register A for S^T and dP^T: the
        v_op = tlx.local_load(v_c)         # tensor cores read only Q^T / dO^T from shared
    else:
        k_op = k_c
        v_op = v_c
    g = hk * 0                              # the tile's query head in the group
    mb = first_m                            # and query block
    if PREFETCH_STATS and not STATS_SMEM:   # a tile's row statistics, loaded during the previous tile
        lse2, delta = _row_stats(lse2_ptr, delta_ptr, hk * GROUP, mb * BLOCK_M, steps > 0, b, q_first,
                                 len_q, sd_b, sd_h, sm_scale, BLOCK_M)
    for t in range(steps):
        h = hk * GROUP + g
        m0 = mb * BLOCK_M
        u = t0 + t                          # the tile's place in the ring and the dS^T / dQ turns
        buf, phase = tlx.get_bufidx_phase(u, NUM_BUF)
        offs_m = m0 + tl.arange(0, BLOCK_M)
        if not PREFETCH_STATS and not STATS_SMEM:   # issued here, in flight over the waits below
            lse2, delta = _row_stats(lse2_ptr, delta_ptr, h, m0, t < steps, b, q_first, len_q, sd_b, sd_h,
                                     sm_scale, BLOCK_M)
        # S^T and dP^T are independent: both are issued before either is waited, so the
        # exponentials run while dP^T is on the tensor cores and dS^T while dV is
        tlx.barrier_wait(q_full[buf], phase)
        sT = tlx.async_dot(k_op, tlx.local_trans(q_smem[buf]),
                           tl.zeros((HALF_N, BLOCK_M), dtype=tl.float32), use_acc=False)
        if DEFER_DQ:
            if t > 0:
                _add_dq(dq_desc, dq_smem, dq, cid * 2 + (u - 1) % 2, dq_row, dq_col, DQ_ROWS)
        tlx.barrier_wait(do_full[buf], phase)
        dpT = tlx.async_dot(v_op, tlx.local_trans(do_smem[buf]),
                            tl.zeros((HALF_N, BLOCK_M), dtype=tl.float32), use_acc=False)
        sT = tlx.async_dot_wait(1, sT)                              # S^T done, dP^T running
        if SOFTCAP:         # the masks on t, where one tile (t) is live across them, not two (P and t)
            tT = _hide(tanh_approx(sT * (sm_scale / softcap)), float("-inf"), offs_m, offs_n, key_ok, m0, start_n,
                       len_q, len_k, window_left, window_right, BLOCK_M, BLOCK_N, CAUSAL, WINDOW, STATS_SMEM)
            if STATS_SMEM:
                pT = capped_probs(tT, tlx.local_load(lse2_smem[buf]), softcap)
            else:
                pT = capped_probs(tT, lse2[None, :], softcap)
            p_op = pT.to(DTYPE)
            pT = pT * capped_slope(tT)          # P (1 - t^2): dS's factor, once dV has P
            dv = tlx.async_dot(p_op, do_smem[buf], dv)
        else:
            if STATS_SMEM:      # read in the product's layout (0 past the rows: the copy's fill)
                pT = tl.math.exp2(sT * qk_scale - tlx.local_load(lse2_smem[buf]))
            else:
                pT = tl.math.exp2(sT * qk_scale - lse2[None, :])
            pT = _hide(pT, 0.0, offs_m, offs_n, key_ok, m0, start_n, len_q, len_k, window_left, window_right,
                       BLOCK_M, BLOCK_N, CAUSAL, WINDOW, STATS_SMEM)
            dv = tlx.async_dot(pT.to(DTYPE), do_smem[buf], dv)
        dpT = tlx.async_dot_wait(1, dpT)                            # dP^T done, dV running
        if STATS_SMEM:      # delta comes scaled by sm_scale (P is 0 past the rows)
            dsT = (pT * (dpT * sm_scale - tlx.local_load(delta_smem[buf]))).to(DTYPE)
        else:
            dsT = (pT * (dpT * sm_scale - delta[None, :])).to(DTYPE)   # sm_scale of dK and dQ, once
        dk = tlx.async_dot(dsT, q_smem[buf], dk)
        dv = tlx.async_dot_wait(1, dv)                              # dV done (dO read), dK running
        tlx.barrier_arrive(do_empty[buf])
        q_row = _tile_rows(b, h, q_first, qr_b, qr_h) + m0
        ds_tile = ds_smem[u % 2]
        _exchange_ds(ds_tile, dsT, cid, u, HALF_N, BLOCK_M, DRIFT)
        dk, dq, dq_row, dq_col = _tile_dq(ds_tile, k_smem, dk, dq, dq_row, dq_col, dq_desc, dq_smem, q_empty, buf, cid,
                                          u, q_row, h, qc_h, dq_col0, BLOCK_M, BLOCK_N, SPLIT_COLS, DRIFT, DEFER_DQ,
                                          DQ_ROWS)
        g, mb = _next_tile(g, mb, first_m, per_head, GROUP)
        if PREFETCH_STATS and not STATS_SMEM:
            lse2, delta = _row_stats(lse2_ptr, delta_ptr, hk * GROUP + g, mb * BLOCK_M, t + 1 < steps, b,
                                     q_first, len_q, sd_b, sd_h, sm_scale, BLOCK_M)
    tlx.barrier_arrive(kv_empty[0])                # K and V (dQ's operand) are read
    if DEFER_DQ:
        if steps > 0:
            _add_dq(dq_desc, dq_smem, dq, cid * 2 + (t0 + steps - 1) % 2, dq_row, dq_col, DQ_ROWS)
    t0 = t0 + steps
    offs_d = tl.arange(0, HEAD_DIM)
    k_first64 = k_first.to(tl.int64)
    dk_base = dk_ptr + b.to(tl.int64) * sdk_b + hk.to(tl.int64) * sdk_h + k_first64 * sdk_r
    dv_base = dv_ptr + b.to(tl.int64) * sdv_b + hk.to(tl.int64) * sdv_h + k_first64 * sdv_r
    keep = key_ok[:, None]
    tl.store(dk_base + offs_n[:, None] * sdk_r + offs_d[None, :], dk.to(DTYPE), mask=keep)
    tl.store(dv_base + offs_n[:, None] * sdv_r + offs_d[None, :], dv.to(DTYPE), mask=keep)
    return t0, dq, dq_row, dq_col


@jit
def bwd_ws_kernel(q_desc, k_desc, v_desc, do_desc, dq_desc, lse2_ptr, delta_ptr, dk_ptr, dv_ptr,
                  cu_q_ptr, cu_k_ptr, seqlen_q, seqlen_k, H_KV,
                  qr_b, qr_h, qc_h, kr_b, kr_h, kc_h, sd_b, sd_h,
                  sdk_b, sdk_h, sdk_r, sdv_b, sdv_h, sdv_r, qk_scale, sm_scale, heads_per_section,
                  sched_ptr, sched_stride, lse2_desc, delta_desc, window_left, window_right, softcap,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, GROUP: tl.constexpr, CAUSAL: tl.constexpr,
                  VARLEN: tl.constexpr, NUM_BUF: tl.constexpr, DTYPE: tl.constexpr,
                  PREFETCH_STATS: tl.constexpr = False, DEFER_DQ: tl.constexpr = False,
                  DRIFT: tl.constexpr = False, PERSISTENT: tl.constexpr = False, STATS_SMEM: tl.constexpr = False,
                  DYNAMIC: tl.constexpr = False, REGISTERS: tl.constexpr = 240, WINDOW: tl.constexpr = False,
                  SOFTCAP: tl.constexpr = False, DQ_ROWS: tl.constexpr = False):
    BLOCK_N: tl.constexpr = 128
    HALF_N: tl.constexpr = 64                                   # keys of one consumer
    k_smem = tlx.local_alloc((BLOCK_N, HEAD_DIM), DTYPE, 1)
    v_smem = tlx.local_alloc((BLOCK_N, HEAD_DIM), DTYPE, 1)
    q_smem = tlx.local_alloc((BLOCK_M, HEAD_DIM), DTYPE, NUM_BUF)
    do_smem = tlx.local_alloc((BLOCK_M, HEAD_DIM), DTYPE, NUM_BUF)
    # dQ = dS K from all 128 keys: both consumers' dS^T halves go into one [128, BLOCK_M] tile (two
    # in turn); D = 128: consumer c computes dQ's 64 columns c*64..; D = 64: consumer t % 2 computes
    # all of query tile t's dQ (one reduce-add per tile either way, not one per consumer)
    SPLIT_COLS: tl.constexpr = HEAD_DIM == 2 * D_BOX
    ds_smem = tlx.local_alloc((BLOCK_N, BLOCK_M), DTYPE, 2)
    if DQ_ROWS:            # rows of 64 floats in one run (dq_desc a [rows, cols / 32, 32] view, _add_dq)
        dq_smem = tlx.local_alloc((BLOCK_M, D_BOX // DQ_SPAN, DQ_SPAN), tl.float32, 4)     # two per consumer
    else:
        dq_smem = tlx.local_alloc((BLOCK_M, D_BOX), tl.float32, 4)
    kv_full = tlx.alloc_barriers(1, arrive_count=1)
    kv_empty = tlx.alloc_barriers(1, arrive_count=2)        # both consumers are done with an item's K, V
    lse2_smem = None
    delta_smem = None
    if STATS_SMEM:         # a tile's lse2 / delta rows, loaded by the producer with its Q / dO (one row each)
        lse2_smem = tlx.local_alloc((1, BLOCK_M), tl.float32, NUM_BUF)
        delta_smem = tlx.local_alloc((1, BLOCK_M), tl.float32, NUM_BUF)
    if DYNAMIC:            # the work items' indices the producer draws, handed to the consumers
        ids = tlx.local_alloc((1,), tl.int32, 2)
        ids_full = tlx.alloc_barriers(2, arrive_count=1)
        ids_empty = tlx.alloc_barriers(2, arrive_count=2)
    q_full = tlx.alloc_barriers(NUM_BUF, arrive_count=1)
    do_full = tlx.alloc_barriers(NUM_BUF, arrive_count=1)
    q_empty = tlx.alloc_barriers(NUM_BUF, arrive_count=2)
    do_empty = tlx.alloc_barriers(NUM_BUF, arrive_count=2)

    with tlx.async_tasks():
        with tlx.async_task("default"):                 # the TMA producer
            n_blocks = tl.cdiv(seqlen_k, BLOCK_N)
            n_items = _n_items(sched_ptr, sched_stride, PERSISTENT)
            t0 = n_items * 0                            # the ring's tiles before this item
            if DYNAMIC:            # the first item is the program's id, the next ones are drawn (sched_ptr:
                idx = tl.program_id(0)                  # the counter, sched_stride: the number of items)
                _publish_item(ids, ids_full, ids_empty, 0, idx)
                j = idx * 0
                while idx < sched_stride:
                    nxt = tl.atomic_add(sched_ptr, 1) + tl.num_programs(0)     # drawn now, used after the item
                    item = _dynamic_item(idx, n_blocks, sched_stride, heads_per_section)
                    t0 = _produce_item(item, j, t0, q_desc, k_desc, v_desc, do_desc, lse2_desc, delta_desc, k_smem,
                                       v_smem, q_smem, do_smem, lse2_smem, delta_smem, kv_full, kv_empty, q_full,
                                       q_empty, do_full, do_empty, cu_q_ptr, cu_k_ptr, seqlen_q, seqlen_k, H_KV, qr_b,
                                       qr_h, qc_h, kr_b, kr_h, kc_h, window_left, window_right, HEAD_DIM, BLOCK_M,
                                       BLOCK_N, GROUP, CAUSAL, VARLEN, NUM_BUF, STATS_SMEM, WINDOW)
                    j = j + 1
                    _publish_item(ids, ids_full, ids_empty, j, nxt)
                    idx = nxt
            else:
                for j in range(n_items):
                    item = _item(sched_ptr, sched_stride, j, n_blocks, heads_per_section, PERSISTENT)
                    t0 = _produce_item(item, j, t0, q_desc, k_desc, v_desc, do_desc, lse2_desc, delta_desc, k_smem,
                                       v_smem, q_smem, do_smem, lse2_smem, delta_smem, kv_full, kv_empty, q_full,
                                       q_empty, do_full, do_empty, cu_q_ptr, cu_k_ptr, seqlen_q, seqlen_k, H_KV, qr_b,
                                       qr_h, qc_h, kr_b, kr_h, kc_h, window_left, window_right, HEAD_DIM, BLOCK_M,
                                       BLOCK_N, GROUP, CAUSAL, VARLEN, NUM_BUF, STATS_SMEM, WINDOW)
        with tlx.async_task(num_warps=4, registers=REGISTERS, replicate=2):   # the two consumers
            cid = tlx.async_task_replica_id()
            n_blocks = tl.cdiv(seqlen_k, BLOCK_N)
            n_items = _n_items(sched_ptr, sched_stride, PERSISTENT)
            k_c = tlx.local_slice(k_smem[0], [cid * HALF_N, 0], [HALF_N, HEAD_DIM])
            v_c = tlx.local_slice(v_smem[0], [cid * HALF_N, 0], [HALF_N, HEAD_DIM])
            if SPLIT_COLS:
                dq_col0 = cid * D_BOX
            else:
                dq_col0 = cid * 0
            tl.static_assert(SPLIT_COLS or not DEFER_DQ, "DEFER_DQ needs head dim 128 (every consumer adds each tile)")
            tl.static_assert(not (DRIFT and DEFER_DQ), "DEFER_DQ with DRIFT: a drifting reader adds its tile's dQ halves "
                                                       "at once (a carried tile would take 64 more registers)")
            if DEFER_DQ:           # the previous tile's dQ, added while this tile's S^T runs
                dq = tl.zeros((BLOCK_M, D_BOX), dtype=tl.float32)
            else:
                dq = n_items * 0                        # (a placeholder the items pass on)
            dq_row = n_items * 0
            dq_col = n_items * 0
            t0 = n_items * 0                            # the ring's tiles before this item
            if DYNAMIC:
                j = cid * 0
                idx = _take_item(ids, ids_full, ids_empty, j)
                while idx < sched_stride:
                    item = _dynamic_item(idx, n_blocks, sched_stride, heads_per_section)
                    t0, dq, dq_row, dq_col = _consume_item(
                        item, j, t0, dq, dq_row, dq_col, cid, k_c, v_c, dq_col0, k_smem, q_smem, do_smem, ds_smem,
                        dq_smem, lse2_smem, delta_smem, kv_full, kv_empty, q_full, q_empty, do_full, do_empty, dq_desc,
                        lse2_ptr, delta_ptr, dk_ptr, dv_ptr, cu_q_ptr, cu_k_ptr, seqlen_q, seqlen_k, H_KV, qr_b, qr_h,
                        qc_h, sd_b, sd_h, sdk_b, sdk_h, sdk_r, sdv_b, sdv_h, sdv_r, qk_scale, sm_scale, window_left,
                        window_right, softcap, HEAD_DIM, BLOCK_M, BLOCK_N, GROUP, CAUSAL, VARLEN, NUM_BUF, DTYPE,
                        PREFETCH_STATS, DEFER_DQ, DRIFT, STATS_SMEM, WINDOW, SOFTCAP, DQ_ROWS)
                    j = j + 1
                    idx = _take_item(ids, ids_full, ids_empty, j)
            else:
                for j in range(n_items):
                    item = _item(sched_ptr, sched_stride, j, n_blocks, heads_per_section, PERSISTENT)
                    t0, dq, dq_row, dq_col = _consume_item(
                        item, j, t0, dq, dq_row, dq_col, cid, k_c, v_c, dq_col0, k_smem, q_smem, do_smem, ds_smem,
                        dq_smem, lse2_smem, delta_smem, kv_full, kv_empty, q_full, q_empty, do_full, do_empty, dq_desc,
                        lse2_ptr, delta_ptr, dk_ptr, dv_ptr, cu_q_ptr, cu_k_ptr, seqlen_q, seqlen_k, H_KV, qr_b, qr_h,
                        qc_h, sd_b, sd_h, sdk_b, sdk_h, sdk_r, sdv_b, sdv_h, sdv_r, qk_scale, sm_scale, window_left,
                        window_right, softcap, HEAD_DIM, BLOCK_M, BLOCK_N, GROUP, CAUSAL, VARLEN, NUM_BUF, DTYPE,
                        PREFETCH_STATS, DEFER_DQ, DRIFT, STATS_SMEM, WINDOW, SOFTCAP, DQ_ROWS)
            tlx.async_descriptor_store_wait(0)     # the staging tiles are read before the program ends
