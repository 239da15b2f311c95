"""The fp8 attention forward (``tlxc.ops.attention`` with float8 q, k, v) on the interpreter against
float64 math on the dequantized inputs: e4m3 and e5m2, every tile width, causal or not, GQA, Sq != Sk
and lengths off the blocks, descales as numbers and as flash-attn 3's (batch, kv heads) tensors,
windows and softcapping, BSHD inputs; and the argument rules."""
from __future__ import annotations

import importlib

import pytest
import torch
from attention_checks import check_fp8_attention, fp8_inputs, poison_fresh_tensors

import tlxc.ops

A = importlib.import_module("tlxc.ops.attention")
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


@pytest.mark.parametrize("dtype", [E4M3, E5M2], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("D,causal,Sq,Sk", [(64, True, 150, 150), (128, False, 70, 200), (96, True, 130, 90)])
def test_forward_matches_float64(D, causal, Sq, Sk, dtype, monkeypatch):
    poison_fresh_tensors(monkeypatch)
    q, k, v = fp8_inputs((1, 4, Sq, D), (1, 2, Sk, D), dtype)
    o, lse = A.attention_forward(q, k, v, causal=causal)
    assert o.dtype == torch.bfloat16 and o.shape == q.shape
    check_fp8_attention(o, lse, q, k, v, causal=causal)


@pytest.mark.slow
@pytest.mark.parametrize("D", [192, 256])
def test_256_wide_tiles(D, monkeypatch):
    poison_fresh_tensors(monkeypatch)
    q, k, v = fp8_inputs((1, 2, 100, D), (1, 1, 140, D), E4M3, seed=1)
    o, lse = A.attention_forward(q, k, v, causal=True, out_dtype=torch.float16)
    assert o.dtype == torch.float16
    check_fp8_attention(o, lse, q, k, v, causal=True)


def test_descales_per_tensor_and_per_head(monkeypatch):
    poison_fresh_tensors(monkeypatch)
    q, k, v = fp8_inputs((2, 4, 90, 64), (2, 2, 90, 64), E4M3, seed=2)
    dq = torch.tensor([[0.5, 2.0], [1.0, 0.25]])
    o, lse = A.attention_forward(q, k, v, q_descale=dq, k_descale=1.5, v_descale=torch.tensor([3.0]))
    check_fp8_attention(o, lse, q, k, v, descales=(dq, 1.5, 3.0))


def test_window_softcap_and_bshd_input(monkeypatch):
    poison_fresh_tensors(monkeypatch)
    q, k, v = fp8_inputs((1, 160, 4, 64), (1, 160, 2, 64), E4M3, seed=3)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))        # BSHD memory, read in place
    o, lse = A.attention_forward(q, k, v, window=(40, 20), softcap=20.0, q_descale=0.5)
    assert o.stride(1) < o.stride(2), "o keeps q's BSHD memory layout"
    check_fp8_attention(o, lse, q, k, v, descales=(0.5, 1.0, 1.0), window=(40, 20), softcap=20.0)


def test_the_op_takes_numbers_and_returns_bf16(monkeypatch):
    poison_fresh_tensors(monkeypatch)
    q, k, v = fp8_inputs((1, 2, 70, 64), (1, 1, 70, 64), E5M2, seed=4)
    o, lse = tlxc.ops.attention(q, k, v, causal=True, k_descale=2.0, return_lse=True)
    check_fp8_attention(o, lse, q, k, v, descales=(1.0, 2.0, 1.0), causal=True)


@pytest.mark.parametrize("kwargs,message", [
    ({"q_descale": 0.0}, "'q_descale' must be a positive finite number"),
    ({"v_descale": torch.ones(2, dtype=torch.int32)}, "'v_descale' must be a float tensor"),
    ({"k_descale": torch.ones(3, 2)}, r"'k_descale' has shape \(3, 2\); per-head descales are \(batch, kv heads\) = \(1, 1\)"),
    ({"out_dtype": torch.float32}, "'out_dtype' of an fp8 attention must be"),
])
def test_bad_fp8_arguments_are_named(kwargs, message):
    q, k, v = fp8_inputs((1, 2, 64, 64), (1, 1, 64, 64), E4M3)
    with pytest.raises(ValueError, match=message):
        A.attention_forward(q, k, v, **kwargs)


def test_fp8_rules():
    q, k, v = fp8_inputs((1, 2, 64, 64), (1, 1, 64, 64), E4M3)
    with pytest.raises(ValueError, match="'k' must have q's dtype"):
        A.attention_forward(q, k.to(E5M2), v)
    with pytest.raises(ValueError, match="'q_descale' scales fp8 inputs; q is torch.bfloat16"):
        A.attention_forward(q.bfloat16(), k.bfloat16(), v.bfloat16(), q_descale=2.0)
    with pytest.raises(ValueError, match="'out_dtype' is for fp8 inputs"):
        tlxc.ops.attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), out_dtype=torch.float16)
    with pytest.raises(ValueError, match="prefetch is not supported with fp8"):
        A.attention_forward(q, k, v, config=A.AttnConfig(64, 128, 128, 2, 2, prefetch=1))


def test_the_fake_gives_bf16_o_and_the_inputs_layout():
    from tlxc.ops.attention_op import _attention_fp8_fake
    q, k, v = fp8_inputs((2, 8, 32, 64), (2, 8, 32, 64), E4M3)
    q = q.transpose(1, 2).contiguous().transpose(1, 2)
    o, lse = _attention_fp8_fake(q, k, v, False, None, None, None, None, None, -1, -1, 0.0, None, None, None,
                                 torch.float16)
    assert o.dtype == torch.float16 and o.stride(1) < o.stride(2) and lse.shape == (2, 8, 32)


def test_the_fake_checks_per_head_descales_against_the_batch_and_kv_heads():
    """Under torch.compile's fake tensors (no kernel runs) a (batch, kv heads) descale of the
    wrong shape is refused as the real op refuses it: dense (2 sequences, 4 kv heads) and packed
    (3 sequences from cu_seqlens_q)."""
    from tlxc.ops.attention_op import _attention_fp8_fake
    q, k, v = fp8_inputs((2, 8, 32, 64), (2, 4, 32, 64), E4M3)
    args = (q, k, v, False, None, None, None, None, None, -1, -1, 0.0)
    _attention_fp8_fake(*args, None, torch.ones(2, 4), None, None)
    with pytest.raises(ValueError, match=r"'k_descale' has shape \(4, 2\); per-head descales are "
                                         r"\(batch, kv heads\) = \(2, 4\)"):
        _attention_fp8_fake(*args, None, torch.ones(4, 2), None, None)
    qp, kp, vp = (t.transpose(1, 2).reshape(64, t.shape[1], 64) for t in (q, k, v))
    cu = torch.tensor([0, 10, 40, 64], dtype=torch.int32)
    packed = (qp, kp, vp, False, None, cu, cu, 30, 30, -1, -1, 0.0)
    _attention_fp8_fake(*packed, torch.ones(3, 4), None, None, None)
    with pytest.raises(ValueError, match=r"'q_descale' has shape \(2, 4\)"):
        _attention_fp8_fake(*packed, torch.ones(2, 4), None, None, None)


@pytest.mark.parametrize("dtype", [E4M3, torch.bfloat16], ids=["e4m3", "bf16"])
def test_transpose_kernel_on_the_interpreter(dtype):
    from tlxc.ops.kernels.transpose import transpose_last2_kernel
    v = torch.randn(2, 130, 3, 96).to(dtype).transpose(1, 2)       # [B, H, S, D] over BSHD memory
    vt = torch.full((2, 3, 96, 144), float("nan"), dtype=dtype)[..., :130]
    tlxc.interpret(transpose_last2_kernel, (3, 2, 6), (v, vt, 130, 96, 3, *v.stride()[:3], *vt.stride()[:3]),
                   {"BLOCK_S": 64, "BLOCK_D": 64})
    assert torch.equal(vt.view(torch.uint8) if dtype == E4M3 else vt, (v.transpose(-1, -2).view(torch.uint8)
                       if dtype == E4M3 else v.transpose(-1, -2)))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen(causal, monkeypatch):
    """Packed sequences (some empty, one of one row): Vᵀ is built with each sequence's keys starting on a
    16-byte column (TMA boxes must), the gaps zero."""
    poison_fresh_tensors(monkeypatch)
    lens_q, lens_k = [70, 0, 130, 1, 45], [70, 20, 100, 1, 0]
    cu_q = torch.tensor([0, *torch.tensor(lens_q).cumsum(0).tolist()], dtype=torch.int32)
    cu_k = torch.tensor([0, *torch.tensor(lens_k).cumsum(0).tolist()], dtype=torch.int32)
    q, k, v = fp8_inputs((sum(lens_q), 4, 64), (sum(lens_k), 2, 64), E4M3, seed=9)
    o, lse = tlxc.ops.attention(q, k, v, causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, q_descale=0.5,
                                return_lse=True)
    check_fp8_attention(o, lse, q, k, v, descales=(0.5, 1.0, 1.0), causal=causal, cu_seqlens_q=cu_q,
                        cu_seqlens_k=cu_k)


def test_varlen_descales_per_sequence_and_head(monkeypatch):
    """(batch, kv heads) descales of a packed batch: each sequence's own (the kernel's batch
    coordinate is 0 there; the sequence index comes from the work item)."""
    poison_fresh_tensors(monkeypatch)
    lens = [50, 90, 30]
    cu = torch.tensor([0, 50, 140, 170], dtype=torch.int32)
    q, k, v = fp8_inputs((sum(lens), 4, 64), (sum(lens), 2, 64), E4M3, seed=11)
    dk = torch.tensor([[0.5, 1.0], [2.0, 0.25], [1.5, 3.0]])
    dv = torch.tensor([[1.0, 2.0], [0.5, 1.0], [4.0, 0.25]])
    o, lse = A.attention_forward(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, k_descale=dk, v_descale=dv)
    for b in range(3):                  # each sequence as a dense batch of one, with its own descales
        rows = slice(int(cu[b]), int(cu[b + 1]))
        dense = [t[rows].transpose(0, 1)[None] for t in (q, k, v)]
        check_fp8_attention(o[rows].transpose(0, 1)[None], lse[:, rows][None], *dense,
                            descales=(1.0, dk[b:b + 1], dv[b:b + 1]))


@pytest.mark.parametrize("varlen", [False, True], ids=["dense", "varlen"])
@pytest.mark.parametrize("D,causal", [(64, True), (128, False), (256, True)])
def test_tlxc_check_is_clean(D, causal, varlen, monkeypatch):
    """``tlxc check`` of the fp8 launch the host would make on an H200 (with per-head descales)."""
    from tlxc.compiler import check_function
    from tlxc.frontend.specialize import specialization_from_args
    from tlxc.ops.kernels.attention_fwd import attn_fwd_kernel
    launches = []
    monkeypatch.setattr(A, "_launch", lambda grid, *args, **meta: launches.append((args, meta)))
    if varlen:
        q = torch.zeros(300, 4, D).to(E4M3)
        cu = torch.tensor([0, 100, 300], dtype=torch.int32)
        A.attention_forward(q, q[:, :2], q[:, :2], causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cu, programs=132,
                            k_descale=torch.ones(2, 2))
    else:
        q = torch.zeros(2, 4, 2048, D).to(E4M3)
        A.attention_forward(q, q[:, :2], q[:, :2], causal=causal, programs=132, k_descale=torch.ones(2, 2))
    (args, meta), = launches
    assert meta["FP8"] and meta["DESCALE"]
    num_warps = meta.pop("num_warps")
    params = dict(zip(attn_fwd_kernel.param_names, args), **meta)
    findings = check_function(attn_fwd_kernel, specialization_from_args(attn_fwd_kernel, params), num_warps=num_warps)
    assert [f for f in findings if f.severity != "note"] == []


def test_k32_positions_invert_the_fragment_order():
    from tlxc.ir.ops.mma_async import k32_accumulator_order
    order = k32_accumulator_order()
    assert sorted(order) == list(range(32))
    pos = A.k32_position(torch.arange(64))
    assert [int(pos[k]) for k in order] == list(range(32))      # position of key order[f] is f
    assert torch.equal(pos[32:] - 32, pos[:32])


def test_permuted_transpose_kernel_on_the_interpreter():
    from tlxc.ops.kernels.transpose import transpose_last2_kernel
    v = torch.randn(1, 2, 70, 64).to(E4M3)
    vt = torch.full((1, 2, 64, 96), float("nan")).to(E4M3)
    tlxc.interpret(transpose_last2_kernel, (2, 1, 2), (v, vt, 70, 64, 2, *v.stride()[:3], *vt.stride()[:3], None, 96),
                   {"BLOCK_S": 64, "BLOCK_D": 64, "PERMUTE32": True})
    cols = A.k32_position(torch.arange(70))
    assert torch.equal(vt.view(torch.uint8)[..., cols], v.transpose(-1, -2).view(torch.uint8))
    pad = torch.ones(96, dtype=torch.bool)
    pad[cols] = False
    assert (vt.view(torch.uint8)[..., pad] == 0).all()      # the last group's tail: zeros, not the NaN poison


def test_compile_config_compiles_the_transpose_too():
    """``compile_config`` fills the cache for every kernel an fp8 call launches: the Vᵀ copy first."""
    q = torch.empty(2, 4, 1000, 128).to(E4M3)
    handles = A.compile_config(q, q[:, :2], q[:, :2], causal=True)
    names = [h.name for h in handles]
    assert len(names) == 2 and names[0].startswith("transpose_last2_kernel") and names[1].startswith("attn_fwd")
    c = A.choose_config(128, True, 1000, fp8=True)          # one-byte Q, K, V: the estimate counts them so
    assert c.shared_bytes(1) <= handles[1].metadata.shared <= c.shared_bytes(1) + 1024 < c.shared_bytes()


def test_torch_compile_fullgraph_on_the_cpu():
    """The fp8 op under ``torch.compile(fullgraph=True)``: its schema (optional descale tensors, an
    optional dtype) traces, the fake's bf16 output flows into the rest of the graph."""
    q, k, v = fp8_inputs((1, 2, 70, 64), (1, 1, 70, 64), E4M3, seed=12)
    dv = torch.tensor(2.0)

    def f(q, k, v, dv):
        return tlxc.ops.attention(q, k, v, causal=True, v_descale=dv, out_dtype=torch.float16) * 0.5

    got = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v, dv)
    assert got.dtype == torch.float16
    o, _ = A.attention_forward(q, k, v, causal=True, v_descale=dv, out_dtype=torch.float16)
    assert torch.equal(got, o * 0.5)


def test_eager_calls_skip_the_op_and_traced_ones_take_it(monkeypatch):
    """Plain tensors call the forward directly (no torch.library dispatch, as the 16-bit op); fake
    tensors (as tracing makes them) take ``torch.ops.tlxc.attention_fp8`` and its fake."""
    AO = importlib.import_module("tlxc.ops.attention_op")
    calls = []
    real = AO.attention_fp8_op
    monkeypatch.setattr(AO, "attention_fp8_op", lambda *args: calls.append(len(args)) or real(*args))
    q, k, v = fp8_inputs((1, 2, 40, 64), (1, 2, 40, 64), E4M3, seed=9)
    o = tlxc.ops.attention(q, k, v, v_descale=0.5)
    assert calls == [] and o.dtype == torch.bfloat16
    assert torch.equal(o, real(q, k, v, False, None, None, None, None, None, -1, -1, 0.0, None, None,
                               torch.full((), 0.5), None)[0])
    from torch._subclasses.fake_tensor import FakeTensorMode
    mode = FakeTensorMode()
    fq, fk, fv = (mode.from_tensor(t) for t in (q, k, v))
    with mode:
        fo = tlxc.ops.attention(fq, fk, fv)
    assert calls == [16] and fo.shape == q.shape
