"""Sliding windows and logit softcapping in the attention backward (tlxc/ops/attention_bwd.py,
``window=`` / ``softcap=``): the tl.dot kernels and the warp-specialized one on the interpreter,
against float64 autograd of a reference written from the semantics (top-left causal, a window
``(left, right)`` with -1 for an unbounded side, scores ``c * tanh(sm_scale * q.k / c)``, rows
that see no key: o = 0, lse = -inf, no gradient).  Shapes that are no block multiples, Sq != Sk,
GQA, packed sequences; outputs poisoned.  The same comparisons at moderate sizes on the GPU
(``gpu``); argument errors; the ws schedule's tile count; sm_90a compiles."""
from __future__ import annotations

import importlib

import pytest
import torch
from attention_bwd_ref import TOL, dense_inputs, packed_inputs, rel_err

from tlxc.ops.attention_bwd import attention_bwd, compile_kernels

host = importlib.import_module("tlxc.ops.attention_bwd")


# -- reference ------------------------------------------------------------------------------------------


def hidden_keys(sq: int, sk: int, causal: bool, window, device="cpu") -> torch.Tensor:
    """``[sq, sk]`` bool: True where query ``i`` does not see key ``j``."""
    i = torch.arange(sq, device=device)[:, None]
    j = torch.arange(sk, device=device)[None, :]
    hidden = torch.zeros(sq, sk, dtype=torch.bool, device=device)
    if causal:
        hidden |= j > i
    if window is not None:
        left, right = window
        if left >= 0:
            hidden |= j < i - left
        if right >= 0:
            hidden |= j > i + right
    return hidden


def reference(q, k, v, do, *, causal: bool, scale: float, window=None, softcap=None):
    """(o, lse, dq, dk, dv) in float64 for dense q [B, H, Sq, D], k / v [B, Hkv, Sk, D] (GQA by
    repeating kv heads; autograd sums their gradients back).  A row that sees no key gets o = 0
    and lse = -inf; its scores never enter a log-sum-exp, so no NaN reaches autograd."""
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    kk, vv = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = q @ kk.transpose(-1, -2) * scale
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    hidden = hidden_keys(s.shape[-2], s.shape[-1], causal, window, s.device)
    sees = ~hidden.all(-1)                                      # [Sq]: the row sees a key
    s = s.masked_fill(hidden, float("-inf"))
    lse = torch.logsumexp(s.masked_fill(~sees[:, None], 0.0), -1)  # finite stand-in for key-less rows
    lse = torch.where(sees, lse, torch.zeros_like(lse))
    o = torch.exp(s - lse[..., None]) @ vv                     # exp(-inf) = 0: key-less rows get o = 0
    o.backward(do.double())
    lse = lse.detach().masked_fill(~sees, float("-inf"))
    return o.detach(), lse, q.grad, k.grad, v.grad


def packed_reference(q, k, v, do, cu_q, cu_k, **kw):
    """The same for packed q [total_q, H, D], k / v [total_k, Hkv, D], each sequence alone; lse
    [H, total_q]."""
    o = torch.zeros(q.shape, dtype=torch.float64)
    dq = torch.zeros_like(o)
    dk = torch.zeros(k.shape, dtype=torch.float64)
    dv = torch.zeros_like(dk)
    lse = torch.full((q.shape[1], q.shape[0]), float("-inf"), dtype=torch.float64)
    cu_q, cu_k = cu_q.tolist(), cu_k.tolist()
    for b in range(len(cu_q) - 1):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        if qs.start == qs.stop or ks.start == ks.stop:       # no query, or no key: o = 0, lse = -inf
            continue
        r = reference(*(t[s].transpose(0, 1)[None] for t, s in ((q, qs), (k, ks), (v, ks), (do, qs))), **kw)
        o[qs], dq[qs], dk[ks], dv[ks] = (t[0].transpose(0, 1) for t in (r[0], r[2], r[3], r[4]))
        lse[:, qs] = r[1][0]
    return o, lse, dq, dk, dv


def run_dense(B, H, Hkv, sq, sk, D, dtype, *, causal, window=None, softcap=None, scale=None, seed=0,
              q_gain=1.0, device="cpu"):
    """attention_bwd against the reference on fresh random inputs; returns (got, ref, lse)."""
    q, k, v, do = dense_inputs(B, H, Hkv, sq, sk, D, dtype, device=device, seed=seed)
    q = gained(q, q_gain)
    scale = D ** -0.5 if scale is None else scale
    o, lse, *ref = reference(q, k, v, do, causal=causal, scale=scale, window=window, softcap=softcap)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=causal, sm_scale=scale, window=window,
                        softcap=softcap)
    return got, ref, lse


def gained(q: torch.Tensor, gain: float) -> torch.Tensor:
    """``q`` times ``gain`` in its dtype: larger scores, so that a cap bends them."""
    return (q.float() * gain).to(q.dtype)


def check(got, ref, dtype, what=""):
    for name, g, r in zip(("dq", "dk", "dv"), got, ref):
        err = rel_err(g, r)              # (also: every element finite, no poison left)
        assert err < TOL[dtype], f"{what} {name}: relative error {err:.2e} >= {TOL[dtype]:.0e}"


def check_rows(got, ref, tol: float, what=""):
    """Row by row (a query's dq, a key's dk / dv): one key or query lost or let in at a window's
    edge moves a row by percents, the whole tensor's norm by less than its tolerance.  Rows under
    5% of the median row or 0.1% of the largest are left to ``check`` (their float32 terms can
    underflow where float64's do not; bf16: rows measured <= 0.9%)."""
    for name, g, r in zip(("dq", "dk", "dv"), got, ref):
        g, r = (t.double().reshape(-1, t.shape[-1]) for t in (g, r))
        norms = r.norm(dim=1)
        rows = (norms > 0.05 * norms.median()) & (norms > 1e-3 * norms.max())
        worst = ((g - r).norm(dim=1)[rows] / norms[rows]).max().item()
        assert worst < tol, f"{what} {name}: a row's relative error is {worst:.2e} >= {tol:.0e}"


@pytest.fixture
def poisoned(monkeypatch):
    """Outputs start as NaN (torch.empty_like in the host code): a row the kernels forget to
    write fails the finiteness check of ``rel_err``."""
    monkeypatch.setattr(host.torch, "empty_like", lambda t: torch.full_like(t, float("nan")))


@pytest.fixture
def launched(monkeypatch):
    """The kernels each call launches, with their constexpr flags."""
    calls = []
    real = host._launch

    def spy(kernel, grid, *args, **meta):
        calls.append((kernel.__name__, meta))
        return real(kernel, grid, *args, **meta)

    monkeypatch.setattr(host, "_launch", spy)
    return calls


def use(monkeypatch, kernels: str):
    monkeypatch.setenv("TLXC_ATTN_BWD", kernels)


def ran(calls, name: str, **flags) -> bool:
    return any(n == name and all(meta.get(f, False) == on for f, on in flags.items()) for n, meta in calls)


# -- the tl.dot kernels -----------------------------------------------------------------------------------

# (0, 0) is left out: a row that sees one key has P = 1 and dS = 0, so dq and dk are 0 and a
# relative error means nothing; (1, 0) is the narrowest window with a gradient
WINDOWS = [(16, 16), (40, -1), (-1, 24), (1, 0), (3, 130)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", WINDOWS)
def test_dot_window_more_queries_than_keys(window, causal, poisoned, launched, monkeypatch):
    """Sq = 150 > Sk = 70, GQA 2:1, D = 64: with a bounded left side the rows past Sk + left see no
    key (lse -inf, dq rows 0); the query blocks past every window are skipped."""
    use(monkeypatch, "dot")
    got, ref, lse = run_dense(1, 4, 2, 150, 70, 64, torch.bfloat16, causal=causal, window=window, seed=1)
    check(got, ref, torch.bfloat16, f"window={window} causal={causal}")
    assert ran(launched, "bwd_dq_kernel", WINDOW=True) or (causal and window[0] < 0)
    if window[0] >= 0:
        keyless = (lse[0, 0] == float("-inf"))
        assert keyless.any() and (got[0][0, :, keyless] == 0).all()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", WINDOWS)
def test_dot_window_more_keys_than_queries(window, causal, poisoned, monkeypatch):
    """Sq = 67 < Sk = 200 (two batches, MHA, fp16): the keys no row sees get zero dK / dV."""
    use(monkeypatch, "dot")
    got, ref, _ = run_dense(2, 2, 2, 67, 200, 64, torch.float16, causal=causal, window=window, seed=2)
    check(got, ref, torch.float16, f"window={window} causal={causal}")
    unseen = hidden_keys(67, 200, causal, window).all(0)
    assert (got[1][:, :, unseen] == 0).all() and (got[2][:, :, unseen] == 0).all()


@pytest.mark.parametrize("D", [96, 256])
def test_dot_window_padded_and_wide_head_dims(D, poisoned, monkeypatch):
    """D = 96 (a 128 tile, columns masked) and 256 (other block sizes), causal window of 50."""
    use(monkeypatch, "dot")
    got, ref, _ = run_dense(1, 2, 1, 100, 130, D, torch.bfloat16, causal=True, window=(50, -1), seed=D)
    check(got, ref, torch.bfloat16, f"D={D}")


@pytest.mark.parametrize("window", [None, (24, 8)])
@pytest.mark.parametrize("causal", [False, True])
def test_dot_softcap(causal, window, poisoned, launched, monkeypatch):
    """Scores about 3 sigma wide under a cap of 4 (tanh bends them), with and without a window."""
    use(monkeypatch, "dot")
    got, ref, _ = run_dense(1, 4, 2, 110, 90, 64, torch.bfloat16, causal=causal, window=window, softcap=4.0,
                            seed=5, q_gain=3.0)
    check(got, ref, torch.bfloat16, f"causal={causal} window={window}")
    assert ran(launched, "bwd_dkdv_kernel", SOFTCAP=True) and ran(launched, "bwd_dq_kernel", SOFTCAP=True)


def test_softcap_changes_the_gradient(monkeypatch):
    """The cap matters at these scores (the uncapped gradients are far from the capped ones) and
    the kernels follow the capped ones (fp16, the tighter bound)."""
    use(monkeypatch, "dot")
    q, k, v, do = dense_inputs(1, 2, 2, 64, 64, 64, torch.float16, seed=6)
    q = gained(q, 3.0)
    o, lse, *ref = reference(q, k, v, do, causal=False, scale=0.125, softcap=2.0)
    _, _, *plain = reference(q, k, v, do, causal=False, scale=0.125)
    assert all(rel_err(p, r) > 0.1 for p, r in zip(plain, ref))
    got = attention_bwd(do, q, k, v, o.half(), lse.float(), causal=False, sm_scale=0.125, softcap=2.0)
    check(got, ref, torch.float16)


# -- the warp-specialized kernel ---------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window, softcap", [((100, 30), None), ((-1, 70), None), ((64, 0), 5.0), (None, 5.0)])
@pytest.mark.parametrize("D", [64, 128])
def test_ws_window_softcap(D, window, softcap, causal, poisoned, launched, monkeypatch):
    """Sq = 330 > Sk = 300 (3 key blocks of 128, the last partial), GQA 2:1: tiles across a window
    edge masked, query tiles outside every window skipped; dense causal runs the persistent table
    (its cost model sees the window), non-causal one program per item; D = 128 non-causal reads
    its statistics from global memory, the others from shared."""
    use(monkeypatch, "ws")
    got, ref, _ = run_dense(1, 4, 2, 330, 300, D, torch.bfloat16, causal=causal, window=window, softcap=softcap,
                            seed=D + 7, q_gain=2.0)
    flags = {"WINDOW": window is not None and not (causal and window[0] < 0), "SOFTCAP": softcap is not None}
    assert ran(launched, "bwd_ws_kernel", **flags)
    check(got, ref, torch.bfloat16, f"D={D} window={window} softcap={softcap} causal={causal}")


@pytest.mark.parametrize("D", [64, 128])
def test_ws_dynamic_schedule_with_a_window(D, poisoned, launched, monkeypatch):
    """WS_DYNAMIC (device counter) with a causal window and a cap, three programs."""
    use(monkeypatch, "ws")
    monkeypatch.setattr(host, "CPU_SMS", 3)
    monkeypatch.setattr(host, "WS_DYNAMIC", {False: True, True: True})
    got, ref, _ = run_dense(2, 2, 1, 200, 260, D, torch.bfloat16, causal=True, window=(70, -1), softcap=6.0,
                            seed=D + 9, q_gain=2.0)
    assert ran(launched, "bwd_ws_kernel", WINDOW=True, SOFTCAP=True, DYNAMIC=True)
    check(got, ref, torch.bfloat16)


@pytest.mark.parametrize("kernels", ["dot", "ws"])
@pytest.mark.parametrize("causal, window", [(False, (65, 1)), (False, (63, 65)), (False, (62, 126)), (False, (1, 63)),
                                            (True, (65, -1)), (True, (62, -1))])
def test_window_edges_next_to_block_edges(kernels, causal, window, poisoned, monkeypatch):
    """Sq = Sk = 300 (several query and key blocks of 64 / 128): window sides next to a block
    multiple, where one row or key decides the first and last blocks a walk visits (sides 1, 63,
    65 mod 64) and whether a tile is masked (62 mod 64: one corner of the tile hidden); checked
    row by row too."""
    use(monkeypatch, kernels)
    got, ref, _ = run_dense(1, 2, 1, 300, 300, 64, torch.bfloat16, causal=causal, window=window, seed=11)
    check(got, ref, torch.bfloat16, f"{kernels} causal={causal} window={window}")
    check_rows(got, ref, 3e-2, f"{kernels} causal={causal} window={window}")


def edge_inputs(sq: int, sk: int, D: int, side: str, dtype, seed=0):
    """q, k, v, do ``[1, 1, S, D]`` whose scores (at sm_scale 1) are ``2 (i - j)`` (``side`` left)
    or ``2 (j - i)`` (right) plus a little noise: a row's largest visible score is at its window's
    edge and the key just outside it scores 2 more, so a hidden key let in, or the edge key lost,
    moves the row by far more than any tolerance.  fp16 holds the positions exactly."""
    g = torch.Generator().manual_seed(seed)
    q = 0.2 * torch.randn(1, 1, sq, D, generator=g)
    k = 0.2 * torch.randn(1, 1, sk, D, generator=g)
    sign = 2.0 if side == "left" else -2.0
    q[..., 0], q[..., 1] = torch.arange(sq, dtype=torch.float32), 1.0
    k[..., 0], k[..., 1] = sign, -sign * torch.arange(sk, dtype=torch.float32)
    v = torch.randn(1, 1, sk, D, generator=g)
    do = torch.randn(1, 1, sq, D, generator=g)
    return tuple(t.to(dtype) for t in (q, k, v, do))


@pytest.mark.parametrize("kernels", ["dot", "ws"])
@pytest.mark.parametrize("side, causal, window", [("left", False, (62, -1)), ("left", True, (190, -1)),
                                                  ("left", False, (65, 1)), ("right", False, (-1, 62)),
                                                  ("right", False, (1, 65))])
def test_window_edges_with_the_largest_scores(kernels, side, causal, window, poisoned, monkeypatch):
    """Scores growing away from the diagonal toward the window's ``side`` (``edge_inputs``), Sq = Sk
    = 300, fp16: the masks of the tiles across one edge of a window (sides 62 mod 64, the other
    side unbounded or, causal, the diagonal 128 keys away: one corner of a tile hidden, the
    tile's only mask) and the walks' first and last blocks (sides 1, 65 mod 64)."""
    use(monkeypatch, kernels)
    dtype = torch.float16
    q, k, v, do = edge_inputs(300, 300, 64, side, dtype, seed=len(side))
    o, lse, *ref = reference(q, k, v, do, causal=causal, scale=1.0, window=window)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=causal, sm_scale=1.0, window=window)
    # dq's two position columns are sums of dS times positions up to 600 that cancel (sum_j dS = 0):
    # fp16's dS rounding leaves them percents off; the other columns see the same dS
    got, ref = (got[0][..., 2:], *got[1:]), (ref[0][..., 2:], *ref[1:])
    check(got, ref, dtype, f"{kernels} {side} window={window}")
    check_rows(got, ref, 0.25, f"{kernels} {side} window={window}")    # (measured <= 4.2%; a key let in or lost: ~1)


# -- packed sequences ----------------------------------------------------------------------------------

LENS_Q = [1, 67, 200, 5, 0, 90]
LENS_K = [1, 130, 70, 0, 9, 90]


@pytest.mark.parametrize("kernels, D, stats_smem", [("dot", 64, False), ("ws", 64, False), ("ws", 128, True)])
@pytest.mark.parametrize("causal, window, softcap", [(False, (20, 10), None), (True, (33, -1), 3.0),
                                                     (False, (-1, 0), 3.0)])
def test_packed(kernels, D, stats_smem, causal, window, softcap, poisoned, launched, monkeypatch):
    """Packed sequences of (q, k) lengths (1, 1), (67, 130), (200, 70), (5, 0), (0, 9), (90, 90),
    GQA 4:1: windows per sequence, a sequence's rows past its keys' reach see no key; ws with the
    statistics in shared memory (``WS_STATS_SMEM_PACKED``, rows moved to 16-byte columns) or not."""
    use(monkeypatch, kernels)
    monkeypatch.setattr(host, "WS_STATS_SMEM_PACKED", stats_smem)
    dtype = torch.bfloat16
    q, k, v, do, cu_q, cu_k = packed_inputs(LENS_Q, LENS_K, 4, 1, D, dtype, seed=D + causal)
    q = gained(q, 2.0)
    kw = {"causal": causal, "scale": D ** -0.5, "window": window, "softcap": softcap}
    o, lse, *ref = packed_reference(q, k, v, do, cu_q, cu_k, **kw)
    got = attention_bwd(do, q, k, v, o.to(dtype), lse.float(), causal=causal, sm_scale=D ** -0.5,
                        cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(LENS_Q), max_seqlen_k=max(LENS_K),
                        window=window, softcap=softcap)
    assert ran(launched, "bwd_ws_kernel" if kernels == "ws" else "bwd_dq_kernel", WINDOW=True)
    check(got, ref, dtype, f"{kernels} D={D}")
    assert (lse == float("-inf")).any()


# -- host side -------------------------------------------------------------------------------------------


def test_no_window_is_plain_attention(launched, monkeypatch):
    """window None, (-1, -1), or (-1, r) under causal (the diagonal bounds the right side) and no
    cap launch the kernels without the flags, the very kernels of plain attention."""
    use(monkeypatch, "dot")
    q, k, v, do = dense_inputs(1, 2, 2, 40, 40, 64, torch.bfloat16)
    lse = torch.zeros(1, 2, 40)
    for causal, window in ((False, None), (False, (-1, -1)), (True, (-1, 5)), (True, (-1, -1))):
        launched.clear()
        attention_bwd(do, q, k, v, q, lse, causal=causal, sm_scale=0.1, window=window)
        assert [n for n, _ in launched] == ["bwd_preprocess_kernel", "bwd_dkdv_kernel", "bwd_dq_kernel"]
        assert not any("WINDOW" in meta or "SOFTCAP" in meta for _, meta in launched)


@pytest.mark.parametrize("window, message", [
    ((1, 2, 3), "'window' must be a pair of ints"), (5, "'window' must be a pair of ints"),
    ((1.0, 2), "'window' must be a pair of ints"), ((True, 2), "'window' must be a pair of ints"),
    ((-2, 4), "'window' sides must be >= 0, or -1"), ((4, -7), "'window' sides must be >= 0, or -1")])
def test_window_errors(window, message):
    q, k, v, do = dense_inputs(1, 1, 1, 8, 8, 64, torch.bfloat16)
    with pytest.raises(ValueError, match=message):
        attention_bwd(do, q, k, v, q, torch.zeros(1, 1, 8), causal=False, sm_scale=0.1, window=window)


@pytest.mark.parametrize("softcap", [0.0, -1.0, float("inf"), float("nan"), True, "30"])
def test_softcap_errors(softcap):
    q, k, v, do = dense_inputs(1, 1, 1, 8, 8, 64, torch.bfloat16)
    with pytest.raises(ValueError, match="'softcap' must be a positive finite number"):
        attention_bwd(do, q, k, v, q, torch.zeros(1, 1, 8), causal=False, sm_scale=0.1, softcap=softcap)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [(0, 0), (63, 64), (200, -1), (-1, 130), (1, 1000)])
def test_ws_item_tiles_are_the_tiles_that_see_the_block(window, causal):
    """The ws schedule's cost of an item (and the kernel's walk, ``_work``, the same bounds):
    exactly the 64-row query tiles with a row that sees a key of the 128-key block, brute force."""
    sq, sk = 700, 900
    checked = host._check_window(window, causal)          # None: no bound left (causal, (-1, r))
    bounds = host._window_bounds(checked, sq, sk)
    hidden = hidden_keys(sq, sk, causal, window)
    n_q_tiles = -(-sq // host.WS_BLOCK_M)
    for block in range(-(-sk // host.WS_BLOCK_N)):
        sees = (~hidden[:, block * 128:(block + 1) * 128].all(1)).to(torch.int8)
        per_tile = torch.nn.functional.pad(sees, (0, -sq % 64)).view(-1, 64).any(1)
        tiles = torch.nonzero(per_tile).flatten().tolist()
        got = host._ws_item_tiles(block, n_q_tiles, causal, bounds)
        if tiles:
            assert tiles == list(range(tiles[0], tiles[0] + got)), (block, tiles, got)
        else:
            assert got == 0, (block, got)


@pytest.mark.parametrize("D,causal,options,stats,drift", [
    (128, False, {}, True, True), (128, True, {}, True, False), (64, False, {}, True, True),
    (128, False, {"window": (40, 8)}, False, False), (128, False, {"softcap": 20.0}, False, False),  # they spill
    (128, True, {"window": (40, -1)}, True, False), (64, False, {"window": (40, 8)}, True, True)], ids=str)
def test_ws_options_where_shipped(D, causal, options, stats, drift, poisoned, launched, monkeypatch):
    """The shipped WS_STATS_SMEM and WS_DRIFT choices on dense inputs: the statistics in shared memory at
    both head dims with or without a mask, drifting consumers at D = 64 and at D = 128 without a mask
    (session 36), but at D = 128 without a mask under a window or softcapping neither (WS_OPTIONS_IN_STEP:
    4-32 spilled registers there); the gradients match float64 either way."""
    use(monkeypatch, "ws")
    got, ref, _ = run_dense(1, 2, 2, 150, 150, D, torch.bfloat16, causal=causal, seed=D + 41, **options)
    check(got, ref, torch.bfloat16, f"D={D} causal={causal} {options}")
    assert ran(launched, "bwd_ws_kernel", STATS_SMEM=stats, DRIFT=drift)


# -- sm_90a compiles -------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kernels, D", [("dot", 64), ("dot", 128), ("ws", 64), ("ws", 128)])
@pytest.mark.parametrize("causal", [False, True])
def test_compiles_for_sm90a(kernels, D, causal, monkeypatch):
    """Window and cap together at a realistic size (GQA 4:1, S = 1024): at most 8 spilled registers
    (32 bytes; measured: 0-4; dK/dV at D = 128 is at 244-254 registers without the options), shared
    memory within 227 KB, the cap's tanh on the MUFU."""
    use(monkeypatch, kernels)
    q, k, v, do = dense_inputs(2, 8, 2, 1024, 1024, D, torch.bfloat16)
    handles = compile_kernels(do, q, k, v, q, torch.zeros(2, 8, 1024), causal=causal, sm_scale=0.1,
                              window=(256, 64), softcap=30.0)
    for h in handles[1:]:
        assert h.n_spills <= 8, (h.name, h.n_spills)
        assert h.metadata.shared <= 227 * 1024
        assert "tanh.approx.f32" in h.asm["cuda"]


# -- on the GPU ----------------------------------------------------------------------------------------

GPU = "cuda"        # (a name to point elsewhere, to try the GPU tests' own code on the interpreter)


@pytest.mark.gpu
@pytest.mark.parametrize("kernels", ["dot", "ws"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal, window, softcap", [
    (False, (256, 128), None), (True, (300, -1), None), (False, (-1, 64), 20.0), (True, None, 30.0),
    (True, (128, -1), 15.0), (False, (0, 2), None)])
def test_gpu_dense(kernels, D, causal, window, softcap, poisoned, launched, monkeypatch):
    """bf16 on CUDA, B = 2, H = 8, Hkv = 2, Sq = 1100 > Sk = 777 and Sq = 333 < Sk = 1025,
    against float64 autograd."""
    use(monkeypatch, kernels)
    for sq, sk in ((1100, 777), (333, 1025)):
        launched.clear()
        got, ref, _ = run_dense(2, 8, 2, sq, sk, D, torch.bfloat16, causal=causal, window=window, softcap=softcap,
                                seed=sq + D, q_gain=2.0, device=GPU)
        assert ran(launched, "bwd_ws_kernel" if kernels == "ws" else "bwd_dq_kernel")
        check(got, ref, torch.bfloat16, f"{kernels} D={D} {sq}x{sk} causal={causal} window={window} cap={softcap}")


@pytest.mark.gpu
@pytest.mark.parametrize("kernels", ["dot", "ws"])
@pytest.mark.parametrize("D", [64, 128])
def test_gpu_packed(kernels, D, poisoned, monkeypatch):
    """Packed bf16 sequences of mixed lengths (incl. 1 and 0), GQA 4:1, causal window + cap."""
    use(monkeypatch, kernels)
    lens_q, lens_k = [1, 777, 300, 130, 0, 1024], [1, 777, 1000, 70, 9, 513]
    dtype = torch.bfloat16
    q, k, v, do, cu_q, cu_k = packed_inputs(lens_q, lens_k, 8, 2, D, dtype, device=GPU, seed=D)
    for causal, window, softcap in ((True, (200, -1), 25.0), (False, (96, 32), None)):
        kw = {"causal": causal, "scale": D ** -0.5, "window": window, "softcap": softcap}
        o, lse, *ref = packed_reference(*(t.cpu() for t in (q, k, v, do, cu_q, cu_k)), **kw)   # (on the CPU)
        got = attention_bwd(do, q, k, v, o.to(dtype).to(GPU), lse.float().to(GPU), causal=causal,
                            sm_scale=D ** -0.5, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q),
                            max_seqlen_k=max(lens_k), window=window, softcap=softcap)
        check([g.cpu() for g in got], ref, dtype, f"{kernels} D={D} causal={causal}")
