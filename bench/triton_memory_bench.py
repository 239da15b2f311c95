"""Memory-bound plain-Triton kernels through tlxc and through Triton, in one process (issue 19).

One source (bench/memory_kernels.py: vector add, SwiGLU/GeGLU-style gated rows, softmax and
RMSNorm over many rows) is compiled by tlxc and, with its import lines swapped, by Triton.
Each case moves >= 256 MB.  Results are checked first (poisoned outputs against torch), then
paired medians of CUDA-event timings (tlxc and Triton back to back each round); the achieved
bandwidth is compared with a measured device-to-device copy (kernel time).  Both timings of
bench/triton_source.py by default: ``kernel`` (the host's launch work hidden) and ``call``.  Ratios printed last:
time tlxc/Triton (> 1: tlxc slower) and tlxc bandwidth as a fraction of the copy's.

    python bench/triton_memory_bench.py [--rounds 30] [--only add,swiglu,...] [--timing kernel,call]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from triton_source import TIMINGS, load_source, paired_times  # noqa: E402


def paired(fns: dict, rounds: int, timing: str = "kernel") -> dict:
    for fn in fns.values():
        for _ in range(5):
            fn()
    times = paired_times(fns, rounds, hide_launch=timing == "kernel")
    return {name: statistics.median(t) for name, t in times.items()}


def row_warps(block: int) -> int:
    """Liger-Kernel's rule of thumb for one-row-per-program kernels."""
    return 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4


def cases(torch):
    """(name, bytes moved, make(module, out) -> launch fn, reference, output)."""
    dev = "cuda"
    n = 1 << 26                                        # fp32 add: 3 x 256 MB
    x, y = torch.randn(n, device=dev), torch.randn(n, device=dev)
    yield ("add fp32 64M", 3 * 4 * n, torch.empty_like(x), x + y,
           lambda m, o: lambda: m.add_1d[(n // 1024,)](x, y, o, n, BLOCK=1024, num_warps=4))
    rows, cols = 8192, 14336                           # an MLP's gate/up at a LLaMA width, bf16
    a = torch.randn(rows, cols, device=dev, dtype=torch.bfloat16)
    b = torch.randn(rows, cols, device=dev, dtype=torch.bfloat16)
    block = 16384
    yield ("swiglu bf16 8192x14336", 3 * 2 * rows * cols, torch.empty_like(a),
           (torch.nn.functional.silu(a.float()) * b.float()),
           lambda m, o: lambda: m.silu_gate_rows[(rows,)](a, b, o, cols, n_cols=cols, BLOCK=block,
                                                          num_warps=row_warps(block)))
    yield ("geglu bf16 8192x14336", 3 * 2 * rows * cols, torch.empty_like(a),
           (torch.nn.functional.gelu(a.float(), approximate="tanh") * b.float()),
           lambda m, o: lambda: m.gelu_gate_rows[(rows,)](a, b, o, cols, n_cols=cols, BLOCK=block,
                                                          num_warps=row_warps(block)))
    rows, cols = 65536, 1000                           # many short rows, not a power of two
    s = torch.randn(rows, cols, device=dev)
    yield ("softmax fp32 65536x1000", 2 * 4 * rows * cols, torch.empty_like(s), torch.softmax(s, dim=1),
           lambda m, o: lambda: m.softmax_rows[(rows,)](s, o, cols, cols, BLOCK=1024, num_warps=4))
    rows, cols = 16384, 8192
    r = torch.randn(rows, cols, device=dev, dtype=torch.bfloat16)
    w = torch.randn(cols, device=dev, dtype=torch.bfloat16)
    ref = r.float() * torch.rsqrt(r.float().pow(2).mean(1, keepdim=True) + 1e-6) * w.float()
    yield ("rmsnorm bf16 16384x8192", 2 * 2 * rows * cols, torch.empty_like(r), ref,
           lambda m, o: lambda: m.rms_norm_rows[(rows,)](r, w, o, cols, cols, 1e-6, BLOCK=8192,
                                                         num_warps=row_warps(8192)))


def main() -> None:
    import torch
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--only", default="")
    parser.add_argument("--timing", default="kernel,call",
                        help="kernel: the host's launch work hidden behind a GPU spin; call: from an idle GPU")
    args = parser.parse_args()
    timings = args.timing.split(",")
    if not set(timings) <= set(TIMINGS):
        parser.error(f"--timing: {args.timing!r}; the timings are {', '.join(TIMINGS)}")
    ours, theirs = load_source("memory_kernels.py", False), load_source("memory_kernels.py", True)
    src = torch.empty(1 << 28, device="cuda", dtype=torch.float32)        # 1 GiB
    dst = torch.empty_like(src)
    copy_ms = paired({"copy": lambda: dst.copy_(src)}, args.rounds)["copy"]
    copy_gbs = 2 * src.numel() * 4 / copy_ms / 1e6
    print(f"card: {torch.cuda.get_device_name()}; device-to-device copy {copy_gbs:.0f} GB/s")
    lines = []
    for name, nbytes, out, ref, make in cases(torch):
        if args.only and not any(key in name for key in args.only.split(",")):
            continue
        outs = {"tlxc": out, "triton": torch.empty_like(out)}
        fns = {"tlxc": make(ours, outs["tlxc"]), "triton": make(theirs, outs["triton"])}
        for who, fn in fns.items():
            outs[who].fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            rel = ((outs[who].float() - ref).norm() / ref.norm()).item()
            tol = 1e-2 if out.dtype == torch.bfloat16 else 1e-5
            if not rel < tol:                                  # NaN (poison left) fails too
                raise SystemExit(f"{name}: {who} wrong (relative error {rel})")
        del ref
        for timing in timings:
            med = paired(fns, args.rounds, timing)
            for who, ms in med.items():
                print(f"{name:26s} {timing:6s} {who:7s} {ms:8.3f} ms  {nbytes / ms / 1e6:7.0f} GB/s")
            lines.append(f"{name:26s} {timing:6s} tlxc/Triton time {med['tlxc'] / med['triton']:.3f}   "
                         f"tlxc {nbytes / med['tlxc'] / 1e6 / copy_gbs:.2f} of copy, "
                         f"Triton {nbytes / med['triton'] / 1e6 / copy_gbs:.2f} of copy")
    print("\n".join(["", "ratios:"] + lines))


if __name__ == "__main__":
    sys.exit(main())
