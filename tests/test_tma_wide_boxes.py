"""Descriptor boxes longer than TMA's 256 elements in a dimension (Triton accepts any block shape
of powers of two): a ``[512, 32]`` box is copied as two ``[256, 32]`` pieces into the rows they
cover, a single-row ``[1, 1024]`` box as four 256-element runs.  Checked on the interpreter, on the
kernels' CUDA text run by the emulation (each piece's shared address and coordinates), and by the
sm_90a compile; lengths that are no multiple of 256, and wide rows TMA cannot piece, are refused
with the reason."""
from __future__ import annotations

import re

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.codegen_nvptx.emu import run as emu
from tlxc.errors import CompilationError, LaunchError
from tlxc.language import tlx


@tlxc.kernel
def plus_one_boxes(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    """Triton spelling: out = in + 1, one box per program, through desc.load / desc.store."""
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    out_desc.store([m, n], in_desc.load([m, n]) + 1)


@tlxc.kernel
def staged_plus_one(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    """TLX spelling: the box through a shared buffer, an mbarrier and explicit TMA copies (and a
    prefetch of the same box first)."""
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    tlx.async_descriptor_prefetch_tensor(in_desc, [m, n])
    buf = tlx.local_alloc((BM, BN), tl.float32, 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], BM * BN * 4)
    tlx.async_descriptor_load(in_desc, buf[0], [m, n], bar[0])
    tlx.barrier_wait(bar[0], 0)
    tlx.local_store(buf[0], tlx.local_load(buf[0]) + 1.0)
    tlx.fence("async_shared")
    tlx.async_descriptor_store(out_desc, buf[0], [m, n])
    tlx.async_descriptor_store_wait(0)


@tlxc.kernel
def add_into(out_desc, x_ptr, N, BM: tl.constexpr, BN: tl.constexpr):
    """out[box] += x[box] by the descriptor's reduce-store (desc.atomic_add)."""
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    rows = m + tl.arange(0, BM)[:, None]
    cols = n + tl.arange(0, BN)[None, :]
    out_desc.atomic_add([m, n], tl.load(x_ptr + rows * N + cols))


CASES = [((1024, 64), (512, 32), torch.bfloat16), ((2, 3072), (1, 1024), torch.float32),
         ((768, 48), (512, 16), torch.float32)]      # (768 rows: the second box's second piece is past the end)


def _descs(shape, box, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(dtype)
    out = torch.full(shape, float("nan"), dtype=dtype)
    return x, out, tlxc.TensorDescriptor.from_tensor(x, list(box)), tlxc.TensorDescriptor.from_tensor(out, list(box))


def _grid(shape, box):
    return (-(-shape[0] // box[0]), -(-shape[1] // box[1]))


@pytest.mark.parametrize("shape,box,dtype", CASES, ids=str)
def test_wide_boxes_on_the_interpreter(shape, box, dtype):
    x, out, d_in, d_out = _descs(shape, box, dtype, 1)
    plus_one_boxes[_grid(shape, box)](d_in, d_out, BM=box[0], BN=box[1])
    assert torch.equal(out, x + 1)


def _emulate(kernel, grid, args, meta, threads=128):
    text = kernel.warmup(*args.values(), grid=grid, num_warps=threads // 32, **meta).asm["cuda"]
    emu.build(text).run({**args, **meta}, grid=(*grid, 1), threads=threads)
    return text


@pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
@pytest.mark.parametrize("shape,box,dtype", CASES, ids=str)
def test_wide_boxes_cuda_text_copies_every_piece(shape, box, dtype):
    """The CUDA text issues one TMA copy per piece (two for 512 rows, four for 1024 columns), each
    to its rows or run of the buffer: a piece landing in the wrong place, or missing, leaves NaN
    or wrong values."""
    x, out, d_in, d_out = _descs(shape, box, dtype, 2)
    text = _emulate(plus_one_boxes, _grid(shape, box), {"in_desc": d_in, "out_desc": d_out},
                    {"BM": box[0], "BN": box[1]})
    pieces = (box[0] // 256 if box[0] > 256 else 1) * (box[1] // 256 if box[1] > 256 else 1)
    assert len(re.findall(r"(?<!void )tlx_tma_load_2d\(", text)) == pieces
    assert len(re.findall(r"(?<!void )tlx_tma_store_2d\(", text)) == pieces
    assert torch.equal(out, x + 1)


@pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
def test_staged_wide_box_with_prefetch_on_the_emulation():
    shape, box = (768, 48), (512, 16)
    x, out, d_in, d_out = _descs(shape, box, torch.float32, 3)
    text = _emulate(staged_plus_one, _grid(shape, box), {"in_desc": d_in, "out_desc": d_out},
                    {"BM": box[0], "BN": box[1]})
    assert len(re.findall(r"(?<!void )tlx_tma_prefetch_2d\(", text)) == 2
    assert torch.equal(out, x + 1)


@pytest.mark.skipif(not emu.available(), reason="no host C++ compiler")
@pytest.mark.parametrize("box", [(512, 32), (1, 1024)], ids=str)
def test_wide_box_reduce_store_on_the_emulation(box):
    shape = (1024, 64) if box[0] > 1 else (2, 2048)
    g = torch.Generator().manual_seed(4)
    base = torch.randn(shape, generator=g)
    x = torch.randn(shape, generator=g)
    out = base.clone()
    d_out = tlxc.TensorDescriptor.from_tensor(out, list(box))
    _emulate(add_into, _grid(shape, box), {"out_desc": d_out, "x_ptr": x, "N": shape[1]},
             {"BM": box[0], "BN": box[1]})
    torch.testing.assert_close(out, base + x)


def test_wide_boxes_compile_for_sm90a():
    for shape, box, dtype in CASES:
        _x, _out, d_in, d_out = _descs(shape, box, dtype, 5)
        h = plus_one_boxes.warmup(d_in, d_out, BM=box[0], BN=box[1], grid=_grid(shape, box))
        assert h.n_spills == 0 and "cp.async.bulk.tensor.2d" in (h.asm.get("ptx") or h.asm["cuda"])


@pytest.mark.parametrize("box,message", [
    ((300, 32), r"dimension 0 is 300; a TMA box has 1 to 256 elements per dimension, or a multiple of 256"),
    ((2, 512), r"block_shape\[1\] is 512 \(over 256\) in a box of 2 rows"),
])
def test_boxes_tma_cannot_piece_are_refused(box, message):
    x = torch.zeros(1024, 1024, dtype=torch.bfloat16)
    with pytest.raises(LaunchError, match=message):
        d = tlxc.TensorDescriptor.from_tensor(x, list(box))
        d.ir_type()


@tlxc.jit
def device_plus_one(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """The same through in-kernel descriptors (tl.make_tensor_descriptor)."""
    src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    m = tl.program_id(0) * BM
    dst.store([m, 0], src.load([m, 0]) + 1)


@pytest.mark.parametrize("box", [(512, 32), (1, 1024)], ids=str)
def test_device_descriptors_encode_the_piece_and_copy_each(box):
    """An in-kernel map of a wide box is encoded with the piece's box (256) and copied piece by
    piece; on the interpreter the result is the whole box's."""
    shape = (1024, 32) if box[0] > 1 else (2, 1024)
    x = torch.randn(shape)
    y = torch.full(shape, float("nan"))
    tlxc.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8))
    try:
        device_plus_one[(shape[0] // box[0],)](x, y, shape[0], shape[1], BM=box[0], BN=box[1])
    finally:
        tlxc.set_allocator(None)
    assert torch.equal(y, x + 1)
    h = device_plus_one.warmup(x, y, shape[0], shape[1], BM=box[0], BN=box[1], grid=(shape[0] // box[0],))
    text = h.asm["cuda"]
    piece = box[1] if box[0] > 1 else 256
    assert re.search(rf"replace_box_dim<0>\([^,]+, {piece}u\)", text)
    assert re.search(rf"replace_box_dim<1>\([^,]+, {min(box[0], 256)}u\)", text)
    pieces = box[0] // 256 if box[0] > 256 else box[1] // 256
    assert len(re.findall(r"(?<!void )tlx_tma_store_2d\(", text)) == pieces


@pytest.mark.gpu
@pytest.mark.parametrize("shape,box,dtype", CASES, ids=str)
def test_wide_boxes_on_the_gpu(shape, box, dtype):
    """The pieces on the GPU: desc.load / desc.store, the staged TLX copy with its prefetch, and the
    reduce-store, each against the host's arithmetic."""
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    g = torch.Generator(device="cuda").manual_seed(6)
    x = torch.randn(shape, device="cuda", generator=g).to(dtype)
    out = torch.full(shape, float("nan"), device="cuda", dtype=dtype)
    d_in, d_out = tlxc.TensorDescriptor.from_tensor(x, list(box)), tlxc.TensorDescriptor.from_tensor(out, list(box))
    plus_one_boxes[_grid(shape, box)](d_in, d_out, BM=box[0], BN=box[1])
    torch.cuda.synchronize()
    assert torch.equal(out, x + 1)
    if dtype == torch.float32:
        out.fill_(float("nan"))
        staged_plus_one[_grid(shape, box)](d_in, d_out, BM=box[0], BN=box[1])
        torch.cuda.synchronize()
        assert torch.equal(out, x + 1)
        base = torch.randn(shape, device="cuda", generator=g)
        acc = base.clone()
        add_into[_grid(shape, box)](tlxc.TensorDescriptor.from_tensor(acc, list(box)), x, shape[1], BM=box[0],
                                    BN=box[1])
        torch.cuda.synchronize()
        torch.testing.assert_close(acc, base + x)


@tlxc.jit
def into_column_slice(in_desc, out_ptr, R: tl.constexpr, W: tl.constexpr, C: tl.constexpr):
    """A box loaded into columns C .. 2C of a wider unswizzled buffer."""
    buf = tlx.local_alloc((R, W), tl.float32, 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], R * C * 4)
    tlx.async_descriptor_load(in_desc, tlx.local_slice(buf[0], [0, C], [R, C]), [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    tl.store(out_ptr + tl.arange(0, R)[:, None] * W + tl.arange(0, W)[None, :], tlx.local_load(buf[0]))


def test_a_box_into_a_column_slice_of_a_wider_buffer_is_refused():
    """TMA writes a box as dense rows; a view whose rows are further apart would get them in the
    wrong places on the GPU (the CUDA emulation showed row 1 landing in row 0's right half), so
    the sm_90a compile refuses it, naming the spacing.  (The 128-byte-swizzled wide buffers are
    column-blocked, so their column slices are dense: test_tma.py.)"""
    x = torch.arange(64 * 4, dtype=torch.float32).reshape(64, 4)
    d = tlxc.TensorDescriptor.from_tensor(x, [64, 4])
    with pytest.raises(CompilationError, match="has rows 16 elements apart"):
        into_column_slice.warmup(d, torch.zeros(64, 16), R=64, W=16, C=4, grid=(1,))
