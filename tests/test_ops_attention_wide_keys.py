"""The attention forward with 256-key blocks at head dim 64 (``AttnConfig(block_n=256)``): one key
block per item at S = 256, a quarter of the online-softmax rescales at S = 1024.  Against float64 math
on the interpreter (odd lengths, a causal mask, GQA, a window, a packed batch), on the CUDA text's emulation, on the
GPU, and its sm_90a compile."""
from __future__ import annotations

import dataclasses
import importlib

import pytest
import torch

from tlxc.ops.attention import attention_forward, choose_config, compile_config, reference


def _wide(D, causal, S):
    return dataclasses.replace(choose_config(D, causal, S), block_m=128, block_n=256, stages=2, s1_ahead=False)


def _inputs(B, H, Hkv, S, D, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, S, D, generator=g).to(torch.bfloat16).to(device)
    k, v = (torch.randn(B, Hkv, S, D, generator=g).to(torch.bfloat16).to(device) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize("S,causal,Hkv,window", [(256, False, 2, None), (300, False, 2, None), (520, True, 2, None),
                                                 (700, False, 1, None), (333, False, 2, (100, 20))], ids=str)
def test_256_key_blocks_match_float64(S, causal, Hkv, window):
    """Keys past S in the last block masked, the causal diagonal inside one 256-key block, two q
    heads on one k/v head, a sliding window: each within bf16's error of float64 math."""
    q, k, v = _inputs(1, 2, Hkv, S, 64, seed=S)
    c = _wide(64, causal, S)
    o, lse = attention_forward(q, k, v, causal=causal, window=window, config=c, programs=3)
    ro, rl = reference(q, k, v, causal=causal, window=window)
    assert (o.double() - ro).abs().max() < 2e-2 * ro.abs().max()
    assert torch.allclose(lse.double(), rl, atol=1e-2, rtol=1e-3)


def test_256_key_blocks_on_a_packed_batch():
    """Variable lengths (cu_seqlens): sequences shorter than one block, one past it, one of 17 keys."""
    g = torch.Generator().manual_seed(3)
    cu = torch.tensor([0, 100, 400, 417], dtype=torch.int32)
    q, k, v = (torch.randn(417, 2, 64, generator=g).to(torch.bfloat16) for _ in range(3))
    c = dataclasses.replace(choose_config(64, False, 300, varlen=True), block_n=256, s1_ahead=False)
    o, lse = attention_forward(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=300, max_seqlen_k=300,
                               config=c, programs=3)
    ro, rl = reference(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu)
    assert (o.double() - ro).abs().max() < 2e-2 * ro.abs().max()
    assert torch.allclose(lse.double(), rl, atol=1e-2, rtol=1e-3)


def test_256_key_blocks_compile_for_sm90a():
    q = torch.empty(64, 32, 256, 64, dtype=torch.bfloat16)
    c = _wide(64, False, 256)
    h = compile_config(q, q, q, config=c)[-1]
    assert h.constexprs["BLOCK_N"] == 256
    assert c.shared_bytes() <= h.metadata.shared <= 232448


def test_256_key_blocks_cuda_text_matches_float64(monkeypatch):
    """The CUDA text of the 256-key kernel run on the host emulation (tests/test_cuda_emulation.py's
    runner): S = 300 is one whole block and one block of 44 keys."""
    from tlxc.codegen_nvptx.emu import run as emu
    if not emu.available():
        pytest.skip("no host C++ compiler")
    AF = importlib.import_module("tlxc.ops.attention")      # (``tlxc.ops.attention`` the attribute is the op)
    from tests.test_cuda_emulation import _emulated
    from tlxc.ops.kernels.attention_fwd import attn_fwd_kernel
    monkeypatch.setattr(AF, "_launch", lambda grid, *args, **meta: _emulated(attn_fwd_kernel, grid, *args, **meta))
    q, k, v = _inputs(1, 2, 2, 300, 64, seed=7)
    o, lse = attention_forward(q, k, v, config=_wide(64, False, 300))
    ro, rl = reference(q, k, v)
    assert (o.double() - ro).abs().max().item() < 2e-2
    assert (lse.double() - rl).abs().max().item() < 1e-4


@pytest.mark.gpu
@pytest.mark.parametrize("B,H,Hkv,S,causal", [(8, 4, 4, 256, False), (2, 4, 1, 1000, False), (2, 4, 4, 1024, True),
                                               (1, 2, 2, 4096, False)], ids=str)
def test_gpu_256_key_blocks(B, H, Hkv, S, causal):
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    q, k, v = _inputs(B, H, Hkv, S, 64, device="cuda", seed=S + H)
    o, lse = attention_forward(q, k, v, causal=causal, config=_wide(64, causal, S))
    ro, rl = reference(q, k, v, causal=causal, dtype=torch.float32)
    assert (o.float() - ro).abs().max() < 2e-2 * ro.abs().max()
    assert torch.allclose(lse.float(), rl, atol=1e-2, rtol=1e-3)
