"""A plain-Triton persistent matmul (the algorithm of Triton's tutorial 09, written for this
project): each program walks tiles PROGRAMS apart in grouped order, as one flat loop over
(tile, k-step) pairs; the K index wraps with tl.where, the tile's offsets are recomputed under
``if kk == 0:`` and the tile is stored under ``if kk == k_steps - 1:``.  bench/triton_matmul_bench.py
(``--kernel persistent``) compiles this one source with tlxc and with Triton."""
import tlxc
import tlxc.language as tl


@tlxc.jit
def persistent_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                      stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, PROGRAMS: tl.constexpr):
    first = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    tiles = tiles_m * tiles_n
    mine = tiles // PROGRAMS + (first < tiles % PROGRAMS)
    per_group = GROUP_M * tiles_n
    tile = first - PROGRAMS              # advanced before the first tile's loads
    tile_out = first - PROGRAMS          # the stored tile's own counter
    kk = -1
    ks = tl.arange(0, BLOCK_K)
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, k_steps * mine):
        kk = tl.where(kk == k_steps - 1, 0, kk + 1)
        if kk == 0:
            tile += PROGRAMS
            first_m = (tile // per_group) * GROUP_M
            rows_in_group = min(tiles_m - first_m, GROUP_M)
            rows = (first_m + tile % rows_in_group) * BLOCK_M + tl.arange(0, BLOCK_M)
            cols = ((tile % per_group) // rows_in_group) * BLOCK_N + tl.arange(0, BLOCK_N)
            rows = tl.max_contiguous(tl.multiple_of(tl.where(rows < M, rows, 0), BLOCK_M), BLOCK_M)
            cols = tl.max_contiguous(tl.multiple_of(tl.where(cols < N, cols, 0), BLOCK_N), BLOCK_N)
        offs_k = kk * BLOCK_K + ks
        left = K - kk * BLOCK_K
        a = tl.load(a_ptr + rows[:, None] * stride_am + offs_k[None, :] * stride_ak, mask=ks[None, :] < left,
                    other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + cols[None, :] * stride_bn, mask=ks[:, None] < left,
                    other=0.0)
        acc = tl.dot(a, b, acc)
        if kk == k_steps - 1:
            tile_out += PROGRAMS
            first_m = (tile_out // per_group) * GROUP_M
            rows_in_group = min(tiles_m - first_m, GROUP_M)
            out_rows = (first_m + tile_out % rows_in_group) * BLOCK_M + tl.arange(0, BLOCK_M)
            out_cols = ((tile_out % per_group) // rows_in_group) * BLOCK_N + tl.arange(0, BLOCK_N)
            c_tile = c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn
            tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
