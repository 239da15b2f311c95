"""Warp-specialized persistent GEMM for Hopper: TMA producer, two wgmma consumers.

``C = A @ B`` for bfloat16 (or float16) A (M x K) and B (K x N), float32
accumulation, C in the inputs' dtype; the structure of TLX's ``hopper_gemm_ws.py``:

* persistent: ``NUM_SMS`` programs (one per SM) walk the output tiles,
  program ``p`` taking tiles ``p, p + NUM_SMS, ...`` in grouped order
  (``GROUP_M`` tile-rows at a time, so that concurrent tiles share A rows
  and B columns in L2);
* the default task (4 warps) is the TMA producer: for every K step it waits
  for a free stage (``empty``), announces the stage's bytes on ``full`` and
  issues the TMA loads of two ``BM/2 x BK`` halves of A (one per consumer)
  and of the ``BK x BN`` B tile (as ``BK x 64`` boxes: 128-byte rows, the
  widest a 128-byte swizzle allows, each into a 64-column slice).  The
  codegen stores B block-stacked: ``BN/64`` 128B-swizzled ``[BK, 64]``
  blocks, read by one ``m64nBNk16`` wgmma per k16 step whose descriptor's
  leading byte offset steps between the blocks; the interpreter runs any
  ``BN``;
* two consumer warp groups (``replicate=2``, 232 registers each) own
  ``BM/2`` rows of the tile: wait ``full``, ``async_dot`` (wgmma) their A half
  with the shared B tile, then ``async_dot_wait(0)`` and release the stage
  (``empty`` counts both consumers).  The consumers take turns issuing
  (named barriers 9 and 10), so the tensor cores run consumer 0's MMAs of a
  step, then consumer 1's, and while one consumer waits for its MMA,
  releases the stage and issues the next step, the other's queued MMAs keep
  the tensor cores busy.  Without the turns both consumers issue at once,
  their MMAs interleave and finish together, and the tensor cores idle while
  both do their step's bookkeeping (4-5% slower, docs/performance.md).
  Waiting for the *previous* step's MMA instead (``async_dot_wait(1)``)
  would tie each release to the arrival of the next stage's data, and a late
  load would then delay the refill of the stage after it (5% slower);
* epilogue: each consumer waits until its previous TMA store has read its
  shared C tile, converts its accumulator to bf16, stores it into that tile
  (128B-swizzled ``[BM/2, 64]`` blocks, so the stores hit every bank), fences
  the generic→async proxy and TMA-stores it; the store overlaps the next
  tile's main loop.  ``EPILOGUE_SUBTILE = 2`` (the default) stores the
  accumulator in two halves (``tl.split``) through a half-size C tile, which
  leaves room for a fourth stage;
* ``CLUSTER_M = 2`` (``cluster_m=2``): pairs of CTAs (a cluster) take
  vertically adjacent tiles and share their B tiles: each CTA loads half of
  the boxes and multicasts them to both, and a consumer releases a stage to
  both producers (``release``).  Correct on the H200, not faster (0.95x
  against 0.95x without at 4096^3, 0.99x against 1.01x at 8192^3,
  docs/performance.md).

Defaults (``BN = 256``, 4 stages with the subtiled epilogue, 224 KB of shared
memory, ``GROUP_M = 16``) are the fastest measured on the H200
(docs/performance.md, 2026-11-30): 0.99-1.02x cuBLAS at 4096^3 and 8192^3;
``BN = 128`` reads shared memory for half the MMA work (0.74x).

    python examples/hopper_gemm_ws.py              # GPU: vs torch.matmul, TFLOP/s
    TLXC_INTERPRET=1 python examples/hopper_gemm_ws.py
    tlxc check examples/hopper_gemm_ws.py
"""
import torch

import tlxc
import tlxc.language as tl
from tlxc.language import tlx

DTYPES = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}
B_BOX_N = 64          # columns of one B box: 64 bf16 = 128 bytes, the 128-byte swizzle's span


@tlxc.kernel
def grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of output tile ``tile`` in grouped order: ``GROUP_M`` tile-rows
    at a time, column by column, so that concurrent tiles share A rows and B columns in L2."""
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = tile // num_pid_in_group * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    return first_pid_m + (tile % num_pid_in_group) % group_size_m, (tile % num_pid_in_group) // group_size_m


@tlxc.kernel
def store_c_tile(c_desc, c_buf, part, row, col, ROWS: tl.constexpr, COLS: tl.constexpr, DTYPE: tl.constexpr):
    """The epilogue of one consumer: wait until the previous TMA store has read ``c_buf``,
    store ``part`` there, fence the generic->async proxy, TMA-store it at (row, col) as
    128B-swizzled 64-column boxes (every bank busy, no conflicts)."""
    tlx.async_descriptor_store_wait(0)
    tlx.local_store(c_buf, part.to(DTYPE))
    tlx.fence("async_shared")
    for j in tl.static_range(COLS // B_BOX_N):
        c_box = tlx.local_slice(c_buf, [0, j * B_BOX_N], [ROWS, B_BOX_N])
        tlx.async_descriptor_store(c_desc, c_box, [row, col + j * B_BOX_N])


@tlxc.kernel
def release(empty_bar, rank, CLUSTER_M: tl.constexpr):
    """A consumer is done with a stage: tell this CTA's producer and, in a pair, the peer's
    (whose multicast also fills this CTA's stage)."""
    tlx.barrier_arrive(empty_bar)
    if CLUSTER_M > 1:
        tlx.barrier_arrive(empty_bar, 1, remote_cta_rank=rank ^ 1)


@tlxc.kernel
def matmul_ws_kernel(a_desc: tlx.tensor_descriptor_type(tl.bfloat16, [64, 64], swizzle=128),
                     b_desc: tlx.tensor_descriptor_type(tl.bfloat16, [64, 64], swizzle=128),
                     c_desc: tlx.tensor_descriptor_type(tl.bfloat16, [64, 64], swizzle=128),
                     M: tl.int32, N: tl.int32, K: tl.int32,
                     BM: tl.constexpr = 128, BN: tl.constexpr = 256, BK: tl.constexpr = 64,
                     GROUP_M: tl.constexpr = 16, NUM_STAGES: tl.constexpr = 4, NUM_SMS: tl.constexpr = 132,
                     DTYPE: tl.constexpr = tl.bfloat16, EPILOGUE_SUBTILE: tl.constexpr = 2,
                     CLUSTER_M: tl.constexpr = 1):
    HALF_M: tl.constexpr = BM // 2
    a_smem = tlx.local_alloc((HALF_M, BK), DTYPE, NUM_STAGES * 2)    # [2 * stage + consumer]
    b_smem = tlx.local_alloc((BK, BN), DTYPE, NUM_STAGES)
    c_smem = tlx.local_alloc((HALF_M, BN // EPILOGUE_SUBTILE), DTYPE, 2)  # [consumer]
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    # a stage is free once both consumers of every CTA sharing its B tile have released it
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=2 * CLUSTER_M)

    start = tl.program_id(0) // CLUSTER_M                              # this CTA's cluster
    rank = 0
    if CLUSTER_M > 1:
        rank = tlx.cluster_cta_rank()
    num_pid_m = tl.cdiv(M, BM * CLUSTER_M)                             # tile rows of a cluster
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BK)

    with tlx.async_tasks():
        with tlx.async_task("default"):                                     # the TMA producer
            count = 0
            for tile in range(start, num_tiles, NUM_SMS // CLUSTER_M):
                pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
                row = (pid_m * CLUSTER_M + rank) * BM
                for k in range(k_tiles):
                    slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                    tlx.barrier_wait(empty[slot], phase ^ 1)
                    tlx.barrier_expect_bytes(full[slot], (BM * BK + BK * BN) * 2)
                    tlx.async_descriptor_load(a_desc, a_smem[2 * slot], [row, k * BK], full[slot])
                    tlx.async_descriptor_load(a_desc, a_smem[2 * slot + 1], [row + HALF_M, k * BK], full[slot])
                    for j in tl.static_range(BN // B_BOX_N):
                        b_box = tlx.local_slice(b_smem[slot], [0, j * B_BOX_N], [BK, B_BOX_N])
                        if CLUSTER_M == 1:
                            tlx.async_descriptor_load(b_desc, b_box, [k * BK, pid_n * BN + j * B_BOX_N],
                                                      full[slot])
                        else:                         # the pair shares B: each CTA loads half, for both
                            tlx.async_descriptor_load(b_desc, b_box, [k * BK, pid_n * BN + j * B_BOX_N],
                                                      full[slot], pred=rank == j % 2, multicast_targets=[0, 1])
                    count += 1
        with tlx.async_task(num_warps=4, registers=232, replicate=2):    # the wgmma consumers
            cid = tlx.async_task_replica_id()
            if cid == 1:
                tlx.named_barrier_arrive(9, 256)                 # consumer 0 issues first
            count = 0
            for tile in range(start, num_tiles, NUM_SMS // CLUSTER_M):
                pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
                acc = tl.zeros((HALF_M, BN), dtype=tl.float32)
                for k in range(k_tiles):
                    slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                    tlx.barrier_wait(full[slot], phase)
                    # the consumers take turns issuing (named barriers 9 and 10), so the tensor
                    # cores run one consumer's MMAs after the other's instead of both at once
                    tlx.named_barrier_wait(9 + cid, 256)
                    acc = tlx.async_dot(a_smem[2 * slot + cid], b_smem[slot], acc)
                    tlx.named_barrier_arrive(10 - cid, 256)
                    # wait for this step's MMA and release its stage at once (the other consumer's
                    # queued MMAs keep the tensor cores busy meanwhile): a release never waits for
                    # the next stage's data
                    acc = tlx.async_dot_wait(0, acc)
                    release(empty[slot], rank, CLUSTER_M)
                    count += 1
                row = (pid_m * CLUSTER_M + rank) * BM + cid * HALF_M
                if EPILOGUE_SUBTILE == 1:
                    store_c_tile(c_desc, c_smem[cid], acc, row, pid_n * BN, HALF_M, BN, DTYPE)
                else:                                         # two halves through one half-size C tile
                    lo, hi = tl.split(tl.permute(tl.reshape(acc, (HALF_M, 2, BN // 2)), (0, 2, 1)))
                    store_c_tile(c_desc, c_smem[cid], lo, row, pid_n * BN, HALF_M, BN // 2, DTYPE)
                    store_c_tile(c_desc, c_smem[cid], hi, row, pid_n * BN + BN // 2, HALF_M, BN // 2, DTYPE)
            if cid == 0:
                tlx.named_barrier_wait(9, 256)                   # absorb consumer 1's last turn
            tlx.async_descriptor_store_wait(0)                # before the CTA's shared memory goes away


def num_sms(device) -> int:
    """Programs of the persistent grid: the SM count on a GPU, a few on the interpreter."""
    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 3


def gemm_operands(name: str, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None):
    """(M, N, K, out) of ``a @ b`` for the bf16/fp16 GEMM wrappers: the operands checked,
    ``out`` checked or allocated, and zeroed when the problem is empty (TMA cannot
    describe an empty tensor, so such a call launches nothing)."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"{name} expects (M, K) @ (K, N), got {tuple(a.shape)} @ {tuple(b.shape)}")
    if a.dtype not in DTYPES or b.dtype != a.dtype:
        raise ValueError(f"{name} expects two bfloat16 or two float16 tensors, got {a.dtype} and {b.dtype}")
    M, K = a.shape
    N = b.shape[1]
    if out is None:
        out = torch.empty((M, N), device=a.device, dtype=a.dtype)
    elif tuple(out.shape) != (M, N) or out.dtype != a.dtype or out.device != a.device:
        raise ValueError(f"'out' must be a ({M}, {N}) {a.dtype} tensor on {a.device}, got {tuple(out.shape)} "
                         f"{out.dtype} on {out.device}")
    if M == 0 or N == 0 or K == 0:
        out.zero_()
    return M, N, K, out


def matmul_ws(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, *, block_m: int = 128,
              block_n: int = 256, block_k: int = 64, group_m: int = 16, num_stages: int = 4,
              epilogue_subtile: int = 2, cluster_m: int = 1, sms: int | None = None) -> torch.Tensor:
    """``a @ b`` for 2-D bfloat16 or float16 tensors whose rows are 16-byte aligned
    (TMA); ``out`` (if given) has their dtype.  ``cluster_m=2`` runs pairs of CTAs on
    vertically adjacent tiles that share (multicast) their B tiles."""
    if cluster_m not in (1, 2):
        raise ValueError(f"cluster_m must be 1 or 2, got {cluster_m}")
    M, N, K, out = gemm_operands("matmul_ws", a, b, out)
    if M == 0 or N == 0 or K == 0:
        return out
    # one row of A's box (block_k elements) is one swizzle span: 128 bytes, or 64 for block_k = 32
    a_desc = tlxc.TensorDescriptor.from_tensor(a, [block_m // 2, block_k], swizzle=min(128, block_k * 2))
    b_desc = tlxc.TensorDescriptor.from_tensor(b, [block_k, B_BOX_N], swizzle=128)
    c_desc = tlxc.TensorDescriptor.from_tensor(out, [block_m // 2, B_BOX_N], swizzle=128)
    cluster_tiles = ((M + block_m * cluster_m - 1) // (block_m * cluster_m)) * ((N + block_n - 1) // block_n)
    sms = (sms or num_sms(a.device)) // cluster_m * cluster_m
    grid = min(sms // cluster_m, cluster_tiles) * cluster_m
    matmul_ws_kernel[(grid,)](a_desc, b_desc, c_desc, M, N, K, BM=block_m, BN=block_n, BK=block_k, GROUP_M=group_m,
                              NUM_STAGES=num_stages, NUM_SMS=sms, DTYPE=DTYPES[a.dtype],
                              EPILOGUE_SUBTILE=epilogue_subtile, CLUSTER_M=cluster_m, num_warps=4,
                              ctas_per_cga=(cluster_m, 1, 1) if cluster_m > 1 else None)
    return out


def check_inputs():
    """Small launch for ``tlxc check --run``."""
    a = torch.randn(256, 128).to(torch.bfloat16)
    b = torch.randn(128, 128).to(torch.bfloat16)
    c = torch.empty(256, 128, dtype=torch.bfloat16)
    descs = (tlxc.TensorDescriptor.from_tensor(a, [64, 64], swizzle=128),
             tlxc.TensorDescriptor.from_tensor(b, [64, 64], swizzle=128),
             tlxc.TensorDescriptor.from_tensor(c, [64, 64], swizzle=128))
    return (2,), descs + (256, 128, 128), {"NUM_STAGES": 2, "NUM_SMS": 2}


def main() -> None:
    from _harness import gemm_main
    gemm_main("hopper_gemm_ws", matmul_ws)


if __name__ == "__main__":
    main()
