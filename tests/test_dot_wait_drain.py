"""drain-dot-wait (passes/dot_wait_drain.py) and the ptxas performance notes
(codegen_nvptx/toolchain.py ``parse_ptxas_resources``, ``tlxc compile --emit stats``).

A loop that keeps one wgmma in flight and is drained by an ``async_dot_wait(0)`` after it
made ptxas serialize every wgmma (note C7514); the pass moves the drain into the loop's
last iteration.  The interpreter and the checker must give the same answers before and
after, and ptxas must report nothing for the usual matmul configurations."""
from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
import kernels_dot_drain as D
import kernels_dot_wgmma as K
import kernels_pipelined as P

from tlxc.check import ERROR
from tlxc.codegen_nvptx.toolchain import parse_ptxas_resources
from tlxc.compiler import check_function, format_stats, perf_warnings
from tlxc.frontend.specialize import parse_signature, specialization_from_types
from tlxc.interpreter.executor import KernelRunner
from tlxc.interpreter.launch import _program_ids, prepare_launch
from tlxc.options import CompileOptions
from tlxc.passes.canonicalize import Canonicalize
from tlxc.passes.dot_wait_drain import DrainDotWait
from tlxc.passes.dot_wgmma import LowerDotToWgmma
from tlxc.passes.manager import PassManager
from tlxc.passes.pipeline import PipelineLoads

NAME = "matmul_BM128"
C7514 = (f"ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
         f"non wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline "
         f"stage in the function '{NAME}' in line 0")
C7517 = (f"ptxas info    : (C7517) wgmma.wait_group is injected in around line 1345 by compiler to allow use of "
         f"registers defined by GMMA in function '{NAME}'")
ENTRY = (f"ptxas info    : 0 bytes gmem\n"
         f"ptxas info    : Compiling entry function '{NAME}' for 'sm_90a'\n"
         f"ptxas info    : Function properties for {NAME}\n"
         f"ptxas         .     24 bytes stack frame, 3608 bytes spill stores, 3608 bytes spill loads\n"
         f"ptxas info    : Used 255 registers, used 1 barriers, 1024 bytes smem\n"
         f"ptxas info    : Compile time = 203.983 ms")


# -- the log parser and the stats warnings ---------------------------------------------------
def test_parser_reads_wgmma_serialization_named_before_the_entry():
    found = parse_ptxas_resources(C7514 + "\n" + ENTRY)[NAME]
    assert found["registers"] == 255 and found["spills_bytes"] == 3608 and found["shared_static"] == 1024
    assert found["wgmma_serialized"].startswith("C7514: wgmma.mma_async instructions are serialized due to "
                                                "non wgmma instructions reading accumulator registers of a wgmma")
    assert found["perf_notes"] == [found["wgmma_serialized"]]


def test_parser_keeps_other_notes_without_calling_them_serialization():
    found = parse_ptxas_resources(ENTRY + "\n" + C7517)[NAME]
    assert found["wgmma_serialized"] is None
    assert found["perf_notes"] == ["C7517: wgmma.wait_group is injected in around line 1345 by compiler to "
                                   "allow use of registers defined by GMMA"]


def test_parser_clean_log_and_notes_about_other_functions():
    other = C7514.replace(f"'{NAME}'", "'helper'")
    found = parse_ptxas_resources(other + "\n" + ENTRY.replace("3608 bytes spill stores", "0 bytes spill stores"))
    assert set(found) == {NAME}
    assert found[NAME]["perf_notes"] == [] and found[NAME]["wgmma_serialized"] is None
    assert found[NAME]["spills_bytes"] == 0


class _Compiled:
    name, arch = "matmul", "sm_90a"

    def __init__(self, metadata):
        self.metadata = metadata


def test_stats_warn_for_spills_and_serialization_and_only_then():
    metadata = {"name": NAME, "threads": 128, **parse_ptxas_resources(C7514 + "\n" + ENTRY)[NAME]}
    warnings = perf_warnings(metadata)
    assert len(warnings) == 2
    assert warnings[0].startswith("3608 bytes of registers spilled") and "255 registers" in warnings[0]
    assert warnings[1].startswith("ptxas serializes the wgmma instructions (C7514:")
    lines = format_stats(_Compiled(metadata)).splitlines()
    assert lines[0].startswith("kernel matmul [matmul_BM128] (sm_90a): 128 threads, 255 registers/thread")
    assert lines[1:] == [f"warning: {w}" for w in warnings]
    clean = dict(metadata, spills_bytes=0, wgmma_serialized=None)
    assert perf_warnings(clean) == [] and len(format_stats(_Compiled(clean)).splitlines()) == 1


# -- the rewrite -------------------------------------------------------------------------------
SIG = ("a_ptr=*fp16:16,b_ptr=*fp16:16,c_ptr=*fp16:16,M=i32,N=i32,K=i32:16,stride_am=i32:16,stride_ak=i32:1,"
       "stride_bk=i32:16,stride_bn=i32:1,stride_cm=i32:16")
PIPE_SIG = "a_ptr=*fp16:16,b_ptr=*fp16:16,c_ptr=*fp16:16,M=i32,N=i32,K=i32:16,stride_am=i32:16,stride_bk=i32:16," \
           "stride_cm=i32:16"


def _post_loop_waits(text: str) -> list[str]:
    """The async_dot_wait lines outside any loop body (indented by one level)."""
    return [line for line in text.splitlines() if line.startswith("  %") and "tlx.async_dot_wait" in line]


def test_tl_dot_loop_drains_in_its_last_iteration():
    text = K.tile_matmul.compile(SIG, {"BM": 128, "BN": 256, "BK": 64}, num_warps=8, stages=("ir.opt",)).asm["ir.opt"]
    assert "dot_drain = 0" in text
    assert _post_loop_waits(text) == []
    assert "tlx.async_dot_wait" in text and "{pendings = 1}" in text        # the in-loop wait is kept


def test_hand_written_pipelined_loop_drains_in_its_last_iteration():
    text = P.cp_async_wgmma_gemm.compile(PIPE_SIG, {"BM": 128, "BN": 128, "BK": 64, "STAGES": 3}, num_warps=8,
                                         stages=("ir.opt",)).asm["ir.opt"]
    assert "dot_drain = 0" in text and _post_loop_waits(text) == []


def test_loop_with_another_mma_in_flight_is_left_alone():
    text = D.mma_in_flight_before_loop.compile("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32,d_ptr=*fp32,n_k=i32",
                                               {"BM": 64, "BN": 64, "BK": 16}, stages=("ir.opt",)).asm["ir.opt"]
    assert "dot_drain =" not in text
    assert len(_post_loop_waits(text)) == 2


def test_inner_loop_of_a_persistent_kernel_drains():
    text = D.persistent_k_loops.compile("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32,n_tiles=i32,n_k=i32",
                                        {"BM": 64, "BN": 64, "BK": 16}, stages=("ir.opt",)).asm["ir.opt"]
    assert text.count("dot_drain = 0") == 1
    assert not [line for line in text.splitlines() if "tlx.async_dot_wait" in line and "{pendings = 0}" in line]


def test_generated_loop_leaves_only_by_the_drain():
    cuda = K.tile_matmul.compile(SIG, {"BM": 128, "BN": 128, "BK": 64}, stages=("cuda",)).asm["cuda"]
    loop = cuda[cuda.index("for (int k_"):]
    assert loop.startswith("for (int k_ = s_12; ; k_ += s_13) {")         # no exit but the drain's
    drain = loop.index("tlx_wgmma_wait_group<0, 128>(acc_1);  // the last iteration drains")
    assert loop.index("break;", drain) > drain
    assert "tlx_wgmma_wait_group<0" not in loop[drain + 10:]                 # and no wait after the loop


# -- the interpreter and the checker agree -----------------------------------------------------
def _rewritten(module, num_warps: int):
    passes = PassManager([Canonicalize(), LowerDotToWgmma(), PipelineLoads(), DrainDotWait(), Canonicalize()])
    return passes.run(copy.deepcopy(module), CompileOptions(num_warps=num_warps, arch="sm_90a"))


def _interpret(kfn, grid, args, kwargs, *, rewrite: bool, num_warps: int = 4):
    runner, grid3, memory, values = prepare_launch(kfn, grid, args, kwargs, num_warps=num_warps)
    if rewrite:
        runner = KernelRunner(_rewritten(runner.module, num_warps))
        assert "dot_drain =" in str(runner.module) or kfn is D.mma_in_flight_before_loop
    for pid in _program_ids(grid3, (1, 1, 1)):
        runner.run_program(pid, grid3, memory, values, None, None)


@pytest.mark.parametrize("k", [0, 16, 75, 130])
def test_tl_dot_matmul_interpreter_same_before_and_after(k):
    m, n = 70, 40
    a = torch.randn(m, max(k, 1)).half()[:, :k].contiguous()
    b = torch.randn(max(k, 1), n).half()[:k].contiguous()
    outs = []
    for rewrite in (False, True):
        c = torch.full((m, n), float("nan"), dtype=torch.float16)
        _interpret(K.tile_matmul, (2, 2), (a, b, c, m, n, k, max(k, 1), 1, n, 1, n), {"BM": 64, "BN": 32, "BK": 16},
                   rewrite=rewrite)
        outs.append(c)
    assert torch.equal(outs[0], outs[1])
    ref = a.double() @ b.double()
    assert torch.allclose(outs[1].double(), ref, rtol=1e-2, atol=2e-2 * max(k, 1) ** 0.5)


@pytest.mark.parametrize("k", [40, 200])
def test_hand_written_pipelined_gemm_interpreter_same_before_and_after(k):
    m, n = 80, 72
    a, b = torch.randn(m, k).half(), torch.randn(k, n).half()
    outs = []
    for rewrite in (False, True):
        c = torch.full((m, n), float("nan"), dtype=torch.float16)
        _interpret(P.cp_async_wgmma_gemm, (2, 1), (a, b, c, m, n, k, k, n, n),
                   {"BM": 64, "BN": 128, "BK": 64, "STAGES": 3}, rewrite=rewrite)
        outs.append(c)
    assert torch.equal(outs[0], outs[1])
    torch.testing.assert_close(outs[1].double(), a.double() @ b.double(), rtol=1e-2, atol=0.05)


@pytest.mark.parametrize("n_k", [0, 3])
def test_mma_in_flight_before_loop_interpreter(n_k):
    bm = bn = 64
    bk = 16
    a = torch.randn((n_k + 1) * bm, bk).half()
    b = torch.randn((n_k + 1) * bk, bn).half()
    c, d = torch.full((bm, bn), float("nan")), torch.full((bm, bn), float("nan"))
    _interpret(D.mma_in_flight_before_loop, (1,), (a, b, c, d, n_k), {"BM": bm, "BN": bn, "BK": bk}, rewrite=True)
    a3, b3 = a.float().view(n_k + 1, bm, bk), b.float().view(n_k + 1, bk, bn)
    torch.testing.assert_close(d, a3[0] @ b3[0], rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(c, (a3[1:] @ b3[1:]).sum(0) if n_k else torch.zeros(bm, bn), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("n_tiles,n_k", [(2, 3), (2, 0), (1, 1)])
def test_persistent_k_loops_interpreter(n_tiles, n_k):
    bm = bn = 64
    bk = 16
    a = torch.randn(max(n_tiles * n_k, 1) * bm, bk).half()
    b = torch.randn(max(n_k, 1) * bk, bn).half()
    c = torch.full((n_tiles * bm, bn), float("nan"))
    _interpret(D.persistent_k_loops, (1,), (a, b, c, n_tiles, n_k), {"BM": bm, "BN": bn, "BK": bk}, rewrite=True)
    for t in range(n_tiles):
        ref = sum((a.float()[(t * n_k + k) * bm:(t * n_k + k + 1) * bm] @ b.float()[k * bk:(k + 1) * bk]
                   for k in range(n_k)), torch.zeros(bm, bn))
        torch.testing.assert_close(c[t * bm:(t + 1) * bm], ref, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("kfn,sig,meta,warps", [
    (P.cp_async_wgmma_gemm, PIPE_SIG, {"BM": 128, "BN": 128, "BK": 64, "STAGES": 3}, 8),
    (K.tile_matmul, SIG, {"BM": 128, "BN": 256, "BK": 64}, 8),
    (D.persistent_k_loops, "a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32,n_tiles=i32,n_k=i32", {"BM": 64, "BN": 64, "BK": 16},
     4),
])
def test_checker_is_clean_on_the_drained_loops(kfn, sig, meta, warps):
    spec = specialization_from_types(kfn, parse_signature(sig), meta)
    assert [f.render() for f in check_function(kfn, spec, num_warps=warps) if f.severity == ERROR] == []


# -- ptxas: no serialized wgmma, no injected wait ------------------------------------------------
def _nvrtc():
    try:
        from tlxc.codegen_nvptx.toolchain import nvrtc_version
        nvrtc_version()
    except Exception as exc:        # no NVRTC wheel: nothing to compile with
        pytest.skip(f"NVRTC is not available ({exc})")


def _sig(dtype: str) -> str:
    return SIG.replace("fp16", dtype)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("bn,warps", [(256, 8), (128, 4)])
def test_tl_dot_matmul_wgmma_not_serialized(dtype, bn, warps):
    _nvrtc()
    compiled = K.tile_matmul.compile(_sig(dtype), {"BM": 128, "BN": bn, "BK": 64}, num_warps=warps,
                                     stages=("cuda", "cubin"))
    assert "tlx_wgmma_m64n" in compiled.asm["cuda"]
    assert compiled.metadata["wgmma_serialized"] is None, compiled.metadata["ptxas_log"]
    assert compiled.metadata["perf_notes"] == [], compiled.metadata["ptxas_log"]     # no injected wait either


@pytest.mark.parametrize("bm,warps,stages", [(128, 8, 3), (64, 4, 3), (128, 8, 4)])
def test_hand_written_pipelined_gemm_not_serialized(bm, warps, stages):
    _nvrtc()
    compiled = P.cp_async_wgmma_gemm.compile(PIPE_SIG, {"BM": bm, "BN": 128, "BK": 64, "STAGES": stages},
                                             num_warps=warps, stages=("cuda", "cubin"))
    assert compiled.metadata["wgmma_serialized"] is None, compiled.metadata["ptxas_log"]
    assert compiled.metadata["perf_notes"] == [], compiled.metadata["ptxas_log"]
