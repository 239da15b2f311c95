"""The attention forward's ``TRACE`` timeline (a benchmark's diagnostic, bench/attn_trace_probe.py):
the kernel writes the cycle counter at each stage of a program's first items, in order, and the
trace changes nothing of what the kernel computes."""
from __future__ import annotations

import pytest
import torch

from tlxc.ops.attention import attention_forward, choose_config, compile_config, trace_shape
from tlxc.ops.kernels.attention_fwd import TRACE_MARKS, TRACE_PRODUCER


def _inputs(S, D, device="cpu", seed=3):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, 2, S, D, generator=g).to(torch.bfloat16).to(device) for _ in range(3)]


def _check_trace(trace, consumers, stages_seen):
    """Every row's recorded stages rise with the stage number (a stage is written once, after the
    ones before it on that row's path); the consumers record the stages their path passes."""
    for p in range(trace.shape[0]):
        for row in range(consumers + 1):
            for item in range(trace.shape[2]):
                marks = trace[p, row, item]
                got = [s for s in range(marks.numel()) if marks[s] >= 0]
                if not got:
                    continue
                values = [marks[s].item() for s in got]
                assert values == sorted(values), (p, row, item, values)
                if row < consumers:
                    assert set(got) == stages_seen, (p, row, item, got)
                else:
                    assert set(got) == set(TRACE_PRODUCER), (p, row, item, got)


@pytest.mark.parametrize("S,s1_ahead", [(256, True), (384, False)])
def test_trace_records_every_stage_in_order(S, s1_ahead):
    q, k, v = _inputs(S, 64)
    c = choose_config(64, False, S)
    c = type(c)(**{**c.__dict__, "s1_ahead": s1_ahead})
    trace = torch.full(trace_shape(c, 3, 4), -1, dtype=torch.int64)
    o_traced, lse_traced = attention_forward(q, k, v, config=c, programs=3, trace=trace)
    o, lse = attention_forward(q, k, v, config=c, programs=3)
    assert torch.equal(o_traced, o) and torch.equal(lse_traced, lse)
    # S_1's stages only where it is issued with S_0; the key loop's end on every path
    stages = set(TRACE_MARKS) - (set() if s1_ahead else {6, 7, 8, 9})
    _check_trace(trace, c.block_m // 64, stages)
    assert (trace[:, :, :, 0] >= 0).sum() > 0


def test_trace_shape_is_checked():
    q, k, v = _inputs(256, 64)
    c = choose_config(64, False, 256)
    wrong = torch.zeros((3, 2, 4, 16), dtype=torch.int64)          # one row short (no producer row)
    with pytest.raises(ValueError, match="'trace' must be a contiguous int64 tensor of shape"):
        attention_forward(q, k, v, config=c, programs=3, trace=wrong)
    with pytest.raises(ValueError, match="'trace'"):
        attention_forward(q, k, v, config=c, programs=3, trace=torch.zeros(trace_shape(c, 3, 4), dtype=torch.int32))


def test_traced_kernel_compiles_without_spills():
    q = torch.empty(64, 32, 256, 64, dtype=torch.bfloat16)
    c = choose_config(64, False, 256)
    h = compile_config(q, q, q, config=c, trace=torch.zeros(trace_shape(c, 132, 8), dtype=torch.int64))[-1]
    assert h.constexprs["TRACE"] == 8
    assert h.n_spills == 0


@pytest.mark.gpu
def test_gpu_trace_is_ordered_and_changes_nothing():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    q, k, v = _inputs(256, 64, device="cuda")
    c = choose_config(64, False, 256)
    programs = 2                    # the 4 items (2 heads x 2 row blocks), two per program
    trace = torch.full(trace_shape(c, programs, 4), -1, dtype=torch.int64, device="cuda")
    o_traced, lse_traced = attention_forward(q, k, v, config=c, programs=programs, trace=trace)
    o, lse = attention_forward(q, k, v, config=c, programs=programs)
    assert torch.equal(o_traced, o) and torch.equal(lse_traced, lse)
    _check_trace(trace.cpu(), c.block_m // 64, set(TRACE_MARKS))


def _same_both_ways(S, D, causal, window, knob, **fields):
    """``attention_forward`` with the config's ``knob`` off and on (other ``fields`` set): each output
    against float64, and the two bit for bit equal."""
    from tlxc.ops.attention import reference
    q, k, v = _inputs(S, D, seed=S * D)
    c = choose_config(D, causal, S)
    ro, rl = reference(q, k, v, causal=causal, window=window)
    outs = []
    for on in (False, True):
        cfg = type(c)(**{**c.__dict__, **fields, knob: on})
        o, lse = attention_forward(q, k, v, causal=causal, window=window, config=cfg, programs=3)
        assert (o.double() - ro).abs().max() < 2e-2 * ro.abs().max()
        assert torch.allclose(lse.double(), rl, atol=1e-2, rtol=1e-3)
        outs.append((o, lse))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    return q, k, v, c


@pytest.mark.parametrize("S,D,causal,window,s1_ahead", [(256, 64, False, None, True), (384, 64, False, None, False),
                                                       (300, 128, True, None, False), (333, 64, False, (100, 20), False),
                                                       (200, 256, True, None, False)])
def test_k_ahead_loads_the_same_blocks(S, D, causal, window, s1_ahead):
    """The producer's two K/V orders (K one block ahead of V, or K_j, V_j in turn) give the same
    output, each against float64 (the interpreter would report a deadlock of either order)."""
    _same_both_ways(S, D, causal, window, "k_ahead", s1_ahead=s1_ahead)


@pytest.mark.parametrize("S,D,causal,window,tma_store", [(256, 64, False, None, True), (300, 128, True, None, False),
                                                        (333, 64, False, (100, 20), True), (200, 256, True, None, True)])
def test_early_lse_gives_the_same_output(S, D, causal, window, tma_store):
    """``early_lse`` (1 / l and the lse store while the last P V runs) against float64 and bit for bit
    against the default order, with TMA-staged and pointer stores of O; refused with ``overlap``."""
    q, k, v, c = _same_both_ways(S, D, causal, window, "early_lse", tma_store=tma_store)
    with pytest.raises(ValueError, match="early_lse and overlap"):
        attention_forward(q, k, v, config=type(c)(**{**c.__dict__, "early_lse": True, "overlap": True,
                                                      "s1_ahead": False, "diag_skip": False, "tma_store": False}))


@pytest.mark.gpu
@pytest.mark.parametrize("knob", ["k_ahead", "early_lse"])
@pytest.mark.parametrize("S,D,causal", [(256, 64, False), (1000, 128, True), (333, 256, False)])
def test_gpu_k_ahead_and_early_lse_change_no_bit(knob, S, D, causal):
    """On the GPU, the producer's K-ahead order and the early 1 / l each give the default's output bit
    for bit, and both are close to float32 math."""
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    from tlxc.ops.attention import reference
    q, k, v = _inputs(S, D, device="cuda", seed=S + D)
    c = choose_config(D, causal, S)
    if knob == "early_lse" and c.overlap:
        c = type(c)(**{**c.__dict__, "overlap": False})
    ro, _ = reference(q, k, v, causal=causal, dtype=torch.float32)
    outs = []
    for on in (False, True):
        o, lse = attention_forward(q, k, v, causal=causal, config=type(c)(**{**c.__dict__, knob: on}))
        assert (o.float() - ro).abs().max() < 2e-2 * ro.abs().max()
        outs.append((o, lse))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
