"""A compile switch (``tlxc.options.PERF_SWITCHES``) A/B'd in one process: each case's kernel
with the switch at its default and flipped, and the case's baseline, timed in paired rounds.

    python bench/switch_ab.py --switch TLXC_REDUCE_TREE [--rounds 15] [--cases attn,softmax,layernorm]

Each round times every contender back to back: a GPU spin (``torch.cuda._sleep``) covers the host
work of ``CALLS`` queued calls, CUDA events bracket them, the round's time is their mean; the
switch's value is set in the environment for its contender's calls (a compile-key variable,
``runtime/launch.py:COMPILE_ENV``: each value's kernel is compiled once, before the rounds).
Printed last: ``flipped / default`` time (> 1: the default is faster) and ``baseline / default``
(> 1: tlxc faster), medians over the rounds.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

CALLS = 10
ATTN = [(64, 32, 256, 64, False), (64, 32, 256, 64, True), (32, 32, 512, 64, False), (16, 32, 1024, 64, False),
        (16, 32, 1024, 64, True), (4, 32, 4096, 64, False), (64, 16, 256, 128, False), (16, 16, 1024, 128, False),
        (4, 16, 4096, 128, True)]


def cases(which: set):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    import tlxc.ops
    if "attn" in which:
        for B, H, S, D, causal in ATTN:
            q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))

            def base(q=q, k=k, v=v, causal=causal):
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    return sdpa(q, k, v, is_causal=causal)
            yield (f"attn B{B} H{H} S{S} D{D}{' causal' if causal else ''}",
                   lambda q=q, k=k, v=v, causal=causal: tlxc.ops.attention(q, k, v, causal=causal), base, "cuDNN")
    if "softmax" in which:
        from softmax import softmax
        for m, n in ((16384, 8192), (16384, 1024)):
            x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
            out = torch.empty_like(x)
            yield f"softmax {m}x{n}", lambda x=x, out=out: softmax(x, out), lambda x=x: torch.softmax(x, -1), "torch"
    if "layernorm" in which:
        from layernorm import layernorm
        for m, n in ((16384, 8192), (16384, 1024)):
            x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
            w, b = torch.randn(n, device="cuda", dtype=torch.bfloat16), torch.randn(n, device="cuda", dtype=torch.bfloat16)
            out = torch.empty_like(x)
            yield (f"layernorm {m}x{n}", lambda x=x, w=w, b=b, out=out: layernorm(x, w, b, 1e-5, out),
                   lambda x=x, w=w, b=b: torch.nn.functional.layer_norm(x, (x.shape[1],), w, b, 1e-5), "torch")


def with_env(name: str, value: str | None, fn):
    def run():
        old = os.environ.get(name)
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
        try:
            return fn()
        finally:
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
    return run


def time_round(fn) -> float:
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()                                    # after a flip the launcher reloads its module: not timed
    torch.cuda.synchronize()
    torch.cuda._sleep(20_000_000)           # ~10 ms: the host queues every call behind it
    start.record()
    for _ in range(CALLS):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / CALLS


def main() -> None:
    import torch

    from tlxc.options import PERF_SWITCHES
    parser = argparse.ArgumentParser()
    parser.add_argument("--switch", required=True, choices=sorted(PERF_SWITCHES))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--cases", default="attn,softmax,layernorm")
    args = parser.parse_args()
    os.environ.pop(args.switch, None)
    flipped = "0" if PERF_SWITCHES[args.switch] else "1"
    print(f"card: {torch.cuda.get_device_name()}, torch {torch.__version__}, switch {args.switch}: default "
          f"{PERF_SWITCHES[args.switch]} vs {flipped}", flush=True)
    rows = []
    for label, tlxc_fn, base_fn, base_name in cases(set(args.cases.split(","))):
        fns = {"default": tlxc_fn, "flipped": with_env(args.switch, flipped, tlxc_fn), base_name: base_fn}
        outs = {name: fn().float() for name, fn in fns.items()}          # compile, warm up, compare
        err = max(((outs[n] - outs[base_name]).norm() / outs[base_name].norm()).item() for n in ("default", "flipped"))
        times = {name: [] for name in fns}
        for _ in range(args.rounds):
            for name, fn in fns.items():
                times[name].append(time_round(fn))
        med = {name: statistics.median(ts) for name, ts in times.items()}
        rows.append((label, med["flipped"] / med["default"], med[base_name] / med["default"], base_name))
        print(f"{label:32s} default {med['default'] * 1e3:8.1f} us  flipped {med['flipped'] * 1e3:8.1f} us  "
              f"{base_name} {med[base_name] * 1e3:8.1f} us  rel err vs {base_name} {err:.1e}", flush=True)
    print(f"\nflipped/default (> 1: {args.switch} at its default is faster), baseline/default (> 1: tlxc faster):")
    for label, fd, bd, base_name in rows:
        print(f"  {label:32s} {fd:6.3f}   vs {base_name} {bd:6.3f}")


if __name__ == "__main__":
    main()
