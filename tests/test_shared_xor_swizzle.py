"""Explicit swizzled shared layouts that are no NVMMA swizzle (``tlx.swizzled_layout(B, M, S)``
with element-granular bits, Triton's ``swizzled_shared_layout_encoding`` with narrow vectors):
stored as the ``XorSwizzle`` of their row-major bytes (``ir/shared_layout.py``), addressed element
run by element run in register loads and stores; TMA/MMA consumers and aliases are located errors."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError, LayoutError
from tlxc.ir import shared_layout as SL
from tlxc.ir import types as T
from tlxc.language import tlx
from tlxc.passes.shared_layouts import swizzle_offset

F16 = tl.pointer_type(tl.float16)
F32 = tl.pointer_type(tl.float32)

ELEMENT_SWIZZLE = tlx.swizzled_layout(3, 0, 6, order=[1, 0])                # 2-byte runs on f16
PAIR_SWIZZLE = tlx.swizzled_shared_layout_encoding(2, 2, 4, [1, 0])          # 4-byte runs on f16


@tlxc.kernel
def rows_through(x_ptr: F16, y_ptr: F16, n_rows: tl.int32, LAYOUT: tl.constexpr, R: tl.constexpr,
                 C: tl.constexpr):
    rows = tl.arange(0, R)
    offs = rows[:, None] * C + tl.arange(0, C)[None, :]
    mask = rows[:, None] < n_rows
    bufs = tlx.local_alloc((R, C), tl.float16, 2, layout=LAYOUT)
    tlx.local_store(bufs[1], tl.load(x_ptr + offs, mask=mask, other=0.0))
    again = tlx.local_reinterpret(bufs[1], tl.float16, [R, C], layout=LAYOUT)   # the same bytes
    tl.store(y_ptr + offs, tlx.local_load(again) * 3.0, mask=mask)


@pytest.mark.parametrize("layout, shape, expected", [
    (ELEMENT_SWIZZLE, (128, 64), SL.XorSwizzle(3, 1, 6)),
    (PAIR_SWIZZLE, (32, 64), SL.XorSwizzle(2, 2, 6)),        # phase = (row // 2) % 4 into 2-element groups
])
def test_the_xor_swizzle_is_the_layouts_bytes(layout, shape, expected):
    f16 = T.f16
    xor = SL.xor_swizzle_of(layout, shape, f16)
    assert xor == expected
    rows, cols = np.indices(shape)
    placed = xor.apply((rows * shape[1] + cols) * 2)
    assert np.array_equal(placed, SL.byte_offsets(layout, shape, f16))
    assert np.array_equal(np.sort(placed.ravel()), np.arange(0, rows.size * 2, 2))     # a permutation
    assert swizzle_offset(6 * 128 + 2 * 3, xor) == xor.apply(6 * 128 + 2 * 3)
    assert SL.resolve_swizzled(layout, shape, f16) is layout                             # stored as written


@pytest.mark.parametrize("layout, R", [(ELEMENT_SWIZZLE, 128), (PAIR_SWIZZLE, 32)], ids=["element", "pair"])
def test_interpreter_and_sm90a(layout, R):
    C, n = 64, R - 5
    x = torch.randn(R, C, dtype=torch.float16)
    y = torch.full_like(x, float("nan"))
    tlxc.interpret(rows_through)[(1,)](x, y, n, LAYOUT=layout, R=R, C=C)
    torch.testing.assert_close(y[:n], (x[:n].float() * 3.0).half())
    assert torch.isnan(y[n:]).all()
    compiled = rows_through.compile(constexprs={"LAYOUT": layout, "R": R, "C": C}, arch="sm_90a")
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    xor = SL.xor_swizzle_of(layout, (R, C), T.f16)
    assert f"xor_swizzle = [{xor.bits}, {xor.base}, {xor.shift}]" in compiled.asm["ir.opt"]
    cuda = compiled.asm["cuda"]
    assert f">> {xor.base + xor.shift}) & {(1 << xor.bits) - 1}) << {xor.base})" in cuda
    widths = set(re.findall(r"tlx_(?:ld|st)_shared_b(\d+)", cuda))    # no access wider than a run
    assert widths == ({str(8 * xor.chunk)} if xor.chunk >= 4 else set())


@tlxc.kernel
def swizzled_wgmma_operand(a_ptr: F16, b_ptr: F16, c_ptr: F32):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    a = tlx.local_alloc((64, 64), tl.float16, 1, layout=tlx.swizzled_layout(3, 0, 6, order=[1, 0]))
    b = tlx.local_alloc((64, 64), tl.float16, 1)
    tlx.local_store(a[0], tl.load(a_ptr + offs))
    tlx.local_store(b[0], tl.load(b_ptr + offs))
    tlx.fence_async_shared()
    acc = tlx.async_dot(a[0], b[0])  # <- wgmma wants its own swizzle
    acc = tlx.async_dot_wait(0, acc)
    tl.store(c_ptr + offs, acc)


@tlxc.kernel
def swizzled_alias(x_ptr: F16):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    a = tlx.local_alloc((64, 64), tl.float16, 1, layout=tlx.swizzled_layout(3, 0, 6, order=[1, 0]))
    b = tlx.local_alloc((64, 64), tl.float16, 1, reuse=a)
    tlx.local_store(a[0], tl.load(x_ptr + offs))
    tl.store(x_ptr + offs, tlx.local_load(b[0]))


@tlxc.kernel
def swizzled_wider_view(x_ptr: F16, y_ptr: F32):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    a = tlx.local_alloc((64, 64), tl.float16, 1, layout=tlx.swizzled_layout(3, 0, 6, order=[1, 0]))
    tlx.local_store(a[0], tl.load(x_ptr + offs))
    words = tlx.local_reinterpret(a[0], tl.float32, [64, 32])  # <- 4-byte elements over 2-byte runs
    tl.store(y_ptr + tl.arange(0, 64)[:, None] * 32 + tl.arange(0, 32)[None, :], tlx.local_load(words))


def test_a_view_with_wider_elements_is_refused():
    with pytest.raises(LayoutError, match="keeps only 2-byte runs together") as info:
        swizzled_wider_view.compile(arch="sm_90a", stages=("ir", "ir.opt"))
    assert info.value.loc.line == swizzled_wider_view.fn.__code__.co_firstlineno + 5


@tlxc.kernel
def swizzled_bulk_store(x_ptr: F16, y_ptr: F16):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    a = tlx.local_alloc((64, 64), tl.float16, 1, layout=tlx.swizzled_layout(3, 0, 6, order=[1, 0]))
    tlx.local_store(a[0], tl.load(x_ptr + offs))
    tlx.fence_async_shared()
    flat = tlx.local_reinterpret(a[0], tl.float16, [64 * 64])
    tlx.async_store(y_ptr, flat, 64 * 64 * 2)  # <- raw bytes of a permuted buffer
    tlx.async_descriptor_store_wait(0)


def test_a_bulk_copy_of_the_buffer_is_refused():
    with pytest.raises(CompilationError, match="a bulk copy moves its bytes unswizzled") as info:
        swizzled_bulk_store.compile(arch="sm_90a", stages=("ir", "ir.opt", "cuda"))
    assert info.value.loc.line == swizzled_bulk_store.fn.__code__.co_firstlineno + 7


def test_an_mma_consumer_conflicts_with_the_layout():
    with pytest.raises(LayoutError, match=r"wanted with two swizzles: 128 bytes by tlx.async_dot .* xor<B=3, M=1, S=6>"):
        swizzled_wgmma_operand.compile(arch="sm_90a", stages=("ir", "ir.opt"))


def test_an_alias_of_the_buffer_is_refused():
    with pytest.raises(CompilationError, match="cannot share its bytes with another allocation"):
        swizzled_alias.compile(arch="sm_90a", stages=("ir", "ir.opt"))


@pytest.mark.gpu
@pytest.mark.parametrize("layout, R", [(ELEMENT_SWIZZLE, 128), (PAIR_SWIZZLE, 32)], ids=["element", "pair"])
def test_gpu_matches_the_interpreter(layout, R):
    C, n = 64, R - 5
    x = torch.randn(R, C, dtype=torch.float16, device="cuda")
    y = torch.full_like(x, float("nan"))
    rows_through[(1,)](x, y, n, LAYOUT=layout, R=R, C=C)
    torch.cuda.synchronize()
    torch.testing.assert_close(y[:n], (x[:n].float() * 3.0).half())
    assert torch.isnan(y[n:]).all()
