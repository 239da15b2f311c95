"""``tlx.local_gather(buf, indices, axis)`` / ``tlx.local_scatter(buf, src, indices, axis)``: indexed
reads and writes of one shared buffer along ``axis`` (torch.gather / scatter's rule), on the
interpreter and compiled for sm_90a."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError, InterpreterError
from tlxc.language import tlx

F32 = tl.pointer_type(tl.float32)
I32 = tl.pointer_type(tl.int32)


@tlxc.kernel
def flat_gather(m_ptr: F32, idx_ptr: I32, out_ptr: F32, N: tl.constexpr, M: tl.constexpr):
    """A [N, M] matrix stored flat in shared memory; out[i] = flat[idx[i]]."""
    offs = tl.arange(0, N)[:, None] * M + tl.arange(0, M)[None, :]
    buf = tlx.local_alloc((N * M,), tl.float32, 1)
    tlx.local_store(buf[0], tl.load(m_ptr + offs).reshape((N * M,)))
    i = tl.arange(0, N)
    tl.store(out_ptr + i, tlx.local_gather(buf[0], tl.load(idx_ptr + i), 0))


@tlxc.kernel
def column_gather(m_ptr: F32, idx_ptr: I32, out_ptr: F32, R: tl.constexpr, C: tl.constexpr, AXIS: tl.constexpr):
    """out[r, c] = m[idx[r, c], c] (AXIS 0) or m[r, idx[r, c]] (AXIS 1), from a [R, C] tile."""
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    tile = tlx.local_alloc((R, C), tl.float32, 1)
    tlx.local_store(tile[0], tl.load(m_ptr + offs))
    tl.store(out_ptr + offs, tlx.local_gather(tile[0], tl.load(idx_ptr + offs), AXIS))


@tlxc.kernel
def permute_rows(x_ptr: F32, perm_ptr: I32, out_ptr: F32, R: tl.constexpr, C: tl.constexpr):
    """tile[perm[r, c], c] = x[r, c] (a scatter along rows), then the tile is stored whole."""
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    tile = tlx.local_alloc((R, C), tl.float32, 1)
    tlx.local_scatter(tile[0], tl.load(x_ptr + offs), tl.load(perm_ptr + offs), 0)
    tl.store(out_ptr + offs, tlx.local_load(tile[0]))


def test_gather_from_a_flat_buffer():
    m = torch.randn(16, 8)
    idx = torch.randint(0, 128, (16,), dtype=torch.int32)
    out = torch.full((16,), float("nan"))
    tlxc.interpret(flat_gather)[(1,)](m, idx, out, N=16, M=8)
    assert torch.equal(out, m.reshape(-1)[idx.long()])


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_along_either_axis_of_a_tile(axis):
    R, C = 16, 32
    m = torch.randn(R, C)
    idx = torch.randint(0, (R, C)[axis], (R, C), dtype=torch.int32)
    out = torch.full((R, C), float("nan"))
    tlxc.interpret(column_gather)[(1,)](m, idx, out, R=R, C=C, AXIS=axis)
    assert torch.equal(out, torch.gather(m, axis, idx.long()))


def test_scatter_permutes_rows():
    R, C = 16, 32
    x = torch.randn(R, C)
    perm = torch.stack([torch.randperm(R) for _ in range(C)], dim=1).to(torch.int32)
    out = torch.full((R, C), float("nan"))
    tlxc.interpret(permute_rows)[(1,)](x, perm, out, R=R, C=C)
    assert torch.equal(out, torch.zeros(R, C).scatter_(0, perm.long(), x))


def test_scatter_of_two_values_to_one_element_is_refused():
    R, C = 16, 32
    perm = torch.zeros(R, C, dtype=torch.int32)
    with pytest.raises(InterpreterError, match="writes one element of .* twice"):
        tlxc.interpret(permute_rows)[(1,)](torch.randn(R, C), perm, torch.zeros(R, C), R=R, C=C)


def test_an_index_out_of_range_is_refused():
    idx = torch.zeros(16, dtype=torch.int32)
    idx[5] = 128
    with pytest.raises(InterpreterError, match="index 128 at \\(5,\\) is out of range"):
        tlxc.interpret(flat_gather)[(1,)](torch.randn(16, 8), idx, torch.zeros(16), N=16, M=8)


def test_gather_and_scatter_compile_for_sm90a():
    for kernel, constexprs in ((flat_gather, {"N": 16, "M": 8}), (column_gather, {"R": 16, "C": 32, "AXIS": 1}),
                               (permute_rows, {"R": 16, "C": 32})):
        assert kernel.compile(constexprs=constexprs, arch="sm_90a").asm["cubin"][:4] == b"\x7fELF"


@tlxc.kernel
def misuse(out_ptr: F32, WHAT: tl.constexpr):
    buf = tlx.local_alloc((16, 8), tl.float32, 1)
    if WHAT == "rank":
        tlx.local_gather(buf[0], tl.arange(0, 16), 0)  # WHAT rank
    elif WHAT == "float_index":
        tlx.local_gather(buf[0], tl.zeros((16, 8), tl.float32), 0)  # WHAT float_index
    elif WHAT == "dtype":
        tlx.local_scatter(buf[0], tl.zeros((16, 8), tl.float16), tl.zeros((16, 8), tl.int32), 1)  # WHAT dtype
    tl.store(out_ptr, 0.0)


@pytest.mark.parametrize("what, message", [
    ("rank", "'indices' [16] must have the buffer's rank 2"),
    ("float_index", "'indices' must be an integer tensor"),
    ("dtype", "'src' holds f16 but the buffer holds f32"),
])
def test_misuse_is_a_located_error(what, message):
    with pytest.raises(CompilationError) as info:
        misuse.compile(constexprs={"WHAT": what}, stages=("ir",))
    assert message in info.value.message
    lines = Path(__file__).read_text().splitlines()
    assert lines[info.value.loc.line - 1].endswith(f"# WHAT {what}")


@pytest.mark.gpu
@pytest.mark.parametrize("axis", [0, 1])
def test_gpu_gather_and_scatter(axis):
    R, C = 16, 32
    m = torch.randn(R, C, device="cuda")
    idx = torch.randint(0, (R, C)[axis], (R, C), dtype=torch.int32, device="cuda")
    out = torch.full((R, C), float("nan"), device="cuda")
    column_gather[(1,)](m, idx, out, R=R, C=C, AXIS=axis)
    perm = torch.stack([torch.randperm(R, device="cuda") for _ in range(C)], dim=1).to(torch.int32)
    scattered = torch.full((R, C), float("nan"), device="cuda")
    permute_rows[(1,)](m, perm, scattered, R=R, C=C)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.gather(m, axis, idx.long()))
    assert torch.equal(scattered, torch.zeros(R, C, device="cuda").scatter_(0, perm.long(), m))
