"""AMD warp-pipeline ("ping-pong") stages (issue 24): ``tlx.warp_pipeline_stage`` in the frontend,
the interpreter and the HIP backend (s_setprio, sched_barrier, the phase-shifted barriers), the
ping-pong MFMA GEMM example on the CPU emulation of its generated HIP, and its code objects."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

import tlxc
import tlxc.language as tl
import tlxc.language.tlx as tlx
from tlxc.codegen_amdgcn import toolchain
from tlxc.codegen_amdgcn.emu import run as emu
from tlxc.compiler import compile_kernel, frontend
from tlxc.errors import CompilationError, TlxcError
from tlxc.frontend.specialize import specialization_from_types
from tlxc.interpreter import interpret
from tlxc.ir.types import PointerType, f32
from tlxc.runtime.hip import emulate

ROOT = Path(__file__).resolve().parent.parent
ARCHS = ("gfx942", "gfx950")
needs_cxx = pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")


def example():
    path = ROOT / "examples" / "amd_gemm_pingpong.py"
    spec = importlib.util.spec_from_file_location("amd_gemm_pingpong_example", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


@tlxc.kernel
def staged_sum(x_ptr, out_ptr, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(STEPS):
        with tlx.warp_pipeline_stage("load", priority=1):
            x = tl.load(x_ptr + i * BLOCK + offs)
        with tlx.warp_pipeline_stage("add"):
            acc += x * (i + 1)
    tl.store(out_ptr + offs, acc)


def _spec(kfn, **constexprs):
    return specialization_from_types(kfn, {"x_ptr": PointerType(f32), "out_ptr": PointerType(f32)}, constexprs)


def test_stages_are_marked_and_the_loop_bracketed():
    module = frontend(staged_sum, _spec(staged_sum, STEPS=3, BLOCK=128), arch="gfx950")
    names = [op.name for op in module.kernels[0].walk() if op.name.startswith("tlx.warp_pipeline")]
    assert names == ["tlx.warp_pipeline_enter", "tlx.warp_pipeline_begin", "tlx.warp_pipeline_end",
                     "tlx.warp_pipeline_begin", "tlx.warp_pipeline_end", "tlx.warp_pipeline_exit"]
    begins = [op for op in module.kernels[0].walk() if op.name == "tlx.warp_pipeline_begin"]
    assert [(op.attrs["label"], op.attrs["priority"], op.attrs["stage"]) for op in begins] == [
        ("load", 1, 0), ("add", None, 1)]


@pytest.mark.parametrize("arch", ["gfx950", "sm_90a"])
def test_the_interpreter_runs_the_stages_in_program_order(arch):
    x = torch.randn(3, 128)
    out = torch.full((128,), float("nan"))
    interpret(staged_sum, (1,), (x, out), {"STEPS": 3, "BLOCK": 128}, arch=arch)
    assert torch.allclose(out, (x * torch.tensor([1.0, 2.0, 3.0])[:, None]).sum(0))


def test_the_hip_has_the_phase_shift_and_the_priorities():
    hip = compile_kernel(staged_sum, _spec(staged_sum, STEPS=3, BLOCK=256), arch="gfx942", num_warps=4,
                         stages=("hip",)).asm["hip"].split('extern "C"')[-1]
    enter, exit_ = hip.index("if (warp >= 2) tlx_syncthreads();"), hip.index("if (warp < 2) tlx_syncthreads();")
    loop = hip[enter:exit_]
    assert loop.count("tlx_syncthreads();") == 1 + 2          # the shift, then one barrier per stage end
    assert loop.count("tlx_sched_barrier<0>();") == 4 and loop.count("tlx_s_setprio<1>();") == 1
    assert "tlx_s_setprio<0>();" in hip[exit_:]


def test_nvidia_refuses_the_stages_at_the_users_line():
    with pytest.raises(CompilationError, match="warp_pipeline_stage.*gfx942 / gfx950 only") as info:
        compile_kernel(staged_sum, _spec(staged_sum, STEPS=2, BLOCK=128), arch="sm_90a", stages=("cuda",))
    assert info.value.loc is not None and info.value.loc.line > 0


@tlxc.kernel
def stage_outside_a_loop(x_ptr, out_ptr, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    with tlx.warp_pipeline_stage("load"):
        x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x)


@tlxc.kernel
def nested_stages(x_ptr, out_ptr, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    for i in range(STEPS):
        with tlx.warp_pipeline_stage("outer"):
            with tlx.warp_pipeline_stage("inner"):
                tl.store(out_ptr + offs, tl.load(x_ptr + offs))


@tlxc.kernel
def bad_priority(x_ptr, out_ptr, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    for i in range(STEPS):
        with tlx.warp_pipeline_stage("s", priority=4):
            tl.store(out_ptr + offs, tl.load(x_ptr + offs))


@pytest.mark.parametrize("kfn, message", [
    (stage_outside_a_loop, "must sit directly in the body of a for loop"),
    (nested_stages, "do not nest"),
    (bad_priority, r"priority must be a compile-time 0\.\.3"),
])
def test_misplaced_stages_are_located_errors(kfn, message):
    with pytest.raises(TlxcError, match=message) as info:
        frontend(kfn, _spec(kfn, STEPS=2, BLOCK=64), arch="gfx950")
    assert info.value.loc is not None


@tlxc.kernel
def conflict_inside_a_stage(x_ptr, out_ptr, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(STEPS):
        with tlx.warp_pipeline_stage("both"):
            tlx.local_store(tlx.local_view(buf, 0), tl.load(x_ptr + i * BLOCK + offs))
            acc += tl.flip(tlx.local_load(tlx.local_view(buf, 0)), 0)
    tl.store(out_ptr + offs, acc)


def test_a_barrier_inside_a_stage_is_refused():
    """LDS written and read back by other work-items in one stage needs a barrier inside the stage,
    which would pair the two wave groups' barriers differently: refused at the access."""
    with pytest.raises(CompilationError, match="may only synchronize at its stage ends") as info:
        compile_kernel(conflict_inside_a_stage, _spec(conflict_inside_a_stage, STEPS=2, BLOCK=256), arch="gfx950",
                       stages=("hip",))
    assert "local_load" in str(info.value)


@needs_cxx
@pytest.mark.parametrize("arch", ARCHS)
def test_pingpong_gemm_on_the_emulation(arch):
    """The example's kernel, its generated HIP run on the CPU (the leading wave group runs each stage
    first; direct-to-LDS copies land at the wait), against float64 torch; M not a tile multiple."""
    mod = example()
    m, n, k = 70, 96, 224
    a, b = torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)
    c = torch.full((m, n), float("nan"), dtype=torch.float16)
    compiled = emulate(mod.gemm_pingpong_kernel, mod.grid_of(m, n), a, b, c, m, n, k, arch=arch,
                       code_object=toolchain.available())
    ref = a.double() @ b.double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    assert torch.isfinite(c).all() and err < 2 * torch.finfo(torch.float16).eps, err
    direct = arch == "gfx950"                           # k and n multiples of 16: 16-byte rows
    assert ("tlx_global_load_lds_b128(" in compiled.asm["hip"].split('extern "C"')[-1]) == direct
    if toolchain.available():
        summary = toolchain.check_code_object(toolchain.CompiledHip(
            compiled.asm["hsaco"], compiled.asm["amdgcn"], "", arch, 0.0,
            toolchain.parse_resources(compiled.asm["amdgcn"])),
            expect=["s_setprio", "s_barrier", r"v_mfma_f32_32x32x\d+_?f16",
                    *(["global_load_lds_dwordx4"] if direct else [r"ds_write_b\d+|ds_write2\w*"])],
            forbid=[] if direct else ["global_load_lds_dwordx4"])
        assert summary["resources"][compiled.metadata["name"]]["lds_bytes"] >= 3 * 2 * 64 * 32 * 2
        assert "s_setprio 1" in compiled.asm["amdgcn"] and "s_setprio 0" in compiled.asm["amdgcn"]


@tlxc.kernel
def pingpong_one_stage_short(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr):
    """The example's schedule with the copy of tile t + 1 issued one stage before it is read: wrong
    under ping-pong (the other wave group has not issued, or not waited for, its part yet)."""
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    rm = (pid // num_pid_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (pid % num_pid_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_buf = tlx.local_alloc((BLOCK_M, BLOCK_K), tl.float16, 3)
    b_buf = tlx.local_alloc((BLOCK_K, BLOCK_N), tl.float16, 3)
    tlx.async_load(a_ptr + rm[:, None] * K + rk[None, :], tlx.local_view(a_buf, 0),
                   mask=(rm[:, None] < M) & (rk[None, :] < K))
    tlx.async_load(b_ptr + rk[:, None] * N + rn[None, :], tlx.local_view(b_buf, 0),
                   mask=(rk[:, None] < K) & (rn[None, :] < N))
    tlx.async_load_commit_group()
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for t in range(tl.cdiv(K, BLOCK_K)):
        with tlx.warp_pipeline_stage("lds", priority=1):
            tlx.async_load_wait_group(0)
            a = tlx.local_load(tlx.local_view(a_buf, t % 3))
            b = tlx.local_load(tlx.local_view(b_buf, t % 3))
        with tlx.warp_pipeline_stage("mfma", priority=0):
            kk = (t + 1) * BLOCK_K + rk
            tlx.async_load(a_ptr + rm[:, None] * K + kk[None, :], tlx.local_view(a_buf, (t + 1) % 3),
                           mask=(rm[:, None] < M) & (kk[None, :] < K))
            tlx.async_load(b_ptr + kk[:, None] * N + rn[None, :], tlx.local_view(b_buf, (t + 1) % 3),
                           mask=(kk[:, None] < K) & (rn[None, :] < N))
            tlx.async_load_commit_group()
            acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@needs_cxx
@pytest.mark.parametrize("arch", ARCHS)
def test_the_emulation_catches_a_schedule_one_stage_short(arch):
    m, n, k = 64, 64, 128
    a, b = torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)
    c = torch.full((m, n), float("nan"))
    # the interpreter runs the program in order (no wave groups): right there
    interpret(pingpong_one_stage_short, (1,), (a, b, c, m, n, k), {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32},
              arch=arch)
    assert torch.allclose(c.double(), a.double() @ b.double(), rtol=1e-4, atol=1e-2)
    c.fill_(float("nan"))
    emulate(pingpong_one_stage_short, (1,), a, b, c, m, n, k, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, arch=arch)
    wrong = ~torch.isclose(c.double(), a.double() @ b.double(), rtol=1e-4, atol=1e-2)
    assert wrong.any(), "the emulation ran the one-stage-short schedule without a visible error"


@tlxc.kernel
def fenced_copy(x_ptr, out_ptr, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tlx.amd_sched_barrier(STEPS)
    tl.store(out_ptr + offs, x)


def test_amd_sched_barrier():
    spec = _spec(fenced_copy, STEPS=8, BLOCK=64)
    hip = compile_kernel(fenced_copy, spec, arch="gfx942", stages=("hip",)).asm["hip"]
    assert "tlx_sched_barrier<8>();" in hip and "__builtin_amdgcn_sched_barrier(MASK)" in hip
    x, out = torch.randn(64), torch.full((64,), float("nan"))
    interpret(fenced_copy, (1,), (x, out), {"STEPS": 8, "BLOCK": 64}, arch="gfx942")
    assert torch.equal(out, x)
    with pytest.raises(CompilationError, match="amd_sched_barrier.*gfx942 / gfx950 only"):
        compile_kernel(fenced_copy, spec, arch="sm_90a", stages=("cuda",))
    with pytest.raises(TlxcError, match="bits 0..10"):
        frontend(fenced_copy, _spec(fenced_copy, STEPS=1 << 11, BLOCK=64), arch="gfx942")
