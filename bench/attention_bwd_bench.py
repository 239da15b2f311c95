"""The attention backward (tlxc.ops.attention_bwd) against cuDNN's and the flash backend's SDPA
backward, paired per round on fresh inputs, in one process.

    python bench/attention_bwd_bench.py [--rounds 8] [--s 512,2048] [--d 64,128] [--dtype bf16] [--no-ws]
    python bench/attention_bwd_bench.py --tokens 16384 --s 1024,4096   # issue 23's shapes: B*S, H*D fixed
    python bench/attention_bwd_bench.py --only tlxc,tlxc_ws,cudnn     # a subset of the contenders (faster)
    python bench/attention_bwd_bench.py --sweep --s 4096      # tiles of the tl.dot kernels
    python bench/attention_bwd_bench.py --kernels-only        # the per-kernel times alone

Cases: B=4, H=32 (--tokens N: B = N / S, H = 2048 / D, as issue 23's sweep), S in --s, D in --d,
causal or not, MHA (Hkv = H) and GQA 4:1 (Hkv = H / 4).  Each
round draws new q, k, v, dO, runs the flash forward for the o and lse the tlxc backward reads,
builds cuDNN's and flash's forward graphs, then times (CUDA events, the host's launch work
hidden behind a GPU spin) one backward of each in a
rotating order: tlxc's three tl.dot kernels called directly (``tlxc``), the warp-specialized
kernel (``tlxc_ws``, TLXC_ATTN_BWD=ws; ``tlxc_ws_alt``: ``WS_DRIFT`` flipped, the consumers
meeting every tile where they drift a tile apart as shipped (D = 64, D = 128 without a mask) and the
reverse (D = 128 under a mask); "ws/alt" = tlxc_ws's time / its), the ws kernel scheduled as in session 12 (``tlxc_ws_plain``: one
program per key block in the plain order, ``WS_PERSISTENT`` and ``SECTIONS`` off), causal: the
tl.dot kernels in the plain order (``tlxc_plain``) and the ws kernel in sections without its
persistent table (``tlxc_ws_np``; "np/ws" = its time / tlxc_ws's), non-causal: the ws kernel with the
persistent table (``tlxc_ws_p``, off by default there; "ws/p" = tlxc_ws's time / its) and with its programs
of two items each (``tlxc_ws_p2``, ``WS_PROGRAM_ITEMS``; "ws/p2"), the ws kernel with
``WS_STATS_SMEM`` flipped for the head dim and mask (``tlxc_ws_st``; "ws/st" = tlxc_ws's time / its) and with
``WS_DYNAMIC`` flipped (``tlxc_ws_dyn``; "ws/dyn") and ``WS_DQ_ROWS`` flipped (``tlxc_ws_dq``; "ws/dq"), ``torch.autograd.grad`` on the kept SDPA
graphs (GQA through ``enable_gqa``; a backend that refuses a case prints n/a).  The first round
checks tlxc's gradients against cuDNN's.  Per case it prints the median times and TFLOP/s
(backward = 2.5x the forward's 4*B*H*S*S*D, halved when causal); the ratios (baseline time /
tlxc time, medians of the per-round ratios; "cudnn/ws": cuDNN against tlxc_ws; "plain/ws":
tlxc_ws_plain against tlxc_ws) come last, with their geomeans.  Then (``--no-kernels`` leaves it out) the device time of each kernel
of one backward (torch.profiler, MHA non-causal at the largest S, per head dim, median of 3
calls): the tl.dot kernels, the ws kernel and its zero-fill and conversion, cuDNN's.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bench.triton_source import event_ms, spin_for  # noqa: E402

WITH_WS = True          # --no-ws: time the tl.dot kernels only
ONLY: set[str] | None = None    # --only: the contenders timed (None: all)
CONTENDERS = ("tlxc", "tlxc_plain", "tlxc_ws", "tlxc_ws_plain", "tlxc_ws_np", "tlxc_ws_p", "tlxc_ws_p2", "tlxc_ws_st",
              "tlxc_ws_dyn", "tlxc_ws_alt", "tlxc_ws_dq", "cudnn", "flash")


def _event_ms(fn, spin_cycles: int | None = None) -> float:
    """One call of ``fn`` between CUDA events, behind a GPU spin so that the host's launch work
    overlaps it (device time, as ``ops_attention_bench.py`` times): ``spin_cycles`` from
    ``spin_for`` (1.5x the slowest contender's host time: a direct ``attention_bwd`` call takes
    0.3-0.6 ms of host time on the H200's host, sometimes more than the default ~0.5-1 ms spin;
    sessions <= 20 used that default here)."""
    return event_ms(fn, True, spin_cycles)


def _rel(a, b) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def _forward(q, k, v, causal, scale):
    """(o, lse) of the flash backend (lse float32, natural log, [B, H, S]); float32 math one
    batch at a time where it refuses."""
    import torch
    try:
        o, lse = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)[:2]
        if tuple(lse.shape) == tuple(q.shape[:3]):
            return o, lse
    except RuntimeError:
        pass
    outs, lses = [], []
    for b in range(q.shape[0]):
        s = (q[b].float() @ k[b].float().transpose(-1, -2)) * scale
        if causal:
            s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
        lses.append(torch.logsumexp(s, -1))
        outs.append((torch.softmax(s, -1) @ v[b].float()).to(q.dtype))
    return torch.stack(outs), torch.stack(lses)


def _contenders(q, k, v, do, o, lse, causal, scale, gqa, refused, B, H, Hkv, S, D) -> dict:
    """name -> a function running that backward once (SDPA graphs built here, kept alive)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import tlxc.ops.attention_bwd as host
    from tlxc.ops.attention_bwd import attention_bwd

    def tlxc_with(kernels):
        def run():
            os.environ["TLXC_ATTN_BWD"] = kernels
            try:
                return attention_bwd(do, q, k, v, o, lse, causal=causal, sm_scale=scale)
            finally:
                os.environ.pop("TLXC_ATTN_BWD", None)
        return run

    def scheduled(run, sections, persistent):   # the ws kernel's schedule A/Bs
        def variant():
            shipped = host.SECTIONS, host.WS_PERSISTENT
            host.SECTIONS, host.WS_PERSISTENT = sections, dict.fromkeys(shipped[1], persistent)
            try:
                return run()
            finally:
                host.SECTIONS, host.WS_PERSISTENT = shipped
        return variant

    def two_per_program(run):              # the persistent table's programs of two items (WS_PROGRAM_ITEMS)
        def variant():
            shipped = dict(host.WS_PROGRAM_ITEMS)
            host.WS_PROGRAM_ITEMS = dict.fromkeys(shipped, 2)
            try:
                return run()
            finally:
                host.WS_PROGRAM_ITEMS = shipped
        return variant

    def in_plain_order(run):                # session 12's programs: one per item, in the plain order
        return scheduled(run, False, False)

    fns = {"tlxc": tlxc_with("dot")}
    if causal:
        fns["tlxc_plain"] = in_plain_order(tlxc_with("dot"))
    if WITH_WS:
        ws_run = tlxc_with("ws")
        fns["tlxc_ws"] = ws_run
        fns["tlxc_ws_plain"] = in_plain_order(ws_run)
        if causal:                          # sections without the persistent table
            fns["tlxc_ws_np"] = scheduled(ws_run, True, False)
        else:                               # the persistent table, off by default without a mask
            fns["tlxc_ws_p"] = scheduled(ws_run, True, True)
            fns["tlxc_ws_p2"] = two_per_program(scheduled(ws_run, True, True))

        def ws_stats():                     # the row statistics through shared memory (WS_STATS_SMEM)
            shipped = dict(host.WS_STATS_SMEM)
            host.WS_STATS_SMEM = {**shipped, (D, causal): not shipped.get((D, causal), False)}
            try:
                return ws_run()
            finally:
                host.WS_STATS_SMEM = shipped
        fns["tlxc_ws_st"] = ws_stats

        def flipped(table):                 # the ws kernel with every entry of the host's ``table`` flipped
            def variant():
                shipped = dict(getattr(host, table))
                setattr(host, table, {key: not on for key, on in shipped.items()})
                try:
                    return ws_run()
                finally:
                    setattr(host, table, shipped)
            return variant
        fns["tlxc_ws_dyn"] = flipped("WS_DYNAMIC")      # items drawn from a device counter
        fns["tlxc_ws_alt"] = flipped("WS_DRIFT")        # in step where shipped drifting, and the reverse
        fns["tlxc_ws_dq"] = flipped("WS_DQ_ROWS")       # dQ staged in column blocks (rows are shipped)
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        if name in refused or ONLY is not None and name not in ONLY:
            continue
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        try:
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(*leaves, is_causal=causal, scale=scale, enable_gqa=gqa)
        except RuntimeError as exc:
            print(f"  {name} refused B{B} H{H}/{Hkv} S{S} D{D}: {str(exc).splitlines()[0][:120]}")
            refused.add(name)
            continue
        fns[name] = lambda out=out, leaves=leaves: torch.autograd.grad(out, leaves, do, retain_graph=True)
    if ONLY is not None:
        fns = {n: f for n, f in fns.items() if n in ONLY}
    return fns


# ratio name -> (baseline, tlxc contender): baseline time / contender time
RATIOS = {"cudnn": ("cudnn", "tlxc"), "flash": ("flash", "tlxc"), "cudnn/ws": ("cudnn", "tlxc_ws"),
          "flash/ws": ("flash", "tlxc_ws"), "plain/dot": ("tlxc_plain", "tlxc"), "plain/ws": ("tlxc_ws_plain", "tlxc_ws"),
          "np/ws": ("tlxc_ws_np", "tlxc_ws"), "ws/p": ("tlxc_ws", "tlxc_ws_p"), "ws/p2": ("tlxc_ws", "tlxc_ws_p2"),
          "ws/st": ("tlxc_ws", "tlxc_ws_st"), "ws/dyn": ("tlxc_ws", "tlxc_ws_dyn"),
          "ws/dq": ("tlxc_ws", "tlxc_ws_dq"), "ws/alt": ("tlxc_ws", "tlxc_ws_alt")}


def run_case(B, H, Hkv, S, D, causal, dtype, rounds):
    import torch

    scale = D ** -0.5
    gqa = Hkv != H
    times = {n: [] for n in CONTENDERS}
    ratios = {name: [] for name in RATIOS}
    refused = set()
    for r in range(rounds):
        g = torch.Generator(device="cuda").manual_seed(1000 * r + S + D + causal + 7 * gqa)
        q = torch.randn(B, H, S, D, device="cuda", dtype=dtype, generator=g)
        k = torch.randn(B, Hkv, S, D, device="cuda", dtype=dtype, generator=g)
        v = torch.randn(B, Hkv, S, D, device="cuda", dtype=dtype, generator=g)
        do = torch.randn(B, H, S, D, device="cuda", dtype=dtype, generator=g)
        group = H // Hkv
        kr, vr = (k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)) if gqa else (k, v)
        o, lse = _forward(q, kr, vr, causal, scale)
        fns = _contenders(q, k, v, do, o, lse, causal, scale, gqa, refused, B, H, Hkv, S, D)
        if r == 0:
            for name in list(fns):               # warm every contender; drop a backend whose backward refuses
                try:
                    fns[name]()
                except RuntimeError as exc:
                    if name.startswith("tlxc"):
                        raise
                    print(f"  {name} backward refused: {str(exc).splitlines()[0][:120]}")
                    refused.add(name)
                    del fns[name]
            ref_name = next((n for n in ("cudnn", "flash") if n in fns), None)
            if ref_name is not None:
                ref = fns[ref_name]()
                for mine in [n for n in fns if n.startswith("tlxc")]:
                    errs = [_rel(x, y) for x, y in zip(fns[mine](), ref)]
                    print(f"  check {mine} vs {ref_name}: dq {errs[0]:.1e} dk {errs[1]:.1e} dv {errs[2]:.1e}",
                          flush=True)
                    if not max(errs) < 3e-2:
                        raise SystemExit(f"{mine} attention backward disagrees with {ref_name}: {errs}")
            torch.cuda.synchronize()
            spin, host = spin_for(fns)
            print("  host ms " + "  ".join(f"{n} {ms:.2f}" for n, ms in host.items()), flush=True)
        names = list(fns)
        names = names[r % len(names):] + names[:r % len(names)]
        got = {name: _event_ms(fns[name], spin) for name in names}
        for name, ms in got.items():
            times[name].append(ms)
        for name, (base, mine) in RATIOS.items():
            if base in got and mine in got:
                ratios[name].append(got[base] / got[mine])
    return ({n: statistics.median(t) for n, t in times.items() if t},
            {n: statistics.median(x) for n, x in ratios.items() if x})


SWEEP = {   # head dim -> candidate tiles: ("dkdv" | "dq", (block a, block b, warps, stages))
    64: [("dkdv", (128, 32, 4, 3)), ("dkdv", (64, 64, 4, 3)), ("dkdv", (128, 64, 8, 4)),
         ("dq", (128, 32, 4, 3)), ("dq", (64, 64, 4, 3)), ("dq", (128, 128, 8, 2))],
    128: [("dkdv", (128, 32, 8, 3)), ("dkdv", (64, 64, 4, 2)), ("dkdv", (128, 64, 8, 2)),
          ("dq", (128, 32, 8, 3)), ("dq", (64, 64, 4, 3)), ("dq", (128, 128, 8, 2))],
}


def sweep(rounds: int, S: int, causal: bool) -> None:
    """Time the tl.dot backward with one kernel's tiles replaced by each candidate of ``SWEEP``
    (B=4, H=32, the shipped tiles first), paired against the shipped tiles on the same inputs."""
    import importlib

    import torch
    host = importlib.import_module("tlxc.ops.attention_bwd")
    os.environ["TLXC_ATTN_BWD"] = "dot"          # the tiles are the tl.dot kernels' (auto: ws at S >= 2048)
    shipped = dict(host.BLOCKS)
    for D, candidates in SWEEP.items():
        q, k, v, do = (torch.randn(4, 32, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        o, lse = _forward(q, k, v, causal, D ** -0.5)

        def run(q=q, k=k, v=v, do=do, o=o, lse=lse, scale=D ** -0.5):
            return host.attention_bwd(do, q, k, v, o, lse, causal=causal, sm_scale=scale)
        base = run()
        for which, tiles in candidates:
            dkdv, dq = shipped[D]
            host.BLOCKS[D] = (tiles, dq) if which == "dkdv" else (dkdv, tiles)
            try:
                got = run()
                errs = [_rel(x, y) for x, y in zip(got, base)]
                pairs = []
                for _ in range(rounds):
                    host.BLOCKS[D] = shipped[D]
                    t0 = _event_ms(run)
                    host.BLOCKS[D] = (tiles, dq) if which == "dkdv" else (dkdv, tiles)
                    pairs.append((t0, _event_ms(run)))
                t0 = statistics.median(p[0] for p in pairs)
                t1 = statistics.median(p[1] for p in pairs)
                ratio = statistics.median(p[0] / p[1] for p in pairs)
                print(f"  D{D} S{S}{' causal' if causal else ''} {which} {tiles}: {t1:.3f} ms vs shipped {t0:.3f} ms, "
                      f"shipped/candidate {ratio:.3f}, max rel. diff {max(errs):.1e}", flush=True)
            except Exception as exc:         # a candidate that does not compile (registers, shared memory)
                print(f"  D{D} {which} {tiles}: failed: {str(exc).splitlines()[0][:150]}", flush=True)
            finally:
                host.BLOCKS[D] = shipped[D]


def kernel_breakdown(B, H, S, D, dtype, calls: int = 3) -> None:
    """Per-kernel device times (ms per backward) of tlxc (dot), tlxc_ws and cuDNN, one case."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    scale = D ** -0.5
    q, k, v, do = (torch.randn(B, H, S, D, device="cuda", dtype=dtype) for _ in range(4))
    o, lse = _forward(q, k, v, False, scale)
    fns = _contenders(q, k, v, do, o, lse, False, scale, False, set(), B, H, H, S, D)
    for name in [n for n in ("tlxc", "tlxc_ws", "cudnn") if n in fns]:
        fns[name]()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fns[name]()
            torch.cuda.synchronize()
        rows = []
        for evt in prof.key_averages():
            us = getattr(evt, "device_time_total", None)
            if us is None:
                us = getattr(evt, "cuda_time_total", 0)
            if us > 0:
                rows.append((us / 1000 / calls, evt.key))
        rows.sort(reverse=True)
        total = sum(ms for ms, _ in rows)
        print(f"  kernels B{B} H{H} S{S} D{D} {name}: total {total:.3f} ms = "
              + "  ".join(f"{key[:48]} {ms:.3f}" for ms, key in rows[:6]), flush=True)


# precompile job -> the contender that launches it
PRECOMPILED = {"dot": "tlxc", "dot_plain": "tlxc_plain", "ws": "tlxc_ws", "ws_plain": "tlxc_ws_plain",
               "ws_np": "tlxc_ws_np", "ws_p": "tlxc_ws_p", "ws_st": "tlxc_ws_st", "ws_dyn": "tlxc_ws_dyn",
               "ws_alt": "tlxc_ws_alt", "ws_dq": "tlxc_ws_dq"}


def _compile_worker(job):
    """Compile (CPU tensors, sm_90a, into the disk cache) what one case launches."""
    S, D, B, H, hkv, causal, kernels = job
    try:
        import torch

        import tlxc.ops.attention_bwd as host
        from tlxc.ops.attention_bwd import compile_kernels
        os.environ["TLXC_ATTN_BWD"] = kernels.split("_")[0]
        if kernels == "ws_alt":
            host.WS_DRIFT = {d: not on for d, on in host.WS_DRIFT.items()}
        if kernels.endswith("_plain"):
            host.SECTIONS, host.WS_PERSISTENT = False, dict.fromkeys(host.WS_PERSISTENT, False)
        if kernels == "ws_np":
            host.WS_PERSISTENT = dict.fromkeys(host.WS_PERSISTENT, False)
        if kernels == "ws_p":
            host.WS_PERSISTENT = dict.fromkeys(host.WS_PERSISTENT, True)
        if kernels == "ws_st":      # the shipped choice flipped, as the bench's tlxc_ws_st runs it
            host.WS_STATS_SMEM = {key: not on for key, on in host.WS_STATS_SMEM.items()}
        if kernels == "ws_dyn":
            host.WS_DYNAMIC = {c: not host.WS_DYNAMIC[c] for c in host.WS_DYNAMIC}
        if kernels == "ws_dq":
            host.WS_DQ_ROWS = {d: not on for d, on in host.WS_DQ_ROWS.items()}
        q = torch.empty(B, H, S, D, dtype=torch.bfloat16)
        k = torch.empty(B, hkv, S, D, dtype=torch.bfloat16)
        compile_kernels(q, q, k, k, q, torch.empty(B, H, S), causal=causal, sm_scale=D ** -0.5)
        return job, "ok"
    except Exception as exc:                  # the timed run reports it again
        return job, f"compile failed: {type(exc).__name__}: {str(exc)[:200]}"


def precompile(jobs_list, processes: int) -> None:
    import multiprocessing as mp
    import time
    start = time.time()
    with mp.get_context("spawn").Pool(processes) as pool:
        for job, status in pool.imap_unordered(_compile_worker, jobs_list):
            if status != "ok":
                print(f"  precompile {job}: {status}", flush=True)
    print(f"precompiled {len(jobs_list)} cases in {processes} processes: {time.time() - start:.1f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--s", default="512,2048")
    parser.add_argument("--d", default="64,128")
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    parser.add_argument("--b", type=int, default=4)
    parser.add_argument("--h", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=0,
                        help="B = tokens // S and H = 2048 // D per case (issue 23's sweep, bench/ops_attention_bench.py: "
                             "16384), instead of --b / --h")
    parser.add_argument("--no-ws", action="store_true", help="leave out the warp-specialized kernel")
    parser.add_argument("--only", default="",
                        help=f"comma-separated contenders to time ({', '.join(CONTENDERS)}); default all")
    parser.add_argument("--kernels-s", default="",
                        help="sequence lengths of the per-kernel breakdown (default: the largest of --s)")
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1),
                        help="processes compiling every case's kernels before the timed runs (1: none)")
    parser.add_argument("--no-kernels", action="store_true", help="leave out the per-kernel breakdown")
    parser.add_argument("--kernels-only", action="store_true", help="only the per-kernel breakdown")
    parser.add_argument("--sweep", action="store_true",
                        help="instead: time candidate tiles of the tl.dot kernels against the shipped ones")
    args = parser.parse_args()
    if args.sweep:
        import torch
        print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, bf16, B=4 H=32, tile sweep")
        for S in (int(x) for x in args.s.split(",")):
            for causal in (False, True):
                sweep(args.rounds, S, causal)
        return
    global WITH_WS, ONLY
    WITH_WS = not args.no_ws
    if args.only:
        ONLY = set(args.only.split(","))
        unknown = ONLY - set(CONTENDERS)
        if unknown:
            parser.error(f"--only: unknown contenders {sorted(unknown)}")
    import torch
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16

    def shape(S, D):                    # (B, H) of a case
        return (max(1, args.tokens // S), 2048 // D) if args.tokens else (args.b, args.h)
    if args.jobs > 1 and dtype == torch.bfloat16:
        jobs = [(S, D, *shape(S, D), hkv, causal, kernels)
                for S in (int(x) for x in args.s.split(",")) for D in (int(x) for x in args.d.split(","))
                for hkv in (shape(S, D)[1], shape(S, D)[1] // 4) for causal in (False, True)
                for kernels in (("dot", "ws", "ws_plain", "ws_st", "ws_dyn", "ws_dq") if WITH_WS else ("dot",))
                + (("dot_plain",) + (("ws_np",) if WITH_WS else ()) if causal else (("ws_p",) if WITH_WS else ()))
                + (("ws_alt",) if WITH_WS else ())
                if ONLY is None or PRECOMPILED[kernels] in ONLY]
        precompile(jobs, args.jobs)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {args.dtype}, {args.rounds} rounds")
    s_max = max(int(x) for x in args.s.split(","))
    kernel_s = [int(x) for x in args.kernels_s.split(",")] if args.kernels_s else [s_max]

    def breakdowns():
        for S in kernel_s:
            for D in (int(x) for x in args.d.split(",")):
                kernel_breakdown(*shape(S, D), S, D, dtype)
    if args.kernels_only:
        breakdowns()
        return
    rows = []
    for S in (int(x) for x in args.s.split(",")):
        for D in (int(x) for x in args.d.split(",")):
            B, H = shape(S, D)
            for hkv in (H, H // 4):
                for causal in (False, True):
                    name = f"B{B} H{H}/{hkv} S{S} D{D}{' causal' if causal else ''}"
                    print(name, flush=True)
                    t, ratio = run_case(B, H, hkv, S, D, causal, dtype, args.rounds)
                    flops = 2.5 * 4 * B * H * S * S * D / (2 if causal else 1)
                    print("  " + "  ".join(f"{n} {ms:.3f} ms ({flops / ms / 1e9:.0f} TFLOP/s)"
                                           for n, ms in t.items()), flush=True)
                    print("  ratios " + "  ".join(f"{n} {x:.3f}" for n, x in ratio.items()), flush=True)
                    rows.append((name, ratio))
    print("\nratios (baseline time / tlxc time; > 1: tlxc faster), medians of paired rounds")
    for name, ratio in rows:
        print(f"  {name:<32} " + "  ".join(f"vs {n} {x:.3f}" for n, x in ratio.items()))
    for n in RATIOS:
        xs = [r[n] for _, r in rows if n in r]
        if xs:
            print(f"geomean vs {n}: {math.exp(sum(math.log(x) for x in xs) / len(xs)):.3f} over {len(xs)} cases")
    if not args.no_kernels:
        print("per-kernel device time of one backward (torch.profiler; ms):")
        breakdowns()


if __name__ == "__main__":
    main()
