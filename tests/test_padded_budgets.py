"""Register budgets for tasks smaller than a warp group: ``async_task(num_warps=1, registers=N)``.

setmaxnreg works on whole warp groups (4 warps).  As Triton's AllocateWarpGroups does for TLX's
partitions, the frontend puts the larger tasks first and small tasks share a warp group, whose
budget is their largest request; the warps after the last task, up to a whole warp group, take
part in the register reallocation and run nothing else.  (Padding every 1-warp task to a warp
group of its own made TLX's Blackwell GEMMs, two 1-warp tasks asking 232, leave their epilogue 40
registers: ptxas C7600.)  The thread ids the tasks see (tlx.thread_id) are the same on the
interpreter and in the generated code."""
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
    first thread id it sees.  With budgets the 2-warp task comes first: warps 0..3, 4..5, 6
    (warp 7 pads the second warp group)."""
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


def test_warp_ranges_pack_small_tasks_into_warp_groups():
    # in region order (the frontend already put the larger tasks first); the last span pads the group
    assert warp_ranges([("default", 4, 0, 0), ("b", 2, 56, 0), ("a", 1, 56, 0)]) == [(0, 4), (4, 2), (6, 2)]
    assert warp_ranges([("default", 4, 0, 0), ("a", 1, 0, 0), ("b", 2, 0, 0)]) == [(0, 4), (4, 1), (5, 2)]


def test_the_interpreter_runs_packed_tasks_at_their_warps():
    n = 300                                   # not a multiple of BLOCK
    x = torch.randn(n)
    y = torch.full((2 * n,), float("nan"))
    ids = torch.full((3,), -1, dtype=torch.int32)
    tlxc.interpret(small_tasks)[(3,)](x, y, ids, n, BLOCK=128)
    assert torch.equal(y, torch.cat([x * 2.0, x]))
    assert ids.tolist() == [128, 128, 128]    # the 2-warp task starts at warp 4


def test_the_code_gives_a_shared_warp_group_one_budget():
    compiled = small_tasks.compile(constexprs={"BLOCK": 128}, arch="sm_90a")
    cuda = compiled.asm["cuda"]
    assert "__launch_bounds__(256, 1)" in cuda                       # 2 warp groups
    assert "if (warp >= 4 && warp < 6)" in cuda                      # the 2-warp task
    assert "if (warp >= 6 && warp < 8)" in cuda and "if (task_warp < 1)" in cuda   # the 1-warp task, warp 7 pads
    # the two tasks of the shared warp group run its one budget; the default task gets what it leaves
    assert cuda.count("tlx_setmaxnreg_dec<56>();") == 2 and cuda.count("tlx_setmaxnreg_inc<256>();") == 1
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


def test_a_shared_warp_group_takes_the_largest_request():
    from tlxc.ir.ops.task import TaskInfo, group_budgets, register_budgets
    infos = [TaskInfo(0, "default", 4, 0, None, 0, 4, 0, None), TaskInfo(1, "mma", 1, 232, None, 4, 1, 0, None),
             TaskInfo(2, "load", 1, 40, None, 5, 3, 0, None)]
    assert group_budgets(infos) == ([256, 232], None)
    assert register_budgets(infos) == ({0: 256, 1: 232, 2: 232}, None)


def test_the_checker_accepts_packed_tasks():
    spec = specialization_from_types(small_tasks, {}, {"BLOCK": 128})
    found = check_function(small_tasks, spec, arch="sm_90a", num_warps=4)
    assert [f for f in found if f.severity == ERROR] == []


@tlxc.kernel
def too_many(out_ptr: F32):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(out_ptr, 1.0)
        with tlx.async_task(num_warps=8, registers=24, replicate=2):  # 16 + 16 warps
            tl.store(out_ptr + 1, 2.0)
        with tlx.async_task(num_warps=1, registers=24):  # + 1, padded to a warp group
            tl.store(out_ptr + 2, 3.0)


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
    assert ids.tolist() == [128, 128, 128]
