"""Warp-specialized persistent GEMM for Blackwell (sm_100a): tcgen05 and tensor memory.

``C = A @ B`` for bf16/fp16 A (M, K) and B (K, N), float32 accumulation in
tensor memory, C in the inputs' dtype.  The shape of TLX's
``blackwell_gemm_ws``:

* a persistent grid (one program per SM) walks the output tiles in groups of
  ``GROUP_M`` tile rows (L2 reuse);
* the producer (one warp) streams A and B tiles by TMA through a ring of
  ``NUM_STAGES`` stages (``full`` / ``empty`` barriers);
* the MMA task (one warp) issues ``tlx.async_dot`` into a tensor-memory
  accumulator; each MMA's completion frees its input stage
  (``mBarriers=[empty[slot]]``), and ``tlx.tcgen05_commit`` signals the
  finished tile (``tmem_full``).  The accumulator is double-buffered
  (``NUM_TMEM`` buffers of 128 x BN float32 columns), so the MMAs of the next
  tile run while the epilogue drains this one;
* the epilogue (the default task, one warp group) reads the accumulator in
  ``EPILOGUE_SUBTILE`` column slices (``tlx.subslice`` + ``tlx.local_load``,
  one row per thread), releasing the buffer slice by slice (``tmem_empty``
  counts ``EPILOGUE_SUBTILE`` arrivals), and stores C with a mask.

No Blackwell GPU was available to this project: the kernel is checked by
``tlxc check``, runs on the interpreter, and compiles to an sm_100a cubin
(ptxas checks every instruction); it has never run on hardware.

    TLXC_INTERPRET=1 TLXC_INTERPRET_ARCH=sm_100a python examples/blackwell_gemm_ws.py
    tlxc check examples/blackwell_gemm_ws.py --arch sm_100a
    tlxc compile examples/blackwell_gemm_ws.py --arch sm_100a --emit cuda,cubin -o out/
"""
import torch
from hopper_gemm_ws import B_BOX_N, DTYPES, gemm_operands, grouped_tile

import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def matmul_tcgen05_kernel(a_desc: tlx.tensor_descriptor_type(tl.bfloat16, [128, 64], swizzle=128),
                          b_desc: tlx.tensor_descriptor_type(tl.bfloat16, [64, 64], swizzle=128),
                          c_ptr: tl.pointer_type(tl.bfloat16), M: tl.int32, N: tl.int32, K: tl.int32,
                          BN: tl.constexpr = 256, BK: tl.constexpr = 64, GROUP_M: tl.constexpr = 8,
                          NUM_STAGES: tl.constexpr = 4, NUM_TMEM: tl.constexpr = 2,
                          EPILOGUE_SUBTILE: tl.constexpr = 4, DTYPE: tl.constexpr = tl.bfloat16):
    BM: tl.constexpr = 128
    SUB: tl.constexpr = BN // EPILOGUE_SUBTILE
    a_smem = tlx.local_alloc((BM, BK), DTYPE, NUM_STAGES)
    b_smem = tlx.local_alloc((BK, BN), DTYPE, NUM_STAGES)
    acc = tlx.local_alloc((BM, BN), tl.float32, NUM_TMEM, storage=tlx.storage_kind.tmem)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)           # the MMA's completion frees a stage
    tmem_full = tlx.alloc_barriers(NUM_TMEM, arrive_count=1)        # tcgen05_commit: the tile is done
    tmem_empty = tlx.alloc_barriers(NUM_TMEM, arrive_count=EPILOGUE_SUBTILE)  # one release per slice

    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BK)

    with tlx.async_tasks():
        with tlx.async_task("default"):                                 # the epilogue
            t = 0
            for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
                buf, phase = tlx.get_bufidx_phase(t, NUM_TMEM)
                tlx.barrier_wait(tmem_full[buf], phase)
                rows = pid_m * BM + tl.arange(0, BM)
                for j in tl.static_range(EPILOGUE_SUBTILE):
                    part = tlx.local_load(tlx.subslice(acc[buf], j * SUB, SUB))
                    tlx.barrier_arrive(tmem_empty[buf])                 # this slice may be overwritten
                    cols = pid_n * BN + j * SUB + tl.arange(0, SUB)
                    tl.store(c_ptr + rows[:, None] * N + cols[None, :], part.to(DTYPE),
                             mask=(rows[:, None] < M) & (cols[None, :] < N))
                t += 1  # noqa: SIM113 (enumerate is not in the kernel language)
        with tlx.async_task(num_warps=1):                               # the TMA producer
            count = 0
            for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
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
        with tlx.async_task(num_warps=1):                               # the MMA issuer
            count = 0
            t = 0
            for _tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
                buf, phase = tlx.get_bufidx_phase(t, NUM_TMEM)
                tlx.barrier_wait(tmem_empty[buf], phase ^ 1)            # the epilogue drained this buffer
                for k in range(k_tiles):
                    slot, phase = tlx.get_bufidx_phase(count, NUM_STAGES)
                    tlx.barrier_wait(full[slot], phase)
                    tlx.async_dot(a_smem[slot], b_smem[slot], acc[buf], use_acc=k > 0, mBarriers=[empty[slot]])
                    count += 1
                tlx.tcgen05_commit(tmem_full[buf])
                t += 1  # noqa: SIM113 (enumerate is not in the kernel language)


def matmul_tcgen05(a: torch.Tensor, b: torch.Tensor, *, block_n: int = 256, group_m: int = 8, num_stages: int = 4,
                   num_tmem: int = 2, epilogue_subtile: int = 4, programs: int | None = None) -> torch.Tensor:
    """``a @ b`` for 2-D bf16/fp16 tensors with 16-byte aligned rows (TMA), on sm_100a
    (or the interpreter with ``TLXC_INTERPRET_ARCH=sm_100a``)."""
    M, N, K, out = gemm_operands("matmul_tcgen05", a, b, None)
    if M == 0 or N == 0 or K == 0:
        return out
    a_desc = tlxc.TensorDescriptor.from_tensor(a, [128, 64], swizzle=128)
    b_desc = tlxc.TensorDescriptor.from_tensor(b, [64, B_BOX_N], swizzle=128)
    tiles = -(-M // 128) * -(-N // block_n)
    if programs is None:
        programs = (torch.cuda.get_device_properties(a.device).multi_processor_count
                    if a.device.type == "cuda" else 3)
    matmul_tcgen05_kernel[(min(programs, tiles),)](a_desc, b_desc, out, M, N, K, BN=block_n, GROUP_M=group_m,
                                                   NUM_STAGES=num_stages, NUM_TMEM=num_tmem,
                                                   EPILOGUE_SUBTILE=epilogue_subtile, DTYPE=DTYPES[a.dtype],
                                                   num_warps=4)
    return out


def check_inputs():
    """Small launch for ``tlxc check --run --arch sm_100a``."""
    a = torch.randn(200, 136).to(torch.bfloat16)
    b = torch.randn(136, 264).to(torch.bfloat16)
    descs = (tlxc.TensorDescriptor.from_tensor(a, [128, 64], swizzle=128),
             tlxc.TensorDescriptor.from_tensor(b, [64, 64], swizzle=128))
    c = torch.empty(200, 264, dtype=torch.bfloat16)
    return (2,), (*descs, c, 200, 264, 136), {"BN": 128, "NUM_STAGES": 2, "EPILOGUE_SUBTILE": 2}


def main() -> None:
    import os

    from _harness import check
    on_blackwell = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 10
    if not on_blackwell:              # Hopper or no GPU: Blackwell's semantics on the interpreter
        os.environ["TLXC_INTERPRET"] = "1"
        os.environ.setdefault("TLXC_INTERPRET_ARCH", "sm_100a")
        print("no Blackwell GPU: running under the tlxc interpreter (sm_100a semantics) at small sizes")
    device = "cuda" if on_blackwell else "cpu"
    torch.manual_seed(0)
    sizes = [(1000, 1240, 776), (4096, 4096, 4096)] if on_blackwell else [(200, 264, 136)]
    for M, N, K in sizes:
        a = torch.randn(M, K, device=device).to(torch.bfloat16)
        b = torch.randn(K, N, device=device).to(torch.bfloat16)
        c = matmul_tcgen05(a, b) if on_blackwell else matmul_tcgen05(a, b, block_n=128, num_stages=2,
                                                                      epilogue_subtile=2)
        check(f"blackwell gemm {M}x{N}x{K}", c, a.double() @ b.double())


if __name__ == "__main__":
    main()
