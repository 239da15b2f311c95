"""The C launcher (runtime/c_launcher.py) without a GPU: a kernel compiled by NVRTC, its plan
built around a real ``driver.Launcher``, and the module's own fake ``cuLaunchKernelEx``.  The
C path must write the same config and argument bytes as the Python path it falls back to,
serve the common launch without running any Python, and hand every launch it cannot serve
to the Python path, which explains it with the same errors (issue 21, launch overhead)."""
from __future__ import annotations

import ctypes
import os
import struct
import sys
import types
import warnings

import pytest
import torch
from launch_state import forget_launches

import tlxc
import tlxc.language as tl
from tlxc import descriptors
from tlxc.errors import CudaError
from tlxc.runtime import c_launcher, driver
from tlxc.runtime import launch as L

OFFSET = 0.0        # a global the kernel reads: reassigning it must recompile

_LAUNCH_EX = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


@tlxc.kernel
def mixed(x_ptr, desc, a, n, big, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs < n) & (offs < big)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * a + OFFSET, mask=mask)


class Cuda(torch.Tensor):
    """A CPU tensor that says it is on a GPU (the slow path's checks); get_device() is -1."""

    is_cuda = True
    __torch_function__ = torch._C._disabled_torch_function_impl


def _buildable() -> bool:
    return c_launcher.compiler() is not None and os.path.exists(os.path.join(c_launcher.python_include(), "Python.h"))


@pytest.fixture
def module():
    if not _buildable():
        pytest.skip("no C compiler or Python headers: the C launcher cannot be built")
    m = c_launcher.module()
    assert m is not None, "a C compiler and Python's headers exist, yet the C launcher did not build"
    return m


@pytest.fixture
def fake_gpu(monkeypatch, module):
    class Function(driver.CudaFunction):
        def attribute(self, attribute):
            return 48 * 1024 if attribute == driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES else 0

    class Module(driver.CudaModule):
        def function(self, name, device_index=None):
            return Function(self, name, 0xF00D, 0)

    lib = types.SimpleNamespace(cuLaunchKernelEx=_LAUNCH_EX(module.fake_launch_address()), cuLaunchKernel=None,
                                cuGetErrorName=lambda result, out: 1)
    monkeypatch.setattr(driver, "_driver_lib", lib)
    monkeypatch.setattr(driver.CudaModule, "load", classmethod(lambda cls, cubin, device=None: Module(cubin)))
    monkeypatch.setattr(driver, "device_properties",
                        lambda device: types.SimpleNamespace(max_shared_memory_per_block_optin=227 * 1024))
    monkeypatch.setattr(driver, "stream_getter", lambda: (lambda device: 0x5000 + device))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(descriptors, "encode_tiled", lambda *args: bytes(range(128)))
    monkeypatch.delenv("TLXC_INTERPRET", raising=False)
    module.set_fake_result(0)
    yield module
    module.set_fake_result(0)
    forget_launches(mixed)


def _arguments():
    x = torch.zeros(256).as_subclass(Cuda)
    tile = torch.zeros(64, 64).as_subclass(Cuda)
    return x, tlxc.TensorDescriptor.from_tensor(tile, [32, 32])


def _plan():
    plans = {id(p): p for p in mixed.cache.values() if isinstance(p, L.LaunchPlan)}
    assert len(plans) == 1
    return next(iter(plans.values()))


def _python_frames(fn, seen):
    """Run ``fn`` and return its result; the names of the Python functions it entered go to ``seen``."""
    sys.setprofile(lambda frame, event, arg: seen.append(frame.f_code.co_name) if event == "call" else None)
    try:
        return fn()
    finally:
        sys.setprofile(None)


def test_c_path_packs_what_the_python_path_packs(fake_gpu):
    x, desc = _arguments()
    big = 2**40 + 16                                        # an i64 argument
    args = (x, desc, 0.75, 200, big)
    compiled = mixed[(3, 2)](*args, BLOCK=64)               # slow path
    assert mixed[(3, 2)](*args, BLOCK=64) is compiled       # generic path: makes the specialized one
    launch = mixed._fast
    assert type(launch) is fake_gpu.CLaunch
    buffer = _plan().launcher.arguments
    assert list(buffer.kinds) == ["u64", "bytes128", "f32", "i32", "i64"]
    start = buffer.head_offset

    def bytes_of(call):
        ctypes.memset(ctypes.addressof(buffer.storage) + start, 0xAB, 56)      # the config
        ctypes.memset(ctypes.addressof(buffer.storage) + buffer.base_offset, 0xCD, buffer.size)
        calls = fake_gpu.fake_state()[0]
        assert call() is compiled
        state = fake_gpu.fake_state()
        assert state[0] == calls + 1
        config, packed = state[1], buffer.packed_bytes()   # (padding left out: no one reads it)
        values = [packed[o:o + driver.PARAM_KINDS[k][1]] for o, k in zip(buffer.offsets, buffer.kinds)]
        return config[:28] + config[32:52], values, state[2:]

    python = bytes_of(lambda: launch.fallback((3, 2), *args, BLOCK=64))
    frames = []
    c = bytes_of(lambda: _python_frames(lambda: mixed[(3, 2)](*args, BLOCK=64), frames))
    assert c == python
    assert [f for f in frames if f != "<lambda>"] == []      # no Python ran: not even __getitem__
    config, values, (function, pointers) = c
    u32 = [int.from_bytes(config[i:i + 4], "little") for i in range(0, 28, 4)]
    assert u32 == [3, 2, 1, _plan().block[0], 1, 1, _plan().smem]
    assert int.from_bytes(config[28:36], "little") == 0x5000 - 1        # the stream of device -1
    assert int.from_bytes(config[36:44], "little") == 0 and int.from_bytes(config[44:48], "little") == 0
    assert function == 0xF00D and pointers == buffer.pointers_address
    assert values == [x.data_ptr().to_bytes(8, "little"), bytes(range(128)), struct.pack("<f", 0.75),
                      (200).to_bytes(4, "little"), big.to_bytes(8, "little")]


def test_launches_it_cannot_serve_go_to_the_python_path(fake_gpu):
    x, desc = _arguments()
    for _ in range(2):
        mixed[(1,)](x, desc, 0.5, 64, 64, BLOCK=64)
    assert type(mixed._fast) is fake_gpu.CLaunch
    calls = fake_gpu.fake_state()[0]
    frames = []
    _python_frames(lambda: mixed[(1,)](x, desc, 0.5, 64, 64, BLOCK=64), frames)
    assert "_tlx_fast" not in frames and fake_gpu.fake_state()[0] == calls + 1
    for grid, error in (((-1,), "x = -1"), ((1, 70000), "y = 70000"), ((2.0,), "x = 2.0")):
        if grid == (1, 70000):
            fake_gpu.set_fake_result(1)           # the driver refuses it; the Python path names the axis
        with pytest.raises(tlxc.LaunchError, match=error):
            mixed[grid](x, desc, 0.5, 64, 64, BLOCK=64)
        fake_gpu.set_fake_result(0)
    with pytest.raises(tlxc.LaunchError, match="does not fit C kind f32"):
        mixed[(1,)](x, desc, 1e300, 64, 64, BLOCK=64)            # struct's "f" refuses it: so does C
    fake_gpu.set_fake_result(1)
    with pytest.raises(CudaError, match=r"cuLaunchKernelEx\(mixed_BLOCK64, grid=\(1, 1, 1\).*stream=0x4fff\) failed: CUresult 1"):
        mixed[(1,)](x, desc, 0.5, 64, 64, BLOCK=64)              # a failed launch: the same callback
    fake_gpu.set_fake_result(0)
    with pytest.raises(tlxc.LaunchError, match="unexpected keyword argument 'stream'"):
        mixed[(1,)](x, desc, 0.5, 64, 64, BLOCK=64, stream=0)
    with pytest.raises(tlxc.LaunchError, match="missing a required argument: 'BLOCK'"):
        mixed[(1,)](x, desc, 0.5, 64, 64)
    mixed[(0,)](x, desc, 0.5, 64, 64, BLOCK=64)                  # an empty grid launches nothing
    mixed[lambda meta: (1,)](x, desc, 0.5, 64, 64, BLOCK=64)     # a grid callable
    mixed[(1,)](x, desc, 0.5, 64, 64, BLOCK=64, num_warps=4)     # the key's own option value: C
    assert fake_gpu.fake_state()[0] == calls + 5
    mixed[(1,)](x[1:].as_subclass(Cuda), desc, 0.5, 64, 64, BLOCK=64)             # misaligned: another key, compiled
    mixed[(1,)](x, desc, 0.5, 17, 64, BLOCK=64)                   # n % 16 != 0: another key
    mixed[(1,)](x, desc, 0.5, 64, 64, BLOCK=32)                   # another constexpr
    assert len({id(p) for p in mixed.cache.values()}) == 5      # (1e300 was one too)


def test_launch_options_as_keywords(fake_gpu):
    x, desc = _arguments()
    for _ in range(3):                       # a key with num_warps=8 and one without, in turn
        eight = mixed[(1,)](x, desc, 0.5, 64, 64, BLOCK=64, num_warps=8, num_ctas=1)
        four = mixed[(1,)](x, desc, 0.5, 64, 64, BLOCK=64)
    assert eight is not four and eight.metadata["num_warps"] == 8
    assert {type(mixed._fast), type(mixed._other)} == {fake_gpu.CLaunch}
    for kwargs, compiled in (({"num_warps": 8, "num_ctas": 1}, eight), ({}, four), ({"num_warps": 4}, four)):
        frames, calls = [], fake_gpu.fake_state()[0]
        assert _python_frames(lambda kw=kwargs: mixed[(1,)](x, desc, 0.5, 64, 64, BLOCK=64, **kw), frames) is compiled
        assert fake_gpu.fake_state()[0] == calls + 1
        assert "_tlx_fast" not in frames, (kwargs, frames)     # a miss tries the kernel's other key in C
    with pytest.raises(tlxc.LaunchError, match="num_warps must be a power of two"):
        mixed[(1,)](x, desc, 0.5, 64, 64, BLOCK=64, num_warps=8.0)   # not the key's class: explained


def test_grid_callables(fake_gpu):
    x, desc = _arguments()
    metas = []

    def grid(meta):
        metas.append(dict(meta))
        return (meta["n"] // meta["BLOCK"], 2)

    for _ in range(2):
        mixed[grid](x, desc, 0.5, 128, 64, BLOCK=64)
    python_meta = metas[-1]
    launch = mixed._fast
    assert type(launch) is fake_gpu.CLaunch
    frames = []
    _python_frames(lambda: mixed[grid](x, desc, 0.5, 128, 64, BLOCK=64), frames)
    assert [f for f in frames if f != "<lambda>"] == ["grid"] and len(metas) == 3    # once, from C
    assert metas[-1] == python_meta and list(metas[-1]) == list(python_meta)
    assert metas[-1]["num_warps"] == 4 and metas[-1]["x_ptr"] is x
    assert fake_gpu.fake_state()[1][:8] == (2).to_bytes(4, "little") + (2).to_bytes(4, "little")
    mixed[grid](x, desc, 0.5, 128, 64, BLOCK=64, num_warps=4)
    assert metas[-1]["num_warps"] == 4 and len(metas) == 4
    for bad, error in ((lambda meta: "a", "x = 'a'"), (lambda meta: (1, -2), "y = -2"), (lambda meta: (0,), None)):
        count = fake_gpu.fake_state()[0]
        if error is None:
            assert mixed[bad](x, desc, 0.5, 128, 64, BLOCK=64) is launch.fallback.__globals__["_tlx_compiled"]
        else:
            with pytest.raises(tlxc.LaunchError, match=error):
                mixed[bad](x, desc, 0.5, 128, 64, BLOCK=64)
        assert fake_gpu.fake_state()[0] == count             # nothing launched
    calls = []
    with pytest.raises(ZeroDivisionError):
        mixed[lambda meta: calls.append(1) or 1 // 0](x, desc, 0.5, 128, 64, BLOCK=64)
    assert calls == [1]                                      # its own error, called once


def test_a_reassigned_global_or_environment_recompiles(fake_gpu, monkeypatch):
    x, desc = _arguments()
    for _ in range(3):
        first = mixed[(1,)](x, desc, 0.5, 64, 64, BLOCK=64)
    assert type(mixed._fast) is fake_gpu.CLaunch
    monkeypatch.setattr(sys.modules[__name__], "OFFSET", 1.0)
    second = mixed[(1,)](x, desc, 0.5, 64, 64, BLOCK=64)
    assert second is not first and second.asm["cuda"] != first.asm["cuda"]
    for _ in range(2):
        assert mixed[(1,)](x, desc, 0.5, 64, 64, BLOCK=64) is second
    assert type(mixed._fast) is fake_gpu.CLaunch
    monkeypatch.setenv("TLXC_CHECK_BARRIERS", "warn")
    third = mixed[(1,)](x, desc, 0.5, 64, 64, BLOCK=64)
    assert third is not second


def test_held_launcher_after_the_kernel_moved_on(fake_gpu):
    x, desc = _arguments()
    held = mixed[(1,)]
    for _ in range(2):
        held(x, desc, 0.5, 64, 64, BLOCK=64)
    launch = mixed[(1,)]
    assert type(launch) is fake_gpu.Bound
    mixed.cache.clear()
    mixed.fast_cache.clear()                 # as a refresh does: the C path must not launch the old plan
    calls = fake_gpu.fake_state()[0]
    launch(x, desc, 0.5, 64, 64, BLOCK=64)
    assert fake_gpu.fake_state()[0] == calls + 1 and len(mixed.cache) >= 1


def test_no_compiler_is_one_warning_then_the_python_path(monkeypatch, tmp_path):
    monkeypatch.setattr(c_launcher, "_state", {})
    monkeypatch.setattr(c_launcher, "compiler", lambda: None)
    with pytest.warns(c_launcher.CLauncherWarning, match="no C compiler found"):
        assert c_launcher.module() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert c_launcher.module() is None
    monkeypatch.setattr(c_launcher, "_state", {})
    monkeypatch.setenv("TLXC_C_LAUNCHER", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert c_launcher.module() is None


def test_build_key_covers_source_compiler_and_python(monkeypatch, module):
    cc = c_launcher.compiler()
    key = c_launcher.build_key(cc)
    assert c_launcher.build_key(cc) == key
    monkeypatch.setattr(c_launcher, "SOURCE", c_launcher.SOURCE + "\n")
    assert c_launcher.build_key(cc) != key
    monkeypatch.undo()
    monkeypatch.setattr(c_launcher, "_FLAGS", c_launcher._FLAGS + ("-g",))
    assert c_launcher.build_key(cc) != key
    monkeypatch.undo()
    monkeypatch.setattr(sys, "version", sys.version + " other")
    assert c_launcher.build_key(cc) != key


def test_a_fresh_build_loads(tmp_path, module):
    path = c_launcher.build(tmp_path)
    assert path.parent.parent == tmp_path and path.exists()
    assert c_launcher.build(tmp_path) == path                # the second call finds it
    assert hasattr(c_launcher.load(path), "CLaunch")


@tlxc.kernel
def geometry(x_ptr, desc, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, offs * desc.shape[1] + desc.strides[0])


def test_descriptor_geometry_rides_behind_the_arguments(fake_gpu):
    """A kernel that reads ``desc.shape[1]`` / ``desc.strides[0]`` takes them as hidden parameters after
    its own: every launch path (the first, the generic one, the specialized one) packs the descriptor's
    values there; such a plan is not a direct one, so the C launcher does not serve it."""
    x = torch.zeros(64, dtype=torch.int32).as_subclass(Cuda)
    tile = torch.zeros(48, 96)[:, :80].as_subclass(Cuda)          # shape (48, 80), strides (96, 1)
    try:
        for _ in range(3):
            desc = tlxc.TensorDescriptor.from_tensor(tile, [16, 32])
            geometry[(1,)](x, desc, BLOCK=64)
            plans = {id(p): p for p in geometry.cache.values() if isinstance(p, L.LaunchPlan)}
            plan = next(iter(plans.values()))
            buffer = plan.launcher.arguments
            assert list(buffer.kinds) == ["u64", "bytes128", "i32", "i64"] and not plan.direct
            packed = buffer.packed_bytes()
            hidden = [int.from_bytes(packed[o:o + driver.PARAM_KINDS[k][1]], "little")
                      for o, k in zip(buffer.offsets[2:], buffer.kinds[2:])]
            assert hidden == [80, 96]
    finally:
        geometry.cache.clear()
        geometry.fast_cache.clear()


@tlxc.kernel
def warps_named(x_ptr, n, num_warps: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + num_warps, mask=offs < n)


def test_a_parameter_named_as_an_option_with_the_c_module_loaded(fake_gpu):
    """Liger's sparsemax declares ``num_warps: tl.constexpr`` and launches with ``num_warps=...``: with the C
    module loaded (whose ``kernel[grid]`` bypasses the Python ``__getitem__`` for a kernel launched by a
    ``CLaunch``), such a kernel keeps its Python paths, where ``kernel[grid]`` flags the keyword: by keyword
    8 warps, by position the parameter only (4 warps), in any order; a grid callable sees no flag."""
    x = torch.zeros(256).as_subclass(Cuda)
    try:
        for _ in range(3):
            by_keyword = warps_named[(1,)](x, 64, num_warps=8, BLOCK=64)
            by_position = warps_named[(1,)](x, 64, 8, 64)
        assert by_keyword.metadata["num_warps"] == 8 and by_position.metadata["num_warps"] == 4
        assert fake_gpu.CLaunch not in {type(warps_named._fast), type(warps_named._other)}
        for call, compiled in ((lambda: warps_named[(1,)](x, 64, num_warps=8, BLOCK=64), by_keyword),
                               (lambda: warps_named[(1,)](x, 64, 8, 64), by_position),
                               (lambda: warps_named[(1,)](x, 64, 8, BLOCK=64), by_position),
                               (lambda: warps_named[(1,)](x, 64, num_warps=8, BLOCK=64), by_keyword)):
            calls = fake_gpu.fake_state()[0]
            assert call() is compiled
            assert fake_gpu.fake_state()[0] == calls + 1
        seen = []
        warps_named[lambda meta: seen.append(sorted(meta)) or (1,)](x, 64, num_warps=8, BLOCK=64)
        assert seen and not any(k.startswith(L.FLAG) for k in seen[0]) and "num_warps" in seen[0]
    finally:
        forget_launches(warps_named)
