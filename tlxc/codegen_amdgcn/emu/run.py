"""Run generated HIP on the host CPU: the same text, compiled by the host g++ against
``tlx_hip_emu.h`` (the emulation of the AMDGCN builtins; see its header comment for the model
and what it cannot show).  For numerical checks of the AMD backend without an AMD GPU.

    module = build(hip_source, ["softmax_kernel"])
    module.run("softmax_kernel", [out, x, 7, 1000], grid=(7,), threads=256)

Arguments: a torch CPU tensor or numpy array is passed as its data pointer; a ctypes value as
itself; a Python int or float as the C type given in ``kinds`` (the launcher's kinds:
``i32``, ``u32``, ``i64``, ``u64``, ``f32``, ``f64``), else int32 / float32.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

HEADER = Path(__file__).with_name("tlx_hip_emu.h")
_FLAGS = ("-std=c++17", "-O1", "-fPIC", "-shared", "-w", "-fno-strict-aliasing")
_CTYPES = {"i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64, "u64": ctypes.c_uint64,
           "f32": ctypes.c_float, "f64": ctypes.c_double}


class EmulationError(RuntimeError):
    """The emulated kernel could not run (deadlock, an unemulated builtin, a bad launch)."""


def available() -> bool:
    return shutil.which(os.environ.get("CXX", "g++")) is not None


@functools.cache
def _cache_dir() -> Path:
    path = Path(tempfile.gettempdir()) / f"tlxc-hip-emu-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


class EmulatedModule:
    def __init__(self, path: Path, kernel_names: Sequence[str]):
        self.lib = ctypes.CDLL(str(path))
        self.lib.tlx_emu_error.restype = ctypes.c_char_p
        self.entries = {}
        for name in kernel_names:
            fn = getattr(self.lib, f"tlx_emu_run_{name}")
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                           ctypes.c_uint]
            self.entries[name] = fn

    def run(self, name: str, args: Sequence, *, grid: Sequence[int], threads: int,
            kinds: Sequence[str] | None = None) -> None:
        """Launch kernel ``name`` on ``grid`` work-groups of ``threads`` work-items."""
        holders = [_ctype_of(a, None if kinds is None else kinds[i]) for i, a in enumerate(args)]
        array = (ctypes.c_void_p * max(1, len(holders)))(*[ctypes.addressof(h) for h in holders])
        gx, gy, gz = (list(grid) + [1, 1, 1])[:3]
        status = self.entries[name](array, gx, gy, gz, threads)
        if status:
            raise EmulationError(f"emulated {name}: {self.lib.tlx_emu_error().decode()}")


def _ctype_of(value, kind: str | None):
    if isinstance(value, ctypes._SimpleCData):
        return value
    data_ptr = getattr(value, "data_ptr", None)
    if callable(data_ptr):                  # a torch tensor (CPU)
        if getattr(value, "device", None) is not None and value.device.type != "cpu":
            raise EmulationError("the emulation runs on CPU tensors")
        return ctypes.c_void_p(value.data_ptr())
    if hasattr(value, "__array_interface__"):
        return ctypes.c_void_p(value.__array_interface__["data"][0])
    if value is None:
        return ctypes.c_void_p(0)
    if isinstance(value, bool):
        return ctypes.c_int32(int(value))
    if kind is not None:
        return _CTYPES[kind](value)
    return ctypes.c_int32(value) if isinstance(value, int) else ctypes.c_float(value)


def build(source: str, kernel_names: Sequence[str], *, arch: str | None = None,
          flags: Sequence[str] = ()) -> EmulatedModule:
    """Compile ``source`` (generated HIP, unchanged) against the emulation header; cached by content.
    ``arch`` defines ``__gfx942__`` / ``__gfx950__`` as the device compiler does (the header's fp8
    MFMA formats differ by arch)."""
    if arch is not None:
        flags = (f"-D__{arch}__=1", *flags)
    text = source + "\n" + "".join(f"TLX_EMU_ENTRY({k})\n" for k in kernel_names)
    header = HEADER.read_text()
    digest = hashlib.sha256((header + "\0" + text + "\0" + " ".join(flags)).encode()).hexdigest()[:24]
    lib = _cache_dir() / f"{digest}.so"
    if not lib.exists():
        with tempfile.TemporaryDirectory(dir=_cache_dir()) as tmp:
            src = Path(tmp) / "kernel.cpp"
            src.write_text(text)
            out = Path(tmp) / "kernel.so"
            cmd = [os.environ.get("CXX", "g++"), *_FLAGS, *flags, "-include", str(HEADER), str(src), "-o", str(out)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise EmulationError(f"the host compiler rejected the HIP text under the emulation:\n"
                                     f"{' '.join(cmd)}\n{proc.stderr[-6000:]}")
            os.replace(out, lib)
    return EmulatedModule(lib, kernel_names)


__all__ = ["HEADER", "EmulatedModule", "EmulationError", "available", "build"]
