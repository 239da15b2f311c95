"""Kernels for distributed shared memory, warp votes and inline PTX (tests/test_dsm.py,
test_vote.py, test_inline_asm.py)."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def dsm_swap(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """Pairs of CTAs: each sends 2 * x + its rank (of its own block of x) into its peer's
    buffer; the peer writes what it got back to the sender's block of y, so y = 2 * x + the
    rank of the block's CTA."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    tlx.local_store(buf[0], tl.full((BLOCK,), -1.0, tl.float32))
    tlx.cluster_barrier()                     # the peer initialized its buffer
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tlx.remote_shmem_store(dst=buf[0], src=x * 2.0 + rank.to(tl.float32), remote_cta_rank=rank ^ 1)
    tlx.cluster_barrier()                     # the peer's store landed here
    got = tlx.local_load(buf[0])
    peer_offs = (pid ^ 1) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + peer_offs, got, mask=peer_offs < n)


@tlxc.kernel
def dsm_row_sums(x_ptr, out_ptr, m, N: tl.constexpr, BLOCK_M: tl.constexpr):
    """Clusters of 2 along y: CTA r sums columns [r * N / 2, (r + 1) * N / 2) of its BLOCK_M
    rows; CTA 1 sends its sums to CTA 0 with st.async, CTA 0 adds them and stores."""
    HALF: tl.constexpr = N // 2
    sums = tlx.local_alloc((BLOCK_M,), tl.float32, 2)
    arrived = tlx.alloc_barriers(num_barriers=2)
    tlx.barrier_expect_bytes(arrived[1], BLOCK_M * tlx.size_of(tl.float32))
    rank = tlx.cluster_cta_rank()
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = rank * HALF + tl.arange(0, HALF)
    tile = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=rows[:, None] < m, other=0.0)
    mine = tl.sum(tile, axis=1)
    if rank == 1:
        tlx.async_remote_shmem_store(dst=sums[1], src=mine, remote_cta_rank=0, barrier=arrived[1])
    if rank == 0:
        tlx.barrier_wait(arrived[1], phase=0)
        total = mine + tlx.local_load(sums[1])
        tl.store(out_ptr + rows, total, mask=rows < m)


@tlxc.kernel
def dsm_bulk_forward(x_ptr, y_ptr, n, BLOCK: tl.constexpr, WAIT: tl.constexpr):
    """CTA 0 of each pair stages its block in shared memory and bulk-copies it into CTA 1's
    buffer; CTA 1 waits for the bytes on its barrier and writes them to y."""
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    bars = tlx.alloc_barriers(num_barriers=1)
    rank = tlx.cluster_cta_rank()
    offs = (tl.program_id(0) // 2) * BLOCK + tl.arange(0, BLOCK)
    if rank == 1:
        tlx.barrier_expect_bytes(bars[0], BLOCK * 4)
    if rank == 0:
        tlx.local_store(buf[0], tl.load(x_ptr + offs, mask=offs < n, other=0.0))
        tlx.fence("async_shared")
        tlx.async_remote_shmem_copy(dst=buf[0], src=buf[0], remote_cta_rank=1, barrier=bars[0])
    if rank == 1:
        if WAIT:
            tlx.barrier_wait(bars[0], phase=0)
        tl.store(y_ptr + offs, tlx.local_load(buf[0]), mask=offs < n)


# -- warp votes ------------------------------------------------------------------------------
@tlxc.kernel
def ballot_below(out_ptr, SPLIT: tl.constexpr):
    """out[pid] = the ballot of 'thread id < SPLIT' over warp 0 (lanes below SPLIT set)."""
    tid = tlx.thread_id(0)
    ballot = tlx.vote_ballot_sync(0xFFFFFFFF, tid < SPLIT)
    if tid == 0:
        tl.store(out_ptr + tl.program_id(0), ballot)


@tlxc.kernel
def ballot_in_task(out_ptr):
    """A second task (warps 4..7, threads 128..255): its leading warp votes for its lanes
    whose thread id is odd and below 140, under mask 0x0000FFFF."""
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=4):
            tid = tlx.thread_id(0)
            ballot = tlx.vote_ballot_sync(0x0000FFFF, (tid % 2 == 1) & (tid < 140))
            if tid == 128:
                tl.store(out_ptr, ballot)


@tlxc.kernel
def ballot_of_tensor(x_ptr, out_ptr, BLOCK: tl.constexpr, MASK: tl.constexpr):
    """A tensor predicate: out = its elementwise ballot (x >= 0 for every x: all lanes)."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tlx.vote_ballot_sync(MASK, x >= 0.0))


# -- inline PTX ------------------------------------------------------------------------------
@tlxc.kernel
def asm_affine(x_ptr, k_ptr, y_ptr, q_ptr, n, BLOCK: tl.constexpr):
    """y = x * 3 + 1 through "=f,f" PTX; (sum, difference) of two int tensors through one
    asm with two outputs."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.inline_asm_elementwise("fma.rn.f32 $0, $1, 0f40400000, 0f3F800000;", "=f,f", [x],
                                  dtype=tl.float32, is_pure=True, pack=1)
    k = tl.load(k_ptr + offs, mask=mask, other=0)
    s, d = tl.inline_asm_elementwise("{ add.s32 $0, $2, $3; sub.s32 $1, $2, $3; }", "=r,=r,r,r", [k, 7],
                                     dtype=(tl.int32, tl.int32), is_pure=True, pack=1)
    tl.store(y_ptr + offs, y, mask=mask)
    tl.store(q_ptr + offs, s * 1000 + d, mask=mask)


@tlxc.kernel
def asm_unary(x_ptr, y_ptr, ASM: tl.constexpr, DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    """One "=r,r" asm per element: ``popc`` (which the interpreter does not model: it refuses the
    asm at its line), or an int8 element alone in a 32-bit register."""
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    y = tl.inline_asm_elementwise(ASM, "=r,r", [x], dtype=DTYPE, is_pure=True, pack=1)
    tl.store(y_ptr + tl.arange(0, BLOCK), y)


@tlxc.kernel
def asm_no_operands(out_ptr):
    """An impure asm without operands (a short sleep) that yields a scalar."""
    zero = tl.inline_asm_elementwise("nanosleep.u32 100; mov.u32 $0, 0;", "=r", [], dtype=tl.int32,
                                     is_pure=False, pack=1)
    tl.store(out_ptr, zero + 5)


@tlxc.kernel
def asm_bad_constraints(x_ptr):
    x = tl.load(x_ptr)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(x_ptr, y)


# -- a cluster barrier in every task of a warp-specialized kernel ------------------------------
@tlxc.kernel
def cluster_barrier_in_tasks(x_ptr, y_ptr, n, BLOCK: tl.constexpr, SKIP_IDLE: tl.constexpr):
    """Every task of both CTAs runs one cluster barrier (TLX's idiom: each thread arrives once);
    then CTA 0's default task arrives on CTA 1's barrier and CTA 1's loader waits for it.
    SKIP_IDLE leaves the third task out of the cluster barrier (a deadlock)."""
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.fence_mbarrier_init_cluster()
    rank = tlx.cluster_cta_rank()
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.cluster_barrier()
            if rank == 0:
                tlx.barrier_arrive(bar=bars[0], remote_cta_rank=1)
        with tlx.async_task(num_warps=4):
            tlx.cluster_barrier()
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            if rank == 1:
                tlx.barrier_wait(bars[0], phase=0)
            tl.store(y_ptr + offs, x + 1.0, mask=offs < n)
        with tlx.async_task(num_warps=4):
            if not SKIP_IDLE:
                tlx.cluster_barrier()


@tlxc.kernel
def dsm_async_store_f16(x_ptr):
    buf = tlx.local_alloc((64,), tl.float16, 1)
    bars = tlx.alloc_barriers(num_barriers=1)
    tlx.async_remote_shmem_store(buf[0], tl.load(x_ptr + tl.arange(0, 64)), 1, bars[0])


@tlxc.kernel
def dsm_store_rank_17(x_ptr):
    buf = tlx.local_alloc((64,), tl.float32, 1)
    tlx.remote_shmem_store(buf[0], tl.load(x_ptr + tl.arange(0, 64)), 17)


@tlxc.kernel
def dsm_late_alloc_sums(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """Clusters of 2: each CTA sums its BLOCK values and sends the sum into its peer's
    'parts' buffer with st.async, where 'parts' is allocated after the cluster barrier (shared
    memory is static: the peer's buffer exists before its local_alloc runs); both CTAs store
    the cluster's total at their program id."""
    got = tlx.alloc_barriers(num_barriers=1)
    tlx.barrier_expect_bytes(got[0], 4)
    tlx.cluster_barrier()
    rank = tlx.cluster_cta_rank()
    pid = tl.program_id(0)
    parts = tlx.local_alloc((1,), tl.float32, 2)
    x = tl.load(x_ptr + pid * BLOCK + tl.arange(0, BLOCK))
    mine = tl.reshape(tl.sum(x, axis=0), (1,))
    tlx.local_store(parts[rank], mine)
    tlx.async_remote_shmem_store(dst=parts[rank], src=mine, remote_cta_rank=rank ^ 1, barrier=got[0])
    tlx.barrier_wait(got[0], 0)
    total = tlx.local_load(parts[0]) + tlx.local_load(parts[1])
    tl.store(out_ptr + pid + tl.arange(0, 1), total)


@tlxc.kernel
def asm_moves(x_ptr, bits_ptr, y_ptr, BLOCK: tl.constexpr):
    """PTX the interpreter models: a sleep, an input copied bit for bit (f32 -> i32), a float
    immediate and a hex integer immediate."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    bits, half, mask = tl.inline_asm_elementwise(
        "nanosleep.u32 20; mov.b32 $0, $3; mov.f32 $1, 0f3F000000; // a comment\n mov.u32 $2, 0x7f;",
        "=r,=f,=r,f", [x], dtype=(tl.int32, tl.float32, tl.int32), is_pure=False, pack=1)
    tl.store(bits_ptr + offs, bits & mask)
    tl.store(y_ptr + offs, x * half)
