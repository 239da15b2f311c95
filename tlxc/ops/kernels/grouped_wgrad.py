"""The grouped GEMM's weight gradient: ``db[g] = a[rows of group g]ᵀ @ dout[rows of group g]``.

The backward of ``grouped_matmul`` (``out[rows of g] = a[rows of g] @ b[g]``) for ``b``: one
``[K, N]`` product per group whose reduction runs over the group's rows, so the grid is
``E x cdiv(K, BLOCK_K) x cdiv(N, BLOCK_N)`` output tiles (expert slowest: an expert's tiles
run together and share its rows of ``a`` and ``dout`` in L2), each walking its group's rows
``BLOCK_M`` at a time.  The group's rows come from the sizes on the device, as in
``grouped_gemm.py`` (a vector load, ``tl.cumsum``, the group's entry picked out): no host sync.
A group of no rows gets a zero gradient (the loop runs no step, the zero tile is stored).
``a``'s tile is loaded transposed (``[BLOCK_K, BLOCK_M]``, by its strides) for ``tl.dot``.
"""
from ... import language as tl
from ...runtime.jit import jit
from .grouped_gemm import group_rows


@jit
def grouped_wgrad_kernel(a_ptr, g_ptr, c_ptr, sizes_ptr, M, E, K, N, stride_am, stride_ak, stride_gm, stride_gn,
                         stride_ce, stride_ck, stride_cn, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_M: tl.constexpr, E_PAD: tl.constexpr):
    pid = tl.program_id(0)
    tiles_k = tl.cdiv(K, BLOCK_K)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = tiles_k * tiles_n
    group = pid // per_group
    pid_k = (pid % per_group) // tiles_n
    pid_n = pid % tiles_n

    gs = tl.arange(0, E_PAD)                   # the group's rows: [row_end - size, row_end)
    sizes, ends = group_rows(sizes_ptr, E, M, E_PAD, False)     # clamped to a's M rows (check_sizes_kernel)
    mine = gs == group
    row_end = tl.sum(tl.where(mine, ends, 0), axis=0)
    row0 = row_end - tl.sum(tl.where(mine, sizes, 0), axis=0)

    ks = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_k = ks < K
    mask_n = cols < N
    ms = tl.arange(0, BLOCK_M)
    acc = tl.zeros((BLOCK_K, BLOCK_N), dtype=tl.float32)
    for m in range(row0, row_end, BLOCK_M):
        rows = m + ms
        in_group = rows < row_end
        a_t = tl.load(a_ptr + rows[None, :].to(tl.int64) * stride_am + ks[:, None] * stride_ak,
                      mask=mask_k[:, None] & in_group[None, :], other=0.0)
        g = tl.load(g_ptr + rows[:, None].to(tl.int64) * stride_gm + cols[None, :] * stride_gn,
                    mask=in_group[:, None] & mask_n[None, :], other=0.0)
        acc = tl.dot(a_t, g, acc)
    c_tile = c_ptr + group.to(tl.int64) * stride_ce + ks[:, None] * stride_ck + cols[None, :] * stride_cn
    tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=mask_k[:, None] & mask_n[None, :])
