"""Time TLX's Hopper attention backward (the tutorial ``hopper_fa_ws_pipelined_pingpong.py`` of
facebookexperimental/triton, fetched outside the repo with only its imports changed) on
tlxc against cuDNN SDPA, in one process, at Z=4, H=32, N=4096, D=128 fp16.

    python bench/tlx_fa_bwd.py /work/ports/tlx/hopper_fa_ws_pipelined_pingpong.py [--n 4096] [--reps 10]

It prints four timings and then the ratios (the reference time divided by tlxc's):
- ``kernels``: the tutorial's two backward kernels (``_attn_bwd_preprocess`` and
  ``_attn_bwd_tlx``) launched directly, descriptors built once;
- ``backward``: the tutorial's own backward through autograd (``torch.autograd.grad`` on a kept
  graph): the kernels plus the wrapper's descriptor creation, against cuDNN's backward;
- ``fwd+bwd``: a fresh forward and backward per call (``attention(q, k, v).backward(do)``),
  against cuDNN's forward and backward;
- the errors of dq, dk, dv against fp32 SDPA (relative Frobenius, max abs), checked before the
  timings on outputs poisoned with NaN.
The floor at 600 TFLOP/s is printed too (the backward is 2.5x the forward's 4*Z*H*N*N*D FLOPs).
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import time


def median_ms(fn, reps: int) -> float:
    import torch
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def load(path: str):
    spec = importlib.util.spec_from_file_location("tlx_fa_tutorial", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tutorial", help="path of hopper_fa_ws_pipelined_pingpong.py (imports changed to tlxc)")
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from tlxc.tools.tensor_descriptor import TensorDescriptor

    tut = load(args.tutorial)
    Z, H, N, D, sm_scale = 4, 32, args.n, 128, 0.5
    torch.manual_seed(0)
    q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) * 0.5 for _ in range(3))
    do = torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16)
    rows = Z * H * N

    def desc(t):
        return TensorDescriptor(t, shape=[rows, D], strides=[D, 1], block_shape=[1, 1])

    # the forward kernel gives o and the row statistics M the backward reads
    o = torch.empty_like(q)
    m = torch.empty((Z, H, N), device="cuda", dtype=torch.float32)
    tut._attn_fwd_ws_pipelined_pingpong[lambda meta: (N // meta["BLOCK_M"], Z * H, 1)](
        sm_scale, m, Z, H, desc(q), desc(k), desc(v), desc(o), N_CTX=N, HEAD_DIM=D, FP8_OUTPUT=False)
    grads = [torch.full_like(q, float("nan")) for _ in range(3)]
    delta = torch.empty_like(m)
    descs = [desc(t) for t in (q, k, v, do, *grads)]

    def kernels():
        tut._attn_bwd_preprocess[(N // 128, Z * H)](o, do, delta, grads[0], N, BLOCK_M=128, HEAD_DIM=D)
        tut._attn_bwd_tlx[(N // 128, 1, Z * H)](descs[0], descs[1], descs[2], sm_scale, descs[3], descs[4],
                                                descs[5], descs[6], m, delta, H, N, HEAD_DIM=D)

    kernels()
    torch.cuda.synchronize()
    q32, k32, v32 = (t.float().requires_grad_(True) for t in (q, k, v))
    ref = torch.autograd.grad(F.scaled_dot_product_attention(q32, k32, v32, scale=sm_scale),
                              (q32, k32, v32), do.float())
    for name, got, want in zip(("dq", "dk", "dv"), grads, ref):
        diff = got.float() - want
        print(f"  {name}: relative error {(diff.norm() / want.norm()).item():.2e}, "
              f"max abs {diff.abs().max().item():.2e}", flush=True)

    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    out = tut.attention(*leaves, sm_scale)
    t_kernels = median_ms(kernels, args.reps)
    t_backward = median_ms(lambda: torch.autograd.grad(out, leaves, do, retain_graph=True), args.reps)

    def tlxc_fwd_bwd():
        tut.attention(*leaves, sm_scale).backward(do)

    t_fwd_bwd = median_ms(tlxc_fwd_bwd, args.reps)
    start = time.perf_counter()
    tlxc_fwd_bwd()
    host_ms = 1e3 * (time.perf_counter() - start)

    base = [t.clone().requires_grad_(True) for t in (q, k, v)]
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        base_out = F.scaled_dot_product_attention(*base, scale=sm_scale)
        c_backward = median_ms(lambda: torch.autograd.grad(base_out, base, do, retain_graph=True), args.reps)
        c_fwd_bwd = median_ms(lambda: F.scaled_dot_product_attention(*base, scale=sm_scale).backward(do),
                              args.reps)

    flops = 2.5 * 4 * Z * H * N * N * D
    print(f"  floor at 600 TFLOP/s: {flops / 600e9:.2f} ms; kernels {t_kernels:.2f} ms "
          f"({flops / t_kernels / 1e9:.0f} TFLOP/s)")
    print(f"  tlxc: kernels {t_kernels:.2f} ms, backward {t_backward:.2f} ms, fwd+bwd {t_fwd_bwd:.2f} ms "
          f"(host {host_ms:.2f} ms of one call)")
    print(f"  cuDNN: backward {c_backward:.2f} ms, fwd+bwd {c_fwd_bwd:.2f} ms")
    print(f"ratio (cuDNN / tlxc): kernels vs backward {c_backward / t_kernels:.3f}, "
          f"backward {c_backward / t_backward:.3f}, fwd+bwd {c_fwd_bwd / t_fwd_bwd:.3f}")


if __name__ == "__main__":
    main()
