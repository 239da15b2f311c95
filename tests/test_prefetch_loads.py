"""pipeline-loads' register prefetch (passes/pipeline_prefetch.py): the plain loads of a
``tl.range(num_stages=S)`` loop are issued S - 1 iterations ahead (Triton's fused softmax);
the interpreter gives the same numbers on the rewritten IR; a loop that reads what it wrote
through the same argument, or that would hold too many registers, is left alone."""
from __future__ import annotations

import copy
import os
import pathlib

import pytest

torch = pytest.importorskip("torch")
import kernels_dot_idioms as K

from tlxc.interpreter.executor import KernelRunner
from tlxc.interpreter.launch import _program_ids, prepare_launch
from tlxc.ir.printer import print_module
from tlxc.options import CompileOptions
from tlxc.passes.canonicalize import Canonicalize
from tlxc.passes.manager import PassManager
from tlxc.passes.pipeline import PipelineLoads

SNAPSHOT = pathlib.Path(__file__).parent / "snapshots" / "pipeline" / "prefetched_row_loop.ir"
UPDATE = os.environ.get("TLXC_UPDATE_SNAPSHOTS") == "1"


def _rewritten(module, num_warps, arch="sm_90a"):
    passes = PassManager([Canonicalize(), PipelineLoads(), Canonicalize()])
    return passes.run(copy.deepcopy(module), CompileOptions(num_warps=num_warps, arch=arch))


def _run(kfn, grid, args, meta, *, rewrite, num_warps=4, arch="sm_90a"):
    runner, grid3, memory, values = prepare_launch(kfn, grid, args, meta, num_warps=num_warps)
    module = runner.module
    if rewrite:
        module = _rewritten(module, num_warps, arch)
        runner = KernelRunner(module)
    for pid in _program_ids(grid3, (1, 1, 1)):
        runner.run_program(pid, grid3, memory, values, None, None)
    return module


def _loop(module):
    return next(op for op in module.kernels[0].walk() if op.name == "scf.for")


@pytest.mark.parametrize("rows,cols,programs,stages", [(37, 181, 5, 4), (8, 256, 3, 2), (13, 1, 20, 3),
                                                       (50, 100, 7, 4), (3, 64, 4, 4)])
def test_softmax_rows_same_result_on_the_rewritten_ir(rows, cols, programs, stages):
    g = torch.Generator().manual_seed(rows * cols)
    x = torch.randn(rows, cols, generator=g)
    block = max(16, 1 << (cols - 1).bit_length())
    outs = []
    for rewrite in (False, True):
        y = torch.full_like(x, float("nan"))
        module = _run(K.row_softmax, (min(programs, rows),), (y, x, x.stride(0), y.stride(0), rows, cols),
                      {"BLOCK": block, "STAGES": stages}, rewrite=rewrite)
        outs.append(y)
    loop = _loop(module)
    assert len(loop.inits) == stages - 1                        # S - 1 rows carried ahead
    assert not [op for op in loop.regions[0].block.ops if op.name == "tl.load" and
                op.operands[0].owner.parent is not loop.regions[0].block]
    assert torch.equal(outs[0], outs[1])
    ref = torch.softmax(x.double(), dim=1)
    assert (outs[1].double() - ref).abs().max().item() < 1e-6


@pytest.mark.parametrize("n,stages", [(0, 3), (1, 2), (5, 4), (9, 3)])
def test_carried_pointer_unmasked_load_same_result(n, stages):
    block, step = 32, 40
    x = torch.randn(max(n, 1) * step + block)
    outs = []
    for rewrite in (False, True):
        out = torch.full((block,), float("nan"))
        module = _run(K.strided_sum, (1,), (out, x, n, step), {"BLOCK": block, "STAGES": stages}, rewrite=rewrite)
        outs.append(out)
    assert len(_loop(module).inits) == 2 + stages - 1           # acc, ptrs and the prefetched blocks
    ref = sum((x[i * step:i * step + block].double() for i in range(n)), torch.zeros(block, dtype=torch.float64))
    assert torch.equal(outs[0], outs[1])
    assert (outs[1].double() - ref).abs().max().item() < 1e-5


def test_loop_reading_what_it_wrote_is_left_alone():
    x = torch.randn(6, 20)
    runner, *_ = prepare_launch(K.running_rows, (1,), (x, 6, 20), {"BLOCK": 32, "STAGES": 3}, num_warps=4)
    before = print_module(runner.module)
    module = _rewritten(runner.module, 4)
    assert len(_loop(module).inits) == 0
    y = x.clone()
    _run(K.running_rows, (1,), (y, 6, 20), {"BLOCK": 32, "STAGES": 3}, rewrite=True)
    torch.testing.assert_close(y, torch.cumsum(x, dim=0))
    assert "tl.load" in before


def test_without_num_stages_or_below_2_nothing_changes():
    x = torch.randn(8, 16)
    y = torch.empty_like(x)
    for stages in (None, 0, 1):
        runner, *_ = prepare_launch(K.row_softmax, (2,), (y, x, 16, 16, 8, 16), {"BLOCK": 16, "STAGES": stages},
                                    num_warps=4)
        assert len(_loop(_rewritten(runner.module, 4)).inits) == 0


def test_register_budget_lowers_the_distance_then_skips():
    x = torch.randn(4, 16)
    y = torch.empty_like(x)
    carried = {}
    for block in (1024, 2048, 4096, 8192):        # 4 warps: 8, 16, 32, 64 floats a thread
        runner, *_ = prepare_launch(K.row_softmax, (2,), (y, x, 16, 16, 4, 16), {"BLOCK": block, "STAGES": 4},
                                    num_warps=4)
        carried[block] = len(_loop(_rewritten(runner.module, 4)).inits)
    assert carried == {1024: 2, 2048: 1, 4096: 0, 8192: 0}


def test_prefetched_row_loop_snapshot():
    x = torch.randn(8, 100)
    y = torch.empty_like(x)
    runner, *_ = prepare_launch(K.row_softmax, (2,), (y, x, 100, 100, 8, 100), {"BLOCK": 128, "STAGES": 2},
                                num_warps=4)
    text = print_module(_rewritten(runner.module, 4))
    text = text[text.index("scf.for"):]
    text = "\n".join(line.split(" loc(")[0] for line in text.splitlines()) + "\n"
    if UPDATE or not SNAPSHOT.exists():
        SNAPSHOT.write_text(text)
    assert text == SNAPSHOT.read_text()


def test_sm_90a_compile_keeps_the_tutorial_register_count_small():
    compiled = K.row_softmax.compile("out_ptr=*fp32,in_ptr=*fp32,in_stride=i32,out_stride=i32,n_rows=i32,"
                                     "n_cols=i32", {"BLOCK": 1024, "STAGES": 4}, arch="sm_90a", num_warps=8)
    assert compiled.metadata["spills_bytes"] == 0 and compiled.metadata["registers"] <= 64
    cuda = compiled.asm["cuda"]
    body = cuda[cuda.index("for (int row"):]
    assert body.index("tlx_ld_global") < body.index("tlx_st_global")      # the next row's load comes first


@pytest.mark.gpu
@pytest.mark.parametrize("rows,cols,programs,stages", [(1823, 781, 792, 4), (37, 181, 5, 4), (4096, 1000, 132, 3),
                                                       (5, 2048, 7, 2), (300, 1, 64, 4)])
def test_gpu_prefetched_softmax_rows(rows, cols, programs, stages):
    x = torch.randn(rows, cols, device="cuda")
    y = torch.full_like(x, float("nan"))
    block = max(16, 1 << (cols - 1).bit_length())
    K.row_softmax[(min(programs, rows),)](y, x, x.stride(0), y.stride(0), rows, cols, BLOCK=block, STAGES=stages,
                                          num_warps=8)
    ref = torch.softmax(x.double(), dim=1)
    assert (y.double() - ref).abs().max().item() < 1e-6


@pytest.mark.gpu
@pytest.mark.parametrize("n,stages", [(0, 3), (1, 2), (37, 4)])
def test_gpu_prefetched_carried_pointer(n, stages):
    block, step = 256, 300
    x = torch.randn(max(n, 1) * step + block, device="cuda")
    out = torch.full((block,), float("nan"), device="cuda")
    K.strided_sum[(1,)](out, x, n, step, BLOCK=block, STAGES=stages)
    ref = sum((x[i * step:i * step + block].double() for i in range(n)),
              torch.zeros(block, dtype=torch.float64, device="cuda"))
    assert (out.double() - ref).abs().max().item() < 1e-4


@pytest.mark.gpu
def test_gpu_loop_reading_what_it_wrote():
    x = torch.randn(50, 300, device="cuda")
    y = x.clone()
    K.running_rows[(1,)](y, 50, 300, BLOCK=512, STAGES=4)
    torch.testing.assert_close(y, torch.cumsum(x, dim=0), rtol=1e-5, atol=1e-4)
