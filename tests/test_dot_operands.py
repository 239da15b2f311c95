"""passes/dot_operands.py (fold-dot-add, hoist-operand-stores, dedupe-operand-stores,
share-operand-buffers), pipeline_operands.py and dot_register_a.py, on
the attention-backward pattern of tests/kernels_dot_operands.py: the rewritten IR, the
interpreter before and after the rewrites, and ptxas's report of the generated code."""
from __future__ import annotations

import copy
import re

import pytest

torch = pytest.importorskip("torch")
import kernels_dot_operands as K

from tlxc.interpreter.executor import KernelRunner
from tlxc.interpreter.launch import _program_ids, prepare_launch
from tlxc.options import CompileOptions
from tlxc.passes.canonicalize import Canonicalize
from tlxc.passes.dot_operands import DedupeOperandStores, FoldDotAdd, HoistOperandStores, ShareOperandBuffers
from tlxc.passes.dot_register_a import RegisterAOperand
from tlxc.passes.dot_wait_drain import DrainDotWait
from tlxc.passes.dot_wgmma import LowerDotToWgmma
from tlxc.passes.manager import PassManager
from tlxc.passes.pipeline import PipelineLoads
from tlxc.passes.pipeline_operands import PipelineOperandLoads

KV_SIG = "k_ptr=*fp16,v_ptr=*fp16,q_ptr=*fp16,g_ptr=*fp16,dk_ptr=*fp32,dv_ptr=*fp32,n_rows=i32"
KV_META = {"BN": 128, "BM1": 16, "BM2": 32, "D": 64}


def _rewritten(module, num_warps, num_stages=None):
    passes = [Canonicalize(), FoldDotAdd(), LowerDotToWgmma(), PipelineLoads(), DrainDotWait(),
              HoistOperandStores(), DedupeOperandStores(), PipelineOperandLoads(), RegisterAOperand(),
              ShareOperandBuffers(), Canonicalize()]
    return PassManager(passes).run(copy.deepcopy(module), CompileOptions(num_warps=num_warps, arch="sm_90a", num_stages=num_stages))


def _interpret(kfn, grid, args, meta, rewrite, num_warps=4, num_stages=None):
    runner, grid3, memory, values = prepare_launch(kfn, grid, args, meta, num_warps=num_warps)
    if rewrite:
        runner = KernelRunner(_rewritten(runner.module, num_warps, num_stages))
    for pid in _program_ids(grid3, (1, 1, 1)):
        runner.run_program(pid, grid3, memory, values, None, None)
    return runner.module


def _loops(text: str) -> list[str]:
    """The bodies of the top-level scf.for ops of an IR listing (two-space indented ops)."""
    bodies, current = [], None
    for line in text.splitlines():
        if re.match(r"^  \S.*= scf\.for ", line):
            current = []
        elif current is not None and line.startswith("  }"):
            bodies.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return bodies


def test_kv_grad_ir_after_the_rewrites():
    text = K.kv_grad.compile(KV_SIG, KV_META, num_warps=4, stages=("ir", "ir.opt")).asm["ir.opt"]
    loops = _loops(text)
    assert len(loops) == 2
    for body in loops:
        # nothing is stored by the threads: k and v were hoisted, qT and g arrive by cp.async
        # (one copy each per iteration), g^T and tl.trans(qT) read the buffers of g and qT, and
        # p and ds are wgmma A operands in registers (register-a-operand)
        assert body.count("tlx.local_store") == 0, body
        assert len(re.findall(r"tlx\.async_dot %\w+, %\w+, %\w+ \{[^}]*\} : tensor<128x64xf32", body)) == 2
        for a in re.findall(r"tlx\.async_dot (%\w+), %\w+, %\w+ \{[^}]*\} : tensor<128x64xf32", body):
            assert re.search(rf"{a} = arith\.cast .*: tensor<128x\d+xf16", body), (a, body)   # registers
        assert body.count("tlx.async_load") == 2 and "tl.load" not in body
        assert "tlx.async_wait_group {pendings = 1}" in body            # 3 stages: one tile ahead in flight
        assert body.count("tlx.async_dot ") == 4
        assert "arith.add" not in [line.split("=")[1].split()[0] for line in body.splitlines()
                                   if "tensor<128x64xf32" in line and "=" in line]
    outside = text.count("tlx.local_store") - sum(b.count("tlx.local_store") for b in loops)
    assert outside == 2                            # k and v, once each for both loops
    # dv and dk accumulate in the wgmma: the dot of p @ g takes the carried dv
    assert re.search(r"tlx\.async_dot %\w+, %\w+, %dv_\d+", text)
    # rings of 3 for qT and g of each loop; the second loop's share the first loop's bytes
    allocs = re.findall(r"tlx\.local_alloc(?: %(\w+))? \{[^}]*offset = (\d+)[^}]*\} : "
                        r"memdesc<(\d+)x(\d+)xf16, smem, num=(\d)>", text)
    assert sorted(int(n) for *_, n in allocs).count(3) == 4
    assert sum(1 for reused, *_ in allocs if reused) >= 2
    total = sum(int(r) * int(c) * 2 * int(n) for _, _, r, c, n in allocs)
    shared = int(re.search(r"shared_bytes = (\d+)", text).group(1))
    assert shared <= total - 12288, (shared, total)


@pytest.mark.parametrize("n_rows, num_stages", [(64, None), (128, 2), (128, 5)])
def test_kv_grad_interpreter_same_before_and_after(n_rows, num_stages):
    d, bn = 64, 128
    gen = torch.Generator().manual_seed(n_rows)
    k = (torch.randn(bn * 2, d, generator=gen) * 0.3).half()
    v = (torch.randn(bn * 2, d, generator=gen) * 0.3).half()
    q = (torch.randn(n_rows, d, generator=gen) * 0.3).half()
    g = (torch.randn(n_rows, d, generator=gen) * 0.3).half()
    outs = []
    for rewrite in (False, True):
        dk = torch.full((bn * 2, d), float("nan"))
        dv = torch.full((bn * 2, d), float("nan"))
        module = _interpret(K.kv_grad, (2,), (k, v, q, g, dk, dv, n_rows), KV_META, rewrite, num_stages=num_stages)
        outs.append((dk, dv))
    assert "tlx.async_dot" in str(module) and "tl.dot" not in str(module) and "tlx.async_load" in str(module)
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    # float64 reference, the fp16 roundings of p and ds as the kernel does them
    kd, vd, qd, gd = (x.double() for x in (k, v, q, g))
    p = torch.exp2(kd @ qd.T * 0.05)
    t = vd @ gd.T
    ref_dv = p.half().double() @ gd
    ref_dk = (p * t).half().double() @ qd
    for got, ref in ((outs[1][0], ref_dk), (outs[1][1], ref_dv)):
        assert ((got.double() - ref).norm() / ref.norm()).item() < 2e-3


@pytest.mark.parametrize("bad", [0, 1])
def test_fold_dot_add(bad):
    n = 64
    gen = torch.Generator().manual_seed(3)
    a, b, c = (torch.randn(n, n, generator=gen).half() for _ in range(3))
    x = torch.randn(n, n, generator=gen)
    sig = "a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp16,x_ptr=*fp32,out_ptr=*fp32"
    text = K.add_after_dot.compile(sig, {"N": n, "BAD": bad}, num_warps=4, stages=("ir.opt",)).asm["ir.opt"]
    adds = re.findall(r"= arith\.add .*: tensor<64x64xf32", text)
    assert len(adds) == (2 if bad else 0), text
    outs = []
    for rewrite in (False, True):
        out = torch.full((n, n), float("nan"))
        _interpret(K.add_after_dot, (1,), (a, b, c, x, out), {"N": n, "BAD": bad}, rewrite)
        outs.append(out)
    ref = x.double() + a.double() @ b.double() + (a.double() if bad else c.double()) @ b.double()
    for out in outs:
        assert ((out.double() - ref).norm() / ref.norm()).item() < 1e-5
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-6, atol=1e-4)


def test_fold_dot_add_also_off_hopper():
    sig = "a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp16,x_ptr=*fp32,out_ptr=*fp32"
    text = K.add_after_dot.compile(sig, {"N": 64}, arch="sm_80", num_warps=4, stages=("ir.opt",)).asm["ir.opt"]
    assert not re.findall(r"= arith\.add .*: tensor<64x64xf32", text)
    assert re.search(r"tl\.dot %\w+, %\w+, %\w+", text)


def test_kv_grad_ptxas_no_spills():
    """128x64 accumulators dk and dv over 4 warps (128 registers of the 255) with k and v
    in shared memory: no spills once k/v are stored once and dk/dv accumulate in the wgmma."""
    pytest.importorskip("tlxc.codegen_nvptx.toolchain")
    compiled = K.kv_grad.compile(KV_SIG, KV_META, num_warps=4, stages=("cuda", "cubin", "stats"))
    stats = compiled.asm["stats"]
    assert " 0 bytes spilled" in stats, stats


def test_partial_ring_keeps_every_mma_waited_in_its_iteration():
    """A loop whose A tile also feeds a row sum: only B gets a ring, A is still stored by the
    threads each iteration, so the wgmma is waited (pendings = 0) before the next store --
    with one MMA left in flight, as pipeline-loads does for all-ring loops, check-barriers
    reports the race.  Same numbers on the interpreter before and after."""
    import kernels_dot_wgmma as W
    sig = "a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32,s_ptr=*fp32,K=i32"
    text = W.reused_operand_matmul.compile(sig, {"BM": 64, "BN": 64, "BK": 32}, stages=("ir.opt",)).asm["ir.opt"]
    assert "tlx.async_load" in text and "memdesc<32x64xf16, smem, num=3>" in text
    assert re.findall(r"tlx\.async_dot_wait %\w+ \{pendings = (\d)\}", text) == ["0"]
    k = 96
    a, b = torch.randn(64, k).half(), torch.randn(k, 64).half()
    outs = []
    for rewrite in (False, True):
        c, s = torch.full((64, 64), float("nan")), torch.full((64,), float("nan"))
        _interpret(W.reused_operand_matmul, (1,), (a, b, c, s, k), {"BM": 64, "BN": 64, "BK": 32}, rewrite)
        outs.append((c, s))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    torch.testing.assert_close(outs[1][0], a.float() @ b.float(), rtol=1e-3, atol=1e-3)


def _full_pipeline_interpret(kfn, grid, args, meta, num_warps=4):
    """The whole default pipeline (layouts included) on the interpreter."""
    from tlxc.compiler import default_pipeline
    runner, grid3, memory, values = prepare_launch(kfn, grid, args, meta, num_warps=num_warps)
    module = default_pipeline("sm_90a").run(copy.deepcopy(runner.module),
                                           CompileOptions(num_warps=num_warps, arch="sm_90a"))
    runner = KernelRunner(module)
    for pid in _program_ids(grid3, (1, 1, 1)):
        runner.run_program(pid, grid3, memory, values, None, None)
    return module


def test_row_vectors_reach_the_loop_without_conversions():
    """hoist-conversions moves the conversion of r (loaded before the loop) out of the loop;
    load-in-use-layout loads m (loaded every iteration) directly in the accumulator's column
    layout: the loop body converts nothing and its CUDA has one CTA barrier, the cp.async one."""
    sig = "k_ptr=*fp16,q_ptr=*fp16,m_ptr=*fp32,r_ptr=*fp32,out_ptr=*fp32,n_rows=i32"
    meta = {"BN": 128, "BM": 32, "D": 64}
    compiled = K.row_bias_loop.compile(sig, meta, num_warps=4, stages=("ir.opt", "cuda"))
    loops = _loops(compiled.asm["ir.opt"])
    assert len(loops) == 1 and "tl.convert_layout" not in loops[0]
    assert "tl.convert_layout" not in compiled.asm["ir.opt"]          # r is loaded in its use layout too
    cuda = compiled.asm["cuda"]
    body = cuda[cuda.index("for (int start"):]
    body = body[:body.index("\n  }\n")]
    assert body.count("__syncthreads()") == 1, body
    n = 96
    gen = torch.Generator().manual_seed(7)
    k = (torch.randn(128, 64, generator=gen) * 0.2).half()
    q = (torch.randn(n, 64, generator=gen) * 0.2).half()
    m, r = torch.randn(n, generator=gen), torch.randn(128, generator=gen)
    outs = []
    for full in (False, True):
        out = torch.full((128, 32), float("nan"))
        args = (k, q, m, r, out, n)
        if full:
            _full_pipeline_interpret(K.row_bias_loop, (1,), args, meta)
        else:
            _interpret(K.row_bias_loop, (1,), args, meta, False)
        outs.append(out)
    assert torch.equal(outs[0], outs[1])
    s = k.double() @ q.double().T
    ref = sum(torch.exp2(s[:, j:j + 32] - m.double()[j:j + 32][None, :] + r.double()[:, None]) for j in range(0, n, 32))
    assert ((outs[1].double() - ref).norm() / ref.norm()).item() < 1e-3


def test_two_warpgroups_one_barrier_after_a_run_of_dot_waits():
    """kv_grad on 8 warps (two warpgroups): each loop waits its four MMAs in turn with no
    shared-memory write between the waits, so only the last wait of the run gets the barrier
    that orders the warpgroups' retired reads before the ring's refill (was one per wait)."""
    cuda = K.kv_grad.compile(KV_SIG, KV_META, num_warps=8, stages=("cuda",)).asm["cuda"]
    after_wait = re.findall(r"wgmma_wait_group<[^;]*;\n\s*__syncthreads\(\);", cuda)
    waits = re.findall(r"wgmma_wait_group<", cuda)
    assert len(waits) >= 8
    assert len(after_wait) == 2, cuda       # one per loop
