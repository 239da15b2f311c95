"""examples/hopper_gemm_ws_pingpong.py (TMA producer, two wgmma consumers on
alternate tiles, serialized by named barriers 9/10) on the interpreter against
a float32 reference, clean under ``tlxc check``, and compiled to a cubin for
sm_90a.  The GPU run is in the example's main()."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tlxc
import tlxc.cli
from tlxc.compiler import compile_kernel
from tlxc.frontend.specialize import specialization_from_args

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hopper_gemm_ws_pingpong.py"
sys.path.insert(0, str(EXAMPLE.parent))
import hopper_gemm_ws_pingpong as P


@pytest.mark.parametrize("shape", [(256, 384, 512), (200, 264, 320)], ids=lambda s: "x".join(map(str, s)))
def test_interpreter_matches_a_float32_reference(shape):
    M, N, K = shape
    generator = torch.Generator().manual_seed(M * 11 + N)
    a = torch.randn(M, K, generator=generator).to(torch.bfloat16)
    b = torch.randn(K, N, generator=generator).to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    kernel = P.matmul_ws_pingpong_kernel
    P.matmul_ws_pingpong_kernel = tlxc.interpret(kernel)
    try:
        # 3 programs over 12 (or 10) tiles: each program has an even or odd
        # count of tiles, so each consumer in turn absorbs the last pass.
        P.matmul_ws_pingpong(a, b, out, num_stages=3, sms=3)
    finally:
        P.matmul_ws_pingpong_kernel = kernel
    assert torch.isfinite(out.float()).all()
    ref = a.float() @ b.float()
    error = ((out.float() - ref).norm() / ref.norm()).item()
    assert error < 2 * torch.finfo(torch.bfloat16).eps      # bf16 output rounding is ~0.4 eps


def test_check_finds_nothing(capsys):
    assert tlxc.cli.main(["check", str(EXAMPLE)]) == 0
    assert tlxc.cli.main(["check", "--run", str(EXAMPLE)]) == 0
    assert capsys.readouterr().err == ""


def _spec(M=1024, N=1024, K=1024):
    a = torch.randn(M, K).to(torch.bfloat16)
    b = torch.randn(K, N).to(torch.bfloat16)
    c = torch.empty(M, N, dtype=torch.bfloat16)
    args = {"a_desc": tlxc.TensorDescriptor.from_tensor(a, [128, 64], swizzle=128),
            "b_desc": tlxc.TensorDescriptor.from_tensor(b, [64, 64], swizzle=128),
            "c_desc": tlxc.TensorDescriptor.from_tensor(c, [128, 64]), "M": M, "N": N, "K": K}
    for name, param in P.matmul_ws_pingpong_kernel.signature.parameters.items():
        args.setdefault(name, param.default)
    args["NUM_SMS"] = 132
    return specialization_from_args(P.matmul_ws_pingpong_kernel, args)


def test_compiles_for_sm90a_with_wgmma_tma_and_named_barriers():
    # The compile runs the check-barriers pass too: a finding would fail it.
    compiled = compile_kernel(P.matmul_ws_pingpong_kernel, _spec(), arch="sm_90a", num_warps=4,
                              stages=("ir", "ir.opt", "cuda", "ptx", "cubin", "stats"))
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    ptx = compiled.asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in ptx
    assert "cp.async.bulk.tensor.2d" in ptx and "setmaxnreg" in ptx
    assert "bar.arrive" in ptx and "bar.sync" in ptx
    meta = compiled.metadata
    assert meta["spills_bytes"] == 0, meta.get("ptxas_log")
    assert meta["threads"] == 384
