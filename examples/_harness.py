"""What every example's ``main()`` shares: pick where to run, check, time.

Not an example itself (the leading underscore keeps it out of the example
list).  Each example imports it inside ``main()``, so importing an example for
its kernel or host wrapper needs only tlxc and torch.
"""
from __future__ import annotations

import os
from collections.abc import Callable

import torch


def setup() -> bool:
    """True on a CUDA GPU; otherwise switch tlxc to its CPU interpreter and say so."""
    if torch.cuda.is_available():
        print(f"device: {torch.cuda.get_device_name()}")
        return True
    os.environ.setdefault("TLXC_INTERPRET", "1")
    print("no CUDA GPU: running under the tlxc interpreter (TLXC_INTERPRET=1) at small sizes; "
          "no timings")
    return False


def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def poisoned_like(t: torch.Tensor) -> torch.Tensor:
    """An output buffer full of NaN, so that an element the kernel forgets to write fails the check."""
    return torch.full_like(t, float("nan"))


def check(name: str, out: torch.Tensor, ref: torch.Tensor, *, ulps: float = 1.0) -> None:
    """Normwise relative error of ``out`` against a float64 ``ref``, bounded by
    ``ulps`` machine epsilons of ``out``'s dtype.  Rounding the exact result to
    the output dtype alone gives about 0.3 eps; accumulating in the output
    dtype instead of float32 gives several eps, and fails."""
    if out.shape != ref.shape:
        raise AssertionError(f"{name}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    if not torch.isfinite(out).all():
        bad = (~torch.isfinite(out)).sum().item()
        raise AssertionError(f"{name}: {bad} non-finite element(s) in the output")
    eps = torch.finfo(out.dtype).eps if out.dtype.is_floating_point else 0.0
    out64, ref64 = out.double(), ref.double()
    scale = ref64.norm().item() or 1.0
    error = (out64 - ref64).norm().item() / scale
    bound = ulps * eps
    status = "ok" if error <= bound else "FAILED"
    print(f"  {name:<32} rel. error {error:.2e} (bound {bound:.1e}) {status}")
    if error > bound:
        raise AssertionError(f"{name}: relative error {error:.3e} exceeds {bound:.3e}")


def bench(fn: Callable[[], object]) -> float:
    """Median milliseconds per call, warmed up (triton.testing.do_bench when importable)."""
    try:
        from triton.testing import do_bench
    except ImportError:
        return _bench_with_events(fn)
    return float(do_bench(fn, return_mode="median"))


def _bench_with_events(fn: Callable[[], object], warmup: int = 25, repeat: int = 100) -> float:
    # A 256 MB write between calls evicts L2, as do_bench does.
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def report(name: str, tlxc_ms: float, torch_ms: float, *, nbytes: int = 0, flops: int = 0) -> None:
    """One line: tlxc and torch side by side, then tlxc's speed-up over torch."""
    def rate(ms: float) -> str:
        if flops:
            return f"{flops / ms / 1e9:8.1f} TFLOP/s"
        return f"{nbytes / ms / 1e6:8.1f} GB/s"
    print(f"  {name:<32} tlxc {tlxc_ms * 1e3:9.1f} us {rate(tlxc_ms)} | torch {torch_ms * 1e3:9.1f} us "
          f"{rate(torch_ms)} | tlxc/torch speed {torch_ms / tlxc_ms:5.2f}x")


def gemm_main(name: str, matmul: Callable[..., torch.Tensor]) -> None:
    """The bf16 GEMM examples' driver: ``matmul(a, b, out)`` on odd and square
    shapes (small ones on the interpreter), checked against a float64 product
    into a poisoned output, then timed against ``torch.matmul`` on a GPU."""
    from functools import partial

    on_gpu = setup()
    shapes = [(1000, 1240, 776), (4096, 4096, 4096), (8192, 8192, 8192)] if on_gpu else \
        [(256, 384, 512), (200, 264, 320)]
    for M, N, K in shapes:
        a = torch.randn(M, K, device=device(), dtype=torch.bfloat16)
        b = torch.randn(K, N, device=device(), dtype=torch.bfloat16)
        c = matmul(a, b, poisoned_like(torch.empty(M, N, device=device(), dtype=torch.bfloat16)))
        check(f"{name} {M}x{N}x{K}", c, a.double() @ b.double())
        if on_gpu:
            tlxc_ms = bench(partial(matmul, a, b, c))
            torch_ms = bench(partial(torch.matmul, a, b, out=c))
            report(f"{name} {M}x{N}x{K}", tlxc_ms, torch_ms, flops=2 * M * N * K)
