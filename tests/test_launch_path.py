"""The generated per-kernel fast launch path, without a GPU: a fake plan stands
in for the compiled kernel, so the binding, key and argument picking are tested."""
from __future__ import annotations

import torch

import tlxc
import tlxc.language as tl
from tlxc.runtime import launch as L


@tlxc.kernel
def four_args(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr = 64):
    pid = tl.program_id(0)
    tl.store(a_ptr + pid, tl.load(b_ptr + pid) + tl.load(c_ptr + pid) + n)


def _install(kfn, bound, calls, num_warps=4, runtime=(0, 1, 2, 3)):
    kfn._interpret = False
    kfn._stream = lambda device: 1234
    key = L.launch_key(kfn, bound, options={"num_warps": num_warps})
    plan = L.LaunchPlan(lambda *a: calls.append(a), list(runtime), [True, True, True, False], (128, 1, 1), 0, 0,
                        "compiled")
    kfn.cache[key] = plan
    kfn.fast_cache[key] = (plan.launch, plan.block, plan.smem, plan.device, plan.pick, plan.compiled)
    kfn._fast = L.build_fast_path(kfn, bound)


def test_hit_launches_with_packed_values_and_grid():
    x = torch.zeros(16, dtype=torch.float32)
    calls = []
    _install(four_args, (x, x, x, 16, 64), calls)
    result = four_args[(3,)](x, x, x, 16)
    assert result == "compiled"
    grid, block, _smem, stream, values = calls[-1]
    assert grid == (3, 1, 1) and block == (128, 1, 1) and stream == 1234
    assert values == (x.data_ptr(), x.data_ptr(), x.data_ptr(), 16)
    four_args[(2, 5)](x, x, x, 16, BLOCK=64)
    assert calls[-1][0] == (2, 5, 1)
    four_args[lambda meta: (meta["n"] // meta["BLOCK"] + 1,)](x, x, x, 16)
    assert calls[-1][0] == (1, 1, 1)
    four_args[(0,)](x, x, x, 16)           # an empty grid launches nothing
    assert len(calls) == 3


def test_a_new_specialization_goes_to_the_slow_path(monkeypatch):
    x = torch.zeros(16, dtype=torch.float32)
    calls, slow = [], []
    _install(four_args, (x, x, x, 16, 64), calls)
    monkeypatch.setattr(L, "launch", lambda kfn, grid, args, kwargs: slow.append((args, kwargs)))
    four_args._fast = L.build_fast_path(four_args, (x, x, x, 16, 64))
    four_args[(1,)](x, x, x, 17)            # 17 is not divisible by 16: another key
    four_args[(1,)](x, x, x.half(), 16)     # another dtype
    four_args[(1,)](x, x, x, 16, BLOCK=128)  # another constexpr
    four_args[(1,)](x, x, x, 16, num_warps=8)
    four_args[(1,)](x, x, x, 2.5)           # a float where an int was
    assert len(slow) == 5 and not calls
    four_args[(1,)](x, x, x, 32)
    assert len(calls) == 1                  # 32: same key as 16 (divisible by 16, fits i32, not 1)


def test_missing_argument_is_a_launch_error():
    x = torch.zeros(16, dtype=torch.float32)
    calls = []
    _install(four_args, (x, x, x, 16, 64), calls)
    try:
        four_args[(1,)](x, x, x)
    except tlxc.LaunchError as exc:
        assert "missing" in str(exc) and "'n'" in str(exc)
    else:
        raise AssertionError("expected a LaunchError")


# -- a parameter named as a launch option (Liger's sparsemax: num_warps; Triton's 02 softmax: num_stages) --

@tlxc.kernel
def warps_param(out_ptr, n, num_warps: tl.constexpr, BLOCK: tl.constexpr):
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.zeros((BLOCK,), tl.float32) + n)


def _install_shadowed(monkeypatch, options: dict, bound: tuple) -> list:
    """A fake plan for ``bound`` launched with ``options``, behind the real slow path (the GPU
    check faked): its first launch builds the generated paths, as a first GPU launch does."""
    calls = []
    kfn = warps_param
    kfn.cache.clear(), kfn.fast_cache.clear(), kfn._specialized.clear()
    kfn._generic, kfn._fast = None, kfn._first_launch
    kfn._interpret, kfn._stream = False, (lambda device: 1234)
    monkeypatch.setattr(L, "_runs_on_interpreter", lambda *a: False)
    key = L.launch_key(kfn, bound, L.launch_config(kfn.__name__, options), options)
    kfn.cache[key] = L.LaunchPlan(lambda *a: calls.append(a), [0, 1], [True, False], (32 * options["num_warps"], 1, 1),
                                  0, 0, "compiled")
    return calls


def test_an_option_named_parameter_given_by_keyword_takes_the_fast_path(monkeypatch):
    x = torch.zeros(16)
    calls = _install_shadowed(monkeypatch, {"num_warps": 8}, (x, 16, 8, 16))
    for _ in range(3):
        assert warps_param[(2,)](x, 16, num_warps=8, BLOCK=16) == "compiled"
    assert len(calls) == 3 and calls[-1][1] == (256, 1, 1)
    assert warps_param._generic is not None and warps_param._fast is not warps_param._first_launch
    slow = []
    monkeypatch.setattr(L, "launch", lambda kfn, grid, args, kwargs: slow.append((args, kwargs)))
    for path in (warps_param._fast, warps_param._generic):       # the specialized path, then the generic one
        warps_param._fast = warps_param._other = path
        warps_param[(2,)](x, 16, num_warps=8, BLOCK=16)
    assert len(calls) == 5 and not slow
    calls.clear()
    # by position the value is the parameter only (the option keeps its default, 4 warps): another launch key,
    # so not the 8-warp plan; the slow path gets it as the user gave it
    warps_param[(2,)](x, 16, 8, 16)
    warps_param[(2,)](x, 16, 8, BLOCK=16)
    assert not calls and [L._keyword_form(warps_param, *s) for s in slow[-2:]] == [
        ((x, 16, 8, 16), {"num_stages": None, "num_ctas": None, "maxnreg": None, "ctas_per_cga": None,
                          "launch_pdl": None})] * 2
    # by keyword with another value: another key too, handed over in keyword form (it sets both)
    warps_param[(2,)](x, 16, num_warps=4, BLOCK=16)
    assert not calls
    args, kwargs = L._keyword_form(warps_param, *slow[-1])
    assert args == () and kwargs["num_warps"] == 4 and kwargs["BLOCK"] == 16 and kwargs["out_ptr"] is x
    assert L.split_launch_kwargs(warps_param, kwargs)[0]["num_warps"] == 4


def test_the_option_named_parameter_keys_the_specialized_path(monkeypatch):
    """The specialized path checks a flagged option against its key: num_warps=8 given by keyword is
    the 8-warp plan; num_warps=8 by position, or =4 by keyword, is not."""
    x = torch.zeros(16)
    calls = _install_shadowed(monkeypatch, {"num_warps": 8}, (x, 16, 8, 16))
    warps_param[(2,)](x, 16, num_warps=8, BLOCK=16)        # slow: builds the generic path
    warps_param[(2,)](x, 16, num_warps=8, BLOCK=16)        # generic: builds the specialized path
    specialized = warps_param._fast
    assert specialized is not warps_param._generic
    generic = []
    monkeypatch.setattr(warps_param, "_other", lambda *a, **k: generic.append((a, k)))   # (where a miss goes)
    warps_param[(2,)](x, 16, num_warps=8, BLOCK=16)
    assert len(calls) == 3 and not generic
    warps_param[(2,)](x, 16, 8, BLOCK=16)
    warps_param[(2,)](x, 16, 8, 16)
    assert len(calls) == 3 and len(generic) == 2 and all(L.FLAG + "num_warps" not in k for _, k in generic)


def test_a_slow_only_option_named_parameter_goes_to_the_slow_path(monkeypatch):
    """A parameter named as an option only the slow path reads (``debug``) given by keyword: the
    generated path hands the launch over with its flag, in keyword form."""
    @tlxc.kernel
    def debug_param(out_ptr, debug: tl.constexpr):
        tl.store(out_ptr, debug)

    x = torch.zeros(4)
    debug_param._interpret, debug_param._stream = False, (lambda device: 1234)
    bound = (x, 1)
    key = L.launch_key(debug_param, bound)
    plan = L.LaunchPlan(lambda *a: None, [0], [True], (128, 1, 1), 0, 0, "compiled")
    debug_param.cache[key] = plan
    debug_param.fast_cache[key] = (plan.launch, plan.block, plan.smem, plan.device, plan.pick, plan.compiled)
    debug_param._fast = L.build_fast_path(debug_param, bound)
    slow = []
    monkeypatch.setattr(L, "launch", lambda kfn, grid, args, kwargs: slow.append((args, kwargs)))
    debug_param._generic.__globals__["_tlx_slow"] = lambda grid, args, kwargs: slow.append((args, kwargs))
    debug_param[(1,)](x, debug=1)
    assert len(slow) == 1
    args, kwargs = L._keyword_form(debug_param, *slow[0])
    assert args == () and kwargs["out_ptr"] is x and kwargs["debug"] == 1
    assert L.split_launch_kwargs(debug_param, kwargs)[0]["debug"] == 1


def test_a_grid_callable_sees_no_flags(monkeypatch):
    x = torch.zeros(16)
    calls = _install_shadowed(monkeypatch, {"num_warps": 8}, (x, 16, 8, 16))
    seen = []

    def grid(meta):
        seen.append(sorted(meta))
        return (1,)
    for _ in range(3):              # slow, generic, specialized
        warps_param[grid](x, 16, num_warps=8, BLOCK=16)
    assert len(calls) == 3 and all(not any(k.startswith(L.FLAG) for k in keys) for keys in seen), seen
    assert all("num_warps" in keys and "BLOCK" in keys for keys in seen)
