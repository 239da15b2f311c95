"""examples/flash_attention_fwd.py on the interpreter against a float64
reference (O and the log-sum-exp, causal and not, S not a multiple of the
blocks), clean under ``tlxc check``, and compiled to a cubin for sm_90a with
P fed to wgmma from registers.  The GPU runs are in tests/test_gpu_attention.py."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

import tlxc
import tlxc.cli
from tlxc.compiler import compile_kernel
from tlxc.frontend.specialize import specialization_from_args

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "flash_attention_fwd.py"
sys.path.insert(0, str(EXAMPLE.parent))
import flash_attention_fwd as F

EPS = torch.finfo(torch.bfloat16).eps


def _interpret(q, k, v, causal, block_m=None, **options):
    kernel = F.attn_fwd_kernel
    F.attn_fwd_kernel = tlxc.interpret(kernel)
    try:
        return F.attention(q, k, v, causal, block_m=block_m, **options)
    finally:
        F.attn_fwd_kernel = kernel


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("block_m", [128, 192])
def test_two_and_three_consumers(block_m, causal):
    """64 query rows per consumer warp group; three hand the turn round a ring of named barriers."""
    generator = torch.Generator().manual_seed(block_m + causal)
    q, k, v = (torch.randn(1, 1, 200, 64, generator=generator).to(torch.bfloat16) for _ in range(3))
    o, lse = _interpret(q, k, v, causal, block_m)
    ref_o, ref_lse = F.reference(q, k, v, causal)
    assert ((o.double() - ref_o).norm() / ref_o.norm()).item() < EPS
    assert (lse.double() - ref_lse).abs().max().item() < 1e-4
    spec = _spec(64, causal, S=200)
    spec.params.update(BLOCK_M=("constexpr", block_m), REGISTERS=("constexpr", 240 if block_m == 128 else 160))
    from tlxc.compiler import check_function
    assert check_function(F.attn_fwd_kernel, spec) == []


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", [(1, 2, 300, 64), (1, 1, 130, 128)], ids=lambda s: "x".join(map(str, s)))
def test_interpreter_matches_float64(shape, causal):
    generator = torch.Generator().manual_seed(sum(shape) + causal)
    q, k, v = (torch.randn(*shape, generator=generator).to(torch.bfloat16) for _ in range(3))
    o, lse = _interpret(q, k, v, causal)
    ref_o, ref_lse = F.reference(q, k, v, causal)
    assert torch.isfinite(o.float()).all() and torch.isfinite(lse).all()
    assert ((o.double() - ref_o).norm() / ref_o.norm()).item() < EPS        # bf16 P and O roundings
    assert (lse.double() - ref_lse).abs().max().item() < 1e-4


@pytest.mark.parametrize("programs,group_h", [(1, 16), (2, 1), (5, 2), (64, 16)])
def test_any_number_of_programs_walks_every_item_once(programs, group_h):
    """One program walks all items (its Q buffers and K/V ring wrap many times), or more
    programs than items; head groups of 1 or 2 of the 3 heads (a partial last group)."""
    generator = torch.Generator().manual_seed(programs)
    q, k, v = (torch.randn(1, 3, 300, 64, generator=generator).to(torch.bfloat16) for _ in range(3))
    o, lse = _interpret(q, k, v, True, programs=programs, group_h=group_h)
    ref_o, ref_lse = F.reference(q, k, v, True)
    assert ((o.double() - ref_o).norm() / ref_o.norm()).item() < EPS
    assert (lse.double() - ref_lse).abs().max().item() < 1e-4


@pytest.mark.parametrize("S,block_m,causal", [(4096, 128, True), (4096, 192, False), (2048, 128, True),
                                              (4097, 192, True), (300, 128, False)])
def test_schedule_covers_every_item_once_and_balances(S, block_m, causal):
    BH, programs = 128, 132
    table = F.schedule(S, BH, block_m, 128, causal, programs, 16)
    num_m = -(-S // block_m)
    items, loads = [], []
    for row in table.tolist():
        mine = row[1:1 + row[0]]
        items += mine
        loads.append(sum(-(-(min(S, (t % num_m + 1) * block_m) if causal else S) // 128) + 1 for t in mine))
    assert sorted(items) == list(range(BH * num_m))
    if len(items) >= 8 * programs:                             # (384 items: some programs get 2, some 3)
        assert max(loads) <= 1.04 * sum(loads) / len(loads)
    first_items = [row[1] for row in table.tolist()]          # the first round: heads of the first groups only
    assert max(t // num_m for t in first_items) < 16 * -(-programs // (16 * num_m))


def test_bad_schedule_options_are_refused():
    q = torch.randn(1, 1, 16, 64).to(torch.bfloat16)
    with pytest.raises(ValueError, match="programs must be at least 1, got 0"):
        F.attention(q, q, q, programs=0)
    with pytest.raises(ValueError, match="group_h must be at least 1, got 0"):
        F.attention(q, q, q, group_h=0)


def test_check_finds_nothing(capsys):
    assert tlxc.cli.main(["check", str(EXAMPLE)]) == 0
    assert tlxc.cli.main(["check", "--run", str(EXAMPLE)]) == 0
    assert capsys.readouterr().err == ""


def _spec(D: int, causal: bool, S: int = 4096):
    q = torch.randn(8, S, D).to(torch.bfloat16)
    descs = [tlxc.TensorDescriptor.from_tensor(q, [1, rows, 64], swizzle=128) for rows in (64, 128, 128)]
    sched = F.schedule(S, 8, 128, 128, causal, 132, 16)
    args = dict(zip(F.attn_fwd_kernel.param_names, (*descs, torch.empty_like(q), torch.empty(8, S), S, 0.1, sched,
                                                     sched.shape[1])))
    for name, param in F.attn_fwd_kernel.signature.parameters.items():
        args.setdefault(name, param.default)
    args.update(HEAD_DIM=D, CAUSAL=causal)
    return specialization_from_args(F.attn_fwd_kernel, args)


@pytest.mark.parametrize("D", [64, 128])
def test_compiles_for_sm90a_with_register_a_wgmma(D):
    compiled = compile_kernel(F.attn_fwd_kernel, _spec(D, causal=True), arch="sm_90a", num_warps=4,
                              stages=("ir", "ir.opt", "cuda", "ptx", "cubin", "stats"))
    ptx = compiled.asm["ptx"]
    # S = Q K^T from shared memory; O += P V with P's four registers per k step as A
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in ptx
    register_a = r"\{%r\d+, %r\d+, %r\d+, %r\d+\}"
    assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n{D}k16\.f32\.bf16\.bf16 \{{[^}}]*\}}, {register_a}", ptx)
    assert "_rs<1>" in compiled.asm["cuda"]           # V read N-major
    assert compiled.metadata["spills_bytes"] == 0, compiled.metadata.get("ptxas_log")


def test_empty_sequence_needs_no_launch():
    q = torch.randn(1, 2, 0, 64).to(torch.bfloat16)
    o, lse = F.attention(q, q, q)
    assert o.shape == (1, 2, 0, 64) and lse.shape == (1, 2, 0)


def test_unsupported_head_dim_is_refused():
    q = torch.randn(1, 1, 16, 96).to(torch.bfloat16)
    with pytest.raises(ValueError, match="head dimensions 64 and 128, got 96"):
        F.attention(q, q, q)
