"""One forward (and optionally backward) of tlxc.ops.attention and of cuDNN's SDPA on the same
inputs, for Nsight Compute: which pipe or stall bounds each kernel at a given shape.

    ncu --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \\
        -k regex:'attn|cudnn|sm90' python bench/attn_ncu_probe.py --b 64 --h 32 --s 256 --d 64 [--causal] [--bwd]

Each side runs twice (the first call compiles and warms up; ``--launch-skip`` is not needed: read
the second of each kernel's reports).
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    import tlxc.ops

    parser = argparse.ArgumentParser()
    for name, default in (("b", 64), ("h", 32), ("s", 256), ("d", 64)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--bwd", action="store_true", help="the backward too (tlxc's and cuDNN's)")
    parser.add_argument("--dq-rows", action="store_true", help="the backward's WS_DQ_ROWS on at every head dim")
    args = parser.parse_args()
    if args.dq_rows:
        import tlxc.ops.attention_bwd as host
        host.WS_DQ_ROWS = dict.fromkeys(host.WS_DQ_ROWS, True)
    q, k, v = (torch.randn(args.b, args.h, args.s, args.d, device="cuda", dtype=torch.bfloat16,
                           requires_grad=args.bwd) for _ in range(3))
    for _ in range(2):
        o = tlxc.ops.attention(q, k, v, causal=args.causal)
        if args.bwd:
            o.backward(torch.ones_like(o))
        torch.cuda.synchronize()
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        for _ in range(2):
            o = sdpa(q, k, v, is_causal=args.causal)
            if args.bwd:
                o.backward(torch.ones_like(o))
            torch.cuda.synchronize()


if __name__ == "__main__":
    main()
