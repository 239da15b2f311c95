"""Kernels for drain-dot-wait (passes/dot_wait_drain.py) that the other kernel files do not
have: a K loop of the pipelined shape with an MMA of another accumulator still in flight
when it starts, and a K loop run once per tile of a persistent outer loop."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def mma_in_flight_before_loop(a_ptr, b_ptr, c_ptr, d_ptr, n_k, BM: tl.constexpr, BN: tl.constexpr,
                              BK: tl.constexpr):
    """D = A0 @ B0 is issued before the loop and retired by the wait after it; C = sum of the
    n_k tiles' products.  With n_k = 0 only the wait after the loop retires D's MMA, so the
    loop must keep that wait."""
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_s = tlx.local_alloc((BM, BK), tl.float16, 3)          # slot 2: D's operands; 0, 1: the loop's
    b_s = tlx.local_alloc((BK, BN), tl.float16, 3)
    tlx.local_store(tlx.local_view(a_s, 2), tl.load(a_ptr + rm[:, None] * BK + rk[None, :]))
    tlx.local_store(tlx.local_view(b_s, 2), tl.load(b_ptr + rk[:, None] * BN + rn[None, :]))
    tlx.fence_async_shared()
    d = tlx.async_dot(tlx.local_view(a_s, 2), tlx.local_view(b_s, 2), tl.zeros((BM, BN), tl.float32))
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(n_k):
        slot = k % 2
        tlx.local_store(tlx.local_view(a_s, slot),
                        tl.load(a_ptr + (k + 1) * BM * BK + rm[:, None] * BK + rk[None, :]))
        tlx.local_store(tlx.local_view(b_s, slot),
                        tl.load(b_ptr + (k + 1) * BK * BN + rk[:, None] * BN + rn[None, :]))
        tlx.fence_async_shared()
        acc = tlx.async_dot(tlx.local_view(a_s, slot), tlx.local_view(b_s, slot), acc)
        acc = tlx.async_dot_wait(1, acc)
    acc = tlx.async_dot_wait(0, acc)
    d = tlx.async_dot_wait(0, d)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)
    tl.store(d_ptr + rm[:, None] * BN + rn[None, :], d)


@tlxc.kernel
def persistent_k_loops(a_ptr, b_ptr, c_ptr, n_tiles, n_k, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """For each of n_tiles output tiles t: C[t] = sum over k of A[t, k] @ B[k], a K loop of
    the pipelined shape (one MMA in flight, drained after the loop) inside an outer loop."""
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_s = tlx.local_alloc((BM, BK), tl.float16, 2)
    b_s = tlx.local_alloc((BK, BN), tl.float16, 2)
    for t in range(n_tiles):
        acc = tl.zeros((BM, BN), tl.float32)
        for k in range(n_k):
            slot = k % 2
            tlx.local_store(tlx.local_view(a_s, slot),
                            tl.load(a_ptr + (t * n_k + k) * BM * BK + rm[:, None] * BK + rk[None, :]))
            tlx.local_store(tlx.local_view(b_s, slot), tl.load(b_ptr + k * BK * BN + rk[:, None] * BN + rn[None, :]))
            tlx.fence_async_shared()
            acc = tlx.async_dot(tlx.local_view(a_s, slot), tlx.local_view(b_s, slot), acc)
            acc = tlx.async_dot_wait(1, acc)
        acc = tlx.async_dot_wait(0, acc)
        tl.store(c_ptr + t * BM * BN + rm[:, None] * BN + rn[None, :], acc)
