"""``tlx.storage_alias_spec`` + ``spec.set_buffer_overlap(tlx.reuse_group(...))``: peers of one
shared-memory region placed by an overlap tree (frontend/storage_alias.py).

Each kernel writes through some peers and reads the same bytes back through another, so a wrong
placement (a missing scale or offset in the index rewrite, a region too small) shows up as wrong
bits, not as a compile error."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError
from tlxc.language import tlx

F16 = tl.pointer_type(tl.float16)
F32 = tl.pointer_type(tl.float32)


@tlxc.kernel
def halves(top_ptr: F16, bottom_ptr: F16, out_ptr: F16, R: tl.constexpr, C: tl.constexpr, RUNTIME: tl.constexpr):
    """``whole`` ([2R, C] f16, 2 buffers) shares its region with a distinct pair (``top``,
    ``bottom``: [R, C] each): whole[i] is top[i] stacked on bottom[i]."""
    spec = tlx.storage_alias_spec()
    whole = tlx.local_alloc((2 * R, C), tl.float16, 2, reuse=spec)
    top = tlx.local_alloc((R, C), tl.float16, 2, reuse=spec)
    bottom = tlx.local_alloc((R, C), tl.float16, 2, reuse=spec)
    spec.set_buffer_overlap(tlx.reuse_group(whole, tlx.reuse_group(top, bottom, group_type=tlx.reuse_group_type.distinct)))
    rows = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    if RUNTIME:
        for i in range(2):                      # runtime indices: the rewrite is arithmetic in the kernel
            tlx.local_store(top[i], tl.load(top_ptr + i * R * C + rows))
            tlx.local_store(bottom[i], tl.load(bottom_ptr + i * R * C + rows))
    else:
        for i in tl.static_range(2):
            tlx.local_store(top[i], tl.load(top_ptr + i * R * C + rows))
            tlx.local_store(bottom[i], tl.load(bottom_ptr + i * R * C + rows))
    both = tl.arange(0, 2 * R)[:, None] * C + tl.arange(0, C)[None, :]
    for i in tl.static_range(2):
        tl.store(out_ptr + i * 2 * R * C + both, tlx.local_load(whole[i]))


@pytest.mark.parametrize("runtime", [False, True])
def test_distinct_peers_sit_one_after_another_in_each_slot(runtime):
    R, C = 8, 32
    top, bottom = torch.randn(2, R, C, dtype=torch.float16), torch.randn(2, R, C, dtype=torch.float16)
    out = torch.full((2, 2 * R, C), float("nan"), dtype=torch.float16)
    tlxc.interpret(halves)[(1,)](top, bottom, out, R=R, C=C, RUNTIME=runtime)
    assert torch.equal(out, torch.cat([top, bottom], dim=1))


@tlxc.kernel
def subtiles(src_ptr: F16, out_ptr: F32, R: tl.constexpr, C: tl.constexpr):
    """``wide`` ([R, C] f32, 2 buffers) and ``parts`` ([R, C] f16, 4 buffers, group_size=2): parts
    2k and 2k+1 are the two halves of wide[k]."""
    spec = tlx.storage_alias_spec(buffer_size_bytes=2 * R * C * 4)
    wide = tlx.local_alloc((R, C), tl.float32, 2, reuse=spec)
    parts = tlx.local_alloc((R, C), tl.float16, 4, reuse=spec)
    tlx.set_buffer_overlap(spec, tlx.reuse_group(wide, tlx.reuse_group(parts, group_size=2)))
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    for k in tl.static_range(4):
        tlx.local_store(parts[k], tl.load(src_ptr + k * R * C + offs))
    for k in tl.static_range(2):
        tl.store(out_ptr + k * R * C + offs, tlx.local_load(wide[k]))


def test_group_size_puts_consecutive_subtiles_in_one_slot():
    R, C = 4, 16
    src = torch.randn(4, R, C, dtype=torch.float16)
    out = torch.full((2, R, C), float("nan"))
    tlxc.interpret(subtiles)[(1,)](src, out, R=R, C=C)
    expect = src.reshape(2, 2 * R * C).contiguous().view(torch.float32).reshape(2, R, C)
    assert torch.equal(out.view(torch.int32), expect.view(torch.int32))


def test_the_region_is_one_offset_sized_for_the_expanded_peers_and_compiles_for_sm90a():
    compiled = halves.compile(constexprs={"R": 8, "C": 32, "RUNTIME": True}, arch="sm_90a")
    ir = compiled.asm["ir.opt"]
    # top and bottom keep their [8, 32] f16 buffers (512 bytes) at twice that stride: top[i] is
    # slot 2i, bottom[i] slot 2i+1, so each array is extended to 4 slots; all share offset 0
    allocs = [line.split(" loc(")[0].strip() for line in ir.splitlines() if "tlx.local_alloc" in line]
    assert allocs == ["%whole = tlx.local_alloc {offset = 0, swizzle = 0} : memdesc<16x32xf16, smem, num=2>",
                      "%top = tlx.local_alloc %whole {offset = 0, swizzle = 0} : memdesc<8x32xf16, smem, num=3>",
                      "%bottom = tlx.local_alloc %whole {offset = 0, swizzle = 0} : memdesc<8x32xf16, smem, num=4>"]
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


@tlxc.kernel
def tma_halves(x_desc, out_ptr: F16, R: tl.constexpr, C: tl.constexpr):
    """TMA writes top[i] and bottom[i] (128-byte swizzled boxes); the consumer task reads them back
    through ``whole``, a peer no TMA touches: it must be stored with the same swizzle."""
    spec = tlx.storage_alias_spec()
    whole = tlx.local_alloc((2 * R, C), tl.float16, 2, reuse=spec)
    top = tlx.local_alloc((R, C), tl.float16, 2, reuse=spec)
    bottom = tlx.local_alloc((R, C), tl.float16, 2, reuse=spec)
    spec.set_buffer_overlap(tlx.reuse_group(whole, tlx.reuse_group(top, bottom, group_type=tlx.reuse_group_type.distinct)))
    full = tlx.alloc_barriers(2, 1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(2):
                tlx.barrier_wait(full[i], 0)
                offs = tl.arange(0, 2 * R)[:, None] * C + tl.arange(0, C)[None, :]
                tl.store(out_ptr + i * 2 * R * C + offs, tlx.local_load(whole[i]))
        with tlx.async_task(num_warps=1):
            for i in range(2):
                tlx.barrier_expect_bytes(full[i], 2 * R * C * 2)
                tlx.async_descriptor_load(x_desc, top[i], [2 * i * R, 0], full[i])
                tlx.async_descriptor_load(x_desc, bottom[i], [(2 * i + 1) * R, 0], full[i])


def _tma_halves_args(x, out):
    return {"x_desc": tlxc.TensorDescriptor.from_tensor(x, [8, 64]), "out_ptr": out, "R": 8, "C": 64}


def test_tma_into_peers_read_through_another_peer():
    x = torch.randn(32, 64, dtype=torch.float16)
    out = torch.full((2, 16, 64), float("nan"), dtype=torch.float16)
    tlxc.interpret(tma_halves)[(1,)](**_tma_halves_args(x, out))
    assert torch.equal(out.reshape(32, 64), x)


def test_every_peer_gets_the_swizzle_one_of_them_needs():
    from tlxc.compiler import compile_kernel
    from tlxc.frontend.specialize import specialization_from_args
    args = _tma_halves_args(torch.randn(32, 64, dtype=torch.float16), torch.empty(2, 16, 64, dtype=torch.float16))
    compiled = compile_kernel(tma_halves, specialization_from_args(tma_halves, args), arch="sm_90a", num_warps=4)
    swizzles = re.findall(r"%(\w+) = tlx\.local_alloc[^{]*\{offset = 0, swizzle = (\d+)\}", compiled.asm["ir.opt"])
    assert swizzles == [("whole", "128"), ("top", "128"), ("bottom", "128")]
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


@pytest.mark.gpu
def test_gpu_tma_into_peers_read_through_another_peer():
    x = torch.randn(32, 64, dtype=torch.float16, device="cuda")
    out = torch.full((2, 16, 64), float("nan"), dtype=torch.float16, device="cuda")
    tma_halves[(1,)](**_tma_halves_args(x, out))
    torch.cuda.synchronize()
    assert torch.equal(out.reshape(32, 64), x)


# -- errors ---------------------------------------------------------------------------------------
@tlxc.kernel
def misuse(out_ptr: F32, WHAT: tl.constexpr):
    spec = tlx.storage_alias_spec()
    a = tlx.local_alloc((16, 16), tl.float32, 2, reuse=spec)
    b = tlx.local_alloc((16, 8), tl.float32, 2, reuse=spec)
    if WHAT == "twice":
        spec.set_buffer_overlap(tlx.reuse_group(a, b))
        spec.set_buffer_overlap(tlx.reuse_group(a, b))  # WHAT twice
    elif WHAT == "early":
        tlx.local_store(a[0], tl.zeros((16, 16), tl.float32))
        spec.set_buffer_overlap(tlx.reuse_group(a, b))  # WHAT early
    elif WHAT == "uneven":
        spec.set_buffer_overlap(tlx.reuse_group(a, b, group_type=tlx.reuse_group_type.distinct))  # WHAT uneven
    elif WHAT == "duplicate":
        spec.set_buffer_overlap(tlx.reuse_group(a, a))  # WHAT duplicate
    elif WHAT == "late":
        spec.set_buffer_overlap(tlx.reuse_group(a, b))
        tlx.local_alloc((16,), tl.float32, 1, reuse=spec)  # WHAT late
    elif WHAT == "sized":
        small = tlx.storage_alias_spec(buffer_size_bytes=1024)
        tlx.local_alloc((16, 16), tl.float32, 2, reuse=small)  # WHAT sized
    elif WHAT == "stranger":
        c = tlx.local_alloc((16,), tl.float32, 1)
        spec.set_buffer_overlap(tlx.reuse_group(a, c))  # WHAT stranger
    tl.store(out_ptr, 0.0)


@pytest.mark.parametrize("what, message", [
    ("twice", "storage_alias_spec already has a set_buffer_overlap defined"),
    ("early", "'a' was already indexed"),
    ("uneven", "units_between_buffer_groups (1536) must be a multiple of the original buffer size (1024) of 'a'"),
    ("duplicate", "reuse_group tree contains duplicate elements ('a' twice)"),
    ("late", "allocate every buffer of a storage_alias_spec before its set_buffer_overlap"),
    ("sized", "do not fit the storage_alias_spec's buffer_size_bytes=1024"),
    ("stranger", "reuse_group elements must be allocations made with reuse=<a storage_alias_spec>"),
])
def test_misuse_is_a_located_error(what, message):
    with pytest.raises(CompilationError) as info:
        misuse.compile(constexprs={"WHAT": what}, stages=("ir",))
    assert message in info.value.message
    lines = Path(__file__).read_text().splitlines()
    assert lines[info.value.loc.line - 1].endswith(f"# WHAT {what}")


@pytest.mark.gpu
@pytest.mark.parametrize("runtime", [False, True])
def test_gpu_distinct_peers(runtime):
    R, C = 8, 32
    top = torch.randn(2, R, C, dtype=torch.float16, device="cuda")
    bottom = torch.randn(2, R, C, dtype=torch.float16, device="cuda")
    out = torch.full((2, 2 * R, C), float("nan"), dtype=torch.float16, device="cuda")
    halves[(1,)](top, bottom, out, R=R, C=C, RUNTIME=runtime)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.cat([top, bottom], dim=1))


@pytest.mark.gpu
def test_gpu_group_size_subtiles():
    R, C = 4, 16
    src = torch.randn(4, R, C, dtype=torch.float16, device="cuda")
    out = torch.full((2, R, C), float("nan"), device="cuda")
    subtiles[(1,)](src, out, R=R, C=C)
    torch.cuda.synchronize()
    expect = src.reshape(2, 2 * R * C).contiguous().view(torch.float32).reshape(2, R, C)
    assert torch.equal(out.view(torch.int32), expect.view(torch.int32))


def test_a_column_blocked_peer_of_another_shape_is_a_located_error():
    from tlxc.compiler import compile_kernel
    from tlxc.errors import LayoutError
    from tlxc.frontend.specialize import specialization_from_args

    @tlxc.kernel
    def wide_peer(x_desc, out_ptr: F16):
        spec = tlx.storage_alias_spec()
        wide = tlx.local_alloc((8, 128), tl.float16, 1, reuse=spec)     # 256-byte rows: column blocks
        narrow = tlx.local_alloc((16, 64), tl.float16, 1, reuse=spec)
        bar = tlx.alloc_barriers(1, 1)
        tlx.barrier_expect_bytes(bar[0], 8 * 128 * 2)
        tlx.async_descriptor_load(x_desc, wide[0], [0, 0], bar[0])
        tlx.barrier_wait(bar[0], 0)
        offs = tl.arange(0, 16)[:, None] * 64 + tl.arange(0, 64)[None, :]
        tl.store(out_ptr + offs, tlx.local_load(narrow[0]))

    x = torch.randn(8, 128, dtype=torch.float16)
    args = {"x_desc": tlxc.TensorDescriptor.from_tensor(x, [8, 128]), "out_ptr": torch.empty(16, 64, dtype=torch.float16)}
    with pytest.raises(LayoutError) as info:
        compile_kernel(wide_peer, specialization_from_args(wide_peer, args), arch="sm_90a", num_warps=4)
    assert "is stored as 128-byte column blocks" in info.value.message and "its alias 'narrow'" in info.value.message
