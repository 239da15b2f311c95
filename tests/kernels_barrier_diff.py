"""Kernels whose outputs depend only on barrier semantics: each runs on the
interpreter and (when present) the GPU, and both must give the same result."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx

i32p = tl.pointer_type(tl.int32)


@tlxc.kernel
def fresh_barrier_parity_one_passes(out_ptr: i32p):
    bars = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_wait(bars[0], 1)             # a fresh barrier has completed "phase 1"
    tl.store(out_ptr, 1)


@tlxc.kernel
def two_arrivals_complete_a_phase(out_ptr: i32p, data_ptr: i32p):
    bars = tlx.alloc_barriers(1, arrive_count=2)
    buf = tlx.local_alloc((128,), tl.int32, 2)
    with tlx.async_tasks():
        with tlx.async_task("default"):      # waits for both workers' data
            tlx.barrier_wait(bars[0], 0)
            a = tlx.local_load(buf[0])
            b = tlx.local_load(buf[1])
            tl.store(out_ptr + tl.arange(0, 128), a + b)
        with tlx.async_task(num_warps=4, replicate=2):
            r = tlx.async_task_replica_id()
            v = tl.load(data_ptr + r * 128 + tl.arange(0, 128))
            tlx.local_store(buf[r], v)
            tlx.barrier_arrive(bars[0])          # one arrival per warp group


@tlxc.kernel
def ring_of_phases(out_ptr: i32p, n: tl.int32, NUM_STAGES: tl.constexpr):
    """A producer hands values 0..n-1 to a consumer through a ring of slots."""
    buf = tlx.local_alloc((128,), tl.int32, NUM_STAGES)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(n):
                slot = i % NUM_STAGES
                tlx.barrier_wait(empty[slot], ((i // NUM_STAGES) & 1) ^ 1)
                tlx.local_store(buf[slot], tl.full((128,), 0, tl.int32) + i)
                tlx.barrier_arrive(full[slot])
        with tlx.async_task(num_warps=4):
            for i in range(n):
                slot = i % NUM_STAGES
                tlx.barrier_wait(full[slot], (i // NUM_STAGES) & 1)
                v = tlx.local_load(buf[slot])
                tl.store(out_ptr + i * 128 + tl.arange(0, 128), v * 2 + 1)
                tlx.barrier_arrive(empty[slot])


@tlxc.kernel
def expect_zero_bytes_is_one_arrival(out_ptr: i32p):
    bars = tlx.alloc_barriers(1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_wait(bars[0], 0)
            tl.store(out_ptr, 7)
        with tlx.async_task(num_warps=4):
            tlx.barrier_expect_bytes(bars[0], 0)     # arrives once, expects no bytes


@tlxc.kernel
def warp_barrier_counts_threads(out_ptr: i32p):
    bars = tlx.alloc_warp_barrier(1, num_warps=4)        # 128 arrivals per phase
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_wait(bars[0], 0)
            tl.store(out_ptr, 5)
        with tlx.async_task(num_warps=4):
            tlx.barrier_arrive(bars[0])                  # every thread arrives


@tlxc.kernel
def predicated_arrive_skips(out_ptr: i32p, skip: tl.int32):
    bars = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_arrive(bars[0], pred=skip == 0)          # arrives only when skip == 0
    tlx.barrier_wait(bars[0], 1, pred=skip != 0)         # phase 1 passes at once anyway
    tlx.barrier_wait(bars[0], 0, pred=skip == 0)         # completed by the arrive above
    tl.store(out_ptr, 3 + skip)
