"""TLX's layout helpers: ``swizzled_shared_layout_encoding`` / ``swizzled_layout`` (honoured when they
put the elements where a layout tlxc addresses does: row-major, an NVMMA swizzle, or another XOR
swizzle, tests/test_shared_xor_swizzle.py), the padded
layout and explicit register layouts (``nv_mma_layout``, ``tlx.zeros(layout=)``: located errors),
``make_shared_linear`` (the tiled atom) and ``dump_layout`` (printed at compile time)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError
from tlxc.ir import shared_layout as SL
from tlxc.language import tlx

F16 = tl.pointer_type(tl.float16)
F32 = tl.pointer_type(tl.float32)


@tlxc.kernel
def through_smem(x_ptr: F16, y_ptr: F16, LAYOUT: tl.constexpr):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    buf = tlx.local_alloc((64, 64), tl.float16, 2, layout=LAYOUT)
    tlx.local_store(buf[1], tl.load(x_ptr + offs))
    tlx.dump_layout(buf[1])  # the dump
    tl.store(y_ptr + offs, tlx.local_load(buf[1]) * 2.0)


@pytest.mark.parametrize("layout, swizzle", [
    (tlx.swizzled_layout.make_default(rank=2), 0),
    (tlx.swizzled_shared_layout_encoding.make_default(rank=2), 0),
    (tlx.swizzled_shared_layout_encoding(8, 1, 8, [1, 0]), 128),      # 16-byte vectors, 8 phases: 128B swizzle
    (tlx.swizzled_layout(3, 3, 3), 128),                              # CuTe Swizzle<3,3,3> on 16-bit elements
])
def test_swizzled_layouts_tlxc_can_address_are_honoured(layout, swizzle, capfd):
    x = torch.randn(64, 64, dtype=torch.float16)
    y = torch.full_like(x, float("nan"))
    tlxc.interpret(through_smem)[(1,)](x, y, LAYOUT=layout)
    assert torch.equal(y, x * 2.0)
    compiled = through_smem.compile(constexprs={"LAYOUT": layout}, arch="sm_90a")
    assert f"%buf = tlx.local_alloc {{offset = 0, swizzle = {swizzle}}}" in compiled.asm["ir.opt"]
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    printed = capfd.readouterr().err
    line = next(n for n, text in enumerate(Path(__file__).read_text().splitlines(), 1) if text.endswith("# the dump"))
    assert f"tlx.dump_layout test_layout_helpers.py:{line}" in printed
    assert ("128-byte swizzle" if swizzle else "row-major") in printed


def test_the_swizzled_layout_is_the_same_bytes_as_the_nvmma_one():
    f16 = tl.float16
    resolved = SL.resolve_swizzled(tlx.swizzled_layout(3, 3, 3), (64, 64), f16)
    assert resolved.swizzle == 128
    assert SL.same_bytes(resolved, tlx.nv_mma_shared_layout_encoding((64, 64), [1, 0], f16, [1, 1], [1, 1], [1, 0]),
                         (64, 64), f16)


@tlxc.kernel
def refused(out_ptr: F32, WHAT: tl.constexpr, LAYOUT: tl.constexpr = None):
    if WHAT == "element_swizzle":
        tlx.local_alloc((64, 64), tl.float16, 1, layout=LAYOUT)  # WHAT element_swizzle
    elif WHAT == "padded":
        tlx.local_alloc((64, 64), tl.float16, 1, layout=LAYOUT)  # WHAT padded
    elif WHAT == "register_layout":
        acc = tlx.zeros((64, 64), tl.float32, layout=LAYOUT)  # WHAT register_layout
        tl.store(out_ptr + tl.arange(0, 64), tl.sum(acc, axis=1))
    elif WHAT == "nv_mma_layout":
        tlx.nv_mma_layout(warps_per_cta=(4, 1), instr_shape=(16, 48, 16))  # WHAT nv_mma_layout
    tl.store(out_ptr, 0.0)


@pytest.mark.parametrize("what, layout, message", [
    ("element_swizzle", tlx.swizzled_layout(3, 0, 8, order=[1, 0]),          # repeats every 4096 bytes
     "#swizzle<B=3, M=0, S=8> places the elements of a [64, 64] f16 buffer at bytes tlxc's code does not address"),
    ("padded", tlx.padded_shared_layout_encoding.with_identity_for([(128, 8)], [32, 128], [1, 0]),
     "is built for [32, 128] but the buffer is [64, 64]"),
    ("register_layout", "some layout", "'layout' must be a register layout (tlx.nv_mma_layout(...)), got str"),
    ("nv_mma_layout", None, "'instr_shape' of a version-3 (wgmma) layout is [16, N, K] with N a power of two"),
])
def test_layouts_tlxc_cannot_honour_are_located_errors(what, layout, message):
    with pytest.raises(CompilationError) as info:
        refused.compile(constexprs={"WHAT": what, "LAYOUT": layout}, stages=("ir",))
    assert message in info.value.message
    lines = Path(__file__).read_text().splitlines()
    assert lines[info.value.loc.line - 1].endswith(f"# WHAT {what}")


def test_tlx_zeros_without_a_layout_is_tl_zeros():
    @tlxc.kernel
    def zeros_plus(x_ptr: F32, out_ptr: F32):
        offs = tl.arange(0, 32)
        tl.store(out_ptr + offs, tlx.zeros((32,), tl.float32) + tl.load(x_ptr + offs))

    x, out = torch.randn(32), torch.full((32,), float("nan"))
    tlxc.interpret(zeros_plus)[(1,)](x, out)
    assert torch.equal(out, x)


def test_make_shared_linear_is_the_tiled_atom():
    atom = tlx.nv_mma_shared_layout_encoding((64, 64), [1, 0], tl.bfloat16, [1, 1], [1, 1], [1, 0], False, True)
    assert atom.make_shared_linear(tile_shape=(128, 64)) == atom.tile_to_shape((128, 64))


@pytest.mark.gpu
@pytest.mark.parametrize("layout", [tlx.swizzled_layout.make_default(rank=2), tlx.swizzled_layout(3, 3, 3)])
def test_gpu_swizzled_layouts(layout):
    x = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    y = torch.full_like(x, float("nan"))
    through_smem[(1,)](x, y, LAYOUT=layout)
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2.0)
