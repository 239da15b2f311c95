"""The interpreter and 'tlxc check' on AMD targets run 64-lane waves (issue 24): a warp-level op,
a branch on the work-item id and the thread counts of the checks use the target's warp size."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
import tlxc.language.tlx as tlx
from tlxc.compiler import frontend
from tlxc.errors import CompilationError
from tlxc.frontend.specialize import specialization_from_types
from tlxc.interpreter import interpret
from tlxc.ir.ops.task import warp_size
from tlxc.ir.types import PointerType, f32, i32


@tlxc.kernel
def ballot_below(out_ptr, LIMIT: tl.constexpr):
    t = tlx.thread_id(0)
    tl.store(out_ptr + t, tlx.vote_ballot_sync(0xFFFFFFFF, t < LIMIT))


@pytest.mark.parametrize("arch, lanes", [("sm_90a", 32), ("gfx942", 64), ("gfx950", 64)])
def test_ballot_sees_the_targets_warp(arch, lanes):
    out = torch.full((4 * lanes,), 7, dtype=torch.int32)
    interpret(ballot_below, (1,), (out,), {"LIMIT": 40}, arch=arch)
    got = [int(v) & 0xFFFFFFFF for v in out]
    # thread 32: lane 0..7 of warp 1 on NVIDIA (8 threads below 40); lane 32 of wave 0 on AMD, whose
    # lanes 0..31 (the 32-bit mask's) are all below 40
    assert got[32] == (0xFF if lanes == 32 else 0xFFFFFFFF)
    assert got[0] == 0xFFFFFFFF and got[2 * lanes] == 0


@tlxc.kernel
def first_wave_stores(out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if tlx.thread_id(0) < 64:
        tl.store(out_ptr + offs, offs.to(tl.float32))


@pytest.mark.parametrize("arch, stored", [("sm_90a", 512), ("gfx942", 256)])
def test_a_branch_on_the_work_item_id_uses_wave64_layouts(arch, stored):
    """Which elements work-items 0..63 hold follows the target's layout (4 warps of 32 or 4 waves of
    64 lanes, 4 elements each); the interpreter picks each thread's elements from that layout."""
    out = torch.full((1024,), -1.0)
    interpret(first_wave_stores, (1,), (out,), {"BLOCK": 1024}, arch=arch)
    written = out >= 0
    assert int(written.sum()) == stored
    assert torch.equal(out[written], torch.nonzero(written).flatten().float())


def test_the_kernel_records_its_warp_size():
    spec = specialization_from_types(ballot_below, {"out_ptr": PointerType(i32)}, {"LIMIT": 1})
    assert warp_size(frontend(ballot_below, spec, arch="gfx950").kernels[0]) == 64
    assert warp_size(frontend(ballot_below, spec, arch="sm_90a").kernels[0]) == 32
    with pytest.raises(CompilationError, match="at most 1024"):
        frontend(ballot_below, spec, arch="gfx942", num_warps=32)


# -- 'tlxc check' on AMD targets ---------------------------------------------------------------
@tlxc.kernel
def lds_barrier_short(out_ptr, BLOCK: tl.constexpr):
    bars = tlx.alloc_barriers(1, arrive_count=2)
    tlx.barrier_arrive(tlx.local_view(bars, 0))
    tlx.barrier_wait(tlx.local_view(bars, 0), 0)        # the second arrival never comes
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.zeros((BLOCK,), tl.float32))


@tlxc.kernel
def named_sync(out_ptr, BLOCK: tl.constexpr):
    tlx.named_barrier_wait(9, 128)
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.zeros((BLOCK,), tl.float32))


@tlxc.kernel
def two_tasks(out_ptr, BLOCK: tl.constexpr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(out_ptr + tl.arange(0, BLOCK), tl.zeros((BLOCK,), tl.float32))
        with tlx.async_task(num_warps=1):
            tl.store(out_ptr + BLOCK + tl.arange(0, BLOCK), tl.zeros((BLOCK,), tl.float32))


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("kfn, message", [
    (lds_barrier_short, "counts 2 arrivals per phase"),    # the LDS mbarrier protocol, as on NVIDIA
    (named_sync, "named barriers .* are NVIDIA-only"),
    (two_tasks, r"warp specialization \(tlx.async_tasks\) is not supported on AMD"),
])
def test_check_findings_on_amd(arch, kfn, message):
    import re

    from tlxc.compiler import check_function
    spec = specialization_from_types(kfn, {"out_ptr": PointerType(f32)}, {"BLOCK": 64})
    findings = check_function(kfn, spec, arch=arch)
    assert findings and re.search(message, findings[0].message), [f.message for f in findings]
    assert findings[0].loc is not None


def test_check_passes_the_amd_examples_and_runs_them_on_wave64():
    from pathlib import Path

    from tlxc.cli import main
    examples = Path(__file__).resolve().parent.parent / "examples"
    for name in ("amd_gemm_pingpong", "amd_gemm_pipelined"):
        for arch in ("gfx942", "gfx950"):
            assert main(["check", str(examples / f"{name}.py"), "--arch", arch, "--run", "--seeds", "1"]) == 0, (name, arch)
