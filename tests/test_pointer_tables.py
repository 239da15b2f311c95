"""Pointers a kernel loads from memory (issue 18 item 10): the host fills a table with
``t.data_ptr()`` values, the kernel turns each into a pointer
(``tl.load(table + g).to(tl.pointer_type(tl.float32))``), as grouped GEMM does.  The
interpreter resolves such an address against the launch's arguments and the storage of
every live CPU torch tensor (tlxc/interpreter/memory.py); an address inside none of them
is an error naming the host address, and out-of-bounds accesses name the right tensor."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import InterpreterError


@tlxc.jit
def grouped_scale(src_table, dst_table, sizes, scale, BLOCK: tl.constexpr):
    """dst[g][i] = src[g][i] * scale for group g = program_id(1), the groups' tensors
    reached only through the tables of addresses."""
    g = tl.program_id(1)
    n = tl.load(sizes + g)
    src = tl.load(src_table + g).to(tl.pointer_type(tl.float32))
    dst = tl.load(dst_table + g).to(tl.pointer_type(tl.float32))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n)
    tl.store(dst + offs, x * scale, mask=offs < n)


@tlxc.jit
def grouped_unmasked(src_table, dst_table, BLOCK: tl.constexpr):
    g = tl.program_id(0)
    src = tl.load(src_table + g).to(tl.pointer_type(tl.float32))
    dst = tl.load(dst_table + g).to(tl.pointer_type(tl.float32))
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs))


@tlxc.jit
def pointer_round_trip(x_ptr, out_ptr, addr_ptr, n, BLOCK: tl.constexpr):
    """A pointer converted to int64 is its real address; converted back, it reads the same memory."""
    offs = tl.arange(0, BLOCK)
    addresses = (x_ptr + offs).to(tl.int64)
    tl.store(addr_ptr + offs, addresses, mask=offs < n)
    back = addresses.to(tl.pointer_type(tl.float32))
    tl.store(out_ptr + offs, tl.load(back, mask=offs < n) + 1.0, mask=offs < n)


@tlxc.jit
def pointer_elements(table, out_ptr, BLOCK: tl.constexpr):
    """The table viewed as pointers to pointers: loads give pointers directly."""
    g = tl.program_id(0)
    ptrs = table.to(tl.pointer_type(tl.pointer_type(tl.float32)))
    src = tl.load(ptrs + g)
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + g * BLOCK + offs, tl.load(src + offs))


def _table(tensors) -> torch.Tensor:
    return torch.tensor([t.data_ptr() for t in tensors], dtype=torch.int64)


def test_grouped_tensors_reached_through_a_table():
    gen = torch.Generator().manual_seed(18)
    sizes = [37, 100, 5]
    srcs = [torch.randn(n, generator=gen) for n in sizes]
    dsts = [torch.full((n,), float("nan")) for n in sizes]          # poisoned
    grouped_scale[(4, len(sizes))](_table(srcs), _table(dsts), torch.tensor(sizes, dtype=torch.int32),
                                   1.5, BLOCK=32, interpret=True)
    for src, dst in zip(srcs, dsts):
        assert torch.equal(dst.double(), (src.double() * 1.5).float().double())


def test_table_entry_inside_a_view_of_a_larger_storage():
    gen = torch.Generator().manual_seed(19)
    base = torch.randn(300, generator=gen)
    srcs = [base[10:47], base[200:300]]                   # views: the pointer is inside the storage
    dsts = [torch.full((37,), float("nan")), torch.full((100,), float("nan"))]
    grouped_scale[(4, 2)](_table(srcs), _table(dsts), torch.tensor([37, 100], dtype=torch.int32),
                          -2.0, BLOCK=32, interpret=True)
    assert torch.equal(dsts[0], srcs[0] * -2.0) and torch.equal(dsts[1], srcs[1] * -2.0)


def test_out_of_bounds_through_a_loaded_pointer_names_that_tensor():
    srcs = [torch.randn(64), torch.randn(40)]            # the second is shorter than BLOCK
    dsts = [torch.zeros(64), torch.zeros(64)]
    with pytest.raises(InterpreterError) as info:
        grouped_unmasked[(2,)](_table(srcs), _table(dsts), BLOCK=64, interpret=True)
    message = str(info.value)
    assert "out-of-bounds load in program (1, 0, 0) at index (40,)" in message
    assert f"element 40 of the float32[40] tensor at 0x{srcs[1].data_ptr():x}'s allocation of 40" in message


def test_address_of_no_live_tensor_is_an_error_naming_it():
    src = torch.randn(64)
    dead = torch.zeros(64)
    table = _table([src])
    dead_table = torch.tensor([0x1000], dtype=torch.int64)      # no tensor lives at this address
    with pytest.raises(InterpreterError) as info:
        grouped_unmasked[(1,)](table, dead_table, BLOCK=64, interpret=True)
    assert "out-of-bounds store" in str(info.value)
    assert "host address 0x1000, converted from an integer, which is inside no tensor" in str(info.value)
    assert torch.equal(dead, torch.zeros(64))


def test_pointer_to_integer_is_the_real_address_and_round_trips():
    x = torch.randn(48)[3:]                               # a view: its data_ptr is not the storage's
    out = torch.full((45,), float("nan"))
    addresses = torch.zeros(45, dtype=torch.int64)
    pointer_round_trip[(1,)](x, out, addresses, 45, BLOCK=64, interpret=True)
    assert addresses.tolist() == [x.data_ptr() + 4 * i for i in range(45)]
    assert torch.equal(out, x + 1.0)


def test_loads_of_pointer_elements_give_pointers():
    gen = torch.Generator().manual_seed(20)
    srcs = [torch.randn(16, generator=gen) for _ in range(3)]
    out = torch.full((48,), float("nan"))
    pointer_elements[(3,)](_table(srcs), out, BLOCK=16, interpret=True)
    assert torch.equal(out, torch.cat(srcs))
