"""tlx.vote_ballot_sync (vote.sync.ballot.b32): scalar predicates from tlx.thread_id (recomputed
lane by lane on the interpreter), uniform tensors, refusals, cubins, and the GPU."""
from __future__ import annotations

import kernels_dsm as K
import pytest
import torch

import tlxc
from tlxc.compiler import compile_kernel
from tlxc.errors import CompilationError, InterpreterError
from tlxc.frontend.specialize import specialization_from_args


def _u32(v: int) -> int:
    return v & 0xFFFFFFFF


@pytest.mark.parametrize("split", [0, 13, 32])
def test_ballot_of_a_thread_id_predicate(split):
    out = torch.full((3,), -1, dtype=torch.int32)
    tlxc.interpret(K.ballot_below)[(3,)](out, SPLIT=split)
    assert [_u32(v) for v in out.tolist()] == [(1 << split) - 1] * 3


def test_ballot_in_a_task_votes_for_its_own_lanes_under_the_mask():
    out = torch.full((1,), -1, dtype=torch.int32)
    tlxc.interpret(K.ballot_in_task)[(1,)](out, num_warps=4)
    want = sum(1 << lane for lane in range(16) if (128 + lane) % 2 == 1 and 128 + lane < 140)
    assert _u32(out.item()) == want


@pytest.mark.parametrize("mask", [0xFFFFFFFF, 0xF0F0F0F0])
def test_ballot_of_a_uniform_tensor_is_the_mask_everywhere(mask):
    x = torch.rand(64)
    out = torch.zeros(64, dtype=torch.int32)
    tlxc.interpret(K.ballot_of_tensor)[(1,)](x, out, BLOCK=64, MASK=mask)
    assert {_u32(v) for v in out.tolist()} == {mask}
    tlxc.interpret(K.ballot_of_tensor)[(1,)](-x - 1, out, BLOCK=64, MASK=mask)
    assert set(out.tolist()) == {0}


def test_ballot_of_a_mixed_tensor_is_refused_on_the_interpreter():
    x = torch.rand(64)
    x[5] = -1.0
    with pytest.raises(InterpreterError, match="depends on the register layout"):
        tlxc.interpret(K.ballot_of_tensor)[(1,)](x, torch.zeros(64, dtype=torch.int32), BLOCK=64, MASK=0xFFFFFFFF)


def test_a_mask_wider_than_32_bits_is_refused():
    with pytest.raises(CompilationError, match="32-bit lane mask"):
        tlxc.interpret(K.ballot_of_tensor)[(1,)](torch.rand(64), torch.zeros(64, dtype=torch.int32), BLOCK=64,
                                                 MASK=1 << 32)


def test_ballot_kernels_compile():
    out = torch.empty(1, dtype=torch.int32)
    for kfn, args in ((K.ballot_below, {"out_ptr": out, "SPLIT": 5}), (K.ballot_in_task, {"out_ptr": out}),
                      (K.ballot_of_tensor, {"x_ptr": torch.empty(1), "out_ptr": out, "BLOCK": 64, "MASK": 3})):
        compiled = compile_kernel(kfn, specialization_from_args(kfn, args), arch="sm_90a", num_warps=4)
        assert compiled.asm["cubin"][:4] == b"\x7fELF" and "tlx_vote_ballot_sync(" in compiled.asm["cuda"]


@pytest.mark.gpu
def test_gpu_ballots():
    out = torch.full((3,), -1, dtype=torch.int32, device="cuda")
    K.ballot_below[(3,)](out, SPLIT=13)
    assert [_u32(v) for v in out.tolist()] == [(1 << 13) - 1] * 3
    one = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    K.ballot_in_task[(1,)](one, num_warps=4)
    assert _u32(one.item()) == sum(1 << lane for lane in range(16) if (128 + lane) % 2 == 1 and 128 + lane < 140)
    x = torch.rand(64, device="cuda")
    res = torch.zeros(64, dtype=torch.int32, device="cuda")
    K.ballot_of_tensor[(1,)](x, res, BLOCK=64, MASK=0xF0F0F0F0)
    assert {_u32(v) for v in res.tolist()} == {0xF0F0F0F0}


def test_ballot_outside_thread_branches_votes_over_the_whole_warp_then_masks():
    # every lane executes it there; vote.sync with a member mask that leaves out executing
    # lanes is undefined (the H200 returned all 32 bits for 0xF0F0F0F0), so: full warp, then & mask
    compiled = K.ballot_of_tensor.compile(signature="x_ptr=*fp32,out_ptr=*i32",
                                          constexprs={"BLOCK": 64, "MASK": 0xF0F0F0F0}, arch="sm_90a")
    assert "tlx_vote_ballot_sync(0xffffffffu, " in compiled.asm["cuda"]
    assert "& 0xf0f0f0f0u)" in compiled.asm["cuda"]
