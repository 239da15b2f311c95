"""Triton idioms around tl.dot that the sm_90a pipeline must read as Triton does: the
accumulation written ``acc += tl.dot(a, b)`` and a ``tl.multiple_of`` hint written as a
statement on a loop-carried pointer (as Triton's grouped GEMM tutorial does); used by
tests/test_dot_idioms.py."""
import tlxc
import tlxc.language as tl


@tlxc.kernel
def table_matmul(addr_table, dims, c_ptr, M, N, K, stride_cm,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, HINT: tl.constexpr,
                 FOLD: tl.constexpr):
    """C = A @ B where A's and B's addresses and leading dimensions are read from device
    tables (so nothing is known of their alignment); rows past M wrap, B's rows are padded
    to a multiple of 128 columns (columns past N are read and dropped), the K tail is masked.  HINT: promise 16-byte aligned rows with statement-form hints inside
    the K loop.  FOLD: accumulate as ``acc += tl.dot(a, b)`` (else ``tl.dot(a, b, acc)``)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_ptr = tl.load(addr_table).to(tl.pointer_type(tl.float16))
    b_ptr = tl.load(addr_table + 1).to(tl.pointer_type(tl.float16))
    lda = tl.load(dims)
    ldb = tl.load(dims + 1)
    rows = (pid_m * BM + tl.arange(0, BM)) % M
    cols = pid_n * BN + tl.arange(0, BN)          # B's rows are padded: columns past N are read, not stored
    ks = tl.arange(0, BK)
    a_ptrs = a_ptr + rows[:, None] * lda + ks[None, :]
    b_ptrs = b_ptr + ks[:, None] * ldb + cols[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        if HINT:
            tl.multiple_of(a_ptrs, [16, 16])
            tl.multiple_of(b_ptrs, [16, 16])
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k * BK, other=0.0)
        if FOLD:
            acc += tl.dot(a, b)
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * ldb
    out_rows = pid_m * BM + tl.arange(0, BM)
    out_cols = pid_n * BN + tl.arange(0, BN)
    mask = (out_rows[:, None] < M) & (out_cols[None, :] < N)
    tl.store(c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :], acc.to(tl.float16), mask=mask)


@tlxc.kernel
def row_softmax(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: tl.constexpr,
                STAGES: tl.constexpr):
    """Tutorial 02's shape in our words: persistent programs stride over the rows."""
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
        cols = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * out_stride + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


@tlxc.kernel
def tiles_in_while(a_ptr, b_ptr, c_ptr, M, N, K, tiles_n, n_tiles, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr):
    """Tutorial 08's loop nest in our words: each program takes tiles ``pid, pid + programs,
    ...`` in a ``while`` loop and runs a K loop for each (rows/columns past M / N wrap; the K
    tail is masked; K may be 0)."""
    tile = tl.program_id(0)
    while tile < n_tiles:
        rows = (tile // tiles_n * BM + tl.arange(0, BM)) % M
        cols = (tile % tiles_n * BN + tl.arange(0, BN)) % N
        ks = tl.arange(0, BK)
        a_ptrs = a_ptr + rows[:, None] * K + ks[None, :]
        b_ptrs = b_ptr + ks[:, None] * N + cols[None, :]
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            a = tl.load(a_ptrs, mask=ks[None, :] < K - k * BK, other=0.0)
            b = tl.load(b_ptrs, mask=ks[:, None] < K - k * BK, other=0.0)
            acc += tl.dot(a, b)
            a_ptrs += BK
            b_ptrs += BK * N
        out_rows = tile // tiles_n * BM + tl.arange(0, BM)
        out_cols = tile % tiles_n * BN + tl.arange(0, BN)
        mask = (out_rows[:, None] < M) & (out_cols[None, :] < N)
        tl.store(c_ptr + out_rows[:, None] * N + out_cols[None, :], acc, mask=mask)
        tile += tl.num_programs(0)


@tlxc.kernel
def running_rows(x_ptr, n_rows, n_cols, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    """Each row becomes itself plus the row before it, in place and in order: an iteration
    reads what the previous one wrote through the same argument (prefetching would read the
    old row)."""
    cols = tl.arange(0, BLOCK)
    for row in tl.range(1, n_rows, num_stages=STAGES):
        prev = tl.load(x_ptr + (row - 1) * n_cols + cols, mask=cols < n_cols, other=0.0)
        cur = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        tl.store(x_ptr + row * n_cols + cols, cur + prev, mask=cols < n_cols)


@tlxc.kernel
def strided_sum(out_ptr, in_ptr, n, step_elems, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    """out[:BLOCK] = sum of the blocks in[i * step_elems : ...] for i < n, an unmasked load
    through a pointer the loop advances (a carried value with an invariant increment)."""
    offs = tl.arange(0, BLOCK)
    ptrs = in_ptr + offs
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in tl.range(0, n, num_stages=STAGES):
        acc += tl.load(ptrs)
        ptrs += step_elems
    tl.store(out_ptr + offs, acc)
