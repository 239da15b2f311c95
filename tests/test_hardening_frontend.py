"""Misuse that used to crash tlxc gives a located error (issue 21): arithmetic and truth
tests on barriers and buffers, tl.minimum on a tuple, non-power-of-two task sizes,
tl.pointer_type of a non-dtype, tensors beyond 2**20 elements; NaN in min/max and
argmax follows Triton on the interpreter; an endless while loop stops with a message."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import CompilationError, InterpreterError
from tlxc.language import tlx

f32p = tl.pointer_type(tl.float32)
i32p = tl.pointer_type(tl.int32)


@tlxc.kernel
def buffer_plus_offsets(x: f32p):
    bufs = tlx.local_alloc((16,), tl.float32, 2)
    tl.store(bufs + tl.arange(0, 16), tl.load(x + tl.arange(0, 16)))


@tlxc.kernel
def if_barrier(x: f32p):
    bar = tlx.alloc_barriers(1)
    if bar:
        tl.store(x, 1.0)


@tlxc.kernel
def negate_barrier(x: f32p):
    bar = tlx.alloc_barriers(1)
    tl.store(x, -bar)


@tlxc.kernel
def compare_barrier(x: f32p):
    bar = tlx.alloc_barriers(2)
    tl.store(x, tl.where(bar < 1, 1.0, 0.0))


@tlxc.kernel
def shift_buffer(x: f32p):
    buf = tlx.local_alloc((16,), tl.int32, 1)[0]
    tl.store(x, buf << 1)


@tlxc.kernel
def exp_of_buffer(x: f32p):
    buf = tlx.local_alloc((16,), tl.float32, 1)
    tl.store(x + tl.arange(0, 16), tl.exp(buf))


@tlxc.kernel
def minimum_of_tuple(x: f32p):
    tl.store(x, tl.minimum((128,), 0))


@tlxc.kernel
def task_of_three_warps(x: f32p):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(x + tl.arange(0, 16), 1.0)
        with tlx.async_task(num_warps=3):
            tl.store(x + tl.arange(0, 16), 2.0)


@tlxc.kernel
def pointer_of_int_in_kernel(x: f32p):
    tl.store(x.to(tl.pointer_type(5)), 1.0)


@tlxc.kernel
def broadcast_too_big(x: f32p):
    a = tl.arange(0, 4096)
    tl.store(x + a[:, None] * 4096 + a[None, :], 1.0)


@tlxc.kernel
def bad_propagate_nan(x: f32p):
    tl.store(x, tl.maximum(tl.load(x), 1.0, propagate_nan=3))


@tlxc.kernel
def nan_into_an_int(x: i32p):
    tl.store(x, float("nan"))


@tlxc.kernel
def inf_fills_an_int_tensor(x: i32p):
    tl.store(x + tl.arange(0, 16), tl.full((16,), float("inf"), tl.int32))


@tlxc.kernel
def cdiv_of_a_tuple(x: i32p, BN: tl.constexpr = 16):
    tl.store(x, tl.cdiv([64], BN))


@tlxc.kernel
def matmul_assign(x: i32p):
    count = 3
    count @= 1
    tl.store(x, count)


@tlxc.kernel
def trans_by_an_int(x: f32p):
    b = tlx.local_alloc((16, 16), tl.float16, 1)
    tlx.local_trans(b[0], 2 ** 40)


@tlxc.kernel
def reinterpret_as_an_int_shape(x: f32p):
    b = tlx.local_alloc((16, 16), tl.float16, 1)
    tlx.local_reinterpret(b[0], tl.float32, 8)


@tlxc.kernel
def reinterpret_with_a_zero_dimension(x: f32p):
    b = tlx.local_alloc((16, 16), tl.float16, 1)
    tlx.local_reinterpret(b[0], tl.float32, (0, 8))


@tlxc.kernel
def static_range_beyond_a_machine_word(x: f32p):
    for i in tl.static_range(2 ** 70):
        tl.store(x, 1.0)


@tlxc.kernel
def static_range_of_step_zero(x: f32p):
    for i in tl.static_range(0, 4, 0):
        tl.store(x, 1.0)


@tlxc.kernel
def alloc_of_a_float_shape(x: f32p):
    tlx.local_alloc(0.5, tl.float32, 2)


@tlxc.kernel
def expect_a_huge_byte_count(x: f32p, BM: tl.constexpr = 128, BK: tl.constexpr = 64):
    bar = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bar[0], BM * BK << BM * BK)


CASES = [
    (buffer_plus_offsets, "bufs + tl.arange", "'+' needs numbers, tensors or pointers, got a buffer array"),
    (if_barrier, "bar", "a condition needs numbers, tensors or pointers, got an mbarrier array"),
    (negate_barrier, "-bar", "unary '-' needs numbers, tensors or pointers, got an mbarrier array"),
    (compare_barrier, "bar < 1", "a comparison needs numbers, tensors or pointers, got an mbarrier array"),
    (shift_buffer, "buf << 1", "'<<' needs numbers, tensors or pointers, got a buffer in shared memory"),
    (exp_of_buffer, "buf", "tl.exp: 'x' must hold numbers, got a buffer array in shared memory"),
    (minimum_of_tuple, "(128,)", "tl.minimum: 'x' must be a tensor or a number, got tuple (128,)"),
    (task_of_three_warps, "tlx.async_task(num_warps=3)", "a task's num_warps must be a power of two"),
    (pointer_of_int_in_kernel, "tl.pointer_type(5)", "tl.pointer_type expects a dtype such as tl.float32"),
    (broadcast_too_big, "a[:, None] * 4096", "makes a tensor of shape [4096, 4096] (16777216 elements)"),
    (bad_propagate_nan, "3", "'propagate_nan' must be tl.PropagateNan.NONE or tl.PropagateNan.ALL"),
    # found by tests/test_fuzz.py
    (nan_into_an_int, "tl.store", "cannot use the number nan as an i32 value"),
    (inf_fills_an_int_tensor, "tl.full", "cannot use the number inf as an i32 value"),
    (cdiv_of_a_tuple, "[64]", "tl.cdiv: 'x' must be a tensor or a number, got"),
    (matmul_assign, "count @= 1", "'@=' is not supported in a kernel; use tl.dot(a, b)"),
    (trans_by_an_int, "2 ** 40", "tlx.local_trans: 'dims' must be a tuple of compile-time integers, got int"),
    (reinterpret_as_an_int_shape, "8", "tlx.local_reinterpret: 'shape' must be a tuple of compile-time integers"),
    (reinterpret_with_a_zero_dimension, "(0, 8)", "'shape' must have dimensions of at least 1, got [0, 8]"),
    (static_range_beyond_a_machine_word, "tl.static_range(2 ** 70)",
     "tl.static_range unrolls 1180591620717411303424 iterations; at most 4096"),
    (static_range_of_step_zero, "0", "tl.static_range's step must not be zero"),
    (expect_a_huge_byte_count, "BM * BK << BM * BK",
     "'size' must be from 0 to 1048575 (an mbarrier's transaction count has 20 bits), got an integer of 8206 bits"),
    (alloc_of_a_float_shape, "0.5", "tlx.local_alloc: 'shape' must be a tuple of positive compile-time integers, "
                                    "got float 0.5"),
]


@pytest.mark.parametrize(("kernel", "anchor", "message"), CASES, ids=lambda c: getattr(c, "__name__", None))
def test_misuse_is_a_located_error(kernel, anchor, message):
    with pytest.raises(CompilationError) as info:
        kernel.compile(stages=("ir", "ir.opt"))
    error = info.value
    assert message in error.message
    assert error.loc is not None and error.loc.line > 0
    assert error.loc.source_line().find(anchor) >= 0


def test_pointer_type_of_a_non_dtype_is_located_at_the_annotation():
    with pytest.raises(CompilationError, match="tl.pointer_type expects a dtype") as info:
        tl.pointer_type(5)
    assert info.value.loc is not None and info.value.loc.file == __file__


def test_big_arange_compiles_quickly():
    # 2**18 elements on 4 warps: 2048 registers a thread; fully unrolled, NVRTC took 90 s
    from tlxc.codegen_nvptx.backend import render_kernel

    @tlxc.kernel
    def big(x: f32p, N: tl.constexpr):
        offs = tl.arange(0, N)
        tl.store(x + offs, tl.load(x + offs) + 1.0)

    compiled = big.compile(constexprs={"N": 2**18}, stages=("ir", "ir.opt"))
    source, _ = render_kernel(compiled.module.kernels[0], "sm_90a")
    assert "#pragma unroll 8\n" in source
    assert "for (int i = 0; i < 2048; ++i)" in source


def test_a_postponed_annotation_that_does_not_evaluate_is_a_located_error(tmp_path):
    """With ``from __future__ import annotations`` a typo in a tl.* annotation used to leave the
    parameter silently untyped (its type then came from the launch argument)."""
    import importlib.util
    path = tmp_path / "postponed.py"
    path.write_text("from __future__ import annotations\n"
                    "import tlxc\nimport tlxc.language as tl\n\n\n"
                    "@tlxc.kernel\n"
                    "def typo(x: tl.pointer_type(tl.flaot32), note: SomethingUnknown):\n"
                    "    tl.store(x, 1.0)\n")
    spec = importlib.util.spec_from_file_location("postponed", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(CompilationError, match="annotation of parameter 'x' of typo does not evaluate") as info:
        module.typo.compile(stages=("ir",))
    assert "flaot32" in info.value.message and info.value.loc.line == 7
    assert info.value.loc.source_line().find("tl.pointer_type(tl.flaot32)") == info.value.loc.col
    with pytest.raises(CompilationError, match="flaot32"):
        module.typo[(1,)](torch.zeros(4), 1, interpret=True)


def test_dot_tiles_beyond_the_register_file_unroll_only_the_k_loop():
    """A 512x512 tl.dot fully unrolled was 16384 inlined MMAs (NVRTC > 250 s); the fragments live in
    local memory anyway, so the M and N loops stay loops (NVRTC ~10 s).  Register-sized tiles keep
    their full unrolling."""
    from tlxc.codegen_nvptx.backend import render_kernel

    @tlxc.kernel
    def square(x: f32p, N: tl.constexpr):
        a = tl.load(x + tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :]).to(tl.float16)
        c = tl.dot(a, a)
        tl.store(x + tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :], c)

    def loops(n, arch):
        compiled = square.compile(constexprs={"N": n}, stages=("ir", "ir.opt"), arch=arch)
        lines = render_kernel(compiled.module.kernels[0], arch)[0].splitlines()
        return {line.strip().split()[2]: prev.strip() for prev, line in itertools.pairwise(lines)
                if line.strip().startswith("for (int ") and line.strip().split()[2] in ("mi", "ni", "ki")}
    assert loops(512, "sm_80") == {"mi": "#pragma unroll 1", "ni": "#pragma unroll 1", "ki": "#pragma unroll"}
    assert loops(64, "sm_80") == {"mi": "#pragma unroll", "ni": "#pragma unroll", "ki": "#pragma unroll"}


def test_fma_dot_beyond_the_register_file_unrolls_the_k_loop_by_8():
    from tlxc.codegen_nvptx.backend import render_kernel

    @tlxc.kernel
    def fma_dot(x: f32p, N: tl.constexpr, K: tl.constexpr):
        a = tl.load(x + tl.arange(0, N)[:, None] * K + tl.arange(0, K)[None, :])
        b = tl.load(x + tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :])
        tl.store(x + tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :], tl.dot(a, b, input_precision="ieee"))

    def pragmas(n, k):
        compiled = fma_dot.compile(constexprs={"N": n, "K": k}, stages=("ir", "ir.opt"), arch="sm_90a")
        lines = render_kernel(compiled.module.kernels[0], "sm_90a")[0].splitlines()
        at = next(i for i, line in enumerate(lines) if "for (int kk = 0;" in line)
        return lines[at - 3].strip(), lines[at - 1].strip()
    assert pragmas(512, 256) == ("#pragma unroll 1", "#pragma unroll 8")
    assert pragmas(64, 64) == ("#pragma unroll", "#pragma unroll")


# -- NaN: Triton's semantics, the interpreter and the GPU agree ---------------------------------

@tlxc.kernel
def nan_rules(x: f32p, y: f32p, out_min: f32p, out_max: f32p, out_max_all: f32p,
              out_rmax: f32p, out_rmin: f32p, out_arg: i32p, out_argmin: i32p, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    a = tl.load(x + rows)
    b = tl.load(y + rows)
    tl.store(out_min + rows, tl.minimum(a, b))
    tl.store(out_max + rows, tl.maximum(a, b))
    tl.store(out_max_all + rows, tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL))
    grid = tl.load(x + rows[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :])
    tl.store(out_rmax + rows, tl.max(grid, 1))
    tl.store(out_rmin + rows, tl.min(grid, 1))
    tl.store(out_arg + rows, tl.argmax(grid, 1))
    tl.store(out_argmin + rows, tl.argmin(grid, 1))


def _nan_inputs(block: int):
    gen = torch.Generator().manual_seed(21)
    x = torch.randn(block * block, generator=gen)
    x[torch.rand(block * block, generator=gen) < 0.3] = math.nan
    x[block:2 * block] = math.nan                 # a row of NaNs only
    y = torch.randn(block * block, generator=gen)
    y[torch.rand(block * block, generator=gen) < 0.3] = math.nan
    return x, y


def _expected(x: torch.Tensor, y: torch.Tensor, block: int) -> dict:
    a, b = x[:block].double().numpy(), y[:block].double().numpy()
    grid = x.double().numpy().reshape(block, block)
    filled_max = np.where(np.isnan(grid), -np.inf, grid)
    filled_min = np.where(np.isnan(grid), np.inf, grid)
    all_nan = np.isnan(grid).all(axis=1)
    return {
        "min": np.fmin(a, b), "max": np.fmax(a, b),
        "max_all": np.where(np.isnan(a) | np.isnan(b), np.nan, np.fmax(a, b)),
        "rmax": np.fmax.reduce(grid, axis=1), "rmin": np.fmin.reduce(grid, axis=1),
        # first index of the best number (tie -inf vs a real -inf: the number wins); all-NaN rows: 0
        "arg": np.where(all_nan, 0, np.argmax((grid == filled_max.max(1, keepdims=True)) & ~np.isnan(grid), 1)),
        "argmin": np.where(all_nan, 0, np.argmax((grid == filled_min.min(1, keepdims=True)) & ~np.isnan(grid), 1)),
    }


def _run_nan_rules(device: str, block: int = 32, interpret: bool = False) -> tuple[dict, dict]:
    x, y = _nan_inputs(block)
    expected = _expected(x, y, block)
    outs = {k: torch.full((block,), 12345.0, device=device) for k in ("min", "max", "max_all", "rmax", "rmin")}
    outs["arg"] = torch.full((block,), -7, dtype=torch.int32, device=device)
    outs["argmin"] = torch.full((block,), -7, dtype=torch.int32, device=device)
    kwargs = {"interpret": True} if interpret else {}
    nan_rules[(1,)](x.to(device), y.to(device), outs["min"], outs["max"], outs["max_all"], outs["rmax"],
                    outs["rmin"], outs["arg"], outs["argmin"], BLOCK=block, **kwargs)
    return {k: v.cpu().double().numpy() for k, v in outs.items()}, expected


def _assert_nan_rules(got: dict, expected: dict) -> None:
    for key, want in expected.items():
        np.testing.assert_array_equal(got[key], want, err_msg=key)


def test_nan_rules_on_the_interpreter():
    got, expected = _run_nan_rules("cpu", interpret=True)
    assert np.isnan(got["rmax"][1]) and got["arg"][1] == 0     # the all-NaN row
    _assert_nan_rules(got, expected)


@pytest.mark.gpu
def test_nan_rules_on_the_gpu():
    got, expected = _run_nan_rules("cuda")
    _assert_nan_rules(got, expected)


# -- the interpreter's bound on while loops ---------------------------------------------------

@tlxc.kernel
def spin_forever(x: f32p, n: tl.int32):
    i = 0
    while i < n:
        i += 0
    tl.store(x, i * 1.0)


def test_endless_while_loop_stops_with_its_line(monkeypatch):
    monkeypatch.setenv("TLXC_INTERPRET_MAX_ITERATIONS", "200")
    with pytest.raises(InterpreterError, match="this while loop ran 200 iterations") as info:
        spin_forever[(1,)](torch.zeros(4), 5, interpret=True)
    assert "while i < n" in info.value.loc.source_line()


def test_nested_unrolled_loops_stay_within_the_nest_bound():
    """Full unrolling multiplies through a loop nest: the product of the unroll factors is capped
    (NEST_UNROLL_LIMIT), so generated code never grows with the product of trip counts."""
    from tlxc.codegen_c.lower import NEST_UNROLL_LIMIT, Emitter
    out = Emitter()
    for name in ("a", "b", "c"):
        out.line("#pragma unroll")
        out.open(f"for (int {name} = 0; {name} < 64; ++{name})")
    out.line("#pragma unroll")
    out.line("for (int d = 0; d < 64; ++d) x += d;")
    for _ in range(3):
        out.close()
    pragmas = [line.strip() for line in out.lines if line.strip().startswith("#pragma")]
    assert pragmas == ["#pragma unroll", "#pragma unroll", "#pragma unroll 1", "#pragma unroll 1"]
    assert 64 * 64 <= NEST_UNROLL_LIMIT < 64 * 64 * 64
    out.line("#pragma unroll")                    # after the nest closes, a loop unrolls fully again
    out.line("for (int e = 0; e < 64; ++e) y += e;")
    assert out.lines[-2].strip() == "#pragma unroll"


@tlxc.kernel
def long_for(x: f32p, n: tl.int32):
    total = 0.0
    for i in range(0, n):
        total += 1.0
    tl.store(x, total)


def test_a_for_loop_beyond_the_iteration_bound_is_refused_up_front(monkeypatch):
    """range(0, 2**31 - 1) would interpret for hours: refused at once, naming the loop."""
    out = torch.zeros(4)
    with pytest.raises(InterpreterError, match="this for loop has 2147483647 iterations") as info:
        long_for[(1,)](out, 2**31 - 1, interpret=True)
    assert "for i in range(0, n)" in info.value.loc.source_line()
    monkeypatch.setenv("TLXC_INTERPRET_MAX_ITERATIONS", "100")
    long_for[(1,)](out, 100, interpret=True)                    # at the bound: runs
    assert out[0] == 100.0
    with pytest.raises(InterpreterError, match="has 101 iterations"):
        long_for[(1,)](out, 101, interpret=True)
