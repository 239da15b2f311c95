"""The generated CUDA C++ run on the host CPU (codegen_nvptx/emu: the kernel text compiled by g++
against an emulation of the tlx_* helpers; ``cuda_source`` compiles no further than that text, NVRTC is
left to the compile tests): the decode split kernel that disagreed with the
interpreter on the H200 (session 13, ``_variant=7``) computes the float64 answer from its CUDA text
too, and a corrupted layout conversion in that text is caught."""
from __future__ import annotations

import importlib
import re

import pytest
import torch

from tlxc.codegen_nvptx.emu import run as emu
from tlxc.runtime.warmup import cuda_source

pytestmark = pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")

M = importlib.import_module("tlxc.ops.attention_decode")


def _emulating(monkeypatch, edit=None):
    """attention_decode's launches compile for sm_90a and run their CUDA text on the emulation
    (``edit``: a change of the text first); the texts run, by kernel name."""
    texts = {}

    def launch(kernel, grid, *args, **meta):
        text = cuda_source(kernel, args, meta, grid)
        bound = kernel.signature.bind(*args, **{k: v for k, v in meta.items() if k not in ("num_warps", "launch_pdl")})
        bound.apply_defaults()
        source = text if edit is None else edit(text)
        texts[kernel.__name__] = source
        emu.build(source).run(dict(bound.arguments), grid=grid, threads=32 * meta.get("num_warps", 4))
    monkeypatch.setattr(M, "_launch", launch)
    return texts


def _decode_case(variant, window=None):
    lens, page, D = [0, 1, 700, 1500, 129], 64, 64            # MQA 8:1, 64-row pages: s13 run 3's failing case
    gen = torch.Generator().manual_seed(72)
    need = [-(-n // page) for n in lens]
    num = sum(need) + 2
    order = torch.randperm(num, generator=gen)
    table = torch.full((len(lens), max(need)), -1, dtype=torch.int32)
    used = 0
    for b, n in enumerate(need):
        table[b, :n] = order[used:used + n].to(torch.int32)
        used += n
    k = torch.randn(num, page, 1, D, generator=gen).to(torch.bfloat16)
    v = torch.randn(num, page, 1, D, generator=gen).to(torch.bfloat16)
    q = torch.randn(len(lens), 8, D, generator=gen).to(torch.bfloat16)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    ref_o, _ = M.reference(q, k, v, seqlens, block_table=table, window=window)
    o, _ = M.attention_decode(q, k, v, seqlens, block_table=table, num_splits=3, combine="inline", check=False,
                              _variant=variant, _sms=132, window=window)
    return (o.double() - ref_o).abs().amax(dim=(1, 2))


@pytest.mark.parametrize("variant", [0, 7, 23])
def test_decode_split_kernel_cuda_text_matches_float64(variant, monkeypatch):
    texts = _emulating(monkeypatch)
    err = _decode_case(variant)
    assert list(texts) == ["decode_split_kernel"]
    assert err.max().item() < 2e-2, err.tolist()


@pytest.mark.parametrize("window", [(100, 0), (0, 0)], ids=str)
def test_decode_window_cuda_text_matches_float64(window, monkeypatch):
    """A sliding window (the last token sees keys len - 1 - left ..): the split kernel's start at the
    window's block and the mask of its first keys, in the CUDA text (three splits: some end before
    the window)."""
    texts = _emulating(monkeypatch)
    err = _decode_case(7, window)
    assert list(texts) == ["decode_split_kernel"]
    assert err.max().item() < 2e-2, err.tolist()


def test_a_corrupted_conversion_is_caught(monkeypatch):
    """The row offsets' shared-memory conversion of variant 7 written to the wrong slots (row r's
    offset stored for row r ^ 1): the sequences whose last block is partial come out wrong."""
    def corrupt(source):
        assert "[tf3] = " in source, "the conversion's store moved: update this test's edit"
        return source.replace("[tf3] = ", "[tf3 ^ 1] = ")
    _emulating(monkeypatch, corrupt)
    err = _decode_case(7)
    assert err.max().item() > 0.1, err.tolist()


@pytest.mark.parametrize("lens,H,Hkv,D,page,splits", [([0, 1, 37, 700], 32, 8, 128, 16, None),
                                                      ([130, 5, 600], 8, 1, 64, 64, 3)], ids=str)
def test_decode_tma_ring_cuda_text_matches_float64(lens, H, Hkv, D, page, splits, monkeypatch):
    """``_tma=True``: the TMA copies per page box, their mbarriers and the zeroed V tail, in the CUDA
    text (NaN in every cache row no sequence owns)."""
    texts = _emulating(monkeypatch)
    gen = torch.Generator().manual_seed(5)
    need = [-(-n // page) for n in lens]
    num = sum(need) + 2
    order = torch.randperm(num, generator=gen)
    table = torch.full((len(lens), max(need) + 1), -1, dtype=torch.int32)
    used = 0
    for b, n in enumerate(need):
        table[b, :n] = order[used:used + n].to(torch.int32)
        used += n
    k = torch.randn(num, page, Hkv, D, generator=gen).to(torch.bfloat16)
    v = torch.randn(num, page, Hkv, D, generator=gen).to(torch.bfloat16)
    owned = torch.zeros(num, page, dtype=torch.bool)
    for b, n in enumerate(lens):
        rows = torch.arange(n)
        owned[table[b, rows // page].long(), rows % page] = True
    k[~owned], v[~owned] = float("nan"), float("nan")
    q = torch.randn(len(lens), H, D, generator=gen).to(torch.bfloat16)
    seqlens = torch.tensor(lens, dtype=torch.int32)
    ref_o, _ = M.reference(q, k, v, seqlens, block_table=table)
    o, _ = M.attention_decode(q, k, v, seqlens, block_table=table, num_splits=splits, check=False, _tma=True,
                              _sms=132)
    assert "decode_split_kernel" in texts
    err = (o.double() - ref_o).abs().max().item()
    assert err < 2e-2, err


@pytest.mark.parametrize("col,error", [(4, None), (8, None), (1, "innermost coordinate 1 (4 bytes)"),
                                       (6, "innermost coordinate 6 (24 bytes)")])
def test_tma_box_starting_between_16_byte_chunks_is_an_error(col, error):
    """A TMA load whose box starts at an innermost coordinate that is not a 16-byte multiple is an
    error of the emulation, as it is an illegal instruction on the GPU (session 15: the attention
    backward's statistics rows of a packed sequence); aligned starts copy the row."""
    import kernels_tma as K

    import tlxc
    x = torch.randn(2, 100)
    out = torch.full((16,), float("nan"))
    desc = tlxc.TensorDescriptor.from_tensor(x, [1, 16], swizzle=0)
    module = emu.build(K.tma_row_load.warmup(desc, out, col, BN=16, grid=(1,), num_warps=4).asm["cuda"])
    if error is None:
        module.run({"in_desc": desc, "out_ptr": out, "col": col}, grid=(1,), threads=128)
        assert torch.equal(out, x[0, col:col + 16])
        return
    with pytest.raises(emu.EmulationError, match=error.replace("(", r"\(").replace(")", r"\)")):
        module.run({"in_desc": desc, "out_ptr": out, "col": col}, grid=(1,), threads=128)


MM = importlib.import_module("tlxc.ops.matmul")


def _emulating_matmul(monkeypatch, edit=None):
    """tlxc.ops.matmul's launches compile for sm_90a and run their CUDA text on the emulation
    (a producer and two or three consumer warp groups: named barriers, mbarriers, TMA loads,
    wgmma from shared memory; ``edit``: a change of the text first)."""
    names = []

    def launch(kernel, grid, *args, **meta):
        text = cuda_source(kernel, args, meta, grid)
        bound = kernel.signature.bind(*args, **{k: v for k, v in meta.items()
                                                if k not in ("num_warps", "num_stages", "launch_pdl", "ctas_per_cga")})
        bound.apply_defaults()
        source = text if edit is None else edit(text)
        threads = 128 * (meta["NUM_CONSUMERS"] + 1) if "NUM_CONSUMERS" in meta else 32 * meta["num_warps"]
        emu.build(source).run(dict(bound.arguments), grid=(*grid, 1, 1)[:3], threads=threads)
        names.append(kernel.__name__)
    monkeypatch.setattr(MM, "_launch", launch)
    return names


@pytest.mark.parametrize("config,shape,sms", [("ws_128x256x64_s4", (300, 520, 200), 132),
                                              ("ws_128x256x64_s4", (304, 520, 200, "transposed"), 132),
                                              ("ws_256x160x64_s4_swap", (297, 520, 200), 132),
                                              ("ws_256x144x64_s4_swap", (170, 300, 136), 132),
                                              ("ws_256x152x64_s4_swap", (297, 520, 200), 132),
                                              ("ws_128x152x64_s6_swap", (297, 520, 200), 132),
                                              ("ws_128x160x64_s6_swap", (170, 300, 136), 132),
                                              ("ws_128x192x64_s4_sub1", (200, 301, 136), 132),
                                              ("ws_128x80x64_s6_sub1", (200, 264, 520, "transposed"), 132),
                                              ("dot_64x32x128_s8_w4", (200, 264, 520, "transposed"), 132),
                                              ("dot_128x128x64_s3_w4_k2", (200, 264, 520), 132),
                                              ("dot_64x128x64_s4_w4", (37, 70, 555), 132),
                                              ("dot_64x128x64_s4_w4_k4", (37, 70, 555), 132),
                                              ("ws_128x256x64_s3_sk", (300, 512, 520), 3),
                                              ("ws_64x32x64_s16_np_sub1_ks", (70, 100, 520), 132),
                                              ("ws_64x64x64_s11_np_ks", (64, 136, 600, "transposed"), 132)],
                         ids=str)
def test_ws_gemm_cuda_text_matches_float64(config, shape, sms, monkeypatch):
    """The warp-specialized GEMM's CUDA text: 128x256 tiles stored by TMA in two halves (also with an
    M-major A and an N-major B: both wgmma transpose bits); the swapped
    tiles (C^T = B^T A^T, M along the tile's 144 / 160 columns: a 128 main part and its tail, stored
    as the output's rows in 16-column chunks through two shared buffers by TMA, tail first; 152:
    128 + 16 + 8, one m64n152; 256 or 128 of N); a 128 + 64 tile on an output TMA cannot store (N = 301); a 64 + 16
    tile whose tail's TMA store swizzles 32 bytes, on an N-major B (the tail's wgmma reads 32-byte-swizzled
    rows); a 64x32 pointer tile on an N-major B (64-byte-swizzled rows); the pointer kernel (cp.async ring, wgmma) split in
    two with its fix-up by the tile's last split; 256-wide
    stream-K on 3 programs (partials published and summed in quarters, flags by atomics: the emulation
    runs CTAs in index order, as stream-K's waits allow).  Bias and GELU, a NaN-poisoned output, K off
    the 64-wide steps (TMA zero-fill).  The pointer kernel at K = 555: rows of 1110 bytes, so its
    cp.async copies are 4 bytes wide (and the split-K fix-up reads its partials with hinted 64-bit loads),
    which the emulation lacked until session 32.  64-row ``ksplit`` tiles: both consumers on the same rows,
    alternate k-steps (an odd count of them at K = 520, 600), consumer 1's sum handed over in shared memory."""
    monkeypatch.setattr(MM, "CPU_SMS", sms)
    monkeypatch.setattr(MM, "_STREAM_K", {})
    names = _emulating_matmul(monkeypatch)
    assert _matmul_error(config, shape) < 8e-3
    assert names == ["gemm_dot_kernel" if config.startswith("dot") else "gemm_ws_kernel"]


@pytest.mark.parametrize("config", ["ws_256x152x64_s4_swap", "ws_128x152x64_s6_swap"])
def test_swapped_tile_glu_pairs_cuda_text(config, monkeypatch):
    """GLU pairs on a swapped tile's TMA epilogue in CUDA text: C^T's rows 2j / 2j + 1 exchanged, the
    half-width chunk staged transposed in one shared buffer and stored at column ``row / 2``."""
    monkeypatch.setattr(MM, "CPU_SMS", 132)
    _emulating_matmul(monkeypatch)
    g = torch.Generator().manual_seed(5)
    a = torch.randn(297, 200, generator=g).to(torch.bfloat16)
    b = torch.randn(528, 200, generator=g).to(torch.bfloat16).t()
    bias = torch.randn(528, generator=g).to(torch.bfloat16)
    out = torch.full((297, 264), float("nan"), dtype=torch.bfloat16)
    MM.matmul(a, b, out, bias=bias, activation="swiglu", config=config)
    h = a.double() @ b.double() + bias.double()
    ref = torch.nn.functional.silu(h[:, 0::2]) * h[:, 1::2]
    assert torch.isfinite(out).all(), "poison left in the output"
    assert ((out.double() - ref).norm() / ref.norm()).item() < 8e-3


def test_a_wrong_transpose_bit_is_caught(monkeypatch):
    """The swapped tile's wgmma (its n128 + n32 products fused: m64n160) told its K-major A is
    M-major: the product comes out wrong."""
    def corrupt(source):
        assert "tlx_wgmma_m64n160k16_f32_bf16<0, 0>(" in source, "the wgmma call changed: update this test's edit"
        return source.replace("tlx_wgmma_m64n160k16_f32_bf16<0, 0>(", "tlx_wgmma_m64n160k16_f32_bf16<1, 0>(")
    _emulating_matmul(monkeypatch, corrupt)
    assert _matmul_error("ws_256x160x64_s4_swap", (297, 520, 200)) > 0.1


def _matmul_error(config, shape):
    """The relative error of ``gelu(a @ w.t() + bias)`` through ``config`` against float64 math
    (a NaN-poisoned output: poison left fails)."""
    M, N, K, *transposed = shape
    g = torch.Generator().manual_seed(M + N)
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    b = torch.randn(N, K, generator=g).to(torch.bfloat16).t()                 # K-major (w.t())
    if transposed:                                    # M-major A, N-major B
        a, b = a.t().contiguous().t(), b.contiguous()
    bias = torch.randn(N, generator=g).to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    MM.matmul(a, b, out, bias=bias, activation="gelu", config=config)
    ref = torch.nn.functional.gelu(a.double() @ b.double() + bias.double())
    assert torch.isfinite(out).all(), "poison left in the output"
    return ((out.double() - ref).norm() / ref.norm()).item()


def _emulated(kernel, grid, *args, **meta):
    """Compile ``kernel`` for the launch and run its CUDA text on the emulation, with the thread
    count of its ``__launch_bounds__`` (warp-specialized kernels: every task's warps)."""
    source = cuda_source(kernel, args, meta, grid)
    bound = kernel.signature.bind(*args, **{k: v for k, v in meta.items()
                                            if k not in ("num_warps", "num_stages", "launch_pdl", "ctas_per_cga")})
    bound.apply_defaults()
    bounds = re.search(r"__launch_bounds__\((\d+)", source)
    threads = int(bounds.group(1)) if bounds else 32 * meta.get("num_warps", 4)
    emu.build(source).run(dict(bound.arguments), grid=grid, threads=threads)


def _emulate_launches(monkeypatch, module, *names):
    """``module.<name>[grid](...)`` for each name runs its kernel's CUDA text on the emulation."""
    class Emulated:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            return lambda *args, **meta: _emulated(self.kernel, grid, *args, **meta)
    for name in names:
        monkeypatch.setattr(module, name, Emulated(getattr(module, name)))


AF = importlib.import_module("tlxc.ops.attention")
AB = importlib.import_module("tlxc.ops.attention_bwd")


@pytest.mark.parametrize("D,S,causal,softcap,dtype", [(64, 200, True, None, torch.bfloat16),
                                                      (128, 300, False, None, torch.bfloat16),
                                                      (64, 384, False, None, torch.bfloat16),
                                                      (128, 200, False, 20.0, torch.bfloat16),
                                                      (64, 256, False, None, torch.float16),
                                                      (128, 130, True, None, torch.float16)], ids=str)
def test_attention_forward_cuda_text_matches_float64(D, S, causal, softcap, dtype, monkeypatch):
    """The attention forward's warp-specialized kernel from its CUDA text: TMA loads of Q and the
    K/V ring, the two (three: D = 64 at S = 384) ping-ponging consumers, P V from registers, O
    staged and TMA-stored, the LSE; S off the blocks; softcapping (the kernel's own
    ``tanh.approx.f32``, made host C by the emulation); fp16 (its wgmma and conversions, emulated
    since session 32), at S = 256 D = 64 with ``s1_ahead`` (the default there)."""
    from tlxc.ops.kernels.attention_fwd import attn_fwd_kernel
    monkeypatch.setattr(AF, "_launch", lambda grid, *args, **meta: _emulated(attn_fwd_kernel, grid, *args, **meta))
    g = torch.Generator().manual_seed(D + S)
    q, k, v = (torch.randn(1, 2, S, D, generator=g).to(dtype) for _ in range(3))
    o, lse = AF.attention_forward(q, k, v, causal=causal, softcap=softcap)
    ref_o, ref_lse = AF.reference(q, k, v, causal=causal, softcap=softcap)
    assert (o.double() - ref_o).abs().max().item() < (2e-2 if dtype == torch.bfloat16 else 4e-3)
    assert (lse.double() - ref_lse).abs().max().item() < 1e-4


@pytest.mark.parametrize("knob", ["k_ahead", "early_lse"])
@pytest.mark.parametrize("D,S,causal", [(64, 256, False), (128, 300, True)], ids=str)
def test_attention_forward_options_cuda_text_matches_float64(knob, D, S, causal, monkeypatch):
    """Two opt-in orders from the CUDA text: the producer's K blocks one ahead of its V blocks
    (``k_ahead``: with ``s1_ahead`` at S = 256, whose first turn reads K_0 and K_1, and over three
    causal blocks) and ``1 / l`` and the lse store issued while the last P V runs (``early_lse``)."""
    import dataclasses

    from tlxc.ops.kernels.attention_fwd import attn_fwd_kernel
    monkeypatch.setattr(AF, "_launch", lambda grid, *args, **meta: _emulated(attn_fwd_kernel, grid, *args, **meta))
    g = torch.Generator().manual_seed(D * S)
    q, k, v = (torch.randn(1, 2, S, D, generator=g).to(torch.bfloat16) for _ in range(3))
    config = dataclasses.replace(AF.choose_config(D, causal, S), **{knob: True})
    o, lse = AF.attention_forward(q, k, v, causal=causal, config=config)
    ref_o, ref_lse = AF.reference(q, k, v, causal=causal)
    assert (o.double() - ref_o).abs().max().item() < 2e-2
    assert (lse.double() - ref_lse).abs().max().item() < 1e-4


@pytest.mark.parametrize("D,S,causal,Hkv,softcap,dq_rows", [(64, 200, True, 2, None, False),
                                                             (128, 256, False, 1, None, False),
                                                             (64, 200, True, 2, 15.0, False),
                                                             (64, 200, False, 2, None, True),
                                                             (128, 200, True, 1, None, True),
                                                             (128, 300, True, 1, None, "drift")], ids=str)
def test_attention_backward_ws_cuda_text_matches_float64(D, S, causal, Hkv, softcap, dq_rows, monkeypatch):
    """The warp-specialized backward from its CUDA text (dQ by float32 TMA reduce-adds of 128-byte
    sub-boxes, or of one 3-D box staged in rows with ``WS_DQ_ROWS``; dK / dV per item; GQA 2:1 at
    D = 128; softcapping; D = 128's drifting consumers) against float64 autograd."""
    monkeypatch.setenv("TLXC_ATTN_BWD", "ws")
    monkeypatch.setattr(AB, "WS_DQ_ROWS", {64: bool(dq_rows), 128: bool(dq_rows)})
    if dq_rows == "drift":              # D = 128's drifting consumers (WS_DRIFT) with rows, under a mask too
        monkeypatch.setattr(AB, "WS_DRIFT", dict.fromkeys(AB.WS_DRIFT, True))
    kernels = []

    def launch(kernel, grid, *args, **meta):
        _emulated(kernel, grid, *args, **meta)
        kernels.append(kernel.__name__)
    monkeypatch.setattr(AB, "_launch", launch)
    g = torch.Generator().manual_seed(D + S)
    q, do = (torch.randn(1, 2, S, D, generator=g).to(torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(1, Hkv, S, D, generator=g).to(torch.bfloat16) for _ in range(2))
    o, lse = AF.attention_forward(q, k, v, causal=causal, softcap=softcap)          # (the interpreter)
    dq, dk, dv = AB.attention_bwd(do, q, k, v, o, lse, causal=causal, sm_scale=D ** -0.5, softcap=softcap)
    assert kernels[-1] == "bwd_ws_kernel"
    leaves = [t.double().requires_grad_(True) for t in (q, k, v)]
    AF.reference(*leaves, causal=causal, softcap=softcap)[0].backward(do.double())
    for got, ref in zip((dq, dk, dv), leaves):
        assert ((got.double() - ref.grad).norm() / ref.grad.norm()).item() < 1e-2


@pytest.mark.parametrize("kmajor,bands", [(True, 0), (False, 0), (True, 2)])
def test_grouped_ws_gemm_cuda_text_matches_float64(kmajor, bands, monkeypatch):
    """The grouped WS GEMM from its CUDA text: the group table kernel, then the dynamic schedule
    (tiles drawn by an atomic counter), TMA stores inside a group and the staged stores of each
    group's partial last row block; an empty group and one of 5 rows; K-major weights (with a K
    tail) and N-major ones (the split tails' second half of B is another 64-column box there);
    the expert order, or column bands of 2 of the 3 column tiles (``bands``)."""
    G = importlib.import_module("tlxc.ops.grouped")
    monkeypatch.setitem(G.GROUPED_WS_CONFIGS, "gws_test", (128, 256, 64, 4, 0 if bands else 16, True, bands))

    _emulate_launches(monkeypatch, G, "group_table_kernel", "grouped_gemm_ws_kernel")
    monkeypatch.setattr(G, "CPU_SMS", 3)
    monkeypatch.setattr(G, "SPLIT_TAILS", True)   # the last 2 of 130 rows, 5 rows: split tiles (70: two consumers)
    sizes = [70, 0, 130, 5]
    g = torch.Generator().manual_seed(4)
    K = 136 if kmajor else 128                            # N-major weights: K a multiple of 64
    a = torch.randn(sum(sizes), K, generator=g).to(torch.bfloat16)
    w = torch.randn(len(sizes), 520, K, generator=g).to(torch.bfloat16)
    b = w.transpose(1, 2) if kmajor else w.transpose(1, 2).contiguous()
    out = G.grouped_matmul(a, b, torch.tensor(sizes, dtype=torch.int32), config="gws_test")
    starts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    ref = torch.cat([a[starts[i]:starts[i + 1]].double() @ w[i].double().t() for i in range(len(sizes))])
    assert torch.isfinite(out).all()
    assert ((out.double() - ref).norm() / ref.norm()).item() < 8e-3


def test_grouped_swapped_tiles_cuda_text_matches_float64(monkeypatch):
    """The grouped GEMM in swapped tiles from its CUDA text (``out^T = W a^T``, a group's rows as the wgmma's N;
    128 weight rows by up to 256): a whole 256-row tile by one TMA box, a group's last tile by 16-row boxes (1, 2,
    3 and 5 of them: 5, 17, 34 and 70 rows), fused ``m64n(16 v)`` products over row slices of one buffer, 16-row
    chunks TMA-stored through the transposed staging buffers and a group's last chunk stored through pointers; an
    empty group; N and K tails."""
    G = importlib.import_module("tlxc.ops.grouped")

    _emulate_launches(monkeypatch, G, "group_table_kernel", "grouped_gemm_swap_kernel")
    monkeypatch.setattr(G, "CPU_SMS", 3)
    sizes = [70, 0, 290, 5, 17]
    g = torch.Generator().manual_seed(9)
    K, N = 72, 200
    a = torch.randn(sum(sizes), K, generator=g).to(torch.bfloat16)
    w = torch.randn(len(sizes), N, K, generator=g).to(torch.bfloat16)
    out = G.grouped_matmul(a, w.transpose(1, 2), torch.tensor(sizes, dtype=torch.int32),
                           config="gws_128x256x64_s4_e16d_swap")
    starts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    ref = torch.cat([a[starts[i]:starts[i + 1]].double() @ w[i].double().t() for i in range(len(sizes))])
    assert torch.isfinite(out).all()
    assert ((out.double() - ref).norm() / ref.norm()).item() < 8e-3


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "promoted"])
def test_grouped_fp8_ws_cuda_text_matches_float64(fast, monkeypatch):
    """The fp8 grouped WS GEMM from its CUDA text (e4m3 wgmma, 128-byte k-steps, K-major weights): row-wise
    ``scale_a`` and per-expert column ``scale_b`` in the epilogue of both store paths (TMA inside a group,
    staged masked stores of its last rows), the sums in the wgmma accumulator or promoted (each k-step's
    products in an accumulator of their own, added in float32); an empty group and one of 5 rows."""
    G = importlib.import_module("tlxc.ops.grouped")

    _emulate_launches(monkeypatch, G, "group_table_kernel", "grouped_gemm_ws_kernel")
    monkeypatch.setattr(G, "CPU_SMS", 3)
    sizes = [70, 0, 130, 5]
    g = torch.Generator().manual_seed(8)
    K, N = 272, 200
    a = (torch.randn(sum(sizes), K, generator=g) * 2).to(torch.float8_e4m3fn)
    w = (torch.randn(len(sizes), N, K, generator=g) * 2).to(torch.float8_e4m3fn)
    scale_a = torch.rand(sum(sizes), generator=g) + 0.5
    scale_b = torch.rand(len(sizes), N, generator=g) + 0.5
    out = G.grouped_matmul(a, w.transpose(1, 2), torch.tensor(sizes, dtype=torch.int32), config="gws8_128x128x128_s5",
                           scale_a=scale_a, scale_b=scale_b, use_fast_accum=fast)
    starts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    ref = torch.cat([(a[starts[i]:starts[i + 1]].double() @ w[i].double().t()) * scale_a[starts[i]:starts[i + 1], None]
                     * scale_b[i] for i in range(len(sizes))])
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    assert ((out.double() - ref).norm() / ref.norm()).item() < 4e-3


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32], ids=str)
def test_grouped_wgrad_ws_cuda_text_matches_float64(out_dtype, monkeypatch):
    """The grouped weight gradient's WS kernel from its CUDA text: the consumers' zeroing of the
    ``a`` rows past a group's end on its last k-step (a shared read, select and write, the proxy fence,
    the warp group's named barrier) where the next group's rows follow, an empty group, the TMA
    stores of a bf16 output through the ``[E * K, N]`` descriptor, or a float32 one's masked pointer
    stores (K = 200: not a whole number of tiles)."""
    G = importlib.import_module("tlxc.ops.grouped")

    _emulate_launches(monkeypatch, G, "grouped_wgrad_ws_kernel")
    monkeypatch.setattr(G, "CPU_SMS", 3)
    sizes = [70, 0, 130, 5]
    K, N = (256, 256) if out_dtype == torch.bfloat16 else (200, 136)
    g = torch.Generator().manual_seed(6)
    a = torch.randn(sum(sizes) + 9, K, generator=g).to(torch.bfloat16)
    grad = torch.randn(sum(sizes) + 9, N, generator=g).to(torch.bfloat16)
    out = G.grouped_weight_grad(a, grad, torch.tensor(sizes, dtype=torch.int32), out_dtype, config="wws_128x128x64_s6")
    starts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    ref = torch.stack([a[starts[i]:starts[i + 1]].double().t() @ grad[starts[i]:starts[i + 1]].double()
                       for i in range(len(sizes))])
    assert torch.isfinite(out).all() and (out[1] == 0).all()
    assert ((out.double() - ref).norm() / ref.norm()).item() < (1e-6 if out_dtype == torch.float32 else 8e-3)


_DEADLOCKS = {
    # lanes whose select picks the partner shuffle twice: the other lanes never reach the second one
    "divergent_shuffle": """extern "C" __global__ void divergent(int* out) {
  int v = threadIdx.x;
  int r = (v > __shfl_xor_sync(0xffffffffu, v, 1) ? v : __shfl_xor_sync(0xffffffffu, v, 1));
  out[threadIdx.x] = r;
}""",
    # half the CTA at __syncthreads, the other half gone
    "half_barrier": """extern "C" __global__ void half(int* out) {
  if (threadIdx.x < 32) __syncthreads();
  out[threadIdx.x] = 1;
}""",
}


@pytest.mark.parametrize("name", sorted(_DEADLOCKS))
def test_a_deadlock_is_reported_not_waited_for(name):
    """Every live thread waiting on something no other thread will complete is reported after a few
    scheduler rounds without progress (it used to spin ~2e8 rounds: the host hung), naming the CTA."""
    out = torch.zeros(64, dtype=torch.int32)
    with pytest.raises(emu.EmulationError, match=r"no progress in CTA \(0, 0, 0\)"):
        emu.build(_DEADLOCKS[name]).run({"out": out}, grid=(1,), threads=64)


@pytest.mark.parametrize("dtype", [torch.int8, torch.float16, torch.int32, torch.float64], ids=str)
@pytest.mark.parametrize("hint", [{"volatile": True}, {"cache_modifier": ".cg", "eviction_policy": "evict_last"}],
                         ids=["volatile", "hinted"])
def test_volatile_and_hinted_accesses_run(dtype, hint):
    """Volatile loads (each yields, as a flag poll must) and cache-hinted loads and stores of every width,
    masked, over two programs: emulated since session 32 (texts using them did not build before)."""
    import tlxc
    import tlxc.language as tl

    @tlxc.jit
    def copy_plus_one(x_ptr, o_ptr, n, BLOCK: tl.constexpr, HINT: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        if HINT:
            x = tl.load(x_ptr + offs, mask=m, cache_modifier=".cg", eviction_policy="evict_last")
            tl.store(o_ptr + offs, x + 1, mask=m, cache_modifier=".cs")
        else:
            tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m, volatile=True) + 1, mask=m)

    x = torch.arange(100).to(dtype)
    out = torch.zeros(100, dtype=dtype)
    h = copy_plus_one.warmup(x, out, 100, BLOCK=64, HINT="volatile" not in hint, grid=(2,))
    assert ("tlx_ld_volatile_global" if "volatile" in hint else "tlx_ld_global_hint") in h.asm["cuda"]
    emu.build(h.asm["cuda"]).run({"x_ptr": x, "o_ptr": out, "n": 100}, grid=(2, 1, 1), threads=128)
    assert torch.equal(out, x + 1)
