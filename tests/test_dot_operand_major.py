"""tl.dot with transposed operands on sm_90a (issues 19, 22): A K-major or M-major (stride_am == 1)
x B N-major or K-major (stride_bk == 1, ``b = w.t()``).  Each of the four cases reads both operands
with 16-byte cp.async along their contiguous axis (infer-layouts orders the load layout by the
pointers' contiguity), stores them in a swizzled buffer wgmma reads directly (a transposed
operand's buffer is [K, M] / [N, K], read through local_trans: imm-trans-a = 1 for M-major A,
imm-trans-b = 0 for K-major B), and does not spill at Triton's usual tiles; the interpreter runs
the rewritten IR to torch's numbers on shapes that are not tile multiples."""
from __future__ import annotations

import copy
import re

import pytest

torch = pytest.importorskip("torch")
import kernels_dot_major as KM
import kernels_dot_wgmma as K

from tlxc.check.findings import FAILING
from tlxc.compiler import check_function
from tlxc.frontend.specialize import parse_signature, specialization_from_types
from tlxc.interpreter.executor import KernelRunner
from tlxc.interpreter.launch import _program_ids, prepare_launch
from tlxc.ir import layouts as L
from tlxc.options import CompileOptions
from tlxc.passes.canonicalize import Canonicalize
from tlxc.passes.dot_wgmma import LowerDotToWgmma
from tlxc.passes.manager import PassManager
from tlxc.passes.pipeline import PipelineLoads

# (A major, B major) -> the wgmma's <imm-trans-a, imm-trans-b>
CASES = {("K", "N"): (0, 1), ("K", "K"): (0, 0), ("M", "N"): (1, 1), ("M", "K"): (1, 0)}
TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _signature(dtype: str, a_major: str, b_major: str) -> str:
    a = "stride_am=i32:16,stride_ak=i32:1" if a_major == "K" else "stride_am=i32:1,stride_ak=i32:16"
    b = "stride_bk=i32:16,stride_bn=i32:1" if b_major == "N" else "stride_bk=i32:1,stride_bn=i32:16"
    return (f"a_ptr=*{dtype}:16,b_ptr=*{dtype}:16,c_ptr=*{dtype}:16,M=i32:16,N=i32:16,K=i32:16,{a},{b},"
            f"stride_cm=i32:16")


def _wgmma_calls(cuda: str, dtype: str) -> set[tuple[int, int]]:
    name = {"fp16": "f16", "bf16": "bf16"}[dtype]
    return {(int(x), int(y)) for x, y in re.findall(rf"_f32_{name}<(\d), (\d)>\(&", cuda)}


def _calls(cuda: str, helper: str) -> int:
    """Call sites of ``helper`` (its definition line excluded)."""
    return sum(1 for line in cuda.splitlines() if f"{helper}(" in line and "void " + helper not in line)


@pytest.mark.parametrize("bn,num_warps", [(256, 8), (128, 4)])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("a_major,b_major", list(CASES))
def test_both_operands_16_byte_cp_async_right_transpose_bits_no_spills(a_major, b_major, dtype, bn, num_warps):
    compiled = K.tile_matmul.compile(_signature(dtype, a_major, b_major), {"BM": 128, "BN": bn, "BK": 64},
                                     num_warps=num_warps, stages=("cuda", "ptx", "cubin"))
    cuda = compiled.asm["cuda"]
    assert f"A {a_major}-major, B {b_major}-major" in cuda
    assert _wgmma_calls(cuda, dtype) == {CASES[a_major, b_major]}
    # 2 operands x (2 prologue stages + the refill in the loop): each one 16-byte cp.async per vector
    assert _calls(cuda, "tlx_cp_async_16") == 6
    assert not re.search(r"tlx_cp_async_(4|8)\(", cuda)
    assert "cp.async.cg.shared.global" in compiled.asm["ptx"]
    assert compiled.metadata.get("spills_bytes", 0) == 0, compiled.asm.get("stats")


@pytest.mark.parametrize("a_major,b_major", [("M", "K"), ("K", "K")])
def test_unpipelined_loop_loads_and_stores_16_bytes(a_major, b_major):
    """num_stages=1: each tile is a 16-byte ld.global along its contiguous axis, a 16-byte st.shared
    into the (transposed) buffer, then the wgmma."""
    compiled = K.tile_matmul.compile(_signature("bf16", a_major, b_major), {"BM": 128, "BN": 128, "BK": 64,
                                                                           "STAGES": 1},
                                     num_warps=4, stages=("cuda", "cubin"))
    cuda = compiled.asm["cuda"]
    assert "tlx_cp_async_16" not in cuda
    assert _calls(cuda, "tlx_ld_global_b128") == 2 and _calls(cuda, "tlx_st_shared_b128") == 2
    assert _wgmma_calls(cuda, "bf16") == {CASES[a_major, b_major]}
    assert compiled.metadata.get("spills_bytes", 0) == 0, compiled.asm.get("stats")


@pytest.mark.parametrize("a_major,b_major", list(CASES))
def test_block_pointers_with_column_major_order(a_major, b_major):
    """The same through tl.make_block_ptr(order=(0, 1)) for a column-major operand."""
    sig = _signature("bf16", a_major, b_major)
    meta = {"BM": 128, "BN": 128, "BK": 64, "A_ORDER": (1, 0) if a_major == "K" else (0, 1),
            "B_ORDER": (1, 0) if b_major == "N" else (0, 1)}
    cuda = KM.block_ptr_matmul_major.compile(sig, meta, num_warps=4, stages=("cuda",)).asm["cuda"]
    assert _wgmma_calls(cuda, "bf16") == {CASES[a_major, b_major]}
    assert _calls(cuda, "tlx_cp_async_16") == 6


def test_checker_is_clean_on_transposed_operands():
    spec = specialization_from_types(K.tile_matmul, parse_signature(_signature("bf16", "M", "K")),
                                     {"BM": 128, "BN": 256, "BK": 64})
    assert [f for f in check_function(K.tile_matmul, spec, num_warps=8) if f.severity in FAILING] == []


def test_mma_sync_targets_still_compile_a_k_major_b():
    cuda = K.tile_matmul.compile(_signature("fp16", "M", "K"), {"BM": 64, "BN": 64, "BK": 32}, arch="sm_80",
                                 num_warps=4, stages=("cuda",)).asm["cuda"]
    assert "mma.sync" in cuda or "tlx_mma" in cuda


def test_default_blocked_follows_the_given_order():
    layout = L.default_blocked((64, 256), 8, 16, order=(0, 1))
    assert layout.contiguous_elements_per_thread(0) == 8          # a 16-byte run down dim 0
    assert layout.contiguous_elements_per_thread(1) == 1
    assert L.default_blocked((64, 256), 8, 16) == L.default_blocked((64, 256), 8, 16, order=(1, 0))
    with pytest.raises(ValueError):
        L.default_blocked((64, 256), 8, 16, order=(0, 0))


# -- interpreter ---------------------------------------------------------------------------------

def _operands(m, n, k, dtype, a_major, b_major, gen):
    a = torch.randn(m, k, generator=gen).to(dtype)
    b = torch.randn(k, n, generator=gen).to(dtype)
    if a_major == "M":
        a = a.t().contiguous().t()           # same values, column-major (stride_am == 1)
    if b_major == "K":
        b = b.t().contiguous().t()           # b = w.t() of a row-major [N, K] weight
    return a, b


def _interpret(kfn, grid, args, meta, *, rewrite: bool, num_warps=4):
    runner, grid3, memory, values = prepare_launch(kfn, grid, args, meta, num_warps=num_warps)
    if rewrite:
        passes = PassManager([Canonicalize(), LowerDotToWgmma(), PipelineLoads(), Canonicalize()])
        runner = KernelRunner(passes.run(copy.deepcopy(runner.module),
                                         CompileOptions(num_warps=num_warps, arch="sm_90a", num_stages=None)))
    for pid in _program_ids(grid3, (1, 1, 1)):
        runner.run_program(pid, grid3, memory, values, None, None)
    return str(runner.module)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("a_major,b_major", list(CASES))
@pytest.mark.parametrize("stages", [None, 1])
def test_interpreter_matches_torch_on_odd_shapes(a_major, b_major, dtype, stages):
    # none a multiple of the 64 x 32 x 16 tile; M a multiple of 16 so that the rows of an M-major A,
    # wrapped % M, are known contiguous (with M = 100 A stays [M, K]: correct, not vectorized)
    m, n, k = 112, 72, 75
    gen = torch.Generator().manual_seed(hash((a_major, b_major, dtype, stages)) % 2**31)
    a, b = _operands(m, n, k, TORCH[dtype], a_major, b_major, gen)
    assert (a.stride(0) == 1) == (a_major == "M") and (b.stride(0) == 1) == (b_major == "K")
    outs = []
    for rewrite in (False, True):
        c = torch.full((m, n), float("nan"), dtype=TORCH[dtype])
        text = _interpret(K.tile_matmul, (2, 3), (a, b, c, m, n, k, *a.stride(), *b.stride(), c.stride(0)),
                          {"BM": 64, "BN": 32, "BK": 16, "STAGES": stages}, rewrite=rewrite)
        outs.append(c)
    assert "tl.dot" not in text and ("tlx.async_load" in text) == (stages is None)
    assert text.count("tlx.local_trans") > 0 if "M" == a_major or "K" == b_major else "tlx.local_trans" not in text
    assert torch.equal(outs[0], outs[1])
    ref = a.double() @ b.double()
    assert not outs[1].isnan().any()
    err = ((outs[1].double() - ref).norm() / ref.norm()).item()
    assert err < (4e-3 if dtype == "bf16" else 1e-3), err


@pytest.mark.parametrize("a_major,b_major", [("M", "K"), ("K", "K")])
def test_interpreter_block_pointers_match_torch(a_major, b_major):
    m, n, k = 70, 40, 50
    gen = torch.Generator().manual_seed(7)
    a, b = _operands(m, n, k, torch.bfloat16, a_major, b_major, gen)
    c = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    meta = {"BM": 64, "BN": 32, "BK": 16, "A_ORDER": (1, 0) if a_major == "K" else (0, 1),
                "B_ORDER": (1, 0) if b_major == "N" else (0, 1)}
    text = _interpret(KM.block_ptr_matmul_major, (2, 2), (a, b, c, m, n, k, *a.stride(), *b.stride(), c.stride(0)),
                      meta, rewrite=True)
    assert "tlx.local_trans" in text and "tlx.async_load" in text
    ref = a.double() @ b.double()
    assert ((c.double() - ref).norm() / ref.norm()).item() < 4e-3


def test_trans_of_a_row_major_load_is_a_k_major_b():
    """tl.dot(q, tl.trans(k)): the transposed registers go to an [N, K] buffer in 16-byte stores."""
    sig = "q_ptr=*bf16:16,k_ptr=*bf16:16,o_ptr=*fp32:16,M=i32,N=i32,stride_q=i32:16,stride_k=i32:16"
    compiled = KM.dot_trans_rows.compile(sig, {"BM": 128, "BN": 128, "D": 64}, num_warps=4, stages=("cuda", "cubin"))
    cuda = compiled.asm["cuda"]
    assert "A K-major, B K-major" in cuda and _wgmma_calls(cuda, "bf16") == {(0, 0)}
    assert _calls(cuda, "tlx_st_shared_b128") == 2
    assert compiled.metadata.get("spills_bytes", 0) == 0, compiled.asm.get("stats")


def test_trans_of_a_row_major_load_interpreter():
    m, n, d = 70, 90, 32
    q = torch.randn(m, d).to(torch.bfloat16)
    k = torch.randn(n, d).to(torch.bfloat16)
    out = torch.full((m, n), float("nan"))
    text = _interpret(KM.dot_trans_rows, (2, 2), (q, k, out, m, n, d, d), {"BM": 64, "BN": 64, "D": d}, rewrite=True)
    assert "tlx.local_trans" in text
    ref = q.double() @ k.double().t()
    assert ((out.double() - ref).norm() / ref.norm()).item() < 1e-5
