"""NVRTC: generated CUDA C++ -> cubin (+ optional PTX), with resource usage.

tlxc ships cubins, never PTX, to the driver: a PTX file written by a newer NVRTC
carries a PTX ISA version an older driver refuses, while a cubin loads on any
driver that knows the GPU.  PTX is still produced on request for ``--emit ptx``
and for debugging; NVRTC only emits PTX when the target is a virtual
architecture (``compute_XX``), so that takes a second compilation.

NVRTC comes from the ``nvidia-cuda-nvrtc`` wheel through ``cuda.bindings``
(which locates ``libnvrtc.so`` inside the wheel), so no CUDA installation is
needed.  Generated code includes no CUDA header: it declares what it uses.

A failed NVRTC compilation is always a tlxc bug (the frontend and passes must
have rejected bad user code earlier), so it raises ``InternalCompilerError``
with the log, the generated source around each error and a saved reproducer.
"""
from __future__ import annotations

import functools
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tlxc.arch import NVIDIA_ARCHS
from tlxc.errors import CompilationError, InternalCompilerError

from .reproducer import save_reproducer  # a per-user private directory, created safely

SUPPORTED_ARCHS: tuple[str, ...] = NVIDIA_ARCHS      # tlxc/arch.py: the one table of targets

# Always on.  ``-default-device`` lets helpers omit ``__device__``;
# ``--ptxas-options=--verbose`` makes ptxas report registers, spills and smem
# per kernel in the log, which is how ``resources`` is filled.
_BASE_OPTIONS: tuple[str, ...] = (
    "-std=c++17",
    "-default-device",
    "--extra-device-vectorization",
    "--ptxas-options=--verbose",
)

_CONTEXT_LINES = 10  # lines shown on each side of an error line


@dataclass
class CompiledCuda:
    """What NVRTC produced for one translation unit."""

    cubin: bytes
    ptx: str | None
    log: str
    arch: str
    compile_seconds: float
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library in use."""
    nvrtc = _nvrtc()
    major, minor = _check(nvrtc, nvrtc.nvrtcVersion(), "nvrtcVersion")
    return int(major), int(minor)


def compile_cuda(source: str, arch: str, kernel_names: Sequence[str], *,
                 options: Sequence[str] = (), reproducer_name: str = "kernel",
                 want_ptx: bool = False, lineinfo: bool = False,
                 fast_math: bool = False) -> CompiledCuda:
    """Compile ``source`` for ``arch`` to a cubin.

    ``kernel_names`` are the ``extern "C" __global__`` entry points the caller
    will look up; each must appear in ptxas's report, else the build is
    treated as a tlxc bug.  ``options`` are extra NVRTC options.
    """
    _check_arch(arch)
    all_options = _options(f"--gpu-architecture={arch}", options, lineinfo, fast_math)
    start = time.perf_counter()
    ok, log, cubin, ptx_bytes = _run_nvrtc(source, reproducer_name, all_options, "cubin", also_ptx=want_ptx)
    if not ok:
        _raise_nvrtc_failure(source, arch, all_options, log, reproducer_name)
    ptx = None
    if want_ptx:
        if not ptx_bytes:       # an NVRTC that keeps no PTX of a cubin build: compile for the virtual arch
            ptx_options = _options(f"--gpu-architecture={_virtual_arch(arch)}", options,
                                   lineinfo, fast_math)
            ok, ptx_log, ptx_bytes, _ = _run_nvrtc(source, reproducer_name, ptx_options, "ptx")
            if not ok:  # the cubin build succeeded, so this cannot normally happen
                _raise_nvrtc_failure(source, arch, ptx_options, ptx_log, reproducer_name)
        ptx = ptx_bytes.decode("utf-8", errors="replace")
    seconds = time.perf_counter() - start
    resources = parse_ptxas_resources(log)
    missing = [name for name in kernel_names if name not in resources]
    if missing:
        raise InternalCompilerError(
            f"this is a tlxc bug: NVRTC compiled {reproducer_name} for {arch} but the "
            f"kernel(s) {', '.join(missing)} are not in the cubin (found: "
            f"{', '.join(sorted(resources)) or 'none'}); the generated code must "
            f"declare each kernel extern \"C\" __global__")
    return CompiledCuda(cubin=cubin, ptx=ptx, log=log, arch=arch,
                        compile_seconds=seconds, resources=resources)


# --------------------------------------------------------------------------
# NVRTC calls


def _nvrtc() -> Any:
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InternalCompilerError(
            "NVRTC is not available: install the 'cuda-bindings' and "
            f"'nvidia-cuda-nvrtc' wheels ({exc})") from exc
    return nvrtc


def _check(nvrtc: Any, result: tuple, call: str) -> Any:
    """Unpack a cuda.bindings ``(status, *values)`` tuple, raising on error."""
    status, *values = result
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, text = nvrtc.nvrtcGetErrorString(status)
        raise InternalCompilerError(
            f"this is a tlxc bug: {call} failed with {status.name}: {text.decode()}")
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _run_nvrtc(source: str, name: str, options: list[str], output: str,
               also_ptx: bool = False) -> tuple[bool, str, bytes, bytes | None]:
    """Compile once; returns (succeeded, log, cubin or PTX bytes, PTX bytes or None).  With
    ``also_ptx``, the PTX of a cubin build comes from the same program (NVRTC 13 keeps it, the same
    text as a build for the virtual arch: tests/test_toolchain.py); None where an NVRTC does not."""
    nvrtc = _nvrtc()
    program = _check(nvrtc, nvrtc.nvrtcCreateProgram(
        source.encode("utf-8"), f"{name}.cu".encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        encoded = [opt.encode() for opt in options]
        (status,) = nvrtc.nvrtcCompileProgram(program, len(encoded), encoded)
        log = _program_log(nvrtc, program)
        if status == nvrtc.nvrtcResult.NVRTC_ERROR_COMPILATION:
            return False, log, b"", None
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:  # e.g. an invalid option
            return False, f"{status.name}\n{log}", b"", None
        ptx = _kept_ptx(nvrtc, program) if also_ptx and output != "ptx" else None
        return True, log, _program_output(nvrtc, program, output), ptx
    finally:
        nvrtc.nvrtcDestroyProgram(program)


def _kept_ptx(nvrtc: Any, program: Any) -> bytes | None:
    """The PTX a cubin build made, if this NVRTC keeps it."""
    status, size = nvrtc.nvrtcGetPTXSize(program)
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS or size <= 1:
        return None
    return _program_output(nvrtc, program, "ptx")


def _program_log(nvrtc: Any, program: Any) -> str:
    size = _check(nvrtc, nvrtc.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
    buffer = _output_buffer(size)
    _check(nvrtc, nvrtc.nvrtcGetProgramLog(program, buffer), "nvrtcGetProgramLog")
    return bytes(buffer).rstrip(b"\x00").decode("utf-8", errors="replace").rstrip()


def _program_output(nvrtc: Any, program: Any, output: str) -> bytes:
    if output == "cubin":
        get_size, get = nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN
    else:
        get_size, get = nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX
    size = _check(nvrtc, get_size(program), get_size.__name__)
    buffer = _output_buffer(size)
    _check(nvrtc, get(program, buffer), get.__name__)
    return bytes(buffer).rstrip(b"\x00") if output == "ptx" else bytes(buffer)


def _output_buffer(size: int) -> bytearray:
    # NVRTC writes into the buffer it is given.  The cuda.bindings examples
    # pass ``b" " * size``, but bytes are immutable and, for sizes 0 and 1,
    # interpreter-wide singletons: an empty log (size 1, just the NUL) then
    # overwrites the shared ``b" "`` object and corrupts unrelated code.  A
    # fresh bytearray is the caller's own writable memory.
    return bytearray(max(size, 1))


def _options(arch_option: str, extra: Sequence[str], lineinfo: bool,
             fast_math: bool) -> list[str]:
    options = [arch_option, *_BASE_OPTIONS]
    if nvrtc_version() >= (12, 9):
        # NVRTC 12.9+ keeps its own cache of compiled programs (in the driver's
        # compute cache); a hit skips ptxas and so prints no resource report,
        # leaving ``resources`` empty.  tlxc caches cubins itself.
        options.append("--no-cache")
    if lineinfo:
        options.append("-lineinfo")
    if fast_math:
        options.append("--use_fast_math")
    options.extend(extra)
    return options


def _check_arch(arch: str) -> None:
    if arch not in SUPPORTED_ARCHS:
        raise CompilationError(
            f"Expected an NVIDIA target in {', '.join(SUPPORTED_ARCHS)}, got {arch!r}")


def _virtual_arch(arch: str) -> str:
    return "compute_" + arch.removeprefix("sm_")


# --------------------------------------------------------------------------
# ptxas -v log parsing

_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"Used (\d+) registers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
# ptxas's numbered notes name the function they are about and may come before its
# "Compiling entry function" line: "(C7514) Potential Performance Loss: wgmma.mma_async
# instructions are serialized due to <reason> in the function '<name>'", "(C7517)
# wgmma.wait_group is injected in around line N by compiler ... in function '<name>'".
_NOTE_RE = re.compile(r"\((C\d+)\) (?:Potential Performance Loss: )?(.*?)\s+in (?:the )?function '([^']+)'")


def parse_ptxas_resources(log: str) -> dict[str, dict[str, Any]]:
    """Per-kernel registers, spill-store bytes, static smem and stack bytes, and ptxas's
    performance notes.

    ptxas reports, per entry function::

        ptxas info    : Compiling entry function 'vadd' for 'sm_90a'
        ptxas info    : Function properties for vadd
        ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
        ptxas info    : Used 12 registers, used 0 barriers, 512 bytes smem

    and, anywhere in the log, numbered notes such as ``(C7514) Potential Performance
    Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions
    reading accumulator registers of a wgmma ... in the function 'vadd'`` or ``(C7517)
    wgmma.wait_group is injected ... in function 'vadd'``.  Each kernel gets
    ``perf_notes`` (``"C7514: <text>"`` per note, in log order) and ``wgmma_serialized``
    (the first note that says wgmma instructions are serialized, else None): ptxas then
    waits for every wgmma before issuing the next, which costs a large part of the MMA
    throughput.
    """
    resources: dict[str, dict[str, Any]] = {}
    notes: dict[str, list[str]] = {}
    current: dict[str, Any] | None = None
    for line in log.splitlines():
        if match := _NOTE_RE.search(line):
            text = " ".join(match.group(2).split())
            notes.setdefault(match.group(3), []).append(f"{match.group(1)}: {text}")
        elif match := _ENTRY_RE.search(line):
            current = _empty_resources()
            resources[match.group(1)] = current
        elif current is None:
            continue
        elif match := _FRAME_RE.search(line):
            current["local_bytes"] = int(match.group(1))
            current["spills_bytes"] = int(match.group(2))
        elif match := _USED_RE.search(line):
            current["registers"] = int(match.group(1))
            if smem := _SMEM_RE.search(line):
                current["shared_static"] = int(smem.group(1))
    for name, found in notes.items():
        entry = resources.get(name)
        if entry is None:        # a note about a non-entry function: kept only for the kernels
            continue
        entry["perf_notes"] = found
        entry["wgmma_serialized"] = next((n for n in found if "instructions are serialized" in n), None)
    return resources


def _empty_resources() -> dict[str, Any]:
    return {"registers": 0, "spills_bytes": 0, "shared_static": 0, "local_bytes": 0,
            "perf_notes": [], "wgmma_serialized": None}


# --------------------------------------------------------------------------
# Failure reports

_SOURCE_ERROR_RE = re.compile(r"^\S+?\((\d+)\): (?:error|catastrophic error)", re.MULTILINE)
_PTX_ERROR_RE = re.compile(r"ptxas [^,]*, line (\d+); error", re.MULTILINE)


def _raise_nvrtc_failure(source: str, arch: str, options: list[str], log: str,
                         name: str) -> None:
    repro = save_reproducer(source, arch, options, log, name)
    sections = [
        (f"this is a tlxc bug: NVRTC rejected the CUDA C++ that tlxc generated for "
         f"'{name}' ({arch}). Please report it with the reproducer below."),
        f"NVRTC log:\n{log}",
    ]
    source_lines = [int(n) for n in _SOURCE_ERROR_RE.findall(log)]
    ptx_lines = [int(n) for n in _PTX_ERROR_RE.findall(log)]
    if source_lines:
        sections.append(f"generated source ({name}.cu), around the errors:\n"
                        + excerpt(source, source_lines))
    elif ptx_lines:
        # ptxas rejected the PTX (typically an inline-asm helper's string);
        # its line numbers refer to the PTX, so show that instead.
        ptx = _ptx_for_report(source, arch, options, name)
        if ptx is not None:
            sections.append("generated PTX, around the ptxas errors:\n" + excerpt(ptx, ptx_lines))
    sections.append(f"reproducer: {repro}")
    raise InternalCompilerError("\n\n".join(sections))


def _ptx_for_report(source: str, arch: str, options: list[str], name: str) -> str | None:
    virtual = [f"--gpu-architecture={_virtual_arch(arch)}" if opt.startswith("--gpu-architecture=")
               else opt for opt in options]
    try:
        ok, _, ptx, _ = _run_nvrtc(source, name, virtual, "ptx")
    except InternalCompilerError:
        return None
    return ptx.decode("utf-8", errors="replace") if ok else None


def excerpt(text: str, line_numbers: Sequence[int], context: int = _CONTEXT_LINES) -> str:
    """Numbered lines of ``text`` around each 1-based line, ``>`` marking the lines named.

    Windows that overlap are merged; gaps are shown as ``...``.
    """
    lines = text.splitlines()
    marked = {n for n in line_numbers if 1 <= n <= len(lines)}
    if not marked:
        return "(the log names no line of this text)"
    keep: set[int] = set()
    for n in marked:
        keep.update(range(max(1, n - context), min(len(lines), n + context) + 1))
    width = len(str(max(keep)))
    out: list[str] = []
    previous = 0
    for n in sorted(keep):
        if previous and n != previous + 1:
            out.append("   ...")
        marker = ">" if n in marked else " "
        out.append(f"{marker} {n:>{width}} | {lines[n - 1]}")
        previous = n
    return "\n".join(out)
