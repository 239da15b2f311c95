"""Kernels for the interpreter tests (in a real file: the frontend reads source)."""
import tlxc
import tlxc.language as tl


@tlxc.kernel
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@tlxc.kernel
def copy_unmasked_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x)


@tlxc.kernel
def store_unmasked_kernel(out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 1.0)


@tlxc.kernel
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * in_stride + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride + offs, num / den, mask=mask)


@tlxc.kernel
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, PRECISION: tl.constexpr = "ieee"):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@tlxc.kernel
def int8_dot_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    rows = tl.arange(0, N)
    a = tl.load(a_ptr + rows[:, None] * N + rows[None, :])
    b = tl.load(b_ptr + rows[:, None] * N + rows[None, :])
    tl.store(c_ptr + rows[:, None] * N + rows[None, :], tl.dot(a, b))


@tlxc.kernel
def reduce_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, KIND: tl.constexpr,
                  AXIS: tl.constexpr, KEEP: tl.constexpr):
    offs_m = tl.arange(0, M)
    offs_n = tl.arange(0, N)
    x = tl.load(x_ptr + offs_m[:, None] * N + offs_n[None, :])
    if KIND == "sum":
        r = tl.sum(x, axis=AXIS, keep_dims=KEEP)
    elif KIND == "max":
        r = tl.max(x, axis=AXIS, keep_dims=KEEP)
    elif KIND == "min":
        r = tl.min(x, axis=AXIS, keep_dims=KEEP)
    elif KIND == "argmax":
        r = tl.argmax(x, axis=AXIS, keep_dims=KEEP)
    else:
        r = tl.argmin(x, axis=AXIS, keep_dims=KEEP)
    if AXIS is None:
        if KEEP:
            tl.store(out_ptr + tl.arange(0, 1)[:, None] + tl.arange(0, 1)[None, :], r)
        else:
            tl.store(out_ptr, r)
    elif AXIS == 0:
        if KEEP:
            tl.store(out_ptr + offs_n[None, :], r)
        else:
            tl.store(out_ptr + offs_n, r)
    else:
        if KEEP:
            tl.store(out_ptr + offs_m[:, None], r)
        else:
            tl.store(out_ptr + offs_m, r)


@tlxc.kernel
def cast_kernel(x_ptr, out_ptr, n, DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x.to(DTYPE), mask=mask)


@tlxc.kernel
def bitcast_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x.to(tl.int32, bitcast=True))


@tlxc.kernel
def bf16_arith_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, x * y + x)


@tlxc.kernel
def divmod_kernel(a_ptr, b_ptr, q_ptr, r_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=1)
    b = tl.load(b_ptr + offs, mask=mask, other=1)
    tl.store(q_ptr + offs, a // b, mask=mask)
    tl.store(r_ptr + offs, a % b, mask=mask)


@tlxc.kernel
def shift_kernel(a_ptr, s_ptr, left_ptr, right_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs)
    s = tl.load(s_ptr + offs)
    tl.store(left_ptr + offs, a << s)
    tl.store(right_ptr + offs, a >> s)


@tlxc.kernel
def collatz_kernel(x_ptr, steps_ptr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid)
    steps = 0
    while x != 1:
        if x % 2 == 0:
            x = x // 2
        else:
            x = 3 * x + 1
        steps += 1
    tl.store(steps_ptr + pid, steps)


@tlxc.kernel
def early_return_kernel(out_ptr, limit, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid >= limit:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, offs)


@tlxc.kernel
def histogram_kernel(x_ptr, hist_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    bins = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.atomic_add(hist_ptr + bins, 1, mask=mask)


@tlxc.kernel
def counter_kernel(counter_ptr, old_ptr, total_ptr, value):
    pid = tl.program_id(0)
    old = tl.atomic_add(counter_ptr, 1)
    tl.store(old_ptr + pid, old)
    tl.atomic_add(total_ptr, value)


@tlxc.kernel
def atomic_max_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.atomic_max(out_ptr + offs % 4, x)


@tlxc.kernel
def print_kernel(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.device_print("x", x)
    tl.device_print("sum", tl.sum(x, axis=0))


@tlxc.kernel
def assert_kernel(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.device_assert(x >= 0, "x must be non-negative")


@tlxc.kernel
def math_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.exp(x) + tl.log(tl.abs(x) + 1.0) + tl.sqrt(tl.abs(x)) + tl.erf(x) + tl.sigmoid(x)
    tl.store(out_ptr + offs, y)


@tlxc.kernel
def exp2_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.exp2(tl.load(x_ptr + offs)))


@tlxc.kernel
def split_join_kernel(x_ptr, y_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr):
    """y: the halves of each row (tl.split after reshape/permute), scaled by 2 and 3;
    z: the halves joined back (tl.join) -- the identity."""
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + rows * N + cols)
    a, b = tl.split(tl.permute(tl.reshape(x, (M, 2, N // 2)), (0, 2, 1)))
    half = tl.arange(0, N // 2)[None, :]
    tl.store(y_ptr + rows * N + half, a * 2.0)
    tl.store(y_ptr + rows * N + N // 2 + half, b * 3.0)
    back = tl.reshape(tl.permute(tl.join(a, b), (0, 2, 1)), (M, N))
    tl.store(z_ptr + rows * N + cols, back)


@tlxc.kernel
def scalar_args_kernel(out_ptr, a, b, flag, scale):
    if flag:
        tl.store(out_ptr, a * b * scale)
    else:
        tl.store(out_ptr, a + b + scale)
