"""Kernels of the cp.async + wgmma pipelined GEMM pattern (TLX's hopper_gemm_pipelined
tutorial, in this project's words) and of loop-carried views; used by
tests/test_gpu_pipelined_gemm.py, tests/test_loop_carried_views.py and
tests/test_proxy_fence.py."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def cp_async_wgmma_gemm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr):
    """C = A @ B (fp16 in, fp32 accumulate): every thread copies its part of the A and B
    tiles with cp.async into a ring of STAGES shared buffers, STAGES - 1 tiles ahead of
    the wgmma; a stage is refilled after async_dot_wait(1) retired the MMA that read it.
    Rows and columns past M / N wrap (``%``) and are masked at the store; the K tail is
    zero-filled by the copy masks."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = (pid_m * BM + tl.arange(0, BM)) % M
    cols = (pid_n * BN + tl.arange(0, BN)) % N
    ks = tl.arange(0, BK)
    a_tiles = tlx.local_alloc((BM, BK), tl.float16, STAGES)
    b_tiles = tlx.local_alloc((BK, BN), tl.float16, STAGES)
    a_next = a_ptr + rows[:, None] * stride_am + ks[None, :]
    b_next = b_ptr + ks[:, None] * stride_bk + cols[None, :]
    for s in range(STAGES - 1):                               # fill the ring
        tlx.async_load(a_next, tlx.local_view(a_tiles, s), mask=ks[None, :] < K - s * BK)
        tlx.async_load(b_next, tlx.local_view(b_tiles, s), mask=ks[:, None] < K - s * BK)
        tlx.async_load_commit_group()
        a_next += BK
        b_next += BK * stride_bk
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(tl.cdiv(K, BK)):
        stage = k % STAGES
        tlx.async_load_wait_group(STAGES - 2)                 # the wait for tile k
        acc = tlx.async_dot(tlx.local_view(a_tiles, stage), tlx.local_view(b_tiles, stage), acc)  # the wgmma
        refill = k + STAGES - 1
        acc = tlx.async_dot_wait(1, acc)                      # the MMA of tile k - 1 is retired
        tlx.async_load(a_next, tlx.local_view(a_tiles, refill % STAGES), mask=ks[None, :] < K - refill * BK)
        tlx.async_load(b_next, tlx.local_view(b_tiles, refill % STAGES), mask=ks[:, None] < K - refill * BK)
        tlx.async_load_commit_group()
        a_next += BK
        b_next += BK * stride_bk
    acc = tlx.async_dot_wait(0, acc)
    out_rows = pid_m * BM + tl.arange(0, BM)
    out_cols = pid_n * BN + tl.arange(0, BN)
    mask = (out_rows[:, None] < M) & (out_cols[None, :] < N)
    tl.store(c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :], acc.to(tl.float16), mask=mask)


@tlxc.kernel
def carried_ring_for(x_ptr, out_ptr, n_tiles, BLOCK: tl.constexpr, SLOTS: tl.constexpr, BUG: tl.constexpr = ""):
    """A barrier view and a buffer view chosen before the loop and advanced in it (the
    TLX tutorials' loop-carried views): each tile goes through the next slot."""
    bufs = tlx.local_alloc((BLOCK,), tl.float32, SLOTS)
    bars = tlx.alloc_barriers(SLOTS, arrive_count=1)
    bar = tlx.local_view(bars, 0)
    buf = tlx.local_view(bufs, 0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for t in range(n_tiles):
        tlx.local_store(buf, tl.load(x_ptr + t * BLOCK + tl.arange(0, BLOCK)))
        tlx.barrier_arrive(bar)
        if BUG == "phase":
            tlx.barrier_wait(bar, 0)  # BUG phase
        else:
            tlx.barrier_wait(bar, (t // SLOTS) & 1)
        acc += tlx.local_load(buf) * (t + 1)
        bar = tlx.local_view(bars, (t + 1) % SLOTS)
        buf = tlx.local_view(bufs, (t + 1) % SLOTS)
    tl.store(out_ptr + tl.arange(0, BLOCK), acc)


@tlxc.kernel
def carried_ring_while(x_ptr, out_ptr, n_tiles, BLOCK: tl.constexpr, SLOTS: tl.constexpr):
    """The same ring as ``carried_ring_for`` driven by a while loop, the slot's view
    picked by an ``if`` (a view as an if result)."""
    bufs = tlx.local_alloc((BLOCK,), tl.float32, SLOTS)
    bars = tlx.alloc_barriers(SLOTS, arrive_count=1)
    bar = tlx.local_view(bars, 0)
    buf = tlx.local_view(bufs, 0)
    acc = tl.zeros((BLOCK,), tl.float32)
    t = 0
    while t < n_tiles:
        tlx.local_store(buf, tl.load(x_ptr + t * BLOCK + tl.arange(0, BLOCK)))
        tlx.barrier_arrive(bar)
        tlx.barrier_wait(bar, (t // SLOTS) & 1)
        acc += tlx.local_load(buf) * (t + 1)
        t += 1
        if t % SLOTS == 0:
            bar = tlx.local_view(bars, 0)
            buf = tlx.local_view(bufs, 0)
        else:
            bar = tlx.local_view(bars, t % SLOTS)
            buf = tlx.local_view(bufs, t % SLOTS)
    tl.store(out_ptr + tl.arange(0, BLOCK), acc)


@tlxc.kernel
def carried_mixed_layouts(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """A carried view replaced by a view of a buffer with another layout (an error)."""
    plain = tlx.local_alloc((BLOCK, BLOCK), tl.float32, 2)
    buf = tlx.local_view(plain, 0)
    for t in range(2):
        tlx.local_store(buf, tl.zeros((BLOCK, BLOCK), tl.float32))
        buf = tlx.local_trans(tlx.local_view(plain, 1))  # the other layout
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.sum(tlx.local_load(buf), axis=0))


@tlxc.kernel
def scalar_if_before_tasks(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """A scalar set by a runtime ``if`` before the tasks, used inside both."""
    if n > 4:
        scale = 2.0
        shift = n - 4
    else:
        scale = 3.0
        shift = 0
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs) * scale + shift)
        with tlx.async_task(num_warps=4):
            offs = BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs) * scale - shift)


@tlxc.kernel
def stored_operand_wgmma(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                         FENCE: tl.constexpr = False):
    """A (from registers) is written with local_store and read by a wgmma."""
    a_buf = tlx.local_alloc((BM, BK), tl.float16, 1)
    b_buf = tlx.local_alloc((BK, BN), tl.float16, 1)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    tlx.local_store(tlx.local_view(a_buf, 0), tl.load(a_ptr + rm[:, None] * BK + rk[None, :]))  # the A store
    tlx.local_store(tlx.local_view(b_buf, 0), tl.load(b_ptr + rk[:, None] * BN + rn[None, :]))
    if FENCE:
        tlx.fence("async_shared")
    acc = tlx.async_dot(tlx.local_view(a_buf, 0), tlx.local_view(b_buf, 0), tl.zeros((BM, BN), tl.float32))
    acc = tlx.async_dot_wait(0, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@tlxc.kernel
def stored_tile_tma_store(c_desc, BM: tl.constexpr, BN: tl.constexpr, FENCE: tl.constexpr = False):
    """A tile written with local_store and copied out with a TMA store."""
    c_buf = tlx.local_alloc((BM, BN), tl.float16, 1)
    value = (tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]).to(tl.float16)
    tlx.local_store(tlx.local_view(c_buf, 0), value)  # the C store
    if FENCE:
        tlx.fence("async_shared")
    tlx.async_descriptor_store(c_desc, tlx.local_view(c_buf, 0), [0, 0])  # the TMA store
    tlx.async_descriptor_store_wait(0)
