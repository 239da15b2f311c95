"""tlxc.ops.attention with sliding windows and logit softcapping against FlexAttention (torch's
``flex_attention`` under ``torch.compile``: a block mask for the window, a ``score_mod`` for the
cap), paired medians, one process, bf16, kernel time.

Cases: causal sliding windows of 1024 and 4096 keys (Mistral's ``window=(W - 1, 0)``) at
S = 4096 .. 16384, D = 128, GQA-4 (H = 32, Hkv = 8), B*S = 32768 tokens; softcap 50 (Gemma 2)
on the full causal mask; both together.  Columns: ``tlxc``, ``flex``, and as reference points
tlxc and cuDNN SDPA on the whole causal mask (``tlxc_full``, ``cudnn_full``: what the window
saves).  Every case is checked against float32 math on a slice of heads first (relative error
< 1e-2), then timed in rounds (each round times every implementation back to back); ratios
``flex / tlxc`` (> 1: tlxc faster) and their geomean come last.

    python bench/ops_attention_window_bench.py [--rounds 15] [--s 4096,16384] [--bwd]

``--bwd`` times a forward and a backward per call (tlxc through ``tlxc.ops.attention``'s autograd, flex
and cuDNN through torch's; the backward of the whole causal mask as before).
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

TOKENS = 32768
CASES = [  # S, window (None: the whole causal mask), softcap
    (4096, 1024, None), (8192, 1024, None), (16384, 1024, None), (8192, 4096, None), (16384, 4096, None),
    (8192, None, 50.0), (8192, 4096, 50.0),
]


def run_case(S, W, cap, rounds, flex, H=32, Hkv=8, D=128, bwd=False):
    """Check, then time one case: {name: median ms}, or None (wrong).  ``bwd``: each timed call
    is a forward and a backward (``o.backward(do)``; tlxc through ``tlxc.ops.attention``'s
    autograd), the check of the forward as without."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import create_block_mask

    import tlxc.ops
    from bench.triton_source import paired_times
    from tlxc.ops.attention import attention_forward, reference

    torch._dynamo.reset()        # a fresh compile of flex per case: past dynamo's recompile limit it runs
    B = TOKENS // S              # eagerly, on the math path (S^2 scores in memory)
    torch.manual_seed(S + (W or 0))
    q = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(B, Hkv, S, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(B, Hkv, S, D, device="cuda", dtype=torch.bfloat16)
    kx, vx = k.repeat_interleave(H // Hkv, 1), v.repeat_interleave(H // Hkv, 1)
    window = (W - 1, 0) if W else None

    def keep(b, h, qi, kj):
        return (kj <= qi) & (qi - kj < W) if W else kj <= qi

    def capped(score, b, h, qi, kj):
        return cap * torch.tanh(score / cap)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, kx, vx, is_causal=True)
    mask = create_block_mask(keep, None, None, S, S, device="cuda")
    fns = {
        "tlxc": lambda: attention_forward(q, k, v, causal=True, window=window, softcap=cap),
        "flex": lambda: flex(q, k, v, block_mask=mask, score_mod=capped if cap else None, enable_gqa=True),
        "tlxc_full": lambda: attention_forward(q, k, v, causal=True),
        "cudnn_full": cudnn,
    }
    if bwd:
        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
        kxg, vxg = (t.detach().requires_grad_() for t in (kx, vx))
        do = torch.randn_like(q)

        def cudnn_bwd():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                F.scaled_dot_product_attention(q.detach().requires_grad_(), kxg, vxg, is_causal=True).backward(do)
        timed = {
            "tlxc": lambda: tlxc.ops.attention(qg, kg, vg, causal=True, window=window, softcap=cap).backward(do),
            "flex": lambda: flex(qg, kg, vg, block_mask=mask, score_mod=capped if cap else None,
                                 enable_gqa=True).backward(do),
            "tlxc_full": lambda: tlxc.ops.attention(qg, kg, vg, causal=True).backward(do),
            "cudnn_full": cudnn_bwd,
        }
    # check on the first kv head's query heads of the first sequence (float32 math)
    o, _ = fns["tlxc"]()
    of = fns["flex"]()
    sl = (slice(0, 1), slice(0, H // Hkv))
    ref, _ = reference(q[sl], k[0:1, 0:1], v[0:1, 0:1], causal=True, window=window, softcap=cap, dtype=torch.float32)
    errs = {n: ((x[sl].float() - ref).norm() / ref.norm()).item() for n, x in (("tlxc", o), ("flex", of))}
    bad = [f"{n} rel. error {e:.1e}" for n, e in errs.items() if not e < 1e-2]
    if bad:
        print(f"S={S} W={W} cap={cap}: WRONG ({', '.join(bad)}); not timed", flush=True)
        return None
    if bwd:
        fns = timed
    for fn in fns.values():
        fn()
    med = {n: statistics.median(t) for n, t in paired_times(fns, rounds, True, {}).items()}
    print(f"S={S:6d} B={B:2d} window={W or '-':>5} softcap={cap or '-':>4}: " +
          "  ".join(f"{n} {t:.3f} ms" for n, t in med.items()), flush=True)
    return med


def main() -> None:
    import torch
    from torch.nn.attention.flex_attention import flex_attention

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--s", help="only these sequence lengths (comma-separated)")
    parser.add_argument("--bwd", action="store_true", help="time forward + backward instead of the forward")
    args = parser.parse_args()
    only = {int(x) for x in args.s.split(",")} if args.s else None
    flex = torch.compile(flex_attention, dynamic=False)
    print(f"card: {torch.cuda.get_device_name()}, torch {torch.__version__}, bf16, D = 128, H = 32, Hkv = 8, "
          f"{TOKENS} tokens, kernel time, {'forward + backward' if args.bwd else 'forward'}")
    rows = []
    for S, W, cap in CASES:
        if only and S not in only:
            continue
        try:
            med = run_case(S, W, cap, args.rounds, flex, bwd=args.bwd)
        except torch.OutOfMemoryError as exc:          # one case's failure is one line
            print(f"S={S} W={W} cap={cap}: out of memory ({str(exc).splitlines()[0][:100]})", flush=True)
            med = None
        torch.cuda.empty_cache()
        if med:
            rows.append((S, W, cap, med))
    print("\nratios (baseline time / tlxc time):")
    ratios = []
    for S, W, cap, med in rows:
        r = med["flex"] / med["tlxc"]
        ratios.append(r)
        print(f"  S={S} window={W or '-'} softcap={cap or '-'}: flex/tlxc {r:.3f}  "
              f"tlxc_full/tlxc {med['tlxc_full'] / med['tlxc']:.2f}  cudnn_full/tlxc {med['cudnn_full'] / med['tlxc']:.2f}")
    if ratios:
        print(f"geomean flex/tlxc {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f} over {len(ratios)} cases")


if __name__ == "__main__":
    main()
