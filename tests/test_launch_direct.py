"""The real launch path without a GPU: a kernel compiled by NVRTC, its plan built by
``_prepare`` around a real ``driver.Launcher``, and a stand-in for libcuda that decodes what
each ``cuLaunchKernelEx`` would read.  The slow path, the generic fast path and the
specialized path (which packs the config and the arguments itself) must launch the same
thing (issue 21)."""
from __future__ import annotations

import ctypes
import types

import pytest
import torch
from launch_state import forget_launches

import tlxc
import tlxc.language as tl
from tlxc.runtime import driver


@tlxc.kernel
def add_scaled(x_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * a, mask=mask)


class Cuda(torch.Tensor):
    """A CPU tensor that says it is on a GPU (the slow path's checks); get_device() is -1."""

    is_cuda = True
    __torch_function__ = torch._C._disabled_torch_function_impl


class RecordingDriver:
    def __init__(self, kinds):
        self.kinds, self.calls = kinds, []
        self.cuLaunchKernel = None          # (classic launches only)

    def cuLaunchKernelEx(self, config_address, function, params, extra):
        config = driver.CUlaunchConfig.from_address(config_address)
        pointers = (ctypes.c_void_p * len(self.kinds)).from_address(params)
        reads = {"u64": ctypes.c_uint64, "i32": ctypes.c_int32, "f32": ctypes.c_float}
        args = [reads[k].from_address(pointers[i]).value for i, k in enumerate(self.kinds)]
        if config.gridDimY > 65535 or config.gridDimZ > 65535:
            return 1                        # CUDA_ERROR_INVALID_VALUE, as the driver answers
        self.calls.append(((config.gridDimX, config.gridDimY, config.gridDimZ),
                           (config.blockDimX, config.blockDimY, config.blockDimZ),
                           config.sharedMemBytes, config.hStream, config.numAttrs, args))
        return 0

    def cuGetErrorName(self, result, name_out):
        return 1                            # unknown: the message shows the number


_LAUNCH_EX = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


@pytest.fixture(params=["python", "c"])
def fake_gpu(monkeypatch, request):
    """The stand-in driver; "c": its cuLaunchKernelEx as a foreign function, so the
    specialized launches go through the C launcher (runtime/c_launcher.py), which calls it
    directly; "python": a Python method, so they stay on the generated Python path."""
    class Function(driver.CudaFunction):
        def attribute(self, attribute):
            return 48 * 1024 if attribute == driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES else 0

    class Module(driver.CudaModule):
        def function(self, name, device_index=None):
            return Function(self, name, 0xF00D, 0)

    recorder = RecordingDriver(["u64", "u64", "f32", "i32"])
    if request.param == "c":
        from tlxc.runtime import c_launcher
        if c_launcher.module() is None:
            pytest.skip("no C compiler or Python headers: the C launcher cannot be built")
        recorder.cuLaunchKernelEx = _LAUNCH_EX(recorder.cuLaunchKernelEx)
    recorder.mode = request.param
    monkeypatch.setattr(driver, "_driver_lib", recorder)
    monkeypatch.setattr(driver.CudaModule, "load", classmethod(lambda cls, cubin, device=None: Module(cubin)))
    monkeypatch.setattr(driver, "device_properties",
                        lambda device: types.SimpleNamespace(max_shared_memory_per_block_optin=227 * 1024))
    monkeypatch.setattr(driver, "stream_getter", lambda: (lambda device: 0x5000 + device))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.delenv("TLXC_INTERPRET", raising=False)
    yield recorder
    forget_launches(add_scaled)


def test_every_path_launches_the_same(fake_gpu):
    xs = [torch.empty(1000 + 64 * i).as_subclass(Cuda) for i in range(4)]
    outs = [torch.empty(1000 + 64 * i).as_subclass(Cuda) for i in range(4)]
    compiled = None
    for i in range(4):                  # slow, generic, specialized, specialized
        x, out = xs[i], outs[i]
        n = 1000 + 64 * i
        result = add_scaled[(tlxc.cdiv(n, 256), 1)](x, out, 0.5 + i, n, BLOCK=256)
        compiled = compiled or result
        assert result is compiled
        grid, block, smem, stream, attrs, args = fake_gpu.calls[-1]
        assert grid == (tlxc.cdiv(n, 256), 1, 1) and block == (128, 1, 1) and stream == 0x5000 - 1
        assert attrs == 0 and smem == compiled.metadata.get("scratch_bytes", 0)
        assert args == [x.data_ptr(), out.data_ptr(), 0.5 + i, n]
    assert add_scaled._fast is not add_scaled._generic and len(fake_gpu.calls) == 4
    assert (type(add_scaled._fast).__name__ == "CLaunch") == (fake_gpu.mode == "c")


def test_specialized_path_explains_what_does_not_fit(fake_gpu):
    x = torch.empty(64).as_subclass(Cuda)
    for _ in range(3):
        add_scaled[(1,)](x, x, 1.0, 64, BLOCK=64)
    with pytest.raises(tlxc.LaunchError, match="x = -1"):
        add_scaled[(-1,)](x, x, 1.0, 64, BLOCK=64)
    with pytest.raises(tlxc.LaunchError, match="y = 70000"):
        add_scaled[(1, 70000)](x, x, 1.0, 64, BLOCK=64)
    with pytest.raises(tlxc.LaunchError, match="x = 2.0"):
        add_scaled[(2.0,)](x, x, 1.0, 64, BLOCK=64)
    add_scaled[(0,)](x, x, 1.0, 64, BLOCK=64)          # an empty grid launches nothing
    assert len(fake_gpu.calls) == 3


def test_num_ctas_multiplies_the_grid_on_every_path(fake_gpu):
    """Triton's num_ctas=N: each program is a cluster of N CTAs along x, on the slow path, the
    generic fast path and the specialized one (tests/test_num_ctas.py has the rest)."""
    x = torch.empty(1000).as_subclass(Cuda)
    for i in range(4):
        compiled = add_scaled[(4, 3)](x, x, 1.0, 1000, BLOCK=256, num_ctas=2)
        assert fake_gpu.calls[-1][0] == (8, 3, 1) and compiled.metadata["num_ctas"] == 2
    add_scaled[(4, 3)](x, x, 1.0, 1000, BLOCK=256)                # the same kernel without: its own compile
    assert fake_gpu.calls[-1][0] == (4, 3, 1) and len(add_scaled.compiled_kernels()) == 2
    assert "__cluster_dims__(2, 1, 1)" in compiled.asm["cuda"]
