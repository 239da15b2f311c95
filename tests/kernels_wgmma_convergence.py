"""Warp-specialized kernels whose wgmmas ptxas 13.x serialized (note C7519, "program
dependence on compiler-inserted WG.AR in divergent path") before the codegen fixes of
tests/test_wgmma_convergence.py: a persistent tile loop around a K loop, and an
attention step whose second MMA reads its A operand (the probabilities) from registers."""
import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def persistent_tiles(a_desc, b_desc, c_desc, M, N, K, PROGRAMS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                     BK: tl.constexpr, STAGES: tl.constexpr):
    """C = A @ B by PROGRAMS programs, each walking the output tiles tile = pid, pid + PROGRAMS, ...
    of 2*BM x BN (column-major tile order). A loader task fills a ring of STAGES slots, each
    two A halves of BM rows and one B block; two consumer warpgroups (replicas) run the K
    loop of each tile, replica r on rows [r*BM, (r+1)*BM) of it, and store their half with a
    descriptor store."""
    a_ring = tlx.local_alloc((BM, BK), tl.float16, 2 * STAGES)       # slot + r*STAGES: replica r's half
    b_ring = tlx.local_alloc((BK, BN), tl.float16, STAGES)
    a_loaded = tlx.alloc_barriers(num_barriers=2 * STAGES, arrive_count=1)
    a_freed = tlx.alloc_barriers(num_barriers=2 * STAGES, arrive_count=1)
    b_loaded = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    b_freed = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tiles_m = tl.cdiv(M, 2 * BM)
            n_tiles = tiles_m * tl.cdiv(N, BN)
            used = 0
            for tile in range(tl.program_id(0), n_tiles, PROGRAMS):
                row = (tile % tiles_m) * 2 * BM
                col = (tile // tiles_m) * BN
                for k in range(0, tl.cdiv(K, BK)):
                    slot = used % STAGES
                    phase = ((used // STAGES) & 1) ^ 1
                    tlx.barrier_wait(b_freed[slot], phase)
                    tlx.barrier_expect_bytes(b_loaded[slot], BK * BN * 2)
                    tlx.async_descriptor_load(b_desc, b_ring[slot], [k * BK, col], b_loaded[slot])
                    for r in tl.static_range(2):
                        tlx.barrier_wait(a_freed[slot + r * STAGES], phase)
                        tlx.barrier_expect_bytes(a_loaded[slot + r * STAGES], BM * BK * 2)
                        tlx.async_descriptor_load(a_desc, a_ring[slot + r * STAGES], [row + r * BM, k * BK],
                                                  a_loaded[slot + r * STAGES])
                    used += 1
        with tlx.async_task(num_warps=4, replicate=2, registers=232):
            r = tlx.async_task_replica_id()
            tiles_m = tl.cdiv(M, 2 * BM)
            n_tiles = tiles_m * tl.cdiv(N, BN)
            used = 0
            for tile in range(tl.program_id(0), n_tiles, PROGRAMS):
                row = (tile % tiles_m) * 2 * BM + r * BM
                col = (tile // tiles_m) * BN
                slot = used % STAGES
                tlx.barrier_wait(a_loaded[slot + r * STAGES], (used // STAGES) & 1)
                tlx.barrier_wait(b_loaded[slot], (used // STAGES) & 1)
                acc = tlx.async_dot(a_ring[slot + r * STAGES], b_ring[slot])
                previous = slot
                used += 1
                for k in range(1, tl.cdiv(K, BK)):          # one MMA left in flight per step
                    slot = used % STAGES
                    phase = (used // STAGES) & 1
                    tlx.barrier_wait(a_loaded[slot + r * STAGES], phase)
                    tlx.barrier_wait(b_loaded[slot], phase)
                    acc = tlx.async_dot(a_ring[slot + r * STAGES], b_ring[slot], acc)
                    acc = tlx.async_dot_wait(1, acc)
                    tlx.barrier_arrive(a_freed[previous + r * STAGES])
                    tlx.barrier_arrive(b_freed[previous])
                    previous = slot
                    used += 1
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(a_freed[previous + r * STAGES])
                tlx.barrier_arrive(b_freed[previous])
                c_desc.store([row, col], acc.to(tl.float16))


@tlxc.kernel
def scores_then_values(q_desc, k_desc, v_desc, o_desc, n_keys, scale, BM: tl.constexpr, BN: tl.constexpr,
                       D: tl.constexpr):
    """O = softmax(scale * Q K^T) V for one block of 2*BM queries: Q and O are [2*BM, D], K and
    V are [n_keys, D] (n_keys a multiple of BN). A loader task; two consumer warpgroups
    (replicas), replica r on query rows [r*BM, (r+1)*BM), each running the online softmax over
    key blocks of BN with the barrier phase flipped through the loop. The second MMA of each
    step reads the probabilities P from registers."""
    q_bufs = tlx.local_alloc((BM, D), tl.float16, 2)
    k_bufs = tlx.local_alloc((BN, D), tl.float16, 2)
    v_bufs = tlx.local_alloc((BN, D), tl.float16, 2)
    q_ready = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    k_ready = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    k_free = tlx.alloc_barriers(num_barriers=2, arrive_count=2)
    v_ready = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    v_free = tlx.alloc_barriers(num_barriers=2, arrive_count=2)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for r in tl.static_range(2):
                tlx.barrier_expect_bytes(q_ready[r], BM * D * 2)
                tlx.async_descriptor_load(q_desc, q_bufs[r], [r * BM, 0], q_ready[r])
            for j in range(0, n_keys // BN):
                b = j % 2
                phase = ((j // 2) & 1) ^ 1
                tlx.barrier_wait(k_free[b], phase)
                tlx.barrier_expect_bytes(k_ready[b], BN * D * 2)
                tlx.async_descriptor_load(k_desc, k_bufs[b], [j * BN, 0], k_ready[b])
                tlx.barrier_wait(v_free[b], phase)
                tlx.barrier_expect_bytes(v_ready[b], BN * D * 2)
                tlx.async_descriptor_load(v_desc, v_bufs[b], [j * BN, 0], v_ready[b])
        with tlx.async_task(num_warps=4, replicate=2, registers=232):
            r = tlx.async_task_replica_id()
            tlx.barrier_wait(q_ready[r], 0)
            row_max = tl.zeros((BM,), tl.float32) - float("inf")
            row_sum = tl.zeros((BM,), tl.float32)
            acc = tl.zeros((BM, D), tl.float32)
            log2_scale = scale * 1.4426950408889634
            phase = 1
            step = 0
            for _ in range(0, n_keys, BN):
                b = step % 2
                phase = phase ^ (b == 0)
                tlx.barrier_wait(k_ready[b], phase)
                s = tlx.async_dot(q_bufs[r], tlx.local_trans(k_bufs[b]))
                s = tlx.async_dot_wait(0, s)
                tlx.barrier_arrive(k_free[b])
                new_max = tl.maximum(row_max, tl.max(s, 1) * log2_scale)
                p = tl.math.exp2(s * log2_scale - new_max[:, None])
                shrink = tl.math.exp2(row_max - new_max)
                block_sum = tl.sum(p, 1)
                acc = acc * shrink[:, None]
                p = p.to(tl.float16)
                tlx.barrier_wait(v_ready[b], phase)
                acc = tlx.async_dot(p, v_bufs[b], acc)
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(v_free[b])
                row_sum = row_sum * shrink + block_sum
                row_max = new_max
                step += 1
            o_desc.store([r * BM, 0], (acc / row_sum[:, None]).to(tl.float16))
