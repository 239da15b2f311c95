"""``AttnConfig.diag``: the forward with one stage of each item left out, for timing that stage by
difference (``bench/ops_attention_bench.py --diag``).  Each bit removes what it names from the
kernel's CUDA text and nothing else; the barrier protocol stays whole (the interpreter runs every
variant to the end, and so does the GPU test under ``TLXC_DEBUG_BARRIERS=1``)."""
from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from tlxc.ops.attention import attention_forward, choose_config, compile_config


def _cuda(bit: int, causal: bool = False) -> str:
    q = torch.empty(4, 8, 256, 64, dtype=torch.bfloat16)
    c = dataclasses.replace(choose_config(64, causal, 256), diag=bit)
    (h,) = compile_config(q, q, q, causal=causal, config=c)
    assert h.n_spills == 0
    return h.asm["cuda"]


def _count(pattern: str, text: str) -> int:
    return len(re.findall(pattern, text))


def test_each_bit_leaves_its_stage_out():
    base = _cuda(0)
    assert _count(r"(?<!void )tlx_tma_store_4d\(", base) > 0
    no_epilogue = _cuda(1)
    assert _count(r"(?<!void )tlx_tma_store_4d\(", no_epilogue) == 0
    assert _count(r"(?<!void )tlx_ex2_approx_ftz_f32\(", _cuda(2)) < _count(r"(?<!void )tlx_ex2_approx_ftz_f32\(", base)
    assert _count(r"tlx_wgmma_m64n64k16", _cuda(4)) < _count(r"tlx_wgmma_m64n64k16", base)
    # the issue turns (named barriers 9 and 10) are all still there
    for bit in (1, 2, 4):
        assert _count(r"tlx_bar_(sync|arrive)\((9|10|s_\d+)", _cuda(bit)) == _count(r"tlx_bar_(sync|arrive)\((9|10|s_\d+)",
                                                                                    base)


@pytest.mark.parametrize("bit", [1, 2, 4])
def test_variants_run_to_the_end_on_the_interpreter(bit):
    q, k, v = (torch.randn(1, 2, 300, 64).to(torch.bfloat16) for _ in range(3))
    c = dataclasses.replace(choose_config(64, True, 300), diag=bit)
    o, lse = attention_forward(q, k, v, causal=True, config=c)
    assert o.shape == q.shape and lse.shape == (1, 2, 300)


@pytest.mark.parametrize("diag", [8, -1, 3.0])
def test_bad_bits_are_refused(diag):
    q = torch.randn(1, 1, 64, 64).to(torch.bfloat16)
    with pytest.raises(ValueError, match="config diag"):
        attention_forward(q, q, q, config=dataclasses.replace(choose_config(64, False, 64), diag=diag))


@pytest.mark.gpu
@pytest.mark.parametrize("bit", [1, 2, 4])
def test_gpu_diag_variants_complete(bit):
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    q, k, v = (torch.randn(8, 8, 256, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        c = dataclasses.replace(choose_config(64, causal, 256), diag=bit)
        attention_forward(q, k, v, causal=causal, config=c)
    torch.cuda.synchronize()
    o, _ = attention_forward(q, k, v)             # and the default after them is right
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert ((o.float() - ref).norm() / ref.norm()).item() < 1e-2
