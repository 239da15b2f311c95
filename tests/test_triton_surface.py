"""Pieces of Triton's language surface that ported kernels use: calling a dtype as a
conversion, ``tl.zeros_like``/``tl.full_like``, rank broadcasting, ``tl.range``'s keyword
arguments (``loop_unroll_factor`` → ``#pragma unroll``), and what porting Liger, unsloth,
FlagGems, vLLM, mamba and flash-linear-attention kernels needed (session 27): early returns in
nested ifs, empty-shape ``tl.full``, ``tl.tensor`` / ``isinstance`` / ``.value``, Triton's dtype
queries, ``and``/``or`` on blocks, the standard helpers (``tl.cat``, ``tl.gather``, ``tl.topk``...),
``tl.target_info``.  Interpreter runs against torch, sm_90a compiles without a GPU, located errors."""
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


# -- calling a dtype ------------------------------------------------------------------------

@tlxc.jit
def dtype_call_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    count = tl.float32(n)                        # an int scalar argument, as a float
    truncated = tl.int32(x)                      # a tensor: x.to(tl.int32)
    half = tl.float16(0.5)                       # a number: an f16 scalar
    mean = tl.sum(x, axis=0) / count
    tl.store(out_ptr + offs, (truncated.to(tl.float32) + mean) * half, mask=offs < n)


def test_calling_a_dtype_converts(gen):
    n = 50
    x = torch.randn(n, generator=gen) * 10
    out = torch.full((64,), float("nan"))
    interpret(dtype_call_kernel, (1,), (x, out, n), {"BLOCK": 64})
    ref = (x.to(torch.int32).double() + x.double().sum() / n) * 0.5
    torch.testing.assert_close(out[:n].double(), ref, rtol=1e-6, atol=1e-5)
    assert out[n:].isnan().all()


def test_calling_a_dtype_types_the_ir():
    text = dtype_call_kernel.compile("x_ptr=*fp32, out_ptr=*fp32, n=i32", {"BLOCK": 64},
                                     stages=("ir",)).asm["ir"]
    assert "arith.sitofp" in text or "tl.cast" in text or "arith.cast" in text
    assert "f16" in text


@tlxc.jit
def dtype_call_bad_kernel(x_ptr):
    tl.float32(x_ptr)


def test_calling_a_dtype_on_a_pointer_is_a_located_error():
    with pytest.raises(CompilationError) as info:
        dtype_call_bad_kernel.compile("x_ptr=*fp32", stages=("ir",))
    line = dtype_call_bad_kernel.fn.__code__.co_firstlineno + 2
    assert f"{HERE}:{line}:" in str(info.value) and "use .to(f32)" in str(info.value)


# -- zeros_like / full_like -----------------------------------------------------------------

@tlxc.jit
def like_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    zeros = tl.zeros_like(x)
    sevens = tl.full_like(x, 7)
    halves = tl.full_like(x, 0.5, dtype=tl.float64)
    tl.static_assert(zeros.dtype == x.dtype and halves.dtype == tl.float64)
    tl.store(out_ptr + offs, tl.where(x > 0, sevens, zeros) + halves.to(tl.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_zeros_like_and_full_like(dtype, gen):
    x = (torch.randn(128, generator=gen) * 4).to(dtype)
    out = torch.full((128,), float("nan"))
    interpret(like_kernel, (1,), (x, out), {"BLOCK": 128})
    assert torch.equal(out, torch.where(x > 0, 7.0, 0.0) + 0.5)


# -- rank broadcasting ------------------------------------------------------------------------

@tlxc.jit
def row_scale_kernel(x_ptr, w_ptr, out_ptr, n_rows, M: tl.constexpr, N: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)
    mask = (rows < n_rows) & (cols < N)[None, :]
    x = tl.load(x_ptr + rows * N + cols[None, :], mask=mask, other=0.0)    # [M, N]
    w = tl.load(w_ptr + cols)                                              # [N]
    tl.store(out_ptr + rows * N + cols[None, :], x * w + cols, mask=mask)   # [M, N] * [N] + [N]


def test_lower_rank_operands_gain_leading_dimensions(gen):
    m, n, rows = 32, 64, 27
    x, w = torch.randn(rows, n, generator=gen), torch.randn(n, generator=gen)
    out = torch.full((rows, n), float("nan"))
    interpret(row_scale_kernel, (1,), (x, w, out, rows), {"M": m, "N": n})
    assert torch.equal(out, x * w + torch.arange(n))


def test_rank_broadcasting_compiles_for_sm90a():
    compiled = row_scale_kernel.compile("x_ptr=*fp32, w_ptr=*fp32, out_ptr=*fp32, n_rows=i32",
                                        {"M": 32, "N": 64}, arch="sm_90a", stages=("cuda", "cubin"))
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


@tlxc.jit
def rank_mismatch_kernel(x_ptr, M: tl.constexpr, N: tl.constexpr):
    a = tl.zeros((M, N), dtype=tl.float32)
    b = tl.zeros((M,), dtype=tl.float32)
    tl.store(x_ptr + tl.arange(0, N), tl.sum(a * b, axis=0))


def test_trailing_dimensions_must_still_agree():
    with pytest.raises(CompilationError) as info:
        rank_mismatch_kernel.compile("x_ptr=*fp32", {"M": 32, "N": 64}, stages=("ir",))
    assert "cannot broadcast [32, 64] and [32]" in str(info.value) and HERE in str(info.value)


# -- tl.range's keyword arguments -------------------------------------------------------------

@tlxc.jit
def range_kernel(x_ptr, out_ptr, n_tiles, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for t in tl.range(0, n_tiles, num_stages=3, loop_unroll_factor=UNROLL, warp_specialize=False,
                      disallow_acc_multi_buffer=True, flatten=False):
        acc += tl.load(x_ptr + t * BLOCK + offs)
    tl.store(out_ptr + offs, acc)


def test_range_hints_run(gen):
    x = torch.randn(5, 64, generator=gen)
    out = torch.full((64,), float("nan"))
    interpret(range_kernel, (1,), (x, out, 5), {"BLOCK": 64, "UNROLL": 2})
    torch.testing.assert_close(out, x.sum(0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("unroll", [1, 4])
def test_loop_unroll_factor_is_a_pragma(unroll):
    compiled = range_kernel.compile("x_ptr=*fp32, out_ptr=*fp32, n_tiles=i32", {"BLOCK": 64, "UNROLL": unroll},
                                    arch="sm_90a", stages=("ir", "cuda", "cubin"))
    assert f"unroll = {unroll}" in compiled.asm["ir"] and "num_stages = 3" in compiled.asm["ir"]
    cuda = compiled.asm["cuda"]
    loop = cuda.index("for (int t")          # t, or t_N when the prefetch's temporaries took "t"
    assert cuda[:loop].rstrip().endswith(f"#pragma unroll {unroll}")


@tlxc.jit
def bad_range_kernel(out_ptr, n, WHAT: tl.constexpr, VALUE: tl.constexpr):
    acc = 0
    if WHAT == "loop_unroll_factor":
        for i in tl.range(0, n, loop_unroll_factor=VALUE):
            acc += i
    elif WHAT == "num_stages":
        for i in tl.range(0, n, num_stages=VALUE):
            acc += i
    else:
        for i in tl.range(0, n, warp_specialize=VALUE):
            acc += i
    tl.store(out_ptr, acc)


@pytest.mark.parametrize("what, value, expected", [
    ("loop_unroll_factor", 0, "loop_unroll_factor must be a compile-time integer >= 1, got int 0"),
    ("loop_unroll_factor", "2", "loop_unroll_factor must be a compile-time integer >= 1"),
    ("num_stages", -1, "num_stages must be a compile-time integer >= 0, got int -1"),
    ("warp_specialize", 1, "warp_specialize must be a compile-time bool"),
])
def test_bad_range_hints_are_located_errors(what, value, expected):
    with pytest.raises(CompilationError) as info:
        bad_range_kernel.compile("out_ptr=*i32, n=i32", {"WHAT": what, "VALUE": value}, stages=("ir",))
    assert expected in str(info.value) and HERE in str(info.value)


@tlxc.jit
def scalar_hints(x_ptr, out_ptr, start, BLOCK: tl.constexpr):
    """tl.multiple_of / tl.max_contiguous on a scalar, as tutorial 06's TMA kernel writes them."""
    start = tl.multiple_of(start, 16)
    offs = start + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1.0)


def test_hints_on_scalars_compile_and_run():
    compiled = scalar_hints.compile(signature="x_ptr=*fp32,out_ptr=*fp32,start=i32", constexprs={"BLOCK": 64},
                                    arch="sm_90a")
    assert compiled.asm["cubin"]
    x = torch.randn(128)
    out = torch.full((128,), float("nan"))
    tlxc.interpret(scalar_hints)[(1,)](x, out, 32, BLOCK=64)
    assert torch.equal(out[32:96], x[32:96] + 1.0) and out[:32].isnan().all() and out[96:].isnan().all()


# -- early returns inside nested ifs ------------------------------------------------------------

@tlxc.jit
def _sign_class(v, strict: tl.constexpr):
    """-2 below -10, -1 below 0, 0 at 0 (1 if not strict), else 1: returns at three depths."""
    if v <= 0:
        if v < 0:
            if v < -10:
                return -2
            return -1
        if strict:
            return 0
    return 1


@tlxc.jit
def nested_return_kernel(x_ptr, flag_ptr, out_ptr, n, HAS_FLAG: tl.constexpr, STRICT: tl.constexpr,
                         BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if HAS_FLAG:                                 # a compile-time if around a runtime one that returns
        if tl.load(flag_ptr + pid) == 0:
            tl.store(out_ptr + pid, -100)
            return
    v = tl.load(x_ptr + pid)
    tl.store(out_ptr + pid, _sign_class(v, STRICT))


@pytest.mark.parametrize("has_flag", [False, True])
@pytest.mark.parametrize("strict", [False, True])
def test_early_returns_inside_nested_ifs(has_flag, strict, gen):
    """A ``return`` inside an ``if`` nested in another (compile-time or runtime) ``if``, with code
    after the outer one: that code runs on exactly the paths that did not return (Triton allows
    early returns anywhere outside loops; Liger's jsd/tvd kernels rely on it)."""
    x = torch.tensor([-20, -3, 0, 5, -11, 0, 7, 1], dtype=torch.int32)
    flags = torch.randint(0, 2, (8,), generator=gen, dtype=torch.int32)
    out = torch.full((8,), 99, dtype=torch.int32)
    interpret(nested_return_kernel, (8,), (x, flags, out, 8), {"HAS_FLAG": has_flag, "STRICT": strict, "BLOCK": 8})
    expect = torch.tensor([-2 if v < -10 else -1 if v < 0 else (0 if strict else 1) if v == 0 else 1
                           for v in x.tolist()], dtype=torch.int32)
    if has_flag:
        expect = torch.where(flags == 0, torch.full_like(expect, -100), expect)
    assert torch.equal(out, expect), (out, expect)


# -- empty shapes are scalars ---------------------------------------------------------------------

@tlxc.jit
def empty_shape_kernel(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    acc = tl.zeros((), dtype=tl.float32)         # a scalar accumulator, as tl.zeros(()) is in Triton
    for i in range(0, n, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        acc += tl.sum(x * x, axis=0)
    eps_f32 = tl.full((), eps, tl.float32)       # a scalar: mixes with the scalar mean
    tl.store(out_ptr, 1.0 / tl.sqrt(acc / n + eps_f32))
    tl.store(out_ptr + 1, tl.full((), 7, tl.int32).to(tl.float32) + tl.zeros_like(acc))


def test_empty_shape_full_and_zeros_are_scalars(gen):
    """``tl.full((), v, dtype)`` and ``tl.zeros(())`` give scalars, as Triton's do: one mixes with
    scalars in arithmetic and a loop carries one (unsloth's rms_layernorm, Liger's sparsemax
    backward); a 0-d block reached the IR verifier before."""
    n = 77
    x = torch.randn(n, generator=gen)
    out = torch.full((2,), float("nan"))
    interpret(empty_shape_kernel, (1,), (x, out, n, 1e-5), {"BLOCK": 16})
    ref = 1.0 / torch.sqrt(x.double().pow(2).mean() + 1e-5)
    torch.testing.assert_close(out[0].double(), ref, rtol=1e-5, atol=0)
    assert out[1].item() == 7.0
    assert "tensor<f32>" not in empty_shape_kernel.compile("x_ptr=*fp32, out_ptr=*fp32, n=i32, eps=fp32",
                                                           {"BLOCK": 16}, stages=("ir",)).asm["ir"]


# -- tl.tensor, isinstance, constexpr .value ----------------------------------------------------------

@tlxc.jit
def _lowest(dtype):
    dtype_ = dtype.value                         # Triton's constexpr wrapper; tlxc's value itself
    if dtype_.is_floating():
        return float("-inf")
    return -(2 ** (dtype_.int_bitwidth - 1))


@tlxc.jit
def _double_or_shift(x, k) -> tl.tensor:
    if isinstance(x, tl.tensor) and isinstance(k, tl.constexpr):
        return x * 2 + k
    return x + 1000


@tlxc.jit
def surface_kernel(x_ptr, i_ptr, out_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=_lowest(x_ptr.dtype.element_ty))
    i = tl.load(i_ptr + offs, mask=offs < n, other=_lowest(i_ptr.dtype.element_ty))
    tl.store(out_ptr, tl.max(x, axis=0))
    tl.store(out_ptr + 1, tl.max(i, axis=0).to(tl.float32))
    tl.store(out_ptr + 2, _double_or_shift(tl.max(x, axis=0), K))     # runtime x, constexpr K
    tl.store(out_ptr + 3, _double_or_shift(K, n) * 1.0)               # constexpr x: the other path
    tl.store(out_ptr + 4, isinstance(n, tl.tensor) + 10 * isinstance(K, int) + 100 * isinstance(K, tl.tensor))


def test_tl_tensor_isinstance_and_constexpr_value():
    """``tl.tensor`` exists (FlagGems annotates helpers ``-> tl.tensor``) and ``isinstance`` sees
    runtime values as ``tl.tensor``, compile-time ones as ``tl.constexpr``; ``.value`` of a
    compile-time value is the value (FlagGems' ``dtype.value`` in get_dtype_min), so dtype
    methods work on it."""
    x = -torch.arange(1, 11, dtype=torch.float32)
    i = -torch.arange(3, 13, dtype=torch.int32)
    out = torch.full((5,), float("nan"))
    interpret(surface_kernel, (1,), (x, i, out, 10), {"K": 3, "BLOCK": 16})
    assert out.tolist() == [-1.0, -3.0, 1.0, 1003.0, 11.0]
    assert not isinstance(3, tl.tensor)
    with pytest.raises(TypeError, match="tl.tensor"):
        tl.tensor(3)


# -- Triton's dtype queries -------------------------------------------------------------------------

@tlxc.jit
def dtype_query_kernel(x_ptr, out_ptr):
    d = x_ptr.dtype.element_ty
    bits = 0
    if d.is_int():
        bits = d.int_bitwidth
    else:
        bits = d.fp_mantissa_width
    tl.store(out_ptr, d.is_fp8() + 2 * d.is_fp16() + 4 * d.is_bf16() + 8 * d.is_fp32() + 16 * d.is_int32()
             + 32 * d.is_uint8() + 64 * d.is_bool() + 128 * d.is_standard_floating() + 256 * x_ptr.dtype.is_ptr())
    tl.store(out_ptr + 1, bits)
    if d.is_int():
        tl.store(out_ptr + 2, d.get_int_max_value() // 2 ** (d.int_bitwidth - 8))
    else:
        tl.store(out_ptr + 2, d.exponent_bias)


@pytest.mark.parametrize("dtype,flags,bits,third", [
    (torch.float32, 8 + 128 + 256, 23, 127), (torch.float16, 2 + 128 + 256, 10, 15),
    (torch.bfloat16, 4 + 128 + 256, 7, 127), (torch.int32, 16 + 256, 32, 127), (torch.uint8, 32 + 256, 8, 255),
    (torch.float8_e4m3fn, 1 + 256, 3, 7)])
def test_triton_dtype_queries(dtype, flags, bits, third):
    """Triton's dtype methods and attributes on ``x.dtype`` in a kernel, with Triton's names:
    ``is_fp16()``, ``is_int()``, ``int_bitwidth``, ``fp_mantissa_width``, ``exponent_bias``,
    ``get_int_max_value()``, ``is_ptr()`` (``is_int()`` and ``is_fp8()`` were properties that
    a call failed on)."""
    x = torch.zeros(4, dtype=dtype)
    out = torch.zeros(3, dtype=torch.int32)
    interpret(dtype_query_kernel, (1,), (x, out), {})
    assert out.tolist() == [flags, bits, third]


@tlxc.jit
def float_int_bitwidth_kernel(x_ptr):
    tl.static_print(x_ptr.dtype.element_ty.int_bitwidth)


def test_int_bitwidth_of_a_float_is_a_located_error():
    with pytest.raises(CompilationError, match=r"the dtype f32 has no attribute 'int_bitwidth' \(an integer type's\)"):
        float_int_bitwidth_kernel.compile("x_ptr=*fp32", {}, stages=("ir",))


# -- and / or on tensors ----------------------------------------------------------------------------

@tlxc.jit
def bool_op_kernel(x_ptr, out_ptr, M, N, lo, BM: tl.constexpr, BN: tl.constexpr):
    m = tl.arange(0, BM)
    n = tl.arange(0, BN)
    mask = m[:, None] < M and n[None, :] < N                 # a block mask, as FlagGems writes it
    x = tl.load(x_ptr + m[:, None] * N + n[None, :], mask=mask, other=0.0)
    keep = x > lo or x < -lo                                 # or on blocks
    weird = (x != 0.0) and lo                                # a runtime scalar broadcast into the block
    tl.store(out_ptr + m[:, None] * N + n[None, :], keep.to(tl.float32) + 2.0 * weird.to(tl.float32),
             mask=mask)


def test_and_or_on_tensors_are_elementwise(gen):
    """``and`` / ``or`` on blocks are Triton's ``logical_and`` / ``logical_or``: elementwise on the
    operands as booleans, broadcast (FlagGems' argmax: ``mask = m[:, None] < M and n[None, :] < N``);
    tlxc refused them as ambiguous before."""
    M, N = 5, 7
    x = torch.randn(M, N, generator=gen)
    x[0, 0] = 0.0
    out = torch.full((M, N), float("nan"))
    interpret(bool_op_kernel, (1,), (x, out, M, N, 0.5), {"BM": 8, "BN": 8})
    ref = ((x > 0.5) | (x < -0.5)).float() + 2.0 * (x != 0).float()
    assert torch.equal(out, ref)


# -- Triton's standard helpers and top-level names ----------------------------------------------------

@tlxc.jit
def standard_kernel(x_ptr, y_ptr, bits_ptr, out_ptr, n, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    tl.assume(n > 0)
    x = tl.load(x_ptr + r)
    y = tl.load(y_ptr + r)
    two = tl.arange(0, 2 * BLOCK)
    tl.store(out_ptr + two, tl.interleave(x, y))                                    # [x0, y0, x1, y1, ...]
    tl.store(out_ptr + 2 * BLOCK + two, tl.cat(x, y, can_reorder=True))           # x then y
    grid = tl.load(x_ptr + r[:, None] * 0 + r[None, :])                             # [BLOCK, BLOCK]
    flat = tl.ravel(grid)
    tl.store(out_ptr + 4 * BLOCK + tl.arange(0, BLOCK * BLOCK), flat)
    sm = tl.softmax(x)
    tl.store(out_ptr + 4 * BLOCK + BLOCK * BLOCK + r, sm)
    bits = tl.load(bits_ptr + r)
    tl.store(out_ptr + 5 * BLOCK + BLOCK * BLOCK, tl.reduce_or(bits, 0).to(tl.float32))
    tl.store(out_ptr + 5 * BLOCK + BLOCK * BLOCK + 1, tl.fdiv(tl.sum(x, 0), 3.0) + tl.div_rn(1.0, 4.0)
             + tl.sqrt_rn(16.0) + (tl.TRITON_MAX_TENSOR_NUMEL == 1048576))


def test_triton_standard_helpers(gen):
    """``tl.interleave``, ``tl.cat``, ``tl.ravel``, ``tl.softmax``, ``tl.reduce_or``, ``tl.assume``,
    the top-level ``tl.fdiv`` / ``tl.div_rn`` / ``tl.sqrt_rn`` and ``tl.TRITON_MAX_TENSOR_NUMEL``,
    with Triton's names and signatures."""
    B = 8
    x, y = torch.randn(B, generator=gen), torch.randn(B, generator=gen)
    bits = torch.tensor([1, 4, 0, 16, 4, 1, 64, 0], dtype=torch.int32)
    out = torch.full((5 * B + B * B + 2,), float("nan"))
    interpret(standard_kernel, (1,), (x, y, bits, out, B), {"BLOCK": B})
    assert torch.equal(out[:2 * B], torch.stack([x, y], 1).reshape(-1))
    assert torch.equal(out[2 * B:4 * B], torch.cat([x, y]))
    assert torch.equal(out[4 * B:4 * B + B * B], x.repeat(B))
    torch.testing.assert_close(out[4 * B + B * B:5 * B + B * B], torch.softmax(x, 0), rtol=1e-5, atol=1e-6)
    assert out[5 * B + B * B].item() == 1 | 4 | 16 | 64
    torch.testing.assert_close(out[-1], x.sum() / 3 + 0.25 + 4.0 + 1.0, rtol=1e-5, atol=1e-5)


@tlxc.jit
def swizzle_kernel(out_ptr, SIZE_I: tl.constexpr, SIZE_J: tl.constexpr, G: tl.constexpr):
    i = tl.program_id(0)
    j = tl.program_id(1)
    new_i, new_j = tl.swizzle2d(i, j, SIZE_I, SIZE_J, G)
    tl.store(out_ptr + (i * SIZE_J + j) * 2, new_i)
    tl.store(out_ptr + (i * SIZE_J + j) * 2 + 1, new_j)


def test_swizzle2d_is_a_permutation_in_groups_of_rows():
    """``tl.swizzle2d``: program (i, j) of a 7 x 5 grid renumbered to walk groups of 3 rows column
    by column (the last group has 1 row): a permutation of the grid, group by group."""
    I, J, G = 7, 5, 3
    out = torch.full((I * J * 2,), -1, dtype=torch.int32)
    interpret(swizzle_kernel, (I, J), (out,), {"SIZE_I": I, "SIZE_J": J, "G": G})
    got = [tuple(p) for p in out.view(I * J, 2).tolist()]
    expect = []
    for first in range(0, I, G):
        rows = min(G, I - first)
        expect += [(first + k % rows, k // rows) for k in range(rows * J)]
    assert got == expect


@tlxc.jit
def cat_without_reorder_kernel(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.store(x_ptr + tl.arange(0, 8), tl.cat(x, x))


def test_cat_needs_can_reorder_as_in_triton():
    with pytest.raises(CompilationError, match="pass can_reorder=True"):
        cat_without_reorder_kernel.compile("x_ptr=*fp32", {}, stages=("ir",))


@tlxc.jit
def gather_histogram_kernel(src_ptr, idx_ptr, src2_ptr, idx2_ptr, out_ptr, hist_ptr, n,
                            N: tl.constexpr, M: tl.constexpr, K: tl.constexpr, BINS: tl.constexpr):
    m = tl.arange(0, M)
    k = tl.arange(0, K)
    nn = tl.arange(0, N)
    src = tl.load(src_ptr + nn)
    idx = tl.load(idx_ptr + m)
    tl.store(out_ptr + m, tl.gather(src, idx, 0))                                    # rank 1
    src2 = tl.load(src2_ptr + nn[:, None] * K + k[None, :])                          # [N, K]
    idx2 = tl.load(idx2_ptr + m[:, None] * K + k[None, :])                           # [M, K]
    tl.store(out_ptr + M + m[:, None] * K + k[None, :], tl.gather(src2, idx2, 0))    # along rows
    idx3 = tl.load(idx2_ptr + k[:, None] * M + m[None, :])                           # [K, M] into [N, K]^T
    src3 = tl.trans(src2)                                                            # [K, N]
    tl.store(out_ptr + M + M * K + k[:, None] * M + m[None, :], tl.gather(src3, idx3, 1))
    tl.store(hist_ptr + tl.arange(0, BINS), tl.histogram(idx, BINS, mask=m < n))


def test_gather_and_histogram(gen):
    """``tl.gather`` (rank 1, rank 2 along either axis) and ``tl.histogram`` (masked; values past
    the bins not counted) against torch."""
    N, M, K, BINS = 16, 8, 4, 8
    src = torch.randn(N, generator=gen)
    idx = torch.randint(0, N, (M,), generator=gen, dtype=torch.int32)
    src2 = torch.randn(N, K, generator=gen)
    idx2 = torch.randint(0, N, (M, K), generator=gen, dtype=torch.int32)
    out = torch.full((M + 2 * M * K,), float("nan"))
    hist = torch.full((BINS,), -1, dtype=torch.int32)
    interpret(gather_histogram_kernel, (1,), (src, idx, src2, idx2, out, hist, 6),
              {"N": N, "M": M, "K": K, "BINS": BINS})
    assert torch.equal(out[:M], src[idx.long()])
    assert torch.equal(out[M:M + M * K].view(M, K), torch.gather(src2, 0, idx2.long()))
    idx3 = idx2.reshape(-1)[:K * M].view(K, M)
    assert torch.equal(out[M + M * K:].view(K, M), torch.gather(src2.t(), 1, idx3.long()))
    assert torch.equal(hist, torch.bincount(idx[:6].long()[idx[:6] < BINS], minlength=BINS)[:BINS].int())


def test_standard_helpers_compile_for_sm90():
    """The helpers' compositions (3-D selections included) build CUDA that ptxas takes, unspilled."""
    k = gather_histogram_kernel.compile("src_ptr=*fp32,idx_ptr=*i32,src2_ptr=*fp32,idx2_ptr=*i32,out_ptr=*fp32,"
                                        "hist_ptr=*i32,n=i32", {"N": 16, "M": 8, "K": 4, "BINS": 8}, arch="sm_90a")
    s = standard_kernel.compile("x_ptr=*fp32,y_ptr=*fp32,bits_ptr=*i32,out_ptr=*fp32,n=i32", {"BLOCK": 8},
                                arch="sm_90a")
    assert k.asm["cubin"] and s.asm["cubin"]
    assert k.metadata["spills_bytes"] == 0 and s.metadata["spills_bytes"] == 0


@tlxc.jit
def target_info_kernel(out_ptr):
    if tl.target_info.is_cuda() and tl.target_info.cuda_capability_geq(9, 0):
        code = 1
    else:
        code = 2
    tl.store(out_ptr, code + 10 * tl.target_info.is_hip() + 100 * tl.target_info.cuda_capability_geq(10))
    tl.static_assert(tl.target_info.current_target().warp_size == 32 or tl.target_info.is_hip())


def test_target_info_answers_for_the_compile_target():
    """``tl.target_info`` (Triton 3.4+): compile-time queries of the architecture being compiled for;
    the interpreter runs as sm_90a, and an sm_100a compile takes the other branch of a capability test."""
    out = torch.zeros(1, dtype=torch.int32)
    interpret(target_info_kernel, (1,), (out,), {})
    assert out.item() == 1
    ir_90 = target_info_kernel.compile("out_ptr=*i32", {}, arch="sm_90a", stages=("ir",)).asm["ir"]
    ir_100 = target_info_kernel.compile("out_ptr=*i32", {}, arch="sm_100a", stages=("ir",)).asm["ir"]
    assert "101" in ir_100 and "101" not in ir_90
    with pytest.raises(CompilationError, match="tl.target_info.is_cuda called outside a kernel"):
        tl.target_info.is_cuda()


@tlxc.jit
def fnuz_cast_kernel(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr).to(tl.float8e4b8).to(tl.float32))


def test_unsupported_triton_fp8_dtypes_exist_and_are_refused_by_name():
    """``tl.float8e4b8`` / ``float8e5b16`` / ``float8e4b15`` exist (a module that lists them in a table
    imports) and a kernel that uses one is an error naming it."""
    assert "fnuz" in repr(tl.float8e5b16) and "bias 15" in repr(tl.float8e4b15)
    with pytest.raises(CompilationError, match=r"tl.float8e4b8 \(fp8 e4m3 fnuz, not supported by tlxc\)"):
        fnuz_cast_kernel.compile("x_ptr=*fp32", {}, stages=("ir",))


@tlxc.jit
def topk_kernel(x_ptr, out_ptr, out2_ptr, out3_ptr, R: tl.constexpr, C: tl.constexpr, K: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    k = tl.arange(0, K)
    x = tl.load(x_ptr + r[:, None] * C + c[None, :])
    tl.store(out_ptr + r[:, None] * K + k[None, :], tl.topk(x, K))
    tl.store(out2_ptr + k, tl.topk(tl.load(x_ptr + c), K, dim=0))
    tl.store(out3_ptr + r[:, None] * K + k[None, :], tl.topk(x, k=K, descending=False))


def test_topk_gives_the_k_largest_largest_first(gen):
    R, C, K = 4, 16, 4
    x = torch.randn(R, C, generator=gen)
    out = torch.full((R, K), float("nan"))
    out2 = torch.full((K,), float("nan"))
    out3 = torch.full((R, K), float("nan"))
    interpret(topk_kernel, (1,), (x, out, out2, out3), {"R": R, "C": C, "K": K})
    assert torch.equal(out, torch.topk(x, K, dim=1).values)
    assert torch.equal(out2, torch.topk(x[0], K).values)
    assert torch.equal(out3, torch.topk(x, K, dim=1, largest=False).values)     # descending=False: smallest first


@tlxc.jit
def shape_arg_kernel(out_ptr, SHAPE):
    tl.store(out_ptr + tl.arange(0, SHAPE[0]), tl.full(SHAPE, 7, tl.int32))


def test_a_tuple_of_host_constexprs_is_a_tuple_of_ints():
    """``(tl.constexpr(16),)`` passed to a plain parameter (Triton's tests pass block shapes so)."""
    out = torch.zeros(16, dtype=torch.int32)
    interpret(shape_arg_kernel, (1,), (out, (tl.constexpr(16),)), {})
    assert torch.equal(out, torch.full((16,), 7, dtype=torch.int32))


# -- negative loop steps ----------------------------------------------------------------------------

@tlxc.jit
def negative_step_kernel(x_ptr, out_ptr, n, hi, lo, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    p = x_ptr + offs
    for k in range(n, 0, -BLOCK):                       # the mm templates' K loop: k = n, n - B, ... > 0
        acc += tl.load(p, mask=offs < k, other=0.0)
        p += BLOCK
    tl.store(out_ptr, tl.sum(acc, axis=0))
    running = 0.0
    for i in range(n - 1, -1, -1):                      # a reverse scan
        running += tl.load(x_ptr + i)
        tl.store(out_ptr + 1 + i, running)
    visits = 0
    last = -1000
    for j in tl.range(hi, lo, -3):                      # runtime bounds, a step that does not divide
        visits += 1
        last = j
    tl.store(out_ptr + 1 + n, visits.to(tl.float32))
    tl.store(out_ptr + 2 + n, last.to(tl.float32))


@pytest.mark.parametrize("hi,lo", [(10, 3), (3, 10), (7, 6), (-2, -9)])
def test_negative_constant_loop_steps(hi, lo, gen):
    """``range(start, stop, -step)`` with a constant negative step runs Python's iterations (start,
    start - step, ... > stop; none when start <= stop), as Triton lowers it (torchao's int8 GEMM,
    ``for k in range(K, 0, -BLOCK_K)``; reverse scans)."""
    n = 70
    x = torch.randn(n, generator=gen)
    out = torch.full((n + 3,), float("nan"))
    interpret(negative_step_kernel, (1,), (x, out, n, hi, lo), {"BLOCK": 32})
    torch.testing.assert_close(out[0].double(), x.double().sum(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out[1:n + 1], x.flip(0).cumsum(0).flip(0), rtol=1e-5, atol=1e-5)
    visits = list(range(hi, lo, -3))
    assert out[n + 1].item() == len(visits)
    assert out[n + 2].item() == (visits[-1] if visits else -1000)
    assert negative_step_kernel.compile("x_ptr=*fp32,out_ptr=*fp32,n=i32,hi=i32,lo=i32", {"BLOCK": 32},
                                        arch="sm_90a").asm["cubin"]


# -- a product of booleans; libdevice's rounding to integers -------------------------------------------

@tlxc.jit
def bool_product_mask_kernel(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    m = tl.arange(0, BM)
    n = tl.arange(0, BN)
    mask = (n < N)[None, :] * (m < M)[:, None]               # LightLLM's spelling of a 2-D mask
    tl.static_assert(mask.dtype == tl.int1)
    x = tl.load(x_ptr + m[:, None] * N + n[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + m[:, None] * N + n[None, :], x * 2.0, mask=mask)


def test_product_of_booleans_stays_boolean(gen):
    """``bool * bool`` is Triton's i1 multiply (a logical and), usable as a mask; sums of booleans
    still count in int32."""
    M, N = 5, 7
    x = torch.randn(M, N, generator=gen)
    out = torch.full((M, N), float("nan"))
    interpret(bool_product_mask_kernel, (1,), (x, out, M, N), {"BM": 8, "BN": 8})
    assert torch.equal(out, x * 2)


@tlxc.jit
def llrint_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, tl.extra.cuda.libdevice.llrint(x), mask=offs < n)
    tl.store(out_ptr + BLOCK + offs, tl.extra.libdevice.llround(x), mask=offs < n)
    tl.static_assert(tl.extra.libdevice.lrint(x).dtype == tl.int64)


def test_libdevice_rounding_to_integers():
    """``libdevice.llrint`` / ``lrint`` (ties to even) and ``llround`` / ``lround`` (ties away from
    zero) give int64, as CUDA's (PyTorch's generated kernels and quantizers use ``llrint``)."""
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 63.5, -31.75, 1e10], dtype=torch.float32)
    out = torch.zeros(16, dtype=torch.int64)
    interpret(llrint_kernel, (1,), (x, out, 8), {"BLOCK": 8})
    assert out[:8].tolist() == [0, 2, 2, 0, -2, 64, -32, 10000000000]
    assert out[8:].tolist() == [1, 2, 3, -1, -3, 64, -32, 10000000000]
    assert llrint_kernel.compile("x_ptr=*fp32,out_ptr=*i64,n=i32", {"BLOCK": 8}, arch="sm_90a").asm["cubin"]


# -- a pointer as a condition -------------------------------------------------------------------------

@tlxc.jit
def optional_output_kernel(x_ptr, out_ptr, mean_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x * 2.0, mask=offs < n)
    if mean_ptr:                                          # an optional output, as tritonbench's layer norm
        tl.store(mean_ptr, tl.sum(x, axis=0) / n)


def test_pointer_condition_is_not_null(gen):
    """``if ptr:`` on a pointer argument means ``ptr != 0`` (Triton's pointer-to-int1 cast); None passed
    instead folds the branch away."""
    n = 20
    x = torch.randn(n, generator=gen)
    out, mean = torch.zeros(32), torch.full((1,), float("nan"))
    interpret(optional_output_kernel, (1,), (x, out, mean, n), {"BLOCK": 32})
    torch.testing.assert_close(mean[0], x.mean(), rtol=1e-5, atol=1e-6)
    out2 = torch.zeros(32)
    interpret(optional_output_kernel, (1,), (x, out2, None, n), {"BLOCK": 32})
    assert torch.equal(out2[:n], x * 2)
    assert optional_output_kernel.compile("x_ptr=*fp32,out_ptr=*fp32,mean_ptr=*fp32,n=i32", {"BLOCK": 32},
                                          arch="sm_90a").asm["cubin"]


@tlxc.jit
def special_registers_kernel(out_ptr):
    t0 = tl.extra.cuda.globaltimer()
    sm = tl.extra.cuda.smid()
    t1 = tl.extra.cuda.globaltimer()
    tl.static_assert(tl.extra.cuda.num_threads() == 32 * tl.extra.cuda.num_warps())
    tl.store(out_ptr, t1 - t0)
    tl.store(out_ptr + 1, sm.to(tl.int64))
    tl.store(out_ptr + 2, tl.extra.cuda.num_threads())


def test_extra_cuda_special_registers():
    """``tl.extra.cuda.globaltimer()`` / ``smid()`` (inline PTX, as Triton's; the interpreter answers
    with the host's clock and SM 0) and the compile-time ``num_threads()`` / ``num_warps()``
    (tritonbench's profiling helpers)."""
    out = torch.full((3,), -1, dtype=torch.int64)
    interpret(special_registers_kernel, (1,), (out,), {})
    assert out[0].item() >= 0 and out[1].item() == 0 and out[2].item() == 128
    cuda = special_registers_kernel.compile("out_ptr=*i64", {}, arch="sm_90a", num_warps=8).asm["cuda"]
    assert "%globaltimer" in cuda and "%smid" in cuda and "256" in cuda


# -- found by Triton's own language tests (session 28): tuples, descriptor type, host names ------------

@tlxc.jit
def tuple_surface_kernel(x_ptr, out_ptr):
    tl.static_assert(((3, 4) and (5, 6)) == (5, 6))          # Python's value of and/or on compile-time values
    tl.static_assert(((3, 4) or (5, 6)) == (3, 4))
    tl.static_assert((0 or ()) == ())
    x = tl.load(x_ptr)
    t = tl.tuple([x, x * 2]) + (x * 4,)
    tl.static_assert(isinstance(t, tl.tuple) and not isinstance(x, tl.tuple))
    tl.store(out_ptr, t[0] + t[1] + t[2])


def test_tl_tuple_and_compile_time_and_or():
    out = torch.zeros(1)
    interpret(tuple_surface_kernel, (1,), (torch.full((1,), 1.5), out), {})
    assert out.item() == 1.5 * 7
    with pytest.raises(TypeError, match="carry no separate type"):
        tl.tuple((1, 2), type=object())


@tlxc.jit
def descriptor_type_kernel(a_ptr, flags_ptr, M: tl.constexpr, N: tl.constexpr):
    d = tl.make_tensor_descriptor(a_ptr, shape=[M, N], strides=[N, 1], block_shape=[M, N])
    x = d.load([0, 0])
    tl.store(flags_ptr, isinstance(d, tl.tensor_descriptor) and not isinstance(d, tl.tensor))
    tl.store(flags_ptr + 1, isinstance(x, tl.tensor) and not isinstance(x, tl.tensor_descriptor))
    d.store([0, 0], x + 1)


def test_tl_tensor_descriptor_is_the_type_of_descriptors():
    tlxc.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8))
    a = torch.zeros(8, 16)
    flags = torch.zeros(2, dtype=torch.int32)
    interpret(descriptor_type_kernel, (1,), (a, flags), {"M": 8, "N": 16})
    assert flags.tolist() == [1, 1] and bool((a == 1).all())


def test_triton_host_names_reinterpret_compiler_errors_and_base_fn():
    import tlxc.compat as triton
    x = torch.arange(8, dtype=torch.int8)
    view = triton.reinterpret(x, tl.float8e5)
    assert view.dtype == torch.float8_e5m2 and view.data_ptr() == x.data_ptr()
    with pytest.raises(TypeError, match="the widths must match"):
        triton.reinterpret(x, tl.float16)
    assert triton.compiler.errors.CompilationError is CompilationError
    assert CompilationError("bad thing").error_message == "bad thing"            # Triton's attribute

    @triton.autotune(configs=[triton.Config(kwargs={"BLOCK": 32})], key=["n"])
    @triton.jit
    def tuned(x_ptr, n, BLOCK: tl.constexpr):
        pass
    assert tuned.base_fn.__name__ == "tuned"


# -- lambdas in a kernel ----------------------------------------------------------------------------

@tlxc.jit
def lambda_kernel(x_ptr, scan_ptr, red_ptr, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(scan_ptr + offs, tl.associative_scan(x, 0, combine_fn=lambda a, b: tl.maximum(a, b)))
    twice = lambda v: v * SCALE      # noqa: E731  (captures a compile-time value)
    tl.store(red_ptr, tl.reduce(twice(x), axis=0, combine_fn=lambda a, b: a + b + SCALE))


@tlxc.jit
def lambda_capturing_a_runtime_value(x_ptr, out_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(out_ptr, tl.reduce(x, 0, lambda a, b: a + b + x_ptr.dtype.element_ty.primitive_bitwidth * x))


def test_lambdas_combine_and_capture_compile_time_values_only(gen):
    x = torch.randn(8, generator=gen)
    scan, red = torch.full((8,), float("nan")), torch.full((1,), float("nan"))
    interpret(lambda_kernel, (1,), (x, scan, red), {"SCALE": 2.0, "BLOCK": 8})
    assert torch.equal(scan, torch.cummax(x, 0).values)
    assert torch.allclose(red, (x * 2).sum() + 2.0 * 7, atol=1e-5)     # 7 combines, each adding SCALE
    with pytest.raises(CompilationError, match="lambda can only capture constexpr values; 'x' is a runtime value"):
        interpret(lambda_capturing_a_runtime_value, (1,), (x, red), {"BLOCK": 8})


# -- integer semantics Triton's test_core checks (session 28: two were wrong results) -------------------

@tlxc.jit
def shift_kernel(x_ptr, s_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) >> tl.load(s_ptr + offs))


@pytest.mark.parametrize("xt,st", [(torch.int8, torch.uint8), (torch.int16, torch.uint32), (torch.int32, torch.uint32),
                                   (torch.uint8, torch.int8), (torch.int64, torch.uint64)])
def test_right_shift_follows_the_left_operands_signedness(xt, st):
    """int >> uint shifts arithmetically (sign-filled) in the promoted unsigned type, as Triton does
    (each pair promotes to the unsigned type of the wider width)."""
    x = torch.tensor([-128, -3, -1, 64, 5, -77, 100, -2], dtype=torch.int64).to(xt) if xt.is_signed \
        else torch.tensor([128, 253, 255, 64, 5, 179, 100, 254], dtype=xt)
    s = torch.tensor([1, 1, 4, 2, 0, 3, 5, 7], dtype=st)
    bits = 8 * max(x.element_size(), s.element_size())
    out = torch.zeros(8, dtype={8: torch.uint8, 32: torch.uint32, 64: torch.uint64}[bits])
    interpret(shift_kernel, (1,), (x, s, out), {"N": 8})
    expect = [((int(v) >> int(k)) % (1 << bits)) if xt.is_signed else ((int(v) % (1 << bits)) >> int(k))
              for v, k in zip(x.tolist(), s.tolist())]
    got = [int(v) % (1 << bits) for v in out.tolist()]
    assert got == expect


@tlxc.jit
def unsigned_literal_kernel(x_ptr, out_ptr, Y: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x // Y + x % Y + (x / Y).to(tl.uint32))


def test_a_literal_adopts_an_unsigned_tensors_type():
    x = torch.tensor([7, 8, 9, 4000000000], dtype=torch.uint32)
    out = torch.zeros(4, dtype=torch.uint32)
    interpret(unsigned_literal_kernel, (1,), (x, out), {"Y": 4, "N": 4})
    assert [int(v) for v in out.tolist()] == [v // 4 + v % 4 + int(v / 4) for v in (7, 8, 9, 4000000000)]
    with pytest.raises(CompilationError, match=r"cannot '//' an unsigned tensor \(u32\) and a negative literal"):
        interpret(unsigned_literal_kernel, (1,), (x, out), {"Y": -4, "N": 4})


@tlxc.jit
def sum_dtype_kernel(out_ptr, INIT: tl.constexpr, IN: tl.constexpr, OUT: tl.constexpr):
    x = tl.full((32, 32), INIT, dtype=IN)
    tl.store(out_ptr, tl.sum(x, dtype=OUT).to(tl.int32))
    tl.store(out_ptr + 1, tl.sum(x, axis=1, dtype=OUT).to(tl.int32).sum())


def test_a_sum_in_a_narrow_dtype_wraps_there():
    """tl.sum(..., dtype=) accumulates in that dtype: i1 additions are modulo 2, i8 modulo 256."""
    out = torch.zeros(2, dtype=torch.int32)
    interpret(sum_dtype_kernel, (1,), (out,), {"INIT": 1, "IN": tl.int1, "OUT": tl.int1})
    assert out.tolist() == [0, 0]                        # 1024 ones; each row of 32 ones sums to 0 too
    interpret(sum_dtype_kernel, (1,), (out,), {"INIT": 3, "IN": tl.int8, "OUT": tl.int8})
    assert out.tolist() == [(3 * 1024 + 128) % 256 - 128, 32 * ((3 * 32 + 128) % 256 - 128)]
    interpret(sum_dtype_kernel, (1,), (out,), {"INIT": True, "IN": tl.int1, "OUT": None})
    assert out.tolist() == [1024, 1024]                  # no dtype: booleans count in i32


# -- control flow and shapes Triton's test_core uses ---------------------------------------------------

@tlxc.jit
def ifexp_kernel(x_ptr, out_ptr, n):
    pid = tl.program_id(0)
    a = 1.0 if pid == 0 else 2.0
    v = tl.load(x_ptr + pid) if pid < n else 0.0          # the load only where it is taken (in bounds)
    b = tl.arange(0, 4) if pid == 1 else tl.zeros((4,), tl.int32)
    tl.store(out_ptr + pid * 4 + tl.arange(0, 4), a + v + b)
    tl.atomic_add(out_ptr + 40, 1.0) if pid % 2 == 0 else tl.atomic_add(out_ptr + 41, 1.0)


def test_a_runtime_conditional_expression_runs_one_branch():
    x = torch.arange(3, dtype=torch.float32)
    out = torch.zeros(42)
    interpret(ifexp_kernel, (5,), (x, out, 3), {})
    assert out[:20].tolist() == [1.0] * 4 + [3.0, 4.0, 5.0, 6.0] + [4.0] * 4 + [2.0] * 8
    assert out[40:].tolist() == [3.0, 2.0]                  # each program's one atomic: 3 even, 2 odd


@tlxc.jit
def ranges_and_dims_kernel(out_ptr, N: tl.constexpr, STEP: tl.constexpr):
    acc = 0
    for i in tl.static_range(0, N, step=STEP):
        acc += i
    t = tl.expand_dims(tl.arange(0, 8), (-4, 2, -1))          # axes of the rank-4 result
    tl.static_assert(t.shape == [1, 8, 1, 1])
    one = 1
    tl.store(out_ptr + tl.arange(0, 8), tl.reshape(t, (8,)) + tl.full((8,), acc, dtype=one.dtype))
    zero = 0
    tl.store(out_ptr + 8, zero.to(tl.int64).to(tl.int32) + 5)


def test_static_range_step_keyword_expand_dims_axes_and_literal_attributes():
    out = torch.zeros(9, dtype=torch.int32)
    interpret(ranges_and_dims_kernel, (1,), (out,), {"N": 100, "STEP": 7})
    assert out.tolist() == [sum(range(0, 100, 7)) + i for i in range(8)] + [5]


@tlxc.jit
def scalar_pairs_kernel(x_ptr, y_ptr, out_ptr):
    x, y = tl.load(x_ptr), tl.load(y_ptr)
    tl.store(out_ptr + tl.arange(0, 2), tl.join(x, y))                 # two scalars: a [2] block
    tl.store(out_ptr + 2 + tl.arange(0, 2), tl.interleave(y, x))
    first, second = tl.split(tl.load(out_ptr + tl.arange(0, 2)))       # a [2] block: two scalars
    tl.store(out_ptr + 4, second * 10 + first)


def test_join_interleave_and_split_of_scalars():
    out = torch.zeros(5, dtype=torch.int32)
    interpret(scalar_pairs_kernel, (1,), (torch.tensor([3], dtype=torch.int32), torch.tensor([4], dtype=torch.int32),
                                          out), {})
    assert out.tolist() == [3, 4, 4, 3, 43]


def test_triton_error_dtype_name_lists_and_pi32_t():
    import tlxc.compat as triton
    assert issubclass(CompilationError, triton.TritonError)
    assert tl.dtype.SINT_TYPES == ("int8", "int16", "int32", "int64") and "bf16" in tl.dtype.STANDARD_FP_TYPES
    assert tl.pi32_t == tl.pointer_type(tl.int32)


@tlxc.jit
def comprehension_kernel(x_ptr, out_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    powers = tl.tuple([x * k for k in range(1, 4)])                     # unrolled over a compile-time range
    odd = [powers[i] + 1 for i in range(3) if i % 2 == 0]                # a compile-time 'if'
    pairs = [a * b for a in (1, 2) for b in (10, 100)]                  # two generators
    tl.store(out_ptr + tl.arange(0, N), odd[0] + odd[1] + pairs[3])


def test_list_comprehensions_over_compile_time_sequences(gen):
    x = torch.randn(8, generator=gen)
    out = torch.full((8,), float("nan"))
    interpret(comprehension_kernel, (1,), (x, out), {"N": 8})
    assert torch.allclose(out, (x + 1) + (3 * x + 1) + 200)


# -- tl.const: read-only pointer parameters --------------------------------------------------------

@tlxc.jit
def const_reads(in_ptr: tl.const, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(in_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@tlxc.jit
def const_writes(in_ptr: tl.const, out_ptr, MODE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if MODE == "store":
        tl.store(in_ptr + offs, tl.load(out_ptr + offs))
    else:
        tl.atomic_add(in_ptr + offs, 1.0)


@tlxc.jit
def const_merge(in_ptr: tl.const, out_ptr, c, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = in_ptr if c else out_ptr
    tl.store(out_ptr + offs, tl.load(p + offs))


def test_tl_const_pointers_are_read_only(gen):
    x, y = torch.randn(16, generator=gen), torch.zeros(16)
    interpret(const_reads, (1,), (x, y, 13), {"BLOCK": 16})
    assert torch.equal(y[:13], x[:13] * 2) and not y[13:].any()
    for mode, what in (("store", "store through"), ("atomic", "apply an atomic through")):
        with pytest.raises(CompilationError, match=f"cannot {what} a constant pointer \\(ptr<const f32>"):
            interpret(const_writes, (1,), (x, y), {"MODE": mode, "BLOCK": 16})
    with pytest.raises(CompilationError, match=r"the conditional expression has type ptr<const f32> in the "
                                               r"then-branch but ptr<f32>"):
        interpret(const_merge, (1,), (x, y, 2), {"BLOCK": 16})          # (c = 2: a runtime value)
