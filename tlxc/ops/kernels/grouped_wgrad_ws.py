"""The grouped GEMM's weight gradient on the warp-specialized TMA pipeline:
``db[g] = a[rows of g]ᵀ @ dout[rows of g]`` (``grouped_wgrad.py``'s product, ``gemm_ws.py``'s structure).

Per expert ``g`` a ``[K, N]`` product whose reduction runs over the group's rows, so in
``gemm_ws.py``'s terms its A is ``a``'s rows read transposed (M-major: ``[BR, 64]`` boxes of ``a`` at
(row, k), one per consumer's 64 of the tile's ``BM = 128`` K-rows, reach wgmma through
``tlx.local_trans``), its B ``dout`` (N-major ``[BR, 64]`` boxes), its reduction the group's rows,
``BR`` a k-step.  Persistent programs walk the ``E x cdiv(K, BM) x cdiv(N, BN)`` output tiles in expert
order (every ``num_progs``-th; an expert's tiles in grouped order, ``GROUP_M`` tile-rows at a time, so
its rows of ``a`` and ``dout`` stay in L2); each program takes the groups' rows from the sizes on the
device (``grouped_gemm.checked_sizes``, ``group_span``: no host sync; the host launches
``check_sizes_kernel`` first, as no assertion may sit in a kernel with wgmma).

One descriptor spans all of ``a`` (and one all of ``dout``): a group's last k-step reads rows past its
end, which belong to the next group (or lie past M: TMA's zero fill).  Their products must not count,
and it is enough that one factor be zero: on that step each consumer zeroes the rows of its own ``a``
box past the group's end (a shared-memory read, select and write of ``BR x 64`` elements, made visible
to wgmma by a proxy fence and the warp group's named barrier) before its wgmma; its ``dout`` rows,
which both consumers read, are left as loaded.  A group of no rows runs no k-step: its tiles store
zeros.

The output ``[E, K, N]`` is stored through one ``[E * K, N]`` descriptor (``K`` a multiple of ``BM``:
no tile straddles two experts, the host checks), each consumer's ``64 x BN`` accumulator in two
``64 x BN / 2`` halves through its shared C tile (``gemm_ws.store_tile``), asynchronously: the next
tile's loads and products run while they drain.  Named barriers: 9 / 10 the consumers' issue turns
(as ``gemm_ws.py``), 11 / 12 each consumer's own 128 threads around the zeroing.
"""
from ... import language as tl
from ...language import tlx
from ...runtime.jit import jit
from .gemm_ws import column_halves, grouped_tile, store_tile
from .grouped_gemm import checked_sizes, group_span


@jit
def wgrad_tile(tile, tiles_k, tiles_n, GROUP_M: tl.constexpr):
    """(expert, K-tile, N-tile) of output tile ``tile``: experts in order, an expert's tiles in grouped
    order (``GROUP_M`` K-tiles walk the N-tiles together)."""
    per_expert = tiles_k * tiles_n
    g = tile // per_expert
    pid_k, pid_n = grouped_tile(tile - g * per_expert, tiles_k, tiles_n, GROUP_M)
    return g, pid_k, pid_n


@jit
def tile_counts(E, K, N, BM: tl.constexpr, BN: tl.constexpr):
    """(K-tiles, N-tiles, all tiles) of the ``[E, K, N]`` output."""
    tiles_k = tl.cdiv(K, BM)
    tiles_n = tl.cdiv(N, BN)
    return tiles_k, tiles_n, E * tiles_k * tiles_n


@jit
def zero_rows_past(a_box, valid, BR: tl.constexpr, SUB: tl.constexpr, cid):
    """Rows ``valid ..`` of this consumer's ``[BR, SUB]`` ``a`` box set to zero (the rows past the
    group's end on its last k-step), visible to the warp group's next wgmma."""
    x = tlx.local_load(a_box)
    rows = tl.arange(0, BR)
    tlx.local_store(a_box, tl.where((rows < valid)[:, None], x, tl.zeros_like(x)))
    tlx.fence("async_shared")
    tlx.named_barrier_wait(11 + cid, 128)


@jit
def grouped_wgrad_ws_kernel(a_desc, g_desc, c_desc, c_ptr, sizes_ptr, M, E, K, N, num_progs, stride_ce, stride_ck,
                            stride_cn, BM: tl.constexpr, BN: tl.constexpr, BR: tl.constexpr,
                            NUM_STAGES: tl.constexpr, GROUP_M: tl.constexpr, DTYPE: tl.constexpr,
                            E_PAD: tl.constexpr, C_TMA: tl.constexpr, OUT_DTYPE: tl.constexpr = None,
                            B_BOX_N: tl.constexpr = 64):
    SUB: tl.constexpr = BM // 2                                   # each consumer's K-rows of the tile
    ELT: tl.constexpr = DTYPE.primitive_bitwidth // 8
    tl.static_assert(BN % B_BOX_N == 0, "the tile's columns are a whole number of dout boxes")
    a_smem = tlx.local_alloc((BR, SUB), DTYPE, NUM_STAGES * 2)    # [2 * stage + consumer]: a's rows x K-cols
    b_smem = tlx.local_alloc((BR, BN), DTYPE, NUM_STAGES)         # dout's rows x N-cols
    c_smem = tlx.local_alloc((SUB, BN // 2 if C_TMA else 8), OUT_DTYPE if C_TMA else DTYPE, 2)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=2)

    with tlx.async_tasks():
        with tlx.async_task("default"):                                     # the TMA producer
            sizes = checked_sizes(sizes_ptr, E, M, E_PAD, False)            # (each task its own copy: nothing
                                                                            # lives across the register split)
            tiles_k, tiles_n, num_tiles = tile_counts(E, K, N, BM, BN)
            count = 0
            for tile in range(tl.program_id(0), num_tiles, num_progs):
                g, pid_k, pid_n = wgrad_tile(tile, tiles_k, tiles_n, GROUP_M)
                row0, row_end = group_span(sizes, g, M, E_PAD)
                for r in range(row0, row_end, BR):
                    slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                    tlx.barrier_wait(empty[slot], phase ^ 1)
                    tlx.barrier_expect_bytes(full[slot], (BR * BM + BR * BN) * ELT)
                    for h in tl.static_range(2):
                        tlx.async_descriptor_load(a_desc, a_smem[2 * slot + h], [r, pid_k * BM + h * SUB], full[slot])
                    for j in tl.static_range(BN // B_BOX_N):
                        b_box = tlx.local_slice(b_smem[slot], [0, j * B_BOX_N], [BR, B_BOX_N])
                        tlx.async_descriptor_load(g_desc, b_box, [r, pid_n * BN + j * B_BOX_N], full[slot])
                    count += 1
        with tlx.async_task(num_warps=4, registers=232, replicate=2):        # the wgmma consumers
            cid = tlx.async_task_replica_id()
            if cid == 1:
                tlx.named_barrier_arrive(9, 256)                 # consumer 0 issues first
            sizes = checked_sizes(sizes_ptr, E, M, E_PAD, False)
            tiles_k, tiles_n, num_tiles = tile_counts(E, K, N, BM, BN)
            count = 0
            for tile in range(tl.program_id(0), num_tiles, num_progs):
                g, pid_k, pid_n = wgrad_tile(tile, tiles_k, tiles_n, GROUP_M)
                row0, row_end = group_span(sizes, g, M, E_PAD)
                acc = tl.zeros((SUB, BN), dtype=tl.float32)
                for r in range(row0, row_end, BR):
                    slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                    tlx.barrier_wait(full[slot], phase)
                    a_box = a_smem[2 * slot + cid]
                    if row_end - r < BR:                         # the group's last rows: the next group's are 0
                        zero_rows_past(a_box, row_end - r, BR, SUB, cid)
                    tlx.named_barrier_wait(9 + cid, 256)          # the consumers take turns issuing
                    acc = tlx.async_dot(tlx.local_trans(a_box), b_smem[slot], acc)
                    tlx.named_barrier_arrive(9 + (cid + 1) % 2, 256)
                    acc = tlx.async_dot_wait(0, acc)              # this step's product is done: release its stage
                    tlx.barrier_arrive(empty[slot])
                    count += 1
                row = g * K + pid_k * BM + cid * SUB            # the tile's rows of the [E * K, N] output
                col = pid_n * BN
                if C_TMA:                                     # two halves through one half-size C tile
                    lo, hi = column_halves(acc, SUB, BN)
                    store_tile(c_desc, c_smem[cid], lo, row, col, E * K, N, None, None, None, None, 0, 0, SUB,
                               BN // 2, 64, OUT_DTYPE, 0, 0, -1, 0, False)
                    store_tile(c_desc, c_smem[cid], hi, row, col + BN // 2, E * K, N, None, None, None, None, 0, 0,
                               SUB, BN // 2, 64, OUT_DTYPE, 0, 0, -1, 0, False)
                else:                                         # pointer stores, masked to the expert's K rows
                    ks = pid_k * BM + cid * SUB + tl.arange(0, SUB)
                    cols = col + tl.arange(0, BN)
                    tl.store(c_ptr + g.to(tl.int64) * stride_ce + ks[:, None].to(tl.int64) * stride_ck +
                             cols[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
                             mask=(ks < K)[:, None] & (cols < N)[None, :])
            if cid == 0:
                tlx.named_barrier_wait(9, 256)                   # absorb the last consumer's last turn
            if C_TMA:
                tlx.async_descriptor_store_wait(0)            # before the CTA's shared memory goes away
