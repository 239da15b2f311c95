"""What the cuBLAS loop of ``ops_grouped_bench.py`` runs per expert, and what tlxc's dense
matmul would take for the same expert (issue 22, session 21).

    python bench/grouped_loop_probe.py [--cases 8x2048x4096x14336,8x4096x4096x14336] [--rounds 15]

Per case (the bench's seeded uneven group sizes, B K-major as the bench): for each expert with
rows, the kernel time of ``torch.matmul`` on its rows (cuBLAS) and of ``tlxc.ops.matmul`` (its
heuristic's configuration), paired medians; cuBLAS's kernel name (torch.profiler); then the
sums beside ``tlxc.ops.grouped_matmul``'s time on the whole batch.  If the per-expert dense
sum is below the grouped kernel's time, one tile shape for every group is what the grouped
kernel loses; if cuBLAS's kernels are not 128x256, their names say which tiles it picks.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.ops_grouped_bench import group_sizes  # noqa: E402
from bench.triton_source import paired_times  # noqa: E402


def cublas_kernel(fn) -> str:
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
    return names[-1][:90] if names else "?"


def run(E: int, M: int, K: int, N: int, rounds: int) -> None:
    import torch

    from tlxc.ops import grouped_matmul, matmul
    from tlxc.ops.matmul import chosen_config
    sizes = group_sizes(E, M, "uneven")
    rows = sizes.tolist()
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = (torch.randn(E, N, K, device="cuda", dtype=torch.bfloat16) * 0.05).transpose(1, 2)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    print(f"E={E} M={M} K={K} N={N} sizes {rows}", flush=True)
    sums = {"cublas": 0.0, "tlxc": 0.0}
    start = 0
    for g, r in enumerate(rows):
        if not r:
            continue
        ag, og = a[start:start + r], out[start:start + r]
        fns = {"cublas": lambda ag=ag, og=og, g=g: torch.matmul(ag, b[g], out=og),
               "tlxc": lambda ag=ag, og=og, g=g: matmul(ag, b[g], out=og)}
        for fn in fns.values():
            fn()
        host = {}
        med = {n: statistics.median(t) for n, t in paired_times(fns, rounds, True, host).items()}
        for n in sums:
            sums[n] += med[n]
        pick = chosen_config(ag, b[g]).name
        print(f"  expert {g}: {r:5d} rows  cublas {med['cublas']:.4f} ms ({cublas_kernel(fns['cublas'])})  "
              f"tlxc {med['tlxc']:.4f} ms ({pick})  cublas/tlxc {med['cublas'] / med['tlxc']:.3f}", flush=True)
        start += r
    gpu_sizes = sizes.cuda()
    fns = {"grouped": lambda: grouped_matmul(a, b, gpu_sizes, out)}
    fns["grouped"]()
    grouped = statistics.median(paired_times(fns, rounds, True, {})["grouped"])
    print(f"  sums: cublas loop {sums['cublas']:.4f} ms, tlxc dense loop {sums['tlxc']:.4f} ms, "
          f"tlxc grouped {grouped:.4f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="8x2048x4096x14336,8x4096x4096x14336")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    for case in args.cases.split(","):
        run(*(int(v) for v in case.split("x")), args.rounds)


if __name__ == "__main__":
    main()
