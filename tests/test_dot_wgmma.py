"""lower-dot-to-wgmma (passes/dot_wgmma.py): tl.dot on sm_90a runs on wgmma from compiler-
allocated swizzled shared buffers; other targets, types and shapes keep mma.sync."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import kernels_dot_wgmma as K

import tlxc
from tlxc.check.findings import FAILING
from tlxc.compiler import check_function
from tlxc.frontend.specialize import parse_signature, specialization_from_types

SIG = ("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp16,M=i32:16,N=i32:16,K=i32:16,stride_am=i32:16,stride_ak=i32:1,"
       "stride_bk=i32:16,stride_bn=i32:1,stride_cm=i32:16")


def _single(dtype="fp16", arch="sm_90a", num_warps=4, **meta):
    sig = f"a_ptr=*{dtype},b_ptr=*{dtype},c_ptr=*fp32"
    meta = {"BM": 64, "BN": 64, "BK": 32, **meta}
    return K.single_dot.compile(sig, meta, arch=arch, num_warps=num_warps, stages=("ir.opt",)).asm["ir.opt"]


def test_fp16_dot_becomes_wgmma_from_swizzled_buffers():
    text = _single()
    assert "tl.dot" not in text
    assert "tlx.async_dot " in text and "tlx.async_dot_wait" in text and text.count("tlx.local_store") == 2
    assert "swizzle = 128" in text                     # chosen by shared-layouts from the wgmma consumer


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_acc_none_and_out_dtype(dtype):
    text = _single(dtype, OUT=tl_dtype("float32"))
    assert "tlx.async_dot " in text


def test_f16_accumulator_stays_on_mma_sync():
    # the wgmma lowering holds f32 accumulators only; an f16 one (out_dtype=f16) keeps mma.sync
    text = _single("fp16", OUT=tl_dtype("float16"))
    assert "tl.dot" in text and "tlx.async_dot" not in text


def tl_dtype(name):
    return getattr(tlxc.language, name)


@pytest.mark.parametrize("case", ["sm_80", "sm_100a", "f32 inputs", "M=32", "bf16 out"])
def test_dot_stays_on_mma_sync(case):
    if case in ("sm_80", "sm_100a"):
        text = _single(arch=case)
    elif case == "f32 inputs":
        text = _single("fp32")
    elif case == "M=32":
        text = _single(BM=32)
    else:                                              # a bf16 accumulator: wgmma accumulates in f32/f16
        text = _single("bf16", OUT=tl_dtype("bfloat16"))
    assert "tl.dot" in text and "tlx.async_dot" not in text


def test_checker_is_clean_on_the_rewritten_kernel():
    spec = specialization_from_types(K.tile_matmul, parse_signature(SIG), {"BM": 128, "BN": 256, "BK": 64})
    assert [f for f in check_function(K.tile_matmul, spec, num_warps=8) if f.severity in FAILING] == []


@pytest.mark.parametrize("bn,num_warps", [(128, 4), (256, 8)])
def test_cubin_has_wgmma_and_no_spills(bn, num_warps):
    compiled = K.tile_matmul.compile(SIG, {"BM": 128, "BN": bn, "BK": 64}, num_warps=num_warps,
                                     stages=("cuda", "ptx", "cubin"))
    ptx = compiled.asm["ptx"]
    assert "wgmma.mma_async" in ptx and "cp.async.cg.shared.global" in ptx
    assert compiled.metadata.get("spills_bytes", 0) == 0, compiled.asm.get("stats")
