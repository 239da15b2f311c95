"""tlxc.ops.attention's fp8 forward against the bf16 forwards (tlxc's and cuDNN SDPA's), paired
medians, one process, kernel time.

Columns: ``fp8`` (``attention_forward`` on float8_e4m3fn q, k, v with per-tensor descales: the call,
including the copy of Vᵀ it makes), ``fp8_kernel`` (the same with Vᵀ already made: the attention
kernel alone), ``bf16`` (tlxc on bf16 inputs), ``cudnn`` (SDPA's cuDNN backend, bf16; GQA by
repeated k/v heads), ``fa3`` when ``flash_attn_interface`` is installed (its fp8 forward), and
``fp8_fma<k>`` with ``--exp-fma k`` (the call with ``AttnConfig.exp_fma = k``).
Each case is checked first against float32 math on the dequantized inputs (relative error < 6e-2:
P is rounded to fp8), then timed in rounds (every implementation back to back per round).  The
ratios ``baseline time / fp8 time`` and their geomeans come last.

    python bench/ops_attention_fp8_bench.py [--rounds 15] [--s 1024,4096] [--d 64,128,256]
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

TOKENS = 16384


def run_case(S, D, causal, rounds, H=16, Hkv=16, exp_fma=()):
    """Check, then time one case: {name: median ms}, or None (wrong)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from bench.triton_source import paired_times
    A = importlib.import_module("tlxc.ops.attention")

    B = max(1, TOKENS // S)
    torch.manual_seed(S + D)
    q16 = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
    k16 = torch.randn(B, Hkv, S, D, device="cuda", dtype=torch.bfloat16)
    v16 = torch.randn(B, Hkv, S, D, device="cuda", dtype=torch.bfloat16)
    fp8 = torch.float8_e4m3fn
    scales = [t.abs().amax().float() / 448.0 for t in (q16, k16, v16)]           # per-tensor, as a recipe would
    q, k, v = ((t / s).to(fp8) for t, s in zip((q16, k16, v16), scales))
    vt = A.transposed_v(v)
    made = A.transposed_v

    def kernel_only():
        A.transposed_v = lambda _v: vt
        try:
            return A.attention_forward(q, k, v, causal=causal, q_descale=scales[0], k_descale=scales[1],
                                       v_descale=scales[2])
        finally:
            A.transposed_v = made

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q16, k16, v16, is_causal=causal)
    fns = {
        "fp8": lambda: A.attention_forward(q, k, v, causal=causal, q_descale=scales[0], k_descale=scales[1],
                                           v_descale=scales[2]),
        "fp8_kernel": kernel_only,
        "bf16": lambda: A.attention_forward(q16, k16, v16, causal=causal),
        "cudnn": cudnn,
    }
    for k_fma in exp_fma:        # the default configuration with exp_fma = k (tlx.fast_exp2)
        c = dataclasses.replace(A.choose_config(D, causal, S), exp_fma=k_fma)
        fns[f"fp8_fma{k_fma}"] = lambda c=c: A.attention_forward(q, k, v, causal=causal, q_descale=scales[0],
                                                                 k_descale=scales[1], v_descale=scales[2], config=c)
    try:
        import flash_attn_interface as fa3
        d3 = [s.reshape(1, 1).expand(B, Hkv).contiguous() for s in scales]
        qs, ks, vs = (t.transpose(1, 2) for t in (q, k, v))
        fns["fa3"] = lambda: fa3.flash_attn_func(qs, ks, vs, causal=causal, q_descale=d3[0], k_descale=d3[1],
                                                 v_descale=d3[2])
    except ImportError:
        pass
    sl = (slice(0, 1), slice(0, 2))
    deq = [t[sl].float() * s for t, s in zip((q, k, v), scales)]
    ref, _ = A.reference(*deq, causal=causal, dtype=torch.float32)
    for name in [n for n in fns if n.startswith("fp8")]:
        o, _ = fns[name]()
        err = ((o[sl].float() - ref).norm() / ref.norm()).item()
        if not err < 6e-2:
            print(f"S={S} D={D} causal={causal}: {name} WRONG (rel. error {err:.1e}); not timed", flush=True)
            return None
    for fn in fns.values():
        fn()
    med = {n: statistics.median(t) for n, t in paired_times(fns, rounds, True, {}).items()}
    flops = 4 * B * H * S * S * D / (2 if causal else 1)
    print(f"S={S:6d} B={B:2d} D={D:3d} causal={int(causal)}: " +
          "  ".join(f"{n} {t:.3f} ms ({flops / t / 1e9:.0f} TF/s)" for n, t in med.items()), flush=True)
    return med


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--s", default="1024,4096,8192,16384", help="sequence lengths (comma-separated)")
    parser.add_argument("--d", default="64,128,256", help="head dims (comma-separated)")
    parser.add_argument("--exp-fma", default="", help="also time exp_fma=k for these k (column fp8_fma<k>)")
    args = parser.parse_args()
    print(f"card: {torch.cuda.get_device_name()}, torch {torch.__version__}, fp8 e4m3 vs bf16, H = 16, "
          f"{TOKENS} tokens, kernel time")
    rows = []
    for D in (int(x) for x in args.d.split(",")):
        for S in (int(x) for x in args.s.split(",")):
            for causal in (False, True):
                med = run_case(S, D, causal, args.rounds,
                               exp_fma=tuple(int(x) for x in args.exp_fma.split(",") if x))
                torch.cuda.empty_cache()
                if med:
                    rows.append((S, D, causal, med))
    print("\nratios (baseline time / fp8 time; > 1: fp8 faster):")
    geo = {}
    for S, D, causal, med in rows:
        ratio = {n: t / med["fp8"] for n, t in med.items() if n != "fp8"}
        for n, r in ratio.items():
            geo.setdefault(n, []).append(r)
        print(f"  S={S} D={D} causal={int(causal)}: " + "  ".join(f"{n} {r:.3f}" for n, r in ratio.items()))
    print("geomean: " + "  ".join(f"{n} {math.exp(statistics.fmean(math.log(r) for r in rs)):.3f}"
                                  for n, rs in geo.items()))


if __name__ == "__main__":
    main()
