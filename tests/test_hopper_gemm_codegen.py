"""The warp-specialized Hopper GEMM (examples/hopper_gemm_ws.py) compiles to a
cubin for sm_90a with wgmma and TMA, and its generated CUDA is snapshotted for
review (regenerate with TLXC_UPDATE_SNAPSHOTS=1).  It has not run on a GPU yet:
tests/test_gpu_gemm.py is the GPU check (marked)."""
from __future__ import annotations

import difflib
import os
import re
import sys
from pathlib import Path

import pytest

import tlxc
from tlxc.compiler import compile_kernel

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import hopper_gemm_ws as G
from gemm_examples import launch_spec

SNAPSHOT = ROOT / "tests" / "snapshots" / "wgmma" / "hopper_gemm_ws.cu"


def _spec():
    return launch_spec(G.matmul_ws_kernel, [64, 64], [64, 64], [64, 64])


def test_compiles_for_sm90a_with_wgmma_and_tma():
    compiled = compile_kernel(G.matmul_ws_kernel, _spec(), arch="sm_90a", num_warps=4,
                              stages=("ir", "ir.opt", "cuda", "ptx", "cubin", "stats"))
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    ptx = compiled.asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in ptx
    assert "cp.async.bulk.tensor.2d" in ptx and "setmaxnreg" in ptx
    meta = compiled.metadata
    assert meta["spills_bytes"] == 0, meta.get("ptxas_log")
    assert meta["threads"] == 384


def test_four_stages_fit_with_a_subtiled_epilogue():
    """4 stages of 48 KB need the C tile halved: EPILOGUE_SUBTILE=2 fits in 227 KB, the
    accumulator's halves are picked from registers (no layout conversion), no spills."""
    spec = _spec()
    spec.params["NUM_STAGES"] = ("constexpr", 4)
    spec.params["EPILOGUE_SUBTILE"] = ("constexpr", 2)
    compiled = compile_kernel(G.matmul_ws_kernel, spec, arch="sm_90a", num_warps=4)
    meta = compiled.metadata
    assert meta["spills_bytes"] == 0 and meta["shared_bytes"] <= 232448
    assert "tl.convert_layout" not in compiled.asm["ir.opt"]


def test_sm100a_needs_a_tensor_memory_accumulator():
    with pytest.raises(tlxc.CompilationError, match="on Blackwell .sm_100a. async_dot accumulates in tensor memory"):
        compile_kernel(G.matmul_ws_kernel, _spec(), arch="sm_100a", num_warps=4)


def test_cuda_snapshot():
    source = compile_kernel(G.matmul_ws_kernel, _spec(), arch="sm_90a", num_warps=4).asm["cuda"]
    source = re.sub(r"tlxc \S+ for", "tlxc <version> for", source)
    if os.environ.get("TLXC_UPDATE_SNAPSHOTS") == "1" or not SNAPSHOT.exists():
        SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
        SNAPSHOT.write_text(source)
    expected = SNAPSHOT.read_text()
    if source != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), source.splitlines(True), "snapshot", "now"))
        pytest.fail(f"hopper_gemm_ws CUDA changed:\n{diff}\nregenerate with TLXC_UPDATE_SNAPSHOTS=1")
