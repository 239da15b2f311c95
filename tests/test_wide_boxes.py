"""TMA boxes wider than the 128-byte swizzle span (a [64, 256] f16 B box, [128, 128] Q/K/V boxes):
the host encodes the 128-byte-wide sub-box with the 128-byte swizzle, the compiler stores the buffer
as 128B-swizzled column blocks, issues one copy per sub-box and addresses the blocks from the
wgmma / tcgen05 descriptors and local_load / local_store.  Compile tests (NVRTC + ptxas, no GPU),
interpreter runs against float32 references, and GPU runs (marked gpu) of the same kernels."""
from __future__ import annotations

import os
import re
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

import kernels_wide_boxes as W

import tlxc
from tlxc.codegen_nvptx.rules_mma_async import descriptor_fields
from tlxc.compiler import compile_kernel
from tlxc.descriptors import tma_arguments
from tlxc.errors import LayoutError
from tlxc.frontend.specialize import specialization_from_args
from tlxc.ir.types import TensorDescType
from tlxc.ir.types import f16 as F16
from tlxc.passes.shared_layouts import swizzle_offset

STAGES = ("ir", "ir.opt", "cuda", "ptx", "cubin")
TD = tlxc.TensorDescriptor.from_tensor
EPS16 = 2.0 ** -11                     # f16 unit roundoff: the outputs' rounding


def _rel(out, ref) -> float:
    return ((out.float() - ref).norm() / ref.norm()).item()


# -- the host descriptor --------------------------------------------------------------------------
@pytest.mark.parametrize("box, swizzle, copy", [
    ([64, 256], 128, (64, 64)), ([128, 128], 128, (128, 64)), ([1, 128, 128], 128, (1, 128, 64)),
    ([4, 128], 0, (4, 128)),            # 4 rows: sub-boxes would not start in phase with the pattern
    ([64, 200], 0, (64, 200)),          # 400 bytes: not a multiple of 128
    ([64, 64], 128, (64, 64))])
def test_wide_box_gets_128b_swizzle_and_a_span_wide_map_box(box, swizzle, copy):
    x = torch.zeros(256, 256, 256, dtype=torch.float16)[0] if len(box) == 2 else torch.zeros(2, 256, 256,
                                                                                           dtype=torch.float16)
    desc = TD(x, box)
    assert desc.swizzle == swizzle
    assert desc.ir_type().copy_box == copy
    args = tma_arguments(desc.dtype, 0x1000, desc.shape, desc.strides, desc.block_shape, desc.swizzle, "zero")
    assert args["boxDim"] == list(reversed(copy))      # the map copies one sub-box


def test_wide_box_split_can_be_turned_off():
    x = torch.zeros(64, 256, dtype=torch.float16)
    assert TD(x, [64, 256], swizzle=0).ir_type().copy_box == (64, 256)
    assert TD(x, [64, 256], swizzle=128).swizzle == 128
    with pytest.raises(tlxc.LaunchError, match="'swizzle'"):
        TD(x, [64, 256], swizzle=64).ir_type()       # (checked when the box is first used)


def test_copy_box_of_the_ir_type():
    assert TensorDescType(F16, (64, 256), 128).copy_box == (64, 64)
    assert TensorDescType(F16, (64, 256), 0).copy_box == (64, 256)
    assert TensorDescType(F16, (64, 32), 64).copy_box == (64, 32)


# -- compiled for sm_90a ------------------------------------------------------------------------
def _gemm_args(m, n, k, device="cpu"):
    g = torch.Generator(device="cpu").manual_seed(1)
    a = torch.randn(m, k, generator=g).to(device=device, dtype=torch.float16)
    b = torch.randn(k, n, generator=g).to(device=device, dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device=device, dtype=torch.float16)
    return a, b, c, {"a_desc": TD(a, [128, 64]), "b_desc": TD(b, [64, 256]), "c_desc": TD(c, [128, 256]),
                     "K": k, "BM": 128, "BN": 256, "BK": 64}


def _compile(kernel, args, arch="sm_90a"):
    spec = specialization_from_args(kernel, args)
    return compile_kernel(kernel, spec, stages=STAGES, num_warps=8, arch=arch)


def test_gemm_with_a_256_column_b_box_compiles_to_split_copies():
    *_, args = _gemm_args(200, 296, 104)
    compiled = _compile(W.gemm_wide_b, args)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    allocs = {op.results[0].name_hint: op.attrs for op in compiled.module.kernels[0].walk()
              if op.name == "tlx.local_alloc"}
    assert (allocs["b"]["swizzle"], allocs["b"].get("column_block")) == (128, 64)
    assert (allocs["c"]["swizzle"], allocs["c"].get("column_block")) == (128, 64)
    assert "column_block" not in allocs["a"]
    cuda = compiled.asm["cuda"]
    # the B box: four copies of [64, 64], block j (8192 bytes = 4096 elements on) at column + 64 j
    for j in range(1, 4):
        assert f" + {4096 * j}, &b_desc, " in cuda and f"col + {64 * j}, " in cuda
    # the C box: four stores from blocks 16384 bytes (8192 elements) apart, in one bulk group
    store = next(line for line in cuda.splitlines() if "tlx_tma_store_2d(&c_desc" in line)
    assert store.count("tlx_tma_store_2d") == 4 and store.count("tlx_bulk_commit_group") == 1
    assert " + 24576, col + 192, row)" in store
    # B N-major over four blocks: LBO = the block distance (64 rows x 128 B), SBO = 8 rows x 128 B
    assert f"{descriptor_fields(8192, 1024, 128):#x}ull" in cuda
    ptx = compiled.asm["ptx"]
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global") == 10     # (A + 4 x B) twice
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in ptx
    assert compiled.metadata["spills_bytes"] == 0


@pytest.mark.parametrize("a_kmajor, b_kmajor", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_wide_operands_every_major_compile(a_kmajor, b_kmajor):
    x = torch.zeros(128, 128, dtype=torch.float16)
    args = {"a_desc": TD(x, [128, 128]), "b_desc": TD(x, [128, 128]), "c_desc": TD(x, [128, 128]),
            "A_KMAJOR": a_kmajor, "B_KMAJOR": b_kmajor, "BM": 128, "BN": 128, "BK": 128}
    compiled = _compile(W.wide_dot, args)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    cuda = compiled.asm["cuda"]
    line = next(line for line in cuda.splitlines() if "// wgmma:" in line)
    assert f"A {'K' if a_kmajor else 'M'}-major, B {'K' if b_kmajor else 'N'}-major" in line
    # both operands' buffers are [128, 128] stored as two [128, 64] blocks 16384 bytes apart
    assert "/ 64) * 16384" in cuda
    if not b_kmajor:        # B N-major across its two blocks: LBO = 16384
        assert f"{descriptor_fields(16384, 1024, 128):#x}ull" in cuda


@pytest.mark.parametrize("p_in_shared", [0, 1])
def test_attention_with_128_column_boxes_compiles(p_in_shared):
    q = torch.zeros(256, 128, dtype=torch.float16)
    args = {"q_desc": TD(q, [128, 128]), "k_desc": TD(q, [128, 128]), "v_desc": TD(q, [128, 128]),
            "o_desc": TD(q, [128, 128]), "scale": 0.1, "N_CTX": 256, "BLOCK_M": 128, "BLOCK_N": 128,
            "HEAD_DIM": 128, "P_IN_SHARED": p_in_shared}
    compiled = _compile(W.attention_tile, args)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert compiled.asm["ptx"].count("cp.async.bulk.tensor.2d.shared::cluster.global") == 6     # Q, K, V x 2
    assert compiled.metadata["spills_bytes"] == 0


def test_tcgen05_reads_split_boxes():
    x = torch.zeros(128, 128, dtype=torch.bfloat16)
    for b_kmajor in (0, 1):
        args = {"a_desc": TD(x, [128, 128]), "b_desc": TD(x, [128, 128]), "c_ptr": torch.zeros(128, 128),
                "B_KMAJOR": b_kmajor}
        spec = specialization_from_args(W.tcgen05_wide, args)
        compiled = compile_kernel(W.tcgen05_wide, spec, stages=STAGES, arch="sm_100a")
        assert compiled.asm["cubin"][:4] == b"\x7fELF"
        assert compiled.asm["ptx"].count("cp.async.bulk.tensor.2d") == 4


def test_wide_box_into_a_3d_buffer_is_a_located_layout_error():
    x = torch.zeros(2, 64, 256, dtype=torch.float16)
    args = {"x_desc": TD(x, [1, 64, 256]), "out_ptr": torch.zeros(64, 256, dtype=torch.float16)}
    with pytest.raises(LayoutError, match="cannot be stored so") as info:
        _compile(W.wide_box_3d_buffer, args)
    assert "kernels_wide_boxes.py" in info.value.render()


@pytest.mark.parametrize("kernel, signature, constants", [
    ("gemm_wide_b", ("a_desc=tensordesc<128x64xf16, swizzle=128>,b_desc=tensordesc<64x256xf16, swizzle=128>,"
                     "c_desc=tensordesc<128x256xf16, swizzle=128>,K=i32"), ["BM=128", "BN=256", "BK=64"]),
    ("attention_tile", ",".join(f"{n}_desc=tensordesc<128x128xf16, swizzle=128>" for n in "qkvo")
     + ",scale=fp32,N_CTX=i32", ["BLOCK_M=128", "BLOCK_N=128", "HEAD_DIM=128", "P_IN_SHARED=1"])])
def test_tlxc_check_accepts_the_wide_box_kernels(capsys, kernel, signature, constants):
    from tlxc.cli import main
    defines = [arg for c in constants for arg in ("-D", c)]
    code = main(["check", W.__file__, "--kernel", kernel, "--num-warps", "8", "--signature", signature, *defines])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err


# -- the blocked layout the split copies write is the one wgmma's descriptors read ----------------
def test_sub_box_copies_fill_the_blocked_layout():
    """Model the TMA unit (sub-box j of a [R, C] box lands 128B-swizzled at block j) and the
    readers (``(c // 64) * R * 128 + swizzle(r * 128 + (c % 64) * 2)``): same bytes."""
    rows, cols = 16, 256
    landed = {}
    for j in range(cols // 64):
        start = j * rows * 128
        for r in range(rows):
            for c in range(64):
                landed[(r, 64 * j + c)] = start + swizzle_offset(r * 128 + c * 2, 128)
    for (r, c), where in landed.items():
        assert where == swizzle_offset((c // 64) * rows * 128 + r * 128 + (c % 64) * 2, 128)
    assert sorted(landed.values()) == list(range(0, rows * cols * 2, 2))


# -- the interpreter against torch ----------------------------------------------------------------
def test_gemm_wide_b_on_the_interpreter():
    a, b, c, args = _gemm_args(200, 296, 104)
    tlxc.interpret(W.gemm_wide_b, (2, 2), (), args, num_warps=8)
    ref = a.float() @ b.float()
    assert torch.isfinite(c).all() and _rel(c, ref) < 2 * EPS16


def _attention_args(n_ctx, device="cpu", p_in_shared=0):
    g = torch.Generator(device="cpu").manual_seed(2)
    q, k, v = (torch.randn(n_ctx, 128, generator=g).to(device=device, dtype=torch.float16) for _ in range(3))
    o = torch.full((n_ctx, 128), float("nan"), device=device, dtype=torch.float16)
    args = {"q_desc": TD(q, [128, 128]), "k_desc": TD(k, [128, 128]), "v_desc": TD(v, [128, 128]),
            "o_desc": TD(o, [128, 128]), "scale": 128 ** -0.5, "N_CTX": n_ctx, "BLOCK_M": 128, "BLOCK_N": 128,
            "HEAD_DIM": 128, "P_IN_SHARED": p_in_shared}
    ref = torch.softmax((q.float() @ k.float().T) * 128 ** -0.5, dim=-1) @ v.float()
    return o, ref, args


@pytest.mark.parametrize("p_in_shared", [0, 1])
def test_attention_tile_on_the_interpreter(p_in_shared):
    o, ref, args = _attention_args(200, p_in_shared=p_in_shared)       # 200 keys: the second block is partial
    tlxc.interpret(W.attention_tile, (2,), (), args, num_warps=8)
    assert torch.isfinite(o).all() and _rel(o, ref) < 4 * EPS16


@pytest.mark.parametrize("a_kmajor, b_kmajor", [(1, 1), (0, 0)])
def test_wide_dot_on_the_interpreter(a_kmajor, b_kmajor):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(120, 128, generator=g).to(torch.float16)            # A [M, K]; rows past 120 read as 0
    b = torch.randn(128, 112, generator=g).to(torch.float16)            # B [K, N]
    a_stored = a if a_kmajor else a.T.contiguous()
    b_stored = b.T.contiguous() if b_kmajor else b
    c = torch.full((120, 112), float("nan"), dtype=torch.float16)
    args = {"a_desc": TD(a_stored, [128, 128]), "b_desc": TD(b_stored, [128, 128]), "c_desc": TD(c, [128, 128]),
            "A_KMAJOR": a_kmajor, "B_KMAJOR": b_kmajor, "BM": 128, "BN": 128, "BK": 128}
    tlxc.interpret(W.wide_dot, (1,), (), args, num_warps=8)
    assert _rel(c, a.float() @ b.float()) < 2 * EPS16


def _row_halves_args(device="cpu"):
    x = torch.randn(200, 128, generator=torch.Generator().manual_seed(4)).to(device=device, dtype=torch.float16)
    out = torch.full((200, 128), float("nan"), device=device, dtype=torch.float16)
    return x, out, {"x_desc": TD(x, [64, 128]), "out_ptr": out, "M": 200, "N": 128, "BM": 128, "BN": 128}


def test_wide_boxes_into_row_slices_of_a_blocked_buffer():
    x, out, args = _row_halves_args()
    cuda = _compile(W.row_halves, args).asm["cuda"]
    # a row slice moves the pointer by rows x 64 (the block's row pitch); each half's second
    # sub-box lands one block (128 rows x 64 columns = 8192 elements) further
    assert len(re.findall(r"half(_1)? = s_\d+ \+ s_\d+ \* 64 \+ \(s_\d+ / 64\) \* 8192;", cuda)) == 2
    loads = [line for line in cuda.splitlines() if "tlx_tma_load_2d(" in line and "&x_desc" in line]
    assert len(loads) == 4 and sum(" + 8192, &x_desc" in line for line in loads) == 2
    tlxc.interpret(W.row_halves, (2,), (), args, num_warps=4)
    assert torch.equal(out, x)


def _desc_methods_args(device="cpu"):
    x = torch.randn(100, 256, generator=torch.Generator().manual_seed(5)).to(device=device, dtype=torch.float16)
    y = torch.full_like(x, float("nan"))
    return x, y, {"x_desc": TD(x, [64, 256]), "y_desc": TD(y, [64, 256]), "BM": 64}


def test_desc_load_and_store_of_wide_boxes():
    x, y, args = _desc_methods_args()
    ptx = _compile(W.desc_methods_add_one, args).asm["ptx"]
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global") == 4
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 4
    tlxc.interpret(W.desc_methods_add_one, (2,), (), args, num_warps=8)
    assert torch.equal(y, x + 1)


# -- on the GPU ------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(200, 296, 104), (1024, 1024, 512)])
def test_gpu_gemm_wide_b(m, n, k):
    a, b, c, args = _gemm_args(m, n, k, "cuda")
    W.gemm_wide_b[(triton_cdiv(m, 128), triton_cdiv(n, 256))](**args, num_warps=8)
    torch.cuda.synchronize()
    ref = a.float() @ b.float()
    assert torch.isfinite(c).all() and _rel(c, ref) < 2 * EPS16


@pytest.mark.gpu
@pytest.mark.parametrize("a_kmajor, b_kmajor", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_gpu_wide_dot(a_kmajor, b_kmajor):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(120, 128, generator=g).to(torch.float16).cuda()
    b = torch.randn(128, 112, generator=g).to(torch.float16).cuda()
    a_stored = a if a_kmajor else a.T.contiguous()
    b_stored = b.T.contiguous() if b_kmajor else b
    c = torch.full((120, 112), float("nan"), dtype=torch.float16, device="cuda")
    W.wide_dot[(1,)](TD(a_stored, [128, 128]), TD(b_stored, [128, 128]), TD(c, [128, 128]), A_KMAJOR=a_kmajor,
                     B_KMAJOR=b_kmajor, BM=128, BN=128, BK=128, num_warps=8)
    torch.cuda.synchronize()
    assert torch.isfinite(c).all() and _rel(c, a.float() @ b.float()) < 2 * EPS16


@pytest.mark.gpu
@pytest.mark.parametrize("p_in_shared", [0, 1])
@pytest.mark.parametrize("n_ctx", [200, 1024])
def test_gpu_attention_tile(n_ctx, p_in_shared):
    o, ref, args = _attention_args(n_ctx, "cuda", p_in_shared)
    W.attention_tile[(triton_cdiv(n_ctx, 128),)](**args, num_warps=8)
    torch.cuda.synchronize()
    assert torch.isfinite(o).all() and _rel(o, ref.cuda()) < 4 * EPS16


@pytest.mark.gpu
def test_gpu_wide_boxes_into_row_slices():
    x, out, args = _row_halves_args("cuda")
    W.row_halves[(2,)](**args, num_warps=4)
    torch.cuda.synchronize()
    assert torch.equal(out, x)


@pytest.mark.gpu
def test_gpu_desc_load_and_store_of_wide_boxes():
    x, y, args = _desc_methods_args("cuda")
    W.desc_methods_add_one[(2,)](**args, num_warps=8)
    torch.cuda.synchronize()
    assert torch.equal(y, x + 1)


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b
