"""tlxc.ops.matmul's tile shapes for the square / medium / odd shapes of issue 22 (CPU):
192x128 tiles on three consumer warp groups and 128x64 tiles, on the interpreter (odd
shapes, both operand major-nesses, NaN-poisoned outputs, float32 reference), what they
compile to for sm_90a, the wave arithmetic that picks them, and the bench's shape and
configuration options."""
from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import pytest
import torch
from matmul_checks import fp8_scaled_error, operands

from tlxc.ops import CONFIGS, matmul
from tlxc.ops import matmul_configs as cfgs
from tlxc.ops.matmul import compile_config

BF16_TOL = 8e-3
NEW_TILES = ["ws_192x128x64_s5", "ws_192x128x64_s5_c2", "ws_128x64x64_s4_np_sub1", "ws_128x64x64_s8_np_sub1",
             "ws_128x128x64_s6_np", "ws_128x128x64_s4_sk", "ws_128x64x64_s4_np_c2_sub1"]
SMALL_DOT = ["dot_64x128x64_s6_w4", "dot_64x128x128_s3_w4", "dot_64x64x64_s4_w4"]


def _operands(M, N, K, a_mmajor, b_kmajor, seed):
    return operands(M, N, K, a_mmajor=a_mmajor, b_kmajor=b_kmajor, seed=seed)


@pytest.mark.parametrize("config,shape", [("ws_192x128x64_s5", (400, 264, 136)),
                                          ("ws_192x128x64_s5_c2", (500, 200, 72)),
                                          ("ws_128x64x64_s4_np_sub1", (200, 136, 200)),
                                          ("ws_128x64x64_s4_np_c2_sub1", (520, 136, 200)),
                                          ("ws_128x256x64_s3_c2_sub1", (520, 300, 136))])
@pytest.mark.parametrize("a_mmajor,b_kmajor", [(False, False), (True, True)])
def test_new_tiles_on_odd_shapes_with_the_epilogue(config, shape, a_mmajor, b_kmajor, monkeypatch):
    """Ragged edge tiles in M and N, K not a multiple of 64; two programs walk the tiles
    (persistent configurations), so the ring's phases wrap across tiles; bias + ReLU."""
    monkeypatch.setattr(importlib.import_module("tlxc.ops.matmul"), "CPU_SMS", 2)
    M, N, K = shape
    a, b = _operands(M, N, K, a_mmajor, b_kmajor, seed=M + N)
    bias = torch.randn(N).to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    matmul(a, b, out, bias=bias, activation="relu", config=config)
    ref = torch.relu(a.float() @ b.float() + bias.float())
    assert torch.isfinite(out).all(), "poison left in the output"
    assert ((out.double() - ref.double()).norm() / ref.double().norm()).item() < BF16_TOL


@pytest.mark.parametrize("config", SMALL_DOT)
@pytest.mark.parametrize("a_mmajor,b_kmajor", [(False, False), (True, True)])
def test_small_square_pointer_tiles_on_odd_shapes(config, a_mmajor, b_kmajor):
    """The small-square probes of the pointer kernel (deeper ring, BK = 128, 64x64 tiles):
    K = 555 leaves a partial last k-step (masked), M and N ragged."""
    a, b = _operands(70, 90, 555, a_mmajor, b_kmajor, seed=5)
    out = torch.full((70, 90), float("nan"), dtype=torch.bfloat16)
    matmul(a, b, out, config=config)
    ref = a.double() @ b.double()
    assert torch.isfinite(out).all(), "poison left in the output"
    assert ((out.double() - ref).norm() / ref.norm()).item() < BF16_TOL


SKINNY = ["dot_64x64x128_s3_w4", "dot_64x64x128_s4_w4", "dot_64x64x128_s5_w4", "dot_64x64x128_s6_w4",
          "dot_128x64x128_s4_w4", "dot_64x64x64_s6_w4_k4", "dot_128x128x128_s3_w8_k4",
          "dot_64x32x256_s4_w4", "dot_64x32x128_s8_w4", "dot_64x64x64_s3_w4_k4c", "dot_64x64x128_s3_w4_k2c",
          "dot_64x64x128_s4_w4_k2c", "dot_128x64x64_s3_w4_k2c", "dot_64x64x128_s4_w4_k2", "dot_64x64x128_s5_w4_k2",
          "dot_64x64x128_s6_w4_k2", "dot_64x64x64_s8_w4_k2", "dot_64x64x256_s3_w4_k2", "dot_64x128x128_s4_w4_k4",
          "dot_64x128x64_s4_w4_k2", "dot_128x128x64_s3_w8_k2", "dot_128x128x64_s4_w8_k2",
          "dot_64x64x128_s3_w4_k4"]


@pytest.mark.parametrize("config", SKINNY)
@pytest.mark.parametrize("a_mmajor,b_kmajor", [(False, False), (False, True), (True, True)])
def test_skinny_no_split_tiles_on_odd_shapes(config, a_mmajor, b_kmajor):
    """The M = 64-128 tiles with 128 elements of K a step (and the deeper k4 ring): M = 70
    (a ragged second row tile), N = 90, K = 555 (a masked partial last step; 1099 for the
    128-wide split), bias + GELU in the epilogue, against a float64 product."""
    c = CONFIGS[config]
    K = max(555, 2 * c.split_k * c.bk + 75)         # split-K: two steps a split at least, a partial last one
    a, b = _operands(70, 90, K, a_mmajor, b_kmajor, seed=9)
    bias = torch.randn(90).to(torch.bfloat16)
    out = torch.full((70, 90), float("nan"), dtype=torch.bfloat16)
    matmul(a, b, out, bias=bias, activation="gelu", config=config)
    ref = torch.nn.functional.gelu(a.double() @ b.double() + bias.double())
    assert torch.isfinite(out).all(), "poison left in the output"
    assert ((out.double() - ref).norm() / ref.norm()).item() < BF16_TOL


@pytest.mark.parametrize("config", ["dot8_64x64x128_s6_w4", "dot8_64x64x256_s4_w4"])
def test_fp8_skinny_tiles_with_scales(config):
    """fp8 64x64 tiles (128 or 256 bytes of K a step): K = 600 leaves a partial last step,
    row-wise scales of A, a tensor scale of B."""
    assert fp8_scaled_error(config, 100, 72, 600, seed=11) < BF16_TOL


@pytest.mark.parametrize("config,sms,shape", [
    ("ws_128x128x64_s4_sk", 5, (200, 128, 520)),     # 2 tiles x 9 k-steps: up to 3 programs a tile
    ("ws_128x128x64_s4_sk", 4, (300, 264, 200)),     # 9 tiles x 4 k-steps: tiles over program ends
    ("ws_128x128x64_s4_sk", 3, (130, 75, 72)),       # N = 75: pointer stores; 2 k-steps
    ("ws_128x128x64_s4_sk", 2, (520, 264, 200)),     # 15 tiles: 6 rounds whole, 3 tiles shared
    ("ws_128x256x64_s3_sk", 3, (300, 512, 520)),     # 256-wide: 6 tiles x 9 k-steps on 3 programs
    ("ws_128x256x64_s3_sk", 4, (130, 600, 200))])    # 6 tiles (a partial last column) x 4
@pytest.mark.parametrize("a_mmajor,b_kmajor", [(False, False), (True, True)])
def test_stream_k_sums_split_tiles(config, sms, shape, a_mmajor, b_kmajor, monkeypatch):
    """Stream-K on ``sms`` programs: whole tiles for all but the last one or two rounds, then
    each program takes an equal share of the remaining tiles' k-steps; a tile begun by earlier
    programs is summed (with the epilogue) by the one with its last k-step (256-wide tiles: each
    consumer publishes, sums and stores its partial as four 64-column quarters, a whole-width
    partial's conversion scratch not fitting beside the ring).
    Every flag is lowered again afterwards (the next launch starts from zero), and a second
    run gives the same bits (partials summed in program order)."""
    m = importlib.import_module("tlxc.ops.matmul")
    monkeypatch.setattr(m, "CPU_SMS", sms)
    monkeypatch.setattr(m, "_STREAM_K", {})
    M, N, K = shape
    a, b = _operands(M, N, K, a_mmajor, b_kmajor, seed=M * sms)
    bias = torch.randn(N).to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    matmul(a, b, out, bias=bias, activation="silu", config=config)
    ref = torch.nn.functional.silu(a.double() @ b.double() + bias.double())
    assert torch.isfinite(out).all(), "poison left in the output"
    assert ((out.double() - ref).norm() / ref.norm()).item() < BF16_TOL
    (_, flags), = m._STREAM_K.values()
    assert not flags.any(), flags
    again = torch.full_like(out, float("nan"))
    matmul(a, b, again, bias=bias, activation="silu", config=config)
    assert torch.equal(again, out)


def test_wide_stream_k_needs_a_tma_store_target():
    p = cfgs.Problem(300, 600, 512, b_kmajor=True, tma_c=False)
    assert "TMA" in cfgs.supports(CONFIGS["ws_128x256x64_s3_sk"], p)


def test_stream_k_gives_every_program_a_share():
    """The k-step shares: contiguous, covering every tile's k-steps once, and no program's
    share longer than the average rounded up (80 tiles x 13 k-steps on 132 SMs: 7-8 each
    where one tile per program gives 13)."""
    tiles, k_tiles, progs = 80, 13, 132
    total = tiles * k_tiles
    shares = [((p * total) // progs, ((p + 1) * total) // progs) for p in range(progs)]
    assert shares[0][0] == 0 and shares[-1][1] == total
    assert all(shares[i][1] == shares[i + 1][0] for i in range(progs - 1))
    assert max(hi - lo for lo, hi in shares) == math.ceil(total / progs) == 8
    for tile in range(tiles):                    # the first program of a tile, as the kernel computes it
        first = -(-((tile * k_tiles + 1) * progs) // total) - 1
        lo, hi = shares[first]
        assert lo <= tile * k_tiles < hi


def test_stream_k_is_not_picked_and_bounds_its_arithmetic():
    """Stream-K measured slower everywhere on the H200 (0.60x at 1000x1240x776 against 0.935x
    for whole 128x128 tiles): no table row names it; it stays an explicit / autotuned choice,
    refused where its k-step arithmetic would overflow 32 bits."""
    assert all(row[4] != "ws_128x128x64_s4_sk" for row in cfgs.MEASURED)
    assert cfgs.choose_config(cfgs.Problem(1000, 1240, 776, b_kmajor=True)).name == "ws_128x128x64_s5"
    huge = cfgs.Problem(65536, 65536, 16384)         # 2^18 tiles x 256 k-steps x 132 SMs
    assert "2^31" in cfgs.supports(CONFIGS["ws_128x128x64_s4_sk"], huge)


def test_small_squares_take_the_measured_small_tiles():
    assert cfgs.choose_config(cfgs.Problem(512, 512, 512)).name == "dot_64x64x64_s4_w4"
    assert cfgs.choose_config(cfgs.Problem(1024, 1024, 1024, b_kmajor=True)).name == "ws_128x64x64_s8_np_sub1"


def test_three_consumers_float32_output_through_pointer_stores():
    """N = 75: the output cannot be a TMA store target; the three consumers store their
    64-row slices through pointers, float32."""
    a, b = _operands(260, 75, 130, False, True, seed=7)
    out = torch.full((260, 75), float("nan"))
    matmul(a, b, out, config="ws_192x128x64_s5")
    assert ((out.double() - (a.double() @ b.double())).norm() / out.double().norm()).item() < 1e-5


@pytest.mark.parametrize("name", NEW_TILES)
def test_new_tiles_compile_for_sm90a(name):
    """No spills; a 192-row tile runs 16 warps (producer + three consumer warp groups) at
    160 registers per consumer thread (the register file's 65536 / 512 threads on average);
    shared memory as ``ws_shared_bytes`` models it, within the limit."""
    c = CONFIGS[name]
    a = torch.empty(1024, 1024, dtype=torch.bfloat16)
    b = torch.empty(1024, 1024, dtype=torch.bfloat16).t()
    (h,) = compile_config(name, a, b, bias=torch.empty(1024, dtype=torch.bfloat16), activation="gelu")
    assert h.n_spills == 0
    assert h.metadata.shared <= cfgs.ws_shared_bytes(c, 2, 2) <= cfgs.SHARED_LIMIT
    cuda = h.asm["cuda"]
    threads = 128 * (c.consumers + 1)
    assert f"__launch_bounds__({threads}, 1)" in cuda
    assert f"tlx_setmaxnreg_inc<{cfgs.consumer_registers(c.consumers)}>" in cuda
    assert cuda.count(f"m64n{c.bn}k16") >= c.consumers


def test_consumer_register_budgets_fill_the_register_file():
    assert cfgs.consumer_registers(2) == 232
    assert cfgs.consumer_registers(3) == 160
    for n in (2, 3):
        assert 128 * n * cfgs.consumer_registers(n) + 128 * 24 <= 65536


def _waves(M, N, bm, bn, sms=132):
    tiles = math.ceil(M / bm) * math.ceil(N / bn)
    return M * N / (math.ceil(tiles / sms) * sms * bm * bn)


def test_192_row_tiles_fill_the_waves_where_they_are_picked():
    """3072^3 takes 192x128 tiles (measured 0.99x cuBLAS against 0.87x with 128x128): the last
    round is fuller than with 128x128 or 128x256 (useful fraction 0.97 against <= 0.87).
    5000x3000x2000 would be fuller too (0.92) but measured slower (0.82x against 0.92x for
    128x256 in pairs): the table keeps the measured choice."""
    c = cfgs.choose_config(cfgs.Problem(3072, 3072, 3072))
    assert (c.bm, c.bn) == (192, 128), c.name
    assert _waves(3072, 3072, 192, 128) > max(_waves(3072, 3072, 128, 128), _waves(3072, 3072, 128, 256)) + 0.04
    assert _waves(5000, 3000, 192, 128) > _waves(5000, 3000, 128, 256)
    assert cfgs.choose_config(cfgs.Problem(5000, 3000, 2000)).name == "ws_128x256x64_s4_c2"


def test_192_row_tiles_refuse_a_residual_they_cannot_hold():
    """The residual's float32 scratch (three 64x64 slices) does not fit next to 5 stages."""
    p = cfgs.Problem(3072, 3072, 3072, residual=True)
    assert "shared memory" in cfgs.supports(CONFIGS["ws_192x128x64_s5"], p)
    assert cfgs.choose_config(p).bm != 192


def _bench():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    return importlib.import_module("ops_matmul_bench")


def test_bench_shapes_and_configs_options():
    bench = _bench()
    assert bench.parse_shapes("512, 1000x1240x776T,5000x3000x2000") == [
        (512, 512, 512, False), (1000, 1240, 776, True), (5000, 3000, 2000, False)]
    with pytest.raises(SystemExit, match="not S or MxNxK"):
        bench.parse_shapes("12x")
    with pytest.raises(SystemExit, match="sizes >= 1"):
        bench.parse_shapes("3x0x4")
    assert bench.parse_configs(None, False) is None
    assert bench.parse_configs("ws_192x128x64_s5,dot_64x128x64_s4_w4", False) == [
        "ws_192x128x64_s5", "dot_64x128x64_s4_w4"]
    with pytest.raises(SystemExit, match="unknown configuration"):
        bench.parse_configs("ws_999x1x1", False)


def test_a_borrowed_row_must_not_spill_into_a_mostly_empty_round():
    """1000x1240x776 with B N-major has no row: the nearest (1024^3) ran 64x128 pointer tiles,
    128 of them in one round; here they would be 160, a second round a fifth full (0.57x
    cuBLAS, H200 2026-12-04).  Such a pick is refused and the rules give the WS kernel
    (0.97x); a shape a row names exactly keeps the row's configuration."""
    c = CONFIGS["dot_64x128x128_s3_w4"]
    assert cfgs.rounds(c, cfgs.Problem(1024, 1024, 1024)) == (1, 128 / 132)
    n, fill = cfgs.rounds(c, cfgs.Problem(1000, 1240, 776))
    assert n == 2 and fill == pytest.approx(160 / 264)
    assert cfgs.choose_config(cfgs.Problem(1000, 1240, 776)).name == "ws_128x128x64_s5"
    assert cfgs.choose_config(cfgs.Problem(1024, 1024, 1024)).name == "dot_64x128x128_s3_w4"
    # 64 x 64 pointer tiles of 64 KB: three programs an SM hold at once
    assert cfgs.rounds(CONFIGS["dot_64x64x64_s4_w4"], cfgs.Problem(512, 512, 512)) == (1, 64 / 396)


def test_the_rules_take_the_ws_kernel_from_half_a_round_of_128x128_tiles():
    """Off the table, 66 or more 128x128 tiles run the WS kernel (0.87-0.98x cuBLAS where the
    pointer kernel's 128x128 tiles ran 0.77-0.91x: 700x1536x512, 1500x1240x2000, 512x3000x4096);
    fewer tiles with a long K keep split-K."""
    for M, N, K, bk in ((700, 1536, 512, False), (1500, 1240, 2000, True), (512, 3000, 4096, False)):
        assert cfgs.rule_based(cfgs.Problem(M, N, K, b_kmajor=bk)).name == "ws_128x128x64_s5"
    assert cfgs.rule_based(cfgs.Problem(384, 2048, 14336)).split_k > 1



def test_a_borrowed_pick_is_traded_for_the_tile_that_fills_the_rounds():
    """297 tokens against a 14336-wide weight borrow 512x14336x4096's 128x256 tiles: 168 of them
    are 1.27 rounds of 132 SMs (two tile-times); 224 192x128 tiles are two rounds of 0.77 tile-times
    (H200 2026-12-04: 0.60x -> 0.78x cuBLAS); 112 swapped 256x160 tiles are one round of 1.25 at
    0.97 of the rate (session 39: their C^T stored by TMA), 112 256x152 ones one round
    of 1.19, so ``fit_rounds`` trades -- to a swapped tile only with a K-major B, the layout
    it was measured on.  A measured shape keeps its row's pick; 2048x14336x4096 + 1 row trades its
    neighbour's 128x256 pairs (eight rounds, the last a fifth full) for swapped tiles (six full ones)."""
    wide = cfgs.Problem(297, 14336, 4096, b_kmajor=True)
    assert cfgs.rounds(CONFIGS["ws_128x256x64_s4"], wide) == (2, pytest.approx(168 / 264))
    assert cfgs.rounds(CONFIGS["ws_192x128x64_s5"], wide) == (2, pytest.approx(224 / 264))
    assert cfgs.rounds(CONFIGS["ws_256x160x64_s4_swap"], wide) == (1, pytest.approx(112 / 132))
    assert cfgs.rounds(CONFIGS["ws_256x152x64_s4_swap"], wide) == (1, pytest.approx(112 / 132))
    # the 152-wide tile: the same round, 5 % less area (304 rows of products, not 320)
    assert cfgs.choose_config(wide).name == "ws_256x152x64_s4_swap"
    assert cfgs.fit_rounds(CONFIGS["ws_128x256x64_s4"], wide).name == "ws_256x152x64_s4_swap"
    # 2500 rows: 17 x 16 152-wide tiles are three rounds, 16 x 16 160-wide ones two
    assert cfgs.choose_config(cfgs.Problem(2500, 4096, 4096, b_kmajor=True)).name == "ws_256x160x64_s4_swap"
    n_major = cfgs.Problem(297, 14336, 4096, b_kmajor=False)
    assert cfgs.fit_rounds(CONFIGS["ws_128x256x64_s4"], n_major).name == "ws_192x128x64_s5"
    # 1213 rows against a 14336-wide weight: 448 256x152 tiles (four rounds) lose to 192x128's six
    # rounds of 0.75 (H200: 0.75x against 0.95x), which lose to 896 128x152 ones (seven rounds of 0.59;
    # H100 2026-12-06: 0.956x against 0.75x)
    assert cfgs.choose_config(cfgs.Problem(1213, 14336, 4096, b_kmajor=True)).name == "ws_128x152x64_s6_swap"
    # 600 rows: four 152-wide tiles of M, 128 tiles of 128x152 in one round (H100: 0.99x against 192x128's 0.86x)
    assert cfgs.choose_config(cfgs.Problem(600, 4096, 4096, b_kmajor=True)).name == "ws_128x152x64_s6_swap"
    assert cfgs.choose_config(cfgs.Problem(512, 14336, 4096, b_kmajor=True)).name == "ws_128x256x64_s4"
    # 2049 rows: 17 x 56 128x256 pairs' tiles are 7.2 rounds (eight), 14 x 56 swapped 256x152 ones 5.9 (six)
    assert cfgs.choose_config(cfgs.Problem(2049, 14336, 4096, b_kmajor=True)).name == "ws_256x152x64_s4_swap"
    assert cfgs.choose_config(cfgs.Problem(2048, 14336, 4096, b_kmajor=True)).name == "ws_128x256x64_s4_c2"
    # fp8, stream-K and the pointer kernel are never traded
    for name in ("ws8_128x256x128_s3", "ws_128x256x64_s3_sk", "dot_128x128x64_s3_w4"):
        assert cfgs.fit_rounds(CONFIGS[name], wide).name == name


def _check_scaled_gelu(config, a, b, seed):
    """``gelu(a @ b * scale_a[:, None] + bias)`` through ``config`` into a NaN-poisoned output, against
    float64 math (a seeded bias and row scale)."""
    M, N = a.shape[0], b.shape[1]
    g = torch.Generator().manual_seed(seed)
    bias, scale_a = torch.randn(N, generator=g).to(torch.bfloat16), torch.rand(M, generator=g) + 0.5
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    matmul(a, b, out, bias=bias, activation="gelu", scale_a=scale_a, config=config)
    ref = torch.nn.functional.gelu(a.double() @ b.double() * scale_a.double()[:, None] + bias.double())
    assert torch.isfinite(out).all(), "poison left in the output"
    assert ((out.double() - ref).norm() / ref.norm()).item() < BF16_TOL


@pytest.mark.parametrize("config,shape", [("ws_256x160x64_s4_swap", (304, 520, 200)),    # 2 row tiles of M
                                          ("ws_256x144x64_s4_swap", (168, 296, 136)),    # a partial 144 + 32-row tail
                                          ("ws_256x160x64_s4_swap", (200, 264, 64)),     # one k-step
                                          ("ws_128x160x64_s6_swap", (296, 200, 136)),    # 64 of N a consumer
                                          ("ws_128x144x64_s6_swap", (152, 136, 72))])
@pytest.mark.parametrize("a_mmajor,b_kmajor", [(False, True), (True, False)])
def test_swapped_ws_tiles_cover_m_with_their_columns(config, shape, a_mmajor, b_kmajor):
    """The swapped WS tiles compute C^T = B^T A^T: N runs along the consumers' rows (128 or 64 each),
    M along the tile's 144 or 160 columns (a 128 main part and a tail), stored as the output's rows
    by TMA; row-wise scales of A and B's bias follow the swap; GLU pairs whose output TMA cannot
    store are refused by name; either major-ness of either operand reaches TMA as it is (M and N
    multiples of 8 where they are the contiguous dimension: TMA rows of 16 bytes)."""
    M, N, K = shape
    a, b = _operands(M, N, K, a_mmajor, b_kmajor, seed=M + K)
    _check_scaled_gelu(config, a, b, seed=N)
    # GLU pairs (along N, the tile's rows) go by TMA only: N / 2 columns of 2 bytes are no 16-byte rows here
    with pytest.raises(ValueError, match="GLU pairs on a swapped tile are stored by TMA only"):
        matmul(a, b, activation="swiglu", config=config)


@pytest.mark.parametrize("shape", [(297, 520, 200), (150, 300, 72)])     # two tiles of M / one partial
@pytest.mark.parametrize("config", ["ws_256x152x64_s4_swap", "ws_128x152x64_s6_swap"])
def test_three_part_swapped_tile(shape, config):
    """The swapped 152-wide tiles (256 or 128 of N): M along 128 + 16 + 8 columns (a main part and two tails, each its
    own B box, issued as one m64n152), bias, GELU and the tails' pointer stores into a poisoned
    output; its second tail reads B K-major only, so an M-major A (the swapped kernel's B) is refused."""
    M, N, K = shape
    a, b = _operands(M, N, K, False, True, seed=M + K)
    bias = torch.randn(N, generator=torch.Generator().manual_seed(N)).to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    matmul(a, b, out, bias=bias, activation="gelu", config=config)
    ref = torch.nn.functional.gelu(a.double() @ b.double() + bias.double())
    assert torch.isfinite(out).all(), "poison left in the output"
    assert ((out.double() - ref).norm() / ref.norm()).item() < BF16_TOL
    assert cfgs.tail_parts(152) == (128, 16, 8) and cfgs.tail_parts(160) == (128, 32, 0)
    m_major = cfgs.Problem(M, N, K, a_kmajor=False, b_kmajor=True)
    assert "K-major" in cfgs.supports(CONFIGS[config], m_major)


@pytest.mark.parametrize("config,shape", [("ws_256x152x64_s4_c2a_swap", (297, 264, 136)),   # one pair, 2nd CTA partial
                                          ("ws_256x152x64_s4_c2a_swap", (400, 520, 72)),    # 2nd pair's 2nd CTA past M
                                          ("ws_256x160x64_s4_c2a_swap", (170, 300, 200))])  # 10 columns for CTA 1
def test_swapped_ws_pairs_share_the_weights(config, shape):
    """Swapped WS tiles in CTA pairs side by side: the pair's two tiles of M (the kernel's columns)
    share the kernel's A (the weights, bᵀ) by multicast, box h loaded by CTA h % 2 for both; a CTA
    whose columns are partly or wholly past M still loads its box and releases its peer's slots.
    Bias, GELU and a row scale into a poisoned output against float64; a single tile of M is refused."""
    M, N, K = shape
    a, b = _operands(M, N, K, False, True, seed=M + N)
    _check_scaled_gelu(config, a, b, seed=K)
    one_tile = cfgs.Problem(140, N, K, b_kmajor=True)
    assert "two tile columns" in cfgs.supports(CONFIGS[config], one_tile)
    # a pair's tiles side by side count as the kernel's columns: 297 tokens x 14336 = 56 pairs, one round
    assert cfgs.rounds(CONFIGS[config], cfgs.Problem(297, 14336, 4096, b_kmajor=True)) == (1, pytest.approx(112 / 132))


@pytest.mark.parametrize("config,M", [("ws_256x152x64_s4_swap", 297), ("ws_128x152x64_s6_swap", 160),
                                      ("ws_256x144x64_s4_swap", 200)])
@pytest.mark.parametrize("activation", ["swiglu", "geglu"])
def test_swapped_ws_tiles_store_glu_pairs_by_tma(config, M, activation):
    """A GLU activation on a swapped tile pairs C^T's adjacent rows (gate 2j, up 2j + 1 of N): the
    chunks staged for the TMA stores are half as wide and land at column ``row / 2`` of the output;
    with the bias and a row scale, into a poisoned output, against float64."""
    N, K = 528, 136                           # (264 output columns: rows of a 16-byte multiple)
    a, b = _operands(M, N, K, False, True, seed=M)
    g = torch.Generator().manual_seed(N)
    bias, scale_a = torch.randn(N, generator=g).to(torch.bfloat16), torch.rand(M, generator=g) + 0.5
    out = torch.full((M, N // 2), float("nan"), dtype=torch.bfloat16)
    assert cfgs.stores_transposed(CONFIGS[config], cfgs.Problem(M, N, K, b_kmajor=True, glu=True))
    matmul(a, b, out, bias=bias, activation=activation, scale_a=scale_a, config=config)
    h = a.double() @ b.double() * scale_a.double()[:, None] + bias.double()
    gate = torch.nn.functional.silu if activation == "swiglu" else torch.nn.functional.gelu
    ref = gate(h[:, 0::2]) * h[:, 1::2]
    assert torch.isfinite(out).all(), "poison left in the output"
    assert ((out.double() - ref).norm() / ref.norm()).item() < BF16_TOL


def test_glu_pairs_on_swapped_tiles_need_the_tma_stores():
    """The pointer path of a swapped tile exchanges GLU pairs' rows through a float32 tile of 64 KB a
    consumer (344 KB of shared memory at 256x152: the launch would fail), so GLU pairs take a swapped
    tile only where its C^T goes to the output by TMA and that staging fits; the choice then takes
    another tile, and ``config=`` is refused by name."""
    unaligned = cfgs.Problem(459, 22016, 4096, b_kmajor=True, glu=True, tma_c=False)
    assert "TMA store target" in cfgs.supports(CONFIGS["ws_256x152x64_s4_swap"], unaligned)
    assert not cfgs.choose_config(unaligned).swap
    aligned = cfgs.Problem(459, 22016, 4096, b_kmajor=True, glu=True)
    assert "does not fit" in cfgs.supports(CONFIGS["ws_256x160x64_s4_swap"], aligned)
    assert cfgs.supports(CONFIGS["ws_256x152x64_s4_swap"], aligned) is None
    assert cfgs.choose_config(aligned).name != "ws_256x160x64_s4_swap"
    a, b = _operands(297, 520, 136, False, True, seed=3)
    with pytest.raises(ValueError, match="GLU pairs on a swapped tile"):
        matmul(a, b, torch.empty(297, 262, dtype=torch.bfloat16)[:, :260], activation="swiglu",
               config="ws_256x152x64_s4_swap")


def test_swapped_ws_tiles_refuse_what_they_cannot_read():
    """No staging copies (an operand TMA cannot describe), no residual's scratch tile beside a
    256-row ring; the heuristic picks only the measured 256x160 and 256x152 tiles, only with a
    K-major B (the layout they were measured on), and only where their operands reach TMA as they are."""
    unaligned = cfgs.Problem(300, 520, 130, b_kmajor=True, tma_a=False)
    assert "TMA" in cfgs.supports(CONFIGS["ws_256x160x64_s4_swap"], unaligned)
    assert "shared memory" in cfgs.supports(CONFIGS["ws_256x160x64_s4_swap"],
                                            cfgs.Problem(300, 520, 256, b_kmajor=True, residual=True))
    assert all(row[3].endswith("_bk") for row in cfgs.MEASURED if row[4].endswith("_swap"))   # (K-major B)
    # 297 tokens x a 14336-wide weight: two 160-column tiles of M x 56 of N = 112 CTAs, one round
    # (every configuration's compile, spills included, is test_ops_matmul.py's)
    assert cfgs.rounds(CONFIGS["ws_256x160x64_s4_swap"], cfgs.Problem(297, 14336, 4096, b_kmajor=True))[0] == 1
    assert [name for name in cfgs.ROUND_FIT if name.endswith("_swap")] == ["ws_256x160x64_s4_swap",
                                                                          "ws_256x152x64_s4_swap",
                                                                          "ws_128x152x64_s6_swap"]
    assert all(name in cfgs.ROUND_FIT_B_KMAJOR for name in cfgs.ROUND_FIT if name.endswith("_swap"))
    odd_k = cfgs.Problem(297, 14336, 4099, b_kmajor=True, tma_a=False, tma_b=False)   # rows of 8198 bytes
    assert not cfgs.choose_config(odd_k).name.endswith("_swap")
    with pytest.raises(AssertionError, match="swapped WS tile"):
        cfgs._ws(256, 160, 4, swap=True, cluster_m=2, subtile=1)

