"""TMA kernels (tensor descriptors) for the interpreter and compile tests."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def tma_add_one(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    """out = in + 1, one BM x BN box per program, through shared memory and TMA."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    buf = tlx.local_alloc((BM, BN), tl.float32, 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], BM * BN * 4)
    tlx.async_descriptor_load(in_desc, buf[0], [pid_m * BM, pid_n * BN], bar[0])
    tlx.barrier_wait(bar[0], 0)
    x = tlx.local_load(buf[0])
    tlx.local_store(buf[0], x + 1.0)
    tlx.fence("async_shared")
    tlx.async_descriptor_store(out_desc, buf[0], [pid_m * BM, pid_n * BN])
    tlx.async_descriptor_store_wait(0)
