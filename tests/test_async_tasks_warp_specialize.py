"""``tlx.async_tasks(warp_specialize=True)``: TLX's option, True being what tlxc always does (each task
on its own warps); any other value is a located error."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError
from tlxc.language import tlx

F32 = tl.pointer_type(tl.float32)


@tlxc.kernel
def two_tasks(x_ptr: F32, y_ptr: F32, n: tl.int32, BLOCK: tl.constexpr, WS: tl.constexpr):
    with tlx.async_tasks(warp_specialize=WS):
        with tlx.async_task("default"):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)
        with tlx.async_task(num_warps=4):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + n + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


def test_warp_specialize_true_is_the_default_behaviour():
    n = 200
    x = torch.randn(n)
    y = torch.full((2 * n,), float("nan"))
    tlxc.interpret(two_tasks)[(2,)](x, y, n, BLOCK=128, WS=True)
    assert torch.equal(y, torch.cat([x + 1.0, x * 2.0]))
    assert two_tasks.compile(constexprs={"BLOCK": 128, "WS": True}, arch="sm_90a").asm["cubin"][:4] == b"\x7fELF"


def test_warp_specialize_false_is_a_located_error():
    with pytest.raises(CompilationError) as info:
        two_tasks.compile(constexprs={"BLOCK": 128, "WS": False}, stages=("ir",))
    assert "tlx.async_tasks(warp_specialize=...) must be True" in info.value.message
    assert info.value.loc.line == two_tasks.fn.__code__.co_firstlineno + 2
