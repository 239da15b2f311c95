"""Kernels whose TMA boxes are wider than the 128-byte swizzle span (tests/test_wide_boxes.py):
one TMA copy of the whole box per tile, as TLX kernels write them; the compiler splits
each box into 128-byte-wide sub-boxes of a column-blocked buffer."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def gemm_wide_b(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = A @ B with a [BK, BN] B box (BN = 256: 512-byte rows) read N-major by wgmma and a
    [BM, BN] C box stored from a buffer written by local_store; two stages of A and B."""
    row = tl.program_id(0) * BM
    col = tl.program_id(1) * BN
    a = tlx.local_alloc((BM, BK), tl.float16, 2)
    b = tlx.local_alloc((BK, BN), tl.float16, 2)
    c = tlx.local_alloc((BM, BN), tl.float16, 1)
    full = tlx.alloc_barriers(2, arrive_count=1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    steps = tl.cdiv(K, BK)
    tlx.barrier_expect_bytes(full[0], (BM * BK + BK * BN) * 2)
    tlx.async_descriptor_load(a_desc, a[0], [row, 0], full[0])
    tlx.async_descriptor_load(b_desc, b[0], [0, col], full[0])
    for i in range(steps):
        slot = i % 2
        if i + 1 < steps:        # the other slot's previous reader finished: its wait retired it
            tlx.barrier_expect_bytes(full[1 - slot], (BM * BK + BK * BN) * 2)
            tlx.async_descriptor_load(a_desc, a[1 - slot], [row, (i + 1) * BK], full[1 - slot])
            tlx.async_descriptor_load(b_desc, b[1 - slot], [(i + 1) * BK, col], full[1 - slot])
        tlx.barrier_wait(full[slot], (i // 2) & 1)
        acc = tlx.async_dot(a[slot], b[slot], acc)
        acc = tlx.async_dot_wait(0, acc)
    tlx.local_store(c[0], acc.to(tl.float16))
    tlx.fence("async_shared")
    tlx.async_descriptor_store(c_desc, c[0], [row, col])
    tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def wide_dot(a_desc, b_desc, c_desc, A_KMAJOR: tl.constexpr, B_KMAJOR: tl.constexpr,
             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """One tile C = A @ B with every box 256 bytes wide: A stored [BM, BK] (K-major) or [BK, BM]
    (M-major, through local_trans), B stored [BN, BK] (K-major, local_trans) or [BK, BN]."""
    if A_KMAJOR:
        a = tlx.local_alloc((BM, BK), tl.float16, 1)
    else:
        a = tlx.local_alloc((BK, BM), tl.float16, 1)
    if B_KMAJOR:
        b = tlx.local_alloc((BN, BK), tl.float16, 1)
    else:
        b = tlx.local_alloc((BK, BN), tl.float16, 1)
    c = tlx.local_alloc((BM, BN), tl.float16, 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], (BM * BK + BK * BN) * 2)
    tlx.async_descriptor_load(a_desc, a[0], [0, 0], bar[0])
    tlx.async_descriptor_load(b_desc, b[0], [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    if A_KMAJOR:
        a_view = a[0]
    else:
        a_view = tlx.local_trans(a[0])
    if B_KMAJOR:
        b_view = tlx.local_trans(b[0])
    else:
        b_view = b[0]
    acc = tlx.async_dot(a_view, b_view, tl.zeros((BM, BN), dtype=tl.float32))
    acc = tlx.async_dot_wait(0, acc)
    tlx.local_store(c[0], acc.to(tl.float16))
    tlx.fence("async_shared")
    tlx.async_descriptor_store(c_desc, c[0], [0, 0])
    tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def attention_tile(q_desc, k_desc, v_desc, o_desc, scale, N_CTX, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   HEAD_DIM: tl.constexpr, P_IN_SHARED: tl.constexpr):
    """softmax(Q K^T * scale) V for one [BLOCK_M, HEAD_DIM] block of queries with whole
    [rows, HEAD_DIM] boxes (HEAD_DIM = 128: 256-byte rows): S = Q @ local_trans(K) (K-major B),
    O += P @ V (V N-major) with P from registers or from a shared buffer (local_store)."""
    start = tl.program_id(0) * BLOCK_M
    q = tlx.local_alloc((BLOCK_M, HEAD_DIM), tl.float16, 1)
    k = tlx.local_alloc((BLOCK_N, HEAD_DIM), tl.float16, 1)
    v = tlx.local_alloc((BLOCK_N, HEAD_DIM), tl.float16, 1)
    p_smem = tlx.local_alloc((BLOCK_M, BLOCK_N), tl.float16, 1)
    o_smem = tlx.local_alloc((BLOCK_M, HEAD_DIM), tl.float16, 1)
    q_bar = tlx.alloc_barriers(1, arrive_count=1)
    k_bar = tlx.alloc_barriers(1, arrive_count=1)
    v_bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(q_bar[0], BLOCK_M * HEAD_DIM * 2)
    tlx.async_descriptor_load(q_desc, q[0], [start, 0], q_bar[0])
    tlx.barrier_wait(q_bar[0], 0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    cols = tl.arange(0, BLOCK_N)
    phase = 0
    for n in range(0, N_CTX, BLOCK_N):
        tlx.barrier_expect_bytes(k_bar[0], BLOCK_N * HEAD_DIM * 2)
        tlx.async_descriptor_load(k_desc, k[0], [n, 0], k_bar[0])
        tlx.barrier_expect_bytes(v_bar[0], BLOCK_N * HEAD_DIM * 2)
        tlx.async_descriptor_load(v_desc, v[0], [n, 0], v_bar[0])
        tlx.barrier_wait(k_bar[0], phase)
        s = tlx.async_dot(q[0], tlx.local_trans(k[0]), tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32))
        s = tlx.async_dot_wait(0, s)
        s = tl.where((n + cols)[None, :] < N_CTX, s * scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        m_i = m_new
        tlx.barrier_wait(v_bar[0], phase)
        if P_IN_SHARED:
            tlx.local_store(p_smem[0], p.to(tl.float16))
            tlx.fence("async_shared")
            tlx.named_barrier_wait(9, 256)      # every warp's rows stored before the warpgroups read them
            acc = tlx.async_dot(p_smem[0], v[0], acc)
        else:
            acc = tlx.async_dot(p.to(tl.float16), v[0], acc)
        acc = tlx.async_dot_wait(0, acc)
        phase ^= 1
    tlx.local_store(o_smem[0], (acc / l_i[:, None]).to(tl.float16))
    tlx.fence("async_shared")
    tlx.async_descriptor_store(o_desc, o_smem[0], [start, 0])
    tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def tcgen05_wide(a_desc, b_desc, c_ptr: tl.pointer_type(tl.float32), B_KMAJOR: tl.constexpr):
    """C[128, 128] = A @ B on Blackwell with [128, 128] bf16 boxes (256-byte rows): A K-major,
    B stored [K, N] (N-major) or [N, K] (K-major, local_trans), accumulated in tensor memory."""
    a = tlx.local_alloc((128, 128), tl.bfloat16, 1)
    b = tlx.local_alloc((128, 128), tl.bfloat16, 1)
    acc = tlx.local_alloc((128, 128), tl.float32, 1, storage=tlx.storage_kind.tmem)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], 2 * 128 * 128 * 2)
    tlx.async_descriptor_load(a_desc, a[0], [0, 0], bar[0])
    tlx.async_descriptor_load(b_desc, b[0], [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    if B_KMAJOR:
        tlx.async_dot(a[0], tlx.local_trans(b[0]), acc[0], use_acc=False)
    else:
        tlx.async_dot(a[0], b[0], acc[0], use_acc=False)
    rows = tl.arange(0, 128)
    tl.store(c_ptr + rows[:, None] * 128 + rows[None, :], tlx.local_load(acc[0]))


@tlxc.kernel
def wide_box_3d_buffer(x_desc, out_ptr):
    """A wide box into a 3-D buffer, which cannot be stored as column blocks: a LayoutError."""
    x = tlx.local_alloc((1, 64, 256), tl.float16, 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], 64 * 256 * 2)
    tlx.async_descriptor_load(x_desc, x[0], [0, 0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)


@tlxc.kernel
def row_halves(x_desc, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """A [BM, BN] block-stacked buffer filled by two wide [BM/2, BN] boxes into its row halves
    (local_slice), read back with local_load and stored with a mask."""
    x = tlx.local_alloc((BM, BN), tl.float16, 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], BM * BN * 2)
    for h in tl.static_range(2):
        half = tlx.local_slice(x[0], [h * (BM // 2), 0], [BM // 2, BN])
        tlx.async_descriptor_load(x_desc, half, [tl.program_id(0) * BM + h * (BM // 2), 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    rows = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    tl.store(out_ptr + rows * N + cols, tlx.local_load(x[0]), mask=(rows < M) & (cols < N))


@tlxc.kernel
def desc_methods_add_one(x_desc, y_desc, BM: tl.constexpr):
    """y = x + 1 through desc.load / desc.store of [BM, 256] f16 boxes (512-byte rows): the
    compiler's staging buffers are block-stacked and each box is four copies."""
    row = tl.program_id(0) * BM
    x = x_desc.load([row, 0])
    y_desc.store([row, 0], x + 1.0)
