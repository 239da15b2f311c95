"""Triton's ``num_ctas=N`` launch option: each program is a cluster of N CTAs along x (the
grid's x multiplied by N, ``__cluster_dims__(N, 1, 1)``), ``tl.program_id(0)`` /
``tl.num_programs(0)`` count clusters, and tlxc places the whole program on the cluster's
first CTA (the others return at once), so every side effect happens once per program.
The cluster ops, ``ctas_per_cga`` together with it, and targets without clusters are refused."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
import tlxc.language.tlx as tlx
from tlxc.errors import CompilationError, LaunchError
from tlxc.runtime.launch import with_ctas_per_program


@tlxc.jit
def ids(out_ptr, count_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, offs.to(tl.float32) * 0.5 + tl.num_programs(0), mask=offs < n)
    tl.atomic_add(count_ptr, 1)


@tlxc.jit
def ws_store(out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            _ = tl.arange(0, BLOCK)
        with tlx.async_task(num_warps=1):
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, offs.to(tl.float32))


@tlxc.jit
def ranked(out_ptr):
    tl.store(out_ptr + tl.program_id(0), tlx.cluster_cta_rank())


def _want(n, block, programs):
    return torch.arange(n, dtype=torch.float32) * 0.5 + programs


def test_the_cuda_makes_each_program_a_cluster_run_by_its_first_cta():
    compiled = ids.compile("out_ptr=*fp32,count_ptr=*i32,n=i32", {"BLOCK": 64}, num_ctas=4)
    source = compiled.asm["cuda"]
    assert "__cluster_dims__(4, 1, 1)" in source and "if (blockIdx.x % 4u) return;" in source
    assert "(int)(blockIdx.x / 4u)" in source and "(int)(gridDim.x / 4u)" in source
    assert compiled.asm["cubin"] and compiled.metadata["num_ctas"] == 4
    plain = ids.compile("out_ptr=*fp32,count_ptr=*i32,n=i32", {"BLOCK": 64})
    assert "__cluster_dims__" not in plain.asm["cuda"] and "blockIdx.x % " not in plain.asm["cuda"]


def test_the_launch_multiplies_the_grid_x():
    seen = []
    run = with_ctas_per_program(lambda grid, *rest: seen.append(grid), "k", 2)
    run((5, 3, 1), (128, 1, 1), 0, 0, [])
    assert seen == [(10, 3, 1)]
    with pytest.raises(LaunchError, match="num_ctas=2 is 4294967294 CTAs"):
        run((2**31 - 1, 1, 1), (128, 1, 1), 0, 0, [])


def test_the_interpreter_runs_one_program_per_cluster_and_reports_num_ctas():
    n, block = 200, 64
    out, count = torch.full((n,), float("nan")), torch.zeros(1, dtype=torch.int32)
    launched = ids[(4,)](out, count, n, BLOCK=block, num_ctas=2, interpret=True)
    torch.testing.assert_close(out, _want(n, block, 4))
    assert count.item() == 4                                   # once per program, not per CTA
    assert launched.metadata.num_ctas == 2 and tuple(launched.metadata.cluster_dims) == (1, 1, 1)
    out = torch.full((256,), float("nan"))
    ws_store[(4,)](out, BLOCK=64, num_ctas=2, interpret=True)   # warp-specialized: the same
    torch.testing.assert_close(out, torch.arange(256, dtype=torch.float32))


def test_cluster_ops_and_ctas_per_cga_are_refused_with_num_ctas():
    with pytest.raises(CompilationError, match="tlx.cluster_cta_rank needs the kernel's own clusters") as info:
        ranked.compile("out_ptr=*i32", num_ctas=2)
    assert info.value.loc is not None and info.value.loc.line > 0    # at the op's line
    ranked.compile("out_ptr=*i32", cluster=(2, 1, 1))               # (with ctas_per_cga it is fine)
    with pytest.raises(CompilationError, match="both set the cluster"):
        ids.compile("out_ptr=*fp32,count_ptr=*i32,n=i32", {"BLOCK": 64}, num_ctas=2, cluster=(2, 1, 1))
    with pytest.raises(CompilationError, match="needs sm_90 or newer"):
        ids.compile("out_ptr=*fp32,count_ptr=*i32,n=i32", {"BLOCK": 64}, num_ctas=2, arch="sm_80")


@pytest.mark.gpu
@pytest.mark.parametrize("num_ctas", [1, 2, 4])
def test_gpu_num_ctas_runs_each_program_once(num_ctas):
    n, block, grid = 1000 * 64 - 7, 64, 1000
    out = torch.full((n,), float("nan"), device="cuda")
    count = torch.zeros(1, dtype=torch.int32, device="cuda")
    launched = ids[(grid,)](out, count, n, BLOCK=block, num_ctas=num_ctas)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.cpu(), _want(n, block, grid))
    assert count.item() == grid and launched.metadata.get("num_ctas", 1) == num_ctas
    out = torch.full((1024,), float("nan"), device="cuda")
    ws_store[(4,)](out, BLOCK=256, num_ctas=num_ctas)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.cpu(), torch.arange(1024, dtype=torch.float32))
