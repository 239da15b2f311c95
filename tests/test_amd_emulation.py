"""The generated HIP, run on the CPU: tlxc compiles an example for gfx942 / gfx950, the host g++
compiles that same text against the emulation header (codegen_amdgcn/emu/tlx_hip_emu.h), and the
result is compared with torch in float64.  What this proves and what it cannot: docs/codegen.md,
"The AMD backend"."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
import torch

import tlxc
import tlxc.language as tl
import tlxc.language.tlx as tlx
from tlxc.codegen_amdgcn import toolchain
from tlxc.codegen_amdgcn.emu import run as emu
from tlxc.compiler import compile_kernel
from tlxc.frontend.specialize import specialization_from_args

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")


def example(name):
    spec = importlib.util.spec_from_file_location(f"amd_example_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "examples"))
    return module


def emulate(kfn, grid, *args, arch="gfx942", num_warps=4, code_object=False, check_barriers=True, **kwargs):
    """Launch ``kfn`` as the GPU launcher would, but on the emulation of its generated HIP."""
    bound = kfn.signature.bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    spec = specialization_from_args(kfn, arguments)
    stages = ("hip", "hsaco") if code_object else ("hip",)
    compiled = compile_kernel(kfn, spec, arch=arch, num_warps=num_warps, stages=stages, check_barriers=check_barriers)
    info = compiled.metadata
    runtime = [arguments[name] for name, _ in spec.runtime_params()]
    module = emu.build(compiled.asm["hip"], [info["name"]], arch=arch)
    module.run(info["name"], runtime, grid=grid, threads=info["threads"], kinds=info["params"])
    return compiled


def close(out, ref, dtype_eps, ulps=2.0):
    err = (out.double() - ref).norm() / ref.norm()
    assert torch.isfinite(out.double()).all(), "the kernel left elements unwritten (NaN poison)"
    assert err <= ulps * dtype_eps, f"normwise relative error {err:.3g} > {ulps} eps ({dtype_eps:.3g})"


ARCHS = ("gfx942", "gfx950")


@pytest.mark.parametrize("arch", ARCHS)
def test_vector_add(arch):
    mod = example("vector_add")
    n = 3000                          # not a multiple of the block
    x, y = torch.randn(n), torch.randn(n)
    out = torch.full_like(x, float("nan"))
    block = 1024
    emulate(mod.add_kernel, ((n + block - 1) // block,), x, y, out, n, BLOCK=block, arch=arch)
    assert torch.equal(out, x + y)


@pytest.mark.parametrize("arch", ARCHS)
def test_softmax(arch):
    mod = example("softmax")
    x = torch.randn(5, 300, dtype=torch.bfloat16)
    out = torch.full_like(x, float("nan"))
    emulate(mod.softmax_kernel, (5,), out, x, x.stride(0), out.stride(0), 300, BLOCK=512, arch=arch)
    close(out, torch.softmax(x.double(), dim=-1), torch.finfo(torch.bfloat16).eps)


@pytest.mark.parametrize("arch", ARCHS)
def test_rmsnorm(arch):
    mod = example("rmsnorm")
    x = torch.randn(4, 700, dtype=torch.bfloat16)
    w = torch.randn(700, dtype=torch.bfloat16)
    out = torch.full_like(x, float("nan"))
    emulate(mod.rmsnorm_kernel, (4,), out, x, w, x.stride(0), out.stride(0), 700, 1e-6, BLOCK=1024, arch=arch,
            num_warps=8)
    close(out, mod.reference(x, w, 1e-6), torch.finfo(torch.bfloat16).eps)


@pytest.mark.skipif(not toolchain.available(), reason="the offline AMD toolchain (ziglang) is not installed")
@pytest.mark.parametrize("arch", ARCHS)
def test_the_emulated_text_is_the_compiled_text(arch):
    mod = example("softmax")
    x = torch.randn(3, 100, dtype=torch.bfloat16)
    out = torch.full_like(x, float("nan"))
    compiled = emulate(mod.softmax_kernel, (3,), out, x, x.stride(0), out.stride(0), 100, BLOCK=128, arch=arch,
                       code_object=True)
    close(out, torch.softmax(x.double(), dim=-1), torch.finfo(torch.bfloat16).eps)
    summary = toolchain.check_code_object(toolchain.CompiledHip(
        compiled.asm["hsaco"], compiled.asm["amdgcn"], "", arch, 0.0,
        toolchain.parse_resources(compiled.asm["amdgcn"])), expect=[r"v_exp_f32\w*", r"ds_swizzle_b32|v_\w+_dpp"])
    assert summary["resources"][compiled.metadata["name"]]["lds_bytes"] == compiled.metadata["lds_bytes"]


@pytest.mark.parametrize("arch", ARCHS)
def test_layernorm(arch):
    mod = example("layernorm")
    x = (torch.randn(3, 1000) * 2 + 1).to(torch.bfloat16)
    w, b = torch.randn(1000, dtype=torch.bfloat16), torch.randn(1000, dtype=torch.bfloat16)
    out = torch.full_like(x, float("nan"))
    emulate(mod.layernorm_kernel, (3,), out, x, w, b, x.stride(0), out.stride(0), 1000, 1e-5, BLOCK=1024, arch=arch)
    close(out, mod.reference(x, w, b, 1e-5), torch.finfo(torch.bfloat16).eps)


def test_every_arch_neutral_example_compiles_to_hip():
    """What the AMD backend takes today (blocked tl.* kernels) and what it refuses with a located error."""
    from tlxc.cli import load_module, select_jobs, specialize_jobs
    from tlxc.errors import CompilationError
    made, refused = [], []
    for name in ("vector_add", "softmax", "rmsnorm", "layernorm", "matmul", "ws_vector_add"):
        path = str(ROOT / "examples" / f"{name}.py")
        module = load_module(path)
        jobs = select_jobs(module, path, None)
        specialize_jobs(jobs, {}, {}, {}, module)
        for job in jobs:
            try:
                compile_kernel(job.kfn, job.spec, arch="gfx942", num_warps=job.num_warps, stages=("hip",))
                made.append(name)
            except CompilationError as exc:
                assert exc.loc is not None or "AMD" in str(exc), exc
                refused.append(name)
    assert {"vector_add", "softmax", "rmsnorm", "layernorm", "matmul"} <= set(made), (made, refused)
    assert {"ws_vector_add"} <= set(refused), (made, refused)


@pytest.mark.parametrize("arch, block, warps", [("gfx942", (64, 64, 32), 4), ("gfx950", (32, 64, 32), 2),
                                                 ("gfx942", (16, 32, 16), 1)])
def test_matmul_on_mfma(arch, block, warps):
    """The matmul example (bf16, f32 accumulate): M, N, K not multiples of the tile; MFMA 32x32x8
    or 16x16x16 bf16 by the tile."""
    mod = example("matmul")
    m, n, k = 70, 90, 80
    a, b = torch.randn(m, k, dtype=torch.bfloat16), torch.randn(k, n, dtype=torch.bfloat16)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    bm, bn, bk = block
    grid = (((m + bm - 1) // bm) * ((n + bn - 1) // bn),)
    compiled = emulate(mod.matmul_kernel, grid, a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0),
                       b.stride(1), out.stride(0), out.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=2,
                       arch=arch, num_warps=warps)
    assert "tlx_mfma_f32_" in compiled.asm["hip"]
    close(out, a.double() @ b.double(), torch.finfo(torch.bfloat16).eps)


@tlxc.kernel
def f16_dot_tile(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    c = tl.load(c_ptr + rm[:, None] * BN + rn[None, :])
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b, c))


@pytest.mark.parametrize("arch, shape, warps, instruction", [
    ("gfx942", (32, 64, 16), 2, "32x32x8_f16"), ("gfx942", (16, 16, 32), 1, "16x16x16_f16"),
    ("gfx950", (64, 32, 32), 4, "32x32x16_f16"), ("gfx950", (16, 32, 64), 2, "16x16x32_f16"),
    ("gfx942", (32, 32, 16), 1, "32x32x8_bf16"), ("gfx950", (32, 64, 32), 2, "32x32x16_bf16"),
    ("gfx950", (16, 16, 64), 1, "16x16x32_bf16")])
def test_f16_dot_picks_the_archs_mfma(arch, shape, warps, instruction):
    bm, bn, bk = shape
    dtype = torch.bfloat16 if instruction.endswith("bf16") else torch.float16
    a, b = torch.randn(bm, bk, dtype=dtype), torch.randn(bk, bn, dtype=dtype)
    c = torch.randn(bm, bn)
    ref = a.double() @ b.double() + c.double()
    compiled = emulate(f16_dot_tile, (1,), a, b, c, BM=bm, BN=bn, BK=bk, arch=arch, num_warps=warps,
                       code_object=toolchain.available())
    assert f"tlx_mfma_f32_{instruction}(" in compiled.asm["hip"]
    assert torch.allclose(c.double(), ref, rtol=1e-5, atol=1e-4), (c.double() - ref).abs().max()
    if toolchain.available():
        assert re.search(f"v_mfma_f32_{instruction.replace('_bf16', '_?bf16')}", compiled.asm["amdgcn"])


@tlxc.kernel
def lds_ring_gemm(a_ptr, b_ptr, c_ptr, M: tl.int32, N: tl.int32, K: tl.int32, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr, NUM_BUFFERS: tl.constexpr):
    """A GEMM whose operands pass through a ring of LDS buffers (tlx.local_alloc / local_store /
    local_load) before the MFMA dot: the barriers between the waves' writes and reads are the codegen's."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_buf = tlx.local_alloc((BM, BK), tl.float16, NUM_BUFFERS)
    b_buf = tlx.local_alloc((BK, BN), tl.float16, NUM_BUFFERS)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(tl.cdiv(K, BK)):
        s = k % NUM_BUFFERS
        kk = k * BK + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        tlx.local_store(tlx.local_view(a_buf, s), a)
        tlx.local_store(tlx.local_view(b_buf, s), b)
        acc = tl.dot(tlx.local_load(tlx.local_view(a_buf, s)), tlx.local_load(tlx.local_view(b_buf, s)), acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("arch", ARCHS)
def test_lds_ring_gemm(arch):
    m, n, k = 80, 70, 100
    a, b = torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)
    c = torch.full((m, n), float("nan"))
    compiled = emulate(lds_ring_gemm, (2, 2), a, b, c, m, n, k, BM=64, BN=64, BK=32, NUM_BUFFERS=2, arch=arch,
                       code_object=toolchain.available())
    ref = a.double() @ b.double()
    assert torch.allclose(c.double(), ref, rtol=1e-5, atol=1e-3), (c.double() - ref).abs().max()
    if toolchain.available():
        summary = toolchain.check_code_object(toolchain.CompiledHip(
            compiled.asm["hsaco"], compiled.asm["amdgcn"], "", arch, 0.0,
            toolchain.parse_resources(compiled.asm["amdgcn"])),
            expect=[r"v_mfma_f32_32x32x(8|16)_f16", r"ds_write_b\d+|ds_write2\w*", r"ds_read_b\d+|ds_read2\w*",
                    "s_barrier"])
        assert summary["resources"][compiled.metadata["name"]]["lds_bytes"] >= 2 * 2 * 64 * 32 * 2


@tlxc.kernel
def async_pipelined_gemm(a_ptr, b_ptr, c_ptr, M: tl.int32, N: tl.int32, K: tl.int32, BM: tl.constexpr,
                         BN: tl.constexpr, BK: tl.constexpr):
    """A two-stage LDS pipeline: tlx.async_load of step k+1 is issued before the MFMA dot of step k."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_buf = tlx.local_alloc((BM, BK), tl.float16, 2)
    b_buf = tlx.local_alloc((BK, BN), tl.float16, 2)
    steps = tl.cdiv(K, BK)
    tlx.async_load(a_ptr + rm[:, None] * K + rk[None, :], tlx.local_view(a_buf, 0),
                   mask=(rm[:, None] < M) & (rk[None, :] < K))
    tlx.async_load(b_ptr + rk[:, None] * N + rn[None, :], tlx.local_view(b_buf, 0),
                   mask=(rk[:, None] < K) & (rn[None, :] < N))
    tlx.async_load_commit_group()
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(steps):
        nk = (k + 1) * BK + rk
        nxt = (k + 1) % 2
        live = k + 1 < steps
        tlx.async_load(a_ptr + rm[:, None] * K + nk[None, :], tlx.local_view(a_buf, nxt),
                       mask=(rm[:, None] < M) & (nk[None, :] < K) & live)
        tlx.async_load(b_ptr + nk[:, None] * N + rn[None, :], tlx.local_view(b_buf, nxt),
                       mask=(nk[:, None] < K) & (rn[None, :] < N) & live)
        tlx.async_load_commit_group()
        tlx.async_load_wait_group(1)
        cur = k % 2
        acc = tl.dot(tlx.local_load(tlx.local_view(a_buf, cur)), tlx.local_load(tlx.local_view(b_buf, cur)), acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("n, k", [(90, 130), (96, 96)])
def test_async_pipelined_gemm(arch, n, k):
    """K and N divisible by 16 (rows 16-byte aligned): gfx950 copies straight to LDS
    (global_load_lds_dwordx4; masked-off rows load zeros); otherwise, and on gfx942, register-staged."""
    m = 70
    a, b = torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)
    c = torch.full((m, n), float("nan"))
    compiled = emulate(async_pipelined_gemm, (2, 2), a, b, c, m, n, k, BM=64, BN=64, BK=32, arch=arch,
                       code_object=toolchain.available())
    ref = a.double() @ b.double()
    assert torch.allclose(c.double(), ref, rtol=1e-5, atol=1e-3), (c.double() - ref).abs().max()
    direct = arch == "gfx950" and k % 16 == 0 and n % 16 == 0
    assert ("tlx_global_load_lds_b128(" in compiled.asm["hip"].split('extern "C"')[-1]) == direct
    if toolchain.available():
        asm = compiled.asm["amdgcn"]
        assert "v_mfma_f32_32x32x" in asm and ("global_load_lds_dwordx4" in asm) == direct
        assert direct or "ds_write" in asm


@tlxc.kernel
def barrier_rounds(x_ptr, out_ptr, ROUNDS: tl.constexpr, BLOCK: tl.constexpr):
    """TLX mbarriers on AMD (LDS software barriers): one arrival per round, waits on its parity."""
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    bars = tlx.alloc_barriers(1, arrive_count=1)
    bar = tlx.local_view(bars, 0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for r in range(ROUNDS):
        tlx.local_store(tlx.local_view(buf, 0), tl.load(x_ptr + r * BLOCK + offs) * (r + 1))
        tlx.barrier_arrive(bar)
        tlx.barrier_wait(bar, r % 2)
        acc += tlx.local_load(tlx.local_view(buf, 0))
    tl.store(out_ptr + offs, acc)


@tlxc.kernel
def barrier_never_completes(out_ptr, BLOCK: tl.constexpr):
    bars = tlx.alloc_barriers(1, arrive_count=2)
    tlx.barrier_arrive(tlx.local_view(bars, 0))
    tlx.barrier_wait(tlx.local_view(bars, 0), 0)        # needs a second arrival that never comes
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.zeros((BLOCK,), tl.float32))


@pytest.mark.parametrize("arch", ARCHS)
def test_lds_software_barriers(arch):
    x = torch.randn(5, 256)
    out = torch.full((256,), float("nan"))
    emulate(barrier_rounds, (1,), x, out, ROUNDS=5, BLOCK=256, arch=arch, code_object=toolchain.available())
    want = (x * torch.arange(1, 6)[:, None]).sum(0)
    assert torch.allclose(out, want, rtol=1e-6, atol=1e-5)
    # tlxc check refuses this kernel; past the checker, the emulation reports the endless wait
    with pytest.raises(emu.EmulationError, match="spin-wait"):
        emulate(barrier_never_completes, (1,), torch.empty(64), BLOCK=64, arch=arch, check_barriers=False)


@tlxc.kernel
def async_dot_gemm(a_ptr, b_ptr, c_ptr, M: tl.int32, N: tl.int32, K: tl.int32, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr, A_IN_REGISTERS: tl.constexpr):
    """TLX's Hopper-style loop (local_store, async_dot, async_dot_wait(1)); on AMD the dot is a
    synchronous MFMA (passes/dot_mfma.py), A from LDS or from registers."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_buf = tlx.local_alloc((BM, BK), tl.float16, 2)
    b_buf = tlx.local_alloc((BK, BN), tl.float16, 2)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(tl.cdiv(K, BK)):
        s = k % 2
        kk = k * BK + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        tlx.local_store(tlx.local_view(a_buf, s), a)
        tlx.local_store(tlx.local_view(b_buf, s), tl.load(b_ptr + kk[:, None] * N + rn[None, :],
                                                           mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0))
        if A_IN_REGISTERS:
            acc = tlx.async_dot(a, tlx.local_view(b_buf, s), acc)
        else:
            acc = tlx.async_dot(tlx.local_view(a_buf, s), tlx.local_view(b_buf, s), acc)
        acc = tlx.async_dot_wait(1, acc)
    acc = tlx.async_dot_wait(0, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("a_in_registers", [False, True])
def test_tlx_async_dot_on_mfma(arch, a_in_registers):
    m, n, k = 70, 64, 96
    a, b = torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)
    c = torch.full((m, n), float("nan"))
    compiled = emulate(async_dot_gemm, (2, 1), a, b, c, m, n, k, BM=64, BN=64, BK=32, A_IN_REGISTERS=a_in_registers,
                       arch=arch, code_object=toolchain.available())
    ref = a.double() @ b.double()
    assert torch.allclose(c.double(), ref, rtol=1e-5, atol=1e-3), (c.double() - ref).abs().max()
    assert "tlx_mfma_f32_32x32x" in compiled.asm["hip"]
    if toolchain.available():
        assert "v_mfma_f32_32x32x" in compiled.asm["amdgcn"]


@tlxc.kernel
def async_dot_use_acc(a_ptr, c_ptr, BM: tl.constexpr):
    buf = tlx.local_alloc((BM, BM), tl.float16, 1)
    r = tl.arange(0, BM)
    tlx.local_store(tlx.local_view(buf, 0), tl.load(a_ptr + r[:, None] * BM + r[None, :]))
    acc = tlx.async_dot(tlx.local_view(buf, 0), tlx.local_view(buf, 0), tl.zeros((BM, BM), tl.float32),
                        use_acc=False)
    tl.store(c_ptr + r[:, None] * BM + r[None, :], tlx.async_dot_wait(0, acc))


def test_async_dot_use_acc_is_refused_on_amd():
    from tlxc.errors import CompilationError
    with pytest.raises(CompilationError, match=r"use_acc=.*not supported on gfx950") as info:
        emulate(async_dot_use_acc, (1,), torch.randn(64, 64, dtype=torch.float16), torch.empty(64, 64), BM=64,
                arch="gfx950")
    assert info.value.loc is not None


@tlxc.kernel
def tma_copy(desc, out_ptr):
    buf = tlx.local_alloc((64, 64), tl.float16, 1)
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(tlx.local_view(bars, 0), 8192)
    tlx.async_descriptor_load(desc, tlx.local_view(buf, 0), [0, 0], tlx.local_view(bars, 0))
    tlx.barrier_wait(tlx.local_view(bars, 0), 0)
    r = tl.arange(0, 64)
    tl.store(out_ptr + r[:, None] * 64 + r[None, :], tlx.local_load(tlx.local_view(buf, 0)))


@tlxc.kernel
def cluster_sync(out_ptr):
    tlx.cluster_barrier()
    tl.store(out_ptr + tl.arange(0, 64), tl.zeros((64,), tl.float32))


@pytest.mark.parametrize("arch", ARCHS)
def test_nvidia_only_hardware_is_refused_at_the_users_line(arch):
    from tlxc.descriptors import TensorDescriptor
    from tlxc.errors import CompilationError
    x = torch.randn(64, 64, dtype=torch.float16)
    cases = [(tma_copy, (TensorDescriptor.from_tensor(x, [64, 64]), torch.empty(64, 64, dtype=torch.float16)),
              "TMA"), (cluster_sync, (torch.empty(64),), "tlx.cluster_barrier is not supported on gfx9")]
    for kfn, args, message in cases:
        bound = kfn.signature.bind(*args)
        bound.apply_defaults()
        with pytest.raises(CompilationError, match=message) as info:
            compile_kernel(kfn, specialization_from_args(kfn, dict(bound.arguments)), arch=arch, stages=("hip",))
        assert info.value.loc is not None and info.value.loc.line > 0
