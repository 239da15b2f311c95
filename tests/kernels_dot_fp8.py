"""Plain tl.dot kernels on fp8 operands (issue 19): the shape of Triton's matmul tutorial in
fp8 -- A [M, K] row-major, B given as ``w.T`` of a row-major [N, K] ``w`` (K-major), a float32
accumulator, the result stored as float16.  Used by tests/test_dot_fp8.py and
tests/test_gpu_dot_fp8.py."""
import tlxc
import tlxc.language as tl


@tlxc.kernel
def fp8_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, IMPRECISE: tl.constexpr = None,
               OUT: tl.constexpr = tl.float32):
    """C = A @ B, one BM x BN tile per program; rows and columns past M / N wrap (loads stay in
    bounds) and are masked at the store, the K tail is masked to zero.  ``IMPRECISE`` is passed
    to tl.dot as max_num_imprecise_acc, ``OUT`` as out_dtype (the accumulator's type)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = (pid_m * BM + tl.arange(0, BM)) % M
    cols = (pid_n * BN + tl.arange(0, BN)) % N
    ks = tl.arange(0, BK)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=OUT)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc, max_num_imprecise_acc=IMPRECISE, out_dtype=OUT)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    out_rows = pid_m * BM + tl.arange(0, BM)
    out_cols = pid_n * BN + tl.arange(0, BN)
    mask = (out_rows[:, None] < M) & (out_cols[None, :] < N)
    tl.store(c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


@tlxc.kernel
def fp8_dot_args(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                 IMPRECISE: tl.constexpr = None, OUT: tl.constexpr = None, PRECISION: tl.constexpr = None):
    """One dot of contiguous tiles with the keyword arguments given as constexprs (errors and
    attributes); acc is None."""
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    c = tl.dot(a, b, max_num_imprecise_acc=IMPRECISE, out_dtype=OUT, input_precision=PRECISION)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], c.to(tl.float32))


@tlxc.kernel
def fp8_matmul_mismatched_out(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """A float32 accumulator passed with out_dtype=float16: refused (Triton asserts the same)."""
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    ks = tl.arange(0, BK)
    a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak)
    b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    acc = tl.dot(a, b, acc, out_dtype=tl.float16)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], acc.to(tl.float16))
