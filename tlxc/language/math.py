"""``tl.math``: Triton's math namespace, plus the libdevice functions under their names.

Triton's ``tl.math`` holds ``exp exp2 log log2 cos sin sqrt sqrt_rn rsqrt abs fdiv div_rn erf
floor ceil fma umulhi`` (parameters ``x, y, z``).  Older Triton (2.x) put the whole libdevice
surface in ``tl.math``; tlxc accepts those names here too (parameters ``arg0, arg1, ...`` as
in ``tlxc.language.extra.libdevice``), so both generations of kernels port unchanged.

Each function is a builtin: callable only inside a kernel; its rule is
``tlxc/frontend/math_rules.py`` under ``"math.<name>"``.  docs/language.md lists every
function with its CUDA lowering and the interpreter's tolerance.
"""
from __future__ import annotations

import inspect

from .core import outside_kernel_error

_POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD

# (name, parameters, what it computes)
TRITON_MATH = (
    ("umulhi", "x y", "the high half of the 2N-bit unsigned product"),
    ("exp", "x", "e**x"), ("exp2", "x", "2**x (approximate for f32: ex2.approx.ftz)"),
    ("log", "x", "natural logarithm"), ("log2", "x", "base-2 logarithm"),
    ("cos", "x", "cosine"), ("sin", "x", "sine"), ("sqrt", "x", "square root"),
    ("sqrt_rn", "x", "square root, correctly rounded"), ("rsqrt", "x", "1 / sqrt(x) (approximate)"),
    ("abs", "x", "absolute value"), ("fdiv", "x y ieee_rounding=False", "x / y"),
    ("div_rn", "x y", "x / y, correctly rounded"), ("erf", "x", "error function"),
    ("floor", "x", "round toward -inf"), ("ceil", "x", "round toward +inf"),
    ("fma", "x y z", "x * y + z with one rounding"),
)

_UNARY = ("exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sqrt_rn",
          "rsqrt", "rsqrt_rn", "rcp_rn", "cbrt", "rcbrt", "sin", "cos", "tan", "asin", "acos",
          "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sinpi", "cospi", "erf",
          "erfc", "erfinv", "erfcinv", "erfcx", "normcdf", "normcdfinv", "lgamma", "tgamma",
          "j0", "j1", "y0", "y1", "cyl_bessel_i0", "cyl_bessel_i1", "floor", "ceil", "trunc",
          "round", "rint", "nearbyint", "logb", "saturatef", "fast_expf", "fast_exp10f",
          "fast_logf", "fast_log2f", "fast_log10f", "fast_sinf", "fast_cosf", "fast_tanf",
          "isnan", "isinf", "signbit", "finitef", "isfinited", "abs", "clz", "popc", "ffs", "brev",
          "float_as_int", "int_as_float", "float_as_uint", "uint_as_float",
          "double_as_longlong", "longlong_as_double", "llrint", "lrint", "llround", "lround")
_BINARY = ("pow", "atan2", "hypot", "rhypot", "copysign", "fmod", "remainder", "fdim", "nextafter",
           "div_rn", "add_rn", "sub_rn", "mul_rn", "fast_dividef", "fast_powf", "ldexp", "scalbn",
           "mulhi")
_TERNARY = ("fma", "fma_rn")

LIBDEVICE = tuple((name, "arg0", name) for name in _UNARY) + \
    tuple((name, "arg0 arg1", name) for name in _BINARY) + \
    tuple((name, "arg0 arg1 arg2", name) for name in _TERNARY)
"""The libdevice functions tlxc implements, with Triton's parameter names."""


def _signature(params: str) -> inspect.Signature:
    parameters = []
    for spec in params.split():
        name, _, default = spec.partition("=")
        value = inspect.Parameter.empty if not default else {"False": False, "True": True}[default]
        parameters.append(inspect.Parameter(name, _POSITIONAL, default=value))
    return inspect.Signature(parameters)


def math_builtin(name: str, params: str, doc: str, namespace: str):
    """A builtin ``namespace.name`` with the given parameters whose rule is ``math.<name>``."""

    def outside_kernel(*args, **kwargs):
        raise outside_kernel_error(f"{namespace}.{name}")

    outside_kernel.__name__ = outside_kernel.__qualname__ = name
    outside_kernel.__doc__ = f"{doc[:1].upper()}{doc[1:]} (elementwise)."
    outside_kernel.__signature__ = _signature(params)
    outside_kernel.__tlxc_builtin__ = f"math.{name}"
    outside_kernel.__tlxc_signature__ = outside_kernel
    return outside_kernel


def define(namespace: str, table, into: dict) -> tuple[str, ...]:
    """Define every function of ``table`` into the module dict ``into``; return the names."""
    names = []
    for name, params, doc in table:
        if name not in into or not hasattr(into[name], "__tlxc_builtin__"):
            into[name] = math_builtin(name, params, doc, namespace)
            names.append(name)
    return tuple(sorted(names))


__tlxc_namespace__ = define("tl.math", TRITON_MATH, globals()) + define("tl.math", LIBDEVICE, globals())
__all__ = list(__tlxc_namespace__)
