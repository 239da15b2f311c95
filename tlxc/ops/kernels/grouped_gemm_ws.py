"""The grouped (MoE) GEMM on the warp-specialized TMA pipeline, for few large groups.

``out[rows of group g] = a[rows of group g] @ b[g]`` as ``grouped_gemm.py`` computes it, but
with ``gemm_ws.py``'s structure: persistent programs, one TMA producer warp group, two wgmma
consumer warp groups of ``BM / 2`` rows that take turns on the tensor cores, a
``NUM_STAGES`` ring of shared buffers released as soon as their MMA is done.  The pointer
kernel's cp.async ring (issued by the MMA warps themselves) reaches ~0.9x cuBLAS on big
tiles; this is the kernel the dense GEMM reaches 1.0x with.

The tile space is ``ROW_TILES x cdiv(N, BN)`` (``ROW_TILES = cdiv(total_M, BM) + E``: an
upper bound, each group's last row tile may be partial), walked in grouped order.  A
one-program kernel first writes the inclusive sums of the groups' row-tile counts and sizes
(``group_table_kernel``, no host sync; its other programs store the zeros of the rows past the
groups' sum, if ``group_sizes`` leaves any); producer and consumers each find a tile's group by a
binary search of it (ceil(log2(E + 1)) scalar loads); a row tile past the last group's is
skipped by both, so their ring counters stay in step.  With ``EXPERT_ORDER`` (the ``_eG``
configurations) the tile index walks each expert's tiles together instead, in balanced bands
of at most ``GROUP_M`` of its row tiles (``find_expert_tile``): no band mixes two experts'
weights.  With ``COLUMN_BANDS`` (the ``_nG`` configurations) bands of G column tiles walk every
expert's row tiles instead (``find_column_band_tile``), so the tiles in flight mix the experts.

Descriptors (host, ``tlxc/ops/grouped.py``): ``a`` as ``[total_M, K]`` with ``[BM / 2, BK]``
boxes (rows past the group's end belong to the next group or lie past ``total_M``: loaded,
multiplied, never stored); the experts' weights as one 2-D tensor: K-major (``w`` of
``[E, N, K]``, read through ``w.transpose(1, 2)``) as ``[E * N, K]`` with ``[BN, BK]`` boxes at
row ``g * N + n`` (columns past N read the next expert's rows: never stored; TMA zero-fills
past K), or N-major (``[E, K, N]``) as ``[E * K, N]`` with ``[BK, 128 bytes]`` boxes at row
``g * K + k`` (K must then be a multiple of BK, else the last step would read the next
expert's rows: the host checks).

The output: a consumer whose ``BM / 2`` rows all belong to the tile's group (every row block
but each group's last) TMA-stores them as the dense kernel does (``gemm_ws.store_tile``: two
``BM/2 x BN/2`` halves through a shared tile, the stores asynchronous, so the next tile's
MMAs start while they drain; ``C_TMA``, the host's choice when the output is a TMA-storable
tensor and the shared tile fits); the rows of a group's last, partial block go through the
same shared tile and are read back 16 bytes a thread into masked pointer stores of whole
128-byte lines (``store_rows_staged``; a TMA store of the whole block would write the next
group's rows).  Without a C tile every store is a pointer store from the registers
(``store_rows_pointers``: 4-byte ``STG`` of 8 rows x 16 bytes a warp, ~6 % of the time at E = 8).
A consumer whose rows all lie past the group's end (the second half of a group's last block)
skips the MMAs but walks the ring and the issue turns in step with the other; with ``SPLIT_TAIL``
(the host's ``grouped.SPLIT_TAILS``) such a tile is split by columns instead, both consumers
multiplying the first consumer's rows over half of the tile's columns each (``split_tail``).

The epilogue (``SCALE0``: ``a``'s scale, one or one per row; ``SCALE1``: expert ``group``'s ``b`` scale at
``scale1_ptr + group * stride_scale1``, one or one per column; ``BIAS_DIM = 1``: row ``group`` of an ``[E, N]``
bias, ``stride_bias`` 0 for a shared row; ``ACTIVATION``: ``epilogue.ACTIVATIONS``) runs in both store paths;
GLU pairs halve the columns, so the host gives them pointer stores only.  With a per-expert bias or ``b``
scale the dynamic schedule's slots carry the tile's expert as a fifth int32 (``WITH_GROUP``).

fp8 (``DTYPE`` an 8-bit float, the ``gws8_`` configurations): the same kernel with 128-byte k-steps
(``BK = 128``) and K-major weights only (wgmma reads 8-bit operands K-major); the products are summed
in the wgmma accumulator (``torch._scaled_mm``'s ``use_fast_accum=True``) and scaled in the epilogue, or with
``PROMOTE`` (``use_fast_accum=False``, tiles up to 128 columns) each k-step's products in an accumulator of
their own, added to the tile's in float32.

``CLUSTER_N = 2`` (the ``_c2`` configurations; expert order and the dynamic schedule): CTA pairs take
two column tiles of one row tile side by side and share its ``a`` boxes by TMA multicast (box h from
rank h, for both: cuBLAS's ``1x2`` clusters), so a tile's loads are 2.5 MB where they were 3 (128x256,
K = 4096: the lone kernel keeps L2 ~85 % busy at E = 8, M = 2048, ncu on the H100; paired, ncu counted 4 %
fewer L2 bytes, and the kernel runs 1-3 % faster there).  The
tile space is ``cdiv(N, 2 * BN)`` column pairs; rank 0's producer draws the pair's next tile and sends
its index to rank 1's (``next_tile``: a ``st.async`` into the peer's mailbox, completing on the
peer's ``mail_full``; the peer frees the slot with a remote arrive on ``mail_empty``).  A ring
stage holds the pair's ``a`` boxes, so its ``empty`` barrier counts both CTAs' consumers
(``gemm_ws.release``: each consumer arrives here and on the peer).  A rank whose column tile lies past N walks the ring like rows past the group's end.
"""
from ... import language as tl
from ...language import tlx
from ...runtime.jit import jit
from .epilogue import apply_epilogue, store_tile_pointers
from .gemm_ws import column_halves, grouped_tile, release, store_tile
from .grouped_gemm import group_rows


@jit
def group_table_kernel(sizes_ptr, table_ptr, out_ptr, M, E, N_OUT, stride_om, stride_on, BM: tl.constexpr,
                       E_PAD: tl.constexpr, TAIL_ROWS: tl.constexpr = 32, TAIL_COLS: tl.constexpr = 128,
                       PDL: tl.constexpr = False):
    """Program 0: ``table[g]`` = the first row tile after group g (inclusive sum of the
    groups' row-tile counts), ``table[E_PAD + g]`` = the first row after group g (inclusive
    sum of the sizes, clamped to a's M rows: ``group_rows``), ``table[2 * E_PAD]`` = 0 (the dynamic
    schedule's tile counter).  The other programs store the zeros of ``out``'s rows past the groups'
    sum (no expert's: the main kernel skips their tiles), ``TAIL_ROWS`` rows at a time from the chunk
    holding the sum, the chunks dealt round-robin; when the sizes add up to M they store nothing.
    ``PDL``: the main kernel is launched after it with ``launch_pdl=True`` and waits for its memory
    (``gdc_wait``) before reading the table, so its programs may start (shared memory, barriers) now."""
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    gs = tl.arange(0, E_PAD)
    sizes, ends = group_rows(sizes_ptr, E, M, E_PAD)
    pid = tl.program_id(0)
    if pid == 0:
        tl.store(table_ptr + gs, tl.cumsum((sizes + BM - 1) // BM, axis=0), mask=gs < E)
        tl.store(table_ptr + E_PAD + gs, ends, mask=gs < E)
        tl.store(table_ptr + 2 * E_PAD, 0)
    else:
        total = tl.max(ends, 0)
        for chunk in range(total // TAIL_ROWS + pid - 1, tl.cdiv(M, TAIL_ROWS), tl.num_programs(0) - 1):
            rows = chunk * TAIL_ROWS + tl.arange(0, TAIL_ROWS)
            keep = (rows >= total) & (rows < M)
            zeros = tl.zeros((TAIL_ROWS, TAIL_COLS), dtype=out_ptr.dtype.element_ty)
            for c0 in range(0, N_OUT, TAIL_COLS):
                cols = c0 + tl.arange(0, TAIL_COLS)
                tl.store(out_ptr + rows.to(tl.int64)[:, None] * stride_om + cols[None, :] * stride_on, zeros,
                         mask=keep[:, None] & (cols[None, :] < N_OUT))


@jit
def find_group(table_ptr, E, pid_m, BM: tl.constexpr, E_PAD: tl.constexpr, SEARCH_STEPS: tl.constexpr):
    """(group, first row, end row, found) of row tile ``pid_m`` by a binary search of
    ``group_table_kernel``'s table: the group is the first whose tiles end after ``pid_m``
    (``SEARCH_STEPS`` = ceil(log2(E + 1)) scalar loads, cached after the first tile)."""
    lo = 0
    hi = E
    for _ in tl.static_range(SEARCH_STEPS):
        mid = (lo + hi) // 2
        ends = tl.load(table_ptr + tl.minimum(mid, E - 1))
        right = (ends <= pid_m) & (mid < E)
        lo = tl.where(right, mid + 1, lo)
        hi = tl.where(right, hi, mid)
    group = tl.minimum(lo, E - 1)
    found = (lo < E).to(tl.int32)
    tile_start = tl.where(group > 0, tl.load(table_ptr + tl.maximum(group - 1, 0)), 0)
    row_start = tl.where(group > 0, tl.load(table_ptr + E_PAD + tl.maximum(group - 1, 0)), 0)
    row_end = tl.load(table_ptr + E_PAD + group)
    return group, row_start + (pid_m - tile_start) * BM, row_end, found


@jit
def find_expert_tile(table_ptr, E, tile, num_pid_n, BM: tl.constexpr, E_PAD: tl.constexpr,
                     SEARCH_STEPS: tl.constexpr, GROUP_M: tl.constexpr):
    """(group, first row, end row, found, pid_n) of output tile ``tile`` in expert order: the
    tiles of group 0 first, then group 1's, ...; within a group its ``r`` row tiles walk the
    columns in bands of ``ceil(r / ceil(r / GROUP_M))`` rows (balanced: 17 row tiles are bands
    of 6, 6 and 5, never 8, 8 and 1), so no band mixes two experts' weights and each column tile
    of an expert's weights is read by a whole band at once.  The group is found by a binary
    search of the same table as ``find_group`` (its row-tile ends times the column tiles)."""
    lo = 0
    hi = E
    for _ in tl.static_range(SEARCH_STEPS):
        mid = (lo + hi) // 2
        ends = tl.load(table_ptr + tl.minimum(mid, E - 1)) * num_pid_n
        right = (ends <= tile) & (mid < E)
        lo = tl.where(right, mid + 1, lo)
        hi = tl.where(right, hi, mid)
    group = tl.minimum(lo, E - 1)
    found = (lo < E).to(tl.int32)
    tile_start = tl.where(group > 0, tl.load(table_ptr + tl.maximum(group - 1, 0)), 0)
    row_start = tl.where(group > 0, tl.load(table_ptr + E_PAD + tl.maximum(group - 1, 0)), 0)
    row_end = tl.load(table_ptr + E_PAD + group)
    rows = tl.maximum(tl.load(table_ptr + group) - tile_start, 1)          # the group's row tiles
    band = tl.cdiv(rows, tl.cdiv(rows, GROUP_M))
    local = tile - tile_start * num_pid_n
    first = local // (band * num_pid_n) * band
    height = tl.maximum(tl.minimum(rows - first, band), 1)
    in_band = local % (band * num_pid_n)
    return group, row_start + (first + in_band % height) * BM, row_end, found, in_band // height


@jit
def find_column_band_tile(table_ptr, E, tile, num_pid_n, BM: tl.constexpr, E_PAD: tl.constexpr,
                          SEARCH_STEPS: tl.constexpr, COLUMN_BANDS: tl.constexpr):
    """(group, first row, end row, found, pid_n) of output tile ``tile`` in column bands: ``COLUMN_BANDS``
    column tiles at a time walk the groups' row tiles (the table's, none past the last group's), a row
    tile's columns of the band one after another.  The tiles in flight then mix every expert, the
    few-row experts whose tiles wait on their weights beside the many-row ones that keep the tensor
    cores busy, and each of an expert's column tiles of weights is read by its row tiles together."""
    row_tiles = tl.load(table_ptr + E - 1)
    pid_n, pid_m = grouped_tile(tile, num_pid_n, row_tiles, COLUMN_BANDS)
    group, row0, row_end, found = find_group(table_ptr, E, pid_m, BM, E_PAD, SEARCH_STEPS)
    return group, row0, row_end, found, pid_n


@jit
def locate_tile(table_ptr, E, tile, ROW_TILES, num_pid_n, BM: tl.constexpr, E_PAD: tl.constexpr,
                SEARCH_STEPS: tl.constexpr, GROUP_M: tl.constexpr, EXPERT_ORDER: tl.constexpr,
                COLUMN_BANDS: tl.constexpr = 0):
    """(group, first row, end row, found, pid_n) of output tile ``tile``: in expert order
    (``find_expert_tile``), in column bands (``find_column_band_tile``) or in the grouped order of all
    row tiles (``grouped_tile`` + ``find_group``: a band of ``GROUP_M`` row tiles may span two experts)."""
    if EXPERT_ORDER:
        group, row0, row_end, found, pid_n = find_expert_tile(table_ptr, E, tile, num_pid_n, BM, E_PAD,
                                                              SEARCH_STEPS, GROUP_M)
    elif COLUMN_BANDS > 0:
        group, row0, row_end, found, pid_n = find_column_band_tile(table_ptr, E, tile, num_pid_n, BM, E_PAD,
                                                                   SEARCH_STEPS, COLUMN_BANDS)
    else:
        pid_m, pid_n = grouped_tile(tile, ROW_TILES, num_pid_n, GROUP_M)
        group, row0, row_end, found = find_group(table_ptr, E, pid_m, BM, E_PAD, SEARCH_STEPS)
    return group, row0, row_end, found, pid_n


@jit
def store_rows_pointers(acc, row, col, row_end, N, c_ptr, stride_cm, stride_cn, SUB_M: tl.constexpr,
                        BN: tl.constexpr, bias_ptr=None, BIAS_DIM: tl.constexpr = -1, ACTIVATION: tl.constexpr = 0,
                        scale0_ptr=None, scale1_ptr=None, SCALE0: tl.constexpr = 0, SCALE1: tl.constexpr = 0):
    """One consumer's ``SUB_M x BN`` accumulator at (row, col) through pointers, masked to
    rows below ``row_end`` and columns below N, in two halves (the whole 64x256 at once spilled),
    through the epilogue (``scale0_ptr``: ``a``'s scale, ``scale1_ptr``: the tile's expert's ``b`` scale,
    ``bias_ptr``: its bias row; a GLU activation stores half the columns)."""
    lo, hi = column_halves(acc, SUB_M, BN)
    store_tile_pointers(lo, row, col, row_end, N, c_ptr, stride_cm, stride_cn, scale0_ptr, scale1_ptr, bias_ptr,
                        None, 0, 0, SUB_M, BN // 2, SCALE0, SCALE1, BIAS_DIM, ACTIVATION, False, 1)
    store_tile_pointers(hi, row, col + BN // 2, row_end, N, c_ptr, stride_cm, stride_cn, scale0_ptr, scale1_ptr,
                        bias_ptr, None, 0, 0, SUB_M, BN // 2, SCALE0, SCALE1, BIAS_DIM, ACTIVATION, False, 1)


@jit
def store_rows_staged(acc, c_buf, row, col, row_end, N, c_ptr, stride_cm, SUB_M: tl.constexpr, COLS: tl.constexpr,
                      OUT_DTYPE: tl.constexpr, bias_ptr=None, BIAS_DIM: tl.constexpr = -1,
                      ACTIVATION: tl.constexpr = 0, scale0_ptr=None, scale1_ptr=None, SCALE0: tl.constexpr = 0,
                      SCALE1: tl.constexpr = 0):
    """One consumer's ``SUB_M x COLS`` slice at (row, col), rows below ``row_end`` only (a
    group's last, partial row block), through its C tile: the epilogue, the cast, a store
    into the shared tile, then rows read back 16 bytes a thread and stored through pointers
    (whole 128-byte lines a warp, where the accumulator's own layout writes 16 bytes of each of
    8 rows per warp instruction).  The output's columns are contiguous (``C_TMA``)."""
    offs0 = row + tl.arange(0, SUB_M)
    offs1 = col + tl.arange(0, COLS)
    if SCALE0 + SCALE1 + BIAS_DIM + 1 + ACTIVATION > 0:
        acc = apply_epilogue(acc, offs0, offs1, offs0 < row_end, offs1 < N, scale0_ptr, scale1_ptr, bias_ptr, None,
                             0, 0, SCALE0, SCALE1, BIAS_DIM, ACTIVATION, False)
    tlx.async_descriptor_store_wait(0)            # the tile's last TMA store has read it
    tlx.local_store(c_buf, acc.to(OUT_DTYPE))
    tile = tlx.local_load(c_buf)
    tl.store(c_ptr + offs0.to(tl.int64)[:, None] * stride_cm + offs1[None, :], tile,
             mask=(offs0 < row_end)[:, None] & (offs1 < N)[None, :])


@jit
def pair_mailbox(CLUSTER_N: tl.constexpr, ID_BUFS: tl.constexpr):
    """(rank, mail, mail_full, mail_empty): in a pair, this CTA's rank and the ring of ``ID_BUFS`` int32 slots
    through which rank 0 hands its tile draws to rank 1 (``next_tile``); rank 0 and Nones alone."""
    rank = 0
    mail = None
    mail_full = None
    mail_empty = None
    if CLUSTER_N > 1:
        rank = tlx.cluster_cta_rank()
        mail = tlx.local_alloc((1,), tl.int32, ID_BUFS)
        mail_full = tlx.alloc_barriers(ID_BUFS, arrive_count=1)
        mail_empty = tlx.alloc_barriers(ID_BUFS, arrive_count=1)
    return rank, mail, mail_full, mail_empty


@jit
def next_tile(table_ptr, counter, num_clusters, n, rank, mail, mail_full, mail_empty, CLUSTER_N: tl.constexpr,
              ID_BUFS: tl.constexpr):
    """The program's (cluster's) ``n + 1``-th tile index: drawn from the schedule's counter; in a pair
    rank 0 draws it and stores it into rank 1's mailbox slot (``st.async``, completing 4 bytes on
    the peer's ``mail_full``), rank 1 reads it there and frees the slot (remote arrive on rank 0's
    ``mail_empty``)."""
    if CLUSTER_N == 1:
        tile = tl.atomic_add(table_ptr + counter, 1) + num_clusters
    else:
        slot, phase = tlx.get_bufidx_phase(n, ID_BUFS)
        if rank == 0:
            tile = tl.atomic_add(table_ptr + counter, 1) + num_clusters
            tlx.barrier_wait(mail_empty[slot], phase ^ 1)
            tlx.async_remote_shmem_store(mail[slot], tl.full((1,), 0, tl.int32) + tile, 1, mail_full[slot])
        else:
            tlx.barrier_expect_bytes(mail_full[slot], 4)
            tlx.barrier_wait(mail_full[slot], phase)
            tile = tl.sum(tlx.local_load(mail[slot]), axis=0)
            tlx.barrier_arrive(mail_empty[slot], 1, remote_cta_rank=0)
    return tile


@jit
def produce_tile(group, row0, row_end, found, pid_n, count, a_desc, b_desc, a_smem, b_smem, full, empty, N, K,
                 k_tiles, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NUM_STAGES: tl.constexpr,
                 ELT: tl.constexpr, B_KMAJOR: tl.constexpr, B_BOX_N: tl.constexpr, rank=0,
                 CLUSTER_N: tl.constexpr = 1):
    """The producer's part of one output tile (located by ``locate_tile``): its k-steps' TMA
    loads into the ring (none for a tile past the last group's).  The second consumer's rows of
    ``a`` are not loaded when they all lie past the group's end (that consumer multiplies nothing,
    or with ``SPLIT_TAIL`` reads the first consumer's rows): a quarter (128x128 tiles) to a sixth
    (128x256) less L2 traffic on those tiles.  In a pair (``CLUSTER_N = 2``) ``pid_n`` is this CTA's
    column tile and box h of ``a`` comes from rank h for both.  Returns the ring counter after it."""
    SUB_M: tl.constexpr = BM // 2
    if found > 0:
        second = (row0 + SUB_M < row_end).to(tl.int32)
        for k in range(k_tiles):
            slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
            tlx.barrier_wait(empty[slot], phase ^ 1)
            if second > 0:
                tlx.barrier_expect_bytes(full[slot], (BM * BK + BK * BN) * ELT)
            else:
                tlx.barrier_expect_bytes(full[slot], (SUB_M * BK + BK * BN) * ELT)
            if CLUSTER_N > 1:
                tlx.async_descriptor_load(a_desc, a_smem[2 * slot], [row0, k * BK], full[slot], pred=rank == 0,
                                          multicast_targets=[0, 1])
                tlx.async_descriptor_load(a_desc, a_smem[2 * slot + 1], [row0 + SUB_M, k * BK], full[slot],
                                          pred=(second > 0) & (rank == 1), multicast_targets=[0, 1])
            else:
                tlx.async_descriptor_load(a_desc, a_smem[2 * slot], [row0, k * BK], full[slot])
                tlx.async_descriptor_load(a_desc, a_smem[2 * slot + 1], [row0 + SUB_M, k * BK], full[slot],
                                          pred=second > 0)
            if B_KMAJOR:
                tlx.async_descriptor_load(b_desc, b_smem[slot], [group * N + pid_n * BN, k * BK], full[slot])
            else:
                for j in tl.static_range(BN // B_BOX_N):
                    b_box = tlx.local_slice(b_smem[slot], [0, j * B_BOX_N], [BK, B_BOX_N])
                    tlx.async_descriptor_load(b_desc, b_box, [group * K + k * BK, pid_n * BN + j * B_BOX_N],
                                              full[slot])
            count += 1
    return count


@jit
def mma_steps(acc, count, cid, a_half, b_col, a_smem, b_smem, full, empty, k_tiles, NUM_STAGES: tl.constexpr,
              B_KMAJOR: tl.constexpr, rank=0, CLUSTER_N: tl.constexpr = 1, PROMOTE: tl.constexpr = False):
    """Consumer ``cid``'s k-steps of one tile over the ring: ``acc += a @ b`` with ``a`` the stage's
    ``a_half``-th ``BM / 2``-row buffer and ``b`` the stage's B columns ``b_col ..`` (as many as
    ``acc`` has: the whole buffer, or half of it for ``split_tail``), the consumers taking turns
    to issue, each stage released once its product is done.  ``PROMOTE`` (fp8, ``use_fast_accum=False``):
    each k-step's products in an accumulator of their own, added to ``acc`` in float32 (cuBLAS's
    default for fp8; K-major weights).  Returns (acc, ring counter)."""
    COLS: tl.constexpr = acc.shape[1]
    if PROMOTE:
        part = tl.zeros_like(acc)
    for k in range(k_tiles):
        slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
        tlx.barrier_wait(full[slot], phase)
        tlx.named_barrier_wait(9 + cid, 256)          # the consumers take turns issuing
        if PROMOTE:
            b = tlx.local_slice(b_smem[slot], [b_col, 0], [COLS, b_smem.shape[1]])
            part = tlx.async_dot(a_smem[2 * slot + a_half], tlx.local_trans(b), part, use_acc=False)
        elif B_KMAJOR:
            b = tlx.local_slice(b_smem[slot], [b_col, 0], [COLS, b_smem.shape[1]])
            acc = tlx.async_dot(a_smem[2 * slot + a_half], tlx.local_trans(b), acc)
        else:
            b = tlx.local_slice(b_smem[slot], [0, b_col], [b_smem.shape[0], COLS])
            acc = tlx.async_dot(a_smem[2 * slot + a_half], b, acc)
        tlx.named_barrier_arrive(9 + (cid + 1) % 2, 256)
        if PROMOTE:
            part = tlx.async_dot_wait(0, part)
            acc += part
        else:
            acc = tlx.async_dot_wait(0, acc)          # this step's MMA is done: release its stage
        release(empty[slot], rank, CLUSTER_N)
        count += 1
    return acc, count


@jit
def consume_tile(row0, row_end, found, pid_n, count, cid, a_smem, b_smem, c_smem, full, empty, c_ptr, c_desc, N,
                 k_tiles, stride_cm, stride_cn, BM: tl.constexpr, BN: tl.constexpr, NUM_STAGES: tl.constexpr,
                 B_KMAJOR: tl.constexpr, C_TMA: tl.constexpr, OUT_DTYPE: tl.constexpr, C_BOX_N: tl.constexpr,
                 group=0, bias_ptr=None, stride_bias=0, BIAS_DIM: tl.constexpr = -1, ACTIVATION: tl.constexpr = 0,
                 SPLIT_TAIL: tl.constexpr = False, rank=0, CLUSTER_N: tl.constexpr = 1, scale0_ptr=None,
                 scale1_ptr=None, stride_scale1=0, SCALE0: tl.constexpr = 0, SCALE1: tl.constexpr = 0,
                 PROMOTE: tl.constexpr = False):
    """Consumer ``cid``'s part of one output tile (located by ``locate_tile``): its ``BM / 2``
    rows' MMAs over the ring and their stores (through the epilogue: ``SCALE0`` ``a``'s scale, one or
    a row's; ``SCALE1`` the ``b`` scale of expert ``group``, at ``stride_scale1`` per expert (0: one for
    all), one or a column's; ``BIAS_DIM = 1`` adds row
    ``group`` of the ``[E, N]`` bias, ``stride_bias`` 0 for one shared row; ``ACTIVATION``), or
    (rows past the group's end) the ring and the issue turns walked without MMAs.  With
    ``SPLIT_TAIL``, a tile whose group ends within its first ``BM / 2`` rows (the second
    consumer would have none) is split by columns instead: both consumers multiply the first
    ``BM / 2`` rows, consumer ``cid`` by columns ``cid * BN / 2 ..`` (``split_tail``).  Returns
    the ring counter after it."""
    SUB_M: tl.constexpr = BM // 2
    row = row0 + cid * SUB_M
    if BIAS_DIM == 1:
        bias_ptr = bias_ptr + group.to(tl.int64) * stride_bias
    if SCALE1 > 0:
        scale1_ptr = scale1_ptr + group.to(tl.int64) * stride_scale1
    split = 0
    if SPLIT_TAIL:
        split = (row0 + SUB_M >= row_end).to(tl.int32)
    if found > 0 and split > 0:               # the group's last rows, one consumer's worth: halves of columns
        count = split_tail(row0, row_end, pid_n, count, cid, a_smem, b_smem, c_smem, full, empty, c_ptr, N,
                           k_tiles, stride_cm, stride_cn, BM, BN, NUM_STAGES, B_KMAJOR, C_TMA, OUT_DTYPE, bias_ptr,
                           BIAS_DIM, ACTIVATION, scale0_ptr, scale1_ptr, SCALE0, SCALE1, PROMOTE)
    elif found > 0 and row < row_end:         # this consumer has rows of the group
        acc, count = mma_steps(tl.zeros((SUB_M, BN), dtype=tl.float32), count, cid, cid, 0, a_smem, b_smem, full,
                               empty, k_tiles, NUM_STAGES, B_KMAJOR, rank, CLUSTER_N, PROMOTE)
        if C_TMA:
            if row + SUB_M <= row_end:            # all the group's rows: TMA stores, in halves
                lo, hi = column_halves(acc, SUB_M, BN)
                store_tile(c_desc, c_smem[cid], lo, row, pid_n * BN, row_end, N, scale0_ptr, scale1_ptr, bias_ptr,
                           None, 0, 0, SUB_M, BN // 2, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM, ACTIVATION,
                           False)
                store_tile(c_desc, c_smem[cid], hi, row, pid_n * BN + BN // 2, row_end, N, scale0_ptr, scale1_ptr,
                           bias_ptr, None, 0, 0, SUB_M, BN // 2, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM,
                           ACTIVATION, False)
            else:                                 # the group's last rows: staged masked stores
                lo, hi = column_halves(acc, SUB_M, BN)
                store_rows_staged(lo, c_smem[cid], row, pid_n * BN, row_end, N, c_ptr, stride_cm, SUB_M, BN // 2,
                                  OUT_DTYPE, bias_ptr, BIAS_DIM, ACTIVATION, scale0_ptr, scale1_ptr, SCALE0, SCALE1)
                store_rows_staged(hi, c_smem[cid], row, pid_n * BN + BN // 2, row_end, N, c_ptr, stride_cm, SUB_M,
                                  BN // 2, OUT_DTYPE, bias_ptr, BIAS_DIM, ACTIVATION, scale0_ptr, scale1_ptr, SCALE0,
                                  SCALE1)
        else:
            store_rows_pointers(acc, row, pid_n * BN, row_end, N, c_ptr, stride_cm, stride_cn, SUB_M, BN, bias_ptr,
                                BIAS_DIM, ACTIVATION, scale0_ptr, scale1_ptr, SCALE0, SCALE1)
    elif found > 0:                               # rows past the group's end: no MMAs
        count = walk_ring(count, cid, full, empty, k_tiles, NUM_STAGES, rank, CLUSTER_N)
    return count


@jit
def walk_ring(count, cid, full, empty, k_tiles, NUM_STAGES: tl.constexpr, rank=0, CLUSTER_N: tl.constexpr = 1):
    """A consumer with nothing to multiply in a tile (its rows lie past the group's end, or in a pair its CTA's
    column tile past N): the ring's stages (which a pair's peer fills too) and the issue turns are walked in
    step, each stage released.  Returns the ring counter."""
    for k in range(k_tiles):
        slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
        tlx.barrier_wait(full[slot], phase)
        tlx.named_barrier_wait(9 + cid, 256)
        tlx.named_barrier_arrive(9 + (cid + 1) % 2, 256)
        release(empty[slot], rank, CLUSTER_N)
        count += 1
    return count


@jit
def split_tail(row0, row_end, pid_n, count, cid, a_smem, b_smem, c_smem, full, empty, c_ptr, N, k_tiles, stride_cm,
               stride_cn, BM: tl.constexpr, BN: tl.constexpr, NUM_STAGES: tl.constexpr, B_KMAJOR: tl.constexpr,
               C_TMA: tl.constexpr, OUT_DTYPE: tl.constexpr, bias_ptr=None, BIAS_DIM: tl.constexpr = -1,
               ACTIVATION: tl.constexpr = 0, scale0_ptr=None, scale1_ptr=None, SCALE0: tl.constexpr = 0,
               SCALE1: tl.constexpr = 0, PROMOTE: tl.constexpr = False):
    """Consumer ``cid``'s half of a tile whose group ends within its first ``BM / 2`` rows: those
    rows (the first consumer's ``a`` buffer; the producer loads no second) times columns
    ``cid * BN / 2 ..`` of the ``b`` buffer, an ``m64n(BN/2)`` product a k-step in the consumers'
    usual turns, so both keep the tensor cores busy where one alone would multiply the whole
    width with its own waits exposed; then that half's masked stores.  Returns the ring counter."""
    SUB_M: tl.constexpr = BM // 2
    HALF_N: tl.constexpr = BN // 2
    acc, count = mma_steps(tl.zeros((SUB_M, HALF_N), dtype=tl.float32), count, cid, 0, cid * HALF_N, a_smem, b_smem,
                           full, empty, k_tiles, NUM_STAGES, B_KMAJOR, 0, 1, PROMOTE)
    col = pid_n * BN + cid * HALF_N
    if C_TMA:
        store_rows_staged(acc, c_smem[cid], row0, col, row_end, N, c_ptr, stride_cm, SUB_M, HALF_N, OUT_DTYPE,
                          bias_ptr, BIAS_DIM, ACTIVATION, scale0_ptr, scale1_ptr, SCALE0, SCALE1)
    else:
        store_rows_pointers(acc, row0, col, row_end, N, c_ptr, stride_cm, stride_cn, SUB_M, HALF_N, bias_ptr,
                            BIAS_DIM, ACTIVATION, scale0_ptr, scale1_ptr, SCALE0, SCALE1)
    return count


@jit
def tile_count(table_ptr, E, ROW_TILES, num_pid_n, EXPERT_ORDER: tl.constexpr, COLUMN_BANDS: tl.constexpr = 0):
    """The tile indices to walk: in expert order or column bands the groups' row tiles' (the table's
    last row-tile end), else ``ROW_TILES`` (an upper bound: the tiles of row tiles past the last
    group's are skipped)."""
    if EXPERT_ORDER or COLUMN_BANDS > 0:
        return tl.load(table_ptr + E - 1) * num_pid_n
    else:
        return ROW_TILES * num_pid_n


@jit
def publish_tile(ids, ids_full, ids_empty, n, row0, row_end, found, pid_n, ID_BUFS: tl.constexpr, group=0,
                 WITH_GROUP: tl.constexpr = False):
    """The producer hands the consumers their ``n``-th tile, located (first row, end row,
    found, column tile: ``found = -1`` ends the walk; ``WITH_GROUP``: and its group, for the
    epilogue's bias row), through a ring of ``ID_BUFS`` slots of four (five) shared int32
    (dynamic schedule): the consumers search no table."""
    SLOT_INTS: tl.constexpr = 5 if WITH_GROUP else 4
    slot, phase = tlx.get_bufidx_phase(n, ID_BUFS)
    tlx.barrier_wait(ids_empty[slot], phase ^ 1)
    zero = tl.full((1,), 0, tl.int32)
    tlx.local_store(ids[SLOT_INTS * slot], zero + row0)
    tlx.local_store(ids[SLOT_INTS * slot + 1], zero + row_end)
    tlx.local_store(ids[SLOT_INTS * slot + 2], zero + found)
    tlx.local_store(ids[SLOT_INTS * slot + 3], zero + pid_n)
    if WITH_GROUP:
        tlx.local_store(ids[SLOT_INTS * slot + 4], zero + group)
    tlx.barrier_arrive(ids_full[slot])


@jit
def take_tile(ids, ids_full, ids_empty, n, ID_BUFS: tl.constexpr, WITH_GROUP: tl.constexpr = False):
    """A consumer's ``n``-th tile from the producer's ring: (first row, end row, found, column
    tile, group: 0 without ``WITH_GROUP``) (dynamic schedule)."""
    SLOT_INTS: tl.constexpr = 5 if WITH_GROUP else 4
    slot, phase = tlx.get_bufidx_phase(n, ID_BUFS)
    tlx.barrier_wait(ids_full[slot], phase)
    row0 = tl.sum(tlx.local_load(ids[SLOT_INTS * slot]), axis=0)
    row_end = tl.sum(tlx.local_load(ids[SLOT_INTS * slot + 1]), axis=0)
    found = tl.sum(tlx.local_load(ids[SLOT_INTS * slot + 2]), axis=0)
    pid_n = tl.sum(tlx.local_load(ids[SLOT_INTS * slot + 3]), axis=0)
    group = 0
    if WITH_GROUP:
        group = tl.sum(tlx.local_load(ids[SLOT_INTS * slot + 4]), axis=0)
    tlx.barrier_arrive(ids_empty[slot])
    return row0, row_end, found, pid_n, group


@jit
def grouped_gemm_ws_kernel(a_desc, b_desc, c_ptr, c_desc, table_ptr, E, N, K, ROW_TILES, num_progs, stride_cm,
                           stride_cn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                           NUM_STAGES: tl.constexpr, DTYPE: tl.constexpr, B_KMAJOR: tl.constexpr,
                           B_BOX_N: tl.constexpr, E_PAD: tl.constexpr, SEARCH_STEPS: tl.constexpr,
                           C_TMA: tl.constexpr = False, OUT_DTYPE: tl.constexpr = None, C_BOX_N: tl.constexpr = 64,
                           EXPERT_ORDER: tl.constexpr = False, DYNAMIC: tl.constexpr = False, bias_ptr=None,
                           stride_bias=None, BIAS_DIM: tl.constexpr = -1, ACTIVATION: tl.constexpr = 0,
                           SPLIT_TAIL: tl.constexpr = False, COLUMN_BANDS: tl.constexpr = 0,
                           CLUSTER_N: tl.constexpr = 1, scale0_ptr=None, scale1_ptr=None, stride_scale1=0,
                           SCALE0: tl.constexpr = 0, SCALE1: tl.constexpr = 0, PROMOTE: tl.constexpr = False):
    tl.static_assert(CLUSTER_N == 1 or (CLUSTER_N == 2 and DYNAMIC and EXPERT_ORDER and not SPLIT_TAIL),
                     "CTA pairs (CLUSTER_N = 2) run the dynamic schedule in expert order, without split tails")
    tl.static_assert(not PROMOTE or (B_KMAJOR and BN <= 128),
                     "promoted fp8 sums (use_fast_accum=False): K-major weights and tiles up to 128 columns (a "
                     "second accumulator of the tile's width must fit beside the first)")
    SUB_M: tl.constexpr = BM // 2
    WITH_GROUP: tl.constexpr = BIAS_DIM == 1 or SCALE1 > 0                  # the consumers need the tile's expert
    ELT: tl.constexpr = DTYPE.primitive_bitwidth // 8
    ID_BUFS: tl.constexpr = 2
    c_smem = None
    if C_TMA:
        c_smem = tlx.local_alloc((SUB_M, BN // 2), OUT_DTYPE, 2)           # one half-tile per consumer
    a_smem = tlx.local_alloc((SUB_M, BK), DTYPE, NUM_STAGES * 2)             # [2 * stage + consumer]
    if B_KMAJOR:
        b_smem = tlx.local_alloc((BN, BK), DTYPE, NUM_STAGES)
    else:
        b_smem = tlx.local_alloc((BK, BN), DTYPE, NUM_STAGES)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=2 * CLUSTER_N)      # a pair's four consumers
    if DYNAMIC:                     # the tile indices the producer draws, handed to the consumers
        ids = tlx.local_alloc((1,), tl.int32, (5 if WITH_GROUP else 4) * ID_BUFS)
        ids_full = tlx.alloc_barriers(ID_BUFS, arrive_count=1)
        ids_empty = tlx.alloc_barriers(ID_BUFS, arrive_count=2)
    rank, mail, mail_full, mail_empty = pair_mailbox(CLUSTER_N, ID_BUFS)

    num_pid_n = tl.cdiv(N, BN * CLUSTER_N)          # column tiles (a pair's: pairs of them)
    k_tiles = tl.cdiv(K, BK)

    tl.extra.cuda.gdc_wait()        # group_table_kernel's table and counter (a PDL launch after it)
    with tlx.async_tasks():
        with tlx.async_task("default"):                                     # the TMA producer
            num_tiles = tile_count(table_ptr, E, ROW_TILES, num_pid_n, EXPERT_ORDER, COLUMN_BANDS)
            count = 0
            if DYNAMIC:             # a program's (pair's) first tile is its id, the next ones are drawn
                tile = tl.program_id(0) // CLUSTER_N
                n = 0
                while tile < num_tiles:
                    group, row0, row_end, found, pid_n = locate_tile(table_ptr, E, tile, ROW_TILES, num_pid_n, BM,
                                                                     E_PAD, SEARCH_STEPS, GROUP_M, EXPERT_ORDER,
                                                                     COLUMN_BANDS)
                    pid_n = pid_n * CLUSTER_N + rank                            # this CTA's column tile
                    own_end = tl.where(pid_n * BN < N, row_end, row0)       # past N: no rows to multiply
                    publish_tile(ids, ids_full, ids_empty, n, row0, own_end, found, pid_n, ID_BUFS, group, WITH_GROUP)
                    count = produce_tile(group, row0, row_end, found, pid_n, count, a_desc, b_desc, a_smem, b_smem,
                                         full, empty, N, K, k_tiles, BM, BN, BK, NUM_STAGES, ELT, B_KMAJOR, B_BOX_N,
                                         rank, CLUSTER_N)
                    tile = next_tile(table_ptr, 2 * E_PAD, num_progs // CLUSTER_N, n, rank, mail, mail_full,
                                     mail_empty, CLUSTER_N, ID_BUFS)
                    n += 1
                publish_tile(ids, ids_full, ids_empty, n, 0, 0, -1, 0, ID_BUFS, 0, WITH_GROUP)      # the end
            else:                   # every num_progs-th tile
                for tile in range(tl.program_id(0), num_tiles, num_progs):
                    group, row0, row_end, found, pid_n = locate_tile(table_ptr, E, tile, ROW_TILES, num_pid_n, BM,
                                                                     E_PAD, SEARCH_STEPS, GROUP_M, EXPERT_ORDER,
                                                                     COLUMN_BANDS)
                    count = produce_tile(group, row0, row_end, found, pid_n, count, a_desc, b_desc, a_smem, b_smem,
                                         full, empty, N, K, k_tiles, BM, BN, BK, NUM_STAGES, ELT, B_KMAJOR, B_BOX_N)
        with tlx.async_task(num_warps=4, registers=232, replicate=2):        # the wgmma consumers
            cid = tlx.async_task_replica_id()
            if cid == 1:
                tlx.named_barrier_arrive(9, 256)                 # consumer 0 issues first
            count = 0
            if DYNAMIC:
                n = 0
                row0, row_end, found, pid_n, group = take_tile(ids, ids_full, ids_empty, n, ID_BUFS, WITH_GROUP)
                while found >= 0:
                    count = consume_tile(row0, row_end, found, pid_n, count, cid, a_smem, b_smem, c_smem, full,
                                         empty, c_ptr, c_desc, N, k_tiles, stride_cm, stride_cn, BM, BN, NUM_STAGES,
                                         B_KMAJOR, C_TMA, OUT_DTYPE, C_BOX_N, group, bias_ptr, stride_bias, BIAS_DIM,
                                         ACTIVATION, SPLIT_TAIL, rank, CLUSTER_N, scale0_ptr, scale1_ptr,
                                         stride_scale1, SCALE0, SCALE1, PROMOTE)
                    n += 1
                    row0, row_end, found, pid_n, group = take_tile(ids, ids_full, ids_empty, n, ID_BUFS, WITH_GROUP)
            else:
                num_tiles = tile_count(table_ptr, E, ROW_TILES, num_pid_n, EXPERT_ORDER, COLUMN_BANDS)
                for tile in range(tl.program_id(0), num_tiles, num_progs):
                    group, row0, row_end, found, pid_n = locate_tile(table_ptr, E, tile, ROW_TILES, num_pid_n, BM,
                                                                     E_PAD, SEARCH_STEPS, GROUP_M, EXPERT_ORDER,
                                                                     COLUMN_BANDS)
                    count = consume_tile(row0, row_end, found, pid_n, count, cid, a_smem, b_smem, c_smem, full,
                                         empty, c_ptr, c_desc, N, k_tiles, stride_cm, stride_cn, BM, BN, NUM_STAGES,
                                         B_KMAJOR, C_TMA, OUT_DTYPE, C_BOX_N, group, bias_ptr, stride_bias, BIAS_DIM,
                                         ACTIVATION, SPLIT_TAIL, scale0_ptr=scale0_ptr, scale1_ptr=scale1_ptr,
                                         stride_scale1=stride_scale1, SCALE0=SCALE0, SCALE1=SCALE1,
                                         PROMOTE=PROMOTE)
            if cid == 0:
                tlx.named_barrier_wait(9, 256)                   # absorb the last consumer's last turn
            if C_TMA:
                tlx.async_descriptor_store_wait(0)            # before the CTA's shared memory goes away
