"""Where the host time of one tlxc.ops.attention call goes (cProfile), forward and backward, on the GPU.

    python bench/ops_host_profile.py [--top 25] [--torch]

Each profiled call is queued behind a ~20 ms GPU spin, so the host never waits for the GPU and
the profile is the host's own work; printed per call (20 calls), sorted by own time.  cProfile
sees the calling thread only: the autograd engine runs a CUDA backward on its own thread, so the
``bwd_autograd`` profile lacks the backward's body (``attention_bwd_host_probe.py`` times it).
``--torch``: torch.profiler's CPU-side table of the direct backward instead (aten ops, CUDA runtime
calls, their host time) and the cudaMalloc count over its calls.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--torch", action="store_true",
                        help="instead: torch.profiler's CPU-side table (aten ops, CUDA runtime calls) of the "
                             "direct backward, and the allocator's cudaMalloc count over the calls")
    args = parser.parse_args()
    for case in ((4, 16, 4096, 128, True), (64, 32, 256, 64, False), (16, 32, 1024, 64, False)):
        for name, fn in calls(*case).items():
            if args.torch:
                if name == "bwd_direct":
                    torch_table(case, fn, args.top)
            else:
                profile(case, name, fn, args.top)


def torch_table(case: tuple, fn, top: int) -> None:
    """One direct backward's host work as torch.profiler sees it (each call behind a ~20 ms spin),
    and how many device allocations (cudaMalloc) the calls made."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    fn()
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats().get("num_device_alloc", 0)
    walls = []
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(10):
            torch.cuda._sleep(40_000_000)
            t0 = time.perf_counter()
            fn()
            walls.append(time.perf_counter() - t0)
            torch.cuda.synchronize()
    allocs = torch.cuda.memory_stats().get("num_device_alloc", 0) - before
    walls.sort()
    B, H, S, D, causal = case
    print(f"== B{B} H{H} S{S} D{D}{' causal' if causal else ''} bwd_direct: host median {walls[5] * 1e3:.3f} ms "
          f"(profiled), {allocs} cudaMalloc in 10 calls", flush=True)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top), flush=True)


def calls(B: int, H: int, S: int, D: int, causal: bool) -> dict:
    """The profiled calls: the forward, the backward through autograd, ``attention_bwd`` directly."""
    import torch

    from tlxc.ops import attention
    from tlxc.ops.kernels.attention_bwd import attention_bwd
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    do = torch.randn_like(q)
    with torch.enable_grad():
        out, lse = attention(q, k, v, causal=causal, return_lse=True)
    return {"fwd": lambda: attention(q.detach(), k.detach(), v.detach(), causal=causal),
            "bwd_autograd": lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True),
            "bwd_direct": lambda: attention_bwd(do, q.detach(), k.detach(), v.detach(), out.detach(), lse,
                                                causal=causal, sm_scale=D ** -0.5)}


def profile(case: tuple, name: str, fn, top: int) -> None:
    import torch
    B, H, S, D, causal = case
    fn()
    torch.cuda.synchronize()
    walls = []
    prof = cProfile.Profile()
    for _ in range(20):
        torch.cuda._sleep(40_000_000)
        t0 = time.perf_counter()
        prof.enable()
        fn()
        prof.disable()
        walls.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
    walls.sort()
    print(f"== B{B} H{H} S{S} D{D}{' causal' if causal else ''} {name}: host median "
          f"{walls[10] * 1e3:.3f} ms (profiled)", flush=True)
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)

if __name__ == "__main__":
    main()
