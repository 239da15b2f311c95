"""Tuples of tensors as kernel arguments (Triton 3.x): each leaf of a tuple that holds a tensor is a
runtime argument of its own (pointers, ints, floats), ``None`` and ``tl.constexpr`` leaves fold in,
nesting and NamedTuples keep their shape, a ``@jit`` function in a tuple is a constant.  A tuple
without a tensor stays a compile-time constant as before (shapes passed as tuples keep working)."""
from __future__ import annotations

from typing import NamedTuple

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.codegen_nvptx.emu import run as emu
from tlxc.errors import CompilationError
from tlxc.frontend.specialize import specialization_from_args
from tlxc.ir.types import f32


@tlxc.jit
def scatter_values(pairs, N: tl.constexpr):
    """For each (out, value) pair: out[:N] = value (a None value leaves its output alone)."""
    offs = tl.arange(0, N)
    for i in tl.static_range(len(pairs)):
        if pairs[i][1] is not None:
            tl.store(pairs[i][0] + offs, tl.full((N,), pairs[i][1], tl.float32))


def test_pairs_of_outputs_and_runtime_floats():
    outs = tuple(torch.zeros(8) for _ in range(3))
    scatter_values[(1,)](((outs[0], 1.5), (outs[1], None), (outs[2], -2.0)), N=8)
    assert torch.equal(outs[0], torch.full((8,), 1.5))
    assert torch.equal(outs[1], torch.zeros(8))
    assert torch.equal(outs[2], torch.full((8,), -2.0))


def test_the_floats_are_runtime_values_one_compile_serves_both():
    @tlxc.jit
    def fill(pairs, N: tl.constexpr):
        for i in tl.static_range(len(pairs)):
            tl.store(pairs[i][0] + tl.arange(0, N), tl.full((N,), pairs[i][1], tl.float32))
    a, b, c = torch.zeros(4), torch.zeros(4), torch.zeros(4)
    fill[(1,)](((a, 1.0), (b, 2.0)), N=4)
    flat = fill.__dict__["_flat_kernels"]
    (kernel,) = flat.values()
    fill[(1,)](((a, 3.0), (b, 4.0)), N=4)                 # same structure: the same generated kernel,
    assert list(flat.values()) == [kernel] and b[0].item() == 4.0
    spec = specialization_from_args(kernel, dict(zip(kernel.param_names, (a, 3.0, b, 4.0, 4))))
    assert spec.params["pairs__0__1"] == ("runtime", f32) and spec.params["pairs__1__0"][0] == "runtime"
    fill[(1,)](((a, 1.0), (b, 2.0), (c, 5.0)), N=4)     # three pairs: another
    assert len(flat) == 2 and c[0].item() == 5.0


@tlxc.jit
def nested(out, packed, SCALE: tl.constexpr):
    """packed = (x, (k, None, y, tl.constexpr(c))): out = [x[0] * SCALE, k, y[0], c]."""
    tl.static_assert(packed[1][1] is None)
    tl.static_assert(packed[1][3] == 4)
    tl.store(out + 0, tl.load(packed[0]) * SCALE)
    tl.store(out + 1, packed[1][0])
    tl.store(out + 2, tl.load(packed[1][2]))
    tl.store(out + 3, packed[1][3])


def test_nested_tuples_with_constants_and_runtime_ints():
    x = torch.tensor([3], dtype=torch.int32)
    y = torch.tensor([11], dtype=torch.int32)
    out = torch.zeros(4, dtype=torch.int32)
    nested[(1,)](out, (x, (7, None, y, tl.constexpr(4))), SCALE=2)
    assert out.tolist() == [6, 7, 11, 4]


class View(NamedTuple):
    ptr: object
    shape: tuple
    stride: tuple


class Closure(NamedTuple):
    fn: object
    extra: tuple


@tlxc.jit
def times_loaded(x, scale_ptr):
    return x * tl.load(scale_ptr)


@tlxc.jit
def apply_view(src, dst, op, BLOCK: tl.constexpr):
    """dst[:m, :n] = op.fn(src[:m, :n], *op.extra) through NamedTuple views (shapes from dst)."""
    rows = tl.arange(0, BLOCK)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (rows < dst.shape[0]) & (cols < dst.shape[1])
    x = tl.load(src.ptr + rows * src.stride[0] + cols * src.stride[1], mask=mask, other=0.0)
    tl.store(dst.ptr + rows * dst.stride[0] + cols * dst.stride[1], op.fn(x, *op.extra), mask=mask)


def test_named_tuples_and_a_closure_with_a_jit_function():
    src = torch.randn(12, 10)
    dst = torch.zeros(5, 7)
    scale = torch.tensor([2.5])
    apply_view[(1,)](View(src, src.shape, src.stride()), View(dst, dst.shape, dst.stride()),
                     Closure(times_loaded, (scale,)), BLOCK=16)
    torch.testing.assert_close(dst, src[:5, :7] * 2.5)


def test_tuples_without_tensors_stay_compile_time_constants():
    @tlxc.jit
    def shaped(out, SHAPE):
        tl.store(out + tl.arange(0, SHAPE[0]), tl.full((SHAPE[0],), SHAPE[1], tl.int32))
    out = torch.zeros(4, dtype=torch.int32)
    shaped[(1,)](out, (4, 9))                 # a tl.arange bound: only a constant can be one
    assert out.tolist() == [9, 9, 9, 9]


@tlxc.jit
def broken(outs, values):
    tl.store(outs[0], values[5])


def test_an_error_in_the_body_points_at_the_kernels_own_line():
    with pytest.raises(CompilationError) as info:
        broken[(1,)]((torch.zeros(1),), (torch.zeros(1), 2.0))
    assert "test_tuple_args.py" in str(info.value)


def test_warmup_compiles_the_flat_kernel_for_sm90a():
    outs = tuple(torch.zeros(8) for _ in range(2))
    handle = scatter_values.warmup(((outs[0], 1.5), (outs[1], 2.5)), N=8, grid=(1,))
    text = handle.asm["cuda"]
    for leaf in ("float* pairs__0__0", "float* pairs__1__0", "float pairs__0__1", "float pairs__1__1"):
        assert leaf in text
    assert handle.n_spills == 0


@pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
def test_the_flat_kernels_cuda_text_on_the_emulation():
    outs = tuple(torch.zeros(8) for _ in range(2))
    handle = scatter_values.warmup(((outs[0], 1.5), (outs[1], -3.0)), N=8, grid=(1,))
    args = {"pairs__0__0": outs[0], "pairs__0__1": 1.5, "pairs__1__0": outs[1], "pairs__1__1": -3.0}
    emu.build(handle.asm["cuda"]).run(args, grid=(1, 1, 1), threads=128)
    assert outs[0].tolist() == [1.5] * 8 and outs[1].tolist() == [-3.0] * 8


@pytest.mark.gpu
def test_tuple_arguments_on_the_gpu():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    outs = tuple(torch.zeros(8, device="cuda") for _ in range(3))
    scatter_values[(1,)](((outs[0], 1.5), (outs[1], None), (outs[2], -2.0)), N=8)
    torch.cuda.synchronize()
    assert outs[0].tolist() == [1.5] * 8 and outs[1].tolist() == [0.0] * 8 and outs[2].tolist() == [-2.0] * 8
    src = torch.randn(12, 10, device="cuda")
    dst = torch.zeros(5, 7, device="cuda")
    scale = torch.tensor([2.5], device="cuda")
    apply_view[(1,)](View(src, src.shape, src.stride()), View(dst, dst.shape, dst.stride()),
                     Closure(times_loaded, (scale,)), BLOCK=16)
    torch.testing.assert_close(dst, src[:5, :7] * 2.5)
