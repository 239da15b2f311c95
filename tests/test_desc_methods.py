"""Tensor descriptors inside kernels, as Triton and TLX kernels write them:
``desc.load(offsets)`` / ``desc.store(offsets, value)`` staged through a shared buffer the
compiler allocates, ``desc.dtype`` / ``desc.block_shape``, and ``tlx.dtype_of(desc)`` /
``tlx.size_of(dtype)`` in buffer and byte-count arithmetic.  The interpreter runs them against
torch on shapes that are not multiples of the box (zero-filled loads, clipped stores), the
static checker finds nothing to report, and the kernels compile to sm_90a cubins; the same
kernels run on the GPU under the ``gpu`` marker."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.check import ERROR
from tlxc.compiler import check_function, compile_kernel, frontend
from tlxc.frontend.specialize import specialization_from_args
from tlxc.language import tlx


# -- kernels ------------------------------------------------------------------------------------
@tlxc.kernel
def add_one(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    """out = x + 1, one box per program, through the descriptor methods."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    x = in_desc.load([pid_m * BM, pid_n * BN])
    out_desc.store([pid_m * BM, pid_n * BN], x + 1.0)


@tlxc.kernel
def tile_sum(in_desc, out_desc, N, BM: tl.constexpr, BN: tl.constexpr):
    """out[rows, :BN] = the sum of x's BN-wide column tiles (the last one zero-filled), one
    load per iteration of a runtime loop; the float32 sum is stored through a float16
    descriptor (Triton's implicit conversion)."""
    row = tl.program_id(0) * BM
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(tl.cdiv(N, BN)):
        acc += in_desc.load([row, k * BN]).to(tl.float32)
    out_desc.store([row, 0], acc)


@tlxc.kernel
def ws_scale(in_desc, out_desc, N, BM: tl.constexpr, BN: tl.constexpr):
    """out = 2 x: each program owns three row blocks, one for the default task and one for each
    replica of the second task; every task walks its row block's column tiles in a loop."""
    with tlx.async_tasks():
        with tlx.async_task("default"):
            row = tl.program_id(0) * 3 * BM
            for k in range(tl.cdiv(N, BN)):
                out_desc.store([row, k * BN], in_desc.load([row, k * BN]) * 2.0)
        with tlx.async_task(num_warps=4, replicate=2):
            row = (tl.program_id(0) * 3 + 1 + tlx.async_task_replica_id()) * BM
            for k in range(tl.cdiv(N, BN)):
                x = in_desc.load([row, k * BN])
                out_desc.store([row, k * BN], x * 2.0)


@tlxc.kernel
def explicit_copy(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    """TLX's own idiom: a buffer of the descriptor's dtype, and the bytes to expect computed
    from it; the result converted to the output descriptor's dtype."""
    row = tl.program_id(0) * BM
    tl.static_assert(in_desc.block_shape == (BM, BN))
    tl.static_assert(in_desc.dtype == tlx.dtype_of(in_desc))
    buf = tlx.local_alloc((BM, BN), tlx.dtype_of(in_desc), 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], BM * BN * tlx.size_of(tlx.dtype_of(in_desc)))
    tlx.async_descriptor_load(in_desc, buf[0], [row, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    x = tlx.local_load(buf[0])
    out_desc.store([row, 0], x.to(tlx.dtype_of(out_desc)) * 3)


@tlxc.kernel
def per_head(in_desc, out_desc, BM: tl.constexpr, D: tl.constexpr):
    """A [1, BM, D] box of a (B, S, D) tensor: load gives the box's shape, leading 1 included."""
    head = tl.program_id(1)
    row = tl.program_id(0) * BM
    x = in_desc.load([head, row, 0])
    tl.static_assert(x.shape == (1, BM, D))
    out_desc.store([head, row, 0], x - 1.0)


@tlxc.kernel
def bad_store_shape(out_desc, BM: tl.constexpr, BN: tl.constexpr):
    x = tl.zeros([BM, BN // 2], dtype=tl.float32)
    out_desc.store([0, 0], x)  # the wrong shape


@tlxc.kernel
def bad_store_scalar(out_desc):
    out_desc.store([0, 0], 1.0)  # a scalar


@tlxc.kernel
def bad_rank(in_desc, out_desc):
    x = in_desc.load([0])  # one offset
    out_desc.store([0, 0], x)


@tlxc.kernel
def bad_offsets(in_desc, out_desc, BM: tl.constexpr):
    x = in_desc.load([tl.arange(0, BM), 0])  # a tensor offset
    out_desc.store([0, 0], x)


@tlxc.kernel
def bad_attribute(in_desc):
    in_desc.lod([0, 0])  # a typo


@tlxc.kernel
def bad_size_of(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], BM * BN * tlx.size_of(in_desc))  # not a dtype


@tlxc.kernel
def bad_dtype_of(in_desc):
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.local_alloc((16, 16), tlx.dtype_of(bar), 1)  # not a tensor


# -- helpers --------------------------------------------------------------------------------
BM, BN = 32, 64


def _desc(t, box):
    return tlxc.TensorDescriptor.from_tensor(t, box)


def _poisoned(shape, dtype=torch.float32, device="cpu"):
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def _line(marker: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if marker in line and "_line(" not in line)


def _ir(kernel, **args) -> str:
    return str(frontend(kernel, specialization_from_args(kernel, args)))


def _compile(kernel, **args):
    spec = specialization_from_args(kernel, args)
    return compile_kernel(kernel, spec, arch="sm_90a", num_warps=4)


def _run_add_one(x, device, interpret):
    out = _poisoned(x.shape, device=device)
    grid = (triton_cdiv(x.shape[0], BM), triton_cdiv(x.shape[1], BN))
    launcher = tlxc.interpret(add_one) if interpret else add_one
    launcher[grid](_desc(x, [BM, BN]), _desc(out, [BM, BN]), BM=BM, BN=BN, num_warps=4)
    return out


def triton_cdiv(a, b):
    return (a + b - 1) // b


def _run_tile_sum(x, device, interpret):
    out = _poisoned((x.shape[0], BN), dtype=torch.float16, device=device)
    launcher = tlxc.interpret(tile_sum) if interpret else tile_sum
    launcher[(triton_cdiv(x.shape[0], BM),)](_desc(x, [BM, BN]), _desc(out, [BM, BN]), x.shape[1], BM=BM, BN=BN,
                                            num_warps=4)
    padded = torch.zeros(x.shape[0], triton_cdiv(x.shape[1], BN) * BN, dtype=torch.float64, device=device)
    padded[:, :x.shape[1]] = x.double()
    return out, padded.reshape(x.shape[0], -1, BN).sum(1)


def _run_ws_scale(x, device, interpret, seed=0):
    out = _poisoned(x.shape, device=device)
    launcher = tlxc.interpret(ws_scale, seed=seed) if interpret else ws_scale
    launcher[(triton_cdiv(x.shape[0], 3 * BM),)](_desc(x, [BM, BN]), _desc(out, [BM, BN]), x.shape[1], BM=BM, BN=BN,
                                                num_warps=4)
    return out


def _run_explicit_copy(x, device, interpret):
    out = _poisoned(x.shape, device=device)
    launcher = tlxc.interpret(explicit_copy) if interpret else explicit_copy
    launcher[(triton_cdiv(x.shape[0], BM),)](_desc(x, [BM, BN]), _desc(out, [BM, BN]), BM=BM, BN=BN, num_warps=4)
    return out


def _run_per_head(x, device, interpret, bm=16):
    out = _poisoned(x.shape, device=device)
    launcher = tlxc.interpret(per_head) if interpret else per_head
    d = x.shape[2]
    launcher[(triton_cdiv(x.shape[1], bm), x.shape[0])](_desc(x, [1, bm, d]), _desc(out, [1, bm, d]), BM=bm, D=d,
                                                       num_warps=4)
    return out


# -- dtype_of / size_of ---------------------------------------------------------------------------
def test_size_of_is_bits_over_eight_as_in_tlx():
    from tlxc.frontend.builtins import RULES
    sizes = {tl.float8e4nv: 1, tl.bfloat16: 2, tl.float16: 2, tl.float32: 4, tl.int64: 8, tl.int1: 0}
    assert {d: RULES["tlx.size_of"](None, d) for d in sizes} == sizes


def test_dtype_of_a_descriptor_sizes_buffers_and_expected_bytes():
    x = torch.randn(70, BN).half()
    ir = _ir(explicit_copy, in_desc=_desc(x, [BM, BN]), out_desc=_desc(torch.empty(70, BN), [BM, BN]), BM=BM, BN=BN)
    assert f"memdesc<{BM}x{BN}xf16, smem, num=1>" in ir
    assert f"bytes = {BM * BN * 2}" in ir
    out = _run_explicit_copy(x, "cpu", interpret=True)
    assert torch.equal(out, x.float() * 3)


@pytest.mark.parametrize("kernel, message, marker", [
    (bad_size_of, "tlx.size_of: 'dtype' must be a dtype, got", "# not a dtype"),
    (bad_dtype_of, "tlx.dtype_of: 'value' must be a tensor, pointer, buffer or tensor descriptor", "# not a tensor"),
])
def test_dtype_of_and_size_of_reject_what_they_cannot_size(kernel, message, marker):
    d = _desc(torch.randn(64, 64), [BM, BN])
    args = {"in_desc": d}
    if kernel is bad_size_of:
        args.update(out_desc=d, BM=BM, BN=BN)
    with pytest.raises(tlxc.CompilationError, match=message) as info:
        _ir(kernel, **args)
    assert info.value.loc.line == _line(marker)


# -- the IR the methods build -------------------------------------------------------------------
def test_load_and_store_compose_the_tlx_ops_through_one_staging_buffer():
    d = _desc(torch.randn(64, 128), [BM, BN])
    module = frontend(add_one, specialization_from_args(add_one, {"in_desc": d, "out_desc": d, "BM": BM, "BN": BN}))
    ops = [op.name for op in module.kernels[0].walk() if op.name.startswith("tlx.")]
    ir = str(module)
    assert ops == ["tlx.local_alloc", "tlx.alloc_barriers",
                   "tlx.local_view", "tlx.local_view", "tlx.barrier_expect_bytes", "tlx.async_descriptor_load",
                   "tlx.barrier_wait", "tlx.local_load", "tlx.barrier_arrive",
                   "tlx.local_view", "tlx.local_store", "tlx.fence", "tlx.async_descriptor_store",
                   "tlx.async_descriptor_store_wait"], ops
    assert ir.count("tlx.local_alloc") == 1 and f"bytes = {BM * BN * 4}" in ir


def test_each_task_replica_has_its_own_staging():
    d = _desc(torch.randn(96, 128), [BM, BN])
    ir = _ir(ws_scale, in_desc=d, out_desc=d, N=128, BM=BM, BN=BN)
    assert ir.count("tlx.local_alloc") == 3 and ir.count("tlx.alloc_barriers") == 3
    head = ir.split("tlx.async_tasks")[0]
    assert head.count("tlx.local_alloc") == 3       # all in the uniform prologue, before the tasks


# -- the interpreter against torch ----------------------------------------------------------
@pytest.mark.parametrize("shape", [(32, 64), (100, 132), (7, 200)])
def test_interpreter_load_store_round_trip(shape):
    x = torch.randn(*shape)
    assert torch.equal(_run_add_one(x, "cpu", interpret=True), x + 1)


@pytest.mark.parametrize("shape", [(40, 64), (70, 152)])
def test_interpreter_load_in_a_runtime_loop(shape):
    x = torch.randn(*shape).half()
    out, want = _run_tile_sum(x, "cpu", interpret=True)
    torch.testing.assert_close(out.double(), want, atol=2e-2, rtol=2e-3)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("shape", [(96, 128), (130, 76)])
def test_interpreter_methods_in_replicated_async_tasks(shape, seed):
    """Several interleavings of the three tasks: each reuses its own staging in its loop."""
    x = torch.randn(*shape)
    assert torch.equal(_run_ws_scale(x, "cpu", interpret=True, seed=seed), x * 2)


def test_interpreter_box_with_a_leading_one():
    x = torch.randn(3, 40, 32)
    assert torch.equal(_run_per_head(x, "cpu", interpret=True), x - 1)


# -- errors -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel, message, marker", [
    (bad_store_shape, r"out_desc.store: 'value' has shape \[32, 32\] but the descriptor's block is \[32, 64\]",
     "# the wrong shape"),
    (bad_store_scalar, r"out_desc.store: 'value' must be a tensor of the descriptor's block shape \[32, 64\]",
     "# a scalar"),
    (bad_rank, r"in_desc.load: 'offsets' needs 2 entries \(one per dimension of the descriptor\), got 1",
     "# one offset"),
    (bad_offsets, r"in_desc.load: 'offsets' must be integers or integer scalars, got a tensor", "# a tensor offset"),
    (bad_attribute, r"a tensor descriptor has no attribute 'lod' \(it has dtype, block_shape, shape, strides, load, "
                    r"store, atomic_add", "# a typo"),
])
def test_wrong_uses_are_located_errors(kernel, message, marker):
    d = _desc(torch.randn(64, 128), [BM, BN])
    params = kernel.fn.__code__.co_varnames[:kernel.fn.__code__.co_argcount]
    values = {"in_desc": d, "out_desc": d, "BM": BM, "BN": BN}
    with pytest.raises(tlxc.CompilationError, match=message) as info:
        _ir(kernel, **{p: values[p] for p in params})
    assert info.value.loc.line == _line(marker)


# -- the static checker and the cubin ----------------------------------------------------------
def _cases():
    d = _desc(torch.randn(96, 128), [BM, BN])
    h = _desc(torch.randn(96, 128).half(), [BM, BN])
    heads = _desc(torch.randn(2, 32, 32), [1, 16, 32])
    return [
        (add_one, {"in_desc": d, "out_desc": d, "BM": BM, "BN": BN}),
        (tile_sum, {"in_desc": h, "out_desc": h, "N": 128, "BM": BM, "BN": BN}),
        (ws_scale, {"in_desc": d, "out_desc": d, "N": 128, "BM": BM, "BN": BN}),
        (explicit_copy, {"in_desc": h, "out_desc": d, "BM": BM, "BN": BN}),
        (per_head, {"in_desc": heads, "out_desc": heads, "BM": 16, "D": 32}),
    ]


@pytest.mark.parametrize("case", range(5), ids=["add_one", "tile_sum", "ws_scale", "explicit_copy", "per_head"])
def test_checker_is_clean(case):
    kernel, args = _cases()[case]
    found = check_function(kernel, specialization_from_args(kernel, args), arch="sm_90a", num_warps=4)
    assert not [f for f in found if f.severity == ERROR], [f.message for f in found]
    assert not found, [f.message for f in found]


@pytest.mark.parametrize("case", range(5), ids=["add_one", "tile_sum", "ws_scale", "explicit_copy", "per_head"])
def test_sm90a_cubin(case):
    kernel, args = _cases()[case]
    compiled = _compile(kernel, **args)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    cuda = compiled.asm["cuda"]
    assert "tlx_tma_store_" in cuda and "tlx_bulk_wait_group_read<0>" in cuda


# -- the same on the GPU --------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(32, 64), (100, 132), (7, 200)])
def test_gpu_load_store_round_trip(shape):
    x = torch.randn(*shape, device="cuda")
    out = _run_add_one(x, "cuda", interpret=False)
    torch.cuda.synchronize()
    assert torch.equal(out, x + 1)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(40, 64), (300, 1000)])
def test_gpu_load_in_a_runtime_loop(shape):
    x = torch.randn(*shape, device="cuda").half()
    out, want = _run_tile_sum(x, "cuda", interpret=False)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.double(), want, atol=6e-2, rtol=2e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(96, 128), (1000, 332)])
def test_gpu_methods_in_replicated_async_tasks(shape):
    x = torch.randn(*shape, device="cuda")
    out = _run_ws_scale(x, "cuda", interpret=False)
    torch.cuda.synchronize()
    assert torch.equal(out, x * 2)


@pytest.mark.gpu
def test_gpu_explicit_copy_and_box_with_a_leading_one():
    x = torch.randn(300, BN, device="cuda").half()
    out = _run_explicit_copy(x, "cuda", interpret=False)
    heads = torch.randn(3, 40, 32, device="cuda")
    out_heads = _run_per_head(heads, "cuda", interpret=False)
    torch.cuda.synchronize()
    assert torch.equal(out, x.float() * 3)
    assert torch.equal(out_heads, heads - 1)
