"""The attention backward on ``tl.dot``: dQ, dK, dV from the forward's O and LSE.

With ``P = exp(sm_scale * Q K^T - lse)`` (masked entries 0), the gradients are

    dV = P^T dO,   dP = dO V^T,   dS = P * (dP - delta),   delta = rowsum(dO * O),
    dK = sm_scale * dS^T Q,        dQ = sm_scale * dS K.

Three kernels, none with atomics (the result does not depend on the order programs run in):

* ``bwd_preprocess_kernel``: per query row, ``delta`` (float32) and the LSE in log2 units
  (``lse * log2 e``; a row whose LSE is -inf, which sees no key, gets +inf so that its P is
  0 rather than NaN).  Rows past the sequence are never read by the main kernels' results.
* ``bwd_dkdv_kernel``: one program per (block of ``BLOCK_N`` keys, batch, kv head).  K and V
  of the block stay in shared memory; the program walks the query blocks of every query head
  of its GQA group in one flat loop (so the operand ring runs on across heads), recomputing
  ``P^T = exp2(K Q^T * qk_scale - lse2)`` as a ``[BLOCK_N, BLOCK_M]`` tile: in that
  orientation ``P^T`` and ``dS^T`` are the A operands of ``dV += P^T dO`` and
  ``dK += dS^T Q`` straight from the registers of the MMA that produced them.  Q is read
  transposed (``Q^T`` tile through transposed pointers, used again as ``tl.trans``).  Under a
  causal mask the walk starts at the first query block that sees the key block.
* ``bwd_dq_kernel``: one program per (block of ``BLOCK_M`` queries, batch, head): Q, dO,
  lse2 and delta of the block stay put, the key blocks stream by (``K^T`` and ``V^T``
  tiles), ``S``, ``P``, ``dP`` and ``dS`` are recomputed and ``dQ += dS K`` accumulated.
  Under a causal mask the walk stops at the diagonal.

Both main kernels (and the warp-specialized one) order their programs by ``section_tile``: the
plain order (a head's blocks one after another), or, under a dense causal mask, where a head's
blocks walk different lengths, sections of heads with the longest blocks first in each.

Recomputing S and dP in the dQ kernel costs 14 instead of 10 units of ``S^2 D`` MMA work
(the price of determinism; FlashAttention-2 adds dQ with float32 atomics instead).

Layouts: every tensor is addressed by (batch, head, row) strides with a unit stride along
the head dim; the packed variable-length layout ``[total, H, D]`` is batch stride 0 plus the
sequence's first row ``cu_seqlens[b]`` (``VARLEN``).  Rows and keys past a sequence are
masked: their loads read zeros, their P is 0 (LSE +inf, or the key mask), their stores are
dropped.  ``HEAD_DIM`` is the padded (power-of-two) width of a tile, ``D`` the real one.
The causal mask is top-left aligned, as torch's ``is_causal``: query ``i`` sees keys
``j <= i`` of its own sequence.

Two options, each behind a constexpr flag (off, the kernels are those without the option):

* ``WINDOW`` (a sliding window, flash-attn's ``window_size``): query ``i`` sees keys
  ``i - window_left <= j <= i + window_right`` (runtime ints; the host gives an unbounded side
  a bound no row reaches).  The dK/dV walk visits only the query blocks whose rows see the key
  block, the dQ walk only the key blocks inside its rows' windows; the rest is masked.  A row
  that sees no key has LSE -inf (lse2 +inf): its P is 0, so it adds nothing anywhere.
* ``SOFTCAP`` (Gemma 2's logit softcapping, cap ``softcap``): the scores are
  ``softcap * tanh(sm_scale * q.k / softcap)``, so ``P = exp2(t * softcap * log2 e - lse2)``
  with ``t = tanh(q.k * sm_scale / softcap)``, and the gradient of the raw product is dS times
  ``sm_scale * (1 - t^2)``: the kernels fold ``1 - t^2`` into P once dV has used it (``sm_scale``
  stays where it was).  The masks apply to t (-inf: P = 0 and a slope of 0), so that one tile,
  not P and t, is live across them.  ``tanh`` is PTX's ``tanh.approx.f32`` (``tanh_approx``),
  as in the forward.
"""
from ... import language as tl
from ...runtime.jit import jit
from .aligns import aligned

LOG2E = 1.4426950408889634


@jit
def tanh_approx(x):
    """``tanh`` of float32 ``x`` by PTX's ``tanh.approx.f32`` (one MUFU op; relative error
    about 2^-11): the softcap's, in the backward kernels."""
    return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                     pack=1)


@jit
def capped_probs(t, lse2, softcap):
    """P under softcapping from ``t = tanh(q.k * sm_scale / softcap)``: ``exp2(t * softcap *
    log2 e - lse2)`` (``lse2`` broadcasts against ``t``).  A hidden key's t is -inf: P = 0."""
    return tl.math.exp2(t * (softcap * LOG2E) - lse2)


@jit
def capped_slope(t):
    """``1 - t^2``, the capped score's slope (d tanh), 0 where t is -inf (a hidden key)."""
    return tl.maximum(1.0 - t * t, 0.0)


@jit
def window_keep(offs_q, offs_k, window_left, window_right):
    """Whether query ``offs_q`` sees key ``offs_k`` through the window (both broadcast)."""
    return (offs_k >= offs_q - window_left) & (offs_k <= offs_q + window_right)


@jit
def query_blocks(start_n, len_q, window_left, window_right, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 CAUSAL: tl.constexpr, WINDOW: tl.constexpr):
    """(first query block, query blocks per head) whose rows see a key of the block from
    ``start_n``: causal, none before the block's diagonal; a window, the rows ``start_n - right
    .. start_n + BLOCK_N - 1 + left``."""
    if CAUSAL:
        first_m = start_n // BLOCK_M                   # earlier queries see none of these keys
    else:
        first_m = start_n * 0
    if WINDOW:
        first_m = tl.maximum(first_m, tl.maximum(start_n - window_right, 0) // BLOCK_M)
        end_m = tl.minimum(tl.cdiv(len_q, BLOCK_M), (start_n + BLOCK_N - 1 + window_left) // BLOCK_M + 1)
        per_head = tl.maximum(end_m - first_m, 0)
    else:
        per_head = tl.maximum(tl.cdiv(len_q, BLOCK_M) - first_m, 0)
    return first_m, per_head


@jit
def aligned_inputs(sq_b, sq_h, sq_r, sk_b, sk_h, sk_r, sv_b, sv_h, sv_r, sdo_b, sdo_h, sdo_r, ALIGN: tl.constexpr):
    """The (batch, head, row) strides of q, k, v and dO, each a multiple of ``ALIGN`` elements (the
    host's fact, ``attention_bwd.stride_align``: the launch specializes on divisibility by 16 only)."""
    return (aligned(sq_b, ALIGN), aligned(sq_h, ALIGN), aligned(sq_r, ALIGN), aligned(sk_b, ALIGN),
            aligned(sk_h, ALIGN), aligned(sk_r, ALIGN), aligned(sv_b, ALIGN), aligned(sv_h, ALIGN),
            aligned(sv_r, ALIGN), aligned(sdo_b, ALIGN), aligned(sdo_h, ALIGN), aligned(sdo_r, ALIGN))


@jit
def bwd_preprocess_kernel(o_ptr, do_ptr, lse_ptr, delta_ptr, lse2_ptr, n_rows, H,
                          so_b, so_h, so_r, sdo_b, sdo_h, sdo_r, sl_b, sl_h, sd_b, sd_h, delta_scale,
                          D: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr, ALIGN: tl.constexpr = 1):
    """``delta[b, h, r] = delta_scale * sum_d o * do`` (float32; the ws kernel with its statistics
    in shared memory takes it scaled by ``sm_scale``, else 1) and ``lse2 = lse * log2 e`` (+inf
    where lse is -inf) for ``BLOCK`` rows of one (batch, head); ``n_rows`` rows per (b, h)."""
    so_b, so_h, so_r = aligned(so_b, ALIGN), aligned(so_h, ALIGN), aligned(so_r, ALIGN)
    sdo_b, sdo_h, sdo_r = aligned(sdo_b, ALIGN), aligned(sdo_h, ALIGN), aligned(sdo_r, ALIGN)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    start = tl.program_id(0) * BLOCK
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, HEAD_DIM)
    keep = rows < n_rows - start
    tile_mask = keep[:, None] & (cols[None, :] < D)
    o_base = o_ptr + b * so_b + h * so_h + start.to(tl.int64) * so_r
    do_base = do_ptr + b * sdo_b + h * sdo_h + start.to(tl.int64) * sdo_r
    o = tl.load(o_base + rows[:, None] * so_r + cols[None, :], mask=tile_mask, other=0.0)
    do = tl.load(do_base + rows[:, None] * sdo_r + cols[None, :], mask=tile_mask, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    lse = tl.load(lse_ptr + b * sl_b + h * sl_h + start + rows, mask=keep, other=0.0)
    lse2 = tl.where(lse == float("-inf"), float("inf"), lse * LOG2E)
    out = b * sd_b + h * sd_h + start + rows
    tl.store(delta_ptr + out, delta * delta_scale, mask=keep)
    tl.store(lse2_ptr + out, lse2, mask=keep)


@jit
def section_tile(pid, n_blocks, heads_per_section):
    """(batch-head index, block index) of program ``pid`` in a grid of ``n_blocks`` blocks for
    each of ``tl.num_programs(0) // n_blocks`` (batch, head) pairs, ordered by sections of
    ``heads_per_section`` pairs: inside a section block 0 of every pair, then block 1, ...
    (the last section may hold fewer pairs).  Block 0 is the longest walk under a causal mask,
    so the programs start longest first within a section and the short ones fill the tail, while
    the pairs that run at one time stay those of about one section (their rows stay in L2).
    ``heads_per_section = 1`` is the plain order, a pair's blocks one after another."""
    return section_tile_of(pid, n_blocks, tl.num_programs(0) // n_blocks, heads_per_section)


@jit
def section_tile_of(pid, n_blocks, n_bh, heads_per_section):
    """``section_tile`` for the ``pid``-th of ``n_bh * n_blocks`` work items in any grid (the ws
    kernel's dynamic schedule draws them by index)."""
    per_section = heads_per_section * n_blocks
    section = pid // per_section
    r = pid - section * per_section
    here = tl.minimum(heads_per_section, n_bh - section * heads_per_section)
    block = r // here
    return section * heads_per_section + r - block * here, block


@jit
def _sequence(cu_ptr, b, seqlen, VARLEN: tl.constexpr):
    """(first row, length) of sequence ``b``: from ``cu_seqlens`` (packed), else (0, seqlen)."""
    if VARLEN:
        first = tl.load(cu_ptr + b)
        length = tl.load(cu_ptr + b + 1) - first
    else:
        first = b * 0
        length = seqlen
    return first, length


@jit
def _hide_keys(pT, hidden, offs_m, offs_n, window_left, window_right, CAUSAL: tl.constexpr, WINDOW: tl.constexpr):
    """The dK/dV kernel's ``[keys, queries]`` tile ``pT`` (P^T, or t under softcapping) with
    ``hidden`` where a query does not see a key (causal, window; rows past the sequence have P 0
    from their lse2, keys past it are never stored)."""
    if CAUSAL:
        pT = tl.where(offs_m[None, :] >= offs_n[:, None], pT, hidden)
    if WINDOW:
        pT = tl.where(window_keep(offs_m[None, :], offs_n[:, None], window_left, window_right), pT, hidden)
    return pT


@jit
def bwd_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse2_ptr, delta_ptr, dk_ptr, dv_ptr, cu_q_ptr, cu_k_ptr,
                    seqlen_q, seqlen_k, H_KV,
                    sq_b, sq_h, sq_r, sk_b, sk_h, sk_r, sv_b, sv_h, sv_r, sdo_b, sdo_h, sdo_r, sd_b, sd_h,
                    sdk_b, sdk_h, sdk_r, sdv_b, sdv_h, sdv_r, qk_scale, sm_scale, heads_per_section,
                    window_left, window_right, softcap,
                    D: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    GROUP: tl.constexpr, CAUSAL: tl.constexpr, VARLEN: tl.constexpr, WINDOW: tl.constexpr = False,
                    SOFTCAP: tl.constexpr = False, ALIGN: tl.constexpr = 1):
    sq_b, sq_h, sq_r, sk_b, sk_h, sk_r, sv_b, sv_h, sv_r, sdo_b, sdo_h, sdo_r = aligned_inputs(
        sq_b, sq_h, sq_r, sk_b, sk_h, sk_r, sv_b, sv_h, sv_r, sdo_b, sdo_h, sdo_r, ALIGN)
    sdk_b, sdk_h, sdk_r = aligned(sdk_b, ALIGN), aligned(sdk_h, ALIGN), aligned(sdk_r, ALIGN)
    sdv_b, sdv_h, sdv_r = aligned(sdv_b, ALIGN), aligned(sdv_h, ALIGN), aligned(sdv_r, ALIGN)
    n_blocks = tl.cdiv(seqlen_k, BLOCK_N)
    pid_bh, block = section_tile(tl.program_id(0), n_blocks, heads_per_section)
    b = pid_bh // H_KV
    hk = pid_bh % H_KV
    q_first, len_q = _sequence(cu_q_ptr, b, seqlen_q, VARLEN)
    k_first, len_k = _sequence(cu_k_ptr, b, seqlen_k, VARLEN)
    if VARLEN:
        b = b * 0                                      # packed: the batch is the row range
    b64 = b.to(tl.int64)
    start_n = block * BLOCK_N                            # causal: the longest walks first
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    key_ok = offs_n < len_k
    d_ok = offs_d < D
    k_base = k_ptr + b64 * sk_b + hk.to(tl.int64) * sk_h + k_first.to(tl.int64) * sk_r
    v_base = v_ptr + b64 * sv_b + hk.to(tl.int64) * sv_h + k_first.to(tl.int64) * sv_r
    kv_mask = key_ok[:, None] & d_ok[None, :]
    k = tl.load(k_base + offs_n[:, None] * sk_r + offs_d[None, :], mask=kv_mask, other=0.0)
    v = tl.load(v_base + offs_n[:, None] * sv_r + offs_d[None, :], mask=kv_mask, other=0.0)
    dk = tl.zeros((BLOCK_N, HEAD_DIM), dtype=tl.float32)
    dv = tl.zeros((BLOCK_N, HEAD_DIM), dtype=tl.float32)

    first_m, per_head = query_blocks(start_n, len_q, window_left, window_right, BLOCK_M, BLOCK_N, CAUSAL, WINDOW)
    q_row0 = q_first.to(tl.int64)
    for t in range(0, GROUP * per_head):               # (query head of the group, query block), flat
        if GROUP == 1:
            g = t * 0
            mb = first_m + t
        else:
            g = t // per_head
            mb = first_m + t - g * per_head
        h = (hk * GROUP + g).to(tl.int64)
        offs_m = mb * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = offs_m < len_q
        q_base = q_ptr + b64 * sq_b + h * sq_h + q_row0 * sq_r
        do_base = do_ptr + b64 * sdo_b + h * sdo_h + q_row0 * sdo_r
        qT = tl.load(q_base + offs_m[None, :] * sq_r + offs_d[:, None], mask=row_ok[None, :] & d_ok[:, None],
                     other=0.0)
        do = tl.load(do_base + offs_m[:, None] * sdo_r + offs_d[None, :], mask=row_ok[:, None] & d_ok[None, :],
                     other=0.0)
        row_stat = b64 * sd_b + h * sd_h + q_row0 + offs_m
        lse2 = tl.load(lse2_ptr + row_stat, mask=row_ok, other=float("inf"))
        delta = tl.load(delta_ptr + row_stat, mask=row_ok, other=0.0)
        sT = tl.dot(k, qT)                                          # [BLOCK_N, BLOCK_M] = (Q K^T)^T
        if SOFTCAP:         # the masks on t: one tile (t) live across them, not two (P and t)
            tT = _hide_keys(tanh_approx(sT * (sm_scale / softcap)), float("-inf"), offs_m, offs_n, window_left,
                            window_right, CAUSAL, WINDOW)
            pT = capped_probs(tT, lse2[None, :], softcap)
            p_op = pT.to(q_ptr.dtype.element_ty)
            pT = pT * capped_slope(tT)          # P (1 - t^2): dS's factor, once dV has P
            dv += tl.dot(p_op, do)
        else:
            pT = tl.math.exp2(sT * qk_scale - lse2[None, :])
            pT = _hide_keys(pT, 0.0, offs_m, offs_n, window_left, window_right, CAUSAL, WINDOW)
            dv += tl.dot(pT.to(q_ptr.dtype.element_ty), do)
        dpT = tl.dot(v, tl.trans(do))                               # (dO V^T)^T
        dsT = pT * (dpT - delta[None, :])
        dk += tl.dot(dsT.to(q_ptr.dtype.element_ty), tl.trans(qT))

    dk = dk * sm_scale
    dk_base = dk_ptr + b64 * sdk_b + hk.to(tl.int64) * sdk_h + k_first.to(tl.int64) * sdk_r
    dv_base = dv_ptr + b64 * sdv_b + hk.to(tl.int64) * sdv_h + k_first.to(tl.int64) * sdv_r
    tl.store(dk_base + offs_n[:, None] * sdk_r + offs_d[None, :], dk.to(dk_ptr.dtype.element_ty), mask=kv_mask)
    tl.store(dv_base + offs_n[:, None] * sdv_r + offs_d[None, :], dv.to(dv_ptr.dtype.element_ty), mask=kv_mask)


@jit
def bwd_dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse2_ptr, delta_ptr, dq_ptr, cu_q_ptr, cu_k_ptr,
                  seqlen_q, seqlen_k, H,
                  sq_b, sq_h, sq_r, sk_b, sk_h, sk_r, sv_b, sv_h, sv_r, sdo_b, sdo_h, sdo_r, sd_b, sd_h,
                  sdq_b, sdq_h, sdq_r, qk_scale, sm_scale, heads_per_section, window_left, window_right, softcap,
                  D: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  GROUP: tl.constexpr, CAUSAL: tl.constexpr, VARLEN: tl.constexpr, WINDOW: tl.constexpr = False,
                  SOFTCAP: tl.constexpr = False, ALIGN: tl.constexpr = 1):
    sq_b, sq_h, sq_r, sk_b, sk_h, sk_r, sv_b, sv_h, sv_r, sdo_b, sdo_h, sdo_r = aligned_inputs(
        sq_b, sq_h, sq_r, sk_b, sk_h, sk_r, sv_b, sv_h, sv_r, sdo_b, sdo_h, sdo_r, ALIGN)
    sdq_b, sdq_h, sdq_r = aligned(sdq_b, ALIGN), aligned(sdq_h, ALIGN), aligned(sdq_r, ALIGN)
    n_blocks = tl.cdiv(seqlen_q, BLOCK_M)
    pid_bh, block = section_tile(tl.program_id(0), n_blocks, heads_per_section)
    b = pid_bh // H
    h = pid_bh % H
    q_first, len_q = _sequence(cu_q_ptr, b, seqlen_q, VARLEN)
    k_first, len_k = _sequence(cu_k_ptr, b, seqlen_k, VARLEN)
    if VARLEN:
        b = b * 0
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)
    hk64 = (h // GROUP).to(tl.int64)
    start_m = (n_blocks - 1 - block) * BLOCK_M          # causal: the longest walks first
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < len_q
    d_ok = offs_d < D
    q_row0 = q_first.to(tl.int64)
    tile_mask = row_ok[:, None] & d_ok[None, :]
    q = tl.load(q_ptr + b64 * sq_b + h64 * sq_h + q_row0 * sq_r + offs_m[:, None] * sq_r + offs_d[None, :],
                mask=tile_mask, other=0.0)
    do = tl.load(do_ptr + b64 * sdo_b + h64 * sdo_h + q_row0 * sdo_r + offs_m[:, None] * sdo_r + offs_d[None, :],
                 mask=tile_mask, other=0.0)
    row_stat = b64 * sd_b + h64 * sd_h + q_row0 + offs_m
    lse2 = tl.load(lse2_ptr + row_stat, mask=row_ok, other=float("inf"))
    delta = tl.load(delta_ptr + row_stat, mask=row_ok, other=0.0)
    dq = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)

    if CAUSAL:
        end_n = tl.minimum(len_k, start_m + BLOCK_M)    # later keys are above the diagonal
    else:
        end_n = len_k
    k_base = k_ptr + b64 * sk_b + hk64 * sk_h + k_first.to(tl.int64) * sk_r
    v_base = v_ptr + b64 * sv_b + hk64 * sv_h + k_first.to(tl.int64) * sv_r
    if WINDOW:      # the keys the block's rows see: start_m - left <= j <= start_m + BLOCK_M - 1 + right
        begin_n = tl.maximum(start_m - window_left, 0) // BLOCK_N * BLOCK_N
        end_n = tl.minimum(end_n, start_m + BLOCK_M + window_right)
    else:
        begin_n = 0
    for start_n in range(begin_n, end_n, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        key_ok = offs_n < len_k
        kT = tl.load(k_base + offs_n[None, :] * sk_r + offs_d[:, None], mask=key_ok[None, :] & d_ok[:, None],
                     other=0.0)
        vT = tl.load(v_base + offs_n[None, :] * sv_r + offs_d[:, None], mask=key_ok[None, :] & d_ok[:, None],
                     other=0.0)
        s = tl.dot(q, kT)
        if SOFTCAP:
            t = tanh_approx(s * (sm_scale / softcap))
        else:
            p = tl.math.exp2(s * qk_scale - lse2[:, None])
        keep = key_ok[None, :]
        if CAUSAL:
            keep = keep & (offs_n[None, :] <= offs_m[:, None])
        if WINDOW:
            keep = keep & window_keep(offs_m[:, None], offs_n[None, :], window_left, window_right)
        if SOFTCAP:         # a hidden key's t is -inf: P = 0 and a slope of 0
            t = tl.where(keep, t, float("-inf"))
            p = capped_probs(t, lse2[:, None], softcap) * capped_slope(t)     # P (1 - t^2): dS's factor
        else:
            p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, vT)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(q_ptr.dtype.element_ty), tl.trans(kT))

    dq = dq * sm_scale
    dq_base = dq_ptr + b64 * sdq_b + h64 * sdq_h + q_row0 * sdq_r
    tl.store(dq_base + offs_m[:, None] * sdq_r + offs_d[None, :], dq.to(dq_ptr.dtype.element_ty), mask=tile_mask)


def attention_bwd(*args, **kwargs):
    """The host entry point, ``tlxc.ops.attention_bwd.attention_bwd`` (imported on call: the
    kernels do not import torch)."""
    from ..attention_bwd import attention_bwd as host
    return host(*args, **kwargs)
