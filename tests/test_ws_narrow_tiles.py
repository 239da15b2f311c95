"""Warp-specialized GEMM tiles narrower than one 128-byte swizzle span of the output or of an
N-major B: a 32-column tile's C slice is 64 bytes of bf16, so its TMA store box (and B's, N-major)
is the tile's own width.  Before, the box stayed 128 bytes wide and the kernel's store loop ran
``32 // 64 = 0`` times: nothing was stored and the poisoned output came back unchanged."""
from __future__ import annotations

import importlib

import pytest
import torch

from tlxc.codegen_nvptx.emu import run as emu
from tlxc.ops import matmul
from tlxc.ops import matmul_configs as cfgs
from tlxc.runtime.warmup import cuda_source

MM = importlib.import_module("tlxc.ops.matmul")

NARROW = [cfgs._ws(128, 32, 8, persistent=False, subtile=1),      # (not in CONFIGS: narrow bf16 tiles)
          cfgs._ws(128, 32, 8, persistent=False)]                 # two 16-column halves


@pytest.fixture
def narrow_configs(monkeypatch):
    monkeypatch.setattr(cfgs, "CONFIGS", {**cfgs.CONFIGS, **{c.name: c for c in NARROW}})
    return [c.name for c in NARROW]


def _error(config, M, N, K, *, dtype=torch.bfloat16, out_dtype=torch.bfloat16, n_major=False):
    g = torch.Generator().manual_seed(M * 7 + N)
    a = (torch.randn(M, K, generator=g) * (4 if dtype != torch.bfloat16 else 1)).to(dtype)
    w = (torch.randn(N, K, generator=g) * (4 if dtype != torch.bfloat16 else 1)).to(dtype)
    b = w.t().contiguous() if n_major else w.t()
    out = torch.full((M, N), float("nan"), dtype=out_dtype)
    matmul(a, b, out, config=config)
    assert torch.isfinite(out).all(), "poison left in the output"
    ref = a.double() @ b.double()
    return ((out.double() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("n_major", [False, True], ids=["b_kmajor", "b_nmajor"])
@pytest.mark.parametrize("index", [0, 1], ids=["subtile1", "subtile2"])
def test_narrow_bf16_tiles_store_every_column(narrow_configs, index, n_major):
    assert _error(narrow_configs[index], 200, 264, 272, n_major=n_major) < 8e-3


@pytest.mark.parametrize("config", ["ws8_128x32x128_s10_np_sub1", "ws8_128x32x128_s8_np_c2a_sub1"])
def test_narrow_fp8_tiles(config):
    """The fp8 tiles for a short M (one 128-row tile, pairs sharing A by multicast): bf16 out."""
    assert config in cfgs.CONFIGS
    assert _error(config, 200, 264, 272, dtype=torch.float8_e4m3fn) < 8e-3


def test_a_too_wide_box_is_refused_at_compile_time(monkeypatch):
    """The kernel itself refuses a C slice that is not a whole number of store boxes (it would
    store nothing of it), should a host ever pass the old width again."""
    real = MM._launch_ws

    def wide_boxes(c, p, a, b, out, epi, descs=None):
        launched = {}

        def capture(kernel, grid, *args, **meta):
            launched.update(meta)
            meta["C_BOX_N"] = 64
            kernel.warmup(*args, grid=grid, **meta)
        monkeypatch.setattr(MM, "_launch", capture)
        return real(c, p, a, b, out, epi, descs)
    monkeypatch.setattr(MM, "_launch_ws", wide_boxes)
    with pytest.raises(Exception, match="whole number of TMA boxes"):
        _error("ws8_128x32x128_s10_np_sub1", 128, 64, 128, dtype=torch.float8_e4m3fn)


@pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
@pytest.mark.parametrize("n_major", [False, True], ids=["b_kmajor", "b_nmajor"])
def test_narrow_tile_cuda_text_matches_float64(narrow_configs, n_major, monkeypatch):
    """The same tile's CUDA text on the emulation: the 64-byte C box and (N-major) B box swizzle
    64 bytes, as the kernel's shared tiles do."""
    def launch(kernel, grid, *args, **meta):
        text = cuda_source(kernel, args, meta, grid)
        bound = kernel.signature.bind(*args, **{k: v for k, v in meta.items()
                                                if k not in ("num_warps", "num_stages", "launch_pdl", "ctas_per_cga")})
        bound.apply_defaults()
        emu.build(text).run(dict(bound.arguments), grid=(*grid, 1, 1)[:3], threads=128 * (meta["NUM_CONSUMERS"] + 1))
    monkeypatch.setattr(MM, "_launch", launch)
    assert _error(narrow_configs[0], 200, 100, 136, n_major=n_major) < 8e-3
