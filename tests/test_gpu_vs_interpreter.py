"""The CUDA backend and the interpreter compute the same thing: each case runs
a kernel of tests/kernels_interp.py on the GPU and on the interpreter with the
same fresh random inputs and compares (bit-exact for integers, casts and
reductions that are order-independent; a float tolerance otherwise)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import kernels_interp as K

import tlxc

pytestmark = pytest.mark.gpu


def run_both(kernel, grid, make_args, meta=None, num_warps=4):
    """(gpu outputs, interpreter outputs) for the tensor arguments."""
    gen = torch.Generator().manual_seed(1234)
    cpu_args = make_args(gen)
    gpu_args = [a.cuda() if isinstance(a, torch.Tensor) else a for a in cpu_args]
    kernel[grid](*gpu_args, **(meta or {}), num_warps=num_warps)
    torch.cuda.synchronize()
    tlxc.interpret(kernel)[grid](*cpu_args, **(meta or {}), num_warps=num_warps)
    return ([a.cpu() for a in gpu_args if isinstance(a, torch.Tensor)],
            [a for a in cpu_args if isinstance(a, torch.Tensor)])


@pytest.mark.parametrize("kind", ["sum", "max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_reductions(kind, axis, num_warps):
    m, n = 16, 64
    size = 1 if axis is None else (n if axis == 0 else m)
    out_dtype = torch.int32 if kind.startswith("arg") else torch.float32

    def args(gen):
        return [torch.randn(m * n, generator=gen), torch.full((size,), -7, dtype=out_dtype)]
    gpu, cpu = run_both(K.reduce_kernel, (1,), args, {"M": m, "N": n, "KIND": kind, "AXIS": axis, "KEEP": False}, num_warps)
    if kind == "sum":
        torch.testing.assert_close(gpu[1], cpu[1], rtol=1e-5, atol=1e-5)
    else:
        assert torch.equal(gpu[1], cpu[1])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float8e4nv", "float8e5", "int32", "int8"])
def test_casts_bit_exact(dtype):
    import tlxc.language as tl
    n = 5000
    target = getattr(tl, dtype)
    torch_dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float8e4nv": torch.float8_e4m3fn,
                   "float8e5": torch.float8_e5m2, "int32": torch.int32, "int8": torch.int8}[dtype]

    def args(gen):
        x = torch.randn(n, generator=gen) * (3.0 if dtype != "int8" else 30.0)
        if dtype in ("bfloat16", "float16"):
            x[:4] = torch.tensor([float("inf"), -float("inf"), 1e-40, 65519.0])
        out = torch.zeros(n, dtype=torch_dtype)
        return [x, out, n]
    gpu, cpu = run_both(K.cast_kernel, (triton_cdiv(n, 1024),), args, {"DTYPE": target, "BLOCK": 1024})
    assert torch.equal(gpu[1].view(torch.uint8) if gpu[1].element_size() == 1 else gpu[1],
                       cpu[1].view(torch.uint8) if cpu[1].element_size() == 1 else cpu[1])


@pytest.mark.parametrize("int_dtype", [torch.int32, torch.int64])
def test_int_to_bf16_rounds_like_the_gpu(int_dtype):
    """Integers above 2^24 reach bf16 through f32 on both sides (two roundings)."""
    import tlxc.language as tl
    n = 4096

    def args(gen):
        top = 2**31 if int_dtype == torch.int32 else 2**62
        x = torch.randint(-top, top, (n,), generator=gen, dtype=torch.int64).to(int_dtype)
        x[:2] = torch.tensor([2**25 + 2**17 + 1, -(2**25 + 2**17 + 1)])
        return [x, torch.zeros(n, dtype=torch.bfloat16), n]
    gpu, cpu = run_both(K.cast_kernel, (triton_cdiv(n, 1024),), args, {"DTYPE": tl.bfloat16, "BLOCK": 1024})
    assert torch.equal(gpu[1].view(torch.int16), cpu[1].view(torch.int16))


def triton_cdiv(a, b):
    return (a + b - 1) // b


def test_bf16_arithmetic_rounds_after_each_op():
    def args(gen):
        return [torch.randn(256, generator=gen).bfloat16(), torch.randn(256, generator=gen).bfloat16(),
                torch.zeros(256, dtype=torch.bfloat16)]
    gpu, cpu = run_both(K.bf16_arith_kernel, (1,), args, {"BLOCK": 256})
    assert torch.equal(gpu[2], cpu[2])


def test_integer_division_shifts_and_loops():
    n = 3000

    def divmod_args(gen):
        a = torch.randint(-1000, 1000, (n,), generator=gen, dtype=torch.int32)
        b = torch.randint(1, 50, (n,), generator=gen, dtype=torch.int32) * torch.where(
            torch.rand(n, generator=gen) < 0.5, -1, 1).int()
        return [a, b, torch.zeros(n, dtype=torch.int32), torch.zeros(n, dtype=torch.int32), n]
    gpu, cpu = run_both(K.divmod_kernel, (triton_cdiv(n, 512),), divmod_args, {"BLOCK": 512})
    assert all(torch.equal(g, c) for g, c in zip(gpu, cpu))

    def shift_args(gen):
        return [torch.randint(-2**30, 2**30, (256,), generator=gen, dtype=torch.int32),
                torch.randint(0, 32, (256,), generator=gen, dtype=torch.int32),
                torch.zeros(256, dtype=torch.int32), torch.zeros(256, dtype=torch.int32)]
    gpu, cpu = run_both(K.shift_kernel, (1,), shift_args, {"BLOCK": 256})
    assert all(torch.equal(g, c) for g, c in zip(gpu, cpu))

    def collatz_args(gen):
        return [torch.randint(1, 10000, (64,), generator=gen, dtype=torch.int32), torch.zeros(64, dtype=torch.int32)]
    gpu, cpu = run_both(K.collatz_kernel, (64,), collatz_args)
    assert torch.equal(gpu[1], cpu[1])

    def early_args(gen):
        return [torch.full((8 * 128,), -1, dtype=torch.int32), 5]
    gpu, cpu = run_both(K.early_return_kernel, (8,), early_args, {"BLOCK": 128})
    assert torch.equal(gpu[0], cpu[0])


def test_atomics():
    n = 10_000

    def hist_args(gen):
        return [torch.randint(0, 37, (n,), generator=gen, dtype=torch.int32), torch.zeros(37, dtype=torch.int32), n]
    gpu, cpu = run_both(K.histogram_kernel, (triton_cdiv(n, 1024),), hist_args, {"BLOCK": 1024})
    assert torch.equal(gpu[1], cpu[1])

    def max_args(gen):
        return [torch.randint(-10**6, 10**6, (4 * 256,), generator=gen, dtype=torch.int32),
                torch.full((4,), -2**31, dtype=torch.int32)]
    gpu, cpu = run_both(K.atomic_max_kernel, (4,), max_args, {"BLOCK": 256})
    assert torch.equal(gpu[1], cpu[1])


def test_math_and_int8_dot():
    def math_args(gen):
        return [torch.randn(512, generator=gen), torch.zeros(512)]
    gpu, cpu = run_both(K.math_kernel, (1,), math_args, {"BLOCK": 512})
    torch.testing.assert_close(gpu[1], cpu[1], rtol=2e-6, atol=2e-6)

    def dot_args(gen):
        return [torch.randint(-100, 100, (64 * 64,), generator=gen, dtype=torch.int8),
                torch.randint(-100, 100, (64 * 64,), generator=gen, dtype=torch.int8),
                torch.zeros(64 * 64, dtype=torch.int32)]
    gpu, cpu = run_both(K.int8_dot_kernel, (1,), dot_args, {"N": 64})
    assert torch.equal(gpu[2], cpu[2])


def test_split_and_join():
    def args(gen):
        return [torch.randn(16, 64, generator=gen), torch.full((16, 64), float("nan")),
                torch.full((16, 64), float("nan"))]
    gpu, cpu = run_both(K.split_join_kernel, (1,), args, {"M": 16, "N": 64})
    assert torch.equal(gpu[1], cpu[1]) and torch.equal(gpu[2], cpu[2])
    assert torch.equal(cpu[2], cpu[0])


def test_exp2_flushes_subnormals_like_the_gpu():
    """tl.exp2 on f32 is ex2.approx.ftz.f32 (as in Triton): results below 2^-126 are 0 on
    both; elsewhere they agree to the instruction's ~2^-22 relative error."""
    def args(gen):
        x = torch.cat([torch.randn(448, generator=gen) * 20, torch.linspace(-160, -120, 64)])
        return [x, torch.full((512,), float("nan"))]
    gpu, cpu = run_both(K.exp2_kernel, (1,), args, {"BLOCK": 512})
    assert torch.equal(gpu[1] == 0, cpu[1] == 0)
    torch.testing.assert_close(gpu[1], cpu[1], rtol=2e-6, atol=0)


@pytest.mark.parametrize("dtype,precision,tol", [(torch.float32, "ieee", 1e-5), (torch.float32, "tf32", 3e-3),
                                                 (torch.bfloat16, "ieee", 1e-5), (torch.float16, "ieee", 1e-5)])
def test_dot_fma_and_mma_paths(dtype, precision, tol):
    """f32 takes the FMA path (tf32 rounds the inputs), bf16/f16 the mma.sync path;
    both must agree with the interpreter up to summation order."""
    m, n, k = 100, 72, 90

    def args(gen):
        a = torch.randn(m, k, generator=gen).to(dtype)
        b = torch.randn(k, n, generator=gen).to(dtype)
        return [a, b, torch.full((m, n), float("nan")), m, n, k, k, 1, n, 1, n, 1]
    gpu, cpu = run_both(K.matmul_kernel, (triton_cdiv(m, 32), triton_cdiv(n, 32)), args,
                        {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "PRECISION": precision})
    assert torch.isfinite(gpu[2]).all()
    err = ((gpu[2].double() - cpu[2].double()).norm() / cpu[2].double().norm()).item()
    assert err < tol, err
