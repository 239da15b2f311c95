"""TMA reduce-stores: ``tlx.async_descriptor_store(desc, buf, offsets, store_reduce=KIND)``.

The interpreter (element-wise read-modify-write of the tensor, in the element type's
arithmetic, out-of-bounds elements dropped) against numpy/torch references; the IR
attribute's round trip; the CUDA lowering (one ``cp.reduce.async.bulk.tensor`` per sub-box
of a split box) compiled to cubins; the located errors for a kind the element type does not
take; GPU runs (``gpu`` marker) of the same kernels.
"""
from __future__ import annotations

import functools

import kernels_tma_reduce as K
import numpy as np
import pytest
import torch

import tlxc
from tlxc.compiler import compile_kernel, frontend
from tlxc.errors import VerificationError
from tlxc.frontend.specialize import specialization_from_args
from tlxc.interpreter.tma import reduce_elements
from tlxc.ir import types as T
from tlxc.ir.parser import parse_module
from tlxc.ir.printer import print_module
from tlxc.ir.verifier import verify_module

BM, BN, SPLITS = 32, 16, 3
SHAPES = [(50, 40), (7, 24)]          # not multiples of the box: clipped rows and columns


def _reduce_splits(x, out, kind, interpret=True):
    """Launch ``reduce_splits``: x is [splits, M, N], out [M, N] (reduced in place)."""
    splits, m, n = x.shape
    x_desc = tlxc.TensorDescriptor.from_tensor(x, [1, BM, BN])
    out_desc = tlxc.TensorDescriptor.from_tensor(out, [BM, BN])
    launcher = tlxc.interpret(K.reduce_splits) if interpret else K.reduce_splits
    launcher[(-(-m // BM), -(-n // BN), splits)](x_desc, out_desc, BM=BM, BN=BN, KIND=kind, num_warps=4)


# -- floats: add (f32, f16, bf16), min/max (f16, bf16) ------------------------------------------------

FLOAT_CASES = [("add", torch.float32), ("add", torch.float16), ("add", torch.bfloat16), ("min", torch.float16),
               ("max", torch.bfloat16)]
FLOAT_IDS = [f"{k}-{str(d)[6:]}" for k, d in FLOAT_CASES]


def _float_reference(kind, init, x):
    combine = {"add": torch.add, "min": torch.minimum, "max": torch.maximum}[kind]
    return functools.reduce(combine, [init.double(), *x.double()])


def _assert_reduced(kind, out, init, x):
    """min/max exactly; an add within its roundings: each of the SPLITS adds rounds once, by at
    most half an ulp of a partial sum, and no partial exceeds |init| + sum |x| (in any order)."""
    want = _float_reference(kind, init, x)
    if kind != "add":
        assert torch.equal(out.double(), want)
        return
    eps = torch.finfo(out.dtype).eps
    bound = SPLITS * eps * (init.double().abs() + x.double().abs().sum(0))
    excess = (out.double() - want).abs() - bound
    assert excess.max() <= 0, f"off by more than the roundings allow: {excess.max().item()}"


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind,dtype", FLOAT_CASES, ids=FLOAT_IDS)
def test_interpreter_float_reduce(kind, dtype, shape):
    x = torch.randn(SPLITS, *shape).to(dtype)
    init = torch.randn(*shape).to(dtype)
    out = init.clone()
    _reduce_splits(x, out, kind)
    _assert_reduced(kind, out, init, x)


# -- integers: add/min/max and the bitwise ops, exact ------------------------------------------------

INT_CASES = [("add", np.int32), ("add", np.uint32), ("add", np.uint64), ("min", np.int32), ("max", np.uint32),
             ("min", np.int64), ("max", np.uint64), ("and", np.int32), ("or", np.uint32), ("xor", np.int32),
             ("xor", np.uint32)]
NP_OPS = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
          "xor": np.bitwise_xor}


def _random_ints(rng, shape, dtype):
    info = np.iinfo(dtype)          # full range: adds wrap, min/max see signs
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind,dtype", INT_CASES, ids=[f"{k}-{np.dtype(d).name}" for k, d in INT_CASES])
def test_interpreter_int_reduce(kind, dtype, shape):
    rng = np.random.default_rng()
    x = _random_ints(rng, (SPLITS, *shape), dtype)
    init = _random_ints(rng, shape, dtype)
    out = torch.from_numpy(init.copy())
    _reduce_splits(torch.from_numpy(x), out, kind)
    want = functools.reduce(NP_OPS[kind], [init, *x])
    np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize("kind", ["inc", "dec"])
def test_interpreter_inc_dec_u32(kind):
    """PTX's wrapping counters (atom.inc/dec): one split, so the order of updates does not matter."""
    rng = np.random.default_rng()
    x = rng.integers(0, 8, size=(1, 50, 40), dtype=np.uint32)
    init = rng.integers(0, 10, size=(50, 40), dtype=np.uint32)
    out = torch.from_numpy(init.copy())
    _reduce_splits(torch.from_numpy(x), out, kind)
    new = x[0]
    if kind == "inc":
        want = np.where(init >= new, 0, init + 1)
    else:
        want = np.where((init == 0) | (init > new), new, init - 1)
    np.testing.assert_array_equal(out.numpy(), want.astype(np.uint32))


def test_reduce_elements_float_min_max_ignore_nan():
    old = np.array([1.0, np.nan, 2.0], np.float32)
    new = np.array([np.nan, 3.0, -1.0], np.float32)
    np.testing.assert_array_equal(reduce_elements("min", old, new, T.f32), [1.0, 3.0, -1.0])
    np.testing.assert_array_equal(reduce_elements("max", old, new, T.bf16), [1.0, 3.0, 2.0])


def test_reduce_elements_f16_add_rounds_once():
    """f16 + f16 computed in float32 then rounded is the correctly rounded f16 sum."""
    old = np.array([2048.0, 1.0], np.float16)
    new = np.array([1.0, 2.0 ** -11], np.float16)       # both exactly a tie: round to even
    got = reduce_elements("add", old, new, T.f16)
    assert got.dtype == np.float16 and got.tolist() == [2048.0, 1.0]


# -- two warp-specialized replicas adding into the same rows -----------------------------------------

def _ws_add_rows(a, out, interpret=True, stages=2):
    n_rows, n_cols = out.shape
    out_desc = tlxc.TensorDescriptor.from_tensor(out, [BM, BN])
    launcher = tlxc.interpret(K.ws_add_rows) if interpret else K.ws_add_rows
    launcher[(-(-n_rows // BM),)](a, out_desc, n_rows, n_cols, BM=BM, BN=BN, NUM_STAGE=stages)


def _assert_two_adds(out, init, a):
    """out == init + a[0] + 2 a[1] up to the two f32 roundings of the adds (in either order)."""
    parts = (init.double(), a[0].double(), 2 * a[1].double())
    bound = 2 * torch.finfo(torch.float32).eps * sum(p.abs() for p in parts)
    excess = (out.double() - sum(parts)).abs() - bound
    assert excess.max() <= 0, f"off by more than the roundings allow: {excess.max().item()}"


@pytest.mark.parametrize("shape", [(50, 40), (32, 16)])
def test_interpreter_two_replicas_add_into_the_same_rows(shape):
    a = torch.randn(2, *shape)
    init = torch.randn(*shape)
    out = init.clone()
    _ws_add_rows(a, out)
    _assert_two_adds(out, init, a)


# -- IR, lowering, cubins ---------------------------------------------------------------------------

def _spec_splits(kind="add", dtype=torch.float32, bn=BN):
    x = torch.zeros(SPLITS, 64, 128, dtype=dtype)
    out = torch.zeros(64, 128, dtype=dtype)
    return specialization_from_args(K.reduce_splits, {
        "x_desc": tlxc.TensorDescriptor.from_tensor(x, [1, BM, bn]),
        "out_desc": tlxc.TensorDescriptor.from_tensor(out, [BM, bn]), "BM": BM, "BN": bn, "KIND": kind})


def test_ir_carries_the_reduction_and_round_trips():
    module = frontend(K.reduce_splits, _spec_splits("max", torch.float16))
    text = print_module(module)
    line = next(ln for ln in text.splitlines() if "tlx.async_descriptor_store " in ln)
    assert '{reduce = "max"}' in line, line
    assert print_module(parse_module(text)) == text


def test_plain_store_prints_no_reduce_attribute():
    module = frontend(K.reduce_splits, _spec_splits(""))
    line = next(ln for ln in print_module(module).splitlines() if "tlx.async_descriptor_store " in ln)
    assert "{" not in line and "reduce =" not in line, line


def test_verifier_rejects_a_reduction_the_element_type_does_not_take():
    module = frontend(K.reduce_splits, _spec_splits("add"))
    text = print_module(module).replace('{reduce = "add"}', '{reduce = "inc"}')
    with pytest.raises(VerificationError, match="takes elements of u32, got f32"):
        verify_module(parse_module(text))


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_reduce_store_compiles_to_cp_reduce(arch):
    compiled = compile_kernel(K.reduce_splits, _spec_splits("add"), arch=arch, num_warps=4)
    cuda = compiled.asm["cuda"]
    assert "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group" in cuda
    assert "tlx_tma_store_2d" not in cuda
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


def test_a_split_box_is_reduced_sub_box_by_sub_box():
    """A [32, 64] f32 box has 256-byte rows: two 128-byte-swizzled sub-boxes, two reduce copies
    under one guard and one bulk group, as a plain store of that box."""
    compiled = compile_kernel(K.reduce_splits, _spec_splits("add", bn=64), arch="sm_90a", num_warps=4)
    line = next(ln for ln in compiled.asm["cuda"].splitlines() if "tlx_bulk_commit_group();" in ln
                and "tlx_tma_reduce" in ln)
    assert line.count("tlx_tma_reduce_add_2d(&") == 2 and " + 32" in line, line
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


def test_ws_reduce_kernel_compiles_for_sm_90a():
    out = torch.zeros(64, 128)
    spec = specialization_from_args(K.ws_add_rows, {
        "a_ptr": torch.zeros(2, 64, 128), "out_desc": tlxc.TensorDescriptor.from_tensor(out, [BM, BN]),
        "n_rows": 64, "n_cols": 128, "BM": BM, "BN": BN, "NUM_STAGE": 2})
    compiled = compile_kernel(K.ws_add_rows, spec, arch="sm_90a")
    assert "tlx_tma_reduce_add_2d" in compiled.asm["cuda"] and compiled.asm["cubin"][:4] == b"\x7fELF"


# -- errors -----------------------------------------------------------------------------------------

def _bare(kind, dtype):
    out = torch.zeros(64, 64, dtype=dtype)
    return specialization_from_args(K.reduce_store_with, {
        "out_desc": tlxc.TensorDescriptor.from_tensor(out, [16, 16]), "KIND": kind})


@pytest.mark.parametrize("kind,dtype,message", [
    ("mul", torch.float32, "'mul' is not a TMA reduction; expected one of add, min, max"),
    ("min", torch.float32, "a TMA 'min' reduce-store takes elements of f16, bf16, i32, u32, i64, u64, got f32"),
    ("add", torch.int64, "a TMA 'add' reduce-store takes elements of f16, bf16, f32, i32, u32, u64, got i64"),
    ("xor", torch.float16, "a TMA 'xor' reduce-store takes elements of i32, u32, got f16"),
    ("xor", torch.int64, "a TMA 'xor' reduce-store takes elements of i32, u32, got i64"),
    ("inc", torch.int32, "a TMA 'inc' reduce-store takes elements of u32, got i32"),
    ("add", torch.float64, "got f64"),
    ("add", torch.int8, "got i8"),
    (1, torch.float32, "'store_reduce' must be a string"),
])
def test_bad_store_reduce_is_a_located_error(kind, dtype, message):
    with pytest.raises(tlxc.CompilationError) as info:
        frontend(K.reduce_store_with, _bare(kind, dtype))
    text = str(info.value)
    assert message in text, text
    assert "kernels_tma_reduce.py:" in text and "store_reduce=KIND" in text, text


# -- GPU --------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind,dtype", FLOAT_CASES, ids=FLOAT_IDS)
def test_gpu_float_reduce(kind, dtype, shape):
    x = torch.randn(SPLITS, *shape, device="cuda").to(dtype)
    init = torch.randn(*shape, device="cuda").to(dtype)
    out = init.clone()
    _reduce_splits(x, out, kind, interpret=False)
    torch.cuda.synchronize()
    _assert_reduced(kind, out, init, x)


@pytest.mark.gpu
@pytest.mark.parametrize("kind,dtype", INT_CASES, ids=[f"{k}-{np.dtype(d).name}" for k, d in INT_CASES])
def test_gpu_int_reduce(kind, dtype):
    rng = np.random.default_rng()
    x = _random_ints(rng, (SPLITS, 50, 40), dtype)
    init = _random_ints(rng, (50, 40), dtype)
    out = torch.from_numpy(init.copy()).cuda()
    _reduce_splits(torch.from_numpy(x).cuda(), out, kind, interpret=False)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), functools.reduce(NP_OPS[kind], [init, *x]))


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["inc", "dec"])
def test_gpu_inc_dec_u32(kind):
    rng = np.random.default_rng()
    x = rng.integers(0, 8, size=(1, 50, 40), dtype=np.uint32)
    init = rng.integers(0, 10, size=(50, 40), dtype=np.uint32)
    out = torch.from_numpy(init.copy()).cuda()
    _reduce_splits(torch.from_numpy(x).cuda(), out, kind, interpret=False)
    torch.cuda.synchronize()
    cpu = torch.from_numpy(init.copy())
    _reduce_splits(torch.from_numpy(x), cpu, kind)          # the interpreter agrees bit for bit
    np.testing.assert_array_equal(out.cpu().numpy(), cpu.numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(50, 40), (300, 136)])
def test_gpu_two_replicas_add_into_the_same_rows(shape):
    a = torch.randn(2, *shape, device="cuda")
    init = torch.randn(*shape, device="cuda")
    out = init.clone()
    _ws_add_rows(a, out, interpret=False)
    torch.cuda.synchronize()
    _assert_two_adds(out, init, a)


@pytest.mark.gpu
def test_gpu_split_box_reduce():
    """A [32, 64] f32 box (two sub-boxes per reduce-store) adds every element once."""
    x = torch.randn(SPLITS, 100, 136, device="cuda")
    init = torch.randn(100, 136, device="cuda")
    out = init.clone()
    x_desc = tlxc.TensorDescriptor.from_tensor(x, [1, BM, 64])
    out_desc = tlxc.TensorDescriptor.from_tensor(out, [BM, 64])
    K.reduce_splits[(-(-100 // BM), -(-136 // 64), SPLITS)](x_desc, out_desc, BM=BM, BN=64, KIND="add", num_warps=4)
    torch.cuda.synchronize()
    _assert_reduced("add", out, init, x)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.uint64, np.float32])
def test_reduce_add_cuda_text_on_the_emulation(dtype):
    """The generated CUDA of a split reduce-add, run on the CUDA emulation: integers add wrapping (the
    emulation once added their bits as float32s), float32 as floats; three splits into one output."""
    from tlxc.codegen_nvptx.emu import run as emu
    if not emu.available():
        pytest.skip("no host C++ compiler")
    rng = np.random.default_rng(7)
    if dtype == np.float32:
        x, init = (rng.integers(-64, 64, size=s).astype(np.float32) for s in ((3, 40, 48), (40, 48)))
    else:
        x, init = (_random_ints(rng, s, dtype) for s in ((3, 40, 48), (40, 48)))
    out = torch.from_numpy(init.copy())
    x_desc = tlxc.TensorDescriptor.from_tensor(torch.from_numpy(x), [1, 32, 16])
    out_desc = tlxc.TensorDescriptor.from_tensor(out, [32, 16])
    h = K.reduce_splits.warmup(x_desc, out_desc, BM=32, BN=16, KIND="add", num_warps=4, grid=(2, 3, 3))
    emu.build(h.asm["cuda"]).run({"x_desc": x_desc, "out_desc": out_desc}, grid=(2, 3, 3), threads=128)
    np.testing.assert_array_equal(out.numpy(), init + x[0] + x[1] + x[2])
