"""The orderings tlxc inserts around asynchronous shared-memory use, as Triton does for
TLX (codegen_c/shared_order.py; issue 17 items 12 and 13): proxy fences between
local_store and an async-proxy reader (wgmma, TMA store), the fence and barrier after a
cp.async wait, the barrier after a wgmma wait in a multi-warpgroup task."""
from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
import kernels_pipelined as K

import tlxc
from tlxc.check.findings import FAILING, INFO
from tlxc.compiler import check_function
from tlxc.frontend.specialize import parse_signature, specialization_from_types

FENCE = "tlx_fence_proxy_async_shared_cta();"
GEMM_SIG = ("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp16,M=i32,N=i32:16,K=i32:16,stride_am=i32:16,stride_bk=i32:16,"
            "stride_cm=i32:16")


def _body(cuda: str) -> str:
    """The kernel function (not the helper definitions)."""
    return cuda[cuda.index("__global__"):]


def _gemm_cuda(num_warps: int, bm: int = 128) -> str:
    meta = {"BM": bm, "BN": 128, "BK": 64, "STAGES": 3}
    return _body(K.cp_async_wgmma_gemm.compile(GEMM_SIG, meta, num_warps=num_warps, stages=("cuda",)).asm["cuda"])


def _statements(cuda: str) -> list[str]:
    return [line.strip() for line in cuda.splitlines() if line.strip() and not line.strip().startswith("//")]


def test_cp_async_wait_is_fenced_and_synced_before_the_wgmma():
    lines = _statements(_gemm_cuda(num_warps=8))
    wait = next(i for i, line in enumerate(lines) if line.startswith("tlx_cp_async_wait_group<1>"))
    assert lines[wait + 1].startswith(FENCE), lines[wait:wait + 3]
    assert lines[wait + 2].startswith("__syncthreads();"), lines[wait:wait + 3]
    wgmma = next(i for i, line in enumerate(lines) if line.startswith("tlx_wgmma_fence();"))
    assert wait < wgmma


def test_two_warpgroups_sync_after_the_wgmma_wait_before_the_refill():
    lines = _statements(_gemm_cuda(num_warps=8))
    wait = next(i for i, line in enumerate(lines) if line.startswith("tlx_wgmma_wait_group<1,"))
    assert lines[wait + 1].startswith("__syncthreads();")
    refill = next(i for i in range(wait, len(lines)) if lines[i].startswith("tlx_cp_async_16("))
    assert wait < refill


def test_one_warpgroup_needs_no_sync_after_the_wgmma_wait():
    lines = _statements(_gemm_cuda(num_warps=4, bm=64))
    wait = next(i for i, line in enumerate(lines) if line.startswith("tlx_wgmma_wait_group<1,"))
    assert not lines[wait + 1].startswith("__syncthreads();")


def test_cp_async_copies_are_16_bytes():
    """The B tile's columns are ``(... + arange) % N``: the remainder keeps runs of 16 columns
    contiguous (N % 16 == 0), so both operands move in 16-byte cp.async copies, none by the
    synchronous fallback."""
    cuda = _gemm_cuda(num_warps=8)
    assert "tlx_cp_async_4(" not in cuda and "tlx_cp_async_8(" not in cuda
    assert not re.search(r"\*\(reinterpret_cast<unsigned short\*>\(.*\)\) = \(", cuda)
    assert cuda.count("tlx_cp_async_16(") == 4          # A and B, prologue and steady state


def test_pipelined_gemm_compiles_to_cubin():
    meta = {"BM": 128, "BN": 128, "BK": 64, "STAGES": 3}
    compiled = K.cp_async_wgmma_gemm.compile(GEMM_SIG, meta, num_warps=8, stages=("cuda", "cubin"))
    assert compiled.asm["cubin"]


@pytest.mark.parametrize("fence", [False, True])
def test_local_store_then_wgmma_gets_a_fence_and_a_barrier(fence):
    cuda = _body(K.stored_operand_wgmma.compile("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32",
                                                {"BM": 64, "BN": 64, "BK": 64, "FENCE": fence},
                                                stages=("cuda", "cubin")).asm["cuda"])
    lines = _statements(cuda)
    wgmma = next(i for i, line in enumerate(lines) if line.startswith("tlx_wgmma_fence();"))
    last_st = max(i for i, line in enumerate(lines[:wgmma]) if "tlx_st_shared" in line)
    between = [line.split("(")[0] for line in lines[last_st + 1:wgmma]
               if line.startswith((FENCE, "__syncthreads();"))]
    assert between == ["tlx_fence_proxy_async_shared_cta", "__syncthreads"], between
    assert cuda.count(FENCE) == 1                       # the user's, or the inserted one


@pytest.mark.parametrize("fence", [False, True])
def test_local_store_then_tma_store_gets_one_fence(fence):
    c = torch.zeros(64, 64, dtype=torch.float16)
    desc = tlxc.TensorDescriptor.from_tensor(c, [64, 64])
    from tlxc.compiler import compile_kernel
    from tlxc.frontend.specialize import specialization_from_args
    spec = specialization_from_args(K.stored_tile_tma_store, {"c_desc": desc, "BM": 64, "BN": 64, "FENCE": fence})
    cuda = _body(compile_kernel(K.stored_tile_tma_store, spec, arch="sm_90a", stages=("cuda", "cubin")).asm["cuda"])
    lines = _statements(cuda)
    store = next(i for i, line in enumerate(lines) if "tlx_tma_store_2d(" in line)
    fence_at = max(i for i, line in enumerate(lines[:store]) if line.startswith(FENCE))
    last_st = max(i for i, line in enumerate(lines[:store]) if "tlx_st_shared" in line)
    assert last_st < fence_at < store
    assert cuda.count(FENCE) == 1
    # the checker only notes where the fence went (info: tlxc check --verbose), it does not fail
    from tlxc.check import check_kernel
    from tlxc.compiler import frontend
    module = frontend(K.stored_tile_tma_store, spec)
    findings = [f for kernel in module.kernels for f in check_kernel(kernel)]
    assert not [f for f in findings if f.severity in FAILING]
    notes = [f for f in findings if f.check == "tma.missing-fence"]
    if fence:
        assert notes == []
    else:
        assert len(notes) == 1 and notes[0].severity == INFO and "tlxc inserts the proxy fence" in notes[0].message


def test_no_proxy_fence_without_async_proxy_readers():
    """A cp.async ring read by local_load only (no wgmma / TMA store): barrier, no proxy fence."""
    import kernels_ws as W
    cuda = _body(W.cp_async_pipeline.compile("x_ptr=*fp32,out_ptr=*fp32,n_cols=i32",
                                             {"BLOCK": 128, "NUM_STAGES": 3, "PENDING": 2},
                                             stages=("cuda",)).asm["cuda"])
    assert FENCE not in cuda
    lines = _statements(cuda)
    wait = next(i for i, line in enumerate(lines) if line.startswith("tlx_cp_async_wait_group<2>"))
    assert lines[wait + 1].startswith("__syncthreads();")


def test_pipelined_gemm_interpreter_matches_torch():
    gen = torch.Generator().manual_seed(17)
    m, n, k = 70, 48, 104                       # none a multiple of its tile; K = 3 tiles + 8
    a = torch.randn(m, k, generator=gen).half()
    b = torch.randn(k, n, generator=gen).half()
    c = torch.full((m, n), float("nan"), dtype=torch.float16)
    tlxc.interpret(K.cp_async_wgmma_gemm)[(2, 1)](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0),
                                                  BM=64, BN=64, BK=32, STAGES=3, num_warps=4)
    torch.testing.assert_close(c.float(), a.double().matmul(b.double()).float(), rtol=2e-2, atol=2e-2)


def test_checker_accepts_the_pipelined_gemm():
    spec = specialization_from_types(K.cp_async_wgmma_gemm, parse_signature(GEMM_SIG),
                                     {"BM": 128, "BN": 128, "BK": 64, "STAGES": 3}, {})
    assert [f for f in check_function(K.cp_async_wgmma_gemm, spec, num_warps=8) if f.severity in FAILING] == []
