"""Kernels for tests/test_dot_operands.py (passes/dot_operands.py): the operand and accumulator
patterns of an attention backward, written small."""
import tlxc
import tlxc.language as tl


@tlxc.kernel
def kv_grad(k_ptr, v_ptr, q_ptr, g_ptr, dk_ptr, dv_ptr, n_rows,
            BN: tl.constexpr, BM1: tl.constexpr, BM2: tl.constexpr, D: tl.constexpr):
    """For one BN-row block of k and v (kept in shared memory across both loops), accumulate
    over the rows of q and g, first BM1 then BM2 at a time:
        s = k @ q^T, p = exp2(s), dv += p @ g, t = v @ g^T, dk += (p * t) @ q
    q^T is loaded through transposed pointers (contiguous along dim 0) and used again as
    tl.trans(qT); g is used plainly and as tl.trans(g).  Rows of q/g: n_rows, a multiple of
    BM1 and of BM2."""
    pid = tl.program_id(0)
    rows = pid * BN + tl.arange(0, BN)
    cols = tl.arange(0, D)
    k = tl.load(k_ptr + rows[:, None] * D + cols[None, :])
    v = tl.load(v_ptr + rows[:, None] * D + cols[None, :])
    dk = tl.zeros((BN, D), dtype=tl.float32)
    dv = tl.zeros((BN, D), dtype=tl.float32)
    half = n_rows // 2
    m1 = tl.arange(0, BM1)
    for start in range(0, half, BM1):
        qT = tl.load(q_ptr + (start + m1)[None, :] * D + cols[:, None])
        g = tl.load(g_ptr + (start + m1)[:, None] * D + cols[None, :])
        p = tl.math.exp2(tl.dot(k, qT) * 0.05)
        dv += tl.dot(p.to(tl.float16), g)
        t = tl.dot(v, tl.trans(g))
        dk += tl.dot((p * t).to(tl.float16), tl.trans(qT))
    m2 = tl.arange(0, BM2)
    for start in range(half, n_rows, BM2):
        qT = tl.load(q_ptr + (start + m2)[None, :] * D + cols[:, None])
        g = tl.load(g_ptr + (start + m2)[:, None] * D + cols[None, :])
        p = tl.math.exp2(tl.dot(k, qT) * 0.05)
        dv += tl.dot(p.to(tl.float16), g)
        t = tl.dot(v, tl.trans(g))
        dk += tl.dot((p * t).to(tl.float16), tl.trans(qT))
    tl.store(dk_ptr + rows[:, None] * D + cols[None, :], dk)
    tl.store(dv_ptr + rows[:, None] * D + cols[None, :], dv)


@tlxc.kernel
def add_after_dot(a_ptr, b_ptr, c_ptr, x_ptr, out_ptr, N: tl.constexpr, BAD: tl.constexpr = 0):
    """out = x + a @ b + c @ b; BAD = 1: the dot result is used twice (x + d + d), nothing folds."""
    i = tl.arange(0, N)
    a = tl.load(a_ptr + i[:, None] * N + i[None, :])
    b = tl.load(b_ptr + i[:, None] * N + i[None, :])
    c = tl.load(c_ptr + i[:, None] * N + i[None, :])
    x = tl.load(x_ptr + i[:, None] * N + i[None, :])
    d = tl.dot(a, b)
    if BAD:
        y = x + d + d
    else:
        y = tl.dot(c, b) + (x + d)
    tl.store(out_ptr + i[:, None] * N + i[None, :], y)


@tlxc.kernel
def row_bias_loop(k_ptr, q_ptr, m_ptr, r_ptr, out_ptr, n_rows, BN: tl.constexpr, BM: tl.constexpr,
                  D: tl.constexpr):
    """out = sum over column blocks of exp2(k @ q^T - m[cols] + r[rows]): r is loaded once before
    the loop, m once per iteration; both are read in the MMA accumulator's row/column layout."""
    rows = tl.arange(0, BN)
    cols = tl.arange(0, D)
    k = tl.load(k_ptr + rows[:, None] * D + cols[None, :])
    r = tl.load(r_ptr + rows)
    acc = tl.zeros((BN, BM), dtype=tl.float32)
    for start in range(0, n_rows, BM):
        qT = tl.load(q_ptr + (start + tl.arange(0, BM))[None, :] * D + cols[:, None])
        m = tl.load(m_ptr + start + tl.arange(0, BM))
        acc += tl.math.exp2(tl.dot(k, qT) - m[None, :] + r[:, None])
    tl.store(out_ptr + rows[:, None] * BM + tl.arange(0, BM)[None, :], acc)
