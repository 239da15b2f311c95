"""Run generated CUDA C++ on the host CPU: the kernel's text (from ``extern "C" __global__`` on,
unchanged, with the helpers written in plain C: ``PLAIN_C_HELPERS``), compiled by the host g++
against ``tlx_cuda_emu.h`` (the emulation of the other tlx_* helpers; its header comment gives the
model and what it cannot show).  For logic checks of the
CUDA code generator (layouts, masks, indices, wgmma fragments) without a GPU.

    module = build(compiled.asm["cuda"])
    module.run(values_by_name, grid=(5, 3), threads=128)

``values_by_name`` maps the kernel's C++ parameter names to values: a tensor (anything with
``data_ptr()``) for a pointer, a Python number for a scalar (its C type from the signature), a
``tlxc.TensorDescriptor`` for a TMA descriptor parameter.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..ptx import HELPERS, USER_ASM_UNARY

HEADER = Path(__file__).with_name("tlx_cuda_emu.h")
# helpers the generator writes in plain CUDA C (no inline PTX): compiled on the host as they are
PLAIN_C_HELPERS = ("tlx_wgmma_a8_fragment", "tlx_exp2_fma_f32")
_FLAGS = ("-std=c++17", "-O1", "-fPIC", "-shared", "-w", "-fno-strict-aliasing")
_SIGNATURE = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\((.*?)\) \{', re.S)
_SCALARS = {"int": ctypes.c_int32, "unsigned": ctypes.c_uint32, "unsigned int": ctypes.c_uint32,
            "long long": ctypes.c_int64, "unsigned long long": ctypes.c_uint64, "float": ctypes.c_float,
            "double": ctypes.c_double, "bool": ctypes.c_bool}


class EmulationError(RuntimeError):
    """The emulated kernel could not be built or run (an unemulated helper, a deadlock)."""


def available() -> bool:
    return shutil.which(os.environ.get("CXX", "g++")) is not None


def _cache_dir() -> Path:
    path = Path(tempfile.gettempdir()) / f"tlxc-cuda-emu-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def kernel_signature(source: str) -> tuple[str, list[tuple[str, str]]]:
    """(kernel name, [(C type, parameter name)]) of the one ``__global__`` kernel of ``source``."""
    m = _SIGNATURE.search(source)
    if m is None:
        raise EmulationError("no extern \"C\" __global__ kernel in the source")
    params = []
    for p in filter(None, (x.strip() for x in m.group(2).split(","))):
        p = p.replace("const __grid_constant__ ", "")
        typ, name = p.rsplit(" ", 1)
        while name.startswith("*"):
            typ, name = typ + "*", name[1:]
        params.append((typ.strip(), name))
    return m.group(1), params


class _TensorMap(ctypes.Structure):       # tlx_cuda_emu.h's tlx_tensormap
    _fields_ = [("base", ctypes.c_void_p), ("dims", ctypes.c_longlong * 5), ("strides", ctypes.c_longlong * 5),
                ("box", ctypes.c_int * 5), ("rank", ctypes.c_int), ("elem", ctypes.c_int), ("swizzle", ctypes.c_int),
                ("is_float", ctypes.c_int)]


def _tensormap(desc) -> _TensorMap:
    """The emulation's map of a ``tlxc.TensorDescriptor`` (innermost dimension first)."""
    elem = desc.base.element_size()
    rank = len(desc.shape)
    m = _TensorMap()
    m.base = desc.base.data_ptr()
    box = desc.ir_type().copy_box         # the encoded boxDim: a box wider than its swizzle span is copied
    for d in range(rank):                 # as span-wide sub-boxes, one copy each (descriptors.py)
        m.dims[d] = desc.shape[rank - 1 - d]
        m.strides[d] = desc.strides[rank - 1 - d] * elem
        m.box[d] = box[rank - 1 - d]
    m.rank, m.elem, m.swizzle = rank, elem, desc.swizzle
    m.is_float = int(desc.base.dtype.is_floating_point)     # (what a reduce-add adds as)
    return m


class EmulatedKernel:
    def __init__(self, path: Path, name: str, params: list[tuple[str, str]]):
        self.lib = ctypes.CDLL(str(path))
        self.lib.tlx_cuemu_run.restype = ctypes.c_int
        self.lib.tlx_cuemu_error.restype = ctypes.c_char_p
        self.name, self.params = name, params

    def run(self, values: Mapping[str, object], *, grid: Sequence[int], threads: int) -> None:
        """Launch on ``grid`` CTAs of ``threads`` threads, one CTA after another."""
        holders = []
        for typ, name in self.params:
            v = values[name] if name in values else _descriptor_dim(values, name)
            if v is _NONE:
                raise EmulationError(f"no value for parameter '{name}' of {self.name}")
            if typ == "tlx_tensormap":
                holders.append(_tensormap(v))
            elif typ.endswith("*"):
                holders.append(ctypes.c_void_p(v.data_ptr() if v is not None else 0))
            elif typ in _SCALARS:
                holders.append(_SCALARS[typ](v))
            else:
                raise EmulationError(f"parameter '{name}' of C type '{typ}' is not emulated")
        argv = (ctypes.c_void_p * max(1, len(holders)))(
            *[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders])
        g = (*tuple(grid), 1, 1)[:3]
        if self.lib.tlx_cuemu_run(argv, g[0], g[1], g[2], threads):
            raise EmulationError(f"{self.name}: {self.lib.tlx_cuemu_error().decode()}")


_NONE = object()
_DESC_DIM = re.compile(r"tlx_(?P<desc>\w+)_(?P<kind>shape|stride)(?P<dim>\d+)")


def _descriptor_dim(values: Mapping[str, object], name: str):
    """A hidden parameter of ``desc.shape[d]`` / ``desc.strides[d]`` (``rules_tensormap.descriptor_dim``:
    ``tlx_<desc>_shape<d>``), from the descriptor among the values as the launch appends it."""
    m = _DESC_DIM.fullmatch(name)
    desc = values.get(m.group("desc")) if m else None
    if desc is None or not hasattr(desc, "strides"):
        return _NONE
    return (desc.shape if m.group("kind") == "shape" else desc.strides)[int(m.group("dim"))]


# A kernel's own PTX (``tl.inline_asm_elementwise``) cannot go through the host assembler: the
# one-instruction, one-operand forms the project's kernels use (``ptx.USER_ASM_UNARY`` finds them) become
# host C, float in and out ("f" operands, or "r" ones carrying a float's bits)
_INLINE_PTX = {"tanh.approx.f32": "tanhf"}


def _host_inline_ptx(body: str) -> str:
    def host(m: re.Match) -> str:
        fn = _INLINE_PTX.get(m.group("op"))
        if fn is None:
            return m.group(0)                  # (left as it is: the host compile names it)
        if m.group("c") == "f":
            return f'{m.group("out")} = {fn}({m.group("arg")});'
        return f'{m.group("out")} = __float_as_uint({fn}(__uint_as_float({m.group("arg")})));'
    return USER_ASM_UNARY.sub(host, body)


def build(source: str) -> EmulatedKernel:
    """Compile the kernel of ``source`` (generated CUDA, its helper prelude cut off) against the
    emulation header; cached by content."""
    name, params = kernel_signature(source)
    body = source[source.index('extern "C" __global__'):]
    body = "".join(HELPERS[h] + "\n" for h in PLAIN_C_HELPERS if h + "(" in body) + _host_inline_ptx(body)
    unpack = ", ".join(f"*({t}*)argv[{i}]" for i, (t, _) in enumerate(params))
    text = (f"{body}\n"
            f'extern "C" int tlx_cuemu_run(void** argv, unsigned gx, unsigned gy, unsigned gz, int threads) {{\n'
            f"  return cuemu::run_grid(gx, gy, gz, threads, [argv]() {{ {name}({unpack}); }});\n}}\n")
    header = HEADER.read_text()
    digest = hashlib.sha256((header + "\0" + text).encode()).hexdigest()[:24]
    lib = _cache_dir() / f"{digest}.so"
    if not lib.exists():
        with tempfile.TemporaryDirectory(dir=_cache_dir()) as tmp:
            src = Path(tmp) / "kernel.cpp"
            src.write_text(text)
            out = Path(tmp) / "kernel.so"
            cmd = [os.environ.get("CXX", "g++"), *_FLAGS, "-include", str(HEADER), str(src), "-o", str(out)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise EmulationError(f"the host compiler rejected the CUDA text under the emulation:\n"
                                     f"{' '.join(cmd)}\n{proc.stderr[-6000:]}")
            os.replace(out, lib)
    return EmulatedKernel(lib, name, params)


__all__ = ["HEADER", "EmulatedKernel", "EmulationError", "available", "build", "kernel_signature"]
