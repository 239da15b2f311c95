"""Explicit shared layouts: tlx.nv_mma_shared_layout_encoding, .tile_to_shape, local_alloc(layout=) and
local_reinterpret(layout=) (ir/shared_layout.py, passes/shared_layouts.py): the layout value, the byte
mapping the interpreter and the compiler agree on, compiled kernels (NVRTC, no GPU), interpreter runs
against float32 references, located errors, and GPU runs (marked gpu) of the same kernels."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

import kernels_shared_layouts_explicit as K

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.errors import CompilationError, LayoutError
from tlxc.frontend.specialize import specialization_from_args
from tlxc.ir import shared_layout as SL
from tlxc.ir.types import f16 as F16
from tlxc.language import tlx
from tlxc.passes.shared_layouts import swizzle_offset

TD = tlxc.TensorDescriptor.from_tensor
EPS16 = 2.0 ** -11


def _atom(shape, dtype=tl.float16, swizzled=True):
    return tlx.nv_mma_shared_layout_encoding(shape, [1, 0], dtype, [1, 1], [1, 1], [1, 0], False, swizzled)


def _rel(out, ref) -> float:
    return ((out.float() - ref).norm() / ref.norm()).item()


# -- the layout value --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, dtype, swizzled, swizzle", [
    ((64, 64), tl.float16, True, 128), ((64, 32), tl.float16, True, 64), ((64, 16), tl.float16, True, 32),
    ((64, 8), tl.float16, True, 0), ((128, 128), tl.float16, True, 128), ((64, 128), tl.float8e4nv, True, 128),
    ((64, 64), tl.float16, False, 0)])
def test_the_atom_selects_the_swizzle(shape, dtype, swizzled, swizzle):
    assert _atom(shape, dtype, swizzled).swizzle == swizzle


def test_tile_to_shape_is_a_compile_time_value():
    tiled = _atom((64, 64)).tile_to_shape((128, 128))
    assert tiled.tile_shape == [128, 128] and tiled.swizzle == 128
    assert hash(tiled) == hash(_atom((64, 64)).tile_to_shape([128, 128]))
    with pytest.raises(SL.SharedLayoutError, match="whole number of"):
        _atom((64, 64)).tile_to_shape((96, 128))
    with pytest.raises(SL.SharedLayoutError, match="rank"):
        _atom((64, 64)).tile_to_shape((64, 64, 2))


@pytest.mark.parametrize("args, match", [
    (((64, 64), [0, 1]), "MN-major"), (((64, 64), [1, 0], tl.float16, [2, 1]), "CTA-split"),
    (((64, 64), [1, 0], "f16"), "dtype")])
def test_unsupported_nvmma_arguments_say_why(args, match):
    full = list(args) + [tl.float16, [1, 1], [1, 1], [1, 0], False, True][len(args) - 2:]
    with pytest.raises(SL.SharedLayoutError, match=match):
        tlx.nv_mma_shared_layout_encoding(*full)


def test_span_wide_atoms_tile_to_the_block_stacked_nvmma_bytes():
    """Tiles numbered down the rows first: with atoms one swizzle span wide, the tiled layout of a
    [128, 128] f16 buffer is the NVMMA 128B layout of the whole buffer (column blocks of 128 rows),
    so the atom view and the allocation see the same bytes."""
    tiled = _atom((64, 64)).tile_to_shape((128, 128))
    offsets = SL.byte_offsets(tiled, (128, 128), F16)
    for r, c in [(0, 0), (5, 9), (70, 3), (127, 127), (64, 64)]:
        assert offsets[r, c] == swizzle_offset((c // 64) * 128 * 128 + r * 128 + (c % 64) * 2, 128)
    assert SL.same_bytes(tiled, _atom((64, 64)), (128, 128), F16)
    assert sorted(offsets.ravel().tolist()) == list(range(0, 128 * 128 * 2, 2))


def test_narrow_atoms_are_stored_as_column_blocks_of_their_span():
    """Atoms one 64-byte (or 32-byte) swizzle span wide tile a wider buffer as column blocks of
    that span; a 4-row atom does not start each tile in phase with the swizzle: refused."""
    tiled = _atom((64, 32)).tile_to_shape((64, 128))           # four 64B-swizzled [64, 32] tiles
    assert not SL.same_bytes(tiled, _atom((64, 64)), (64, 128), F16)
    assert SL.storable_as(tiled, (64, 128), F16) == (64, True)
    offsets = SL.byte_offsets(tiled, (64, 128), F16)
    for r, c in [(0, 0), (9, 33), (63, 127), (17, 70)]:        # block c // 32, rows of 64 bytes
        assert offsets[r, c] == swizzle_offset((c // 32) * 64 * 64 + r * 64 + (c % 32) * 2, 64)
    assert SL.storable_as(_atom((64, 16)).tile_to_shape((64, 64)), (64, 64), F16) == (32, True)
    with pytest.raises(SL.SharedLayoutError, match="a multiple of 8 rows"):
        SL.storable_as(_atom((4, 64)).tile_to_shape((64, 128)), (64, 128), F16)


# -- compiled for sm_90a -----------------------------------------------------------------------------
def _grouped_args(m=120, n=64, k=128, device="cpu"):
    g = torch.Generator().manual_seed(11)
    a = torch.randn(m, k, generator=g).to(device=device, dtype=torch.float16)
    b = torch.randn(k, n, generator=g).to(device=device, dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device=device, dtype=torch.float16)
    args = {"a_desc": TD(a, [128, 128]), "b_desc": TD(b, [128, 64]), "c_desc": TD(c, [64, 64]),
            "BM": 128, "BN": 64, "BK": 128, "GROUPS": 2}
    return a, b, c, args


def _scores_args(device="cpu"):
    g = torch.Generator().manual_seed(12)
    x = torch.randn(128, 64, generator=g).to(device=device, dtype=torch.float16)
    w = torch.randn(128, 64, generator=g).to(device=device, dtype=torch.float16)
    out = torch.full((64, 64), float("nan"), device=device)
    return x, w, out, {"x_ptr": x, "w_desc": TD(w, [128, 64]), "out_ptr": out, "BN": 128, "BM": 64, "D": 64,
                       "GROUPS": 2}


def _compile(kernel, args, stages=("ir", "ir.opt", "cuda", "cubin")):
    return compile_kernel(kernel, specialization_from_args(kernel, args), stages=stages, num_warps=4,
                          arch="sm_90a")


def _allocs(compiled):
    return {op.results[0].name_hint: op.attrs for op in compiled.module.kernels[0].walk()
            if op.name == "tlx.local_alloc"}


def test_grouped_dot_compiles_with_the_pinned_layouts():
    *_, args = _grouped_args()
    compiled = _compile(K.grouped_dot, args)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    allocs = _allocs(compiled)
    assert (allocs["a"]["swizzle"], allocs["a"].get("column_block")) == (128, 64)
    assert (allocs["b"]["swizzle"], allocs["b"].get("column_block")) == (128, None)
    assert "layout=#tiled<128x128, #nvmma<64x64xf16, swizzle=128>>" in compiled.asm["ir"]
    assert "a_view = s_" in compiled.asm["cuda"] and "viewed through #nvmma<64x64xf16" in compiled.asm["cuda"]


def test_transposed_scores_compile():
    *_, args = _scores_args()
    compiled = _compile(K.transposed_scores, args)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert _allocs(compiled)["s"]["swizzle"] == 128


def test_tlxc_check_accepts_the_explicit_layout_kernels(capsys):
    from tlxc.cli import main
    path = K.__file__
    sig = "a_desc=tensordesc<fp16[128, 128]>,b_desc=tensordesc<fp16[128, 64]>,c_desc=tensordesc<fp16[64, 64]>"
    assert main(["check", path, "--kernel", "grouped_dot", "--signature", sig, "-D", "BM=128", "-D", "BN=64",
                 "-D", "BK=128", "-D", "GROUPS=2"]) == 0


# -- located errors ----------------------------------------------------------------------------------
@tlxc.kernel
def _unswizzled_operand(a_desc, b_desc, out_ptr, SWIZZLED: tl.constexpr):
    a = tlx.local_alloc((64, 64), tl.float16, 1, layout=_atom_for_kernel(SWIZZLED))
    b = tlx.local_alloc((64, 64), tl.float16, 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], 2 * 64 * 64 * 2)
    tlx.async_descriptor_load(a_desc, a[0], [0, 0], bar[0])
    tlx.async_descriptor_load(b_desc, b[0], [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    acc = tlx.async_dot_wait(0, tlx.async_dot(a[0], b[0], tl.zeros((64, 64), dtype=tl.float32)))
    offs = tl.arange(0, 64)
    tl.store(out_ptr + offs[:, None] * 64 + offs[None, :], acc)


def _atom_for_kernel(swizzled):
    return _atom((64, 64), swizzled=bool(swizzled))


def test_an_explicit_layout_the_tma_box_contradicts_is_a_located_layout_error():
    x = torch.zeros(64, 64, dtype=torch.float16)
    args = {"a_desc": TD(x, [64, 64]), "b_desc": TD(x, [64, 64]), "out_ptr": torch.zeros(64, 64),
            "SWIZZLED": 0}
    with pytest.raises(LayoutError) as info:
        _compile(_unswizzled_operand, args, stages=("ir", "ir.opt"))
    text = str(info.value)
    assert "test_shared_layouts_explicit.py" in text and "two swizzles" in text and "explicit layout=" in text
    args["SWIZZLED"] = 1
    assert _compile(_unswizzled_operand, args, stages=("ir", "ir.opt")).module is not None


@tlxc.kernel
def _bad_reinterpret(out_ptr, CASE: tl.constexpr):
    wide: tl.constexpr = tlx.nv_mma_shared_layout_encoding((64, 64), [1, 0], tl.float16, [1, 1], [1, 1], [1, 0],
                                                           False, True)
    flat: tl.constexpr = tlx.nv_mma_shared_layout_encoding((64, 64), [1, 0], tl.float16, [1, 1], [1, 1], [1, 0],
                                                           False, False)
    buf = tlx.local_alloc((64, 128), tl.float16, 1, layout=wide.tile_to_shape((64, 128)))
    if CASE == 0:
        view = tlx.local_reinterpret(buf[0], tl.float16, [64, 128], layout=flat)
    elif CASE == 1:
        view = tlx.local_reinterpret(buf[0], tl.float32, [64, 64], layout=wide)
    elif CASE == 2:
        view = tlx.local_reinterpret(tlx.local_slice(buf[0], [0, 0], [64, 64]), tl.float16, [64, 64],
                                     layout=wide)
    elif CASE == 3:
        view = tlx.local_reinterpret(buf[0], tl.float16, [64, 128], layout=wide, pin=out_ptr)
    elif CASE == 4:
        other = tlx.local_alloc((64, 128), tl.float16, 1, layout=(64, 64))
        view = other[0]
    elif CASE == 5:
        narrow: tl.constexpr = tlx.nv_mma_shared_layout_encoding((4, 64), [1, 0], tl.float16, [1, 1], [1, 1],
                                                                 [1, 0], False, True)
        other = tlx.local_alloc((64, 128), tl.float16, 1, layout=narrow.tile_to_shape((64, 128)))
        view = other[0]
    else:
        other = tlx.local_alloc((64, 128), tl.bfloat16, 1, layout=wide.tile_to_shape((64, 128)))
        view = other[0]
    tlx.local_store(view, tl.zeros((64, 128), dtype=view.dtype) if CASE != 1 else tl.zeros((64, 64), tl.float32))


@pytest.mark.parametrize("case, match", [
    (0, "other bytes than its own layout"), (1, "keep the shape and dtype"), (2, "needs a whole buffer"),
    (3, "'pin' must be a compile-time bool"), (4, "nv_mma_shared_layout_encoding"),
    (5, "a multiple of 8 rows"), (6, "built for f16")])
def test_bad_layouts_are_located_errors(case, match):
    with pytest.raises(CompilationError, match=match) as info:
        _compile(_bad_reinterpret, {"out_ptr": torch.zeros(1), "CASE": case}, stages=("ir",))
    assert "test_shared_layouts_explicit.py" in str(info.value)


# -- the interpreter against torch -------------------------------------------------------------------
def test_grouped_dot_on_the_interpreter():
    a, b, c, args = _grouped_args()                  # 120 rows: the last 8 of the box read as 0
    tlxc.interpret(K.grouped_dot, (1,), (), args, num_warps=4)
    assert torch.isfinite(c).all() and _rel(c, a.float() @ b.float()) < 2 * EPS16


def test_transposed_scores_on_the_interpreter():
    x, w, out, args = _scores_args()
    tlxc.interpret(K.transposed_scores, (1,), (), args, num_warps=4)
    assert _rel(out, x.float().T @ w.float()) < 2 * EPS16


def test_the_interpreter_view_is_the_buffer():
    """What the interpreter relies on: a layout view the compiler accepts maps every element to the
    allocation's byte, so keeping buffers logical (row-major) and the view an alias is exact."""
    tiled = _atom((64, 64)).tile_to_shape((128, 128))
    view = SL.byte_offsets(_atom((64, 64)), (128, 128), F16)
    assert np.array_equal(SL.byte_offsets(tiled, (128, 128), F16), view)


# -- on the GPU ----------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_grouped_dot():
    a, b, c, args = _grouped_args(device="cuda")
    K.grouped_dot[(1,)](**args, num_warps=4)
    torch.cuda.synchronize()
    assert torch.isfinite(c).all() and _rel(c, a.float() @ b.float()) < 2 * EPS16


@pytest.mark.gpu
def test_gpu_transposed_scores():
    x, w, out, args = _scores_args(device="cuda")
    K.transposed_scores[(1,)](**args, num_warps=4)
    torch.cuda.synchronize()
    assert _rel(out, x.float().T @ w.float()) < 2 * EPS16
