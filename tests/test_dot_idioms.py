"""Triton idioms the sm_90a pipeline reads as Triton does (issue 19, tutorials 02 and 08):
a statement-form ``tl.multiple_of`` on a loop-carried pointer describes that pointer
(axis_info, canonicalize keeps it, pipeline-loads' prologue copies inherit it), with
``acc += tl.dot(a, b)`` (fold-dot-add) in the same loop; and a repeated ``kernel.warmup``
is a cache hit."""
from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
import kernels_dot_idioms as K

import tlxc.interpreter.launch as IL
from tlxc.compiler import default_pipeline
from tlxc.errors import LaunchError
from tlxc.interpreter.executor import KernelRunner
from tlxc.interpreter.launch import _program_ids, prepare_launch
from tlxc.options import CompileOptions
from tlxc.passes.axis_info import AxisAnalysis
from tlxc.passes.canonicalize import Canonicalize
from tlxc.passes.dot_operands import FoldDotAdd
from tlxc.passes.dot_wgmma import LowerDotToWgmma
from tlxc.passes.manager import PassManager
from tlxc.passes.pipeline import PipelineLoads

TABLE_SIG = "addr_table=*i64,dims=*i32,c_ptr=*fp16,M=i32,N=i32,K=i32:16,stride_cm=i32"


def _table_inputs(m, n, k, seed):
    g = torch.Generator().manual_seed(seed)
    lda, ldb = (k + 7) // 8 * 8 + 8, (n + 127) // 128 * 128      # 16-byte rows: what HINT promises
    a_store = torch.randn(m, lda, generator=g).half()
    b_store = torch.randn(k, ldb, generator=g).half()
    table = torch.tensor([a_store.data_ptr(), b_store.data_ptr()], dtype=torch.int64)
    dims = torch.tensor([lda, ldb], dtype=torch.int32)
    return a_store[:, :k], b_store[:, :n], table, dims, (a_store, b_store)


def _run_table(m, n, k, bm, bn, bk, hint, fold, rewrite, seed=0):
    a, b, table, dims, keep = _table_inputs(m, n, k, seed)
    c = torch.full((m, n), float("nan"), dtype=torch.float16)
    grid = ((m + bm - 1) // bm, (n + bn - 1) // bn)
    runner, grid3, memory, values = prepare_launch(
        K.table_matmul, grid, (table, dims, c, m, n, k, c.stride(0)),
        {"BM": bm, "BN": bn, "BK": bk, "HINT": hint, "FOLD": fold}, num_warps=4)
    if rewrite:
        passes = PassManager([Canonicalize(), FoldDotAdd(), LowerDotToWgmma(), PipelineLoads(), Canonicalize()])
        runner = KernelRunner(passes.run(copy.deepcopy(runner.module),
                                         CompileOptions(num_warps=4, arch="sm_90a", num_stages=3)))
    for pid in _program_ids(grid3, (1, 1, 1)):
        runner.run_program(pid, grid3, memory, values, None, None)
    del keep
    return a, b, c, runner.module


def _canonical(kfn, args, meta):
    runner, *_ = prepare_launch(kfn, (1, 1), args, meta, num_warps=4)
    module = copy.deepcopy(runner.module)
    Canonicalize().run(module, CompileOptions(num_warps=4, arch="sm_90a"))
    return module


def _ops(module, name):
    return [op for op in module.kernels[0].walk() if op.name == name]


# -- the sm_90a rewrite on the interpreter ------------------------------------------------------
@pytest.mark.parametrize("m,n,k,hint,fold", [(70, 40, 50, True, True), (64, 32, 130, False, True),
                                             (33, 72, 16, True, False), (100, 9, 77, False, False)])
def test_interpreter_same_result_after_the_sm90_rewrite(m, n, k, hint, fold):
    before = _run_table(m, n, k, 64, 32, 16, hint, fold, rewrite=False, seed=m + n + k)
    a, b, after, module = _run_table(m, n, k, 64, 32, 16, hint, fold, rewrite=True, seed=m + n + k)
    assert "tlx.async_load" in str(module) and "tl.dot" not in str(module)    # the rewritten IR ran
    ref = a.double() @ b.double()
    assert not torch.isnan(after).any()
    assert ((after.double() - ref).norm() / ref.norm()).item() < 2e-3
    assert ((before[2].double() - ref).norm() / ref.norm()).item() < 2e-3
    if not fold:
        assert torch.equal(before[2], after)            # same additions in the same order


# -- statement-form hints -----------------------------------------------------------------------
@pytest.mark.parametrize("hint", [True, False])
def test_statement_hint_describes_the_loop_carried_pointer(hint):
    _a, _b, table, dims, _keep = _table_inputs(64, 64, 64, 2)
    c = torch.empty(64, 64, dtype=torch.float16)
    module = _canonical(K.table_matmul, (table, dims, c, 64, 64, 64, 64),
                        {"BM": 64, "BN": 64, "BK": 32, "HINT": hint, "FOLD": True})
    axis = AxisAnalysis(module.kernels[0])
    loads = [op for op in _ops(module, "tl.load") if getattr(op.result.type, "shape", None) == (64, 32)]
    (a_load,) = loads
    info = axis.info(a_load.operands[0])
    assert info.contiguity[1] == 32
    assert (info.divisibility == (16, 16)) == hint
    assert len(_ops(module, "tl.hint")) == (2 if hint else 0)           # kept although unused


def _compile_table(hint):
    return K.table_matmul.compile(TABLE_SIG, {"BM": 128, "BN": 128, "BK": 64, "HINT": hint, "FOLD": True},
                                  arch="sm_90a", num_warps=4)


def test_grouped_gemm_shape_gets_16_byte_copies_and_no_spill():
    """Tutorial 08's K loop: with its statement hints the cp.async ring copies 16 bytes at a
    time (the prologue's copies too) and the one accumulator fits; without, 2-byte copies."""
    hinted = _compile_table(True)
    cuda = hinted.asm["cuda"]
    copies = [line for line in cuda.splitlines() if "tlx_cp_async_16(" in line and "static" not in line]
    assert len(copies) == 6                                         # A and B: 2 prologue stages + the refill
    assert hinted.metadata["spills_bytes"] == 0
    plain = _compile_table(False)
    assert "tlx_cp_async_16(reinterpret" not in plain.asm["cuda"]


# -- warmup ---------------------------------------------------------------------------------------
def _softmax_args(rows, cols, seed=3):
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed))
    y = torch.full_like(x, float("nan"))
    return x, y


def test_repeated_warmup_is_a_cache_hit(monkeypatch):
    x, y = _softmax_args(37, 181)
    args = (y, x, x.stride(0), y.stride(0), 37, 181)
    first = K.row_softmax.warmup(*args, BLOCK=256, STAGES=3, num_warps=8, grid=(1,))
    assert first.n_regs > 0 and first.metadata.shared >= 0 and first.metadata.num_warps == 8

    def refuse(*a, **k):
        raise AssertionError("a repeated warmup specialized again")
    monkeypatch.setattr(IL, "specialize", refuse)
    x2, y2 = _softmax_args(37, 181, seed=4)                 # other tensors, same key
    assert K.row_softmax.warmup(y2, x2, x2.stride(0), y2.stride(0), 37, 181, BLOCK=256, STAGES=3,
                                num_warps=8, grid=(1,)) is first
    monkeypatch.undo()
    other = K.row_softmax.warmup(*args, BLOCK=512, STAGES=3, num_warps=8, grid=(1,))
    assert other is not first and other.constexprs["BLOCK"] == 512
    assert K.row_softmax.warmup(*args, BLOCK=256, STAGES=3, num_warps=4, grid=(1,)) is not first
    K.row_softmax.cache.clear()
    assert K.row_softmax.warmup(*args, BLOCK=256, STAGES=3, num_warps=8, grid=(1,)) is not first
    assert all(not hasattr(p, "constexprs") for p in K.row_softmax.compiled_kernels())


@pytest.mark.parametrize("rows,cols,programs", [(37, 181, 5), (8, 256, 8), (13, 1, 20)])
def test_warm_handle_launch_computes_softmax(rows, cols, programs):
    x, y = _softmax_args(rows, cols, seed=rows)
    block = max(16, 1 << (cols - 1).bit_length())
    handle = K.row_softmax.warmup(y, x, x.stride(0), y.stride(0), rows, cols, BLOCK=block, STAGES=4,
                                  num_warps=8, grid=(1,))
    handle[(min(programs, rows), 1, 1)](y, x, x.stride(0), y.stride(0), rows, cols, block, 4)
    ref = torch.softmax(x.double(), dim=1)
    assert ((y.double() - ref).abs().max()).item() < 1e-6
    with pytest.raises(LaunchError, match="BLOCK"):
        handle[(1, 1, 1)](y, x, x.stride(0), y.stride(0), rows, cols, block * 2, 4)


# -- a K loop inside a while (tutorial 08): drain-dot-wait drains it in its last iteration --------
WHILE_SIG = "a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32,M=i32,N=i32:16,K=i32:16,tiles_n=i32,n_tiles=i32"


def test_k_loop_in_a_while_drains_in_its_last_iteration():
    text = K.tiles_in_while.compile(WHILE_SIG, {"BM": 128, "BN": 128, "BK": 64}, num_warps=4,
                                    stages=("ir.opt",)).asm["ir.opt"]
    assert "dot_drain = 0" in text and "{pendings = 1}" in text
    assert not [line for line in text.splitlines() if "tlx.async_dot_wait" in line and "{pendings = 0}" in line]


def test_k_loop_in_a_while_is_not_serialized():
    compiled = K.tiles_in_while.compile(WHILE_SIG, {"BM": 128, "BN": 128, "BK": 64}, num_warps=4,
                                        stages=("cuda", "cubin"))
    assert compiled.metadata["wgmma_serialized"] is None, compiled.metadata["ptxas_log"]
    assert compiled.metadata["perf_notes"] == [], compiled.metadata["ptxas_log"]
    assert compiled.metadata["spills_bytes"] == 0


@pytest.mark.parametrize("m,n,k,programs", [(70, 40, 50, 2), (64, 96, 0, 3), (130, 33, 16, 1), (9, 64, 77, 5)])
def test_k_loop_in_a_while_interpreter_same_before_and_after(m, n, k, programs):
    g = torch.Generator().manual_seed(m * n + k)
    a = torch.randn(m, max(k, 1), generator=g).half()[:, :k].contiguous()
    b = torch.randn(max(k, 1), n, generator=g).half()[:k].contiguous()
    bm, bn, bk = 64, 32, 16
    tiles_n = (n + bn - 1) // bn
    n_tiles = (m + bm - 1) // bm * tiles_n
    outs = []
    for rewrite in (False, True):
        c = torch.full((m, n), float("nan"))
        runner, grid3, memory, values = prepare_launch(K.tiles_in_while, (programs,),
                                                       (a, b, c, m, n, k, tiles_n, n_tiles),
                                                       {"BM": bm, "BN": bn, "BK": bk}, num_warps=4)
        if rewrite:
            module = default_pipeline("sm_90a").run(copy.deepcopy(runner.module),
                                                    CompileOptions(num_warps=4, arch="sm_90a"))
            assert "dot_drain = 0" in str(module)
            runner = KernelRunner(module)
        for pid in _program_ids(grid3, (1, 1, 1)):
            runner.run_program(pid, grid3, memory, values, None, None)
        outs.append(c)
    assert not torch.isnan(outs[1]).any()
    ref = a.double() @ b.double()
    torch.testing.assert_close(outs[1].double(), ref, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-5)


def test_checker_is_clean_on_the_drained_while_k_loop():
    from tlxc.check import ERROR
    from tlxc.compiler import check_function
    from tlxc.frontend.specialize import parse_signature, specialization_from_types
    spec = specialization_from_types(K.tiles_in_while, parse_signature(WHILE_SIG), {"BM": 64, "BN": 64, "BK": 16})
    assert [f.render() for f in check_function(K.tiles_in_while, spec, num_warps=4) if f.severity == ERROR] == []
