"""Which kernel cuBLAS runs for a GEMM shape, and tlxc's pick beside it (issue 22, session 33).

    python bench/cublas_kernel_probe.py [--shapes 128x4096x4096T,1024] [--fp8] [--rounds 20]

Per shape (``ops_matmul_bench.py``'s ``--shapes`` spelling, trailing ``T``: B K-major): one call of
cuBLAS (``torch.matmul``, or ``torch._scaled_mm`` with fast accumulation under ``--fp8``) and one
of ``tlxc.ops.matmul`` under ``torch.profiler``. From the trace each kernel's name, grid, block,
registers a thread and dynamic shared memory; then both calls' paired median kernel times. A
cuBLAS kernel's name spells its tile (``nvjet_sm90_tst_<BM>x<BN>_<BK>x<stages>_<cluster>``), so the
table says which tile shape, stage count, cluster and split cuBLAS chose where tlxc loses.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from ops_matmul_bench import _operands, parse_shapes  # noqa: E402
from triton_source import paired_times  # noqa: E402

DEFAULT_BF16 = "64x4096x4096T,64x4096x4096,1024T,297x14336x4096T,1213x4096x4096T,5000x3000x2000,128x14336x4096T"
DEFAULT_FP8 = "128x4096x4096T,1024T,128x8192x8192T,2048x4096x4096T"


def kernels_of(fn) -> list[dict]:
    """The CUDA kernels one call of ``fn`` launches, from a chrome trace of torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    os.unlink(path)
    found = []
    for event in trace.get("traceEvents", []):
        if event.get("cat") != "kernel":
            continue
        args = event.get("args", {})
        found.append({"name": event.get("name", "?"), "us": event.get("dur", 0.0), "grid": args.get("grid"),
                      "block": args.get("block"), "regs": args.get("registers per thread"),
                      "smem": args.get("shared memory")})
    return found


def main() -> None:
    import torch

    from tlxc.ops import matmul
    from tlxc.ops.matmul import chosen_config
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=None)
    parser.add_argument("--fp8", action="store_true")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    shapes = parse_shapes(args.shapes or (DEFAULT_FP8 if args.fp8 else DEFAULT_BF16))
    dtype = torch.float8_e4m3fn if args.fp8 else torch.bfloat16
    rows = []
    for M, N, K, bk in shapes:
        torch.manual_seed(M + N + K)
        a, b = _operands(M, N, K, bk, dtype, "cuda")
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        if args.fp8:
            one = torch.ones((), device="cuda")
            scale = torch.ones(1, device="cuda")

            def cublas(a=a, b=b, one=one):
                return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)

            def ours(a=a, b=b, out=out, scale=scale):
                return matmul(a, b, out, scale_a=scale, scale_b=scale)
        else:
            def cublas(a=a, b=b):
                return torch.matmul(a, b)

            def ours(a=a, b=b, out=out):
                return matmul(a, b, out)
        label = f"{M}x{N}x{K}{'T' if bk else ''}"
        pick = chosen_config(a, b).name
        print(f"{label}  tlxc pick {pick}", flush=True)
        for who, fn in (("cublas", cublas), ("tlxc", ours)):
            for k in kernels_of(fn):
                print(f"  {who:6s} {k['us']:8.1f} us grid {k['grid']} block {k['block']} regs {k['regs']} "
                      f"smem {k['smem']}  {k['name'][:110]}", flush=True)
        med = {n: statistics.median(t) for n, t in
               paired_times({"cublas": cublas, "tlxc": ours}, args.rounds, True, {}).items()}
        rows.append((label, med["cublas"], med["tlxc"], pick))
    print("\nshape                 cublas ms   tlxc ms   cublas/tlxc  tlxc pick")
    for label, c, t, pick in rows:
        print(f"{label:20s} {c:10.4f} {t:9.4f} {c / t:12.3f}  {pick}")


if __name__ == "__main__":
    main()
