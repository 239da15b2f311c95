"""Blackwell (tcgen05 / tensor memory) kernels for the interpreter and the
static checker (tests/test_tcgen05.py).

``tmem_gemm`` is the shape of TLX's ``blackwell_gemm_ws``: a persistent
program walks output tiles; a TMA producer fills a ring of A/B stages, an MMA
task (one warp) accumulates each tile into one of two tensor-memory buffers
and frees every stage through the MMA's completion (``mBarriers=[empty]``),
signalling ``tmem_full`` with ``tcgen05_commit``; the epilogue (the default
task) reads the accumulator in column subtiles, releasing ``tmem_empty`` once
per subtile (``arrive_count = EPILOGUE_SUBTILE``), and stores it.  A ``BUG``
constexpr selects a broken variant; lines the tests look up carry
``# BUG <name>`` or a ``# <role>`` marker.
"""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx

BM, BN, BK = 128, 64, 32


@tlxc.kernel
def tmem_gemm(a_desc: tlx.tensor_descriptor_type(tl.bfloat16, [128, 32], swizzle=64),
              b_desc: tlx.tensor_descriptor_type(tl.bfloat16, [32, 64], swizzle=128),
              c_ptr: tl.pointer_type(tl.float32), M: tl.int32, N: tl.int32, K: tl.int32,
              NUM_STAGES: tl.constexpr = 2, NUM_TMEM: tl.constexpr = 2, EPILOGUE_SUBTILE: tl.constexpr = 2,
              BUG: tl.constexpr = ""):
    a = tlx.local_alloc((BM, BK), tl.bfloat16, NUM_STAGES)
    b = tlx.local_alloc((BK, BN), tl.bfloat16, NUM_STAGES)
    acc = tlx.local_alloc((BM, BN), tl.float32, NUM_TMEM, storage=tlx.storage_kind.tmem)  # the accumulators
    if BUG == "tmem_oversubscribed":
        tlx.local_alloc((BM, 256), tl.float32, 2, storage=tlx.storage_kind.tmem)  # BUG tmem_oversubscribed
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    tmem_full = tlx.alloc_barriers(NUM_TMEM, arrive_count=1)
    tmem_empty = tlx.alloc_barriers(NUM_TMEM, arrive_count=EPILOGUE_SUBTILE)
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * num_pid_n
    k_tiles = tl.cdiv(K, BK)
    SUB: tl.constexpr = BN // EPILOGUE_SUBTILE
    with tlx.async_tasks():
        with tlx.async_task("default"):  # the epilogue
            t = 0
            for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                buf, phase = tlx.get_bufidx_phase(t, NUM_TMEM)
                if BUG != "no_tmem_wait":
                    tlx.barrier_wait(tmem_full[buf], phase)  # the epilogue's wait
                rows = (tile // num_pid_n) * BM + tl.arange(0, BM)
                for j in tl.static_range(EPILOGUE_SUBTILE):
                    part = tlx.local_load(tlx.subslice(acc[buf], j * SUB, SUB))  # the epilogue's read
                    tlx.barrier_arrive(tmem_empty[buf])  # the epilogue's release
                    cols = (tile % num_pid_n) * BN + j * SUB + tl.arange(0, SUB)
                    tl.store(c_ptr + rows[:, None] * N + cols[None, :], part,
                             mask=(rows[:, None] < M) & (cols[None, :] < N))
                t += 1  # noqa: SIM113 (enumerate is not in the kernel language)
        with tlx.async_task(num_warps=1):  # the producer
            count = 0
            for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                for k in range(k_tiles):
                    slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                    tlx.barrier_wait(empty[slot], phase ^ 1)  # the producer's wait
                    tlx.barrier_expect_bytes(full[slot], (BM * BK + BK * BN) * 2)
                    tlx.async_descriptor_load(a_desc, a[slot], [(tile // num_pid_n) * BM, k * BK], full[slot])
                    tlx.async_descriptor_load(b_desc, b[slot], [k * BK, (tile % num_pid_n) * BN],
                                              full[slot])  # the producer's B load
                    count += 1
        with tlx.async_task(num_warps=1):  # the MMA task
            count = 0
            t = 0
            for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                buf, phase = tlx.get_bufidx_phase(t, NUM_TMEM)
                if BUG != "no_tmem_empty_wait":
                    tlx.barrier_wait(tmem_empty[buf], phase ^ 1)  # the MMA's TMEM wait
                for k in range(k_tiles):
                    slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                    tlx.barrier_wait(full[slot], phase)
                    if BUG == "sync_release":      # correct: a synchronous MMA has completed
                        tlx.async_dot(a[slot], b[slot], acc[buf], use_acc=k > 0)
                        tlx.barrier_arrive(empty[slot])
                    elif BUG == "async_manual_release":
                        tlx.async_dot(a[slot], b[slot], acc[buf], use_acc=k > 0, force_async=True)
                        tlx.barrier_arrive(empty[slot])  # BUG async_manual_release
                    elif BUG == "no_mbarrier":
                        tlx.async_dot(a[slot], b[slot], acc[buf], use_acc=k > 0, force_async=True)  # BUG no_mbarrier
                    else:
                        tlx.async_dot(a[slot], b[slot], acc[buf], use_acc=k > 0,  # the MMA issue
                                      mBarriers=[empty[slot]])
                    count += 1
                if BUG == "commit_twice":
                    tlx.tcgen05_commit(tmem_full[buf])  # BUG commit_twice
                if BUG == "arrive_not_commit":
                    tlx.barrier_arrive(tmem_full[buf])  # BUG arrive_not_commit
                else:
                    tlx.tcgen05_commit(tmem_full[buf])  # the MMA's commit
                t += 1  # noqa: SIM113 (enumerate is not in the kernel language)


@tlxc.kernel
def tmem_roundtrip(x_ptr: tl.pointer_type(tl.float32), out_ptr: tl.pointer_type(tl.float32),
                   N: tl.constexpr = 64):
    """local_store into tensor memory, a column slice back out, no MMA."""
    buf = tlx.local_alloc((128, N), tl.float32, 1, storage=tlx.storage_kind.tmem)
    rows = tl.arange(0, 128)
    cols = tl.arange(0, N)
    tlx.local_store(buf[0], tl.load(x_ptr + rows[:, None] * N + cols[None, :]))
    half = tlx.local_load(tlx.local_slice(buf[0], [0, N // 2], [128, N // 2]))
    tl.store(out_ptr + rows[:, None] * (N // 2) + tl.arange(0, N // 2)[None, :], half)


@tlxc.kernel
def sync_mma(a_ptr, b_ptr, c_ptr: tl.pointer_type(tl.float32), K: tl.constexpr = 64, N: tl.constexpr = 32,
             TRANS_B: tl.constexpr = False):
    """A synchronous tcgen05 MMA (no mBarriers) from register-filled shared tiles; B
    stored N x K and passed as a transposed view when TRANS_B."""
    a = tlx.local_alloc((128, K), a_ptr.dtype.element_ty, 1)
    rows = tl.arange(0, 128)
    ks = tl.arange(0, K)
    ns = tl.arange(0, N)
    tlx.local_store(a[0], tl.load(a_ptr + rows[:, None] * K + ks[None, :]))
    acc = tlx.local_alloc((128, N), tl.float32, 1, storage=tlx.storage_kind.tmem)
    if TRANS_B:
        b = tlx.local_alloc((N, K), a_ptr.dtype.element_ty, 1)
        tlx.local_store(b[0], tl.load(b_ptr + ns[:, None] * K + ks[None, :]))
        tlx.fence("async_shared")
        tlx.async_dot(a[0], tlx.local_trans(b[0]), acc[0], use_acc=False)
    else:
        b = tlx.local_alloc((K, N), a_ptr.dtype.element_ty, 1)
        tlx.local_store(b[0], tl.load(b_ptr + ks[:, None] * N + ns[None, :]))
        tlx.fence("async_shared")
        tlx.async_dot(a[0], b[0], acc[0], use_acc=False)
    c = tlx.local_load(acc[0])
    tl.store(c_ptr + rows[:, None] * N + ns[None, :], c)
