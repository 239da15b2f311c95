"""``tl.inline_asm_elementwise(..., pack=p)`` on types narrower than 32 bits: Triton packs a run's
elements into registers (``min(32 // bits, p)`` a register, the first in the lowest bits), so an
int8 run of four is one ``r`` operand and a bf16 run of four two.  The frontend counts operands
that way, the CUDA lowering packs and unpacks words around the asm, and the interpreter runs the
32-bit integer and bf16x2 / f16x2 instructions such asm is written with (``interpreter/inline_ptx.py``)."""
from __future__ import annotations

import kernels_dsm as K
import numpy as np
import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.frontend.specialize import specialization_from_args

# bytes < 128 to bf16 exactly: each byte under a 0x43 high byte is the bf16 128 + byte; less 128
BYTES_TO_BF16 = """
{
    .reg .b32 magic, w;
    mov.b32 magic, 0x43004300;
    prmt.b32 w, $2, magic, 0x7170;
    sub.bf16x2 $0, w, magic;
    prmt.b32 w, $2, magic, 0x7372;
    sub.bf16x2 $1, w, magic;
}
"""


@tlxc.kernel
def bytes_to_bf16(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise(BYTES_TO_BF16, "=r,=r,r", [x], dtype=tl.bfloat16, is_pure=True, pack=4)
    tl.store(y_ptr + offs, y)


@tlxc.kernel
def high_nibbles(x_ptr, y_ptr, BLOCK: tl.constexpr):
    """uint8 x pack 4: one register in, one out (shr, and on the packed word)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("{ .reg .b32 t; shr.u32 t, $1, 4; and.b32 $0, t, 0x0F0F0F0F; }", "=r,r", [x],
                                  dtype=tl.uint8, is_pure=True, pack=4)
    tl.store(y_ptr + offs, y)


@tlxc.kernel
def halves_fma(a_ptr, b_ptr, c_ptr, y_ptr, BLOCK: tl.constexpr):
    """f16 x pack 2: one 32-bit register per operand, the output written then read back."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a, b, c = tl.load(a_ptr + offs), tl.load(b_ptr + offs), tl.load(c_ptr + offs)
    y = tl.inline_asm_elementwise("fma.rn.f16x2 $0, $1, $2, $3; add.f16x2 $0, $0, $3;", "=r,r,r,r", [a, b, c],
                                  dtype=tl.float16, is_pure=True, pack=2)
    tl.store(y_ptr + offs, y)


@tlxc.kernel
def int_ops(a_ptr, b_ptr, c_ptr, out_ptr, BLOCK: tl.constexpr):
    """32-bit integer instructions: majority by lop3, sign-replicating prmt, clamped shifts."""
    offs = tl.arange(0, BLOCK)
    a, b, c = tl.load(a_ptr + offs), tl.load(b_ptr + offs), tl.load(c_ptr + offs)
    maj, perm, shifted, ashr = tl.inline_asm_elementwise(
        "lop3.b32 $0, $4, $5, $6, 0xE8; prmt.b32 $1, $4, $5, 0x8E41; shl.b32 $2, $4, $6; shr.s32 $3, $4, $6;",
        "=r,=r,=r,=r,r,r,r", [a, b, c & 63], dtype=(tl.int32, tl.int32, tl.int32, tl.int32), is_pure=True, pack=1)
    tl.store(out_ptr + offs, maj)
    tl.store(out_ptr + BLOCK + offs, perm)
    tl.store(out_ptr + 2 * BLOCK + offs, shifted)
    tl.store(out_ptr + 3 * BLOCK + offs, ashr)


@tlxc.kernel
def wrong_count(x_ptr, y_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,=r,=r,=r,r,r,r,r", [x], dtype=tl.int8, is_pure=True,
                                  pack=4)                                      # one register each way, not four
    tl.store(y_ptr + tl.arange(0, BLOCK), y)


@tlxc.kernel
def wrong_width(x_ptr, y_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    y = tl.inline_asm_elementwise("mov.b16 $0, $1;", "=r,r", [x], dtype=tl.int8, is_pure=True, pack=2)
    tl.store(y_ptr + tl.arange(0, BLOCK), y)


def _bytes(n, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 128, (n,), dtype=torch.uint8, generator=g).to(device)


def _int_inputs(n, device="cpu"):
    g = torch.Generator().manual_seed(3)
    a, b, c = (torch.randint(-2**31, 2**31 - 1, (n,), dtype=torch.int64, generator=g).to(torch.int32).to(device)
               for _ in range(3))
    return a, b, c


def _int_reference(a, b, c):
    a, b, c = (x.cpu().numpy().view(np.uint32).astype(np.uint64) for x in (a, b, c))
    s = c & 63
    maj = (a & b) | (b & s) | (a & s)
    pool = a | (b << np.uint64(32))
    perm = np.zeros_like(a)
    for i, sel in enumerate((0x1, 0x4, 0xE, 0x8)):          # 0x8E41, nibbles from the lowest
        byte = (pool >> np.uint64(8 * (sel & 7))) & np.uint64(0xFF)
        if sel & 8:
            byte = np.where(byte & np.uint64(0x80), np.uint64(0xFF), np.uint64(0))
        perm |= byte << np.uint64(8 * i)
    shifted = np.where(s > 31, 0, (a << np.minimum(s, 31)) & np.uint64(0xFFFFFFFF))
    signed = a.astype(np.uint32).view(np.int32).astype(np.int64)
    ashr = signed >> np.minimum(s, 31).astype(np.int64)
    return [np.asarray(x).astype(np.uint64).astype(np.uint32).view(np.int32) for x in (maj, perm, shifted, ashr)]


# -- the frontend: Triton's operand counts ---------------------------------------------------------
def test_wrong_operand_counts_and_widths_are_located_errors():
    x, y = torch.zeros(64, dtype=torch.int8), torch.zeros(64, dtype=torch.int8)
    with pytest.raises(tlxc.TlxcError, match=r"must list 1 output.* then 1 input.*packed up to 32 bits") as info:
        tlxc.interpret(wrong_count)[(1,)](x, y, BLOCK=64)
    assert "test_inline_asm_narrow.py" in info.value.render()
    with pytest.raises(tlxc.TlxcError, match=r"result 0 is i8 \(8 bits\) but its constraint 'r' is a 32-bit "
                                             r"register \(2 elements packed in one register"):
        tlxc.interpret(wrong_width)[(1,)](x, y, BLOCK=64)


# -- the interpreter --------------------------------------------------------------------------------
def test_bytes_to_bf16_on_the_interpreter():
    x = _bytes(300)[:256]
    y = torch.full((256,), float("nan"), dtype=torch.bfloat16)
    tlxc.interpret(bytes_to_bf16)[(2,)](x, y, BLOCK=128)
    assert torch.equal(y.float(), x.float())


def test_high_nibbles_on_the_interpreter():
    x = torch.randint(0, 256, (128,), dtype=torch.uint8)
    y = torch.zeros(128, dtype=torch.uint8)
    tlxc.interpret(high_nibbles)[(1,)](x, y, BLOCK=128)
    assert torch.equal(y, x >> 4)


def test_f16x2_fma_on_the_interpreter_rounds_each_step():
    g = torch.Generator().manual_seed(5)
    a, b, c = (torch.randn(64, generator=g).to(torch.float16) for _ in range(3))
    y = torch.full((64,), float("nan"), dtype=torch.float16)
    tlxc.interpret(halves_fma)[(1,)](a, b, c, y, BLOCK=64)
    fma = (a.double() * b.double() + c.double()).to(torch.float16)
    assert torch.equal(y, (fma.double() + c.double()).to(torch.float16))


def test_integer_instructions_on_the_interpreter():
    a, b, c = _int_inputs(64)
    out = torch.zeros(4 * 64, dtype=torch.int32)
    tlxc.interpret(int_ops)[(1,)](a, b, c, out, BLOCK=64)
    for got, want in zip(out.view(4, 64).numpy(), _int_reference(a, b, c)):
        np.testing.assert_array_equal(got, want)


# -- CUDA: the packed words around the asm --------------------------------------------------------
def test_packed_operands_in_the_cuda_text_and_cubin():
    x, y = _bytes(256), torch.empty(256, dtype=torch.bfloat16)
    compiled = compile_kernel(bytes_to_bf16, specialization_from_args(bytes_to_bf16, {"x_ptr": x, "y_ptr": y,
                                                                                      "BLOCK": 128}),
                              arch="sm_90a", num_warps=4)
    cuda = compiled.asm["cuda"]
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert ': "=r"(asm_word0), "=r"(asm_word1) : "r"((unsigned)(' in cuda     # 2 words of 2 bf16; 4 bytes in one
    assert "<< 24" in cuda and "(unsigned short)(asm_word1 >> 16)" in cuda
    assert "i += 4" in cuda


@tlxc.kernel
def pointer_asm(x_ptr, y_ptr, BLOCK: tl.constexpr):
    """Pointer operands ("l"): the asm loads and stores itself."""
    xs = x_ptr + tl.arange(0, BLOCK)
    ys = y_ptr + tl.arange(0, BLOCK)
    tl.inline_asm_elementwise("ld.global.b8 $0, [$1]; shl.b32 $0, $0, 3; st.global.b8 [$2], $0;", "=r,l,l",
                              [xs, ys], dtype=tl.int8, is_pure=False, pack=1)


@tlxc.kernel
def pointer_in_r(x_ptr, BLOCK: tl.constexpr):
    tl.inline_asm_elementwise("mov.b32 $0, 0;", "=r,r", [x_ptr + tl.arange(0, BLOCK)], dtype=tl.int32,
                              is_pure=False, pack=1)


def test_a_narrow_element_in_a_32_bit_register_and_pointer_operands():
    x = torch.randint(-128, 128, (128,), dtype=torch.int16).to(torch.int8)
    y = torch.zeros(128, dtype=torch.int8)
    # an int8 element alone in a 32-bit register ("=r,r", pack=1, as Triton allows)
    tlxc.interpret(K.asm_unary)[(1,)](x, y, ASM="shl.b32 $0, $1, 3;", DTYPE=tl.int8, BLOCK=128)
    assert torch.equal(y, (x.to(torch.int32) << 3).to(torch.uint8).view(torch.int8))
    u = torch.zeros(128, dtype=torch.uint8)
    cuda = compile_kernel(pointer_asm, specialization_from_args(pointer_asm, {"x_ptr": u, "y_ptr": u, "BLOCK": 128}),
                          arch="sm_90a", num_warps=4).asm["cuda"]
    assert '"l"(*reinterpret_cast<const unsigned long long*>(&' in cuda and '"=r"(asm_word0)' in cuda
    with pytest.raises(tlxc.TlxcError, match="argument 0 is a pointer .*its constraint must be 'l'"):
        compile_kernel(pointer_in_r, specialization_from_args(pointer_in_r, {"x_ptr": u, "BLOCK": 128}),
                       arch="sm_90a", num_warps=4)


# -- the GPU ------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_packed_narrow_asm_matches_the_interpreter():
    x = _bytes(1024, seed=9, device="cuda")
    y = torch.full((1024,), float("nan"), dtype=torch.bfloat16, device="cuda")
    bytes_to_bf16[(8,)](x, y, BLOCK=128)
    assert torch.equal(y.float(), x.float())
    u = torch.randint(0, 256, (128,), dtype=torch.uint8, device="cuda")
    v = torch.zeros(128, dtype=torch.uint8, device="cuda")
    high_nibbles[(1,)](u, v, BLOCK=128)
    assert torch.equal(v, u >> 4)
    g = torch.Generator().manual_seed(5)
    a, b, c = (torch.randn(64, generator=g).to(torch.float16).cuda() for _ in range(3))
    h = torch.full((64,), float("nan"), dtype=torch.float16, device="cuda")
    halves_fma[(1,)](a, b, c, h, BLOCK=64)
    h_ref = torch.full((64,), float("nan"), dtype=torch.float16)
    tlxc.interpret(halves_fma)[(1,)](a.cpu(), b.cpu(), c.cpu(), h_ref, BLOCK=64)
    assert torch.equal(h.cpu(), h_ref)
    p = torch.randint(0, 32, (128,), dtype=torch.uint8, device="cuda")
    q = torch.zeros(128, dtype=torch.uint8, device="cuda")
    pointer_asm[(1,)](p, q, BLOCK=128)                                  # the asm's own loads and stores
    assert torch.equal(q, p << 3)
    ia, ib, ic = _int_inputs(64, device="cuda")
    out = torch.zeros(4 * 64, dtype=torch.int32, device="cuda")
    int_ops[(1,)](ia, ib, ic, out, BLOCK=64)
    for got, want in zip(out.view(4, 64).cpu().numpy(), _int_reference(ia, ib, ic)):
        np.testing.assert_array_equal(got, want)
