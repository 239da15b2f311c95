"""A tl.dot loop the pipeliner leaves alone says so: ``perf_warnings`` (``tlxc compile --emit stats``)
names the loop's line and the reason, so a user's `if` or nonzero `other` is not a silent 2x."""
from __future__ import annotations

import pytest

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel, perf_warnings
from tlxc.frontend.specialize import parse_signature, specialization_from_types

torch = pytest.importorskip("torch")

SIG = "a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32,K=i32,stride_am=i32:16,stride_bk=i32:16,stride_cm=i32:16"


@tlxc.kernel
def k_loop(a_ptr, b_ptr, c_ptr, K, stride_am, stride_bk, stride_cm, OTHER: tl.constexpr, BRANCH: tl.constexpr,
           BM: tl.constexpr = 64, BN: tl.constexpr = 64, BK: tl.constexpr = 32):
    rows, cols, ks = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :]
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k * BK, other=OTHER)
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        if BRANCH:
            if k % 2 == 0:                  # the same step either way, but under an if
                b_ptrs += BK * stride_bk
            else:
                b_ptrs += BK * stride_bk
        else:
            b_ptrs += BK * stride_bk
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], acc)


@tlxc.kernel
def tiles_then_k(a_ptr, b_ptr, c_ptr, K, stride_am, stride_bk, stride_cm, BM: tl.constexpr = 64,
                 BN: tl.constexpr = 64, BK: tl.constexpr = 32):
    rows, cols, ks = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    for tile in range(0, 4):                # an outer loop around a pipelined K loop: no remark for it
        a_ptrs = a_ptr + (tile * BM + rows[:, None]) * stride_am + ks[None, :]
        b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :]
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            a = tl.load(a_ptrs, mask=ks[None, :] < K - k * BK, other=0.0)
            b = tl.load(b_ptrs, mask=ks[:, None] < K - k * BK, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BK
            b_ptrs += BK * stride_bk
        tl.store(c_ptr + (tile * BM + rows[:, None]) * stride_cm + cols[None, :], acc)


@tlxc.kernel
def resident_a(a_ptr, b_ptr, c_ptr, K, stride_am, stride_bk, stride_cm, BRANCH: tl.constexpr,
               BM: tl.constexpr = 64, BN: tl.constexpr = 64, BK: tl.constexpr = 32):
    rows, cols, ks = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :])         # read once: attention's q
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for j in range(0, K):
        b = tl.load(b_ptrs)
        s = tl.dot(a, b)
        if BRANCH == 1:
            if j == K - 1:                  # a value computed under an if: the ring stays
                s = s * 0.5
        if BRANCH == 2:
            for _ in range(0, 1):           # a nested loop: not pipelined, and said so
                s = s * 0.5
        acc += s
        b_ptrs += BN
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], acc)


def _compile(kfn, **constexprs):
    spec = specialization_from_types(kfn, parse_signature(SIG), constexprs)
    return compile_kernel(kfn, spec, arch="sm_90a", num_warps=4, stages=("ir", "ir.opt"))


def _line_of(kfn, text: str) -> int:
    import inspect
    lines, first = inspect.getsourcelines(kfn.fn if hasattr(kfn, "fn") else kfn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_a_pipelined_loop_has_no_remark():
    compiled = _compile(k_loop, OTHER=0.0, BRANCH=False)
    assert "tlx.async_load" in compiled.asm["ir.opt"]
    assert perf_warnings(compiled.metadata) == []
    assert perf_warnings(_compile(tiles_then_k).metadata) == []


def test_a_nonzero_other_is_named_at_its_line():
    compiled = _compile(k_loop, OTHER=1.0, BRANCH=False)
    [remark] = perf_warnings(compiled.metadata)
    loop, load = _line_of(k_loop, "for k in range"), _line_of(k_loop, "other=OTHER")
    assert f"loop at test_pipeline_remarks.py:{loop} is software-pipelined only in part (num_stages=3)" in remark
    assert f"tl.load at test_pipeline_remarks.py:{load} has a nonzero `other`" in remark


def test_a_pointer_stepped_under_an_if_is_pipelined_quietly():
    compiled = _compile(k_loop, OTHER=0.0, BRANCH=1)         # run-ahead state: the if is pure
    assert compiled.asm["ir.opt"].count("tlx.async_load") >= 4 and perf_warnings(compiled.metadata) == []


def test_an_if_that_only_computes_values_keeps_the_ring():
    for branch in (False, True):
        compiled = _compile(resident_a, BRANCH=branch)
        assert "tlx.async_load" in compiled.asm["ir.opt"] and perf_warnings(compiled.metadata) == []


def test_a_nested_loop_in_a_loop_with_a_resident_operand_is_named():
    [remark] = perf_warnings(_compile(resident_a, BRANCH=2).metadata)
    loop, inner = _line_of(resident_a, "for j in range"), _line_of(resident_a, "for _ in range")
    assert f"loop at test_pipeline_remarks.py:{loop} is not software-pipelined" in remark, remark
    assert f"scf.for at test_pipeline_remarks.py:{inner}" in remark, remark


def _resident_reference(a, b, n):
    blocks = [a.double() @ b.double()[:, j * 64:(j + 1) * 64] for j in range(n)]
    blocks[-1] = blocks[-1] * 0.5
    return sum(blocks)


def _resident_inputs(n, device):
    gen = torch.Generator().manual_seed(n)
    a = (torch.randn(64, 32, generator=gen) * 0.3).half().to(device)
    b = (torch.randn(32, 64 * n, generator=gen) * 0.3).half().to(device)
    c = torch.full((64, 64), float("nan"), device=device)
    return a, b, c


def test_an_if_in_a_loop_with_a_resident_operand_runs_on_the_interpreter():
    n = 3
    a, b, c = _resident_inputs(n, "cpu")
    tlxc.interpret(resident_a)[(1,)](a, b, c, n, a.stride(0), b.stride(0), c.stride(0), BRANCH=1)
    ref = _resident_reference(a, b, n)
    assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("n, num_stages", [(1, 2), (3, 3), (17, 4)])
def test_an_if_in_a_loop_with_a_resident_operand_matches_float64_on_the_gpu(n, num_stages):
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    a, b, c = _resident_inputs(n, "cuda")
    resident_a[(1,)](a, b, c, n, a.stride(0), b.stride(0), c.stride(0), BRANCH=1, num_stages=num_stages)
    torch.cuda.synchronize()
    ref = _resident_reference(a.cpu(), b.cpu(), n)
    assert not c.isnan().any()
    assert ((c.cpu().double() - ref).norm() / ref.norm()).item() < 1e-3


@tlxc.jit
def desc_loop(a_desc, b_desc, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl._experimental_descriptor_load(a_desc, [0, k], [BM, BK], tl.float16)
        b = tl._experimental_descriptor_load(b_desc, [k, 0], [BK, BN], tl.float16)
        acc += tl.dot(a, b)
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(c_ptr + offs, acc)


def test_a_loop_of_descriptor_loads_is_named_as_tma_copies_at_the_users_line():
    """A plain Triton loop over host-descriptor loads (tutorials 06 and 09 of Triton 3.2) holds no
    TLX op the user wrote: the remark names the TMA copy and the line of the load, not the
    barrier op it lowered to."""
    sig = "a_desc=tensordesc<fp16[64,64]>,b_desc=tensordesc<fp16[64,64]>,c_ptr=*fp32,K=i32"
    spec = specialization_from_types(desc_loop, parse_signature(sig), {"BM": 64, "BN": 64, "BK": 64})
    compiled = compile_kernel(desc_loop, spec, arch="sm_90a", num_warps=4, stages=("ir", "ir.opt"))
    [remark] = perf_warnings(compiled.metadata)
    load = _line_of(desc_loop, "a = tl._experimental_descriptor_load")
    assert "the body holds a TMA copy (a tensor descriptor's load or store" in remark, remark
    assert f"at test_pipeline_remarks.py:{load}" in remark, remark
    assert "barrier_expect_bytes" not in remark
