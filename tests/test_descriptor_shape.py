"""``desc.shape`` / ``desc.strides`` of a host ``TensorDescriptor`` argument inside a kernel (Triton's
spelling): i32 sizes and i64 strides, hidden parameters the launch appends after the kernel's own
(only those the kernel reads).  The interpreter against the descriptor's geometry, the CUDA
signature and metadata, the launch's wrapper that appends the values, a warp-specialized task."""
from __future__ import annotations

import re

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc import TensorDescriptor
from tlxc.descriptors import EncodedMap
from tlxc.language import tlx
from tlxc.runtime.launch import with_descriptor_dims


@tlxc.jit
def double_rows(desc, out_ptr, BM: tl.constexpr):
    """Writes the geometry to out_ptr and doubles every BM-row box of the first column block,
    looping to desc.shape[0]."""
    M = desc.shape[0]
    tl.store(out_ptr + 0, M)
    tl.store(out_ptr + 1, desc.shape[1])
    tl.store(out_ptr + 2, desc.strides[0].to(tl.int32))
    tl.store(out_ptr + 3, desc.strides[1].to(tl.int32))
    for m in range(0, tl.cdiv(M, BM)):
        desc.store([m * BM, 0], desc.load([m * BM, 0]) * 2)


@tlxc.jit
def rows_only(desc, out_ptr):
    tl.store(out_ptr, desc.shape[0])


@tlxc.jit
def three_d(desc, out_ptr):
    for d in tl.static_range(3):
        tl.store(out_ptr + d, desc.shape[d])
        tl.store(out_ptr + 3 + d, desc.strides[d].to(tl.int32))


@tlxc.jit
def in_a_task(desc, out_ptr):
    rows = desc.shape[0]
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(out_ptr, rows)
        with tlx.async_task(num_warps=4):
            tl.store(out_ptr + 1, rows + desc.shape[1])


def test_geometry_and_a_loop_to_its_rows_on_the_interpreter():
    x = torch.arange(40 * 48, dtype=torch.float32).reshape(40, 48)
    got = x.clone()
    out = torch.full((4,), -1, dtype=torch.int32)
    double_rows[(1,)](TensorDescriptor.from_tensor(got, [16, 64]), out, BM=16)
    assert out.tolist() == [40, 48, 48, 1]
    assert torch.equal(got, x * 2)          # 40 rows: three boxes, the last clipped


def test_a_strided_3d_view():
    base = torch.zeros(6, 10, 32, dtype=torch.float16)
    view = base[:, 2:7]                       # (6, 5, 32) with strides (320, 32, 1)
    out = torch.full((6,), -1, dtype=torch.int32)
    three_d[(1,)](TensorDescriptor(view, list(view.shape), list(view.stride()), [2, 4, 32]), out)
    assert out.tolist() == [6, 5, 32, 320, 32, 1]


def _compiled(kernel, *args, **meta):
    return kernel.warmup(*args, grid=(1,), **meta)


def test_hidden_parameters_follow_the_kernels_own():
    x = torch.zeros(40, 48)
    c = _compiled(double_rows, TensorDescriptor.from_tensor(x, [16, 64]), torch.zeros(4, dtype=torch.int32), BM=16)
    signature = re.search(r'extern "C" __global__ void[^{]*', c.asm["cuda"]).group(0)
    assert signature.endswith("int* out_ptr, int tlx_desc_shape0, int tlx_desc_shape1, long long tlx_desc_stride0, "
                              "long long tlx_desc_stride1) ")
    assert c.metadata.params == ["bytes128", "u64", "i32", "i32", "i64", "i64"]
    assert c.metadata.descriptor_dims == [[0, "shape", 0], [0, "shape", 1], [0, "stride", 0], [0, "stride", 1]]


def test_only_what_the_kernel_reads_is_passed():
    c = _compiled(rows_only, TensorDescriptor.from_tensor(torch.zeros(8, 16), [8, 16]), torch.zeros(1, dtype=torch.int32))
    assert c.metadata.params == ["bytes128", "u64", "i32"]
    assert c.metadata.descriptor_dims == [[0, "shape", 0]]


def test_a_warp_specialized_task_reads_the_geometry():
    desc = TensorDescriptor.from_tensor(torch.zeros(24, 16), [8, 16])
    out = torch.zeros(2, dtype=torch.int32)
    in_a_task[(1,)](desc, out)
    assert out.tolist() == [24, 40]
    c = _compiled(in_a_task, desc, out)
    assert c.asm["cubin"][:4] == b"\x7fELF" and c.metadata.descriptor_dims == [[0, "shape", 0], [0, "shape", 1]]


def test_the_launch_appends_the_values_in_the_kernels_order():
    """The wrapper reads the geometry off the encoded map (``EncodedMap``, what the launch passes) or
    a TensorDescriptor, and appends it after the kernel's values, before a scratch's address (the
    wrapper inside it appends that)."""
    seen = []
    blob = EncodedMap(bytes(128))
    blob.shape, blob.strides = (40, 48), (48, 1)
    run = with_descriptor_dims(lambda grid, block, smem, stream, values: seen.append(values),
                               [[1, "shape", 0], [1, "stride", 0], [1, "shape", 1]])
    run((1, 1, 1), (128, 1, 1), 0, 0, (123, blob, 7))
    assert seen == [(123, blob, 7, 40, 48, 48)]
    desc = TensorDescriptor.from_tensor(torch.zeros(8, 16), [8, 16])
    run((1, 1, 1), (128, 1, 1), 0, 0, (0, desc, 7))
    assert seen[-1][3:] == (8, 16, 16)


@pytest.mark.gpu
def test_descriptor_geometry_on_the_gpu():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    x = torch.arange(40 * 48, dtype=torch.float32, device="cuda").reshape(40, 48)
    got = x.clone()
    out = torch.full((4,), -1, dtype=torch.int32, device="cuda")
    for _ in range(2):                       # the first launch and the fast path
        got.copy_(x)
        double_rows[(1,)](TensorDescriptor.from_tensor(got, [16, 64]), out, BM=16)
        assert out.tolist() == [40, 48, 48, 1]
        assert torch.equal(got, x * 2)


@tlxc.jit
def tlx_made_geometry(x_ptr, out_ptr, M, N, B: tl.constexpr):
    """``.shape`` / ``.strides`` of a descriptor TLX's op built: the sizes it was made with."""
    d = tlx.make_tensor_descriptor(desc_ptr=None, base=x_ptr, shape=[M, N], strides=[N, 1], block_shape=[B, B])
    for i in tl.static_range(2):
        tl.store(out_ptr + i, d.shape[i])
        tl.store(out_ptr + 2 + i, d.strides[i])


def test_the_geometry_of_a_tlx_made_descriptor():
    x = torch.zeros(37, 48)
    out = torch.zeros(4, dtype=torch.int64)
    tlxc.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8))
    try:
        tlx_made_geometry[(1,)](x, out, 37, 48, B=16)
    finally:
        tlxc.set_allocator(None)
    assert out.tolist() == [37, 48, 48, 1]


def test_the_geometry_of_a_tlx_made_descriptor_compiles_for_sm90a():
    x = torch.zeros(37, 48)
    h = tlx_made_geometry.warmup(x, torch.zeros(4, dtype=torch.int64), 37, 48, B=16, grid=(1,))
    signature = re.search(r"__global__ void (?:__launch_bounds__\(\d+\) )?\w+\(([^)]*)\)", h.asm["cuda"]).group(1)
    assert signature == "float* x_ptr, long long* out_ptr, int M, int N"    # the sizes themselves: nothing hidden
    assert h.n_spills == 0


def test_the_hidden_parameters_on_the_cuda_emulation():
    """The emulation fills the hidden parameters from the descriptor argument, as the launch appends
    them: the CUDA text's loop to desc.shape[0] doubles every row and stores the geometry."""
    from tlxc.codegen_nvptx.emu import run as emu
    if not emu.available():
        pytest.skip("no host C++ compiler")
    x = torch.arange(40 * 48, dtype=torch.float32).reshape(40, 48)
    got = x.clone()
    out = torch.full((4,), -1, dtype=torch.int32)
    desc = TensorDescriptor.from_tensor(got, [16, 64])
    c = _compiled(double_rows, desc, out, BM=16)
    emu.build(c.asm["cuda"]).run({"desc": desc, "out_ptr": out}, grid=(1, 1, 1), threads=128)
    assert out.tolist() == [40, 48, 48, 1]
    assert torch.equal(got, x * 2)
