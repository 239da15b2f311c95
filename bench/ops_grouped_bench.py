"""tlxc.ops.grouped_matmul against a loop of cuBLAS calls and torch._grouped_mm (when torch
has it), MoE shapes with uneven group sizes, paired medians (kernel time) in one process.

    python bench/ops_grouped_bench.py [--rounds 15] [--timing kernel|call] [--experts 8,32]
                                      [--configs gws_128x128x64_s5,...] [--lean] [--fp8 [--precise]] [--wgrad] [--dgrad]
                                      [--cases ExMxKxN,...] [--split uneven|equal] [--dense]

Expert weights are stored ``[E, N, K]`` (as ``nn.Linear``) and multiplied as
``w.transpose(1, 2)``; group sizes are a seeded multinomial draw with one empty expert.  The
cuBLAS loop gets the sizes on the host beforehand (its real cost would include that sync);
``torch._grouped_mm`` gets the int32 end offsets.  Ratios: baseline time / tlxc time (the
heuristic's pick, named on the line; where that is the warp-specialized kernel, the pointer
kernel's choice is timed beside it, and so is the pick with pointer stores only,
``<pick>+ptr_stores``, the WS kernel's output path before its TMA stores, and the pick with the
other ``grouped.SPLIT_TAILS`` value, ``<pick>+split_tails`` or ``+whole_tails``: a group's last rows
of one consumer's worth split by columns between both consumers, or multiplied by that consumer
alone over the tile's width; ``--lean`` leaves those three out); ``<pick>+no_pdl`` (lean too): a dynamic-schedule
TMA kernel launched after the group table, not as its programmatic dependent (``grouped.PDL_LAUNCHES``);
``--configs`` times more configurations beside the pick.  ``--wgrad``: the weight gradient
(``grouped_weight_grad``, the backward of ``grouped_matmul_op`` for ``b``) of the same cases instead,
against a loop of cuBLAS ``a_gᵀ @ dout_g`` and ``torch._grouped_mm(aᵀ, dout, offs)``; ``--dgrad`` the input
gradient ``dout_g @ w[g]`` (the ``[E, N, K]`` weights read N-major, as the backward reads them).  ``--fp8``: the fp8
(e4m3) product of the same cases with row-wise scales of ``a`` and per-expert column scales of the weights,
against ``torch._scaled_grouped_mm`` and a loop of ``torch._scaled_mm`` (fast accumulation everywhere).  ``--split equal``
gives every expert M / E rows and ``--dense`` times ``tlxc.ops.matmul`` on all M rows beside: what
the grouping itself costs per tile.  Kernel time: each case's spin outlasts 1.5x the slowest
contender's host work (``spin_for``; the line prints tlxc's and the loop's host ms; sessions <= 19
used a fixed ~1 ms spin, which the loop's E launches may outlast at large E).
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

CASES = [  # (experts, total rows, K, N)
    (8, 16384, 4096, 14336),
    (8, 4096, 4096, 14336),
    (8, 2048, 4096, 14336),     # ~256 rows an expert: the 128-row tiles pad most (0.944x the loop, 2026-12-04)
    (32, 16384, 2048, 1408),
    (64, 16384, 2048, 1408),
    (128, 32768, 2048, 768),
    (128, 8192, 2048, 768),
]


def group_sizes(E: int, M: int, split: str):
    """The bench's group sizes: a seeded multinomial draw with expert ``E // 2`` empty
    (``uneven``), or ``M / E`` rows each (``equal``: multiples of 128 where M / E is)."""
    import torch

    if split == "equal":
        return torch.full((E,), M // E, dtype=torch.int32)
    torch.manual_seed(E * 1000 + M)
    sizes = torch.distributions.Multinomial(M, torch.rand(E) + 0.05).sample().to(torch.int32)
    sizes[E // 2] = 0
    sizes[0] += M - int(sizes.sum())
    return sizes


def run_case(E, M, K, N, rounds, hide, ratios, extra=(), lean=False, split="uneven", dense=False) -> None:
    import torch

    import tlxc.ops.grouped as grouped_module
    from bench.triton_source import paired_times
    from tlxc.ops import grouped_matmul
    from tlxc.ops.grouped import GROUPED_SWAP_CONFIGS, GROUPED_WS_CONFIGS, _ws_layout, choose_grouped_config

    sizes = group_sizes(E, M, split)
    host_sizes = sizes.tolist()
    sizes = sizes.cuda()
    offs = sizes.cumsum(0).to(torch.int32)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(E, N, K, device="cuda", dtype=torch.bfloat16) * 0.05
    b = w.transpose(1, 2)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    loop_out = torch.empty_like(out)
    starts = [0]
    for s in host_sizes:
        starts.append(starts[-1] + s)

    def loop():
        for g in range(E):
            if host_sizes[g]:
                torch.matmul(a[starts[g]:starts[g + 1]], b[g], out=loop_out[starts[g]:starts[g + 1]])

    fns = {"tlxc": lambda: grouped_matmul(a, b, sizes, out), "loop": loop}
    if dense:                   # tlxc.ops.matmul on all M rows with one expert's weights: the per-tile yardstick
        from tlxc.ops import matmul
        dense_out = torch.empty_like(out)
        fns["dense"] = lambda: matmul(a, b[0], out=dense_out)
    pick = choose_grouped_config(M, E, N, _ws_layout(a, b))

    def pick_with(name, value):
        """The pick, launched with ``grouped.<name>`` set to ``value`` for the call."""
        def call():
            keep = getattr(grouped_module, name)
            setattr(grouped_module, name, value)
            try:
                grouped_matmul(a, b, sizes, out, config=pick)
            finally:
                setattr(grouped_module, name, keep)
        return call
    if pick in GROUPED_WS_CONFIGS and not lean:      # the pointer kernel's choice too, for comparison
        other = choose_grouped_config(M, E, N, None)
        fns[other] = lambda: grouped_matmul(a, b, sizes, out, config=other)
        fns[pick + "+ptr_stores"] = pick_with("ws_stores_by_tma", lambda *args: False)
        split = grouped_module.SPLIT_TAILS
        fns[pick + ("+whole_tails" if split else "+split_tails")] = pick_with("SPLIT_TAILS", not split)
    if pick in GROUPED_SWAP_CONFIGS or (pick in GROUPED_WS_CONFIGS and grouped_module.ws_config(pick).dynamic):
        fns[pick + "+no_pdl"] = pick_with("PDL_LAUNCHES", False)   # (lean too: its own column, cheap)
    for name in extra:
        if name != pick and name not in fns:
            fns[name] = lambda name=name: grouped_matmul(a, b, sizes, out, config=name)
    grouped_mm = getattr(torch, "_grouped_mm", None)
    gm = None
    if grouped_mm is not None:
        try:
            gm = grouped_mm(a, b, offs=offs, out_dtype=torch.bfloat16)
            fns["grouped_mm"] = lambda: grouped_mm(a, b, offs=offs, out_dtype=torch.bfloat16)
        except (RuntimeError, TypeError, ValueError) as exc:
            print(f"  torch._grouped_mm refused: {str(exc).splitlines()[0][:150]}")
            gm = None
    loop()
    for name in [n for n in fns if n not in ("loop", "grouped_mm", "dense")]:
        out.fill_(float("nan"))
        fns[name]()
        torch.cuda.synchronize()
        rel = ((out.float() - loop_out.float()).norm() / loop_out.float().norm()).item()
        if not rel < 1e-2:
            raise SystemExit(f"E={E} M={M}: tlxc grouped_matmul ({name}) wrong (rel. error {rel:.2e} against the "
                             f"cuBLAS loop)")
    if gm is not None:
        rel_gm = ((gm.float() - loop_out.float()).norm() / loop_out.float().norm()).item()
        if not rel_gm < 1e-2:
            print(f"  torch._grouped_mm disagrees with the loop (rel. error {rel_gm:.2e}): not used")
            del fns["grouped_mm"]
    for fn in fns.values():
        fn()
    host = {}
    med = {n: statistics.median(t) for n, t in paired_times(fns, rounds, hide, host).items()}
    flops = 2 * M * K * N
    line = (f"E={E:3d} M={M:5d} K={K:5d} N={N:5d} ({split} sizes {min(host_sizes)}..{max(host_sizes)}): "
            f"tlxc {med['tlxc']:.4f} ms ({flops / med['tlxc'] / 1e9:.0f} TFLOP/s, {pick}"
            + (f"; host ms tlxc {host['tlxc']:.2f} loop {host['loop']:.2f})" if host else ")"))
    for name in [n for n in med if n not in ("tlxc", "loop", "grouped_mm")]:
        line += f", {name} {med[name]:.4f} ms ({flops / med[name] / 1e9:.0f} TFLOP/s"
        line += f", {med['loop'] / med[name]:.3f}x loop)" if "loop" in med else ")"
    for base in ("loop", "grouped_mm"):
        if base in med:
            ratios[base].append(med[base] / med["tlxc"])
            line += f", {base} {med[base]:.4f} ms -> {med[base] / med['tlxc']:.3f}x"
    print(line, flush=True)


def _backward_draw(E: int, M: int, seed: int):
    """The backward modes' group sizes (``group_sizes``' draw, its own seed): on the GPU, as host row
    offsets, and as ``torch._grouped_mm``'s int32 end offsets."""
    import torch

    torch.manual_seed(seed)
    sizes = torch.distributions.Multinomial(M, torch.rand(E) + 0.05).sample().to(torch.int32)
    sizes[E // 2] = 0
    sizes[0] += M - int(sizes.sum())
    host = [0] + sizes.cumsum(0).tolist()
    sizes = sizes.cuda()
    return sizes, host, sizes.cumsum(0).to(torch.int32)


def _time_against_loop(label: str, flops: int, fns: dict, loop_out, grouped_mm_call, rounds, hide, ratios,
                       extra=(), pick: str = "") -> None:
    """``fns`` (``tlxc``, ``loop`` and the ``--configs`` extras) checked against the loop's ``loop_out``,
    ``torch._grouped_mm`` (``grouped_mm_call``) added where it agrees, then paired medians; one line."""
    import torch

    from bench.triton_source import paired_times
    fns["loop"]()
    for name, fn in list(fns.items()):
        if name != "loop":
            rel = ((fn().float() - loop_out.float()).norm() / loop_out.float().norm()).item()
            if not rel < 1e-2:
                raise SystemExit(f"{label}: {name} wrong (rel. error {rel:.2e} against the cuBLAS loop)")
    if getattr(torch, "_grouped_mm", None) is not None:
        try:
            gm = grouped_mm_call()
            if ((gm.float() - loop_out.float()).norm() / loop_out.float().norm()).item() < 1e-2:
                fns["grouped_mm"] = grouped_mm_call
            else:
                print(f"  torch._grouped_mm disagrees with the loop ({label}): not used")
        except (RuntimeError, TypeError, ValueError) as exc:
            print(f"  torch._grouped_mm refused {label}: {str(exc).splitlines()[0][:150]}")
    for fn in fns.values():
        fn()
    med = {n: statistics.median(t) for n, t in paired_times(fns, rounds, hide, {}).items()}
    line = f"{label}: tlxc {med['tlxc']:.4f} ms ({flops / med['tlxc'] / 1e9:.0f} TFLOP/s{', ' + pick if pick else ''})"
    for name in extra:
        line += f", {name} {med[name] / med['tlxc']:.3f}x the time"
    for base in ("loop", "grouped_mm"):
        if base in med:
            ratios[base].append(med[base] / med["tlxc"])
            line += f", {base} {med[base]:.4f} ms -> {med[base] / med['tlxc']:.3f}x"
    print(line, flush=True)


def run_wgrad_case(E, M, K, N, rounds, hide, ratios, extra=()) -> None:
    """The weight gradient ``db[g] = a[rows of g]ᵀ @ dout[rows of g]`` (``grouped_weight_grad``,
    the backward of ``grouped_matmul_op`` for the weights) against a loop of cuBLAS calls and
    ``torch._grouped_mm`` on ``(aᵀ, dout)`` with the row offsets, when it takes them."""
    import torch

    from tlxc.ops import grouped_weight_grad

    sizes, host, offs = _backward_draw(E, M, E * 1000 + M + 1)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    g = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    loop_out = torch.empty(E, K, N, device="cuda", dtype=torch.bfloat16)

    def loop():
        for e in range(E):
            torch.matmul(a[host[e]:host[e + 1]].t(), g[host[e]:host[e + 1]], out=loop_out[e])
    fns = {"tlxc": lambda: grouped_weight_grad(a, g, sizes), "loop": loop}
    for name in extra:                        # --configs: more weight-gradient tiles (WGRAD_CONFIGS)
        fns[name] = lambda name=name: grouped_weight_grad(a, g, sizes, config=name)
    _time_against_loop(f"wgrad E={E:3d} M={M:5d} K={K:5d} N={N:5d}", 2 * M * K * N, fns, loop_out,
                       lambda: torch._grouped_mm(a.t(), g, offs=offs, out_dtype=torch.bfloat16), rounds, hide,
                       ratios, extra)


def run_dgrad_case(E, M, K, N, rounds, hide, ratios, extra=()) -> None:
    """The input gradient ``da[rows of g] = dout[rows of g] @ w[g]`` with ``nn.Linear`` experts' ``[E, N, K]``
    weights read as they are (``grouped_matmul_op``'s backward for ``a``: N-major ``b_experts`` of ``K`` output
    columns) against a loop of cuBLAS calls and ``torch._grouped_mm(dout, w, offs)``."""
    import torch

    from tlxc.ops import grouped_matmul
    from tlxc.ops.grouped import _ws_layout, choose_grouped_config

    sizes, host, offs = _backward_draw(E, M, E * 1000 + M + 2)
    g = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(E, N, K, device="cuda", dtype=torch.bfloat16) / N ** 0.5
    loop_out = torch.empty(M, K, device="cuda", dtype=torch.bfloat16)

    def loop():
        for e in range(E):
            torch.matmul(g[host[e]:host[e + 1]], w[e], out=loop_out[host[e]:host[e + 1]])
    fns = {"tlxc": lambda: grouped_matmul(g, w, sizes), "loop": loop}
    for name in extra:
        fns[name] = lambda name=name: grouped_matmul(g, w, sizes, config=name)
    _time_against_loop(f"dgrad E={E:3d} M={M:5d} K={K:5d} N={N:5d}", 2 * M * K * N, fns, loop_out,
                       lambda: torch._grouped_mm(g, w, offs=offs, out_dtype=torch.bfloat16), rounds, hide, ratios,
                       extra, choose_grouped_config(M, E, K, _ws_layout(g, w)))


def run_fp8_case(E, M, K, N, rounds, hide, ratios, extra=(), fast=True) -> None:
    """fp8 (e4m3) ``grouped_matmul`` with row-wise scales of ``a`` and per-expert column scales of the
    weights (DeepSeek-style MoE), bf16 output, against ``torch._scaled_grouped_mm`` (the same scales and
    ``use_fast_accum``, when this torch has it and the card runs it) and a loop of ``torch._scaled_mm``
    calls (row-wise scales); every contender checked against float32 math first.  ``fast=False``: every
    contender with promoted sums (``use_fast_accum=False``)."""
    import torch

    from bench.triton_source import paired_times
    from tlxc.ops import grouped_matmul
    from tlxc.ops.grouped import _ws_layout, choose_grouped_config

    sizes = group_sizes(E, M, "uneven")
    host_sizes = sizes.tolist()
    sizes = sizes.cuda()
    offs = sizes.cumsum(0).to(torch.int32)
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    w = (torch.randn(E, N, K, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    b = w.transpose(1, 2)
    scale_a = torch.rand(M, device="cuda") + 0.5
    scale_b = torch.rand(E, N, device="cuda") * 0.01 + 0.005
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    loop_out = torch.empty_like(out)
    starts = [0]
    for n in host_sizes:
        starts.append(starts[-1] + n)
    ref = torch.empty(M, N, device="cuda", dtype=torch.float32)
    for g in range(E):
        r0, r1 = starts[g], starts[g + 1]
        ref[r0:r1] = (a[r0:r1].float() @ b[g].float()) * scale_a[r0:r1, None] * scale_b[g][None, :]

    def loop():
        for g in range(E):
            r0, r1 = starts[g], starts[g + 1]
            if r1 > r0:
                loop_out[r0:r1] = torch._scaled_mm(a[r0:r1], b[g], scale_a[r0:r1, None], scale_b[g][None, :],
                                                   out_dtype=torch.bfloat16, use_fast_accum=fast)

    def rel(x):
        return ((x.float() - ref).norm() / ref.norm()).item()

    fns = {"tlxc": lambda: grouped_matmul(a, b, sizes, out, scale_a=scale_a, scale_b=scale_b, use_fast_accum=fast)}
    try:
        loop()
        if rel(loop_out) < 2e-2:
            fns["loop"] = loop
        else:
            print(f"  the torch._scaled_mm loop disagrees with float32 math ({rel(loop_out):.2e}): not used")
    except (RuntimeError, TypeError, ValueError) as exc:
        print(f"  torch._scaled_mm refused: {str(exc).splitlines()[0][:150]}")
    sgm = getattr(torch, "_scaled_grouped_mm", None)
    if sgm is not None:
        try:
            def grouped():
                return sgm(a, b, scale_a, scale_b, offs=offs, out_dtype=torch.bfloat16, use_fast_accum=fast)
            if rel(grouped()) < 2e-2:
                fns["scaled_grouped_mm"] = grouped
            else:
                print(f"  torch._scaled_grouped_mm disagrees with float32 math ({rel(grouped()):.2e}): not used")
        except (RuntimeError, TypeError, ValueError) as exc:
            print(f"  torch._scaled_grouped_mm refused: {str(exc).splitlines()[0][:150]}")
    for name in extra:
        fns[name] = lambda name=name: grouped_matmul(a, b, sizes, out, scale_a=scale_a, scale_b=scale_b, config=name,
                                                     use_fast_accum=fast)
    for name in [n for n in fns if n not in ("loop", "scaled_grouped_mm")]:
        out.fill_(float("nan"))
        fns[name]()
        torch.cuda.synchronize()
        if not rel(out) < 2e-2:
            raise SystemExit(f"E={E} M={M}: tlxc fp8 grouped_matmul ({name}) wrong (rel. error {rel(out):.2e} "
                             f"against float32 math)")
    for fn in fns.values():
        fn()
    med = {n: statistics.median(t) for n, t in paired_times(fns, rounds, hide, {}).items()}
    flops = 2 * M * K * N
    pick = choose_grouped_config(M, E, N, _ws_layout(a, b), fp8=True, promote=not fast)
    line = (f"fp8{'' if fast else ' promoted'} E={E:3d} M={M:5d} K={K:5d} N={N:5d}: tlxc {med['tlxc']:.4f} ms "
            f"({flops / med['tlxc'] / 1e9:.0f} TFLOP/s, {pick})")
    for name in extra:
        line += f", {name} {med[name] / med['tlxc']:.3f}x the time"
    for base in ("loop", "scaled_grouped_mm"):
        if base in med:
            ratios.setdefault(base, []).append(med[base] / med["tlxc"])
            line += f", {base} {med[base]:.4f} ms -> {med[base] / med['tlxc']:.3f}x"
    print(line, flush=True)


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--timing", choices=("kernel", "call"), default="kernel")
    parser.add_argument("--experts", help="only the cases with these expert counts (comma-separated)")
    parser.add_argument("--configs", help="more grouped configurations to time beside the pick (comma-separated)")
    parser.add_argument("--lean", action="store_true", help="no pointer-kernel / pointer-store side timings")
    parser.add_argument("--wgrad", action="store_true", help="the weight gradient (grouped_weight_grad) instead")
    parser.add_argument("--dgrad", action="store_true",
                        help="the input gradient (dout @ w[g], N-major weights as nn.Linear stores them) instead")
    parser.add_argument("--fp8", action="store_true",
                        help="fp8 (e4m3, row-wise / per-expert column scales) against torch._scaled_grouped_mm "
                             "and a torch._scaled_mm loop instead")
    parser.add_argument("--precise", action="store_true",
                        help="--fp8 with promoted sums (use_fast_accum=False) for every contender")
    parser.add_argument("--cases", help="these cases instead of the sweep: ExMxKxN,... (e.g. 1x4096x4096x14336)")
    parser.add_argument("--split", choices=("uneven", "equal"), default="uneven",
                        help="group sizes: the seeded uneven draw (default) or M / E rows each")
    parser.add_argument("--dense", action="store_true",
                        help="also time tlxc.ops.matmul on all M rows (one expert's weights): the dense yardstick")
    args = parser.parse_args()
    experts = {int(e) for e in args.experts.split(",")} if args.experts else None
    extra = args.configs.split(",") if args.configs else ()
    hide = args.timing == "kernel"
    print(f"card: {torch.cuda.get_device_name()}, torch {torch.__version__}, {'fp8 e4m3' if args.fp8 else 'bf16'}, "
          f"{args.timing} time", flush=True)
    ratios = {"loop": [], "grouped_mm": []}
    cases = [tuple(int(v) for v in c.split("x")) for c in args.cases.split(",")] if args.cases else CASES
    for E, M, K, N in cases:
        if (experts is None or E in experts) and args.wgrad:
            run_wgrad_case(E, M, K, N, args.rounds, hide, ratios, extra)
        elif (experts is None or E in experts) and args.dgrad:
            run_dgrad_case(E, M, K, N, args.rounds, hide, ratios, extra)
        elif (experts is None or E in experts) and args.fp8:
            run_fp8_case(E, M, K, N, args.rounds, hide, ratios, extra, fast=not args.precise)
        elif experts is None or E in experts:
            run_case(E, M, K, N, args.rounds, hide, ratios, extra, args.lean, args.split, args.dense)
    for base, rs in ratios.items():
        if rs:
            geo = math.exp(sum(math.log(r) for r in rs) / len(rs))
            print(f"vs {base}: geomean {geo:.3f}x, min {min(rs):.3f}x over {len(rs)} cases")


if __name__ == "__main__":
    main()
