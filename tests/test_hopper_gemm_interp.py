"""examples/hopper_gemm_ws.py (TMA producer, two wgmma consumers, persistent
grid) on the interpreter against a float32 reference, and clean under
``tlxc check``.  The GPU run is in the example's main() and the device tests."""
from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest
import torch

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hopper_gemm_ws.py"
sys.path.insert(0, str(EXAMPLE.parent))
import hopper_gemm_ws as G
from gemm_examples import run_on_interpreter


@pytest.mark.parametrize("shape", [(256, 384, 512), (200, 264, 320)], ids=lambda s: "x".join(map(str, s)))
def test_interpreter_matches_a_float32_reference(shape):
    M, N, _ = shape
    out, ref = run_on_interpreter(G, "matmul_ws_kernel", G.matmul_ws, shape, M * 7 + N, num_stages=3, sms=3)
    assert torch.isfinite(out.float()).all()
    error = ((out.float() - ref).norm() / ref.norm()).item()
    assert error < 2 * torch.finfo(torch.bfloat16).eps      # bf16 output rounding is ~0.4 eps


@pytest.mark.parametrize("subtile", [1, 2])
def test_subtiled_epilogue_matches_a_float32_reference(subtile):
    """EPILOGUE_SUBTILE=2: the accumulator split in halves through a half-size C tile
    (which leaves room for a fourth stage); the interpreter checks that the second half
    is written only after the first half's TMA store has read the tile."""
    out, ref = run_on_interpreter(G, "matmul_ws_kernel", G.matmul_ws, (200, 520, 320), 7,
                                  num_stages=4 if subtile == 2 else 3, epilogue_subtile=subtile, sms=3)
    assert torch.isfinite(out.float()).all()
    assert ((out.float() - ref).norm() / ref.norm()).item() < 2 * torch.finfo(torch.bfloat16).eps


@pytest.mark.parametrize("shape", [(200, 520, 320), (520, 256, 192)], ids=lambda s: "x".join(map(str, s)))
def test_pairs_sharing_b_match_a_float32_reference(shape):
    """cluster_m=2: pairs of CTAs on vertically adjacent tiles, each loading half of the
    shared B tile and multicasting it (200 rows: the second CTA's tile is past M)."""
    out, ref = run_on_interpreter(G, "matmul_ws_kernel", G.matmul_ws, shape, 11, num_stages=3, cluster_m=2,
                                  block_n=128, sms=4)
    assert torch.isfinite(out.float()).all()
    assert ((out.float() - ref).norm() / ref.norm()).item() < 2 * torch.finfo(torch.bfloat16).eps


def test_check_finds_nothing():
    # Descriptor parameters have no ``tlxc check`` command-line spelling yet, so
    # the kernel is specialized from the example's check_inputs() launch.
    from tlxc.check import check_kernel
    from tlxc.compiler import frontend
    from tlxc.frontend.specialize import specialization_from_args
    _grid, args, kwargs = G.check_inputs()
    for sms, stages in ((2, 2), (132, 4)):
        defaults = {name: p.default for name, p in inspect.signature(G.matmul_ws_kernel.fn).parameters.items()
                    if p.default is not inspect.Parameter.empty}
        bound = dict(defaults, **dict(zip(G.matmul_ws_kernel.param_names, args)), **dict(kwargs, NUM_STAGES=stages,
                                                                                         NUM_SMS=sms))
        spec = specialization_from_args(G.matmul_ws_kernel, bound)
        module = frontend(G.matmul_ws_kernel, spec)       # the static checks need no layouts
        assert [f for kernel in module.kernels for f in check_kernel(kernel)] == []


@pytest.mark.parametrize("shape", [(0, 64, 64), (64, 0, 64), (64, 64, 0)], ids=lambda s: "x".join(map(str, s)))
def test_empty_problems_need_no_launch(shape):
    """TMA cannot describe an empty tensor: the wrappers answer without a launch, and
    K = 0 gives zeros (as torch.matmul does)."""
    import hopper_gemm_fp8
    import hopper_gemm_ws_pingpong
    M, N, K = shape
    for matmul in (G.matmul_ws, hopper_gemm_ws_pingpong.matmul_ws_pingpong):
        out = matmul(torch.randn(M, K).to(torch.bfloat16), torch.randn(K, N).to(torch.bfloat16))
        assert out.shape == (M, N) and not out.float().abs().sum()
    a, b_nk, sa, sb = hopper_gemm_fp8.fp8_inputs(M, N, K, "cpu")
    out = hopper_gemm_fp8.matmul_fp8(a, b_nk, sa, sb)
    assert out.shape == (M, N) and not out.float().abs().sum()


def test_out_of_the_wrong_shape_is_refused():
    a = torch.randn(64, 64).to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"'out' must be a \(64, 64\) torch.bfloat16 tensor"):
        G.matmul_ws(a, a, torch.empty(64, 32, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="'out' must be"):
        G.matmul_ws(a, a, torch.empty(64, 64, dtype=torch.float16))
