"""Launches that misuse the API get a LaunchError naming the argument (never a traceback from
tlxc), every launch option is honoured, a documented no-op or refused, numpy arrays run on the
interpreter, and the caches key on everything that changes the output (issue 21)."""
from __future__ import annotations

import os
import time
import types

import numpy as np
import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.runtime import launch as L

BLOCK = 32


@tlxc.kernel
def axpy(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a * x + y, mask=mask)


@pytest.fixture(autouse=True)
def _fresh_kernel(monkeypatch):
    """Each test reads TLXC_INTERPRET afresh and starts without launch plans."""
    monkeypatch.delenv("TLXC_INTERPRET", raising=False)
    axpy._interpret = None
    yield
    axpy._interpret = None
    axpy.cache.clear()
    axpy.fast_cache.clear()
    axpy._fast = axpy._first_launch


def _data(n, lib="torch"):
    rng = np.random.default_rng()
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, dtype=np.float32)
    if lib == "torch":
        return torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(out)
    return x, y, out


def _want(x, y, a):
    return (np.float64(a) * np.asarray(x, np.float64) + np.asarray(y, np.float64)).astype(np.float32)


def _error(fn) -> str:
    with pytest.raises(tlxc.LaunchError) as info:
        fn()
    return str(info.value)


class FakeCudaTensor:
    """Enough of a CUDA tensor for the GPU launch path up to the compile (no GPU here)."""

    is_cuda = True
    dtype = torch.float32
    device = torch.device("cuda", 0)

    def data_ptr(self):
        return 1 << 20

    def get_device(self):
        return 0


# -- numpy arrays and the interpreter/GPU choice --------------------------------------------------

def test_numpy_arrays_run_on_the_interpreter_and_write_back():
    n = 77                                        # not a multiple of BLOCK
    x, y, out = _data(n, "numpy")
    result = axpy[(tlxc.cdiv(n, BLOCK),)](x, y, out, 1.5, n, BLOCK=BLOCK)
    assert result.metadata.num_warps == 4         # interpreted launches return the metadata a GPU launch has
    np.testing.assert_allclose(out, _want(x, y, 1.5), rtol=1e-6, atol=1e-6)


def test_numpy_arrays_after_a_gpu_specialization_still_interpret():
    # A kernel whose fast path exists (a GPU launch happened) sends numpy arrays to the slow path.
    calls = []
    fake = FakeCudaTensor()
    bound = (fake, fake, fake, 1.5, 77, BLOCK)
    axpy._interpret = False
    axpy._stream = lambda device: 0
    plan = L.LaunchPlan(lambda *a: calls.append(a), [0, 1, 2, 3, 4], [True, True, True, False, False],
                        (128, 1, 1), 0, 0, "compiled")
    key = L.launch_key(axpy, bound)
    axpy.cache[key] = plan
    axpy.fast_cache[key] = (plan.launch, plan.block, plan.smem, plan.device, plan.pick, plan.compiled)
    axpy._fast = L.build_fast_path(axpy, bound)
    assert axpy[(3,)](fake, fake, fake, 1.5, 77, BLOCK=BLOCK) == "compiled" and len(calls) == 1
    x, y, out = _data(77, "numpy")
    axpy[(3,)](x, y, out, 2.0, 77, BLOCK=BLOCK)
    np.testing.assert_allclose(out, _want(x, y, 2.0), rtol=1e-6, atol=1e-6)
    assert len(calls) == 1


@pytest.mark.parametrize("lib", ["torch", "numpy"])
def test_interpret_false_on_host_memory_is_refused(lib):
    x, y, out = _data(40, lib)
    message = _error(lambda: axpy[(2,)](x, y, out, 1.0, 40, BLOCK=BLOCK, interpret=False))
    assert "interpret=False" in message and "no argument is a CUDA tensor" in message and "'x_ptr'" in message
    assert np.isnan(np.asarray(out)).all()        # nothing ran


def test_tlxc_interpret_0_on_cpu_tensors_is_refused(monkeypatch):
    monkeypatch.setenv("TLXC_INTERPRET", "0")
    x, y, out = _data(40)
    message = _error(lambda: axpy[(2,)](x, y, out, 1.0, 40, BLOCK=BLOCK))
    assert "TLXC_INTERPRET=0" in message and ".cuda()" in message
    assert torch.isnan(out).all()


@tlxc.kernel
def fill_f32(out_ptr: tl.pointer_type(tl.float32), n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 1.0, mask=offs < n)


@pytest.mark.parametrize("lib", ["torch", "numpy"])
def test_interpreter_refuses_a_tensor_of_another_dtype_than_the_annotation(lib):
    """As the GPU launch does: the kernel is written for the annotated element type."""
    out = torch.zeros(BLOCK, dtype=torch.int32) if lib == "torch" else np.zeros(BLOCK, np.int32)
    message = _error(lambda: fill_f32[(1,)](out, BLOCK, BLOCK=BLOCK))
    assert "argument 'out_ptr' of fill_f32 is a tensor of i32, but the kernel declares ptr<f32>" in message
    assert not np.asarray(out).any()
    good = torch.zeros(BLOCK)
    fill_f32[(1,)](good, BLOCK, BLOCK=BLOCK)
    assert (good == 1.0).all()


# -- arguments no kernel parameter takes -----------------------------------------------------------

@pytest.mark.parametrize("value, words", [
    ([40], "list"), ({"n": 40}, "dict"), (np.array([object()] * 4), "object"),
])
def test_bad_argument_kinds_name_the_argument(value, words):
    x, y, out = _data(40)
    for launch in (lambda: axpy[(2,)](x, y, out, 1.0, value, BLOCK=BLOCK),                       # interpreter
                   lambda: axpy[(2,)](FakeCudaTensor(), FakeCudaTensor(), FakeCudaTensor(), 1.0, value,
                                      BLOCK=BLOCK)):                                          # GPU path
        message = _error(launch)
        assert "'n'" in message and words in message


def test_numpy_scalar_on_the_gpu_path_says_what_to_pass():
    fake = FakeCudaTensor()
    message = _error(lambda: axpy[(2,)](fake, fake, fake, 1.0, np.int64(40), BLOCK=BLOCK))
    assert "'n'" in message and "int(" in message


@pytest.mark.parametrize("gpu", [False, True], ids=["interpreter", "gpu-path"])
def test_unhashable_constexpr_is_a_launch_error(gpu):
    args = (FakeCudaTensor(),) * 3 if gpu else _data(40)
    message = _error(lambda: axpy[(2,)](*args, 1.0, 40, BLOCK=[32]))
    assert "'BLOCK'" in message and "tuple" in message and "hashable" in message


# -- grids ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("grid, words", [
    (lambda meta: "abc", "'abc' (str)"), ((2.0,), "2.0 (float)"), ((1, 65536), "y = 65536"),
    ((2**31,), "x = 2147483648"), ((1, 1, 1, 1), "1 to 3 dimensions"), ((-1,), "x = -1"),
])
@pytest.mark.parametrize("gpu", [False, True], ids=["interpreter", "gpu-path"])
def test_bad_grids_are_launch_errors(grid, words, gpu):
    args = (FakeCudaTensor(),) * 3 if gpu else _data(40)
    message = _error(lambda: axpy[grid](*args, 1.0, 40, BLOCK=BLOCK))
    assert words in message and "grid" in message


def test_fast_path_names_the_bad_grid_dimension():
    """The fast path leaves range checks to the driver and explains its refusal."""
    def driver_launch(grid, block, smem, stream, values):
        if grid[1] > 65535:
            raise tlxc.errors.CudaError("cuLaunchKernelEx failed: CUDA_ERROR_INVALID_VALUE")
    fake = FakeCudaTensor()
    bound = (fake, fake, fake, 1.5, 77, BLOCK)
    axpy._interpret = False
    axpy._stream = lambda device: 0
    plan = L.LaunchPlan(driver_launch, [0, 1, 2, 3, 4], [True, True, True, False, False], (128, 1, 1), 0, 0, "k")
    key = L.launch_key(axpy, bound)
    axpy.fast_cache[key] = (plan.launch, plan.block, plan.smem, plan.device, plan.pick, plan.compiled)
    axpy._fast = L.build_fast_path(axpy, bound)
    assert axpy[(3, 2)](*bound[:5], BLOCK=BLOCK) == "k"
    assert "y = 70000" in _error(lambda: axpy[(3, 70000)](*bound[:5], BLOCK=BLOCK))


def test_interpreter_refuses_a_grid_it_would_take_hours_to_run(monkeypatch):
    x, y, out = _data(40)
    message = _error(lambda: axpy[(2**31 - 1,)](x, y, out, 1.0, 40, BLOCK=BLOCK))
    assert "TLXC_INTERPRET_MAX_PROGRAMS" in message and "2147483647 programs" in message
    monkeypatch.setenv("TLXC_INTERPRET_MAX_PROGRAMS", "3")
    assert "has 4 programs" in _error(lambda: axpy[(4,)](x, y, out, 1.0, 40, BLOCK=BLOCK))
    axpy[(2,)](x, y, out, 1.0, 40, BLOCK=BLOCK)          # under the limit: runs
    np.testing.assert_allclose(out.numpy(), _want(x, y, 1.0), rtol=1e-6, atol=1e-6)


# -- launch options ---------------------------------------------------------------------------------

@pytest.mark.parametrize("options, words", [
    ({"num_warps": "4"}, "num_warps must be a power of two"), ({"num_warps": 3}, "got 3 (int)"),
    ({"num_warps": 64}, "1 to 32"), ({"num_warps": True}, "True (bool)"),
    ({"num_ctas": 9}, "num_ctas must be an int from 1 to 8"), ({"num_ctas": 1.5}, "num_ctas must be an int"),
    ({"num_ctas": 2, "ctas_per_cga": (2, 1, 1)}, "both set the cluster"),
    ({"maxnreg": 8}, "maxnreg must be an int from 16"),
    ({"maxnreg": "128"}, "maxnreg"), ({"launch_cooperative_grid": True}, "launch_cooperative_grid"),
    ({"enable_fp_fusion": "no"}, "enable_fp_fusion must be True, False or None"),
    ({"num_stages": -1}, "num_stages"), ({"ctas_per_cga": (3, 3)}, "ctas_per_cga"),
])
@pytest.mark.parametrize("gpu", [False, True], ids=["interpreter", "gpu-path"])
def test_bad_launch_options_are_refused(options, words, gpu):
    args = (FakeCudaTensor(),) * 3 if gpu else _data(40)
    assert words in _error(lambda: axpy[(2,)](*args, 1.0, 40, BLOCK=BLOCK, **options))


def test_no_op_hints_are_accepted_on_the_interpreter():
    x, y, out = _data(40)
    axpy[(2,)](x, y, out, 1.0, 40, BLOCK=BLOCK, num_stages=3, num_ctas=1, maxnreg=64, launch_pdl=True,
               debug=True, enable_fp_fusion=False, launch_cooperative_grid=False)
    np.testing.assert_allclose(out.numpy(), _want(x, y, 1.0), rtol=1e-6, atol=1e-6)


def test_maxnreg_and_fp_fusion_are_compile_options(monkeypatch):
    from tlxc.compiler import nvrtc_options
    assert nvrtc_options({"enable_fp_fusion": False}) == ["--fmad=false"]
    assert nvrtc_options({"enable_fp_fusion": True, "maxnreg": 128}) == []
    prepared = []
    monkeypatch.setattr(L, "_prepare", lambda kfn, bound, config: prepared.append(config) or L.LaunchPlan(
        lambda *a: None, [0, 1, 2, 3, 4], [True, True, True, False, False], (128, 1, 1), 0, 0, "compiled"))
    fake = FakeCudaTensor()
    axpy._stream = lambda device: 0
    for options in ({}, {"num_ctas": 1}, {"num_stages": 4}, {"maxnreg": 128}, {"maxnreg": 128},
                    {"enable_fp_fusion": False}, {"enable_fp_fusion": False}):
        assert axpy[(2,)](fake, fake, fake, 1.0, 40, BLOCK=BLOCK, **options) == "compiled"
    # one compile per distinct effect: default (num_ctas=1 shares it), num_stages (pipeline-loads), maxnreg,
    # no fusion
    assert [(c.maxnreg, c.fp_fusion, c.num_stages) for c in prepared] == [(None, True, None), (None, True, 4),
                                                                           (128, True, None), (None, False, None)]
    assert len(axpy.compiled_kernels()) == 4
    assert prepared[1].compile_options() == {"num_stages": 4}
    assert prepared[2].compile_options() == {"maxnreg": 128}


def test_decorator_refuses_unknown_keywords():
    def body(x_ptr):
        pass
    with pytest.raises(TypeError, match="'bogus'"):
        tlxc.jit(bogus=1)(body)
    assert tlxc.jit(noinline=True, repr=str)(body).__name__ == "body"      # triton.jit's no-op hints


# -- TMA descriptors on the interpreter --------------------------------------------------------------

def test_a_descriptor_larger_than_its_storage_is_refused_when_built():
    """TMA reads through the descriptor's shape and strides: beyond the tensor's storage it
    would read foreign memory on the GPU, so the descriptor is refused for every device."""
    x = torch.randn(32, 64)
    message = _error(lambda: tlxc.TensorDescriptor(x, [64, 64], [64, 1], [32, 64]))   # rows 32..63
    assert "'shape' [64, 64] with strides [64, 1]" in message and "storage holds 2048 elements" in message
    assert "storage holds 2048" in _error(lambda: tlxc.TensorDescriptor(x, [32, 64], [128, 1], [32, 64]))
    assert "storage holds 1024" in _error(lambda: tlxc.TensorDescriptor(
        np.zeros((16, 64), np.float32), [32, 64], [64, 1], [16, 64]))
    whole = torch.randn(64, 64)
    tlxc.TensorDescriptor(whole[:32], [64, 64], [64, 1], [32, 64])     # a view: its storage goes on
    desc = tlxc.TensorDescriptor.from_tensor(x, [32, 64])
    assert "storage holds 2048" in _error(lambda: setattr(desc, "shape", [64, 64]))
    assert desc.shape == (32, 64)                                    # the refused assignment is undone


@pytest.mark.parametrize("value", [[1.0, 2.0, 3.0], None, 3, "tensor"])
def test_a_descriptor_of_something_that_is_no_tensor_is_refused(value):
    message = _error(lambda: tlxc.TensorDescriptor.from_tensor(value, [2]))
    assert "'tensor' must be a torch tensor (or numpy array)" in message and type(value).__name__ in message


def test_a_descriptor_shape_of_floats_is_refused_not_truncated():
    x = torch.randn(64, 64)
    assert "expected a sequence of ints, got [64.5, 64]" in _error(
        lambda: tlxc.TensorDescriptor(x, [64.5, 64], [64, 1], [64, 64]))
    assert "expected a sequence of ints" in _error(lambda: tlxc.TensorDescriptor(x, [64, 64], [64.0, 1], [64, 64]))
    assert tlxc.TensorDescriptor(x, [np.int64(64), 64], torch.tensor([64, 1]), [64, 64]).shape == (64, 64)


# -- cache keys ---------------------------------------------------------------------------------------

TILE = (16, 2)
cfg = types.SimpleNamespace(SCALE=2)


def scale_of(k):
    return k * 2


def _key_of(fn) -> str:
    return tlxc.kernel(fn).cache_key


def test_cache_key_covers_tuple_globals_attributes_and_helpers(monkeypatch):
    def uses_tuple(out_ptr):
        tl.store(out_ptr + tl.arange(0, TILE[0]), tl.zeros((TILE[0],), tl.float32))

    def uses_attribute(out_ptr):
        tl.store(out_ptr, cfg.SCALE)

    def uses_helper(out_ptr):
        tl.store(out_ptr, scale_of(3))

    before = [_key_of(f) for f in (uses_tuple, uses_attribute, uses_helper)]
    assert before == [_key_of(f) for f in (uses_tuple, uses_attribute, uses_helper)]      # stable
    monkeypatch.setitem(uses_tuple.__globals__, "TILE", (32, 2))
    monkeypatch.setattr(cfg, "SCALE", 3)
    monkeypatch.setitem(uses_helper.__globals__, "scale_of", lambda k: k * 3)
    after = [_key_of(f) for f in (uses_tuple, uses_attribute, uses_helper)]
    assert all(b != a for b, a in zip(before, after))


def test_disk_key_covers_check_barriers_mode_and_options(tmp_path, monkeypatch):
    monkeypatch.setenv("TLXC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TLXC_CACHE_DISABLE", raising=False)
    monkeypatch.delenv("TLXC_CHECK_BARRIERS", raising=False)
    compiles = []

    def fake_compile(kfn, spec, **options):
        compiles.append(options)
        return types.SimpleNamespace(metadata={"name": "k"}, asm={"cubin": b"\x7fELF", "cuda": "//"})
    spec = types.SimpleNamespace(key=lambda: ("spec",))

    def run(**options):
        return L._compile_cached(axpy, spec, "sm_90a", 4, fake_compile, None, options)
    run()
    run()                                          # a disk-cache hit
    monkeypatch.setenv("TLXC_CHECK_BARRIERS", "0")
    run()                                          # checks skipped: never served to a checked run
    monkeypatch.delenv("TLXC_CHECK_BARRIERS")
    run(maxnreg=64)
    run()
    assert len(compiles) == 3 and compiles[2]["maxnreg"] == 64


def test_disk_key_covers_the_nvrtc_and_cuda_bindings_versions(tmp_path, monkeypatch):
    """A new NVRTC or cuda-bindings never gets a cubin the old one built."""
    from tlxc.runtime import cache as disk
    monkeypatch.setenv("TLXC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TLXC_CACHE_DISABLE", raising=False)
    compiles = []

    def fake_compile(kfn, spec, **options):
        compiles.append(options)
        return types.SimpleNamespace(metadata={"name": "k"}, asm={"cubin": b"\x7fELF", "cuda": "//"})
    spec = types.SimpleNamespace(key=lambda: ("spec",))
    assert "nvrtc=" in disk.toolchain_fingerprint()
    for toolchain in ("nvrtc=13.0,cuda-bindings=13.0.1", "nvrtc=13.0,cuda-bindings=13.0.1",
                      "nvrtc=13.1,cuda-bindings=13.0.1", "nvrtc=13.1,cuda-bindings=13.1.0"):
        monkeypatch.setattr(disk, "toolchain_fingerprint", lambda toolchain=toolchain: toolchain)
        L._compile_cached(axpy, spec, "sm_90a", 4, fake_compile, None, {})
    assert len(compiles) == 3                      # the repeated toolchain is a hit, each new one a miss


def test_killed_writers_temporaries_are_cleaned(tmp_path):
    from tlxc.runtime.cache import DiskCache
    cache = DiskCache(tmp_path)
    key = "ab" + "0" * 62
    directory = cache.path_for(key).parent
    directory.mkdir(parents=True)
    old, fresh = directory / ".dead.x1.tmp", directory / ".live.x2.tmp"
    old.write_bytes(b"partial")
    fresh.write_bytes(b"partial")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert cache.put(key, {"a": b"1"})
    assert not old.exists() and fresh.exists() and cache.get(key) == {"a": b"1"}


# -- GPU: the options reach the compiled kernel --------------------------------------------------------

@tlxc.kernel
def many_accumulators(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in tl.static_range(16):
        acc = acc * x + (i + 1.0)
    tl.store(out_ptr + offs, acc, mask=mask)


def test_maxnreg_caps_the_compiled_registers():
    """NVRTC ignores --maxrregcount under __launch_bounds__: the cap is the kernel's __maxnreg__."""
    signature, constexprs = "x_ptr=*fp32,out_ptr=*fp32,n=i32", {"BLOCK": 2048}
    free = many_accumulators.compile(signature, constexprs, arch="sm_90a")
    capped = many_accumulators.compile(signature, constexprs, arch="sm_90a", maxnreg=32)
    assert free.metadata["registers"] > 32
    assert capped.metadata["registers"] <= 32 and capped.metadata["maxnreg"] == 32
    assert "__maxnreg__(32)" in capped.asm["cuda"] and "__launch_bounds__" not in capped.asm["cuda"]
    with pytest.raises(tlxc.CompilationError, match="use maxnreg <= 64"):
        many_accumulators.compile(signature, constexprs, arch="sm_90a", num_warps=32, maxnreg=128)


def test_enable_fp_fusion_false_compiles_without_fma():
    signature, constexprs = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,a=fp32,n=i32", {"BLOCK": 32}
    stages = ("ir", "ir.opt", "cuda", "ptx", "cubin")
    assert "fma.rn.f32" in axpy.compile(signature, constexprs, arch="sm_90a", stages=stages).asm["ptx"]
    unfused = axpy.compile(signature, constexprs, arch="sm_90a", stages=stages, enable_fp_fusion=False)
    assert "fma.rn.f32" not in unfused.asm["ptx"] and unfused.metadata["nvrtc_options"] == ["--fmad=false"]


@pytest.mark.gpu
def test_gpu_maxnreg_bounds_the_registers():
    n, block, cap = 10000, 4096, 32           # 32 elements per thread of x and acc: 40 registers uncapped (H200)
    x = torch.rand(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    free = many_accumulators[(tlxc.cdiv(n, block),)](x, out, n, BLOCK=block)
    k = many_accumulators[(tlxc.cdiv(n, block),)](x, out, n, BLOCK=block, maxnreg=cap)
    torch.cuda.synchronize()
    assert free.metadata["registers"] > cap, "the kernel must need more registers than the cap to test it"
    assert k.metadata["registers"] <= cap and k.metadata["maxnreg"] == cap
    want = torch.zeros(n, dtype=torch.float64, device="cuda")
    for i in range(16):
        want = want * x.double() + (i + 1.0)
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_gpu_enable_fp_fusion_false_rounds_each_op():
    n = 5000
    x, y, out = (t.cuda() for t in _data(n))
    a = 1.1
    unfused = (torch.tensor(a, dtype=torch.float32) * x.cpu()) + y.cpu()     # two correctly rounded ops
    axpy[(tlxc.cdiv(n, BLOCK),)](x, y, out, a, n, BLOCK=BLOCK)
    torch.cuda.synchronize()
    assert not torch.equal(out.cpu(), unfused)        # by default a * x + y is one fma
    k = axpy[(tlxc.cdiv(n, BLOCK),)](x, y, out, a, n, BLOCK=BLOCK, enable_fp_fusion=False)
    torch.cuda.synchronize()
    assert "--fmad=false" in k.metadata["nvrtc_options"]
    assert torch.equal(out.cpu(), unfused)


# -- autotune choice files of the wrong shape ------------------------------------------------------------

@pytest.mark.parametrize("content", ['["a list"]', '{"config": ["BLOCK: 16"]}', '{"config": 3}',
                                     '{"config": "%s", "timings_ms": [1, 2]}',
                                     '{"config": "%s", "timings_ms": {"%s": "fast"}}'])
def test_a_stored_choice_of_the_wrong_shape_is_ignored_with_a_warning(tmp_path, monkeypatch, content):
    from tlxc.runtime.autotune import AutotuneWarning
    monkeypatch.setenv("TLXC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TLXC_CACHE_DISABLE", raising=False)
    monkeypatch.delenv("TLXC_AUTOTUNE_REFRESH", raising=False)
    configs = [tlxc.Config({"BLOCK": 16}, num_warps=1), tlxc.Config({"BLOCK": 32}, num_warps=1)]
    timings = {16: 2.0, 32: 1.0}
    seen = []

    def timer(fn):
        fn()
        return timings[seen[-1]]

    def tuned():
        return tlxc.autotune(configs=configs, key=["n"], do_bench=timer,
                             pre_hook=lambda nargs: seen.append(nargs["BLOCK"]))(axpy)
    x, y, out = _data(40)
    tuned()[(2,)](x, y, out, 1.0, 40)
    [entry] = sorted((tmp_path / "autotune").rglob("*.json"))
    name = str(configs[1])
    entry.write_text(content.replace("%s", name))
    seen.clear()
    out.fill_(float("nan"))
    with pytest.warns(AutotuneWarning, match="ignoring the stored choice"):
        tuned()[(2,)](x, y, out, 1.0, 40)
    assert 16 in seen and 32 in seen                          # both benchmarked again
    np.testing.assert_allclose(out.numpy(), _want(x, y, 1.0), rtol=1e-6, atol=1e-6)


def test_a_killed_autotune_writers_temporary_is_cleaned(tmp_path, monkeypatch):
    monkeypatch.setenv("TLXC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TLXC_CACHE_DISABLE", raising=False)
    monkeypatch.delenv("TLXC_AUTOTUNE_REFRESH", raising=False)
    configs = [tlxc.Config({"BLOCK": 16}, num_warps=1), tlxc.Config({"BLOCK": 32}, num_warps=1)]

    def tuned():
        return tlxc.autotune(configs=configs, key=["n"], do_bench=lambda fn: (fn(), 1.0)[1])(axpy)
    x, y, out = _data(40)
    tuned()[(2,)](x, y, out, 1.0, 40)
    [entry] = sorted((tmp_path / "autotune").rglob("*.json"))
    old, fresh = entry.parent / f".{entry.stem}.dead.tmp", entry.parent / f".{entry.stem}.live.tmp"
    old.write_text("{")
    fresh.write_text("{")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    tuned()[(2,)](x, y, out, 1.0, 41)                          # another key: a new choice is written
    assert not old.exists() and fresh.exists()


AXPY_SIG, AXPY_CONST = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,a=fp32,n=i32", {"BLOCK": 32}


def test_waves_per_eu_is_the_amd_kernels_occupancy_hint():
    """Triton's HIP option: ``amdgpu_waves_per_eu(N)`` on a gfx942/gfx950 kernel (the code object
    builds with it); NVIDIA kernels' occupancy follows from their launch bounds, so there the
    option is a no-op (the same CUDA text); the interpreter runs as without it; values outside
    0..10 are refused naming the option."""
    hip = axpy.compile(AXPY_SIG, AXPY_CONST, arch="gfx942", stages=("hip", "hsaco"), waves_per_eu=2)
    assert "amdgpu_waves_per_eu(2)" in hip.asm["hip"] and hip.asm["hsaco"][:4] == b"\x7fELF"
    assert "amdgpu_waves_per_eu" not in axpy.compile(AXPY_SIG, AXPY_CONST, arch="gfx950", stages=("hip",)).asm["hip"]
    cuda = axpy.compile(AXPY_SIG, AXPY_CONST, arch="sm_90a", stages=("cuda",), waves_per_eu=2).asm["cuda"]
    assert cuda == axpy.compile(AXPY_SIG, AXPY_CONST, arch="sm_90a", stages=("cuda",)).asm["cuda"]
    x, y = torch.randn(100), torch.randn(100)
    out = torch.full((100,), float("nan"))
    axpy[(4,)](x, y, out, 2.0, 100, BLOCK=BLOCK, waves_per_eu=2)
    assert torch.allclose(out, 2.0 * x + y)
    for bad in (-1, 11, 2.5, "2"):
        with pytest.raises(tlxc.LaunchError, match="waves_per_eu must be an int from 0"):
            axpy[(4,)](x, y, out, 2.0, 100, BLOCK=BLOCK, waves_per_eu=bad)


@pytest.mark.parametrize("option,value", [("extern_libs", {"libdevice": "/opt/libdevice.10.bc"}),
                                          ("allow_flush_denorm", True)])
def test_triton_options_tlxc_does_not_implement_are_refused_saying_why(option, value):
    """Not "unexpected keyword argument" (which reads as a misspelled kernel argument): the option
    is named with what tlxc does instead, at a launch and at a compile."""
    x = torch.randn(8)
    with pytest.raises(tlxc.LaunchError, match=f"{option}=.* is not supported: "):
        axpy[(1,)](x, x, torch.empty(8), 1.0, 8, BLOCK=BLOCK, **{option: value})
    with pytest.raises(tlxc.CompilationError, match=f"{option} is not supported"):
        axpy.compile(AXPY_SIG, AXPY_CONST, arch="sm_90a", stages=("cuda",), **{option: value})


def test_an_unknown_compile_option_is_refused_not_dropped():
    with pytest.raises(tlxc.CompilationError, match="unknown compile option 'maxreg'"):
        axpy.compile(AXPY_SIG, AXPY_CONST, arch="sm_90a", stages=("cuda",), maxreg=32)
