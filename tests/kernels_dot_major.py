"""A plain tl.dot matmul over block pointers whose strides and ``order`` are arguments of the
launch: A [M, K] and B [K, N] each row-major or column-major (B column-major is ``w.t()`` of an
nn.Linear weight).  Used by tests/test_dot_operand_major.py and test_gpu_dot_operand_major.py
(the pointer-tensor form of the same matmul is kernels_dot_wgmma.tile_matmul)."""
import tlxc
import tlxc.language as tl


@tlxc.kernel
def block_ptr_matmul_major(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                           A_ORDER: tl.constexpr, B_ORDER: tl.constexpr):
    """C = A @ B through block pointers; ``*_ORDER`` is (1, 0) for a row-major operand and
    (0, 1) for a column-major one; boundary checks zero-fill the edges."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_blk = tl.make_block_ptr(a_ptr, (M, K), (stride_am, stride_ak), (pid_m * BM, 0), (BM, BK), A_ORDER)
    b_blk = tl.make_block_ptr(b_ptr, (K, N), (stride_bk, stride_bn), (0, pid_n * BN), (BK, BN), B_ORDER)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_blk, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_blk, boundary_check=(0, 1), padding_option="zero")
        acc = tl.dot(a, b, acc)
        a_blk = tl.advance(a_blk, (0, BK))
        b_blk = tl.advance(b_blk, (BK, 0))
    c_blk = tl.make_block_ptr(c_ptr, (M, N), (stride_cm, 1), (pid_m * BM, pid_n * BN), (BM, BN), (1, 0))
    tl.store(c_blk, acc.to(c_ptr.dtype.element_ty), boundary_check=(0, 1))


@tlxc.kernel
def dot_trans_rows(q_ptr, k_ptr, o_ptr, M, N, stride_q, stride_k,
                   BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
    """S = Q @ K^T with K loaded row by row ([BN, D], contiguous along D) and transposed in
    registers (tl.trans): the wgmma's B is K-major; rows past M / N are zero-filled."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * stride_q + rd[None, :], mask=rm[:, None] < M, other=0.0)
    k = tl.load(k_ptr + rn[:, None] * stride_k + rd[None, :], mask=rn[:, None] < N, other=0.0)
    s = tl.dot(q, tl.trans(k))
    tl.store(o_ptr + rm[:, None] * N + rn[None, :], s, mask=(rm[:, None] < M) & (rn[None, :] < N))
