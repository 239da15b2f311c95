"""tlx.async_dot / async_dot_wait on the interpreter (results delivered
asynchronously, operand slots read until the wait) and their frontend rules."""
from __future__ import annotations

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

import check_kernels as C

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError, RaceError
from tlxc.language import tlx


def _run(bug: str = "", seed=None):
    generator = torch.Generator().manual_seed(5)
    a = torch.randn(64, 256, generator=generator).to(torch.bfloat16)
    b = torch.randn(256, 64, generator=generator).to(torch.bfloat16)
    c = torch.full((64, 64), float("nan"), dtype=torch.bfloat16)
    descs = (tlxc.TensorDescriptor.from_tensor(a, [64, 64]), tlxc.TensorDescriptor.from_tensor(b, [64, 64]),
             tlxc.TensorDescriptor.from_tensor(c, [64, 64]))
    tlxc.interpret(C.wgmma_ring, (1,), descs + (4,), {"BUG": bug}, seed=seed)
    return a, b, c


@pytest.mark.parametrize("seed", [None, 0, 1])
def test_async_dot_matches_a_float32_reference(seed):
    a, b, c = _run(seed=seed)
    ref = a.float() @ b.float()
    assert ((c.float() - ref).norm() / ref.norm()).item() < 2 * torch.finfo(torch.bfloat16).eps


@pytest.mark.usefixtures("interpreter_diagnosis")
def test_reading_the_result_before_the_wait_is_a_race_naming_both_lines():
    with pytest.raises(RaceError, match="async_dot result read before async_dot_wait") as info:
        _run("result_before_wait")
    assert "# BUG result_before_wait" in info.value.render()
    assert any("the async_dot is issued here" in text for text, _ in info.value.notes)


@pytest.mark.usefixtures("interpreter_diagnosis")
@pytest.mark.parametrize("seed", [None, 0])
def test_refilling_a_slot_the_mma_still_reads_is_a_race(seed):
    with pytest.raises(RaceError, match="TMA load of 'a_smem'") as info:
        _run("early_release", seed=seed)
    assert any("async_dot operand read" in text for text, _ in info.value.notes)


@tlxc.kernel
def _bad_shape(a_ptr: tl.pointer_type(tl.bfloat16), M_ROWS: tl.constexpr):
    a = tlx.local_alloc((M_ROWS, 64), tl.bfloat16, 1)
    b = tlx.local_alloc((64, 64), tl.bfloat16, 1)
    acc = tlx.async_dot(a[0], b[0], tl.zeros((M_ROWS, 64), dtype=tl.float32))
    acc = tlx.async_dot_wait(0, acc)


@tlxc.kernel
def _two_ctas(a_ptr: tl.pointer_type(tl.bfloat16)):
    a = tlx.local_alloc((64, 64), tl.bfloat16, 1)
    acc = tlx.async_dot(a[0], a[0], two_ctas=True)
    acc = tlx.async_dot_wait(0, acc)


def test_wgmma_shape_rules_are_reported_at_the_users_line():
    with pytest.raises(CompilationError, match="M must be a multiple of 64"):
        _bad_shape.compile(constexprs={"M_ROWS": 32}, stages=("ir",))


def test_blackwell_options_are_not_supported_on_hopper_yet():
    with pytest.raises(CompilationError, match="not supported on Hopper yet"):
        _two_ctas.compile(stages=("ir",))
