"""Scans and combine-function reductions (``tl.cumsum``, ``tl.cumprod``,
``tl.associative_scan``, ``tl.reduce``) and ``tl.flip``: the interpreter against
torch, sm_90a cubins without a GPU, located errors, and ``gpu``-marked runs."""
from __future__ import annotations

import os

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError
from tlxc.interpreter import interpret

HERE = os.path.basename(__file__)


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))


@tlxc.jit
def add_combine(a, b):
    return a + b


@tlxc.jit
def max_with_index(value_a, index_a, value_b, index_b):
    """Running maximum with the index of its first occurrence (not commutative in the index)."""
    take_b = value_b > value_a
    return tl.where(take_b, value_b, value_a), tl.where(take_b, index_b, index_a)


@tlxc.jit
def affine_combine(a_scale, a_shift, b_scale, b_shift):
    """Composition of x -> scale * x + shift maps (a first, then b): associative, not commutative."""
    return a_scale * b_scale, a_shift * b_scale + b_shift


# -- kernels ----------------------------------------------------------------------------------

@tlxc.jit
def scan_2d_kernel(x_ptr, out_ptr, n_rows, M: tl.constexpr, N: tl.constexpr, OP: tl.constexpr,
                   AXIS: tl.constexpr, REVERSE: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    mask = (rows < n_rows) & (cols < N)
    x = tl.load(x_ptr + rows * N + cols, mask=mask, other=0)
    if OP == "cumsum":
        y = tl.cumsum(x, axis=AXIS, reverse=REVERSE)
    elif OP == "cumprod":
        y = tl.cumprod(x, axis=AXIS, reverse=REVERSE)
    else:
        y = tl.associative_scan(x, AXIS, add_combine, reverse=REVERSE)
    tl.store(out_ptr + rows * N + cols, y, mask=mask)


@tlxc.jit
def argmax_scan_kernel(x_ptr, value_ptr, index_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    value, index = tl.associative_scan((x, offs), 0, max_with_index)
    tl.store(value_ptr + offs, value)
    tl.store(index_ptr + offs, index)


@tlxc.jit
def affine_scan_kernel(scale_ptr, shift_ptr, out_ptr, BLOCK: tl.constexpr, REVERSE: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    _scale, shift = tl.associative_scan((tl.load(scale_ptr + offs), tl.load(shift_ptr + offs)), 0,
                                       affine_combine, reverse=REVERSE)
    tl.store(out_ptr + offs, shift)


@tlxc.jit
def reduce_kernel(x_ptr, value_ptr, index_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr,
                  KEEP: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + rows * N + cols)
    index = tl.broadcast_to(cols, (M, N)) if AXIS == 1 else tl.broadcast_to(rows, (M, N))
    value, where = tl.reduce((x, index), AXIS, max_with_index, keep_dims=KEEP)
    total = tl.reduce(x, AXIS, add_combine, keep_dims=KEEP)
    out = tl.arange(0, N if AXIS == 0 else M)
    if KEEP:
        value = tl.reshape(value, (N if AXIS == 0 else M,))
        where = tl.reshape(where, (N if AXIS == 0 else M,))
        total = tl.reshape(total, (N if AXIS == 0 else M,))
    tl.store(value_ptr + out, value + 0 * total)
    tl.store(index_ptr + out, where)


@tlxc.jit
def reduce_all_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(out_ptr, tl.reduce(x, None, add_combine))


@tlxc.jit
def flip_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, DIM: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + rows * N + cols)
    tl.store(out_ptr + rows * N + cols, tl.flip(x, DIM))


def run_scan(op, x, axis, reverse, m=16, runner=interpret):
    n_rows, n = x.shape
    out = torch.full_like(x, -7)
    meta = {"M": m, "N": n, "OP": op, "AXIS": axis, "REVERSE": reverse}
    if runner is interpret:
        interpret(scan_2d_kernel, (1,), (x, out, n_rows), meta)
    else:
        scan_2d_kernel[(1,)](x, out, n_rows, **meta)
        torch.cuda.synchronize()
    return out


def torch_scan(op, x, axis, reverse):
    y = x.flip(axis) if reverse else x
    y = torch.cumsum(y, axis) if op in ("cumsum", "add") else torch.cumprod(y, axis)
    return y.flip(axis) if reverse else y


# -- the interpreter ------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["cumsum", "cumprod", "add"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
def test_scans_match_torch(op, axis, reverse, gen):
    x = torch.rand(13, 32, generator=gen) + 0.5          # 13 of 16 rows: masked rows read 0
    out = run_scan(op, x, axis, reverse)
    padded = torch.cat([x, torch.zeros(3, 32)]) if axis == 0 else x
    ref = torch_scan(op, padded.double(), axis, reverse)[:13]
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int8])
def test_integer_cumsum_is_exact_and_widens(dtype, gen):
    x = torch.randint(-100, 100, (16, 32), generator=gen).to(dtype)
    out = torch.full((16, 32), -7, dtype=torch.int32)
    interpret(scan_2d_kernel, (1,), (x, out, 16), {"M": 16, "N": 32, "OP": "cumsum", "AXIS": 1, "REVERSE": False})
    assert torch.equal(out, torch.cumsum(x.int(), 1).int())            # i8 accumulates in i32: no wrap


def test_scan_ir_widens_int8_cumsum():
    text = scan_2d_kernel.compile("x_ptr=*i8, out_ptr=*i32, n_rows=i32",
                                  {"M": 16, "N": 32, "OP": "cumsum", "AXIS": 1, "REVERSE": False},
                                  stages=("ir",)).asm["ir"]
    assert "tl.scan" in text and "tensor<16x32xi32" in text


def test_tuple_scan_running_argmax(gen):
    x = torch.randint(0, 20, (64,), generator=gen).float()
    value, index = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
    interpret(argmax_scan_kernel, (1,), (x, value, index), {"BLOCK": 64})
    ref = torch.cummax(x, 0)
    assert torch.equal(value, ref.values)
    # first occurrence of each running maximum
    first = torch.tensor([int((x[:k + 1] == ref.values[k]).nonzero()[0]) for k in range(64)], dtype=torch.int32)
    assert torch.equal(index, first)


@pytest.mark.parametrize("reverse", [False, True])
def test_non_commutative_combine_keeps_the_order(reverse, gen):
    """The affine-map composition tells a left fold from a right one."""
    scale = torch.rand(32, generator=gen) + 0.5
    shift = torch.randn(32, generator=gen)
    out = torch.zeros(32)
    interpret(affine_scan_kernel, (1,), (scale, shift, out), {"BLOCK": 32, "REVERSE": reverse})
    ref, acc = [], None
    order = range(31, -1, -1) if reverse else range(32)
    for k in order:                  # combine(acc, x_k): acc first, then x_k
        acc = (scale[k].double(), shift[k].double()) if acc is None else \
            (acc[0] * scale[k], acc[1] * scale[k] + shift[k])
        ref.append(acc[1])
    ref = torch.stack(ref) if not reverse else torch.stack(ref).flip(0)
    torch.testing.assert_close(out.double(), ref.double(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("keep", [False, True])
def test_reduce_with_combine(axis, keep, gen):
    m, n = 16, 32
    x = torch.randint(0, 9, (m, n), generator=gen).float()
    value = torch.zeros(n if axis == 0 else m)
    index = torch.zeros(n if axis == 0 else m, dtype=torch.int32)
    interpret(reduce_kernel, (1,), (x, value, index), {"M": m, "N": n, "AXIS": axis, "KEEP": keep})
    ref = x.max(dim=axis)
    assert torch.equal(value, ref.values)
    first = (x == ref.values.unsqueeze(axis)).int().argmax(dim=axis).int()   # first occurrence
    assert torch.equal(index, first)


def test_reduce_every_axis(gen):
    x = torch.randn(8, 16, generator=gen)
    out = torch.full((1,), float("nan"))
    interpret(reduce_all_kernel, (1,), (x, out), {"M": 8, "N": 16})
    torch.testing.assert_close(out.double(), x.double().sum().reshape(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_flip(dim, gen):
    x = torch.randn(8, 16, generator=gen)
    out = torch.full_like(x, float("nan"))
    interpret(flip_kernel, (1,), (x, out), {"M": 8, "N": 16, "DIM": dim})
    assert torch.equal(out, x.flip(1 if dim in (None, -1) else dim))


# -- compiles for sm_90a without a GPU --------------------------------------------------------------

@pytest.mark.parametrize("op, axis, reverse", [("cumsum", 1, False), ("cumprod", 0, True), ("add", 1, True)])
def test_scan_compiles(op, axis, reverse):
    compiled = scan_2d_kernel.compile("x_ptr=*fp32, out_ptr=*fp32, n_rows=i32",
                                      {"M": 16, "N": 32, "OP": op, "AXIS": axis, "REVERSE": reverse},
                                      arch="sm_90a", stages=("ir.opt", "cuda", "cubin"))
    assert compiled.asm["cubin"][:4] == b"\x7fELF" and "tl.scan" in compiled.asm["ir.opt"]


def test_tuple_scan_reduce_and_flip_compile():
    for kernel, signature, meta in (
            (argmax_scan_kernel, "x_ptr=*fp32, value_ptr=*fp32, index_ptr=*i32", {"BLOCK": 64}),
            (affine_scan_kernel, "scale_ptr=*fp32, shift_ptr=*fp32, out_ptr=*fp32", {"BLOCK": 32, "REVERSE": True}),
            (reduce_kernel, "x_ptr=*fp32, value_ptr=*fp32, index_ptr=*i32", {"M": 16, "N": 32, "AXIS": 0,
                                                                               "KEEP": True}),
            (reduce_all_kernel, "x_ptr=*fp32, out_ptr=*fp32", {"M": 8, "N": 16}),
            (flip_kernel, "x_ptr=*fp32, out_ptr=*fp32", {"M": 8, "N": 16, "DIM": 0})):
        compiled = kernel.compile(signature, meta, arch="sm_90a", stages=("cuda", "cubin"))
        assert compiled.asm["cubin"][:4] == b"\x7fELF", kernel


def test_ir_round_trips():
    from tlxc.ir.parser import parse_module
    from tlxc.ir.printer import print_module
    text = argmax_scan_kernel.compile("x_ptr=*fp32, value_ptr=*fp32, index_ptr=*i32", {"BLOCK": 64},
                                      stages=("ir", "ir.opt")).asm["ir.opt"]
    assert print_module(parse_module(text)) == text


# -- errors -----------------------------------------------------------------------------------------

def plain_python_combine(a, b):
    return a + b


@tlxc.jit
def three_args(a, b, c):
    return a


@tlxc.jit
def returns_int(a, b):
    return 1.5 > a


@tlxc.jit
def bad_scan_kernel(x_ptr, WHAT: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 32))
    if WHAT == "python":
        y = tl.associative_scan(x, 0, plain_python_combine)
    elif WHAT == "arity":
        y = tl.associative_scan(x, 0, three_args)
    elif WHAT == "type":
        y = tl.associative_scan(x, 0, returns_int)
    elif WHAT == "axis":
        y = tl.cumsum(x, axis=1)
    else:
        y = x
    tl.store(x_ptr + tl.arange(0, 32), y)


@pytest.mark.parametrize("what, expected", [
    ("python", "'combine_fn' must be a @tlxc.jit function"),
    ("arity", "three_args() must take 2 arguments (two per input), takes 3"),
    ("type", "returns_int() must return f32 scalars"),
    ("axis", "axis 1 is out of range for a tensor of rank 1"),
])
def test_bad_scans_are_located_errors(what, expected):
    with pytest.raises(CompilationError) as info:
        bad_scan_kernel.compile("x_ptr=*fp32", {"WHAT": what}, stages=("ir",))
    assert expected in str(info.value) and HERE in str(info.value)


# -- on the GPU --------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("op", ["cumsum", "cumprod", "add"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
def test_gpu_scans(op, axis, reverse):
    gen = torch.Generator().manual_seed(11)
    x = torch.rand(29, 64, generator=gen) + 0.5
    out = run_scan(op, x.cuda(), axis, reverse, m=32, runner=None).cpu()
    padded = torch.cat([x, torch.zeros(3, 64)]) if axis == 0 else x
    ref = torch_scan(op, padded.double(), axis, reverse)[:29]
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_gpu_tuple_scan_reduce_and_flip():
    gen = torch.Generator().manual_seed(5)
    x = torch.randint(0, 20, (64,), generator=gen).float().cuda()
    value, index = torch.zeros_like(x), torch.zeros(64, dtype=torch.int32, device="cuda")
    argmax_scan_kernel[(1,)](x, value, index, BLOCK=64)
    cpu_value, cpu_index = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
    interpret(argmax_scan_kernel, (1,), (x.cpu(), cpu_value, cpu_index), {"BLOCK": 64})
    assert torch.equal(value.cpu(), cpu_value) and torch.equal(index.cpu(), cpu_index)

    m, n = 16, 32
    y = torch.randint(0, 9, (m, n), generator=gen).float()
    for axis in (0, 1):
        v, i = torch.zeros(n if axis == 0 else m, device="cuda"), torch.zeros(n if axis == 0 else m,
                                                                               dtype=torch.int32, device="cuda")
        reduce_kernel[(1,)](y.cuda(), v, i, M=m, N=n, AXIS=axis, KEEP=False)
        ref = y.max(dim=axis)
        assert torch.equal(v.cpu(), ref.values)
        assert torch.equal(i.cpu(), (y == ref.values.unsqueeze(axis)).int().argmax(dim=axis).int())

    z = torch.randn(8, 16, generator=gen).cuda()
    for dim in (0, 1):
        out = torch.full_like(z, float("nan"))
        flip_kernel[(1,)](z, out, M=8, N=16, DIM=dim)
        assert torch.equal(out, z.flip(dim))


# -- sort ---------------------------------------------------------------------------------------------

@tlxc.jit
def sort_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, DIM: tl.constexpr, DESCENDING: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + rows * N + cols)
    tl.store(out_ptr + rows * N + cols, tl.sort(x, DIM, descending=DESCENDING))


@pytest.mark.parametrize("dim", [None, 0])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float16])
def test_sort(dim, descending, dtype, gen):
    x = (torch.randn(8, 32, generator=gen) * 50).to(dtype)
    out = torch.zeros_like(x)
    interpret(sort_kernel, (1,), (x, out), {"M": 8, "N": 32, "DIM": dim, "DESCENDING": descending})
    assert torch.equal(out, torch.sort(x, dim=1 if dim is None else dim, descending=descending).values)


def test_sort_compiles():
    for dtype in ("fp32", "fp16", "i32"):
        compiled = sort_kernel.compile(f"x_ptr=*{dtype}, out_ptr=*{dtype}", {"M": 8, "N": 32, "DIM": None,
                                                                               "DESCENDING": True},
                                       arch="sm_90a", stages=("cuda", "cubin"))
        assert compiled.asm["cubin"][:4] == b"\x7fELF"


@pytest.mark.gpu
@pytest.mark.parametrize("dim", [None, 0])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float16])
def test_gpu_sort(dim, descending, dtype):
    gen = torch.Generator().manual_seed(23)
    x = (torch.randn(16, 64, generator=gen) * 50).to(dtype).cuda()
    out = torch.zeros_like(x)
    sort_kernel[(1,)](x, out, M=16, N=64, DIM=dim, DESCENDING=descending)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.sort(x, dim=1 if dim is None else dim, descending=descending).values)
