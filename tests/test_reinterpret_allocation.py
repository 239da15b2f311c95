"""``tlx.local_reinterpret(bufs, dtype, shape)`` of a whole allocation: one buffer over the bytes of
all its buffers, back to back (TLX lets a TMA box land in several sub-tiles so).  Data written
through the sub-buffers is read through the whole view and the other way round."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError
from tlxc.language import tlx

F32 = tl.pointer_type(tl.float32)


@tlxc.kernel
def gather_parts(x_ptr: F32, out_ptr: F32, R: tl.constexpr, C: tl.constexpr):
    """Four [R, C] parts stored one by one, read back as one [4R, C] tile (times 3)."""
    parts = tlx.local_alloc((R, C), tl.float32, 4)
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    for k in tl.static_range(4):
        tlx.local_store(parts[k], tl.load(x_ptr + (3 - k) * R * C + offs))
    whole = tlx.local_reinterpret(parts, tl.float32, [4 * R, C])
    rows = tl.arange(0, 4 * R)[:, None] * C + tl.arange(0, C)[None, :]
    tl.store(out_ptr + rows, tlx.local_load(whole) * 3.0)


def test_a_whole_allocation_reads_as_its_buffers_back_to_back():
    x = torch.randn(4, 8, 32)
    out = torch.full((32, 32), float("nan"))
    tlxc.interpret(gather_parts)[(1,)](x, out, R=8, C=32)
    assert torch.equal(out, x.flip(0).reshape(32, 32) * 3.0)


@tlxc.kernel
def box_into_parts(x_desc, out_ptr: F32, R: tl.constexpr, C: tl.constexpr):
    """One TMA box of [4R, C] lands in four [R, C] buffers through the whole-allocation view."""
    parts = tlx.local_alloc((R, C), tl.float32, 4)
    bars = tlx.alloc_barriers(1, 1)
    whole = tlx.local_reinterpret(parts, tl.float32, [4 * R, C])
    tlx.barrier_expect_bytes(bars[0], 4 * R * C * 4)
    tlx.async_descriptor_load(x_desc, whole, [tl.program_id(0) * 4 * R, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    for k in tl.static_range(4):
        tl.store(out_ptr + (tl.program_id(0) * 4 + k) * R * C + offs, tlx.local_load(parts[k]))


def _box_args(x, out):
    return {"x_desc": tlxc.TensorDescriptor.from_tensor(x, [32, 32]), "out_ptr": out, "R": 8, "C": 32}


def test_a_tma_box_lands_in_the_buffers_of_the_whole_view():
    x = torch.randn(64, 32)
    out = torch.full((8, 8, 32), float("nan"))
    tlxc.interpret(box_into_parts)[(2,)](**_box_args(x, out))
    assert torch.equal(out.reshape(64, 32), x)


def test_whole_allocation_views_compile_for_sm90a():
    from tlxc.compiler import compile_kernel
    from tlxc.frontend.specialize import specialization_from_args
    assert gather_parts.compile(constexprs={"R": 8, "C": 32}, arch="sm_90a").asm["cubin"][:4] == b"\x7fELF"
    spec = specialization_from_args(box_into_parts, _box_args(torch.randn(64, 32), torch.empty(8, 8, 32)))
    compiled = compile_kernel(box_into_parts, spec, arch="sm_90a", num_warps=4)
    assert "%whole = tlx.local_reinterpret %parts : memdesc<32x32xf32, smem>" in compiled.asm["ir.opt"]
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


def test_a_view_larger_than_the_allocation_is_a_located_error():
    @tlxc.kernel
    def too_big(out_ptr: F32):
        parts = tlx.local_alloc((8, 32), tl.float32, 2)
        whole = tlx.local_reinterpret(parts, tl.float32, [24, 32])
        tl.store(out_ptr + tl.arange(0, 32), tlx.local_load(whole)[0, :])

    with pytest.raises(CompilationError) as info:
        too_big.compile(stages=("ir",))
    assert "the view needs 3072 bytes but the 2 buffers of the allocation hold 2048" in info.value.message
    assert info.value.loc.line == too_big.fn.__code__.co_firstlineno + 3


@pytest.mark.gpu
def test_gpu_whole_allocation_views():
    x = torch.randn(4, 8, 32, device="cuda")
    out = torch.full((32, 32), float("nan"), device="cuda")
    gather_parts[(1,)](x, out, R=8, C=32)
    box = torch.randn(64, 32, device="cuda")
    parts = torch.full((8, 8, 32), float("nan"), device="cuda")
    box_into_parts[(2,)](**_box_args(box, parts))
    torch.cuda.synchronize()
    assert torch.equal(out, x.flip(0).reshape(32, 32) * 3.0)
    assert torch.equal(parts.reshape(64, 32), box)
