"""The grouped (MoE) GEMM: ``out[rows of group g] = a[rows of group g] @ b[g]``.

``a`` holds the rows of every group back to back (``group_sizes[g]`` rows for expert ``g``,
in order), ``b`` is ``[E, K, N]`` with any strides (``w.transpose(1, 2)`` of ``[E, N, K]``
expert weights too).  The grid is an upper bound on the row tiles that needs no host sync
(``cdiv(total_M, BLOCK_M) + E`` rows of programs x ``cdiv(N, BLOCK_N)``): each program finds
its group by walking ``group_sizes`` on the device (E scalar loads, accumulated with
``tl.where``), and a program past the last tile does no K steps and stores nothing.  The main
loop is ``gemm_dot.py``'s (pointer loads ringed by cp.async, wgmma); rows past the group's
end are masked.
"""
from ... import language as tl
from ...runtime.jit import jit


@jit
def grouped_gemm_kernel(a_ptr, b_ptr, c_ptr, sizes_ptr, E, N, K, stride_am, stride_ak, stride_be, stride_bk, stride_bn,
                        stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    tile_start = 0
    row_off = 0
    group = 0
    row0 = 0
    row_end = 0
    found = 0
    for g in range(E):                         # which group's row tile is program pid_m?
        size = tl.load(sizes_ptr + g).to(tl.int32)
        tiles = (size + BLOCK_M - 1) // BLOCK_M
        hit = (pid_m >= tile_start) & (pid_m < tile_start + tiles)
        group = tl.where(hit, g, group)
        row0 = tl.where(hit, row_off + (pid_m - tile_start) * BLOCK_M, row0)
        row_end = tl.where(hit, row_off + size, row_end)
        found = tl.where(hit, 1, found)
        tile_start += tiles
        row_off += size
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
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K * stride_ak
        b_tile += BLOCK_K * stride_bk
    c_tile = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :] & (found > 0))
