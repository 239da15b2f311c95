"""FP8 GEMM for Hopper: the warp-specialized persistent GEMM on e4m3 inputs.

``C = (A @ B^T) * scale_a * scale_b`` for float8 e4m3 A (M x K) and B given
as N x K (K-major, as ``torch._scaled_mm`` takes its second operand
transposed), float32 accumulation, bfloat16 C -- ``torch._scaled_mm`` with
per-tensor scales.  The structure is ``hopper_gemm_ws.py``'s (one TMA
producer, two consumer warp groups each owning ``BM/2`` rows, a ring of
``full``/``empty`` barriers, the consumers taking turns issuing, each stage
released as soon as its MMA is done, TMA-store epilogue),
with what fp8 changes:

* wgmma reads 8-bit operands K-major only, so B's tile is loaded as a
  ``BN x BK`` box of B's rows and passed as ``tlx.local_trans(b)`` (a
  ``BK x BN`` view of K-major data); each instruction is ``m64nBNk32``;
* ``BK = 128``: one 128-byte row of K per row of A and B, the 128-byte
  swizzle's span; a stage holds as many bytes as the bf16 kernel's
  (``BM x 128`` + ``BN x 128``) for twice the multiply-adds;
* the epilogue multiplies by ``scale_a * scale_b`` (two float32 scalars
  read once per program) before rounding to bfloat16.

    python examples/hopper_gemm_fp8.py              # GPU: vs torch._scaled_mm, TFLOP/s
    TLXC_INTERPRET=1 python examples/hopper_gemm_fp8.py
    tlxc check examples/hopper_gemm_fp8.py
"""
import torch
from hopper_gemm_ws import B_BOX_N, grouped_tile, num_sms, store_c_tile

import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def matmul_fp8_kernel(a_desc: tlx.tensor_descriptor_type(tl.float8e4nv, [64, 128], swizzle=128),
                      b_desc: tlx.tensor_descriptor_type(tl.float8e4nv, [256, 128], swizzle=128),
                      c_desc: tlx.tensor_descriptor_type(tl.bfloat16, [64, 64], swizzle=128),
                      scale_a: tl.pointer_type(tl.float32), scale_b: tl.pointer_type(tl.float32),
                      M: tl.int32, N: tl.int32, K: tl.int32,
                      BM: tl.constexpr = 128, BN: tl.constexpr = 256, BK: tl.constexpr = 128,
                      GROUP_M: tl.constexpr = 8, NUM_STAGES: tl.constexpr = 3, NUM_SMS: tl.constexpr = 132):
    HALF_M: tl.constexpr = BM // 2
    a_smem = tlx.local_alloc((HALF_M, BK), tl.float8e4nv, NUM_STAGES * 2)    # [2 * stage + consumer]
    b_smem = tlx.local_alloc((BN, BK), tl.float8e4nv, NUM_STAGES)            # K-major rows of B
    c_smem = tlx.local_alloc((HALF_M, BN), tl.bfloat16, 2)                   # [consumer]
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=2)                   # both consumers release a stage

    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BK)

    with tlx.async_tasks():
        with tlx.async_task("default"):                                       # the TMA producer
            count = 0
            for tile in range(start, num_tiles, NUM_SMS):
                pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
                for k in range(k_tiles):
                    slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                    tlx.barrier_wait(empty[slot], phase ^ 1)
                    tlx.barrier_expect_bytes(full[slot], BM * BK + BN * BK)
                    tlx.async_descriptor_load(a_desc, a_smem[2 * slot], [pid_m * BM, k * BK], full[slot])
                    tlx.async_descriptor_load(a_desc, a_smem[2 * slot + 1], [pid_m * BM + HALF_M, k * BK],
                                              full[slot])
                    tlx.async_descriptor_load(b_desc, b_smem[slot], [pid_n * BN, k * BK], full[slot])
                    count += 1
        with tlx.async_task(num_warps=4, registers=232, replicate=2):      # the wgmma consumers
            cid = tlx.async_task_replica_id()
            scale = tl.load(scale_a) * tl.load(scale_b)
            if cid == 1:
                tlx.named_barrier_arrive(9, 256)                 # consumer 0 issues first
            count = 0
            for tile in range(start, num_tiles, NUM_SMS):
                pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
                acc = tl.zeros((HALF_M, BN), dtype=tl.float32)
                for k in range(k_tiles):
                    slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                    tlx.barrier_wait(full[slot], phase)
                    tlx.named_barrier_wait(9 + cid, 256)           # the consumers take turns issuing
                    acc = tlx.async_dot(a_smem[2 * slot + cid], tlx.local_trans(b_smem[slot]), acc)
                    tlx.named_barrier_arrive(10 - cid, 256)
                    acc = tlx.async_dot_wait(0, acc)          # this step's MMA is done: release its stage
                    tlx.barrier_arrive(empty[slot])
                    count += 1
                store_c_tile(c_desc, c_smem[cid], acc * scale, pid_m * BM + cid * HALF_M, pid_n * BN, HALF_M, BN,
                             tl.bfloat16)
            if cid == 0:
                tlx.named_barrier_wait(9, 256)                   # absorb consumer 1's last turn
            tlx.async_descriptor_store_wait(0)                # before the CTA's shared memory goes away


def matmul_fp8(a: torch.Tensor, b_nk: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
               out: torch.Tensor | None = None, *, block_m: int = 128, block_n: int | None = None,
               group_m: int = 8, num_stages: int | None = None, sms: int | None = None) -> torch.Tensor:
    """``(a @ b_nk.T) * scale_a * scale_b`` in bfloat16 for float8 e4m3 ``a`` (M x K) and
    ``b_nk`` (N x K), rows 16-byte aligned (TMA), and one-element float32 scales --
    ``torch._scaled_mm(a, b_nk.t(), scale_a, scale_b, out_dtype=torch.bfloat16)``.

    ``block_n=None`` picks the tile by a measured heuristic (H200, docs/performance.md):
    128 x 256 tiles with 3 stages when they give every SM at least 8 tiles (8192^3: 0.99x
    _scaled_mm), else 128 x 128 with 4 stages (4096^3: 0.96x; the wide tiles gave 0.65-0.73x
    there when measured, their last wave leaving SMs idle)."""
    if a.dim() != 2 or b_nk.dim() != 2 or a.shape[1] != b_nk.shape[1]:
        raise ValueError(f"matmul_fp8 expects a (M, K) and b_nk (N, K), got {tuple(a.shape)} and "
                         f"{tuple(b_nk.shape)}")
    if a.dtype != torch.float8_e4m3fn or b_nk.dtype != torch.float8_e4m3fn:
        raise ValueError(f"matmul_fp8 expects float8_e4m3fn inputs, got {a.dtype} and {b_nk.dtype}")
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s.numel() != 1 or s.dtype != torch.float32:
            raise ValueError(f"matmul_fp8: '{name}' must be a one-element float32 tensor (a per-tensor scale), "
                             f"got {s.dtype} of shape {tuple(s.shape)}")
    M, K = a.shape
    N = b_nk.shape[0]
    if out is None:
        out = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    elif tuple(out.shape) != (M, N) or out.dtype != torch.bfloat16 or out.device != a.device:
        raise ValueError(f"'out' must be a ({M}, {N}) {torch.bfloat16} tensor on {a.device}, got {tuple(out.shape)} "
                         f"{out.dtype} on {out.device}")
    if M == 0 or N == 0 or K == 0:          # TMA cannot describe an empty tensor: nothing to load
        return out.zero_()
    sms = sms or num_sms(a.device)
    if block_n is None:
        wide_tiles = ((M + block_m - 1) // block_m) * ((N + 255) // 256)
        block_n = 256 if wide_tiles >= 8 * sms else 128
    if num_stages is None:
        num_stages = 3 if block_n == 256 else 4
    block_k = 128
    a_desc = tlxc.TensorDescriptor.from_tensor(a, [block_m // 2, block_k], swizzle=128)
    b_desc = tlxc.TensorDescriptor.from_tensor(b_nk, [block_n, block_k], swizzle=128)
    c_desc = tlxc.TensorDescriptor.from_tensor(out, [block_m // 2, B_BOX_N], swizzle=128)   # 128-byte rows
    tiles = ((M + block_m - 1) // block_m) * ((N + block_n - 1) // block_n)
    matmul_fp8_kernel[(min(sms, tiles),)](a_desc, b_desc, c_desc, scale_a, scale_b, M, N, K, BM=block_m,
                                          BN=block_n, BK=block_k, GROUP_M=group_m, NUM_STAGES=num_stages,
                                          NUM_SMS=sms, num_warps=4)
    return out


def fp8_inputs(M: int, N: int, K: int, device, generator=None):
    """Random e4m3 a (M x K), b_nk (N x K) and per-tensor scales that map them back to ~N(0, 1)."""
    a = (torch.randn(M, K, device=device, generator=generator) * 64).to(torch.float8_e4m3fn)
    b_nk = (torch.randn(N, K, device=device, generator=generator) * 64).to(torch.float8_e4m3fn)
    scale = torch.full((1,), 1 / 64, device=device, dtype=torch.float32)
    return a, b_nk, scale, scale.clone()


def check_inputs():
    """Small launch for ``tlxc check --run``."""
    a, b_nk, sa, sb = fp8_inputs(256, 256, 256, "cpu")
    c = torch.empty(256, 256, dtype=torch.bfloat16)
    descs = (tlxc.TensorDescriptor.from_tensor(a, [64, 128], swizzle=128),
             tlxc.TensorDescriptor.from_tensor(b_nk, [256, 128], swizzle=128),
             tlxc.TensorDescriptor.from_tensor(c, [64, 64], swizzle=128))
    return (2,), descs + (sa, sb, 256, 256, 256), {"NUM_STAGES": 2, "NUM_SMS": 2}


def main() -> None:
    from functools import partial

    from _harness import bench, check, device, poisoned_like, report, setup

    on_gpu = setup()
    shapes = [(1000, 1240, 784), (4096, 4096, 4096), (8192, 8192, 8192)] if on_gpu else \
        [(256, 384, 512), (200, 264, 320)]
    for M, N, K in shapes:
        a, b_nk, sa, sb = fp8_inputs(M, N, K, device())
        c = matmul_fp8(a, b_nk, sa, sb, poisoned_like(torch.empty(M, N, device=device(), dtype=torch.bfloat16)))
        ref = (a.double() @ b_nk.double().t()) * (sa.double() * sb.double())
        check(f"hopper_gemm_fp8 {M}x{N}x{K}", c, ref)
        if on_gpu and M == N == K:                  # _scaled_mm wants multiples of 16
            tlxc_ms = bench(partial(matmul_fp8, a, b_nk, sa, sb, c))
            torch_ms = bench(partial(torch._scaled_mm, a, b_nk.t(), sa, sb, out_dtype=torch.bfloat16))
            report(f"hopper_gemm_fp8 {M}x{N}x{K}", tlxc_ms, torch_ms, flops=2 * M * N * K)


if __name__ == "__main__":
    main()
