"""The grouped (MoE) GEMM: ``out[rows of group g] = a[rows of group g] @ b[g]``.

``a`` holds the rows of every group back to back (``group_sizes[g]`` rows for expert ``g``,
in order), ``b`` is ``[E, K, N]`` with any strides (``w.transpose(1, 2)`` of ``[E, N, K]``
expert weights too).  The grid is one dimension over an upper bound on the tiles that needs
no host sync: ``ROW_TILES = cdiv(total_M, BLOCK_M) + E`` row tiles (each group's last tile may
be partial) x ``cdiv(N, BLOCK_N)`` column tiles, in grouped order: ``GROUP_M`` row tiles walk
every column tile together, so that those rows of ``a`` stay in L2 while the columns pass
and each column tile of ``b`` serves ``GROUP_M`` row tiles (with the row tile fastest, every
column re-read the whole of ``a``: 56 times at E = 8, N = 14336).

Each program finds its group in one step: the group sizes are loaded as one vector
(``E_PAD`` = E rounded up to a power of two), their row-tile counts summed by ``tl.cumsum``,
the group is the number of groups whose tiles all come before the program's row tile, and
its first tile and rows are picked out of the sums by ``tl.where`` + ``tl.sum`` (a walk of E
scalar loads cost E / 4 dependent L2 round trips per program: ~10 us at E = 128, as long as a
tile's K loop).  A row tile past the last group's does no K steps: it stores zeros into the rows
past the groups' sum (``tail_rows``), if ``group_sizes`` leaves any, and nothing past M.  The
main loop is ``gemm_dot.py``'s (pointer loads ringed by cp.async, wgmma); rows past the
group's end are masked.

``ALIGNS`` are the host's divisibility facts of ``(stride_am, stride_ak, stride_bk, stride_bn,
stride_cm, stride_cn, N, K, stride_be)`` (a power of two each, 1: none; ``ops.grouped``
computes them with ``matmul.dot_aligns``) that the launch's "divisible by 16" misses, as in
``gemm_dot_kernel``: on rows of 3000 or 776 bf16 (8 elements, not 16) the loads are 16-byte
cp.async only with them (N: the ``% N`` wrap and the store's mask, K: the mask ``k < left``).
The groups' rows end anywhere, so there is no fact along M.

The epilogue (``SCALE0``: ``a``'s scale, one or one per row; ``SCALE1``: expert ``group``'s ``b`` scale at
``scale1_ptr + group * stride_scale1``, one or one per column; ``BIAS_DIM = 1``: row ``group`` of an
``[E, N]`` bias, ``stride_bias`` 0 for one row shared by all; ``ACTIVATION``: ``epilogue.ACTIVATIONS``, GLU
pairs storing half the columns) is ``epilogue.store_tile_pointers``, masked to the group's rows.  8-bit
float operands run the same loop (``tl.dot`` on fp8, float32 sums).
"""
from ... import language as tl
from ...runtime.jit import jit
from .aligns import aligned
from .epilogue import store_tile_pointers


@jit
def checked_sizes(sizes_ptr, E, M, E_PAD: tl.constexpr, CHECK: tl.constexpr = True):
    """The ``E`` group sizes (int64, ``E_PAD`` wide, zeros past ``E``) from the device.  With ``CHECK``
    a size below 0 or sizes that add up to more than ``a``'s ``M`` rows fail the launch
    (``tl.device_assert``, no host sync); the sizes are clamped all the same (below 0 counts as
    none), so that no thread that runs on before the trap, or in a kernel that leaves the check to
    ``check_sizes_kernel``, moves a load or store outside ``a`` and ``out``.  int64 sums: sizes that
    wrap int32 are caught too.  (A kernel with wgmma takes ``CHECK=False``: the assertion's call
    makes ptxas serialize every wgmma of the kernel, C7510.)"""
    gs = tl.arange(0, E_PAD)
    given = tl.load(sizes_ptr + gs, mask=gs < E, other=0).to(tl.int64)
    if CHECK:
        tl.device_assert((tl.min(given, 0) >= 0) & (tl.sum(given, 0) <= M),
                         "group_sizes must be non-negative and add up to at most a's rows (total_M)")
    return tl.maximum(given, 0)


@jit
def check_sizes_kernel(sizes_ptr, E, M, E_PAD: tl.constexpr):
    """``checked_sizes``' assertion alone (one program), launched before a kernel that takes the
    sizes unchecked."""
    checked_sizes(sizes_ptr, E, M, E_PAD)


@jit
def group_rows(sizes_ptr, E, M, E_PAD: tl.constexpr, CHECK: tl.constexpr = True):
    """``(rows, ends)``: each group's row count and the first row after it, from the sizes on the
    device (``checked_sizes``), rows past the M-th in no group.  Sizes that add up to less than M
    leave ``a``'s last rows in no group: their output rows are zeros (``tail_rows``)."""
    sizes = checked_sizes(sizes_ptr, E, M, E_PAD, CHECK)
    after = tl.cumsum(sizes, axis=0)
    ends = tl.minimum(after, M)
    starts = tl.minimum(after - sizes, M)
    return (ends - starts).to(tl.int32), ends.to(tl.int32)


@jit
def group_span(sizes, g, M, E_PAD: tl.constexpr):
    """(first row, end row) of group ``g`` from ``checked_sizes``' vector, clamped to ``M`` rows:
    two masked sums, no scan (a scan's shared scratch grows with ``E_PAD``)."""
    gs = tl.arange(0, E_PAD)
    before = tl.sum(tl.where(gs < g, sizes, 0), axis=0)
    mine = tl.sum(tl.where(gs == g, sizes, 0), axis=0)
    return tl.minimum(before, M).to(tl.int32), tl.minimum(before + mine, M).to(tl.int32)


@jit
def tail_rows(ends, tail_m, BLOCK_M: tl.constexpr):
    """The first row of the ``tail_m``-th row tile past the last group (``ends``: ``group_rows``'s):
    the rows after the groups' sum, which belong to no expert and are stored as zeros.  The tiles
    of the groups (each's last one partial) and of that tail fit the launch's ``cdiv(M, BLOCK_M) + E``
    row tiles: E + 1 ceilings of sizes adding up to M are at most ``cdiv(M, BLOCK_M) + E``."""
    return tl.max(ends, 0) + tail_m * BLOCK_M


@jit
def grouped_gemm_kernel(a_ptr, b_ptr, c_ptr, sizes_ptr, M, E, N, K, stride_am, stride_ak, stride_be, stride_bk, stride_bn,
                        stride_cm, stride_cn, ROW_TILES, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, E_PAD: tl.constexpr,
                        ALIGNS: tl.constexpr = (1, 1, 1, 1, 1, 1, 1, 1, 1), bias_ptr=None, stride_bias=None,
                        BIAS_DIM: tl.constexpr = -1, ACTIVATION: tl.constexpr = 0, scale0_ptr=None, scale1_ptr=None,
                        stride_scale1=0, SCALE0: tl.constexpr = 0, SCALE1: tl.constexpr = 0,
                        PROMOTE: tl.constexpr = False):
    # the host's divisibility facts (module docstring)
    stride_am = aligned(stride_am, ALIGNS[0])
    stride_ak = aligned(stride_ak, ALIGNS[1])
    stride_bk = aligned(stride_bk, ALIGNS[2])
    stride_bn = aligned(stride_bn, ALIGNS[3])
    stride_cm = aligned(stride_cm, ALIGNS[4])
    stride_cn = aligned(stride_cn, ALIGNS[5])
    N = aligned(N, ALIGNS[6])
    K = aligned(K, ALIGNS[7])
    stride_be = aligned(stride_be, ALIGNS[8])
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = min(ROW_TILES - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows_in_group
    pid_n = (pid % per_group) // rows_in_group

    gs = tl.arange(0, E_PAD)                   # which group's row tile is pid_m?
    sizes, rows_end = group_rows(sizes_ptr, E, M, E_PAD, False)    # checked by check_sizes_kernel; rows_end
                                                                    # inclusive: the first row after group g
    tiles = (sizes + BLOCK_M - 1) // BLOCK_M
    tiles_end = tl.cumsum(tiles, axis=0)       # inclusive: the first row tile after group g
    group = tl.sum((tiles_end <= pid_m).to(tl.int32), axis=0)
    found = (group < E).to(tl.int32)
    mine = gs == group
    tile_start = tl.sum(tl.where(mine, tiles_end - tiles, 0), axis=0)
    row_end = tl.sum(tl.where(mine, rows_end, 0), axis=0)
    row0 = row_end - tl.sum(tl.where(mine, sizes, 0), axis=0) + (pid_m - tile_start) * BLOCK_M
    if found == 0:                             # past the last group: rows in no group, stored as zeros
        row0 = tail_rows(rows_end, pid_m - tl.max(tiles_end, 0), BLOCK_M)
        row_end = M
    group = tl.where(found > 0, group, 0)

    rows = row0 + tl.arange(0, BLOCK_M)
    mask_m = rows < row_end
    rows_in = tl.where(mask_m, rows, row0)                       # loads stay inside the group's rows
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = cols < N
    cols_in = cols % N
    ks = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + rows_in[:, None] * stride_am + ks[None, :] * stride_ak
    b_tile = b_ptr + group.to(tl.int64) * stride_be + ks[:, None] * stride_bk + cols_in[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_steps = tl.cdiv(K, BLOCK_K) * found
    for k in range(0, k_steps):
        left = K - k * BLOCK_K
        a = tl.load(a_tile, mask=ks[None, :] < left, other=0.0)
        b = tl.load(b_tile, mask=ks[:, None] < left, other=0.0)
        if PROMOTE:     # fp8, use_fast_accum=False: every BLOCK_K products added to acc in float32
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=BLOCK_K)
        else:
            acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K * stride_ak
        b_tile += BLOCK_K * stride_bk
    if BIAS_DIM >= 0 or ACTIVATION > 0 or SCALE0 + SCALE1 > 0:   # the epilogue: the scales, the group's bias
        if BIAS_DIM == 1:                     # row, the activation (GLU: half the columns), masked to the group's
            bias_ptr = bias_ptr + group.to(tl.int64) * stride_bias      # rows (none when not found)
        if SCALE1 > 0:
            scale1_ptr = scale1_ptr + group.to(tl.int64) * stride_scale1
        if found > 0:
            store_tile_pointers(acc, row0, pid_n * BLOCK_N, row_end, N, c_ptr, stride_cm, stride_cn, scale0_ptr,
                                scale1_ptr, bias_ptr, None, 0, 0, BLOCK_M, BLOCK_N, SCALE0, SCALE1, BIAS_DIM,
                                ACTIVATION, False, 1)
        else:                                 # no expert, no bias: every activation (GLU pairs too) keeps 0 at 0
            store_tile_pointers(acc, row0, pid_n * BLOCK_N, row_end, N, c_ptr, stride_cm, stride_cn, None, None,
                                None, None, 0, 0, BLOCK_M, BLOCK_N, 0, 0, -1, ACTIVATION, False, 1)
    else:
        c_tile = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
        tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])
