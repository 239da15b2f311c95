"""The warp-specialized persistent TMA GEMM (Hopper): one TMA producer, two or three wgmma consumers.

The structure of ``examples/hopper_gemm_ws.py`` (read its docstring for why each piece is
there), generalized for ``tlxc.ops.matmul``:

* operands in either major-ness: A K-major (row-major ``[M, K]``) or M-major (``a.t()``
  of a row-major ``[K, M]``), B N-major (row-major ``[K, N]``) or K-major (``w.t()`` of a
  row-major ``[N, K]``, every ``nn.Linear`` weight).  An M-major A tile is loaded as a
  ``[BK, BM/2]`` box and a K-major B tile as ``[BN, BK]`` rows; both reach wgmma through
  ``tlx.local_trans`` (the descriptor's transpose bit), never a copy.  fp8 takes K-major
  operands only (wgmma has no transpose for 8-bit types);
* ``num_progs`` programs (a runtime argument: the SM count for the persistent walk, the
  tile count for one tile per program) walk the output tiles in grouped order;
* pairs of CTAs (``CLUSTER_M = 2``) share B tiles by TMA multicast (the pair's tiles one
  above the other), or with ``SHARE_A`` A tiles (side by side: the wider operand of a tile
  narrower than it is tall, e.g. 128x80);
* ``NUM_CONSUMERS`` consumer warp groups (2, or 3 for 192-row tiles: a tile size between
  128x128 and 128x256 whose count fills the SMs' waves better, e.g. 3072^3: 384 tiles = 2.91
  waves of 132 where 128x128 gives 4.36 and 128x256 2.18; block shapes must be powers of two,
  so the third consumer is how a 192-wide tile exists) each own ``BM / NUM_CONSUMERS = 64``
  or 128 rows and take turns issuing their wgmmas (a ring of named barriers 9, 10, ...);
  ``CONSUMER_REGS`` is their setmaxnreg budget (232 for two, 160 for three);
* a tile of ``BN + BN_TAIL + BN_TAIL2`` columns (``BN_TAIL``: 0, or a narrower power of two;
  ``BN_TAIL2``: 0, or a power of two narrower still): block shapes are powers of two, so an
  80- or 192-column tile is a main part and a tail, each with its own B box (``bt_desc``),
  wgmma and C box (``ct_desc``), e.g. 1000x1240 in 128 tiles of 128x80 where 128x128 leaves
  52 SMs idle and 128x64 needs two rounds; a 152-column swapped tile is 128 + 16 + 8 (the
  second tail's box ``bt2_desc``; K-major B, swapped tiles only). On a K-major B the
  parts' products are one wgmma of the tile's width (``passes/dot_pairs.py``);
* the epilogue applies ``epilogue.apply_epilogue`` (scales, bias, activation, residual)
  to each consumer's accumulator, casts to the output dtype and TMA-stores it through a
  128B-swizzled shared tile, ``EPILOGUE_SUBTILE`` column slices at a time; or, with
  ``C_TMA = False`` (an output TMA cannot describe: odd row stride, N not a 16-byte
  multiple; and every GLU activation), stores it from registers through pointers (``c`` is
  then the output tensor, ``stride_cm``/``stride_cn`` its strides), masked at the edges.

* the host may run it on the swapped product ``C^T = B^T A^T`` (``_swap`` configurations:
  256 or 128 of N x 144, 152 or 160 of M, so the tile's M side fits odd token counts): its A is
  then ``b^T``, its B ``a^T`` and its C ``out^T``, whose tile TMA cannot store as it is; with
  ``C_TRANS`` (the host's choice where ``out`` is a TMA target) each consumer stores it as ``out``'s
  rows, 16 columns of C^T at a time, transposed into a shared chunk and TMA-stored
  (``store_chunk_transposed``); else through pointers; GLU pairs along the tile's rows
  (``GLU_AXIS = 0``), by ``C_TRANS`` only (the host refuses the rest: their pointer path's row
  exchange does not fit in shared memory); a CTA pair side by side (``SHARE_A``) shares the weights;
* ``KSPLIT`` (short M: 64-row tiles with a deep ring, cuBLAS's ``64x32_64x16`` / ``64x64_128x13``
  shapes): both consumers own the tile's ``BM = 64`` rows and take alternate k-steps (the ring's
  stages in turn, no turn barriers), each into its own accumulator; at the tile's end consumer 1
  leaves its sum in a float32 shared tile (named barriers 13 / 14: stored / read) and consumer 0
  adds it and runs the epilogue.  One A box a stage (a ``SHARE_A`` pair: the first CTA's, multicast to
  both: cuBLAS's ``1x2`` clusters); two consumers, no stream-K, tails or promoted fp8 sums;
* stream-K on 256-wide tiles publishes, sums and stores each consumer's accumulator as four
  64-column quarters (the float32 scratch a partial's layout conversion takes must fit beside
  the ring).

The host (``tlxc/ops/matmul.py``) builds the descriptors: boxes ``[SUB_M, BK]`` or
``[BK, SUB_M]`` for A (``SUB_M = BM / NUM_CONSUMERS``), ``[BK, 128 bytes]`` or
``[BN / CLUSTER_M, BK]`` for B, ``[BK, BN_TAIL]`` or ``[BN_TAIL, BK]`` for B's tail,
``[SUB_M, 128 bytes]`` for C and ``[SUB_M, BN_TAIL]`` for its tail.
"""
from ... import language as tl
from ...language import tlx
from ...runtime.jit import jit
from .epilogue import apply_epilogue, glu_pairs, store_tile_pointers


@jit
def grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of output tile ``tile`` in grouped order (``GROUP_M`` tile-rows at a time)."""
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = tile // num_pid_in_group * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    return first_pid_m + (tile % num_pid_in_group) % group_size_m, (tile % num_pid_in_group) // group_size_m


@jit
def store_tile(c_desc, c_buf, acc, row, col, M, N, scale0_ptr, scale1_ptr, bias_ptr, res_ptr, stride_r0, stride_r1,
               ROWS: tl.constexpr, COLS: tl.constexpr, C_BOX_N: tl.constexpr, OUT_DTYPE: tl.constexpr,
               SCALE0: tl.constexpr, SCALE1: tl.constexpr, BIAS_DIM: tl.constexpr, ACTIVATION: tl.constexpr,
               HAS_RESIDUAL: tl.constexpr, WAIT: tl.constexpr = True):
    """The epilogue of one consumer's ``ROWS x COLS`` slice at (row, col): the fused
    epilogue, then wait until the previous TMA store has read ``c_buf`` (``WAIT``; a buffer
    whose last store an earlier wait covered needs none), store, fence the generic->async
    proxy and TMA-store ``C_BOX_N``-wide boxes."""
    if SCALE0 + SCALE1 + BIAS_DIM + 1 + ACTIVATION + HAS_RESIDUAL > 0:
        offs0 = row + tl.arange(0, ROWS)
        offs1 = col + tl.arange(0, COLS)
        acc = apply_epilogue(acc, offs0, offs1, offs0 < M, offs1 < N, scale0_ptr, scale1_ptr, bias_ptr, res_ptr,
                             stride_r0, stride_r1, SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL)
    tl.static_assert(COLS % C_BOX_N == 0, "the C slice is a whole number of TMA boxes")
    if WAIT:
        tlx.async_descriptor_store_wait(0)
    tlx.local_store(c_buf, acc.to(OUT_DTYPE))
    tlx.fence("async_shared")
    for j in tl.static_range(COLS // C_BOX_N):
        c_box = tlx.local_slice(c_buf, [0, j * C_BOX_N], [ROWS, C_BOX_N])
        tlx.async_descriptor_store(c_desc, c_box, [row, col + j * C_BOX_N])


@jit
def column_halves(x, ROWS: tl.constexpr, COLS: tl.constexpr):
    """A register tile's columns ``[0, COLS / 2)`` and ``[COLS / 2, COLS)`` as two tiles."""
    return tl.split(tl.permute(tl.reshape(x, (ROWS, 2, COLS // 2)), (0, 2, 1)))


@jit
def store_chunk_transposed(c_desc, c_bufs, first, n, x, row, col, M, N, scale0_ptr, scale1_ptr, bias_ptr, res_ptr,
                           stride_r0, stride_r1, ROWS: tl.constexpr, COLS: tl.constexpr, C_BOX_N: tl.constexpr,
                           OUT_DTYPE: tl.constexpr, SCALE0: tl.constexpr, SCALE1: tl.constexpr,
                           BIAS_DIM: tl.constexpr, ACTIVATION: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                           STAGING: tl.constexpr = 2):
    """The epilogue of one ``ROWS x COLS`` chunk at (row, col) of a swapped tile (``C^T``: its rows
    are the output's columns), stored transposed: the fused epilogue in the kernel's coordinates
    (a GLU activation (codes >= 5) pairs adjacent rows: ``ROWS / 2`` output columns from ``row / 2``),
    then the chunk written as ``COLS`` output rows into staging buffer ``first + n % BUFS`` (the
    consumer's ``[16, ROWS or ROWS / 2]`` buffers of ``c_bufs``: ``STAGING``, or one with GLU pairs,
    whose row exchange takes a float32 scratch tile of the chunk; a chunk of 8 columns takes the
    first 8 rows) and TMA-stored in boxes of ``C_BOX_N`` columns.  Before the write, the stores of
    this buffer's previous chunk must have read it: all but the other buffers' boxes (the latest bulk
    groups, one a box), or all of them with one buffer.  Returns ``n + 1``."""
    OUT_ROWS: tl.constexpr = ROWS // 2 if ACTIVATION >= 5 else ROWS
    BUFS: tl.constexpr = 1 if ACTIVATION >= 5 else STAGING
    if SCALE0 + SCALE1 + BIAS_DIM + 1 + ACTIVATION + HAS_RESIDUAL > 0:
        offs0 = row + tl.arange(0, ROWS)
        offs1 = col + tl.arange(0, COLS)
        x = apply_epilogue(x, offs0, offs1, offs0 < M, offs1 < N, scale0_ptr, scale1_ptr, bias_ptr, res_ptr,
                           stride_r0, stride_r1, SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL)
    if ACTIVATION >= 5:                       # (apply_epilogue left the GLU's activation to the pairs)
        x = glu_pairs(x, ACTIVATION, 0, ROWS, COLS)
        row = row // 2
    buf = tlx.local_slice(c_bufs[first + n % BUFS], [0, 0], [COLS, OUT_ROWS])
    tlx.async_descriptor_store_wait((BUFS - 1) * (OUT_ROWS // C_BOX_N))
    tlx.local_store(tlx.local_trans(buf), x.to(OUT_DTYPE))
    tlx.fence("async_shared")
    for j in tl.static_range(OUT_ROWS // C_BOX_N):
        box = tlx.local_slice(buf, [0, j * C_BOX_N], [COLS, C_BOX_N])
        tlx.async_descriptor_store(c_desc, box, [col, row + j * C_BOX_N])
    return n + 1


@jit
def tile_origin(pid_m, pid_n, rank, BM: tl.constexpr, TILE_N: tl.constexpr, CLUSTER_M: tl.constexpr,
                SHARE_A: tl.constexpr):
    """The first row and column of this CTA's tile of the (pair's) tile (pid_m, pid_n)."""
    if SHARE_A:
        return pid_m * BM, (pid_n * CLUSTER_M + rank) * TILE_N
    return (pid_m * CLUSTER_M + rank) * BM, pid_n * TILE_N


@jit
def release(empty_bar, rank, CLUSTER_M: tl.constexpr):
    """A consumer is done with a stage: tell this CTA's producer and, in a pair, the peer's."""
    tlx.barrier_arrive(empty_bar)
    if CLUSTER_M > 1:
        tlx.barrier_arrive(empty_bar, 1, remote_cta_rank=rank ^ 1)


@jit
def stream_k_range(num_tiles, k_tiles, num_progs):
    """Stream-K after whole-tile rounds: the first ``dp_tiles`` tiles (all but the last one
    or two rounds' worth) are walked whole, every ``num_progs``-th, as the persistent kernel
    does (its L2 locality); the k-steps of the rest are shared equally in tile order.  Returns
    ``dp_tiles``, this program's whole tiles ``n_dp``, its share ``[it_lo, it_hi)`` of the
    rest's k-steps (counted from tile ``dp_tiles``), its last tile + 1 there (``tile_hi``)
    and the walk's length."""
    rounds = num_tiles // num_progs
    dp_tiles = tl.maximum(rounds - 1, 0) * num_progs
    n_dp = tl.maximum(rounds - 1, 0)
    total = (num_tiles - dp_tiles) * k_tiles
    it_lo = tl.program_id(0) * total // num_progs
    it_hi = (tl.program_id(0) + 1) * total // num_progs
    tile_hi = tl.cdiv(it_hi, k_tiles)
    return dp_tiles, n_dp, it_lo, it_hi, tile_hi, n_dp + tile_hi - it_lo // k_tiles


@jit
def stream_k_segment(walk, dp_tiles, n_dp, tile_hi, it_lo, it_hi, k_tiles, num_progs):
    """The ``walk``-th step of this program's walk: a whole tile of the first rounds, or a
    tile of the shared rest (last tile first) and its k-steps ``[k0, k1)`` here.  Backwards,
    so that the partial of the last tile (its first k-steps, given to the next program) is
    published first and the first tile (its last k-steps, whose owner waits for the
    programs before) is summed last, when they are likely done.  Tiles are numbered in the
    whole problem (``dp_tiles`` + the rest's index)."""
    whole = walk < n_dp
    rest = tile_hi - 1 - (walk - n_dp)
    tile = tl.where(whole, tl.program_id(0) + walk * num_progs, dp_tiles + rest)
    k0 = tl.where(whole, 0, tl.maximum(it_lo - rest * k_tiles, 0))
    k1 = tl.where(whole, k_tiles, tl.minimum(it_hi - rest * k_tiles, k_tiles))
    return tile, k0, k1


@jit
def stream_k_slot(ws_ptr, prog, cid, BM: tl.constexpr, BN: tl.constexpr, SUB_M: tl.constexpr, COLS: tl.constexpr):
    """Pointers to consumer ``cid``'s rows, first ``COLS`` columns, of program ``prog``'s
    float32 partial slot (``BM x BN``, row-major)."""
    rows = cid * SUB_M + tl.arange(0, SUB_M)
    cols = tl.arange(0, COLS)
    return ws_ptr + prog * (BM * BN) + rows[:, None] * BN + cols[None, :]


@jit
def stream_k_publish(acc, ws_ptr, flags_ptr, cid, BM: tl.constexpr, BN: tl.constexpr, SUB_M: tl.constexpr,
                     NUM_CONSUMERS: tl.constexpr):
    """A tile this program does not finish: its float32 partial (this consumer's rows) goes to
    the program's workspace slot, then the consumer's flag is raised (release: the partial is
    visible first).  A program publishes at most one partial (its walk's last tile)."""
    tl.store(stream_k_slot(ws_ptr, tl.program_id(0), cid, BM, BN, SUB_M, BN), acc)
    tl.atomic_xchg(flags_ptr + tl.program_id(0) * NUM_CONSUMERS + cid, 1, sem="release")


@jit
def quarters(acc, SUB_M: tl.constexpr, BN: tl.constexpr):
    """``acc``'s four ``BN / 4``-column slices, left to right (register reshapes, no data moved)."""
    lo, hi = column_halves(acc, SUB_M, BN)
    q0, q1 = column_halves(lo, SUB_M, BN // 2)
    q2, q3 = column_halves(hi, SUB_M, BN // 2)
    return q0, q1, q2, q3


@jit
def stream_k_publish_quarters(q0, q1, q2, q3, ws_ptr, flags_ptr, cid, BM: tl.constexpr, BN: tl.constexpr,
                              SUB_M: tl.constexpr, NUM_CONSUMERS: tl.constexpr):
    """``stream_k_publish`` of a 256-wide tile held as four 64-column slices: a partial moves
    between the accumulator's layout and global memory's through a float32 scratch tile of its
    width, which for a whole 64x256 slice would not fit beside the ring (64 KB for two consumers)."""
    at = stream_k_slot(ws_ptr, tl.program_id(0), cid, BM, BN, SUB_M, BN // 4)
    tl.store(at, q0)
    tl.store(at + BN // 4, q1)
    tl.store(at + BN // 2, q2)
    tl.store(at + 3 * (BN // 4), q3)
    tl.atomic_xchg(flags_ptr + tl.program_id(0) * NUM_CONSUMERS + cid, 1, sem="release")


@jit
def stream_k_first(tile, k_tiles, total, num_progs):
    """The program holding the first k-step of shared tile ``tile`` (counted from the first
    shared tile; ``total``: the shared tiles' k-steps)."""
    return tl.cdiv((tile * k_tiles + 1) * num_progs, total) - 1


@jit
def stream_k_wait(flags_ptr, q, cid, NUM_CONSUMERS: tl.constexpr):
    """Wait until program ``q`` has published this consumer's partial; lower its flag again
    (zero for the next launch)."""
    seen = 0
    while seen == 0:
        seen = tl.atomic_cas(flags_ptr + q * NUM_CONSUMERS + cid, 1, 0, sem="acquire")


@jit
def stream_k_collect(acc, ws_ptr, flags_ptr, cid, tile, k_tiles, total, num_progs, BM: tl.constexpr,
                     BN: tl.constexpr, SUB_M: tl.constexpr, NUM_CONSUMERS: tl.constexpr):
    """The owner of a tile others began (the program with its last k-step) adds their partials,
    in program order (deterministic): the programs from the one holding the tile's first
    k-step up to this one, each waited for by its flag.  They come before this program, so the
    wait never runs backwards.  ``tile`` counts from the first shared tile, ``total`` is the
    shared tiles' k-steps."""
    for q in range(stream_k_first(tile, k_tiles, total, num_progs), tl.program_id(0)):
        stream_k_wait(flags_ptr, q, cid, NUM_CONSUMERS)
        acc += tl.load(stream_k_slot(ws_ptr, q, cid, BM, BN, SUB_M, BN), cache_modifier=".cg")
    return acc


@jit
def stream_k_collect_quarters(q0, q1, q2, q3, ws_ptr, flags_ptr, cid, tile, k_tiles, total, num_progs,
                              BM: tl.constexpr, BN: tl.constexpr, SUB_M: tl.constexpr, NUM_CONSUMERS: tl.constexpr):
    """``stream_k_collect`` of a tile held as four 64-column slices."""
    for q in range(stream_k_first(tile, k_tiles, total, num_progs), tl.program_id(0)):
        stream_k_wait(flags_ptr, q, cid, NUM_CONSUMERS)
        at = stream_k_slot(ws_ptr, q, cid, BM, BN, SUB_M, BN // 4)
        q0 += tl.load(at, cache_modifier=".cg")
        q1 += tl.load(at + BN // 4, cache_modifier=".cg")
        q2 += tl.load(at + BN // 2, cache_modifier=".cg")
        q3 += tl.load(at + 3 * (BN // 4), cache_modifier=".cg")
    return q0, q1, q2, q3


@jit
def gemm_ws_kernel(a_desc, b_desc, c, bt_desc, ct_desc, bt2_desc, M, N, K, num_progs, stride_cm, stride_cn, scale0_ptr,
                   scale1_ptr, bias_ptr, res_ptr, stride_r0, stride_r1, ws_ptr, flags_ptr,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                   NUM_STAGES: tl.constexpr, DTYPE: tl.constexpr, OUT_DTYPE: tl.constexpr,
                   A_KMAJOR: tl.constexpr, B_KMAJOR: tl.constexpr, B_BOX_N: tl.constexpr, C_BOX_N: tl.constexpr,
                   EPILOGUE_SUBTILE: tl.constexpr, CLUSTER_M: tl.constexpr, C_TMA: tl.constexpr,
                   NUM_CONSUMERS: tl.constexpr, CONSUMER_REGS: tl.constexpr, SCALE0: tl.constexpr, SCALE1: tl.constexpr, BIAS_DIM: tl.constexpr, ACTIVATION: tl.constexpr,
                   HAS_RESIDUAL: tl.constexpr, STREAM_K: tl.constexpr, BN_TAIL: tl.constexpr = 0,
                   SHARE_A: tl.constexpr = False, GLU_AXIS: tl.constexpr = 1, BN_TAIL2: tl.constexpr = 0,
                   B_DTYPE: tl.constexpr = None, PROMOTE: tl.constexpr = False, KSPLIT: tl.constexpr = False,
                   C_TRANS: tl.constexpr = False):
    SUB_M: tl.constexpr = BM if KSPLIT else BM // NUM_CONSUMERS           # each consumer's rows
    A_BOXES: tl.constexpr = 1 if KSPLIT else NUM_CONSUMERS                # A boxes a stage: one per consumer's rows
    K_STEP: tl.constexpr = NUM_CONSUMERS if KSPLIT else 1                 # KSPLIT: consumer c's k-steps c, c + 2, ..
    tl.static_assert(not KSPLIT or (NUM_CONSUMERS == 2 and not STREAM_K and not PROMOTE and BN_TAIL == 0 and
                                    (CLUSTER_M == 1 or SHARE_A)),
                     "KSPLIT: two consumers, no stream-K, promoted sums or tails; a pair shares A only")
    B_TYPE: tl.constexpr = DTYPE if B_DTYPE is None else B_DTYPE            # B's type: fp8 operands may mix e4m3/e5m2
    TILE_N: tl.constexpr = BN + BN_TAIL + BN_TAIL2                        # a tile's columns
    SK_QUARTERS: tl.constexpr = STREAM_K and BN > 128                     # (the host gives these TMA stores)
    ELT: tl.constexpr = DTYPE.primitive_bitwidth // 8
    PROMOTE_HALVES: tl.constexpr = PROMOTE and BN > 128                     # a promoted 256-wide tile: two n128 products
    PART_N: tl.constexpr = BN // 2 if PROMOTE_HALVES else BN                # the columns of one promoted product
    tl.static_assert(B_KMAJOR or BN % B_BOX_N == 0, "an N-major B tile is a whole number of TMA boxes")
    if A_KMAJOR:
        a_smem = tlx.local_alloc((SUB_M, BK), DTYPE, NUM_STAGES * A_BOXES)  # [A_BOXES * stage + consumer]
    else:
        a_smem = tlx.local_alloc((BK, SUB_M), DTYPE, NUM_STAGES * A_BOXES)  # M-major: read transposed
    if B_KMAJOR:
        b_smem = tlx.local_alloc((BN, BK), B_TYPE, NUM_STAGES)             # K-major rows of B
    else:
        b_smem = tlx.local_alloc((BK, BN), B_TYPE, NUM_STAGES)
    tl.static_assert(not C_TRANS or (not C_TMA and BN == 128 and BN_TAIL in (0, 16, 32) and BN_TAIL2 in (0, 8) and
                                     not STREAM_K and not KSPLIT and GLU_AXIS == 0),
                     "C_TRANS: a swapped tile (128 + 16/32 (+ 8) columns of C^T), whole tiles, GLU pairs along its rows")
    CT_BUFS: tl.constexpr = 1 if ACTIVATION >= 5 else 2                   # C_TRANS: staging chunks a consumer
    if C_TRANS:                      # swapped tiles: each consumer's chunks of out's rows (GLU pairs: one, half as wide)
        ctr_smem = tlx.local_alloc((16, SUB_M // 2 if ACTIVATION >= 5 else SUB_M), OUT_DTYPE, CT_BUFS * NUM_CONSUMERS)
    else:
        c_smem = tlx.local_alloc((SUB_M, BN // EPILOGUE_SUBTILE if C_TMA else 8), OUT_DTYPE, NUM_CONSUMERS)
    if BN_TAIL > 0:                  # the tile's last BN_TAIL columns: their own B box, wgmma and C box
        if B_KMAJOR:
            bt_smem = tlx.local_alloc((BN_TAIL, BK), B_TYPE, NUM_STAGES)
        else:
            bt_smem = tlx.local_alloc((BK, BN_TAIL), B_TYPE, NUM_STAGES)
        if C_TMA:
            ct_smem = tlx.local_alloc((SUB_M, BN_TAIL), OUT_DTYPE, NUM_CONSUMERS)
    if BN_TAIL2 > 0:                 # a second, narrower tail (K-major B, swapped tiles)
        bt2_smem = tlx.local_alloc((BN_TAIL2, BK), B_TYPE, NUM_STAGES)
    if KSPLIT:                       # consumer 1's sum, handed to consumer 0 at the tile's end
        red_smem = tlx.local_alloc((SUB_M, BN), tl.float32, 1)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=(1 if KSPLIT else NUM_CONSUMERS) * CLUSTER_M)

    start = tl.program_id(0) // CLUSTER_M
    rank = 0
    if CLUSTER_M > 1:
        rank = tlx.cluster_cta_rank()
    if SHARE_A:                      # a pair's tiles side by side
        num_pid_m = tl.cdiv(M, BM)
        num_pid_n = tl.cdiv(N, TILE_N * CLUSTER_M)
    else:                            # one above the other
        num_pid_m = tl.cdiv(M, BM * CLUSTER_M)
        num_pid_n = tl.cdiv(N, TILE_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BK)
    step = num_progs // CLUSTER_M
    if STREAM_K:                     # whole-tile rounds, then equal shares of the rest's k-steps
        dp_tiles, n_dp, it_lo, it_hi, tile_hi, walk_hi = stream_k_range(num_tiles, k_tiles, num_progs)
        walk_lo, walk_step = 0, 1
    else:                            # whole tiles, every num_progs-th
        walk_lo, walk_hi, walk_step = start, num_tiles, step

    with tlx.async_tasks():
        with tlx.async_task("default"):                                     # the TMA producer
            count = 0
            for walk in range(walk_lo, walk_hi, walk_step):
                tile = walk
                k0 = 0
                k1 = k_tiles
                if STREAM_K:
                    tile, k0, k1 = stream_k_segment(walk, dp_tiles, n_dp, tile_hi, it_lo, it_hi, k_tiles, num_progs)
                pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
                row, col = tile_origin(pid_m, pid_n, rank, BM, TILE_N, CLUSTER_M, SHARE_A)
                for k in range(k0, k1):
                    slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                    tlx.barrier_wait(empty[slot], phase ^ 1)
                    tlx.barrier_expect_bytes(full[slot], (BM * BK + BK * TILE_N) * ELT)
                    for h in tl.static_range(A_BOXES):            # one box per consumer's rows
                        if A_KMAJOR:
                            a_at = [row + h * SUB_M, k * BK]
                        else:
                            a_at = [k * BK, row + h * SUB_M]
                        if SHARE_A:                           # the pair shares A: box h from CTA h % 2, for both
                            tlx.async_descriptor_load(a_desc, a_smem[A_BOXES * slot + h], a_at, full[slot],
                                                      pred=rank == h % 2, multicast_targets=[0, 1])
                        else:
                            tlx.async_descriptor_load(a_desc, a_smem[A_BOXES * slot + h], a_at, full[slot])
                    if B_KMAJOR:
                        if CLUSTER_M == 1 or SHARE_A:
                            tlx.async_descriptor_load(b_desc, b_smem[slot], [col, k * BK], full[slot])
                        else:                             # the pair shares B: each CTA loads half, for both
                            for j in tl.static_range(2):
                                b_rows = tlx.local_slice(b_smem[slot], [j * (BN // 2), 0], [BN // 2, BK])
                                tlx.async_descriptor_load(b_desc, b_rows, [col + j * (BN // 2), k * BK],
                                                          full[slot], pred=rank == j, multicast_targets=[0, 1])
                    else:
                        for j in tl.static_range(BN // B_BOX_N):
                            b_box = tlx.local_slice(b_smem[slot], [0, j * B_BOX_N], [BK, B_BOX_N])
                            if CLUSTER_M == 1 or SHARE_A:
                                tlx.async_descriptor_load(b_desc, b_box, [k * BK, col + j * B_BOX_N],
                                                          full[slot])
                            else:
                                tlx.async_descriptor_load(b_desc, b_box, [k * BK, col + j * B_BOX_N],
                                                          full[slot], pred=rank == j % 2, multicast_targets=[0, 1])
                    if BN_TAIL > 0:                           # (a pair: the second CTA loads it for both)
                        if B_KMAJOR:
                            t_at = [col + BN, k * BK]
                        else:
                            t_at = [k * BK, col + BN]
                        if CLUSTER_M == 1 or SHARE_A:
                            tlx.async_descriptor_load(bt_desc, bt_smem[slot], t_at, full[slot])
                        else:
                            tlx.async_descriptor_load(bt_desc, bt_smem[slot], t_at, full[slot], pred=rank == 1,
                                                      multicast_targets=[0, 1])
                    if BN_TAIL2 > 0:
                        tlx.async_descriptor_load(bt2_desc, bt2_smem[slot], [col + BN + BN_TAIL, k * BK], full[slot])
                    count += 1
        with tlx.async_task(num_warps=4, registers=CONSUMER_REGS, replicate=NUM_CONSUMERS):  # the wgmma consumers
            cid = tlx.async_task_replica_id()
            if KSPLIT:
                if cid == 0:
                    tlx.named_barrier_arrive(14, 256)            # the sum's shared tile is free
            elif cid == NUM_CONSUMERS - 1:
                tlx.named_barrier_arrive(9, 256)                 # consumer 0 issues first
            count = 0
            ct_n = 0                                             # C_TRANS: chunks staged so far
            for walk in range(walk_lo, walk_hi, walk_step):
                tile = walk
                k0 = 0
                k1 = k_tiles
                if STREAM_K:
                    tile, k0, k1 = stream_k_segment(walk, dp_tiles, n_dp, tile_hi, it_lo, it_hi, k_tiles, num_progs)
                pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
                acc = tl.zeros((SUB_M, BN), dtype=tl.float32)
                if PROMOTE:     # fp8, use_fast_accum=False: each k-step's products in their own accumulator
                    part = tl.zeros((SUB_M, PART_N), dtype=tl.float32)
                    if PROMOTE_HALVES:      # (the tile's two column halves: acc_lo, acc_hi)
                        acc_lo = tl.zeros((SUB_M, PART_N), dtype=tl.float32)
                        acc_hi = tl.zeros((SUB_M, PART_N), dtype=tl.float32)
                if BN_TAIL > 0:
                    acc_t = tl.zeros((SUB_M, BN_TAIL), dtype=tl.float32)
                if BN_TAIL2 > 0:
                    acc_t2 = tl.zeros((SUB_M, BN_TAIL2), dtype=tl.float32)
                k_lo = k0
                if KSPLIT:                  # my k-steps only: the ring's stages of this tile in turn
                    base = count
                    k_lo = k0 + cid
                    count += cid
                for k in range(k_lo, k1, K_STEP):
                    slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                    tlx.barrier_wait(full[slot], phase)
                    if not KSPLIT:
                        tlx.named_barrier_wait(9 + cid, 256)      # the consumers take turns issuing (a ring)
                    a_box = A_BOXES * slot + (0 if KSPLIT else cid)
                    if A_KMAJOR:
                        a_op = a_smem[a_box]
                    else:
                        a_op = tlx.local_trans(a_smem[a_box])
                    if PROMOTE_HALVES:      # the left half's products, added while the other consumer issues
                        b_lo = tlx.local_slice(b_smem[slot], [0, 0], [PART_N, BK])
                        part = tlx.async_dot(a_op, tlx.local_trans(b_lo), part, use_acc=False)
                        tlx.named_barrier_arrive(9 + (cid + 1) % NUM_CONSUMERS, 256)
                        part = tlx.async_dot_wait(0, part)
                        acc_lo += part
                        tlx.named_barrier_wait(9 + cid, 256)      # my turn again: the right half
                        b_hi = tlx.local_slice(b_smem[slot], [PART_N, 0], [PART_N, BK])
                        part = tlx.async_dot(a_op, tlx.local_trans(b_hi), part, use_acc=False)
                    elif PROMOTE:   # (fp8 reads B K-major)
                        part = tlx.async_dot(a_op, tlx.local_trans(b_smem[slot]), part, use_acc=False)
                    elif B_KMAJOR:
                        acc = tlx.async_dot(a_op, tlx.local_trans(b_smem[slot]), acc)
                    else:
                        acc = tlx.async_dot(a_op, b_smem[slot], acc)
                    if BN_TAIL > 0:
                        if B_KMAJOR:
                            acc_t = tlx.async_dot(a_op, tlx.local_trans(bt_smem[slot]), acc_t)
                        else:
                            acc_t = tlx.async_dot(a_op, bt_smem[slot], acc_t)
                    if BN_TAIL2 > 0:
                        acc_t2 = tlx.async_dot(a_op, tlx.local_trans(bt2_smem[slot]), acc_t2)
                    if not KSPLIT:
                        tlx.named_barrier_arrive(9 + (cid + 1) % NUM_CONSUMERS, 256)
                    if PROMOTE_HALVES:
                        part = tlx.async_dot_wait(0, part)
                        acc_hi += part
                    elif PROMOTE:   # ... added in float32 (cuBLAS's default for fp8)
                        part = tlx.async_dot_wait(0, part)
                        acc += part
                    else:
                        acc = tlx.async_dot_wait(0, acc)          # this step's MMA is done: release its stage
                    if BN_TAIL > 0:
                        acc_t = tlx.async_dot_wait(0, acc_t)
                    if BN_TAIL2 > 0:
                        acc_t2 = tlx.async_dot_wait(0, acc_t2)
                    release(empty[slot], rank, CLUSTER_M)
                    count += K_STEP
                if KSPLIT:
                    count = base + k1 - k0
                if PROMOTE_HALVES:          # the halves side by side again (register reshapes, no data moved)
                    acc = tl.reshape(tl.permute(tl.join(acc_lo, acc_hi), (0, 2, 1)), (SUB_M, BN))
                row, col = tile_origin(pid_m, pid_n, rank, BM, TILE_N, CLUSTER_M, SHARE_A)
                finish = True
                if KSPLIT:                  # consumer 1's sum to consumer 0, which stores the tile
                    if cid == 1:
                        tlx.named_barrier_wait(14, 256)          # consumer 0 has read the last one
                        tlx.local_store(red_smem[0], acc)
                        tlx.named_barrier_arrive(13, 256)
                        finish = False
                    else:
                        tlx.named_barrier_wait(13, 256)
                        acc += tlx.local_load(red_smem[0])
                        tlx.named_barrier_arrive(14, 256)
                else:
                    row += cid * SUB_M
                if SK_QUARTERS:                               # 256-wide stream-K tiles: fixed and stored in quarters
                    q0, q1, q2, q3 = quarters(acc, SUB_M, BN)
                    if k1 < k_tiles:                          # the next program finishes this tile
                        stream_k_publish_quarters(q0, q1, q2, q3, ws_ptr, flags_ptr, cid, BM, BN, SUB_M,
                                                  NUM_CONSUMERS)
                    elif k0 > 0:                              # earlier programs began it
                        q0, q1, q2, q3 = stream_k_collect_quarters(q0, q1, q2, q3, ws_ptr, flags_ptr, cid,
                                                                   tile - dp_tiles, k_tiles,
                                                                   (num_tiles - dp_tiles) * k_tiles, num_progs,
                                                                   BM, BN, SUB_M, NUM_CONSUMERS)
                    if k1 == k_tiles:                         # the two halves of the C tile in turn: a wait
                        Q: tl.constexpr = BN // 4             # before each half's first use only
                        c_lo = tlx.local_slice(c_smem[cid], [0, 0], [SUB_M, Q])
                        c_hi = tlx.local_slice(c_smem[cid], [0, Q], [SUB_M, Q])
                        store_tile(c, c_lo, q0, row, col, M, N, scale0_ptr, scale1_ptr, bias_ptr, res_ptr,
                                   stride_r0, stride_r1, SUB_M, Q, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM,
                                   ACTIVATION, HAS_RESIDUAL)
                        store_tile(c, c_hi, q1, row, col + Q, M, N, scale0_ptr, scale1_ptr, bias_ptr, res_ptr,
                                   stride_r0, stride_r1, SUB_M, Q, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM,
                                   ACTIVATION, HAS_RESIDUAL, False)
                        store_tile(c, c_lo, q2, row, col + 2 * Q, M, N, scale0_ptr, scale1_ptr, bias_ptr, res_ptr,
                                   stride_r0, stride_r1, SUB_M, Q, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM,
                                   ACTIVATION, HAS_RESIDUAL)
                        store_tile(c, c_hi, q3, row, col + 3 * Q, M, N, scale0_ptr, scale1_ptr, bias_ptr, res_ptr,
                                   stride_r0, stride_r1, SUB_M, Q, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM,
                                   ACTIVATION, HAS_RESIDUAL, False)
                    finish = False
                elif STREAM_K:
                    if k1 < k_tiles:                          # the next program finishes this tile
                        stream_k_publish(acc, ws_ptr, flags_ptr, cid, BM, BN, SUB_M, NUM_CONSUMERS)
                    elif k0 > 0:                              # earlier programs began it
                        acc = stream_k_collect(acc, ws_ptr, flags_ptr, cid, tile - dp_tiles, k_tiles,
                                               (num_tiles - dp_tiles) * k_tiles, num_progs, BM, BN, SUB_M,
                                               NUM_CONSUMERS)
                    finish = k1 == k_tiles
                if C_TRANS:     # C^T's tile as out's rows: 16-column chunks, transposed through shared memory
                    if BN_TAIL2 > 0:                          # (the tails first: their registers free early)
                        ct_n = store_chunk_transposed(ct_desc, ctr_smem, CT_BUFS * cid, ct_n, acc_t2, row, col + BN + BN_TAIL,
                                                      M, N, scale0_ptr, scale1_ptr, bias_ptr, res_ptr, stride_r0,
                                                      stride_r1, SUB_M, BN_TAIL2, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1,
                                                      BIAS_DIM, ACTIVATION, HAS_RESIDUAL)
                    if BN_TAIL == 16:
                        ct_n = store_chunk_transposed(c, ctr_smem, CT_BUFS * cid, ct_n, acc_t, row, col + BN, M, N,
                                                      scale0_ptr, scale1_ptr, bias_ptr, res_ptr, stride_r0, stride_r1,
                                                      SUB_M, 16, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM,
                                                      ACTIVATION, HAS_RESIDUAL)
                    if BN_TAIL == 32:
                        t0, t1 = column_halves(acc_t, SUB_M, 32)
                        ct_n = store_chunk_transposed(c, ctr_smem, CT_BUFS * cid, ct_n, t0, row, col + BN, M, N,
                                                      scale0_ptr, scale1_ptr, bias_ptr, res_ptr, stride_r0, stride_r1,
                                                      SUB_M, 16, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM,
                                                      ACTIVATION, HAS_RESIDUAL)
                        ct_n = store_chunk_transposed(c, ctr_smem, CT_BUFS * cid, ct_n, t1, row, col + BN + 16, M, N,
                                                      scale0_ptr, scale1_ptr, bias_ptr, res_ptr, stride_r0, stride_r1,
                                                      SUB_M, 16, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM,
                                                      ACTIVATION, HAS_RESIDUAL)
                    h0, h1 = column_halves(acc, SUB_M, 128)
                    for hh in tl.static_range(2):
                        h = h0 if hh == 0 else h1
                        q0, q1 = column_halves(h, SUB_M, 64)
                        for qq in tl.static_range(2):
                            q = q0 if qq == 0 else q1
                            e0, e1 = column_halves(q, SUB_M, 32)
                            ct_n = store_chunk_transposed(c, ctr_smem, CT_BUFS * cid, ct_n, e0, row,
                                                          col + 64 * hh + 32 * qq, M, N, scale0_ptr, scale1_ptr,
                                                          bias_ptr, res_ptr, stride_r0, stride_r1, SUB_M, 16,
                                                          C_BOX_N, OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM, ACTIVATION,
                                                          HAS_RESIDUAL)
                            ct_n = store_chunk_transposed(c, ctr_smem, CT_BUFS * cid, ct_n, e1, row,
                                                          col + 64 * hh + 32 * qq + 16, M, N, scale0_ptr,
                                                          scale1_ptr, bias_ptr, res_ptr, stride_r0, stride_r1, SUB_M,
                                                          16, C_BOX_N, OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM,
                                                          ACTIVATION, HAS_RESIDUAL)
                if BN_TAIL2 > 0 and not C_TRANS:              # (pointer stores: the second tail first)
                    store_tile_pointers(acc_t2, row, col + BN + BN_TAIL, M, N, c, stride_cm, stride_cn,
                                        scale0_ptr, scale1_ptr, bias_ptr, res_ptr, stride_r0, stride_r1, SUB_M,
                                        BN_TAIL2, SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL, GLU_AXIS)
                if BN_TAIL > 0 and not C_TMA and not C_TRANS:
                    # pointer stores: the tail first, its registers free for the main part's epilogue
                    # (a swapped 256x160 tile: 160 accumulator registers live otherwise, and spills)
                    store_tile_pointers(acc_t, row, col + BN, M, N, c, stride_cm, stride_cn,
                                        scale0_ptr, scale1_ptr, bias_ptr, res_ptr, stride_r0, stride_r1, SUB_M,
                                        BN_TAIL, SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL, GLU_AXIS)
                if C_TRANS:                                   # (stored above)
                    pass
                elif not finish:
                    pass
                elif not C_TMA:                                 # (GLU activations store this way)
                    store_tile_pointers(acc, row, col, M, N, c, stride_cm, stride_cn, scale0_ptr, scale1_ptr,
                                        bias_ptr, res_ptr, stride_r0, stride_r1, SUB_M, BN,
                                        SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL, GLU_AXIS)
                elif EPILOGUE_SUBTILE == 1:
                    store_tile(c, c_smem[cid], acc, row, col, M, N, scale0_ptr, scale1_ptr, bias_ptr,
                               res_ptr, stride_r0, stride_r1, SUB_M, BN, C_BOX_N, OUT_DTYPE,
                               SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL)
                else:                                         # two halves through one half-size C tile
                    lo, hi = column_halves(acc, SUB_M, BN)
                    store_tile(c, c_smem[cid], lo, row, col, M, N, scale0_ptr, scale1_ptr, bias_ptr,
                               res_ptr, stride_r0, stride_r1, SUB_M, BN // 2, C_BOX_N, OUT_DTYPE,
                               SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL)
                    store_tile(c, c_smem[cid], hi, row, col + BN // 2, M, N, scale0_ptr, scale1_ptr,
                               bias_ptr, res_ptr, stride_r0, stride_r1, SUB_M, BN // 2, C_BOX_N, OUT_DTYPE,
                               SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL)
                if BN_TAIL > 0 and C_TMA:     # (no stream-K: every tile finishes here; the stores above waited
                    store_tile(ct_desc, ct_smem[cid], acc_t, row, col + BN, M, N, scale0_ptr,   # for its buffer)
                               scale1_ptr, bias_ptr, res_ptr, stride_r0, stride_r1, SUB_M, BN_TAIL, BN_TAIL,
                               OUT_DTYPE, SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL, False)
            if KSPLIT:
                if cid == 1:
                    tlx.named_barrier_wait(14, 256)              # absorb consumer 0's last hand-back
            elif cid == 0:
                tlx.named_barrier_wait(9, 256)                   # absorb the last consumer's last turn
            tlx.async_descriptor_store_wait(0)                # before the CTA's shared memory goes away
