"""A thread's part of a reduction as a pairwise tree (``TLXC_REDUCE_TREE`` for max/min/and/or/xor,
``TLXC_REDUCE_TREE_SUM`` for sums; both opt-in A/B switches, the left fold is the default): the
CUDA each setting emits, and on the GPU the tree's results against torch for widths that are not
powers of two."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl


@tlxc.jit
def row_reduce(x_ptr, out_ptr, N: tl.constexpr, KIND: tl.constexpr):
    """Each program reduces one row of N (a power of two) int32 or float32 values."""
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * N + tl.arange(0, N))
    if KIND == "sum":
        r = tl.sum(x, 0)
    elif KIND == "max":
        r = tl.max(x, 0)
    elif KIND == "min":
        r = tl.min(x, 0)
    else:
        r = tl.xor_sum(x, 0)
    tl.store(out_ptr + row, r)


@tlxc.jit
def block_reduce(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    """Sums and maxima over axis 1 of an R x C float32 tile."""
    rows = tl.arange(0, R)[:, None]
    cols = tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + rows * C + cols)
    tl.store(out_ptr + tl.arange(0, R), tl.sum(x, 1) + tl.max(x, 1))


def _cuda(kind: str, dtype: str = "fp32") -> str:
    return row_reduce.compile(f"x_ptr=*{dtype}, out_ptr=*{dtype}", {"N": 4096, "KIND": kind}, arch="sm_90a",
                              num_warps=4, stages=("cuda",)).asm["cuda"]


@pytest.mark.parametrize("kind", ["sum", "max"])
def test_the_left_fold_is_the_default(kind, monkeypatch):
    monkeypatch.delenv("TLXC_REDUCE_TREE", raising=False)
    monkeypatch.delenv("TLXC_REDUCE_TREE_SUM", raising=False)
    assert "rtree" not in _cuda(kind)


@pytest.mark.parametrize("kind,switch", [("sum", "TLXC_REDUCE_TREE_SUM"), ("max", "TLXC_REDUCE_TREE"),
                                         ("min", "TLXC_REDUCE_TREE")])
def test_each_switch_turns_its_own_kinds_into_a_tree(kind, switch, monkeypatch):
    other = "TLXC_REDUCE_TREE" if switch == "TLXC_REDUCE_TREE_SUM" else "TLXC_REDUCE_TREE_SUM"
    monkeypatch.setenv(other, "1")
    assert "rtree" not in _cuda(kind)                       # the other kinds' switch leaves this one alone
    monkeypatch.setenv(switch, "1")
    cuda = _cuda(kind)
    assert "rtree" in cuda and "g + s < 32" in cuda         # 4096 values on 128 threads: 32 registers each


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["sum", "max", "min", "xor"])
def test_gpu_tree_results(kind, monkeypatch):
    monkeypatch.setenv("TLXC_REDUCE_TREE", "1")
    monkeypatch.setenv("TLXC_REDUCE_TREE_SUM", "1")
    g = torch.Generator(device="cuda").manual_seed(5)
    if kind == "xor":
        x = torch.randint(-2**31, 2**31 - 1, (7, 4096), generator=g, device="cuda", dtype=torch.int32)
        ref = x[:, 0].clone()
        for j in range(1, 4096):
            ref ^= x[:, j]
    else:
        x = torch.randn(7, 4096, generator=g, device="cuda")
        ref = {"sum": lambda t: t.double().sum(1), "max": lambda t: t.amax(1), "min": lambda t: t.amin(1)}[kind](x)
    out = torch.full((7,), float("nan"), device="cuda").to(x.dtype)
    row_reduce[(7,)](x, out, N=4096, KIND=kind)
    if kind == "sum":
        assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-4)
    else:
        assert torch.equal(out, ref.to(out.dtype))


@pytest.mark.gpu
def test_gpu_tree_over_the_second_axis(monkeypatch):
    monkeypatch.setenv("TLXC_REDUCE_TREE", "1")
    monkeypatch.setenv("TLXC_REDUCE_TREE_SUM", "1")
    x = torch.randn(64, 256, device="cuda")
    out = torch.full((64,), float("nan"), device="cuda")
    block_reduce[(1,)](x, out, R=64, C=256)
    ref = x.double().sum(1) + x.double().amax(1)
    assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-5)
