"""Cluster kernels (ctas_per_cga) for the interpreter, compile and GPU tests."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def cluster_ids(out_ptr):
    """out[pid] = 100 * rank + cluster size."""
    pid = tl.program_id(0)
    tl.store(out_ptr + pid, tlx.cluster_cta_rank() * 100 + tlx.cluster_size_1d())


@tlxc.kernel
def multicast_exchange(in_desc, out_ptr, BM: tl.constexpr, BN: tl.constexpr):
    """Pairs of CTAs: CTA r of the pair loads rows [r * BM, (r + 1) * BM) of its pair's
    2 * BM rows and multicasts them into slot r of both CTAs; each CTA then writes both
    slots to its own 2 * BM rows of out (so out = the input, twice per pair), and
    signals the peer's 'done' barrier before it leaves."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    buf = tlx.local_alloc((BM, BN), tl.float32, 2)
    full = tlx.alloc_barriers(1, arrive_count=1)
    done = tlx.alloc_barriers(1, arrive_count=1)
    pair = pid // 2
    tlx.barrier_expect_bytes(full[0], 2 * BM * BN * 4)
    tlx.async_descriptor_load(in_desc, buf[rank], [pair * 2 * BM + rank * BM, 0], full[0],
                              multicast_targets=[0, 1])
    tlx.barrier_wait(full[0], 0)
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    for s in tl.static_range(2):
        x = tlx.local_load(buf[s])
        tl.store(out_ptr + (pid * 2 * BM + s * BM + rows) * BN + cols, x)
    tlx.barrier_arrive(done[0], 1, remote_cta_rank=rank ^ 1)
    tlx.barrier_wait(done[0], 0)


@tlxc.kernel
def multicast_without_expect(in_desc, out_ptr, BM: tl.constexpr, BN: tl.constexpr):
    """Broken: each CTA expects only its own box, but the peer's multicast lands too."""
    rank = tlx.cluster_cta_rank()
    buf = tlx.local_alloc((BM, BN), tl.float32, 2)
    full = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(full[0], BM * BN * 4)
    tlx.async_descriptor_load(in_desc, buf[rank], [rank * BM, 0], full[0], multicast_targets=[0, 1])
    tlx.barrier_wait(full[0], 0)
    x = tlx.local_load(buf[rank ^ 1])
    rows = tl.arange(0, BM)[:, None]
    tl.store(out_ptr + rows * BN + tl.arange(0, BN)[None, :], x)


@tlxc.kernel
def remote_wait(out_ptr):
    """Broken: waits on a peer's barrier."""
    done = tlx.alloc_barriers(1, arrive_count=1)
    peer = tlx.remote_view(done[0], tlx.cluster_cta_rank() ^ 1)
    tlx.barrier_wait(peer, 0)
