"""tlxc.ops.attention's sliding windows (``window=(left, right)``, flash-attn's ``window_size``)
and logit softcapping (``softcap``) on the CPU interpreter, against float64 math: dense and
varlen, causal or not, GQA, lengths that are not multiples of the blocks, rows that see no key
(o = 0, lse = -inf); key blocks outside every window are not read; the arguments are checked."""
from __future__ import annotations

import importlib

import pytest
import torch
from attention_checks import TOL, check_attention, check_op_gradients, poison_fresh_tensors

import tlxc.ops
from tlxc.ops.attention import attention_forward, compile_config, reference

A = importlib.import_module("tlxc.ops.attention")       # the module (tlxc.ops.attention is the function)


@pytest.fixture
def poisoned(monkeypatch):
    poison_fresh_tensors(monkeypatch)


def _randn(*shape, seed, dtype=torch.bfloat16, scale=1.0):
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale).to(dtype)


_check = check_attention


WINDOWS = [  # B, H, Hkv, Sq, Sk, D, causal, window
    (1, 2, 1, 200, 200, 64, True, (50, 0)),       # Mistral-style: causal, keys i-50 .. i
    (1, 2, 2, 130, 300, 64, False, (70, 20)),      # both sides, Sq < Sk
    (1, 4, 1, 300, 90, 64, False, (20, 5)),        # Sq > Sk: rows past 110 see no key
    (1, 2, 1, 257, 257, 128, False, (-1, 30)),     # right side only
    (1, 2, 1, 257, 257, 128, True, (130, -1)),     # left side only (causal bounds the right)
    (1, 2, 1, 200, 200, 256, True, (70, 0)),       # 64-key blocks, each consumer stops at its diagonal
    (1, 2, 1, 150, 150, 96, False, (0, 0)),        # the diagonal alone
]


@pytest.mark.parametrize("B,H,Hkv,Sq,Sk,D,causal,window", WINDOWS, ids=str)
def test_window_matches_float64(B, H, Hkv, Sq, Sk, D, causal, window, poisoned):
    q, k, v = (_randn(B, h, s, D, seed=i) for i, (h, s) in enumerate(((H, Sq), (Hkv, Sk), (Hkv, Sk))))
    o, lse = attention_forward(q, k, v, causal=causal, window=window)
    _check(o, lse, *reference(q, k, v, causal=causal, window=window), torch.bfloat16)
    full, _ = reference(q, k, v, causal=causal)
    assert (o.double() - full).abs().max() > 0.1, "the window changed nothing: the test cannot tell"


@pytest.mark.parametrize("window,causal", [(None, False), (None, True), ((40, 10), False)], ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_softcap_matches_float64(window, causal, dtype, poisoned):
    q = _randn(1, 2, 150, 64, seed=1, dtype=dtype, scale=4.0)       # large scores: the cap bites
    k, v = _randn(1, 1, 170, 64, seed=2, dtype=dtype), _randn(1, 1, 170, 64, seed=3, dtype=dtype)
    o, lse = attention_forward(q, k, v, causal=causal, window=window, softcap=3.0)
    _check(o, lse, *reference(q, k, v, causal=causal, window=window, softcap=3.0), dtype)
    uncapped, _ = reference(q, k, v, causal=causal, window=window)
    assert (o.double() - uncapped).abs().max() > 0.1, "the cap changed nothing: the test cannot tell"


@pytest.mark.parametrize("order", A.VARLEN_ORDERS)
@pytest.mark.parametrize("causal,window", [(True, (37, 0)), (False, (20, 45))], ids=str)
def test_varlen_window(causal, window, order, poisoned):
    lens_q, lens_k = [70, 0, 200, 129], [70, 5, 150, 300]
    cu_q = torch.tensor([0] + torch.tensor(lens_q).cumsum(0).tolist(), dtype=torch.int32)
    cu_k = torch.tensor([0] + torch.tensor(lens_k).cumsum(0).tolist(), dtype=torch.int32)
    q = _randn(sum(lens_q), 4, 64, seed=1)
    k, v = _randn(sum(lens_k), 2, 64, seed=2), _randn(sum(lens_k), 2, 64, seed=3)
    o, lse = attention_forward(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, window=window,
                               softcap=20.0, varlen_order=order)
    _check(o, lse, *reference(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, window=window,
                              softcap=20.0), torch.bfloat16)


def test_blocks_outside_every_window_are_not_read(poisoned):
    """Keys past the last row's window are NaN: a kernel that multiplied their blocks (even with
    p = 0) would write NaN."""
    Sq, Sk, D = 128, 1000, 64
    q, k, v = _randn(1, 2, Sq, D, seed=1), _randn(1, 1, Sk, D, seed=2), _randn(1, 1, Sk, D, seed=3)
    k[:, :, 256:] = float("nan")                       # rows 0..127 with right = 100 see keys < 228
    v[:, :, 256:] = float("nan")
    o, lse = attention_forward(q, k, v, window=(-1, 100))
    _check(o, lse, *reference(q[..., :], k[:, :, :256], v[:, :, :256], window=(-1, 100)), torch.bfloat16)


def test_schedule_counts_the_window_s_blocks():
    """The dense schedule balances programs by the key blocks an item visits: a right-bounded
    window (keys up to the diagonal, not causal-masked: item m visits m + 1 blocks) balances
    within one block of work per program; weighing every item as the whole row (no window)
    leaves 27 against 18."""
    blocks = [m + 1 + 1 for m in range(12)]             # the item's blocks + its prologue/epilogue

    def loads(table):
        return sorted(sum(blocks[i] for i in table[p, 1:1 + table[p, 0]].tolist()) for p in range(table.shape[0]))
    assert loads(A.schedule(1536, 1536, 1, 128, 128, False, 4, 16, window=(-1, 0))) == [21, 22, 23, 24]
    assert loads(A.schedule(1536, 1536, 1, 128, 128, False, 4, 16)) == [18, 21, 24, 27]


def test_no_window_is_the_default_kernel():
    q, k, v = _randn(1, 2, 90, 64, seed=1), _randn(1, 1, 90, 64, seed=2), _randn(1, 1, 90, 64, seed=3)
    o0, lse0 = attention_forward(q, k, v, causal=True)
    o1, lse1 = attention_forward(q, k, v, causal=True, window=(-1, -1), softcap=None)
    assert torch.equal(o0, o1) and torch.equal(lse0, lse1)
    o2, _ = attention_forward(q, k, v, causal=True, window=(200, 7))   # wider than the sequence, right: causal
    assert torch.equal(o0, o2)


def test_public_op_takes_scale_window_softcap():
    q, k, v = _randn(1, 2, 80, 64, seed=1), _randn(1, 2, 80, 64, seed=2), _randn(1, 2, 80, 64, seed=3)
    o = tlxc.ops.attention(q, k, v, causal=True, scale=0.2, window=(15, 0), softcap=5.0)
    ref, _ = reference(q, k, v, causal=True, sm_scale=0.2, window=(15, 0), softcap=5.0)
    assert (o.double() - ref).abs().max() < TOL[torch.bfloat16]
    assert torch.equal(o, tlxc.ops.attention(q, k, v, causal=True, sm_scale=0.2, window=(15, 0), softcap=5.0))


@pytest.mark.parametrize("kwargs,message", [
    ({"window": 5}, "'window' must be a pair of ints"),
    ({"window": (1, 2, 3)}, "'window' must be a pair of ints"),
    ({"window": (1.5, 2)}, "'window' must be a pair of ints"),
    ({"window": (True, 2)}, "'window' must be a pair of ints"),
    ({"window": (-2, 0)}, "'window' sides must be >= 0, or -1"),
    ({"softcap": 0.0}, "'softcap' must be a positive finite number"),
    ({"softcap": -1.0}, "'softcap' must be a positive finite number"),
    ({"softcap": float("inf")}, "'softcap' must be a positive finite number"),
    ({"softcap": True}, "'softcap' must be a positive finite number"),
    ({"scale": 0.1, "sm_scale": 0.1}, "'scale' (0.1) and 'sm_scale' (0.1) are one argument"),
])
def test_bad_arguments_are_named(kwargs, message):
    q = torch.zeros(1, 1, 8, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError) as err:
        tlxc.ops.attention(q, q, q, **kwargs)
    assert message in str(err.value)
    if "scale" not in kwargs:
        with pytest.raises(ValueError, match="window|softcap"):
            attention_forward(q, q, q, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("D,causal,S,window,softcap", [
    (64, True, 4096, (1023, 0), None), (128, False, 2048, (255, 255), 30.0), (256, True, 2048, (511, 0), 50.0),
    (64, False, 4096, None, 50.0), (64, True, 256, (100, 0), None)], ids=str)
def test_window_and_softcap_compile_for_sm90a_without_spills(D, causal, S, window, softcap):
    q, k = torch.empty(2, 8, S, D, dtype=torch.bfloat16), torch.empty(2, 2, S, D, dtype=torch.bfloat16)
    handles = compile_config(q, k, k, causal=causal, window=window, softcap=softcap)
    assert handles and all(h.n_spills == 0 for h in handles)


@pytest.mark.parametrize("causal,window,softcap", [(True, (40, 0), None), (False, (25, 60), 4.0), (True, None, 2.0)],
                         ids=str)
def test_autograd_through_the_op(causal, window, softcap):
    """tlxc.ops.attention's gradients (the backward takes the window and the cap) against float64 autograd."""
    q0, k0, v0 = _randn(1, 4, 150, 64, seed=1, scale=2.0), _randn(1, 2, 170, 64, seed=2), _randn(1, 2, 170, 64, seed=3)
    check_op_gradients(q0, k0, v0, _randn(*q0.shape, seed=4), causal=causal, window=window, softcap=softcap)


@pytest.mark.parametrize("config", [A.AttnConfig(64, 128, 128, 2, 2, True), A.AttnConfig(64, 192, 128, 2, 2, True),
                                    A.AttnConfig(64, 128, 64, 4, 2, prefetch=2, tma_store=True)],
                         ids=["overlap", "overlap192", "prefetch_tma64"])
@pytest.mark.parametrize("causal,window,softcap", [(False, (20, 5), None), (True, (100, 0), 3.0)], ids=str)
def test_window_in_the_opt_in_configurations(config, causal, window, softcap, poisoned):
    """The opt-in schedules (the last P V overlapped with the next item, 192-row items, L2 prefetch
    of the next item's first blocks with 64-key blocks) under a window: rows without keys included."""
    q = _randn(1, 2, 300, 64, seed=1)
    k, v = (_randn(1, 1, 300 if causal else 90, 64, seed=s) for s in (2, 3))
    o, lse = attention_forward(q, k, v, causal=causal, window=window, softcap=softcap, config=config, programs=2)
    _check(o, lse, *reference(q, k, v, causal=causal, window=window, softcap=softcap), torch.bfloat16)
