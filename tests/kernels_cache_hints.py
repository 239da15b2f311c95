"""Kernels whose global accesses carry cache hints (``cache_modifier=``, ``eviction_policy=``,
``volatile=``); tests/test_cache_hints.py runs them with and without hints."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def axpb(x_ptr, y_ptr, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr, LOAD_CACHE: tl.constexpr,
         LOAD_EVICT: tl.constexpr, VOLATILE: tl.constexpr, STORE_CACHE: tl.constexpr, STORE_EVICT: tl.constexpr):
    """y[i] = 2 x[i * STRIDE] + 1 for i < n: STRIDE 1 gives vector accesses, 2 element-wide ones."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    x = tl.load(x_ptr + offs * STRIDE, mask=inside, other=0, cache_modifier=LOAD_CACHE,
                eviction_policy=LOAD_EVICT, volatile=VOLATILE)
    tl.store(y_ptr + offs, x * 2 + 1, mask=inside, cache_modifier=STORE_CACHE, eviction_policy=STORE_EVICT)


@tlxc.kernel
def scalar_copy(x_ptr, y_ptr, LOAD_CACHE: tl.constexpr, LOAD_EVICT: tl.constexpr, VOLATILE: tl.constexpr,
                STORE_CACHE: tl.constexpr, STORE_EVICT: tl.constexpr):
    """y[p] = x[p] + 1 through scalar pointers, one program per element."""
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid, cache_modifier=LOAD_CACHE, eviction_policy=LOAD_EVICT, volatile=VOLATILE)
    tl.store(y_ptr + pid, x + 1, cache_modifier=STORE_CACHE, eviction_policy=STORE_EVICT)


@tlxc.kernel
def staged_copy(x_ptr, y_ptr, M, N, stride_x, BM: tl.constexpr, BN: tl.constexpr, CACHE: tl.constexpr,
                EVICT: tl.constexpr):
    """y = x through a shared buffer filled by cp.async (tlx.async_load) with hints."""
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    buf = tlx.local_alloc((BM, BN), tlx.dtype_of(x_ptr), 1)
    tlx.async_load(x_ptr + rows[:, None] * stride_x + cols[None, :], buf[0], mask=inside,
                   cache_modifier=CACHE, eviction_policy=EVICT)
    tlx.async_load_commit_group()
    tlx.async_load_wait_group(0)
    tile = tlx.local_load(buf[0])
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], tile, mask=inside)


@tlxc.kernel
def tma_copy(x_desc, y_desc, BM: tl.constexpr, BN: tl.constexpr, CACHE: tl.constexpr, LOAD_EVICT: tl.constexpr,
             STORE_EVICT: tl.constexpr, PREFETCH_EVICT: tl.constexpr, REDUCE: tl.constexpr):
    """y[box] = x[box] (or y[box] REDUCE= x[box]) through TMA, every copy with its hint."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    buf = tlx.local_alloc((BM, BN), tlx.dtype_of(x_desc), 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.async_descriptor_prefetch_tensor(x_desc, [pid_m * BM, pid_n * BN], eviction_policy=PREFETCH_EVICT)
    tlx.barrier_expect_bytes(bar[0], BM * BN * tlx.size_of(tlx.dtype_of(x_desc)))
    tlx.async_descriptor_load(x_desc, buf[0], [pid_m * BM, pid_n * BN], bar[0], cache_modifier=CACHE,
                              eviction_policy=LOAD_EVICT)
    tlx.barrier_wait(bar[0], 0)
    tlx.async_descriptor_store(y_desc, buf[0], [pid_m * BM, pid_n * BN], eviction_policy=STORE_EVICT,
                               store_reduce=REDUCE)
    tlx.async_descriptor_store_wait(0)
