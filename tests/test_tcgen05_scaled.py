"""Block-scaled tcgen05 MMA (``tlx.async_dot_scaled``, mxfp8: e4m3 / e5m2 inputs with ue8m0
scales per 32 K elements, ``tcgen05.mma.kind::mxf8f6f4.block_scale``): the interpreter
against a float64 reference built from the unscaled values and the scales, NVRTC + ptxas for
sm_100a, and the front end's refusals.  None of it has run on Blackwell hardware."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import check_function, compile_kernel
from tlxc.errors import TlxcError
from tlxc.frontend.specialize import specialization_from_types
from tlxc.interpreter import interpret
from tlxc.language import tlx


def _nvrtc_available() -> bool:
    try:
        from tlxc.codegen_nvptx.toolchain import nvrtc_version
        nvrtc_version()
    except (ImportError, OSError, TlxcError):
        return False
    return True


needs_nvrtc = pytest.mark.skipif(not _nvrtc_available(), reason="NVRTC (cuda-bindings) is not available")


@tlxc.kernel
def mx_gemm(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr: tl.pointer_type(tl.float32), N: tl.int32,
            K: tl.constexpr = 256, BN: tl.constexpr = 128, FMT_A: tl.constexpr = "e4m3",
            FMT_B: tl.constexpr = "e4m3", BUG: tl.constexpr = ""):
    """C[128, BN block] = sum over K tiles of (A * 2^(sa - 127)) @ (B * 2^(sb - 127)); the whole
    K in one tile (K <= 256), the scales loaded flat and stored in their 5-D shape."""
    rows = tl.arange(0, 128)
    ks = tl.arange(0, K)
    cols = tl.program_id(0) * BN + tl.arange(0, BN)
    REP_K: tl.constexpr = K // 128
    REP_N: tl.constexpr = (BN + 127) // 128
    a = tlx.local_alloc((128, K), a_ptr.dtype.element_ty, 1)
    b = tlx.local_alloc((K, BN), b_ptr.dtype.element_ty, 1)
    sa = tlx.local_alloc((1, 1, REP_K, 2, 256), tl.uint8, 1)
    sb = tlx.local_alloc((1, REP_N, REP_K, 2, 256), tl.uint8, 1)
    acc = tlx.local_alloc((128, BN), tl.float32, 1, storage=tlx.storage_kind.tmem)
    done = tlx.alloc_barriers(1, arrive_count=1)
    tlx.local_store(a[0], tl.load(a_ptr + rows[:, None] * K + ks[None, :]))
    tlx.local_store(b[0], tl.load(b_ptr + ks[:, None] * N + cols[None, :], mask=cols[None, :] < N, other=0.0))
    tlx.local_store(sa[0], tl.reshape(tl.load(sa_ptr + tl.arange(0, REP_K * 512)), [1, 1, REP_K, 2, 256]))
    sb_base = sb_ptr + tl.program_id(0) * (REP_N * REP_K * 512)
    tlx.local_store(sb[0], tl.reshape(tl.load(sb_base + tl.arange(0, REP_N * REP_K * 512)),
                                      [1, REP_N, REP_K, 2, 256]))
    tlx.fence("async_shared")
    if BUG == "unwritten_scale":
        fresh = tlx.local_alloc((1, 1, REP_K, 2, 256), tl.uint8, 1)
        tlx.async_dot_scaled(a[0], b[0], acc[0], fresh[0], "e4m3", sb[0], "e4m3", use_acc=False,  # BUG scale
                             mBarriers=[done[0]])
    else:
        tlx.async_dot_scaled(a[0], b[0], acc[0], sa[0], FMT_A, sb[0], FMT_B, use_acc=False, mBarriers=[done[0]])
    tlx.barrier_wait(done[0], 0)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], tlx.local_load(acc[0]), mask=cols[None, :] < N)


def _swizzle(scales: torch.Tensor, rows_padded: int) -> torch.Tensor:
    """[rows, K / 32] ue8m0 codes -> the cuBLAS block-scaling bytes: chunk (r // 128, kb // 4) of
    512 bytes, scale (r, kb) at (r % 32) * 16 + (r % 128) // 32 * 4 + kb % 4."""
    rows, kbs = scales.shape
    padded = torch.full((rows_padded, kbs), 127, dtype=torch.uint8)
    padded[:rows] = scales
    t = padded.reshape(rows_padded // 128, 4, 32, kbs // 4, 4)        # (rb, r//32 % 4, r % 32, kc, kb % 4)
    return t.permute(0, 3, 2, 1, 4).contiguous().reshape(-1)          # (rb, kc, r % 32, r//32 % 4, kb % 4)


def _case(fmt_a, fmt_b, N, K, BN, seed):
    g = torch.Generator().manual_seed(seed)
    dt = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    a = (torch.randn(128, K, generator=g) * 2).to(dt[fmt_a])
    b = (torch.randn(K, N, generator=g) * 2).to(dt[fmt_b])
    sa = torch.randint(120, 135, (128, K // 32), generator=g, dtype=torch.int32).to(torch.uint8)
    sb = torch.randint(120, 135, (N, K // 32), generator=g, dtype=torch.int32).to(torch.uint8)
    blocks = -(-N // BN)
    rep_n = -(-BN // 128)
    # B's scales per program: its BN columns (padded to 128-row blocks), one after the other
    sb_bytes = torch.cat([_swizzle(sb[p * BN:(p + 1) * BN], rep_n * 128) for p in range(blocks)])
    ref_a = a.double() * torch.pow(2.0, sa.double() - 127).repeat_interleave(32, dim=1)
    ref_b = b.double() * torch.pow(2.0, sb.double() - 127).repeat_interleave(32, dim=1).T
    return a, b, _swizzle(sa, 128), sb_bytes, ref_a @ ref_b


@pytest.mark.parametrize("fmt_a, fmt_b", [("e4m3", "e4m3"), ("e5m2", "e4m3")])
def test_mx_gemm_matches_float64(fmt_a, fmt_b):
    N, K, BN = 200, 256, 128                     # N not a multiple of BN; two K chunks of 4 scale blocks
    a, b, sa, sb, ref = _case(fmt_a, fmt_b, N, K, BN, seed=1)
    c = torch.full((128, N), float("nan"))
    interpret(mx_gemm, (-(-N // BN),), (a, b, sa, sb, c, N), {"K": K, "BN": BN, "FMT_A": fmt_a, "FMT_B": fmt_b},
              arch="sm_100a")
    rel = ((c.double() - ref).abs().max() / ref.abs().max()).item()
    assert rel < 1e-5, rel                        # fp8 x 2^s products are exact; float32 accumulation


def test_unwritten_scales_are_caught_at_the_mma():
    a, b, sa, sb, _ = _case("e4m3", "e4m3", 128, 256, 128, seed=2)
    c = torch.full((128, 128), float("nan"))
    with pytest.raises(TlxcError) as info:
        interpret(mx_gemm, (1,), (a, b, sa, sb, c, 128), {"BUG": "unwritten_scale"}, arch="sm_100a")
    text = info.value.render()
    line = next(n for n, s in enumerate(open(__file__).read().splitlines(), 1) if s.rstrip().endswith("# BUG scale"))
    assert "read of uninitialized shared memory" in text and "A_scale" in text and f":{line}:" in text, text


def _spec(kernel, **constexprs):
    types = {"a_ptr": tl.pointer_type(tl.float8e4nv), "b_ptr": tl.pointer_type(tl.float8e4nv),
             "sa_ptr": tl.pointer_type(tl.uint8), "sb_ptr": tl.pointer_type(tl.uint8)}
    return specialization_from_types(kernel, types, constexprs)


def test_checker_is_clean():
    assert [str(f) for f in check_function(mx_gemm, _spec(mx_gemm), arch="sm_100a")] == []


@needs_nvrtc
def test_compiles_for_sm100a():
    compiled = compile_kernel(mx_gemm, _spec(mx_gemm), arch="sm_100a", num_warps=4,
                              stages=("ir", "ir.opt", "cuda", "cubin"))
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    cuda = compiled.asm["cuda"]
    assert "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X" in cuda
    # two K chunks: A's scales to 2 x 4 columns, B's (one 128-row block) to the next 2 x 4
    assert cuda.count("tlx_tcgen05_cp_32x128b_warpx4(tlx_tmem_base") == 4
    # e4m3 x e4m3, B N-major (bit 16), N = 128 (16 << 17), UE8M0 (bit 23), M = 128 (1 << 27)
    assert f"{(1 << 16) | (16 << 17) | (1 << 23) | (1 << 27):#010x}u | ((unsigned)(kk % 4) << 29)" in cuda
    assert compiled.metadata["spills_bytes"] == 0


@tlxc.kernel
def refused(x_ptr, CASE: tl.constexpr):
    a = tlx.local_alloc((128, 128), tl.float8e4nv, 1)
    b = tlx.local_alloc((128, 64), tl.float8e4nv, 1)
    s = tlx.local_alloc((1, 1, 1, 2, 256), tl.uint8, 1)
    s2 = tlx.local_alloc((1, 1, 2, 2, 256), tl.uint8, 1)
    st = tlx.local_alloc((128, 4), tl.uint8, 1, storage=tlx.storage_kind.tmem)
    acc = tlx.local_alloc((128, 64), tl.float32, 1, storage=tlx.storage_kind.tmem)
    if CASE == "e2m1":
        tlx.async_dot_scaled(a[0], b[0], acc[0], s[0], "e2m1", s[0], "e4m3")  # e2m1
    if CASE == "format":
        tlx.async_dot_scaled(a[0], b[0], acc[0], s[0], "e5m2", s[0], "e4m3")  # format
    if CASE == "shape":
        tlx.async_dot_scaled(a[0], b[0], acc[0], s2[0], "e4m3", s[0], "e4m3")  # shape
    if CASE == "tmem":
        tlx.async_dot_scaled(a[0], b[0], acc[0], st[0], "e4m3", s[0], "e4m3")  # tmem
    if CASE == "pair":
        tlx.async_dot_scaled(a[0], b[0], acc[0], s[0], "e4m3", s[0], "e4m3", two_ctas=True)  # pair


@pytest.mark.parametrize("case, text", [
    ("e2m1", "'e2m1' (packed fp4, kind::mxf4) is not supported yet"),
    ("format", "A_format='e5m2' but the buffer holds f8e4m3"),
    ("shape", "'A_scale' must be a uint8 shared buffer of shape [1, 1, 1, 2, 256]"),
    ("tmem", "'A_scale' in tensor memory (tlx.tmem_copy) is not supported yet"),
    ("pair", "async_dot_scaled with two_ctas=True is not supported yet"),
])
def test_refusals_name_their_line(case, text):
    spec = specialization_from_types(refused, {"x_ptr": tl.pointer_type(tl.float32)}, {"CASE": case})
    with pytest.raises(TlxcError) as info:
        compile_kernel(refused, spec, arch="sm_100a", num_warps=4, stages=("ir",))
    line = next(n for n, s in enumerate(open(__file__).read().splitlines(), 1) if s.rstrip().endswith(f"# {case}"))
    assert text in str(info.value) and info.value.loc.line == line, str(info.value)
