"""pipeline-loads in run-ahead mode (passes/pipeline.py): a persistent kernel's flattened
tile x K loop, whose addresses depend on carried state updated under `if` and by tl.where,
gets the cp.async ring (the state stepped S-1 iterations ahead as extra carried values);
the interpreter gives the same numbers before and after the rewrite, and torch's."""
from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
import kernels_flat_persistent as K

import tlxc
import tlxc.language as tl
from tlxc.interpreter.executor import KernelRunner
from tlxc.interpreter.launch import _program_ids, prepare_launch
from tlxc.options import CompileOptions
from tlxc.passes.canonicalize import Canonicalize
from tlxc.passes.dot_wgmma import LowerDotToWgmma
from tlxc.passes.manager import PassManager
from tlxc.passes.pipeline import PipelineLoads

SIG = ("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp16,M=i32,N=i32,K=i32,s_am=i32:16,s_bk=i32:16,s_cm=i32:16")


def _args(m, n, k, programs, seed):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=gen).half()
    b = torch.randn(k, n, generator=gen).half()
    c = torch.full((m, n), float("nan"), dtype=torch.float16)
    return (a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0)), c


def _run(args, meta, *, rewrite: bool, stages: int = 3):
    grid = (meta["PROGRAMS"],)
    runner, grid3, memory, values = prepare_launch(K.flat_persistent_matmul, grid, args, meta, num_warps=4)
    module = runner.module
    if rewrite:
        passes = PassManager([Canonicalize(), LowerDotToWgmma(), PipelineLoads(), Canonicalize()])
        module = passes.run(copy.deepcopy(module), CompileOptions(num_warps=4, arch="sm_90a", num_stages=stages))
        runner = KernelRunner(module)
    for pid in _program_ids(grid3, (1, 1, 1)):
        runner.run_program(pid, grid3, memory, values, None, None)
    return module


# TLXC_RING_COUNTER: a carried stage index beside the state; TLXC_RING_BASE: the switch that
# addresses the body's copies from the loop's start (the state's pointers are not such copies)
@pytest.mark.parametrize("counter,base", [("0", "0"), ("1", "0"), ("1", "1")])
@pytest.mark.parametrize("m, n, k, programs, stages", [(150, 72, 100, 3, 3), (64, 96, 40, 2, 4), (100, 40, 16, 4, 2)])
def test_rewritten_loop_gives_the_same_numbers(m, n, k, programs, stages, counter, base, monkeypatch):
    monkeypatch.setenv("TLXC_RING_COUNTER", counter)
    monkeypatch.setenv("TLXC_RING_BASE", base)
    meta = {"BM": 64, "BN": 32, "BK": 16, "PROGRAMS": programs}
    results = []
    for rewrite in (False, True):
        args, c = _args(m, n, k, programs, seed=m + n + k)
        module = _run(args, meta, rewrite=rewrite, stages=stages)
        results.append(c.clone())
    text = str(module)
    assert text.count("tlx.async_load ") == 2 * stages, text      # S - 1 prologue tiles + the body's, A and B
    assert not torch.isnan(results[1]).any()
    assert torch.equal(results[0], results[1])
    a, b = args[0].double(), args[1].double()
    expected = a @ b
    err = (results[1].double() - expected).abs().max().item() / expected.abs().max().item()
    assert err < 2e-3


def test_the_state_is_stepped_ahead_as_carried_values(monkeypatch):
    monkeypatch.setenv("TLXC_RING_COUNTER", "0")          # (else the ring's stage is one more carried value)
    compiled = K.flat_persistent_matmul.compile(SIG, {"BM": 64, "BN": 64, "BK": 32, "PROGRAMS": 4},
                                                num_warps=4, stages=("ir.opt",))
    loop = next(line for line in compiled.asm["ir.opt"].splitlines() if "scf.for" in line)
    # kk, tile, rows, cols, acc as written, then the lead copies of kk, tile, rows and cols
    assert loop.split("=")[0].count("%") == 9, loop


def test_a_state_update_with_a_side_effect_is_left_alone():
    @tlxc.jit
    def counted(a_ptr, b_ptr, c_ptr, n_ptr, K, BK: tl.constexpr):
        kk = 0
        acc = tl.zeros((64, 64), tl.float32)
        ks = tl.arange(0, BK)
        for _ in range(0, 4):
            kk = tl.atomic_add(n_ptr, 1) % 2        # the state comes from memory: nothing to run ahead
            a = tl.load(a_ptr + tl.arange(0, 64)[:, None] * K + (kk * BK + ks)[None, :])
            b = tl.load(b_ptr + (kk * BK + ks)[:, None] * 64 + tl.arange(0, 64)[None, :])
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :], acc)
    compiled = counted.compile("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32,n_ptr=*i32,K=i32", {"BK": 32},
                               num_warps=4, stages=("ir.opt",))
    assert "tlx.async_load " not in compiled.asm["ir.opt"]


@pytest.mark.gpu
@pytest.mark.parametrize("overlap", ["1", "0"])
@pytest.mark.parametrize("m, n, k, programs, bn", [(1000, 520, 200, 7, 128), (4096, 4096, 512, 132, 128),
                                                   (1000, 1048, 328, 5, 256), (2048, 2048, 512, 132, 256)])
def test_gpu_flat_persistent_matmul_matches_torch(m, n, k, programs, bn, overlap, monkeypatch):
    monkeypatch.setenv("TLXC_EPILOGUE_OVERLAP", overlap)       # the epilogue's wgmma wait, both ways
    gen = torch.Generator().manual_seed(m + k)
    a = torch.randn(m, k, generator=gen).half().cuda()
    b = torch.randn(k, n, generator=gen).half().cuda()
    c = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
    K.flat_persistent_matmul[(programs,)](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0),
                                          BM=128, BN=bn, BK=64, PROGRAMS=programs, num_warps=8, num_stages=3)
    expected = a.double() @ b.double()
    err = (c.double() - expected).abs().max().item() / expected.abs().max().item()
    assert err < 2e-3, err


def _loop_body_ops(text: str) -> list[str]:
    """The ir.opt lines of the flat loop's body, top level only (4 spaces of indent)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "scf.for" in line)
    body = []
    for line in lines[start + 2:]:
        if line.startswith("  }"):
            break
        body.append(line)
    return body


def test_the_epilogue_if_waits_and_the_loop_keeps_one_wgmma_in_flight(monkeypatch):
    """The store under `if kk == last:` reads the accumulator: the loop's wait keeps one wgmma
    in flight (pendings 1), the if starts with the wait for all of them, and the next tile's
    copies are issued before that if; TLXC_EPILOGUE_OVERLAP=0 waits for every wgmma at once."""
    meta = {"BM": 64, "BN": 64, "BK": 32, "PROGRAMS": 4}
    for overlap in ("1", "0"):
        monkeypatch.setenv("TLXC_EPILOGUE_OVERLAP", overlap)
        text = K.flat_persistent_matmul.compile(SIG, meta, num_warps=4, stages=("ir.opt",)).asm["ir.opt"]
        body = _loop_body_ops(text)
        top = [line for line in body if line.startswith("    ") and not line.startswith("     ")]
        waits = [line for line in top if "tlx.async_dot_wait" in line]
        assert len(waits) == 1, waits
        epilogue = next(i for i, line in enumerate(body) if "scf.if" in line and "tensor<64x64xf32" in line)
        if overlap == "1":
            assert "pendings = 1" in waits[0]
            assert "tlx.async_dot_wait" in body[epilogue + 1] and "epilogue" in body[epilogue + 1]
            assert "pendings = 0" in body[epilogue + 1]
            assert any("tlx.async_load" in line for line in body[:epilogue])
            assert not any("tlx.async_load" in line for line in body[epilogue:])
        else:
            assert "pendings = 0" in waits[0] and "epilogue" not in text


def test_the_epilogue_wait_is_not_serialized_by_ptxas():
    """sm_90a, 128x256x64 / 8 warps (Triton's tutorial 09 config): the epilogue's wait stays the
    first arithmetic of its block (the thread coordinates re-bound after it), so ptxas keeps the
    wgmmas asynchronous (no C7514 note) and nothing spills (sizes divisible by 16, as Triton
    specializes them)."""
    sig = "a_ptr=*fp16:16,b_ptr=*fp16:16,c_ptr=*fp16:16,M=i32:16,N=i32:16,K=i32:16,s_am=i32:16,s_bk=i32:16,s_cm=i32:16"
    compiled = K.flat_persistent_matmul.compile(sig, {"BM": 128, "BN": 256, "BK": 64, "PROGRAMS": 132},
                                                num_warps=8, num_stages=3)
    meta = compiled.metadata if isinstance(compiled.metadata, dict) else vars(compiled.metadata)
    assert "__pin" in compiled.asm["cuda"]
    assert "tlx_wgmma_wait_group<1, 128>" in compiled.asm["cuda"]
    assert not meta["perf_notes"], meta["perf_notes"]
    assert meta["spills_bytes"] == 0
