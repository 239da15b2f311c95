"""The CPU interpreter on real kernels (tests/kernels_interp.py) against torch/numpy references.

Fresh random inputs, outputs poisoned with NaN (or a sentinel) so that an
element the kernel forgets to write fails, error bounds fitted to each dtype.
"""
from __future__ import annotations

import io
import os
import sys
import time

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

import kernels_interp as K

import tlxc
import tlxc.language as tl
from tlxc.errors import InterpreterError
from tlxc.interpreter import interpret, maybe_interpret, should_interpret

KERNELS_FILE = K.__file__


def _line_of(text: str) -> int:
    """1-based line of the first line of kernels_interp.py containing ``text``."""
    with open(KERNELS_FILE) as f:
        for number, line in enumerate(f, 1):
            if text in line:
                return number
    raise AssertionError(text)


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))


# -- elementwise, masks ------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 1000, 4099])
def test_vector_add_masked(n, gen):
    x, y = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    out = torch.full((n + 7,), float("nan"))           # past n: must stay untouched
    interpret(K.add_kernel, (cdiv(n, 128),), (x, y, out, n), {"BLOCK": 128})
    assert torch.equal(out[:n], x + y)
    assert torch.isnan(out[n:]).all()


def test_vector_add_launch_paths(gen):
    n = 300
    x, y = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    out = torch.full((n,), float("nan"))
    tlxc_interpret = getattr(tlxc, "interpret", interpret)   # the lead exports it from tlxc/__init__.py
    tlxc_interpret(K.add_kernel)[lambda meta: (cdiv(n, meta["BLOCK"]),)](x, y, out, n, BLOCK=64)
    assert torch.equal(out, x + y)
    out.fill_(float("nan"))
    K.add_kernel[(cdiv(n, 64),)](x, y, out, n, BLOCK=64, interpret=True)
    assert torch.equal(out, x + y)
    out.fill_(float("nan"))
    K.add_kernel[(cdiv(n, 64),)](x, y, out, n, BLOCK=64)   # all tensors on the CPU
    assert torch.equal(out, x + y)


def test_should_interpret(monkeypatch):
    x = torch.zeros(4)
    monkeypatch.delenv("TLXC_INTERPRET", raising=False)
    assert should_interpret((x,), {})
    assert not should_interpret((x,), {"interpret": False})
    assert not should_interpret((3,), {})
    monkeypatch.setenv("TLXC_INTERPRET", "1")
    assert should_interpret((3,), {})
    out = torch.full((4,), float("nan"))
    assert maybe_interpret(K.add_kernel, (1,), (x, x, out, 4), {"BLOCK": 4})
    assert torch.equal(out, x)


def test_numpy_arrays_and_strided_views(gen):
    n = 200
    x = np.random.default_rng().standard_normal(n).astype(np.float32)
    y = np.random.default_rng().standard_normal(n).astype(np.float32)
    out = np.full(2 * n, np.nan, dtype=np.float32)
    interpret(K.add_kernel, (cdiv(n, 64),), (x, y, out[n:], n), {"BLOCK": 64})   # a view with an offset
    np.testing.assert_array_equal(out[n:], x + y)
    assert np.isnan(out[:n]).all()
    base = torch.randn(3, n, generator=gen)
    dst = torch.full((3, n), float("nan"))
    interpret(K.add_kernel, (cdiv(n, 64),), (base[1], base[2], dst[2], n), {"BLOCK": 64})
    assert torch.equal(dst[2], base[1] + base[2])
    assert torch.isnan(dst[:2]).all()


def test_bf16_arithmetic_rounds_after_each_op(gen):
    n = 256
    x = torch.randn(n, generator=gen).to(torch.bfloat16)
    y = torch.randn(n, generator=gen).to(torch.bfloat16)
    out = torch.full((n,), float("nan"), dtype=torch.bfloat16)
    interpret(K.bf16_arith_kernel, (1,), (x, y, out), {"BLOCK": n})
    assert torch.equal(out, (x * y) + x)      # torch CPU bf16 also rounds after each op


# -- softmax, matmul ------------------------------------------------------------------------

@pytest.mark.parametrize("rows,cols", [(7, 100), (3, 1000), (1, 1)])
def test_softmax_rows(rows, cols, gen):
    x = torch.randn(rows, cols, generator=gen) * 4
    out = torch.full_like(x, float("nan"))
    block = 1 << (cols - 1).bit_length()
    interpret(K.softmax_kernel, (rows,), (out, x, x.stride(0), out.stride(0), cols), {"BLOCK": block})
    ref = torch.softmax(x.double(), dim=1)
    assert torch.isfinite(out).all()
    assert ((out.double() - ref).abs() <= 8 * 2**-24 * cols + 4 * 2**-24 * ref).all()


def _run_matmul(a, b, c, precision="ieee", blocks=(32, 32, 32), **launch):
    M, Kdim = a.shape
    N = b.shape[1]
    bm, bn, bk = blocks
    interpret(K.matmul_kernel, (cdiv(M, bm), cdiv(N, bn)),
              (a, b, c, M, N, Kdim, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
               c.stride(0), c.stride(1)),
              {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "PRECISION": precision}, **launch)


def _matmul_error_ok(c, a, b, input_rounding: float) -> bool:
    """|C - A@B| <= (2 input roundings + K f32 accumulation steps) * (|A| @ |B|), elementwise."""
    a64, b64 = a.double(), b.double()
    ref = a64 @ b64
    scale = a64.abs() @ b64.abs()
    bound = (2 * input_rounding + (a.shape[1] + 2) * 2**-24) * scale + 1e-30
    return bool(torch.isfinite(c).all()) and bool(((c.double() - ref).abs() <= bound).all())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float8_e4m3fn])
def test_matmul_narrow_inputs(dtype, gen):
    M, N, Kdim = 70, 50, 90
    a = (torch.randn(M, Kdim, generator=gen) * 2).to(dtype)
    b = (torch.randn(Kdim, N, generator=gen) * 2).to(dtype)
    c = torch.full((M, N), float("nan"))
    _run_matmul(a, b, c)
    assert _matmul_error_ok(c, a, b, 0.0)          # inputs exact, products exact: only accumulation


def test_matmul_bf16_exact_on_small_integers(gen):
    a = torch.randint(-8, 8, (64, 48), generator=gen).to(torch.bfloat16)
    b = torch.randint(-8, 8, (48, 32), generator=gen).to(torch.bfloat16)
    c = torch.full((64, 32), float("nan"))
    _run_matmul(a, b, c, blocks=(32, 32, 16))
    assert torch.equal(c, a.float() @ b.float())


def test_matmul_f32_ieee_and_tf32(gen):
    M, N, Kdim = 64, 48, 96
    a = torch.randn(M, Kdim, generator=gen)
    b_t = torch.randn(N, Kdim, generator=gen)
    b = b_t.t()                                    # non-contiguous: strides (1, K)
    ieee = torch.full((M, N), float("nan"))
    tf32 = torch.full((M, N), float("nan"))
    _run_matmul(a, b, ieee, "ieee")
    _run_matmul(a, b, tf32, "tf32")
    assert _matmul_error_ok(ieee, a, b, 0.0)
    assert _matmul_error_ok(tf32, a, b, 2**-11)
    ref = a.double() @ b.double()
    ieee_error = (ieee.double() - ref).abs().max()
    tf32_error = (tf32.double() - ref).abs().max()
    assert tf32_error > 8 * ieee_error                 # tf32 really rounded its inputs


def test_matmul_transposed_output_and_shuffled_order(gen):
    a = torch.randn(96, 64, generator=gen).to(torch.bfloat16)
    b = torch.randn(64, 80, generator=gen).to(torch.bfloat16)
    sequential = torch.full((96, 80), float("nan"))
    _run_matmul(a, b, sequential)
    storage = torch.full((80, 96), float("nan"))
    shuffled = storage.t()                             # column-major output
    _run_matmul(a, b, shuffled, order="shuffled", seed=5)
    assert torch.equal(shuffled, sequential)
    assert _matmul_error_ok(sequential, a, b, 0.0)


def test_int8_dot(gen):
    a = torch.randint(-128, 128, (32, 32), generator=gen, dtype=torch.int8)
    b = torch.randint(-128, 128, (32, 32), generator=gen, dtype=torch.int8)
    c = torch.full((32, 32), -7, dtype=torch.int32)
    interpret(K.int8_dot_kernel, (1,), (a, b, c), {"N": 32})
    assert torch.equal(c, a.int() @ b.int())


def test_matmul_speed():
    """64x64x64 tiles, 256 programs, 4 K-steps each: about a second."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(1024, 256, generator=gen).to(torch.bfloat16)
    b = torch.randn(256, 1024, generator=gen).to(torch.bfloat16)
    c = torch.full((1024, 1024), float("nan"))
    _run_matmul(a, b, c, blocks=(64, 64, 64))         # warm the IR cache
    start = time.perf_counter()
    _run_matmul(a, b, c, blocks=(64, 64, 64))
    elapsed = time.perf_counter() - start
    assert _matmul_error_ok(c, a, b, 0.0)
    assert elapsed < 5.0, f"256 programs took {elapsed:.2f}s"


# -- reductions -------------------------------------------------------------------------------

def _reduce(x: torch.Tensor, kind: str, axis, keep: bool, out_dtype) -> torch.Tensor:
    M, N = x.shape
    shape = {None: (1, 1) if keep else (), 0: (1, N) if keep else (N,), 1: (M, 1) if keep else (M,)}[axis]
    fill = float("nan") if out_dtype.is_floating_point else -99
    out = torch.full(shape, fill, dtype=out_dtype)
    interpret(K.reduce_kernel, (1,), (x, out), {"M": M, "N": N, "KIND": kind, "AXIS": axis, "KEEP": keep})
    return out


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("keep", [False, True])
def test_reductions(axis, keep, gen):
    x = torch.randn(16, 32, generator=gen)
    dims = {"dim": axis, "keepdim": keep} if axis is not None else {}
    ref_sum = x.double().sum(**dims)
    got = _reduce(x, "sum", axis, keep, torch.float32)
    assert got.shape == (ref_sum.shape if axis is not None else ((1, 1) if keep else ()))
    assert ((got.double() - ref_sum.reshape(got.shape)).abs() <= 64 * 2**-24 * x.abs().sum()).all()
    for kind in ("max", "min"):
        ref = getattr(x, "a" + kind)(**dims) if axis is not None else getattr(x, kind)()
        assert torch.equal(_reduce(x, kind, axis, keep, torch.float32), ref.reshape(got.shape))
    for kind in ("argmax", "argmin"):
        flat = x.reshape(-1) if axis is None else x
        ref = getattr(flat, kind)(dim=0 if axis is None else axis).int()
        assert torch.equal(_reduce(x, kind, axis, keep, torch.int32), ref.reshape(got.shape))


def test_argmax_ties_take_the_first_index_and_max_ignores_nan():
    x = torch.tensor([[1, 5, 5, 0], [7, 7, 7, 7], [2, 3, 3, 2], [0, 0, 0, 0]], dtype=torch.int32)
    assert _reduce(x, "argmax", 1, False, torch.int32).tolist() == [1, 0, 1, 0]
    assert _reduce(x, "argmin", 1, False, torch.int32).tolist() == [3, 0, 0, 0]
    f = torch.randn(4, 8)
    f[2, 3] = float("nan")
    # max/min follow the GPU's fmaxf/fminf: a NaN is ignored unless every element is NaN
    got = _reduce(f, "max", 1, False, torch.float32)
    assert torch.isfinite(got).all() and got[2] == torch.cat([f[2, :3], f[2, 4:]]).max()
    assert torch.isfinite(_reduce(f, "min", 0, False, torch.float32)).all()
    f[1, :] = float("nan")
    assert torch.isnan(_reduce(f, "max", 1, False, torch.float32)[1])


def test_f16_sum_accumulates_in_f32(gen):
    x = (torch.rand(16, 64, generator=gen) + 1).to(torch.float16)   # sequential f16 adds would drift
    got = _reduce(x, "sum", 1, False, torch.float16)
    exact = x.double().sum(dim=1)
    ulp = torch.finfo(torch.float16).eps * exact.abs()
    assert ((got.double() - exact).abs() <= ulp).all()


def test_int_sum_wraps():
    x = torch.full((2, 4), 2**30, dtype=torch.int32)
    assert _reduce(x, "sum", 1, False, torch.int32).tolist() == [0, 0]


# -- casts ------------------------------------------------------------------------------------

def _cast(x: torch.Tensor, dtype, out_dtype) -> torch.Tensor:
    n = x.numel()
    out = torch.zeros(n, dtype=out_dtype)
    interpret(K.cast_kernel, (cdiv(n, 1024),), (x, out, n), {"DTYPE": dtype, "BLOCK": 1024})
    return out


def _random_f32_bits(n: int) -> torch.Tensor:
    bits = np.random.default_rng().integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001, 0x7F7FFFFF,
                        0x3F808000, 0x3F818000, 0x3F80C000], dtype=np.uint32)  # ties to even, denormals
    return torch.from_numpy(np.concatenate([special, bits]).view(np.float32).copy())


def test_cast_f32_to_bf16_and_f16_bit_exact():
    x = _random_f32_bits(100_000)
    for dtype, torch_dtype in ((tl.bfloat16, torch.bfloat16), (tl.float16, torch.float16)):
        got = _cast(x, dtype, torch_dtype)
        ref = x.to(torch_dtype)
        nan = torch.isnan(ref)
        assert torch.equal(torch.isnan(got), nan)
        assert torch.equal(got[~nan].view(torch.int16), ref[~nan].view(torch.int16))


@pytest.mark.parametrize("dtype,torch_dtype,max_finite",
                         [(tl.float8e4nv, torch.float8_e4m3fn, 448.0), (tl.float8e5, torch.float8_e5m2, 57344.0)])
def test_cast_to_fp8_rounding_and_saturation(dtype, torch_dtype, max_finite, gen):
    scale = torch.tensor([1e-5, 1e-3, 0.1, 1, 10, 100]).repeat_interleave(5000)
    x = torch.randn(scale.numel(), generator=gen) * scale
    x = torch.cat([x, torch.tensor([0.0, -0.0, 0.0625 * 1.0625, max_finite, -max_finite])])
    got = _cast(x, dtype, torch_dtype)
    ref = x.to(torch_dtype)                                   # torch rounds to nearest even in range
    assert torch.equal(got.view(torch.uint8), ref.view(torch.uint8))
    special = torch.tensor([max_finite * 1.5, -max_finite * 4, float("inf"), float("-inf"), float("nan")])
    got = _cast(special, dtype, torch_dtype).float()
    assert got[:4].tolist() == [max_finite, -max_finite, max_finite, -max_finite]   # satfinite
    assert torch.isnan(got[4])


def test_cast_fp8_and_bf16_to_f32_exact():
    codes = torch.arange(256, dtype=torch.uint8)
    for torch_dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        x = codes.view(torch_dtype)
        got = _cast(x, tl.float32, torch.float32)
        ref = x.float()
        assert torch.equal(torch.isnan(got), torch.isnan(ref))
        assert torch.equal(got[~torch.isnan(ref)], ref[~torch.isnan(ref)])
    bf = _random_f32_bits(5000).to(torch.bfloat16)
    got = _cast(bf, tl.float32, torch.float32)
    assert torch.equal(got.isnan(), bf.float().isnan())
    assert torch.equal(got[~got.isnan()], bf.float()[~got.isnan()])


def test_cast_float_to_int_truncates_saturates_and_maps_nan_to_zero():
    x = torch.tensor([2.7, -2.7, 0.5, -0.5, 3e9, -3e9, float("nan"), float("inf"), 2147483520.0, -2**31])
    assert _cast(x, tl.int32, torch.int32).tolist() == \
        [2, -2, 0, 0, 2**31 - 1, -2**31, 0, 2**31 - 1, 2147483520, -2**31]
    u = torch.tensor([300.0, -5.0, 255.9, float("nan")])
    assert _cast(u, tl.uint8, torch.uint8).tolist() == [255, 0, 255, 0]
    assert _cast(torch.tensor([1e30, -1e30]), tl.int64, torch.int64).tolist() == [2**63 - 1, -2**63]


def test_cast_int_narrowing_wraps_and_bool():
    x = torch.tensor([300, -129, 127, -1, 256], dtype=torch.int32)
    assert _cast(x, tl.int8, torch.int8).tolist() == [44, 127, 127, -1, 0]
    assert _cast(x, tl.uint8, torch.uint8).tolist() == [44, 127, 127, 255, 0]
    f = torch.tensor([0.0, -0.0, 0.5, float("nan"), -3.0])
    assert _cast(f, tl.int1, torch.bool).tolist() == [False, False, True, True, True]
    big = torch.tensor([2**24 + 1, 2**24 + 3, -(2**31)], dtype=torch.int32)
    assert _cast(big, tl.float32, torch.float32).tolist() == [2**24, 2**24 + 4, -(2**31)]   # RNE


@pytest.mark.parametrize("int_dtype", [torch.int32, torch.int64])
def test_cast_int_to_narrow_floats_goes_through_f32(int_dtype):
    """As the GPU code, Triton and torch: int → f32 (one rounding) → bf16/f16/fp8.
    2^25 + 2^17 + 1 lands on a bf16 tie in f32 and rounds to even (2^25), where
    a single rounding would give 2^25 + 2^18."""
    rng = np.random.default_rng()
    top = 2**31 if int_dtype == torch.int32 else 2**62
    values = np.concatenate([rng.integers(-top, top, 20_000), rng.integers(-70_000, 70_000, 5_000),
                             [2**25 + 2**17 + 1, -(2**25 + 2**17 + 1), 2**24 + 1, 0, -1]])
    x = torch.from_numpy(values).to(int_dtype)
    for dtype, torch_dtype in ((tl.bfloat16, torch.bfloat16), (tl.float16, torch.float16),
                               (tl.float8e5, torch.float8_e5m2), (tl.float32, torch.float32)):
        got = _cast(x, dtype, torch_dtype)
        ref = x.to(torch.float32).to(torch_dtype)
        if torch_dtype == torch.float8_e5m2:                # tlxc saturates (cvt ... satfinite); torch overflows
            ref = x.to(torch.float32).clamp(-57344.0, 57344.0).to(torch_dtype)
        assert torch.equal(got.view(torch.uint8) if got.element_size() == 1 else got,
                           ref.view(torch.uint8) if ref.element_size() == 1 else ref), dtype
    assert _cast(x[-5:-4], tl.bfloat16, torch.bfloat16).item() == 2.0**25


def test_bitcast():
    x = torch.tensor([1.0, -2.0, float("inf"), 0.0])
    out = torch.zeros(4, dtype=torch.int32)
    interpret(K.bitcast_kernel, (1,), (x, out), {"BLOCK": 4})
    assert torch.equal(out, x.view(torch.int32))


# -- integer semantics ----------------------------------------------------------------------------

def test_int_division_is_c_style(gen):
    n = 1000
    a = torch.randint(-1000, 1000, (n,), generator=gen, dtype=torch.int32)
    b = torch.randint(1, 50, (n,), generator=gen, dtype=torch.int32) * \
        torch.where(torch.rand(n, generator=gen) < 0.5, -1, 1).int()
    a[:2] = torch.tensor([-2**31, -7], dtype=torch.int32)
    b[:2] = torch.tensor([-1, 2], dtype=torch.int32)
    q = torch.full((n,), 99, dtype=torch.int32)
    r = torch.full((n,), 99, dtype=torch.int32)
    interpret(K.divmod_kernel, (cdiv(n, 256),), (a, b, q, r, n), {"BLOCK": 256})
    assert q[0] == -2**31 and r[0] == 0                  # INT_MIN / -1 wraps
    assert q[1] == -3 and r[1] == -1                     # truncation, remainder takes a's sign
    # (torch itself traps on INT_MIN / -1: compare the rest)
    assert torch.equal(q[1:], torch.div(a[1:], b[1:], rounding_mode="trunc").int())
    assert torch.equal(r[1:], torch.fmod(a[1:], b[1:]))


def test_unsigned_division_on_numpy_arrays():
    a = np.array([4_000_000_000, 7, 2**32 - 1, 10], dtype=np.uint32)
    b = np.array([3, 2, 2**31, 10], dtype=np.uint32)
    q, r = np.zeros(4, np.uint32), np.zeros(4, np.uint32)
    interpret(K.divmod_kernel, (1,), (a, b, q, r, 4), {"BLOCK": 4})
    np.testing.assert_array_equal(q, a // b)
    np.testing.assert_array_equal(r, a % b)


def test_division_by_zero_names_the_line_and_index():
    a = torch.tensor([5, 6, 7, 8], dtype=torch.int32)
    b = torch.tensor([1, 2, 0, 4], dtype=torch.int32)
    q, r = torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    with pytest.raises(InterpreterError) as info:
        interpret(K.divmod_kernel, (1,), (a, b, q, r, 4), {"BLOCK": 4})
    line = _line_of("tl.store(q_ptr + offs, a // b, mask=mask)")
    assert str(info.value).splitlines()[0] == (
        f"{KERNELS_FILE}:{line}:27: error: integer division by zero in program (0, 0, 0) at index (2,) "
        f"(if those lanes are masked off later, guard the divisor, e.g. tl.where(d == 0, 1, d))")


def test_shifts_clamp_like_ptx():
    a = torch.tensor([1, -8, 5, -1, 1 << 30, 3], dtype=torch.int32)
    s = torch.tensor([3, 1, 32, 40, 1, 31], dtype=torch.int32)
    a8 = torch.cat([a, torch.tensor([7, -7], dtype=torch.int32)])
    s8 = torch.cat([s, torch.tensor([0, 2], dtype=torch.int32)])
    left, right = torch.zeros(8, dtype=torch.int32), torch.zeros(8, dtype=torch.int32)
    interpret(K.shift_kernel, (1,), (a8, s8, left, right), {"BLOCK": 8})
    assert left.tolist() == [8, -16, 0, 0, -2**31, -2**31, 7, -28]
    assert right.tolist() == [0, -4, 0, -1, 1 << 29, 0, 7, -2]


# -- control flow ---------------------------------------------------------------------------------

def test_while_loop_and_if_else():
    x = torch.tensor([1, 6, 7, 27, 97, 871], dtype=torch.int32)
    steps = torch.full((6,), -1, dtype=torch.int32)
    interpret(K.collatz_kernel, (6,), (x, steps), {})

    def collatz(v):
        count = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            count += 1
        return count
    assert steps.tolist() == [collatz(int(v)) for v in x]


def test_early_return():
    out = torch.full((8 * 16,), -1, dtype=torch.int32)
    interpret(K.early_return_kernel, (8,), (out, 5), {"BLOCK": 16})
    assert out[:80].tolist() == list(range(80))
    assert (out[80:] == -1).all()


def test_scalar_arguments():
    out = torch.full((1,), float("nan"))
    interpret(K.scalar_args_kernel, (1,), (out, 3, 2**40, True, 0.5), {})
    assert out.item() == 3 * 2**40 * 0.5
    interpret(K.scalar_args_kernel, (1,), (out, 3, 4, False, 0.5), {})
    assert out.item() == 7.5


# -- atomics --------------------------------------------------------------------------------------

def test_atomic_add_histogram(gen):
    n = 1000
    x = torch.randint(0, 10, (n,), generator=gen, dtype=torch.int32)
    hist = torch.zeros(10, dtype=torch.int32)
    interpret(K.histogram_kernel, (cdiv(n, 128),), (x, hist, n), {"BLOCK": 128})
    assert torch.equal(hist, torch.bincount(x, minlength=10).int())


@pytest.mark.parametrize("order", ["sequential", "shuffled"])
def test_atomic_add_returns_old_values(order):
    counter = torch.zeros(1, dtype=torch.int32)
    total = torch.zeros(1)
    old = torch.full((50,), -1, dtype=torch.int32)
    interpret(K.counter_kernel, (50,), (counter, old, total, 0.25), {}, order=order, seed=3)
    assert counter.item() == 50 and total.item() == 12.5
    if order == "sequential":
        assert old.tolist() == list(range(50))
    else:
        assert sorted(old.tolist()) == list(range(50)) and old.tolist() != list(range(50))


def test_atomic_max(gen):
    x = torch.randn(4 * 64, generator=gen)
    out = torch.full((4,), float("-inf"))
    interpret(K.atomic_max_kernel, (4,), (x, out), {"BLOCK": 64})
    assert torch.equal(out, x.reshape(-1, 4).max(dim=0).values)


# -- math -----------------------------------------------------------------------------------------

def test_math_functions(gen):
    x = torch.randn(256, generator=gen)
    out = torch.full_like(x, float("nan"))
    interpret(K.math_kernel, (1,), (x, out), {"BLOCK": 256})
    x64 = x.double()
    ref = x64.exp() + (x64.abs() + 1).log() + x64.abs().sqrt() + torch.erf(x64) + torch.sigmoid(x64)
    assert ((out.double() - ref).abs() <= 16 * 2**-24 * ref.abs().clamp(min=1)).all()


# -- diagnostics ----------------------------------------------------------------------------------

def test_out_of_bounds_load_is_diagnosed_exactly():
    x = torch.randn(1000)
    out = torch.zeros(1024)
    with pytest.raises(InterpreterError) as info:
        interpret(K.copy_unmasked_kernel, (8,), (x, out), {"BLOCK": 128})
    line = _line_of("def copy_unmasked_kernel") + 2
    assert str(info.value) == (
        f"{KERNELS_FILE}:{line}:8: error: out-of-bounds load in program (7, 0, 0) at index (104,): "
        f"the address is element 1000 of x_ptr's allocation of 1000 elements "
        f"(mask the access or fix the offset)\n"
        f"    x = tl.load(x_ptr + offs)\n"
        f"        ^~~~~~~~~~~~~~~~~~~~~")
    assert torch.equal(out[:896], x[:896])        # programs 0..6 ran before program 7 failed


def test_out_of_bounds_store_before_a_view():
    storage = torch.zeros(100)
    view = storage[40:60]
    with pytest.raises(InterpreterError) as info:
        interpret(K.store_unmasked_kernel, (1,), (view,), {"BLOCK": 64})
    assert "out-of-bounds store in program (0, 0, 0) at index (60,): the address is element 60 of " \
           "out_ptr's allocation of 100 elements (elements -40 to 59 relative to out_ptr)" in str(info.value)
    assert (storage == 0).all()                   # nothing was written


def test_device_print(capsys):
    x = torch.tensor([1.5, -2.0, 0.25, 3.0])
    interpret(K.print_kernel, (2,), (x,), {"BLOCK": 4})
    lines = capsys.readouterr().out.splitlines()
    assert lines[:5] == ["pid (0, 0, 0) idx (0) x: 1.5", "pid (0, 0, 0) idx (1) x: -2.0",
                         "pid (0, 0, 0) idx (2) x: 0.25", "pid (0, 0, 0) idx (3) x: 3.0",
                         "pid (0, 0, 0) idx () sum: 2.75"]
    assert lines[5] == "pid (1, 0, 0) idx (0) x: 1.5" and len(lines) == 10
    stream = io.StringIO()
    interpret(K.print_kernel, (1,), (x,), {"BLOCK": 4}, out=stream)
    assert stream.getvalue().splitlines()[4] == "pid (0, 0, 0) idx () sum: 2.75"


def test_device_assert_names_line_pid_and_index():
    x = torch.tensor([1.0, 2.0, -3.0, -4.0])
    with pytest.raises(InterpreterError) as info:
        interpret(K.assert_kernel, (1,), (x,), {"BLOCK": 4})
    line = _line_of('tl.device_assert(x >= 0, "x must be non-negative")')
    assert str(info.value).splitlines()[0] == (
        f"{KERNELS_FILE}:{line}:4: error: device assertion failed in program (0, 0, 0) at index (2,) "
        f"(and 1 more): x must be non-negative")


def test_missing_rule_is_reported():
    from tlxc.errors import Location
    from tlxc.interpreter.registry import rule_for
    from tlxc.ir.core import Operation

    class Strange(Operation):
        name = "test.strange_op_without_rule"

    with pytest.raises(InterpreterError, match=r"no interpreter rule for test.strange_op_without_rule "
                                               r"\(k\.py:3\)"):
        rule_for(Strange(loc=Location("k.py", 3, 4)))


def test_ir_is_cached_per_specialization():
    from tlxc.interpreter.launch import _RUNNERS
    x = torch.zeros(64)
    _RUNNERS.pop(K.add_kernel, None)
    interpret(K.add_kernel, (1,), (x, x, x, 64), {"BLOCK": 64})
    interpret(K.add_kernel, (1,), (x, x, x, 64), {"BLOCK": 64})
    interpret(K.add_kernel, (1,), (x, x, x, 1), {"BLOCK": 64})   # n == 1: a constexpr
    assert len(_RUNNERS[K.add_kernel]) == 2


def test_tf32_rounding_and_64_bit_umulhi():
    from tlxc.interpreter.arith import _mulhi64
    from tlxc.interpreter.values import round_tf32
    x = np.array([1 + 2**-11, 1 + 2**-12, -(1 + 3 * 2**-11), np.inf, np.nan], dtype=np.float32)
    got = round_tf32(x)
    assert got[:4].tolist() == [1 + 2**-10, 1.0, -(1 + 2 * 2**-10), np.inf] and np.isnan(got[4])   # ties away
    a = np.array([2**64 - 1, 2**63 + 12345, 7], dtype=np.uint64)
    b = np.array([2**64 - 1, 2**40 + 3, 2**63], dtype=np.uint64)
    with np.errstate(all="ignore"):
        assert [int(v) for v in _mulhi64(a, b)] == [(int(p) * int(q)) >> 64 for p, q in zip(a, b)]


def test_split_and_join_round_trip(gen):
    x = torch.randn(16, 64, generator=gen)
    y, z = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    tlxc.interpret(K.split_join_kernel)[(1,)](x, y, z, M=16, N=64)
    assert torch.equal(y, torch.cat([x[:, :32] * 2, x[:, 32:] * 3], 1))
    assert torch.equal(z, x)
