"""Scalars computed before ``tlx.async_tasks`` and read by every task: a divisibility hint on an
argument (``tl.multiple_of``, as TLX kernels state a stride's alignment at the top) and a scalar
load (a size read from a device array) are run by every warp, so non-default tasks may use them;
a register tensor computed there still may not (a located error)."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError
from tlxc.language import tlx

F32 = tl.pointer_type(tl.float32)
I32 = tl.pointer_type(tl.int32)


@tlxc.kernel
def scaled_copies(x_ptr: F32, y_ptr: F32, n_ptr: I32, stride: tl.int32, BLOCK: tl.constexpr):
    stride = tl.multiple_of(stride, 4)          # every task reads the hinted stride...
    n = tl.load(n_ptr)                          # ...and the size loaded once per warp
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + offs * stride, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)
        with tlx.async_task(num_warps=4):
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + 1 + offs * stride, tl.load(x_ptr + offs, mask=offs < n) * 3.0, mask=offs < n)


@tlxc.kernel
def tensor_before_tasks(x_ptr: F32, y_ptr: F32, BLOCK: tl.constexpr):
    vals = tl.load(x_ptr + tl.arange(0, BLOCK))
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(y_ptr + tl.arange(0, BLOCK), vals)
        with tlx.async_task(num_warps=4):
            tl.store(y_ptr + BLOCK + tl.arange(0, BLOCK), vals * 2.0)


def _expected(x, n, stride):
    y = torch.full((128 * stride,), float("nan"))
    y[0:n * stride:stride] = x[:n] + 1.0
    y[1:n * stride + 1:stride] = x[:n] * 3.0
    return y


def test_hinted_and_loaded_scalars_reach_every_task_on_the_interpreter():
    x = torch.randn(128)
    y = torch.full((128 * 4,), float("nan"))
    tlxc.interpret(scaled_copies)[(1,)](x, y, torch.tensor([100], dtype=torch.int32), 4, BLOCK=128)
    assert torch.equal(y.isnan(), _expected(x, 100, 4).isnan())
    assert torch.equal(y.nan_to_num(), _expected(x, 100, 4).nan_to_num())


def test_hinted_and_loaded_scalars_compile_for_sm90a():
    k = scaled_copies.compile(constexprs={"BLOCK": 128}, arch="sm_90a")
    assert k.asm["cubin"][:4] == b"\x7fELF"
    cuda = k.asm["cuda"]
    # the size is loaded before the tasks' branches, once per warp, not once per task
    assert cuda.index("n_ptr") < cuda.index("task '")


def test_a_register_tensor_before_the_tasks_is_still_refused_by_line():
    with pytest.raises(CompilationError) as info:
        tensor_before_tasks.compile(constexprs={"BLOCK": 128}, arch="sm_90a")
    assert "register tensor 'vals' is defined outside this async task" in info.value.message
    assert info.value.loc.line == tensor_before_tasks.fn.__code__.co_firstlineno + 7     # its use in the task


@pytest.mark.gpu
def test_hinted_and_loaded_scalars_on_the_gpu():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    x = torch.randn(128, device="cuda")
    y = torch.full((128 * 4,), float("nan"), device="cuda")
    scaled_copies[(1,)](x, y, torch.tensor([100], dtype=torch.int32, device="cuda"), 4, BLOCK=128)
    ref = _expected(x.cpu(), 100, 4)
    assert torch.equal(y.cpu().isnan(), ref.isnan())
    assert torch.equal(y.cpu().nan_to_num(), ref.nan_to_num())
