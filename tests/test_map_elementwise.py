"""``tl.map_elementwise(scalar_fn, *args)`` (the causal mask of TLX's Blackwell attention
tutorials, issue 25): tlxc inlines ``scalar_fn`` once on the broadcast tensors, which its
elementwise operations make equal to Triton's per-element calls.  Interpreter against numpy,
an sm_90a compile, and the refusals."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.errors import TlxcError
from tlxc.frontend.specialize import specialization_from_types
from tlxc.interpreter import interpret


@tlxc.jit
def _mask_bit(x, limit, s, i):
    # keep x where bit i of the run of ``limit - s`` set bits is set (a 16-column block's mask)
    keep = max(limit - s, 0)
    mask = -1 << keep
    return tl.where((mask & (1 << i)) == 0, x, -float("inf"))


@tlxc.kernel
def causal(x_ptr: tl.pointer_type(tl.float32), o_ptr: tl.pointer_type(tl.float32), R: tl.constexpr,
           C: tl.constexpr):
    rows = tl.arange(0, R)
    cols = tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + rows[:, None] * C + cols)
    limit = (rows + 1)[:, None]                     # [R, 1]
    out = tl.map_elementwise(_mask_bit, x, limit, cols & ~0xF, cols & 0xF)
    tl.store(o_ptr + rows[:, None] * C + cols, out)


def test_bitmask_causal_mask_matches_numpy():
    R, C = 16, 32
    x = torch.randn(R, C)
    o = torch.zeros(R, C)
    interpret(causal, (1,), (x, o), {"R": R, "C": C})
    keep = np.arange(C)[None, :] <= np.arange(R)[:, None]      # columns 0..row: the lower triangle
    expected = np.where(keep, x.numpy(), -np.inf)
    assert np.array_equal(o.numpy(), expected)


def test_compiles():
    spec = specialization_from_types(causal, {}, {"R": 16, "C": 32})
    assert compile_kernel(causal, spec, arch="sm_90a", stages=("ir", "cuda")).asm["cuda"]


@tlxc.jit
def _branchy(x):
    if x > 0:
        return x
    return -x


@pytest.mark.parametrize("mode, text", [
    ("branch", "an .if. condition must be a scalar"),     # tlxc runs the function on whole tensors
    ("pack", "tl.map_elementwise with pack=2 is not supported"),
    ("not_jit", "scalar_fn must be a @jit function"),
])
def test_refusals(mode, text):
    @tlxc.kernel
    def bad(x_ptr: tl.pointer_type(tl.float32), MODE: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, 16))
        if MODE == "branch":
            y = tl.map_elementwise(_branchy, x)
        elif MODE == "pack":
            y = tl.map_elementwise(_mask_bit, x, x, x, x, pack=2)
        else:
            y = tl.map_elementwise(abs, x)
        tl.store(x_ptr + tl.arange(0, 16), y)

    with pytest.raises(TlxcError, match=text):
        compile_kernel(bad, specialization_from_types(bad, {}, {"MODE": mode}), stages=("ir",))
