"""Is the attention backward's ratio to cuDNN the kernels' or the host's?  (issue 23, session 20)

    python bench/attention_bwd_host_probe.py [--rounds 15]

For a few of ``ops_attention_bench.py``'s backward cases (BHSD bf16, ``torch.autograd.grad`` on a
kept graph, as that bench times it) this prints, for tlxc and cuDNN: the kernel time behind a
short GPU spin (~1 ms, the bench's fixed spin of sessions <= 19) and behind a long one (~20 ms,
longer than any host work), paired medians; the host's wall time of one call (queued behind the
long spin, so it never waits on the GPU) and, for tlxc's, how it splits around the backward's
implementation (the autograd engine before it, the implementation, after it); ``direct``:
``attention_bwd`` called without autograd; the device time of each kernel of one call
(torch.profiler).  If the short-spin ratio is below the long-spin one, a bench with the short
spin measures host work.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.triton_source import event_ms, host_ms  # noqa: E402

CASES = ((16, 16, 1024, 128, False), (4, 16, 4096, 128, False), (4, 16, 4096, 128, True), (16, 32, 1024, 64, False))
SHORT, LONG = 1_000_000, 40_000_000        # torch.cuda._sleep cycles


def contenders(B: int, H: int, S: int, D: int, causal: bool) -> dict:
    """tlxc and cuDNN through autograd on kept graphs, and tlxc's ``attention_bwd`` called directly."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    from tlxc.ops import attention
    from tlxc.ops.kernels.attention_bwd import attention_bwd
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    do = torch.randn_like(q)
    with torch.enable_grad():
        out_t, lse_t = attention(q, k, v, causal=causal, return_lse=True)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            out_c = sdpa(q, k, v, is_causal=causal)
    print(f"o strides {out_t.stride()} lse {tuple(lse_t.shape)} {lse_t.stride()}", flush=True)
    return {"tlxc": lambda: torch.autograd.grad(out_t, (q, k, v), do, retain_graph=True),
            "cudnn": lambda: torch.autograd.grad(out_c, (q, k, v), do, retain_graph=True),
            "direct": lambda: attention_bwd(do, q.detach(), k.detach(), v.detach(), out_t.detach(), lse_t,
                                            causal=causal, sm_scale=D ** -0.5)}


def autograd_split(fn) -> list[float]:
    """Medians (ms) of tlxc's autograd host time before its backward's implementation is entered,
    inside it, and after it."""
    import torch
    AO = sys.modules["tlxc.ops.attention_op"]
    real, marks = AO._backward_impl, []

    def timed_impl(*a, **kw):
        marks.append(time.perf_counter())
        out = real(*a, **kw)
        marks.append(time.perf_counter())
        return out
    AO._backward_impl = timed_impl
    split = []
    try:
        for _ in range(7):
            marks.clear()
            torch.cuda._sleep(LONG)
            t0 = time.perf_counter()
            fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            split.append(((marks[0] - t0) * 1e3, (marks[1] - marks[0]) * 1e3, (t1 - marks[1]) * 1e3))
    finally:
        AO._backward_impl = real
    return [statistics.median(c) for c in zip(*split)]


def probe(case: tuple, rounds: int) -> tuple:
    import torch
    B, H, S, D, causal = case
    fns = contenders(*case)
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    label = f"B{B} H{H} S{S} D{D}{' causal' if causal else ''}"
    med = {}
    for spin_name, spin in (("short", SHORT), ("long", LONG)):
        times = {n: [] for n in fns}
        for _ in range(rounds):
            for n, fn in fns.items():
                times[n].append(event_ms(fn, True, spin))
        med[spin_name] = {n: statistics.median(t) for n, t in times.items()}
    host = {n: statistics.median(host_ms(fn) for _ in range(7)) for n, fn in fns.items()}
    before, inside, after = autograd_split(fns["tlxc"])
    print(f"{label}: short spin tlxc {med['short']['tlxc']:.4f} cudnn {med['short']['cudnn']:.4f} ms; "
          f"long spin tlxc {med['long']['tlxc']:.4f} cudnn {med['long']['cudnn']:.4f} ms; "
          f"host tlxc {host['tlxc']:.3f} cudnn {host['cudnn']:.3f} ms", flush=True)
    print(f"   direct: short {med['short']['direct']:.4f} long {med['long']['direct']:.4f} host {host['direct']:.3f} ms; "
          f"tlxc autograd host: before the impl {before:.3f} ms, in it {inside:.3f}, after {after:.3f}", flush=True)
    for name in ("tlxc", "cudnn"):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            fns[name]()
            torch.cuda.synchronize()
        for e in prof.key_averages():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                print(f"    {name} kernel {e.key[:70]:70s} {e.device_time_total / 1e3:.4f} ms x{e.count}")
    return label, med["short"]["cudnn"] / med["short"]["tlxc"], med["long"]["cudnn"] / med["long"]["tlxc"], host["tlxc"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    rows = [probe(case, args.rounds) for case in CASES]
    print("case                          cudnn/tlxc short spin   long spin   tlxc host ms")
    for label, a, b, h in rows:
        print(f"{label:30s} {a:10.3f} {b:12.3f} {h:12.3f}")


if __name__ == "__main__":
    main()
