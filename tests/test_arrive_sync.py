"""A warp group's barrier arrive is one arrival by its leader after the group syncs
(codegen_nvptx/rules_tlx.barrier_arrive).  Arrives back to back (TLX's GEMM releases a
stage's A and B barriers one after the other) share that sync: nothing ran in between.
Any work between two arrives keeps the second sync."""
from __future__ import annotations

import re

import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.frontend.specialize import specialization_from_args
from tlxc.language import tlx


@tlxc.jit
def release_two(x_ptr, WORK_BETWEEN: tl.constexpr):
    buf = tlx.local_alloc((128,), tl.float32, 1)
    bars = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_wait(bars[0], 0)
            tlx.barrier_wait(bars[1], 0)
            tl.store(x_ptr + tl.arange(0, 128), tlx.local_load(buf[0]))
        with tlx.async_task(num_warps=4):
            tlx.local_store(buf[0], tl.load(x_ptr + tl.arange(0, 128)) + 1.0)
            tlx.barrier_arrive(bars[0])
            if WORK_BETWEEN:
                tl.store(x_ptr + 128 + tl.arange(0, 128), tl.load(x_ptr + tl.arange(0, 128)))
            tlx.barrier_arrive(bars[1])


def _consumer_cuda(work_between: bool) -> str:
    x = torch.zeros(256)
    spec = specialization_from_args(release_two, {"x_ptr": x, "WORK_BETWEEN": work_between})
    source = compile_kernel(release_two, spec, arch="sm_90a", num_warps=4, stages=("ir", "ir.opt", "cuda")).asm["cuda"]
    return source[source.index("warps 4..7"):]


def _syncs_before_arrives(source: str) -> int:
    return len(re.findall(r"tlx_bar_sync\(\d+, 128\);\s*if \(task_tid == 0\) tlx_mbarrier_arrive", source))


def test_back_to_back_arrives_share_one_group_sync():
    source = _consumer_cuda(False)
    assert source.count("tlx_mbarrier_arrive(") == 2
    assert _syncs_before_arrives(source) == 1


def test_work_between_arrives_keeps_the_second_sync():
    source = _consumer_cuda(True)
    assert source.count("tlx_mbarrier_arrive(") == 2
    assert _syncs_before_arrives(source) == 2
