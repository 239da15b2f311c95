"""Host time of one ``tlxc.ops.matmul`` call, without a GPU.

Everything the wrapper and the launch do per call -- argument checks, the plan lookup
(problem, configuration, TMA descriptors kept per call geometry), the epilogue's arguments,
``kernel[grid]``'s fast path and the argument packing -- runs for real; only the driver is
replaced, as in ``bench/launch_host_probe.py`` (``cuLaunchKernelEx`` returns 0, the encoded
tensor maps are zero bytes).  The first call of each case compiles for sm_90a (or loads the
disk cache) through tensors that say ``is_cuda``; the timed calls pass plain CPU tensors of
the same storage (the same plan key), so no stand-in runs on the timed path.

    python bench/ops_matmul_host_probe.py [--calls 2000] [--repeat 5] [--slow]

``--slow`` switches the plan cache off (what a call cost before it); its timed calls pass
their tensors through the ``is_cuda`` stand-in too (new descriptors are encoded per call),
which adds ~1 us per tensor argument.  Times are the thread's CPU time (a shared machine's
preemption left out), the minimum over ``--repeat`` runs.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

CASES = [  # (label, M, N, K, B K-major, with a bias)
    ("4096^3 WS (TMA)", 4096, 4096, 4096, True, False),
    ("4096^3 WS + bias", 4096, 4096, 4096, True, True),
    ("decode M=1 (swap, split-K 4)", 1, 4096, 4096, True, False),
    ("M=64 pointer kernel", 64, 14336, 4096, True, False),
]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--slow", action="store_true", help="no plan cache (every call re-derives everything)")
    parser.add_argument("--case", type=int, default=None, help="run only this case (each case runs in a process "
                        "of its own: one kernel's specializations in turn would mix the fake and real paths)")
    args = parser.parse_args(argv)
    if args.case is None:
        import subprocess
        for i in range(len(CASES)):
            subprocess.run([sys.executable, os.path.abspath(__file__), "--case", str(i), "--calls", str(args.calls),
                            "--repeat", str(args.repeat)] + (["--slow"] if args.slow else []), check=True)
        return
    import torch
    from launch_host_probe import _install_fake_driver
    _install_fake_driver()
    mm = importlib.import_module("tlxc.ops.matmul")
    if args.slow:
        mm._plan_key = lambda *a: None

    from tlxc.descriptors import TensorDescriptor

    class Cuda(torch.Tensor):          # says is_cuda for the first (compiling) launch only
        is_cuda = True
        __torch_function__ = torch._C._disabled_torch_function_impl

    real_launch = mm._launch

    def first_launch(kernel, grid, *kargs, **meta):
        """The compiling launch: every tensor argument (and descriptor's tensor) says is_cuda."""
        cuda_args = []
        for x in kargs:
            if isinstance(x, TensorDescriptor):
                x.__dict__["base"] = x.base.as_subclass(Cuda)
            elif isinstance(x, torch.Tensor):
                x = x.as_subclass(Cuda)
            cuda_args.append(x)
        real_launch(kernel, grid, *cuda_args, **meta)

    for label, M, N, K, bk, with_bias in CASES[args.case:args.case + 1]:
        a = torch.empty(M, K, dtype=torch.bfloat16)
        b = torch.empty(N, K, dtype=torch.bfloat16).t() if bk else torch.empty(K, N, dtype=torch.bfloat16)
        out = torch.empty(M, N, dtype=torch.bfloat16)
        kw = {"bias": torch.empty(N, dtype=torch.bfloat16)} if with_bias else {}
        mm._launch = first_launch
        mm.matmul(a, b, out, **kw)
        if not args.slow:      # --slow builds new descriptors per call: they need tensors that say is_cuda
            mm._launch = real_launch
        name = mm.chosen_config(a, b).name
        best = float("inf")
        for _ in range(args.repeat):
            start = time.thread_time_ns()
            for _ in range(args.calls):
                mm.matmul(a, b, out, **kw)
            best = min(best, (time.thread_time_ns() - start) / args.calls / 1000)
        print(f"  {label:<30} {name:<26} {best:7.1f} us per call{' (no plan cache)' if args.slow else ''}",
              flush=True)


if __name__ == "__main__":
    main()
