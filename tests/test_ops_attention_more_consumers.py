"""The attention forward with more consumer warp groups than the defaults had: four at head dim 64
(``AttnConfig(block_m=256)``: 256-row items of 64-key blocks, each K/V block read by four consumers of 64
rows, 112 registers each; the default for dense causal launches from S = 512) and three at tile width 128
(``block_m=192`` with 64-key blocks, 160 registers each; opt-in).  Against float64 math on the interpreter
(odd lengths, a causal mask, GQA, a window, a packed batch, the O tile TMA-stored, ``s1_ahead``), on the
CUDA text's emulation, on the GPU, their sm_90a compiles without spills, and the configurations refused."""
from __future__ import annotations

import dataclasses
import importlib

import pytest
import torch

from tlxc.ops.attention import AttnConfig, attention_forward, choose_config, compile_config, reference


def _four(causal, S, **kw):
    base = {"block_m": 256, "block_n": 64, "stages": 3, "q_bufs": 1, "s1_ahead": False, "tma_store": False}
    return dataclasses.replace(choose_config(64, causal, S), **{**base, **kw})


def _inputs(B, H, Hkv, S, D=64, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, S, D, generator=g).to(torch.bfloat16).to(device)
    k, v = (torch.randn(B, Hkv, S, D, generator=g).to(torch.bfloat16).to(device) for _ in range(2))
    return q, k, v


def _close(o, lse, ro, rl):
    assert (o.double() - ro).abs().max() < 2e-2 * ro.abs().max()
    assert torch.allclose(lse.double(), rl, atol=1e-2, rtol=1e-3)


@pytest.mark.parametrize("S,causal,Hkv,window,kw", [
    (256, False, 2, None, {}),
    (300, False, 1, None, {"tma_store": True}),              # the last item's rows past S: TMA clips them
    (520, True, 2, None, {}),                                # the diagonal inside each consumer's rows
    (700, False, 2, None, {"s1_ahead": True, "q_bufs": 2}),
    (333, False, 2, (100, 20), {}),
    (40, False, 2, None, {}),                                # fewer keys than one block, rows for one consumer
], ids=str)
def test_four_consumers_match_float64(S, causal, Hkv, window, kw):
    """Each consumer's 64 rows against float64 math: rows and keys past S masked, a causal mask whose
    diagonal crosses every consumer's rows, two q heads on one k/v head, a sliding window."""
    q, k, v = _inputs(1, 2, Hkv, S, seed=S)
    o, lse = attention_forward(q, k, v, causal=causal, window=window, config=_four(causal, S, **kw), programs=3)
    _close(o, lse, *reference(q, k, v, causal=causal, window=window))


@pytest.mark.parametrize("window,softcap", [((100, 0), None), (None, 30.0), ((300, 0), 50.0)], ids=str)
def test_the_causal_default_with_windows_and_softcaps(window, softcap):
    """The four-consumer default of causal D = 64 launches (S = 700: 768 rows either way) under a sliding
    window (items visit only the key blocks their rows see) and logit softcapping."""
    q, k, v = _inputs(1, 2, 1, 700, seed=11)
    assert choose_config(64, True, 700).block_m == 256
    o, lse = attention_forward(q, k, v, causal=True, window=window, softcap=softcap, programs=3)
    _close(o, lse, *reference(q, k, v, causal=True, window=window, softcap=softcap))


def test_four_consumers_on_a_packed_batch():
    """Variable lengths (cu_seqlens): a sequence shorter than one consumer's rows, one past one item."""
    g = torch.Generator().manual_seed(3)
    cu = torch.tensor([0, 30, 330, 347], dtype=torch.int32)
    q, k, v = (torch.randn(347, 2, 64, generator=g).to(torch.bfloat16) for _ in range(3))
    c = dataclasses.replace(choose_config(64, False, 300, varlen=True), block_m=256, block_n=64, stages=3,
                            q_bufs=1, s1_ahead=False)
    o, lse = attention_forward(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=300, max_seqlen_k=300,
                               config=c, programs=3)
    _close(o, lse, *reference(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu))


@pytest.mark.parametrize("S,causal,kw", [(256, False, {}), (1024, True, {"tma_store": True})], ids=str)
def test_four_consumers_compile_for_sm90a_without_spills(S, causal, kw):
    q = torch.empty(64, 32, S, 64, dtype=torch.bfloat16)
    c = _four(causal, S, **kw)
    assert c.registers == 112
    h = compile_config(q, q, q, causal=causal, config=c)[-1]
    assert h.constexprs["BLOCK_M"] == 256 and h.constexprs["REGISTERS"] == 112
    assert h.n_spills == 0 and c.shared_bytes() <= h.metadata.shared <= 232448


@pytest.mark.parametrize("fields,message", [
    ({"head_dim": 96}, "config head_dim .the tile width. must be 64, 128 or 256, got 96"),
    ({"block_n": 100}, "config block_n .keys per block. must be a power of two from 16 to 256, got 100"),
    ({"block_n": 512}, "config block_n .keys per block. must be a power of two from 16 to 256, got 512"),
    ({"stages": 0}, "config stages .K/V ring slots. and q_bufs .Q tiles in flight. must be at least 1, got 0 and 2"),
    ({"q_bufs": 0}, "must be at least 1, got 2 and 0"),
], ids=str)
def test_config_fields_out_of_range_are_refused_by_name(fields, message):
    """A tile width, key block or ring the kernel cannot build names its ``AttnConfig`` field (it was an
    error from inside the kernel's source, or a launch)."""
    q, k, v = _inputs(1, 1, 1, 64)
    c = dataclasses.replace(AttnConfig(64, 128, 128, 2, 2), **fields)
    with pytest.raises(ValueError, match=message):
        attention_forward(q, k, v, config=c)


def test_other_row_counts_are_refused():
    """block_m other than 128 / 192 / 256 (two to four consumers of 64 rows), and four consumers at a
    128-wide tile (their O accumulators spill at 112 registers), name the argument."""
    q, k, v = _inputs(1, 1, 1, 64)
    with pytest.raises(ValueError, match="block_m must be 128, 192 or 256"):
        attention_forward(q, k, v, config=dataclasses.replace(_four(False, 64), block_m=320))
    q, k, v = _inputs(1, 1, 1, 64, D=128)
    c = AttnConfig(head_dim=128, block_m=256, block_n=64, stages=2, q_bufs=1)
    with pytest.raises(ValueError, match="block_m 256 .* takes tile width 64 only"):
        attention_forward(q, k, v, config=c)


def test_four_consumers_cuda_text_matches_float64(monkeypatch):
    """The CUDA text of the four-consumer kernel on the host emulation (tests/test_cuda_emulation.py's
    runner): S = 300 is one whole item and one of 44 rows, five 64-key blocks."""
    from tlxc.codegen_nvptx.emu import run as emu
    if not emu.available():
        pytest.skip("no host C++ compiler")
    AF = importlib.import_module("tlxc.ops.attention")      # (``tlxc.ops.attention`` the attribute is the op)
    from tests.test_cuda_emulation import _emulated
    from tlxc.ops.kernels.attention_fwd import attn_fwd_kernel
    monkeypatch.setattr(AF, "_launch", lambda grid, *args, **meta: _emulated(attn_fwd_kernel, grid, *args, **meta))
    q, k, v = _inputs(1, 2, 2, 300, seed=7)
    o, lse = attention_forward(q, k, v, config=_four(False, 300))
    ro, rl = reference(q, k, v)
    assert (o.double() - ro).abs().max().item() < 2e-2
    assert (lse.double() - rl).abs().max().item() < 1e-4


@pytest.mark.gpu
@pytest.mark.parametrize("B,H,Hkv,S,causal,kw", [(8, 4, 4, 256, False, {}), (2, 4, 1, 1000, False, {"tma_store": True}),
                                                  (2, 4, 4, 1024, True, {}),
                                                  (1, 2, 2, 4096, False, {"s1_ahead": True, "q_bufs": 2})], ids=str)
def test_gpu_four_consumers(B, H, Hkv, S, causal, kw):
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    q, k, v = _inputs(B, H, Hkv, S, device="cuda", seed=S + H)
    o, lse = attention_forward(q, k, v, causal=causal, config=_four(causal, S, **kw))
    ro, rl = reference(q, k, v, causal=causal, dtype=torch.float32)
    assert (o.float() - ro).abs().max() < 2e-2 * ro.abs().max()
    assert torch.allclose(lse.float(), rl, atol=1e-2, rtol=1e-3)


def _three128(**kw):
    return AttnConfig(**{"head_dim": 128, "block_m": 192, "block_n": 64, "stages": 3, "q_bufs": 1, **kw})


@pytest.mark.parametrize("S,D,causal,Hkv,kw", [(300, 128, False, 1, {}), (520, 128, True, 2, {}),
                                               (200, 96, False, 2, {"tma_store": True}),
                                               (97, 96, True, 2, {"q_bufs": 2})], ids=str)
def test_three_consumers_at_tile_width_128_match_float64(S, D, causal, Hkv, kw):
    """Three consumers of a 192-row item at D = 128 (and 96, zero-filled to the 128-wide tile): rows and
    keys past S, the causal diagonal across the three consumers' rows, GQA, O TMA-stored."""
    q, k, v = _inputs(1, 2, Hkv, S, D=D, seed=S)
    o, lse = attention_forward(q, k, v, causal=causal, config=_three128(**kw), programs=3)
    _close(o, lse, *reference(q, k, v, causal=causal))


@pytest.mark.parametrize("causal", [False, True])
def test_three_consumers_at_tile_width_128_compile_without_spills(causal):
    q = torch.empty(16, 16, 1024, 128, dtype=torch.bfloat16)
    c = _three128(q_bufs=2)
    assert c.registers == 160
    h = compile_config(q, q, q, causal=causal, config=c)[-1]
    assert h.n_spills == 0 and c.shared_bytes() <= h.metadata.shared <= 232448


@pytest.mark.gpu
@pytest.mark.parametrize("B,H,Hkv,S,causal,kw", [(4, 4, 4, 512, False, {}), (2, 4, 1, 1000, True, {"q_bufs": 2}),
                                                  (1, 2, 2, 4096, False, {"tma_store": True})], ids=str)
def test_gpu_three_consumers_at_tile_width_128(B, H, Hkv, S, causal, kw):
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    q, k, v = _inputs(B, H, Hkv, S, D=128, device="cuda", seed=S + H)
    o, lse = attention_forward(q, k, v, causal=causal, config=_three128(**kw))
    ro, rl = reference(q, k, v, causal=causal, dtype=torch.float32)
    assert (o.float() - ro).abs().max() < 2e-2 * ro.abs().max()
    assert torch.allclose(lse.float(), rl, atol=1e-2, rtol=1e-3)
