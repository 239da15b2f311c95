"""Where an attention-forward item's cycles go: the kernel's ``TRACE`` timeline (issue 23, session 33).

    python bench/attn_trace_probe.py [--cases 64x32x256x64,16x32x1024x64] [--items 8] [--rounds 15]
                                     [--set k_ahead=1,early_lse=1]

A case is ``BxHxSxD`` (bf16, MHA, no mask, ``choose_config``'s configuration). Per case: the
traced call's and the plain call's kernel time (paired medians: the counter reads' own cost), then
the timeline of one item, in cycles of the SM's counter (``clock64``), as medians over every
program's items 1 .. items-1 (item 0 carries the launch): per row (each consumer's first thread,
the producer's), each stage's time after the item's start (the earliest row's stage 0), the
item period (one item's start to the next's), and that period item by item (``--items 32``: from a
program's first items to its steady state). ``TRACE_MARKS`` (kernels/attention_fwd.py) names the
stages; a stage a path does not pass prints ``-``. ``--set``: ``AttnConfig`` fields changed from
``choose_config``'s (ints; 0 / 1 for the flags), to trace an opt-in variant.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from ops_attention_bench import config_fields  # noqa: E402
from triton_source import paired_times  # noqa: E402


def timeline(trace, items: int):
    """{row: {stage: median cycles after the item's start}}, and the median item period (cycles)."""
    import torch
    t = trace.to(torch.float64)                                 # [programs, rows, items, stages]
    valid = trace >= 0
    start = torch.where(valid[:, :, :, 0], t[:, :, :, 0], torch.full_like(t[:, :, :, 0], float("inf"))).amin(1)
    rows = {}
    for row in range(trace.shape[1]):
        rows[row] = {}
        for stage in range(trace.shape[3]):
            sel = valid[:, row, 1:, stage] & valid[:, row, 1:, 0]
            if not sel.any():
                continue
            rel = (t[:, row, 1:, stage] - start[:, 1:])[sel]
            rows[row][stage] = rel.median().item()
    periods = (t[:, 0, 2:items, 0] - t[:, 0, 1:items - 1, 0])[valid[:, 0, 2:items, 0] & valid[:, 0, 1:items - 1, 0]]
    return rows, (periods.median().item() if periods.numel() else float("nan"))


def periods_by_item(trace, items: int) -> list[float]:
    """The median over programs of consumer 0's period from item i to item i + 1, for i = 1 ..
    items - 2 (does a program's item period drift from its first items to its steady state?)."""
    import torch
    t = trace.to(torch.float64)
    out = []
    for i in range(1, items - 1):
        ok = (trace[:, 0, i, 0] >= 0) & (trace[:, 0, i + 1, 0] >= 0)
        d = (t[:, 0, i + 1, 0] - t[:, 0, i, 0])[ok]
        out.append(d.median().item() if d.numel() else float("nan"))
    return out


def main() -> None:
    import torch

    from tlxc.ops.attention import attention_forward, choose_config, trace_shape
    from tlxc.ops.kernels.attention_fwd import TRACE_MARKS, TRACE_PRODUCER
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="64x32x256x64,16x32x1024x64,64x16x256x128")
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--set", default="", help="AttnConfig fields to change, e.g. k_ahead=1,early_lse=1")
    args = parser.parse_args()
    changes = config_fields(filter(None, args.set.split(",")), "--set")
    programs = torch.cuda.get_device_properties(0).multi_processor_count
    for case in args.cases.split(","):
        B, H, S, D = (int(x) for x in case.split("x"))
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        c = dataclasses.replace(choose_config(D, False, S), **changes)
        trace = torch.full(trace_shape(c, programs, args.items), -1, dtype=torch.int64, device="cuda")
        fns = {"plain": lambda q=q, k=k, v=v, c=c: attention_forward(q, k, v, config=c),
               "traced": lambda q=q, k=k, v=v, c=c, trace=trace: attention_forward(q, k, v, config=c, trace=trace)}
        for fn in fns.values():
            fn()
        med = {n: statistics.median(x) for n, x in paired_times(fns, args.rounds, True, {}).items()}
        trace.fill_(-1)
        fns["traced"]()
        torch.cuda.synchronize()
        rows, period = timeline(trace.cpu(), args.items)
        consumers = trace.shape[1] - 1
        print(f"\nB{B} H{H} S{S} D{D} {c}\n  plain {med['plain']:.4f} ms, traced {med['traced']:.4f} ms "
              f"(x{med['traced'] / med['plain']:.3f}); item period {period:.0f} cycles (consumer 0's starts)")
        print(f"  {'stage':24s}" + "".join(f"{'consumer ' + str(r):>12s}" for r in range(consumers)))
        for stage, name in TRACE_MARKS.items():
            cells = [rows[r].get(stage) for r in range(consumers)]
            if all(x is None for x in cells):
                continue
            print(f"  {str(stage) + ' ' + name:24s}" + "".join(f"{'-' if x is None else f'{x:.0f}':>12s}" for x in cells))
        prod = rows[consumers]
        print("  producer: " + ", ".join(f"{name} {prod[s]:.0f}" for s, name in TRACE_PRODUCER.items() if s in prod))
        print("  period by item (1 -> 2, 2 -> 3, ..): " + " ".join(f"{x:.0f}" for x in periods_by_item(trace.cpu(), args.items)))


if __name__ == "__main__":
    main()
