"""Block pointers (``tl.make_block_ptr``, ``tl.advance``, ``tl.load``/``tl.store`` with
``boundary_check`` and ``padding_option``), used the way Triton's block-pointer matmul
tutorial and libraries use them: carried through a K loop by ``tl.advance``, odd shapes
guarded by ``boundary_check``, transposed strides, a guarded store.

Interpreter runs compare with torch (float64 references, fresh random inputs, NaN-poisoned
outputs, shapes that are not multiples of the block); sm_90a compiles need no GPU; the
``gpu`` tests compare with torch on the device.
"""
from __future__ import annotations

import os

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError
from tlxc.interpreter import interpret


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


# -- kernels --------------------------------------------------------------------------
@tlxc.jit
def bp_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_block_ptr = tl.make_block_ptr(base=a_ptr, shape=(M, K), strides=(stride_am, stride_ak),
                                    offsets=(pid_m * BLOCK_M, 0), block_shape=(BLOCK_M, BLOCK_K), order=(1, 0))
    b_block_ptr = tl.make_block_ptr(base=b_ptr, shape=(K, N), strides=(stride_bk, stride_bn),
                                    offsets=(0, pid_n * BLOCK_N), block_shape=(BLOCK_K, BLOCK_N), order=(1, 0))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        a = tl.load(a_block_ptr, boundary_check=(0, 1))
        b = tl.load(b_block_ptr, boundary_check=(0, 1), padding_option="zero")
        acc += tl.dot(a, b)
        a_block_ptr = tl.advance(a_block_ptr, (0, BLOCK_K))
        b_block_ptr = b_block_ptr.advance((BLOCK_K, 0))
    c_block_ptr = tl.make_block_ptr(base=c_ptr, shape=(M, N), strides=(stride_cm, stride_cn),
                                    offsets=(pid_m * BLOCK_M, pid_n * BLOCK_N), block_shape=(BLOCK_M, BLOCK_N),
                                    order=(1, 0))
    tl.store(c_block_ptr, acc, boundary_check=(0, 1))


@tlxc.jit
def bp_tile(x_ptr, out_ptr, rows, cols, stride_r, stride_c, row0, col0,
            BR: tl.constexpr, BC: tl.constexpr, ORDER0: tl.constexpr, PADDING: tl.constexpr, CHECK: tl.constexpr):
    """Copy the (BR, BC) block at (row0, col0) of a (rows, cols) view into a dense block."""
    src = tl.make_block_ptr(x_ptr, (rows, cols), (stride_r, stride_c), (row0, col0), (BR, BC), (ORDER0, 1 - ORDER0))
    tile = tl.load(src, boundary_check=CHECK, padding_option=PADDING)
    dst = tl.make_block_ptr(out_ptr, (BR, BC), (BC, 1), (0, 0), (BR, BC), (1, 0))
    tl.store(dst, tile)


@tlxc.jit
def bp_store_guarded(out_ptr, rows, cols, stride_r, value, BR: tl.constexpr, BC: tl.constexpr):
    """Fill the parent tensor's (rows, cols) with ``value`` + its flat index, block by block."""
    r0 = tl.program_id(0) * BR
    c0 = tl.program_id(1) * BC
    dst = tl.make_block_ptr(out_ptr, (rows, cols), (stride_r, 1), (r0, c0), (BR, BC), (1, 0))
    i = (r0 + tl.arange(0, BR))[:, None] * cols + (c0 + tl.arange(0, BC))[None, :]
    tl.store(dst, i.to(tl.float32) + value, boundary_check=(0, 1))


@tlxc.jit
def bp_row_sums_while(x_ptr, out_ptr, rows, cols, BR: tl.constexpr, BC: tl.constexpr):
    """Row sums with the block pointer carried by a while loop."""
    r0 = tl.program_id(0) * BR
    p = tl.make_block_ptr(x_ptr, (rows, cols), (cols, 1), (r0, 0), (BR, BC), (1, 0))
    acc = tl.zeros((BR,), dtype=tl.float32)
    c = 0
    while c < cols:
        acc += tl.sum(tl.load(p, boundary_check=(0, 1)), axis=1)
        p = tl.advance(p, (0, BC))
        c += BC
    out = tl.make_block_ptr(out_ptr, (rows,), (1,), (r0,), (BR,), (0,))
    tl.store(out, acc, boundary_check=(0,))


@tlxc.jit
def bp_3d_copy(x_ptr, out_ptr, d0, d1, d2, s0, s1, s2, B0: tl.constexpr, B1: tl.constexpr, B2: tl.constexpr):
    o0 = tl.program_id(0) * B0
    src = tl.make_block_ptr(x_ptr, (d0, d1, d2), (s0, s1, s2), (o0, 0, 0), (B0, B1, B2), (2, 1, 0))
    dst = tl.make_block_ptr(out_ptr, (d0, d1, d2), (d1 * d2, d2, 1), (o0, 0, 0), (B0, B1, B2), (2, 1, 0))
    tl.store(dst, tl.load(src, boundary_check=(0, 1, 2)) * 2.0, boundary_check=(0, 1, 2))


@tlxc.jit
def bp_branch(x_ptr, out_ptr, n, skip, B: tl.constexpr):
    """Advance the block pointer under a runtime condition (merged by scf.if)."""
    p = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (B,), (0,))
    if skip > 0:
        p = tl.advance(p, (skip,))
    q = tl.make_block_ptr(out_ptr, (B,), (1,), (0,), (B,), (0,))
    tl.store(q, tl.load(p, boundary_check=(0,), padding_option="nan"))


# -- interpreter vs torch -----------------------------------------------------------------
@pytest.mark.parametrize("M,N,K", [(37, 45, 50), (32, 64, 32)])
def test_matmul_with_advance_in_a_loop(M, N, K):
    gen = _generator()
    a = torch.randn(M, K, generator=gen).to(torch.float16)
    b = torch.randn(K, N, generator=gen).to(torch.float16)
    c = torch.full((M, N), float("nan"))
    meta = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16}
    interpret(bp_matmul, (_cdiv(M, 16), _cdiv(N, 32)),
              (a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride()), meta)
    ref = a.double() @ b.double()
    assert not c.isnan().any()
    assert (c.double() - ref).abs().max().item() < 1e-2 * max(1.0, ref.abs().max().item())


@pytest.mark.parametrize("padding", ["zero", "nan", ""])
def test_load_pads_outside_the_parent_tensor(padding):
    gen = _generator()
    rows, cols = 13, 21
    x = torch.randn(rows, cols, generator=gen)
    out = torch.full((16, 32), -7.0)
    row0, col0 = 5, 3          # the block runs past both edges
    interpret(bp_tile, (1,), (x, out, rows, cols, cols, 1, row0, col0),
              {"BR": 16, "BC": 32, "ORDER0": 1, "PADDING": padding, "CHECK": (0, 1)})
    fill = float("nan") if padding == "nan" else 0.0
    expected = torch.full((16, 32), fill)
    expected[:rows - row0, :cols - col0] = x[row0:, col0:]
    assert torch.equal(out.isnan(), expected.isnan())
    assert torch.equal(out.nan_to_num(123.0), expected.nan_to_num(123.0))


def test_boundary_check_on_one_dimension():
    """Only dim 1 is checked; dim 0 is in bounds, so only columns are padded."""
    gen = _generator()
    rows, cols = 40, 19
    x = torch.randn(rows, cols, generator=gen)
    out = torch.full((16, 32), -7.0)
    interpret(bp_tile, (1,), (x, out, rows, cols, cols, 1, 8, 0),
              {"BR": 16, "BC": 32, "ORDER0": 1, "PADDING": "nan", "CHECK": (1,)})
    expected = torch.full((16, 32), float("nan"))
    expected[:, :cols] = x[8:24]
    assert torch.equal(out.isnan(), expected.isnan())
    assert torch.equal(out.nan_to_num(0.5), expected.nan_to_num(0.5))


def test_transposed_strides_and_order():
    """A (rows, cols) view of a column-major matrix: strides (1, rows), order (0, 1)."""
    gen = _generator()
    rows, cols = 27, 11
    storage = torch.randn(cols, rows, generator=gen)      # x = storage.T
    out = torch.full((32, 16), float("nan"))
    interpret(bp_tile, (1,), (storage, out, rows, cols, 1, rows, 0, 0),
              {"BR": 32, "BC": 16, "ORDER0": 0, "PADDING": "zero", "CHECK": (0, 1)})
    expected = torch.zeros(32, 16)
    expected[:rows, :cols] = storage.T
    assert torch.equal(out, expected)


def test_store_with_boundary_check_writes_only_inside():
    rows, cols, stride = 19, 23, 40          # the parent tensor is a window of a wider buffer
    buf = torch.full((24, stride), float("nan"))
    interpret(bp_store_guarded, (_cdiv(rows, 8), _cdiv(cols, 16)), (buf, rows, cols, stride, 0.5),
              {"BR": 8, "BC": 16})
    expected = torch.full((24, stride), float("nan"))
    expected[:rows, :cols] = torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols) + 0.5
    assert torch.equal(buf.isnan(), expected.isnan())
    assert torch.equal(buf.nan_to_num(0.0), expected.nan_to_num(0.0))


def test_block_pointer_carried_by_a_while_loop():
    gen = _generator()
    rows, cols = 21, 70
    x = torch.randn(rows, cols, generator=gen)
    out = torch.full((rows,), float("nan"))
    interpret(bp_row_sums_while, (_cdiv(rows, 8),), (x, out, rows, cols), {"BR": 8, "BC": 32})
    assert torch.allclose(out.double(), x.double().sum(1), atol=1e-4)


@pytest.mark.parametrize("skip", [0, 5])
def test_block_pointer_advanced_under_a_runtime_if(skip):
    gen = _generator()
    x = torch.randn(20, generator=gen)
    out = torch.full((16,), -7.0)
    interpret(bp_branch, (1,), (x, out, 20, skip), {"B": 16})
    expected = torch.full((16,), float("nan"))
    expected[:20 - skip] = x[skip:skip + 16]
    assert torch.equal(out.nan_to_num(0.25), expected.nan_to_num(0.25))


def test_three_dimensional_block_with_strided_source():
    gen = _generator()
    d0, d1, d2 = 5, 3, 6
    x = torch.randn(d2, d1, d0, generator=gen).permute(2, 1, 0)     # non-contiguous (d0, d1, d2)
    out = torch.full((d0, d1, d2), float("nan"))
    interpret(bp_3d_copy, (_cdiv(d0, 2),), (x, out, d0, d1, d2, *x.stride()), {"B0": 2, "B1": 4, "B2": 8})
    assert torch.equal(out, x * 2.0)


# -- what the loop carries, sm_90a compiles -------------------------------------------------------------
_MATMUL_SIGNATURE = ("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32,M=i32,N=i32,K=i32:16,stride_am=i32:16,stride_ak=i32:1,"
                     "stride_bk=i32:16,stride_bn=i32:1,stride_cm=i32:16,stride_cn=i32:1")


def test_the_loop_carries_only_the_offsets_that_advance():
    kernel = bp_matmul.compile(signature=_MATMUL_SIGNATURE, constexprs={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32},
                               arch="sm_90a")
    loop = next(line for line in kernel.asm["ir"].splitlines() if "scf.for" in line)
    results = loop.split(" = scf.for")[0].strip()
    assert results.split(", ") == ["%acc_1", "%a_block_ptr_offset1", "%b_block_ptr_offset0"], loop


def test_matmul_compiles_for_sm90a_with_vector_loads():
    kernel = bp_matmul.compile(signature=_MATMUL_SIGNATURE, constexprs={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32},
                               arch="sm_90a")
    assert kernel.asm["cubin"]
    # K is a multiple of 16 and the rows are 16-byte aligned: the guarded f16 loads use 8-wide vectors
    assert "i += 8)" in kernel.asm["cuda"]


def test_other_kernels_compile_for_sm90a():
    for kernel, signature, constexprs in [
        (bp_tile, "x_ptr=*bf16,out_ptr=*bf16,rows=i32,cols=i32,stride_r=i32,stride_c=i32:1,row0=i32,col0=i32",
         {"BR": 64, "BC": 64, "ORDER0": 1, "PADDING": "nan", "CHECK": (0, 1)}),
        (bp_row_sums_while, "x_ptr=*fp32,out_ptr=*fp32,rows=i32,cols=i32", {"BR": 32, "BC": 64}),
        (bp_3d_copy, "x_ptr=*fp32,out_ptr=*fp32,d0=i32,d1=i32,d2=i32,s0=i32,s1=i32,s2=i32",
         {"B0": 2, "B1": 4, "B2": 8}),
    ]:
        assert kernel.compile(signature=signature, constexprs=constexprs, arch="sm_90a").asm["cubin"]


# -- errors ---------------------------------------------------------------------------------------------
def _compile_error(body: str, *, params: str = "x_ptr, n") -> CompilationError:
    """Compile a one-off kernel whose body is ``body`` and return its error."""
    import importlib.util
    import tempfile
    import textwrap
    source = (f"import tlxc\nimport tlxc.language as tl\n\n\n@tlxc.jit\ndef k({params}):\n"
              + textwrap.indent(textwrap.dedent(body), "    "))
    path = os.path.join(tempfile.mkdtemp(), "bp_errors.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("bp_errors", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(CompilationError) as info:
        module.k.compile(signature="x_ptr=*fp32,n=i32", arch="sm_90a")
    return info.value


P = "p = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0), (16, 16), (1, 0))\n"


@pytest.mark.parametrize("body,message,line_text", [
    ("p = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0,), (16, 16), (1, 0))\n",
     "'offsets' has 1 element but the block has rank 2", "(0,)"),
    ("p = tl.make_block_ptr(x_ptr, (n,), (n, 1), (0, 0), (16, 16), (1, 0))\n",
     "'shape' has 1 element but the block has rank 2", "(n,)"),
    ("p = tl.make_block_ptr(n, (n, n), (n, 1), (0, 0), (16, 16), (1, 0))\n",
     "'base' must be a scalar pointer", "n"),
    ("p = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0), (16, 16), (1, 1))\n",
     "'order' must be a permutation of [0, 1]", "(1, 1)"),
    ("p = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0), (16, n), (1, 0))\n",
     "'block_shape' must hold compile-time", "(16, n)"),
    ("p = tl.make_block_ptr(x_ptr, (n, n), (n, 1.5), (0, 0), (16, 16), (1, 0))\n",
     "'strides' must hold integers, but element 1 is float 1.5", "(n, 1.5)"),
    ("p = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, n.to(tl.int64)), (16, 16), (1, 0))\n",
     "block pointer offsets are 32-bit", "(0, n.to(tl.int64))"),
    (P + "t = tl.load(p, boundary_check=(0, 2))\n", "'boundary_check' dimension 2 is out of range", "(0, 2)"),
    (P + "t = tl.load(p, boundary_check=(1, 1))\n", "names a dimension twice", "(1, 1)"),
    (P + "t = tl.load(p, mask=n > 0)\n", "'mask' cannot be given with a block pointer", "n > 0"),
    (P + "t = tl.load(p, padding_option='inf')\n", "'padding_option' must be '', 'zero' or 'nan'", "'inf'"),
    (P + "tl.store(p, tl.zeros((16, 8), dtype=tl.float32))\n", "'value' has shape [16, 8] but the block",
     "tl.zeros((16, 8), dtype=tl.float32)"),
    (P + "tl.store(p, tl.zeros((16, 16), dtype=tl.float16))\n", "convert it with .to(tl.float32)",
     "tl.zeros((16, 16), dtype=tl.float16)"),
    (P + "p = tl.advance(p, (16,))\n", "'offsets' has 1 element but the block has rank 2", "(16,)"),
    ("p = tl.advance(x_ptr, (16, 0))\n", "'base' must be a block pointer (from tl.make_block_ptr)", "x_ptr"),
    ("t = tl.load(x_ptr, boundary_check=(0,))\n", "'boundary_check' applies only to block pointers", "(0,)"),
    ("tl.store(x_ptr, 1.0, boundary_check=(0,))\n", "'boundary_check' applies only to block pointers", "(0,)"),
    (P + "q = p.advence((0, 16))\n", "a block pointer has no attribute 'advence'; did you mean 'advance'?",
     "p.advence"),
    (P + "for i in range(n):\n    p = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0), (16, 32), (1, 0))\n",
     "loop-carried block pointer 'p'", "p = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0), (16, 32), (1, 0))"),
    (P + "for i in range(n):\n    p = tl.make_block_ptr(x_ptr, (n, n), (n, 2), (0, 0), (16, 16), (1, 0))\n",
     "has the compile-time stride1 1 before the loop", "p = tl.make_block_ptr(x_ptr, (n, n), (n, 2)"),
])
def test_errors_are_located(body, message, line_text):
    err = _compile_error(body)
    assert message in str(err), str(err)
    assert err.loc is not None and err.loc.file.endswith("bp_errors.py"), str(err)
    import linecache
    line = linecache.getline(err.loc.file, err.loc.line)
    assert line_text in line[err.loc.col:], (str(err), line)


def test_nan_padding_of_an_integer_block_is_an_error():
    import importlib.util
    import tempfile
    source = ("import tlxc\nimport tlxc.language as tl\n\n\n@tlxc.jit\ndef k(x_ptr, n):\n"
              "    p = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (16,), (0,))\n"
              "    t = tl.load(p, boundary_check=(0,), padding_option='nan')\n")
    path = os.path.join(tempfile.mkdtemp(), "bp_int.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("bp_int", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(CompilationError, match="padding_option='nan' needs a floating-point block") as info:
        module.k.compile(signature="x_ptr=*i32,n=i32", arch="sm_90a")
    assert info.value.loc.line == 8


# -- on the GPU -----------------------------------------------------------------------------------------
def _rel_error(out, ref) -> float:
    return ((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K", [(512, 512, 512), (300, 200, 152), (1000, 257, 96)])
def test_gpu_matmul_matches_torch(M, N, K):
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda")
    bm, bn, bk = 64, 64, 32
    bp_matmul[(_cdiv(M, bm), _cdiv(N, bn))](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                                             BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    torch.cuda.synchronize()
    assert _rel_error(c, a.double() @ b.double()) < 2e-3


@pytest.mark.gpu
@pytest.mark.parametrize("padding", ["zero", "nan"])
def test_gpu_padding_and_transposed_view(padding):
    rows, cols = 27, 45
    storage = torch.randn(cols, rows, device="cuda")
    out = torch.full((32, 64), -7.0, device="cuda")
    bp_tile[(1,)](storage, out, rows, cols, 1, rows, 0, 0, BR=32, BC=64, ORDER0=0, PADDING=padding, CHECK=(0, 1))
    torch.cuda.synchronize()
    expected = torch.full((32, 64), float("nan") if padding == "nan" else 0.0, device="cuda")
    expected[:rows, :cols] = storage.T
    assert torch.equal(out.isnan(), expected.isnan())
    assert torch.equal(out.nan_to_num(1.5), expected.nan_to_num(1.5))


@pytest.mark.gpu
def test_gpu_guarded_store_and_while_loop():
    rows, cols, stride = 77, 91, 128
    buf = torch.full((80, stride), float("nan"), device="cuda")
    bp_store_guarded[(_cdiv(rows, 32), _cdiv(cols, 64))](buf, rows, cols, stride, 0.25, BR=32, BC=64)
    x = torch.randn(rows, 300, device="cuda")
    sums = torch.full((rows,), float("nan"), device="cuda")
    bp_row_sums_while[(_cdiv(rows, 32),)](x, sums, rows, 300, BR=32, BC=64)
    torch.cuda.synchronize()
    expected = torch.full((80, stride), float("nan"), device="cuda")
    expected[:rows, :cols] = torch.arange(rows * cols, device="cuda", dtype=torch.float32).reshape(rows, cols) + 0.25
    assert torch.equal(buf.isnan(), expected.isnan())
    assert torch.equal(buf.nan_to_num(0.0), expected.nan_to_num(0.0))
    assert _rel_error(sums, x.double().sum(1)) < 1e-5


@tlxc.jit
def _block_ptr_dtype_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    px = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    py = tl.make_block_ptr(y_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    x = tl.load(px, boundary_check=(0,)).to(tl.float32)
    tl.static_assert(py.dtype.element_ty == tl.float16 and py.type.element_ty == tl.float16)
    tl.store(py, (x * 2).to(py.dtype.element_ty), boundary_check=(0,))


def test_block_pointer_dtype_gives_the_element_type():
    """``p.dtype.element_ty`` of a block pointer is what it stores, as in Triton
    (flash-linear-attention stores every result with ``b.to(p.dtype.element_ty)``)."""
    x = torch.arange(5, dtype=torch.float16)
    y = torch.zeros(5, dtype=torch.float16)
    interpret(_block_ptr_dtype_kernel, (1,), (x, y, 5), {"BLOCK": 8})
    assert torch.equal(y, x * 2)


@tlxc.jit
def _block_ptr_isinstance_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    p = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
    tl.store(out_ptr, isinstance(p, tl.tensor) + 2 * isinstance(p, tl.constexpr))


def test_block_pointer_is_a_tl_tensor_for_isinstance():
    out = torch.zeros(1, dtype=torch.int32)
    interpret(_block_ptr_isinstance_kernel, (1,), (torch.zeros(4), out, 4), {"BLOCK": 4})
    assert out.item() == 1
