"""TMA kernels (tensor descriptors) for the interpreter and compile tests."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def tma_add_one(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr, PREFETCH: tl.constexpr = False):
    """out = in + 1, one BM x BN box per program, through shared memory and TMA;
    PREFETCH warms L2 with the box first (and, predicated off, the one below it)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if PREFETCH:
        tlx.async_descriptor_prefetch_tensor(in_desc, [pid_m * BM, pid_n * BN])
        tlx.async_descriptor_prefetch_tensor(in_desc, [pid_m * BM + BM, pid_n * BN], pred=pid_m < 0)
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


@tlxc.kernel
def tma_read_before_wait(in_desc, out_ptr, BM: tl.constexpr, BN: tl.constexpr):
    """A broken consumer: it reads the slot before the barrier wait that orders the TMA load."""
    buf = tlx.local_alloc((BM, BN), tl.float32, 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], BM * BN * 4)
    tlx.async_descriptor_load(in_desc, buf[0], [0, 0], bar[0])  # the load
    x = tlx.local_load(buf[0])  # the early read
    tlx.barrier_wait(bar[0], 0)
    rows = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(out_ptr + rows, x)


@tlxc.kernel
def tma_store_reuse(out_desc, BM: tl.constexpr, BN: tl.constexpr, ROUNDS: tl.constexpr):
    """One staging buffer stored ROUNDS times: out[r * BM + i, j] = (i * BN + j) + r * 4096.
    Each round rewrites the buffer right after the store wait, so every thread, not only the
    one that issued the store, must wait for the store to have read it."""
    buf = tlx.local_alloc((BM, BN), tl.float32, 1)
    x = (tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]).to(tl.float32)
    for r in tl.static_range(ROUNDS):
        tlx.async_descriptor_store_wait(0)
        tlx.local_store(buf[0], x + r * 4096.0)
        tlx.fence("async_shared")
        tlx.async_descriptor_store(out_desc, buf[0], [r * BM, 0])
    tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def tma_store_ring(out_desc, BM: tl.constexpr, BN: tl.constexpr, ROUNDS: tl.constexpr, PENDING: tl.constexpr):
    """Two staging buffers used in turn: out[r * BM + i, j] = (i * BN + j) + r * 4096.
    Before rewriting a buffer, ``async_descriptor_store_wait(PENDING)``: with PENDING = 1
    only the other buffer's store may still be reading (correct); with 2 the buffer's own
    previous store may be too (a race)."""
    buf = tlx.local_alloc((BM, BN), tl.float32, 2)
    x = (tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]).to(tl.float32)
    for r in tl.static_range(ROUNDS):
        tlx.async_descriptor_store_wait(PENDING)
        tlx.local_store(buf[r % 2], x + r * 4096.0)
        tlx.fence("async_shared")
        tlx.async_descriptor_store(out_desc, buf[r % 2], [r * BM, 0])
    tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def store_then_rewrite(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr, BUG: tl.constexpr = ""):
    """One staging buffer TMA-stored twice: out rows [0, BM) = 1, [BM, 2 BM) = in's first box.
    The buffer is rewritten (by local_store, or by a TMA load) only once
    ``async_descriptor_store_wait(0)`` has retired the first store's read of it.
    BUG="wait_1": the wait leaves that store pending; "tma_load": no wait before the load."""
    buf = tlx.local_alloc((BM, BN), tl.float32, 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.local_store(buf[0], tl.full((BM, BN), 1.0, tl.float32))
    tlx.fence("async_shared")
    tlx.async_descriptor_store(out_desc, buf[0], [0, 0])  # the first TMA store
    if BUG == "wait_1":
        tlx.async_descriptor_store_wait(1)
    elif BUG != "tma_load":
        tlx.async_descriptor_store_wait(0)
    if BUG == "tma_load":
        tlx.barrier_expect_bytes(bar[0], BM * BN * 4)
        tlx.async_descriptor_load(in_desc, buf[0], [0, 0], bar[0])  # the refill by TMA
        tlx.barrier_wait(bar[0], 0)
    else:
        tlx.local_store(buf[0], tl.full((BM, BN), 2.0, tl.float32))  # the rewrite
        tlx.fence("async_shared")
    tlx.async_descriptor_store(out_desc, buf[0], [BM, 0])
    tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def store_handoff(out_desc, BM: tl.constexpr, BN: tl.constexpr, BUG: tl.constexpr = ""):
    """Task 'default' TMA-stores the buffer and hands it to the second task, which rewrites
    it and stores it again: out rows [0, BM) = 1, [BM, 2 BM) = 2.  The hand-off (an
    arrive) comes after ``async_descriptor_store_wait(0)``; BUG="arrive_first" before it."""
    buf = tlx.local_alloc((BM, BN), tl.float32, 1)
    done = tlx.alloc_barriers(1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.local_store(buf[0], tl.full((BM, BN), 1.0, tl.float32))
            tlx.fence("async_shared")
            tlx.async_descriptor_store(out_desc, buf[0], [0, 0])  # the handed-off store
            if BUG == "arrive_first":
                tlx.barrier_arrive(done[0])  # the early hand-off
                tlx.async_descriptor_store_wait(0)
            else:
                tlx.async_descriptor_store_wait(0)
                tlx.barrier_arrive(done[0])
        with tlx.async_task(num_warps=4):
            tlx.barrier_wait(done[0], 0)
            tlx.local_store(buf[0], tl.full((BM, BN), 2.0, tl.float32))  # the next owner's rewrite
            tlx.fence("async_shared")
            tlx.async_descriptor_store(out_desc, buf[0], [BM, 0])
            tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def tma_row_copy(in_desc, out_desc, col_in, col_out, BN: tl.constexpr):
    """out[0, col_out:][:BN] = in[0, col_in:][:BN] through one [1, BN] box: TMA needs each box's
    innermost start at a 16-byte multiple (col_in, col_out)."""
    buf = tlx.local_alloc((1, BN), tl.float32, 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], BN * 4)
    tlx.async_descriptor_load(in_desc, buf[0], [0, col_in], bar[0])  # the row's load
    tlx.barrier_wait(bar[0], 0)
    tlx.fence("async_shared")
    tlx.async_descriptor_store(out_desc, buf[0], [0, col_out])  # the row's store
    tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def tma_row_load(in_desc, out_ptr, col, BN: tl.constexpr):
    """out[:BN] = in[0, col:][:BN] through one [1, BN] box (TMA needs col at a 16-byte multiple)."""
    buf = tlx.local_alloc((1, BN), tl.float32, 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], BN * 4)
    tlx.async_descriptor_load(in_desc, buf[0], [0, col], bar[0])
    tlx.barrier_wait(bar[0], 0)
    tl.store(out_ptr + tl.arange(0, BN)[None, :], tlx.local_load(buf[0]))
