"""Is the attention backward's ratio to cuDNN the kernels' or the host's?  (issue 23, session 20)

    python bench/attention_bwd_host_probe.py [--rounds 15]

For a few of ``ops_attention_bench.py``'s backward cases (BHSD bf16, ``torch.autograd.grad`` on a
kept graph, as that bench times it) this prints, for tlxc and cuDNN: the kernel time behind a
short GPU spin (~0.5 ms, the bench's) and behind a long one (~20 ms, longer than any host work),
paired medians; the host's wall time of one call (queued behind the long spin, so it never
waits on the GPU); and the device time of each kernel of one call (torch.profiler).
If the short-spin ratio is below the long-spin one, the bench's backward ratio measures host work.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = ((16, 16, 1024, 128, False), (4, 16, 4096, 128, False), (4, 16, 4096, 128, True), (16, 32, 1024, 64, False))
SHORT, LONG = 1_000_000, 40_000_000        # torch.cuda._sleep cycles


def main() -> None:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    from tlxc.ops import attention
    from tlxc.ops.kernels.attention_bwd import attention_bwd

    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()

    def event_ms(fn, spin):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(spin)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    def host_ms(fn):
        torch.cuda._sleep(LONG)
        t0 = time.perf_counter()
        fn()
        t = time.perf_counter() - t0
        torch.cuda.synchronize()
        return t * 1e3

    rows = []
    for B, H, S, D, causal in CASES:
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        do = torch.randn_like(q)
        with torch.enable_grad():
            out_t, lse_t = attention(q, k, v, causal=causal, return_lse=True)
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                out_c = sdpa(q, k, v, is_causal=causal)
        fns = {"tlxc": lambda: torch.autograd.grad(out_t, (q, k, v), do, retain_graph=True),
               "cudnn": lambda: torch.autograd.grad(out_c, (q, k, v), do, retain_graph=True),
               "direct": lambda: attention_bwd(do, q.detach(), k.detach(), v.detach(), out_t.detach(), lse_t,
                                               causal=causal, sm_scale=D ** -0.5)}
        print(f"o strides {out_t.stride()} lse {tuple(lse_t.shape)} {lse_t.stride()}", flush=True)
        for fn in fns.values():
            fn()
        torch.cuda.synchronize()
        label = f"B{B} H{H} S{S} D{D}{' causal' if causal else ''}"
        med = {}
        for spin_name, spin in (("short", SHORT), ("long", LONG)):
            times = {n: [] for n in fns}
            for _ in range(args.rounds):
                for n, fn in fns.items():
                    times[n].append(event_ms(fn, spin))
            med[spin_name] = {n: statistics.median(t) for n, t in times.items()}
        host = {n: statistics.median(host_ms(fn) for _ in range(7)) for n, fn in fns.items()}
        # where tlxc's autograd host time goes: before the backward's implementation is entered
        # (the engine), inside it, after it
        AO = sys.modules["tlxc.ops.attention_op"]
        real, marks = AO._backward_impl, []

        def timed_impl(*a, **kw):
            marks.append(time.perf_counter())
            out = real(*a, **kw)
            marks.append(time.perf_counter())
            return out
        AO._backward_impl = timed_impl
        split = []
        for _ in range(7):
            marks.clear()
            torch.cuda._sleep(LONG)
            t0 = time.perf_counter()
            fns["tlxc"]()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            split.append(((marks[0] - t0) * 1e3, (marks[1] - marks[0]) * 1e3, (t1 - marks[1]) * 1e3))
        AO._backward_impl = real
        split = [statistics.median(c) for c in zip(*split)]
        print(f"   tlxc autograd host: before the impl {split[0]:.3f} ms, in it {split[1]:.3f}, after {split[2]:.3f}",
              flush=True)
        print(f"{label}: short spin tlxc {med['short']['tlxc']:.4f} cudnn {med['short']['cudnn']:.4f} ms; "
              f"long spin tlxc {med['long']['tlxc']:.4f} cudnn {med['long']['cudnn']:.4f} ms; "
              f"host tlxc {host['tlxc']:.3f} cudnn {host['cudnn']:.3f} ms", flush=True)
        print(f"   direct: short {med['short']['direct']:.4f} long {med['long']['direct']:.4f} "
              f"host {host['direct']:.3f} ms", flush=True)
        for name in ("tlxc", "cudnn"):
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                fns[name]()
                torch.cuda.synchronize()
            for e in prof.key_averages():
                if e.device_type == torch.autograd.DeviceType.CUDA:
                    print(f"    {name} kernel {e.key[:70]:70s} {e.device_time_total / 1e3:.4f} ms x{e.count}")
        rows.append((label, med["short"]["cudnn"] / med["short"]["tlxc"], med["long"]["cudnn"] / med["long"]["tlxc"],
                     host["tlxc"]))
    print("case                          cudnn/tlxc short spin   long spin   tlxc host ms")
    for label, a, b, h in rows:
        print(f"{label:30s} {a:10.3f} {b:12.3f} {h:12.3f}")


if __name__ == "__main__":
    main()
