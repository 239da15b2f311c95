"""The Python part of a launch, without a GPU.

``bench/launch_kernels.py``'s ``empty4`` (3 tensors, 1 int) and ``empty16`` (2 TMA
descriptors, 6 tensors, 8 ints) go through tlxc's real launch path: the first launch
takes the slow path (specialize, compile with NVRTC for sm_90a or load from the disk
cache, build the ``driver.Launcher`` and the generated fast path); every later launch
runs everything tlxc does per launch -- ``kernel[grid]``, the key, the lookup, the grid,
the stream lookup, the argument packing into the launcher's buffer, the launch-config
packing -- up to the driver.  Only the driver is replaced:

* ``cuLaunchKernelEx`` is a C function returning 0 (``c_launcher.fake_launch_address``),
  reached through ctypes by the Python path as the real one is; the C launcher
  (``TLXC_C_LAUNCHER=0`` switches it off, to time the Python path) calls it directly;
* module loading, function attributes and device properties answer from constants;
* the stream getter (torch's ``_cuda_getCurrentRawStream`` on a GPU) returns 0;
* ``cuTensorMapEncodeTiled`` returns 128 zero bytes (called once per address anyway).

The first launch sees tensors that say ``is_cuda``; the timed launches pass plain CPU
tensors of the same storage (same key: dtype, ``get_device()``, address mod 16), whose
``data_ptr``/``dtype``/``get_device`` cost what a CUDA tensor's do, so the timing
carries no Python-level stand-in on the hot path.

    python -m bench.launch_host_probe [--launches 100000] [--repeat 5] [--more] [--profile]
"""
from __future__ import annotations

import argparse
import cProfile
import ctypes
import os
import pstats
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _install_fake_driver() -> None:
    import torch

    from tlxc import descriptors as tma
    from tlxc.runtime import driver

    class FakeFunction(driver.CudaFunction):
        def attribute(self, attribute: int) -> int:
            return 48 * 1024 if attribute == driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES else 0

        def set_attribute(self, attribute: int, value: int) -> None:
            pass

    class FakeModule(driver.CudaModule):
        @classmethod
        def load(cls, cubin: bytes, device_index: int | None = None):
            return cls(cubin)

        def function(self, name: str, device_index: int | None = None):
            return FakeFunction(self, name, 0x1000, device_index or 0)

    def no_launch(config, function, params, extra):
        return 0

    from tlxc.runtime import c_launcher
    module = c_launcher.module() if c_launcher.enabled() else c_launcher.load(c_launcher.build())
    if module is not None:
        # a C function that returns 0, as a ctypes foreign function: the Python path pays a
        # foreign call as it does on a GPU, and the C launcher (TLXC_C_LAUNCHER) calls it directly
        prototype = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        no_launch = prototype(module.fake_launch_address())
    driver._driver_lib = types.SimpleNamespace(cuLaunchKernelEx=no_launch, cuLaunchKernel=no_launch)
    driver.CudaModule.load = FakeModule.load
    driver.device_properties = lambda device: types.SimpleNamespace(max_shared_memory_per_block_optin=227 * 1024)
    driver.stream_getter = lambda: (lambda device: 0)
    torch.cuda.get_device_capability = lambda device=None: (9, 0)
    torch.cuda.current_device = lambda: 0
    tma.encode_tiled = lambda *args: bytes(128)


def _arguments():
    """(first-launch arguments, timed-launch arguments) of empty4 and empty16."""
    import torch

    from tlxc.descriptors import TensorDescriptor

    class Cuda(torch.Tensor):           # says is_cuda for the slow path's checks only
        is_cuda = True
        __torch_function__ = torch._C._disabled_torch_function_impl

    x = torch.empty(16)
    tile = torch.empty(64, 64, dtype=torch.bfloat16)
    xc, tc = x.as_subclass(Cuda), tile.as_subclass(Cuda)
    desc = TensorDescriptor.from_tensor(tc, [64, 64])
    desc.encode()                       # the fake map, cached for this address
    first4, first16 = (xc, xc, xc, 16), (desc, desc, xc, xc, xc, xc, xc, xc) + (16,) * 8
    timed_desc = TensorDescriptor.from_tensor(tc, [64, 64])
    timed_desc.encode()
    timed_desc.__dict__["base"] = tile  # the same storage as a plain tensor: data_ptr() at C speed
    return (first4, (x, x, x, 16)), (first16, (timed_desc, timed_desc, x, x, x, x, x, x) + (16,) * 8)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launches", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile 20,000 launches of each")
    parser.add_argument("--more", action="store_true",
                        help="also: options as keywords, a grid callable, two specializations in turn")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with the thread's CPU time (on a shared machine: leaves out preemption)")
    args = parser.parse_args(argv)
    clock = time.thread_time_ns if args.cpu_time else time.perf_counter_ns
    os.environ.pop("TLXC_NVTX", None)
    import launch_kernels as lk
    _install_fake_driver()
    (first4, timed4), (first16, timed16) = _arguments()
    grid = lambda meta: (1,)                             # noqa: E731
    timed4b = timed4[:3] + (17,)                        # another specialization (17 % 16 != 0)
    cases = [("4 args", lk.empty4, lambda: lk.empty4[(1,)](*first4), lambda: lk.empty4[(1,)](*timed4)),
             ("16 args (2 descriptors)", lk.empty16, lambda: lk.empty16[(1,)](*first16),
              lambda: lk.empty16[(1,)](*timed16))]
    if args.more:
        def alternate():
            lk.empty4[(1,)](*timed4)
            lk.empty4[(1,)](*timed4b)
        cases += [("4 args, num_warps=8", lk.empty4, lambda: lk.empty4[(1,)](*first4, num_warps=8),
                   lambda: lk.empty4[(1,)](*timed4, num_warps=8)),
                  ("4 args, grid callable", lk.empty4, lambda: lk.empty4[grid](*first4), lambda: lk.empty4[grid](*timed4)),
                  ("4 args, 2 keys in turn", lk.empty4, lambda: lk.empty4[(1,)](*first4[:3], 17), alternate)]
    for name, kfn, first, timed in cases:
        compiled = first()                               # slow path: compile, plan, fast path
        if timed() is not compiled and name != "4 args, 2 keys in turn":
            raise AssertionError(f"{name}: the timed arguments did not hit the first launch's plan")
        per_call = 2 if name == "4 args, 2 keys in turn" else 1
        best = float("inf")
        for _ in range(args.repeat):
            start = clock()
            for _ in range(args.launches):
                timed()
            best = min(best, (clock() - start) / args.launches / per_call / 1000)
        print(f"  launch, Python part, {name:<24} {best:6.2f} us  (min of {args.repeat} x {args.launches:,}"
              f"{', CPU time' if args.cpu_time else ''})", flush=True)
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(20_000):
                timed()
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(12)

if __name__ == "__main__":
    main()
