"""The AMD backend: IR (after passes) -> HIP C++ -> offline clang -> code object (``hsaco``).

Stages: ``hip`` (the text), ``hsaco`` (the code object, checked by ``toolchain.check_code_object``),
``amdgcn`` (its assembly).  The offline build needs the ``ziglang`` wheel (toolchain.py); without it
``--emit hip`` still works.  At run time on an AMD GPU, hipRTC compiles the same text
(runtime/hip.py).
"""
from __future__ import annotations

from ..frontend.naming import artifact_name
from . import toolchain
from .hip import render_kernel

CODE_STAGES = ("hsaco", "amdgcn", "stats")


def build(module, target, *, stages, lineinfo: bool = False, debug_barriers: bool = False, options=None):
    """The backend entry ``compiler.compile_kernel`` dispatches to for gfx942 / gfx950."""
    options = options or {}
    kernel = module.kernels[0]
    kernel.attrs["waves_per_eu"] = options.get("waves_per_eu", 0)   # the launch option (runtime/launch.py)
    source, info = render_kernel(kernel, target.name)
    metadata = dict(info)
    metadata["artifact"] = artifact_name(kernel, target.name)
    asm = {"hip": source}
    if any(s in stages for s in CODE_STAGES):
        compiled = toolchain.compile_hip(source, target.name, [info["name"]], name=info["name"])
        summary = toolchain.check_code_object(compiled, expect=expected_instructions(kernel, source, info["threads"]))
        resources = compiled.resources[info["name"]]
        asm["hsaco"] = compiled.code_object
        asm["amdgcn"] = compiled.asm
        metadata.update({
            "registers": resources.get("vgprs"),
            "agprs": resources.get("agprs"),
            "sgprs": resources.get("sgprs"),
            "spills_bytes": resources.get("scratch_bytes", 0),
            "shared_bytes": resources.get("lds_bytes", 0),
            "instruction_classes": summary["classes"],
            "compile_seconds_hip": compiled.compile_seconds,
            "toolchain": toolchain.clang_version(),
        })
    return asm, metadata


def expected_instructions(kernel, source: str, threads: int) -> list[str]:
    """The instruction classes the code object must contain, from what the kernel lowered to:
    an MFMA per MFMA dot, direct-to-LDS loads where the HIP issues them, ``s_barrier`` where it
    syncs more than one wave (LLVM drops the barrier of a one-wave work-group)."""
    expect = []
    if any(op.name == "tl.dot" and op.attrs.get("algorithm") == "mfma" for op in kernel.walk()):
        expect.append(r"v_mfma_f32_\w+")
    body = source.split('extern "C"', 1)[-1]
    if "tlx_global_load_lds_b128(" in body:
        expect.append("global_load_lds_dwordx4")
    if "tlx_syncthreads()" in body and threads > 64:
        expect.append("s_barrier")
    return expect
