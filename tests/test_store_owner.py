"""Stores write each element once, as Triton's do: a scalar ``tl.store`` from the program's first
thread, a tensor element from the owner among its layout's replicas (codegen_c/rules_memory.py).

Were every copy to write, a read-modify-write of the same address (``x = tl.load(p); tl.store(p,
x + d)``, Liger's cross-entropy; the in-place tiles of its RoPE, whose small tiles repeat across
warps) would apply ``d`` once more for every copy that loads after another has stored: the H200
ran Liger's cross-entropy gradient 13x off.  The interpreter runs a program as one thread of tiles,
so the CPU tests read the generated CUDA; the ``gpu`` tests count the updates.
"""
from __future__ import annotations

import re

import pytest
import torch

import tlxc
import tlxc.language as tl


@tlxc.jit
def bump_scalar(p, d):
    x = tl.load(p + tl.program_id(0))
    tl.store(p + tl.program_id(0), x + d)


@tlxc.jit
def bump_tile(p, d, ROWS: tl.constexpr, COLS: tl.constexpr):
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    x = tl.load(p + offs)
    tl.store(p + offs, x + d)


def _cuda(kernel, *args, grid=(1,), **kw) -> str:
    return kernel.warmup(*args, grid=grid, arch="sm_90a", **kw).asm["cuda"]


def test_scalar_store_is_issued_by_the_first_thread():
    src = _cuda(bump_scalar, torch.zeros(4), 1.0, num_warps=8)
    stores = [line for line in src.splitlines() if re.search(r"\*\w+ = \w+;", line)]
    assert stores and all("tid == 0" in line for line in stores), stores


def test_replicated_tile_store_is_issued_by_its_owners():
    # 2 x 16 floats over 4 warps (128 threads): the layout repeats the tile across warps
    src = _cuda(bump_tile, torch.zeros(32), 1.0, ROWS=2, COLS=16, num_warps=4)
    stores = [line for line in src.splitlines() if "tlx_st_global" in line and "(" in line and "void" not in line]
    assert stores, src
    assert all(re.search(r"\(\(warp\) & \d+\) == 0|\(\(lane\) & \d+\) == 0", line) for line in stores), stores


def test_tile_without_replicas_stores_from_every_slot():
    # 8 x 64 floats over 4 warps: each element has one slot, no owner test is added
    src = _cuda(bump_tile, torch.zeros(512), 1.0, ROWS=8, COLS=64, num_warps=4)
    stores = [line for line in src.splitlines() if "tlx_st_global" in line and "void" not in line]
    assert stores and not any("== 0" in line for line in stores), stores


def test_interpreter_result_unchanged():
    p = torch.zeros(32)
    bump_tile[(1,)](p, 2.5, ROWS=2, COLS=16)
    assert torch.equal(p, torch.full((32,), 2.5))


@pytest.mark.gpu
@pytest.mark.parametrize("num_warps", [1, 4, 8, 32])
def test_gpu_scalar_read_modify_write_once(num_warps):
    p = torch.zeros(64, device="cuda")
    for _ in range(3):
        bump_scalar[(64,)](p, 1.0, num_warps=num_warps)
    torch.cuda.synchronize()
    assert torch.equal(p, torch.full((64,), 3.0, device="cuda"))


@pytest.mark.gpu
@pytest.mark.parametrize("rows,cols,num_warps", [(2, 16, 4), (1, 32, 8), (8, 64, 4)])
def test_gpu_tile_read_modify_write_once(rows, cols, num_warps):
    p = torch.zeros(rows * cols, device="cuda")
    for _ in range(5):
        bump_tile[(1,)](p, 1.0, ROWS=rows, COLS=cols, num_warps=num_warps)
    torch.cuda.synchronize()
    assert torch.equal(p, torch.full((rows * cols,), 5.0, device="cuda"))
