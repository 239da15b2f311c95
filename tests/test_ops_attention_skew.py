"""``AttnConfig(skew=True)``: the second consumer passes its first issue turn and so runs one turn
behind the first for the whole launch (the first passes one turn back at the end), so that an
item's first softmax of either consumer runs beside the other's products instead of beside idle
tensor cores.  Opt-in, unmeasured on a GPU yet (docs/performance.md, session 29).  The forward on
the interpreter against float64 (whose named barriers block as bar.sync does: a turn count that
does not balance deadlocks there), the refusals, sm_90a compiles, and the GPU."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from attention_checks import check_attention, poison_fresh_tensors

from tlxc.ops.attention import attention_forward, choose_config, compile_config, reference


@pytest.fixture
def poisoned(monkeypatch):
    poison_fresh_tensors(monkeypatch)


def _randn(*shape, seed, device="cpu"):
    return torch.randn(*shape, generator=torch.Generator(device=device).manual_seed(seed), device=device).bfloat16()


def _skewed(D, causal, S, stages=None, varlen=False):
    # skew is a two-consumer schedule: from the default's tiles (four consumers for dense causal D = 64
    # from S = 512 since session 35) at 128 rows
    c = dataclasses.replace(choose_config(D, causal, S, varlen=varlen), skew=True, block_m=128)
    return dataclasses.replace(c, stages=stages) if stages else c


CASES = [  # B, H, Hkv, S, D, causal, stages (None: the default's)
    (2, 4, 2, 256, 64, False, None),     # two key blocks an item
    (2, 4, 2, 256, 64, False, 3),
    (2, 4, 2, 256, 64, True, None),      # 64-key blocks with diag_skip's passed turns
    (1, 2, 1, 70, 64, True, 3),          # one partial block
    (1, 2, 2, 300, 128, False, None),
    (1, 2, 2, 200, 256, True, None),     # two O halves
]


@pytest.mark.parametrize("B,H,Hkv,S,D,causal,stages", CASES, ids=str)
def test_skewed_consumers_match_float64(B, H, Hkv, S, D, causal, stages, poisoned):
    q, k, v = _randn(B, H, S, D, seed=1), _randn(B, Hkv, S, D, seed=2), _randn(B, Hkv, S, D, seed=3)
    o, lse = attention_forward(q, k, v, causal=causal, config=_skewed(D, causal, S, stages))
    check_attention(o, lse, *reference(q, k, v, causal=causal), torch.bfloat16)


def test_skewed_varlen_with_empty_and_one_row_sequences(poisoned):
    cu = torch.tensor([0, 37, 38, 38, 290], dtype=torch.int32)
    q, kv = _randn(290, 4, 64, seed=4), _randn(290, 2, 64, seed=5)
    o, lse = attention_forward(q, kv, kv, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu,
                               config=_skewed(64, True, 252, varlen=True))
    check_attention(o, lse, *reference(q, kv, kv, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu), torch.bfloat16)


@pytest.mark.parametrize("change,message", [({"block_m": 192}, "skew takes two consumers"),
                                            ({"overlap": True}, "and no overlap")])
def test_skew_needs_two_consumers_and_no_overlap(change, message):
    q = torch.zeros(1, 2, 64, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=message):
        attention_forward(q, q, q, config=dataclasses.replace(_skewed(64, False, 64), **change))


@pytest.mark.parametrize("S,D,causal,stages", [(256, 64, False, 3), (256, 64, True, None), (1024, 128, True, None),
                                               (512, 256, False, None)])
def test_skewed_configurations_compile_without_spills(S, D, causal, stages):
    q = torch.empty(16, 16, S, D, dtype=torch.bfloat16)
    (h,) = compile_config(q, q, q, causal=causal, config=_skewed(D, causal, S, stages))
    assert h.n_spills == 0 and not h.perf_warnings


@pytest.mark.gpu
@pytest.mark.parametrize("S,D,causal,stages", [(256, 64, False, None), (256, 64, False, 3), (256, 64, True, None),
                                               (1000, 64, True, 3), (1024, 128, False, None), (600, 256, True, None)])
def test_gpu_skewed_consumers_match_float64(S, D, causal, stages, poisoned):
    q, k, v = (_randn(4, h, S, D, seed=10 + i, device="cuda") for i, h in enumerate((8, 2, 2)))
    o, lse = attention_forward(q, k, v, causal=causal, config=_skewed(D, causal, S, stages))
    check_attention(o, lse, *reference(q, k, v, causal=causal), torch.bfloat16)
