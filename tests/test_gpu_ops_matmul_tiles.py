"""tlxc.ops.matmul's wave-filling tiles and stream-K on the GPU: the three-consumer 192x128
kernel walking several tiles per SM, stream-K on few tiles (one to three programs per tile)
and on many (whole tiles plus split ones per program), deterministic and leaving its flags
at zero (float32 reference, NaN-poisoned outputs)."""
from __future__ import annotations

import importlib

import pytest
import torch

from tlxc.ops import matmul

pytestmark = pytest.mark.gpu


def _case(M, N, K, b_kmajor, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
    if b_kmajor:
        b = torch.randn(N, K, device="cuda", generator=g).to(torch.bfloat16).t()
    else:
        b = torch.randn(K, N, device="cuda", generator=g).to(torch.bfloat16)
    bias = torch.randn(N, device="cuda", generator=g).to(torch.bfloat16)
    return a, b, bias


def _rel(out, ref):
    assert torch.isfinite(out).all(), "poison left in the output"
    return ((out.float() - ref).norm() / ref.norm()).item()


def _check_bias_gelu(name, shape, b_kmajor):
    """``gelu(a @ b + bias)`` through configuration ``name`` into a NaN-poisoned output, against
    float32 math."""
    M, N, K = shape
    a, b, bias = _case(M, N, K, b_kmajor, seed=K)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    matmul(a, b, out, bias=bias, activation="gelu", config=name)
    ref = torch.nn.functional.gelu(a.float() @ b.float() + bias.float())
    assert _rel(out, ref) < 1e-2


@pytest.mark.parametrize("config", ["ws_128x128x64_s4_sk", "ws_128x256x64_s3_sk"])
@pytest.mark.parametrize("shape,b_kmajor", [((1000, 1240, 776), True), ((200, 256, 4096), False),
                                            ((3072, 3072, 3072), False), ((513, 1000, 520), True),
                                            ((297, 14336, 4096), True), ((1213, 4096, 4096), True)])
def test_stream_k_is_right_deterministic_and_leaves_its_flags_at_zero(shape, b_kmajor, config):
    M, N, K = shape
    m = importlib.import_module("tlxc.ops.matmul")
    a, b, bias = _case(M, N, K, b_kmajor, seed=N)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    matmul(a, b, out, bias=bias, activation="silu", config=config)
    ref = torch.nn.functional.silu(a.float() @ b.float() + bias.float())
    assert _rel(out, ref) < 1e-2
    for _ in range(3):
        again = torch.full_like(out, float("nan"))
        matmul(a, b, again, bias=bias, activation="silu", config=config)
        assert torch.equal(again, out)
    torch.cuda.synchronize()
    for ws, flags in m._STREAM_K.values():
        assert not flags.any(), flags


@pytest.mark.parametrize("name", ["dot_64x64x128_s3_w4", "dot_64x64x128_s4_w4", "dot_64x64x128_s5_w4",
                                  "dot_64x64x128_s6_w4", "dot_128x64x128_s4_w4", "dot_64x64x64_s6_w4_k4",
                                  "dot_128x128x128_s3_w8_k4", "dot_64x32x256_s4_w4", "dot_64x32x128_s8_w4",
                                  "dot_64x64x64_s3_w4_k4c", "dot_64x64x128_s3_w4_k2c", "dot_64x64x128_s4_w4_k2c",
                                  "dot_128x64x64_s3_w4_k2c"])
@pytest.mark.parametrize("shape,b_kmajor", [((128, 4096, 4096), True), ((70, 1000, 1100), False)])
def test_skinny_no_split_tiles(name, shape, b_kmajor):
    """The M = 64-128 tiles of 128 elements of K a step on the skinny bench shape and on a
    ragged one (M = 70, K = 1100: a partial last step), bias + GELU."""
    _check_bias_gelu(name, shape, b_kmajor)


@pytest.mark.parametrize("name", ["dot_64x64x64_s3_w4_k4c", "dot_64x64x128_s3_w4_k2c"])
def test_cluster_split_is_deterministic(name):
    """The cluster split (partials summed in rank 0's shared memory, in rank order) gives the
    same bits on every call, and the product to bf16 rounding."""
    a, b, _ = _case(64, 4096, 4096, True, seed=5)
    out = torch.full((64, 4096), float("nan"), device="cuda", dtype=torch.bfloat16)
    matmul(a, b, out, config=name)
    assert _rel(out, a.float() @ b.float()) < 1e-2
    for _ in range(3):
        again = torch.full_like(out, float("nan"))
        matmul(a, b, again, config=name)
        assert torch.equal(again, out)


@pytest.mark.parametrize("name,shape,b_kmajor", [
    ("ws_192x128x64_s5", (3072, 3072, 3072), False), ("ws_192x128x64_s5", (5000, 3000, 2000), False),
    ("ws_192x128x64_s5_c2", (3072, 3072, 3072), False), ("ws_192x128x64_s5_c2", (5000, 3000, 2000), False),
    ("ws_128x80x64_s6_sub1", (1000, 1240, 776), True), ("ws_128x80x64_s6_sub1", (1000, 1240, 776), False),
    ("ws_128x80x64_s6_np_sub1", (333, 1240, 200), True), ("ws_128x96x64_s6_sub1", (1000, 1240, 776), True),
    ("ws_128x192x64_s4_sub1", (5000, 3000, 2000), False), ("ws_128x192x64_s4_sub1", (700, 1000, 520), True),
    ("ws_128x80x64_s6_c2_sub1", (1000, 1240, 776), True), ("ws_128x80x64_s6_c2_sub1", (333, 1000, 200), False),
    ("ws_128x80x64_s6_c2a_sub1", (1000, 1240, 776), True), ("ws_128x80x64_s6_c2a_sub1", (100, 1000, 520), False),
    ("ws_128x80x64_s6_c2a_sub1", (3000, 1000, 1000), False)])
def test_wide_tiles_and_tile_tails(name, shape, b_kmajor):
    """192-row tiles (three consumer warp groups) over several waves; 80/96/192-column tiles: a
    power-of-two main part and a tail, each its own wgmma and TMA store, the last tile column's
    tail partly or wholly past N."""
    _check_bias_gelu(name, shape, b_kmajor)


@pytest.mark.parametrize("name", ["ws_256x144x64_s4_swap", "ws_256x160x64_s4_swap", "ws_256x152x64_s4_swap",
                                  "ws_128x144x64_s6_swap", "ws_128x152x64_s6_swap", "ws_128x160x64_s6_swap"])
@pytest.mark.parametrize("shape,b_kmajor", [((297, 14336, 4096), True), ((1213, 4096, 4096), True),
                                            ((304, 1000, 520), False), ((9, 520, 136), True),
                                            ((2500, 4096, 520), True)])
def test_swapped_ws_tiles(name, shape, b_kmajor):
    """C^T = B^T A^T on the WS kernel (M along the tile's 144 / 152 / 160 columns, stored as the output's
    rows by TMA through two shared chunks a consumer) against float32 math, with bias and GELU, into a
    NaN-poisoned output; 2500 rows: two or more rounds of tiles, so a CTA's chunks alternate across tiles."""
    _check_bias_gelu(name, shape, b_kmajor)


@pytest.mark.parametrize("name", ["ws_256x152x64_s4_swap", "ws_128x152x64_s6_swap", "ws_256x144x64_s4_swap"])
@pytest.mark.parametrize("shape", [(297, 4096, 4096), (600, 2064, 520)])
def test_swapped_ws_tiles_glu_pairs(name, shape):
    """SwiGLU on a swapped tile (pairs of C^T's rows, the half-width chunks TMA-stored from one shared
    buffer a consumer) with a bias, against float32 math, NaN-poisoned output; before session 39 this
    path stored through pointers with a 344 KB row exchange, past the SM's shared memory."""
    M, N, K = shape
    a, b, bias = _case(M, N, K, True, seed=N)
    out = torch.full((M, N // 2), float("nan"), device="cuda", dtype=torch.bfloat16)
    matmul(a, b, out, bias=bias, activation="swiglu", config=name)
    h = a.float() @ b.float() + bias.float()
    assert _rel(out, torch.nn.functional.silu(h[:, 0::2]) * h[:, 1::2]) < 1e-2


@pytest.mark.parametrize("name", ["ws_256x152x64_s4_c2a_swap", "ws_256x160x64_s4_c2a_swap"])
@pytest.mark.parametrize("shape,b_kmajor", [((297, 14336, 4096), True), ((1213, 4096, 4096), True),
                                            ((400, 1000, 520), False), ((170, 520, 136), True)])
def test_swapped_ws_pairs(name, shape, b_kmajor):
    """Swapped WS tiles in CTA pairs side by side sharing the weights by multicast (the last pair's
    second CTA partly or wholly past M) against float32 math, bias and GELU, NaN-poisoned output."""
    _check_bias_gelu(name, shape, b_kmajor)
