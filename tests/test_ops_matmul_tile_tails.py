"""WS tiles between two powers of two (``ws_128x80x64``: 64 + 16 columns, ``ws_128x192x64``:
128 + 64): a main part and a tail, each with its own B box, wgmma and C store.  On the
interpreter: odd shapes whose last tile's tail is partly or wholly past N, both operand
major-nesses, the fused epilogue across the main/tail seam (bias, GLU pairs), pointer
stores; for sm_90a: both wgmma widths, no spills; and the configuration rules."""
from __future__ import annotations

import importlib

import pytest
import torch
from test_ops_matmul_tiles import _operands

from tlxc.ops import CONFIGS, matmul
from tlxc.ops import matmul_configs as cfgs
from tlxc.ops.matmul import compile_config

BF16_TOL = 8e-3
TAILS = ["ws_128x80x64_s6_sub1", "ws_128x80x64_s6_np_sub1", "ws_128x96x64_s6_sub1", "ws_128x192x64_s4_sub1",
         "ws_128x80x64_s6_c2_sub1", "ws_128x80x64_s6_c2a_sub1"]


def _rel(out, ref):
    assert torch.isfinite(out).all(), "poison left in the output"
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


# every configuration against an nn.Linear weight (B K-major); the other three layouts for 80- and
# 192-column tiles (the tail's B box is [BN_TAIL, BK] or [BK, BN_TAIL], its C box the same either way)
LAYOUT_CASES = [(c, False, True) for c in TAILS] + [(c, a_m, b_k) for c in ("ws_128x80x64_s6_sub1",
                                                                             "ws_128x192x64_s4_sub1")
                                                   for a_m, b_k in ((False, False), (True, True), (True, False))]


@pytest.mark.parametrize("config,a_mmajor,b_kmajor", LAYOUT_CASES)
def test_tile_tails_on_odd_shapes_with_the_epilogue(config, a_mmajor, b_kmajor, monkeypatch):
    """N = 2 tiles + 40 columns: the last tile's main part is partial and (80-wide tiles) its
    tail wholly past N; two programs walk the tiles (the ring wraps across tiles); bias + ReLU."""
    monkeypatch.setattr(importlib.import_module("tlxc.ops.matmul"), "CPU_SMS", 2)
    width = CONFIGS[config].bn
    M, N, K = 200, 2 * width + 40, 136
    a, b = _operands(M, N, K, a_mmajor, b_kmajor, seed=N)
    bias = torch.randn(N).to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    matmul(a, b, out, bias=bias, activation="relu", config=config)
    assert _rel(out, torch.relu(a.float() @ b.float() + bias.float())) < BF16_TOL


def test_a_tail_column_block_is_its_own_and_not_the_next_tiles():
    """Columns 64-79 of each 80-wide tile come from the tail's wgmma: a B whose columns are
    their own index makes any shift between the main part, the tail and the next tile visible."""
    M, N, K = 64, 240, 64
    a = torch.zeros(M, K, dtype=torch.bfloat16)
    a[:, 0] = 1
    b = torch.arange(N, dtype=torch.float32).to(torch.bfloat16).expand(K, N).t().contiguous().t()
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    matmul(a, b, out, config="ws_128x80x64_s6_sub1")
    assert torch.equal(out, torch.arange(N, dtype=torch.float32).to(torch.bfloat16).expand(M, N))


@pytest.mark.parametrize("config", ["ws_128x80x64_s6_sub1", "ws_128x192x64_s4_sub1"])
def test_glu_pairs_and_pointer_stores_with_a_tail(config):
    """GLU pairs (2j, 2j + 1) never straddle the seam (both parts are even); an output row of
    an odd number of elements is stored through pointers, tail included."""
    M, N, K = 150, 2 * 171, 72
    a, b = _operands(M, N, K, False, True, seed=7)
    out = torch.full((M, N // 2), float("nan"), dtype=torch.bfloat16)
    matmul(a, b, out, activation="swiglu", config=config)
    y = a.float() @ b.float()
    assert _rel(out, torch.nn.functional.silu(y[:, 0::2]) * y[:, 1::2]) < BF16_TOL
    assert importlib.import_module("tlxc.ops.matmul")._problem(a, b, out, True).tma_c is False


@pytest.mark.parametrize("name,b_kmajor", [(n, True) for n in TAILS] + [("ws_128x192x64_s4_sub1", False)])
def test_tile_tails_compile_for_sm90a(name, b_kmajor):
    c = CONFIGS[name]
    a = torch.empty(1000, 776, dtype=torch.bfloat16)
    b = torch.empty(1240, 776, dtype=torch.bfloat16).t() if b_kmajor else torch.empty(776, 1240, dtype=torch.bfloat16)
    (h,) = compile_config(name, a, b, bias=torch.empty(1240, dtype=torch.bfloat16), activation="gelu")
    assert h.n_spills == 0
    assert h.metadata.shared <= cfgs.ws_shared_bytes(c, 2, 2) <= cfgs.SHARED_LIMIT
    main, tail = cfgs.split_columns(c.bn)
    cuda = h.asm["cuda"]
    if b_kmajor:        # the two products on one A: one wgmma of the tile's width (fuse-dot-pairs)
        assert f"m64n{main + tail}k16" in cuda and f"m64n{main}k16" not in cuda and f"m64n{tail}k16" not in cuda
    else:               # N-major B: the tail's rows are not the main part's next rows
        assert f"m64n{main}k16" in cuda and f"m64n{tail}k16" in cuda


def test_split_columns_and_what_a_tail_config_may_be():
    assert cfgs.split_columns(128) == (128, 0)
    assert cfgs.split_columns(80) == (64, 16) and cfgs.split_columns(192) == (128, 64)
    bad = [(72, {"subtile": 1}), (80, {"subtile": 1, "stream_k": True}), (80, {}), (48, {"subtile": 1})]
    for bn, kw in bad:                       # 64 + 8; stream-K; subtile 2; 32 + 16
        with pytest.raises(AssertionError, match="tile tail"):
            cfgs._ws(128, bn, 4, **kw)


def test_a_pair_sharing_a_sits_side_by_side():
    """``share_a``: the pair's two tiles are neighbours along N, so it needs two tile columns
    (one tile row is enough); B is loaded whole by each CTA (its box is not halved)."""
    c = CONFIGS["ws_128x80x64_s6_c2a_sub1"]
    assert c.share_a and c.cluster_m == 2 and "sharing A" in c.describe()
    assert cfgs.supports(c, cfgs.Problem(100, 1240, 776, b_kmajor=True)) is None
    assert "two tile columns" in cfgs.supports(c, cfgs.Problem(1000, 80, 776, b_kmajor=True))
    assert "two tile rows" in cfgs.supports(CONFIGS["ws_128x80x64_s6_c2_sub1"], cfgs.Problem(100, 1240, 776))
    with pytest.raises(AssertionError, match="share_a"):
        cfgs._ws(128, 128, 4, share_a=True)
