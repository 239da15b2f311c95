"""tl.dot on fp8 operands on sm_90a (issue 19): Triton's matmul tutorial in fp8 (A [M, K]
row-major, B = w.T of a row-major [N, K] w, float32 accumulator, float16 result) runs on
wgmma m64nNk32 (e4m3, e5m2 and mixed e4m3 x e5m2) from K-major swizzled buffers filled by
16-byte cp.async, without spills; ``max_num_imprecise_acc``, ``out_dtype`` and
``input_precision`` follow Triton's rules or are refused at the user's line; the interpreter
gives the same numbers on the frontend's IR and on the rewritten one, and they match a
float32 product of the fp8-rounded inputs on shapes that are not tile multiples."""
from __future__ import annotations

import copy
import os
import pathlib
import re

import pytest

torch = pytest.importorskip("torch")
import kernels_dot_fp8 as K

import tlxc.language as tl
from tlxc.check.findings import FAILING
from tlxc.compiler import check_function
from tlxc.errors import CompilationError
from tlxc.frontend.specialize import parse_signature, specialization_from_types
from tlxc.interpreter.executor import KernelRunner
from tlxc.interpreter.launch import _program_ids, prepare_launch
from tlxc.options import CompileOptions
from tlxc.passes.canonicalize import Canonicalize
from tlxc.passes.dot_wgmma import LowerDotToWgmma
from tlxc.passes.manager import PassManager
from tlxc.passes.pipeline import PipelineLoads

PTX = {"fp8e4nv": "e4m3", "fp8e5": "e5m2"}
TORCH = {"fp8e4nv": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2}
SNAPSHOT = pathlib.Path(__file__).parent / "snapshots" / "wgmma" / "fp8_dot_loop.cu"
UPDATE = os.environ.get("TLXC_UPDATE_SNAPSHOTS") == "1"


def _signature(a="fp8e4nv", b="fp8e4nv", out="fp16") -> str:
    """The tutorial's strides: A row-major, B K-major (stride_bk == 1)."""
    return (f"a_ptr=*{a}:16,b_ptr=*{b}:16,c_ptr=*{out}:16,M=i32:16,N=i32:16,K=i32:16,stride_am=i32:16,"
            f"stride_ak=i32:1,stride_bk=i32:1,stride_bn=i32:16,stride_cm=i32:16")


def _compile(a="fp8e4nv", b="fp8e4nv", bn=256, num_warps=8, stages=("cuda", "ptx", "cubin"), **meta):
    return K.fp8_matmul.compile(_signature(a, b), {"BM": 128, "BN": bn, "BK": 128, **meta},
                                num_warps=num_warps, stages=stages)


def _calls(cuda: str, helper: str) -> int:
    return sum(1 for line in cuda.splitlines() if f"{helper}(" in line and "void " + helper not in line)


@pytest.mark.parametrize("bn,num_warps", [(256, 8), (128, 4)])
def test_tutorial_fp8_dot_is_wgmma_e4m3_with_cp_async_and_no_spills(bn, num_warps):
    compiled = _compile(bn=bn, num_warps=num_warps)
    cuda, ptx = compiled.asm["cuda"], compiled.asm["ptx"]
    tiles = 128 // 64 // (num_warps // 4)                 # M tiles of 64 rows per warpgroup
    assert f"{tiles} tile(s) of m64n{bn}k32 x 4 k-steps per warpgroup; A K-major, B K-major" in cuda
    assert f"wgmma.mma_async.sync.aligned.m64n{bn}k32.f32.e4m3.e4m3" in ptx
    assert _calls(cuda, "tlx_cp_async_16") == 6           # A and B, 2 prologue stages + the refill
    assert not re.search(r"tlx_cp_async_(4|8)\(", cuda)
    assert compiled.metadata.get("spills_bytes", 0) == 0, compiled.asm.get("stats")


@pytest.mark.parametrize("a,b", [("fp8e5", "fp8e5"), ("fp8e4nv", "fp8e5"), ("fp8e5", "fp8e4nv")])
def test_e5m2_and_mixed_fp8_are_one_wgmma_each(a, b):
    compiled = _compile(a, b, bn=128, num_warps=4)
    ptx = compiled.asm["ptx"]
    assert set(re.findall(r"wgmma\.mma_async\S+", ptx)) == {f"wgmma.mma_async.sync.aligned.m64n128k32.f32."
                                                           f"{PTX[a]}.{PTX[b]}"}
    assert compiled.metadata.get("spills_bytes", 0) == 0, compiled.asm.get("stats")


def test_fp8_dot_loop_cuda_snapshot():
    """The K loop of the tutorial's fp8 matmul (128x256x128, 8 warps, 3 stages): cp.async wait,
    fence and barrier, four m64n256k32 e4m3 wgmmas on stage k % 3, the wait with one MMA in flight,
    the refill of both K-major buffers."""
    cuda = _compile(stages=("cuda",)).asm["cuda"]
    body = cuda[cuda.index("for (int k"):]
    loop = body[:body.index("\n  }\n") + 4]
    if UPDATE or not SNAPSHOT.exists():
        SNAPSHOT.write_text(loop)
    assert loop == SNAPSHOT.read_text(), ("the fp8 K loop changed; review and regenerate with "
                                          "TLXC_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_dot_fp8.py -k snapshot")


def test_max_num_imprecise_acc_splits_the_k_steps():
    """64 -> runs of two k32 steps, each into a zeroed tile retired and added in float32."""
    compiled = _compile(bn=128, num_warps=4, IMPRECISE=64)
    cuda = compiled.asm["cuda"]
    assert "runs of 2 k-step(s) of 32, each added in float32" in cuda
    # 2 tiles (rows 0 and 64 of the warpgroup's 128) x 2 runs, each waited at once
    assert len(re.findall(r"tlx_wgmma_wait_group<0, 64>\(dpart", cuda)) == 4
    assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in compiled.asm["ptx"]
    assert compiled.metadata.get("spills_bytes", 0) == 0, compiled.asm.get("stats")
    ir = _compile(bn=128, num_warps=4, IMPRECISE=64, stages=("ir.opt",)).asm["ir.opt"]
    assert "max_num_imprecise_acc = 64" in ir and "tlx.async_dot " in ir
    without = _compile(bn=128, num_warps=4, stages=("cuda",)).asm["cuda"]
    assert "dpart" not in without


def _single(dtype="fp8e4nv", **meta):
    sig = f"a_ptr=*{dtype},b_ptr=*{dtype},c_ptr=*fp32"
    return K.fp8_dot_args.compile(sig, {"BM": 64, "BN": 64, "BK": 64, **meta}, num_warps=4,
                                  stages=("ir.opt",)).asm["ir.opt"]


def test_input_precision_does_not_change_fp8():
    """fp8 values are exact in tf32 and in f32: every input_precision gives the same products."""
    texts = {p: re.sub(r"_PRECISION\w+\"", "", _single(PRECISION=p)) for p in (None, "ieee", "tf32", "tf32x3")}
    assert len(set(texts.values())) == 1 and "tlx.async_dot " in texts[None]


def test_f16_out_dtype_is_an_f16_accumulator_off_wgmma():
    text = _single(OUT=tl.float16)
    assert "tl.dot" in text and "tlx.async_dot" not in text and "f16" in text


@pytest.mark.parametrize("meta,message", [
    ({"OUT": tl.bfloat16}, "'out_dtype' of an fp8 dot must be tl.float32 or tl.float16, got bf16"),
    ({"IMPRECISE": 65}, "'max_num_imprecise_acc' (65) must be <= K (64)"),
    ({"IMPRECISE": -1}, "'max_num_imprecise_acc' must be >= 0, got -1"),
    ({"IMPRECISE": 1.5}, "'max_num_imprecise_acc' must be a compile-time integer"),
    ({"PRECISION": "bf16x3"}, "'input_precision' must be 'tf32', 'tf32x3' or 'ieee'"),
])
def test_bad_fp8_dot_arguments_are_located_errors(meta, message):
    with pytest.raises(CompilationError) as info:
        _single(**meta)
    assert message in info.value.message
    assert info.value.loc is not None and info.value.loc.file.endswith("kernels_dot_fp8.py")


def test_out_dtype_that_contradicts_acc_is_refused():
    with pytest.raises(CompilationError, match=r"'out_dtype' \(f16\) differs from the type of 'acc' \(f32\)"):
        K.fp8_matmul_mismatched_out.compile(_signature(), {"BM": 64, "BN": 64, "BK": 64}, stages=("ir",))


def test_max_num_imprecise_acc_on_16_bit_inputs_is_accepted_and_changes_nothing():
    """Only fp8 sums imprecisely; a 16-bit dot's products are summed in float32 anyway."""
    plain = K.fp8_dot_args.compile("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32", {"BM": 64, "BN": 64, "BK": 64},
                                   num_warps=4, stages=("ir.opt",)).asm["ir.opt"]
    bounded = K.fp8_dot_args.compile("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32",
                                     {"BM": 64, "BN": 64, "BK": 64, "IMPRECISE": 32},
                                     num_warps=4, stages=("ir.opt",)).asm["ir.opt"]
    assert plain == bounded.replace("IMPRECISE32", "IMPRECISEnone")


def test_checker_is_clean_on_the_fp8_kernel():
    spec = specialization_from_types(K.fp8_matmul, parse_signature(_signature("fp8e4nv", "fp8e5")),
                                     {"BM": 128, "BN": 256, "BK": 128})
    assert [f for f in check_function(K.fp8_matmul, spec, num_warps=8) if f.severity in FAILING] == []


# -- interpreter ---------------------------------------------------------------------------------

def fp8_operands(m, n, k, a_type, b_type, gen, scale=1.0):
    """A [M, K] row-major and B = w.T (w [N, K] row-major), both fp8; values of a normal
    distribution rounded to the type."""
    a = (torch.randn(m, k, generator=gen) * scale).to(TORCH[a_type])
    w = (torch.randn(n, k, generator=gen) * scale).to(TORCH[b_type])
    return a, w.t()


def _interpret(kfn, grid, args, meta, *, rewrite: bool, num_warps=4):
    runner, grid3, memory, values = prepare_launch(kfn, grid, args, meta, num_warps=num_warps)
    if rewrite:
        passes = PassManager([Canonicalize(), LowerDotToWgmma(), PipelineLoads(), Canonicalize()])
        runner = KernelRunner(passes.run(copy.deepcopy(runner.module),
                                         CompileOptions(num_warps=num_warps, arch="sm_90a", num_stages=None)))
    for pid in _program_ids(grid3, (1, 1, 1)):
        runner.run_program(pid, grid3, memory, values, None, None)
    return str(runner.module)


@pytest.mark.parametrize("a_type,b_type,meta", [
    ("fp8e4nv", "fp8e4nv", {}),
    ("fp8e5", "fp8e5", {}),
    ("fp8e4nv", "fp8e5", {}),
    ("fp8e4nv", "fp8e4nv", {"IMPRECISE": 32}),
])
def test_interpreter_matches_a_float32_product_of_the_fp8_inputs(a_type, b_type, meta):
    m, n, k = 100, 72, 150                  # none a multiple of the 64 x 32 x 64 tile
    gen = torch.Generator().manual_seed(hash((a_type, b_type, tuple(meta))) % 2**31)
    a, b = fp8_operands(m, n, k, a_type, b_type, gen)
    assert b.stride(0) == 1
    outs = []
    for rewrite in (False, True):
        c = torch.full((m, n), float("nan"), dtype=torch.float16)
        text = _interpret(K.fp8_matmul, (2, 3), (a, b, c, m, n, k, *a.stride(), *b.stride(), c.stride(0)),
                          {"BM": 64, "BN": 32, "BK": 64, **meta}, rewrite=rewrite)
        outs.append(c)
    assert "tl.dot" not in text and "tlx.async_dot " in text and "tlx.async_load" in text
    assert ("max_num_imprecise_acc" in text) == bool(meta)
    assert torch.equal(outs[0], outs[1])
    ref = a.float() @ b.float()
    assert not outs[1].isnan().any()
    err = ((outs[1].float() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-3, err                  # the fp16 rounding of the result


def test_interpreter_f16_accumulator():
    m, n, k = 80, 48, 96
    gen = torch.Generator().manual_seed(3)
    a, b = fp8_operands(m, n, k, "fp8e4nv", "fp8e4nv", gen, scale=0.5)
    c = torch.full((m, n), float("nan"), dtype=torch.float16)
    _interpret(K.fp8_matmul, (2, 2), (a, b, c, m, n, k, *a.stride(), *b.stride(), c.stride(0)),
               {"BM": 64, "BN": 32, "BK": 32, "OUT": tl.float16}, rewrite=True)
    ref = a.float() @ b.float()
    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
    assert err < 4e-3, err                  # three f16 roundings of the accumulator
