"""Barrier and buffer views reassigned in a loop or an if (loop-carried views, issue 17
item 9) and scalars from a runtime if used inside async tasks (item 10): compiled for
sm_90a, checked, and run on the interpreter against torch."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import kernels_pipelined as K

import tlxc
from tlxc.check.findings import FAILING
from tlxc.compiler import check_function
from tlxc.errors import CompilationError
from tlxc.frontend.specialize import parse_signature, specialization_from_types

SIG = "x_ptr=*fp32,out_ptr=*fp32,n_tiles=i32"
BLOCK, SLOTS = 128, 2


def _line(marker: str) -> int:
    with open(K.__file__) as f:
        lines = f.read().splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text)


def _ring_reference(x: torch.Tensor, n_tiles: int) -> torch.Tensor:
    tiles = x.double()[: n_tiles * BLOCK].reshape(n_tiles, BLOCK)
    weights = torch.arange(1, n_tiles + 1, dtype=torch.float64)[:, None]
    return (tiles * weights).sum(0).float()


@pytest.mark.parametrize("kernel", [K.carried_ring_for, K.carried_ring_while], ids=lambda k: k.__name__)
def test_carried_views_compile_to_cubin(kernel):
    cuda = kernel.compile(SIG, {"BLOCK": BLOCK, "SLOTS": SLOTS}, stages=("cuda", "cubin")).asm
    assert cuda["cubin"]
    # the views flow through the loop as pointers into shared memory
    assert "unsigned long long* bar_1;" in cuda["cuda"]
    assert "float* buf_1;" in cuda["cuda"]


@pytest.mark.parametrize("kernel", [K.carried_ring_for, K.carried_ring_while], ids=lambda k: k.__name__)
def test_carried_views_interpreter_matches_torch(kernel):
    n_tiles = 5                      # wraps the 2-slot ring twice
    x = torch.randn(n_tiles * BLOCK)
    out = torch.full((BLOCK,), float("nan"))
    tlxc.interpret(kernel)[(1,)](x, out, n_tiles, BLOCK=BLOCK, SLOTS=SLOTS)
    torch.testing.assert_close(out, _ring_reference(x, n_tiles), rtol=1e-5, atol=1e-4)


def _findings(kernel, **constexprs):
    spec = specialization_from_types(kernel, parse_signature(SIG), {"BLOCK": BLOCK, "SLOTS": SLOTS, **constexprs}, {})
    return [f for f in check_function(kernel, spec) if f.severity in FAILING]


@pytest.mark.parametrize("kernel", [K.carried_ring_for, K.carried_ring_while], ids=lambda k: k.__name__)
def test_checker_accepts_carried_views(kernel):
    assert _findings(kernel) == []


def test_checker_follows_carried_barrier_views():
    """A phase bug through a carried barrier view is explained on the slot it names (not as a
    barrier nobody arrives on: the arrive goes through the same carried view)."""
    found = _findings(K.carried_ring_for, BUG="phase")
    assert found, "no finding"
    assert (found[0].check, found[0].loc.line) == ("ring.phase-not-flipped", _line("# BUG phase")), found[0].render()
    assert "'bars'[0]" in found[0].message


def test_carried_view_with_another_layout_is_a_located_error():
    """(A transposed view has another type: the frontend says so at the assignment; views of
    one type with different shared layouts are refused by the codegen, rules_control.py.)"""
    with pytest.raises(CompilationError) as info:
        K.carried_mixed_layouts.compile("x_ptr=*fp32,out_ptr=*fp32", {"BLOCK": 32}, stages=("cuda",))
    assert "loop-carried variable 'buf'" in str(info.value)
    assert info.value.loc is not None and info.value.loc.line == _line("# the other layout")


def test_scalar_if_before_tasks_compiles_and_runs():
    sig = "x_ptr=*fp32,out_ptr=*fp32,n=i32"
    cuda = K.scalar_if_before_tasks.compile(sig, {"BLOCK": 128}, stages=("cuda", "cubin")).asm
    assert cuda["cubin"]
    # the if runs in every warp, before the tasks branch
    assert cuda["cuda"].index("if (") < cuda["cuda"].index("barriers initialized; tasks may start")
    for n in (3, 9):
        x = torch.randn(256)
        out = torch.full((256,), float("nan"))
        tlxc.interpret(K.scalar_if_before_tasks)[(1,)](x, out, n, BLOCK=128)
        scale, shift = (2.0, n - 4) if n > 4 else (3.0, 0)
        expected = torch.cat([x[:128].double() * scale + shift, x[128:].double() * scale - shift]).float()
        torch.testing.assert_close(out, expected)
