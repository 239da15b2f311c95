"""tcgen05 with M = 64 accumulators (sm_100a): 64-row tensor-memory buffers (PTX's
data-path layout F, rows at lanes 0-15 of each warp's 32), moved to and from registers
with ``tcgen05.ld/st .16x32bx2``, and ``tcgen05.mma`` with M = 64.  The interpreter's
results against float64; NVRTC + ptxas for sm_100a for the generated code; the front
end's refusals.  None of it has run on Blackwell hardware (there is none here)."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
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
def m64_gemm(a_ptr: tl.pointer_type(tl.bfloat16), b_ptr: tl.pointer_type(tl.bfloat16),
             bias_ptr: tl.pointer_type(tl.float32), c_ptr: tl.pointer_type(tl.float32),
             M: tl.int32, N: tl.int32, K: tl.int32,
             BN: tl.constexpr = 64, BK: tl.constexpr = 32, A_IN_TMEM: tl.constexpr = False):
    """C[64-row block] = bias + A @ B: the accumulator starts as the bias (tcgen05.st), each
    K step is an asynchronous M = 64 MMA waited for through its barrier; A is in shared
    memory or (A_IN_TMEM) stored into a 64-row tensor-memory buffer first."""
    rows = tl.program_id(0) * 64 + tl.arange(0, 64)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    a = tlx.local_alloc((64, BK), tl.bfloat16, 1)
    b = tlx.local_alloc((BK, BN), tl.bfloat16, 1)
    acc = tlx.local_alloc((64, BN), tl.float32, 1, storage=tlx.storage_kind.tmem)
    a_tmem = tlx.local_alloc((64, BK), tl.bfloat16, 1, storage=tlx.storage_kind.tmem)
    done = tlx.alloc_barriers(1, arrive_count=1)
    out_mask = (rows[:, None] < M) & (cols[None, :] < N)
    tlx.local_store(acc[0], tl.load(bias_ptr + rows[:, None] * N + cols[None, :], mask=out_mask, other=0.0))
    phase = 0
    for k in range(0, K, BK):
        ks = k + tl.arange(0, BK)
        a_tile = tl.load(a_ptr + rows[:, None] * K + ks[None, :], mask=(rows[:, None] < M) & (ks[None, :] < K),
                         other=0.0)
        tlx.local_store(b[0], tl.load(b_ptr + ks[:, None] * N + cols[None, :],
                                      mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0))
        if A_IN_TMEM:
            tlx.local_store(a_tmem[0], a_tile)
            tlx.fence("async_shared")
            tlx.async_dot(a_tmem[0], b[0], acc[0], use_acc=True, mBarriers=[done[0]])
        else:
            tlx.local_store(a[0], a_tile)
            tlx.fence("async_shared")
            tlx.async_dot(a[0], b[0], acc[0], use_acc=True, mBarriers=[done[0]])
        tlx.barrier_wait(done[0], phase)
        phase ^= 1
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], tlx.local_load(acc[0]), mask=out_mask)


@tlxc.kernel
def m64_roundtrip(x_ptr: tl.pointer_type(tl.float16), out_ptr: tl.pointer_type(tl.float16), N: tl.constexpr = 64):
    """fp16 packed two to a column in a 64-row buffer, a column slice back out."""
    buf = tlx.local_alloc((64, N), tl.float16, 1, storage=tlx.storage_kind.tmem)
    rows = tl.arange(0, 64)
    cols = tl.arange(0, N)
    tlx.local_store(buf[0], tl.load(x_ptr + rows[:, None] * N + cols[None, :]))
    half = tlx.local_load(tlx.local_slice(buf[0], [0, N // 2], [64, N // 2]))
    tl.store(out_ptr + rows[:, None] * (N // 2) + tl.arange(0, N // 2)[None, :], half)


def _run_gemm(M, N, K, a_in_tmem, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).to(torch.bfloat16)
    b = torch.randn(K, N, generator=g).to(torch.bfloat16)
    bias = torch.randn(M, N, generator=g)
    c = torch.full((M, N), float("nan"))                # poisoned
    BN = 32
    interpret(m64_gemm, (-(-M // 64), -(-N // BN)), (a, b, bias, c, M, N, K), {"BN": BN, "A_IN_TMEM": a_in_tmem},
              arch="sm_100a")
    ref = bias.double() + a.double() @ b.double()
    return ((c.double() - ref).abs().max() / ref.abs().max()).item()


@pytest.mark.parametrize("a_in_tmem", [False, True], ids=["a-smem", "a-tmem"])
def test_m64_gemm_matches_float64(a_in_tmem):
    # 100 x 72 x 80: not multiples of the 64 x 32 x 32 tiles; bf16 products are exact in float32
    assert _run_gemm(100, 72, 80, a_in_tmem) < 1e-5


def test_m64_fp16_roundtrip_and_slice():
    x = torch.randn(64, 64).half()
    out = torch.full((64, 32), float("nan")).half()
    interpret(m64_roundtrip, (1,), (x, out), arch="sm_100a")
    assert torch.equal(out, x[:, 32:])


def _compile(kernel, **constexprs):
    spec = specialization_from_types(kernel, {}, constexprs)
    return compile_kernel(kernel, spec, arch="sm_100a", num_warps=4, stages=("ir", "ir.opt", "cuda", "cubin"))


@needs_nvrtc
@pytest.mark.parametrize("a_in_tmem", [False, True], ids=["a-smem", "a-tmem"])
def test_m64_gemm_compiles_for_sm100a(a_in_tmem):
    compiled = _compile(m64_gemm, A_IN_TMEM=a_in_tmem)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    cuda = compiled.asm["cuda"]
    # the accumulator's 64 columns: 32 per thread, the second half 32 columns further
    assert "tlx_tcgen05_st_16x32bx2_x32<32>" in cuda and "tlx_tcgen05_ld_16x32bx2_x32<32>" in cuda
    assert "tcgen05.ld.sync.aligned.16x32bx2.x32.b32" in cuda
    assert "32x32b" not in cuda.split("extern \"C\"")[-1]      # no 128-row access in the kernel body
    # instruction descriptor: bf16 inputs, f32 D, B N-major (bit 16), N = 64 (>> 3 = 8 at bit 17),
    # M = 64 (>> 4 = 4 at bit 24)
    idesc = (1 << 4) | (1 << 7) | (1 << 10) | (1 << 16) | (8 << 17) | (4 << 24)
    assert f"{idesc:#010x}u" in cuda
    assert compiled.metadata["spills_bytes"] == 0, compiled.metadata.get("ptxas_log")


@needs_nvrtc
def test_m64_packed_fp16_compiles_for_sm100a():
    compiled = _compile(m64_roundtrip)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    # 64 fp16 = 32 columns per row: 16 per thread; the slice's 16 columns: 8 per thread
    assert "tlx_tcgen05_st_16x32bx2_x16<16>" in compiled.asm["cuda"]
    assert "tlx_tcgen05_ld_16x32bx2_x8<8>" in compiled.asm["cuda"]


# -- refusals ------------------------------------------------------------------------------------
@tlxc.kernel
def odd_columns(x_ptr: tl.pointer_type(tl.float32)):
    tlx.local_alloc((64, 1), tl.float32, 1, storage=tlx.storage_kind.tmem)  # odd columns


@tlxc.kernel
def mixed_rows(x_ptr: tl.pointer_type(tl.float32)):
    qk = tlx.local_alloc((128, 64), tl.float32, 1, storage=tlx.storage_kind.tmem)
    tlx.local_alloc((64, 64), tl.float32, 1, storage=tlx.storage_kind.tmem, reuse=qk)  # mixed rows


@tlxc.kernel
def m128_n8(x_ptr: tl.pointer_type(tl.float32), M: tl.constexpr = 128):
    a = tlx.local_alloc((M, 16), tl.float16, 1)
    b = tlx.local_alloc((16, 8), tl.float16, 1)
    acc = tlx.local_alloc((M, 8), tl.float32, 1, storage=tlx.storage_kind.tmem)
    tlx.async_dot(a[0], b[0], acc[0], use_acc=False)  # n8


def _frontend_error(kernel, **constexprs):
    spec = specialization_from_types(kernel, {}, constexprs)
    with pytest.raises(TlxcError) as info:
        compile_kernel(kernel, spec, arch="sm_100a", num_warps=4, stages=("ir",))
    return info.value


@pytest.mark.parametrize("kernel, marker, text", [
    (odd_columns, "# odd columns", "an even number of 32-bit columns"),
    (mixed_rows, "# mixed rows", "aliases in tensor memory must have the same number of rows"),
    (m128_n8, "# n8", "N must be a multiple of 16 between 16 and 256 for M = 128"),
])
def test_refusals_name_their_line(kernel, marker, text):
    err = _frontend_error(kernel)
    lines = open(__file__).read().splitlines()
    line = next(n for n, s in enumerate(lines, 1) if s.rstrip().endswith(marker))
    assert text in str(err) and err.loc is not None and err.loc.line == line, str(err)


def test_m64_accepts_n8():
    _compile_ir = specialization_from_types(m128_n8, {}, {"M": 64})
    compile_kernel(m128_n8, _compile_ir, arch="sm_100a", num_warps=4, stages=("ir",))
