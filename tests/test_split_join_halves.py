"""TLX's recursive split/join helpers (blackwell_fa_ws_pipelined_persistent.py's _split_n / _join_n,
issue 25): ``x.split()`` and ``x.reduce(...)`` as tensor methods, and slices of a compile-time
tuple (``xs[:len(xs) // 2]``) in kernel code, against numpy on the interpreter."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.errors import TlxcError
from tlxc.frontend.specialize import specialization_from_types
from tlxc.interpreter import interpret


@tlxc.jit
def _split_n(x, SPLIT_FACTOR: tl.constexpr):
    if SPLIT_FACTOR == 1:
        return (x, )
    else:
        x0, x1 = x.reshape([x.shape[0], 2, x.shape[1] // 2]).permute(0, 2, 1).split()
        return _split_n(x0, SPLIT_FACTOR // 2) + _split_n(x1, SPLIT_FACTOR // 2)


@tlxc.jit
def _join_n(xs):
    if len(xs) == 1:
        return xs[0]
    else:
        x0 = _join_n(xs[:len(xs) // 2])
        x1 = _join_n(xs[len(xs) // 2:])
        return tl.join(x0, x1).permute(0, 2, 1).reshape([x0.shape[0], x0.shape[1] * 2])


@tlxc.jit
def _or(a, b):
    return a | b


@tlxc.kernel
def halves(x_ptr: tl.pointer_type(tl.float32), parts_ptr: tl.pointer_type(tl.float32),
           back_ptr: tl.pointer_type(tl.float32), any_ptr: tl.pointer_type(tl.int32), R: tl.constexpr,
           C: tl.constexpr, F: tl.constexpr):
    rows = tl.arange(0, R)
    x = tl.load(x_ptr + rows[:, None] * C + tl.arange(0, C)[None, :])
    parts = _split_n(x, F)
    for j in tl.static_range(F):
        cols = tl.arange(0, C // F)
        tl.store(parts_ptr + j * R * (C // F) + rows[:, None] * (C // F) + cols[None, :], parts[j])
    tl.store(back_ptr + rows[:, None] * C + tl.arange(0, C)[None, :], _join_n(parts))
    flags = (x > 2.0).to(tl.int32)
    tl.store(any_ptr + rows, flags.reduce(axis=1, combine_fn=_or))


@pytest.mark.parametrize("factor", [1, 2, 4])
def test_split_n_and_join_n_round_trip(factor):
    R, C = 8, 32
    x = torch.randn(R, C)
    parts = torch.full((factor, R, C // factor), float("nan"))
    back = torch.full((R, C), float("nan"))
    flags = torch.full((R,), -1, dtype=torch.int32)
    interpret(halves, (1,), (x, parts, back, flags), {"R": R, "C": C, "F": factor})
    # reshape [R, 2, C/2] + permute + split: the two contiguous halves of the columns, so
    # the recursion gives F contiguous column blocks in order
    width = C // factor
    for j in range(factor):
        assert torch.equal(parts[j], x[:, j * width:(j + 1) * width])
    assert torch.equal(back, x)
    assert torch.equal(flags, (x > 2.0).any(dim=1).to(torch.int32))


def test_tuple_slices_need_compile_time_bounds():
    @tlxc.kernel
    def bad(x_ptr: tl.pointer_type(tl.float32)):
        xs = (1, 2, 3)
        n = tl.load(x_ptr).to(tl.int32)
        tl.store(x_ptr, xs[:n][0] * 1.0)

    with pytest.raises(TlxcError, match="a slice of a compile-time tuple needs compile-time integer bounds"):
        compile_kernel(bad, specialization_from_types(bad, {}, {}), stages=("ir",))


@tlxc.kernel
def any_above(x_ptr: tl.pointer_type(tl.float32), o_ptr: tl.pointer_type(tl.int32), T: tl.constexpr,
              GATE: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))[:, None]             # [16, 1]
    hit = tl.reduce(x > T, axis=0, combine_fn=_or)              # [1]
    flag = tl.reshape(hit, ())                                  # a scalar condition (Triton's 0-d tensor)
    tl.store(o_ptr, 0)
    if not GATE or (GATE and flag):     # TLX's persistent FA (RESCALE_OPT): 'and' with a constexpr
        tl.store(o_ptr, 1)


@pytest.mark.parametrize("threshold, gate, expected", [(0.5, True, 1), (10.0, True, 0), (10.0, False, 1)])
def test_reshape_to_a_scalar_gives_a_condition(threshold, gate, expected):
    x = torch.linspace(-1.0, 1.0, 16)
    o = torch.full((1,), -1, dtype=torch.int32)
    interpret(any_above, (1,), (x, o), {"T": threshold, "GATE": gate})
    assert int(o[0]) == expected


def test_reshape_of_several_elements_to_a_scalar_is_refused():
    @tlxc.kernel
    def bad(x_ptr: tl.pointer_type(tl.float32)):
        tl.store(x_ptr, tl.reshape(tl.load(x_ptr + tl.arange(0, 2)), ()))

    with pytest.raises(TlxcError, match=r"cannot reshape \[2\] \(2 elements\) to a scalar"):
        compile_kernel(bad, specialization_from_types(bad, {}, {}), stages=("ir",))
