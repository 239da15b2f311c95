"""wgmma kernels (tlx.async_dot) for compile tests: TMA loads of swizzled tiles, one
warpgroup-wide product, the accumulator stored with tl.store."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def wgmma_tile(a_desc, b_desc, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
               B_TRANSPOSED: tl.constexpr):
    """C[BM, BN] = A[BM, BK] @ B, B given as [BK, BN] (N-major) or as [BN, BK] (K-major)."""
    a = tlx.local_alloc((BM, BK), tl.bfloat16, 1)
    if B_TRANSPOSED:
        b = tlx.local_alloc((BN, BK), tl.bfloat16, 1)
    else:
        b = tlx.local_alloc((BK, BN), tl.bfloat16, 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], (BM * BK + BK * BN) * 2)
    tlx.async_descriptor_load(a_desc, a[0], [0, 0], bar[0])
    tlx.async_descriptor_load(b_desc, b[0], [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    if B_TRANSPOSED:
        acc = tlx.async_dot(a[0], tlx.local_trans(b[0]), acc)
    else:
        acc = tlx.async_dot(a[0], b[0], acc)
    acc = tlx.async_dot_wait(0, acc)
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    tl.store(c_ptr + rows * BN + cols, acc)


@tlxc.kernel
def wgmma_loop(a_desc, b_desc, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = A @ B^T over K in BK steps (B given N x K), one wgmma group in flight."""
    a = tlx.local_alloc((BM, BK), tl.bfloat16, 2)
    b = tlx.local_alloc((BN, BK), tl.bfloat16, 2)
    bars = tlx.alloc_barriers(2, arrive_count=1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(K // BK):
        s = k % 2
        tlx.barrier_expect_bytes(bars[s], (BM + BN) * BK * 2)
        tlx.async_descriptor_load(a_desc, a[s], [0, k * BK], bars[s])
        tlx.async_descriptor_load(b_desc, b[s], [0, k * BK], bars[s])
        tlx.barrier_wait(bars[s], (k // 2) % 2)
        acc = tlx.async_dot(a[s], tlx.local_trans(b[s]), acc)
        acc = tlx.async_dot_wait(0, acc)
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    tl.store(c_ptr + rows * BN + cols, acc)


@tlxc.kernel
def swizzled_round_trip(a_desc, out_ptr, BM: tl.constexpr, BK: tl.constexpr):
    """A 128B-swizzled buffer (it feeds a wgmma) written and read by local_store/local_load."""
    buf = tlx.local_alloc((BM, BK), tl.bfloat16, 1)
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BK)[None, :]
    x = (rows * BK + cols).to(tl.bfloat16)
    tlx.local_store(buf[0], x)
    y = tlx.local_load(buf[0])
    tl.store(out_ptr + rows * BK + cols, y)
    tlx.fence("async_shared")          # generic-proxy writes, read by the tensor cores' async proxy
    acc = tlx.async_dot(buf[0], tlx.local_trans(buf[0]), tl.zeros((BM, BM), dtype=tl.float32))
    acc = tlx.async_dot_wait(0, acc)
    tl.store(out_ptr + rows * BM + tl.arange(0, BM)[None, :], acc.to(tl.bfloat16))


@tlxc.kernel
def wgmma_wide_b(a_desc, b_desc, c_ptr, b_out_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C[BM, BN] = A[BM, BK] @ B[BK, BN] with BN * 2 > 128 bytes: B is filled by TMA boxes of 64
    columns into column slices (a block-stacked buffer) and read N-major by one wgmma per k16
    step; B is also read back with local_load (the blocked addressing) into b_out."""
    a = tlx.local_alloc((BM, BK), tl.bfloat16, 1)
    b = tlx.local_alloc((BK, BN), tl.bfloat16, 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], (BM * BK + BK * BN) * 2)
    tlx.async_descriptor_load(a_desc, a[0], [0, 0], bar[0])
    for j in tl.static_range(BN // 64):
        tlx.async_descriptor_load(b_desc, tlx.local_slice(b[0], [0, j * 64], [BK, 64]), [0, j * 64], bar[0])
    tlx.barrier_wait(bar[0], 0)
    acc = tlx.async_dot(a[0], b[0], tl.zeros((BM, BN), dtype=tl.float32))
    acc = tlx.async_dot_wait(0, acc)
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    tl.store(c_ptr + rows * BN + cols, acc)
    b_rows = tl.arange(0, BK)[:, None]
    tl.store(b_out_ptr + b_rows * BN + cols, tlx.local_load(b[0]))
