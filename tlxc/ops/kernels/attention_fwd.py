"""The attention forward for Hopper behind ``tlxc.ops.attention``: a TMA producer and two
(or three) wgmma consumer warp groups, persistent programs walking a host-built schedule.

``examples/flash_attention_fwd.py`` (read its docstring for why each piece is there),
generalized:

* 4-D descriptors ``(B, H, S, D)`` with the tensors' own strides, so BHSD and BSHD
  layouts (``x.transpose(1, 2)`` of a ``[B, S, H, D]`` tensor) are read in place.  The
  varlen layout ``[total, H, D]`` is described as ``(1, H, total, D)``: a sequence is a
  row range ``cu_seqlens[b] ..`` of batch 0;
* GQA/MQA: query head ``h`` reads key/value head ``h // GROUP`` (``GROUP = H / Hkv``);
* head dims that are multiples of 8 up to 256: the tiles are ``HEAD_DIM`` (64, 128 or 256) wide and
  loaded as 64-column TMA boxes; the columns past ``D_REAL`` (e.g. 40 -> 64, 96 -> 128, 192 -> 256) are
  outside the descriptor, so TMA fills them with zeros (they add nothing to ``Q Kᵀ`` and
  give zero columns of ``O``, which are not stored).  D >= 192 takes 64-key blocks and one
  Q buffer (shared memory);
* variable length (``VARLEN``): a work item is ``(batch, head, query block)`` over
  ``cdiv(max_seqlen_q, BLOCK_M)`` blocks; the item reads its sequence's offsets and
  lengths from ``cu_seqlens_q/k`` on the device (no host sync); an item past its
  sequence's end does nothing, one whose sequence has no keys stores ``O = 0`` and
  ``lse = -inf``.  Keys past a sequence's end (the next sequence's rows) are masked;
* causal masking is top-left aligned, as ``torch.nn.functional.scaled_dot_product_attention``'s
  ``is_causal``: query ``i`` sees keys ``j <= i`` (when ``Sq != Sk`` too);
* sliding windows (``WIN_LEFT`` / ``WIN_RIGHT``, compile-time, -1 unbounded): query ``i`` sees keys
  ``i - WIN_LEFT .. i + WIN_RIGHT``; an item visits only the key blocks some row of it sees (from
  block ``kb0``, ``attn_item``), the edge blocks are masked, a row that has seen only masked keys
  keeps a finite exponent offset (``finite_max``) and one that saw none stores ``O = 0``,
  ``lse = -inf`` (as does an item whose rows see no key at all);
* logit softcapping (``SOFTCAP``, compile-time): the scores are ``tanh(s * sm_scale / SOFTCAP)``
  (``tanh.approx.f32``) with the exponents in ``SOFTCAP * log2(e)`` units (``capped_scores``);
* ``lse`` (float32, natural log of ``sum_j exp(scale * q_i . k_j)``) is stored with the
  caller's strides: ``[B, H, Sq]`` dense, ``[H, total_q]`` varlen;
* ``PREFETCH`` (opt-in, ``AttnConfig.prefetch``): when the producer starts an item it issues
  L2 prefetches of the next item's Q and first ``PREFETCH`` K/V blocks (TMA
  ``cp.async.bulk.prefetch``: no shared memory, no barrier), so that item's loads hit L2
  (on the H200 7-24% slower at S <= 1024 than without: the extra L2 requests cost more);
* ``O_TMA`` (the dense default for 128-row items; opt-in for varlen): each consumer stages its O
  tile in its own shared buffer and TMA-stores it (full 128-byte lines, one thread issuing)
  instead of 32-bit stores from the accumulator's registers.  TMA clips at the tensor's end, not
  a sequence's, so a varlen consumer whose rows reach past its sequence's end stores them
  through pointers (``store_o_staged``); varlen takes it with one O accumulator (tiles up to
  128 wide).
  256-wide dense tiles (``O_PARTS = 2``) keep O as two 128-column accumulators (``P V`` as two
  wgmma groups, one per column half of the V slot) and stage them in turn through one 64 x 128
  buffer (a 64 x 256 one per consumer does not fit next to Q and the K/V ring);
* ``DIAG_SKIP`` (causal, key blocks smaller than the item; ``AttnConfig.diag_skip``): a
  consumer stops at its own rows' diagonal: the item's later key blocks, fully masked for its
  rows, are not computed; it passes its turns and releases their slots (they are the other
  consumers');
* ``PIN_SOFTMAX`` (opt-in, ``AttnConfig.pin_softmax``): in the key loop ``wait_group(O_PARTS)``
  leaves ``P_{j-1} V`` running while the consumer computes the softmax of ``S_j``, and its
  ``wait_group(0)`` follows in the PTX; but ptxas hoists that wait (``WARPGROUP.DEPBAR.LE gsb0,
  0x0``) above the softmax's register-only arithmetic (no exponential between the two waits in
  the SASS), so the softmax never overlaps the consumer's own product.  A shared store of the
  new ``l_i`` (which needs every exponential of the block) right before the wait, into a
  never-read ``HALF_M``-float buffer per consumer, is a memory operation ptxas keeps before the
  wait: the 64 (64-key blocks: 32) ``MUFU.EX2`` of a block then run between the two waits;
* ``FP8`` (``DTYPE`` e4m3 or e5m2): Q, K and Vᵀ in fp8, ``O`` in ``O_DTYPE``.  wgmma reads an
  8-bit B K-major only, so the host passes Vᵀ (``(B, Hkv, D, S32)``; varlen ``(1, Hkv, D, N)`` with
  sequence ``b`` from column ``cu_v[b]``, a multiple of 32) and each V slot holds a
  ``[HEAD_DIM, BLOCK_N]`` box of it (``v_cols``).  P goes to the tensor cores from registers as
  fp8, read in the accumulator's in-thread key order (``pv_dot``: ``a_k_order="accumulator"``;
  the host's Vᵀ puts each group of 32 keys in that order, ``attention.transposed_v``), so no
  thread exchanges P's bytes with another.  Q/K boxes are 128 columns (128-byte rows; 64 at
  D = 64).  ``DESCALE``: each item loads ``(q_descale * k_descale, v_descale)`` of its
  (sequence, kv head) from ``descale_ptr`` (float32 ``[B * Hkv, 2]``), scaling the scores and ``O``;
* ``EXP_FMA`` (opt-in, ``AttnConfig.exp_fma = k``): the softmax's exponentials with every k-th register
  of a thread on the FMA pipe (``tlx.fast_exp2``), the rest on MUFU;
* ``DIAG`` (benchmarks only, ``AttnConfig.diag``; the output is then wrong): bits that leave one stage
  of an item out, so that its cost is the time difference: 1 no O / lse epilogue, 2 no softmax of the
  first key block (its scores go to ``P V`` as they are), 4 no lone last ``P V`` (its turn and slot
  still pass);
* ``K_AHEAD`` (``AttnConfig.k_ahead``): the producer loads an item's K blocks one ahead of its V blocks
  (``K_0, K_1, V_0, K_2, V_1, ..``), the order the consumers read them in (a turn issues ``S_{j+1}``
  with ``P_j V_j``; under ``S1_AHEAD`` the first turn reads ``K_0`` and ``K_1``).  In the plain order
  (``K_j, V_j``) the load of ``K_1`` waits for ``V_0``'s slot, which the previous item frees late;
* ``EARLY_LSE`` (``AttnConfig.early_lse``; items without ``OVERLAP``): ``1 / l`` and the lse store are issued
  right after the item's last ``P V``, while it runs, instead of after its wait (they need ``m_i`` and ``l_i``
  only);
* ``TRACE`` (benchmarks only, ``attention_forward(trace=...)``): each consumer's first thread and the
  producer's write the cycle counter (``clock64``, the SM's) at the stage boundaries of the program's first
  ``TRACE`` items into ``trace_ptr`` (int64 ``[programs, CONSUMERS + 1, TRACE, TRACE_STAGES]``, the producer
  last; ``TRACE_MARKS`` names the stages), so that a bench reads where an item's cycles go;
* ``S1_AHEAD`` (``AttnConfig.s1_ahead``; dense launches without a mask or window whose keys fill more than
  one block, so that every consumer has two key blocks or more): the first turn of an item issues
  ``S_1 = Q K_1ᵀ`` behind ``S_0``, so the first block's softmax runs while ``S_1`` is computed, and
  block 1's turn issues ``P_0 V_0`` alone.  Without it the first softmax waits on ``S_0`` with
  nothing of its consumer queued behind it.  H100 (session 32): 0.96-0.98 of the time at S = 256,
  D = 64 (``choose_config`` takes it there), 1.02-1.14 at longer S or wider heads;
* ``OVERLAP`` (opt-in): an item's last ``P V`` is not issued alone at the item's end but
  with the next item's first ``S = Q Kᵀ``; its output is stored after that item's first
  softmax, the program's last one after its loop (one issue round fewer per item).

Work item ``t = (b * H + h) * NUM_M + m``; program ``p`` walks row ``p`` of the int32
schedule ``[count, item, item, ...]`` (``tlxc/ops/attention.py`` builds it), each task reading
the next item's entry an item ahead (the global load is off the item boundary's path).  Each
consumer's Q rows have their own full/empty barriers: the producer loads consumer ``c``'s part
of the next Q as soon as ``c`` has issued its last ``S`` of the item, not when both have.
"""
from ... import language as tl
from ...language import tlx
from ...runtime.jit import jit
from .aligns import aligned

D_BOX = 64            # head-dim columns of one TMA box: 64 x 2 bytes = the 128-byte swizzle's span
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
TRACE_STAGES = 16     # cycle-counter slots an item has in a trace (TRACE)
TRACE_MARKS = {       # stage -> what has just happened when the counter is read (consumer rows; producer: P_*)
    0: "item start", 1: "Q arrived", 2: "K arrived", 3: "first turn", 4: "S_0 done", 5: "softmax 0 done",
    6: "P_0 V_0 turn", 7: "S_1 done", 8: "softmax 1 done", 9: "P_0 V_0 done", 10: "key loop done",
    11: "last turn", 12: "last P V done", 13: "epilogue issued"}
TRACE_PRODUCER = {0: "item start", 1: "Q issued", 2: "K_0 issued", 3: "V_0 slot free", 4: "K/V issued"}


@jit
def masked_scores(s, j, row0, seq_k, BLOCK_N: tl.constexpr, HALF_M: tl.constexpr, CAUSAL: tl.constexpr,
                  WIN_LEFT: tl.constexpr = -1, WIN_RIGHT: tl.constexpr = -1):
    """Scores ``s`` of key block ``j`` for query rows ``row0 ..`` (relative to the sequence),
    with the keys at or past ``seq_k``, (causal) the keys after each query and (a window) the
    keys more than ``WIN_LEFT`` before or ``WIN_RIGHT`` after it at -inf (-1: that side
    unbounded).  Only the blocks that reach past ``seq_k``, cross the diagonal or a window's
    edge pay for the mask."""
    if (CAUSAL and j * BLOCK_N + BLOCK_N > row0 + 1) or j * BLOCK_N + BLOCK_N > seq_k or \
            (WIN_LEFT >= 0 and j * BLOCK_N < row0 + HALF_M - 1 - WIN_LEFT) or \
            (WIN_RIGHT >= 0 and j * BLOCK_N + BLOCK_N - 1 > row0 + WIN_RIGHT):
        offs_n = j * BLOCK_N + tl.arange(0, BLOCK_N)
        keep = offs_n[None, :] < seq_k
        if CAUSAL:
            keep = keep & (offs_n[None, :] <= row0 + tl.arange(0, HALF_M)[:, None])
        if WIN_LEFT >= 0:
            keep = keep & (offs_n[None, :] >= row0 + tl.arange(0, HALF_M)[:, None] - WIN_LEFT)
        if WIN_RIGHT >= 0:
            keep = keep & (offs_n[None, :] <= row0 + tl.arange(0, HALF_M)[:, None] + WIN_RIGHT)
        s = tl.where(keep, s, float("-inf"))
    return s


@jit
def load_k(k_desc, k_smem, k_full, k_empty, n, bz, hk, row, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
           NUM_STAGES: tl.constexpr, IN_BOX: tl.constexpr, BOXES: tl.constexpr, ELEM: tl.constexpr):
    """The producer's TMA load of the ring's ``n``-th K block (key rows ``row ..`` of kv head ``hk``)
    into its slot, once the consumers have released the slot."""
    slot, phase = tlx.get_bufidx_phase(n, NUM_STAGES)
    tlx.barrier_wait(k_empty[slot], phase ^ 1)
    tlx.barrier_expect_bytes(k_full[slot], BLOCK_N * HEAD_DIM * ELEM)
    for d in tl.static_range(BOXES):
        k_box = tlx.local_slice(k_smem[slot], [0, d * IN_BOX], [BLOCK_N, IN_BOX])
        tlx.async_descriptor_load(k_desc, k_box, [bz, hk, row, d * IN_BOX], k_full[slot])


@jit
def trace_mark(trace_ptr, rnd, row, STAGE: tl.constexpr, ROWS: tl.constexpr, TRACE: tl.constexpr):
    """(benchmarks, ``TRACE`` > 0) the cycle counter at ``STAGE`` of the program's item ``rnd`` (if
    among its first ``TRACE``) into the trace's row ``row`` (a consumer, or the producer: ``ROWS - 1``)."""
    if TRACE > 0:
        if rnd < TRACE and tlx.thread_id(0) % 128 == 0:     # one writer: a warp group's first thread
            tl.store(trace_ptr + ((tl.program_id(0) * ROWS + row) * TRACE + rnd) * TRACE_STAGES + STAGE,
                     tlx.clock64())


@jit
def capped_scores(s, cap_in, SOFTCAP: tl.constexpr):
    """Logit softcapping (``SOFTCAP > 0``): ``tanh(s * sm_scale / SOFTCAP)``, the capped score over
    ``SOFTCAP`` (the caller's exponent scale is ``SOFTCAP * log2 e``); ``cap_in`` = sm_scale / SOFTCAP."""
    if SOFTCAP > 0:
        s = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [s * cap_in], dtype=tl.float32,
                                      is_pure=True, pack=1)
    return s


@jit
def finite_max(m, WINDOW: tl.constexpr):
    """The running max used as the exponent's offset: under a window a row may have seen only
    masked keys so far (max -inf), whose offset is 0 instead (exp2(-inf - -inf) would be NaN)."""
    if WINDOW:
        m = tl.where(m == float("-inf"), 0.0, m)
    return m


@jit
def inverse_sum(l_i, WINDOW: tl.constexpr):
    """1 / l_i, and 0 for a row that saw no key (under a window): its O is 0."""
    if WINDOW:
        return tl.where(l_i > 0.0, 1.0 / l_i, 0.0)
    return 1.0 / l_i


@jit
def exp2_split(x, EXP_FMA: tl.constexpr):
    """The softmax's ``2 ** x``: ``tl.exp2`` (MUFU), or with ``EXP_FMA = k`` every k-th register of
    a thread on the FMA pipe (``tlx.fast_exp2``)."""
    if EXP_FMA > 0:
        return tlx.fast_exp2(x, EXP_FMA)
    return tl.exp2(x)


@jit
def online_softmax(s, m_i, l_i, qk_i, WINDOW: tl.constexpr, EXP_FMA: tl.constexpr):
    """One key block's step of the online softmax (exponents in log2 units of the scaled scores):
    ``(p, m_new, l_new, alpha)``, where ``alpha`` rescales what O has summed so far."""
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_i)
    m_use = finite_max(m_new, WINDOW)
    alpha = tl.exp2(m_i - m_use)
    p = exp2_split(s * qk_i - m_use[:, None], EXP_FMA)
    return p, m_new, l_i * alpha + tl.sum(p, 1), alpha


@jit
def kept_p(p, DTYPE: tl.constexpr, BLOCK_N: tl.constexpr):
    """P as the softmax leaves it for its P V: a 256-key block's converted to the operand type at once
    (its float32 tile, 128 registers a thread, would otherwise stay live beside the next S's 128 and spill);
    a smaller block's stays float32 until the P V converts it (the order the defaults were measured in)."""
    if BLOCK_N >= 256:
        p = p.to(DTYPE)
    return p


@jit
def o_scale(l_i, v_scale, WINDOW: tl.constexpr, DESCALE: tl.constexpr):
    """What the O accumulator's rows are multiplied by: ``inverse_sum``, times fp8's ``v_scale``."""
    if DESCALE:
        return inverse_sum(l_i, WINDOW) * v_scale
    return inverse_sum(l_i, WINDOW)


@jit
def attn_item(t, NUM_M, H, GROUP, seq_q, seq_k, cu_q_ptr, cu_k_ptr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, VARLEN: tl.constexpr, WIN_LEFT: tl.constexpr = -1,
              WIN_RIGHT: tl.constexpr = -1):
    """Work item ``t``: (first query row in the sequence, batch coordinate of the
    descriptors, query head, key/value head, first query row and first key row in the
    descriptors' row axis, query and key lengths, key blocks to visit: 0 when the item
    has no query rows or, under a window, no key any row sees; the first of them, 0 but
    under a window's left edge)."""
    bh = t // NUM_M
    start_m = (t - bh * NUM_M) * BLOCK_M
    b = bh // H
    h = bh - b * H
    if VARLEN:
        q_row = tl.load(cu_q_ptr + b)
        seq_q = tl.load(cu_q_ptr + b + 1) - q_row
        k_row = tl.load(cu_k_ptr + b)
        seq_k = tl.load(cu_k_ptr + b + 1) - k_row
        bz = b * 0
    else:
        q_row = b * 0
        k_row = b * 0
        bz = b
    if CAUSAL:
        kv_end = tl.minimum(seq_k, start_m + BLOCK_M)                    # blocks above the diagonal: skipped
    else:
        kv_end = seq_k
    if WIN_RIGHT >= 0:                                                  # blocks past the window: skipped
        kv_end = tl.minimum(kv_end, start_m + BLOCK_M + WIN_RIGHT)
    kb0 = 0
    if WIN_LEFT >= 0:                                                   # blocks before the window: skipped
        kb0 = tl.maximum(start_m - WIN_LEFT, 0) // BLOCK_N
        n_blocks = tl.where((start_m < seq_q) & (kv_end > kb0 * BLOCK_N), tl.cdiv(kv_end, BLOCK_N) - kb0, 0)
    else:
        n_blocks = tl.where(start_m < seq_q, tl.cdiv(kv_end, BLOCK_N), 0)
    return start_m, bz, h, h // GROUP, q_row, k_row, seq_q, seq_k, n_blocks, kb0


@jit
def prefetch_item(q_desc, k_desc, v_desc, t, NUM_M, H, GROUP, seq_q, seq_k, cu_q_ptr, cu_k_ptr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, VARLEN: tl.constexpr, CONSUMERS: tl.constexpr,
                  BOXES: tl.constexpr, PREFETCH: tl.constexpr, WIN_LEFT: tl.constexpr = -1,
                  WIN_RIGHT: tl.constexpr = -1):
    """L2 prefetches (no shared memory, no barrier) of work item ``t``'s Q tile and its
    first ``PREFETCH`` K and V blocks: the producer issues them an item ahead of its own
    loads, so those hit L2 instead of waiting for HBM."""
    start_m, bz, h, hk, q_row, k_row, _sq, _sk, n_blocks, kb0 = attn_item(
        t, NUM_M, H, GROUP, seq_q, seq_k, cu_q_ptr, cu_k_ptr, BLOCK_M, BLOCK_N, CAUSAL, VARLEN, WIN_LEFT, WIN_RIGHT)
    if WIN_LEFT >= 0:
        k_row = k_row + kb0 * BLOCK_N
    if n_blocks > 0:
        for c in tl.static_range(CONSUMERS):
            for d in tl.static_range(BOXES):
                tlx.async_descriptor_prefetch_tensor(q_desc, [bz, h, q_row + start_m + c * 64, d * D_BOX])
        for j in range(tl.minimum(n_blocks, PREFETCH)):
            for d in tl.static_range(BOXES):
                tlx.async_descriptor_prefetch_tensor(k_desc, [bz, hk, k_row + j * BLOCK_N, d * D_BOX])
                tlx.async_descriptor_prefetch_tensor(v_desc, [bz, hk, k_row + j * BLOCK_N, d * D_BOX])


@jit
def store_o(o_ptr, o, bz, h, q_row, row0, sq, stride_ob, stride_oh, stride_os,
            D_REAL: tl.constexpr, HEAD_DIM: tl.constexpr, HALF_M: tl.constexpr):
    """Store one consumer's ``HALF_M`` rows of ``o`` (its first ``D_REAL`` columns): rows
    ``row0 ..`` of the sequence, those below its length ``sq``."""
    offs_m = row0 + tl.arange(0, HALF_M)
    offs_d = tl.arange(0, HEAD_DIM)
    o_base = o_ptr + bz.to(tl.int64) * stride_ob + h.to(tl.int64) * stride_oh + q_row.to(tl.int64) * stride_os
    if D_REAL == HEAD_DIM:
        mask = offs_m[:, None] < sq
    else:
        mask = (offs_m[:, None] < sq) & (offs_d[None, :] < D_REAL)
    tl.store(o_base + offs_m[:, None] * stride_os + offs_d[None, :], o, mask=mask)


@jit
def store_o_tma(o_desc, o_buf, o, bz, h, row, COL0: tl.constexpr, O_COLS: tl.constexpr, D_REAL: tl.constexpr,
                HALF_M: tl.constexpr):
    """``O_TMA``: ``O_COLS`` columns (from ``COL0``) of one consumer's rows of ``o`` through its
    shared buffer and TMA stores of the 64-column boxes that start below ``D_REAL``, at descriptor
    row ``row`` (TMA clips the rows past the tensor's end and the columns past ``D_REAL``).  The
    buffer's previous store must have read it first."""
    tlx.async_descriptor_store_wait(0)
    tlx.local_store(o_buf, o)
    tlx.fence("async_shared")
    for d in tl.static_range(O_COLS // D_BOX):
        if COL0 + d * D_BOX < D_REAL:
            tlx.async_descriptor_store(o_desc, tlx.local_slice(o_buf, [0, d * D_BOX], [HALF_M, D_BOX]),
                                       [bz, h, row, COL0 + d * D_BOX])


@jit
def store_o_staged(o_desc, o_buf, o_ptr, o, bz, h, q_row, row0, sq, stride_ob, stride_oh, stride_os,
                   D_REAL: tl.constexpr, HEAD_DIM: tl.constexpr, HALF_M: tl.constexpr, VARLEN: tl.constexpr):
    """``O_TMA`` with one O accumulator: one consumer's rows of ``o`` TMA-stored, except a varlen
    item's rows that reach past its sequence's end (TMA clips only at the tensor's end, so the
    box would write the next sequence's first rows): those take the pointer stores."""
    if VARLEN:
        if row0 + HALF_M <= sq:
            store_o_tma(o_desc, o_buf, o, bz, h, q_row + row0, 0, HEAD_DIM, D_REAL, HALF_M)
        else:
            store_o(o_ptr, o, bz, h, q_row, row0, sq, stride_ob, stride_oh, stride_os, D_REAL, HEAD_DIM, HALF_M)
    else:
        store_o_tma(o_desc, o_buf, o, bz, h, q_row + row0, 0, HEAD_DIM, D_REAL, HALF_M)


@jit
def v_cols(v_buf, COL0: tl.constexpr, COLS: tl.constexpr, BLOCK_N: tl.constexpr, FP8: tl.constexpr):
    """Columns ``COL0 ..`` (``COLS`` of them) of a V slot as the ``[BLOCK_N, COLS]`` B operand of
    ``P V``: a slice of the ``[BLOCK_N, HEAD_DIM]`` slot, or (``FP8``: the slot holds Vᵀ,
    ``[HEAD_DIM, BLOCK_N]``, because wgmma reads 8-bit B K-major only) the transposed view of
    its rows ``COL0 ..``."""
    if FP8:
        return tlx.local_trans(tlx.local_slice(v_buf, [COL0, 0], [COLS, BLOCK_N]))
    return tlx.local_slice(v_buf, [0, COL0], [BLOCK_N, COLS])


@jit
def pv_dot(p, b, acc, FP8: tl.constexpr):
    """One ``P V`` wgmma group; fp8 P is read in the accumulator's in-thread key order, which the
    host's Vᵀ follows (``attention.transposed_v``): no exchange of P between threads."""
    if FP8:
        return tlx.async_dot(p, b, acc, a_k_order="accumulator")
    return tlx.async_dot(p, b, acc)


@jit
def pv(p, v_buf, acc, FP8: tl.constexpr):
    """``O += P V`` on the whole V slot (a Vᵀ slot under ``FP8``: ``v_cols``)."""
    if FP8:
        return pv_dot(p, tlx.local_trans(v_buf), acc, FP8)
    return pv_dot(p, v_buf, acc, FP8)


@jit
def pv_halves(p, v_buf, acc, acc_hi, BLOCK_N: tl.constexpr, O_COLS: tl.constexpr, FP8: tl.constexpr = False):
    """``O_PARTS == 2``: issue ``O += P V`` as two wgmma groups, one per ``O_COLS``-column half
    of ``V``, each into its own accumulator (``acc``: columns ``0 ..``, ``acc_hi``: the rest)."""
    acc = pv_dot(p, v_cols(v_buf, 0, O_COLS, BLOCK_N, FP8), acc, FP8)
    acc_hi = pv_dot(p, v_cols(v_buf, O_COLS, O_COLS, BLOCK_N, FP8), acc_hi, FP8)
    return acc, acc_hi


@jit
def store_lse(lse_ptr, lse, bz, h, q_row, row0, sq, stride_lb, stride_lh, HALF_M: tl.constexpr):
    """Store the log-sum-exp of the same rows."""
    offs_m = row0 + tl.arange(0, HALF_M)
    lse_base = lse_ptr + bz.to(tl.int64) * stride_lb + h.to(tl.int64) * stride_lh + q_row
    tl.store(lse_base + offs_m, lse, mask=offs_m < sq)


@jit
def attn_fwd_kernel(q_desc, k_desc, v_desc, o_desc, o_ptr, lse_ptr, cu_q_ptr, cu_k_ptr, cu_v_ptr, descale_ptr,
                    seq_q, seq_k, H, GROUP, NUM_M, qk_scale: tl.float32,
                    stride_ob, stride_oh, stride_os, stride_lb, stride_lh,
                    sched_ptr, sched_stride, trace_ptr,
                    D_REAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    NUM_STAGES: tl.constexpr, Q_BUFS: tl.constexpr, CAUSAL: tl.constexpr,
                    VARLEN: tl.constexpr, DTYPE: tl.constexpr, REGISTERS: tl.constexpr,
                    OVERLAP: tl.constexpr = False, PREFETCH: tl.constexpr = 0, O_TMA: tl.constexpr = False,
                    O_PARTS: tl.constexpr = 1, DIAG_SKIP: tl.constexpr = False, PIN_SOFTMAX: tl.constexpr = False,
                    WIN_LEFT: tl.constexpr = -1, WIN_RIGHT: tl.constexpr = -1, SOFTCAP: tl.constexpr = 0.0,
                    FP8: tl.constexpr = False, O_DTYPE: tl.constexpr = None, DESCALE: tl.constexpr = False,
                    EXP_FMA: tl.constexpr = 0, SKEW: tl.constexpr = False, O_ALIGN: tl.constexpr = 1,
                    DIAG: tl.constexpr = 0, S1_AHEAD: tl.constexpr = False, TRACE: tl.constexpr = 0,
                    K_AHEAD: tl.constexpr = False, EARLY_LSE: tl.constexpr = False):
    HALF_M: tl.constexpr = 64                                               # query rows of one consumer
    WINDOW: tl.constexpr = WIN_LEFT >= 0 or WIN_RIGHT >= 0                  # a row may see no key (o = 0)
    O_COLS: tl.constexpr = HEAD_DIM // O_PARTS                              # columns of one O accumulator
    tl.static_assert(O_PARTS == 1 or (O_PARTS == 2 and O_TMA and not OVERLAP),
                     "O_PARTS = 2 (two O accumulators) is for the TMA-stored epilogue without OVERLAP")
    tl.static_assert(not DIAG_SKIP or (CAUSAL and not OVERLAP), "DIAG_SKIP is for causal items without OVERLAP")
    tl.static_assert(DIAG == 0 or not OVERLAP, "DIAG (a diagnostic) leaves stages of the non-overlapped item out")
    tl.static_assert(not S1_AHEAD or not (OVERLAP or CAUSAL or VARLEN or WIN_LEFT >= 0 or WIN_RIGHT >= 0),
                     "S1_AHEAD needs two key blocks for every consumer: dense, no mask, no window, no overlap")
    tl.static_assert(not (EARLY_LSE and OVERLAP), "EARLY_LSE is for items without OVERLAP (which stores the lse early)")
    CONSUMERS: tl.constexpr = BLOCK_M // HALF_M
    ROWS: tl.constexpr = CONSUMERS + 1                                      # a trace's rows: consumers, producer
    ELEM: tl.constexpr = 1 if FP8 else 2                                    # bytes of an input element
    IN_BOX: tl.constexpr = (128 if HEAD_DIM >= 128 else 64) if FP8 else D_BOX    # Q/K box: <= 128-byte rows
    BOXES: tl.constexpr = HEAD_DIM // IN_BOX
    OUT: tl.constexpr = DTYPE if O_DTYPE is None else O_DTYPE               # O's element type
    q_smem = tlx.local_alloc((HALF_M, HEAD_DIM), DTYPE, Q_BUFS * CONSUMERS)  # [CONSUMERS * q buffer + consumer]
    k_smem = tlx.local_alloc((BLOCK_N, HEAD_DIM), DTYPE, NUM_STAGES)
    if FP8:     # Vᵀ slots (wgmma reads an 8-bit B K-major only; the host passes Vᵀ)
        v_smem = tlx.local_alloc((HEAD_DIM, BLOCK_N), DTYPE, NUM_STAGES)
    else:
        v_smem = tlx.local_alloc((BLOCK_N, HEAD_DIM), DTYPE, NUM_STAGES)
    if O_TMA:
        o_smem = tlx.local_alloc((HALF_M, O_COLS), OUT, CONSUMERS)          # each consumer's O staging tile
    if PIN_SOFTMAX:
        pin_smem = tlx.local_alloc((HALF_M,), tl.float32, CONSUMERS)        # each consumer's l_i, never read
    q_full = tlx.alloc_barriers(Q_BUFS * CONSUMERS, arrive_count=1)         # [CONSUMERS * q buffer + consumer]:
    q_empty = tlx.alloc_barriers(Q_BUFS * CONSUMERS, arrive_count=1)        # each consumer's Q rows on their own
    k_full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    v_full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    k_empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=CONSUMERS)        # every consumer releases a K slot...
    v_empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=CONSUMERS)        # ...and, later, the V slot

    my_row = tl.program_id(0) * sched_stride                               # this program's [count, items...]

    with tlx.async_tasks():
        with tlx.async_task("default"):                                     # the TMA producer
            kv = 0                                                          # K/V blocks streamed so far
            qi = 0                                                          # Q tiles loaded so far
            count = tl.load(sched_ptr + my_row)
            t_next = tl.load(sched_ptr + my_row + 1)                        # (a row has at least one slot)
            for rnd in range(count):                                        # this program's items
                t = t_next                                                  # read an item ahead: no load on
                t_next = tl.load(sched_ptr + my_row + 1 + tl.minimum(rnd + 1, count - 1))   # the item's path
                trace_mark(trace_ptr, rnd, CONSUMERS, 0, ROWS, TRACE)
                start_m, bz, h, hk, q_row, k_row, sq, sk, n_blocks, kb0 = attn_item(
                    t, NUM_M, H, GROUP, seq_q, seq_k, cu_q_ptr, cu_k_ptr, BLOCK_M, BLOCK_N, CAUSAL, VARLEN, WIN_LEFT,
                    WIN_RIGHT)
                v_row = k_row
                if FP8 and VARLEN:      # Vᵀ's sequences start on 32-aligned columns of their own (cu_v)
                    v_row = tl.load(cu_v_ptr + (t // NUM_M) // H)
                if WIN_LEFT >= 0:                                           # the item's first key block
                    k_row = k_row + kb0 * BLOCK_N
                    v_row = v_row + kb0 * BLOCK_N
                if PREFETCH > 0:
                    if rnd + 1 < count:
                        prefetch_item(q_desc, k_desc, v_desc, tl.load(sched_ptr + my_row + 2 + rnd), NUM_M, H, GROUP,
                                      seq_q, seq_k, cu_q_ptr, cu_k_ptr, BLOCK_M, BLOCK_N, CAUSAL, VARLEN, CONSUMERS,
                                      BOXES, PREFETCH, WIN_LEFT, WIN_RIGHT)
                if n_blocks > 0:
                    qb, q_phase = tlx.get_bufidx_phase(qi, Q_BUFS)          # this item's Q buffer
                    for c in tl.static_range(CONSUMERS):    # consumer c's rows, once it (not all) is done
                        tlx.barrier_wait(q_empty[qb * CONSUMERS + c], q_phase ^ 1)
                        tlx.barrier_expect_bytes(q_full[qb * CONSUMERS + c], HALF_M * HEAD_DIM * ELEM)
                        for d in tl.static_range(BOXES):
                            q_box = tlx.local_slice(q_smem[qb * CONSUMERS + c], [0, d * IN_BOX], [HALF_M, IN_BOX])
                            tlx.async_descriptor_load(q_desc, q_box, [bz, h, q_row + start_m + c * HALF_M, d * IN_BOX],
                                                      q_full[qb * CONSUMERS + c])
                    trace_mark(trace_ptr, rnd, CONSUMERS, 1, ROWS, TRACE)
                    if K_AHEAD:     # K_0 first; K_{j+1} before V_j below (a turn reads K_{j+1} with V_j)
                        load_k(k_desc, k_smem, k_full, k_empty, kv, bz, hk, k_row, BLOCK_N, HEAD_DIM, NUM_STAGES, IN_BOX,
                               BOXES, ELEM)
                        trace_mark(trace_ptr, rnd, CONSUMERS, 2, ROWS, TRACE)
                    for j in range(n_blocks):
                        slot, phase = tlx.get_bufidx_phase(kv + j, NUM_STAGES)
                        if K_AHEAD:
                            if j + 1 < n_blocks:
                                load_k(k_desc, k_smem, k_full, k_empty, kv + j + 1, bz, hk, k_row + (j + 1) * BLOCK_N,
                                       BLOCK_N, HEAD_DIM, NUM_STAGES, IN_BOX, BOXES, ELEM)
                        else:
                            load_k(k_desc, k_smem, k_full, k_empty, kv + j, bz, hk, k_row + j * BLOCK_N, BLOCK_N,
                                   HEAD_DIM, NUM_STAGES, IN_BOX, BOXES, ELEM)
                            if TRACE > 0 and j == 0:        # (no code at all without a trace)
                                trace_mark(trace_ptr, rnd, CONSUMERS, 2, ROWS, TRACE)
                        tlx.barrier_wait(v_empty[slot], phase ^ 1)
                        if TRACE > 0 and j == 0:
                            trace_mark(trace_ptr, rnd, CONSUMERS, 3, ROWS, TRACE)
                        tlx.barrier_expect_bytes(v_full[slot], BLOCK_N * HEAD_DIM * ELEM)
                        if FP8:     # one [HEAD_DIM, BLOCK_N] box of Vᵀ (B, Hkv, D, S): keys along its rows
                            tlx.async_descriptor_load(v_desc, v_smem[slot], [bz, hk, 0, v_row + j * BLOCK_N],
                                                      v_full[slot])
                        else:
                            for d in tl.static_range(BOXES):
                                v_box = tlx.local_slice(v_smem[slot], [0, d * D_BOX], [BLOCK_N, D_BOX])
                                tlx.async_descriptor_load(v_desc, v_box, [bz, hk, k_row + j * BLOCK_N, d * D_BOX],
                                                          v_full[slot])
                    kv += n_blocks
                    qi += 1
                    trace_mark(trace_ptr, rnd, CONSUMERS, 4, ROWS, TRACE)
        with tlx.async_task(num_warps=4, registers=REGISTERS, replicate=CONSUMERS):  # softmax/wgmma consumers
            cid = tlx.async_task_replica_id()
            stride_ob = aligned(stride_ob, O_ALIGN)                         # the host's facts of O's strides
            stride_oh = aligned(stride_oh, O_ALIGN)                         # (attention.stride_align): vector
            stride_os = aligned(stride_os, O_ALIGN)                         # pointer stores at D = 40, 72, ..
            if SOFTCAP > 0:     # scores tanh(s * sm_scale / SOFTCAP), exponents in SOFTCAP * log2(e) units
                cap_in = qk_scale * (1.0 / (LOG2E * SOFTCAP))
                qk = SOFTCAP * LOG2E
            else:
                cap_in = qk_scale
                qk = qk_scale
            turn = 9 + cid                                                 # named barrier: my turn to issue
            next_turn = 9 + (cid + 1) % CONSUMERS                          # the next consumer's
            zeros = tl.zeros((HALF_M, BLOCK_N), dtype=tl.float32)
            if cid == CONSUMERS - 1:
                tlx.named_barrier_arrive(9, 256)                           # consumer 0 issues first
            if SKEW and cid == 1:   # my first turn passed: I issue one turn behind consumer 0 from here on, so
                tlx.named_barrier_wait(turn, 256)                          # an item's first softmax of either
                tlx.named_barrier_arrive(next_turn, 256)                   # runs beside the other's products
            kv = 0                                                          # K/V blocks consumed so far
            qi = 0                                                          # Q tiles consumed so far
            if OVERLAP:     # the previous item's last P V, issued with this item's first S = Q K^T
                pending = 0                                                 # 1: there is one
                acc_prev = tl.zeros((HALF_M, HEAD_DIM), dtype=tl.float32)
                p_prev = tl.zeros((HALF_M, BLOCK_N), dtype=DTYPE)
                inv_l_prev = tl.zeros((HALF_M,), dtype=tl.float32)
                pv_slot = 0
                pv_phase = 0
                bz_p = 0
                h_p = 0
                q_row_p = 0
                row0_p = 0
                sq_p = 0
            count = tl.load(sched_ptr + my_row)
            t_next = tl.load(sched_ptr + my_row + 1)
            for rnd in range(count):                                        # this program's items
                t = t_next
                t_next = tl.load(sched_ptr + my_row + 1 + tl.minimum(rnd + 1, count - 1))
                start_m, bz, h, hk, q_row, k_row, sq, sk, n_blocks, kb0 = attn_item(
                    t, NUM_M, H, GROUP, seq_q, seq_k, cu_q_ptr, cu_k_ptr, BLOCK_M, BLOCK_N, CAUSAL, VARLEN, WIN_LEFT,
                    WIN_RIGHT)
                row0 = start_m + cid * HALF_M                               # my first row in the sequence
                trace_mark(trace_ptr, rnd, cid, 0, ROWS, TRACE)
                qk_i = qk
                cap_i = cap_in
                v_scale = 1.0
                if DESCALE:     # fp8: (q_descale * k_descale, v_descale) of (batch, kv head); (varlen: bz is 0)
                    ds = descale_ptr + ((t // NUM_M) // H * (H // GROUP) + hk) * 2
                    cap_i = cap_in * tl.load(ds)
                    if SOFTCAP == 0:
                        qk_i = cap_i
                    v_scale = tl.load(ds + 1)
                if DIAG_SKIP:       # my rows' key blocks: those up to my own last row's diagonal
                    my_blocks = tl.cdiv(tl.minimum(sk, row0 + HALF_M), BLOCK_N)
                    if WIN_LEFT >= 0:
                        my_blocks = my_blocks - kb0
                else:
                    my_blocks = n_blocks
                if n_blocks > 0:
                    qb, q_phase = tlx.get_bufidx_phase(qi, Q_BUFS)
                    q = q_smem[qb * CONSUMERS + cid]
                    tlx.barrier_wait(q_full[qb * CONSUMERS + cid], q_phase)
                    trace_mark(trace_ptr, rnd, cid, 1, ROWS, TRACE)
                    # key block 0: S = Q K^T and its softmax (m, l in log2 units of the scaled scores)
                    slot, phase = tlx.get_bufidx_phase(kv, NUM_STAGES)
                    tlx.barrier_wait(k_full[slot], phase)
                    if S1_AHEAD:    # block 1's K too: its S is issued in this turn, behind S_0
                        slot1, phase1 = tlx.get_bufidx_phase(kv + 1, NUM_STAGES)
                        tlx.barrier_wait(k_full[slot1], phase1)
                    if OVERLAP:     # (on a program's first item: this item's first V, slot 0, phase 0)
                        tlx.barrier_wait(v_full[pv_slot], pv_phase)
                    trace_mark(trace_ptr, rnd, cid, 2, ROWS, TRACE)
                    tlx.named_barrier_wait(turn, 256)                      # my turn on the tensor cores
                    trace_mark(trace_ptr, rnd, cid, 3, ROWS, TRACE)
                    s = tlx.async_dot(q, tlx.local_trans(k_smem[slot]), zeros, use_acc=False)
                    if S1_AHEAD:
                        s1 = tlx.async_dot(q, tlx.local_trans(k_smem[slot1]), zeros, use_acc=False)
                    if OVERLAP:     # (on a program's first item a product of zeros, never stored)
                        acc_prev = pv(p_prev, v_smem[pv_slot], acc_prev, FP8)
                    tlx.named_barrier_arrive(next_turn, 256)               # the next consumer's turn
                    if OVERLAP or S1_AHEAD:
                        s = tlx.async_dot_wait(1, s)                        # the previous P V / S_1 may run on
                    else:
                        s = tlx.async_dot_wait(0, s)
                    trace_mark(trace_ptr, rnd, cid, 4, ROWS, TRACE)
                    tlx.barrier_arrive(k_empty[slot])
                    s = capped_scores(s, cap_i, SOFTCAP)
                    s = masked_scores(s, kb0, row0, sk, BLOCK_N, HALF_M, CAUSAL, WIN_LEFT, WIN_RIGHT)
                    if DIAG & 2:    # (diagnostic) the first block's softmax left out
                        m_i = tl.zeros((HALF_M,), dtype=tl.float32)
                        p = s
                        l_i = tl.full((HALF_M,), 1.0, tl.float32)
                    else:
                        m_i = tl.max(s, 1) * qk_i
                        p = exp2_split(s * qk_i - finite_max(m_i, WINDOW)[:, None], EXP_FMA)
                        l_i = tl.sum(p, 1)
                    p = kept_p(p, DTYPE, BLOCK_N)
                    trace_mark(trace_ptr, rnd, cid, 5, ROWS, TRACE)
                    if OVERLAP:
                        if PIN_SOFTMAX:     # (as in the key loop) the softmax stays above the wait below
                            tlx.local_store(pin_smem[cid], l_i)
                        acc_prev = tlx.async_dot_wait(0, acc_prev)
                        if pending:
                            tlx.barrier_arrive(v_empty[pv_slot])
                            if O_TMA:
                                store_o_staged(o_desc, o_smem[cid], o_ptr, (acc_prev * inv_l_prev[:, None]).to(OUT),
                                               bz_p, h_p, q_row_p, row0_p, sq_p, stride_ob, stride_oh, stride_os,
                                               D_REAL, HEAD_DIM, HALF_M, VARLEN)
                            else:
                                store_o(o_ptr, (acc_prev * inv_l_prev[:, None]).to(OUT), bz_p, h_p, q_row_p,
                                        row0_p, sq_p, stride_ob, stride_oh, stride_os, D_REAL, HEAD_DIM, HALF_M)
                    acc = tl.zeros((HALF_M, O_COLS), dtype=tl.float32)
                    if O_PARTS == 2:
                        acc_hi = tl.zeros((HALF_M, O_COLS), dtype=tl.float32)
                    if S1_AHEAD:    # block 1, its S issued with S_0: this turn issues P_0 V_0 alone
                        tlx.barrier_wait(v_full[slot], phase)
                        tlx.named_barrier_wait(turn, 256)
                        trace_mark(trace_ptr, rnd, cid, 6, ROWS, TRACE)
                        if O_PARTS == 2:
                            acc, acc_hi = pv_halves(p.to(DTYPE), v_smem[slot], acc, acc_hi, BLOCK_N, O_COLS, FP8)
                        else:
                            acc = pv(p.to(DTYPE), v_smem[slot], acc, FP8)
                        tlx.named_barrier_arrive(next_turn, 256)
                        s = tlx.async_dot_wait(O_PARTS, s1)                 # S_1 is done, P_0 V_0 may run on
                        trace_mark(trace_ptr, rnd, cid, 7, ROWS, TRACE)
                        tlx.barrier_arrive(k_empty[slot1])
                        s = capped_scores(s, cap_i, SOFTCAP)
                        s = masked_scores(s, 1, row0, sk, BLOCK_N, HALF_M, CAUSAL, WIN_LEFT, WIN_RIGHT)
                        p, m_i, l_i, alpha = online_softmax(s, m_i, l_i, qk_i, WINDOW, EXP_FMA)
                        p = kept_p(p, DTYPE, BLOCK_N)
                        trace_mark(trace_ptr, rnd, cid, 8, ROWS, TRACE)
                        if PIN_SOFTMAX:
                            tlx.local_store(pin_smem[cid], l_i)
                        acc = tlx.async_dot_wait(0, acc)
                        trace_mark(trace_ptr, rnd, cid, 9, ROWS, TRACE)
                        if O_PARTS == 2:
                            acc_hi = tlx.async_dot_wait(0, acc_hi)
                            acc_hi = acc_hi * alpha[:, None]
                        tlx.barrier_arrive(v_empty[slot])
                        acc = acc * alpha[:, None]
                    # block j: issue S_j = Q K_j^T, then O += P_{j-1} V_{j-1}; the softmax of S_j runs
                    # while the tensor cores do the P V product
                    for j in range(2 if S1_AHEAD else 1, my_blocks):
                        slot, phase = tlx.get_bufidx_phase(kv + j, NUM_STAGES)
                        prev, prev_phase = tlx.get_bufidx_phase(kv + j - 1, NUM_STAGES)
                        tlx.barrier_wait(k_full[slot], phase)
                        tlx.barrier_wait(v_full[prev], prev_phase)
                        tlx.named_barrier_wait(turn, 256)
                        s = tlx.async_dot(q, tlx.local_trans(k_smem[slot]), zeros, use_acc=False)
                        if O_PARTS == 2:
                            acc, acc_hi = pv_halves(p.to(DTYPE), v_smem[prev], acc, acc_hi, BLOCK_N, O_COLS, FP8)
                        else:
                            acc = pv(p.to(DTYPE), v_smem[prev], acc, FP8)
                        tlx.named_barrier_arrive(next_turn, 256)
                        s = tlx.async_dot_wait(O_PARTS, s)                  # S_j is done, P V may run on
                        tlx.barrier_arrive(k_empty[slot])
                        s = capped_scores(s, cap_i, SOFTCAP)
                        jb = j                                              # the key block in the sequence
                        if WIN_LEFT >= 0:
                            jb = kb0 + j
                        s = masked_scores(s, jb, row0, sk, BLOCK_N, HALF_M, CAUSAL, WIN_LEFT, WIN_RIGHT)
                        p, m_i, l_i, alpha = online_softmax(s, m_i, l_i, qk_i, WINDOW, EXP_FMA)
                        p = kept_p(p, DTYPE, BLOCK_N)
                        if PIN_SOFTMAX:     # a shared store of l_i holds the softmax above the wait below
                            tlx.local_store(pin_smem[cid], l_i)
                        acc = tlx.async_dot_wait(0, acc)
                        if O_PARTS == 2:
                            acc_hi = tlx.async_dot_wait(0, acc_hi)
                            acc_hi = acc_hi * alpha[:, None]
                        tlx.barrier_arrive(v_empty[prev])
                        acc = acc * alpha[:, None]
                    trace_mark(trace_ptr, rnd, cid, 10, ROWS, TRACE)
                    tlx.barrier_arrive(q_empty[qb * CONSUMERS + cid])       # my every S of this item is done
                    last, last_phase = tlx.get_bufidx_phase(kv + my_blocks - 1, NUM_STAGES)
                    if OVERLAP:     # the last P V waits for the next item's first S
                        store_lse(lse_ptr, (m_i + tl.log2(l_i)) * LN2, bz, h, q_row, row0, sq, stride_lb,
                                  stride_lh, HALF_M)
                        acc_prev = acc
                        p_prev = p.to(DTYPE)
                        inv_l_prev = o_scale(l_i, v_scale, WINDOW, DESCALE)
                        pv_slot = last
                        pv_phase = last_phase
                        bz_p = bz
                        h_p = h
                        q_row_p = q_row
                        row0_p = row0
                        sq_p = sq
                        pending = 1
                    else:
                        tlx.barrier_wait(v_full[last], last_phase)
                        tlx.named_barrier_wait(turn, 256)
                        trace_mark(trace_ptr, rnd, cid, 11, ROWS, TRACE)
                        if (DIAG & 4) == 0:     # (the diagnostic without the lone last P V passes the turn)
                            if O_PARTS == 2:
                                acc, acc_hi = pv_halves(p.to(DTYPE), v_smem[last], acc, acc_hi, BLOCK_N, O_COLS, FP8)
                            else:
                                acc = pv(p.to(DTYPE), v_smem[last], acc, FP8)
                        tlx.named_barrier_arrive(next_turn, 256)
                        if EARLY_LSE:   # while the last P V runs: 1 / l and the lse (they need m_i and l_i only)
                            inv_l = o_scale(l_i, v_scale, WINDOW, DESCALE)
                            if (DIAG & 1) == 0:
                                store_lse(lse_ptr, (m_i + tl.log2(l_i)) * LN2, bz, h, q_row, row0, sq, stride_lb,
                                          stride_lh, HALF_M)
                        if (DIAG & 4) == 0:
                            acc = tlx.async_dot_wait(0, acc)
                            if O_PARTS == 2:
                                acc_hi = tlx.async_dot_wait(0, acc_hi)
                        trace_mark(trace_ptr, rnd, cid, 12, ROWS, TRACE)
                        tlx.barrier_arrive(v_empty[last])      # (before the skipped blocks: their V may need it)
                        if DIAG_SKIP:   # the blocks past my diagonal (the other consumers' rows need them):
                            for j in range(my_blocks, n_blocks):    # my turns passed on, the slots released
                                tlx.named_barrier_wait(turn, 256)
                                tlx.named_barrier_arrive(next_turn, 256)
                                slot, phase = tlx.get_bufidx_phase(kv + j, NUM_STAGES)
                                tlx.barrier_wait(k_full[slot], phase)
                                tlx.barrier_arrive(k_empty[slot])
                                tlx.barrier_wait(v_full[slot], phase)
                                tlx.barrier_arrive(v_empty[slot])
                        if (DIAG & 1) == 0:     # (the diagnostic without the epilogue stores nothing)
                            if not EARLY_LSE:
                                inv_l = o_scale(l_i, v_scale, WINDOW, DESCALE)
                            if O_TMA:
                                if O_PARTS == 2:          # (dense only) the buffer twice, a half at a time
                                    store_o_tma(o_desc, o_smem[cid], (acc * inv_l[:, None]).to(OUT), bz, h, q_row + row0,
                                                0, O_COLS, D_REAL, HALF_M)
                                    store_o_tma(o_desc, o_smem[cid], (acc_hi * inv_l[:, None]).to(OUT), bz, h,
                                                q_row + row0, O_COLS, O_COLS, D_REAL, HALF_M)
                                else:
                                    store_o_staged(o_desc, o_smem[cid], o_ptr, (acc * inv_l[:, None]).to(OUT), bz, h,
                                                   q_row, row0, sq, stride_ob, stride_oh, stride_os, D_REAL, HEAD_DIM,
                                                   HALF_M, VARLEN)
                            else:
                                store_o(o_ptr, (acc * inv_l[:, None]).to(OUT), bz, h, q_row, row0, sq, stride_ob,
                                        stride_oh, stride_os, D_REAL, HEAD_DIM, HALF_M)
                            if not EARLY_LSE:
                                store_lse(lse_ptr, (m_i + tl.log2(l_i)) * LN2, bz, h, q_row, row0, sq, stride_lb,
                                          stride_lh, HALF_M)
                        trace_mark(trace_ptr, rnd, cid, 13, ROWS, TRACE)
                    kv += n_blocks
                    qi += 1
                elif VARLEN or WINDOW:
                    if start_m < sq:                                        # rows, but no keys: O = 0, lse = -inf
                        store_o(o_ptr, tl.zeros((HALF_M, HEAD_DIM), dtype=OUT), bz, h, q_row, row0, sq, stride_ob,
                                stride_oh, stride_os, D_REAL, HEAD_DIM, HALF_M)
                        store_lse(lse_ptr, tl.full((HALF_M,), float("-inf"), tl.float32), bz, h, q_row, row0, sq,
                                  stride_lb, stride_lh, HALF_M)
            if OVERLAP:
                if pending:                                                 # the last item's last P V
                    tlx.barrier_wait(v_full[pv_slot], pv_phase)
                    tlx.named_barrier_wait(turn, 256)
                    acc_prev = pv(p_prev, v_smem[pv_slot], acc_prev, FP8)
                    tlx.named_barrier_arrive(next_turn, 256)
                    acc_prev = tlx.async_dot_wait(0, acc_prev)
                    tlx.barrier_arrive(v_empty[pv_slot])
                    if O_TMA:
                        store_o_staged(o_desc, o_smem[cid], o_ptr, (acc_prev * inv_l_prev[:, None]).to(OUT), bz_p,
                                       h_p, q_row_p, row0_p, sq_p, stride_ob, stride_oh, stride_os, D_REAL, HEAD_DIM,
                                       HALF_M, VARLEN)
                    else:
                        store_o(o_ptr, (acc_prev * inv_l_prev[:, None]).to(OUT), bz_p, h_p, q_row_p, row0_p,
                                sq_p, stride_ob, stride_oh, stride_os, D_REAL, HEAD_DIM, HALF_M)
            if O_TMA:
                tlx.async_descriptor_store_wait(0)                          # before shared memory goes away
            if SKEW and cid == 0:   # the turn consumer 1 passed at the start, passed back: its last item's
                tlx.named_barrier_wait(turn, 256)                          # last turn follows
                tlx.named_barrier_arrive(next_turn, 256)
            if cid == 0:
                tlx.named_barrier_wait(9, 256)                             # absorb the last consumer's last pass
