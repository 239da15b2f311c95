"""tlxc.ops.matmul against cuBLAS over the issue-22 sweep: every configuration on every shape.

One process, one GPU.  For each shape (squares 256-16384; Llama-style M in {1, 16, 64, 128,
512, 2048, 8192} x (N, K) in {(4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096)}
with B = w.t() as nn.Linear stores it; odd sizes; transposed B): every configuration that
can run it (``matmul_configs.candidates``) and the heuristic's choice are checked against
cuBLAS's result (NaN-poisoned outputs, relative error < 1e-2), then timed in paired rounds
with ``torch.matmul`` (each round times cuBLAS and every configuration back to back; kernel
time: a GPU spin hides the host's launch work, ``--timing call`` counts it).  Per shape one
line: cuBLAS, the heuristic's pick, the best configuration.  Last: the ratios (cuBLAS time /
tlxc time, > 1 means faster than cuBLAS), their geometric means, and with ``--table`` the
``MEASURED`` rows for ``tlxc/ops/matmul_configs.py`` (best configuration per shape).

    python bench/ops_matmul_bench.py [--table] [--quick] [--only-heuristic] [--fp8]
        [--timing kernel|call] [--budget-s 330] [--jobs 8]
        [--shapes 512,1024,3072,5000x3000x2000,1000x1240x776T] [--configs NAME,NAME,...]

``--shapes``: only these shapes (``S`` is S^3, ``MxNxK`` with B N-major, a trailing ``T`` for
B = w.t(), K-major); ``--configs``: time only these configurations (those that can run the
shape) besides the heuristic's pick, which is always timed.
Lines with M <= 128 also give the rate at which cuBLAS and the best configuration read B
(N x K x bytes per element over the time): the bar of the memory-bound decode shapes.

Compiles first run in ``--jobs`` processes (sm_90a, CPU tensors, the disk cache), so the timed
process loads cubins.  Rounds per shape shrink with the shape's cost so that the whole run
stays near ``--budget-s`` (default 270 s on an H200).  Results also go to
``$OUT/ops_matmul_bench.json`` when ``OUT`` is set.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

LLAMA_NK = ((4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096))


def sweep(quick: bool = False, fp8: bool = False) -> list[tuple[int, int, int, bool]]:
    """(M, N, K, b_kmajor) of the issue-22 sweep."""
    if fp8:
        return [(s, s, s, True) for s in (1024, 2048, 4096, 8192)] + \
               [(m, 4096, 4096, True) for m in (128, 2048, 8192)] + [(8192, 14336, 4096, True)]
    squares = (256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 16384)
    ms = (1, 16, 64, 128, 512, 2048, 8192)
    if quick:
        squares, ms = (512, 4096), (1, 128, 2048)
    shapes = [(s, s, s, False) for s in squares]
    shapes += [(m, n, k, True) for m in ms for n, k in LLAMA_NK]
    shapes += [(5000, 3000, 2000, False), (4095, 4097, 4093, False), (1000, 1240, 776, True),
               (128, 8192, 8192, False), (64, 8192, 8192, False), (64, 4096, 4096, False)]
    shapes += [(s, s, s, True) for s in ((1024, 4096, 8192) if not quick else (4096,))]
    if not quick:   # token counts that are no multiple of a tile, against Llama's weights (session 21)
        shapes += [(297, 14336, 4096, True), (600, 14336, 4096, True), (1213, 4096, 4096, True),
                   (1213, 14336, 4096, True)]
    return shapes


def parse_shapes(text: str) -> list[tuple[int, int, int, bool]]:
    """``--shapes``: comma-separated ``S`` (S x S x S) or ``MxNxK``, a trailing ``T`` for a
    K-major B (``w.t()``)."""
    shapes = []
    for item in text.split(","):
        item = item.strip()
        b_kmajor = item.upper().endswith("T")
        dims = item[:-1] if b_kmajor else item
        try:
            sizes = [int(x) for x in dims.lower().split("x")]
        except ValueError:
            raise SystemExit(f"--shapes: {item!r} is not S or MxNxK (optionally followed by T)") from None
        if len(sizes) == 1:
            sizes *= 3
        if len(sizes) != 3 or min(sizes) < 1:
            raise SystemExit(f"--shapes: {item!r} is not S or MxNxK with sizes >= 1")
        shapes.append((*sizes, b_kmajor))
    return shapes


def parse_configs(text: str | None, fp8: bool) -> list[str] | None:
    """``--configs``: names of ``matmul_configs.CONFIGS`` (None: every candidate)."""
    if text is None:
        return None
    from tlxc.ops import CONFIGS
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        raise SystemExit(f"--configs: unknown configuration(s) {unknown}; see tlxc/ops/matmul_configs.py")
    return names


def _operands(M, N, K, b_kmajor, dtype, device):
    import torch
    if dtype.is_floating_point and dtype.itemsize == 1:
        a = (torch.randn(M, K, device=device) * 4).to(dtype) if device == "cuda" else \
            torch.empty(M, K, dtype=dtype)
        w = (torch.randn(N, K, device=device) * 4).to(dtype) if device == "cuda" else torch.empty(N, K, dtype=dtype)
        return a, w.t()
    make = torch.randn if device == "cuda" else torch.empty
    a = make(M, K, device=device, dtype=dtype)
    b = make(N, K, device=device, dtype=dtype).t() if b_kmajor else make(K, N, device=device, dtype=dtype)
    return a, b


def _compile_worker(job):
    """Compile (sm_90a, CPU tensors) config ``name`` for every shape: fills the disk cache
    (with ``only_picks``, only on the shapes whose heuristic picks it)."""
    name, shapes, fp8, only_picks, promote = job      # only_picks: compile ``name`` only where it is the pick
    import torch

    from tlxc.ops import matmul_configs as cfgs
    from tlxc.ops.matmul import _problem, compile_config
    dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
    done = 0
    for M, N, K, bk in shapes:
        a, b = _operands(M, N, K, bk, dtype, "cpu")
        out = torch.empty(M, N, dtype=torch.bfloat16)
        p = _problem(a, b, out, promote=promote)
        if cfgs.supports(cfgs.CONFIGS[name], p) is not None:
            continue
        if only_picks and cfgs.choose_config(p).name != name:
            continue
        try:
            compile_config(name, a, b, **({"use_fast_accum": False} if promote else {}))
            done += 1
        except Exception as exc:               # reported again (and counted) by the timed run
            return name, f"compile failed: {type(exc).__name__}: {str(exc)[:200]}"
    return name, f"{done} compiled"


def precompile(shapes, fp8: bool, jobs: int, only_picks: bool = False, configs: list[str] | None = None,
               promote: bool = False) -> None:
    import multiprocessing as mp

    from tlxc.ops import CONFIGS
    names = [n for n, c in CONFIGS.items() if c.fp8 == fp8 or c.kernel == "dot"]
    # with --configs: those on every shape, every other configuration only where it is the pick
    work = [(n, shapes, fp8, only_picks or (configs is not None and n not in configs), promote) for n in names]
    start = time.time()
    with mp.get_context("spawn").Pool(jobs) as pool:
        for name, status in pool.imap_unordered(_compile_worker, work):
            if "failed" in status:
                print(f"  precompile {name}: {status}", flush=True)
    print(f"precompiled {len(names)} configurations in {jobs} processes: {time.time() - start:.1f} s", flush=True)


def main() -> None:
    import torch

    from bench.triton_source import event_ms
    from tlxc.ops import matmul
    from tlxc.ops import matmul_configs as cfgs
    from tlxc.ops.matmul import _problem

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", action="store_true", help="print MEASURED rows (best config per shape)")
    parser.add_argument("--quick", action="store_true", help="a dozen shapes")
    parser.add_argument("--fp8", action="store_true", help="fp8 e4m3 against torch._scaled_mm instead")
    parser.add_argument("--fp8-baseline", choices=("fast", "precise"), default="fast",
                        help="torch._scaled_mm's accumulation: fast (use_fast_accum, the wgmma accumulator alone, "
                             "as tlxc accumulates by default) or precise (cuBLAS promotes partial sums to float32)")
    parser.add_argument("--precise", action="store_true",
                        help="fp8: tlxc with use_fast_accum=False (partial sums added in float32; pair it with "
                             "--fp8-baseline precise)")
    parser.add_argument("--only-heuristic", action="store_true", help="time only the heuristic's choice")
    parser.add_argument("--timing", choices=("kernel", "call"), default="kernel")
    parser.add_argument("--budget-s", type=float, default=270.0)
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--shapes", help="only these shapes: S or MxNxK, trailing T = B K-major (e.g. 512,1000x1240x776T)")
    parser.add_argument("--configs", help="time only these configurations (comma-separated) and the heuristic's pick")
    args = parser.parse_args()
    shapes = parse_shapes(args.shapes) if args.shapes else sweep(args.quick, args.fp8)
    only = parse_configs(args.configs, args.fp8)
    t0 = time.time()
    if args.jobs > 1:
        precompile(shapes, args.fp8, args.jobs, args.only_heuristic, only, promote=args.fp8 and args.precise)
    hide = args.timing == "kernel"
    dtype = torch.float8_e4m3fn if args.fp8 else torch.bfloat16
    card = torch.cuda.get_device_name()
    mode = "precise" if args.precise else "fast"
    what = f"fp8 e4m3 (tlxc {mode}) vs torch._scaled_mm ({args.fp8_baseline} accumulation)" if args.fp8 \
        else "bf16 vs torch.matmul"
    print(f"card: {card}, torch {torch.__version__}, {what}, "
          f"{len(shapes)} shapes, {args.timing} time", flush=True)
    results = []
    for index, (M, N, K, bk) in enumerate(shapes):
        # rounds: the budget left, shared by the shapes left (checks and first calls count too)
        per_shape_s = max(1.0, (args.budget_s - (time.time() - t0)) / (len(shapes) - index))
        torch.manual_seed(M * 7 + N * 3 + K)
        a, b = _operands(M, N, K, bk, dtype, "cuda")
        if args.fp8:
            one = torch.ones((), device="cuda")
            scale = torch.ones(1, device="cuda")

            def cublas(a=a, b=b, one=one):
                return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                        use_fast_accum=args.fp8_baseline == "fast")
            kw = {"scale_a": scale, "scale_b": scale}
            if args.precise:
                kw["use_fast_accum"] = False
        else:
            def cublas(a=a, b=b):
                return torch.matmul(a, b)
            kw = {}
        shape_t0 = time.time()
        ref = cublas().float()
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        p = _problem(a, b, out, promote=args.fp8 and args.precise)
        pick = cfgs.choose_config(p)
        names = [pick.name] if args.only_heuristic else [c.name for c in cfgs.candidates(p)]
        if only is not None:
            names = [pick.name] + [n for n in names if n in only and n != pick.name]
        fns, failed = {"cublas": cublas}, []
        for name in names:
            out.fill_(float("nan"))
            try:
                matmul(a, b, out, config=name, **kw)
                torch.cuda.synchronize()
                rel = ((out.float() - ref).norm() / ref.norm()).item()
            except Exception as exc:                  # keep going: one bad config is one line
                failed.append(f"{name} ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})")
                continue
            if not rel < 1e-2:
                failed.append(f"{name} (wrong: rel. error {rel:.2e})")
                continue
            fns[name] = (lambda name=name, a=a, b=b, out=out, kw=kw: matmul(a, b, out, config=name, **kw))
        if pick.split_k > 1 and pick.name in fns:     # the same config with the separate reduction kernel
            def two_kernels(name=pick.name, a=a, b=b, out=out, kw=kw):
                os.environ["TLXC_OPS_SPLITK_REDUCE"] = "1"
                try:
                    matmul(a, b, out, config=name, **kw)
                finally:
                    del os.environ["TLXC_OPS_SPLITK_REDUCE"]
            fns[pick.name + "+reduce_kernel"] = two_kernels
        del ref
        one_ms = event_ms(cublas, hide)
        spent_s = time.time() - shape_t0
        rounds = int(max(3, min(25, (per_shape_s - spent_s) * 1e3 / ((max(one_ms, 0.02) * 1.5 + 1.0) * len(fns)))))
        for fn in fns.values():
            fn()
        times = {n: [] for n in fns}
        for _ in range(rounds):
            for n, fn in fns.items():
                times[n].append(event_ms(fn, hide))
        med = {n: statistics.median(t) for n, t in times.items()}
        base = med.pop("cublas")
        best = min((n for n in med if "+" not in n), key=med.get, default=None)
        flops = 2 * M * N * K
        b_tbs = N * K * b.element_size() / 1e9          # B's bytes / ms / 1e9 = TB/s
        bw = f"B at {b_tbs / base:.2f}" + (f"/{b_tbs / med[best]:.2f}" if best else "") + " TB/s "
        row = {"shape": [M, N, K], "b_kmajor": bk, "kind": p.kind, "cublas_ms": base, "rounds": rounds,
               "configs": {n: base / ms for n, ms in med.items()}, "pick": pick.name,
               "pick_ratio": base / med[pick.name] if pick.name in med else None,
               "best": best, "best_ratio": base / med[best] if best else None, "failed": failed}
        results.append(row)
        pr = f"{row['pick_ratio']:.3f}" if row["pick_ratio"] else "FAILED"
        br = f"{row['best_ratio']:.3f}" if best else "-"
        print(f"{M:6d}x{N:6d}x{K:6d} B {'K' if bk else 'N'}-major  cuBLAS {base:8.4f} ms "
              f"({flops / base / 1e9:6.1f} TFLOP/s) {bw if M <= 128 else ''} pick {pick.name:26s} {pr}  best {best} {br}  "
              f"[{rounds} rounds, {len(fns) - 1} configs]", flush=True)
        for f in failed:
            print(f"    FAILED {f}", flush=True)
        del a, b, out, fns
        torch.cuda.empty_cache()

    def geomean(xs):
        xs = [x for x in xs if x]
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")

    picks = [r["pick_ratio"] for r in results]
    bests = [r["best_ratio"] for r in results]
    print("\nper-configuration ratios (cuBLAS time / config time; '-' = cannot run):")
    names = sorted({n for r in results for n in r["configs"]})
    for r in results:
        M, N, K = r["shape"]
        cells = " ".join(f"{n}={r['configs'][n]:.2f}" for n in names if n in r["configs"])
        print(f"  {M}x{N}x{K}{'T' if r['b_kmajor'] else ''}: {cells}")
    if args.table:
        print("\nMEASURED = [   # bench/ops_matmul_bench.py --table, " + card + ", " + time.strftime("%Y-%m-%d"))
        for r in results:
            if r["best"]:
                M, N, K = r["shape"]
                print(f"    ({M}, {N}, {K}, {r['kind']!r}, {r['best']!r}, \"{card.split()[-1]} "
                      f"{time.strftime('%Y-%m-%d')} {r['best_ratio']:.2f}x\"),")
        print("]")
    print(f"\nratios vs {'torch._scaled_mm' if args.fp8 else 'cuBLAS'} ({args.timing} time, paired medians):")
    for r in results:
        M, N, K = r["shape"]
        print(f"  {M}x{N}x{K} B {'K' if r['b_kmajor'] else 'N'}-major: heuristic {r['pick']} "
              f"{(r['pick_ratio'] or 0):.3f}, best {r['best']} {(r['best_ratio'] or 0):.3f}")
    n_fail = sum(len(r["failed"]) for r in results)
    print(f"geomean heuristic {geomean(picks):.3f} (min {min(x or 0 for x in picks):.3f}), "
          f"geomean best-per-shape {geomean(bests):.3f} (min {min(x or 0 for x in bests):.3f}), "
          f"{len(results)} shapes, {n_fail} failed config runs, {time.time() - t0:.0f} s")
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "ops_matmul_bench" + ("_fp8" if args.fp8 else "") + ".json"),
                  "w") as f:
            json.dump({"card": card, "timing": args.timing, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
