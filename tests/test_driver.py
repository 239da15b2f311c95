"""CUDA driver layer: argument packing and launch plumbing without a GPU, real
launches with one (``@pytest.mark.gpu``)."""
from __future__ import annotations

import ctypes
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tlxc.errors import CudaError, LaunchError
from tlxc.runtime import driver
from tlxc.runtime.driver import (
    CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
    ArgumentBuffer,
    CUlaunchAttribute,
    CUlaunchConfig,
    Launcher,
)

TENSOR_MAP = bytes(range(128))


def test_module_imports_without_driver_or_torch() -> None:
    # A fresh interpreter: importing must neither open libcuda nor import torch.
    code = ("import sys; from tlxc.runtime import driver; "
            "assert driver._driver_lib is None; assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


def test_missing_driver_is_a_clear_cuda_error() -> None:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        pass
    else:
        pytest.skip("this machine has a CUDA driver")
    with pytest.raises(CudaError, match="no CUDA driver found"):
        driver.device_properties(0)


# --------------------------------------------------------------------------
# Argument packing


def _read(address: int, kind: str) -> Any:
    scalar = {"u64": ctypes.c_uint64, "i64": ctypes.c_int64, "u32": ctypes.c_uint32,
              "i32": ctypes.c_int32, "f32": ctypes.c_float, "f64": ctypes.c_double}
    if kind == "bytes128":
        return ctypes.string_at(address, 128)
    return scalar[kind].from_address(address).value


def test_each_parameter_is_naturally_aligned_in_one_block() -> None:
    kinds = ["i32", "u64", "f32", "bytes128", "i32", "f64", "u32", "i64"]
    buffer = ArgumentBuffer(kinds)
    assert buffer.offsets == [0, 8, 16, 64, 192, 200, 208, 216]
    assert buffer.size == 224
    addresses = list(buffer.pointers)
    assert addresses[0] % 64 == 0
    for address, kind in zip(addresses, kinds):
        assert address % driver.PARAM_KINDS[kind][2] == 0
    assert [a - addresses[0] for a in addresses] == buffer.offsets


def test_packed_values_are_what_the_kernel_reads() -> None:
    kinds = ["u64", "i32", "f32", "i64", "u32", "f64", "bytes128"]
    values = [0x7F00_DEAD_BEEF_0000, -5, 1.5, -(2**40), 2**32 - 1, 3.25, TENSOR_MAP]
    buffer = ArgumentBuffer(kinds)
    buffer.pack(values)
    assert [_read(a, k) for a, k in zip(buffer.pointers, kinds)] == values
    # A second launch overwrites in place; the pointer array does not move.
    before = list(buffer.pointers)
    buffer.pack([1, 2, 3.0, 4, 5, 6.0, bytes(128)])
    assert list(buffer.pointers) == before
    assert _read(before[0], "u64") == 1 and _read(before[6], "bytes128") == bytes(128)


def test_packed_bytes_match_the_c_layout() -> None:
    buffer = ArgumentBuffer(["i32", "u64"])
    buffer.pack([-1, 0x1122334455667788])
    assert buffer.packed_bytes() == struct.pack("<i4xQ", -1, 0x1122334455667788)


def test_kernel_without_parameters() -> None:
    buffer = ArgumentBuffer([])
    buffer.pack([])
    assert buffer.size == 0 and buffer.packed_bytes() == b""


@pytest.mark.parametrize("kinds, values, message", [
    (["i32", "u64"], [1], "takes 2 arguments, got 1"),
    (["i32"], [2**31], "argument 0 .* does not fit C kind i32"),
    (["u64"], [-1], "argument 0 .* does not fit C kind u64"),
    (["i32", "f32"], [1, "x"], "argument 1 .* does not fit C kind f32"),
    (["bytes128"], [bytes(64)], "128-byte tensor map, got 64 bytes"),
])
def test_bad_arguments_raise_launch_error(kinds: list[str], values: list[Any],
                                          message: str) -> None:
    with pytest.raises(LaunchError, match=message):
        ArgumentBuffer(kinds).pack(values)


def test_unknown_parameter_kind() -> None:
    with pytest.raises(LaunchError, match="'half'"):
        ArgumentBuffer(["u64", "half"])


# --------------------------------------------------------------------------
# The launch path, against a recording stand-in for libcuda


class _FakeFunction:
    name = "fake_kernel"
    handle = 0xF00D
    device_index = 0

    def __init__(self) -> None:
        self.dynamic_smem_limit = 48 * 1024
        self.attributes_set: list[tuple[int, int]] = []

    def set_dynamic_smem(self, nbytes: int) -> None:
        self.dynamic_smem_limit = nbytes

    def set_attribute(self, attribute: int, value: int) -> None:
        self.attributes_set.append((attribute, value))


class _FakeDriver:
    """Records launches and decodes, at call time, what the driver would read."""

    def __init__(self, kinds: list[str], result: int = 0):
        self.kinds = kinds
        self.result = result
        self.calls: list[dict[str, Any]] = []

    def _arguments(self, params: int) -> list[Any]:
        pointers = (ctypes.c_void_p * max(len(self.kinds), 1)).from_address(params)
        return [_read(pointers[i], kind) for i, kind in enumerate(self.kinds)]

    def cuLaunchKernel(self, function: int, gx: int, gy: int, gz: int, bx: int, by: int,
                       bz: int, smem: int, stream: int, params: int, extra: None) -> int:
        self.calls.append({"api": "cuLaunchKernel", "function": function, "grid": (gx, gy, gz),
                           "block": (bx, by, bz), "smem": smem, "stream": stream,
                           "args": self._arguments(params)})
        return self.result

    def cuLaunchKernelEx(self, config_address: int, function: int, params: int,
                         extra: None) -> int:
        config = CUlaunchConfig.from_address(config_address)
        attributes = []
        for i in range(config.numAttrs):
            attribute: CUlaunchAttribute = config.attrs[i]
            cluster = attribute.value.clusterDim
            attributes.append((attribute.id, (cluster.x, cluster.y, cluster.z)))
        self.calls.append({
            "api": "cuLaunchKernelEx", "function": function,
            "grid": (config.gridDimX, config.gridDimY, config.gridDimZ),
            "block": (config.blockDimX, config.blockDimY, config.blockDimZ),
            "smem": config.sharedMemBytes, "stream": config.hStream or 0,
            "attributes": attributes, "args": self._arguments(params)})
        return self.result

    def cuGetErrorName(self, result: int, name_out: Any) -> int:
        return 1  # unknown: the caller falls back to the number


@pytest.fixture
def fake_driver(monkeypatch: pytest.MonkeyPatch):
    def install(kinds: list[str], result: int = 0) -> _FakeDriver:
        fake = _FakeDriver(kinds, result)
        monkeypatch.setattr(driver, "_driver_lib", fake)
        return fake
    return install


def test_launch_passes_grid_block_stream_and_arguments(fake_driver) -> None:
    kinds = ["u64", "u64", "u64", "i32"]
    fake = fake_driver(kinds)
    launcher = Launcher(_FakeFunction(), kinds)
    launcher((4, 2, 1), (128, 1, 1), 0, 0xABC, [0x1000, 0x2000, 0x3000, 77])
    launcher((1, 1, 1), (32, 1, 1), 1024, 0, [1, 2, 3, -1])
    assert fake.calls == [
        {"api": "cuLaunchKernelEx", "function": 0xF00D, "grid": (4, 2, 1),
         "block": (128, 1, 1), "smem": 0, "stream": 0xABC, "attributes": [],
         "args": [0x1000, 0x2000, 0x3000, 77]},
        {"api": "cuLaunchKernelEx", "function": 0xF00D, "grid": (1, 1, 1),
         "block": (32, 1, 1), "smem": 1024, "stream": 0, "attributes": [],
         "args": [1, 2, 3, -1]},
    ]


def test_classic_launch_uses_launch_kernel(fake_driver) -> None:
    kinds = ["u64", "f64"]
    fake = fake_driver(kinds)
    launcher = Launcher(_FakeFunction(), kinds, classic=True)
    launcher((3, 2, 1), (64, 2, 1), 512, 0x77, [0x1000, 2.5])
    assert fake.calls == [
        {"api": "cuLaunchKernel", "function": 0xF00D, "grid": (3, 2, 1), "block": (64, 2, 1),
         "smem": 512, "stream": 0x77, "args": [0x1000, 2.5]}]
    with pytest.raises(LaunchError, match="cluster"):
        Launcher(_FakeFunction(), kinds, cluster=(2, 1, 1), classic=True)


def test_bad_launch_shape_is_a_launch_error(fake_driver) -> None:
    fake = fake_driver([])
    launcher = Launcher(_FakeFunction(), [])
    with pytest.raises(LaunchError, match="not a valid launch shape"):
        launcher((-1, 1, 1), (32, 1, 1), 0, 0, [])
    assert fake.calls == []


def test_cluster_launch_uses_launch_kernel_ex(fake_driver) -> None:
    kinds = ["u64", "bytes128", "f32"]
    fake = fake_driver(kinds)
    function = _FakeFunction()
    launcher = Launcher(function, kinds, cluster=(2, 1, 1))
    launcher((8, 1, 1), (384, 1, 1), 4096, 0x55, [0xCAFE, TENSOR_MAP, 0.5])
    assert fake.calls == [{
        "api": "cuLaunchKernelEx", "function": 0xF00D, "grid": (8, 1, 1),
        "block": (384, 1, 1), "smem": 4096, "stream": 0x55,
        "attributes": [(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, (2, 1, 1))],
        "args": [0xCAFE, TENSOR_MAP, 0.5]}]
    assert function.attributes_set == []  # 2 CTAs per cluster is portable


def test_direct_launch_packs_what_launch_packs(fake_driver) -> None:
    """The parts the specialized launch path uses (one pack_all of shape and arguments into
    the buffer that holds the config, then the raw call) launch exactly what launch does,
    cluster attribute included."""
    kinds = ["u64", "bytes128", "i32", "f64"]
    fake = fake_driver(kinds)
    launcher = Launcher(_FakeFunction(), kinds, cluster=(2, 1, 1))
    values = [0xBEEF0, TENSOR_MAP, -7, 2.5]
    launcher((6, 2, 1), (256, 1, 1), 1024, 0x99, values)
    d = launcher.direct()
    d["pack_all"](d["storage"], d["offset"], 6, 2, 1, 256, 1, 1, 1024, 0x99, d["attrs"], d["num_attrs"], *values)
    assert d["raw"](d["config"], d["function"], d["params"], None) == 0
    assert len(fake.calls) == 2 and fake.calls[0] == fake.calls[1]
    assert fake.calls[1]["attributes"] == [(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, (2, 1, 1))]
    with pytest.raises(LaunchError, match="classic"):
        Launcher(_FakeFunction(), kinds, classic=True).direct()


def test_large_clusters_opt_into_non_portable_sizes(fake_driver) -> None:
    fake_driver([])
    function = _FakeFunction()
    Launcher(function, [], cluster=(16, 1, 1))
    assert function.attributes_set == [(driver.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)]


def test_large_dynamic_smem_raises_the_opt_in_once(fake_driver) -> None:
    fake_driver([])
    function = _FakeFunction()
    launcher = Launcher(function, [])
    launcher((1, 1, 1), (1, 1, 1), 100 * 1024, 0, [])
    assert function.dynamic_smem_limit == 100 * 1024


def test_driver_failure_names_the_call(fake_driver) -> None:
    fake_driver(["i32"], result=701)
    launcher = Launcher(_FakeFunction(), ["i32"])
    with pytest.raises(CudaError, match=r"cuLaunchKernelEx\(fake_kernel, grid=\(1, 1, 1\).*701.*registers"):
        launcher((1, 1, 1), (1024, 1, 1), 0, 0, [3])


def test_bad_arguments_are_caught_before_launching(fake_driver) -> None:
    fake = fake_driver(["u64"])
    launcher = Launcher(_FakeFunction(), ["u64"])
    with pytest.raises(LaunchError, match="takes 1 arguments, got 2"):
        launcher((1, 1, 1), (1, 1, 1), 0, 0, [1, 2])
    assert fake.calls == []


# --------------------------------------------------------------------------
# On a GPU

GPU_KERNELS = r"""
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void cluster_size(unsigned* out) {
  unsigned size;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
  if (threadIdx.x == 0) out[blockIdx.x] = size;
}

extern "C" __global__ void big_smem_sum(const float* in, float* out, int n) {
  extern __shared__ float buffer[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buffer[i] = in[i];
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int i = 0; i < n; ++i) total += buffer[n - 1 - i];
    out[0] = total;
  }
}

struct __align__(64) TensorMapBytes { unsigned char bytes[128]; };

extern "C" __global__ void copy_tensor_map(const __grid_constant__ TensorMapBytes map,
                                           unsigned char* out) {
  out[threadIdx.x] = map.bytes[threadIdx.x];
}
"""

_ARCH_OF = {(8, 0): "sm_80", (8, 9): "sm_89", (9, 0): "sm_90a", (10, 0): "sm_100a"}


@pytest.fixture(scope="module")
def gpu_module():
    import torch

    from tlxc.codegen_nvptx.toolchain import compile_cuda

    arch = _ARCH_OF.get(torch.cuda.get_device_capability())
    if arch is None:
        pytest.skip(f"no tlxc target for {torch.cuda.get_device_name()}")
    names = ["vadd", "cluster_size", "big_smem_sum", "copy_tensor_map"]
    compiled = compile_cuda(GPU_KERNELS, arch, names)
    return driver.CudaModule.load(compiled.cubin), arch


@pytest.mark.gpu
def test_vector_add_on_gpu(gpu_module) -> None:
    import torch

    module, _ = gpu_module
    n = 100_003
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")  # poisoned output
    launch = module.function("vadd").make_launcher(["u64", "u64", "u64", "i32"])
    stream = driver.current_stream_handle(torch.cuda.current_device())
    launch(((n + 255) // 256, 1, 1), (256, 1, 1), 0, stream,
           [a.data_ptr(), b.data_ptr(), c.data_ptr(), n])
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)


@pytest.mark.gpu
def test_launch_on_a_side_stream(gpu_module) -> None:
    import torch

    module, _ = gpu_module
    a, b = torch.ones(1024, device="cuda"), torch.full((1024,), 2.0, device="cuda")
    c = torch.zeros(1024, device="cuda")
    launch = module.function("vadd").make_launcher(["u64", "u64", "u64", "i32"])
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        launch((4, 1, 1), (256, 1, 1), 0, driver.current_stream_handle(c.device.index),
               [a.data_ptr(), b.data_ptr(), c.data_ptr(), 1024])
    side.synchronize()
    assert bool((c == 3.0).all())


@pytest.mark.gpu
def test_cluster_launch_on_gpu(gpu_module) -> None:
    import torch

    module, arch = gpu_module
    if arch not in ("sm_90a", "sm_100a"):
        pytest.skip("thread-block clusters need sm_90 or newer")
    out = torch.zeros(8, dtype=torch.int32, device="cuda")
    launch = module.function("cluster_size").make_launcher(["u64"], cluster=(2, 1, 1))
    launch((8, 1, 1), (32, 1, 1), 0, driver.current_stream_handle(0), [out.data_ptr()])
    torch.cuda.synchronize()
    assert out.tolist() == [2] * 8


@pytest.mark.gpu
def test_dynamic_shared_memory_above_48k(gpu_module) -> None:
    import torch

    module, _ = gpu_module
    n = 32 * 1024  # 128 KiB of floats
    if n * 4 > driver.device_properties(0).max_shared_memory_per_block_optin:
        pytest.skip("device has too little shared memory")
    data = torch.rand(n, device="cuda")
    out = torch.zeros(1, device="cuda")
    launch = module.function("big_smem_sum").make_launcher(["u64", "u64", "i32"])
    launch((1, 1, 1), (256, 1, 1), n * 4, driver.current_stream_handle(0),
           [data.data_ptr(), out.data_ptr(), n])
    torch.cuda.synchronize()
    torch.testing.assert_close(out.double(), data.double().sum().reshape(1), rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_tensor_map_is_passed_by_value(gpu_module) -> None:
    import torch

    module, _ = gpu_module
    out = torch.zeros(128, dtype=torch.uint8, device="cuda")
    launch = module.function("copy_tensor_map").make_launcher(["bytes128", "u64"])
    launch((1, 1, 1), (128, 1, 1), 0, driver.current_stream_handle(0),
           [TENSOR_MAP, out.data_ptr()])
    torch.cuda.synchronize()
    assert bytes(out.cpu().tolist()) == TENSOR_MAP


@pytest.mark.gpu
def test_device_properties_and_function_attributes(gpu_module) -> None:
    import torch

    module, _ = gpu_module
    props = driver.device_properties(0)
    assert props.compute_capability == torch.cuda.get_device_capability(0)
    assert props.sm_count == torch.cuda.get_device_properties(0).multi_processor_count
    assert props.max_shared_memory_per_block_optin >= 48 * 1024
    assert module.function("vadd").attributes()["registers"] > 0
    assert driver.driver_version() >= (12, 0)


@pytest.mark.gpu
def test_launch_from_a_fresh_thread(gpu_module) -> None:
    import threading

    import torch

    module, _ = gpu_module
    a, b = torch.ones(256, device="cuda"), torch.ones(256, device="cuda")
    c = torch.zeros(256, device="cuda")
    launch = module.function("vadd").make_launcher(["u64", "u64", "u64", "i32"])
    errors: list[BaseException] = []

    def worker() -> None:  # a thread on which CUDA was never used
        try:
            launch((1, 1, 1), (256, 1, 1), 0, 0, [a.data_ptr(), b.data_ptr(), c.data_ptr(), 256])
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert not errors, errors
    torch.cuda.synchronize()
    assert bool((c == 2.0).all())
