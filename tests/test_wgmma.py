"""wgmma (tlx.async_dot) and swizzled shared memory, without a GPU.

The swizzle address function against CuTe's Swizzle<B, 4, 3>, the shared-layouts
pass, descriptor bit packing against hand-computed values, a snapshot of the
swizzled local_store/local_load addressing, and wgmma kernels compiled by NVRTC
(ptxas checks every instruction) for sm_90a.  None of this has run on a GPU.
"""
from __future__ import annotations

import os
from pathlib import Path

import kernels_wgmma as K
import pytest
import torch

import tlxc
from tlxc.codegen_nvptx.rules_mma_async import descriptor, descriptor_fields
from tlxc.compiler import compile_kernel
from tlxc.errors import CompilationError, LayoutError
from tlxc.frontend.specialize import specialization_from_args
from tlxc.passes.shared_layouts import SWIZZLE_PERIOD, swizzle_offset

SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "wgmma" / "swizzled_round_trip.cu"
STAGES = ("ir", "ir.opt", "cuda", "ptx", "cubin")


# -- the swizzle address function ----------------------------------------------------------------
def cute_swizzle(offset: int, bits: int, base: int = 4, shift: int = 3) -> int:
    """CuTe's Swizzle<B, M, S>: XOR the B bits at M + S down onto the B bits at M."""
    mask = ((1 << bits) - 1) << (base + shift)
    return offset ^ ((offset & mask) >> shift)


@pytest.mark.parametrize("swizzle,bits", [(128, 3), (64, 2), (32, 1)])
def test_swizzle_offset_is_cute_swizzle(swizzle, bits):
    for offset in range(8192):
        assert swizzle_offset(offset, swizzle) == cute_swizzle(offset, bits)
    period = SWIZZLE_PERIOD[swizzle]
    # a permutation of each period that moves whole 16-byte chunks
    assert sorted(swizzle_offset(o, swizzle) for o in range(period)) == list(range(period))
    for o in range(0, period, 16):
        assert all(swizzle_offset(o + j, swizzle) == swizzle_offset(o, swizzle) + j for j in range(16))


def test_swizzle_128_moves_chunk_c_of_line_l_to_c_xor_l():
    for line in range(8):
        for chunk in range(8):
            assert swizzle_offset(128 * line + 16 * chunk, 128) == 128 * line + 16 * (chunk ^ line)
    assert swizzle_offset(1024 + 16, 128) == 1024 + 16        # the pattern restarts every 1024 bytes


# -- descriptors ----------------------------------------------------------------------------------
def test_descriptor_bits_k_major_128b():
    # start 0x400 -> 0x40 in bits 0-13; LBO 16 B -> 1 in bits 16-29; SBO 1024 B -> 64 in bits 32-45;
    # 128B swizzle -> mode 1 in bits 62-63
    assert descriptor(0x400, 16, 1024, 128) == 0x4000_0040_0001_0040
    assert descriptor_fields(16, 1024, 128) == 0x4000_0040_0001_0000


def test_descriptor_bits_mn_major_64b_and_32b():
    # 64B: mode 2; LBO 8192 B -> 512 (0x200) at bit 16; SBO 512 B -> 32 at bit 32; start 0x1230 -> 0x123
    assert descriptor(0x1230, 8192, 512, 64) == 0x8000_0020_0200_0123
    # 32B: mode 3; SBO 256 B -> 16; base offset 5 at bits 49-51
    assert descriptor(0, 16, 256, 32, base_offset=5) == 0xC00A_0010_0001_0000
    # the start address field is 14 bits of (address & 0x3FFFF) >> 4
    assert descriptor(0x3FFF0, 0, 16, 0) & 0x3FFF == 0x3FFF


# -- the shared-layouts pass -------------------------------------------------------------------------
def _tile(b_transposed: int, swizzle=None, arch="sm_90a"):
    a = torch.randn(64, 64, dtype=torch.bfloat16)
    desc = tlxc.TensorDescriptor.from_tensor(a, [64, 64], swizzle=swizzle)
    spec = specialization_from_args(K.wgmma_tile, {"a_desc": desc, "b_desc": desc, "c_ptr": torch.empty(64, 64),
                                                   "BM": 64, "BN": 64, "BK": 64, "B_TRANSPOSED": b_transposed})
    return compile_kernel(K.wgmma_tile, spec, arch=arch, stages=STAGES)


def test_wgmma_operands_get_128b_swizzle_and_1024_byte_alignment():
    compiled = _tile(1)
    allocs = [op for op in compiled.module.kernels[0].walk() if op.name == "tlx.local_alloc"]
    assert [op.attrs["swizzle"] for op in allocs] == [128, 128]
    assert all(op.attrs["offset"] % 1024 == 0 for op in allocs)
    assert "aligned(1024)" in compiled.asm["cuda"]


def test_conflicting_swizzles_are_a_layout_error_naming_both_ops():
    with pytest.raises(LayoutError) as info:
        _tile(0, swizzle=0)
    message = str(info.value)
    assert "tlx.async_dot" in message and "tlx.async_descriptor_load" in message
    assert "128 bytes" in message and "0 bytes" in message


# -- wgmma codegen ------------------------------------------------------------------------------------
@pytest.mark.parametrize("b_transposed", [0, 1])
def test_wgmma_tile_compiles_to_wgmma(b_transposed):
    compiled = _tile(b_transposed)
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16") == 4      # K=64: 4 k16 steps
    for mnemonic in ("wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned 0"):
        assert mnemonic in ptx
    # B as [K, N] row-major is N-major (imm-trans-b = 1); a local_trans view of [N, K] is K-major
    assert f"tlx_wgmma_m64n64k16_f32_bf16<0, {1 - b_transposed}>" in compiled.asm["cuda"]
    assert "serialized" not in compiled.metadata["ptxas_log"]


@pytest.mark.parametrize("num_warps", [4, 8])
def test_wgmma_loop_compiles(num_warps):
    a = torch.randn(128, 256, dtype=torch.bfloat16)
    desc = tlxc.TensorDescriptor.from_tensor(a, [128, 64])
    spec = specialization_from_args(K.wgmma_loop, {"a_desc": desc, "b_desc": desc, "c_ptr": torch.empty(128, 128),
                                                   "K": 256, "BM": 128, "BN": 128, "BK": 64})
    compiled = compile_kernel(K.wgmma_loop, spec, num_warps=num_warps, stages=STAGES)
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in compiled.asm["ptx"]
    assert compiled.metadata["spills_bytes"] == 0
    assert "serialized" not in compiled.metadata["ptxas_log"]
    if num_warps == 8:            # two warpgroups: the second one's A rows start 64 rows (8 KB) later
        assert "((((warp) >> 2) & 1) * 64) * 128" in compiled.asm["cuda"]


def test_async_dot_with_register_accumulator_is_refused_on_sm_100a():
    with pytest.raises(CompilationError, match=r"on Blackwell \(sm_100a\) async_dot accumulates in tensor memory"):
        _tile(1, arch="sm_100a")


# -- swizzled local_store / local_load ----------------------------------------------------------------
def test_swizzled_round_trip_compiles_and_matches_snapshot():
    a = torch.randn(64, 64, dtype=torch.bfloat16)
    desc = tlxc.TensorDescriptor.from_tensor(a, [64, 64])
    spec = specialization_from_args(K.swizzled_round_trip, {"a_desc": desc, "out_ptr": torch.empty(64, 64),
                                                            "BM": 64, "BK": 64})
    compiled = compile_kernel(K.swizzled_round_trip, spec, stages=STAGES)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    cuda = compiled.asm["cuda"]
    # 16-byte vector accesses, each through the XOR of bits 7-9 onto bits 4-6 of its byte offset
    body = cuda[cuda.index('extern "C"'):]
    lines = [line.strip() for line in body.splitlines() if "_shared_b128(" in line]
    assert len(lines) == 2 and all(">> 7) & 7) << 4)" in line for line in lines)
    assert "ld.shared.v4.b32" in compiled.asm["ptx"] and "st.shared.v4.b32" in compiled.asm["ptx"]
    text = "\n".join(lines) + "\n"
    if os.environ.get("TLXC_UPDATE_SNAPSHOTS") == "1" or not SNAPSHOT.exists():
        SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
        SNAPSHOT.write_text(text)
    assert SNAPSHOT.read_text() == text, ("the swizzled shared-memory addressing changed; review and regenerate "
                                          "with TLXC_UPDATE_SNAPSHOTS=1")


def test_swizzled_tma_descriptor_is_accepted():
    import kernels_tma
    x = torch.randn(64, 32)                                   # 128-byte inner box: 128B swizzle
    desc = tlxc.TensorDescriptor.from_tensor(x, [64, 32])
    assert desc.swizzle == 128
    spec = specialization_from_args(kernels_tma.tma_add_one, {"in_desc": desc, "out_desc": desc, "BM": 64, "BN": 32,
                                                              "PREFETCH": False})
    compiled = compile_kernel(kernels_tma.tma_add_one, spec, stages=STAGES)
    alloc = next(op for op in compiled.module.kernels[0].walk() if op.name == "tlx.local_alloc")
    assert alloc.attrs["swizzle"] == 128
    assert "tlx_tma_load_2d" in compiled.asm["cuda"] and ">> 7) & 7) << 4)" in compiled.asm["cuda"]


# -- block-stacked (column-blocked) B wider than 128 bytes --------------------------------------------
@pytest.mark.parametrize("bn", [128, 256])
def test_wide_b_is_block_stacked_and_one_wgmma_per_k_step(bn):
    a = torch.randn(64, 64, dtype=torch.bfloat16)
    b = torch.randn(64, bn, dtype=torch.bfloat16)
    spec = specialization_from_args(K.wgmma_wide_b, {
        "a_desc": tlxc.TensorDescriptor.from_tensor(a, [64, 64], swizzle=128),
        "b_desc": tlxc.TensorDescriptor.from_tensor(b, [64, 64], swizzle=128),
        "c_ptr": torch.empty(64, bn), "b_out_ptr": torch.empty(64, bn, dtype=torch.bfloat16),
        "BM": 64, "BN": bn, "BK": 64})
    compiled = compile_kernel(K.wgmma_wide_b, spec, stages=STAGES)
    allocs = [op for op in compiled.module.kernels[0].walk() if op.name == "tlx.local_alloc"]
    assert [(op.attrs["swizzle"], op.attrs.get("column_block")) for op in allocs] == [(128, None), (128, 64)]
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    ptx, cuda = compiled.asm["ptx"], compiled.asm["cuda"]
    # one m64n{bn}k16 per k16 step (K = 64), spanning bn / 64 blocks through LBO
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.bf16.bf16") == 4
    # B descriptor: LBO = block distance 64 rows x 128 B = 8192 B (512 at bit 16), SBO = 1024 B, 128B swizzle
    assert f"{descriptor_fields(8192, 1024, 128):#x}ull" in cuda
    assert descriptor_fields(8192, 1024, 128) == 0x4000_0040_0200_0000
    # column slices at 64 j start block j (4096 elements on); local_load goes through the blocked address
    assert "/ 64) * 4096" in cuda and "% 64)" in cuda
    assert compiled.metadata["spills_bytes"] == 0
    assert "serialized" not in compiled.metadata["ptxas_log"]

