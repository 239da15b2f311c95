"""``tl.inline_asm_elementwise(..., pack=2)``: the packed-f32 helpers of TLX's Blackwell kernels
(``mul.f32x2`` / ``fma.rn.f32x2`` over pairs of elements, ``tanh.approx.f32``) in codegen (the asm
runs once per pair of a thread's registers; ptxas for sm_100a) and on the interpreter
(``interpreter/inline_ptx.py``: 32-bit register arithmetic), against numpy."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.errors import TlxcError
from tlxc.frontend.specialize import specialization_from_types
from tlxc.interpreter import interpret

PAIR = """
{
    .reg .b64 ra, rb, rc, rd;
    mov.b64 ra, { $2, $3 };
    mov.b64 rb, { $4, $5 };
    mov.b64 rc, { $6, $7 };
    OP
    mov.b64 { $0, $1 }, rd;
}
"""


@tlxc.jit
def _fma_x2(a, b, c):
    return tl.inline_asm_elementwise(PAIR.replace("OP", "fma.rn.f32x2 rd, ra, rb, rc;"), "=r,=r,r,r,r,r,r,r",
                                     [a, b, c], dtype=tl.float32, is_pure=True, pack=2)


@tlxc.jit
def _sub_mul_x2(a, b, c):
    # (a - b) * c, lane by lane, through two f32x2 instructions
    return tl.inline_asm_elementwise(PAIR.replace("OP", "sub.f32x2 rd, ra, rb; mul.f32x2 rd, rd, rc;"),
                                     "=r,=r,r,r,r,r,r,r", [a, b, c], dtype=tl.float32, is_pure=True, pack=2)


@tlxc.jit
def _tanh(x):
    return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)


@tlxc.kernel
def packed(x_ptr: tl.pointer_type(tl.float32), y_ptr: tl.pointer_type(tl.float32),
           o_ptr: tl.pointer_type(tl.float32), R: tl.constexpr, C: tl.constexpr, MODE: tl.constexpr):
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    if MODE == "fma":
        out = _fma_x2(x, 0.5, y)            # scalars broadcast, as GDPA's _fma_f32x2(c1, square, c0)
    elif MODE == "sub_mul":
        out = _sub_mul_x2(x, y, x)
    else:
        out = _tanh(x) * y
    tl.store(o_ptr + offs, out)


def _reference(mode, x, y):
    x64, y64 = x.double(), y.double()
    if mode == "fma":
        return x64 * 0.5 + y64
    if mode == "sub_mul":
        return (x.float() - y.float()).double() * x64
    return torch.tanh(x64) * y64


@pytest.mark.parametrize("mode", ["fma", "sub_mul", "tanh"])
def test_interpreter_runs_packed_f32_arithmetic(mode):
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(16, 32, generator=g), torch.randn(16, 32, generator=g)
    o = torch.full((16, 32), float("nan"))
    interpret(packed, (1,), (x, y, o), {"R": 16, "C": 32, "MODE": mode}, arch="sm_100a")
    ref = _reference(mode, x, y)
    # float32 arithmetic: one rounding per instruction (2^-24 relative), tanh to float32
    assert ((o.double() - ref).abs() / ref.abs().clamp_min(1e-3)).max().item() < 1e-6


def _compile(mode, stages=("cuda", "cubin")):
    spec = specialization_from_types(packed, {}, {"R": 16, "C": 32, "MODE": mode})
    return compile_kernel(packed, spec, arch="sm_100a", num_warps=4, stages=stages)


def _nvrtc_available() -> bool:
    try:
        from tlxc.codegen_nvptx.toolchain import nvrtc_version
        nvrtc_version()
    except (ImportError, OSError, TlxcError):
        return False
    return True


@pytest.mark.skipif(not _nvrtc_available(), reason="NVRTC (cuda-bindings) is not available")
def test_pack_2_runs_the_asm_once_per_pair_of_registers():
    compiled = _compile("fma")
    assert compiled.asm["cubin"][:4] == b"\x7fELF"       # ptxas accepted fma.rn.f32x2 (sm_100a)
    cuda = compiled.asm["cuda"]
    assert re.search(r"for \(int i = 0; i < \d+; i \+= 2\)", cuda)
    # outputs $0 $1 are elements i and i + 1, then each argument's pair
    assert re.search(r'"=r"\(\*reinterpret_cast<unsigned\*>\(&\w+\[i\]\)\), "=r"\(\*reinterpret_cast<unsigned\*>'
                     r'\(&\w+\[i \+ 1\]\)\)', cuda)


@pytest.mark.parametrize("pack, constraints, args, text", [
    (3, "=r,r", "x", "'pack' must be 1, 2 or 4"),
    (2, "=r,r", "x", "must list 2 output(s)"),
    (2, "=r,=r,r,r", "scalar", "the arguments must be tensors whose size is a multiple of 2"),
])
def test_pack_refusals(pack, constraints, args, text):
    @tlxc.kernel
    def bad(x_ptr: tl.pointer_type(tl.float32), PACK: tl.constexpr, CONS: tl.constexpr, ARGS: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, 64))
        if ARGS == "scalar":
            v = tl.inline_asm_elementwise("mov.b32 $0, $2; mov.b32 $1, $3;", CONS, [tl.load(x_ptr)],
                                          dtype=tl.float32, is_pure=True, pack=PACK)
        else:
            v = tl.inline_asm_elementwise("mov.b32 $0, $1;", CONS, [x], dtype=tl.float32, is_pure=True, pack=PACK)
        tl.store(x_ptr + tl.arange(0, 64), v)

    spec = specialization_from_types(bad, {}, {"PACK": pack, "CONS": constraints, "ARGS": args})
    with pytest.raises(TlxcError, match=re.escape(text)):
        compile_kernel(bad, spec, arch="sm_100a", stages=("ir",))


def test_unmodelled_ptx_is_a_located_error():
    @tlxc.kernel
    def rsqrt(x_ptr: tl.pointer_type(tl.float32)):
        offs = tl.arange(0, 64)
        v = tl.inline_asm_elementwise("rsqrt.approx.f32 $0, $1;", "=r,r", [tl.load(x_ptr + offs)],
                                      dtype=tl.float32, is_pure=True, pack=1)
        tl.store(x_ptr + offs, v)

    with pytest.raises(TlxcError, match="inline PTX cannot run on the interpreter .*rsqrt.approx.f32"):
        interpret(rsqrt, (1,), (torch.ones(64),))


def test_mov_only_asm_keeps_its_bit_exact_path():
    @tlxc.kernel
    def bits(x_ptr: tl.pointer_type(tl.int32), o_ptr: tl.pointer_type(tl.int32)):
        offs = tl.arange(0, 64)
        v = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [tl.load(x_ptr + offs)],
                                      dtype=tl.int32, is_pure=True, pack=1)
        tl.store(o_ptr + offs, v)

    x = torch.from_numpy(np.arange(-32, 32, dtype=np.int32))
    o = torch.zeros(64, dtype=torch.int32)
    interpret(bits, (1,), (x, o))
    assert torch.equal(o, x)


@tlxc.jit
def _add_pairs(a, b):
    # pack=2 with sm_90-valid instructions: each output of a run from the same element of each input
    return tl.inline_asm_elementwise("{ add.f32 $0, $2, $4; sub.f32 $1, $5, $3; }", "=r,=r,r,r,r,r", [a, b],
                                     dtype=tl.float32, is_pure=True, pack=2)


@tlxc.kernel
def pairs(x_ptr: tl.pointer_type(tl.float32), y_ptr: tl.pointer_type(tl.float32),
          o_ptr: tl.pointer_type(tl.float32), N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(o_ptr + offs, _add_pairs(tl.load(x_ptr + offs), tl.load(y_ptr + offs)))


def _pairs_reference(x, y):
    out = x + y                      # element 0 of each run: x + y
    out[1::2] = (y - x)[1::2]        # element 1: y - x
    return out


def test_pack_2_operand_numbering_on_the_interpreter():
    x, y = torch.randn(256), torch.randn(256)
    o = torch.full((256,), float("nan"))
    interpret(pairs, (1,), (x, y, o), {"N": 256})
    assert torch.equal(o, _pairs_reference(x, y))


@tlxc.jit
def _add_x2(a, b):
    return tl.inline_asm_elementwise("{ add.f32 $0, $2, $4; add.f32 $1, $3, $5; }", "=r,=r,r,r,r,r", [a, b],
                                     dtype=tl.float32, is_pure=True, pack=2)


@tlxc.kernel
def add_x2(x_ptr: tl.pointer_type(tl.float32), y_ptr: tl.pointer_type(tl.float32),
           o_ptr: tl.pointer_type(tl.float32), N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(o_ptr + offs, _add_x2(tl.load(x_ptr + offs), tl.load(y_ptr + offs)))


@pytest.mark.gpu
def test_gpu_pack_2_operand_numbering():
    """On the H200 (sm_90a): output j of a run takes element j of each input's run (an
    elementwise asm gives x + y whatever registers a run groups)."""
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    o = torch.full((4096,), float("nan"), device="cuda")
    add_x2[(1,)](x, y, o, N=4096)
    assert torch.equal(o, x + y)
