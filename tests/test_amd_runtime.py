"""The hip-python launch path (runtime/hip.py), tested without ROCm: the packed arguments against
the kernarg layout the compiler wrote into the code object, and the hip-python calls against a
stand-in module.  Nothing here ran on an AMD GPU."""
from __future__ import annotations

import ctypes
import importlib.util
import struct
import sys
import types
from pathlib import Path

import pytest
import torch

from tlxc.codegen_amdgcn import toolchain
from tlxc.compiler import compile_kernel
from tlxc.errors import LaunchError
from tlxc.frontend.specialize import specialization_from_args
from tlxc.runtime import hip as H

ROOT = Path(__file__).resolve().parent.parent


def example(name):
    spec = importlib.util.spec_from_file_location(f"amd_runtime_example_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compiled_rmsnorm(arch="gfx942", stages=("hip", "hsaco")):
    mod = example("rmsnorm")
    x = torch.randn(2, 100, dtype=torch.bfloat16)
    args = {"out_ptr": x, "x_ptr": x, "weight_ptr": x[0], "x_row_stride": 100, "out_row_stride": 100,
            "n_cols": 100, "eps": 1e-6, "BLOCK": 128}
    spec = specialization_from_args(mod.rmsnorm_kernel, args)
    return compile_kernel(mod.rmsnorm_kernel, spec, arch=arch, stages=stages)


@pytest.mark.skipif(not toolchain.available(), reason="the offline AMD toolchain (ziglang) is not installed")
@pytest.mark.parametrize("arch", toolchain.AMD_ARCHS)
def test_packing_matches_the_code_objects_kernarg_layout(arch):
    compiled = compiled_rmsnorm(arch)
    kinds = compiled.metadata["params"]
    assert kinds == ["u64", "u64", "u64", "i32", "i32", "i32", "f32"]
    resources = toolchain.parse_resources(compiled.asm["amdgcn"])[compiled.metadata["name"]]
    explicit = [(a["offset"], a["size"]) for a in resources["args"] if not a["value_kind"].startswith("hidden")]
    assert H.layout_of(H.argument_struct(kinds)) == explicit
    assert ctypes.sizeof(H.argument_struct(kinds)) <= resources["kernarg_bytes"]


def test_pack_arguments_bytes():
    t = torch.zeros(4)
    packed = H.pack_arguments(["u64", "i32", "f32", "i64", "u64"], [t, -3, 0.5, 2**40, None])
    want = struct.pack("<QifqQ", t.data_ptr(), -3, 0.5, 2**40, 0)
    assert bytes(packed) == want
    with pytest.raises(LaunchError, match="takes 2 runtime arguments, got 1"):
        H.pack_arguments(["u64", "i32"], [t])
    with pytest.raises(LaunchError, match="tensor where the kernel takes a i32"):
        H.pack_arguments(["i32"], [t])
    with pytest.raises(LaunchError, match="is not a i32"):
        H.pack_arguments(["i32"], [1.5])


class _Err(int):
    @property
    def value(self):
        return int(self)


def fake_hip(calls):
    ok = _Err(0)

    def record(name, *result):
        def call(*args, **kwargs):
            calls.append((name, args, kwargs))
            return (ok, *result)
        return call
    hip = types.SimpleNamespace(hipModuleLoadData=record("hipModuleLoadData", "MODULE"),
                                hipModuleGetFunction=record("hipModuleGetFunction", "FUNCTION"),
                                hipModuleLaunchKernel=record("hipModuleLaunchKernel"))
    hiprtc = types.SimpleNamespace(hiprtcCreateProgram=record("hiprtcCreateProgram", "PROG"),
                                   hiprtcCompileProgram=record("hiprtcCompileProgram"),
                                   hiprtcGetCodeSize=record("hiprtcGetCodeSize", 4),
                                   hiprtcGetCode=record("hiprtcGetCode"))
    return types.SimpleNamespace(hip=hip, hiprtc=hiprtc)


@pytest.mark.parametrize("use_hiprtc", [False, True])
def test_launch_calls(monkeypatch, use_hiprtc):
    calls = []
    monkeypatch.setitem(sys.modules, "hip", fake_hip(calls))
    compiled = compiled_rmsnorm(stages=("hip",) if use_hiprtc else ("hip", "hsaco"))
    kernel = H.HipKernel.from_compiled(compiled)
    x = torch.randn(2, 100)
    packed = kernel.launch((2,), x, x, x, 100, 100, 100, 1e-6, stream=1234)
    names = [c[0] for c in calls]
    if use_hiprtc:
        assert names[:4] == ["hiprtcCreateProgram", "hiprtcCompileProgram", "hiprtcGetCodeSize", "hiprtcGetCode"]
        assert calls[0][1][0] == compiled.asm["hip"].encode()
        assert b"--offload-arch=gfx942" in calls[1][1][2]
    else:
        assert calls[0][1][0] == compiled.asm["hsaco"]
    assert names[-3:] == ["hipModuleLoadData", "hipModuleGetFunction", "hipModuleLaunchKernel"]
    assert calls[-2][1] == ("MODULE", compiled.metadata["name"].encode())
    launch_args, launch_kwargs = calls[-1][1], calls[-1][2]
    assert launch_args == ("FUNCTION", 2, 1, 1, compiled.metadata["threads"], 1, 1, 0, 1234, None)
    assert launch_kwargs["extra"] == (packed,)
    assert packed.a0 == x.data_ptr() and packed.a3 == 100 and abs(packed.a6 - 1e-6) < 1e-12


def test_without_hip_python_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "hip", None)
    with pytest.raises(LaunchError, match="hip-python"):
        H.hip_modules()


def test_launch_binds_specializes_compiles_once_and_launches(monkeypatch):
    calls = []
    monkeypatch.setitem(sys.modules, "hip", fake_hip(calls))
    monkeypatch.setattr(H, "_KERNELS", {})
    mod = example("vector_add")
    x, y, out = torch.randn(3000), torch.randn(3000), torch.empty(3000)
    for _ in range(2):
        packed = H.launch(mod.add_kernel, (3,), x, y, out, 3000, BLOCK=1024, arch="gfx950", stream=7)
    names = [c[0] for c in calls]
    assert names.count("hiprtcCompileProgram") == 1 and names.count("hipModuleLaunchKernel") == 2
    assert b"--offload-arch=gfx950" in calls[names.index("hiprtcCompileProgram")][1][2]
    launch_args = calls[-1][1]
    assert launch_args[1:4] == (3, 1, 1) and launch_args[4] == 256 and launch_args[8] == 7
    assert (packed.a0, packed.a1, packed.a2, packed.a3) == (x.data_ptr(), y.data_ptr(), out.data_ptr(), 3000)


def test_launch_without_a_rocm_device_says_so():
    with pytest.raises(LaunchError, match="torch-on-ROCm"):
        H.device_arch()
