"""TMA reduce-store kernels (``tlx.async_descriptor_store(..., store_reduce=KIND)``)."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def reduce_splits(x_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr, KIND: tl.constexpr):
    """out[box] = out[box] KIND x[s, box] for each split s = program_id(2): the programs of
    every split reduce into the same rows of ``out``.  ``x_desc`` is 3-D ([splits, M, N],
    box [1, BM, BN]), so a box never reads another split's rows."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    split = tl.program_id(2)
    buf = tlx.local_alloc((BM, BN), tlx.dtype_of(out_desc), 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], BM * BN * tlx.size_of(tlx.dtype_of(out_desc)))
    tlx.async_descriptor_load(x_desc, buf[0], [split, pid_m * BM, pid_n * BN], bar[0])
    tlx.barrier_wait(bar[0], 0)
    tlx.async_descriptor_store(out_desc, buf[0], [pid_m * BM, pid_n * BN], store_reduce=KIND)
    tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def ws_add_rows(a_ptr, out_desc, n_rows, n_cols, BM: tl.constexpr, BN: tl.constexpr,
                NUM_STAGE: tl.constexpr):
    """Two consumer replicas add their partials into the same rows of ``out``, as the dq of a
    flash-attention backward: replica c adds (c + 1) * a[c] through its own ring of NUM_STAGE
    staging buffers, one column tile at a time; out = out + a[0] + 2 * a[1]."""
    pid = tl.program_id(0)
    stage = tlx.local_alloc((BM, BN), tl.float32, 2 * NUM_STAGE)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=4, replicate=2):
            cid: tl.constexpr = tlx.async_task_replica_id()
            rows = pid * BM + tl.arange(0, BM)
            for j in range(tl.cdiv(n_cols, BN)):
                cols = j * BN + tl.arange(0, BN)
                inside = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
                ptrs = a_ptr + cid * n_rows * n_cols + rows[:, None] * n_cols + cols[None, :]
                part = tl.load(ptrs, mask=inside, other=0.0) * (cid + 1.0)
                slot = cid * NUM_STAGE + j % NUM_STAGE
                tlx.async_descriptor_store_wait(NUM_STAGE - 1)   # the slot's previous store has read it
                tlx.local_store(stage[slot], part)
                tlx.fence("async_shared")
                tlx.async_descriptor_store(out_desc, stage[slot], [pid * BM, j * BN], store_reduce="add")
            tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def reduce_store_with(out_desc, KIND: tl.constexpr):
    """A bare reduce-store (for the error tests)."""
    buf = tlx.local_alloc((16, 16), tlx.dtype_of(out_desc), 1)
    tlx.async_descriptor_store(out_desc, buf[0], [0, 0], store_reduce=KIND)
    tlx.async_descriptor_store_wait(0)
