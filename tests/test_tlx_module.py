"""TLX module surface that ports import or call as TLX spells it.

- ``from tlxc.language.tlx.warp_spec import get_bufidx_phase`` (TLX keeps the ring
  helper in ``tlx.warp_spec``; ``tlx.get_bufidx_phase`` is the same function);
- ``tlx.async_task_replica_id()`` is 0 in a task that is not replicated, so a kernel
  whose replica count is a meta-parameter (``replicate=NUM_GROUPS``) compiles at 1 too.
"""
from __future__ import annotations

import os

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError
from tlxc.interpreter import interpret
from tlxc.language import tlx
from tlxc.language.tlx.warp_spec import get_bufidx_phase


def test_warp_spec_module_holds_the_ring_helper():
    assert tlx.get_bufidx_phase is get_bufidx_phase


@tlxc.jit
def ring_slots(out_ptr, n_uses, NUM_BUFFERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    for i in range(n_uses):
        slot, phase = get_bufidx_phase(i, NUM_BUFFERS)
        tl.store(out_ptr + 2 * i + offs * 0, slot + offs * 0, mask=offs == 0)
        tl.store(out_ptr + 2 * i + 1 + offs * 0, phase + offs * 0, mask=offs == 0)


def test_ring_helper_from_warp_spec_runs():
    n_uses, stages = 11, 3
    out = torch.full((2 * n_uses,), -1, dtype=torch.int32)
    interpret(ring_slots, (1,), (out, n_uses), {"NUM_BUFFERS": stages, "BLOCK": 32})
    expected = [v for i in range(n_uses) for v in (i % stages, (i // stages) & 1)]
    assert out.tolist() == expected


@tlxc.jit
def scaled_by_replica(x_ptr, out_ptr, n, GROUPS: tl.constexpr, BLOCK: tl.constexpr):
    """Each consumer replica writes its slice of the row, scaled by (replica + 1)."""
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=4, replicate=GROUPS):
            cid = tlx.async_task_replica_id()
            offs = cid * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            x = tl.load(x_ptr + offs, mask=mask)
            tl.store(out_ptr + offs, x * (cid + 1), mask=mask)


@pytest.mark.parametrize("groups", [1, 2])
def test_replica_id_is_zero_without_replication(groups):
    gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    block = 64
    n = groups * block - 5
    x = torch.randn(n, generator=gen)
    out = torch.full((n,), float("nan"))
    interpret(scaled_by_replica, (1,), (x, out, n), {"GROUPS": groups, "BLOCK": block})
    scale = (torch.arange(n) // block + 1).to(x.dtype)
    assert torch.equal(out, x * scale)


def test_replica_id_compiles_for_sm90a_without_replication():
    compiled = scaled_by_replica.compile(signature="x_ptr=*fp32,out_ptr=*fp32,n=i32",
                                         constexprs={"GROUPS": 1, "BLOCK": 64}, arch="sm_90a")
    assert compiled.asm["cubin"]


@tlxc.jit
def replica_outside_tasks(out_ptr):
    tl.store(out_ptr, tlx.async_task_replica_id())


def test_replica_id_outside_a_task_is_an_error():
    with pytest.raises(CompilationError, match="only meaningful inside a tlx.async_task"):
        interpret(replica_outside_tasks, (1,), (torch.zeros(1, dtype=torch.int32),), {})
