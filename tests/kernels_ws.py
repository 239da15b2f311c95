"""Warp-specialized kernels for the interpreter tests (tests/test_interpreter_ws.py).

A ``BUG`` constexpr selects a broken variant the interpreter must diagnose;
each buggy line carries a ``# BUG n`` comment the tests look up.
"""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def add2_kernel(x_ptr, y_ptr, out1_ptr, a_ptr, b_ptr, out2_ptr, n, BLOCK: tl.constexpr):
    """Two independent vector adds, one per task (TLX's vector-add2)."""
    pid = tl.program_id(0)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n)
            y = tl.load(y_ptr + offs, mask=offs < n)
            tl.store(out1_ptr + offs, x + y, mask=offs < n)
        with tlx.async_task(num_warps=4):
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            a = tl.load(a_ptr + offs, mask=offs < n)
            b = tl.load(b_ptr + offs, mask=offs < n)
            tl.store(out2_ptr + offs, a + b, mask=offs < n)


@tlxc.kernel
def rowsum_ws(x_ptr, out_ptr, n_rows, n_cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
              NUM_STAGES: tl.constexpr, BUG: tl.constexpr = 0):
    """Each program sums BLOCK_R rows.  The producer streams column tiles with
    cp.async into a NUM_STAGES ring guarded by full/empty barriers; two
    consumer replicas each reduce half of every tile's rows, so ``empty`` is
    released by two arriving groups (arrive_count=2)."""
    pid = tl.program_id(0)
    bufs = tlx.local_alloc((BLOCK_R, BLOCK_C), tl.float32, NUM_STAGES)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=2)
    n_tiles = tl.cdiv(n_cols, BLOCK_C)
    with tlx.async_tasks():  # rowsum
        with tlx.async_task("default"):
            rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
            for t in range(n_tiles):
                slot, phase = tlx.get_bufidx_phase(t, NUM_STAGES)
                if BUG == 1:
                    tlx.barrier_wait(empty[slot], phase)  # BUG 1: wrong initial phase
                else:
                    tlx.barrier_wait(empty[slot], phase ^ 1)
                cols = t * BLOCK_C + tl.arange(0, BLOCK_C)
                ptrs = x_ptr + rows[:, None] * n_cols + cols[None, :]
                m = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
                tlx.async_load(ptrs, bufs[slot], mask=m)
                tlx.async_load_commit_group()
                if BUG == 4:
                    tlx.async_load_wait_group(1)  # BUG 4: the newest copy is still in flight
                else:
                    tlx.async_load_wait_group(0)
                tlx.barrier_arrive(full[slot])  # the producer's arrive
        with tlx.async_task(num_warps=4, registers=232, replicate=2):
            cid = tlx.async_task_replica_id()
            acc = tl.zeros((BLOCK_R // 2,), tl.float32)
            for t in range(n_tiles):
                slot, phase = tlx.get_bufidx_phase(t, NUM_STAGES)
                tlx.barrier_wait(full[slot], phase)
                half = tlx.local_slice(bufs[slot], [cid * (BLOCK_R // 2), 0], [BLOCK_R // 2, BLOCK_C])
                acc += tl.sum(tlx.local_load(half), axis=1)  # the consumers' read
                if BUG == 2:
                    pass  # BUG 2: the consumers never release the slot
                elif BUG == 3:
                    if cid == 0:  # BUG 3: one arriving group on an arrive_count=2 barrier
                        tlx.barrier_arrive(empty[slot])
                else:
                    tlx.barrier_arrive(empty[slot])
            r = pid * BLOCK_R + cid * (BLOCK_R // 2) + tl.arange(0, BLOCK_R // 2)
            tl.store(out_ptr + r, acc, mask=r < n_rows)


@tlxc.kernel
def pingpong_kernel(x_ptr, sums_ptr, tickets_ptr, counter_ptr, n_tiles, BLOCK: tl.constexpr,
                    ORDERED: tl.constexpr = True, WAIT_THREADS: tl.constexpr = 256,
                    ARRIVE_THREADS: tl.constexpr = 256):
    """Two consumer groups take tiles in turn (tile t goes to group t % 2);
    named barriers 9 and 10 (2 groups x 4 warps x 32 = 256 threads) make
    their critical sections alternate: group 1 pre-arrives on 9 so that group
    0 starts.  Each critical section draws a ticket from a global counter."""
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=4, replicate=2):  # pingpong
            cid = tlx.async_task_replica_id()
            if ORDERED and cid == 1:
                tlx.named_barrier_arrive(9, ARRIVE_THREADS)
            for t in range(cid, n_tiles, 2):
                x = tl.load(x_ptr + t * BLOCK + tl.arange(0, BLOCK))
                if ORDERED:
                    tlx.named_barrier_wait(9 + cid, WAIT_THREADS)  # my turn
                ticket = tl.atomic_add(counter_ptr, 1)
                tl.store(tickets_ptr + t, ticket)
                tl.store(sums_ptr + t, tl.sum(x, axis=0))
                if ORDERED:
                    tlx.named_barrier_arrive(10 - cid, ARRIVE_THREADS)  # the other group's turn


# -- the phase idioms of tlx_api.md §2, each on a one-row-per-program stream sum ---------------


@tlxc.kernel
def _fill(x_ptr, bufs, full, slot, row, t, n_cols, BLOCK: tl.constexpr):
    """Copy tile t of the row into bufs[slot] (cp.async) and signal full[slot]."""
    offs = t * BLOCK + tl.arange(0, BLOCK)
    tlx.async_load(x_ptr + row * n_cols + offs, bufs[slot], mask=offs < n_cols)
    tlx.async_load_commit_group()
    tlx.async_load_wait_group(0)
    tlx.barrier_arrive(full[slot])


@tlxc.kernel
def ring_incremental(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr, NUM_STAGES: tl.constexpr,
                     FLIP: tl.constexpr = True):
    """``buf += 1; if buf == N: buf = 0; phase ^= 1`` (blackwell_gemm_ws.py)."""
    row = tl.program_id(0)
    bufs = tlx.local_alloc((BLOCK,), tl.float32, NUM_STAGES)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    n_tiles = tl.cdiv(n_cols, BLOCK)
    with tlx.async_tasks():  # incremental
        with tlx.async_task("default"):
            buf = 0
            phase = 0
            for t in range(n_tiles):
                tlx.barrier_wait(empty[buf], phase ^ 1)  # the producer's wait
                _fill(x_ptr, bufs, full, buf, row, t, n_cols, BLOCK)
                buf += 1
                if buf == NUM_STAGES:
                    buf = 0
                    if FLIP:
                        phase ^= 1
        with tlx.async_task(num_warps=4):  # incremental consumer
            buf = 0
            phase = 0
            acc = tl.zeros((BLOCK,), tl.float32)
            for t in range(n_tiles):
                tlx.barrier_wait(full[buf], phase)  # the consumer's wait
                acc += tlx.local_load(bufs[buf])
                tlx.barrier_arrive(empty[buf])
                buf += 1
                if buf == NUM_STAGES:
                    buf = 0
                    phase ^= 1
            tl.store(out_ptr + row, tl.sum(acc, axis=0))


@tlxc.kernel
def ring_flip_on_wrap(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr, NUM_STAGES: tl.constexpr):
    """``phase = phase ^ (buf == 0)``: the producer starts at 0 and so flips
    to 1 before its first wait; the consumer starts at 1
    (hopper_fa_ws_pipelined_pingpong.py)."""
    row = tl.program_id(0)
    bufs = tlx.local_alloc((BLOCK,), tl.float32, NUM_STAGES)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    n_tiles = tl.cdiv(n_cols, BLOCK)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            phase = 0
            for t in range(n_tiles):
                buf = t % NUM_STAGES
                phase = phase ^ (buf == 0)
                tlx.barrier_wait(empty[buf], phase)
                _fill(x_ptr, bufs, full, buf, row, t, n_cols, BLOCK)
        with tlx.async_task(num_warps=4):
            phase = 1
            acc = tl.zeros((BLOCK,), tl.float32)
            for t in range(n_tiles):
                buf = t % NUM_STAGES
                phase = phase ^ (buf == 0)
                tlx.barrier_wait(full[buf], phase)
                acc += tlx.local_load(bufs[buf])
                tlx.barrier_arrive(empty[buf])
            tl.store(out_ptr + row, tl.sum(acc, axis=0))


@tlxc.kernel
def ring_flip_after_last(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr, NUM_STAGES: tl.constexpr):
    """``p = p ^ (buf == NUM_STAGES - 1)`` after each use, the producer
    starting at p = 1 (hopper-persistent-gemm-ws-pingpong.py)."""
    row = tl.program_id(0)
    bufs = tlx.local_alloc((BLOCK,), tl.float32, NUM_STAGES)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    n_tiles = tl.cdiv(n_cols, BLOCK)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            p = 1
            for t in range(n_tiles):
                buf = t % NUM_STAGES
                tlx.barrier_wait(empty[buf], p)
                _fill(x_ptr, bufs, full, buf, row, t, n_cols, BLOCK)
                p = p ^ (buf == NUM_STAGES - 1)
        with tlx.async_task(num_warps=4):
            p = 0
            acc = tl.zeros((BLOCK,), tl.float32)
            for t in range(n_tiles):
                buf = t % NUM_STAGES
                tlx.barrier_wait(full[buf], p)
                acc += tlx.local_load(bufs[buf])
                tlx.barrier_arrive(empty[buf])
                p = p ^ (buf == NUM_STAGES - 1)
            tl.store(out_ptr + row, tl.sum(acc, axis=0))


@tlxc.kernel
def handoff_separate_phases(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    """One slot, the producer's and the consumer's phases kept apart
    (``producer_phase = 1; consumer_phase = 0``, each toggled once per tile,
    as the CLC kernels do)."""
    row = tl.program_id(0)
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 1)
    full = tlx.alloc_barriers(1, arrive_count=1)
    empty = tlx.alloc_barriers(1, arrive_count=1)
    n_tiles = tl.cdiv(n_cols, BLOCK)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            producer_phase = 1
            for t in range(n_tiles):
                tlx.barrier_wait(empty[0], producer_phase)
                _fill(x_ptr, bufs, full, 0, row, t, n_cols, BLOCK)
                producer_phase ^= 1
        with tlx.async_task(num_warps=4):
            consumer_phase = 0
            acc = tl.zeros((BLOCK,), tl.float32)
            for t in range(n_tiles):
                tlx.barrier_wait(full[0], consumer_phase)
                acc += tlx.local_load(bufs[0])
                tlx.barrier_arrive(empty[0])
                consumer_phase ^= 1
            tl.store(out_ptr + row, tl.sum(acc, axis=0))


# -- shared-memory views, warp barriers -------------------------------------------------------


@tlxc.kernel
def views_kernel(x_ptr, out_t_ptr, out_bits_ptr, out_part_ptr, OFF, M: tl.constexpr, N: tl.constexpr):
    """local_store an MxN tile; read back its transpose, its f32 bits as i32,
    and M/2 rows from row OFF (a runtime offset)."""
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    buf = tlx.local_alloc((M, N), tl.float32, 2)
    tlx.local_store(buf[1], tl.load(x_ptr + offs))
    t = tlx.local_load(tlx.local_trans(buf[1]))
    tl.store(out_t_ptr + tl.arange(0, N)[:, None] * M + tl.arange(0, M)[None, :], t)
    bits = tlx.local_load(tlx.local_reinterpret(buf[1], tl.int32))
    tl.store(out_bits_ptr + offs, bits)
    part = tlx.local_slice(buf[1], [OFF, 0], [M // 2, N])  # the slice
    tl.store(out_part_ptr + tl.arange(0, M // 2)[:, None] * N + tl.arange(0, N)[None, :], tlx.local_load(part))


@tlxc.kernel
def uninitialized_kernel(out_ptr, BLOCK: tl.constexpr):
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    tlx.local_store(tlx.local_slice(buf[0], [0], [BLOCK // 2]), tl.zeros((BLOCK // 2,), tl.float32))
    tl.store(out_ptr + tl.arange(0, BLOCK), tlx.local_load(buf[0]))  # reads the unwritten half


@tlxc.kernel
def warp_barrier_kernel(out_ptr, WARPS: tl.constexpr):
    """A warp barrier counts every thread of the arriving task (4 warps)."""
    bar = tlx.alloc_warp_barrier(1, num_warps=WARPS)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_wait(bar[0], 0)
            tl.store(out_ptr, 1.0)
        with tlx.async_task(num_warps=4):  # warp barrier
            tlx.barrier_arrive(bar[0])  # the warp barrier arrive


@tlxc.kernel
def lone_barrier_kernel(out_ptr, n, EXPECT: tl.constexpr = 0):
    """A wait with a predicate (a false one does nothing); expect_bytes is an
    arrival plus transaction bytes that only a TMA-style copy would complete."""
    bar = tlx.alloc_barriers(1, arrive_count=1)
    if EXPECT:
        tlx.barrier_expect_bytes(bar[0], EXPECT)
    tlx.barrier_wait(bar[0], 0, pred=n > 5)  # the lone wait
    tl.store(out_ptr, 1.0)


@tlxc.kernel
def overwrite_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr, WAIT: tl.constexpr):
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    tlx.async_load(x_ptr + tl.arange(0, BLOCK), buf[0])  # the copy
    tlx.async_load_commit_group()
    if WAIT:
        tlx.async_load_wait_group(0)
    tlx.local_store(buf[0], tl.zeros((BLOCK,), tl.float32) + 2.0)  # the store
    tl.store(out_ptr + tl.arange(0, BLOCK), tlx.local_load(buf[0]))


@tlxc.kernel
def thread_id_kernel(out_ptr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(out_ptr, tlx.thread_id(0))
        with tlx.async_task(num_warps=2):
            tl.store(out_ptr + 1, tlx.thread_id(0))
        with tlx.async_task(num_warps=1):
            tl.store(out_ptr + 2, tlx.thread_id(0))


@tlxc.kernel
def cp_async_pipeline(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr, NUM_STAGES: tl.constexpr,
                      PENDING: tl.constexpr):
    """No warp specialization: one task keeps NUM_STAGES - 1 cp.async tiles in
    flight ahead of the one it reads (PENDING = NUM_STAGES - 1 is right)."""
    row = tl.program_id(0)
    bufs = tlx.local_alloc((BLOCK,), tl.float32, NUM_STAGES)
    for t in range(NUM_STAGES - 1):
        offs = t * BLOCK + tl.arange(0, BLOCK)
        tlx.async_load(x_ptr + row * n_cols + offs, bufs[t], mask=offs < n_cols)  # the prologue copy
        tlx.async_load_commit_group()
    acc = tl.zeros((BLOCK,), tl.float32)
    for t in range(tl.cdiv(n_cols, BLOCK)):
        offs = (t + NUM_STAGES - 1) * BLOCK + tl.arange(0, BLOCK)
        tlx.async_load(x_ptr + row * n_cols + offs, bufs[(t + NUM_STAGES - 1) % NUM_STAGES], mask=offs < n_cols)
        tlx.async_load_commit_group()
        tlx.async_load_wait_group(PENDING)
        acc += tlx.local_load(bufs[t % NUM_STAGES])  # the pipelined read
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def check_inputs(kernel: str):
    """Inputs for ``tlxc trace tests/kernels_ws.py --kernel rowsum_ws [-D BUG=n]``
    (tests/test_trace.py): one program of the producer/consumer row sum, three
    column tiles through a two-slot ring.  ``-D BUG=2`` deadlocks when the ring
    wraps (the consumers never release a slot)."""
    import torch
    if kernel != "rowsum_ws":
        raise ValueError(f"check_inputs has inputs for rowsum_ws only, not {kernel}")
    x = torch.arange(16 * 96, dtype=torch.float32).reshape(16, 96) / 96
    out = torch.zeros(16)
    return (1,), (x, out, 16, 96), {"BLOCK_R": 16, "BLOCK_C": 32, "NUM_STAGES": 2}


@tlxc.kernel
def suspended_handoff(x_ptr, out_ptr, BLOCK: tl.constexpr, SUSPEND_NS: tl.constexpr = None):
    """A producer hands a block to a consumer and gets it back (out = 2 * x + 1), with
    TLX's barrier-wait suspend hint."""
    buf = tlx.local_alloc((BLOCK,), tl.float32, 2)
    bars = tlx.alloc_barriers(2, arrive_count=1)
    offs = tl.arange(0, BLOCK)
    with tlx.async_tasks(mbarrier_try_wait_suspend_ns=SUSPEND_NS):
        with tlx.async_task("default"):
            tlx.local_store(buf[0], tl.load(x_ptr + offs) * 2.0)
            tlx.barrier_arrive(bars[0])
            tlx.barrier_wait(bars[1], 0)
            tl.store(out_ptr + offs, tlx.local_load(buf[1]))
        with tlx.async_task(num_warps=4):
            tlx.barrier_wait(bars[0], 0)
            tlx.local_store(buf[1], tlx.local_load(buf[0]) + 1.0)
            tlx.barrier_arrive(bars[1])
