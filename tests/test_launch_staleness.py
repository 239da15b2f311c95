"""The launch caches are never stale (issue 21): after a module global the kernel reads is
reassigned, or an environment variable that changes the compile (``launch.COMPILE_ENV``) is
set, the next launch runs a kernel compiled for the new value -- on the interpreter (run for
real) and on the GPU path (which plan the launcher picks: a stand-in for the compile, no GPU
here).  And the per-specialization fast path checks every entry of the key it was made for."""
from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from launch_state import forget_launches

import tlxc
import tlxc.language as tl
from tlxc.runtime import launch as L

SCALE = 2.0
cfg = types.ModuleType("staleness_config")     # a module of settings the kernel reads as cfg.OFFSET
cfg.OFFSET = 1.0


@tlxc.kernel
def scaled(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * SCALE + cfg.OFFSET, mask=mask)


@tlxc.kernel
def calls_scaled(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    scaled_body(x_ptr, out_ptr, n, BLOCK)


@tlxc.kernel
def scaled_body(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * SCALE, mask=mask)


class FakeCudaTensor:
    """Enough of a CUDA tensor for the GPU launch path (no GPU here)."""

    is_cuda = True

    def __init__(self, dtype=torch.float32, address=1 << 20):
        self.dtype, self.address = dtype, address

    def data_ptr(self):
        return self.address

    def get_device(self):
        return 0


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.delenv("TLXC_INTERPRET", raising=False)
    for name in L.COMPILE_ENV:
        monkeypatch.delenv(name, raising=False)
    kernels = (scaled, calls_scaled, scaled_body)
    for k in kernels:
        k._interpret = None
    yield
    for k in kernels:
        forget_launches(k)


@pytest.fixture
def prepared(monkeypatch):
    """The GPU path with a stand-in for ``_prepare``: each plan's "compiled kernel" records
    what the compile would have read (SCALE, cfg.OFFSET, TLXC_CHECK_BARRIERS), and the
    kernel's cache key as the compile computes it; the launches are recorded."""
    plans, launches = [], []

    def prepare(kfn, bound, config):
        import os
        compiled = (SCALE, cfg.OFFSET, os.environ.get("TLXC_CHECK_BARRIERS"), kfn.cache_key)
        plans.append(compiled)
        return L.LaunchPlan(lambda *a: launches.append((compiled, a)), [0, 1, 2], [True, True, False],
                            (128, 1, 1), 0, 0, compiled)
    monkeypatch.setattr(L, "_prepare", prepare)
    scaled._stream = calls_scaled._stream = lambda device: 0
    return plans, launches


def _interpreted(kfn, x):
    out = np.full(x.shape, np.nan, dtype=np.float32)
    kfn[(1,)](x, out, x.size, BLOCK=16)
    return out


def test_interpreter_reads_a_reassigned_global(monkeypatch):
    x = np.random.default_rng().standard_normal(13).astype(np.float32)
    np.testing.assert_allclose(_interpreted(scaled, x), x * 2.0 + 1.0, rtol=1e-6)
    monkeypatch.setattr(__import__(__name__), "SCALE", 3.0)
    np.testing.assert_allclose(_interpreted(scaled, x), x * 3.0 + 1.0, rtol=1e-6)
    monkeypatch.setattr(cfg, "OFFSET", -1.0)
    np.testing.assert_allclose(_interpreted(scaled, x), x * 3.0 - 1.0, rtol=1e-6)


def test_interpreter_reads_a_global_of_a_called_kernel(monkeypatch):
    x = np.random.default_rng().standard_normal(9).astype(np.float32)
    np.testing.assert_allclose(_interpreted(calls_scaled, x), x * 2.0, rtol=1e-6)
    monkeypatch.setattr(__import__(__name__), "SCALE", 5.0)
    np.testing.assert_allclose(_interpreted(calls_scaled, x), x * 5.0, rtol=1e-6)


def test_cache_key_of_one_kernel_object_follows_its_globals(monkeypatch):
    before = scaled.cache_key
    assert scaled.cache_key == before
    monkeypatch.setattr(__import__(__name__), "SCALE", 3.0)
    assert scaled.cache_key != before
    monkeypatch.setattr(__import__(__name__), "SCALE", 2.0)      # an equal value: the same key
    assert scaled.cache_key == before


def test_gpu_path_recompiles_after_a_global_changes(monkeypatch, prepared):
    plans, launches = prepared
    x = FakeCudaTensor()
    for _ in range(3):                                  # slow path, generic path, specialized path
        assert scaled[(1,)](x, x, 16, BLOCK=16)[:2] == (2.0, 1.0)
    assert len(plans) == 1 and len(launches) == 3
    monkeypatch.setattr(__import__(__name__), "SCALE", 3.0)
    for _ in range(3):
        assert scaled[(1,)](x, x, 16, BLOCK=16)[:2] == (3.0, 1.0)
    monkeypatch.setattr(cfg, "OFFSET", 0.5)             # an attribute the kernel reads
    for _ in range(3):
        assert scaled[(1,)](x, x, 16, BLOCK=16)[:2] == (3.0, 0.5)
    assert len(plans) == 3 and len(launches) == 9
    assert [c[:2] for c, _ in launches] == [(2.0, 1.0)] * 3 + [(3.0, 1.0)] * 3 + [(3.0, 0.5)] * 3


def test_gpu_path_recompiles_after_a_called_kernels_global_changes(monkeypatch, prepared):
    plans, _ = prepared
    x = FakeCudaTensor()
    for _ in range(3):
        calls_scaled[(1,)](x, x, 16, BLOCK=16)
    monkeypatch.setattr(__import__(__name__), "SCALE", 4.0)
    assert calls_scaled[(1,)](x, x, 16, BLOCK=16)[0] == 4.0
    assert len(plans) == 2 and plans[0][3] != plans[1][3]


def test_an_equal_value_keeps_the_plan(monkeypatch, prepared):
    plans, launches = prepared
    x = FakeCudaTensor()
    for _ in range(3):
        scaled[(1,)](x, x, 16, BLOCK=16)
    monkeypatch.setattr(__import__(__name__), "SCALE", float("2.0"))     # another object, equal
    monkeypatch.setenv("TLXC_SKIP_PASSES", "")                          # set, but to what unset means...
    monkeypatch.delenv("TLXC_SKIP_PASSES")                              # ...and unset again
    for _ in range(3):
        scaled[(1,)](x, x, 16, BLOCK=16)
    assert len(plans) == 1 and len(launches) == 6
    assert scaled._fast is scaled._specialized[next(iter(scaled.fast_cache))]   # fast again


@pytest.mark.parametrize("name, value", [("TLXC_CHECK_BARRIERS", "0"), ("TLXC_DEBUG_BARRIERS", "1"),
                                         ("TLXC_SKIP_PASSES", "pipeline-loads"),
                                         ("TLXC_OVERRIDE_DIR", "/nonexistent")])
def test_gpu_path_recompiles_after_a_compile_variable_changes(monkeypatch, prepared, name, value):
    plans, launches = prepared
    x = FakeCudaTensor()
    for _ in range(3):
        scaled[(1,)](x, x, 16, BLOCK=16)
    monkeypatch.setenv(name, value)
    for _ in range(2):
        scaled[(1,)](x, x, 16, BLOCK=16)
    monkeypatch.delenv(name)
    scaled[(1,)](x, x, 16, BLOCK=16)
    assert len(plans) == 3 and len(launches) == 6
    assert [c is plans[0] for c, _ in launches] == [True] * 3 + [False] * 3


def test_a_checked_run_is_not_served_a_kernel_compiled_unchecked(monkeypatch, prepared):
    x = FakeCudaTensor()
    monkeypatch.setenv("TLXC_CHECK_BARRIERS", "0")
    for _ in range(3):
        assert scaled[(1,)](x, x, 16, BLOCK=16)[2] == "0"
    monkeypatch.delenv("TLXC_CHECK_BARRIERS")
    assert scaled[(1,)](x, x, 16, BLOCK=16)[2] is None


def test_a_held_launcher_sees_the_change(monkeypatch, prepared):
    plans, _ = prepared
    x = FakeCudaTensor()
    scaled[(1,)](x, x, 16, BLOCK=16)
    run = scaled[(1,)]
    for _ in range(2):
        run(x, x, 16, BLOCK=16)
    held = scaled[(1,)]                       # the specialized path itself
    monkeypatch.setattr(__import__(__name__), "SCALE", 7.0)
    assert held(x, x, 16, BLOCK=16)[0] == 7.0
    assert run(x, x, 16, BLOCK=16)[0] == 7.0
    assert len(plans) == 2


# -- the specialized path checks every key entry ---------------------------------------------------

def test_the_specialized_path_checks_each_key_entry(prepared):
    """Every argument that changes the specialization, given to the specialized path of
    another, gets its own plan (the stand-in compile is called again)."""
    plans, launches = prepared
    x = FakeCudaTensor()
    for _ in range(3):
        scaled[(1,)](x, x, 16, BLOCK=16)
    assert scaled._fast is not scaled._generic
    variants = [
        ((FakeCudaTensor(torch.float16), x, 16), {}),           # dtype
        ((x, FakeCudaTensor(address=(1 << 20) + 4), 16), {}),   # alignment
        ((x, x, 17), {}),                                      # not divisible by 16
        ((x, x, 1), {}),                                       # == 1
        ((x, x, 2**31), {}),                                   # beyond i32
        ((x, x, -2**31 - 15), {}),                             # below i32
        ((x, x, 16.0), {}),                                    # a float
        ((x, x, True), {}),                                    # a bool
        ((x, x, 16), {"BLOCK": 32}),                           # a constexpr
        ((x, x, 16), {"BLOCK": 16.0}),                         # a constexpr of another type
        ((x, x, 16), {"num_warps": 8}),                        # an option
    ]
    for args, kwargs in variants:
        kwargs = {"BLOCK": 16, **kwargs}
        before = len(plans)
        for _ in range(3):                  # first through the slow path, then the fast ones
            scaled[(1,)](*args, **kwargs)
        assert len(plans) == before + 1, (args, kwargs)
        scaled[(1,)](x, x, 16, BLOCK=16)     # back to the first: no new plan
        assert len(plans) == before + 1, (args, kwargs)
    assert launches[-1][0] is plans[0]
    before = len(plans)
    for n in (32, -16, 0, 2**31 - 16, -2**31):             # the first plan's: i32, divisible by 16
        for _ in range(2):
            assert scaled[(1,)](x, x, n, BLOCK=16) is plans[0]
    for n in (-2**31 - 16, 2**32, 2**31):                   # divisible by 16, not i32: 2**31's plan
        assert scaled[(1,)](x, x, n, BLOCK=16) is plans[5]
    assert len(plans) == before


def test_bad_arguments_after_the_fast_paths_are_still_explained(prepared):
    x = FakeCudaTensor()
    for _ in range(3):
        scaled[(1,)](x, x, 16, BLOCK=16)
    with pytest.raises(tlxc.LaunchError, match="'n'.*list"):
        scaled[(1,)](x, x, [16], BLOCK=16)
    with pytest.raises(tlxc.LaunchError, match="num_warps must be a power of two"):
        scaled[(1,)](x, x, 16, BLOCK=16, num_warps="4")
    with pytest.raises(tlxc.LaunchError, match="1 to 3 dimensions"):
        scaled[(1, 1, 1, 1)](x, x, 16, BLOCK=16)
    with pytest.raises(tlxc.LaunchError, match="missing a required argument: 'n'"):
        scaled[(1,)](x, x, BLOCK=16)
    with pytest.raises(tlxc.LaunchError, match="too many positional arguments"):
        scaled[(1,)](x, x, 16, 16, 5)
    with pytest.raises(TypeError, match=r"^scaled\(\) got multiple values for argument 'n'"):
        scaled[(1,)](x, x, 16, n=16, BLOCK=16)
    for grid in ([2], 3, lambda meta: (meta["n"] // meta["BLOCK"],), lambda meta: 2):   # accepted grids
        scaled[grid](x, x, 16, BLOCK=16)


def test_two_specializations_in_turn_stay_on_their_paths(prepared):
    plans, launches = prepared
    x = FakeCudaTensor()
    for _ in range(3):
        for n in (16, 17):
            scaled[(1,)](x, x, n, BLOCK=16)
    paths = {scaled._fast, scaled._other}
    assert paths == set(scaled._specialized.values()) and len(paths) == 2
    for _ in range(4):
        for n in (16, 17):
            assert scaled[(1,)](x, x, n, BLOCK=16) is plans[0 if n == 16 else 1]
            assert launches[-1][0] is plans[0 if n == 16 else 1]
    assert {scaled._fast, scaled._other} == paths        # no switching back and forth
    assert len(plans) == 2


@tlxc.kernel
def named_like_locals(v0, g0, out_ptr, len, BLOCK: tl.constexpr):     # noqa: A002 (the point)
    offs = tl.arange(0, BLOCK)
    mask = offs < len
    tl.store(out_ptr + offs, tl.load(v0 + offs, mask=mask) + g0, mask=mask)


def test_parameters_named_like_the_generated_code_s_locals(monkeypatch):
    """A kernel whose parameters are called v0, g0 and len gets its own values on every path."""
    launches = []
    monkeypatch.setattr(L, "_prepare", lambda kfn, bound, config: L.LaunchPlan(
        lambda *a: launches.append(a), [0, 1, 2, 3], [True, False, True, False], (128, 1, 1), 0, 0, "k"))
    named_like_locals._stream = lambda device: 0
    x, out = FakeCudaTensor(address=1 << 20), FakeCudaTensor(address=2 << 20)
    try:
        for g in (3.5, 4.5, 5.5):
            named_like_locals[(2,)](x, g, out, 16, BLOCK=16)
            named_like_locals[lambda meta: (2,)](x, g, out, 16, BLOCK=16)
            assert launches[-1][0] == (2, 1, 1) and tuple(launches[-1][4]) == (1 << 20, g, 2 << 20, 16)
    finally:
        forget_launches(named_like_locals)


_KEY_CHANGES = {"TLXC_CHECK_BARRIERS": "0", "TLXC_DEBUG_BARRIERS": "1", "TLXC_SKIP_PASSES": "pipeline-loads",
                "TLXC_DEVICE_TENSORMAPS": "0", "TLXC_EPILOGUE_OVERLAP": "0", "TLXC_RING_FROM_START": "1"}


@pytest.mark.parametrize("name", [n for n in L.COMPILE_ENV if n != "TLXC_OVERRIDE_DIR"])
def test_every_compile_variable_is_in_the_disk_cache_key(monkeypatch, name):
    """A variable that changes the compile changes the disk cache's key too, so a process started
    with another value is not served the other build (the performance switches by construction:
    TLXC_WGMMA_A_LDMATRIX was once in COMPILE_ENV only).  TLXC_OVERRIDE_DIR bypasses the cache."""
    from types import SimpleNamespace

    from tlxc.options import PERF_SWITCHES
    kfn, spec = SimpleNamespace(cache_key="kernel"), SimpleNamespace(key=lambda: ("spec",))
    before = L.compile_cache_key(kfn, spec, "sm_90a", 4, None, {})
    value = _KEY_CHANGES.get(name) or ("0" if PERF_SWITCHES.get(name) else "1")
    monkeypatch.setenv(name, value)
    assert L.compile_cache_key(kfn, spec, "sm_90a", 4, None, {}) != before
