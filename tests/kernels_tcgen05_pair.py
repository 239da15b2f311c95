"""2-CTA (paired) tcgen05 MMA kernels (tests/test_tcgen05_pair.py).

``pair_gemm``: clusters of two CTAs; CTA r of a pair stores its 128 rows of A and
its half of B's columns (r * N/2 ..) in shared memory, tells the pair's even CTA
so through a remote arrive on that CTA's ``ready`` barrier (count 2), and the
even CTA, once both arrived, issues one ``async_dot(..., two_ctas=True)``: the
pair's C rows = A rows x the whole of B, each CTA's rows landing in its own
tensor memory.  The MMA's completion arrives on ``done`` in both CTAs, which
then read their accumulator and store it.  ``BUG`` selects broken variants.
"""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def pair_gemm(a_ptr: tl.pointer_type(tl.float16), b_ptr: tl.pointer_type(tl.float16),
              c_ptr: tl.pointer_type(tl.float32), M: tl.int32,
              K: tl.constexpr, N: tl.constexpr, BUG: tl.constexpr = ""):
    rank = tlx.cluster_cta_rank()
    a = tlx.local_alloc((128, K), tl.float16, 1)
    b = tlx.local_alloc((K, N // 2), tl.float16, 1)
    acc = tlx.local_alloc((128, N), tl.float32, 1, storage=tlx.storage_kind.tmem)
    ready = tlx.alloc_barriers(1, arrive_count=2)   # both CTAs' operands are in place
    done = tlx.alloc_barriers(1, arrive_count=1)    # the pair's MMA completed
    rows = tl.program_id(0) * 128 + tl.arange(0, 128)
    ks = tl.arange(0, K)
    tlx.local_store(a[0], tl.load(a_ptr + rows[:, None] * K + ks[None, :], mask=rows[:, None] < M, other=0.0))
    cols = rank * (N // 2) + tl.arange(0, N // 2)
    tlx.local_store(b[0], tl.load(b_ptr + ks[:, None] * N + cols[None, :]))
    tlx.fence_async_shared()                        # generic-proxy writes before the MMA reads them
    if BUG != "leader_does_not_wait":
        tlx.barrier_arrive(ready[0], 1, remote_cta_rank=rank & ~1)   # the pair's even CTA
        tlx.barrier_wait(ready[0], 0, pred=rank % 2 == 0)
    tlx.async_dot(a[0], b[0], acc[0], use_acc=False, mBarriers=[done[0]], two_ctas=True)  # the pair's MMA
    tlx.barrier_wait(done[0], 0)
    out = tlx.local_load(acc[0])
    tl.store(c_ptr + rows[:, None] * N + tl.arange(0, N)[None, :], out, mask=rows[:, None] < M)


@tlxc.kernel
def pair_commit(a_ptr: tl.pointer_type(tl.float16), b_ptr: tl.pointer_type(tl.float16),
                c_ptr: tl.pointer_type(tl.float32), M: tl.int32,
                K: tl.constexpr, N: tl.constexpr, MIX: tl.constexpr = False):
    """As pair_gemm, but two MMAs over K halves observed through one tcgen05_commit(two_ctas=True);
    ``MIX`` makes the commit a 1-CTA one (refused: one .cta_group per kernel)."""
    rank = tlx.cluster_cta_rank()
    a = tlx.local_alloc((128, K // 2), tl.float16, 2)
    b = tlx.local_alloc((K // 2, N // 2), tl.float16, 2)
    acc = tlx.local_alloc((128, N), tl.float32, 1, storage=tlx.storage_kind.tmem)
    ready = tlx.alloc_barriers(1, arrive_count=2)
    done = tlx.alloc_barriers(1, arrive_count=1)
    rows = tl.program_id(0) * 128 + tl.arange(0, 128)
    cols = rank * (N // 2) + tl.arange(0, N // 2)
    for h in tl.static_range(2):
        ks = h * (K // 2) + tl.arange(0, K // 2)
        tlx.local_store(a[h], tl.load(a_ptr + rows[:, None] * K + ks[None, :], mask=rows[:, None] < M, other=0.0))
        tlx.local_store(b[h], tl.load(b_ptr + ks[:, None] * N + cols[None, :]))
    tlx.fence_async_shared()
    tlx.barrier_arrive(ready[0], 1, remote_cta_rank=rank & ~1)
    tlx.barrier_wait(ready[0], 0, pred=rank % 2 == 0)
    for h in tl.static_range(2):
        tlx.async_dot(a[h], b[h], acc[0], use_acc=h > 0, two_ctas=True, force_async=True)
    tlx.tcgen05_commit(done[0], two_ctas=not MIX)
    tlx.barrier_wait(done[0], 0)
    out = tlx.local_load(acc[0])
    tl.store(c_ptr + rows[:, None] * N + tl.arange(0, N)[None, :], out, mask=rows[:, None] < M)
