"""examples/hopper_gemm_fp8.py (e4m3 inputs, K-major B through local_trans,
m64n256k32 wgmma, per-tensor scales, bf16 out) on the interpreter against a
float64 reference, clean under ``tlxc check``, compiled to a cubin for sm_90a;
and the compile error for an fp8 operand that is not K-major.  The GPU runs
are in tests/test_gpu_gemm.py and the example's main()."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tlxc
import tlxc.cli
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.frontend.specialize import specialization_from_args
from tlxc.language import tlx

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hopper_gemm_fp8.py"
sys.path.insert(0, str(EXAMPLE.parent))
import hopper_gemm_fp8 as F


@pytest.mark.parametrize("shape", [(256, 384, 512), (200, 264, 336)], ids=lambda s: "x".join(map(str, s)))
def test_interpreter_matches_a_float64_reference(shape):
    M, N, K = shape
    a, b_nk, sa, sb = F.fp8_inputs(M, N, K, "cpu", torch.Generator().manual_seed(M + N + K))
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    kernel = F.matmul_fp8_kernel
    F.matmul_fp8_kernel = tlxc.interpret(kernel)
    try:
        F.matmul_fp8(a, b_nk, sa, sb, out, num_stages=2, sms=3)
    finally:
        F.matmul_fp8_kernel = kernel
    ref = (a.double() @ b_nk.double().t()) * (sa.double() * sb.double())
    assert torch.isfinite(out.float()).all()
    error = ((out.double() - ref).norm() / ref.norm()).item()
    assert error < torch.finfo(torch.bfloat16).eps      # inputs are exact: only the bf16 rounding is left


def test_check_finds_nothing(capsys):
    assert tlxc.cli.main(["check", str(EXAMPLE)]) == 0
    assert tlxc.cli.main(["check", "--run", str(EXAMPLE)]) == 0
    assert capsys.readouterr().err == ""


def _spec(kernel, args: dict):
    for name, param in kernel.signature.parameters.items():
        args.setdefault(name, param.default)
    return specialization_from_args(kernel, args)


def test_compiles_for_sm90a_with_fp8_wgmma():
    _, args, _ = F.check_inputs()
    spec = _spec(F.matmul_fp8_kernel, dict(zip(F.matmul_fp8_kernel.param_names, args)))
    compiled = compile_kernel(F.matmul_fp8_kernel, spec, arch="sm_90a", num_warps=4,
                              stages=("ir", "ir.opt", "cuda", "ptx", "cubin", "stats"))
    assert "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" in compiled.asm["ptx"]
    assert compiled.metadata["spills_bytes"] == 0, compiled.metadata.get("ptxas_log")


@tlxc.kernel
def _fp8_b_n_major(out: tl.pointer_type(tl.float32)):
    a = tlx.local_alloc((64, 128), tl.float8e4nv, 1)
    b = tlx.local_alloc((128, 64), tl.float8e4nv, 1)          # [K, N]: N-major, not allowed for fp8
    acc = tlx.async_dot(a[0], b[0], tl.zeros((64, 64), dtype=tl.float32))
    acc = tlx.async_dot_wait(0, acc)
    offs = tl.arange(0, 64)
    tl.store(out + offs[:, None] * 64 + offs[None, :], acc)


def test_fp8_operand_must_be_k_major():
    spec = _spec(_fp8_b_n_major, {"out": torch.empty(64, 64)})
    with pytest.raises(tlxc.CompilationError, match=r"K-major only, but B is N-major.*tlx.local_trans") as info:
        compile_kernel(_fp8_b_n_major, spec, arch="sm_90a", num_warps=4)
    line = next(i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1)
                if "tlx.async_dot(a[0], b[0]" in text)
    assert f"test_hopper_gemm_fp8.py:{line}:" in str(info.value)
