"""The NVIDIA backend: IR (after passes) → CUDA C++ → NVRTC → cubin."""
from __future__ import annotations

import os

from ..frontend.naming import artifact_name
from .cuda import render_kernel
from .toolchain import compile_cuda

OVERRIDE_ENV = "TLXC_OVERRIDE_DIR"
NVRTC_STAGES = ("ptx", "cubin", "stats")     # the stages NVRTC makes (stats: ptxas's resource report)


def build(module, target, *, stages, lineinfo: bool = False, debug_barriers: bool = False, options=None):
    """The backend entry ``compiler.compile_kernel`` dispatches to for the targets registered with
    ``backend="tlxc.codegen_nvptx.backend"`` (tlxc/target.py): the kernel of ``module`` (IR after the
    passes) to CUDA, then NVRTC; returns (asm, metadata) as ``compile_to_cubin``."""
    options = options or {}
    kernel = module.kernels[0]
    kernel.attrs["debug_barriers"] = debug_barriers
    kernel.attrs["maxnreg"] = options.get("maxnreg")     # __maxnreg__ (codegen_nvptx/cuda.py)
    if not any(s in stages for s in NVRTC_STAGES):       # the CUDA text alone: NVRTC is not run
        source, info, override_path = kernel_source(kernel, target.name)
        return {"cuda": source}, {**info, "artifact": artifact_name(kernel, target.name), "override": override_path}
    return compile_to_cubin(kernel, target.name, want_ptx="ptx" in stages, lineinfo=lineinfo,
                            nvrtc_options=nvrtc_options(options))


def nvrtc_options(options: dict) -> list[str]:
    """The NVRTC options of the launch option ``enable_fp_fusion=False`` (no a*b+c contracted
    into an fma).  (``maxnreg`` is the kernel's ``__maxnreg__``: NVRTC ignores ``--maxrregcount``
    for kernels with launch bounds.)"""
    extra = []
    if options.get("enable_fp_fusion") is False:
        extra.append("--fmad=false")
    return extra


def kernel_source(kernel, arch: str) -> tuple[str, dict, str | None]:
    """The kernel's CUDA text and render info, and the path of the hand-edited ``.cu`` that
    ``$TLXC_OVERRIDE_DIR`` puts in its place (None when there is none)."""
    source, info = render_kernel(kernel, arch)
    override = os.environ.get(OVERRIDE_ENV)
    if override:
        path = os.path.join(override, f"{artifact_name(kernel, arch)}.cu")
        if os.path.exists(path):
            with open(path) as f:
                return f.read(), info, path
    return source, info, None


def compile_to_cubin(kernel, arch: str, *, want_ptx: bool = False, lineinfo: bool = False,
                     nvrtc_options: tuple[str, ...] | list[str] = ()):
    """Returns (asm dict with 'cuda', 'cubin', maybe 'ptx'; metadata dict)."""
    source, info, override_path = kernel_source(kernel, arch)
    artifact = artifact_name(kernel, arch)
    result = compile_cuda(source, arch, [info["name"]], reproducer_name=info["name"],
                          want_ptx=want_ptx, lineinfo=lineinfo, options=nvrtc_options)
    asm = {"cuda": source, "cubin": result.cubin}
    if result.ptx is not None:
        asm["ptx"] = result.ptx
    resources = result.resources.get(info["name"], {})
    metadata = dict(info)
    metadata.update({
        "registers": resources.get("registers"),
        "spills_bytes": resources.get("spills_bytes", 0),
        "shared_static": resources.get("shared_static", 0),
        "shared_bytes": info["scratch_bytes"] + resources.get("shared_static", 0),
        "local_bytes": resources.get("local_bytes", 0),
        "perf_notes": list(resources.get("perf_notes", ())),     # ptxas's numbered notes (C7514, C7517...)
        "wgmma_serialized": resources.get("wgmma_serialized"),   # the note if ptxas serializes the wgmmas
        "nvrtc_seconds": result.compile_seconds,
        "ptxas_log": result.log,
        "artifact": artifact,          # the dump/override file name (frontend/naming.py: artifact_name)
        "override": override_path,     # the hand-edited .cu compiled instead of tlxc's, if any
        "nvrtc_options": list(nvrtc_options),   # from the launch option enable_fp_fusion
    })
    return asm, metadata
