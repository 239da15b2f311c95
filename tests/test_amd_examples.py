"""Every example for AMD (issue 24): the arch-neutral ones and the AMD ones compile for gfx942 and
gfx950 to HIP and an offline code object that passes its checks (target, LDS within the limit, no
scratch, the instruction classes the kernel must have); the NVIDIA-only ones are refused with a
located error.  The AMD GEMMs and the attention example also run on the CPU emulation of their
HIP against torch (the norms and softmax: tests/test_amd_emulation.py)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from tlxc.cli import load_module, main, select_jobs, specialize_jobs
from tlxc.codegen_amdgcn import toolchain
from tlxc.codegen_amdgcn.emu import run as emu
from tlxc.compiler import compile_kernel
from tlxc.errors import TlxcError
from tlxc.runtime.hip import emulate

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))
ARCHS = ("gfx942", "gfx950")
needs_toolchain = pytest.mark.skipif(not toolchain.available(), reason="the offline AMD toolchain (ziglang) is not installed")
needs_cxx = pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")

# example -> instruction classes its code objects must contain (regular expressions on mnemonics)
AMD_EXAMPLES = {
    "vector_add": [r"global_load_dword\w*", r"global_store_dword\w*"],
    "softmax": [r"v_exp_f32\w*", r"ds_swizzle_b32|v_\w+_dpp"],
    "custom_op": [r"v_exp_f32\w*"],
    "rmsnorm": [r"v_sqrt_f32\w*|v_rsq_f32\w*", r"ds_swizzle_b32|v_\w+_dpp"],
    "layernorm": [r"v_sqrt_f32\w*|v_rsq_f32\w*", r"ds_swizzle_b32|v_\w+_dpp"],
    "matmul": [r"v_mfma_f32_\w+bf16\w*"],
    "attention_fwd": [r"v_mfma_f32_\w+f16", r"v_exp_f32\w*"],
    "amd_gemm_pipelined": [r"v_mfma_f32_\w+f16", "s_barrier", r"ds_read\w*"],
    "amd_gemm_pingpong": [r"v_mfma_f32_\w+f16", "s_setprio", "s_barrier"],
}
# example -> why AMD refuses it (what the error says; None: any located error, e.g. the 160 KiB LDS limit)
NVIDIA_ONLY = {
    "blackwell_gemm_ws": "tensor memory", "flash_attention_fwd": None, "hopper_gemm_fp8": None,
    "hopper_gemm_ws": None, "hopper_gemm_ws_pingpong": None, "ws_pingpong": "warp specialization",
    "ws_rmsnorm": "warp specialization", "ws_vector_add": "warp specialization",
}


def test_every_example_is_classified():
    assert {p.stem for p in EXAMPLES} == set(AMD_EXAMPLES) | set(NVIDIA_ONLY)


def _jobs(path: Path):
    module = load_module(str(path))
    jobs = select_jobs(module, str(path), None)
    specialize_jobs(jobs, {}, {}, {}, module)
    return [job for job in jobs if job.spec is not None]


@needs_toolchain
@pytest.mark.parametrize("arch", ARCHS)
def test_every_example_compiles_for_amd(arch):
    for path in EXAMPLES:
        for job in _jobs(path):
            if path.stem in NVIDIA_ONLY:
                with pytest.raises(TlxcError, match=NVIDIA_ONLY[path.stem]) as info:
                    compile_kernel(job.kfn, job.spec, arch=arch, num_warps=job.num_warps, stages=("hip",))
                assert info.value.loc is not None, (path.stem, info.value)
                continue
            compiled = compile_kernel(job.kfn, job.spec, arch=arch, num_warps=job.num_warps, stages=("hip", "hsaco"))
            try:
                toolchain.check_code_object(toolchain.CompiledHip(
                    compiled.asm["hsaco"], compiled.asm["amdgcn"], "", arch, 0.0,
                    toolchain.parse_resources(compiled.asm["amdgcn"])), expect=AMD_EXAMPLES[path.stem],
                    forbid=[r"scratch_\w+"])
            except toolchain.CodeObjectError as exc:
                raise AssertionError(f"examples/{path.name} ({job.name}) for {arch}: {exc}") from None


@needs_toolchain
def test_the_cli_writes_hip_and_a_code_object(tmp_path, capsys):
    code = main(["compile", str(ROOT / "examples" / "amd_gemm_pingpong.py"), "--arch", "gfx950", "--emit",
                 "hip,hsaco", "-o", str(tmp_path)])
    assert code == 0, capsys.readouterr().err
    hip, hsaco = tmp_path / "gemm_pingpong_kernel.hip", tmp_path / "gemm_pingpong_kernel.hsaco"
    assert 'extern "C" __global__' in hip.read_text() and "tlx_s_setprio<1>();" in hip.read_text()
    assert hsaco.read_bytes()[:4] == b"\x7fELF"


def _example(name):
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"amd_examples_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


@needs_cxx
@pytest.mark.parametrize("arch", ARCHS)
def test_pipelined_gemm_example_on_the_emulation(arch):
    """M not a tile multiple; K and N multiples of 16, so gfx950 copies straight to LDS
    (global_load_lds_dwordx4 in its code object) and gfx942 stages through registers."""
    mod = _example("amd_gemm_pipelined")
    m, n, k = 70, 80, 96
    a, b = torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)
    c = torch.full((m, n), float("nan"), dtype=torch.float16)
    compiled = emulate(mod.gemm_pipelined_kernel, mod.grid_of(m, n), a, b, c, m, n, k, arch=arch,
                       code_object=toolchain.available())
    ref = a.double() @ b.double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    assert torch.isfinite(c).all() and err < 2 * torch.finfo(torch.float16).eps, err
    if toolchain.available():
        direct = arch == "gfx950"
        toolchain.check_code_object(toolchain.CompiledHip(
            compiled.asm["hsaco"], compiled.asm["amdgcn"], "", arch, 0.0,
            toolchain.parse_resources(compiled.asm["amdgcn"])),
            expect=[r"v_mfma_f32_32x32x\d+_?f16", "global_load_lds_dwordx4" if direct else r"ds_write\w*"],
            forbid=[] if direct else ["global_load_lds_dwordx4"])


@needs_cxx
@pytest.mark.parametrize("arch", ARCHS)
def test_attention_example_on_the_emulation(arch):
    mod = _example("attention_fwd")
    bh, s, d = 2, 100, 64
    q, k, v = (torch.randn(bh, s, d, dtype=torch.float16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    emulate(mod.attention_fwd_kernel, (2, bh), q, k, v, o, s, d ** -0.5, arch=arch)
    ref = mod.reference(q, k, v)
    err = ((o.double() - ref).norm() / ref.norm()).item()
    assert torch.isfinite(o).all() and err < 4 * torch.finfo(torch.float16).eps, err


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_the_examples_on_nvidia(arch):
    """attention_fwd and amd_gemm_pipelined are arch-neutral: CUDA and a cubin; amd_gemm_pingpong's
    warp-pipeline stages are AMD-only: a located error."""
    from tlxc.errors import CompilationError
    for name in ("attention_fwd", "amd_gemm_pipelined"):
        for job in _jobs(ROOT / "examples" / f"{name}.py"):
            compiled = compile_kernel(job.kfn, job.spec, arch=arch, num_warps=job.num_warps, stages=("cuda", "cubin"))
            assert compiled.asm["cubin"][:4] == b"\x7fELF"
    (job,) = _jobs(ROOT / "examples" / "amd_gemm_pingpong.py")
    with pytest.raises(CompilationError, match="warp_pipeline_stage .*gfx942 / gfx950 only") as info:
        compile_kernel(job.kfn, job.spec, arch=arch, num_warps=job.num_warps, stages=("cuda",))
    assert info.value.loc is not None
