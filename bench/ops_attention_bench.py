"""tlxc.ops.attention against SDPA's cuDNN and flash backends: forward (and backward once
``tlxc/ops/kernels/attention_bwd.py`` exists), dense and varlen, paired medians.

One process, one GPU, bf16.  Dense sweep (issue 23): S in {256, 512, 1024, 2048, 4096, 8192, 16384}
x D in {64, 128, 256} x causal/full x MHA/GQA-4, with B*S = 16384 tokens and H*D = 2048
(H = 32, 16, 8).  Varlen: packed batches of mixed lengths (64..4096, 16k tokens), D = 128,
MHA and GQA-4 (tlxc's default ``sorted`` schedule, and the ``snake`` one as ``tlxc_snake``: a
ratio > 1 there is the sorted schedule's gain; ``tlxc_tma_store``: the default with staged TMA
stores of O instead of pointer stores), against flash's varlen kernel
(``aten._flash_attention_forward`` with
cu_seqlens), cuDNN's (``aten._cudnn_attention_forward`` with cu_seqlens, when this torch
has it) and cuDNN on the zero-padded dense batch.  Every case gets fresh inputs, is checked
against cuDNN's (or flash's) output first (relative error < 1e-2; a wrong result is reported,
not timed), then timed in paired rounds (each round times every implementation back to back,
kernel time: a GPU spin hides the host's launch work; it is sized per case to outlast 1.5x the
slowest contender's host time, which the backward rows print: an autograd backward's host work,
0.5-0.9 ms for cuDNN's and 1.1-2.6 ms for tlxc's on the H200's host (2026-12-04), outlasted the fixed ~1 ms spin of
sessions <= 19, whose backward ratios therefore included part of tlxc's host time).  At S = 1024 and 4096 (MHA, D = 64/128)
``examples/flash_attention_fwd.py`` runs too (``example``: what generalizing it cost).  GQA baselines get ``enable_gqa=True``
when the backend takes it, else k/v expanded to H heads (marked ``x``).  ``--configs`` also
times alternative launch configurations at S <= 512 (the small-S schedule question).
Decode (``tlxc.ops.attention_decode``: one query token per sequence, paged KV cache of 16-row
pages in shuffled order, D = 128, GQA 4:1 / 8:1 and MHA): against every SDPA backend (flash,
efficient, cudnn, math) on the same keys gathered into a contiguous ``[B, Hkv, L, D]`` cache
(the gather not timed; ``best_sdpa`` = the fastest of them in each round), and, for a batch of
mixed cache lengths, flash's varlen kernel with one query per sequence; ``tlxc_contig`` is
tlxc on a contiguous ``[B, L, Hkv, D]`` cache, ``tlxc_bhsd`` on SDPA's own ``[B, Hkv, L, D]`` cache (a
strided view: the same bytes the baselines read), ``tlxc_hnd`` tlxc on the same pages stored head-major (``[pages, Hkv,
page, D]`` memory passed as a ``[pages, page, Hkv, D]`` view: FlashInfer's HND layout), ``tlxc_stream`` the persistent stream-K schedule
(``schedule="stream"``; the default is ``split``), ``tlxc_nocheck`` without the device check
of the lengths and block table.  (Session 13 run 2 also timed the stream schedule with a
6 x 32-key ring and with all kv heads in a block: ``_ring=(32, 6)``, ``_heads=True``; both
slower, docs/performance.md.)  ``--decode-variant N`` adds column ``tlxc_vN``: the split kernel
with session 13's per-block changes selected by the bit mask ``_variant=N`` (the default is 7; 0 = the plain kernel;
bit 8: the diagnostic without block math, its output not checked; ``attention_decode``'s docstring);
``--decode-splits 1,2,..`` adds ``tlxc_sN``: the split kernel with ``num_splits=N``; ``--decode-rings 32x6,..``
``tlxc_rKxS``: the split kernel with ``_ring=(K, S)``; ``tlxc_tma`` is the split kernel with its ring filled by
one TMA copy per page box (``_tma=True``) instead of per-thread cp.async.  GB/s = K/V bytes read / time.
The ratios (baseline time / tlxc time, > 1: tlxc faster) and their geomeans come last.

    python bench/ops_attention_bench.py [--quick] [--configs] [--no-bwd] [--varlen-only] [--decode-only]
                                        [--budget-s 180] [--jobs 8] [--s 256,512] [--d 64,128] [--groups 1]
                                        [--no-varlen] [--no-decode] [--no-ab] [--decode-variant N] [--decode-splits N,..]
                                        [--decode-rings KxS,..] [--pin] [--skew] [--diag] [--ahead]
                                        [--kahead] [--early] [--set NAME:FIELD=INT[+FIELD=INT]]

``--s/--d/--groups`` restrict the dense sweep (fast runs of the cases a change touches).  Unless
``--no-ab``, each dense MHA case whose default configuration differs from session 11's also times that
one (column ``s11``: its time / the default's, > 1: session 12's default is faster; at S >= 512 and
D <= 128 it is the A/B of the TMA-store epilogue), and at S <= 1024 / D <= 128 where the default
stores O through pointers, the default with ``tma_store=True`` (column ``tma``, < 1: TMA stores
faster; ``--pin``, also with ``--no-ab``: column ``pin``, every dense case, the default with
``pin_softmax=True``, < 1: pinned faster; ``pin_ov`` the same with ``overlap=True`` at tiles up to 128
wide); ``--skew``: column ``skew``, the default with ``skew=True`` (the second consumer one issue turn behind
the first), and at D = 64 with 128-key blocks ``skew3``, the same with three K/V stages; ``--diag``: columns
``diag1/2/4``, the default with one stage of each item left out (``AttnConfig.diag``: no O / lse epilogue, no
first-block softmax, no lone last P V; outputs not checked), so 1 - ratio is that stage's share; ``--ahead``: column
``ahead``, the default with ``s1_ahead=True`` (an item's ``S_1`` issued with its ``S_0``) where it applies (no
mask, two consumers), or ``noahead``, the default without it where the default has it (S <= 256, D <= 64).  (The run of
17:26 UTC also timed ``overlap=True``, the L2 prefetch and deeper rings:
docs/performance.md; ``--configs`` still has them.)

Compiles first run in ``--jobs`` processes (sm_90a, CPU tensors, the disk cache).  Results
also go to ``$OUT/ops_attention_bench.json`` when ``OUT`` is set.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

TOKENS, WIDTH = 16384, 2048          # B * S and H * D of a dense case
SMALL_CONFIGS = [  # AttnConfig fields (head_dim, block_m, block_n, stages, q_bufs, overlap, prefetch, tma_store,
    #                 diag_skip), timed at S <= 512 with --configs where they differ from the default: the session 13
    #                 defaults' A/Bs (run 2 dropped: overlap + TMA 3-7% slower, four 128-key stages +-1%, pointer stores)
    (64, 128, 128, 2, 2, False, 0, True), (64, 128, 64, 4, 2, False, 0, True),      # 128- / 64-key blocks
    (128, 128, 128, 2, 2, False, 0, True), (128, 128, 64, 4, 2, False, 0, True),
    (256, 128, 64, 2, 1, False, 0, False),                   # D = 256: pointer stores (session 12's default)
    (256, 128, 64, 2, 1, False, 0, True, False),             # D = 256 causal without diag_skip
]


def config_fields(items, option: str) -> dict:
    """``AttnConfig`` fields from ``FIELD=INT`` items (0 / 1 for the flags); ``option`` names the
    command-line option in the error (this bench's ``--set``, attn_trace_probe.py's)."""
    from tlxc.ops.attention import AttnConfig
    fields = {}
    for item in items:
        field, _, value = item.partition("=")
        if field not in AttnConfig.__dataclass_fields__ or not value.lstrip("-").isdigit():
            raise SystemExit(f"{option}: {item!r} is not FIELD=INT with FIELD one of AttnConfig's fields")
        kind = AttnConfig.__dataclass_fields__[field].type
        fields[field] = bool(int(value)) if kind in (bool, "bool") else int(value)
    return fields


def parse_set(text: str) -> tuple[str, dict]:
    """``--set NAME:FIELD=INT[+FIELD=INT]`` as (NAME, {FIELD: value}) of ``AttnConfig`` fields."""
    name, sep, body = text.partition(":")
    fields = config_fields(body.split("+") if sep else (), f"--set {text!r}")
    if not name.isidentifier() or not fields:
        raise SystemExit(f"--set {text!r}: expected NAME:FIELD=INT[+FIELD=INT], e.g. bn256:block_n=256")
    return name, fields


def differs(c, default, causal: bool) -> bool:
    """Whether ``--configs`` times ``c`` next to ``default``: same tile width, another kernel
    (``diag_skip`` changes nothing without the causal mask)."""
    return c.head_dim == default.head_dim and c != default and \
        (causal or dataclasses.replace(c, diag_skip=default.diag_skip) != default)


def config_name(c) -> str:
    """A ``--configs`` column: ``cfg_<block_m>_<block_n>_<stages>_<q_bufs>[_ov]_p<prefetch>[_tma]``."""
    return (f"cfg_{c.block_m}_{c.block_n}_{c.stages}_{c.q_bufs}{'_ov' if c.overlap else ''}_p{c.prefetch}"
            f"{'_tma' if c.tma_store else ''}{'' if c.diag_skip else '_noskip'}")


def s11_config(AttnConfig, choose_config, D, causal, S):
    """Session 11's default (pointer stores of O, no L2 prefetch, two K/V stages): the ``s11``
    column, the A/B of session 12's defaults in the same rounds (> 1: the new default is faster)."""
    c = choose_config(D, causal, S)
    return AttnConfig(c.head_dim, c.block_m, 128 if c.head_dim <= 128 else 64, 2, c.q_bufs, c.overlap, diag_skip=False)


VARLEN_CASES = ((1, False), (1, True), (4, False), (4, True), (1, False))     # (GQA group, causal)
VARLEN_SEED = 72            # the first varlen case's lengths (the seed the 72-case sweep gave them)
EQUAL_SEED = VARLEN_SEED + 4   # the last case: 4 sequences of 4096, the dense B4 S4096 D128 case's work
#                                packed: what the varlen layout and item decode cost, schedules aside


DECODE_CASES = (  # (B, H, Hkv, cache length or None: mixed lengths 512..16384)
    (1, 32, 8, 32768), (8, 32, 8, 8192), (64, 32, 8, 2048), (16, 32, 32, 4096), (16, 64, 8, 4096), (16, 32, 8, None),
)
DECODE_PAGE = 16
DECODE_SEED = 90


def decode_lengths(B: int, L: int | None) -> list[int]:
    if L is not None:
        return [L] * B
    import random
    rng = random.Random(DECODE_SEED)
    return [int(math.exp(rng.uniform(math.log(512), math.log(16384)))) for _ in range(B)]


def decode_tensors(B, H, Hkv, L, device, empty=False):
    """q [B, H, D], a paged cache of ``DECODE_PAGE``-row pages in shuffled order, its block
    table and the int32 lengths (CPU tensors of the same shapes for the precompile)."""
    import torch
    D = 128
    lens = decode_lengths(B, L)
    per = [-(-n // DECODE_PAGE) for n in lens]
    width = max(per)
    pages = sum(per)
    make = torch.empty if empty else torch.randn
    q = make(B, H, D, device=device, dtype=torch.bfloat16)
    k_cache = make(pages, DECODE_PAGE, Hkv, D, device=device, dtype=torch.bfloat16)
    v_cache = make(pages, DECODE_PAGE, Hkv, D, device=device, dtype=torch.bfloat16)
    order = torch.randperm(pages, generator=torch.Generator().manual_seed(DECODE_SEED)).to(torch.int32)
    table = torch.zeros(B, width, dtype=torch.int32)
    used = 0
    for b, n in enumerate(per):
        table[b, :n] = order[used:used + n]
        used += n
    return q, k_cache, v_cache, table.to(device), torch.tensor(lens, dtype=torch.int32, device=device), lens


# A/B columns timed on GQA cases too (s11 / tma: MHA only)
ANY_GQA_COLUMNS = ("pin", "fma", "skew", "diag", "ahead", "noahead", "kahead", "nokahead", "early", "set_")


def wants_bwd(case, every_s: bool) -> bool:
    """The backward is timed at D <= 128, at S = 1024 and 4096 unless ``every_s``."""
    _, _, _, S, D, _ = case
    return D <= 128 and (every_s or S in (1024, 4096))


def dense_cases(quick: bool, only_s=None, only_d=None, groups=(1, 4)) -> list[tuple]:
    """(B, H, Hkv, S, D, causal)."""
    seqs = (512, 4096) if quick else (256, 512, 1024, 2048, 4096, 8192, 16384)
    cases = []
    for D in (64, 128, 256):
        if only_d and D not in only_d:
            continue
        H = WIDTH // D
        for S in seqs:
            if only_s and S not in only_s:
                continue
            for causal in (False, True):
                for group in groups:
                    cases.append((TOKENS // S, H, H // group, S, D, causal))
    return cases


def varlen_tma_config(causal: bool, longest: int):
    """The varlen default with staged TMA stores of O (a sequence's last partial rows by
    pointers) instead of pointer stores: the ``tlxc_tma_store`` column (> 1: the default,
    pointer stores, faster; session 13 run 2: 0.87-1.06 on mixed batches, 0.93 on the control)."""
    from tlxc.ops.attention import choose_config
    c = choose_config(128, causal, longest, varlen=True)
    return dataclasses.replace(c, tma_store=True)


def varlen_lengths(seed: int, total: int = TOKENS) -> list[int]:
    import random
    rng = random.Random(seed)
    if seed == EQUAL_SEED:
        return [total // 4] * 4
    lens = []
    while sum(lens) < total:
        lens.append(min(total - sum(lens), int(math.exp(rng.uniform(math.log(64), math.log(4096))))))
    return lens


def _compile_worker(job):
    """Compile (sm_90a, CPU tensors of the case's shapes: integer arguments specialize the
    kernels) one case's kernels into the disk cache: ("fwd"|"bwd", B, H, Hkv, S, D, causal,
    config) or ("varlen", seed, group, causal, varlen order, TMA stores of O)."""
    import torch

    from tlxc.ops.attention import AttnConfig, compile_config
    kind = job[0]
    try:
        if kind == "decode":
            from tlxc.ops.attention_decode import compile_decode
            _, B, H, Hkv, L, variant = job
            q, kc, vc, table, seqlens, lens = decode_tensors(B, H, Hkv, L, "cpu", empty=True)
            compile_decode(q, kc, vc, seqlens, block_table=table)
            if variant is not None:
                compile_decode(q, kc, vc, seqlens, block_table=table, _variant=variant)
            compile_decode(q, kc, vc, seqlens, block_table=table, _tma=True)          # tlxc_tma
            compile_decode(q, kc, vc, seqlens, block_table=table, schedule="stream")
            compile_decode(q, kc, vc, seqlens, block_table=table, check=False)       # tlxc_nocheck's merge
            if L is not None:
                contig = torch.empty(B, L, Hkv, q.shape[-1], dtype=q.dtype)
                compile_decode(q, contig, contig, seqlens)
            return job, "ok"
        if kind == "example":
            _, B, H, S, D, causal = job
            q = torch.empty(B, H, S, D, dtype=torch.bfloat16)
            example_launch(q, q, q, causal, compile_only=True)
            return job, "ok"
        if kind == "varlen":
            _, seed, group, causal, order, tma = job
            lens = varlen_lengths(seed)
            cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
            q = torch.empty(sum(lens), 16, 128, dtype=torch.bfloat16)
            k = torch.empty(sum(lens), 16 // group, 128, dtype=torch.bfloat16)
            compile_config(q, k, k, causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lens),
                           max_seqlen_k=max(lens), varlen_order=order,
                           config=varlen_tma_config(causal, max(lens)) if tma else None)
            return job, "ok"
        _, B, H, Hkv, S, D, causal, config = job
        q = torch.empty(B, H, S, D, dtype=torch.bfloat16)
        k = torch.empty(B, Hkv, S, D, dtype=torch.bfloat16)
        if kind == "fwd":
            compile_config(q, k, k, causal=causal, config=AttnConfig(*config) if config else None)
        else:
            from tlxc.ops.attention_bwd import compile_kernels
            lse = torch.empty(B, H, S, dtype=torch.float32)
            compile_kernels(q, q, k, k, q, lse, causal=causal, sm_scale=D ** -0.5)
        return job, "ok"
    except Exception as exc:                  # reported again by the timed run
        return job, f"compile failed: {type(exc).__name__}: {str(exc)[:200]}"


def wants_example(case) -> bool:
    """examples/flash_attention_fwd.py (MHA, D = 64/128) is timed too at S = 1024 and 4096: what
    the generalization costs."""
    _, H, Hkv, S, D, _ = case
    return H == Hkv and D in (64, 128) and S in (1024, 4096)


def example_launch(q, k, v, causal, compile_only=False):
    """The example's forward (its own host code), or with ``compile_only`` its kernel compiled
    for the launch an H200 would make (132 programs), from CPU tensors."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
    import flash_attention_fwd as F
    if not compile_only:
        return F.attention(q, k, v, causal)
    import torch

    import tlxc
    B, H, S, D = q.shape
    block_m = 192 if D == 64 and not causal else 128
    descs = [tlxc.TensorDescriptor.from_tensor(q.view(B * H, S, D), [1, rows, F.D_BOX], swizzle=128)
             for rows in (64, 128, 128)]
    lse = torch.empty((B, H, S), dtype=torch.float32)
    sched = F.schedule(S, B * H, block_m, 128, causal, 132, 16)
    F.attn_fwd_kernel.warmup(*descs, q, lse, S, 0.1, sched, sched.shape[1], HEAD_DIM=D, BLOCK_M=block_m,
                             BLOCK_N=128, NUM_STAGES=2, CAUSAL=causal, DTYPE=F.DTYPES[q.dtype],
                             REGISTERS=240 if block_m == 128 else 160, num_warps=4, grid=(sched.shape[0],))
    return None


def precompile(jobs_list, jobs: int) -> None:
    import multiprocessing as mp
    start = time.time()
    with mp.get_context("spawn").Pool(jobs) as pool:
        for job, status in pool.imap_unordered(_compile_worker, jobs_list):
            if status != "ok":
                print(f"  precompile {job}: {status}", flush=True)
    print(f"precompiled {len(jobs_list)} cases in {jobs} processes: {time.time() - start:.1f} s", flush=True)


def main() -> None:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from bench.triton_source import event_ms, spin_for
    from tlxc.ops import attention, attention_forward
    from tlxc.ops.attention import AttnConfig, choose_config

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="S in {512, 4096} only")
    parser.add_argument("--configs", action="store_true", help="also time other configurations at S <= 512")
    parser.add_argument("--no-bwd", action="store_true", help="skip the backward even if attention_bwd exists")
    parser.add_argument("--bwd-all", action="store_true", help="backward at every S (default: S = 1024, 4096)")
    parser.add_argument("--varlen-only", action="store_true",
                        help="only the varlen cases (schedules: snake, sorted); with --decode-only: both kinds")
    parser.add_argument("--decode-only", action="store_true",
                        help="only the decode cases (paged KV, S_q = 1); with --varlen-only: both kinds")
    parser.add_argument("--budget-s", type=float, default=180.0)
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--s", help="dense sequence lengths only these (comma-separated, e.g. 256,512)")
    parser.add_argument("--d", help="dense head dims only these (comma-separated)")
    parser.add_argument("--groups", default="1,4", help="dense GQA groups (default 1,4: MHA and GQA-4)")
    parser.add_argument("--no-varlen", action="store_true", help="skip the varlen cases")
    parser.add_argument("--no-decode", action="store_true", help="skip the decode cases")
    parser.add_argument("--decode-splits", default="",
                        help="also time the split kernel with these num_splits (comma-separated; columns tlxc_sN)")
    parser.add_argument("--decode-rings", default="",
                        help="also time the split kernel with these rings, KEYSxSLOTS comma-separated (tlxc_rKxS)")
    parser.add_argument("--decode-variant", type=int, default=None,
                        help="also time the split kernel with this _variant bit mask (column tlxc_vN)")
    parser.add_argument("--no-ab", action="store_true",
                        help="do not time session 11's configuration (s11) nor TMA stores (tma)")
    parser.add_argument("--exp-fma", default="",
                        help="also time the default with exp_fma=k for these k (comma-separated; column fma<k>)")
    parser.add_argument("--diag", action="store_true",
                        help="also time the default with one stage of each item left out (columns diag1: no O / lse "
                             "epilogue, diag2: no first-block softmax, diag4: no lone last P V; outputs not checked; "
                             "1 - ratio = that stage's share of the time)")
    parser.add_argument("--skew", action="store_true",
                        help="also time the default with skew=True (column skew; D = 64 with 128-key blocks also "
                             "skew3: three K/V stages; < 1: skewed faster)")
    parser.add_argument("--early", action="store_true",
                        help="also time the default with early_lse=True (column early: 1 / l and the lse store "
                             "issued while an item's last P V runs), time / default time")
    parser.add_argument("--kahead", action="store_true",
                        help="also time the default with k_ahead toggled (column nokahead: K_j, V_j loads in turn; "
                             "kahead: K one block ahead), time / default time")
    parser.add_argument("--ahead", action="store_true",
                        help="also time the default with s1_ahead toggled where it applies: no mask, two consumers "
                             "(column ahead: with it, < 1: faster with it; noahead: without it where the default "
                             "has it, > 1: the default is faster)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME:FIELD=INT[+FIELD=INT]",
                        help="also time the default with these AttnConfig fields changed (column set_NAME, time / "
                             "default time; repeatable; e.g. bn256:block_n=256); a case it cannot run prints why")
    parser.add_argument("--pin", action="store_true",
                        help="also time the default with pin_softmax=True (column pin, < 1: pinned faster)")
    args = parser.parse_args()
    t0 = time.time()
    ints = lambda text: tuple(int(x) for x in text.split(",")) if text else None  # noqa: E731
    variants = [parse_set(text) for text in args.set]
    has_bwd = not args.no_bwd and importlib.util.find_spec("tlxc.ops.kernels.attention_bwd") is not None
    only = args.varlen_only or args.decode_only
    cases = [] if only else dense_cases(args.quick, ints(args.s), ints(args.d), ints(args.groups))
    # --varlen-only / --decode-only select those kinds (both flags: both, no dense cases)
    varlen_cases = VARLEN_CASES if (args.varlen_only or not only) and not args.no_varlen else ()
    decode_cases = DECODE_CASES if (args.decode_only or not only) and not args.no_decode else ()

    def ab_configs(D, causal, S):
        """[(column, configuration)] timed next to the default: session 11's where it differs,
        the default with TMA stores of O where it has pointer stores (S <= 1024, D <= 128)."""
        default = choose_config(D, causal, S)
        pin = [("pin", dataclasses.replace(default, pin_softmax=True))] if args.pin else []
        pin += [(f"fma{k}", dataclasses.replace(default, exp_fma=k)) for k in ints(args.exp_fma) or ()]
        if args.pin and default.o_parts == 1:      # and with the last P V issued with the next item's first S
            pin.append(("pin_ov", dataclasses.replace(default, pin_softmax=True, overlap=True, diag_skip=False)))
        if args.skew and default.block_m == 128 and not default.overlap:   # the second consumer a turn behind
            pin.append(("skew", dataclasses.replace(default, skew=True)))
            if default.head_dim == 64 and default.block_n == 128:          # ... with a third K/V stage of slack
                pin.append(("skew3", dataclasses.replace(default, skew=True, stages=3)))
        if args.ahead and not causal and default.block_m == 128 and not default.overlap:
            pin.append(("noahead", dataclasses.replace(default, s1_ahead=False)) if default.s1_ahead
                       else ("ahead", dataclasses.replace(default, s1_ahead=True)))
        if args.kahead:     # the producer's K/V order toggled (column nokahead: the plain K_j, V_j order)
            pin.append(("nokahead", dataclasses.replace(default, k_ahead=False)) if default.k_ahead
                       else ("kahead", dataclasses.replace(default, k_ahead=True)))
        if args.early and not default.overlap:     # 1 / l and the lse while the last P V runs
            pin.append(("early", dataclasses.replace(default, early_lse=True)))
        if args.diag and not default.overlap:      # stages left out: their cost is the time saved
            pin += [(f"diag{bit}", dataclasses.replace(default, diag=bit)) for bit in (1, 2, 4)]
        pin += [(f"set_{name}", dataclasses.replace(default, **fields)) for name, fields in variants]
        if args.no_ab:
            return pin
        old = s11_config(AttnConfig, choose_config, D, causal, S)
        out = [("s11", old)] if old != default else []
        if S <= 1024 and default.head_dim <= 128 and not default.tma_store:
            out.append(("tma", dataclasses.replace(default, tma_store=True)))
        return out + pin
    jobs = [("fwd", *case, None) for case in cases]
    jobs += [("bwd", *case, None) for case in cases if has_bwd and wants_bwd(case, args.bwd_all)]
    jobs += [("example", B, H, S, D, causal) for B, H, Hkv, S, D, causal in cases
             if wants_example((B, H, Hkv, S, D, causal))]
    jobs += [("varlen", VARLEN_SEED + i, group, causal, order, tma) for i, (group, causal) in enumerate(varlen_cases)
             for order, tma in (("sorted", False), ("snake", False), ("sorted", True))]
    jobs += [("decode", *case, args.decode_variant) for case in decode_cases]
    jobs += [("fwd", B, H, Hkv, S, D, causal, dataclasses.astuple(c))
             for B, H, Hkv, S, D, causal in cases for n, c in ab_configs(D, causal, S)
             if H == Hkv or n.startswith(ANY_GQA_COLUMNS)]
    if args.configs:
        for B, H, Hkv, S, D, causal in cases:
            default = choose_config(D, causal, S)
            jobs += [("fwd", B, H, Hkv, S, D, causal, c) for c in SMALL_CONFIGS
                     if S <= 512 and differs(AttnConfig(*c), default, causal)]
    if args.jobs > 1:
        precompile(jobs, args.jobs)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    card = torch.cuda.get_device_name()
    print(f"card: {card}, torch {torch.__version__}, bf16, kernel time, paired medians; "
          f"backward {'on' if has_bwd else 'off (no attention_bwd)'}", flush=True)

    def backend_fn(backend, q, k, v, causal):
        """SDPA on one backend, GQA native when it takes it, else k/v expanded; None if it cannot run."""
        group = q.shape[1] // k.shape[1]
        for native in ((True, False) if group > 1 else (False,)):
            kk, vv = (k, v) if native or group == 1 else (k.repeat_interleave(group, 1), v.repeat_interleave(group, 1))
            extra = {"enable_gqa": True} if native else {}

            def fn(kk=kk, vv=vv, extra=extra):
                with sdpa_kernel(backend):
                    return sdpa(q, kk, vv, is_causal=causal, **extra)
            try:
                fn()
                torch.cuda.synchronize()
                return fn, ("" if native or group == 1 else "x")
            except RuntimeError:
                continue
        return None, ""

    results = []
    n_cases = len(cases) + len(varlen_cases) + len(decode_cases)

    def timed(fns: dict, per_case_s: float, host: dict | None = None) -> dict:
        """Paired medians of kernel time, behind a spin longer than every contender's host work
        (``spin_for``: an autograd backward's host work outlasts the default spin); ``host``, if
        given, receives each contender's host ms."""
        for fn in fns.values():
            fn()
        spin, host_ms = spin_for(fns)
        if host is not None:
            host.update(host_ms)
        one = max(event_ms(next(iter(fns.values())), True, spin), 0.01)
        rounds = int(max(3, min(25, per_case_s * 1e3 / ((one * 1.5 + 1.2 + spin / 1e6) * len(fns)))))
        times = {n: [] for n in fns}
        for _ in range(rounds):
            for n, fn in fns.items():
                times[n].append(event_ms(fn, True, spin))
        return {n: statistics.median(t) for n, t in times.items()}, rounds

    def budget_left(index):
        return max(0.5, (args.budget_s - (time.time() - t0)) / max(1, n_cases - index))

    for index, (B, H, Hkv, S, D, causal) in enumerate(cases):
        torch.manual_seed(index)
        q = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(B, Hkv, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        label = f"B{B} H{H}/{Hkv} S{S} D{D}{' causal' if causal else ''}"
        row = {"case": label, "kind": "fwd", "B": B, "H": H, "Hkv": Hkv, "S": S, "D": D, "causal": causal}
        fns, marks = {}, {}
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            fn, mark = backend_fn(backend, q, k, v, causal)
            if fn is not None:
                fns[name], marks[name] = fn, mark
        ref = next(iter(fns.values()))().float() if fns else None
        try:
            o, _ = attention_forward(q, k, v, causal=causal)
            err = ((o.float() - ref).norm() / ref.norm()).item() if ref is not None else float("nan")
            row["err"] = err
            if ref is not None and not err < 1e-2:
                raise AssertionError(f"relative error {err:.2e} against {next(iter(fns))}")
            fns["tlxc"] = lambda q=q, k=k, v=v, causal=causal: attention_forward(q, k, v, causal=causal)
        except Exception as exc:
            row["failed"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        if "tlxc" in fns and wants_example((B, H, Hkv, S, D, causal)):
            try:
                example_launch(q, k, v, causal)
                fns["example"] = lambda q=q, k=k, v=v, causal=causal: example_launch(q, k, v, causal)
            except Exception as exc:
                print(f"    example: {type(exc).__name__}: {str(exc)[:100]}", flush=True)
        alternatives = []
        if "tlxc" in fns:
            alternatives += [(n, c) for n, c in ab_configs(D, causal, S)
                             if H == Hkv or n.startswith(ANY_GQA_COLUMNS)]  # s11/tma: MHA
        if args.configs and S <= 512 and "tlxc" in fns:
            for cfg in SMALL_CONFIGS:
                c = AttnConfig(*cfg)
                if not differs(c, choose_config(D, causal, S), causal):
                    continue
                alternatives.append((config_name(c), c))
        for name, c in alternatives:
            try:
                o2, _ = attention_forward(q, k, v, causal=causal, config=c)
                if name.startswith("diag") or ((o2.float() - ref).norm() / ref.norm()).item() < 1e-2:
                    fns[name] = lambda q=q, k=k, v=v, c=c, causal=causal: attention_forward(q, k, v, causal=causal,
                                                                                        config=c)
                else:
                    print(f"    {name}: wrong result, not timed", flush=True)
            except Exception as exc:
                print(f"    {name}: {type(exc).__name__}: {str(exc)[:100]}", flush=True)
        del ref
        if "tlxc" in fns:
            med, rounds = timed(fns, budget_left(index) * (0.5 if has_bwd and wants_bwd((B, H, Hkv, S, D, causal), args.bwd_all)
                                                            else 1.0))
            flops = 4 * B * H * S * S * D // (2 if causal else 1)
            t = med["tlxc"]
            row.update(tlxc_ms=t, rounds=rounds, tflops=flops / t / 1e9,
                       ratios={n: med[n] / t for n in med if n != "tlxc"}, marks=marks)
            cells = "  ".join(f"{n}{marks.get(n, '')} {flops / med[n] / 1e9:6.1f}" for n in med if n != "tlxc")
            print(f"fwd {label:28s} tlxc {flops / t / 1e9:6.1f} TFLOP/s  {cells}  [{rounds} rounds]", flush=True)
        else:
            print(f"fwd {label:28s} FAILED {row.get('failed')}", flush=True)
        results.append(row)
        if has_bwd and "tlxc" in fns and wants_bwd((B, H, Hkv, S, D, causal), args.bwd_all):
            results.append(bench_backward(q, k, v, causal, label, backend_fn, timed, budget_left(index) * 0.5,
                                          attention, SDPBackend))
        del q, k, v, fns
    for index, (group, causal) in enumerate(varlen_cases):
        results.append(bench_varlen(VARLEN_SEED + index, group, causal, timed, budget_left(len(cases) + index),
                                    attention_forward, sdpa, sdpa_kernel, SDPBackend))
    for index, case in enumerate(decode_cases):
        results.append(bench_decode(*case, timed, budget_left(len(cases) + len(varlen_cases) + index), sdpa,
                                    sdpa_kernel, SDPBackend, variant=args.decode_variant,
                                    splits=[int(n) for n in args.decode_splits.split(",") if n],
                                    rings=[tuple(int(v) for v in r.split("x")) for r in args.decode_rings.split(",") if r]))
    summarize(results, card, t0)


def bench_backward(q, k, v, causal, label, backend_fn, timed, per_case_s, attention, SDPBackend) -> dict:
    """Backward alone: autograd.grad on a kept graph, tlxc against cuDNN and flash (paired)."""
    import torch
    leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
    do = torch.randn_like(q)
    row = {"case": label, "kind": "bwd", "S": q.shape[2], "D": q.shape[3], "causal": causal}
    fns = {}
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        fn, _ = backend_fn(backend, *leaves, causal)
        if fn is None:
            continue
        try:
            with torch.enable_grad():
                out = fn()
            torch.autograd.grad(out, leaves, do, retain_graph=True)
            fns[name] = lambda out=out: torch.autograd.grad(out, leaves, do, retain_graph=True)
        except RuntimeError:
            continue
    try:
        out = attention(*leaves, causal=causal)
        mine = torch.autograd.grad(out, leaves, do, retain_graph=True)
        if fns:
            theirs = next(iter(fns.values()))()
            errs = [((a.float() - b.float()).norm() / b.float().norm()).item() for a, b in zip(mine, theirs)]
            row["err"] = max(errs)
            if not max(errs) < 2e-2:
                raise AssertionError(f"gradient relative errors {errs}")
        fns["tlxc"] = lambda out=out: torch.autograd.grad(out, leaves, do, retain_graph=True)
    except Exception as exc:
        row["failed"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        print(f"bwd {label:28s} FAILED {row['failed']}", flush=True)
        return row
    host = {}
    med, rounds = timed(fns, per_case_s, host)
    B, H, S, D = q.shape
    flops = 10 * B * H * S * S * D // (2 if causal else 1)        # 2.5x the forward's
    t = med["tlxc"]
    row.update(tlxc_ms=t, rounds=rounds, tflops=flops / t / 1e9, ratios={n: med[n] / t for n in med if n != "tlxc"},
               host_ms=host)
    cells = "  ".join(f"{n} {flops / med[n] / 1e9:6.1f}" for n in med if n != "tlxc")
    hosts = " ".join(f"{n} {ms:.2f}" for n, ms in host.items())
    print(f"bwd {label:28s} tlxc {flops / t / 1e9:6.1f} TFLOP/s  {cells}  [{rounds} rounds; host ms {hosts}]",
          flush=True)
    return row


def bench_varlen(seed, group, causal, timed, per_case_s, attention_forward, sdpa, sdpa_kernel, SDPBackend) -> dict:
    """A packed batch of mixed lengths (same lengths for q and k), D = 128, H = 16."""
    import torch
    lens = varlen_lengths(seed)
    H, D = 16, 128
    Hkv = H // group
    total, B, longest = sum(lens), len(lens), max(lens)
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    torch.manual_seed(seed)
    q = torch.randn(total, H, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(total, Hkv, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    label = f"varlen {B} seqs {total} tok H{H}/{Hkv} D{D}{' causal' if causal else ''}"
    row = {"case": label, "kind": "varlen", "causal": causal, "lens": lens}
    ke, ve = (k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)) if group > 1 else (k, v)
    fns = {}

    def flash(kk=k, vv=v):          # GQA native (flash takes fewer k/v heads)
        return torch.ops.aten._flash_attention_forward(q, kk, vv, cu, cu, longest, longest, 0.0, causal, False)[0]

    def flash_x():
        return flash(ke, ve)

    def cudnn():
        return torch.ops.aten._cudnn_attention_forward(q, ke, ve, None, cu, cu, longest, longest, False, 0.0,
                                                       causal, False)[0]
    padded = torch.zeros(B, longest, 3, H, D, device="cuda", dtype=torch.bfloat16)
    for b, n in enumerate(lens):
        start = int(cu[b])
        padded[b, :n, 0] = q[start:start + n]
        padded[b, :n, 1] = ke[start:start + n]
        padded[b, :n, 2] = ve[start:start + n]
    pq, pk, pv = (padded[:, :, i].transpose(1, 2).contiguous() for i in range(3))
    del padded

    def cudnn_padded():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return sdpa(pq, pk, pv, is_causal=causal)
    ref = None
    for name, fn in (("flash", flash), ("flash", flash_x), ("cudnn", cudnn), ("cudnn_padded", cudnn_padded)):
        if name in fns:
            continue
        try:
            out = fn()
            torch.cuda.synchronize()
            if name != "cudnn_padded":
                if ref is None:
                    ref = out.float()
                elif not ((out.float() - ref).norm() / ref.norm()).item() < 1e-2:
                    print(f"    varlen baseline {name} disagrees with flash; not timed", flush=True)
                    continue
            fns[name] = fn
        except (RuntimeError, TypeError) as exc:
            print(f"    varlen baseline {name}: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}", flush=True)
    try:
        o, _ = attention_forward(q, k, v, causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=longest,
                                 max_seqlen_k=longest)
        if ref is not None:
            err = ((o.float() - ref).norm() / ref.norm()).item()
            row["err"] = err
            if not err < 1e-2:
                raise AssertionError(f"relative error {err:.2e} against flash varlen")
        fns["tlxc"] = lambda: attention_forward(q, k, v, causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cu,
                                                max_seqlen_q=longest, max_seqlen_k=longest)
    except Exception as exc:
        row["failed"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        print(f"{label:40s} FAILED {row['failed']}", flush=True)
        return row
    # the first schedule (every item up to max_seqlen_q); the default with staged TMA stores of O
    for name, order, config in (("snake", "snake", None),
                                ("tma_store", "sorted", varlen_tma_config(causal, longest))):
        try:
            o2, _ = attention_forward(q, k, v, causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=longest,
                                      max_seqlen_k=longest, varlen_order=order, config=config)
            if ref is not None and not ((o2.float() - ref).norm() / ref.norm()).item() < 1e-2:
                raise AssertionError("disagrees with flash varlen")
            fns[f"tlxc_{name}"] = lambda order=order, config=config: attention_forward(
                q, k, v, causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=longest,
                max_seqlen_k=longest, varlen_order=order, config=config)
        except Exception as exc:
            print(f"    varlen tlxc_{name}: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}; not timed",
                  flush=True)
    med, rounds = timed(fns, per_case_s)
    flops = sum(4 * H * n * n * D // (2 if causal else 1) for n in lens)
    t = med["tlxc"]
    row.update(tlxc_ms=t, rounds=rounds, tflops=flops / t / 1e9, ratios={n: med[n] / t for n in med if n != "tlxc"})
    cells = "  ".join(f"{n} {flops / med[n] / 1e9:6.1f}" for n in med if n != "tlxc")
    print(f"{label:40s} tlxc {flops / t / 1e9:6.1f} TFLOP/s  {cells}  [{rounds} rounds]", flush=True)
    return row


def bench_decode(B, H, Hkv, L, timed, per_case_s, sdpa, sdpa_kernel, SDPBackend, device="cuda", variant=None,
                 splits=(), rings=()) -> dict:
    """One decode step: tlxc on the paged cache against SDPA's backends on the gathered
    contiguous cache (equal lengths) or flash varlen with one query per sequence (mixed)."""
    import torch

    from tlxc.ops import attention_decode
    q, k_cache, v_cache, table, seqlens, lens = decode_tensors(B, H, Hkv, L, device)
    D = q.shape[-1]
    group = H // Hkv
    label = f"decode B{B} H{H}/{Hkv} L{L if L is not None else 'mixed'} D{D} page{DECODE_PAGE}"
    row = {"case": label, "kind": "decode", "B": B, "H": H, "Hkv": Hkv, "L": L, "lens": lens}
    rows = torch.cat([torch.arange(n, device=device) for n in lens])
    owner = torch.cat([torch.full((n,), b, device=device) for b, n in enumerate(lens)])
    pages = table.long()[owner, rows // DECODE_PAGE]
    k_packed = k_cache[pages, rows % DECODE_PAGE]                      # [total, Hkv, D]
    v_packed = v_cache[pages, rows % DECODE_PAGE]
    fns = {}
    if L is not None:
        kd = k_packed.view(B, L, Hkv, D).transpose(1, 2).contiguous()    # [B, Hkv, L, D]
        vd = v_packed.view(B, L, Hkv, D).transpose(1, 2).contiguous()
        q4 = q.unsqueeze(2)                                                 # [B, H, 1, D]
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                              ("cudnn", SDPBackend.CUDNN_ATTENTION), ("math", SDPBackend.MATH)):
            for native in ((True, False) if group > 1 else (False,)):
                kk, vv = (kd, vd) if native or group == 1 else (kd.repeat_interleave(group, 1),
                                                                vd.repeat_interleave(group, 1))
                extra = {"enable_gqa": True} if native else {}

                def fn(kk=kk, vv=vv, extra=extra, backend=backend):
                    with sdpa_kernel(backend):
                        return sdpa(q4, kk, vv, **extra)[:, :, 0]
                try:
                    fn()
                    if device == "cuda":
                        torch.cuda.synchronize()
                    fns[name if native or group == 1 else name + "x"] = fn
                    break
                except RuntimeError:
                    continue
        contig_k = k_packed.view(B, L, Hkv, D)
        contig_v = v_packed.view(B, L, Hkv, D)
        fns["tlxc_contig"] = lambda: attention_decode(q, contig_k, contig_v, seqlens)[0]
        # the cache SDPA's backends read ([B, Hkv, L, D], a sequence's keys of one kv head contiguous), as a view
        fns["tlxc_bhsd"] = lambda: attention_decode(q, kd.transpose(1, 2), vd.transpose(1, 2), seqlens)[0]
    # the same pages stored head-major ([pages, Hkv, page, D], FlashInfer's HND / TensorRT-LLM's block layout)
    # and passed as a [pages, page, Hkv, D] view: a page of one kv head is one contiguous run of page * D
    k_hnd = k_cache.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3)
    v_hnd = v_cache.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3)
    fns["tlxc_hnd"] = lambda: attention_decode(q, k_hnd, v_hnd, seqlens, block_table=table)[0]
    fns["tlxc_hnd_tma"] = lambda: attention_decode(q, k_hnd, v_hnd, seqlens, block_table=table, _tma=True)[0]
    for keys, slots in rings:   # the split kernel with another ring (_ring=(keys per block, slots))
        fns[f"tlxc_r{keys}x{slots}"] = lambda ring=(keys, slots): attention_decode(
            q, k_cache, v_cache, seqlens, block_table=table, _ring=ring)[0]
    for n in splits:            # the split kernel with num_splits=n (a merge of more than it holds: not timed)
        try:
            attention_decode(q, k_cache, v_cache, seqlens, block_table=table, num_splits=n)
        except ValueError:
            continue
        fns[f"tlxc_s{n}"] = lambda n=n: attention_decode(q, k_cache, v_cache, seqlens, block_table=table,
                                                         num_splits=n)[0]
    if variant is not None:     # the split kernel with the _variant bits (checked against float32 math below)
        fns[f"tlxc_v{variant}"] = lambda: attention_decode(q, k_cache, v_cache, seqlens, block_table=table,
                                                           _variant=variant)[0]
    cu_k = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=device)
    cu_q = torch.arange(B + 1, dtype=torch.int32, device=device)

    def flash_varlen():
        return torch.ops.aten._flash_attention_forward(q, k_packed, v_packed, cu_q, cu_k, 1, max(lens), 0.0, False,
                                                       False)[0]
    try:
        flash_varlen()
        if device == "cuda":
            torch.cuda.synchronize()
        fns["flash_varlen"] = flash_varlen
    except (RuntimeError, TypeError) as exc:
        print(f"    decode baseline flash_varlen: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}", flush=True)
    from tlxc.ops.attention_decode import reference
    ref, _ = reference(q, k_cache, v_cache, seqlens, block_table=table, dtype=torch.float32)
    for name in list(fns):
        if name == f"tlxc_v{variant}" and variant & 8:      # the diagnostic bit: copies alone, output meaningless
            continue
        err = ((fns[name]().float() - ref).norm() / ref.norm()).item()
        if not err < 1e-2:
            print(f"    decode {name} disagrees with float32 math ({err:.2e}); not timed", flush=True)
            del fns[name]
    try:
        o, _ = attention_decode(q, k_cache, v_cache, seqlens, block_table=table)
        err = ((o.float() - ref).norm() / ref.norm()).item()
        row["err"] = err
        if not err < 1e-2:
            raise AssertionError(f"relative error {err:.2e} against float32 math")
        fns["tlxc"] = lambda: attention_decode(q, k_cache, v_cache, seqlens, block_table=table)[0]
        fns["tlxc_stream"] = lambda: attention_decode(q, k_cache, v_cache, seqlens, block_table=table,
                                                      schedule="stream")[0]
        fns["tlxc_nocheck"] = lambda: attention_decode(q, k_cache, v_cache, seqlens, block_table=table, check=False)[0]
        o_tma, _ = attention_decode(q, k_cache, v_cache, seqlens, block_table=table, _tma=True)
        err_tma = ((o_tma.float() - ref).norm() / ref.norm()).item()
        if err_tma < 1e-2:
            fns["tlxc_tma"] = lambda: attention_decode(q, k_cache, v_cache, seqlens, block_table=table, _tma=True)[0]
        else:
            print(f"    decode tlxc_tma disagrees with float32 math ({err_tma:.2e}); not timed", flush=True)
    except Exception as exc:
        row["failed"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        print(f"{label:40s} FAILED {row['failed']}", flush=True)
        return row
    med, rounds = timed(fns, per_case_s)
    sdpa_names = [n for n in med if n.rstrip("x") in ("flash", "efficient", "cudnn", "math")]
    if sdpa_names:
        med["best_sdpa"] = min(med[n] for n in sdpa_names)
    gbytes = 2 * sum(lens) * Hkv * D * 2 / 1e9
    t = med["tlxc"]
    row.update(tlxc_ms=t, rounds=rounds, gbps=gbytes / t * 1e3, ratios={n: med[n] / t for n in med if n != "tlxc"})
    cells = "  ".join(f"{n} {gbytes / med[n] * 1e3:6.0f}" for n in med if n != "tlxc")
    print(f"{label:40s} tlxc {gbytes / t * 1e3:6.0f} GB/s ({t * 1e3:.1f} us)  {cells}  [{rounds} rounds]", flush=True)
    return row


def summarize(results, card, t0) -> None:
    def geomean(xs):
        xs = [x for x in xs if x]
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")

    print("\nratios (baseline time / tlxc time; > 1: tlxc faster):")
    for r in results:
        if "ratios" in r:
            cells = "  ".join(f"{n} {x:.3f}" for n, x in sorted(r["ratios"].items()))
            print(f"  {r['kind']:6s} {r['case']:44s} {cells}")
        else:
            print(f"  {r['kind']:6s} {r['case']:44s} FAILED {r.get('failed')}")
    for kind in ("fwd", "bwd", "varlen", "decode"):
        rows = [r for r in results if r["kind"] == kind and "ratios" in r]
        if not rows:
            continue
        for base in ("cudnn", "flash", "tlxc_snake", "tlxc_sorted", "tlxc_tma_store", "cudnn_padded", "best_sdpa",
                     "flash_varlen", "tlxc_stream", "tlxc_contig", "tlxc_bhsd", "tlxc_hnd", "tlxc_hnd_tma", "tlxc_nocheck", "tlxc_tma",
                     *sorted({n for r in rows for n in r["ratios"] if n.startswith(("tlxc_v", "tlxc_s", "tlxc_r"))})):
            xs = [r["ratios"][base] for r in rows if base in r["ratios"]]
            if xs:
                print(f"{kind} vs {base}: geomean {geomean(xs):.3f}, min {min(xs):.3f}, {len(xs)} cases")
        small = [r["ratios"]["cudnn"] for r in rows if r.get("S", 10**9) <= 512 and "cudnn" in r["ratios"]]
        if small:
            print(f"{kind} vs cudnn at S <= 512: geomean {geomean(small):.3f}, min {min(small):.3f}")
        for col, what in (("s11", "session 11's config time / default time"),
                          ("tma", "the default with tma_store=True, time / default time"),
                          ("pin", "the default with pin_softmax=True, time / default time"),
                          ("pin_ov", "the default with pin_softmax=True and overlap=True, time / default time"),
                          ("skew", "the default with skew=True, time / default time"),
                          ("skew3", "the default with skew=True and 3 K/V stages, time / default time"),
                          ("ahead", "the default with s1_ahead=True, time / default time"),
                          ("noahead", "the default (s1_ahead) without it, time / default time"),
                          ("kahead", "the default with k_ahead=True, time / default time"),
                          ("early", "the default with early_lse=True, time / default time"),
                          ("nokahead", "the default with k_ahead=False (K_j, V_j in turn), time / default time"),
                          ("diag1", "the default without the O / lse epilogue, time / default time"),
                          ("diag2", "the default without the first block's softmax, time / default time"),
                          ("diag4", "the default without the lone last P V, time / default time")):
            ab = [r["ratios"][col] for r in rows if col in r["ratios"]]
            if ab:
                print(f"  {col}: {what}, geomean {geomean(ab):.3f}, min {min(ab):.3f}, max {max(ab):.3f} "
                      f"over {len(ab)} cases (> 1: the default is faster)")
        for col in sorted({n for r in rows for n in r["ratios"] if n.startswith("set_")}):
            ab = [r["ratios"][col] for r in rows if col in r["ratios"]]
            print(f"  {col}: the default with --set {col[4:]}'s fields, time / default time, geomean {geomean(ab):.3f}, "
                  f"min {min(ab):.3f}, max {max(ab):.3f} over {len(ab)} cases (> 1: the default is faster)")
        cfgs = sorted({n for r in rows for n in r["ratios"] if n.startswith("cfg_")})
        for n in cfgs:
            xs = [r["ratios"][n] for r in rows if n in r["ratios"]]
            print(f"  {n}: config time / default time, geomean {geomean(xs):.3f} over {len(xs)} cases "
                  f"(< 1: the config is faster than the default)")
    failed = [r for r in results if "failed" in r]
    print(f"{len(results)} cases, {len(failed)} failed, {time.time() - t0:.0f} s")
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "ops_attention_bench.json"), "w") as f:
            json.dump({"card": card, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
