"""The single-row product (M = 1, decode): ``c[0, :] = a[0, :] @ b`` on CUDA cores.

A decode step reads the whole weight ``b`` (N x K elements) once for one row of ``a``: the
time is the weight's bytes over the memory bandwidth, and what costs is everything that is
not streaming them -- the MMA path's shared-memory ring, a split-K partial sum with its
arrival counter and second read.  Here each program owns ``BLOCK_N`` output columns and the
whole of K: it reads its ``[BLOCK_N, BLOCK_K]`` slice of ``b = w.t()`` (K contiguous: the
``nn.Linear`` weight) per step straight into registers with 16-byte loads, multiplies it by
the matching slice of ``a`` in float32 and accumulates elementwise; one ``tl.sum`` over K at
the end.  ``tl.range(num_stages=STAGES)`` asks the compiler to load the next steps ahead
into registers (it does when they fit its per-thread budget: ``BLOCK_N * BLOCK_K`` of 8 warps
at 512 per... see docs/ops.md).  No shared memory but the final sum's, no split: many small
programs (``N / BLOCK_N``) keep every SM busy.

``a`` is loaded through a ``[BLOCK_N, BLOCK_K]`` pointer tile whose rows are all the same
row of ``a``: the load then takes ``b``'s layout (each thread reads the K slice it needs,
once, the rows fold) instead of a one-dimensional layout converted through shared memory
in every step.  The K loop runs over whole ``BLOCK_K`` steps unmasked and finishes with one
masked step for the tail; columns past N wrap (``% N``) for the loads and are masked at the
store.  The epilogue (``epilogue.store_tile_pointers``) sees a ``1 x BLOCK_N`` tile.

``ALIGNS`` are the host's divisibility facts of ``(stride_bn, K)`` (a power of two, 1: none)
that the launch's "divisible by 16" misses, as in ``gemm_dot_kernel``: a weight of K = 776
bf16 has 16-byte aligned rows, and the tail's mask is constant over 8 elements.
"""
from ... import language as tl
from ...runtime.jit import jit
from .aligns import aligned
from .epilogue import store_tile_pointers


@jit
def gemv_kernel(a_ptr, b_ptr, c_ptr, N, K, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                scale0_ptr, scale1_ptr, bias_ptr, res_ptr, stride_r0, stride_r1,
                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr, UNROLL: tl.constexpr,
                SCALE0: tl.constexpr, SCALE1: tl.constexpr, BIAS_DIM: tl.constexpr, ACTIVATION: tl.constexpr,
                HAS_RESIDUAL: tl.constexpr, ALIGNS: tl.constexpr = (1, 1)):
    stride_bn = aligned(stride_bn, ALIGNS[0])
    K = aligned(K, ALIGNS[1])
    pid = tl.program_id(0)
    cols = (pid * BLOCK_N + tl.arange(0, BLOCK_N)) % N          # wrapped: loads stay in bounds
    ks = tl.arange(0, BLOCK_K)
    whole = K // BLOCK_K
    left = K - whole * BLOCK_K
    b_tile = b_ptr + cols[:, None] * stride_bn + ks[None, :] * stride_bk
    a_tile = a_ptr + (cols * 0)[:, None] + ks[None, :] * stride_ak           # b's shape: b's layout
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for _ in tl.range(0, whole, num_stages=STAGES, loop_unroll_factor=UNROLL):
        b = tl.load(b_tile)
        x = tl.load(a_tile)
        acc += b.to(tl.float32) * x.to(tl.float32)
        b_tile += BLOCK_K * stride_bk
        a_tile += BLOCK_K * stride_ak
    if left > 0:
        in_k = (ks[None, :] < left) & (cols[:, None] >= 0)
        b = tl.load(b_tile, mask=in_k, other=0.0)
        x = tl.load(a_tile, mask=in_k, other=0.0)
        acc += b.to(tl.float32) * x.to(tl.float32)
    y = tl.sum(acc, axis=1)
    store_tile_pointers(y[None, :], 0, pid * BLOCK_N, 1, N, c_ptr, stride_cm, stride_cn, scale0_ptr, scale1_ptr,
                        bias_ptr, res_ptr, stride_r0, stride_r1, 1, BLOCK_N, SCALE0, SCALE1, BIAS_DIM, ACTIVATION,
                        HAS_RESIDUAL, 1)
