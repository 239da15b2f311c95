"""Host time of a TLX tutorial's GEMM wrapper, with the driver faked or on a GPU.

TLX's Hopper GEMM tutorials (``hopper_gemm_ws.py``, the persistent cooperative and
ping-pong GEMMs) launch through a host function that, on every call, builds three
``TensorDescriptor``s with a placeholder box (``[1, 1]``), then launches an autotuned
kernel whose config ``pre_hook`` assigns each descriptor's ``block_shape``, with a grid
callable.  ``bench/tlx_wrapper_kernels.py`` has a kernel launched that way; this probe
times each part of that path:

* ``3 descriptors``: ``TensorDescriptor(t, shape, strides, [1, 1])`` three times;
* ``3 descriptors + pre_hook``: the config's hook on fresh descriptors (three
  ``block_shape`` assignments);
* ``autotuner, fixed descriptors``: ``kernel[grid](...)`` on descriptors built once (the
  autotuner's dispatch, its pre_hook, the grid callable, the launch);
* ``wrapper``: the whole host function but its ``torch.zeros`` output (descriptors,
  autotuner dispatch with its cached choice, pre_hook, grid callable, the three maps,
  argument packing, launch);
* ``direct``: ``kernel.fn[grid]`` on descriptors built once (the floor).

Without ``--gpu`` the driver is replaced as in ``bench/launch_host_probe.py``
(``cuLaunchKernelEx`` returns 0, tensor maps are zero bytes; the first call compiles for
sm_90a or loads the disk cache).  The tensors are CPU tensors of a class that says
``is_cuda`` (a fresh descriptor's map is encoded only for a CUDA tensor); ``subclass cost``
is what that class adds to reading a tensor's attributes, so the numbers are an upper bound
by about that much.  Such a tensor's ``get_device()`` is -1, so a fresh descriptor's map is
looked up by ``encode()`` at the launch, not reused when its box is set (``_reuse_map``, CUDA
tensors only): the fake numbers include those three ``encode()`` calls.  Times are the
thread's CPU time (a shared machine's preemption left out), the minimum over ``--repeat``
rounds (each round times every row in turn).

With ``--gpu`` the same rows run on the GPU's real driver and CUDA tensors (512x512 fp16),
plus the tutorial's whole host function (``torch.zeros`` of C and
``get_device_properties`` included) and ``torch.matmul``; each row is given both as thread
CPU time back to back (min of rounds) and as the harness's ``host_us`` (wall time of one call
issued on an idle GPU, median; /work/ports/tlx/harness.py).  It also counts
``cuTensorMapEncodeTiled`` calls during the timed wrapper calls (0 expected: a map is
encoded once per tensor address and geometry), and gives the GPU window of the tutorials'
``torch.zeros`` of C at the harness's 8192x8192 (events around it on an idle GPU) and what it
adds to the harness's per-call window in front of an 8192^3 GEMM (cuBLAS standing in for the
kernel; with and without a 45 us host pause between the memset and the GEMM).

    python bench/tlx_wrapper_host_probe.py [--gpu] [--calls 500] [--repeat 20] [--profile]
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
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


def _idle_us(fn, calls: int) -> float:
    """The harness's host_us: wall microseconds of one call on an idle GPU, median."""
    import torch
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return statistics.median(times) * 1e6


def _memset_before_gemm(torch) -> None:
    """What the tutorials' torch.zeros of C costs the harness's per-call window (events around one
    call, GPU idle before it) at 8192^3, with cuBLAS standing in for the kernel: the window of
    matmul alone, of zeros + matmul, and of zeros + a 45 us host pause (about the wrapper's host
    time) + matmul, the three in turn, medians of 20 rounds."""
    a, b = (torch.randn(8192, 8192, device="cuda", dtype=torch.float16) for _ in range(2))

    def pause():
        end = time.perf_counter() + 45e-6
        while time.perf_counter() < end:
            pass

    cases = {"matmul": lambda: torch.matmul(a, b),
             "zeros + matmul": lambda: (torch.zeros((8192, 8192), dtype=torch.float16, device="cuda"),
                                        torch.matmul(a, b)),
             "zeros + 45 us host + matmul": lambda: (torch.zeros((8192, 8192), dtype=torch.float16, device="cuda"),
                                                     pause(), torch.matmul(a, b))}
    times = {name: [] for name in cases}
    for round_ in range(23):
        for name, fn in cases.items():
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            begin.record()
            fn()
            end.record()
            end.synchronize()
            if round_ >= 3:
                times[name].append(begin.elapsed_time(end) * 1000)
    alone = statistics.median(times["matmul"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  per-call window at 8192^3, {name:<28} {med:8.1f} us median (+{med - alone:.1f} over matmul alone; "
              f"min {min(ts):.1f})", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="real driver and CUDA tensors (needs a GPU)")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--profile", action="store_true", help="cProfile 3,000 wrapper calls")
    args = parser.parse_args(argv)
    import torch
    if not args.gpu:
        from launch_host_probe import _install_fake_driver
        _install_fake_driver()
    import tlx_wrapper_kernels as wk

    from tlxc import cdiv as tlxc_cdiv
    from tlxc import descriptors
    from tlxc.descriptors import TensorDescriptor

    class Cuda(torch.Tensor):          # says is_cuda: a fresh descriptor's map is encoded only then
        is_cuda = True
        __torch_function__ = torch._C._disabled_torch_function_impl

    M = N = K = 512
    if args.gpu:
        a, b, c = (torch.randn(512, 512, device="cuda", dtype=torch.float16) for _ in range(3))
        sms = torch.cuda.get_device_properties(0).multi_processor_count
    else:
        a, b, c = (torch.empty(512, 512, dtype=torch.float16).as_subclass(Cuda) for _ in range(3))
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

    def tutorial():
        """The tutorials' whole host function: torch.zeros of C, the SM count, the wrapper."""
        out = torch.zeros((M, N), dtype=torch.float16, device="cuda")
        count = torch.cuda.get_device_properties("cuda").multi_processor_count
        desc_a = TensorDescriptor(a, shape=[M, K], strides=[K, 1], block_shape=[1, 1])
        desc_b = TensorDescriptor(b, shape=[K, N], strides=[N, 1], block_shape=[1, 1])
        desc_c = TensorDescriptor(out, shape=[M, N], strides=[N, 1], block_shape=[1, 1])

        def grid(meta):
            return (min(count, tlxc_cdiv(M, meta["BM"]) * tlxc_cdiv(N, meta["BN"])),)
        kernel[grid](desc_a, desc_b, desc_c, M, N, K, NUM_SMS=count)
        return out

    kernel.configs = kernel.configs[:1]        # one config: no benchmark on the fake driver
    start = time.perf_counter()
    wrapper()                                  # compiles (or loads the disk cache)
    if args.gpu:
        torch.cuda.synchronize()
        expected = torch.zeros(M, N, dtype=torch.float32, device="cuda")
        for pid in range(min(sms, -(-M // 128) * -(-N // 128))):     # copy_tile's rows: tile pid's row sums
            rows = a[pid * 128:(pid + 1) * 128, :64].float().sum(1, keepdim=True)
            expected[pid * 128:(pid + 1) * 128, :64] = rows
        err = (c[:, :64].float() - expected[:, :64]).abs().max().item()
        print(f"  first call {time.perf_counter() - start:.2f} s; kernel check max |error| {err:.3g} "
              f"({torch.cuda.get_device_name(0)})", flush=True)
        tutorial()
    config = kernel.configs[0]

    def descriptors3():
        return [TensorDescriptor(t, shape=[512, 512], strides=[512, 1], block_shape=[1, 1]) for t in (a, b, c)]

    def pre_hook():
        da, db, dc = descriptors3()
        config.pre_hook({"a_desc": da, "b_desc": db, "c_desc": dc, **config.all_kwargs()})

    fixed = descriptors3()
    config.pre_hook({"a_desc": fixed[0], "b_desc": fixed[1], "c_desc": fixed[2], **config.all_kwargs()})
    direct_kwargs = config.all_kwargs()

    def direct():       # (kernel.fn[grid] each call: a partial made once would keep the first launch's path)
        kernel.fn[(sms,)](*fixed, M, N, K, NUM_SMS=sms, **direct_kwargs)

    def tuner_fixed():
        kernel[lambda meta: (min(sms, tlxc_cdiv(M, meta["BM"]) * tlxc_cdiv(N, meta["BN"])),)](
            *fixed, M, N, K, NUM_SMS=sms)

    plain = torch.empty(4)
    sub = torch.empty(4).as_subclass(Cuda)

    def attributes(t):
        return lambda: (t.data_ptr(), t.dtype, t.get_device(), t.shape, t.stride(), t.untyped_storage())

    rows = [("3 descriptors", descriptors3), ("3 descriptors + pre_hook", pre_hook),
            ("autotuner, fixed descriptors", tuner_fixed), ("wrapper", wrapper), ("direct", direct)]
    if args.gpu:
        rows += [("tutorial (zeros, SM count, wrapper)", tutorial),
                 ("torch.zeros", lambda: torch.zeros((M, N), dtype=torch.float16, device="cuda")),
                 ("torch.matmul", lambda: torch.matmul(a, b))]
    else:
        rows += [("subclass", attributes(sub)), ("plain", attributes(plain))]
    encodes = []
    real_encode = descriptors.encode_tiled
    descriptors.encode_tiled = lambda *a: encodes.append(1) or real_encode(*a)
    best = {label: float("inf") for label, _ in rows}
    for _ in range(args.repeat):        # the rows in turn, each round: a load spike hits one round of each
        for label, fn in rows:
            best[label] = min(best[label], _best(fn, args.calls, 1))
            if args.gpu:
                torch.cuda.synchronize()
    idle = {label: _idle_us(fn, 200) for label, fn in rows} if args.gpu else {}
    descriptors.encode_tiled = real_encode
    shown = rows if args.gpu else rows[:5]
    for label, _ in shown:
        line = f"  {label:<36} {best[label]:7.2f} us per call (thread CPU, back to back)"
        if label in idle:
            line += f"   {idle[label]:7.2f} us (idle GPU, wall, median)"
        print(line, flush=True)
    if not args.gpu:
        cost = best["subclass"] - best["plain"]
        print(f"  {'subclass cost':<36} {cost:7.2f} us per tensor (data_ptr, dtype, get_device, shape, stride, "
              f"storage)", flush=True)
    print(f"  cuTensorMapEncodeTiled calls during the timed rows: {len(encodes)} (a few at most: a new "
          f"output address; one per call would be a cache miss per call)", flush=True)
    if args.gpu:        # what the tutorials' torch.zeros of C costs the GPU at the harness's 8192^2
        big = [torch.zeros((8192, 8192), dtype=torch.float16, device="cuda") for _ in range(2)]
        del big
        times = []
        for _ in range(20):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            begin.record()
            out = torch.zeros((8192, 8192), dtype=torch.float16, device="cuda")
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end) * 1000)
            del out
        print(f"  torch.zeros((8192, 8192), fp16) GPU window (events, idle GPU): {statistics.median(times):.1f} us "
              f"median ({min(times):.1f} min; 128 MiB)", flush=True)
        _memset_before_gemm(torch)
    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(3000):
            wrapper()
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
