"""Time the cp.async + wgmma pipelined GEMM pattern (tests/kernels_pipelined.py, the
pattern of TLX's hopper_gemm_pipelined tutorial) against cuBLAS (torch.matmul) at
4096^3 fp16, in one process: checks the result first (poisoned output, relative
error), then medians of CUDA-event timings; the ratio to cuBLAS is printed last.

    python bench/pipelined_gemm_probe.py [--size N] [--bm 128] [--bn 256] [--bk 64] [--stages 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))


def median_ms(fn, warmup: int = 10, reps: int = 50) -> float:
    import torch
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    import kernels_pipelined as K
    import torch
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--bm", type=int, default=128)
    parser.add_argument("--bn", type=int, default=256)
    parser.add_argument("--bk", type=int, default=64)
    parser.add_argument("--stages", type=int, default=3)
    args = parser.parse_args()
    n = args.size
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.full((n, n), float("nan"), device="cuda", dtype=torch.float16)
    grid = (triton_cdiv(n, args.bm), triton_cdiv(n, args.bn))

    def run():
        K.cp_async_wgmma_gemm[grid](a, b, c, n, n, n, a.stride(0), b.stride(0), c.stride(0), BM=args.bm,
                                    BN=args.bn, BK=args.bk, STAGES=args.stages, num_warps=8)
    run()
    torch.cuda.synchronize()
    ref = torch.matmul(a.float(), b.float())
    rel = ((c.float() - ref).norm() / ref.norm()).item()
    print(f"relative error {rel:.2e} (max abs {(c.float() - ref).abs().max().item():.3f})")
    if not rel < 1e-2:
        raise SystemExit("wrong result")
    flops = 2 * n ** 3
    ours = median_ms(run)
    cublas = median_ms(lambda: torch.matmul(a, b))
    print(f"pipelined cp.async+wgmma: {ours:.3f} ms, {flops / ours / 1e9:.1f} TFLOP/s")
    print(f"cuBLAS (torch.matmul):    {cublas:.3f} ms, {flops / cublas / 1e9:.1f} TFLOP/s")
    print(f"ratio to cuBLAS: {cublas / ours:.3f}")


def triton_cdiv(x: int, y: int) -> int:
    return (x + y - 1) // y


if __name__ == "__main__":
    main()
