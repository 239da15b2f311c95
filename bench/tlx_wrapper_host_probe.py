"""Host time of a TLX tutorial's GEMM wrapper, without a GPU.

TLX's Hopper GEMM tutorials (``hopper_gemm_ws.py``, the persistent cooperative and
ping-pong GEMMs) launch through a host function that, on every call, builds three
``TensorDescriptor``s with a placeholder box (``[1, 1]``), then launches an autotuned
kernel whose config ``pre_hook`` assigns each descriptor's ``block_shape``, with a grid
callable.  ``bench/tlx_wrapper_kernels.py`` has a kernel launched that way; this probe
times each part of that path with the driver replaced as in ``bench/launch_host_probe.py``
(``cuLaunchKernelEx`` returns 0, tensor maps are zero bytes; the first call compiles for
sm_90a or loads the disk cache):

* ``3 descriptors``: ``TensorDescriptor(t, shape, strides, [1, 1])`` three times;
* ``pre_hook``: the config's hook on fresh descriptors (three ``block_shape`` assignments);
* ``wrapper``: the whole host function (descriptors, autotuner dispatch with its cached
  choice, pre_hook, grid callable, encode of the three maps, argument packing, launch);
* ``direct``: ``kernel.fn[grid]`` on descriptors built once (the floor).

The tensors are CPU tensors of a class that says ``is_cuda`` (a fresh descriptor's map is
encoded only for a CUDA tensor); ``subclass cost`` is what that class adds to reading a
tensor's attributes, so the numbers are an upper bound by about that much.  Times are the
thread's CPU time (a shared machine's preemption left out), the minimum over ``--repeat`` rounds
(each round times every row in turn).

    python bench/tlx_wrapper_host_probe.py [--calls 500] [--repeat 20] [--profile]
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))


def _best(fn, calls: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.thread_time_ns()
        for _ in range(calls):
            fn()
        best = min(best, (time.thread_time_ns() - start) / calls / 1000)
    return best


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--profile", action="store_true", help="cProfile 3,000 wrapper calls")
    args = parser.parse_args(argv)
    import torch
    from launch_host_probe import _install_fake_driver
    _install_fake_driver()
    import tlx_wrapper_kernels as wk

    from tlxc.descriptors import TensorDescriptor

    class Cuda(torch.Tensor):          # says is_cuda: a fresh descriptor's map is encoded only then
        is_cuda = True
        __torch_function__ = torch._C._disabled_torch_function_impl

    M = N = K = 512
    a = torch.empty(M, K, dtype=torch.float16).as_subclass(Cuda)
    b = torch.empty(K, N, dtype=torch.float16).as_subclass(Cuda)
    c = torch.empty(M, N, dtype=torch.float16).as_subclass(Cuda)
    sms = 132
    kernel = wk.copy_tile

    def wrapper():
        """The tutorials' host function, less its torch.zeros output."""
        desc_a = TensorDescriptor(a, shape=[M, K], strides=[K, 1], block_shape=[1, 1])
        desc_b = TensorDescriptor(b, shape=[K, N], strides=[N, 1], block_shape=[1, 1])
        desc_c = TensorDescriptor(c, shape=[M, N], strides=[N, 1], block_shape=[1, 1])

        def grid(meta):
            return (min(sms, tlxc_cdiv(M, meta["BM"]) * tlxc_cdiv(N, meta["BN"])),)
        kernel[grid](desc_a, desc_b, desc_c, M, N, K, NUM_SMS=sms)

    from tlxc import cdiv as tlxc_cdiv
    kernel.configs = kernel.configs[:1]        # one config: no benchmark on the fake driver
    wrapper()                                  # compiles (or loads the disk cache)
    config = kernel.configs[0]

    def descriptors():
        return [TensorDescriptor(t, shape=[512, 512], strides=[512, 1], block_shape=[1, 1]) for t in (a, b, c)]

    def pre_hook():
        da, db, dc = descriptors()
        config.pre_hook({"a_desc": da, "b_desc": db, "c_desc": dc, **config.all_kwargs()})

    fixed = descriptors()
    config.pre_hook({"a_desc": fixed[0], "b_desc": fixed[1], "c_desc": fixed[2], **config.all_kwargs()})
    direct_launch = kernel.fn[(sms,)]

    def direct():
        direct_launch(*fixed, M, N, K, NUM_SMS=sms, **config.all_kwargs())

    plain = torch.empty(4)
    sub = torch.empty(4).as_subclass(Cuda)

    def attributes(t):
        return lambda: (t.data_ptr(), t.dtype, t.get_device(), t.shape, t.stride(), t.untyped_storage())

    rows = [("3 descriptors", descriptors), ("3 descriptors + pre_hook", pre_hook), ("wrapper", wrapper),
            ("direct", direct), ("subclass", attributes(sub)), ("plain", attributes(plain))]
    best = {label: float("inf") for label, _ in rows}
    for _ in range(args.repeat):        # the rows in turn, each round: a load spike hits one round of each
        for label, fn in rows:
            best[label] = min(best[label], _best(fn, args.calls, 1))
    for label, _ in rows[:4]:
        print(f"  {label:<26} {best[label]:7.2f} us per call", flush=True)
    cost = best["subclass"] - best["plain"]
    print(f"  {'subclass cost':<26} {cost:7.2f} us per tensor (data_ptr, dtype, get_device, shape, stride, "
          f"storage)", flush=True)
    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(3000):
            wrapper()
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
