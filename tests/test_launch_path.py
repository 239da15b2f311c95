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
