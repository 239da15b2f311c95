"""Probe the Hopper GEMM examples configuration by configuration, each in its
own subprocess under a hard timeout (a wrong descriptor or barrier hangs
rather than crashes), so one bad configuration costs its timeout, not the run.

    python -m bench.gemm_probe [--timeout S] [--size N] [CONFIG ...]

CONFIG is ``kernel:key=value,...``, kernel ``ws`` (hopper_gemm_ws.matmul_ws),
``pp`` (hopper_gemm_ws_pingpong.matmul_ws_pingpong) or ``fp8``
(hopper_gemm_fp8.matmul_fp8, against torch._scaled_mm); keys are the entry
point's keyword arguments (block_m, block_n, block_k, num_stages, group_m), and ``fp16=1`` for float16
inputs (bfloat16 otherwise).
Each configuration is checked against a float32 product on an odd shape and
on N×N×N (poisoned output, relative error < 1e-2), then timed against
torch.matmul on N×N×N (median of do_bench).  One line per configuration;
the table is printed last and written to ``$OUT/gemm_probe.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = ["ws:", "ws:block_n=64", "pp:"]


def child(config: str, size: int) -> dict:
    """Check one configuration on an odd shape and on size^3, then time it against its baseline."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import torch
    from triton.testing import do_bench

    kernel, _, args = config.partition(":")
    kwargs = {k: int(v) for k, v in (kv.split("=") for kv in args.split(",") if kv)}
    if kernel == "fp8":
        from hopper_gemm_fp8 import fp8_inputs, matmul_fp8

        def case(m, n, k):
            a, b_nk, sa, sb = fp8_inputs(m, n, k, "cuda")
            out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            return (lambda: matmul_fp8(a, b_nk, sa, sb, out, **kwargs), out,
                    (a.float() @ b_nk.float().t()) * (sa * sb),
                    lambda: torch._scaled_mm(a, b_nk.t(), sa, sb, out_dtype=torch.bfloat16))
        odd = (1000, 1240, 784)
    elif kernel in ("ws", "pp"):
        if kernel == "ws":
            from hopper_gemm_ws import matmul_ws as matmul
        else:
            from hopper_gemm_ws_pingpong import matmul_ws_pingpong as matmul
        dtype = {0: torch.bfloat16, 1: torch.float16}[kwargs.pop("fp16", 0)]

        def case(m, n, k):
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(k, n, device="cuda", dtype=dtype)
            out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
            return lambda: matmul(a, b, out, **kwargs), out, a.float() @ b.float(), lambda: torch.matmul(a, b)
        odd = (1000, 1240, 776)
    else:
        raise SystemExit(f"unknown kernel {kernel!r} in {config!r}")
    result = {"config": config}
    for m, n, k in (odd, (size, size, size)):
        run, out, ref, baseline = case(m, n, k)
        run()
        torch.cuda.synchronize()
        err = ((out.float() - ref).norm() / ref.norm()).item()
        result[f"err {m}x{n}x{k}"] = err
        if not err < 1e-2:
            result["status"] = f"WRONG ({m}x{n}x{k}: rel err {err:.3g})"
            return result
    flops = 2 * size ** 3
    t = do_bench(run, warmup=50, rep=300, return_mode="median")
    c = do_bench(baseline, warmup=50, rep=300, return_mode="median")
    result.update(status="ok", tflops=flops / t / 1e9, cublas=flops / c / 1e9, ratio=c / t)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", default=DEFAULT)
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.size)), flush=True)
        return
    rows = []
    for config in args.configs:
        cmd = [sys.executable, "-m", "bench.gemm_probe", "--child", config, "--size", str(args.size)]
        try:
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                                  timeout=args.timeout, check=False)
        except subprocess.TimeoutExpired:
            row = {"config": config, "status": f"TIMEOUT after {args.timeout:.0f} s"}
        else:
            last = proc.stdout.strip().splitlines()[-1:] or [""]
            try:
                row = json.loads(last[0])
            except json.JSONDecodeError:
                row = {"config": config, "status": "CRASH: " + (proc.stderr.strip().splitlines() or ["?"])[-1]}
                sys.stderr.write(proc.stderr[-4000:])
        print(json.dumps(row), flush=True)
        rows.append(row)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gemm_probe.json"), "w") as f:
            json.dump(rows, f, indent=1)
    print(f"\n{'config':<40} {'status':<28} {'TFLOP/s':>8} {'cuBLAS':>8} {'ratio':>6}")
    for r in rows:
        print(f"{r['config']:<40} {r['status'][:28]:<28} {r.get('tflops', 0):8.1f} "
              f"{r.get('cublas', 0):8.1f} {r.get('ratio', 0):6.2f}")


if __name__ == "__main__":
    main()
