"""The grouped (MoE) GEMM in swapped tiles: ``out^T = W a^T`` per tile, a group's rows as the wgmma's N.

``grouped_gemm_ws.py`` tiles each group's rows in blocks of ``BM = 128`` (two consumers of 64 rows, the
wgmma's M): a group of r rows costs ``cdiv(r, 64)`` consumer blocks of products, so with a few hundred
rows an expert a large part of the work is padding (E = 8, M = 2048: 2,304 rows of products for 2,048
rows; a K sweep on the H100 put that kernel's time per unit of K 15 % above a loop of cuBLAS calls, whose
per-expert kernels take the rows as N: session 40).  This kernel does what those do, inside one persistent
launch: a tile is ``BW`` of the expert's weight rows (the output's columns, the wgmma's M: two consumers of
``BW / 2``) by up to ``BR`` rows of one group (the wgmma's N): 128 x 256 (a whole tile's products one
m64n256 a consumer, as the 128x256 tiles') or 256 x 160 (cuBLAS's swapped shape; its m64n160 pairs ran ~0.87
of the 128x256 tiles' rate on the H100); the group's last tile is its rows rounded up to 16, so a group of r
rows costs r rounded up to 16 rows of products.

* The tile space: ``grouped_gemm_ws``'s group table in tiles of ``BR`` rows, walked in expert order
  (``find_expert_tile``: an expert's row tiles in balanced bands of at most ``GROUP_M`` walk its column
  tiles together) by the dynamic schedule (``next_tile``: a program's first tile is its id, the next ones
  are drawn from a counter; the producer hands each to the consumers with ``publish_tile``).
* The producer, per k-step of a tile of ``rows`` rows: the weights' ``[BW, BK]`` box (a ``[E * N, K]``
  descriptor of the K-major weights, row ``g * N + column tile * BW``; rows past N are the next expert's,
  multiplied and never stored) and the tile's rows of ``a`` into one ``[BR, BK]`` buffer: one box of ``BR``
  rows for a whole tile, ``cdiv(rows, 16)`` boxes of ``[16, BK]`` for a group's last one (rows past the
  group's end inside the last box are loaded and never stored; past ``total_M`` TMA fills zeros).
* Consumer c (of two, taking turns at issue as in ``grouped_gemm_ws``): weight rows ``c * BW / 2 ..`` (a
  ``[BW / 2, BK]`` slice of the stage) times the tile's ``16 v`` rows of ``a`` (K-major: wgmma's B), as parts
  of 256, 128, 64, 32 and 16 rows (the binary digits of v: register tiles the epilogue can split into
  16-column chunks) that ``fuse-dot-pairs`` issues as one ``m64n(16 v)`` (adjacent row slices of one
  buffer).  A variant of the tile's code for each v in ``1 .. BR / 16``: the tile's rows pick one at run
  time.
* The epilogue, per 16 rows of the output (16 columns of a part): the fused epilogue in the kernel's
  coordinates (the bias and ``b``'s scale along the accumulator's rows, ``a``'s scale along its columns),
  the chunk written transposed into the consumer's ``[16, BW / 2]`` staging buffers in turn (``C_STAGING``
  of them: a chunk waits for the stores of the one that used its buffer last) and TMA-stored in
  ``[16, C_BOX_N]`` boxes (``gemm_ws.store_chunk_transposed``) when its 16 rows all belong to the group;
  the group's last chunk is read back and stored through pointers masked to the group's rows
  (``store_chunk_masked``; a box would write the next group's rows).  Without ``C_TMA`` (an output
  TMA cannot store) every chunk goes that way, through one staging buffer a consumer.

* ``CLUSTER_N = 2``: CTA pairs on adjacent weight tiles (a pair's column tile is two of them) and the same
  rows of ``a``, each CTA loading half of them into both by multicast (``produce_tile``), every stage
  released to both producers (four consumers); rank 0 draws the pair's tiles and mails them to rank 1
  (``next_tile``); a CTA whose weight tile lies past N walks the ring without products (``walk_ring``).

16-bit operands (``BK = 64``) or 8-bit ones (``BK = 128``: both operands K-major, as wgmma reads them);
the products are summed in the wgmma accumulator.  No GLU pairs (the host takes the other kernel there).
"""
from ... import language as tl
from ...language import tlx
from ...runtime.jit import jit
from .epilogue import apply_epilogue
from .gemm_ws import column_halves, release, store_chunk_transposed
from .grouped_gemm_ws import find_expert_tile, next_tile, pair_mailbox, publish_tile, take_tile, walk_ring

CHUNK = 16            # output rows a chunk of the epilogue (columns of the accumulator)


@jit
def produce_tile(group, row0, row_end, found, pid_n, count, w_desc, a_desc, a_tile_desc, w_smem, a_smem, full, empty, N,
                 k_tiles, BW: tl.constexpr, BR: tl.constexpr, BK: tl.constexpr, NUM_STAGES: tl.constexpr,
                 ELT: tl.constexpr, rank=0, CLUSTER_N: tl.constexpr = 1):
    """The producer's k-steps of one tile: the weights' box (``pid_n``: this CTA's column tile) and the
    tile's rows of ``a``: one ``[BR, BK]`` box for a whole tile (``a_tile_desc``), else 16-row boxes
    (``a_desc``), as many as its rows need.  In a pair (``CLUSTER_N = 2``) both CTAs take the same rows:
    rank h loads half h of a whole tile's box (``a_tile_desc``'s box is ``[BR / 2, BK]`` then) or the
    16-row boxes ``j`` with ``j % 2 == h``, each into both CTAs (multicast).  Returns the ring counter."""
    if found > 0:
        rows = tl.minimum(row_end - row0, BR)
        boxes = tl.cdiv(rows, CHUNK)
        for k in range(k_tiles):
            slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
            tlx.barrier_wait(empty[slot], phase ^ 1)
            for v in tl.static_range(1, BR // CHUNK + 1):         # (a constant count of bytes a branch)
                if boxes == v:
                    tlx.barrier_expect_bytes(full[slot], (BW + v * CHUNK) * BK * ELT)
            tlx.async_descriptor_load(w_desc, w_smem[slot], [group * N + pid_n * BW, k * BK], full[slot])
            if CLUSTER_N > 1:
                if rows == BR:
                    half = tlx.local_slice(a_smem[slot], [rank * (BR // 2), 0], [BR // 2, BK])
                    tlx.async_descriptor_load(a_tile_desc, half, [row0 + rank * (BR // 2), k * BK], full[slot],
                                              multicast_targets=[0, 1])
                else:
                    for j in tl.static_range(BR // CHUNK):
                        box = tlx.local_slice(a_smem[slot], [j * CHUNK, 0], [CHUNK, BK])
                        tlx.async_descriptor_load(a_desc, box, [row0 + j * CHUNK, k * BK], full[slot],
                                                  pred=(j < boxes) & (j % 2 == rank), multicast_targets=[0, 1])
            elif rows == BR:
                tlx.async_descriptor_load(a_tile_desc, a_smem[slot], [row0, k * BK], full[slot])
            else:
                for j in tl.static_range(BR // CHUNK):
                    box = tlx.local_slice(a_smem[slot], [j * CHUNK, 0], [CHUNK, BK])
                    tlx.async_descriptor_load(a_desc, box, [row0 + j * CHUNK, k * BK], full[slot], pred=j < boxes)
            count += 1
    return count


@jit
def store_chunk_masked(c_bufs, first, x, row, col, row_end, N, c_ptr, stride_cm, stride_cn, scale0_ptr, scale1_ptr,
                       bias_ptr, OUT_DTYPE: tl.constexpr, SCALE0: tl.constexpr, SCALE1: tl.constexpr,
                       BIAS_DIM: tl.constexpr, ACTIVATION: tl.constexpr):
    """A ``[BW / 2, 16]`` chunk of the accumulator (output columns ``row ..``, output rows ``col ..``) through the
    fused epilogue, written transposed into staging buffer ``first`` once every TMA store has read it, read
    back as 16 output rows and stored through pointers: rows below ``row_end``, columns below ``N``."""
    SUB_W: tl.constexpr = x.shape[0]
    offs0 = row + tl.arange(0, SUB_W)
    offs1 = col + tl.arange(0, CHUNK)
    if SCALE0 + SCALE1 + BIAS_DIM + 1 + ACTIVATION > 0:
        x = apply_epilogue(x, offs0, offs1, offs0 < N, offs1 < row_end, scale0_ptr, scale1_ptr, bias_ptr, None, 0, 0,
                           SCALE0, SCALE1, BIAS_DIM, ACTIVATION, False)
    buf = tlx.local_slice(c_bufs[first], [0, 0], [CHUNK, SUB_W])
    tlx.async_descriptor_store_wait(0)
    tlx.local_store(tlx.local_trans(buf), x.to(OUT_DTYPE))
    rows_out = col + tl.arange(0, CHUNK)
    cols_out = row + tl.arange(0, SUB_W)
    tl.store(c_ptr + rows_out.to(tl.int64)[:, None] * stride_cm + cols_out[None, :] * stride_cn, tlx.local_load(buf),
             mask=(rows_out < row_end)[:, None] & (cols_out < N)[None, :])


@jit
def store_chunk(c_desc, c_bufs, cid, n, x, j, last, row, row0, row_end, N, c_ptr, stride_cm, stride_cn, scale0_ptr,
                scale1_ptr, bias_ptr, C_TMA: tl.constexpr, C_BOX_N: tl.constexpr, OUT_DTYPE: tl.constexpr,
                SCALE0: tl.constexpr, SCALE1: tl.constexpr, BIAS_DIM: tl.constexpr, ACTIVATION: tl.constexpr,
                STAGING: tl.constexpr):
    """Chunk ``j`` (output rows ``row0 + 16 j ..``) of consumer ``cid``'s tile: TMA-stored when its rows all
    belong to the group (every chunk but the tile's ``last`` one, which is checked), else masked.  ``n``
    counts the consumer's TMA-stored chunks (they take its ``STAGING`` buffers in turn).  Returns ``n``."""
    SUB_W: tl.constexpr = x.shape[0]
    col = row0 + j * CHUNK
    if C_TMA:
        full = True
        if last:
            full = col + CHUNK <= row_end
        if full:
            n = store_chunk_transposed(c_desc, c_bufs, STAGING * cid, n, x, row, col, N, row_end, scale0_ptr,
                                       scale1_ptr, bias_ptr, None, 0, 0, SUB_W, CHUNK, C_BOX_N, OUT_DTYPE, SCALE0,
                                       SCALE1, BIAS_DIM, ACTIVATION, False, STAGING)
        else:
            store_chunk_masked(c_bufs, STAGING * cid + n % STAGING, x, row, col, row_end, N, c_ptr, stride_cm,
                               stride_cn, scale0_ptr, scale1_ptr, bias_ptr, OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM,
                               ACTIVATION)
    else:
        store_chunk_masked(c_bufs, cid, x, row, col, row_end, N, c_ptr, stride_cm, stride_cn, scale0_ptr, scale1_ptr,
                           bias_ptr, OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM, ACTIVATION)
    return n


@jit
def store_part(c_desc, c_bufs, cid, n, part, j0, LAST_J: tl.constexpr, row, row0, row_end, N, c_ptr, stride_cm,
               stride_cn, scale0_ptr, scale1_ptr, bias_ptr, C_TMA: tl.constexpr, C_BOX_N: tl.constexpr,
               OUT_DTYPE: tl.constexpr, SCALE0: tl.constexpr, SCALE1: tl.constexpr, BIAS_DIM: tl.constexpr,
               ACTIVATION: tl.constexpr, STAGING: tl.constexpr):
    """A part of 16, 32, 64, 128 or 256 accumulator columns, chunks ``j0 ..`` of the tile, split into 16-column
    chunks by halving (register reshapes: no data moves).  Returns ``n``."""
    SUB_W: tl.constexpr = part.shape[0]
    WIDTH: tl.constexpr = part.shape[1]
    if WIDTH == 16:
        n = store_chunk(c_desc, c_bufs, cid, n, part, j0, j0 == LAST_J, row, row0, row_end, N, c_ptr, stride_cm,
                        stride_cn, scale0_ptr, scale1_ptr, bias_ptr, C_TMA, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1,
                        BIAS_DIM, ACTIVATION, STAGING)
    else:
        for h in tl.static_range(WIDTH // 32):          # 32 columns at a time: halves of halves of the part
            pair = part
            if WIDTH == 256:
                g0, g1 = column_halves(pair, SUB_W, 256)
                pair = g0 if h // 4 == 0 else g1
            if WIDTH >= 128:
                h0, h1 = column_halves(pair, SUB_W, 128)
                pair = h0 if h // 2 % 2 == 0 else h1
            if WIDTH >= 64:
                q0, q1 = column_halves(pair, SUB_W, 64)
                pair = q0 if h % 2 == 0 else q1
            e0, e1 = column_halves(pair, SUB_W, 32)
            n = store_chunk(c_desc, c_bufs, cid, n, e0, j0 + 2 * h, j0 + 2 * h == LAST_J, row, row0, row_end, N,
                            c_ptr, stride_cm, stride_cn, scale0_ptr, scale1_ptr, bias_ptr, C_TMA, C_BOX_N, OUT_DTYPE,
                            SCALE0, SCALE1, BIAS_DIM, ACTIVATION, STAGING)
            n = store_chunk(c_desc, c_bufs, cid, n, e1, j0 + 2 * h + 1, j0 + 2 * h + 1 == LAST_J, row, row0, row_end,
                            N, c_ptr, stride_cm, stride_cn, scale0_ptr, scale1_ptr, bias_ptr, C_TMA, C_BOX_N,
                            OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM, ACTIVATION, STAGING)
    return n


@jit
def swapped_tile(count, n, cid, row0, row_end, pid_n, w_smem, a_smem, c_bufs, full, empty, c_desc, c_ptr, N,
                 k_tiles, stride_cm, stride_cn, scale0_ptr, scale1_ptr, bias_ptr, V: tl.constexpr, BW: tl.constexpr,
                 BK: tl.constexpr, NUM_STAGES: tl.constexpr, C_TMA: tl.constexpr, C_BOX_N: tl.constexpr,
                 OUT_DTYPE: tl.constexpr, SCALE0: tl.constexpr, SCALE1: tl.constexpr, BIAS_DIM: tl.constexpr,
                 ACTIVATION: tl.constexpr, STAGING: tl.constexpr, rank=0, CLUSTER_N: tl.constexpr = 1):
    """Consumer ``cid``'s part of a tile of ``16 V`` rows: weight rows ``cid * BW / 2 ..`` of each stage times
    rows ``0 .. 16 V`` of its ``a`` buffer, in parts of 256 / 128 / 64 / 32 / 16 rows (V's binary digits, the
    widest first; one wgmma after ``fuse-dot-pairs``), then each part's chunks stored (the narrowest first:
    its registers free early).  Returns (ring counter, stored-chunk counter)."""
    SUB_W: tl.constexpr = BW // 2
    P256: tl.constexpr = V // 16 % 2
    P128: tl.constexpr = V // 8 % 2
    P64: tl.constexpr = V // 4 % 2
    P32: tl.constexpr = V // 2 % 2
    P16: tl.constexpr = V % 2
    O128: tl.constexpr = 256 * P256                # each part's first row in the a buffer (and chunk * 16)
    O64: tl.constexpr = O128 + 128 * P128
    O32: tl.constexpr = O64 + 64 * P64
    O16: tl.constexpr = O32 + 32 * P32
    if P256:
        acc256 = tl.zeros((SUB_W, 256), dtype=tl.float32)
    if P128:
        acc128 = tl.zeros((SUB_W, 128), dtype=tl.float32)
    if P64:
        acc64 = tl.zeros((SUB_W, 64), dtype=tl.float32)
    if P32:
        acc32 = tl.zeros((SUB_W, 32), dtype=tl.float32)
    if P16:
        acc16 = tl.zeros((SUB_W, 16), dtype=tl.float32)
    for k in range(k_tiles):
        slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
        tlx.barrier_wait(full[slot], phase)
        tlx.named_barrier_wait(9 + cid, 256)          # the consumers take turns issuing
        w = tlx.local_slice(w_smem[slot], [cid * SUB_W, 0], [SUB_W, BK])
        if P256:
            acc256 = tlx.async_dot(w, tlx.local_trans(tlx.local_slice(a_smem[slot], [0, 0], [256, BK])), acc256)
        if P128:
            acc128 = tlx.async_dot(w, tlx.local_trans(tlx.local_slice(a_smem[slot], [O128, 0], [128, BK])), acc128)
        if P64:
            acc64 = tlx.async_dot(w, tlx.local_trans(tlx.local_slice(a_smem[slot], [O64, 0], [64, BK])), acc64)
        if P32:
            acc32 = tlx.async_dot(w, tlx.local_trans(tlx.local_slice(a_smem[slot], [O32, 0], [32, BK])), acc32)
        if P16:
            acc16 = tlx.async_dot(w, tlx.local_trans(tlx.local_slice(a_smem[slot], [O16, 0], [16, BK])), acc16)
        tlx.named_barrier_arrive(9 + (cid + 1) % 2, 256)
        if P256:
            acc256 = tlx.async_dot_wait(0, acc256)
        if P128:
            acc128 = tlx.async_dot_wait(0, acc128)
        if P64:
            acc64 = tlx.async_dot_wait(0, acc64)
        if P32:
            acc32 = tlx.async_dot_wait(0, acc32)
        if P16:
            acc16 = tlx.async_dot_wait(0, acc16)
        release(empty[slot], rank, CLUSTER_N)
        count += 1
    row = pid_n * BW + cid * SUB_W                    # the consumer's first output column
    if P16:
        n = store_part(c_desc, c_bufs, cid, n, acc16, O16 // 16, V - 1, row, row0, row_end, N, c_ptr, stride_cm,
                       stride_cn, scale0_ptr, scale1_ptr, bias_ptr, C_TMA, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1,
                       BIAS_DIM, ACTIVATION, STAGING)
    if P32:
        n = store_part(c_desc, c_bufs, cid, n, acc32, O32 // 16, V - 1, row, row0, row_end, N, c_ptr, stride_cm,
                       stride_cn, scale0_ptr, scale1_ptr, bias_ptr, C_TMA, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1,
                       BIAS_DIM, ACTIVATION, STAGING)
    if P64:
        n = store_part(c_desc, c_bufs, cid, n, acc64, O64 // 16, V - 1, row, row0, row_end, N, c_ptr, stride_cm,
                       stride_cn, scale0_ptr, scale1_ptr, bias_ptr, C_TMA, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1,
                       BIAS_DIM, ACTIVATION, STAGING)
    if P128:
        n = store_part(c_desc, c_bufs, cid, n, acc128, O128 // 16, V - 1, row, row0, row_end, N, c_ptr, stride_cm,
                       stride_cn, scale0_ptr, scale1_ptr, bias_ptr, C_TMA, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1,
                       BIAS_DIM, ACTIVATION, STAGING)
    if P256:
        n = store_part(c_desc, c_bufs, cid, n, acc256, 0, V - 1, row, row0, row_end, N, c_ptr, stride_cm, stride_cn,
                       scale0_ptr, scale1_ptr, bias_ptr, C_TMA, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM,
                       ACTIVATION, STAGING)
    return count, n


@jit
def grouped_gemm_swap_kernel(w_desc, a_desc, a_tile_desc, c_ptr, c_desc, table_ptr, E, N, K, num_progs, stride_cm,
                             stride_cn, BW: tl.constexpr, BR: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                             NUM_STAGES: tl.constexpr, DTYPE: tl.constexpr, E_PAD: tl.constexpr,
                             SEARCH_STEPS: tl.constexpr, OUT_DTYPE: tl.constexpr, C_TMA: tl.constexpr = False,
                             C_BOX_N: tl.constexpr = 64, C_STAGING: tl.constexpr = 2, bias_ptr=None, stride_bias=0,
                             BIAS_DIM: tl.constexpr = -1, ACTIVATION: tl.constexpr = 0, scale0_ptr=None,
                             scale1_ptr=None, stride_scale1=0, SCALE0: tl.constexpr = 0, SCALE1: tl.constexpr = 0,
                             CLUSTER_N: tl.constexpr = 1):
    tl.static_assert((BW == 128 or BW == 256) and BR % CHUNK == 0 and BR <= 256 and BW // 2 * BR // 128 <= 160,
                     "swapped grouped tiles: 128 or 256 weight rows (two consumers of 64 or 128) by at most 256 rows, "
                     "a multiple of 16, at most 160 accumulator registers a thread")
    tl.static_assert(CLUSTER_N == 1 or (CLUSTER_N == 2 and BR % (2 * CHUNK) == 0),
                     "CTA pairs share a whole tile's rows of a in two halves of whole 16-row chunks")
    SUB_W: tl.constexpr = BW // 2
    tl.static_assert(ACTIVATION < 5, "GLU pairs take grouped_gemm_ws_kernel (the host's choice)")
    tl.static_assert(BIAS_DIM != 0, "the bias is a row per expert (BIAS_DIM = 1) or none")
    WITH_GROUP: tl.constexpr = BIAS_DIM == 1 or SCALE1 > 0                  # the consumers need the tile's expert
    KBIAS: tl.constexpr = 0 if BIAS_DIM == 1 else -1        # the bias along the accumulator's rows
    ELT: tl.constexpr = DTYPE.primitive_bitwidth // 8
    ID_BUFS: tl.constexpr = 2
    BUFS: tl.constexpr = C_STAGING if C_TMA else 1
    c_bufs = tlx.local_alloc((CHUNK, SUB_W), OUT_DTYPE, 2 * BUFS)              # [BUFS * consumer + i]
    w_smem = tlx.local_alloc((BW, BK), DTYPE, NUM_STAGES)
    a_smem = tlx.local_alloc((BR, BK), DTYPE, NUM_STAGES)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=2 * CLUSTER_N)      # a pair's four consumers
    ids = tlx.local_alloc((1,), tl.int32, (5 if WITH_GROUP else 4) * ID_BUFS)
    ids_full = tlx.alloc_barriers(ID_BUFS, arrive_count=1)
    ids_empty = tlx.alloc_barriers(ID_BUFS, arrive_count=2)
    rank, mail, mail_full, mail_empty = pair_mailbox(CLUSTER_N, ID_BUFS)
    num_pid_n = tl.cdiv(N, BW * CLUSTER_N)          # column tiles (a pair's: pairs of them)
    k_tiles = tl.cdiv(K, BK)

    tl.extra.cuda.gdc_wait()        # group_table_kernel's table and counter (a PDL launch after it)
    with tlx.async_tasks():
        with tlx.async_task("default"):                                     # the TMA producer
            num_tiles = tl.load(table_ptr + E - 1) * num_pid_n
            count = 0
            tile = tl.program_id(0) // CLUSTER_N      # a program's (pair's) first tile, then drawn ones
            n = 0
            while tile < num_tiles:
                group, row0, row_end, found, pid_n = find_expert_tile(table_ptr, E, tile, num_pid_n, BR, E_PAD,
                                                                      SEARCH_STEPS, GROUP_M)
                own_end = row_end
                if CLUSTER_N > 1:
                    pid_n = pid_n * CLUSTER_N + rank                        # this CTA's column tile
                    own_end = tl.where(pid_n * BW < N, row_end, row0)       # past N: no rows to multiply
                publish_tile(ids, ids_full, ids_empty, n, row0, own_end, found, pid_n, ID_BUFS, group, WITH_GROUP)
                count = produce_tile(group, row0, row_end, found, pid_n, count, w_desc, a_desc, a_tile_desc, w_smem,
                                     a_smem, full, empty, N, k_tiles, BW, BR, BK, NUM_STAGES, ELT, rank, CLUSTER_N)
                tile = next_tile(table_ptr, 2 * E_PAD, num_progs // CLUSTER_N, n, rank, mail, mail_full, mail_empty,
                                 CLUSTER_N, ID_BUFS)
                n += 1
            publish_tile(ids, ids_full, ids_empty, n, 0, 0, -1, 0, ID_BUFS, 0, WITH_GROUP)          # the end
        with tlx.async_task(num_warps=4, registers=232, replicate=2):        # the wgmma consumers
            cid = tlx.async_task_replica_id()
            if cid == 1:
                tlx.named_barrier_arrive(9, 256)                 # consumer 0 issues first
            count = 0
            stored = 0
            n = 0
            row0, row_end, found, pid_n, group = take_tile(ids, ids_full, ids_empty, n, ID_BUFS, WITH_GROUP)
            while found >= 0:
                # the epilogue in the kernel's coordinates: b's scale and the bias along the accumulator's rows
                # (output columns), a's scale along its columns (output rows)
                bias_g = bias_ptr
                if BIAS_DIM == 1:
                    bias_g = bias_ptr + group.to(tl.int64) * stride_bias
                scale1_g = scale1_ptr
                if SCALE1 > 0:
                    scale1_g = scale1_ptr + group.to(tl.int64) * stride_scale1
                v = tl.cdiv(tl.minimum(row_end - row0, BR), CHUNK)
                for variant in tl.static_range(1, BR // CHUNK + 1):
                    if (found > 0) & (v == variant):
                        count, stored = swapped_tile(count, stored, cid, row0, row_end, pid_n, w_smem, a_smem, c_bufs,
                                                     full, empty, c_desc, c_ptr, N, k_tiles, stride_cm, stride_cn,
                                                     scale1_g, scale0_ptr, bias_g, variant, BW, BK, NUM_STAGES, C_TMA,
                                                     C_BOX_N, OUT_DTYPE, SCALE1, SCALE0, KBIAS, ACTIVATION, BUFS,
                                                     rank, CLUSTER_N)
                if CLUSTER_N > 1:
                    if (found > 0) & (v == 0):            # this CTA's column tile lies past N
                        count = walk_ring(count, cid, full, empty, k_tiles, NUM_STAGES, rank, CLUSTER_N)
                n += 1
                row0, row_end, found, pid_n, group = take_tile(ids, ids_full, ids_empty, n, ID_BUFS, WITH_GROUP)
            if cid == 0:
                tlx.named_barrier_wait(9, 256)                   # absorb the last consumer's last turn
            tlx.async_descriptor_store_wait(0)                # before the CTA's shared memory goes away
