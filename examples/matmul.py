"""Tiled matrix multiplication ``C = A @ B`` on tensor cores (``tl.dot``).

bfloat16 inputs, float32 accumulation, bfloat16 output.  Each program computes
one ``BLOCK_M x BLOCK_N`` tile of C, walking K in steps of ``BLOCK_K``.
Programs are numbered in groups of ``GROUP_M`` tile-rows ("grouped
ordering"): consecutive programs share A tile-rows and B tile-columns while
they are still in L2, instead of sweeping a whole row of C first.  Masks make
any M, N, K work.

    python examples/matmul.py
    TLXC_INTERPRET=1 python examples/matmul.py
    tlxc compile examples/matmul.py --arch sm_90a --emit ir
"""
from functools import partial

import torch

import tlxc
import tlxc.language as tl


@tlxc.kernel
def matmul_kernel(a_ptr: tl.pointer_type(tl.bfloat16), b_ptr: tl.pointer_type(tl.bfloat16),
                  c_ptr: tl.pointer_type(tl.bfloat16), M: tl.int32, N: tl.int32, K: tl.int32,
                  stride_am: tl.int32, stride_ak: tl.int32, stride_bk: tl.int32, stride_bn: tl.int32,
                  stride_cm: tl.int32, stride_cn: tl.int32,
                  BLOCK_M: tl.constexpr = 128, BLOCK_N: tl.constexpr = 128, BLOCK_K: tl.constexpr = 64,
                  GROUP_M: tl.constexpr = 8):
    # Grouped ordering: program `pid` → tile (pid_m, pid_n).
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        k_remaining = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_remaining), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_remaining) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(tl.bfloat16), mask=c_mask)


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, *,
           block_m: int = 128, block_n: int = 128, block_k: int = 64, group_m: int = 8,
           num_warps: int = 8) -> torch.Tensor:
    """``a @ b`` for 2-D bfloat16 tensors (any strides)."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul expects (M, K) @ (K, N), got {tuple(a.shape)} @ {tuple(b.shape)}")
    if a.dtype != torch.bfloat16 or b.dtype != torch.bfloat16:
        raise ValueError("matmul expects bfloat16 inputs")
    M, K = a.shape
    N = b.shape[1]
    if out is None:
        out = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    grid = (((M + block_m - 1) // block_m) * ((N + block_n - 1) // block_n),)
    matmul_kernel[grid](a, b, out, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        out.stride(0), out.stride(1), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                        GROUP_M=group_m, num_warps=num_warps)
    return out


def main() -> None:
    from _harness import bench, check, device, poisoned_like, report, setup

    on_gpu = setup()
    shapes = [(1000, 1100, 900), (8192, 8192, 8192)] if on_gpu else [(70, 50, 90)]
    blocks = {} if on_gpu else {"block_m": 32, "block_n": 32, "block_k": 32, "num_warps": 4}
    for M, N, K in shapes:
        a = torch.randn(M, K, device=device(), dtype=torch.bfloat16)
        b = torch.randn(K, N, device=device(), dtype=torch.bfloat16)
        c = matmul(a, b, poisoned_like(torch.empty(M, N, device=device(), dtype=torch.bfloat16)), **blocks)
        check(f"matmul {M}x{N}x{K}", c, a.double() @ b.double())
        if on_gpu:
            tlxc_ms = bench(partial(matmul, a, b, c))
            torch_ms = bench(partial(torch.matmul, a, b, out=c))
            report(f"matmul {M}x{N}x{K}", tlxc_ms, torch_ms, flops=2 * M * N * K)


if __name__ == "__main__":
    main()
