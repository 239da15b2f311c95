"""Broken (and correct) kernels for the static checker (tests/test_check.py).

Each kernel is derived from a warp-specialized example (``examples/ws_*.py``,
``tests/kernels_ws.py``); a ``BUG`` constexpr selects a broken variant, with
``BUG=""`` the correct kernel.  Lines the tests look up carry a comment:
``# BUG <name>`` on the broken line, or a ``# <role>`` marker on the line
where the checker reports.
"""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx

F32 = tl.pointer_type(tl.float32)
I32 = tl.pointer_type(tl.int32)


@tlxc.kernel
def ring_rowsum(x_ptr: F32, out_ptr: F32, n_rows: tl.int32, n_cols: tl.int32, BLOCK_R: tl.constexpr = 16,
                BLOCK_C: tl.constexpr = 32, NUM_STAGES: tl.constexpr = 3, BUG: tl.constexpr = ""):
    """rowsum_ws / ws_rmsnorm: a cp.async producer fills a NUM_STAGES ring; two
    replicated consumers each reduce half of every tile and release the slot
    (``empty`` counts 2 arrivals, one per consumer)."""
    pid = tl.program_id(0)
    bufs = tlx.local_alloc((BLOCK_R, BLOCK_C), tl.float32, NUM_STAGES)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    if BUG == "count_1":
        empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)  # BUG count_1
    elif BUG == "count_3":
        empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=3)  # BUG count_3
    else:
        empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=2)
    n_tiles = tl.cdiv(n_cols, BLOCK_C)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
            for t in range(n_tiles):
                slot, phase = tlx.get_bufidx_phase(t, NUM_STAGES)
                if BUG == "producer_phase":
                    tlx.barrier_wait(empty[slot], phase)  # BUG producer_phase
                elif BUG != "no_empty_wait":
                    tlx.barrier_wait(empty[slot], phase ^ 1)  # the producer's wait
                cols = t * BLOCK_C + tl.arange(0, BLOCK_C)
                ptrs = x_ptr + rows[:, None] * n_cols + cols[None, :]
                m = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
                tlx.async_load(ptrs, bufs[slot], mask=m)  # the producer's copy
                tlx.async_load_commit_group()
                if BUG == "early_arrive":
                    tlx.async_load_wait_group(1)  # BUG early_arrive
                else:
                    tlx.async_load_wait_group(0)
                if BUG == "slot_producer":
                    tlx.barrier_arrive(full[(t + 1) % NUM_STAGES])  # BUG slot_producer
                elif BUG == "expect_bytes":
                    tlx.barrier_expect_bytes(full[slot], BLOCK_R * BLOCK_C * 4)  # BUG expect_bytes
                else:
                    tlx.barrier_arrive(full[slot])  # the producer's arrive
                if BUG == "extra_arrive":
                    tlx.barrier_arrive(full[slot])  # BUG extra_arrive
        with tlx.async_task(num_warps=4, replicate=2):  # the consumers
            cid = tlx.async_task_replica_id()
            acc = tl.zeros((BLOCK_R // 2,), tl.float32)
            for t in range(n_tiles):
                slot, phase = tlx.get_bufidx_phase(t, NUM_STAGES)
                if BUG == "slot_consumer":
                    tlx.barrier_wait(full[(t + 1) % NUM_STAGES], phase)  # BUG slot_consumer
                elif BUG == "consumer_phase":
                    tlx.barrier_wait(full[slot], phase ^ 1)  # BUG consumer_phase
                else:
                    tlx.barrier_wait(full[slot], phase)  # the consumer's wait
                half = tlx.local_slice(bufs[slot], [cid * (BLOCK_R // 2), 0], [BLOCK_R // 2, BLOCK_C])
                if BUG == "early_release":
                    tlx.barrier_arrive(empty[slot])  # BUG early_release
                acc += tl.sum(tlx.local_load(half), axis=1)  # the consumer's read
                if BUG == "no_release" or BUG == "early_release":
                    pass  # BUG no_release
                elif BUG == "one_replica":
                    if cid == 0:
                        tlx.barrier_arrive(empty[slot])  # BUG one_replica
                else:
                    tlx.barrier_arrive(empty[slot])  # the consumer's release
            r = pid * BLOCK_R + cid * (BLOCK_R // 2) + tl.arange(0, BLOCK_R // 2)
            tl.store(out_ptr + r, acc, mask=r < n_rows)


@tlxc.kernel
def _fill(x_ptr, bufs, full, slot, row, t, n_cols, BLOCK: tl.constexpr):
    """Copy tile t of the row into bufs[slot] (cp.async) and signal full[slot]."""
    offs = t * BLOCK + tl.arange(0, BLOCK)
    tlx.async_load(x_ptr + row * n_cols + offs, bufs[slot], mask=offs < n_cols)
    tlx.async_load_commit_group()
    tlx.async_load_wait_group(0)
    tlx.barrier_arrive(full[slot])


@tlxc.kernel
def ring_incremental(x_ptr: F32, out_ptr: F32, n_cols: tl.int32, BLOCK: tl.constexpr = 16,
                     NUM_STAGES: tl.constexpr = 2, BUG: tl.constexpr = ""):
    """``buf += 1; if buf == N: buf = 0; phase ^= 1`` (blackwell_gemm_ws.py)."""
    row = tl.program_id(0)
    bufs = tlx.local_alloc((BLOCK,), tl.float32, NUM_STAGES)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    n_tiles = tl.cdiv(n_cols, BLOCK)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            buf = 0
            if BUG == "start_1":
                phase = 1  # BUG start_1
            else:
                phase = 0
            for t in range(n_tiles):
                tlx.barrier_wait(empty[buf], phase ^ 1)  # the incremental producer's wait
                _fill(x_ptr, bufs, full, buf, row, t, n_cols, BLOCK)
                buf += 1
                if buf == NUM_STAGES:
                    buf = 0
                    if BUG != "no_flip":
                        phase ^= 1
                if BUG == "flip_twice":
                    phase = phase ^ (buf == 0)  # BUG flip_twice
        with tlx.async_task(num_warps=4):
            buf = 0
            phase = 0
            acc = tl.zeros((BLOCK,), tl.float32)
            for t in range(n_tiles):
                tlx.barrier_wait(full[buf], phase)
                acc += tlx.local_load(bufs[buf])
                tlx.barrier_arrive(empty[buf])
                buf += 1
                if buf == NUM_STAGES:
                    buf = 0
                    phase ^= 1
            tl.store(out_ptr + row, tl.sum(acc, axis=0))


@tlxc.kernel
def handoff(x_ptr: F32, out_ptr: F32, n_cols: tl.int32, BLOCK: tl.constexpr = 16, BUG: tl.constexpr = ""):
    """One slot; the producer's and the consumer's phases kept apart, each
    toggled once per tile (the CLC kernels' idiom)."""
    row = tl.program_id(0)
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 1)
    full = tlx.alloc_barriers(1, arrive_count=1)
    empty = tlx.alloc_barriers(1, arrive_count=1)
    n_tiles = tl.cdiv(n_cols, BLOCK)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            if BUG == "start_0":
                producer_phase = 0  # BUG start_0
            else:
                producer_phase = 1
            for t in range(n_tiles):
                tlx.barrier_wait(empty[0], producer_phase)  # the handoff producer's wait
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


@tlxc.kernel
def delayed_release(x_ptr: F32, out_ptr: F32, n_rows: tl.int32, n_cols: tl.int32, BLOCK: tl.constexpr = 32,
                    NUM_STAGES: tl.constexpr = 3, BUG: tl.constexpr = ""):
    """ws_rmsnorm's producer: item k's copy is handed over one item later
    (wait_group(1)), and the last item after the loop."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    bufs = tlx.local_alloc((BLOCK,), tl.float32, NUM_STAGES)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            count = 0
            for item in range(pid, n_rows, num_programs):
                slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                tlx.barrier_wait(empty[slot], phase ^ 1)  # the delayed producer's wait
                offs = tl.arange(0, BLOCK)
                tlx.async_load(x_ptr + item * n_cols + offs, bufs[slot], mask=offs < n_cols)
                tlx.async_load_commit_group()
                if count > 0:
                    tlx.async_load_wait_group(1)
                    tlx.barrier_arrive(full[(count - 1) % NUM_STAGES])  # the delayed arrive
                count += 1
            if BUG != "no_tail":  # BUG no_tail  # noqa: SIM102 (a constexpr guard around a runtime if)
                if count > 0:
                    tlx.async_load_wait_group(0)
                    tlx.barrier_arrive(full[(count - 1) % NUM_STAGES])
        with tlx.async_task(num_warps=4):  # the delayed consumer task
            count = 0
            for item in range(pid, n_rows, num_programs):
                slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                tlx.barrier_wait(full[slot], phase)  # the delayed consumer's wait
                tl.store(out_ptr + item, tl.sum(tlx.local_load(bufs[slot]), axis=0))
                tlx.barrier_arrive(empty[slot])
                count += 1  # noqa: SIM113 (kernel loops have no enumerate)


@tlxc.kernel
def signal_cycle(out_ptr: F32, n: tl.int32, BUG: tl.constexpr = ""):
    """Two tasks hand a token back and forth through two mbarriers; the
    default task starts, so the worker's first wait is for the default's
    first signal."""
    ping = tlx.alloc_barriers(1, arrive_count=1)
    pong = tlx.alloc_barriers(1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            phase = 0
            for i in range(n):
                if BUG == "both_wait":
                    tlx.barrier_wait(pong[0], phase)  # BUG both_wait
                tlx.barrier_arrive(ping[0])  # the default's signal
                if BUG != "both_wait":
                    tlx.barrier_wait(pong[0], phase)
                phase ^= 1
        with tlx.async_task(num_warps=4):  # the signal worker
            phase = 0
            for i in range(n):
                tlx.barrier_wait(ping[0], phase)  # the worker's wait
                tl.store(out_ptr + i, i * 1.0)
                tlx.barrier_arrive(pong[0])  # the worker's signal
                phase ^= 1


@tlxc.kernel
def shared_handoff(out_ptr: F32, BLOCK: tl.constexpr = 16, BUG: tl.constexpr = ""):
    """The default task writes a buffer with local_store; the worker reads it
    once the default task's arrive says it is there."""
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    ready = tlx.alloc_barriers(1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.local_store(buf[0], tl.zeros((BLOCK,), tl.float32) + 1.0)  # the handoff write
            if BUG != "no_barrier":
                tlx.barrier_arrive(ready[0])
        with tlx.async_task(num_warps=4):  # the reading task
            if BUG != "no_barrier":
                tlx.barrier_wait(ready[0], 0)
            tl.store(out_ptr + tl.arange(0, BLOCK), tlx.local_load(buf[0]))  # the handoff read


@tlxc.kernel
def warp_barrier(out_ptr: F32, WARPS: tl.constexpr = 4):
    """A warp barrier counts every thread of the arriving task."""
    bar = tlx.alloc_warp_barrier(1, num_warps=WARPS)  # the warp barrier
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_wait(bar[0], 0)
            tl.store(out_ptr, 1.0)
        with tlx.async_task(num_warps=4):  # the warp-barrier worker
            tlx.barrier_arrive(bar[0])  # the warp-barrier arrive


@tlxc.kernel
def cp_async_pipeline(x_ptr: F32, out_ptr: F32, n_cols: tl.int32, BLOCK: tl.constexpr = 16,
                      NUM_STAGES: tl.constexpr = 3, PENDING: tl.constexpr = 2):
    """One task keeps NUM_STAGES - 1 copies in flight (PENDING = NUM_STAGES - 1 is right)."""
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
        tlx.async_load_wait_group(PENDING)  # the pipelined wait
        acc += tlx.local_load(bufs[t % NUM_STAGES])  # the pipelined read
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@tlxc.kernel
def store_over_copy(x_ptr: F32, out_ptr: F32, BLOCK: tl.constexpr = 16, BUG: tl.constexpr = ""):
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    tlx.async_load(x_ptr + tl.arange(0, BLOCK), buf[0])  # the single copy
    tlx.async_load_commit_group()
    if BUG != "no_wait":
        tlx.async_load_wait_group(0)
    tlx.local_store(buf[0], tlx.local_load(buf[0]) * 2.0)  # the store
    tl.store(out_ptr + tl.arange(0, BLOCK), tlx.local_load(buf[0]))


@tlxc.kernel
def big_ring(x_ptr: F32, out_ptr: F32, NUM_STAGES: tl.constexpr = 1):
    """Two 64 KiB tiles per stage: two stages (256 KiB) no longer fit in 227 KiB."""
    a = tlx.local_alloc((128, 128), tl.float32, NUM_STAGES)  # the A ring
    b = tlx.local_alloc((128, 128), tl.float32, NUM_STAGES)
    offs = tl.arange(0, 128)[:, None] * 128 + tl.arange(0, 128)[None, :]
    tlx.local_store(a[0], tl.load(x_ptr + offs))
    tlx.local_store(b[0], tlx.local_load(a[0]))
    tl.store(out_ptr + offs, tlx.local_load(b[0]))


@tlxc.kernel
def budgets(x_ptr: F32, out_ptr: F32, BUG: tl.constexpr = ""):
    """The default producer gives registers to two consumer warp groups."""
    with tlx.async_tasks():  # the register budgets
        with tlx.async_task("default"):
            tl.store(out_ptr, tl.load(x_ptr))
        if BUG == "not_multiple_of_8":
            with tlx.async_task(num_warps=4, registers=100, replicate=2):  # BUG not_multiple_of_8
                tl.store(out_ptr + 1, tl.load(x_ptr + 1))
        elif BUG == "over_256":
            with tlx.async_task(num_warps=4, registers=264, replicate=2):  # BUG over_256
                tl.store(out_ptr + 1, tl.load(x_ptr + 1))
        elif BUG == "pool":
            with tlx.async_task(num_warps=4, registers=256, replicate=2):  # BUG pool
                tl.store(out_ptr + 1, tl.load(x_ptr + 1))
        elif BUG == "padded":
            with tlx.async_task(num_warps=2, registers=232):  # a 2-warp task: padded to a warp group
                tl.store(out_ptr + 1, tl.load(x_ptr + 1))
        else:
            with tlx.async_task(num_warps=4, registers=232, replicate=2):
                tl.store(out_ptr + 1, tl.load(x_ptr + 1))
        if BUG == "all_or_none":
            with tlx.async_task(num_warps=4):  # BUG all_or_none
                tl.store(out_ptr + 2, tl.load(x_ptr + 2))


@tlxc.kernel
def warp_ranges(out_ptr: F32, BUG: tl.constexpr = ""):
    """Tasks placed with warp_group_start_id (TLX's explicit warp ranges): the
    correct kernel lists them out of warp order; the default task has warps [0, 4)."""
    with tlx.async_tasks():  # the placed tasks
        with tlx.async_task("default"):
            tl.store(out_ptr + tlx.thread_id(0) * 0, 0.0)
        if BUG == "overlap":
            with tlx.async_task(num_warps=4, warp_group_start_id=2):  # BUG overlap
                tl.store(out_ptr + 1, 1.0)
        elif BUG == "gap":
            with tlx.async_task(num_warps=4, warp_group_start_id=12):  # BUG gap
                tl.store(out_ptr + 1, 1.0)
        elif BUG == "partial":
            with tlx.async_task(num_warps=4):  # BUG partial
                tl.store(out_ptr + 1, 1.0)
        else:
            with tlx.async_task(num_warps=4, warp_group_start_id=8):  # the second placed task
                tl.store(out_ptr + 1, 1.0)
        with tlx.async_task(num_warps=2, replicate=2, warp_group_start_id=4):  # the first placed task
            tl.store(out_ptr + 2 + tlx.async_task_replica_id(), 2.0)


@tlxc.kernel
def many_tasks(out_ptr: F32, REPLICAS: tl.constexpr = 5):
    """The default task and REPLICAS one-warp workers: six tasks fit, seven do not."""
    with tlx.async_tasks():  # the tasks
        with tlx.async_task("default"):
            tl.store(out_ptr, 0.0)
        with tlx.async_task(num_warps=1, replicate=REPLICAS):
            tl.store(out_ptr + 1 + tlx.async_task_replica_id(), 1.0)


@tlxc.kernel
def pingpong(x_ptr: F32, sums_ptr: F32, n_tiles: tl.int32, BLOCK: tl.constexpr = 32, THREADS: tl.constexpr = 256,
             BUG: tl.constexpr = ""):
    """ws_pingpong: two consumer groups take turns, ordered by named barriers
    9 and 10 (2 groups x 4 warps x 32 = 256 threads)."""
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=4, replicate=2):  # the pingpong consumers
            cid = tlx.async_task_replica_id()
            if cid == 1 and BUG != "no_pre_arrive":
                tlx.named_barrier_arrive(9, THREADS)  # BUG no_pre_arrive
            for t in range(cid, n_tiles, 2):
                x = tl.load(x_ptr + t * BLOCK + tl.arange(0, BLOCK))
                if BUG == "count_64":
                    tlx.named_barrier_wait(9 + cid, 64)  # BUG count_64
                elif BUG == "count_96":
                    tlx.named_barrier_wait(9 + cid, 96)  # BUG count_96
                elif BUG == "reserved_id":
                    tlx.named_barrier_wait(3 + cid, 256)  # BUG reserved_id
                elif BUG == "id_16":
                    tlx.named_barrier_wait(16, 256)  # BUG id_16
                else:
                    tlx.named_barrier_wait(9 + cid, THREADS)  # my turn
                tl.store(sums_ptr + t, tl.sum(x, axis=0))
                if BUG == "mismatch":
                    tlx.named_barrier_arrive(10 - cid, 128)  # BUG mismatch
                else:
                    tlx.named_barrier_arrive(10 - cid, THREADS)  # the other's turn
            if cid == 0 and BUG != "no_pre_arrive" and BUG != "no_absorb":
                tlx.named_barrier_wait(9, THREADS)  # absorb the last pass


@tlxc.kernel
def runtime_pred(out_ptr: F32, n: tl.int32):
    """Whether the arrive and the wait run depends on ``n``: the checker cannot
    tell statically; ``tlxc check --run`` finds the deadlock for n = 8."""
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_arrive(bar[0], pred=n > 100)
    tlx.barrier_wait(bar[0], 0, pred=n > 5)  # the runtime wait
    tl.store(out_ptr, 1.0)


def check_inputs():
    """Small launches for ``tlxc check tests/check_kernels.py --run``."""
    import torch
    x = torch.randn(20, 100)
    return {
        "ring_rowsum": ((2,), (x, torch.zeros(20), 20, 100)),
        "ring_incremental": ((2,), (x, torch.zeros(20), 100)),
        "handoff": ((2,), (x, torch.zeros(20), 100)),
        "delayed_release": ((2,), (x, torch.zeros(20), 20, 32)),
        "signal_cycle": ((1,), (torch.zeros(8), 8)),
        "warp_barrier": ((1,), (torch.zeros(1),)),
        "shared_handoff": ((1,), (torch.zeros(16),)),
        "cp_async_pipeline": ((2,), (x, torch.zeros(20), 100)),
        "store_over_copy": ((1,), (torch.randn(16), torch.zeros(16))),
        "pingpong": ((1,), (torch.randn(8 * 32), torch.zeros(8), 8)),
        "runtime_pred": ((1,), (torch.zeros(1), 8)),
        "table_items": ((2,), (x, torch.zeros(16), torch.tensor([2, 0, 3, 0, 0, 0, 0, 0, 1, 5, 0, 0, 0, 0, 0, 0],
                                                                dtype=torch.int32), 100)),
    }


@tlxc.kernel
def wgmma_ring(a_desc, b_desc, c_desc, k_tiles: tl.int32, BM: tl.constexpr = 64, BN: tl.constexpr = 64,
               BK: tl.constexpr = 64, NUM_STAGES: tl.constexpr = 2, BUG: tl.constexpr = ""):
    """hopper_gemm_ws reduced to one tile: a TMA producer fills a ring that one
    wgmma consumer reads; the epilogue goes through shared memory and a TMA store."""
    a_smem = tlx.local_alloc((BM, BK), tl.bfloat16, NUM_STAGES)
    b_smem = tlx.local_alloc((BK, BN), tl.bfloat16, NUM_STAGES)
    c_smem = tlx.local_alloc((BM, BN), tl.bfloat16, 1)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for k in range(k_tiles):
                slot, phase = tlx.get_bufidx_phase(k, NUM_STAGES)
                if BUG != "tma_before_empty":
                    tlx.barrier_wait(empty[slot], phase ^ 1)
                if BUG == "expect_small":
                    tlx.barrier_expect_bytes(full[slot], BM * BK * 2)  # BUG expect_small
                elif BUG == "expect_large":
                    tlx.barrier_expect_bytes(full[slot], (BM * BK + BK * BN) * 2 + 128)  # BUG expect_large
                else:
                    tlx.barrier_expect_bytes(full[slot], (BM * BK + BK * BN) * 2)
                tlx.async_descriptor_load(a_desc, a_smem[slot], [0, k * BK], full[slot])  # the A load
                tlx.async_descriptor_load(b_desc, b_smem[slot], [k * BK, 0], full[slot])  # the B load
        with tlx.async_task(num_warps=4):  # the wgmma consumer
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k in range(k_tiles):
                slot, phase = tlx.get_bufidx_phase(k, NUM_STAGES)
                tlx.barrier_wait(full[slot], phase)  # the wgmma consumer's wait
                acc = tlx.async_dot(a_smem[slot], b_smem[slot], acc)  # the async_dot
                if BUG == "early_release":
                    tlx.barrier_arrive(empty[slot])  # BUG the MMA slot is released early
                    acc = tlx.async_dot_wait(0, acc)
                elif BUG == "result_before_wait":
                    acc = acc * 2.0  # BUG result_before_wait
                    acc = tlx.async_dot_wait(0, acc)
                    tlx.barrier_arrive(empty[slot])
                else:
                    acc = tlx.async_dot_wait(0, acc)
                    tlx.barrier_arrive(empty[slot])
            tlx.local_store(c_smem[0], acc.to(tl.bfloat16))  # the epilogue store
            if BUG != "no_fence":
                tlx.fence("async_shared")
            tlx.async_descriptor_store(c_desc, c_smem[0], [0, 0])  # the TMA store
            if BUG != "store_in_flight":
                tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def peer_done(out_ptr: F32, BUG: tl.constexpr = ""):
    """A CTA signals that it is done; with clusters the signal goes to the peer
    (arrive remote), and every CTA waits on its own barrier (wait local)."""
    done = tlx.alloc_barriers(1, arrive_count=1)
    if BUG == "remote_wait":
        peer = tlx.remote_view(done[0], 1)
        tlx.barrier_wait(peer, 0)  # BUG remote_wait
    else:
        tlx.barrier_arrive(done[0])
        tlx.barrier_wait(done[0], 0)
    tl.store(out_ptr, 1.0)


@tlxc.jit
def _push(x_ptr, bufs, full, empty, count, row, t, n_cols, BLOCK: tl.constexpr):
    """The producer's next use of a two-slot ring: wait for the slot, fill it with tile t of the row."""
    slot, phase = tlx.get_bufidx_phase(count, 2)
    tlx.barrier_wait(empty[slot], phase ^ 1)
    _fill(x_ptr, bufs, full, slot, row, t, n_cols, BLOCK)
    return count + 1


@tlxc.kernel
def split_diagonal_walks(x_ptr: F32, out_ptr: F32, n_blocks: tl.int32, n_cols: tl.int32, BLOCK: tl.constexpr = 16):
    """Persistent, a tile index carried by each task's tile loop (``tile += num_programs``): the producer
    walks a causal tile's keys in two loops (the blocks below the diagonal, then the diagonal block), the
    consumer in one (``(start + 1) * BLOCK``), as TLX's persistent Blackwell attention does; the checker must
    pin the bounds computed from both tasks' carried tile indices alike."""
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 2)
    full = tlx.alloc_barriers(2, arrive_count=1)
    empty = tlx.alloc_barriers(2, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            count = 0
            tile = tl.program_id(0)
            for i in range(0, 3):
                start = tile % n_blocks
                for k in range(0, start * BLOCK, BLOCK):                       # below the diagonal
                    count = _push(x_ptr, bufs, full, empty, count, start, k // BLOCK, n_cols, BLOCK)
                for k in range(start * BLOCK, (start + 1) * BLOCK, BLOCK):     # the diagonal block
                    count = _push(x_ptr, bufs, full, empty, count, start, k // BLOCK, n_cols, BLOCK)
                tile += tl.num_programs(0)
        with tlx.async_task(num_warps=4):
            count = 0
            tile = tl.program_id(0)
            acc = tl.zeros((BLOCK,), tl.float32)
            for i in range(0, 3):
                start = tile % n_blocks
                for k in range(0, (start + 1) * BLOCK, BLOCK):
                    slot, phase = tlx.get_bufidx_phase(count, 2)
                    tlx.barrier_wait(full[slot], phase)
                    acc += tlx.local_load(bufs[slot])
                    tlx.barrier_arrive(empty[slot])
                    count += 1
                tile += tl.num_programs(0)
            tl.store(out_ptr + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), acc)


@tlxc.kernel
def per_item_trips(x_ptr: F32, out_ptr: F32, n_items: tl.int32, n_cols: tl.int32, BLOCK: tl.constexpr = 16):
    """Persistent: programs walk items, and each task computes an item's trip count inside
    its own item loop (as a persistent causal attention does), the consumer taking the
    item's first tile before its loop (every item has a tile: n_cols > n_items); the
    checker must pin both tasks' counts of one item to the same value."""
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 2)
    full = tlx.alloc_barriers(2, arrive_count=1)
    empty = tlx.alloc_barriers(2, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            count = 0
            for item in range(tl.program_id(0), n_items, tl.num_programs(0)):
                for t in range(tl.cdiv(n_cols - item, BLOCK)):
                    slot, phase = tlx.get_bufidx_phase(count, 2)
                    tlx.barrier_wait(empty[slot], phase ^ 1)
                    _fill(x_ptr, bufs, full, slot, item, t, n_cols, BLOCK)
                    count += 1
        with tlx.async_task(num_warps=4):
            count = 0
            acc = tl.zeros((BLOCK,), tl.float32)
            for item in range(tl.program_id(0), n_items, tl.num_programs(0)):
                n = tl.cdiv(n_cols - item, BLOCK)
                slot, phase = tlx.get_bufidx_phase(count, 2)
                tlx.barrier_wait(full[slot], phase)                 # the item's first tile
                acc += tlx.local_load(bufs[slot])
                tlx.barrier_arrive(empty[slot])
                for t in range(1, n):
                    slot, phase = tlx.get_bufidx_phase(count + t, 2)
                    tlx.barrier_wait(full[slot], phase)
                    acc += tlx.local_load(bufs[slot])
                    tlx.barrier_arrive(empty[slot])
                count += n
            tl.store(out_ptr + tl.arange(0, BLOCK), acc)


@tlxc.kernel
def table_items(x_ptr: F32, out_ptr: F32, table_ptr: I32, n_cols: tl.int32, BLOCK: tl.constexpr = 16,
                BUG: tl.constexpr = ""):
    """Persistent with a host-built schedule (flash_attention_fwd.py): each task reads this
    program's item count and items from ``table_ptr`` ([count, item, ...] per program)
    and derives an item's trip count from it.  A scalar loaded from memory the kernel never
    writes is a function of its address, so the checker relates the tasks' counts (the
    consumer takes an item's first tile before its loop, so unrelated counts would
    disagree).  BUG="other_item": the consumer reads the next entry (a real mismatch for
    most tables); BUG="table_written": the kernel also writes the table, so its loads
    are not assumed equal (a finding the static check cannot avoid; --run decides).
    Every item needs a tile: items < n_cols."""
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 2)
    full = tlx.alloc_barriers(2, arrive_count=1)
    empty = tlx.alloc_barriers(2, arrive_count=1)
    row = tl.program_id(0) * 8
    with tlx.async_tasks():
        with tlx.async_task("default"):
            count = 0
            for r in range(tl.load(table_ptr + row)):
                item = tl.load(table_ptr + row + 1 + r)
                for t in range(tl.cdiv(n_cols - item, BLOCK)):
                    slot, phase = tlx.get_bufidx_phase(count, 2)
                    tlx.barrier_wait(empty[slot], phase ^ 1)
                    _fill(x_ptr, bufs, full, slot, item, t, n_cols, BLOCK)
                    count += 1
        with tlx.async_task(num_warps=4):
            count = 0
            acc = tl.zeros((BLOCK,), tl.float32)
            for r in range(tl.load(table_ptr + row)):
                item = tl.load(table_ptr + row + 1 + r + (1 if BUG == "other_item" else 0))
                n = tl.cdiv(n_cols - item, BLOCK)
                slot, phase = tlx.get_bufidx_phase(count, 2)
                tlx.barrier_wait(full[slot], phase)                 # the item's first tile
                acc += tlx.local_load(bufs[slot])
                tlx.barrier_arrive(empty[slot])
                for t in range(1, n):
                    slot, phase = tlx.get_bufidx_phase(count + t, 2)
                    tlx.barrier_wait(full[slot], phase)
                    acc += tlx.local_load(bufs[slot])
                    tlx.barrier_arrive(empty[slot])
                count += n
            tl.store(out_ptr + tl.arange(0, BLOCK), acc)
            if BUG == "table_written":
                tl.store(table_ptr + row, 0)
