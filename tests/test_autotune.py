"""``@tlxc.autotune`` / ``@tlxc.heuristics``: the tuning logic with a fake timer on the CPU
interpreter, persistence across Autotuner instances, and one GPU test with the real timer."""
from __future__ import annotations

import json
import sys
import warnings

import pytest
import torch

import tlxc
import tlxc.compat as triton_compat
import tlxc.language as tl
from tlxc.errors import LaunchError
from tlxc.runtime.autotune import Autotuner, AutotuneWarning, Config, cuda_event_bench, one_line_reason
from tlxc.runtime.cache import cache_dir


@tlxc.kernel
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@tlxc.kernel
def accumulate_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out += x: running it once per benchmarked config shows whether outputs were reset/restored."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=mask) + tl.load(x_ptr + offs, mask=mask), mask=mask)


@tlxc.kernel
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2.0)
    else:
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)


def grid(meta):
    return (triton_cdiv(meta["n"], meta["BLOCK"]),)


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


class FakeTimer:
    """A ``do_bench`` that runs the call once and reports the time listed for its BLOCK.

    It learns which config is running through the autotuner's ``pre_hook`` (which
    sees every argument, config values included)."""

    def __init__(self, ms_by_block: dict[int, float]):
        self.ms_by_block = ms_by_block
        self.current = None
        self.benchmarked: list[int] = []

    def pre_hook(self, nargs):
        self.current = nargs["BLOCK"]

    def __call__(self, fn):
        fn()
        self.benchmarked.append(self.current)
        return self.ms_by_block[self.current]


def must_not_benchmark(fn):
    raise AssertionError("benchmarked although the choice was stored")


CONFIGS = [Config({"BLOCK": 16}, num_warps=1), Config({"BLOCK": 32}, num_warps=2), Config({"BLOCK": 64})]


def tuned(timer, configs=CONFIGS, kernel=add_kernel, **options):
    options.setdefault("pre_hook", getattr(timer, "pre_hook", None))
    return tlxc.autotune(configs=configs, key=["n"], do_bench=timer, **options)(kernel)


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("TLXC_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("TLXC_AUTOTUNE_REFRESH", "TLXC_PRINT_AUTOTUNING", "TLXC_CACHE_DISABLE", "TLXC_INTERPRET"):
        monkeypatch.delenv(name, raising=False)


def vectors(n: int = 100, dtype=torch.float32):
    return torch.randn(n, dtype=dtype), torch.randn(n, dtype=dtype), torch.full((n,), float("nan"), dtype=dtype)


def stored_entries() -> list:
    return sorted((cache_dir() / "autotune").rglob("*.json"))


# -- choosing -----------------------------------------------------------------------------------------

def test_picks_the_fastest_config_and_launches_it():
    timer = FakeTimer({16: 3.0, 32: 1.0, 64: 2.0})
    kernel = tuned(timer)
    x, y, out = vectors()
    kernel[grid](x, y, out, 100)
    assert kernel.best_config == Config({"BLOCK": 32}, num_warps=2)
    assert sorted(timer.benchmarked) == [16, 32, 64]
    assert {c.kwargs["BLOCK"]: ms for c, ms in kernel.configs_timings.items()} == {16: 3.0, 32: 1.0, 64: 2.0}
    torch.testing.assert_close(out, x + y)
    assert kernel.fn is add_kernel and kernel.kernel is add_kernel


def test_a_tuned_key_is_not_benchmarked_again_and_a_new_key_is():
    timer = FakeTimer({16: 3.0, 32: 1.0, 64: 2.0})
    kernel = tuned(timer)
    x, y, out = vectors()
    kernel[grid](x, y, out, 100)
    kernel[grid](x, y, out, 100)
    assert len(timer.benchmarked) == 3
    x2, y2, out2 = vectors(50)
    kernel[grid](x2, y2, out2, 50)                   # another value of the key argument n
    assert len(timer.benchmarked) == 6
    xh, yh, outh = vectors(100, torch.float64)
    kernel[grid](xh, yh, outh, 100)                  # same n, other dtypes: another key
    assert len(timer.benchmarked) == 9
    assert len(kernel.cache) == 3
    torch.testing.assert_close(outh, xh + yh)


def test_the_tuning_key_is_the_key_values_then_the_tensor_dtypes():
    kernel = tuned(FakeTimer({}))
    x, y, out = vectors(8)
    assert kernel.tuning_key({"x_ptr": x, "y_ptr": y, "out_ptr": out, "n": 8}) == \
        (8, "torch.float32", "torch.float32", "torch.float32")


def test_a_single_config_is_launched_without_benchmarking():
    kernel = tlxc.autotune(configs=[Config({"BLOCK": 32})], key=["n"], do_bench=must_not_benchmark)(add_kernel)
    x, y, out = vectors()
    kernel[grid](x, y, out, 100)
    assert kernel.best_config.kwargs == {"BLOCK": 32}
    assert stored_entries() == []
    torch.testing.assert_close(out, x + y)


def test_the_grid_function_sees_the_config_values():
    seen = []
    kernel = tuned(FakeTimer({16: 3.0, 32: 1.0, 64: 2.0}))
    x, y, out = vectors()

    def recording_grid(meta):
        seen.append((meta["BLOCK"], meta["num_warps"]))
        return grid(meta)
    kernel[recording_grid](x, y, out, 100)
    assert set(seen) == {(16, 1), (32, 2), (64, 4)}
    assert seen[-1] == (32, 2)                        # the real launch, after tuning


# -- persistence -------------------------------------------------------------------------------------

def test_the_choice_is_persisted_and_reused_by_a_new_autotuner():
    x, y, out = vectors()
    tuned(FakeTimer({16: 3.0, 32: 1.0, 64: 2.0}))[grid](x, y, out, 100)
    [entry] = stored_entries()
    assert entry.parent.name == add_kernel.cache_key
    assert entry.parent.parent == cache_dir() / "autotune"
    content = json.loads(entry.read_text())
    assert content["config"] == str(Config({"BLOCK": 32}, num_warps=2))
    assert content["timings_ms"][str(Config({"BLOCK": 16}, num_warps=1))] == 3.0

    again = tlxc.autotune(configs=CONFIGS, key=["n"], do_bench=must_not_benchmark)(add_kernel)
    out.fill_(float("nan"))
    again[grid](x, y, out, 100)                       # another instance: as if in a new process
    assert again.best_config == Config({"BLOCK": 32}, num_warps=2)
    assert again.configs_timings[Config({"BLOCK": 64})] == 2.0
    torch.testing.assert_close(out, x + y)


def test_refresh_forces_retuning_and_overwrites_the_choice(monkeypatch):
    x, y, out = vectors()
    tuned(FakeTimer({16: 3.0, 32: 1.0, 64: 2.0}))[grid](x, y, out, 100)
    monkeypatch.setenv("TLXC_AUTOTUNE_REFRESH", "1")
    timer = FakeTimer({16: 0.5, 32: 1.0, 64: 2.0})
    refreshed = tuned(timer)
    refreshed[grid](x, y, out, 100)
    assert len(timer.benchmarked) == 3 and refreshed.best_config.kwargs == {"BLOCK": 16}
    monkeypatch.delenv("TLXC_AUTOTUNE_REFRESH")
    later = tlxc.autotune(configs=CONFIGS, key=["n"], do_bench=must_not_benchmark)(add_kernel)
    later[grid](x, y, out, 100)
    assert later.best_config.kwargs == {"BLOCK": 16}


def test_a_changed_config_list_is_tuned_afresh():
    x, y, out = vectors()
    tuned(FakeTimer({16: 3.0, 32: 1.0, 64: 2.0}))[grid](x, y, out, 100)
    timer = FakeTimer({16: 3.0, 128: 0.1})
    other = tuned(timer, configs=[Config({"BLOCK": 16}, num_warps=1), Config({"BLOCK": 128})])
    other[grid](x, y, out, 100)
    assert other.best_config.kwargs == {"BLOCK": 128} and len(timer.benchmarked) == 2


def test_cache_disable_keeps_the_choice_in_memory(monkeypatch):
    monkeypatch.setenv("TLXC_CACHE_DISABLE", "1")
    x, y, out = vectors()
    kernel = tuned(FakeTimer({16: 3.0, 32: 1.0, 64: 2.0}))
    kernel[grid](x, y, out, 100)
    assert kernel.best_config.kwargs == {"BLOCK": 32}
    assert stored_entries() == []


def test_a_corrupt_stored_choice_is_ignored():
    x, y, out = vectors()
    tuned(FakeTimer({16: 3.0, 32: 1.0, 64: 2.0}))[grid](x, y, out, 100)
    [entry] = stored_entries()
    entry.write_text("{not json")
    timer = FakeTimer({16: 3.0, 32: 1.0, 64: 2.0})
    tuned(timer)[grid](x, y, out, 100)
    assert len(timer.benchmarked) == 3
    assert json.loads(entry.read_text())["config"] == str(Config({"BLOCK": 32}, num_warps=2))


# -- failures -----------------------------------------------------------------------------------------

def test_a_config_that_fails_to_compile_is_skipped_with_a_one_line_reason():
    timer = FakeTimer({16: 3.0, 32: 1.0, 64: 2.0})
    configs = [Config({"BLOCK": 16}, num_warps=3), Config({"BLOCK": 32}), Config({"BLOCK": 64})]
    kernel = tuned(timer, configs=configs)
    x, y, out = vectors()
    with pytest.warns(AutotuneWarning) as record:
        kernel[grid](x, y, out, 100)
    [warning] = record
    message = str(warning.message)
    assert "\n" not in message
    assert "skipping config BLOCK: 16, num_warps: 3" in message
    assert "LaunchError" in message and "num_warps must be a power of two" in message
    assert kernel.best_config.kwargs == {"BLOCK": 32}
    assert kernel.configs_timings[configs[0]] == float("inf")
    torch.testing.assert_close(out, x + y)


def test_every_config_failing_raises_with_every_reason():
    kernel = tuned(FakeTimer({16: 1.0, 32: 1.0}), configs=[Config({"BLOCK": 16}, num_warps=3),
                                                          Config({"BLOCK": 32}, num_warps=5)])
    x, y, out = vectors()
    with pytest.warns(AutotuneWarning), pytest.raises(LaunchError, match="every config failed") as info:
        kernel[grid](x, y, out, 100)
    assert "num_warps: 3" in str(info.value) and "num_warps: 5" in str(info.value)


def test_one_line_reason_keeps_the_first_line():
    assert one_line_reason(ValueError("first\nsecond")) == "ValueError: first"


def test_conflicting_meta_parameters_are_refused():
    kernel = tuned(FakeTimer({16: 3.0, 32: 1.0, 64: 2.0}))
    x, y, out = vectors()
    with pytest.raises(ValueError, match="conflicting meta-parameters: BLOCK"):
        kernel[grid](x, y, out, 100, BLOCK=16)


def test_a_single_config_does_not_silently_override_a_passed_value():
    """With one config nothing is benchmarked; the config's BLOCK used to win over the launch's."""
    kernel = tuned(FakeTimer({64: 1.0}), configs=[Config({"BLOCK": 64})])
    x, y, out = vectors()
    with pytest.raises(ValueError, match="conflicting meta-parameters: BLOCK"):
        kernel[grid](x, y, out, 100, BLOCK=16)


def test_bad_decorator_arguments_are_refused():
    with pytest.raises(ValueError, match="no argument named 'size'"):     # (an unknown key= name only warns:
        tlxc.autotune(configs=CONFIGS, key=["n"], reset_to_zero=["size"])(add_kernel)   # test_host_api.py)
    with pytest.raises(ValueError, match="unknown key"):
        tlxc.autotune(configs=CONFIGS, key=["n"], prune_configs_by={"topk": 2})(add_kernel)
    with pytest.raises(TypeError, match="put @tlxc.kernel"):
        tlxc.autotune(configs=CONFIGS, key=["n"])(lambda x: x)


# -- pruning ------------------------------------------------------------------------------------------

SIX = [Config({"BLOCK": b}) for b in (16, 32, 64, 128, 256, 512)]
SIX_TIMES = {16: 6.0, 32: 5.0, 64: 4.0, 128: 3.0, 256: 2.0, 512: 1.0}


def test_early_config_prune_drops_configs_before_benchmarking():
    seen = {}

    def only_small(configs, nargs, **kwargs):
        seen["n"] = nargs["n"]
        return [c for c in configs if c.kwargs["BLOCK"] <= 64]
    timer = FakeTimer(SIX_TIMES)
    kernel = tuned(timer, configs=SIX, prune_configs_by={"early_config_prune": only_small})
    x, y, out = vectors()
    kernel[grid](x, y, out, 100)
    assert sorted(timer.benchmarked) == [16, 32, 64] and seen["n"] == 100
    assert kernel.best_config.kwargs == {"BLOCK": 64}


def test_perf_model_keeps_the_top_k_estimates():
    def model(**meta):
        assert meta["n"] == 100 and "num_warps" in meta
        return abs(meta["BLOCK"].bit_length() - 7)    # predicts 64 fastest, then 32 and 128
    for top_k, expected in ((3, [32, 64, 128]), (0.5, [32, 64, 128]), (1, [64])):
        timer = FakeTimer(SIX_TIMES)
        kernel = tuned(timer, configs=SIX, prune_configs_by={"perf_model": model, "top_k": top_k},
                       cache_results=False)
        x, y, out = vectors()
        kernel[grid](x, y, out, 100)
        assert sorted(timer.benchmarked) == expected, top_k


def test_prune_with_nothing_left_is_an_error():
    kernel = tuned(FakeTimer(SIX_TIMES), configs=SIX,
                   prune_configs_by={"early_config_prune": lambda configs, nargs, **kw: []})
    x, y, out = vectors()
    with pytest.raises(LaunchError, match="early_config_prune kept no config"):
        kernel[grid](x, y, out, 100)


def test_an_emptied_config_list_is_an_error_naming_the_kernel():
    """A caller that filters ``kernel.configs`` down to nothing gets a located error, not a
    StopIteration from the tuner's internals (TLX/Triton tutorials narrow ``configs`` by hand)."""
    kernel = tuned(FakeTimer(SIX_TIMES), configs=SIX, cache_results=False)
    kernel.configs = [c for c in kernel.configs if c.kwargs["BLOCK"] > 4096]
    x, y, out = vectors()
    with pytest.raises(LaunchError, match="no config to benchmark"):
        kernel[grid](x, y, out, 100)


# -- hooks --------------------------------------------------------------------------------------------

def test_reset_to_zero_zeroes_before_each_run_and_after_tuning():
    timer = FakeTimer({16: 3.0, 32: 1.0, 64: 2.0})
    kernel = tuned(timer, kernel=accumulate_kernel, reset_to_zero=["out_ptr"])
    x = torch.randn(100)
    out = torch.full((100,), 7.0)
    kernel[grid](x, out, 100)
    torch.testing.assert_close(out, x)                # not 4*x + 7: each run started from zero


def test_without_reset_the_benchmark_runs_accumulate():
    timer = FakeTimer({16: 3.0, 32: 1.0, 64: 2.0})
    kernel = tuned(timer, kernel=accumulate_kernel)
    x = torch.ones(100)
    out = torch.zeros(100)
    kernel[grid](x, out, 100)
    torch.testing.assert_close(out, torch.full((100,), 4.0))   # 3 benchmark runs + the launch


def test_restore_value_restores_after_each_run():
    timer = FakeTimer({16: 3.0, 32: 1.0, 64: 2.0})
    kernel = tuned(timer, kernel=accumulate_kernel, restore_value=["out_ptr"])
    x = torch.randn(100)
    out = torch.full((100,), 7.0)
    kernel[grid](x, out, 100)
    torch.testing.assert_close(out, x + 7.0)


def test_config_pre_hook_and_post_hook_are_called():
    calls = []
    configs = [Config({"BLOCK": 16}, pre_hook=lambda nargs: calls.append(("config", nargs["BLOCK"]))),
               Config({"BLOCK": 32})]
    timer = FakeTimer({16: 1.0, 32: 2.0})
    kernel = tuned(timer, configs=configs,
                   post_hook=lambda nargs, exception: calls.append(("post", nargs["BLOCK"], exception)))
    x, y, out = vectors()
    kernel[grid](x, y, out, 100)
    assert calls == [("config", 16), ("post", 16, None), ("post", 32, None), ("config", 16)]


# -- heuristics ---------------------------------------------------------------------------------------

def test_heuristics_compute_constexprs_from_the_arguments():
    kernel = tlxc.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})(scale_kernel)
    for n, factor in ((64, 2.0), (70, 3.0)):
        x = torch.randn(n)
        out = torch.full((n,), float("nan"))
        kernel[grid](x, out, n, BLOCK=32)
        torch.testing.assert_close(out, x * factor)


def test_autotune_stacks_on_heuristics():
    timer = FakeTimer({16: 3.0, 32: 1.0, 64: 2.0})
    inner = tlxc.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})(scale_kernel)
    kernel = tuned(timer, kernel=inner)
    assert kernel.kernel is scale_kernel and kernel.fn is inner
    x = torch.randn(96)
    out = torch.full((96,), float("nan"))
    kernel[grid](x, out, 96)
    assert kernel.best_config.kwargs == {"BLOCK": 32}
    torch.testing.assert_close(out, x * 2.0)          # 96 % 32 == 0: the EVEN branch


# -- reporting ----------------------------------------------------------------------------------------

def test_print_autotuning_prints_the_choice(monkeypatch, capsys):
    monkeypatch.setenv("TLXC_PRINT_AUTOTUNING", "1")
    x, y, out = vectors()
    tuned(FakeTimer({16: 3.0, 32: 1.0, 64: 2.0}))[grid](x, y, out, 100)
    again = tlxc.autotune(configs=CONFIGS, key=["n"], do_bench=must_not_benchmark)(add_kernel)
    again[grid](x, y, out, 100)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("tlxc autotune")]
    assert len(lines) == 2
    assert "add_kernel" in lines[0] and "BLOCK: 32, num_warps: 2" in lines[0] and "1.0000 ms" in lines[0]
    assert "3 configs benchmarked" in lines[0]
    assert "read from" in lines[1] and "1.0000 ms" in lines[1]


def test_a_plain_progress_counter_without_tqdm(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)     # import tqdm -> ImportError
    x, y, out = vectors()
    tuned(FakeTimer(SIX_TIMES), configs=SIX)[grid](x, y, out, 100)
    err = capsys.readouterr().err
    assert "tlxc autotune add_kernel: 6/6 configs" in err
    tuned(FakeTimer({16: 3.0, 32: 1.0, 64: 2.0}), cache_results=False)[grid](x, y, out, 50)
    assert "configs" not in capsys.readouterr().err      # three configs: no progress output


# -- configs ------------------------------------------------------------------------------------------

def test_config_identity_and_launch_options():
    a = Config({"BLOCK": 64}, num_warps=8, num_stages=2)
    assert a == Config({"BLOCK": 64}, num_warps=8, num_stages=2) and hash(a) == hash(Config({"BLOCK": 64},
                                                                                           num_warps=8, num_stages=2))
    assert a != Config({"BLOCK": 64}, num_warps=4, num_stages=2)
    assert a.all_kwargs() == {"BLOCK": 64, "num_warps": 8, "num_stages": 2, "num_ctas": 1}
    clustered = Config({}, ctas_per_cga=[2, 1, 1], maxnreg=128)
    assert clustered.all_kwargs()["ctas_per_cga"] == (2, 1, 1) and clustered.all_kwargs()["maxnreg"] == 128
    assert str(a) == "BLOCK: 64, num_warps: 8, num_stages: 2, num_ctas: 1"


# -- end to end with the default timer ----------------------------------------------------------------

def test_default_timer_on_the_interpreter():
    kernel = tlxc.autotune(configs=CONFIGS, key=["n"], warmup=0, rep=0)(add_kernel)
    assert isinstance(kernel, Autotuner)
    x, y, out = vectors(70)
    kernel[grid](x, y, out, 70)
    assert kernel.best_config in CONFIGS
    assert all(ms > 0 for ms in kernel.configs_timings.values())
    torch.testing.assert_close(out, x + y)


@pytest.mark.gpu
def test_gpu_autotune_picks_persists_and_reuses():
    configs = [Config({"BLOCK": b}, num_warps=w) for b, w in ((256, 2), (1024, 4), (4096, 8))]
    n = 1 << 22
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    kernel = tlxc.autotune(configs=configs, key=["n"], warmup=5, rep=20)(add_kernel)
    kernel[grid](x, y, out, n)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    assert kernel.best_config in configs
    assert all(0 < ms < 10 for ms in kernel.configs_timings.values())
    [entry] = stored_entries()
    assert json.loads(entry.read_text())["config"] == str(kernel.best_config)
    again = tlxc.autotune(configs=configs, key=["n"], do_bench=must_not_benchmark)(add_kernel)
    out.fill_(float("nan"))
    again[grid](x, y, out, n)
    torch.cuda.synchronize()
    assert again.best_config == kernel.best_config
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_cuda_event_bench_measures_a_kernel():
    a = torch.randn(4096, 4096, device="cuda")
    ms = cuda_event_bench(lambda: a @ a, warmup=5, rep=20)
    assert 0.01 < ms < 100


@tlxc.jit
def _asserting_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK >= 32, "BLOCK must be at least 32")     # the kernel prunes its own configs
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def test_a_config_the_kernel_static_asserts_away_is_skipped_quietly():
    """A config a ``tl.static_assert`` of the kernel refuses (Triton's 06 attention prunes its configs so) is
    skipped without a warning, as Triton's autotuner skips a ``CompileTimeAssertionFailure``; any other
    failure still warns (test above), and the refused config's timing is inf."""
    timer = FakeTimer({16: 0.5, 32: 1.0, 64: 2.0})
    configs = [Config({"BLOCK": 16}), Config({"BLOCK": 32}), Config({"BLOCK": 64})]
    kernel = tuned(timer, configs=configs, kernel=_asserting_add)
    x, y, out = vectors()
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutotuneWarning)
        kernel[grid](x, y, out, 100)
    assert kernel.best_config.kwargs == {"BLOCK": 32}
    assert kernel.configs_timings[configs[0]] == float("inf")
    torch.testing.assert_close(out, x + y)
    with pytest.raises(tlxc.CompileTimeAssertionFailure, match="BLOCK must be at least 32") as info:
        _asserting_add[grid](x, y, out, 100, BLOCK=16)
    assert isinstance(info.value, tlxc.CompilationError)
    assert triton_compat.compiler.errors.CompileTimeAssertionFailure is tlxc.CompileTimeAssertionFailure
