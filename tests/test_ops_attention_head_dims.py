"""tlxc.ops.attention at head dims other than 64/96/128/192/256: any multiple of 8 up to 256 (16 for
fp8 inputs), run in the 64-, 128- or 256-wide tiles with the extra columns zero-filled by TMA on
the way in and clipped on the way out.  The forward and the autograd backward on the interpreter
against float64 math (dense GQA causal, varlen), the fp8 forward, the refusals, sm_90a compiles,
and the same on the GPU."""
from __future__ import annotations

import pytest
import torch
from attention_checks import check_attention, check_op_gradients, fp8_inputs, poison_fresh_tensors

import tlxc.ops
from tlxc.ops.attention import attention_forward, compile_config, reference

ODD_DIMS = [8, 40, 80, 160, 232]        # 16-byte rows; tiles 64, 64, 128, 256, 256


@pytest.fixture
def poisoned(monkeypatch):
    poison_fresh_tensors(monkeypatch)


def _randn(*shape, seed, device="cpu", dtype=torch.bfloat16):
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(*shape, generator=g, device=device).to(dtype)


def _dense_case(D, device="cpu"):
    return (_randn(2, 4, 70, D, seed=D, device=device), _randn(2, 2, 90, D, seed=D + 1, device=device),
            _randn(2, 2, 90, D, seed=D + 2, device=device))


@pytest.mark.parametrize("D", ODD_DIMS)
def test_forward_matches_float64(D, poisoned):
    q, k, v = _dense_case(D)
    for causal in (False, True):
        o, lse = attention_forward(q, k, v, causal=causal)
        assert o.shape == q.shape
        check_attention(o, lse, *reference(q, k, v, causal=causal), torch.bfloat16)


@pytest.mark.parametrize("D", ODD_DIMS)
def test_backward_matches_float64(D):
    q, k, v = _dense_case(D)
    check_op_gradients(q, k, v, _randn(*q.shape, seed=D + 3), causal=True)


@pytest.mark.parametrize("D", [40, 80])
def test_varlen_forward_and_backward(D, poisoned):
    cu = torch.tensor([0, 37, 38, 38, 90], dtype=torch.int32)
    q, k, v = (_randn(90, h, D, seed=D + i) for i, h in enumerate((4, 2, 2)))
    o, lse = attention_forward(q, k, v, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu)
    check_attention(o, lse, *reference(q, k, v, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu), torch.bfloat16)
    check_op_gradients(q, k, v, _randn(*q.shape, seed=D + 5), causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu)


@pytest.mark.parametrize("D", [16, 48, 80])
def test_fp8_forward_at_multiples_of_16(D):
    q, k, v = fp8_inputs((1, 2, 70, D), (1, 2, 70, D), torch.float8_e4m3fn, seed=D)
    o = tlxc.ops.attention(q, k, v, causal=True)
    ref, _ = reference(*(t.to(torch.float64) for t in (q, k, v)), causal=True)
    assert torch.isfinite(o).all()
    assert ((o.double() - ref).norm() / ref.norm()).item() < 2.0 ** -4


@pytest.mark.parametrize("D,dtype,message", [
    (20, torch.bfloat16, "'q' has head dim 20; supported: multiples of 8 from 8 to 256"),
    (264, torch.float16, "'q' has head dim 264; supported: multiples of 8 from 8 to 256"),
    (24, torch.float8_e4m3fn, "'q' has head dim 24; supported: multiples of 16 from 16 to 256"),
])
def test_other_head_dims_are_refused_by_name(D, dtype, message):
    q = torch.zeros(1, 2, 8, D).to(dtype)
    with pytest.raises(ValueError, match=message):
        tlxc.ops.attention(q, q, q)


def test_sdpa_spelling_of_the_scale_is_named_in_its_error():
    q = torch.zeros(1, 2, 8, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="'scale' must be a positive finite number, got 0.0"):
        tlxc.ops.attention(q, q, q, scale=0.0)


@pytest.mark.parametrize("D", [40, 80, 160])
def test_forward_compiles_for_sm90a_without_spills(D):
    q = torch.empty(4, 8, 1024, D, dtype=torch.bfloat16)
    for causal in (False, True):
        (h,) = compile_config(q, q, q, causal=causal)
        assert h.n_spills == 0


def test_varlen_pointer_stores_of_o_are_16_bytes_at_odd_multiples_of_8(tmp_path):
    """Varlen O goes out through pointer stores; rows of 40 elements are 16-byte aligned only by the
    host's fact (``O_ALIGN``): without it, 2-byte stores (104 ``STG.E.U16`` a consumer)."""
    from sass_dump import sass
    q = torch.empty(4096, 8, 40, dtype=torch.bfloat16)
    cu = torch.tensor([0, 1000, 4096], dtype=torch.int32)
    (h,) = compile_config(q, q, q, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=3096,
                          max_seqlen_k=3096)
    code = sass(h.asm["cubin"], tmp_path)
    assert "STG.E.128" in code and "STG.E.U16" not in code


def test_decode_copies_16_bytes_at_odd_multiples_of_8(tmp_path):
    """``attention_decode`` at D = 40: the cache rows' alignment from the host (``ALIGN``) keeps its K/V
    copies 16-byte cp.async (without it: 264 two-byte loads and 167 registers)."""
    from sass_dump import sass

    from tlxc.ops.attention_decode import compile_decode
    q = torch.empty(8, 32, 40, dtype=torch.bfloat16)
    cache = torch.empty(64, 16, 8, 40, dtype=torch.bfloat16)
    handles = compile_decode(q, cache, cache, torch.full((8,), 100, dtype=torch.int32),
                             block_table=torch.zeros(8, 8, dtype=torch.int32))
    code = sass(handles[0].asm["cubin"], tmp_path)
    assert "LDGSTS.E.BYPASS.128" in code and "LDG.E.U16" not in code and handles[0].n_spills == 0


@pytest.mark.parametrize("D", [40, 136, 248])
def test_backward_at_odd_multiples_of_8_compiles_without_spills(D):
    """Row strides of D elements that are not multiples of 16: the host states their 16-byte alignment
    (``ALIGN``); without it the loads go element by element (255 registers, 52 bytes of spills at 136)."""
    from tlxc.ops.attention import stride_align
    from tlxc.ops.attention_bwd import compile_kernels
    q = torch.empty(4, 8, 1024, D, dtype=torch.bfloat16)
    assert stride_align(q, q[:, :, :, :]) == 8 and stride_align(q.transpose(1, 2)) == 8
    handles = compile_kernels(q, q, q, q, q, torch.empty(4, 8, 1024), causal=True, sm_scale=0.1)
    assert len(handles) == 3 and all(h.n_spills == 0 and h.n_regs < 250 for h in handles), \
        [(h.n_regs, h.n_spills) for h in handles]


def test_stride_align_is_the_largest_power_of_two_dividing_every_stride():
    from tlxc.ops.attention import stride_align
    assert stride_align(torch.empty(2, 3, 5, 64)) == 8
    assert stride_align(torch.empty(2, 3, 5, 20)) == 4          # rows of 20 elements: 8-byte aligned
    assert stride_align(torch.empty(2, 3, 5, 64)[..., :36]) == 8  # (the row stride, not the width, counts)
    assert stride_align(torch.empty(1, 1, 5, 64), torch.empty(2, 3, 5, 66)[..., :64]) == 2
    assert stride_align(torch.empty(1, 1, 1, 64)) == 8           # no dimension longer than 1


@pytest.mark.gpu
@pytest.mark.parametrize("D", [32, 40, 80, 160])
def test_gpu_forward_and_backward_match_float64(D, poisoned):
    q, k, v = (_randn(2, h, 300, D, seed=D + i, device="cuda") for i, h in enumerate((8, 2, 2)))
    for causal in (False, True):
        o, lse = attention_forward(q, k, v, causal=causal)
        check_attention(o, lse, *reference(q, k, v, causal=causal), torch.bfloat16)
    check_op_gradients(q, k, v, _randn(*q.shape, seed=D + 3, device="cuda"), causal=True)
