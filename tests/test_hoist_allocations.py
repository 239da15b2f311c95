"""Allocations written after an early ``return`` (or inside an ``if``) are hoisted to the
kernel's top level (``passes/hoist_allocations.py``): the interpreter, ``tlxc check`` and the
sm_90a codegen accept them alike.  Inside a loop they stay an error."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import check_function, compile_kernel, frontend
from tlxc.errors import CompilationError
from tlxc.frontend.specialize import specialization_from_args
from tlxc.language import tlx


@tlxc.jit
def doubled_after_early_exit(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """Programs past the data leave first; the rest stage their block in shared memory and
    hand it over through an mbarrier allocated after that return."""
    pid = tl.program_id(0)
    if pid * BLOCK >= n:
        return
    ready = tlx.alloc_barriers(1, arrive_count=1)
    stage = tlx.local_alloc((BLOCK,), tl.float32, 1)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tlx.local_store(stage[0], tl.load(x_ptr + offs, mask=offs < n, other=0.0))
    tlx.barrier_arrive(ready[0])
    tlx.barrier_wait(ready[0], 0)
    tl.store(y_ptr + offs, tlx.local_load(stage[0]) * 2.0, mask=offs < n)


@tlxc.jit
def barrier_in_if(y_ptr, FLAG: tl.constexpr):
    if tl.program_id(0) == 0:
        if FLAG:
            bars = tlx.alloc_barriers(2, arrive_count=1)
            tlx.barrier_arrive(bars[1])
            tlx.barrier_wait(bars[1], 0)
    tl.store(y_ptr + tl.program_id(0), 1.0)


@tlxc.jit
def buffer_in_loop(y_ptr):
    for i in range(0, 2):
        buf = tlx.local_alloc((32,), tl.float32, 1)     # <- one per iteration: not static
        tlx.local_store(buf[0], tl.full((32,), i, tl.float32))
        tl.store(y_ptr + tl.arange(0, 32), tlx.local_load(buf[0]))


def _args(n=300):
    return {"x_ptr": torch.randn(n), "y_ptr": torch.empty(n), "n": n, "BLOCK": 128}


def _spec(kernel, args):
    return specialization_from_args(kernel, args)


def test_allocations_after_an_early_return_are_top_level():
    kernel = frontend(doubled_after_early_exit, _spec(doubled_after_early_exit, _args())).kernels[0]
    top = [op.name for op in kernel.regions[0].ops]
    assert top.index("tlx.alloc_barriers") < top.index("scf.if")
    assert top.index("tlx.local_alloc") < top.index("scf.if")
    nested = [op.name for op in kernel.walk() if op.parent is not kernel.regions[0].block]
    assert "tlx.alloc_barriers" not in nested and "tlx.local_alloc" not in nested


def test_nested_ifs_hoist_too():
    kernel = frontend(barrier_in_if, _spec(barrier_in_if, {"y_ptr": torch.empty(4), "FLAG": True})).kernels[0]
    assert "tlx.alloc_barriers" in [op.name for op in kernel.regions[0].ops]


def test_the_interpreter_runs_it():
    n = 300
    x, y = torch.randn(n), torch.full((n,), float("nan"))
    doubled_after_early_exit[(5,)](x, y, n, BLOCK=128)          # programs 3 and 4 return at once
    torch.testing.assert_close(y, x * 2.0)


def test_check_is_clean_and_sm90a_compiles():
    args = _args()
    found = check_function(doubled_after_early_exit, _spec(doubled_after_early_exit, args), arch="sm_90a")
    assert not [f for f in found if f.severity in ("error", "warning")], [f.message for f in found]
    compiled = compile_kernel(doubled_after_early_exit, _spec(doubled_after_early_exit, args), arch="sm_90a")
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    cuda = compiled.asm["cuda"]
    assert cuda.index("mbarrier.init") < cuda.index("if (")         # initialized before the early exit


def test_an_allocation_in_a_loop_is_still_an_error():
    with pytest.raises(CompilationError, match="must be at the top level") as info:
        compile_kernel(buffer_in_loop, _spec(buffer_in_loop, {"y_ptr": torch.empty(32)}), arch="sm_90a")
    assert info.value.loc.line == buffer_in_loop.fn.__code__.co_firstlineno + 3


@pytest.mark.gpu
def test_gpu_runs_it():
    n = 300
    x = torch.randn(n, device="cuda")
    y = torch.full((n,), float("nan"), device="cuda")
    doubled_after_early_exit[(5,)](x, y, n, BLOCK=128)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x * 2.0)
