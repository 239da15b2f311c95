"""Kernels whose TMA descriptors are encoded in the kernel (tests/test_tensormap_device.py):
one per feature -- Triton's desc.load/store, TLX's async load with an mbarrier, async store,
prefetches, and TLX's descriptor slots (allocate / make(desc_ptr=) / reinterpret)."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.jit
def tm_scale_rows(x_ptr, y_ptr, M, N, ld, BM: tl.constexpr, BN: tl.constexpr):
    """y[:M, :N] = 3 * x[:M, :N] + 1 (row stride ld of both), box by box through desc.load/store."""
    src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[ld, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[ld, 1], block_shape=[BM, BN])
    row, col = tl.program_id(0) * BM, tl.program_id(1) * BN
    tile = src.load([row, col]).to(tl.float32)
    dst.store([row, col], (tile * 3.0 + 1.0).to(y_ptr.dtype.element_ty))


@tlxc.jit
def tm_async_pair(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """An async TMA load completing its bytes on an mbarrier, the box negated in registers, then
    an async TMA store from a second buffer waited for with store_wait."""
    src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    bufs = tlx.local_alloc((BM, BN), tlx.dtype_of(src), 2)
    bar = tlx.alloc_barriers(num_barriers=1)
    offs = [tl.program_id(0) * BM, tl.program_id(1) * BN]
    tlx.barrier_expect_bytes(bar[0], BM * BN * tlx.size_of(tlx.dtype_of(src)))
    tlx.async_descriptor_load(src, bufs[0], offs, bar[0])
    tlx.barrier_wait(bar[0], 0)
    tile = tlx.local_load(bufs[0])
    tlx.local_store(bufs[1], -tile)
    tlx.fence_async_shared()
    tlx.async_descriptor_store(dst, bufs[1], offs)
    tlx.async_descriptor_store_wait(0)


@tlxc.jit
def tm_store_iota(y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """Only a store: each box written with its elements' linear indices (rows past M and columns
    past N clipped by the map)."""
    dst = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    buf = tlx.local_alloc((BM, BN), tl.float32, 1)
    r = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
    c = tl.program_id(1) * BN + tl.arange(0, BN)[None, :]
    tlx.local_store(buf[0], (r * N + c).to(tl.float32))
    tlx.fence_async_shared()
    tlx.async_descriptor_store(dst, buf[0], [tl.program_id(0) * BM, tl.program_id(1) * BN])
    tlx.async_descriptor_store_wait(0)


@tlxc.jit
def tm_store_ones(y_ptr, M, N, ld, BM: tl.constexpr, BN: tl.constexpr):
    """An explicit TLX TMA store of a box of ones through a map of row stride ld: no runtime
    fallback, so a map whose inner size is not a 16-byte multiple is refused."""
    dst = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[ld, 1], block_shape=[BM, BN])
    buf = tlx.local_alloc((BM, BN), tl.float16, 1)
    tlx.local_store(buf[0], tl.full((BM, BN), 1.0, tl.float16))
    tlx.fence_async_shared()
    tlx.async_descriptor_store(dst, buf[0], [tl.program_id(0) * BM, tl.program_id(1) * BN])
    tlx.async_descriptor_store_wait(0)


@tlxc.jit
def tm_prefetched_copy(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """The map prefetched (prefetch.tensormap) and the box prefetched into L2 before it is loaded."""
    src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    tlx.prefetch(src, tensormap=True)
    offs = [tl.program_id(0) * BM, tl.program_id(1) * BN]
    tlx.async_descriptor_prefetch_tensor(src, offs, eviction_policy="evict_last")
    dst.store(offs, src.load(offs))


@tlxc.jit
def tm_slots_copy(x_ptr, y_ptr, n, B: tl.constexpr):
    """TLX's slots: two maps encoded into allocate_tensor_descriptor's slots, read back through
    reinterpret_tensor_descriptor; y[:n] = x[:n] + 0.5 in 1-D boxes."""
    slots = tlx.allocate_tensor_descriptor(num=2)
    tlx.make_tensor_descriptor(desc_ptr=slots[0], base=x_ptr, shape=[n], strides=[1], block_shape=[B])
    tlx.make_tensor_descriptor(desc_ptr=slots[1], base=y_ptr, shape=[n], strides=[1], block_shape=[B])
    src = tlx.reinterpret_tensor_descriptor(desc_ptr=slots[0], block_shape=[B], dtype=tlx.dtype_of(x_ptr))
    dst = tlx.reinterpret_tensor_descriptor(desc_ptr=slots[1], block_shape=[B], dtype=tlx.dtype_of(y_ptr))
    off = tl.program_id(0) * B
    dst.store([off], src.load([off]) + 0.5)


@tlxc.jit
def tm_ws_copy(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """Warp-specialized: the maps built before the tasks (every warp takes part in the encode), a
    one-warp producer loading by TMA, the default task waiting, doubling and storing by TMA."""
    src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    bufs = tlx.local_alloc((BM, BN), tl.float32, 2)
    full = tlx.alloc_barriers(num_barriers=1)
    offs = [tl.program_id(0) * BM, tl.program_id(1) * BN]
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_wait(full[0], 0)
            tile = tlx.local_load(bufs[0])
            dst.store(offs, tile * 2.0)
        with tlx.async_task(num_warps=1):
            tlx.barrier_expect_bytes(full[0], BM * BN * 4)
            tlx.async_descriptor_load(src, bufs[0], offs, full[0])
