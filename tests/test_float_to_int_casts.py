"""Float -> integer ``.to()``: toward zero, NaN to 0, values past the integer type's range saturated to
its ends, for every integer width, on every path: the interpreter, the CUDA text (``cvt.rzi`` helpers,
run on the CUDA emulation and compiled to sm_90a), the HIP text (plain C++ helpers, run on the HIP
emulation) and the GPU.  The generated code once wrote a C cast, which is undefined past the range and
wraps 8/16-bit results (300.0 -> int8 gave 44 on the GPU, 127 on the interpreter).  Found by comparing
every interpreted launch of the tests with the emulation of its CUDA text (tests/emu_shadow.py)."""
from __future__ import annotations

import math

import kernels_interp as K
import pytest
import torch

import tlxc.language as tl
from tlxc.codegen_amdgcn.emu import run as hip_emu
from tlxc.codegen_nvptx.emu import run as cuda_emu
from tlxc.compiler import compile_kernel
from tlxc.frontend.specialize import specialization_from_args
from tlxc.interpreter import interpret

INTS = {"int8": (tl.int8, torch.int8), "int16": (tl.int16, torch.int16), "int32": (tl.int32, torch.int32),
        "int64": (tl.int64, torch.int64), "uint8": (tl.uint8, torch.uint8), "uint16": (tl.uint16, torch.uint16),
        "uint32": (tl.uint32, torch.uint32), "uint64": (tl.uint64, torch.uint64)}
SOURCES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}
BLOCK = 128


def _inputs(src) -> torch.Tensor:
    edges = [2.7, -2.7, 0.5, -0.5, -0.99, 127.5, -128.5, 255.9, 300.0, -300.0, 32767.5, -32769.0, 65535.5, 70000.0,
             -70000.0, 2147483520.0, -2147483648.0, 3e9, -3e9, 4294967040.0, 5e9, 9.2e18, -9.3e18, 1.9e19, 1e30,
             -1e30, float("inf"), float("-inf"), float("nan"), 0.0, -0.0]
    gen = torch.Generator().manual_seed(5)
    rand = torch.randn(60, generator=gen, dtype=torch.float64) * 10.0 ** torch.randint(0, 12, (60,), generator=gen)
    return torch.cat([torch.tensor(edges, dtype=torch.float64), rand]).to(src)


def _expected(x: torch.Tensor, name: str) -> list[int]:
    """Python integers: trunc, NaN -> 0, clamp to the type's range."""
    bits = int("".join(ch for ch in name if ch.isdigit()))
    lo, hi = (0, 2 ** bits - 1) if name.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    out = []
    for v in x.double().tolist():
        out.append(0 if math.isnan(v) else lo if v <= lo else hi if v >= hi else int(v))
    return out


def _as_ints(t: torch.Tensor, name: str) -> list[int]:
    if name == "uint64":    # torch's uint64 has few ops: read the bits as int64, then as unsigned
        return [v % 2 ** 64 for v in t.view(torch.int64).tolist()]
    if name == "uint32":
        return [v % 2 ** 32 for v in t.view(torch.int32).tolist()]
    if name == "uint16":
        return [v % 2 ** 16 for v in t.view(torch.int16).tolist()]
    return t.tolist()


CASES = [(s, i) for s in SOURCES for i in INTS]


@pytest.mark.parametrize("src,dst", CASES)
def test_interpreter(src, dst):
    x = _inputs(SOURCES[src])
    out = torch.zeros(x.numel(), dtype=INTS[dst][1])
    interpret(K.cast_kernel, (-(-x.numel() // BLOCK),), (x, out, x.numel()), {"DTYPE": INTS[dst][0], "BLOCK": BLOCK})
    assert _as_ints(out, dst) == _expected(x, dst)


@pytest.mark.skipif(not cuda_emu.available(), reason="no host C++ compiler")
@pytest.mark.parametrize("src,dst", CASES)
def test_cuda_text_on_the_emulation(src, dst):
    x = _inputs(SOURCES[src])
    out = torch.zeros(x.numel(), dtype=INTS[dst][1])
    h = K.cast_kernel.warmup(x, out, x.numel(), DTYPE=INTS[dst][0], BLOCK=BLOCK, grid=(1,))
    assert "tlx_cvt_rzi_" in h.asm["cuda"]
    cuda_emu.build(h.asm["cuda"]).run({"x_ptr": x, "out_ptr": out, "n": x.numel()},
                                      grid=(-(-x.numel() // BLOCK), 1, 1), threads=128)
    assert _as_ints(out, dst) == _expected(x, dst)


@pytest.mark.skipif(not hip_emu.available(), reason="no host C++ compiler")
@pytest.mark.parametrize("src,dst", [c for c in CASES if c[0] != "bfloat16"])
def test_hip_text_on_the_emulation(src, dst):
    x = _inputs(SOURCES[src])
    out = torch.zeros(x.numel(), dtype=INTS[dst][1])
    args = {"x_ptr": x, "out_ptr": out, "n": x.numel(), "DTYPE": INTS[dst][0], "BLOCK": BLOCK}
    spec = specialization_from_args(K.cast_kernel, args)
    compiled = compile_kernel(K.cast_kernel, spec, arch="gfx942", num_warps=4, stages=("hip",))
    assert "tlx_cvt_rzi_" in compiled.asm["hip"]
    info = compiled.metadata
    module = hip_emu.build(compiled.asm["hip"], [info["name"]], arch="gfx942")
    module.run(info["name"], [args[n] for n, _ in spec.runtime_params()], grid=(-(-x.numel() // BLOCK), 1, 1),
               threads=info["threads"], kinds=info["params"])
    assert _as_ints(out, dst) == _expected(x, dst)


@pytest.mark.parametrize("dst", ["int8", "uint16", "int32", "uint32", "int64", "uint64"])
def test_the_cvt_helpers_assemble_for_sm_90a(dst):
    x = torch.zeros(4, dtype=torch.float64)
    h = K.cast_kernel.warmup(x, torch.zeros(4, dtype=INTS[dst][1]), 4, DTYPE=INTS[dst][0], BLOCK=BLOCK, grid=(1,))
    assert h.asm["cubin"][:4] == b"\x7fELF"
    prelude, body = h.asm["cuda"].split('extern "C"', 1)
    assert "cvt.rzi." in prelude and "tlx_cvt_rzi_" in body


@pytest.mark.gpu
@pytest.mark.parametrize("src,dst", CASES)
def test_gpu(src, dst):
    x = _inputs(SOURCES[src]).cuda()
    out = torch.zeros(x.numel(), dtype=INTS[dst][1], device="cuda")
    K.cast_kernel[(-(-x.numel() // BLOCK),)](x, out, x.numel(), DTYPE=INTS[dst][0], BLOCK=BLOCK)
    assert _as_ints(out.cpu(), dst) == _expected(x.cpu(), dst)
