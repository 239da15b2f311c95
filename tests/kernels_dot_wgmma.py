"""Plain tl.dot kernels (no TLX ops) that lower-dot-to-wgmma and pipeline-loads rewrite on
sm_90a; used by tests/test_dot_wgmma.py, tests/test_pipeline_pass.py and
tests/test_gpu_dot_wgmma.py."""
import tlxc
import tlxc.language as tl


@tlxc.kernel
def tile_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr = None,
                OUT: tl.constexpr = tl.float32):
    """C = A @ B, one BM x BN tile per program; A and B pointers advance by BK along K each
    iteration, the K tail is masked; rows and columns past M / N wrap and are masked at the store."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = (pid_m * BM + tl.arange(0, BM)) % M
    cols = (pid_n * BN + tl.arange(0, BN)) % N
    ks = tl.arange(0, BK)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=OUT)
    for k in tl.range(0, tl.cdiv(K, BK), num_stages=STAGES):
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc, out_dtype=OUT)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    out_rows = pid_m * BM + tl.arange(0, BM)
    out_cols = pid_n * BN + tl.arange(0, BN)
    mask = (out_rows[:, None] < M) & (out_cols[None, :] < N)
    tl.store(c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


@tlxc.kernel
def block_ptr_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = A @ B through block pointers advanced with tl.advance; boundary checks pad with 0."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_blk = tl.make_block_ptr(a_ptr, (M, K), (stride_am, 1), (pid_m * BM, 0), (BM, BK), (1, 0))
    b_blk = tl.make_block_ptr(b_ptr, (K, N), (stride_bk, 1), (0, pid_n * BN), (BK, BN), (1, 0))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_blk, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_blk, boundary_check=(0, 1), padding_option="zero")
        acc = tl.dot(a, b, acc)
        a_blk = tl.advance(a_blk, (0, BK))
        b_blk = tl.advance(b_blk, (BK, 0))
    c_blk = tl.make_block_ptr(c_ptr, (M, N), (stride_cm, 1), (pid_m * BM, pid_n * BN), (BM, BN), (1, 0))
    tl.store(c_blk, acc.to(tl.float16), boundary_check=(0, 1))


@tlxc.kernel
def single_dot(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
               OUT: tl.constexpr = tl.float32):
    """One dot without an accumulator (acc=None), outside any loop; contiguous tiles."""
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b, out_dtype=OUT).to(tl.float32))


@tlxc.kernel
def reused_operand_matmul(a_ptr, b_ptr, c_ptr, s_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """A's tile also feeds a row sum: the loop keeps its loads (not pipelined), the dot still
    runs on wgmma.  Contiguous M x K and K x N inputs, K a multiple of BK."""
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    sums = tl.zeros((BM,), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
        sums += tl.sum(a.to(tl.float32), axis=1)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)
    tl.store(s_ptr + rm, sums)
