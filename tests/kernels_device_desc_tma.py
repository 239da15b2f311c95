"""Kernels for tlx.async_descriptor_load / _store on in-kernel descriptors
(tests/test_device_desc_tma.py)."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def desc_copy_scaled(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """y = 2 * x by [BM, BN] boxes through shared memory: TMA-style load from an in-kernel
    descriptor into a buffer (bytes completed on a barrier), then a TMA-style store."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    bufs = tlx.local_alloc((BM, BN), tl.float32, 2)
    bars = tlx.alloc_barriers(num_barriers=1)
    tlx.barrier_expect_bytes(bars[0], BM * BN * 4)
    tlx.async_descriptor_load(src, bufs[0], [pid_m * BM, pid_n * BN], bars[0])
    tlx.barrier_wait(bars[0], 0)
    x = tlx.local_load(bufs[0])
    tlx.local_store(bufs[1], x * 2.0)
    tlx.fence_async_shared()
    tlx.async_descriptor_store(dst, bufs[1], [pid_m * BM, pid_n * BN])
    tlx.async_descriptor_store_wait(0)
