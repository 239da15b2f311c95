"""``tlx.prefetch(ptrs, level=, mask=)`` (prefetch.global.L1/L2 of every unmasked address) and
``tlx.prefetch(desc, tensormap=True)`` (prefetch.tensormap): cache hints that change no value,
a no-op on the interpreter, one instruction per element (per descriptor) on the GPU; and
``tlx.get_fp8_format_name``."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError
from tlxc.frontend.specialize import parse_signature, specialization_from_args, specialization_from_types
from tlxc.language import tlx

BLOCK = 128


@tlxc.kernel
def prefetch_then_load(src, dst, n, BLOCK: tl.constexpr, LEVEL: tl.constexpr, MASKED: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if MASKED:
        tlx.prefetch(src + offs, level=LEVEL, mask=mask)
    else:
        tlx.prefetch(src + offs, level=LEVEL)
        tlx.prefetch(src, level=LEVEL)                        # one address
    x = tl.load(src + offs, mask=mask)
    tl.store(dst + offs, x * 3.0, mask=mask)


@tlxc.kernel
def prefetch_descriptors(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    tlx.prefetch(in_desc, tensormap=True)
    tlx.prefetch(out_desc, tensormap=True)
    bufs = tlx.local_alloc((BM, BN), tl.float32, 1)
    bars = tlx.alloc_barriers(1)
    off_m = tl.program_id(0) * BM
    tlx.barrier_expect_bytes(bars[0], BM * BN * 4)
    tlx.async_descriptor_load(in_desc, bufs[0], [off_m, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)
    tlx.async_descriptor_store(out_desc, bufs[0], [off_m, 0])
    tlx.async_descriptor_store_wait(0)


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("level", ["L1", "L2"])
def test_interpreter_prefetch_changes_nothing(level, masked):
    n = 300                                                   # not a multiple of BLOCK
    src = torch.randn(n)
    dst = torch.full((n,), float("nan"))
    grid = ((n + BLOCK - 1) // BLOCK,)
    # the unmasked prefetch reaches past the tensor in the last program: a hint, never an error
    tlxc.interpret(prefetch_then_load)[grid](src, dst, n, BLOCK=BLOCK, LEVEL=level, MASKED=masked)
    torch.testing.assert_close(dst.double(), src.double() * 3)


def test_interpreter_tensormap_prefetch_changes_nothing():
    x = torch.randn(100, 32)
    y = torch.full_like(x, float("nan"))
    a = tlxc.TensorDescriptor.from_tensor(x, [32, 32])
    b = tlxc.TensorDescriptor.from_tensor(y, [32, 32])
    tlxc.interpret(prefetch_descriptors)[(4,)](a, b, BM=32, BN=32)
    assert torch.equal(y, x)


def _cuda(kernel, args: dict, arch: str = "sm_90a"):
    from tlxc.compiler import compile_kernel
    compiled = compile_kernel(kernel, specialization_from_args(kernel, args), arch=arch, num_warps=4)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    return compiled.asm["cuda"]


@pytest.mark.parametrize("level", ["L1", "L2"])
def test_prefetch_lowers_per_element_under_the_mask(level):
    x = torch.randn(BLOCK)
    masked = _cuda(prefetch_then_load, {"src": x, "dst": x, "n": 300, "BLOCK": BLOCK, "LEVEL": level,
                                        "MASKED": True})
    calls = [line for line in masked.splitlines() if f"tlx_prefetch_global_{level}(" in line and "void" not in line]
    assert len(calls) == 1 and "if (" in calls[0], calls
    assert f"prefetch.global.{level} " in masked
    plain = _cuda(prefetch_then_load, {"src": x, "dst": x, "n": 300, "BLOCK": BLOCK, "LEVEL": level,
                                       "MASKED": False})
    calls = [line for line in plain.splitlines() if f"tlx_prefetch_global_{level}(" in line and "void" not in line]
    assert len(calls) == 2 and not any("if (" in c for c in calls), calls


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_tensormap_prefetch_lowers_to_a_generic_address_prefetch(arch):
    a = tlxc.TensorDescriptor.from_tensor(torch.randn(64, 32), [32, 32])
    cuda = _cuda(prefetch_descriptors, {"in_desc": a, "out_desc": a, "BM": 32, "BN": 32}, arch)
    calls = [line for line in cuda.splitlines() if "tlx_prefetch_tensormap(&" in line]
    assert len(calls) == 2, calls
    assert "prefetch.tensormap [" in cuda and "prefetch.param.tensormap" not in cuda


@tlxc.kernel
def _bad_prefetch(src, CASE: tl.constexpr):
    offs = tl.arange(0, 16)
    if CASE == 0:
        tlx.prefetch(src + offs, level="L3")
    elif CASE == 1:
        tlx.prefetch(src, tensormap=True)
    elif CASE == 2:
        tlx.prefetch(offs)
    elif CASE == 3:
        tlx.prefetch(src, mask=offs < 4)


@pytest.mark.parametrize(("case", "message"), [
    (0, "'level' must be 'L1' or 'L2', got 'L3'"),
    (1, "'desc' must be a tensor descriptor"),
    (2, "'pointer' must be a pointer or a tensor of pointers"),
    (3, "'mask' is a tensor but 'pointer' is one pointer"),
])
def test_prefetch_argument_errors(case, message):
    from tlxc.compiler import frontend
    spec = specialization_from_types(_bad_prefetch, parse_signature("src=*fp32"), {"CASE": case})
    with pytest.raises(CompilationError) as info:
        frontend(_bad_prefetch, spec)
    assert message in str(info.value) and "test_tlx_prefetch.py" in str(info.value), str(info.value)


# -- get_fp8_format_name ------------------------------------------------------------------------------
@tlxc.kernel
def fp8_name_matches(out, DTYPE: tl.constexpr, NAME: tl.constexpr):
    name: tl.constexpr = tlx.get_fp8_format_name(DTYPE)
    tl.store(out, 1 if name == NAME else 0)


@pytest.mark.parametrize(("dtype", "name", "expected"), [
    (tl.float8e5, "e5m2", 1), (tl.float8e4nv, "e4m3", 1), (tl.float8e5, "e4m3", 0)])
def test_get_fp8_format_name(dtype, name, expected):
    out = torch.full((1,), -1, dtype=torch.int32)
    tlxc.interpret(fp8_name_matches)[(1,)](out, DTYPE=dtype, NAME=name)
    assert out.item() == expected


@pytest.mark.parametrize("dtype", [tl.float32, tl.float16, tl.int32])
def test_get_fp8_format_name_rejects_other_dtypes(dtype):
    out = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(CompilationError, match="only supports tl.float8e5 \\(e5m2\\) and tl.float8e4nv"):
        tlxc.interpret(fp8_name_matches)[(1,)](out, DTYPE=dtype, NAME="e5m2")


# -- GPU -----------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("level", ["L1", "L2"])
def test_gpu_prefetch_changes_nothing(level, masked):
    n = 300
    src = torch.randn(n, device="cuda")
    dst = torch.full_like(src, float("nan"))
    prefetch_then_load[((n + BLOCK - 1) // BLOCK,)](src, dst, n, BLOCK=BLOCK, LEVEL=level, MASKED=masked)
    torch.testing.assert_close(dst.double(), src.double() * 3)


@pytest.mark.gpu
def test_gpu_tensormap_prefetch_changes_nothing():
    x = torch.randn(100, 32, device="cuda")
    y = torch.full_like(x, float("nan"))
    a = tlxc.TensorDescriptor.from_tensor(x, [32, 32])
    b = tlxc.TensorDescriptor.from_tensor(y, [32, 32])
    prefetch_descriptors[(4,)](a, b, BM=32, BN=32)
    assert torch.equal(y, x)
