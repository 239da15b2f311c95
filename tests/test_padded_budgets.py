"""Register budgets for tasks smaller than a warp group: ``async_task(num_warps=1, registers=N)``.

setmaxnreg works on whole warp groups (4 warps), so, as TLX does, a smaller task with a budget is
padded to a warp group of its own: its padding warps take part in the register reallocation and
run nothing else, and the tasks after it start at the next warp group.  The thread ids the tasks
see (tlx.thread_id) are the same on the interpreter and in the generated code."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.check import ERROR
from tlxc.compiler import check_function
from tlxc.frontend.specialize import specialization_from_types
from tlxc.ir.ops.task import warp_ranges
from tlxc.language import tlx

F32 = tl.pointer_type(tl.float32)
I32 = tl.pointer_type(tl.int32)


@tlxc.kernel
def small_tasks(x_ptr: F32, y_ptr: F32, ids_ptr: I32, n: tl.int32, BLOCK: tl.constexpr):
    """default (4 warps) copies x; a 1-warp task doubles x into y; a 2-warp task records the
    first thread id it sees.  With budgets they sit at warps 0, 4 and 8."""
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + n + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
        with tlx.async_task(num_warps=1, registers=56):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)
        with tlx.async_task(num_warps=2, registers=56):
            tid = tlx.thread_id(0)
            if tid % 64 == 0:
                tl.store(ids_ptr + tl.program_id(0), tid)


def test_warp_ranges_pad_tasks_with_budgets_to_warp_groups():
    assert warp_ranges([("default", 4, 0, 0), ("a", 1, 56, 0), ("b", 2, 56, 0)]) == [(0, 4), (4, 4), (8, 4)]
    assert warp_ranges([("default", 4, 0, 0), ("a", 1, 0, 0), ("b", 2, 0, 0)]) == [(0, 4), (4, 1), (5, 2)]


def test_the_interpreter_runs_padded_tasks_at_their_warp_groups():
    n = 300                                   # not a multiple of BLOCK
    x = torch.randn(n)
    y = torch.full((2 * n,), float("nan"))
    ids = torch.full((3,), -1, dtype=torch.int32)
    tlxc.interpret(small_tasks)[(3,)](x, y, ids, n, BLOCK=128)
    assert torch.equal(y, torch.cat([x * 2.0, x]))
    assert ids.tolist() == [256, 256, 256]    # the 2-warp task starts at warp 8, not 5


def test_the_code_pads_each_task_and_gives_only_its_own_warps_the_body():
    compiled = small_tasks.compile(constexprs={"BLOCK": 128}, arch="sm_90a")
    cuda = compiled.asm["cuda"]
    assert "__launch_bounds__(384, 1)" in cuda                       # 3 warp groups
    assert "if (warp >= 4 && warp < 8)" in cuda and "if (task_warp < 1)" in cuda
    assert "if (warp >= 8 && warp < 12)" in cuda and "if (task_warp < 2)" in cuda
    assert cuda.count("tlx_setmaxnreg_dec<56>();") == 2 and cuda.count("tlx_setmaxnreg_inc<256>();") == 1
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


def test_the_checker_accepts_padded_tasks():
    spec = specialization_from_types(small_tasks, {}, {"BLOCK": 128})
    found = check_function(small_tasks, spec, arch="sm_90a", num_warps=4)
    assert [f for f in found if f.severity == ERROR] == []


@tlxc.kernel
def too_many(out_ptr: F32):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(out_ptr, 1.0)
        with tlx.async_task(num_warps=1, registers=24, replicate=5):  # 16 + 5 x 4 padded warps
            tl.store(out_ptr + 1, 2.0)


def test_padding_counts_against_the_block_size():
    spec = specialization_from_types(too_many, {"out_ptr": F32}, {})
    found = [f for f in check_function(too_many, spec, arch="sm_90a", num_warps=16) if f.severity == ERROR]
    assert found and "the tasks add up to 36 warps" in found[0].message and "(padded to 4)" in found[0].message


@pytest.mark.gpu
def test_gpu_padded_tasks():
    n = 300
    x = torch.randn(n, device="cuda")
    y = torch.full((2 * n,), float("nan"), device="cuda")
    ids = torch.full((3,), -1, dtype=torch.int32, device="cuda")
    small_tasks[(3,)](x, y, ids, n, BLOCK=128)
    torch.cuda.synchronize()
    assert torch.equal(y, torch.cat([x * 2.0, x]))
    assert ids.tolist() == [256, 256, 256]
