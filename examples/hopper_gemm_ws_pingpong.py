"""Warp-specialized persistent GEMM for Hopper, ping-pong: the two wgmma
consumer warp groups take alternate tiles and take turns on the tensor cores.

``C = A @ B`` for bfloat16 (or float16) A (M x K) and B (K x N), float32
accumulation, C in the inputs' dtype; the structure of TLX's
``hopper-persistent-gemm-ws-pingpong.py`` (its named-barrier variant).  Where ``hopper_gemm_ws.py`` splits every tile's
rows between the two consumers (cooperative), here each consumer owns whole
tiles:

* persistent: ``NUM_SMS`` programs walk the output tiles in grouped order,
  program ``p`` taking tiles ``p, p + NUM_SMS, ...``; its ``i``-th tile goes
  to consumer ``i % 2``;
* the default task (4 warps) is the TMA producer: it streams the ``BM x BK``
  A tile and the ``BK x BN`` B tile (as ``BK x 64`` boxes) of every K step of
  every tile, in order, through one ``full``/``empty`` ring.  Each slot is
  read by exactly one consumer, so ``empty`` counts one arrival;
* two consumer warp groups (``replicate=2``, 232 registers each) compute the
  full ``BM x BN`` tile (``BM = 128``: two m64 wgmma rows per warp group).
  Their main loops are serialized by named barriers 9 and 10 (256 threads:
  the 128 waiting plus the other group's 128 arriving): consumer ``c`` waits
  on ``9 + c``, runs its K loop, then passes the turn to the other; consumer 1
  pre-arrives on 9 so consumer 0 goes first.  One consumer's epilogue thus
  overlaps the other's MMAs, and the ring is consumed in the order the
  producer fills it;
* epilogue: each consumer converts its accumulator to bf16, stores it into
  its own shared C tile, fences the generic→async proxy and TMA-stores it.

Each K step waits only for the previous step's MMA (``async_dot_wait(1)``)
and releases that step's stage, so one MMA group is always queued; a
consumer passes the turn as soon as its last MMA is issued.  ``BN = 128``
(two m64n128k16 per k16 step, a 128-register accumulator) is the default:
``BN = 64`` halves the work per shared-memory byte (0.52x cuBLAS against
0.84x on the H200, docs/performance.md).

    python examples/hopper_gemm_ws_pingpong.py              # GPU: vs torch.matmul, TFLOP/s
    TLXC_INTERPRET=1 python examples/hopper_gemm_ws_pingpong.py
    tlxc check examples/hopper_gemm_ws_pingpong.py
"""
import torch
from hopper_gemm_ws import B_BOX_N, DTYPES, gemm_operands, grouped_tile, num_sms

import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def matmul_ws_pingpong_kernel(a_desc: tlx.tensor_descriptor_type(tl.bfloat16, [128, 64], swizzle=128),
                              b_desc: tlx.tensor_descriptor_type(tl.bfloat16, [64, 64], swizzle=128),
                              c_desc: tlx.tensor_descriptor_type(tl.bfloat16, [128, 64], swizzle=128),
                              M: tl.int32, N: tl.int32, K: tl.int32,
                              BM: tl.constexpr = 128, BN: tl.constexpr = 128, BK: tl.constexpr = 64,
                              GROUP_M: tl.constexpr = 8, NUM_STAGES: tl.constexpr = 4,
                              NUM_SMS: tl.constexpr = 132, DTYPE: tl.constexpr = tl.bfloat16):
    a_smem = tlx.local_alloc((BM, BK), DTYPE, NUM_STAGES)
    b_smem = tlx.local_alloc((BK, BN), DTYPE, NUM_STAGES)
    c_smem = tlx.local_alloc((BM, BN), DTYPE, 2)                     # [consumer]
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)                 # one consumer reads a slot

    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BK)

    with tlx.async_tasks():
        with tlx.async_task("default"):                                     # the TMA producer
            count = 0
            for tile in range(start, num_tiles, NUM_SMS):
                pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
                for k in range(k_tiles):
                    slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                    tlx.barrier_wait(empty[slot], phase ^ 1)
                    tlx.barrier_expect_bytes(full[slot], (BM * BK + BK * BN) * 2)
                    tlx.async_descriptor_load(a_desc, a_smem[slot], [pid_m * BM, k * BK], full[slot])
                    for j in tl.static_range(BN // B_BOX_N):
                        b_box = tlx.local_slice(b_smem[slot], [0, j * B_BOX_N], [BK, B_BOX_N])
                        tlx.async_descriptor_load(b_desc, b_box, [k * BK, pid_n * BN + j * B_BOX_N], full[slot])
                    count += 1
        with tlx.async_task(num_warps=4, registers=232, replicate=2):    # the wgmma consumers
            cid = tlx.async_task_replica_id()
            if cid == 1:
                tlx.named_barrier_arrive(9, 256)                           # consumer 0 goes first
            for tile in range(start + cid * NUM_SMS, num_tiles, 2 * NUM_SMS):
                pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
                count = (tile - start) // NUM_SMS * k_tiles                # the ring position of this tile
                acc = tl.zeros((BM, BN), dtype=tl.float32)
                tlx.named_barrier_wait(9 + cid, 256)                       # my turn on the tensor cores
                for k in range(k_tiles):
                    slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                    tlx.barrier_wait(full[slot], phase)
                    acc = tlx.async_dot(a_smem[slot], b_smem[slot], acc)
                    acc = tlx.async_dot_wait(1, acc)                       # the previous step's MMA is done:
                    if k > 0:                                              # release its stage
                        tlx.barrier_arrive(empty[(count - 1) % NUM_STAGES])
                    count += 1
                tlx.named_barrier_arrive(9 + (1 - cid), 256)               # pass the turn
                acc = tlx.async_dot_wait(0, acc)
                if k_tiles > 0:
                    tlx.barrier_arrive(empty[(count - 1) % NUM_STAGES])
                tlx.async_descriptor_store_wait(0)                         # my previous store has read c_smem
                tlx.local_store(c_smem[cid], acc.to(DTYPE))
                tlx.fence("async_shared")
                for j in tl.static_range(BN // B_BOX_N):                   # 128B-swizzled boxes: no bank conflicts
                    c_box = tlx.local_slice(c_smem[cid], [0, j * B_BOX_N], [BM, B_BOX_N])
                    tlx.async_descriptor_store(c_desc, c_box, [pid_m * BM, pid_n * BN + j * B_BOX_N])
            # The turn after this program's last tile is never taken: whoever it
            # falls to absorbs the pass it was given, leaving both barriers idle.
            my_tiles = (num_tiles - start + NUM_SMS - 1) // NUM_SMS
            if cid == my_tiles % 2:
                tlx.named_barrier_wait(9 + cid, 256)
            tlx.async_descriptor_store_wait(0)                             # before shared memory goes away


def matmul_ws_pingpong(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, *, block_m: int = 128,
                       block_n: int = 128, block_k: int = 64, group_m: int = 8, num_stages: int = 4,
                       sms: int | None = None) -> torch.Tensor:
    """``a @ b`` for 2-D bfloat16 or float16 tensors whose rows are 16-byte aligned
    (TMA); ``out`` (if given) has their dtype."""
    M, N, K, out = gemm_operands("matmul_ws_pingpong", a, b, out)
    if M == 0 or N == 0 or K == 0:
        return out
    a_desc = tlxc.TensorDescriptor.from_tensor(a, [block_m, block_k], swizzle=128)
    b_desc = tlxc.TensorDescriptor.from_tensor(b, [block_k, B_BOX_N], swizzle=128)
    c_desc = tlxc.TensorDescriptor.from_tensor(out, [block_m, B_BOX_N], swizzle=128)
    tiles = ((M + block_m - 1) // block_m) * ((N + block_n - 1) // block_n)
    sms = sms or num_sms(a.device)
    matmul_ws_pingpong_kernel[(min(sms, tiles),)](a_desc, b_desc, c_desc, M, N, K, BM=block_m, BN=block_n,
                                                  BK=block_k, GROUP_M=group_m, NUM_STAGES=num_stages,
                                                  NUM_SMS=sms, DTYPE=DTYPES[a.dtype], num_warps=4)
    return out


def check_inputs():
    """Small launch for ``tlxc check --run``: two programs, three and two tiles."""
    a = torch.randn(256, 128).to(torch.bfloat16)
    b = torch.randn(128, 192).to(torch.bfloat16)
    c = torch.empty(256, 192, dtype=torch.bfloat16)
    descs = (tlxc.TensorDescriptor.from_tensor(a, [128, 64], swizzle=128),
             tlxc.TensorDescriptor.from_tensor(b, [64, 64], swizzle=128),
             tlxc.TensorDescriptor.from_tensor(c, [128, 64], swizzle=128))
    return (2,), descs + (256, 192, 128), {"NUM_STAGES": 2, "NUM_SMS": 2}


def main() -> None:
    from _harness import gemm_main
    gemm_main("hopper_gemm_ws_pingpong", matmul_ws_pingpong)


if __name__ == "__main__":
    main()
