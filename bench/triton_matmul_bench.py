"""Plain-Triton matmul through tlxc and through Triton, in one process (issue 19).

One source (bench/grouped_matmul_kernel.py: a grouped-order tl.dot matmul, the algorithm of
Triton's tutorial 03) is compiled by tlxc and, with its import lines swapped, by Triton
(``import triton``; Triton 3.6 on the H200 machine).  For fp16 and bf16 at 4096^3 and 8192^3:
results checked first (poisoned outputs, relative error against a float32 matmul), then
paired medians of CUDA-event timings (tlxc, Triton and cuBLAS interleaved in each round), the
ratios printed last (time ratio tlxc/Triton: > 1 means tlxc is slower).

    python bench/triton_matmul_bench.py [--sizes 4096,8192] [--dtypes fp16,bf16,fp8,fp8e5,fp32]
        [--bm 128 --bn 256 --bk 64 --warps 8 --stages 3] [--rounds 30] [--b-kmajor] [--a-mmajor]
        [--timing kernel,call] [--variants default,base,imm,all,...]

Two timings (both by default): ``kernel``, the events bracket the kernel alone (a GPU spin is
queued first, so the host's launch work overlaps it), and ``call``, from an idle GPU, so the
host's launch work is included (Triton's launcher takes ~20 µs longer than tlxc's: ~10 % of a
0.2 ms kernel, which flatters tlxc at 4096^3).

``--variants`` times several tlxc compiles of the kernel (``VARIANTS``: compile switches such as
TLXC_RING_BASE=1) side by side, each checked first, against the same Triton and cuBLAS runs.

``--b-kmajor`` multiplies by ``b = w.t()`` (w a row-major [N, K] tensor: the layout of every
nn.Linear weight, stride_bk == 1); ``--a-mmajor`` by a column-major A (stride_am == 1).

``fp8`` (e4m3) and ``fp8e5`` (e5m2) run the fp8 case of Triton's matmul tutorial: A row-major and
B = w.T of a row-major [N, K] w (K-major whatever the flags say: wgmma reads 8-bit operands
K-major only), float32 accumulation, a float16 C, BLOCK_K 128 unless ``--bk`` is given; the
reference is the float32 product of the fp8 values, the cuBLAS baseline ``torch._scaled_mm``
with unit scales (e4m3 only; left out where torch lacks it).

``fp32`` multiplies float32 operands at tl.dot's default precision (tf32; BLOCK_K 32 unless ``--bk``),
with cuBLAS at tf32 too (``torch.backends.cuda.matmul.allow_tf32``), a float32 C.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from triton_source import TIMINGS, load_source, paired_times, pinned_launch  # noqa: E402

# tlxc compile switches measured against each other in one process (``--variants``; docs/performance.md,
# "Matmul: the loop Triton's way", session 11): each variant is the kernel compiled with these set.
VARIANTS = {
    "default": {},
    "counter": {"TLXC_RING_COUNTER": "1"},
    "base": {"TLXC_RING_BASE": "1"},
    "imm": {"TLXC_SHARED_IMM": "1"},
    "base+imm": {"TLXC_RING_BASE": "1", "TLXC_SHARED_IMM": "1"},
    "all": {"TLXC_RING_COUNTER": "1", "TLXC_RING_BASE": "1", "TLXC_SHARED_IMM": "1"},
    "all-nofence": {"TLXC_RING_COUNTER": "1", "TLXC_RING_BASE": "1", "TLXC_SHARED_IMM": "1",
                    "TLXC_CPASYNC_FENCE": "0"},
    "nofence": {"TLXC_CPASYNC_FENCE": "0"},
    "no-hoist": {"TLXC_SKIP_PASSES": "hoist-conversions"},     # before carry-converted (session 11)
    "all-no-hoist": {"TLXC_RING_COUNTER": "1", "TLXC_RING_BASE": "1", "TLXC_SHARED_IMM": "1",
                     "TLXC_SKIP_PASSES": "hoist-conversions"},
}

KERNELS = {"grouped": ("grouped_matmul_kernel.py", "grouped_matmul"),
           "persistent": ("persistent_matmul_kernel.py", "persistent_matmul")}


def triton_kernel(which: str = "grouped"):
    """The same kernel source, compiled by Triton."""
    filename, name = KERNELS[which]
    return getattr(load_source(filename, triton=True), name)


def tlxc_kernel(which: str = "grouped"):
    filename, name = KERNELS[which]
    return getattr(load_source(filename, triton=False), name)


def launcher(kernel, a, b, c, args, env=None):
    m, k = a.shape
    n = b.shape[1]
    tiles = ((m + args.bm - 1) // args.bm) * ((n + args.bn - 1) // args.bn)
    extra = {}
    if args.kernel == "persistent":
        import torch
        extra["PROGRAMS"] = min(tiles, torch.cuda.get_device_properties(0).multi_processor_count)
    grid = (extra.get("PROGRAMS", tiles),)

    call = ((a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)),
            dict(BLOCK_M=args.bm, BLOCK_N=args.bn, BLOCK_K=args.bk, GROUP_M=8, num_warps=args.warps,
                 num_stages=args.stages, **extra))
    if env is not None:              # a tlxc variant (--variants): its compile, launched directly
        return pinned_launch(kernel, env, grid, *call[0], **call[1])

    def run():
        kernel[grid](*call[0], **call[1])
    return run


def cublas(a, b, fp8: bool):
    """The cuBLAS call for the same product: torch.matmul, or for fp8 torch._scaled_mm (unit
    scales, float16 out; B column-major, as b = w.T is), None where torch cannot run it."""
    import torch
    if not fp8:
        return lambda: torch.matmul(a, b)
    scaled_mm = getattr(torch, "_scaled_mm", None)
    if scaled_mm is None:
        return None
    one = torch.ones((), device="cuda", dtype=torch.float32)

    def run():
        return scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float16)
    try:
        run()
    except (RuntimeError, TypeError, ValueError) as exc:     # e.g. e5m2 x e5m2, which cuBLASLt lacks
        print(f"no cuBLAS fp8 baseline for {a.dtype} x {b.dtype}: {str(exc).splitlines()[0]}")
        return None
    return run


def check(name, run, c, ref) -> None:
    c.fill_(float("nan"))
    run()
    import torch
    torch.cuda.synchronize()
    rel = ((c.float() - ref).norm() / ref.norm()).item()
    if not rel < 1e-2:                            # NaN (poison left) fails too
        raise SystemExit(f"{name}: wrong result (relative error {rel})")


def main() -> None:
    import torch
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4096,8192")
    parser.add_argument("--dtypes", default="fp16,bf16")
    parser.add_argument("--bm", type=int, default=128)
    parser.add_argument("--bn", type=int, default=256)
    parser.add_argument("--bk", type=int, default=None, help="default 64, 128 for fp8")
    parser.add_argument("--warps", type=int, default=8)
    parser.add_argument("--stages", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--b-kmajor", action="store_true", help="B = w.t() of a row-major [N, K] w")
    parser.add_argument("--a-mmajor", action="store_true", help="A column-major (stride_am == 1)")
    parser.add_argument("--kernel", choices=sorted(KERNELS), default="grouped",
                        help="grouped: tutorial 03's one tile per program; persistent: tutorial 09's flat loop, "
                             "one program per SM (TLXC_EPILOGUE_OVERLAP=0 for tlxc's earlier epilogue wait)")
    parser.add_argument("--k", type=int, default=None, help="K (default: the size; tutorial 09 validates K=512)")
    parser.add_argument("--timing", default="kernel,call",
                        help="kernel: the host's launch work hidden behind a GPU spin; call: from an idle GPU, "
                             "launch work included (the measurements before 2026-12-03 session 10)")
    parser.add_argument("--variants", default=None,
                        help="comma-separated tlxc compile variants timed side by side in one process, each "
                             f"against the same Triton and cuBLAS runs ({', '.join(VARIANTS)}); default: "
                             "the tlxc kernel as the environment compiles it")
    args = parser.parse_args()
    variants = args.variants.split(",") if args.variants else None
    if variants and not set(variants) <= set(VARIANTS):
        parser.error(f"--variants: {args.variants!r}; the variants are {', '.join(VARIANTS)}")
    if not set(args.timing.split(",")) <= set(TIMINGS):
        parser.error(f"--timing: {args.timing!r}; the timings are {', '.join(TIMINGS)}")
    ours, theirs = tlxc_kernel(args.kernel), triton_kernel(args.kernel)
    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2,
              "fp32": torch.float32}
    torch.backends.cuda.matmul.allow_tf32 = True     # fp32: cuBLAS at tf32, as tl.dot's default precision
    layout = f"A {'M' if args.a_mmajor else 'K'}-major, B {'K' if args.b_kmajor else 'N'}-major"
    bk = args.bk
    print(f"card: {torch.cuda.get_device_name()}, config {args.bm}x{args.bn}x{bk or '64/128 (fp8)'}, "
          f"{args.warps} warps, {args.stages} stages, {layout} (fp8: A K-major, B K-major)")
    lines = []
    for size in (int(s) for s in args.sizes.split(",")):
        kdim = args.k or size
        shape = f"{size}^3" if kdim == size else f"{size}x{size}x{kdim}"
        for dname in args.dtypes.split(","):
            dtype = dtypes[dname]
            fp8 = dname.startswith("fp8")
            args.bk = bk or (128 if fp8 else 32 if dname == "fp32" else 64)
            case_layout = "A K-major, B K-major" if fp8 else layout
            if fp8:                                    # the tutorial's fp8 operands: a row-major, b = w.T
                a = torch.randn(size, kdim, device="cuda").to(dtype)
                b = torch.randn(size, kdim, device="cuda").to(dtype).t()
                out_dtype = torch.float16
            else:
                a = torch.randn(size, kdim, device="cuda", dtype=dtype)
                b = torch.randn(kdim, size, device="cuda", dtype=dtype)
                if args.a_mmajor:
                    a = a.t().contiguous().t()
                if args.b_kmajor:
                    b = b.t().contiguous().t()         # b = w.t(), w row-major [N, K]
                out_dtype = dtype
            ref = a.float() @ b.float()
            c_ours, c_theirs = (torch.empty(size, size, device="cuda", dtype=out_dtype) for _ in range(2))
            if variants:       # one fresh kernel object per variant: each keeps its own compile
                runs = {f"tlxc:{v}": launcher(tlxc_kernel(args.kernel), a, b, c_ours, args, VARIANTS[v])
                        for v in variants}
            else:
                runs = {"tlxc": launcher(ours, a, b, c_ours, args)}
            runs.update({"triton": launcher(theirs, a, b, c_theirs, args), "cublas": cublas(a, b, fp8)})
            if runs["cublas"] is None:
                del runs["cublas"]
            for name in runs:
                if name.startswith("tlxc"):
                    check(name, runs[name], c_ours, ref)
            check("triton", runs["triton"], c_theirs, ref)
            del ref
            for fn in runs.values():                   # warm-up
                for _ in range(5):
                    fn()
            flops = 2 * size * size * kdim
            for timing in args.timing.split(","):
                times = paired_times(runs, args.rounds, hide_launch=timing == "kernel")
                med = {name: statistics.median(t) for name, t in times.items()}
                for name, ms in med.items():
                    print(f"{dname} {shape} {timing:6s} {name:7s} {ms:8.3f} ms  {flops / ms / 1e9:7.1f} TFLOP/s")
                for name in (n for n in med if n.startswith("tlxc")):
                    line = (f"{dname} {shape} {args.kernel} ({case_layout}, BK {args.bk}, {args.stages} stages, "
                            f"{timing} time): {name}/Triton time {med[name] / med['triton']:.3f}")
                    if "cublas" in med:
                        line += (f", tlxc speed vs cuBLAS {med['cublas'] / med[name]:.3f}, "
                                 f"Triton speed vs cuBLAS {med['cublas'] / med['triton']:.3f}")
                    else:
                        line += ", no cuBLAS baseline"
                    lines.append(line)
    print("\n".join(["", "ratios:"] + lines))


if __name__ == "__main__":
    main()
