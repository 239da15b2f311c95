"""Offline HIP toolchain: generated HIP C++ -> AMDGCN assembly -> code object (``.hsaco``), checked.

The compiler is the clang that the PyPI ``ziglang`` wheel bundles (``python -m ziglang clang``,
clang 22 with the AMDGPU target: gfx942 and gfx950), reached through the wheel, so neither ROCm
nor an AMD GPU is needed.  Why this route, and not Debian's ``clang-19`` (which knows gfx942 but
rejects gfx950): docs/architecture.md, "The AMD toolchain".  At run time on an AMD machine the
same HIP text goes through hipRTC instead (``runtime/hip.py``).

One compilation is three steps, so that the assembly we check is exactly the code we ship:

1. ``clang -x hip --offload-arch=<arch> -nogpulib -nogpuinc --cuda-device-only -S``: HIP -> assembly
   (the generated text includes no HIP header: it declares what it uses, as the CUDA text does);
2. ``clang -x assembler -target amdgcn-amd-amdhsa -mcpu=<arch> -c``: the integrated assembler
   (it rejects an inline-asm instruction the arch does not have);
3. ``ld.lld -shared``: a loadable code object (ELF, EM_AMDGPU, ET_DYN), code-object v5.

``check_code_object`` then asserts what the code object must be: the target, LDS within the
arch's limit, no scratch (spills or stack), and the instruction classes a kernel expects.
A failed compilation of generated code is a tlxc bug (``InternalCompilerError`` with the log).
"""
from __future__ import annotations

import functools
import importlib.util
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InternalCompilerError
from ..target import get_target

AMD_ARCHS = ("gfx942", "gfx950")
ZIGLANG_REQUIREMENT = "ziglang==0.17.1"       # clang 22.1.8 (pyproject.toml: the "amd" extra)
CODE_OBJECT_VERSION = 5                      # LLVM 22 defaults to v6; ROCm 6.x loads v5
EM_AMDGPU = 0xE0
ET_DYN = 3
ELFOSABI_AMDGPU_HSA = 64
# EF_AMDGPU_MACH (e_flags & 0xff) of each arch (LLVM's ELF.h)
EF_AMDGPU_MACH = {"gfx942": 0x4C, "gfx950": 0x4F}

_BASE = ("-x", "hip", "-nogpulib", "-nogpuinc", "--cuda-device-only", "-std=c++17",
         f"-mcode-object-version={CODE_OBJECT_VERSION}", "-Wno-unused-command-line-argument")
_CONTEXT_LINES = 6


@dataclass
class CompiledHip:
    """What the offline toolchain produced for one translation unit."""

    code_object: bytes
    asm: str
    log: str
    arch: str
    compile_seconds: float
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)


class ToolchainMissing(InternalCompilerError):
    """The offline AMD compiler is not installed."""


def available() -> bool:
    """Whether the offline compiler (the ``ziglang`` wheel) is installed."""
    return importlib.util.find_spec("ziglang") is not None


def _tool(name: str) -> list[str]:
    if not available():
        raise ToolchainMissing(f"the offline AMD toolchain is missing: pip install '{ZIGLANG_REQUIREMENT}' "
                               f"(or tlxc[amd]); it bundles clang with the AMDGPU target")
    return [sys.executable, "-m", "ziglang", name]


@functools.cache
def clang_version() -> str:
    """``clang version X.Y.Z`` of the bundled clang."""
    out = subprocess.run(_tool("clang") + ["--version"], capture_output=True, text=True, check=True).stdout
    return out.splitlines()[0].strip()


def compile_hip(source: str, arch: str, kernel_names: Sequence[str] = (), *, options: Sequence[str] = (),
                opt: str = "-O3", name: str = "kernel") -> CompiledHip:
    """Compile HIP ``source`` for ``arch`` to a code object; ``kernel_names`` must be in it."""
    if arch not in AMD_ARCHS:
        raise InternalCompilerError(f"no AMD toolchain target '{arch}' (known: {', '.join(AMD_ARCHS)})")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tlxc-hip-") as tmp:
        src, asm_path = os.path.join(tmp, f"{name}.hip"), os.path.join(tmp, f"{name}.s")
        obj, hsaco = os.path.join(tmp, f"{name}.o"), os.path.join(tmp, f"{name}.hsaco")
        with open(src, "w") as f:
            f.write(source)
        logs = []
        steps = [
            ("HIP -> assembly", _tool("clang") + [*_BASE, f"--offload-arch={arch}", opt, *options, "-S", src,
                                                   "-o", asm_path]),
            ("assembler", _tool("clang") + ["-x", "assembler", "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}",
                                            "-c", asm_path, "-o", obj]),
            ("linker", _tool("ld.lld") + ["-shared", obj, "-o", hsaco]),
        ]
        for what, cmd in steps:
            proc = subprocess.run(cmd, capture_output=True, text=True)
            logs.append(proc.stderr)
            if proc.returncode != 0:
                raise InternalCompilerError(_failure_message(source, arch, what, cmd, proc.stderr, name))
        with open(asm_path) as f:
            asm = f.read()
        with open(hsaco, "rb") as f:
            code_object = f.read()
    resources = parse_resources(asm)
    missing = [k for k in kernel_names if k not in resources]
    if missing:
        raise InternalCompilerError(
            f"this is a tlxc bug: the HIP toolchain compiled {name} for {arch} but the kernel(s) "
            f"{', '.join(missing)} are not in the code object (found: {', '.join(sorted(resources)) or 'none'}); "
            f"the generated code must declare each kernel extern \"C\" __global__")
    return CompiledHip(code_object=code_object, asm=asm, log="".join(logs), arch=arch,
                       compile_seconds=time.perf_counter() - start, resources=resources)


def _failure_message(source: str, arch: str, what: str, cmd: list[str], log: str, name: str) -> str:
    lines = source.splitlines()
    context = []
    for match in re.finditer(r"\.hip:(\d+):\d+: error", log):
        line = int(match.group(1))
        lo, hi = max(1, line - _CONTEXT_LINES), min(len(lines), line + _CONTEXT_LINES)
        context.append("\n".join(f"{'>' if n == line else ' '}{n:5d} | {lines[n - 1]}" for n in range(lo, hi + 1)))
    return (f"this is a tlxc bug: the generated HIP for {name} failed in the {what} step for {arch}\n"
            f"command: {' '.join(cmd)}\n{log.strip()}" + ("\n\n" + "\n\n".join(context) if context else ""))


# -- what the code object says ----------------------------------------------------------------

_KERNEL_DIRECTIVES = {
    ".amdhsa_group_segment_fixed_size": "lds_bytes",
    ".amdhsa_private_segment_fixed_size": "scratch_bytes",
    ".amdhsa_next_free_vgpr": "next_free_vgpr",
    ".amdhsa_next_free_sgpr": "next_free_sgpr",
    ".amdhsa_accum_offset": "accum_offset",
}
_METADATA_KEYS = {".vgpr_count": "vgprs", ".agpr_count": "agprs", ".sgpr_count": "sgprs",
                  ".vgpr_spill_count": "vgpr_spills", ".sgpr_spill_count": "sgpr_spills",
                  ".wavefront_size": "wavefront_size", ".max_flat_workgroup_size": "max_workgroup_size",
                  ".kernarg_segment_size": "kernarg_bytes"}


def parse_resources(asm: str) -> dict[str, dict[str, Any]]:
    """Per kernel: LDS and scratch bytes (the kernel descriptor), register and spill counts and
    the wave size (the code object's metadata), from the assembly the code object was built from."""
    kernels: dict[str, dict[str, Any]] = {}
    current = None
    for line in asm.splitlines():
        stripped = line.strip()
        match = re.match(r"\.amdhsa_kernel\s+(\S+)", stripped)
        if match:
            current = kernels.setdefault(match.group(1), {})
            continue
        if stripped.startswith(".end_amdhsa_kernel"):
            current = None
            continue
        parts = stripped.split()
        if current is not None and len(parts) == 2 and parts[0] in _KERNEL_DIRECTIVES:
            current[_KERNEL_DIRECTIVES[parts[0]]] = int(parts[1], 0)
    # the YAML metadata (.amdgpu_metadata): one map per kernel, keys before or after .name
    in_metadata = False
    block: dict[str, Any] = {}

    args: list[dict[str, Any]] = []

    def flush():
        if block.get(".name") in kernels:
            for key, out in _METADATA_KEYS.items():
                if key in block:
                    kernels[block[".name"]][out] = int(block[key])
            kernels[block[".name"]]["args"] = [dict(a) for a in args]
    for line in asm.splitlines():
        if line.strip() == ".amdgpu_metadata":
            in_metadata = True
            continue
        if line.strip() == ".end_amdgpu_metadata":
            flush()
            break
        if not in_metadata:
            continue
        match = re.match(r"^  - (\.[\w]+):\s*(.*)$", line)        # a new kernel map starts
        if match and line.startswith("  - "):
            flush()
            block = {match.group(1): match.group(2).strip()}
            args.clear()
            continue
        match = re.match(r"^      (-| ) \.(offset|size|value_kind):\s*(\S+)$", line)   # one kernel argument
        if match:
            if match.group(1) == "-":
                args.append({})
            if not args:        # an argument's first key (its '-' line) is not one of the three
                args.append({})
            args[-1][match.group(2)] = int(match.group(3)) if match.group(2) != "value_kind" else match.group(3)
            continue
        if re.match(r"^      - ", line):
            args.append({})
            continue
        match = re.match(r"^    (\.[\w]+):\s*(.*)$", line)
        if match:
            block[match.group(1)] = match.group(2).strip()
    return kernels


def elf_header(code_object: bytes) -> dict[str, int]:
    """The ELF header fields the checks need."""
    if code_object[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    e_type, e_machine = struct.unpack_from("<HH", code_object, 16)
    (e_flags,) = struct.unpack_from("<I", code_object, 48)
    return {"class": code_object[4], "osabi": code_object[7], "abi_version": code_object[8],
            "type": e_type, "machine": e_machine, "flags": e_flags}


def instructions(asm: str) -> list[str]:
    """The mnemonics of the assembly's instructions (directives, labels, comments dropped)."""
    out = []
    for line in asm.splitlines():
        text = line.split(";", 1)[0].strip()
        if not text or text.startswith((".", "//")) or text.endswith(":"):
            continue
        out.append(text.split()[0])
    return out


class CodeObjectError(AssertionError):
    """A code object is not what its kernel needs (wrong target, LDS over the limit, spills...)."""


def check_code_object(compiled: CompiledHip, *, expect: Iterable[str] = (), forbid: Iterable[str] = ()) -> dict:
    """Assert what every tlxc code object must be, and that the assembly has an instruction matching
    each regular expression of ``expect`` and none of ``forbid``.  Returns a summary (per-kernel
    resources and the instruction classes found)."""
    arch = compiled.arch
    header = elf_header(compiled.code_object)
    problems = []
    if header["class"] != 2 or header["machine"] != EM_AMDGPU or header["type"] != ET_DYN:
        problems.append(f"not a loadable 64-bit AMDGPU ELF (class {header['class']}, machine "
                        f"{header['machine']:#x}, type {header['type']})")
    if header["osabi"] != ELFOSABI_AMDGPU_HSA or header["abi_version"] != CODE_OBJECT_VERSION - 2:
        problems.append(f"not an HSA code object v{CODE_OBJECT_VERSION} (OS ABI {header['osabi']}, "
                        f"ABI version {header['abi_version']})")
    if header["flags"] & 0xFF != EF_AMDGPU_MACH[arch]:
        problems.append(f"e_flags machine {header['flags'] & 0xff:#x} is not {arch}'s {EF_AMDGPU_MACH[arch]:#x}")
    if f"amdgcn-amd-amdhsa--{arch}".encode() not in compiled.code_object:
        problems.append(f"the metadata note does not name amdgcn-amd-amdhsa--{arch}")
    limit = get_target(arch).shared_limit
    for kernel, res in compiled.resources.items():
        if res.get("lds_bytes", 0) > limit:
            problems.append(f"{kernel}: {res['lds_bytes']} bytes of LDS, over {arch}'s {limit}")
        if res.get("scratch_bytes", 0) or res.get("vgpr_spills", 0) or res.get("sgpr_spills", 0):
            problems.append(f"{kernel}: scratch {res.get('scratch_bytes', 0)} bytes, spills "
                            f"{res.get('vgpr_spills', 0)} VGPR / {res.get('sgpr_spills', 0)} SGPR")
        if res.get("wavefront_size", 64) != 64:
            problems.append(f"{kernel}: wave{res['wavefront_size']}, expected wave64")
    mnemonics = instructions(compiled.asm)
    for pattern in expect:
        if not any(re.fullmatch(pattern, m) for m in mnemonics):
            problems.append(f"no instruction matching {pattern!r}")
    for pattern in forbid:
        hits = sorted({m for m in mnemonics if re.fullmatch(pattern, m)})
        if hits:
            problems.append(f"forbidden instruction(s) {', '.join(hits)} (pattern {pattern!r})")
    if problems:
        raise CodeObjectError(f"code object for {arch} fails its checks:\n  " + "\n  ".join(problems))
    return {"resources": compiled.resources, "classes": instruction_classes(mnemonics)}


def instruction_classes(mnemonics: Iterable[str]) -> dict[str, int]:
    """Counts per class (the mnemonic up to its first underscore-separated type suffix)."""
    classes: dict[str, int] = {}
    for m in mnemonics:
        key = "v_mfma" if m.startswith("v_mfma") else "_".join(m.split("_")[:2])
        classes[key] = classes.get(key, 0) + 1
    return classes


__all__ = ["AMD_ARCHS", "CodeObjectError", "CompiledHip", "ToolchainMissing", "available", "check_code_object",
           "clang_version", "compile_hip", "elf_header", "instructions", "parse_resources"]
