"""``tlx.local_reshape(buf, shape)``: the same shared-memory elements in another shape, row-major as
``tl.reshape`` orders them (TLX's ``memdesc_reshape``), no data movement; also through a wgmma operand."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError
from tlxc.language import tlx

F32 = tl.pointer_type(tl.float32)
F16 = tl.pointer_type(tl.float16)


@tlxc.kernel
def flat_to_tile(x_ptr: F32, out_ptr: F32, ROWS: tl.constexpr, COLS: tl.constexpr):
    """A flat [ROWS * COLS] buffer stored once, loaded as [ROWS, COLS] (2x), and a row of it again as [COLS]."""
    flat = tlx.local_alloc((ROWS * COLS,), tl.float32, 1)
    tlx.local_store(flat[0], tl.load(x_ptr + tl.arange(0, ROWS * COLS)))
    tile = tlx.local_load(tlx.local_reshape(flat[0], [ROWS, COLS]))
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    tl.store(out_ptr + offs, tile * 2.0)
    stacked = tlx.local_reshape(tlx.local_reshape(flat[0], [2, ROWS // 2, COLS]), [ROWS * COLS])
    tl.store(out_ptr + ROWS * COLS + tl.arange(0, ROWS * COLS), tlx.local_load(stacked) + 1.0)


def test_a_flat_buffer_reads_as_a_tile():
    x = torch.randn(16 * 32)
    out = torch.full((2 * 16 * 32,), float("nan"))
    tlxc.interpret(flat_to_tile)[(1,)](x, out, ROWS=16, COLS=32)
    assert torch.equal(out[:512].reshape(16, 32), x.reshape(16, 32) * 2.0)
    assert torch.equal(out[512:], x + 1.0)


@tlxc.kernel
def stacked_operand(a_ptr: F16, b_ptr: F16, out_ptr: F32, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """Two [M/2, K] halves of A stored as a [2, M/2, K] buffer, multiplied as one [M, K] wgmma operand."""
    a_buf = tlx.local_alloc((2, M // 2, K), tl.float16, 1)
    b_buf = tlx.local_alloc((K, N), tl.float16, 1)
    tlx.local_store(a_buf[0], tl.reshape(tl.load(a_ptr + tl.arange(0, M * K)), (2, M // 2, K)))
    tlx.local_store(b_buf[0], tl.load(b_ptr + tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :]))
    tlx.fence_async_shared()
    acc = tl.zeros((M, N), tl.float32)
    acc = tlx.async_dot(tlx.local_reshape(a_buf[0], [M, K]), b_buf[0], acc)
    acc = tlx.async_dot_wait(0, acc)
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], acc)


def _operands():
    g = torch.Generator().manual_seed(11)
    return torch.randn(64, 64, generator=g).half(), torch.randn(64, 32, generator=g).half()


def test_a_reshaped_buffer_as_a_wgmma_operand():
    a, b = _operands()
    out = torch.full((64, 32), float("nan"))
    tlxc.interpret(stacked_operand)[(1,)](a, b, out, M=64, N=32, K=64)
    torch.testing.assert_close(out, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


def test_reshaped_views_compile_for_sm90a():
    assert flat_to_tile.compile(constexprs={"ROWS": 16, "COLS": 32}, arch="sm_90a").asm["cubin"][:4] == b"\x7fELF"
    compiled = stacked_operand.compile(constexprs={"M": 64, "N": 32, "K": 64}, arch="sm_90a")
    assert "wgmma.mma_async" in (compiled.asm.get("ptx") or compiled.asm["cuda"]) and compiled.asm["cubin"][:4] == b"\x7fELF"


@pytest.mark.parametrize("body, message", [
    ("tlx.local_reshape(buf[0], [32, 32])", "cannot reshape a buffer of shape [16, 32] (512 elements) to [32, 32]"),
    ("tlx.local_reshape(tlx.local_trans(buf[0]), [512])", "'buf' is a transposed view (local_trans)"),
    ("tlx.local_reshape(tlx.local_slice(buf[0], [0, 0], [8, 32]), [256])", "'buf' is a slice (local_slice)"),
    ("tlx.local_reshape(buf, [2, 256])", "'buf' is an array of 2 buffers; pick one first"),
    ("tlx.local_reshape(buf[0], [16, 0, 32])", "'shape'"),
])
def test_bad_reshapes_are_located_errors(body, message, tmp_path):
    source = tmp_path / "bad_reshape.py"
    source.write_text(f'''import tlxc
import tlxc.language as tl
from tlxc.language import tlx


@tlxc.kernel
def bad(out_ptr: tl.pointer_type(tl.float32)):
    buf = tlx.local_alloc((16, 32), tl.float32, 2)
    view = {body}
    tl.store(out_ptr, 0.0)
''')
    import importlib.util
    spec = importlib.util.spec_from_file_location("bad_reshape", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(CompilationError) as info:
        module.bad.compile(stages=("ir",))
    assert message in info.value.message
    assert info.value.loc.line == 9


@pytest.mark.gpu
def test_gpu_reshaped_views():
    x = torch.randn(16 * 32, device="cuda")
    out = torch.full((2 * 16 * 32,), float("nan"), device="cuda")
    flat_to_tile[(1,)](x, out, ROWS=16, COLS=32)
    a, b = (t.cuda() for t in _operands())
    prod = torch.full((64, 32), float("nan"), device="cuda")
    stacked_operand[(1,)](a, b, prod, M=64, N=32, K=64)
    torch.cuda.synchronize()
    assert torch.equal(out[:512].reshape(16, 32), x.reshape(16, 32) * 2.0)
    assert torch.equal(out[512:], x + 1.0)
    torch.testing.assert_close(prod, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


@tlxc.kernel
def reshape_column_blocks(a_ptr: F16, b_ptr: F16, out_ptr: F32):
    """A [64, 128] fp16 wgmma operand has 256-byte rows: stored as 128-byte column blocks, so not in row-major
    byte order; reshaping it is refused when the code is generated."""
    a_buf = tlx.local_alloc((64, 128), tl.float16, 1)
    b_buf = tlx.local_alloc((128, 64), tl.float16, 1)
    tlx.local_store(a_buf[0], tl.load(a_ptr + tl.arange(0, 64)[:, None] * 128 + tl.arange(0, 128)[None, :]))
    tlx.local_store(b_buf[0], tl.load(b_ptr + tl.arange(0, 128)[:, None] * 64 + tl.arange(0, 64)[None, :]))
    tlx.fence_async_shared()
    acc = tlx.async_dot(a_buf[0], b_buf[0], tl.zeros((64, 64), tl.float32))
    acc = tlx.async_dot_wait(0, acc)
    flat = tlx.local_load(tlx.local_reshape(a_buf[0], [64 * 128]))
    tl.store(out_ptr + tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :], acc)
    tl.store(out_ptr + 4096 + tl.arange(0, 64 * 128), flat.to(tl.float32))


def test_a_column_blocked_buffer_cannot_be_reshaped():
    with pytest.raises(CompilationError, match=r"tlx.local_reshape, which is one\) needs a contiguous") as info:
        reshape_column_blocks.compile(arch="sm_90a")
    assert "flat = tlx.local_load(tlx.local_reshape(a_buf[0], [64 * 128]))" in str(info.value)     # the user's line
