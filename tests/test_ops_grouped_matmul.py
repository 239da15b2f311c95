"""tlxc.ops.grouped_matmul on the CPU: uneven and empty groups, both expert-weight layouts,
on the interpreter against per-group float32 products (poisoned output); every grouped
configuration compiles for sm_90a (wgmma, cp.async, no spills); argument errors."""
from __future__ import annotations

import pytest
import torch
from launch_check import check_findings, record_launch

import tlxc.ops.grouped as grouped_module
from tlxc.ops import grouped_matmul
from tlxc.ops.grouped import GROUP_M, GROUPED_CONFIGS, GROUPED_WS_CONFIGS, choose_grouped_config, is_fp8_config
from tlxc.ops.kernels.grouped_gemm import grouped_gemm_kernel

CONFIGS_16 = sorted(c for c in GROUPED_CONFIGS if not is_fp8_config(c))          # (fp8: test_ops_grouped_fp8.py)
WS_CONFIGS_16 = sorted(c for c in GROUPED_WS_CONFIGS if not is_fp8_config(c))


def _operands(sizes, K, N, g, transposed):
    """bf16 ``a`` of ``sum(sizes)`` rows and the experts' weights, ``[E, N, K]`` read as
    ``w.transpose(1, 2)`` (K-major, ``transposed``) or a contiguous ``[E, K, N]`` (N-major)."""
    E, M = len(sizes), int(sizes.sum())
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    if transposed:
        return a, torch.randn(E, N, K, generator=g).to(torch.bfloat16).transpose(1, 2)
    return a, torch.randn(E, K, N, generator=g).to(torch.bfloat16)


def _reference(a, b, sizes):
    offs = [0] + sizes.cumsum(0).tolist()
    return torch.cat([a[offs[g]:offs[g + 1]].float() @ b[g].float() for g in range(b.shape[0])])


@pytest.mark.parametrize("config", CONFIGS_16)
@pytest.mark.parametrize("transposed", [False, True])
def test_uneven_and_empty_groups(config, transposed):
    g = torch.Generator().manual_seed(1)
    E, K, N = 4, 72, 40
    sizes = torch.tensor([5, 0, 70, 13], dtype=torch.int32)
    M = int(sizes.sum())
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    if transposed:                                   # [E, N, K] weights seen as [E, K, N]
        b = torch.randn(E, N, K, generator=g).to(torch.bfloat16).transpose(1, 2)
    else:
        b = torch.randn(E, K, N, generator=g).to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    grouped_matmul(a, b, sizes, out, config=config)
    ref = _reference(a, b, sizes)
    assert torch.isfinite(out).all()
    assert ((out.float() - ref).norm() / ref.norm()).item() < 8e-3


@pytest.mark.parametrize("config", CONFIGS_16)
def test_grouped_configs_compile_for_sm90a(config):
    bm, bn, bk, warps, stages = GROUPED_CONFIGS[config]
    E, K, N, M = 8, 4096, 4096, 8192
    a = torch.empty(M, K, dtype=torch.bfloat16)
    b = torch.empty(E, N, K, dtype=torch.bfloat16).transpose(1, 2)
    out = torch.empty(M, N, dtype=torch.bfloat16)
    sizes = torch.empty(E, dtype=torch.int32)
    h = grouped_gemm_kernel.warmup(a, b, out, sizes, M, E, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                   b.stride(2), out.stride(0), out.stride(1), M // bm + E, BLOCK_M=bm, BLOCK_N=bn,
                                   BLOCK_K=bk, GROUP_M=GROUP_M, E_PAD=E, num_warps=warps, num_stages=stages,
                                   grid=(1,))
    code = h.asm.get("ptx") or h.asm["cuda"]
    assert h.n_spills == 0 and "wgmma.mma_async" in code and "cp.async" in code
    assert h.perf_warnings == []       # no assertion in the kernel (check_sizes_kernel): ptxas C7510 serialized it


def test_many_groups_in_grouped_tile_order():
    """E = 37 (padded to 64 for the vector lookup), a third of them empty, int64 sizes, more
    row tiles than GROUP_M so that the grouped order wraps, and a last super-row narrower than
    GROUP_M: every row is written once with its own expert's product."""
    g = torch.Generator().manual_seed(2)
    E, K, N = 37, 40, 136
    sizes = torch.randint(0, 40, (E,), generator=g, dtype=torch.int64)
    sizes[::3] = 0
    M = int(sizes.sum())
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    b = torch.randn(E, N, K, generator=g).to(torch.bfloat16).transpose(1, 2)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    grouped_matmul(a, b, sizes, out, config="g_64x128x64")
    ref = _reference(a, b, sizes)
    assert torch.isfinite(out).all()
    assert ((out.float() - ref).norm() / ref.norm()).item() < 8e-3


def test_errors():
    a = torch.empty(10, 16, dtype=torch.bfloat16)
    b = torch.empty(2, 16, 8, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="'group_sizes' must be an int32/int64 vector of 2"):
        grouped_matmul(a, b, torch.tensor([5.0, 5.0]))
    with pytest.raises(ValueError, match=r"b_experts \[E, K, N\]"):
        grouped_matmul(a, b[0], torch.tensor([5, 5]))
    with pytest.raises(ValueError, match="unknown config"):
        grouped_matmul(a, b, torch.tensor([5, 5]), config="x")
    with pytest.raises(TypeError, match="'group_sizes' must be a tensor, got list"):
        grouped_matmul(a, b, [5, 5])
    with pytest.raises(ValueError, match="'out_dtype' must be one of"):
        grouped_matmul(a, b, torch.tensor([5, 5]), out_dtype=torch.int32)
    with pytest.raises(ValueError, match="'out' must be a tensor of one of"):
        grouped_matmul(a, b, torch.tensor([5, 5]), out=torch.empty(10, 8, dtype=torch.int32))
    with pytest.raises(ValueError, match="'out_dtype' must be one of"):
        grouped_module.grouped_weight_grad(a, a, torch.tensor([5, 5]), torch.int64)


@pytest.mark.parametrize("config", WS_CONFIGS_16)
@pytest.mark.parametrize("transposed,K", [(True, 136), (False, 128)])
def test_ws_kernel_walks_tiles_of_uneven_groups(config, transposed, K, monkeypatch):
    """The warp-specialized kernel: 3 persistent programs walk every tile (ring phases wrap
    across tiles and skipped row tiles), groups that end inside a row tile (stores masked to
    the group's rows), an empty group, N not a multiple of the tile, K-major weights with a K
    tail (TMA zero-fill), N-major weights (K a multiple of 64)."""
    monkeypatch.setattr(grouped_module, "CPU_SMS", 3)
    g = torch.Generator().manual_seed(K)
    N = 200
    sizes = torch.tensor([130, 0, 70, 300], dtype=torch.int32)
    M = int(sizes.sum())
    a, b = _operands(sizes, K, N, g, transposed)
    out = torch.full((M, N), float("nan"))
    grouped_matmul(a, b, sizes, out, config=config)
    ref = _reference(a, b, sizes)
    assert torch.isfinite(out).all()
    assert ((out - ref).norm() / ref.norm()).item() < 1e-5


@pytest.mark.parametrize("band", [2, 4, 8])
@pytest.mark.parametrize("transposed", [False, True])
def test_column_bands_walk_every_experts_tiles(band, transposed, monkeypatch):
    """Column bands (``_nG``): ``band`` column tiles at a time walk all the experts' row tiles (5
    column tiles of 256: bands of 2, 2, 1 / 4, 1 / 5), drawn by the dynamic schedule across 3
    programs: groups ending inside a row tile, an empty one, one of a single row; every element of
    the poisoned output written with its own expert's product."""
    monkeypatch.setattr(grouped_module, "CPU_SMS", 3)
    monkeypatch.setitem(GROUPED_WS_CONFIGS, "gws_test_bands", (128, 256, 64, 4, 0, True, band))
    g = torch.Generator().manual_seed(band)
    K, N = 64, 1096
    sizes = torch.tensor([130, 0, 70, 300, 1], dtype=torch.int32)
    M = int(sizes.sum())
    a, b = _operands(sizes, K, N, g, transposed)
    out = torch.full((M, N), float("nan"))
    grouped_matmul(a, b, sizes, out, config="gws_test_bands")
    ref = _reference(a, b, sizes)
    assert torch.isfinite(out).all()
    assert ((out - ref).norm() / ref.norm()).item() < 1e-5


@pytest.mark.parametrize("transposed,out_dtype,bias", [(True, torch.bfloat16, False), (False, torch.float32, True)])
def test_cta_pairs_share_a_and_draw_tiles_together(transposed, out_dtype, bias, monkeypatch):
    """CTA pairs (``_c2``): two pairs (4 programs) draw the tiles of 3 column pairs over 5 column
    tiles, so the last pair's second CTA has no columns (past N) but still takes its share of the
    multicast ``a`` boxes and walks the ring; groups ending inside a row tile, an empty one and one
    of a single row; a bf16 output (TMA stores inside a group) or a float32 one (pointer stores)
    with a per-expert bias and SiLU.  The poisoned output is entirely rewritten with each expert's
    own product; rank 1's draws come through its mailbox."""
    monkeypatch.setattr(grouped_module, "CPU_SMS", 5)             # 4 programs: two pairs
    g = torch.Generator().manual_seed(5)
    K, N = (136, 1096) if transposed else (128, 1096)
    sizes = torch.tensor([130, 0, 70, 300, 1], dtype=torch.int32)
    M, E = int(sizes.sum()), len(sizes)
    a, b = _operands(sizes, K, N, g, transposed)
    out = torch.full((M, N), float("nan"), dtype=out_dtype)
    extra = {}
    if bias:
        extra = {"bias": torch.randn(E, N, generator=g), "activation": "silu"}
    grouped_matmul(a, b, sizes, out, config="gws_128x256x64_s4_e16d_c2", **extra)
    ref = _reference(a, b, sizes)
    if bias:
        rows = torch.repeat_interleave(torch.arange(E), sizes.long())
        ref = torch.nn.functional.silu(ref + extra["bias"][rows])
    assert torch.isfinite(out).all()
    assert ((out.float() - ref).norm() / ref.norm()).item() < (1e-5 if out_dtype == torch.float32 else 8e-3)


@pytest.mark.parametrize("config", ["gws_128x256x64_s4_e16d", "gws_128x256x64_s4_e16d_c2"])
def test_ws_launch_checks_clean(config, monkeypatch):
    """``tlxc check`` of the WS kernel as the host launches it (a CTA pair: in clusters of 2): the
    frontend, resources and shared memory pass, no finding above a note (the barrier protocol itself
    is the interpreter's, above: the tile loop's trips are runtime values, which the note says)."""
    sizes = torch.tensor([100, 0, 50], dtype=torch.int32)
    a, b = torch.randn(150, 64).to(torch.bfloat16), torch.randn(3, 64, 512).to(torch.bfloat16)
    kernel, args, meta = record_launch(monkeypatch, grouped_module, "grouped_gemm_ws_kernel",
                                       lambda: grouped_matmul(a, b, sizes, config=config))
    cga = meta["ctas_per_cga"]
    assert cga == ((2, 1, 1) if config.endswith("_c2") else None)
    findings = check_findings(kernel, args, meta, cluster=cga)
    assert [f for f in findings if f.severity != "note"] == []


@pytest.mark.parametrize("pdl", [True, False])
@pytest.mark.parametrize("path", ["ws", "static", "swap", "wgrad"])
def test_dynamic_tma_kernels_are_pdl_launches_after_the_table(path, pdl, monkeypatch):
    """The TMA kernels with a dynamic schedule start under the group table kernel: it is told so (``PDL=True``:
    it lets its dependents start) and they are launched with ``launch_pdl=True`` (their CUDA waits for it:
    ``test_ws_configs_compile_for_sm90a``); with ``grouped.PDL_LAUNCHES = False`` neither.  The static
    schedules (a WS configuration without ``d``, the weight gradient after the sizes' check) never."""
    monkeypatch.setattr(grouped_module, "PDL_LAUNCHES", pdl)
    launches = []

    class Recorder:
        def __init__(self, name):
            self.name = name

        def __getitem__(self, grid):
            return lambda *args, **meta: launches.append((self.name, meta))
    first, main = {"ws": ("group_table_kernel", "grouped_gemm_ws_kernel"),
                   "static": ("group_table_kernel", "grouped_gemm_ws_kernel"),
                   "swap": ("group_table_kernel", "grouped_gemm_swap_kernel"),
                   "wgrad": ("check_sizes_kernel", "grouped_wgrad_ws_kernel")}[path]
    for name in (first, main):
        monkeypatch.setattr(grouped_module, name, Recorder(name))
    sizes = torch.tensor([100, 0, 50], dtype=torch.int32)
    a = torch.randn(150, 64).to(torch.bfloat16)
    if path == "wgrad":
        grouped_module.grouped_weight_grad(a, torch.randn(150, 256).to(torch.bfloat16), sizes,
                                           config="wws_128x128x64_s6")
    else:
        config = {"swap": "gws_128x256x64_s4_e16d_swap", "static": "gws_128x128x64_s5"}.get(
            path, "gws_128x256x64_s4_e16d_c2")
        grouped_matmul(a, torch.randn(3, 512, 64).to(torch.bfloat16).transpose(1, 2), sizes, config=config)
    dependent = pdl and path in ("ws", "swap")
    expected = [(first, dependent, None), (main, None, dependent)] if path != "wgrad" else [
        (first, None, None), (main, None, None)]
    assert [(name, meta.get("PDL"), meta.get("launch_pdl")) for name, meta in launches] == expected


def test_cta_pairs_are_refused_outside_the_dynamic_expert_order(monkeypatch):
    """``CLUSTER_N = 2`` needs the dynamic schedule in expert order (the pair's draws) and no split
    tails: another order is a compile-time error naming the constraint, not a wrong walk."""
    monkeypatch.setitem(GROUPED_WS_CONFIGS, "gws_test_pair", (128, 256, 64, 4, 0, True, 0, 2))
    sizes = torch.tensor([100, 50], dtype=torch.int32)
    a, b = torch.randn(150, 64).to(torch.bfloat16), torch.randn(2, 64, 512).to(torch.bfloat16)
    with pytest.raises(Exception, match="CTA pairs .CLUSTER_N = 2. run the dynamic schedule in expert order"):
        grouped_matmul(a, b, sizes, config="gws_test_pair")


@pytest.mark.parametrize("config", WS_CONFIGS_16)
@pytest.mark.parametrize("strided_out", [False, True])
def test_ws_kernel_tma_stores_the_row_blocks_inside_a_group(config, strided_out, monkeypatch):
    """A bf16 output: a consumer's 64 rows inside their group go out by TMA store, a group's
    last rows through masked pointer stores (groups ending 2 rows into a block, one starting
    mid-block with a whole block after it, one of exactly 128 rows, an empty one); an output
    view of odd row stride takes pointer stores only.  Every element is written once: the
    poisoned output has no NaN left and matches the float32 product."""
    monkeypatch.setattr(grouped_module, "CPU_SMS", 3)
    g = torch.Generator().manual_seed(7)
    E, K, N = 5, 64, 136
    sizes = torch.tensor([130, 0, 200, 128, 61], dtype=torch.int32)
    M = int(sizes.sum())
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    b = torch.randn(E, N, K, generator=g).to(torch.bfloat16).transpose(1, 2)
    if strided_out:
        out = torch.full((M, N + 3), float("nan"), dtype=torch.bfloat16)[:, :N]
    else:
        out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    assert grouped_module.ws_stores_by_tma(config, a, out) == (not strided_out)
    grouped_matmul(a, b, sizes, out, config=config)
    ref = _reference(a, b, sizes)
    assert torch.isfinite(out).all()
    assert ((out.float() - ref).norm() / ref.norm()).item() < 8e-3


@pytest.mark.parametrize("config", ["gws_128x256x64_s4_e16d", "gws_128x128x64_s5"])
@pytest.mark.parametrize("split_tails", [False, True])
@pytest.mark.parametrize("transposed,out_dtype", [(True, torch.bfloat16), (False, torch.bfloat16),
                                                  (True, torch.float32)])
def test_ws_kernel_splits_a_groups_last_rows_between_the_consumers(config, split_tails, transposed, out_dtype,
                                                                    monkeypatch):
    """``SPLIT_TAILS``: a tile whose group ends within its first 64 rows (1, 5 and 64 rows past whole
    blocks, a group of 40) is multiplied by both consumers, each over half the columns, and stored
    by the staged path (bf16 out) or by pointers (float32 out); the tile of 120 rows past a block
    has rows for both consumers, as before.  K-major and N-major B, a bias row per expert and GELU in
    the epilogue; poisoned output, float64 reference."""
    monkeypatch.setattr(grouped_module, "CPU_SMS", 3)
    monkeypatch.setattr(grouped_module, "SPLIT_TAILS", split_tails)
    g = torch.Generator().manual_seed(26)
    E, K, N = 6, 128, 264
    sizes = torch.tensor([129, 40, 0, 133, 192, 248], dtype=torch.int32)
    M = int(sizes.sum())
    a, b = _operands(sizes, K, N, g, transposed)
    bias = torch.randn(E, N, generator=g)
    out = torch.full((M, N), float("nan"), dtype=out_dtype)
    grouped_matmul(a, b, sizes, out, bias=bias, activation="gelu", config=config)
    ends = sizes.cumsum(0).tolist()
    ref = torch.cat([torch.nn.functional.gelu(a[e - n:e].double() @ b[i].double() + bias[i].double())
                     for i, (n, e) in enumerate(zip(sizes.tolist(), ends))])
    assert torch.isfinite(out).all()
    assert ((out.double() - ref).norm() / ref.norm()).item() < (8e-3 if out_dtype == torch.bfloat16 else 1e-5)


def test_ws_kernel_stores_by_pointers_where_the_c_tile_does_not_fit():
    """A float32 output of 128x256 tiles: the C tile (64 KB) does not fit beside the ring."""
    a = torch.empty(256, 64, dtype=torch.bfloat16)
    assert not grouped_module.ws_stores_by_tma("gws_128x256x64_s4", a, torch.empty(256, 256))
    assert grouped_module.ws_stores_by_tma("gws_128x256x64_s4", a, torch.empty(256, 256, dtype=torch.bfloat16))
    assert grouped_module.ws_stores_by_tma("gws_128x128x64_s5", a, torch.empty(256, 256))


@pytest.mark.parametrize("config", ["gws_128x128x64_s5", "gws_128x128x64_s5_e8", "gws_128x128x64_s5_e8d"])
@pytest.mark.parametrize("E", [1, 5, 37])
def test_ws_kernel_finds_every_group_by_binary_search(E, config, monkeypatch):
    """E = 1, 5, 37 groups (a power of two plus one, a third of them empty, int64 sizes,
    groups shorter than a row tile): the device table + binary search gives every row tile
    its group, 4 persistent programs; in the grouped order of all row tiles and in expert
    order (each expert's tiles in bands of its own row tiles)."""
    monkeypatch.setattr(grouped_module, "CPU_SMS", 4)
    g = torch.Generator().manual_seed(E)
    K, N = 64, 72
    sizes = torch.randint(0, 300, (E,), generator=g, dtype=torch.int64)
    sizes[1::3] = 0
    sizes[0] = max(int(sizes[0]), 1)
    M = int(sizes.sum())
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    b = torch.randn(E, N, K, generator=g).to(torch.bfloat16).transpose(1, 2)
    out = torch.full((M, N), float("nan"))
    grouped_matmul(a, b, sizes, out, config=config)
    ref = _reference(a, b, sizes)
    assert torch.isfinite(out).all()
    assert ((out - ref).norm() / ref.norm()).item() < 1e-5


def test_ws_kernel_is_chosen_for_large_groups_it_can_read():
    a = torch.empty(16384, 4096, dtype=torch.bfloat16)
    kmajor = torch.empty(8, 14336, 4096, dtype=torch.bfloat16).transpose(1, 2)
    layout = grouped_module._ws_layout(a, kmajor)
    assert layout == "kmajor" and choose_grouped_config(16384, 8, 14336, layout) == "gws_128x256x64_s4_e16d_c2"
    assert grouped_module._ws_layout(a, torch.empty(8, 4096, 14336, dtype=torch.bfloat16)) == "nmajor"
    assert grouped_module._ws_layout(a[:, :100], kmajor[:, :100]) is None           # rows of 200 bytes: not TMA
    assert choose_grouped_config(16384, 64, 1408, "kmajor") == "gws_128x128x64_s5"     # 256 rows a group
    assert choose_grouped_config(16384, 200, 1408, "kmajor") == "g_64x128x64"          # more groups than 128
    assert choose_grouped_config(65536, 200, 1408, "kmajor") == "g_128x128x64"
    assert choose_grouped_config(8192, 64, 1408, "kmajor") == "gws_128x128x64_s5"      # 128 rows a group
    assert choose_grouped_config(8192, 128, 768, "nmajor") == "gws_128x128x64_s5"      # 64 rows a group
    assert choose_grouped_config(4096, 128, 768, "kmajor") == "g_64x128x64"            # 32 rows a group
    assert choose_grouped_config(16384, 8, 14336, None) == "g_128x256x64"
    with pytest.raises(ValueError, match="reads the operands by TMA"):
        b = torch.empty(2, 100, 24, dtype=torch.bfloat16)                                # N-major, K % 64 != 0
        grouped_matmul(torch.empty(10, 100, dtype=torch.bfloat16), b, torch.tensor([5, 5]), config="gws_128x128x64_s5")


# N-major weights change the B loads and products, not the tile order: every configuration compiles with
# K-major weights, one per tile shape and order kind with N-major ones (each compile is ~3 s of the suite's CPU)
N_MAJOR_COMPILES = ("gws_128x256x64_s4", "gws_128x128x64_s5", "gws_128x256x64_s4_e16d", "gws_128x256x64_s4_n8d")


@pytest.mark.parametrize("config,transposed", [(c, True) for c in WS_CONFIGS_16] +
                         [(c, False) for c in N_MAJOR_COMPILES])
def test_ws_configs_compile_for_sm90a(config, transposed):
    from tlxc import language as tl
    from tlxc.descriptors import TensorDescriptor
    from tlxc.ops.kernels.grouped_gemm_ws import group_table_kernel, grouped_gemm_ws_kernel
    meta = grouped_module.ws_schedule_meta(config)
    bm, bn, bk = meta["BM"], meta["BN"], meta["BK"]
    E, M, K, N = 8, 8192, 4096, 4096
    a = torch.empty(M, K, dtype=torch.bfloat16)
    if transposed:
        b_desc = TensorDescriptor.from_tensor(torch.empty(E * N, K, dtype=torch.bfloat16), [bn, bk], swizzle=128)
    else:
        b_desc = TensorDescriptor.from_tensor(torch.empty(E * K, N, dtype=torch.bfloat16), [bk, 64], swizzle=128)
    out = torch.empty(M, N, dtype=torch.bfloat16)
    for c_tma in (False, True):          # pointer stores only; TMA stores of the row blocks inside a group
        h = grouped_gemm_ws_kernel.warmup(TensorDescriptor.from_tensor(a, [bm // 2, bk], swizzle=128), b_desc, out,
                                          TensorDescriptor.from_tensor(out, [bm // 2, 64], swizzle=128) if c_tma
                                          else None, torch.empty(2 * E + 1, dtype=torch.int32), E, N, K, M // bm + E, 132,
                                          N, 1, **meta, DTYPE=tl.bfloat16, B_KMAJOR=transposed, B_BOX_N=64, E_PAD=E,
                                          SEARCH_STEPS=E.bit_length(), C_TMA=c_tma,
                                          OUT_DTYPE=tl.bfloat16 if c_tma else None, C_BOX_N=64,
                                          SPLIT_TAIL=meta["CLUSTER_N"] == 1, num_warps=4, grid=(132,),   # both tile paths
                                          ctas_per_cga=(2, 1, 1) if meta["CLUSTER_N"] == 2 else None)
        code = h.asm["cuda"]
        assert h.n_spills == 0 and h.metadata.shared <= 232448 and h.perf_warnings == []
        assert h.metadata.shared == grouped_module.ws_shared_bytes(config, 2, 2, c_tma)
        assert "wgmma.mma_async" in code and "cp.async.bulk.tensor" in code
        assert ("cp.async.bulk.tensor.2d.global.shared" in code) == c_tma      # the TMA store
        # a PDL launch after the table kernel: the table is read after the wait
        assert code.index("tlx_griddepcontrol_wait();", code.index("__global__")) < code.index("(table_ptr + ")
    t = group_table_kernel.warmup(torch.empty(E, dtype=torch.int32), torch.empty(2 * E, dtype=torch.int32),
                                  torch.empty(8, 8, dtype=torch.bfloat16), 8192, E, 4096, 4096, 1, BM=bm, E_PAD=E,
                                  PDL=True, num_warps=4, grid=(1,))
    assert t.n_spills == 0 and "tlx_griddepcontrol_launch_dependents();" in t.asm["cuda"]


@pytest.mark.parametrize("rows", [1, 7, 8, 9, 17, 33])
def test_expert_order_bands_cover_each_tile_once(rows):
    """The expert order's band arithmetic (find_expert_tile) as plain integers: r row tiles x
    5 column tiles of one expert map one-to-one onto (row tile, column), bands of at most 8 row
    tiles, balanced (17 -> 6, 6, 5)."""
    cols, G = 5, 8
    band = -(-rows // -(-rows // G))
    seen = set()
    for local in range(rows * cols):
        first = local // (band * cols) * band
        height = max(min(rows - first, band), 1)
        in_band = local % (band * cols)
        seen.add((first + in_band % height, in_band // height))
    assert seen == {(r, c) for r in range(rows) for c in range(cols)}
    assert band <= G and (rows != 17 or band == 6)


@pytest.mark.parametrize("config", ["g_128x128x64", "gws_128x128x64_s5"])
@pytest.mark.parametrize("sizes", [[30, 40], [-5, 20, 45], [10, 2**31 - 1, 5]], ids=["past_M", "negative", "huge"])
def test_group_sizes_past_the_rows_or_negative_fail_by_name(sizes, config, monkeypatch):
    """A negative size, or sizes adding up to more than a's rows (also past int32), fail the launch by a
    device assertion naming ``group_sizes`` (no host sync); the weight gradient's kernel checks them too."""
    monkeypatch.setattr(grouped_module, "CPU_SMS", 3)
    g = torch.Generator().manual_seed(41)
    M, K, N = 50, 64, 40
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    b = torch.randn(len(sizes), K, N, generator=g).to(torch.bfloat16)
    sizes_t = torch.tensor(sizes, dtype=torch.int64)
    with pytest.raises(Exception, match="group_sizes must be non-negative and add up to at most a's rows"):
        grouped_matmul(a, b, sizes_t, config=config, out_dtype=torch.float32)
    with pytest.raises(Exception, match="group_sizes must be non-negative"):
        grouped_module.grouped_weight_grad(a, a[:, :N].contiguous(), sizes_t, torch.float32)


@pytest.mark.parametrize("config", ["g_128x128x64", "gws_128x128x64_s5", "gws_128x256x64_s4_e8d"])
@pytest.mark.parametrize("activation, bias", [(None, False), ("swiglu", True), ("gelu", True)])
@pytest.mark.parametrize("sizes", [[30, 0, 41], [0, 0, 0], [7, 130, 0]], ids=["short", "all_empty", "tail_1_tile"])
def test_rows_past_the_groups_sum_are_zeros(sizes, config, activation, bias, monkeypatch):
    """Sizes adding up to less than a's rows (capacity padding): each group's rows get their expert's
    product, the rows after the sum belong to no expert and are stored as zeros (no bias, whatever the
    activation) into a NaN-poisoned output; their weight gradient is ignored.  Two zeroing programs
    beside the WS kernel's table: each takes several 32-row chunks."""
    monkeypatch.setattr(grouped_module, "CPU_SMS", 3)
    monkeypatch.setattr(grouped_module, "TAIL_PROGRAMS", 2)
    g = torch.Generator().manual_seed(43)
    M, K, N = 200, 64, 48
    E = len(sizes)
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    b = torch.randn(E, K, N, generator=g).to(torch.bfloat16)
    bias_t = torch.randn(E, N, generator=g).to(torch.bfloat16) if bias else None
    n_out = N // 2 if activation == "swiglu" else N
    out = torch.full((M, n_out), float("nan"), dtype=torch.float32)
    sizes_t = torch.tensor(sizes, dtype=torch.int32)
    grouped_matmul(a, b, sizes_t, out, config=config, activation=activation, bias=bias_t)
    total = sum(sizes)
    start = 0
    for e, n in enumerate(sizes):
        y = a[start:start + n].double() @ b[e].double()
        if bias:
            y = y + bias_t[e].double()
        if activation == "swiglu":
            y = torch.nn.functional.silu(y[:, 0::2]) * y[:, 1::2]
        elif activation == "gelu":
            y = torch.nn.functional.gelu(y)
        if n:
            assert ((out[start:start + n].double() - y).norm() / y.norm()).item() < 1e-5, e
        start += n
    assert (out[total:] == 0).all(), "rows past the groups' sum must be zeros"
    db = grouped_module.grouped_weight_grad(a, a[:, :N].contiguous(), sizes_t, torch.float32)
    start = 0
    for e, n in enumerate(sizes):
        ref = a[start:start + n].double().t() @ a[start:start + n, :N].double()
        assert torch.allclose(db[e].double(), ref, rtol=1e-5, atol=1e-4), e
        start += n
