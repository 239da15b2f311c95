"""Triton's descriptor atomics, ``desc.atomic_add/min/max/and/or/xor(offsets, value)``: a host
``TensorDescriptor`` combines the box by a TMA reduce-store, an in-kernel one
(``tl.make_tensor_descriptor``) by element atomics masked to the tensor (or a TMA reduce where its map
may store and TMA reduces the type).  On the interpreter against torch, boxes past the tensor's edge
(shapes that are not box multiples), the refusal of a type TMA does not reduce, and the sm_90a code."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc import TensorDescriptor
from tlxc.errors import CompilationError

M, N, MB, NB = 20, 56, 8, 32          # 3 x 2 boxes, the last row and column of boxes clipped


@tlxc.jit
def host_atomics(desc, a_ptr, M, N, KIND: tl.constexpr, MB: tl.constexpr, NB: tl.constexpr):
    _apply(desc, a_ptr, M, N, KIND, MB, NB)


@tlxc.jit
def device_atomics(out_ptr, a_ptr, M, N, KIND: tl.constexpr, MB: tl.constexpr, NB: tl.constexpr):
    desc = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[N, 1], block_shape=[MB, NB])
    _apply(desc, a_ptr, M, N, KIND, MB, NB)


@tlxc.jit
def _apply(desc, a_ptr, M, N, KIND: tl.constexpr, MB: tl.constexpr, NB: tl.constexpr):
    """Program (i, j) combines a's box (i, j) into the descriptor's by ``desc.atomic_<KIND>``."""
    m0 = tl.program_id(0) * MB
    n0 = tl.program_id(1) * NB
    rows = m0 + tl.arange(0, MB)[:, None]
    cols = n0 + tl.arange(0, NB)[None, :]
    val = tl.load(a_ptr + rows * N + cols, mask=(rows < M) & (cols < N), other=0)
    offsets = [m0, n0]
    if KIND == "add":
        desc.atomic_add(offsets, val)
    elif KIND == "min":
        desc.atomic_min(offsets, val)
    elif KIND == "max":
        desc.atomic_max(offsets, val)
    elif KIND == "and":
        desc.atomic_and(offsets, val)
    elif KIND == "or":
        desc.atomic_or(offsets, val)
    else:
        desc.atomic_xor(offsets, val)


def _reference(kind, out, a):
    if kind == "add":
        return (out.double() + a.double()).to(out.dtype) if out.dtype.is_floating_point else out + a
    return {"min": torch.minimum, "max": torch.maximum, "and": torch.bitwise_and, "or": torch.bitwise_or,
            "xor": torch.bitwise_xor}[kind](out, a)


def _inputs(dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return [torch.randn(M, N, generator=g).to(dtype) for _ in range(2)]
    return [torch.randint(-2**20, 2**20, (M, N), generator=g).to(dtype) for _ in range(2)]


def _check(got, ref):
    if got.dtype.is_floating_point:
        assert torch.allclose(got.float(), ref.float(), rtol=1e-2, atol=1e-2)
    else:
        assert torch.equal(got, ref)


CASES = [("add", torch.float32), ("add", torch.bfloat16), ("add", torch.int32), ("min", torch.int32),
         ("max", torch.int32), ("and", torch.int32), ("or", torch.int32), ("xor", torch.int32), ("min", torch.float16)]


@pytest.mark.parametrize("kind,dtype", CASES, ids=str)
def test_host_descriptor_atomics_on_the_interpreter(kind, dtype):
    out, a = _inputs(dtype, 1)
    got = out.clone()
    host_atomics[(3, 2)](TensorDescriptor.from_tensor(got, [MB, NB]), a, M, N, KIND=kind, MB=MB, NB=NB)
    _check(got, _reference(kind, out, a))


@pytest.mark.parametrize("kind,dtype", CASES[:-1] + [("xor", torch.int64), ("max", torch.int64)], ids=str)
def test_device_descriptor_atomics_on_the_interpreter(kind, dtype):
    out, a = _inputs(dtype, 2)
    got = out.clone()
    device_atomics[(3, 2)](got, a, M, N, KIND=kind, MB=MB, NB=NB)
    _check(got, _reference(kind, out, a))


def test_device_f16_min_needs_a_map_that_may_store():
    """16-bit float min/max have no element atomic: an in-kernel descriptor takes them by TMA only
    where its inner size is known to be a multiple of 16 bytes (56 halfs: 8 elements known), else
    the refusal names the operation and type."""
    out, a = _inputs(torch.float16, 5)
    with pytest.raises(CompilationError, match="atomic_min does not support f16 elements"):
        device_atomics[(3, 2)](out, a, M, N, KIND="min", MB=MB, NB=NB)


def test_a_type_tma_does_not_reduce_is_refused_by_kind_and_type():
    out, a = _inputs(torch.int64, 3)
    with pytest.raises(CompilationError, match="'xor' reduce-store takes elements of"):
        host_atomics[(3, 2)](TensorDescriptor.from_tensor(out, [MB, NB]), a, M, N, KIND="xor", MB=MB, NB=NB)


def test_sm90a_code_reduces_by_tma_and_by_element_atomics():
    host = host_atomics.compile("desc=tensordesc<bf16[8, 32]>, a_ptr=*bf16, M=i32, N=i32",
                                {"KIND": "add", "MB": MB, "NB": NB}, arch="sm_90a").asm["cuda"]
    assert "cp.reduce.async.bulk.tensor" in host
    device = device_atomics.compile("out_ptr=*i32, a_ptr=*i32, M=i32, N=i32", {"KIND": "max", "MB": MB, "NB": NB},
                                    arch="sm_90a").asm
    assert device["cubin"][:4] == b"\x7fELF" and "atom" in device["cuda"]


@pytest.mark.gpu
@pytest.mark.parametrize("kind,dtype", [("add", torch.float32), ("max", torch.int32), ("min", torch.float16)], ids=str)
def test_descriptor_atomics_on_the_gpu(kind, dtype):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    out, a = (t.cuda() for t in _inputs(dtype, 4))
    host, device = out.clone(), out.clone()
    host_atomics[(3, 2)](TensorDescriptor.from_tensor(host, [MB, NB]), a, M, N, KIND=kind, MB=MB, NB=NB)
    ref = _reference(kind, out.cpu(), a.cpu())
    _check(host.cpu(), ref)
    if dtype != torch.float16:
        device_atomics[(3, 2)](device, a, M, N, KIND=kind, MB=MB, NB=NB)
        _check(device.cpu(), ref)
