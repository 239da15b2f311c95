"""The pointer GEMM on ``tl.dot``: any strides, any sizes, split-K, fused epilogue.

``C = A @ B`` tile by tile (``BLOCK_M x BLOCK_N`` per program, grouped order), A and B
read through pointers with any strides (the compiler picks the vector axis from the
strides and rings the loads with cp.async; a K-major operand is stored transposed for
wgmma, docs/performance.md), so this kernel takes what TMA cannot describe: rows not
16-byte aligned, odd K, a strided view.  Loads wrap their row and column indices
(``% M``, ``% N``) so that only K needs a mask; the store is masked.

``SPLIT_K > 1`` splits the K tiles over ``program_id(1)``: each split writes its float32
partial tile to ``ws[split]`` (a contiguous ``[SPLIT_K, M, N]`` workspace), then counts
itself in ``locks[tile]`` (an acq_rel atomic: the partial is visible before the count);
the split that arrives last sums the ``SPLIT_K`` partials in split order (deterministic),
applies the epilogue, stores C and resets the count to 0 for the next launch (``FIXUP``;
without it ``splitk_reduce_kernel``, a second launch, does the sum).  The sum goes
``FIX_M`` rows at a time (the accumulator is dead by then; a whole tile's sum next to a
loaded partial would spill).  Small-M
problems run this kernel on the swapped product ``C^T = B^T @ A^T`` (strides exchanged by
the host), so that the large N fills the 64-row MMA and the small M is the tile's N.

``CLUSTER_SPLIT`` (``_kSc`` configurations): the ``SPLIT_K`` programs of a tile are one
thread-block cluster (``ctas_per_cga=(1, SPLIT_K, 1)``); ranks 1.. store their float32
partials into rank 0's shared memory (``st.shared::cluster``), a cluster barrier, and rank 0
adds them in rank order and stores C: no workspace, no fence, no atomic, no read back from
L2 (the global split-K's tail is ~2 us at 10-15 us kernels).

``ALIGNS`` are the host's divisibility facts of ``(stride_am, stride_ak, stride_bk,
stride_bn, stride_cm, stride_cn, M, N, K)`` (a power of two each, 1: none) that the launch's
specialization, which knows only "divisible by 16", misses: a row of 3000 or 776 bf16 is
16 bytes aligned (8 elements) but not 16 elements, and without the fact every operand load
is a 2-byte load (64 live pointers a thread: 255 registers, spills), and so is every store
of C and of a split-K partial.  Each fact becomes a ``tl.multiple_of`` of its value: the
strides align the rows, M and N the wrapped indices and the masks along a unit stride, K
the mask ``k < left`` of a K-contiguous operand (constant over 8 elements only when K is a
multiple of 8); the loads are 16-byte cp.async again.
"""
from ... import language as tl
from ...language import tlx
from ...runtime.jit import jit
from .aligns import aligned
from .epilogue import apply_epilogue, store_tile_pointers


@jit
def gemm_dot_kernel(a_ptr, b_ptr, c_ptr, ws_ptr, locks_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                    stride_cm, stride_cn, scale0_ptr, scale1_ptr, bias_ptr, res_ptr, stride_r0, stride_r1,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                    SPLIT_K: tl.constexpr, FIXUP: tl.constexpr, FIX_M: tl.constexpr, SCALE0: tl.constexpr, SCALE1: tl.constexpr, BIAS_DIM: tl.constexpr,
                    ACTIVATION: tl.constexpr, HAS_RESIDUAL: tl.constexpr, GLU_AXIS: tl.constexpr,
                    ALIGNS: tl.constexpr = (1, 1, 1, 1, 1, 1, 1, 1, 1), CLUSTER_SPLIT: tl.constexpr = False,
                    PROMOTE: tl.constexpr = False):
    # the host's divisibility facts (module docstring)
    stride_am = aligned(stride_am, ALIGNS[0])
    stride_ak = aligned(stride_ak, ALIGNS[1])
    stride_bk = aligned(stride_bk, ALIGNS[2])
    stride_bn = aligned(stride_bn, ALIGNS[3])
    stride_cm = aligned(stride_cm, ALIGNS[4])
    stride_cn = aligned(stride_cn, ALIGNS[5])
    M = aligned(M, ALIGNS[6])
    N = aligned(N, ALIGNS[7])
    K = aligned(K, ALIGNS[8])
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = min(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % per_group) % rows_in_group
    tile_n = (pid % per_group) // rows_in_group
    k_tiles = tl.cdiv(K, BLOCK_K)
    k_lo = 0
    k_hi = k_tiles
    if SPLIT_K > 1:
        per_split = tl.cdiv(k_tiles, SPLIT_K)
        k_lo = tl.program_id(1) * per_split
        k_hi = min(k_lo + per_split, k_tiles)

    rows = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M          # wrapped: loads stay in bounds
    cols = (tile_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    ks = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + rows[:, None] * stride_am + (k_lo * BLOCK_K + ks)[None, :] * stride_ak
    b_tile = b_ptr + (k_lo * BLOCK_K + ks)[:, None] * stride_bk + cols[None, :] * stride_bn
    if CLUSTER_SPLIT:                           # the splits of a tile are one cluster: rank 0 receives
        parts = tlx.local_alloc((BLOCK_M, BLOCK_N), tl.float32, SPLIT_K - 1)
        tlx.cluster_barrier()                   # every CTA of the cluster runs before a peer writes to it
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_lo, k_hi):
        left = K - k * BLOCK_K
        a = tl.load(a_tile, mask=ks[None, :] < left, other=0.0)
        b = tl.load(b_tile, mask=ks[:, None] < left, other=0.0)
        if PROMOTE:     # fp8, use_fast_accum=False: every BLOCK_K products added to acc in float32
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=BLOCK_K)
        else:
            acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K * stride_ak
        b_tile += BLOCK_K * stride_bk

    offs_m = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < N
    mask = mask_m[:, None] & mask_n[None, :]
    if CLUSTER_SPLIT:
        rank = tlx.cluster_cta_rank()
        if rank > 0:                            # the partial goes to rank 0's shared memory (DSMEM)
            tlx.remote_shmem_store(parts[rank - 1], acc, 0)
        tlx.cluster_barrier()                   # the partials have landed
        if rank == 0:
            for q in tl.static_range(SPLIT_K - 1):  # in split order: deterministic
                acc += tlx.local_load(parts[q])
            if ACTIVATION >= 5:
                store_tile_pointers(acc, tile_m * BLOCK_M, tile_n * BLOCK_N, M, N, c_ptr, stride_cm, stride_cn,
                                    scale0_ptr, scale1_ptr, bias_ptr, res_ptr, stride_r0, stride_r1, BLOCK_M, BLOCK_N,
                                    SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL, GLU_AXIS)
            else:
                acc = apply_epilogue(acc, offs_m, offs_n, mask_m, mask_n, scale0_ptr, scale1_ptr, bias_ptr, res_ptr,
                                     stride_r0, stride_r1, SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL)
                c_tile = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
                tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=mask)
    elif SPLIT_K > 1:
        ws_tile = ws_ptr + tl.program_id(1) * M * N + offs_m[:, None] * N + offs_n[None, :]
        tl.store(ws_tile, acc, mask=mask)
        if FIXUP:
            arrived = tl.atomic_add(locks_ptr + pid, 1, sem="acq_rel")
            if arrived == SPLIT_K - 1:          # the tile's last split: the others' partials are visible
                tl.store(locks_ptr + pid, 0)    # zero again for the next launch
                tl.static_assert(BLOCK_M % FIX_M == 0, "the fix-up's row slices cover the tile")
                for h in tl.static_range(BLOCK_M // FIX_M):     # FIX_M rows at a time: no spills
                    rows_h = tile_m * BLOCK_M + h * FIX_M + tl.arange(0, FIX_M)
                    mask_h = rows_h < M
                    mask_hn = mask_h[:, None] & mask_n[None, :]
                    total = tl.zeros((FIX_M, BLOCK_N), dtype=tl.float32)
                    for s in range(SPLIT_K):
                        total += tl.load(ws_ptr + s * M * N + rows_h[:, None] * N + offs_n[None, :], mask=mask_hn,
                                         other=0.0, cache_modifier=".cg")
                    if ACTIVATION >= 5:
                        store_tile_pointers(total, tile_m * BLOCK_M + h * FIX_M, tile_n * BLOCK_N, M, N, c_ptr,
                                            stride_cm, stride_cn, scale0_ptr, scale1_ptr, bias_ptr, res_ptr, stride_r0,
                                            stride_r1, FIX_M, BLOCK_N, SCALE0, SCALE1, BIAS_DIM, ACTIVATION,
                                            HAS_RESIDUAL, GLU_AXIS)
                    else:
                        total = apply_epilogue(total, rows_h, offs_n, mask_h, mask_n, scale0_ptr, scale1_ptr, bias_ptr,
                                               res_ptr, stride_r0, stride_r1, SCALE0, SCALE1, BIAS_DIM, ACTIVATION,
                                               HAS_RESIDUAL)
                        c_tile = c_ptr + rows_h[:, None] * stride_cm + offs_n[None, :] * stride_cn
                        tl.store(c_tile, total.to(c_ptr.dtype.element_ty), mask=mask_hn)
    elif ACTIVATION >= 5:                        # GLU pairs: half the tile along GLU_AXIS
        store_tile_pointers(acc, tile_m * BLOCK_M, tile_n * BLOCK_N, M, N, c_ptr, stride_cm, stride_cn, scale0_ptr,
                            scale1_ptr, bias_ptr, res_ptr, stride_r0, stride_r1, BLOCK_M, BLOCK_N, SCALE0, SCALE1,
                            BIAS_DIM, ACTIVATION, HAS_RESIDUAL, GLU_AXIS)
    else:
        acc = apply_epilogue(acc, offs_m, offs_n, mask_m, mask_n, scale0_ptr, scale1_ptr, bias_ptr, res_ptr,
                             stride_r0, stride_r1, SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL)
        c_tile = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=mask)


@jit
def splitk_reduce_kernel(ws_ptr, c_ptr, M, N, stride_cm, stride_cn, scale0_ptr, scale1_ptr, bias_ptr, res_ptr,
                         stride_r0, stride_r1, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_K: tl.constexpr,
                         SCALE0: tl.constexpr, SCALE1: tl.constexpr, BIAS_DIM: tl.constexpr,
                         ACTIVATION: tl.constexpr, HAS_RESIDUAL: tl.constexpr, GLU_AXIS: tl.constexpr,
                         ALIGNS: tl.constexpr = (1, 1, 1)):
    """C = epilogue(sum of the ``SPLIT_K`` float32 partials in ``ws``), in a fixed order
    (deterministic).  ``ALIGNS``: the host's divisibility facts of ``(stride_cm, stride_cn, N)``
    as in ``gemm_dot_kernel``: the partials are rows of N floats, C rows of ``stride_cm``."""
    stride_cm = aligned(stride_cm, ALIGNS[0])
    stride_cn = aligned(stride_cn, ALIGNS[1])
    N = aligned(N, ALIGNS[2])
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    offs_m = (pid // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = (pid % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < N
    mask = mask_m[:, None] & mask_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(ws_ptr + s * M * N + offs_m[:, None] * N + offs_n[None, :], mask=mask, other=0.0)
    if ACTIVATION >= 5:
        store_tile_pointers(acc, (pid // tiles_n) * BLOCK_M, (pid % tiles_n) * BLOCK_N, M, N, c_ptr, stride_cm,
                            stride_cn, scale0_ptr, scale1_ptr, bias_ptr, res_ptr, stride_r0, stride_r1, BLOCK_M,
                            BLOCK_N, SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL, GLU_AXIS)
    else:
        acc = apply_epilogue(acc, offs_m, offs_n, mask_m, mask_n, scale0_ptr, scale1_ptr, bias_ptr, res_ptr,
                             stride_r0, stride_r1, SCALE0, SCALE1, BIAS_DIM, ACTIVATION, HAS_RESIDUAL)
        tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
                 mask=mask)
