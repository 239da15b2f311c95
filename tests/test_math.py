"""``tl.math.*`` and ``libdevice.*``: the IR, the interpreter against independent float64
references (torch, Python's math/decimal/fractions), special values, the sm_90a cubin, errors,
and (``gpu`` marker) the GPU against the reference and the interpreter.

Each function runs on its own row of inputs drawn from its domain plus the special values
(nan, +-inf, +-0, subnormals), in one kernel per function family, with a row length that is
not a multiple of the tile.  The bounds are in ulps of the result type (docs/language.md):
the interpreter is within 1 ulp of the correctly rounded f32 value (2 ulps for f64, whose
reference is itself a libm result); the GPU within CUDA's documented bound (plus 1 ulp of
reference error for f64).
"""
from __future__ import annotations

import decimal
import fractions
import math
import statistics
from dataclasses import dataclass

import numpy as np
import pytest

mpmath = pytest.importorskip("mpmath")

torch = pytest.importorskip("torch")

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.errors import CompilationError
from tlxc.frontend.specialize import specialization_from_types
from tlxc.ir.parser import parse_module
from tlxc.ir.printer import print_module
from tlxc.ir.types import PointerType, f16, f32, f64, i32, i64
from tlxc.language.extra import libdevice

N = 200          # per row: not a multiple of BLOCK
BLOCK = 128
POISON = -777.25
F32_SUBNORMAL = 1e-40
F64_SUBNORMAL = 1e-310


@tlxc.kernel
def unary_rows(x_ptr, out_ptr, n, FNS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    for i in tl.static_range(len(FNS)):
        x = tl.load(x_ptr + i * n + offs, mask=mask)
        tl.store(out_ptr + i * n + offs, FNS[i](x), mask=mask)


@tlxc.kernel
def binary_rows(x_ptr, y_ptr, out_ptr, n, FNS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    for i in tl.static_range(len(FNS)):
        x = tl.load(x_ptr + i * n + offs, mask=mask)
        y = tl.load(y_ptr + i * n + offs, mask=mask)
        tl.store(out_ptr + i * n + offs, FNS[i](x, y), mask=mask)


@tlxc.kernel
def predicate_rows(x_ptr, out_ptr, n, FNS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    for i in tl.static_range(len(FNS)):
        x = tl.load(x_ptr + i * n + offs, mask=mask)
        tl.store(out_ptr + i * n + offs, FNS[i](x).to(tl.int32), mask=mask)


@tlxc.kernel
def attention_style(x_ptr, out_ptr, n, qk_scale, BLOCK: tl.constexpr):
    """What the attention tutorials write: exp2 of scaled scores, log2 of the row sum, rsqrt."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    p = tl.math.exp2(x * qk_scale)
    lse = tl.math.log2(tl.sum(tl.where(mask, p, 0.0), axis=0))
    y = p * tl.math.rsqrt(tl.abs(x) + 1.0) + lse + tl.math.fma(x, x, 1.0) + tl.math.div_rn(x, 3.0)
    tl.store(out_ptr + offs, y, mask=mask)


@tlxc.kernel
def literal_exponents(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, libdevice.pow(x, 3), mask=mask)                # powi
    tl.store(out_ptr + n + offs, libdevice.pow(x, 0.5), mask=mask)          # powf
    tl.store(out_ptr + 2 * n + offs, libdevice.ldexp(x, -3), mask=mask)


# -- domains and references ---------------------------------------------------------------

def _specials(dtype) -> list[float]:
    tiny = F64_SUBNORMAL if dtype == np.float64 else F32_SUBNORMAL
    return [math.nan, math.inf, -math.inf, 0.0, -0.0, tiny, -tiny, 1.0, -1.0]


def _domain(kind: str, rng, dtype):
    count = N - len(_specials(dtype))
    draw = {
        "wide": lambda: rng.standard_normal(count) * 20,
        "small": lambda: rng.uniform(-3, 3, count),
        "positive": lambda: np.exp(rng.uniform(-20, 20, count)),
        "unit": lambda: rng.uniform(-0.999, 0.999, count),
        "ge1": lambda: 1 + np.exp(rng.uniform(-10, 5, count)),
        "two": lambda: rng.uniform(0.001, 1.999, count),
        "prob": lambda: rng.uniform(0.0001, 0.9999, count),
        "halves": lambda: np.round(rng.uniform(-8, 8, count) * 4) / 4,    # ties of round/rint
        "pi": lambda: rng.uniform(-math.pi, math.pi, count),
        "gamma": lambda: rng.uniform(-6, 30, count),
        "lgamma": lambda: rng.uniform(-2.2, 30, count),     # CUDA's lgammaf bound excludes [-10, -2.264]
        "near1": lambda: rng.uniform(0.5, 2, count),
    }[kind]
    values = np.concatenate([draw(), _specials(dtype)])
    with np.errstate(over="ignore"):                    # f16: large draws become +-inf
        return values.astype(dtype).astype(np.float64)


def _t(fn):
    """A torch float64 function as a numpy one."""
    return lambda *xs: fn(*[torch.from_numpy(np.asarray(x, dtype=np.float64)) for x in xs]).numpy()


# C99 values at +-inf (torch.special gives NaN there): (f(+inf), f(-inf)).
_C99_INF = {"j0": (0.0, 0.0), "j1": (0.0, -0.0), "y0": (0.0, math.nan), "y1": (0.0, math.nan),
            "i0": (math.inf, math.inf), "i1": (math.inf, -math.inf)}


def _t_c99(fn, name):
    """``_t(fn)``, with the C99 values at the infinities."""
    plus, minus = _C99_INF[name]

    def reference(x):
        x = np.asarray(x, dtype=np.float64)
        return np.where(x == np.inf, plus, np.where(x == -np.inf, minus, _t(fn)(x)))
    return reference


def _elementwise(fn):
    return lambda *xs: np.array([fn(*v) for v in zip(*xs)], dtype=np.float64)


def _round_half_away(x: float) -> float:
    if not math.isfinite(x):
        return x
    rounded = float(decimal.Decimal(x).to_integral_value(decimal.ROUND_HALF_UP))
    return math.copysign(rounded, x)


def _ieee_remainder(x: float, y: float) -> float:
    if not (math.isfinite(x) and math.isfinite(y)) or y == 0:
        return math.remainder(x, y) if not math.isnan(x) and not math.isnan(y) and \
            not math.isinf(x) and y != 0 else (x if math.isinf(y) and math.isfinite(x) else math.nan)
    quotient = fractions.Fraction(x) / fractions.Fraction(y)
    n = round(quotient)                          # Python's round of a Fraction: ties to even
    result = float(fractions.Fraction(x) - n * fractions.Fraction(y))
    return math.copysign(0.0, x) if result == 0 else result


def _fmod(x: float, y: float) -> float:
    return math.nan if math.isnan(x) or math.isnan(y) or math.isinf(x) or y == 0 else math.fmod(x, y)


def _tgamma(x: float) -> float:
    if math.isnan(x) or x == -math.inf or (x < 0 and x == math.floor(x)):
        return math.nan
    if x == 0:
        return math.copysign(math.inf, x)
    if x == math.inf:
        return math.inf
    return _mp(mpmath.gamma, x)


def _logb(x):
    exponent = torch.frexp(torch.from_numpy(np.asarray(x, dtype=np.float64)))[1]
    exponent = exponent.double().numpy() - 1
    return np.where(x == 0, -np.inf, np.where(np.isfinite(x), exponent, np.abs(x)))


def _mp(fn, v: float) -> float:
    """``fn(v)`` in 100-bit arithmetic (mpmath); sinpi keeps the sign of a zero argument."""
    if not math.isfinite(v):
        return math.nan
    with mpmath.workprec(100):
        result = float(fn(mpmath.mpf(v)))
    return math.copysign(0.0, v) if result == 0 and fn is mpmath.sinpi else result


def _erfcinv(v: float) -> float:
    if not 0 < v < 2:
        return math.copysign(math.inf, 1 - v) if v in (0, 2) else math.nan
    with mpmath.workprec(80 + max(0, -math.frexp(v)[1])):       # 1 - v exactly, even for tiny v
        return float(mpmath.erfinv(1 - mpmath.mpf(v)))


def _normal_cdf(v: float) -> float:
    if math.isinf(v):
        return 1.0 if v > 0 else 0.0
    return _mp(mpmath.ncdf, v)


def _normal_quantile(p: float) -> float:
    if p == 0 or p == 1:
        return math.copysign(math.inf, p - 0.5)
    return statistics.NormalDist().inv_cdf(p) if 0 < p < 1 else math.nan


def _saturate(x):
    return np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0))


@dataclass(frozen=True)
class Fn:
    domain: str
    reference: object
    gpu_f32: float = 2         # GPU bound, ulps (CUDA Programming Guide, math functions)
    gpu_f64: float = 2
    atol: float = 0.0          # added to the GPU bound, where a function has zeros or is absolute
    f32_only: bool = False
    cpu_f64: float = 2


FLOAT_UNARY = {
    "exp": Fn("wide", _t(torch.exp), 2, 1), "exp2": Fn("wide", _t(torch.exp2), 2, 1, atol=2e-38),
    "exp10": Fn("wide", lambda x: np.power(10.0, x), 2, 1), "expm1": Fn("wide", _t(torch.expm1), 1, 1),
    "log": Fn("positive", _t(torch.log), 1, 1), "log2": Fn("positive", _t(torch.log2), 1, 1),
    "log10": Fn("positive", _t(torch.log10), 2, 1), "log1p": Fn("positive", _t(torch.log1p), 1, 1),
    "sqrt": Fn("positive", np.sqrt, 1, 0), "sqrt_rn": Fn("positive", np.sqrt, 0, 0),   # f32 sqrt.approx
    "rsqrt": Fn("positive", _t(torch.rsqrt), 2, 1), "rsqrt_rn": Fn("positive", _t(torch.rsqrt), 1, 0, f32_only=True),
    "rcp_rn": Fn("wide", np.reciprocal, 0, 0),
    "cbrt": Fn("wide", _elementwise(math.cbrt), 1, 1),
    "rcbrt": Fn("wide", _elementwise(lambda v: 1 / math.cbrt(v) if v != 0 else math.copysign(math.inf, v)), 1, 1,
                  cpu_f64=4),
    "sin": Fn("wide", _t(torch.sin), 2, 2), "cos": Fn("wide", _t(torch.cos), 2, 2),
    "tan": Fn("small", _t(torch.tan), 4, 2), "asin": Fn("unit", _t(torch.asin), 2, 2),
    "acos": Fn("unit", _t(torch.acos), 2, 2), "atan": Fn("wide", _t(torch.atan), 2, 2),
    "sinh": Fn("small", _t(torch.sinh), 3, 2), "cosh": Fn("small", _t(torch.cosh), 2, 1),
    "tanh": Fn("small", _t(torch.tanh), 2, 1), "asinh": Fn("wide", _t(torch.asinh), 3, 3),
    "acosh": Fn("ge1", _t(torch.acosh), 4, 3), "atanh": Fn("unit", _t(torch.atanh), 3, 2),
    "sinpi": Fn("wide", _elementwise(lambda v: _mp(mpmath.sinpi, v)), 1, 2),
    "cospi": Fn("wide", _elementwise(lambda v: _mp(mpmath.cospi, v)), 1, 2),
    "erf": Fn("small", _t(torch.special.erf), 2, 2), "erfc": Fn("small", _t(torch.special.erfc), 4, 5),
    "erfinv": Fn("unit", _t(torch.special.erfinv), 2, 5),
    "erfcinv": Fn("two", _elementwise(_erfcinv), 4, 6, cpu_f64=4),
    "erfcx": Fn("small", _t(torch.special.erfcx), 4, 6),   # f64: CUDA's 4 ulp + torch's own ~2
    "normcdf": Fn("small", _elementwise(_normal_cdf), 5, 5, cpu_f64=16),
    "normcdfinv": Fn("prob", _elementwise(_normal_quantile), 5, 8, cpu_f64=16),
    "lgamma": Fn("lgamma", _t(torch.lgamma), 6, 4, atol=1e-5),
    "tgamma": Fn("gamma", _elementwise(_tgamma), 5, 10, cpu_f64=512),
    "j0": Fn("wide", _t_c99(torch.special.bessel_j0, "j0"), 9, 7, atol=2.2e-6),
    "j1": Fn("wide", _t_c99(torch.special.bessel_j1, "j1"), 9, 7, atol=2.2e-6),
    "y0": Fn("positive", _t_c99(torch.special.bessel_y0, "y0"), 9, 7, atol=2.2e-6),
    "y1": Fn("positive", _t_c99(torch.special.bessel_y1, "y1"), 9, 7, atol=2.2e-6),
    "cyl_bessel_i0": Fn("small", _t_c99(torch.special.i0, "i0"), 6, 6),
    "cyl_bessel_i1": Fn("small", _t_c99(torch.special.i1, "i1"), 6, 6),
    "floor": Fn("halves", _t(torch.floor), 0, 0), "ceil": Fn("halves", _t(torch.ceil), 0, 0),
    "trunc": Fn("halves", _t(torch.trunc), 0, 0), "round": Fn("halves", _elementwise(_round_half_away), 0, 0),
    "rint": Fn("halves", _t(torch.round), 0, 0), "nearbyint": Fn("halves", _t(torch.round), 0, 0),
    "logb": Fn("wide", _logb, 0, 0), "saturatef": Fn("small", _saturate, 0, 0, f32_only=True),
    # the fast intrinsics: absolute bounds on their documented ranges
    "fast_expf": Fn("small", _t(torch.exp), 8, f32_only=True),
    "fast_exp10f": Fn("small", lambda x: np.power(10.0, x), 16, f32_only=True),
    "fast_logf": Fn("positive", _t(torch.log), 3, atol=4e-7, f32_only=True),
    "fast_log2f": Fn("positive", _t(torch.log2), 2, atol=3e-7, f32_only=True),
    "fast_log10f": Fn("positive", _t(torch.log10), 3, atol=4e-7, f32_only=True),
    "fast_sinf": Fn("pi", _t(torch.sin), 0, atol=5e-7, f32_only=True),
    "fast_cosf": Fn("pi", _t(torch.cos), 0, atol=5e-7, f32_only=True),
    "fast_tanf": Fn("unit", _t(torch.tan), 4, atol=1e-6, f32_only=True),
}

FLOAT_BINARY = {
    "pow": Fn("positive", _t(torch.pow), 4, 2), "atan2": Fn("wide", _t(torch.atan2), 3, 2),
    "hypot": Fn("wide", _t(torch.hypot), 3, 2),
    "rhypot": Fn("wide", lambda x, y: 1 / np.hypot(x, y), 2, 1),
    "copysign": Fn("wide", _t(torch.copysign), 0, 0), "fmod": Fn("wide", _elementwise(_fmod), 0, 0),
    "remainder": Fn("wide", _elementwise(_ieee_remainder), 0, 0),
    "fdim": Fn("wide", lambda x, y: np.where(np.isnan(x) | np.isnan(y), np.nan, np.maximum(x - y, 0.0)), 0, 0),
    "div_rn": Fn("wide", np.true_divide, 0, 0), "add_rn": Fn("wide", np.add, 0, 0),
    "sub_rn": Fn("wide", np.subtract, 0, 0), "mul_rn": Fn("wide", np.multiply, 0, 0),
    "fast_dividef": Fn("small", np.true_divide, 2, f32_only=True),
    "fast_powf": Fn("near1", _t(torch.pow), 64, f32_only=True),
}
# nextafter steps in the operands' own type: checked separately


def _inputs(fns: dict, dtype, seed: int, arity: int):
    rng = np.random.default_rng(seed)
    rows = [[_domain(fns[name].domain, rng, dtype) for name in fns] for _ in range(arity)]
    if arity == 2:      # pair every special value with ordinary and special partners
        rows[1] = [np.roll(row, 7) for row in rows[1]]
    return [np.stack(r) for r in rows]


def _run(kernel, fns, inputs, dtype, out_dtype=None, **meta):
    """Run ``kernel`` on the interpreter (or the GPU with ``device='cuda'``)."""
    device = meta.pop("device", "cpu")
    torch_dtype = {np.float32: torch.float32, np.float64: torch.float64, np.float16: torch.float16}[dtype]
    args = [torch.from_numpy(x).to(torch_dtype).to(device) for x in inputs]
    out = torch.full(inputs[0].shape, POISON, dtype=out_dtype or torch_dtype, device=device)
    grid = (triton_cdiv(N, BLOCK),)
    launcher = tlxc.interpret(kernel) if device == "cpu" else kernel
    launcher[grid](*args, out, N, FNS=tuple(fns), BLOCK=BLOCK, **meta)
    return out.cpu().double().numpy()


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def _reference(fn: Fn, inputs, dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        wide = np.asarray(fn.reference(*inputs), dtype=np.float64)
        if dtype == np.float16:
            wide = wide.astype(np.float32)
        return wide.astype(dtype).astype(np.float64)


def ulp_violations(got, ref, dtype, ulps: float, atol: float = 0.0) -> np.ndarray:
    """Indices where ``got`` is not within ``ulps`` ulps (+ ``atol``) of ``ref``; NaNs must
    match NaNs, infinities must match exactly."""
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    nan_ok = np.isnan(got) == np.isnan(ref)
    inf = np.isinf(ref) | np.isinf(got)
    with np.errstate(invalid="ignore", over="ignore"):
        spacing = np.spacing(np.abs(ref).astype(dtype)).astype(np.float64)
        close = np.abs(got - ref) <= ulps * spacing + atol
    ok = np.where(np.isnan(ref) | np.isnan(got), nan_ok, np.where(inf, got == ref, close))
    return np.nonzero(~ok)


def _check(name, got, ref, inputs, dtype, ulps, atol=0.0):
    bad = ulp_violations(got, ref, dtype, ulps, atol)[0]
    if bad.size:
        i = bad[0]
        args = ", ".join(repr(float(x[i])) for x in inputs)
        pytest.fail(f"{name}({args}) = {got[i]!r}, expected {ref[i]!r} within {ulps} ulp + {atol} "
                    f"({bad.size} of {got.size} elements)")


def _families(f32_only_allowed: bool, table: dict) -> dict:
    return {k: v for k, v in table.items() if f32_only_allowed or not v.f32_only}


# -- the interpreter against the references ------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_unary_functions_interpreter(dtype):
    fns = _families(dtype == np.float32, FLOAT_UNARY)
    (x,) = _inputs(fns, dtype, seed=1, arity=1)
    out = _run(unary_rows, [getattr(libdevice, name) for name in fns], [x], dtype)
    for row, (name, fn) in enumerate(fns.items()):
        ulps = 1 if dtype == np.float32 else fn.cpu_f64
        _check(name, out[row], _reference(fn, [x[row]], dtype), [x[row]], dtype, ulps, 1e-300)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_binary_functions_interpreter(dtype):
    fns = _families(dtype == np.float32, FLOAT_BINARY)
    x, y = _inputs(fns, dtype, seed=2, arity=2)
    out = _run(binary_rows, [getattr(libdevice, name) for name in fns], [x, y], dtype)
    for row, (name, fn) in enumerate(fns.items()):
        ulps = 0 if fn.gpu_f32 == 0 else (1 if dtype == np.float32 else fn.cpu_f64)
        _check(name, out[row], _reference(fn, [x[row], y[row]], dtype), [x[row], y[row]], dtype, ulps)


def test_correctly_rounded_ops_match_torch_float32_bit_for_bit():
    """add/sub/mul/div_rn and sqrt_rn against torch's own f32 arithmetic (IEEE, one rounding)."""
    fns = {name: FLOAT_BINARY[name] for name in ("add_rn", "sub_rn", "mul_rn", "div_rn")}
    x, y = _inputs(fns, np.float32, seed=3, arity=2)
    out = _run(binary_rows, [getattr(tl.math if name == "div_rn" else libdevice, name) for name in fns],
               [x, y], np.float32)
    xt, yt = torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y.astype(np.float32))
    for row, expected in enumerate((xt + yt, xt - yt, xt * yt, xt / yt)):
        assert np.array_equal(out[row], expected[row].double().numpy(), equal_nan=True), list(fns)[row]


def test_narrow_floats_compute_in_float32():
    """f16 operands: the f32 function, rounded to f16 (what the GPU does)."""
    fns = {name: FLOAT_UNARY[name] for name in ("exp", "tanh", "sqrt", "erf", "floor", "log1p", "sinh")}
    (x,) = _inputs(fns, np.float16, seed=4, arity=1)
    out = _run(unary_rows, [getattr(libdevice, name) for name in fns], [x], np.float16)
    for row, (name, fn) in enumerate(fns.items()):
        _check(name, out[row], _reference(fn, [x[row]], np.float16), [x[row]], np.float16, 0)


def test_nextafter_steps_in_the_operand_type():
    for dtype, torch_dtype in ((np.float32, torch.float32), (np.float64, torch.float64)):
        x, y = _inputs({"nextafter": FLOAT_BINARY["fmod"]}, dtype, seed=5, arity=2)
        out = _run(binary_rows, [libdevice.nextafter], [x, y], dtype)
        expected = torch.nextafter(torch.from_numpy(x).to(torch_dtype), torch.from_numpy(y).to(torch_dtype))
        assert np.array_equal(out, expected.double().numpy(), equal_nan=True)


def test_exp2_flushes_float32_subnormals_like_ex2_approx_ftz():
    x = np.zeros((1, N))
    x[0, :6] = [F32_SUBNORMAL, -F32_SUBNORMAL, -130.0, -149.0, -126.0, 127.5]
    out = _run(unary_rows, [tl.math.exp2], [x], np.float32)
    assert out[0, 0] == 1.0 and out[0, 1] == 1.0
    assert out[0, 2] == 0.0 and out[0, 3] == 0.0           # 2^-130, 2^-149 are subnormal: flushed
    assert out[0, 4] == 2.0 ** -126 and out[0, 5] == np.float32(2 ** 127.5)


PREDICATES = {"isnan": np.isnan, "isinf": np.isinf, "signbit": np.signbit, "finitef": np.isfinite}


def test_predicates_on_special_values():
    values = np.array(_specials(np.float32) + [-1e-45, 3.4e38, -3.4e38] + [0.5] * (N - 12))
    x = np.stack([values] * len(PREDICATES))
    out = _run(predicate_rows, [getattr(libdevice, name) for name in PREDICATES], [x], np.float32,
               out_dtype=torch.int32)
    f32 = values.astype(np.float32)
    for row, (name, fn) in enumerate(PREDICATES.items()):
        assert np.array_equal(out[row], fn(f32).astype(np.float64)), name
    out64 = _run(predicate_rows, [libdevice.isfinited, libdevice.signbit], [x[:2]], np.float64,
                 out_dtype=torch.int32)
    assert np.array_equal(out64[0], np.isfinite(values)) and np.array_equal(out64[1], np.signbit(values))


def _bits_reference(name: str, value: int, bits: int) -> int:
    u = value & ((1 << bits) - 1)
    if name == "clz":
        return bits - u.bit_length()
    if name == "popc":
        return u.bit_count()
    if name == "ffs":
        return (u & -u).bit_length()
    reversed_bits = int(f"{u:0{bits}b}"[::-1], 2)          # brev
    return reversed_bits - (1 << bits) if reversed_bits >= 1 << (bits - 1) else reversed_bits


@pytest.mark.parametrize("torch_dtype,bits", [(torch.int32, 32), (torch.int64, 64)], ids=["i32", "i64"])
def test_bit_functions(torch_dtype, bits):
    names = ("clz", "popc", "ffs", "brev")
    gen = torch.Generator().manual_seed(6)
    x = torch.randint(-2**(bits - 1), 2**(bits - 1) - 1, (len(names), N), generator=gen, dtype=torch_dtype)
    x[:, :4] = torch.tensor([0, -1, 1, -2**(bits - 1)], dtype=torch_dtype)
    for row, name in enumerate(names):
        out_dtype = torch_dtype if name == "brev" else torch.int32
        out = torch.full((1, N), 0x5A5A, dtype=out_dtype)
        tlxc.interpret(unary_rows)[(triton_cdiv(N, BLOCK),)](x[row:row + 1].clone(), out, N,
                                                          FNS=(getattr(libdevice, name),), BLOCK=BLOCK)
        expected = [_bits_reference(name, int(v), bits) for v in x[row]]
        assert out[0].tolist() == expected, name


@pytest.mark.parametrize("torch_dtype,bits", [(torch.int32, 32), (torch.int64, 64), (torch.uint32, 32)],
                         ids=["i32", "i64", "u32"])
def test_mulhi_and_umulhi(torch_dtype, bits):
    gen = torch.Generator().manual_seed(7)
    low, high = (0, 2**32 - 1) if torch_dtype == torch.uint32 else (-2**(bits - 1), 2**(bits - 1) - 1)
    x = torch.randint(low, high, (2, N), generator=gen, dtype=torch.int64).to(torch_dtype)
    y = torch.randint(low, high, (2, N), generator=gen, dtype=torch.int64).to(torch_dtype)
    x[:, 0], y[:, 0] = high, high
    out = torch.zeros((2, N), dtype=torch_dtype)
    tlxc.interpret(binary_rows)[(triton_cdiv(N, BLOCK),)](x, y, out, N, FNS=(libdevice.mulhi, tl.math.umulhi),
                                                        BLOCK=BLOCK)
    mask = (1 << bits) - 1

    def signed(v):
        return v - (1 << bits) if v >= 1 << (bits - 1) and torch_dtype != torch.uint32 else v
    for a, b, got in zip(x[0].tolist(), y[0].tolist(), out[0].tolist()):
        assert got == signed(((a * b) >> bits) & mask), ("mulhi", a, b)
    for a, b, got in zip(x[1].tolist(), y[1].tolist(), out[1].tolist()):
        assert got == signed((((a & mask) * (b & mask)) >> bits) & mask), ("umulhi", a, b)


def test_literal_exponents_pick_powi_and_ldexp():
    x = torch.randn(N, dtype=torch.float64).float()
    x[:3] = torch.tensor([-2.0, -0.0, float("inf")])
    out = torch.full((3 * N,), POISON)
    tlxc.interpret(literal_exponents)[(triton_cdiv(N, BLOCK),)](x, out, N, BLOCK=BLOCK)
    xd = x.double()
    for got, expected in ((out[:N], xd ** 3), (out[N:2 * N], xd ** 0.5), (out[2 * N:], xd / 8)):
        _check("pow/ldexp", got.double().numpy(), expected.float().double().numpy(), [x.numpy()], np.float32, 1)


def test_attention_idiom_matches_torch():
    x = torch.randn(N) * 4
    out = torch.full((N,), POISON)
    scale = 0.125 * 1.4426950408889634
    tlxc.interpret(attention_style)[(1,)](x, out, N, scale, BLOCK=256)
    xd = x.double()
    p = torch.exp2(xd * np.float32(scale))
    expected = p / torch.sqrt(xd.abs() + 1) + torch.log2(p.sum()) + (xd * xd + 1) + xd / 3
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-5)


def test_bitcasts():
    x = torch.randn(1, N)
    out = torch.zeros((1, N), dtype=torch.int32)
    tlxc.interpret(unary_rows)[(2,)](x, out, N, FNS=(libdevice.float_as_int,), BLOCK=BLOCK)
    assert torch.equal(out, x.view(torch.int32))
    back = torch.full((1, N), POISON)
    tlxc.interpret(unary_rows)[(2,)](out, back, N, FNS=(libdevice.int_as_float,), BLOCK=BLOCK)
    assert torch.equal(back, x)


# -- namespaces, IR text form, cubins ------------------------------------------------------

def test_namespaces():
    from tlxc.language.extra.cuda import libdevice as cuda_libdevice
    assert cuda_libdevice.tanh is libdevice.tanh and tl.extra.libdevice.pow is libdevice.pow
    for name in ("exp", "exp2", "log", "log2", "cos", "sin", "sqrt", "sqrt_rn", "rsqrt", "abs", "fdiv",
                 "div_rn", "erf", "floor", "ceil", "fma", "umulhi"):          # Triton's tl.math
        assert hasattr(tl.math, name), name
    assert str(__import__("inspect").signature(tl.math.fdiv)) == "(x, y, ieee_rounding=False)"
    assert str(__import__("inspect").signature(libdevice.pow)) == "(arg0, arg1)"
    with pytest.raises(CompilationError, match="called outside a kernel"):
        libdevice.tanh(1.0)


def _spec(kernel, dtype, fns, arity=1, out=None):
    types = {name: PointerType(dtype) for name in ("x_ptr", "y_ptr")[:arity]}
    types.update(out_ptr=PointerType(out or dtype), n=i32)
    return specialization_from_types(kernel, types, {"FNS": tuple(fns), "BLOCK": BLOCK})


def test_ir_round_trips():
    fns = [getattr(libdevice, name) for name in FLOAT_UNARY]
    texts = []
    for kernel, spec in ((unary_rows, _spec(unary_rows, f32, fns)),
                         (binary_rows, _spec(binary_rows, f64, [getattr(libdevice, n) for n, f in FLOAT_BINARY.items()
                                                                if not f.f32_only]
                                              + [libdevice.nextafter, libdevice.pow], arity=2)),
                         (predicate_rows, _spec(predicate_rows, f32, [getattr(libdevice, n) for n in PREDICATES],
                                                out=i32)),
                         (unary_rows, _spec(unary_rows, i64, [libdevice.clz, libdevice.popc, libdevice.ffs],
                                            out=i32)),
                         (literal_exponents, specialization_from_types(
                             literal_exponents, {"x_ptr": PointerType(f32), "out_ptr": PointerType(f32), "n": i32},
                             {"BLOCK": BLOCK}))):
        text = compile_kernel(kernel, spec, stages=("ir",)).asm["ir"]
        assert print_module(parse_module(text)) == text
        texts.append(text)
    joined = "\n".join(texts)
    for op in ("math.tanh", "math.erfinv", "math.fast_expf", "math.pow", "math.powi", "math.ldexp",
               "math.isnan", "math.signbit", "math.clz", "math.nextafter", "arith.rem"):
        assert op in joined, op


def _cubin(kernel, spec):
    compiled = compile_kernel(kernel, spec, arch="sm_90a")
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    return compiled.asm["cuda"]


def test_sm90a_cubins_for_every_function():
    unary32 = [getattr(libdevice, n) for n in FLOAT_UNARY]
    unary64 = [getattr(libdevice, n) for n, f in FLOAT_UNARY.items() if not f.f32_only]
    binary32 = [getattr(libdevice, n) for n in FLOAT_BINARY] + [libdevice.nextafter, libdevice.pow]
    binary64 = [getattr(libdevice, n) for n, f in FLOAT_BINARY.items() if not f.f32_only] + [libdevice.nextafter]
    cuda = _cubin(unary_rows, _spec(unary_rows, f32, unary32))
    assert "tanhf(" in cuda and "__expf(" in cuda and "erfinvf(" in cuda and "tlx_ex2_approx_ftz_f32(" in cuda
    cuda = _cubin(unary_rows, _spec(unary_rows, f64, unary64))
    assert "tanh(" in cuda and "__dsqrt_rn(" in cuda and "exp2(" in cuda
    _cubin(unary_rows, _spec(unary_rows, f16, [libdevice.tanh, libdevice.fast_expf, tl.math.exp2]))
    cuda = _cubin(binary_rows, _spec(binary_rows, f32, binary32, arity=2))
    assert "__fdiv_rn(" in cuda and "__powf(" in cuda and "remainderf(" in cuda
    _cubin(binary_rows, _spec(binary_rows, f64, binary64, arity=2))
    _cubin(predicate_rows, _spec(predicate_rows, f32, [getattr(libdevice, n) for n in PREDICATES], out=i32))
    _cubin(predicate_rows, _spec(predicate_rows, f64, [libdevice.isnan, libdevice.isinf, libdevice.isfinited,
                                                       libdevice.signbit], out=i32))
    for dtype in (i32, i64):
        _cubin(unary_rows, _spec(unary_rows, dtype, [libdevice.clz, libdevice.popc, libdevice.ffs], out=i32))
        _cubin(unary_rows, _spec(unary_rows, dtype, [libdevice.brev]))
        cuda = _cubin(binary_rows, _spec(binary_rows, dtype, [libdevice.mulhi, tl.math.umulhi], arity=2))
        assert ("__umulhi(" if dtype == i32 else "__umul64hi(") in cuda
    _cubin(literal_exponents, specialization_from_types(
        literal_exponents, {"x_ptr": PointerType(f32), "out_ptr": PointerType(f32), "n": i32}, {"BLOCK": BLOCK}))


# -- errors ----------------------------------------------------------------------------------

@tlxc.kernel
def unknown_function(x_ptr, out_ptr):
    tl.store(out_ptr, tl.math.frobnicate(tl.load(x_ptr)))


@tlxc.kernel
def fast_on_f64(x_ptr, out_ptr):
    tl.store(out_ptr, libdevice.fast_expf(tl.load(x_ptr)))


@tlxc.kernel
def clz_on_float(x_ptr, out_ptr):
    tl.store(out_ptr, libdevice.clz(tl.load(x_ptr)))


@tlxc.kernel
def pow_one_argument(x_ptr, out_ptr):
    tl.store(out_ptr, libdevice.pow(tl.load(x_ptr)))


@pytest.mark.parametrize("kernel,dtype,message", [
    (unknown_function, torch.float32, r"module 'tl\.math' has no attribute 'frobnicate'.*it has: .*acos.*tanh"),
    (fast_on_f64, torch.float64, r"libdevice\.fast_expf: fast_expf is a float32 function, got float64; use exp "),
    (clz_on_float, torch.float32, r"libdevice\.clz: needs a 32- or 64-bit integer operand"),
    (pow_one_argument, torch.float32, r"libdevice\.pow\(\): missing a required argument: 'arg1'"),
])
def test_errors_name_the_function(kernel, dtype, message):
    x = torch.ones(1, dtype=dtype)
    with pytest.raises(CompilationError, match=message) as info:
        tlxc.interpret(kernel)[(1,)](x, x.clone())
    assert info.value.loc is not None and info.value.loc.line == kernel.fn.__code__.co_firstlineno + 2


# -- the GPU (run on the H200 by the lead) ----------------------------------------------------

def _slack(fn: Fn, dtype, label: str) -> float:
    """What the comparand adds: the interpreter its own bound; an f64 reference (torch's
    vectorized libm) up to 1 ulp where the function is not correctly rounded."""
    if label == "interpreter":
        return 1 if dtype == np.float32 else fn.cpu_f64
    return 1 if dtype == np.float64 and _gpu_bound(fn, dtype) > 0 else 0


def _gpu_bound(fn: Fn, dtype) -> float:
    return fn.gpu_f32 if dtype == np.float32 else fn.gpu_f64


def _gpu_inputs(fns, dtype, seed, arity):
    inputs = _inputs(fns, dtype, seed, arity)
    specials = len(_specials(dtype))
    for row, name in enumerate(fns):
        for x in inputs:
            if name.startswith("fast_"):          # the intrinsics keep no special-value rules
                x[row][-specials:] = 0.75
            elif name == "exp2" and dtype == np.float32:        # ex2.approx.ftz reads them as 0
                x[row][np.abs(x[row]) < 1e-37] = 0.0
    return inputs


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_gpu_unary_functions(dtype):
    fns = _families(dtype == np.float32, FLOAT_UNARY)
    (x,) = _gpu_inputs(fns, dtype, seed=11, arity=1)
    builtins_ = [getattr(libdevice, name) for name in fns]
    gpu = _run(unary_rows, builtins_, [x], dtype, device="cuda")
    cpu = _run(unary_rows, builtins_, [x], dtype)
    failures = []
    for row, (name, fn) in enumerate(fns.items()):
        bound = _gpu_bound(fn, dtype)
        for label, expected in (("reference", _reference(fn, [x[row]], dtype)), ("interpreter", cpu[row])):
            slack = _slack(fn, dtype, label)
            bad = ulp_violations(gpu[row], expected, dtype, bound + slack, fn.atol)[0]
            if bad.size:
                i = bad[0]
                failures.append(f"{name}({x[row][i]!r}) = {gpu[row][i]!r} on the GPU, {label} {expected[i]!r} "
                                f"(bound {bound} ulp + {fn.atol}; {bad.size} elements)")
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_gpu_binary_functions(dtype):
    fns = _families(dtype == np.float32, FLOAT_BINARY)
    x, y = _gpu_inputs(fns, dtype, seed=12, arity=2)
    builtins_ = [getattr(libdevice, name) for name in fns]
    gpu = _run(binary_rows, builtins_, [x, y], dtype, device="cuda")
    cpu = _run(binary_rows, builtins_, [x, y], dtype)
    failures = []
    for row, (name, fn) in enumerate(fns.items()):
        bound = _gpu_bound(fn, dtype)
        for label, expected in (("reference", _reference(fn, [x[row], y[row]], dtype)), ("interpreter", cpu[row])):
            slack = _slack(fn, dtype, label)
            bad = ulp_violations(gpu[row], expected, dtype, bound + slack, fn.atol)[0]
            if bad.size:
                i = bad[0]
                failures.append(f"{name}({x[row][i]!r}, {y[row][i]!r}) = {gpu[row][i]!r} on the GPU, {label} "
                                f"{expected[i]!r} ({bad.size} elements)")
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
def test_gpu_exact_functions_equal_the_interpreter():
    """Predicates, bit functions, nextafter, mulhi/umulhi, literal exponents, f16: bit for bit."""
    values = np.array(_specials(np.float32) + list(np.linspace(-5, 5, N - 9)))
    x = np.stack([values] * len(PREDICATES))
    gpu = _run(predicate_rows, [getattr(libdevice, n) for n in PREDICATES], [x], np.float32,
               out_dtype=torch.int32, device="cuda")
    cpu = _run(predicate_rows, [getattr(libdevice, n) for n in PREDICATES], [x], np.float32, out_dtype=torch.int32)
    assert np.array_equal(gpu, cpu)
    xn, yn = _inputs({"nextafter": FLOAT_BINARY["fmod"]}, np.float32, seed=13, arity=2)
    assert np.array_equal(_run(binary_rows, [libdevice.nextafter], [xn, yn], np.float32, device="cuda"),
                          _run(binary_rows, [libdevice.nextafter], [xn, yn], np.float32), equal_nan=True)
    fns = {name: FLOAT_UNARY[name] for name in ("tanh", "sqrt", "floor", "exp")}
    (xh,) = _inputs(fns, np.float16, seed=14, arity=1)
    gpu16 = _run(unary_rows, [getattr(libdevice, n) for n in fns], [xh], np.float16, device="cuda")
    cpu16 = _run(unary_rows, [getattr(libdevice, n) for n in fns], [xh], np.float16)
    for row, name in enumerate(fns):
        assert not ulp_violations(gpu16[row], cpu16[row], np.float16, 1)[0].size, name
    for torch_dtype in (torch.int32, torch.int64, torch.uint32):
        gen = torch.Generator().manual_seed(15)
        a = torch.randint(-2**31, 2**31 - 1, (2, N), generator=gen, dtype=torch.int64).to(torch_dtype)
        b = torch.randint(-2**31, 2**31 - 1, (2, N), generator=gen, dtype=torch.int64).to(torch_dtype)
        outs = []
        for launcher, device in ((binary_rows, "cuda"), (tlxc.interpret(binary_rows), "cpu")):
            out = torch.zeros((2, N), dtype=torch_dtype, device=device)
            launcher[(triton_cdiv(N, BLOCK),)](a.to(device), b.to(device), out, N,
                                               FNS=(libdevice.mulhi, tl.math.umulhi), BLOCK=BLOCK)
            outs.append(out.cpu())
        assert torch.equal(outs[0], outs[1]), torch_dtype
    for torch_dtype in (torch.int32, torch.int64):
        gen = torch.Generator().manual_seed(16)
        a = torch.randint(-2**31, 2**31 - 1, (1, N), generator=gen, dtype=torch.int64).to(torch_dtype)
        for fn in (libdevice.clz, libdevice.popc, libdevice.ffs, libdevice.brev):
            outs = []
            for launcher, device in ((unary_rows, "cuda"), (tlxc.interpret(unary_rows), "cpu")):
                out = torch.zeros((1, N), dtype=torch_dtype if fn is libdevice.brev else torch.int32, device=device)
                launcher[(triton_cdiv(N, BLOCK),)](a.to(device), out, N, FNS=(fn,), BLOCK=BLOCK)
                outs.append(out.cpu())
            assert torch.equal(outs[0], outs[1]), (fn.__name__, torch_dtype)


@pytest.mark.gpu
def test_gpu_attention_idiom():
    x = torch.randn(N) * 4
    outs = []
    scale = 0.125 * 1.4426950408889634
    for launcher, device in ((attention_style, "cuda"), (tlxc.interpret(attention_style), "cpu")):
        out = torch.full((N,), POISON, device=device)
        launcher[(1,)](x.to(device), out, N, scale, BLOCK=256)
        outs.append(out.cpu())
    torch.testing.assert_close(outs[0], outs[1], rtol=2e-6, atol=2e-6)
