"""``AttnConfig(s1_ahead=True)``: an item's first issue turn issues ``S_1 = Q K_1^T`` behind ``S_0``, so the
first block's softmax runs while ``S_1`` is computed, and block 1's turn issues ``P_0 V_0`` alone
(``S1_AHEAD`` in ``attn_fwd_kernel``).  It applies where every consumer has two key blocks or more:
dense launches without a causal mask or a window whose keys fill more than one block.  The default at
S <= 256, D <= 64 without a mask (H100: 0.96-0.98 of the time there; slower elsewhere).

The forward on the interpreter against float64 (its named barriers block as ``bar.sync`` does, so a
turn count that does not balance deadlocks), where the launch applies it and where not, the refusal
next to ``overlap``, sm_90a compiles without spills, and the GPU."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from attention_checks import check_attention, check_fp8_attention, fp8_inputs, poison_fresh_tensors

from tlxc.ops.attention import attention_forward, choose_config, compile_config, reference


@pytest.fixture
def poisoned(monkeypatch):
    poison_fresh_tensors(monkeypatch)


def _randn(*shape, seed, device="cpu"):
    return torch.randn(*shape, generator=torch.Generator(device=device).manual_seed(seed), device=device).bfloat16()


def _ahead(D, S, **change):
    return dataclasses.replace(choose_config(D, False, S), s1_ahead=True, **change)


CASES = [  # B, H, Hkv, Sq, Sk, D
    (2, 4, 2, 256, 256, 64),     # two key blocks an item: the loop after block 1 does not run
    (1, 2, 2, 100, 129, 128),    # block 1 holds one key (the rest masked), one query item
    (1, 2, 1, 300, 520, 40),     # five blocks, D off the tile
    (1, 2, 2, 200, 200, 256),    # 64-key blocks, two O halves
    (1, 2, 2, 130, 450, 192),
]


@pytest.mark.parametrize("B,H,Hkv,Sq,Sk,D", CASES, ids=str)
def test_s1_ahead_matches_float64(B, H, Hkv, Sq, Sk, D, poisoned):
    q, k, v = _randn(B, H, Sq, D, seed=1), _randn(B, Hkv, Sk, D, seed=2), _randn(B, Hkv, Sk, D, seed=3)
    c = _ahead(D, Sq)
    assert c.issues_s1_ahead(False, False, False, Sk)
    o, lse = attention_forward(q, k, v, config=c)
    check_attention(o, lse, *reference(q, k, v), torch.bfloat16)


def test_s1_ahead_with_pointer_stores_softcap_and_pinned_softmax(poisoned):
    q, k, v = _randn(1, 4, 190, 64, seed=4), _randn(1, 1, 300, 64, seed=5), _randn(1, 1, 300, 64, seed=6)
    c = _ahead(64, 190, tma_store=False, pin_softmax=True)
    o, lse = attention_forward(q, k, v, config=c, softcap=15.0)
    check_attention(o, lse, *reference(q, k, v, softcap=15.0), torch.bfloat16)


@pytest.mark.parametrize("D", [64, 128])
def test_s1_ahead_fp8(D, poisoned):
    q, k, v = fp8_inputs((1, 4, 150, D), (1, 2, 260, D), torch.float8_e4m3fn, seed=7)
    c = dataclasses.replace(choose_config(D, False, 150, fp8=True), s1_ahead=True)
    o, lse = attention_forward(q, k, v, config=c, q_descale=0.5, v_descale=2.0)
    check_fp8_attention(o, lse, q, k, v, descales=(0.5, 1.0, 2.0))


def test_s1_ahead_applies_only_where_every_consumer_has_two_blocks():
    c = _ahead(64, 256)
    assert c.issues_s1_ahead(False, False, False, 129)
    assert not c.issues_s1_ahead(False, False, False, 128)     # one key block
    assert not c.issues_s1_ahead(True, False, False, 4096)     # causal: the first item has one
    assert not c.issues_s1_ahead(False, True, False, 4096)     # varlen: a sequence may be short
    assert not c.issues_s1_ahead(False, False, True, 4096)     # a window: an item may see one block



@pytest.mark.parametrize("D,causal,S,default", [(64, False, 256, True), (40, False, 200, True), (64, False, 512, False),
                                                (128, False, 256, False), (64, True, 256, False),
                                                (256, False, 256, False)])
def test_the_default_issues_s1_ahead_at_short_unmasked_d64(D, causal, S, default):
    """Where the H100 measured it faster (S <= 256, D <= 64, no mask: 0.96-0.98 of the time)."""
    assert choose_config(D, causal, S).s1_ahead is default
    assert not choose_config(D, causal, S, varlen=True).s1_ahead
    assert not choose_config(D, causal, S, fp8=True).s1_ahead        # not timed in fp8


@pytest.mark.parametrize("Sk,causal,window,applies", [(256, False, None, True), (128, False, None, False),
                                                     (256, True, None, False), (256, False, (64, 64), False)])
def test_the_launch_passes_s1_ahead_where_it_applies(Sk, causal, window, applies, poisoned):
    q, k = torch.zeros(1, 2, 128, 64, dtype=torch.bfloat16), torch.zeros(1, 2, Sk, 64, dtype=torch.bfloat16)
    (h,) = compile_config(q, k, k, causal=causal, window=window, config=_ahead(64, 128))
    assert h.constexprs["S1_AHEAD"] is applies
    q, k, v = _randn(1, 2, 128, 64, seed=8), _randn(1, 2, Sk, 64, seed=9), _randn(1, 2, Sk, 64, seed=10)
    o, lse = attention_forward(q, k, v, causal=causal, window=window, config=_ahead(64, 128))
    check_attention(o, lse, *reference(q, k, v, causal=causal, window=window), torch.bfloat16)


def test_s1_ahead_refuses_overlap():
    q = torch.zeros(1, 2, 256, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="s1_ahead and overlap"):
        attention_forward(q, q, q, config=_ahead(64, 256, overlap=True, diag_skip=False))


@pytest.mark.parametrize("S,D,fp8", [(256, 64, False), (1024, 128, False), (512, 256, False), (512, 128, True)])
def test_s1_ahead_compiles_without_spills(S, D, fp8):
    dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
    q = torch.empty(16, 16, S, D, dtype=dtype)
    config = dataclasses.replace(choose_config(D, False, S, fp8=fp8), s1_ahead=True)
    h = compile_config(q, q, q, config=config, **({"out_dtype": torch.bfloat16} if fp8 else {}))[-1]
    assert h.constexprs["S1_AHEAD"] is True
    assert h.n_spills == 0 and not h.perf_warnings


@pytest.mark.gpu
@pytest.mark.parametrize("Sq,Sk,D,Hkv", [(256, 256, 64, 8), (256, 256, 64, 2), (1000, 1000, 128, 2), (77, 300, 128, 8),
                                         (600, 600, 256, 2), (512, 512, 96, 8)])
def test_gpu_s1_ahead_matches_float64(Sq, Sk, D, Hkv, poisoned):
    q = _randn(4, 8, Sq, D, seed=10, device="cuda")
    k, v = (_randn(4, Hkv, Sk, D, seed=11 + i, device="cuda") for i in range(2))
    c = _ahead(D, Sq)
    assert c.issues_s1_ahead(False, False, False, Sk)
    o, lse = attention_forward(q, k, v, config=c)
    check_attention(o, lse, *reference(q, k, v), torch.bfloat16)
