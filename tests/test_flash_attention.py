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


def _interpret(q, k, v, causal, block_m=None):
    kernel = F.attn_fwd_kernel
    F.attn_fwd_kernel = tlxc.interpret(kernel)
    try:
        return F.attention(q, k, v, causal, block_m=block_m)
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
    from tlxc.check import check_function
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


def test_check_finds_nothing(capsys):
    assert tlxc.cli.main(["check", str(EXAMPLE)]) == 0
    assert tlxc.cli.main(["check", "--run", str(EXAMPLE)]) == 0
    assert capsys.readouterr().err == ""


def _spec(D: int, causal: bool, S: int = 4096):
    q = torch.randn(8, S, D).to(torch.bfloat16)
    descs = [tlxc.TensorDescriptor.from_tensor(q, [1, rows, 64], swizzle=128) for rows in (64, 128, 128)]
    args = dict(zip(F.attn_fwd_kernel.param_names, (*descs, torch.empty_like(q), torch.empty(8, S), S, 0.1)))
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
