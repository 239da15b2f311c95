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

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hopper_gemm_ws_pingpong.py"
sys.path.insert(0, str(EXAMPLE.parent))
import hopper_gemm_ws_pingpong as P
from gemm_examples import launch_spec, run_on_interpreter


@pytest.mark.parametrize("shape", [(256, 384, 512), (200, 264, 320)], ids=lambda s: "x".join(map(str, s)))
def test_interpreter_matches_a_float32_reference(shape):
    M, N, _ = shape
    # 3 programs over 12 (or 10) tiles: each program has an even or odd
    # count of tiles, so each consumer in turn absorbs the last pass.
    out, ref = run_on_interpreter(P, "matmul_ws_pingpong_kernel", P.matmul_ws_pingpong, shape, M * 11 + N,
                                  num_stages=3, sms=3)
    assert torch.isfinite(out.float()).all()
    error = ((out.float() - ref).norm() / ref.norm()).item()
    assert error < 2 * torch.finfo(torch.bfloat16).eps      # bf16 output rounding is ~0.4 eps


def test_check_finds_nothing(capsys):
    assert tlxc.cli.main(["check", str(EXAMPLE)]) == 0
    assert tlxc.cli.main(["check", "--run", str(EXAMPLE)]) == 0
    assert capsys.readouterr().err == ""


def _spec():
    return launch_spec(P.matmul_ws_pingpong_kernel, [128, 64], [64, 64], [128, 64])


def test_compiles_for_sm90a_with_wgmma_tma_and_named_barriers():
    # The compile runs the check-barriers pass too: a finding would fail it.
    compiled = compile_kernel(P.matmul_ws_pingpong_kernel, _spec(), arch="sm_90a", num_warps=4,
                              stages=("ir", "ir.opt", "cuda", "ptx", "cubin", "stats"))
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    ptx = compiled.asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in ptx
    assert "cp.async.bulk.tensor.2d" in ptx and "setmaxnreg" in ptx
    assert "bar.arrive" in ptx and "bar.sync" in ptx
    meta = compiled.metadata
    assert meta["spills_bytes"] == 0, meta.get("ptxas_log")
    assert meta["threads"] == 384
