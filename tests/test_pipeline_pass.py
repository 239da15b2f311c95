"""pipeline-loads (passes/pipeline.py): the K loop of a plain tl.dot matmul becomes a cp.async
ring feeding the wgmma; the interpreter gives the same numbers before and after the rewrite."""
from __future__ import annotations

import copy
import os
import pathlib

import pytest

torch = pytest.importorskip("torch")
import kernels_dot_wgmma as K

from tlxc.interpreter.executor import KernelRunner
from tlxc.interpreter.launch import _program_ids, prepare_launch
from tlxc.options import CompileOptions
from tlxc.passes.canonicalize import Canonicalize
from tlxc.passes.dot_wgmma import LowerDotToWgmma
from tlxc.passes.manager import PassManager
from tlxc.passes.pipeline import PipelineLoads

SIG = ("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp16,M=i32,N=i32,K=i32,stride_am=i32:16,stride_ak=i32:1,"
       "stride_bk=i32:16,stride_bn=i32:1,stride_cm=i32:16")
SNAPSHOT = pathlib.Path(__file__).parent / "snapshots" / "pipeline" / "pipelined_dot_loop.cu"
UPDATE = os.environ.get("TLXC_UPDATE_SNAPSHOTS") == "1"


def _rewritten(module, num_warps: int, num_stages=None):
    passes = PassManager([Canonicalize(), LowerDotToWgmma(), PipelineLoads(), Canonicalize()])
    return passes.run(copy.deepcopy(module), CompileOptions(num_warps=num_warps, arch="sm_90a", num_stages=num_stages))


def _interpret(kfn, grid, args, kwargs, *, rewrite: bool, num_warps: int = 4, num_stages=None):
    """Run every program on the interpreter, on the frontend's IR or on the rewritten IR."""
    runner, grid3, memory, values = prepare_launch(kfn, grid, args, kwargs, num_warps=num_warps)
    if rewrite:
        runner = KernelRunner(_rewritten(runner.module, num_warps, num_stages))
    for pid in _program_ids(grid3, (1, 1, 1)):
        runner.run_program(pid, grid3, memory, values, None, None)
    return runner.module


def _tile_matmul_both(m, n, k, bm, bn, bk, dtype=torch.float16, **meta):
    a = torch.randn(m, k, dtype=torch.float32).to(dtype)
    b = torch.randn(k, n, dtype=torch.float32).to(dtype)
    outs = []
    for rewrite in (False, True):
        c = torch.full((m, n), float("nan"), dtype=dtype)
        grid = ((m + bm - 1) // bm, (n + bn - 1) // bn)
        module = _interpret(K.tile_matmul, grid, (a, b, c, m, n, k, a.stride(0), 1, b.stride(0), 1, c.stride(0)),
                            dict(BM=bm, BN=bn, BK=bk, **meta), rewrite=rewrite)
        outs.append(c)
    return a, b, outs, module


@pytest.mark.parametrize("from_start,counter,base", [("", "0", "0"), ("1", "0", "0"), ("", "1", "0"), ("", "1", "1")])
@pytest.mark.parametrize("m,n,k,stages", [(100, 72, 75, None), (64, 40, 16, None), (70, 64, 130, 4), (64, 32, 40, 2)])
def test_interpreter_same_result_before_and_after(m, n, k, stages, from_start, counter, base, monkeypatch):
    monkeypatch.setenv("TLXC_RING_FROM_START", from_start)    # the body's copies from the loop's start
    monkeypatch.setenv("TLXC_RING_COUNTER", counter)          # the stage index as a wrapping carried counter
    monkeypatch.setenv("TLXC_RING_BASE", base)                # from the start, over an opaque base pointer
    a, b, (before, after), module = _tile_matmul_both(m, n, k, 64, 32, 16, STAGES=stages)
    text = str(module)
    assert "tl.dot" not in text and "tlx.async_load" in text      # the rewritten IR ran
    assert torch.equal(before, after)
    ref = a.double() @ b.double()
    assert ((after.double() - ref).norm() / ref.norm()).item() < 2e-3


@pytest.mark.parametrize("from_start,counter,base", [("", "0", "0"), ("1", "0", "0"), ("", "1", "0"), ("", "0", "1")])
def test_bf16_and_block_pointers_same_result(from_start, counter, base, monkeypatch):
    monkeypatch.setenv("TLXC_RING_FROM_START", from_start)
    monkeypatch.setenv("TLXC_RING_COUNTER", counter)
    monkeypatch.setenv("TLXC_RING_BASE", base)
    m, n, k = 70, 40, 50
    a = torch.randn(m, k).to(torch.bfloat16)
    b = torch.randn(k, n).to(torch.bfloat16)
    outs = []
    for rewrite in (False, True):
        c = torch.full((m, n), float("nan"), dtype=torch.float16)
        module = _interpret(K.block_ptr_matmul, (2, 2), (a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0)),
                            {"BM": 64, "BN": 32, "BK": 16}, rewrite=rewrite)
        outs.append(c)
    assert str(module).count("tlx.async_load") == 6                # 2 tiles x (2 prologue stages + the refill)
    assert torch.equal(outs[0], outs[1])
    ref = a.double() @ b.double()
    assert ((outs[1].double() - ref).norm() / ref.norm()).item() < 1e-2


def _ir(kfn=K.tile_matmul, sig=SIG, num_warps=4, **meta):
    meta = {"BM": 128, "BN": 128, "BK": 64, **meta}
    return kfn.compile(sig, meta, num_warps=num_warps, stages=("ir.opt",)).asm["ir.opt"]


def test_ring_of_default_three_stages():
    text = _ir()
    assert "memdesc<128x64xf16, smem, num=3>" in text and "memdesc<64x128xf16, smem, num=3>" in text
    assert text.count("tlx.async_commit_group") == 3              # two prologue stages + the refill
    assert "tlx.async_wait_group {pendings = 1}" in text          # S - 2 in the loop
    assert "tlx.async_wait_group {pendings = 0}" in text          # the drain after it
    assert "tlx.async_dot_wait" in text and "{pendings = 1}" in text


def test_tl_range_num_stages_and_compile_option():
    assert "num=4>" in _ir(STAGES=4)
    assert "num=2>" in K.tile_matmul.compile(SIG, {"BM": 128, "BN": 128, "BK": 64}, num_stages=2,
                                             stages=("ir.opt",)).asm["ir.opt"]
    plain = _ir(STAGES=1)                        # num_stages=1: wgmma, no ring
    assert "tlx.async_load" not in plain and "num=1>" in plain and "tlx.async_dot" in plain


def test_ring_depth_shrinks_to_fit_shared_memory():
    text = _ir(BN=256, STAGES=8)                  # 8 x 48 KB does not fit; 4 x 48 KB does
    assert "num=4>" in text


def test_loop_with_a_reused_operand_is_left_alone():
    text = K.reused_operand_matmul.compile("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32,s_ptr=*fp32,K=i32",
                                           {"BM": 64, "BN": 64, "BK": 32}, stages=("ir.opt",)).asm["ir.opt"]
    # pipeline-loads leaves the loop alone (A also feeds the sum); pipeline-operand-loads
    # (passes/pipeline_operands.py) rings B only, A keeps its load and its store
    assert text.count("tl.load") == 1 and "tlx.async_dot " in text and text.count("tlx.async_load") == 3


def test_reused_operand_interpreter_matches_torch():
    k = 64
    a, b = torch.randn(64, k).half(), torch.randn(k, 64).half()
    c, s = torch.full((64, 64), float("nan")), torch.full((64,), float("nan"))
    _interpret(K.reused_operand_matmul, (1,), (a, b, c, s, k), {"BM": 64, "BN": 64, "BK": 32}, rewrite=True)
    torch.testing.assert_close(c, (a.float() @ b.float()), rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(s, a.float().sum(1), rtol=1e-3, atol=1e-3)


def test_pipelined_loop_cuda_snapshot():
    """The generated CUDA of the pipelined K loop (128x128x64, 4 warps): cp.async wait, fence and
    barrier, the wgmma on stage k % 3, the wait with one MMA in flight, the refill, the commit."""
    cuda = K.tile_matmul.compile(SIG.replace("K=i32", "K=i32:16"), {"BM": 128, "BN": 128, "BK": 64},
                                 stages=("cuda",)).asm["cuda"]
    body = cuda[cuda.index("for (int k"):]
    loop = body[:body.index("\n  }\n") + 4]
    if UPDATE or not SNAPSHOT.exists():
        SNAPSHOT.write_text(loop)
    assert loop == SNAPSHOT.read_text(), ("the pipelined loop changed; review and regenerate with "
                                          "TLXC_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_pipeline_pass.py -k snapshot")


def test_ring_from_start_addresses_the_body_copies_from_the_loop_inputs(monkeypatch):
    """TLXC_RING_FROM_START=1: the body's copies address tile j + S - 1 as the pointer before
    the loop plus (j + S - 1) increments in 64 bits, not the carried pointer plus S - 1."""
    monkeypatch.setenv("TLXC_RING_FROM_START", "1")
    monkeypatch.setenv("TLXC_RING_BASE", "0")
    text = _ir()
    body = text[text.index("scf.for"):]
    assert "tensor<128x64xi64" in body and "tensor<64x128xi64" in body
    monkeypatch.setenv("TLXC_RING_FROM_START", "")
    assert "xi64>" not in _ir()[_ir().index("scf.for"):]


def test_ring_counter_carries_the_stage_and_wraps_it_with_a_select(monkeypatch):
    """TLXC_RING_COUNTER=1: the loop carries the stage it reads (from 0, wrapping at S by a
    select) instead of computing k % S for the read and (k + S - 1) % S for the refill."""
    def loop_of(text):
        body = text[text.index("scf.for"):]
        return body[:body.index("scf.yield")]
    monkeypatch.setenv("TLXC_RING_COUNTER", "0")
    plain = loop_of(_ir(STAGES=4))
    assert plain.count("arith.rem") == 2 and "arith.select" not in plain
    monkeypatch.setenv("TLXC_RING_COUNTER", "1")
    text = _ir(STAGES=4)
    body = loop_of(text)
    assert "arith.rem" not in body and body.count("arith.select") == 2
    assert "%stage" in body and "value = 4" in body and "value = 3" in body    # wraps at S, refill S - 1


def test_ring_base_adds_the_tile_offset_to_an_opaque_initial_pointer(monkeypatch):
    """TLXC_RING_BASE=1: the body's copies address tile j + S - 1 from the pointer before the
    loop (as TLXC_RING_FROM_START=1), through tlx_opaque_pointer in the generated CUDA (so
    that NVVM adds the 64-bit offset to it instead of re-deriving it); off: neither."""
    sig = SIG.replace("K=i32", "K=i32:16")

    def compiled():
        c = K.tile_matmul.compile(sig, {"BM": 128, "BN": 128, "BK": 64}, stages=("ir.opt", "cuda"))
        return c.asm["ir.opt"], c.asm["cuda"]
    monkeypatch.setenv("TLXC_RING_BASE", "0")
    ir, cuda = compiled()
    assert "opaque_base" not in ir and "tlx_opaque_pointer(" not in cuda
    monkeypatch.setenv("TLXC_RING_BASE", "1")
    ir, cuda = compiled()
    body = ir[ir.index("scf.for"):]
    assert body.count("opaque_base") == 2 and "tensor<128x64xi64" in body     # A's and B's copies
    loop = cuda[cuda.index("for (int k"):]
    assert loop.count("tlx_opaque_pointer(") == 2
