"""The text form of explicit shared layouts on ``memdesc`` types (``layout=#nvmma<...>``,
``layout=#tiled<..., #nvmma<...>>``): printed IR parses back to the same layouts, and a
layout the frontend would reject is a located parse error."""
from __future__ import annotations

import kernels_shared_layouts_explicit as K
import pytest
import torch
from test_ir import assert_same_structure

import tlxc
from tlxc.compiler import copy_module, frontend, optimize
from tlxc.frontend.specialize import specialization_from_args
from tlxc.ir import types as T
from tlxc.ir.parser import IRParseError, parse_module
from tlxc.ir.printer import print_module
from tlxc.ir.shared_layout import NVMMASharedLayout, TiledSharedLayout, nv_mma_shared_layout
from tlxc.ir.verifier import verify_module

TD = tlxc.TensorDescriptor.from_tensor


def _grouped_dot():
    a, b, c = torch.zeros(120, 128, dtype=torch.float16), torch.zeros(128, 64, dtype=torch.float16), \
        torch.zeros(120, 64, dtype=torch.float16)
    return K.grouped_dot, {"a_desc": TD(a, [128, 128]), "b_desc": TD(b, [128, 64]), "c_desc": TD(c, [64, 64]),
                           "BM": 128, "BN": 64, "BK": 128, "GROUPS": 2}


def _transposed_scores():
    w = torch.zeros(128, 64, dtype=torch.float16)
    return K.transposed_scores, {"x_ptr": torch.zeros(128, 64, dtype=torch.float16), "w_desc": TD(w, [128, 64]),
                                 "out_ptr": torch.zeros(64, 64), "BN": 128, "BM": 64, "D": 64, "GROUPS": 2}


def _layouts(module):
    found = []
    for op in module.walk():
        for value in op.results:
            layout = getattr(value.type, "layout", None)
            if isinstance(layout, (NVMMASharedLayout, TiledSharedLayout)):
                found.append(layout)
    return found


@pytest.mark.parametrize("case", [_grouped_dot, _transposed_scores], ids=["grouped_dot", "transposed_scores"])
def test_frontend_ir_with_shared_layouts_round_trips(case):
    kernel, args = case()
    module = frontend(kernel, specialization_from_args(kernel, args))
    text = print_module(module)
    assert "layout=#tiled<" in text and "layout=#nvmma<" in text
    parsed = parse_module(text)
    verify_module(parsed)
    assert_same_structure(module, parsed)          # the layouts compare equal, field by field
    assert _layouts(parsed) == _layouts(module) and _layouts(parsed)
    assert print_module(parsed) == text


def test_optimized_ir_with_shared_layouts_round_trips():
    kernel, args = _grouped_dot()
    module = optimize(copy_module(frontend(kernel, specialization_from_args(kernel, args))), "sm_90a", 4)
    text = print_module(module)
    parsed = parse_module(text)
    assert_same_structure(module, parsed)
    assert print_module(parsed) == text


def _memdesc(layout_text: str, shape="64x64", element="f16") -> str:
    return ("tl.kernel @k() {\n"
            f"  %buf = tlx.local_alloc {{num = 1}} : memdesc<{shape}x{element}, smem, num=1, layout={layout_text}>\n"
            "  tl.return\n"
            "}\n")


def _alloc_type(text: str):
    return next(op for op in parse_module(text).walk() if op.name == "tlx.local_alloc").results[0].type


@pytest.mark.parametrize("layout", [
    nv_mma_shared_layout((64, 64), (1, 0), T.f16, (1, 1), (1, 1), (1, 0)),
    nv_mma_shared_layout((64, 64), (1, 0), T.f16, (1, 1), (1, 1), (0, 1)),            # a CTA order of its own
    nv_mma_shared_layout((64, 64), (1, 0), T.f16, (1, 1), (1, 1), (1, 0), swizzled=False),
    nv_mma_shared_layout((64, 8), (1, 0), T.f16, (1, 1), (1, 1), (1, 0), swizzled=False),  # 16-byte rows
    nv_mma_shared_layout((64, 8), (1, 0), T.f16, (1, 1), (1, 1), (1, 0)),
    nv_mma_shared_layout((32, 64), (1, 0), T.f16, (1, 1), (1, 1), (1, 0)).tile_to_shape((64, 64)),
], ids=["usual", "cta-order", "unswizzled", "narrow-unswizzled", "narrow", "tiled"])
def test_every_nvmma_field_round_trips(layout):
    text = _memdesc(str(layout))
    assert _alloc_type(text).layout == layout
    assert print_module(parse_module(text)) == text


def test_the_usual_layout_prints_as_before():
    layout = nv_mma_shared_layout((64, 32), (1, 0), T.bf16, (1, 1), (1, 1), (1, 0))
    assert str(layout) == "#nvmma<64x32xbf16, swizzle=64>"
    assert str(layout.tile_to_shape((128, 32))) == "#tiled<128x32, #nvmma<64x32xbf16, swizzle=64>>"


@pytest.mark.parametrize("layout_text, message", [
    ("#nvmma<64x64xf16, swizzle=64>", "#nvmma swizzle=64 is not its atom's swizzle"),
    ("#nvmma<64x64xf16, swizzle=128, order=[0,1]>", "tlxc supports row-major NVMMA layouts"),
    ("#nvmma<64x64xf16, swizzle=128, ctas_per_cga=[2,1], cta_split_num=[2,1], cta_order=[1,0]>",
     "CTA-split NVMMA layouts"),
    ("#nvmma<64x64xf16, swizzle=128, wide>", "unknown #nvmma field 'wide'"),
    ("#tiled<96x64, #nvmma<64x64xf16, swizzle=128>>", "is not a whole number of [64, 64] atoms"),
    ("#swizzled<64x64xf16>", "unknown shared layout '#swizzled'"),
])
def test_bad_shared_layouts_are_located_parse_errors(layout_text, message):
    text = _memdesc(layout_text, shape="96x64" if "96x64" in layout_text else "64x64")
    with pytest.raises(IRParseError) as info:
        parse_module(text)
    rendered = str(info.value)
    assert message in rendered, rendered
    assert info.value.loc.line == 2, rendered
