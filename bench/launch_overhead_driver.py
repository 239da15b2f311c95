"""Host time per launch of an empty 4-argument kernel (needs a GPU).

    python bench/launch_overhead_driver.py [--launches 20000]

Compares tlxc's ctypes launcher (bare, and with the per-call work a real launch
adds: stream lookup and ``data_ptr()``), ``cuda.bindings`` ``cuLaunchKernel``,
and Triton's launch of an empty ``@triton.jit`` kernel when Triton is importable.

Two numbers per path: "back-to-back" is the wall time of N launches divided by
N (what the task asks for; once the GPU's launch queue fills, this measures the
GPU's rate of retiring empty kernels rather than host cost), and "host-only"
is the time spent inside the launch calls in batches of 256 that never fill the
queue, with a synchronize outside the timed region between batches.
"""
from __future__ import annotations

import argparse
import ctypes
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from tlxc.codegen_nvptx.toolchain import compile_cuda
from tlxc.runtime import driver

EMPTY = r"""
extern "C" __global__ void empty(const float* a, const float* b, float* c, int n) {}
"""
_ARCH_OF = {(8, 0): "sm_80", (8, 9): "sm_89", (9, 0): "sm_90a", (10, 0): "sm_100a"}
BATCH = 256


def time_back_to_back(launch: Callable[[], None], count: int) -> float:
    """Microseconds per launch over ``count`` consecutive launches."""
    for _ in range(200):
        launch()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(count):
        launch()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / count * 1e6


def time_host_only(launch: Callable[[], None], count: int) -> float:
    """Microseconds per launch in batches small enough not to fill the launch queue."""
    total, done = 0.0, 0
    while done < count:
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(BATCH):
            launch()
        total += time.perf_counter() - start
        done += BATCH
    torch.cuda.synchronize()
    return total / done * 1e6


def tlxc_launches(cubin: bytes, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor,
                  n: int) -> dict[str, Callable[[], None]]:
    device = torch.cuda.current_device()
    launcher = driver.CudaModule.load(cubin).function("empty").make_launcher(
        ["u64", "u64", "u64", "i32"])
    stream = driver.current_stream_handle(device)
    pointers = [a.data_ptr(), b.data_ptr(), c.data_ptr(), n]
    get_stream = driver.stream_getter()

    launch = launcher.launch  # the hot-path closure; calling the Launcher adds a method call

    def bare() -> None:
        launch((1, 1, 1), (32, 1, 1), 0, stream, pointers)

    def via_call() -> None:
        launcher((1, 1, 1), (32, 1, 1), 0, stream, pointers)

    def with_binding() -> None:  # what a tlxc kernel call must do per launch at least
        launch((1, 1, 1), (32, 1, 1), 0, get_stream(device),
               [a.data_ptr(), b.data_ptr(), c.data_ptr(), n])

    classic = launcher.function.make_launcher(["u64", "u64", "u64", "i32"], classic=True)

    def classic_bare() -> None:
        classic.launch((1, 1, 1), (32, 1, 1), 0, stream, pointers)

    # The floor of a ctypes launch: the same foreign calls with nothing packed.
    launcher((1, 1, 1), (32, 1, 1), 0, stream, pointers)
    lib = driver._driver()
    handle, params = launcher.function.handle, launcher.arguments.pointers_address
    config = launcher._config_address

    def raw_ex() -> None:
        lib.cuLaunchKernelEx(config, handle, params, None)

    def raw_classic() -> None:
        lib.cuLaunchKernel(handle, 1, 1, 1, 32, 1, 1, 0, stream, params, None)

    return {"tlxc launcher.launch (bare, cuLaunchKernelEx)": bare,
            "tlxc launcher(...) (bare, cuLaunchKernelEx)": via_call,
            "tlxc launcher.launch (bare, cuLaunchKernel)": classic_bare,
            "tlxc launcher + stream + data_ptr": with_binding,
            "raw ctypes cuLaunchKernelEx (no packing)": raw_ex,
            "raw ctypes cuLaunchKernel (no packing)": raw_classic}


def cuda_bindings_launch(cubin: bytes, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor,
                         n: int) -> dict[str, Callable[[], None]]:
    try:
        from cuda.bindings import driver as cb
    except ImportError:
        return {}
    err, module = cb.cuModuleLoadData(cubin)
    err2, function = cb.cuModuleGetFunction(module, b"empty")
    if err != cb.CUresult.CUDA_SUCCESS or err2 != cb.CUresult.CUDA_SUCCESS:
        print(f"cuda.bindings: could not load the cubin ({err}, {err2})")
        return {}
    values = [ctypes.c_uint64(a.data_ptr()), ctypes.c_uint64(b.data_ptr()),
              ctypes.c_uint64(c.data_ptr()), ctypes.c_int32(n)]
    params = (ctypes.c_void_p * 4)(*[ctypes.addressof(v) for v in values])
    stream = torch.cuda.current_stream().cuda_stream

    def launch() -> None:
        cb.cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, stream, ctypes.addressof(params), 0)

    launch.keepalive = (values, params, module)  # type: ignore[attr-defined]
    return {"cuda.bindings cuLaunchKernel": launch}


def triton_launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor,
                  n: int) -> dict[str, Callable[[], None]]:
    try:
        import triton
    except ImportError:
        return {}

    @triton.jit
    def empty(a_ptr, b_ptr, c_ptr, n):
        pass

    def launch() -> None:
        empty[(1,)](a, b, c, n)

    return {f"triton {triton.__version__} empty kernel": launch}


NATIVE = r"""
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <cuda_runtime.h>
__global__ void empty(const float*, const float*, float*, int) {}
int main(int argc, char** argv) {
  int count = atoi(argv[1]);
  float *a, *b, *c;
  cudaMalloc(&a, 4096); cudaMalloc(&b, 4096); cudaMalloc(&c, 4096);
  for (int i = 0; i < 200; ++i) empty<<<1, 32>>>(a, b, c, 1024);
  cudaDeviceSynchronize();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) empty<<<1, 32>>>(a, b, c, 1024);
  auto stop = std::chrono::steady_clock::now();
  cudaDeviceSynchronize();
  double total = 0;
  for (int done = 0; done < count; done += 256) {
    cudaDeviceSynchronize();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 256; ++i) empty<<<1, 32>>>(a, b, c, 1024);
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  cudaDeviceSynchronize();
  printf("%-48s %16.2f %13.2f\n", "C++ <<<>>> launch (nvcc -O2), the floor",
         std::chrono::duration<double>(stop - start).count() / count * 1e6,
         total / ((count + 255) / 256 * 256) * 1e6);
  return 0;
}
"""


def native_floor(count: int) -> str | None:
    """The same measurement from C++, if nvcc is on the PATH: what the driver costs."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        source, binary = Path(tmp) / "floor.cu", Path(tmp) / "floor"
        source.write_text(NATIVE)
        arch = "sm_{}{}".format(*torch.cuda.get_device_capability())
        build = subprocess.run([nvcc, "-O2", f"-arch={arch}", str(source), "-o", str(binary)],
                               capture_output=True, text=True, check=False)
        if build.returncode != 0:
            return f"(nvcc failed: {build.stderr.strip()[:200]})"
        return subprocess.run([str(binary), str(count)], capture_output=True, text=True,
                              check=False).stdout.rstrip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    arch = _ARCH_OF.get(torch.cuda.get_device_capability())
    if arch is None:
        sys.exit(f"no tlxc target for {torch.cuda.get_device_name()}")
    cubin = compile_cuda(EMPTY, arch, ["empty"]).cubin
    n = 1024
    a, b, c = (torch.zeros(n, device="cuda") for _ in range(3))
    paths = {**tlxc_launches(cubin, a, b, c, n), **cuda_bindings_launch(cubin, a, b, c, n),
             **triton_launch(a, b, c, n)}
    print(f"{torch.cuda.get_device_name()}, driver {driver.driver_version()}, "
          f"torch {torch.__version__}, {args.launches} launches")
    # Rounds interleave the paths so that clock ramps and noise hit all alike;
    # the median of the rounds is reported.
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
    for _ in range(args.rounds):
        for name, launch in paths.items():
            results[name].append((time_back_to_back(launch, args.launches),
                                  time_host_only(launch, args.launches)))
    print(f"{'path':48s} {'back-to-back us':>16s} {'host-only us':>13s}  (median of {args.rounds})")
    for name, rounds in results.items():
        back_to_back = statistics.median(r[0] for r in rounds)
        host_only = statistics.median(r[1] for r in rounds)
        print(f"{name:48s} {back_to_back:16.2f} {host_only:13.2f}")
    native = native_floor(args.launches)
    if native:
        print(native)


if __name__ == "__main__":
    main()
