"""NVRTC toolchain: cubins for every target, ptxas resource parsing, failure reports."""
from __future__ import annotations

from pathlib import Path

import pytest

from tlxc.codegen_nvptx import toolchain
from tlxc.codegen_nvptx.toolchain import (
    SUPPORTED_ARCHS,
    compile_cuda,
    excerpt,
    nvrtc_version,
    parse_ptxas_resources,
)
from tlxc.errors import CompilationError, InternalCompilerError

ELF_MAGIC = b"\x7fELF"

VECTOR_ADD = r"""
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""

# Hopper-only instructions, guarded so the same source builds for every target.
HOPPER_PTX = r"""
extern "C" __global__ void __launch_bounds__(384, 1) warp_specialized(float* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  if (threadIdx.x >= 128) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
  } else {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
  }
#endif
  out[threadIdx.x] = 1.0f;
}
"""

STATIC_SMEM = r"""
extern "C" __global__ void reverse(float* data) {
  __shared__ float tile[256];
  tile[threadIdx.x] = data[threadIdx.x];
  __syncthreads();
  data[threadIdx.x] = tile[255 - threadIdx.x];
}
"""


@pytest.fixture(autouse=True)
def _private_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TLXC_CACHE_DIR", str(tmp_path / "cache"))


def test_nvrtc_version_is_cuda_12_or_newer() -> None:
    assert nvrtc_version() >= (12, 0)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_vector_add_compiles_to_cubin(arch: str) -> None:
    compiled = compile_cuda(VECTOR_ADD, arch, ["vadd"])
    assert compiled.cubin.startswith(ELF_MAGIC)
    assert compiled.arch == arch
    assert compiled.ptx is None
    assert compiled.compile_seconds > 0
    usage = compiled.resources["vadd"]
    assert usage["registers"] > 0
    assert usage["spills_bytes"] == 0 and usage["local_bytes"] == 0


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_ptx_of_the_cubin_build_is_the_virtual_arch_build(arch: str, monkeypatch) -> None:
    """``want_ptx`` takes the PTX from the cubin's own NVRTC program (one compile, not two); it is
    the text a compile for the virtual arch gives, and an NVRTC that keeps none still gets one."""
    calls = []
    run = toolchain._run_nvrtc

    def counted(*args, **kwargs):
        calls.append(args[3])
        return run(*args, **kwargs)
    monkeypatch.setattr(toolchain, "_run_nvrtc", counted)
    source = VECTOR_ADD + HOPPER_PTX
    both = compile_cuda(source, arch, ["vadd", "warp_specialized"], want_ptx=True)
    assert calls == ["cubin"]
    ok, _, virtual, _ = run(source, "vadd", toolchain._options(f"--gpu-architecture={toolchain._virtual_arch(arch)}",
                                                              [], False, False), "ptx")
    assert ok and both.ptx == virtual.decode()
    monkeypatch.setattr(toolchain, "_kept_ptx", lambda *args: None)       # an NVRTC without the cubin's PTX
    calls.clear()
    assert compile_cuda(source, arch, ["vadd", "warp_specialized"], want_ptx=True).ptx == both.ptx
    assert calls == ["cubin", "ptx"]


def test_recompiling_still_reports_resources() -> None:
    # NVRTC 12.9+ caches programs and skips ptxas (and its report) on a hit,
    # unless tlxc turns that cache off.
    first = compile_cuda(VECTOR_ADD, "sm_90a", ["vadd"])
    second = compile_cuda(VECTOR_ADD, "sm_90a", ["vadd"])
    assert second.resources == first.resources and second.resources["vadd"]["registers"] > 0
    assert second.cubin == first.cubin


@pytest.mark.parametrize("arch", SUPPORTED_ARCHS)
def test_every_supported_arch_builds(arch: str) -> None:
    assert compile_cuda(VECTOR_ADD, arch, ["vadd"]).cubin.startswith(ELF_MAGIC)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_hopper_inline_ptx(arch: str) -> None:
    compiled = compile_cuda(HOPPER_PTX, arch, ["warp_specialized"], want_ptx=True)
    assert compiled.cubin.startswith(ELF_MAGIC)
    assert compiled.resources["warp_specialized"]["registers"] > 0
    assert f".target {arch}" in compiled.ptx
    if arch == "sm_90a":
        assert "wgmma.fence.sync.aligned" in compiled.ptx
        assert "setmaxnreg.inc.sync.aligned.u32 240" in compiled.ptx


def test_wgmma_is_rejected_without_the_arch_suffix() -> None:
    unguarded = HOPPER_PTX.replace("#if defined(__CUDA_ARCH_FEAT_SM90_ALL)", "#if 1")
    with pytest.raises(InternalCompilerError, match="ptxas"):
        compile_cuda(unguarded, "sm_80", ["warp_specialized"])


def test_static_shared_memory_is_reported() -> None:
    compiled = compile_cuda(STATIC_SMEM, "sm_90a", ["reverse"])
    assert compiled.resources["reverse"]["shared_static"] == 256 * 4


def test_parse_ptxas_resources_reads_every_field() -> None:
    log = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'spilly' for 'sm_90a'
ptxas info    : Function properties for spilly
ptxas         .     1024 bytes stack frame, 96 bytes spill stores, 80 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 1024 bytes cumulative stack size, 512 bytes smem
ptxas info    : Compile time = 25.475 ms
ptxas info    : Compiling entry function 'tiny' for 'sm_90a'
ptxas info    : Function properties for tiny
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers
"""
    assert parse_ptxas_resources(log) == {
        "spilly": {"registers": 255, "spills_bytes": 96, "shared_static": 512, "local_bytes": 1024,
                   "perf_notes": [], "wgmma_serialized": None},
        "tiny": {"registers": 12, "spills_bytes": 0, "shared_static": 0, "local_bytes": 0,
                 "perf_notes": [], "wgmma_serialized": None},
    }


def test_broken_source_is_reported_as_a_tlxc_bug() -> None:
    broken = VECTOR_ADD.replace("a[i] + b[i]", "a[i] + undeclared_value")
    with pytest.raises(InternalCompilerError) as info:
        compile_cuda(broken, "sm_90a", ["vadd"], reproducer_name="vadd")
    message = str(info.value)
    assert "tlxc bug" in message
    assert 'identifier "undeclared_value" is undefined' in message  # the NVRTC log
    assert "> 4 |   if (i < n) c[i] = a[i] + undeclared_value;" in message  # numbered source
    repro = _reproducer_path(message)
    assert repro.exists() and repro.read_text() == broken
    assert repro.with_name(repro.stem + ".README.txt").exists()


def test_reproducer_path_is_deterministic() -> None:
    broken = VECTOR_ADD.replace("int n", "int n,,")
    paths = []
    for _ in range(2):
        with pytest.raises(InternalCompilerError) as info:
            compile_cuda(broken, "sm_90a", ["vadd"])
        paths.append(_reproducer_path(str(info.value)))
    assert paths[0] == paths[1]


def test_ptxas_failure_shows_the_generated_ptx() -> None:
    broken = VECTOR_ADD.replace("c[i] = a[i] + b[i];", 'asm volatile("not_an_instruction.sync;");')
    with pytest.raises(InternalCompilerError) as info:
        compile_cuda(broken, "sm_90a", ["vadd"])
    message = str(info.value)
    assert "tlxc bug" in message and "ptxas" in message
    assert "generated PTX" in message
    assert "not_an_instruction.sync;" in message
    assert _reproducer_path(message).exists()


def test_missing_kernel_name_is_a_tlxc_bug() -> None:
    with pytest.raises(InternalCompilerError, match="tlxc bug.*vsub"):
        compile_cuda(VECTOR_ADD, "sm_90a", ["vsub"])


def test_unknown_arch_is_refused() -> None:
    with pytest.raises(CompilationError, match="sm_75"):
        compile_cuda(VECTOR_ADD, "sm_75", ["vadd"])


def test_excerpt_merges_windows_and_marks_lines() -> None:
    text = "\n".join(f"line{n}" for n in range(1, 101))
    shown = excerpt(text, [5, 8, 60], context=2)
    assert shown.splitlines()[0] == "   3 | line3"
    assert ">  5 | line5" in shown and "> 60 | line60" in shown
    assert "   ..." in shown
    assert "line20" not in shown


def _reproducer_path(message: str) -> Path:
    for line in message.splitlines():
        if line.startswith("reproducer: "):
            return Path(line.removeprefix("reproducer: "))
    raise AssertionError(f"no reproducer line in:\n{message}")
