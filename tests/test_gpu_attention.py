"""FlashAttention forward (examples/flash_attention_fwd.py) on the GPU against a
float64 reference: odd sequence lengths, causal and not, D = 64 and 128, bf16
and fp16, O and the log-sum-exp (marked gpu)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("B,H,S,D", [(1, 2, 1000, 128), (2, 3, 4097, 64), (1, 2, 64, 128), (1, 1, 1, 64)])
def test_attention_matches_float64(B, H, S, D, causal, dtype):
    from flash_attention_fwd import attention, reference
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dtype) for _ in range(3))
    o, lse = attention(q, k, v, causal)
    ref_o, ref_lse = reference(q, k, v, causal)
    assert torch.isfinite(o).all() and torch.isfinite(lse).all()
    eps = torch.finfo(dtype).eps
    assert ((o.double() - ref_o).norm() / ref_o.norm()).item() < eps
    assert (lse.double() - ref_lse).abs().max().item() < 1e-3


def test_neighbouring_heads_do_not_leak():
    """A NaN in one head must not reach another head's output: the last key block of
    each head is clipped at S by the 3-D descriptors, not read from the next head."""
    from flash_attention_fwd import attention
    q, k, v = (torch.randn(1, 2, 200, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    v[:, 1] = float("nan")
    k[:, 1] = float("nan")
    o, _ = attention(q, k, v)
    assert torch.isfinite(o[:, 0]).all()


@pytest.mark.parametrize("programs,group_h", [(1, 16), (7, 1), (1000, 2)])
def test_any_number_of_persistent_programs(programs, group_h):
    """One program walking every item (Q buffers and the K/V ring wrap many times), a few,
    and more programs than items."""
    from flash_attention_fwd import attention, reference
    q, k, v = (torch.randn(2, 3, 700, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        o, lse = attention(q, k, v, causal, programs=programs, group_h=group_h)
        ref_o, ref_lse = reference(q, k, v, causal)
        assert ((o.double() - ref_o).norm() / ref_o.norm()).item() < torch.finfo(torch.bfloat16).eps
        assert (lse.double() - ref_lse).abs().max().item() < 1e-3


def test_cuda_graph_capture_after_a_warm_up_call():
    """The schedule table is built by the first call for a shape (a host copy, not allowed
    while capturing): captured after a warm-up call, the graph replays correctly; captured
    first, the call says what to do."""
    from flash_attention_fwd import attention, reference
    q, k, v = (torch.randn(1, 2, 333, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    attention(q, k, v, True)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o, _ = attention(q, k, v, True)
    for t in (q, k, v):
        t.copy_(torch.randn_like(t))
    graph.replay()
    torch.cuda.synchronize()
    ref_o, _ = reference(q, k, v, True)
    assert ((o.double() - ref_o).norm() / ref_o.norm()).item() < torch.finfo(torch.bfloat16).eps
    q2 = torch.randn(1, 2, 334, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="call attention once with these shapes before capturing"), \
            torch.cuda.graph(torch.cuda.CUDAGraph()):
        attention(q2, q2, q2, True)
