"""Semantic rules of scans and combine-function reductions: ``tl.associative_scan``,
``tl.cumsum``, ``tl.cumprod``, ``tl.reduce`` and ``tl.flip``, as Triton defines them
(``core.py`` / ``standard.py``).

A combine function is a ``@tlxc.jit`` function of 2n scalars (the left operands,
then the right ones) returning n scalars of the operands' dtypes; its IR is built
once, on scalar arguments, into the op's region.  Triton assumes it associative;
so does tlxc (the GPU applies it in a tree order, the interpreter left to right).
"""
from __future__ import annotations

import inspect
import math

from ..ir import types as T
from ..ir.core import Block, Region
from ..ir.types import PointerType, ScalarType, TensorType
from . import semantic as S
from .builtins import const_dtype, const_int, constexpr, reshape, rule, tensor_arg
from .semantic import SemanticError
from .values import Tensor


def _inputs(b, input) -> tuple[list[Tensor], bool]:
    """(the operand tensors, whether they came as a tuple)."""
    is_tuple = isinstance(input, (tuple, list))
    values = [tensor_arg(b, v, "input") for v in (input if is_tuple else (input,))]
    if not values:
        raise SemanticError("'input' is an empty tuple", param="input")
    shape = values[0].shape
    for v in values:
        if not v.is_block:
            raise SemanticError(f"'input' must be a tensor, got {S.describe(v)}", param="input")
        if isinstance(v.dtype, PointerType):
            raise SemanticError(f"'input' must hold numbers, got {S.describe(v)}", param="input")
        if v.shape != shape:
            raise SemanticError(f"the inputs must have one shape, got {list(shape)} and {list(v.shape)}",
                                param="input")
    return values, is_tuple


def _axis(axis, rank: int) -> int:
    axis = const_int(axis, "axis")
    if not -rank <= axis < rank:
        raise SemanticError(f"axis {axis} is out of range for a tensor of rank {rank}", param="axis")
    return axis % rank


def _build_combine(ctx, fn, elems: list[ScalarType]) -> Region:
    """The combine function built on 2n scalar block arguments, ending in scf.yield."""
    from .build_ir import RETURN, FunctionBuilder  # build_ir imports this module
    from .calls import is_kernel_function
    if not is_kernel_function(fn):
        raise SemanticError(f"'combine_fn' must be a @tlxc.jit function or a lambda, got {S.describe(fn)}",
                            param="combine_fn")
    n = len(elems)
    names = list(inspect.signature(fn.fn).parameters)
    if len(names) != 2 * n:
        raise SemanticError(f"'combine_fn' {fn.__name__}() must take {2 * n} arguments (two per input), "
                            f"takes {len(names)}", param="combine_fn")
    block = Block(elems + elems, names)
    with ctx.b.at(block):
        vars = dict(getattr(fn, "captured", {}))             # a lambda's captured constants
        vars.update({name: Tensor(arg) for name, arg in zip(names, block.args)})
        vars[RETURN] = None
        ctx.depth += 1
        try:
            inner = FunctionBuilder(ctx, fn.source, vars)
            inner.visit_stmts(fn.source.tree.body)
        finally:
            ctx.depth -= 1
        result = inner.vars.get(RETURN)
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(results) != n:
            raise SemanticError(f"'combine_fn' {fn.__name__}() must return {n} value{'s' if n > 1 else ''}, "
                                f"got {len(results)}", param="combine_fn")
        yields = []
        for value, elem in zip(results, elems):
            if isinstance(value, (bool, int, float)):
                value = S.constant(ctx.b, value, elem)
            if not isinstance(value, Tensor) or value.is_block or value.dtype != elem:
                raise SemanticError(f"'combine_fn' {fn.__name__}() must return {elem} scalars, got "
                                    f"{S.describe(value)}", param="combine_fn")
            yields.append(value.value)
        ctx.b.create("scf.yield", yields)
    return Region(block)


def scan(ctx, values: list[Tensor], axis: int, combine, reverse: bool) -> list[Tensor]:
    elems = [v.dtype for v in values]
    region = _build_combine(ctx, combine, elems) if not isinstance(combine, Region) else combine
    op = ctx.b.create("tl.scan", [v.value for v in values], [v.type for v in values],
                      {"axis": axis, "reverse": reverse}, [region])
    return [Tensor(r) for r in op.results]


@rule("associative_scan")
def _associative_scan(ctx, input, axis, combine_fn, reverse=False):
    values, is_tuple = _inputs(ctx.b, input)
    axis = _axis(axis, len(values[0].shape))
    results = scan(ctx, values, axis, constexpr(combine_fn, "combine_fn"), bool(constexpr(reverse, "reverse")))
    return tuple(results) if is_tuple else results[0]


def _arith_combine(ctx, kind: str, elem: ScalarType) -> Region:
    """The region of ``a + b`` (or ``a * b``) on ``elem`` scalars."""
    block = Block([elem, elem], ["a", "b"])
    with ctx.b.at(block):
        a, b = (Tensor(arg) for arg in block.args)
        ctx.b.create("scf.yield", [S.binary(ctx.b, kind, a, b).value])
    return Region(block)


def _scan_input(ctx, input, dtype=None, widen_ints=False) -> Tensor:
    """Triton's cumsum/cumprod input: bf16 computes in f32; ``dtype`` converts first;
    cumsum of integers narrower than 32 bits accumulates in 32 bits (as tl.sum)."""
    x = tensor_arg(ctx.b, input, "input")
    if not x.is_block or isinstance(x.dtype, PointerType):
        raise SemanticError(f"'input' must be a tensor of numbers, got {S.describe(x)}", param="input")
    if x.dtype == T.bf16:
        x = S.cast(ctx.b, x, T.f32)
    if dtype is not None:
        return S.cast(ctx.b, x, const_dtype(dtype, "dtype"))
    if widen_ints and x.dtype.is_integer and x.dtype.bits < 32:
        return S.cast(ctx.b, x, T.u32 if x.dtype.is_unsigned else T.i32)
    return x


@rule("cumsum")
def _cumsum(ctx, input, axis=0, reverse=False, dtype=None):
    x = _scan_input(ctx, input, constexpr(dtype, "dtype"), widen_ints=True)
    region = _arith_combine(ctx, "add", x.dtype)
    return scan(ctx, [x], _axis(axis, len(x.shape)), region, bool(constexpr(reverse, "reverse")))[0]


@rule("cumprod")
def _cumprod(ctx, input, axis=0, reverse=False):
    x = _scan_input(ctx, input)
    region = _arith_combine(ctx, "mul", x.dtype)
    return scan(ctx, [x], _axis(axis, len(x.shape)), region, bool(constexpr(reverse, "reverse")))[0]


@rule("reduce")
def _reduce(ctx, input, axis, combine_fn, keep_dims=False):
    b = ctx.b
    values, is_tuple = _inputs(b, input)
    original = values[0].shape
    axis = constexpr(axis, "axis")
    if axis is None:                   # every axis: flatten, then reduce the one left
        values = [reshape(b, v, (math.prod(original),)) for v in values]
        kept = (1,) * len(original)
        axis = 0
    else:
        axis = _axis(axis, len(original))
        kept = original[:axis] + (1,) + original[axis + 1:]
    region = _build_combine(ctx, constexpr(combine_fn, "combine_fn"), [v.dtype for v in values])
    shape = values[0].shape[:axis] + values[0].shape[axis + 1:]
    types = [TensorType(shape, v.dtype) if shape else v.dtype for v in values]
    op = b.create("tl.reduce_combine", [v.value for v in values], types, {"axis": axis}, [region])
    results = [Tensor(r) for r in op.results]
    if constexpr(keep_dims, "keep_dims"):
        results = [reshape(b, r, kept) if r.is_block else S.broadcast_to(b, r, kept) for r in results]
    return tuple(results) if is_tuple else results[0]


@rule("flip")
def _flip(ctx, x, dim=None):
    t = tensor_arg(ctx.b, x, "x")
    if not t.is_block:
        raise SemanticError(f"'x' must be a tensor, got {S.describe(t)}", param="x")
    dim = constexpr(dim, "dim")
    axis = len(t.shape) - 1 if dim is None else _axis(dim, len(t.shape))
    if not S.is_power_of_two(t.shape[axis]):
        raise SemanticError(f"tl.flip needs a power-of-two size along dimension {axis}, got {t.shape[axis]}",
                            param="dim")
    return Tensor(ctx.b.value("tl.flip", [t.value], t.type, axis=axis))


@rule("sort")
def _sort(ctx, x, dim=None, descending=False):
    """Triton's ``tl.sort``: along ``dim`` (the last dimension by default), whose size
    must be a power of two (a bitonic network on the GPU)."""
    t = tensor_arg(ctx.b, x, "x")
    if not t.is_block or isinstance(t.dtype, PointerType):
        raise SemanticError(f"'x' must be a tensor of numbers, got {S.describe(t)}", param="x")
    dim = constexpr(dim, "dim")
    axis = len(t.shape) - 1 if dim is None else _axis(dim, len(t.shape))
    if not S.is_power_of_two(t.shape[axis]):
        raise SemanticError(f"tl.sort needs a power-of-two size along dimension {axis}, got {t.shape[axis]}",
                            param="dim")
    descending = constexpr(descending, "descending")
    if not isinstance(descending, bool):
        raise SemanticError(f"'descending' must be a compile-time bool, got {S.describe(descending)}",
                            param="descending")
    return Tensor(ctx.b.value("tl.sort", [t.value], t.type, axis=axis, descending=descending))

