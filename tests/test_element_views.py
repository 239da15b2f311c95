"""``view[i]`` on one shared buffer (TLX's memdesc_index of a single buffer): element ``i`` of a
1-D buffer as a one-element buffer, row ``i`` of a 2-D one.  Writes through the element views
are read back through the whole buffer and the other way round, so a wrong offset shows."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError
from tlxc.language import tlx

F32 = tl.pointer_type(tl.float32)


@tlxc.kernel
def prefix_and_patch(x_ptr: F32, sums_ptr: F32, out_ptr: F32, n: tl.int32, BLOCK: tl.constexpr):
    """sums[k] = x[0] + ... + x[k] read one element view at a time (runtime index); then
    element 5 is overwritten through its view and the whole buffer is stored."""
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 2)
    offs = tl.arange(0, BLOCK)
    tlx.local_store(bufs[1], tl.load(x_ptr + offs, mask=offs < n, other=0.0))
    run = tl.zeros((1,), tl.float32)
    for k in range(n):
        run += tlx.local_load(bufs[1][k])
        tl.store(sums_ptr + k + tl.arange(0, 1), run)
    tlx.local_store(bufs[1][5], tl.full((1,), -3.0, tl.float32))
    tl.store(out_ptr + offs, tlx.local_load(bufs[1]), mask=offs < n)


def test_element_views_read_and_write_single_elements():
    n = 13                                   # not the buffer's length: the tail stays untouched
    x = torch.randn(n)
    sums, out = torch.full((n,), float("nan")), torch.full((n,), float("nan"))
    tlxc.interpret(prefix_and_patch)[(1,)](x, sums, out, n, BLOCK=16)
    torch.testing.assert_close(sums, torch.cumsum(x.double(), 0).float(), rtol=1e-6, atol=1e-6)
    expect = x.clone()
    expect[5] = -3.0
    assert torch.equal(out, expect)


@tlxc.kernel
def rows_backwards(x_ptr: F32, out_ptr: F32, R: tl.constexpr, C: tl.constexpr):
    """Row i of a [R, C] tile is written through tile[R-1-i] (row views), then the tile is
    stored whole: the rows come out reversed."""
    tile = tlx.local_alloc((R, C), tl.float32, 1)
    cols = tl.arange(0, C)
    for i in tl.static_range(R):
        tlx.local_store(tile[0][R - 1 - i], tl.load(x_ptr + i * C + cols))
    offs = tl.arange(0, R)[:, None] * C + cols[None, :]
    tl.store(out_ptr + offs, tlx.local_load(tile[0]))


def test_row_views_of_a_2d_buffer():
    x = torch.randn(4, 32)
    out = torch.full((4, 32), float("nan"))
    tlxc.interpret(rows_backwards)[(1,)](x, out, R=4, C=32)
    assert torch.equal(out, x.flip(0))


def test_element_and_row_views_compile_for_sm90a():
    for kernel, constexprs in ((prefix_and_patch, {"BLOCK": 16}), (rows_backwards, {"R": 4, "C": 32})):
        assert kernel.compile(constexprs=constexprs, arch="sm_90a").asm["cubin"][:4] == b"\x7fELF"


@tlxc.kernel
def bad_views(out_ptr: F32, WHAT: tl.constexpr):
    buf = tlx.local_alloc((16, 8), tl.float32, 1)
    if WHAT == "range":
        tlx.local_load(buf[0][16])  # WHAT range
    elif WHAT == "transposed":
        tlx.local_load(tlx.local_trans(buf[0])[1])  # WHAT transposed
    tl.store(out_ptr, 0.0)


@pytest.mark.parametrize("what, message", [
    ("range", "index 16 is out of range for a buffer of 16 rows"),
    ("transposed", "a row view (buf[i]) of a transposed buffer"),
])
def test_bad_element_views_are_located_errors(what, message):
    with pytest.raises(CompilationError) as info:
        bad_views.compile(constexprs={"WHAT": what}, stages=("ir",))
    assert message in info.value.message
    lines = Path(__file__).read_text().splitlines()
    assert lines[info.value.loc.line - 1].endswith(f"# WHAT {what}")


@pytest.mark.gpu
def test_gpu_element_and_row_views():
    n = 13
    x = torch.randn(n, device="cuda")
    sums = torch.full((n,), float("nan"), device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    prefix_and_patch[(1,)](x, sums, out, n, BLOCK=16)
    tile = torch.randn(4, 32, device="cuda")
    rows = torch.full((4, 32), float("nan"), device="cuda")
    rows_backwards[(1,)](tile, rows, R=4, C=32)
    torch.cuda.synchronize()
    torch.testing.assert_close(sums, torch.cumsum(x.double(), 0).float(), rtol=1e-6, atol=1e-6)
    expect = x.clone()
    expect[5] = -3.0
    assert torch.equal(out, expect)
    assert torch.equal(rows, tile.flip(0))
