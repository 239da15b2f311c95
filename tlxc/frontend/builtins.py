"""Semantic rules of the ``tl.*`` builtins, keyed by builtin name.

Each rule takes the builder context and the call's arguments bound to the
builtin's signature (``tlxc/language/core.py``) and returns a frontend value.
"""
from __future__ import annotations

import builtins as py
from collections.abc import Callable
from typing import Any

from ..ir import types as T
from ..ir.types import PointerType, ScalarType, TensorType
from . import cache_hints as H
from . import semantic as S
from .semantic import SemanticError
from .values import StaticAssertionFailed, Tensor

RULES: dict[str, Callable[..., Any]] = {}


def rule(name: str):
    def register(fn):
        RULES[name] = fn
        return fn
    return register


# ``what`` is the builtin's parameter name: messages quote it, and the code
# generator puts the caret under that argument.
def constexpr(value, what: str):
    if isinstance(value, Tensor):
        raise SemanticError(f"'{what}' must be a compile-time constant (tl.constexpr), "
                            f"got {S.describe(value)}", param=what)
    return value


def const_int(value, what: str) -> int:
    value = constexpr(value, what)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SemanticError(f"'{what}' must be a compile-time integer, got {S.describe(value)}", param=what)
    return value


def const_ints(value, what: str, positive: bool = False) -> tuple[int, ...]:
    """A compile-time tuple (or list) of integers, each >= 1 when ``positive`` (a shape)."""
    value = constexpr(value, what)
    if not isinstance(value, (tuple, list)) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
        raise SemanticError(f"'{what}' must be a tuple of compile-time integers, got {S.describe(value)}",
                            param=what)
    if positive and any(v < 1 for v in value):
        raise SemanticError(f"'{what}' must have dimensions of at least 1, got {list(value)}", param=what)
    return tuple(value)


def const_dtype(value, what: str) -> ScalarType:
    value = constexpr(value, what)
    if not isinstance(value, ScalarType):
        raise SemanticError(f"'{what}' must be a dtype such as tl.float32, got {S.describe(value)}", param=what)
    return value


def tensor_arg(b, value, what: str) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (bool, int, float)):
        return S.to_tensor(b, value)
    raise SemanticError(f"'{what}' must be a tensor or a number, got {S.describe(value)}", param=what)


def numeric_arg(b, value, what: str) -> Tensor:
    """A tensor of numbers (not of pointers)."""
    x = tensor_arg(b, value, what)
    if not isinstance(x.dtype, ScalarType):
        kind = S.not_a_number(x) or S.describe(x)
        raise SemanticError(f"'{what}' must hold numbers, got {kind}", param=what)
    return x


def _shape_args(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


# -- program and ranges -------------------------------------------------------
def grid_axis(axis) -> int:
    """A compile-time axis of the grid or the block: 0, 1 or 2."""
    axis = const_int(axis, "axis")
    if axis not in (0, 1, 2):
        raise SemanticError(f"'axis' must be 0, 1 or 2, got {axis}", param="axis")
    return axis


@rule("program_id")
def _program_id(ctx, axis):
    return Tensor(ctx.b.value("tl.program_id", [], T.i32, axis=grid_axis(axis)))


@rule("num_programs")
def _num_programs(ctx, axis):
    return Tensor(ctx.b.value("tl.num_programs", [], T.i32, axis=grid_axis(axis)))


@rule("arange")
def _arange(ctx, start, end):
    start, end = const_int(start, "start"), const_int(end, "end")
    if end <= start:
        raise SemanticError(f"'end' ({end}) must be greater than 'start' ({start})")
    if not S.is_power_of_two(end - start):
        raise SemanticError(f"the range's length end - start must be a power of two, got {end - start} "
                            f"(start={start}, end={end})")
    return Tensor(ctx.b.value("tl.arange", [], TensorType((end - start,), T.i32), start=start, end=end))


@rule("to_tensor")
def _to_tensor(ctx, x):
    return tensor_arg(ctx.b, x, "x")


@rule("zeros")
def _zeros(ctx, shape, dtype):
    return _full(ctx, shape, 0, dtype)


@rule("full")
def _full(ctx, shape, value, dtype):
    """A block of ``shape`` filled with ``value``; an empty shape gives a scalar, as in Triton
    (``tl.full((), eps, tl.float32)``, ``tl.zeros(())`` as a loop's scalar accumulator)."""
    shape = S.check_shape(constexpr(shape, "shape"), "shape")
    dtype = const_dtype(dtype, "dtype")
    if isinstance(value, Tensor):
        if value.is_block:
            raise SemanticError(f"'value' must be a scalar, got {S.describe(value)}", param="value")
        value = _value_of(ctx.b, value, dtype, "value")
        return S.broadcast_to(ctx.b, value, shape) if shape else value
    if not isinstance(value, (bool, int, float)):
        raise SemanticError(f"'value' must be a number or a scalar tensor, got {S.describe(value)}",
                            param="value")
    return S.constant(ctx.b, value, TensorType(shape, dtype) if shape else dtype)


def _like(x, shape, dtype, what="input"):
    """The shape and dtype of a ``*_like`` result: ``input``'s unless given."""
    if not isinstance(x, Tensor):
        raise SemanticError(f"'{what}' must be a tensor, got {S.describe(x)}", param=what)
    shape = x.shape if constexpr(shape, "shape") is None else shape
    return shape, x.dtype if constexpr(dtype, "dtype") is None else dtype


@rule("zeros_like")
def _zeros_like(ctx, input, shape=None, dtype=None):
    shape, dtype = _like(input, shape, dtype)
    return _full(ctx, shape, 0, dtype)


@rule("full_like")
def _full_like(ctx, input, value, shape=None, dtype=None):
    shape, dtype = _like(input, shape, dtype)
    return _full(ctx, shape, value, dtype)


def call_dtype(ctx, dtype: ScalarType, value):
    """``tl.float32(x)``: ``x`` converted to the dtype (a tensor: ``x.to(dtype)``;
    a number: a scalar of that dtype)."""
    if isinstance(value, Tensor):
        if isinstance(value.dtype, PointerType):
            raise SemanticError(f"cannot call {dtype} on {S.describe(value)}; use .to({dtype}) for a "
                                f"pointer-to-integer conversion")
        return S.cast(ctx.b, value, dtype)
    if isinstance(value, (bool, int, float)):
        return S.constant(ctx.b, value, dtype)
    raise SemanticError(f"{dtype}(x) converts a tensor or a number, got {S.describe(value)}")


@rule("cdiv")
def _cdiv(ctx, x, div):
    for name, value in (("x", x), ("div", div)):
        if not isinstance(value, (Tensor, int, float)):
            raise SemanticError(f"tl.cdiv: '{name}' must be a tensor or a number, got {S.describe(value)}")
    if not isinstance(x, Tensor) and not isinstance(div, Tensor):
        return (x + div - 1) // div
    return S.binary(ctx.b, "floordiv", S.binary(ctx.b, "sub", S.binary(ctx.b, "add", x, div), 1), div)


# -- memory -------------------------------------------------------------------
def _pointer(b, pointer, what="pointer") -> Tensor:
    if not isinstance(pointer, Tensor) or not isinstance(pointer.dtype, PointerType):
        raise SemanticError(f"'{what}' must be a pointer or a tensor of pointers, got {S.describe(pointer)}",
                            param=what)
    return pointer


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether a value of ``shape`` broadcasts to exactly ``target``."""
    if not shape:
        return True
    if len(shape) != len(target):
        return False
    return all(s == t or s == 1 for s, t in zip(shape, target))


def _mask(b, mask, shape) -> Tensor | None:
    if mask is None:
        return None
    mask = S.require_mask(tensor_arg(b, mask, "mask"))
    if not _broadcasts_to(mask.shape, shape):
        raise SemanticError(f"'mask' of shape {list(mask.shape)} does not match the pointer shape "
                            f"{list(shape)}", param="mask")
    return S.broadcast_to(b, mask, shape)


def _is_block_pointer(value) -> bool:
    # imported here: block_ptr.py builds on this module
    from .block_ptr import BlockPointer

    return isinstance(value, BlockPointer)


def _no_block_pointer_options(boundary_check, padding_option) -> None:
    """Triton's rule: bounds are known only to block pointers; plain pointers use masks."""
    for param, value in (("boundary_check", boundary_check), ("padding_option", padding_option)):
        if constexpr(value, param) not in ((), [], None, ""):
            raise SemanticError(f"'{param}' applies only to block pointers (from tl.make_block_ptr); "
                                f"with a pointer or a tensor of pointers, use 'mask' (and 'other')", param=param)


@rule("load")
def _load(ctx, pointer, mask=None, other=None, boundary_check=(), padding_option="",
          cache_modifier="", eviction_policy="", volatile=False):
    b = ctx.b
    if _is_block_pointer(pointer):      # rewritten to pointers + mask (frontend/block_ptr.py)
        from .block_ptr import rewrite_load
        pointer, mask, other = rewrite_load(b, pointer, mask, other, boundary_check, padding_option)
    else:
        _no_block_pointer_options(boundary_check, padding_option)
    pointer = _pointer(b, pointer)
    if mask is not None and pointer.is_block is False and isinstance(mask, Tensor) and mask.is_block:
        shape = mask.shape
        pointer = S.broadcast_to(b, pointer, shape)
    shape = pointer.shape
    mask_t = _mask(b, mask, shape)
    elem = pointer.dtype.pointee
    operands = [pointer.value]
    attrs = {"has_mask": mask_t is not None, "has_other": other is not None}
    if mask_t is not None:
        operands.append(mask_t.value)
    if other is not None:
        if mask_t is None:
            raise SemanticError("'other' is only meaningful with a 'mask'", param="other")
        other_t = _value_of(b, other, elem, "other")
        if not _broadcasts_to(other_t.shape, shape):
            raise SemanticError(f"'other' of shape {list(other_t.shape)} does not match the pointer shape "
                                f"{list(shape)}", param="other")
        operands.append(S.broadcast_to(b, other_t, shape).value)
    attrs.update(_load_hints(cache_modifier, eviction_policy, volatile))
    result_type = T.with_element(pointer.type, elem)
    return Tensor(b.value("tl.load", operands, result_type, **attrs))


@rule("store")
def _store(ctx, pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
    b = ctx.b
    if _is_block_pointer(pointer):      # rewritten to pointers + mask (frontend/block_ptr.py)
        from .block_ptr import rewrite_store
        pointer, value, mask = rewrite_store(b, pointer, value, mask, boundary_check)
    else:
        _no_block_pointer_options(boundary_check, "")
    pointer = _pointer(b, pointer)
    if pointer.dtype.const:
        raise SemanticError(f"cannot store through a constant pointer ({pointer.dtype}: a parameter annotated "
                            f"tl.const, or computed from one)", param="pointer")
    elem = pointer.dtype.pointee
    value_t = _value_of(b, value, elem, "value")
    if value_t.is_block and not pointer.is_block:
        raise SemanticError(f"cannot store a tensor of shape {list(value_t.shape)} through a scalar pointer",
                            param="value")
    if not _broadcasts_to(value_t.shape, pointer.shape):
        raise SemanticError(f"'value' of shape {list(value_t.shape)} does not match the pointer "
                            f"shape {list(pointer.shape)}", param="value")
    value_t = S.broadcast_to(b, value_t, pointer.shape)
    mask_t = _mask(b, mask, pointer.shape)
    operands = [pointer.value, value_t.value] + ([mask_t.value] if mask_t is not None else [])
    attrs = {"has_mask": mask_t is not None, "has_other": False}
    attrs.update(H.attrs(H.store_cache_modifier(cache_modifier), H.eviction_policy(eviction_policy)))
    b.create("tl.store", operands, [], attrs)


def _load_hints(cache_modifier, eviction_policy, volatile) -> dict[str, object]:
    cache, eviction = H.load_cache_modifier(cache_modifier), H.eviction_policy(eviction_policy)
    is_volatile = H.flag(volatile, "volatile")
    if is_volatile and (cache or eviction):
        param = "cache_modifier" if cache else "eviction_policy"
        raise SemanticError(f"'volatile=True' cannot be combined with '{param}': PTX's ld.volatile takes no "
                            f"cache operator or eviction policy", param=param)
    return H.attrs(cache, eviction, is_volatile)


def _value_of(b, value, elem, what: str) -> Tensor:
    """``value`` (a tensor or a number) converted to the pointee type ``elem``."""
    if isinstance(value, Tensor):
        if isinstance(value.dtype, PointerType) and not isinstance(elem, PointerType):
            raise SemanticError(f"'{what}' is {S.describe(value)}, but the memory holds {elem}", param=what)
        return S.cast(b, value, elem)
    if not isinstance(value, (bool, int, float)):
        raise SemanticError(f"'{what}' must be a tensor or a number, got {S.describe(value)}", param=what)
    return S.constant(b, value, elem)


# The atomics' rules live in atomic_rules.py (imported by frontend/build_ir.py).


# -- elementwise ----------------------------------------------------------------
@rule("where")
def _where(ctx, condition, x, y):
    return S.where(ctx.b, condition, x, y)


def _minmax(op):
    def impl(ctx, x, y, propagate_nan=None):
        name = "tl.minimum" if op == "min" else "tl.maximum"
        if not isinstance(x, Tensor) and not isinstance(y, Tensor):
            for value, what in ((x, "x"), (y, "y")):
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise SemanticError(f"{name}: '{what}' must be a tensor or a number, got "
                                        f"{S.describe(value)}", param=what)
            return py.min(x, y) if op == "min" else py.max(x, y)
        return S.min_max(ctx.b, op, x, y, _propagates_nan(propagate_nan, name))
    return impl


def _propagates_nan(value, name: str) -> bool:
    """Triton's ``propagate_nan=tl.PropagateNan.NONE|ALL`` (None is NONE)."""
    value = constexpr(value, "propagate_nan")
    kind = getattr(value, "name", None) if type(value).__name__ == "PropagateNan" else None
    if value is None or kind == "NONE":
        return False
    if kind == "ALL":
        return True
    raise SemanticError(f"{name}: 'propagate_nan' must be tl.PropagateNan.NONE or tl.PropagateNan.ALL, "
                        f"got {S.describe(value)}", param="propagate_nan")


RULES["minimum"] = _minmax("min")
RULES["maximum"] = _minmax("max")


@rule("clamp")
def _clamp(ctx, x, min, max, propagate_nan=None):
    nan = _propagates_nan(propagate_nan, "tl.clamp")
    return S.min_max(ctx.b, "min", S.min_max(ctx.b, "max", x, min, nan), max, nan)


def _math(fn: str):
    def impl(ctx, x):
        return S.unary_float(ctx.b, fn, numeric_arg(ctx.b, x, "x"))
    return impl


for _fn in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "floor", "ceil", "erf"):
    RULES[_fn] = _math(_fn)


@rule("abs")
def _abs(ctx, x):
    x = numeric_arg(ctx.b, x, "x")
    if x.dtype.is_unsigned or x.dtype.is_boolean:
        return x
    return Tensor(ctx.b.value("arith.abs", [x.value], x.type))


@rule("fma")
def _fma(ctx, x, y, z):
    b = ctx.b
    for value, what in ((x, "x"), (y, "y"), (z, "z")):
        numeric_arg(b, value, what)
    target, weak = S._scalar_of(x)
    for v in (y, z):
        t, w = S._scalar_of(v)
        target = S.computation_type(target, weak, t, w, False)
        weak = weak and w
    if not target.is_float:
        return S.binary(b, "add", S.binary(b, "mul", x, y), z)
    shape = ()
    for v in (x, y, z):
        shape = S.broadcast_shapes(shape, v.shape if isinstance(v, Tensor) else ())
    args = [S.broadcast_to(b, S.cast(b, v, target) if isinstance(v, Tensor) else S.constant(b, v, target),
                           shape) for v in (x, y, z)]
    return Tensor(b.value("math.fma", [a.value for a in args], args[0].type))


@rule("sigmoid")
def _sigmoid(ctx, x):
    b = ctx.b
    x = numeric_arg(b, x, "x")
    if not x.dtype.is_float:
        x = S.cast(b, x, T.f32)
    e = S.unary_float(b, "exp", S.negate(b, x))
    return S.binary(b, "truediv", 1.0, S.binary(b, "add", e, 1.0))


@rule("umulhi")
def _umulhi(ctx, x, y):
    b = ctx.b
    x, y = numeric_arg(b, x, "x"), numeric_arg(b, y, "y")
    if not (x.dtype.is_integer and y.dtype.is_integer):
        raise SemanticError(f"needs integer operands, got {x.dtype} and {y.dtype}")
    target = S.computation_type(x.dtype, False, y.dtype, False, False)
    x2, y2 = S._unify(b, x, y, target)
    return Tensor(b.value("arith.umulhi", [x2.value, y2.value], x2.type))


@rule("cast")
def _cast(ctx, input, dtype, fp_downcast_rounding=None, bitcast=False):
    dtype = constexpr(dtype, "dtype")
    if not isinstance(dtype, (ScalarType, PointerType)):
        raise SemanticError(f"'dtype' must be a dtype such as tl.float16, got {S.describe(dtype)}", param="dtype")
    if constexpr(fp_downcast_rounding, "fp_downcast_rounding") not in (None, "rtne"):
        raise SemanticError(f"fp_downcast_rounding {fp_downcast_rounding!r} is not supported (only 'rtne')",
                            param="fp_downcast_rounding")
    return S.cast(ctx.b, tensor_arg(ctx.b, input, "input"), dtype, bitcast=bool(constexpr(bitcast, "bitcast")))


# -- shapes ---------------------------------------------------------------------
@rule("broadcast_to")
def _broadcast_to(ctx, input, *shape):
    shape = S.check_shape(constexpr(_shape_args(shape), "shape"), "shape")
    return S.broadcast_to(ctx.b, tensor_arg(ctx.b, input, "input"), shape)


@rule("broadcast")
def _broadcast(ctx, input, other):
    x, y = tensor_arg(ctx.b, input, "input"), tensor_arg(ctx.b, other, "other")
    shape = S.broadcast_shapes(x.shape, y.shape)
    return S.broadcast_to(ctx.b, x, shape), S.broadcast_to(ctx.b, y, shape)


def expand_dims(b, x: Tensor, axis: int) -> Tensor:
    rank = len(x.shape)
    if not -rank - 1 <= axis <= rank:
        raise SemanticError(f"axis {axis} is out of range for a tensor of rank {rank}")
    axis = axis % (rank + 1)
    if not x.is_block:
        return S.broadcast_to(b, x, (1,))
    shape = list(x.shape)
    shape.insert(axis, 1)
    return Tensor(b.value("tl.expand_dims", [x.value], TensorType(tuple(shape), x.dtype), axis=axis))


@rule("expand_dims")
def _expand_dims(ctx, input, axis):
    axes = constexpr(axis, "axis")
    x = tensor_arg(ctx.b, input, "input")
    axes = [const_int(a, "axis") for a in (axes if isinstance(axes, (tuple, list)) else (axes,))]
    rank = len(x.shape) + len(axes)          # several axes: each an index of the result, as Triton's
    for a in axes:
        if not -rank <= a < rank:
            raise SemanticError(f"axis {a} is out of range for the result's rank {rank}", param="axis")
    wrapped = sorted(a % rank for a in axes)
    if len(set(wrapped)) != len(wrapped):
        raise SemanticError(f"tl.expand_dims: repeated axes {axes} (of a rank-{rank} result)", param="axis")
    for a in wrapped:
        x = expand_dims(ctx.b, x, a)
    return x


def reshape(b, x: Tensor, shape: tuple[int, ...]) -> Tensor:
    import math
    shape = S.check_shape(shape, "shape") if shape else ()
    if not shape and x.is_block:
        # reshape to (): the one element as a scalar (Triton's 0-d tensor, e.g. a condition)
        if math.prod(x.shape) != 1:
            raise SemanticError(f"cannot reshape {list(x.shape)} ({math.prod(x.shape)} elements) to a scalar")
        return reduce(b, x, None, "or" if x.dtype.is_boolean else "max", False)
    if not x.is_block:
        return S.broadcast_to(b, x, shape) if shape else x
    if x.shape == shape:
        return x
    if math.prod(shape) != math.prod(x.shape):
        raise SemanticError(f"cannot reshape {list(x.shape)} ({math.prod(x.shape)} elements) "
                            f"to {list(shape)} ({math.prod(shape)} elements)")
    return Tensor(b.value("tl.reshape", [x.value], TensorType(shape, x.dtype)))


@rule("reshape")
def _reshape(ctx, input, *shape, can_reorder=False):
    return reshape(ctx.b, tensor_arg(ctx.b, input, "input"), constexpr(_shape_args(shape), "shape"))


@rule("view")
def _view(ctx, input, *shape):
    return reshape(ctx.b, tensor_arg(ctx.b, input, "input"), constexpr(_shape_args(shape), "shape"))


def permute(b, x: Tensor, dims) -> Tensor:
    if not x.is_block:
        raise SemanticError("cannot transpose a scalar")
    dims = tuple(const_int(d, "dims") for d in dims)
    if sorted(dims) != list(range(len(x.shape))):
        raise SemanticError(f"'dims' {list(dims)} is not a permutation of {list(range(len(x.shape)))}",
                            param="dims")
    shape = tuple(x.shape[d] for d in dims)
    return Tensor(b.value("tl.trans", [x.value], TensorType(shape, x.dtype), perm=dims))


@rule("trans")
def _trans(ctx, input, *dims):
    x = tensor_arg(ctx.b, input, "input")
    dims = _shape_args(dims)
    if not dims:
        if len(x.shape) != 2:
            raise SemanticError(f"without 'dims', the input must be 2-D, got shape {list(x.shape)}")
        dims = (1, 0)
    return permute(ctx.b, x, dims)


@rule("permute")
def _permute(ctx, input, *dims):
    return permute(ctx.b, tensor_arg(ctx.b, input, "input"), _shape_args(dims))


@rule("split")
def _split(ctx, a):
    """``tl.split``: the two halves of a tensor along its last dim, which must have size 2."""
    x = tensor_arg(ctx.b, a, "a")
    if not x.is_block or x.shape[-1] != 2:
        shape = list(x.shape) if x.is_block else "a scalar"
        raise SemanticError(f"tl.split needs a tensor whose last dimension has size 2, got {shape} (reshape and "
                            f"permute to bring a size-2 dimension last)", param="a")
    if len(x.shape) == 1:                       # [2]: two scalars, as Triton's split gives
        first, second = ctx.b.create("tl.split", [reshape(ctx.b, x, (1, 2)).value],
                                     [TensorType((1,), x.dtype)] * 2).results
        return reshape(ctx.b, Tensor(first), ()), reshape(ctx.b, Tensor(second), ())
    out = TensorType(x.shape[:-1], x.dtype)
    first, second = ctx.b.create("tl.split", [x.value], [out, out]).results
    return Tensor(first), Tensor(second)


@rule("join")
def _join(ctx, a, b):
    """``tl.join``: ``a`` and ``b`` (broadcast to one shape, one dtype) stacked along a new
    last dim of size 2."""
    x, y = tensor_arg(ctx.b, a, "a"), tensor_arg(ctx.b, b, "b")
    if x.dtype != y.dtype:
        raise SemanticError(f"tl.join needs operands of one dtype, got {x.dtype} and {y.dtype}", param="b")
    if not x.is_block and not y.is_block:       # two scalars: a [2] tensor, as Triton's join gives
        x, y = S.broadcast_to(ctx.b, x, (1,)), S.broadcast_to(ctx.b, y, (1,))
        pair = Tensor(ctx.b.value("tl.join", [x.value, y.value], TensorType((1, 2), x.dtype)))
        return reshape(ctx.b, pair, (2,))
    shape = S.broadcast_shapes(x.shape, y.shape)
    x, y = S.broadcast_to(ctx.b, x, shape), S.broadcast_to(ctx.b, y, shape)
    return Tensor(ctx.b.value("tl.join", [x.value, y.value], TensorType(x.shape + (2,), x.dtype)))


# -- reductions -------------------------------------------------------------------
def reduce(b, x, axis, kind: str, keep_dims: bool, dtype=None) -> Tensor:
    x = tensor_arg(b, x, "input")
    if not x.is_block:
        raise SemanticError(f"cannot reduce {S.describe(x)}: reductions need a tensor", param="input")
    if isinstance(x.dtype, PointerType):
        raise SemanticError(f"cannot reduce a tensor of pointers ({x.type})", param="input")
    axis = constexpr(axis, "axis")
    if axis is None:
        rank = len(x.shape)
        if rank > 1:
            import math
            x = reshape(b, x, (math.prod(x.shape),))
        result = reduce(b, x, 0, kind, False, dtype)
        return S.broadcast_to(b, result, (1,) * rank) if keep_dims else result
    axis = const_int(axis, "axis")
    rank = len(x.shape)
    if not -rank <= axis < rank:
        raise SemanticError(f"axis {axis} is out of range for a tensor of rank {rank}", param="axis")
    axis %= rank
    if dtype is not None:
        x = S.cast(b, x, const_dtype(dtype, "dtype"))
    elif kind == "sum" and x.dtype.is_integer and x.dtype.bits < 32:
        x = S.cast(b, x, T.u32 if x.dtype.is_unsigned else T.i32)
    if kind in ("and", "or", "xor") and not x.dtype.is_integer:
        raise SemanticError(f"{kind} reduction needs integers, got {x.dtype}")
    if x.dtype.is_boolean and kind in ("sum",):
        if dtype is not None:           # a sum in i1 itself (Triton's): additions modulo 2
            total = reduce(b, S.cast(b, x, T.i32), axis, "sum", keep_dims, None)
            return S.compare(b, "ne", S.binary(b, "and", total, 1), 0)
        x = S.cast(b, x, T.i32)
    shape = x.shape[:axis] + x.shape[axis + 1:]
    elem = T.i32 if kind.startswith("arg") else x.dtype
    rtype = TensorType(shape, elem) if shape else elem
    result = Tensor(b.value("tl.reduce", [x.value], rtype, axis=axis, kind=kind))
    if keep_dims:
        result = expand_dims(b, result, axis) if shape else S.broadcast_to(b, result, (1,) * rank)
    return result


@rule("sum")
def _sum(ctx, input, axis=None, keep_dims=False, dtype=None):
    return reduce(ctx.b, input, axis, "sum", constexpr(keep_dims, "keep_dims"), dtype)


def _max_min(kind):
    def impl(ctx, input, axis=None, return_indices=False, return_indices_tie_break_left=True,
             keep_dims=False):
        keep = constexpr(keep_dims, "keep_dims")
        value = reduce(ctx.b, input, axis, kind, keep)
        if constexpr(return_indices, "return_indices"):
            return value, reduce(ctx.b, input, axis, "arg" + kind, keep)
        return value
    return impl


RULES["max"] = _max_min("max")
RULES["min"] = _max_min("min")


@rule("argmax")
def _argmax(ctx, input, axis, tie_break_left=True, keep_dims=False):
    return reduce(ctx.b, input, axis, "argmax", constexpr(keep_dims, "keep_dims"))


@rule("argmin")
def _argmin(ctx, input, axis, tie_break_left=True, keep_dims=False):
    return reduce(ctx.b, input, axis, "argmin", constexpr(keep_dims, "keep_dims"))


@rule("xor_sum")
def _xor_sum(ctx, input, axis=None, keep_dims=False):
    return reduce(ctx.b, input, axis, "xor", constexpr(keep_dims, "keep_dims"))


# -- matrix -----------------------------------------------------------------------
_DOT_INPUTS = (T.f16, T.bf16, T.f32, T.f8e4m3, T.f8e5m2, T.i8)


@rule("dot")
def _dot(ctx, input, other, acc=None, input_precision=None, allow_tf32=None,
         max_num_imprecise_acc=None, out_dtype=None):
    """``acc + input @ other``.  fp8 operands (e4m3 / e5m2, mixed allowed, as in Triton) take
    ``out_dtype`` float32 or float16; ``max_num_imprecise_acc`` (fp8 only, <= K) bounds how many
    products the tensor cores sum in their reduced-precision fp8 accumulator before a full float32
    add (the attribute of the ``tl.dot``; Hopper's wgmma honours it, every other path sums in
    float32 anyway); ``input_precision`` does not change fp8 products (exact in every mode)."""
    b = ctx.b
    a, c = tensor_arg(b, input, "input"), tensor_arg(b, other, "other")
    if len(a.shape) == 3 and len(c.shape) == 3:
        return _batched_dot(ctx, a, c, acc, {"input_precision": input_precision, "allow_tf32": allow_tf32,
                                             "max_num_imprecise_acc": max_num_imprecise_acc, "out_dtype": out_dtype})
    if len(a.shape) != 2 or len(c.shape) != 2:
        raise SemanticError(f"operands must be 2-D (or both 3-D: a batch of products), got shapes {list(a.shape)} "
                            f"and {list(c.shape)}")
    (m, k), (k2, n) = a.shape, c.shape
    if k != k2:
        raise SemanticError(f"inner dimensions differ: input is {m}x{k} but other is {k2}x{n} "
                            f"(K = {k} vs {k2})")
    if m < 16 or n < 16 or k < 16:
        raise SemanticError(f"M, N and K must be at least 16, got M={m}, N={n}, K={k}")
    if a.dtype not in _DOT_INPUTS or c.dtype not in _DOT_INPUTS:
        raise SemanticError(f"operands of type {a.dtype} and {c.dtype} are not supported "
                            f"(expected f16, bf16, f32, fp8 or i8)")
    fp8 = a.dtype.is_float8 and c.dtype.is_float8      # e4m3 x e5m2 is allowed, as in Triton
    if a.dtype != c.dtype and not fp8:
        raise SemanticError(f"operands must have one type, got {a.dtype} and {c.dtype} (only fp8 operands may "
                            f"differ: e4m3 x e5m2)")
    precision = constexpr(input_precision, "input_precision")
    if allow_tf32 is not None and precision is None:
        precision = "tf32" if constexpr(allow_tf32, "allow_tf32") else "ieee"
    precision = precision or ("tf32" if a.dtype == T.f32 else "ieee")
    if precision not in ("tf32", "ieee", "tf32x3"):
        raise SemanticError(f"'input_precision' must be 'tf32', 'tf32x3' or 'ieee', got {precision!r}",
                            param="input_precision")
    if fp8:
        precision = "ieee"          # products of fp8 values are exact in float32: every mode is the same
    out = None if out_dtype is None else const_dtype(out_dtype, "out_dtype")
    if fp8 and out not in (None, T.f32, T.f16):
        raise SemanticError(f"'out_dtype' of an fp8 dot must be tl.float32 or tl.float16, got {out} (Triton "
                            f"refuses bfloat16 too: accumulate in float32 and cast with .to())",
                            param="out_dtype")
    if a.dtype == T.i8:
        out = T.i32
    if acc is None:
        acc_t = S.constant(b, 0, TensorType((m, n), out or T.f32))
    else:
        acc_t = tensor_arg(b, acc, "acc")
        if acc_t.shape != (m, n):
            raise SemanticError(f"'acc' has shape {list(acc_t.shape)}, expected {[m, n]}", param="acc")
        if acc_t.dtype not in (T.f32, T.f16, T.bf16, T.i32):
            raise SemanticError(f"'acc' must be float32, float16, bfloat16 or int32, got {acc_t.dtype}",
                                param="acc")
        if out_dtype is not None and out != acc_t.dtype:
            raise SemanticError(f"'out_dtype' ({out}) differs from the type of 'acc' ({acc_t.dtype}); the "
                                f"result has acc's type: pass out_dtype={acc_t.dtype} or leave it out",
                                param="out_dtype")
        if fp8 and acc_t.dtype not in (T.f32, T.f16):
            raise SemanticError(f"'acc' of an fp8 dot must be float32 or float16, got {acc_t.dtype}", param="acc")
    attrs = {"input_precision": precision}
    if max_num_imprecise_acc is not None:
        limit = const_int(max_num_imprecise_acc, "max_num_imprecise_acc")
        if limit < 0:
            raise SemanticError(f"'max_num_imprecise_acc' must be >= 0, got {limit}", param="max_num_imprecise_acc")
        if fp8:
            if limit > k:
                raise SemanticError(f"'max_num_imprecise_acc' ({limit}) must be <= K ({k})",
                                    param="max_num_imprecise_acc")
            attrs["max_num_imprecise_acc"] = limit
        # other inputs: every product is summed in full float32 (int32), so any bound holds
    return Tensor(b.value("tl.dot", [a.value, c.value, acc_t.value], acc_t.type, **attrs))


def _batch_slices(ctx, x: Tensor) -> list[Tensor]:
    """The ``[d0, d1]`` slices of ``x`` (``[d0, d1, n]``, n a power of two) along its last dim, in
    order: the dim halved by a reshape to ``[.., n / 2, 2]`` and ``tl.split`` (even and odd indices),
    recursively, then interleaved."""
    n = x.shape[-1]
    if n == 1:
        return [reshape(ctx.b, x, x.shape[:-1])]
    evens, odds = (_batch_slices(ctx, half) for half in _split(ctx, reshape(ctx.b, x, x.shape[:-1] + (n // 2, 2))))
    return [t for pair in zip(evens, odds) for t in pair]


def _batch_stack(ctx, parts: list[Tensor]) -> Tensor:
    """``_batch_slices``' inverse: ``[d0, d1]`` tensors stacked along a new last dim (``tl.join`` of
    the even- and odd-indexed halves, reshaped)."""
    if len(parts) == 1:
        return reshape(ctx.b, parts[0], parts[0].shape + (1,))
    even, odd = _batch_stack(ctx, parts[0::2]), _batch_stack(ctx, parts[1::2])
    return reshape(ctx.b, _join(ctx, even, odd), even.shape[:-1] + (2 * even.shape[-1],))


def _batched_dot(ctx, a: Tensor, c: Tensor, acc, options: dict) -> Tensor:
    """A 3-D ``tl.dot`` (Triton's batched form): ``[B, M, K] @ [B, K, N] (+ acc [B, M, N])``, one 2-D
    product per batch index.  Each operand's batch dim is moved last and cut into its B slices
    (``_batch_slices``), every slice pair goes through the 2-D rule (its checks, out_dtype, precision,
    max_num_imprecise_acc), and the B results are stacked and moved back; so the IR holds only 2-D
    dots and every target and the interpreter run it as they run those (B layout conversions)."""
    b = ctx.b
    (nb, m, _), (nb2, _, n) = a.shape, c.shape
    if nb != nb2:
        raise SemanticError(f"the batch dims of a 3-D dot differ: input is {list(a.shape)}, other is {list(c.shape)}")
    if nb & (nb - 1):
        raise SemanticError(f"the batch dim of a 3-D dot must be a power of two, got {nb}")
    a_parts = _batch_slices(ctx, permute(b, a, (1, 2, 0)))
    c_parts = _batch_slices(ctx, permute(b, c, (1, 2, 0)))
    acc_parts = [None] * nb
    if acc is not None:
        acc_t = tensor_arg(b, acc, "acc")
        if acc_t.shape != (nb, m, n):
            raise SemanticError(f"'acc' has shape {list(acc_t.shape)}, expected {[nb, m, n]}", param="acc")
        acc_parts = _batch_slices(ctx, permute(b, acc_t, (1, 2, 0)))
    outs = [_dot(ctx, x, y, z, **options) for x, y, z in zip(a_parts, c_parts, acc_parts)]
    return permute(b, _batch_stack(ctx, outs), (2, 0, 1))


_SCALED_FORMATS = {"e4m3": T.f8e4m3, "e5m2": T.f8e5m2, "bf16": T.bf16, "fp16": T.f16}


def _e2m1_values(b, nibble: Tensor) -> Tensor:
    """The float32 values of 4-bit e2m1 codes (sign, 2 exponent bits biased by 1, 1 mantissa bit):
    0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives."""
    e = S.binary(b, "and", S.binary(b, "shr", nibble, 1), 3)
    m = S.binary(b, "and", nibble, 1)
    normal = S.cast(b, S.binary(b, "or", S.binary(b, "shl", S.binary(b, "add", e, 126), 23),
                                S.binary(b, "shl", m, 22)), T.f32, bitcast=True)       # 2^(e-1) (1 + m/2)
    magnitude = S.where(b, S.compare(b, "eq", e, 0), S.binary(b, "mul", S.cast(b, m, T.f32), 0.5), normal)
    negative = S.compare(b, "ne", S.binary(b, "and", nibble, 8), 0)
    return S.where(b, negative, S.negate(b, magnitude), magnitude)


def _unpack_e2m1(b, x: Tensor, pack_axis: int) -> Tensor:
    """float32 values of the uint8 ``x`` holding fp4 pairs along ``pack_axis`` (low nibble first):
    that axis doubles."""
    codes = S.cast(b, S.cast(b, x, T.u8, bitcast=True), T.i32)
    low = _e2m1_values(b, S.binary(b, "and", codes, 15))
    high = _e2m1_values(b, S.binary(b, "shr", codes, 4))
    pairs = Tensor(b.value("tl.join", [low.value, high.value], TensorType(low.shape + (2,), T.f32)))
    rows, cols = x.shape
    if pack_axis == 1:
        return reshape(b, pairs, (rows, 2 * cols))
    return reshape(b, permute(b, pairs, (0, 2, 1)), (2 * rows, cols))


def _scaled_operand(b, x, scale, fmt, what: str, k_axis: int, k_pack: bool = True,
                    compute: ScalarType = T.bf16) -> Tensor:
    """``x`` (fp8 / bf16 / fp16 as ``fmt`` says, fp8 also as its uint8 bytes, e2m1 as uint8 bytes of
    two fp4 values packed along K, or along M / N without ``k_pack``) times 2^(scale - 127) per
    32 elements along K, in ``compute`` (bfloat16: exact for fp8 and fp4, as bf16 has float32's
    exponent range; float16 when an operand is float16).
    ``scale``: uint8 ue8m0 codes [rows, K // 32] (rows: M for lhs, N for rhs) or None."""
    x = tensor_arg(b, x, what)
    fmt = constexpr(fmt, f"{what}_format")
    if fmt == "e2m1":
        if x.dtype not in (T.u8, T.i8) or len(x.shape) != 2:
            raise SemanticError(f"{what} must be a 2-D uint8 tensor of packed fp4 pairs for {what}_format='e2m1', "
                                f"got {S.describe(x)}", param=what)
        values = _unpack_e2m1(b, x, k_axis if k_pack else 1 - k_axis)
    else:
        if fmt not in _SCALED_FORMATS:
            raise SemanticError(f"{what}_format must be 'e2m1', 'e4m3', 'e5m2', 'bf16' or 'fp16', got {fmt!r}",
                                param=f"{what}_format")
        if not k_pack:
            raise SemanticError(f"{what}_k_pack=False packs fp4 along M / N; {what}_format={fmt!r} is not packed",
                                param=f"{what}_k_pack")
        want = _SCALED_FORMATS[fmt]
        if isinstance(x.dtype, ScalarType) and x.dtype in (T.u8, T.i8) and want.bits == 8 and len(x.shape) == 2:
            x = S.cast(b, x, want, bitcast=True)       # fp8 passed as its bytes (Triton's tests pass uint8 views)
        if x.dtype != want or len(x.shape) != 2:
            raise SemanticError(f"{what} must be a 2-D {want} tensor (or its uint8 bytes, for fp8) for "
                                f"{what}_format={fmt!r}, got {S.describe(x)}", param=what)
        values = S.cast(b, x, T.f32)
    x = values
    if scale is not None:
        sc = tensor_arg(b, scale, f"{what}_scale")
        rows, k = x.shape[1 - k_axis], x.shape[k_axis]
        if k % 32 or sc.dtype != T.u8 or tuple(sc.shape) != (rows, k // 32):
            raise SemanticError(f"{what}_scale must be a uint8 tensor of ue8m0 scales of shape {[rows, k // 32]} "
                                f"(one per 32 elements along K), got {S.describe(sc)}", param=f"{what}_scale")
        code = S.cast(b, sc, T.i32)
        factor = S.cast(b, S.binary(b, "shl", code, 23), T.f32, bitcast=True)          # 2^(s - 127)
        factor = S.where(b, S.compare(b, "eq", code, 0), S.constant(b, 2.0 ** -127, T.f32), factor)
        factor = S.where(b, S.compare(b, "eq", code, 255), S.constant(b, float("nan"), T.f32), factor)
        factor = reshape(b, S.broadcast_to(b, expand_dims(b, factor, 2), (rows, k // 32, 32)), (rows, k))
        if k_axis == 0:
            factor = permute(b, factor, (1, 0))
        values = S.binary(b, "mul", values, factor)
    return S.cast(b, values, compute)


@rule("dot_scaled")
def _dot_scaled(ctx, lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, acc=None, fast_math=False,
                lhs_k_pack=True, rhs_k_pack=True, out_dtype=T.f32):
    """``acc + (lhs * 2^(lhs_scale - 127)) @ (rhs * 2^(rhs_scale - 127))`` with ue8m0 scales per 32
    elements along K (lhs_scale [M, K // 32], rhs_scale [N, K // 32], or None): each operand is
    scaled and rounded to bfloat16 (exact for fp8 and fp4 inputs; float16 instead when an operand
    is float16, as Triton's decomposition does) and multiplied by ``tl.dot`` with a float32
    accumulator, as Triton decomposes it where the tensor cores have no block scaling.
    ``fast_math`` may only drop NaN handling in Triton; here the exact result is kept either way.
    ``e2m1`` operands are uint8 bytes of two fp4 values (the first in the low nibble), packed along
    K (``*_k_pack=True``) or along M / N."""
    b = ctx.b
    constexpr(fast_math, "fast_math")
    if const_dtype(out_dtype, "out_dtype") != T.f32:
        raise SemanticError("tl.dot_scaled accumulates in float32: out_dtype must be tl.float32",
                            param="out_dtype")
    packs = []
    for flag, name in ((lhs_k_pack, "lhs_k_pack"), (rhs_k_pack, "rhs_k_pack")):
        flag = constexpr(flag, name)
        if not isinstance(flag, bool):
            raise SemanticError(f"{name} must be a compile-time bool, got {S.describe(flag)}", param=name)
        packs.append(flag)
    # the 16-bit type both go to the tensor cores in: float16 when an operand is float16 (rounding it to
    # bfloat16 would drop 3 of its mantissa bits), else bfloat16 (fp8 and fp4 scaled values are exact there)
    compute = T.f16 if "fp16" in (constexpr(lhs_format, "lhs_format"), constexpr(rhs_format, "rhs_format")) \
        else T.bf16
    a = _scaled_operand(b, lhs, lhs_scale, lhs_format, "lhs", 1, packs[0], compute)
    c = _scaled_operand(b, rhs, rhs_scale, rhs_format, "rhs", 0, packs[1], compute)
    if a.shape[1] != c.shape[0]:
        raise SemanticError(f"inner dimensions differ: lhs is {a.shape[0]}x{a.shape[1]} but rhs is "
                            f"{c.shape[0]}x{c.shape[1]}", param="rhs")
    return _dot(ctx, a, c, acc, out_dtype=T.f32)


# -- hints, static checks, debugging ------------------------------------------------
def _hint(kind):
    def impl(ctx, input, values):
        x = tensor_arg(ctx.b, input, "input")
        values = constexpr(values, "values")
        values = tuple(values) if isinstance(values, (tuple, list)) else (values,)
        if len(values) != py.max(1, len(x.shape)):
            raise SemanticError(f"'values' needs one value per dimension ({len(x.shape)}), got {len(values)}",
                                param="values")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise SemanticError(f"'values' must be positive compile-time integers, got {S.describe(v)}",
                                    param="values")
        return Tensor(ctx.b.value("tl.hint", [x.value], x.type, **{kind: values}))
    return impl


for _kind in ("multiple_of", "max_contiguous", "max_constancy"):
    RULES[_kind] = _hint(_kind)


# -- tl.target_info: compile-time queries of the architecture being compiled for ----------------------
class GPUTarget(tuple):
    """``tl.target_info.current_target()``: (backend, arch, warp_size), with Triton's field names."""

    backend = property(lambda self: self[0])
    arch = property(lambda self: self[1])
    warp_size = property(lambda self: self[2])


def _target(ctx) -> GPUTarget:
    arch = ctx.options.arch
    if arch.startswith("sm_"):
        return GPUTarget(("cuda", int("".join(ch for ch in arch[3:] if ch.isdigit())), 32))
    return GPUTarget(("hip", arch, 64))


@rule("target_info.current_target")
def _current_target(ctx):
    return _target(ctx)


@rule("target_info.is_cuda")
def _is_cuda(ctx):
    return _target(ctx).backend == "cuda"


@rule("target_info.cuda_capability_geq")
def _cuda_capability_geq(ctx, major, minor=0):
    major, minor = const_int(major, "major"), const_int(minor, "minor")
    target = _target(ctx)
    return target.backend == "cuda" and target.arch >= major * 10 + minor


@rule("target_info.is_hip")
def _is_hip(ctx):
    return _target(ctx).backend == "hip"


@rule("target_info.is_hip_cdna3")
def _is_hip_cdna3(ctx):
    return _target(ctx).arch == "gfx942"


@rule("target_info.is_hip_cdna4")
def _is_hip_cdna4(ctx):
    return _target(ctx).arch == "gfx950"


@rule("assume")
def _assume(ctx, cond):
    """``tl.assume``: a hint; a runtime condition must be a boolean (as Triton requires), a
    compile-time one must hold."""
    if not isinstance(cond, Tensor):
        if not cond:
            raise SemanticError("tl.assume on a condition that is false at compile time", param="cond")
        return
    if cond.dtype != T.i1:
        raise SemanticError(f"'cond' must be a boolean (a comparison), got {S.describe(cond)}", param="cond")


@rule("static_assert")
def _static_assert(ctx, cond, msg=""):
    cond = constexpr(cond, "cond")
    if not cond:
        raise StaticAssertionFailed(f"tl.static_assert failed: {msg}" if msg else "tl.static_assert failed")


@rule("static_print")
def _static_print(ctx, *values):
    print(*values)


@rule("device_print")
def _device_print(ctx, prefix, *args, hex=False):
    prefix = constexpr(prefix, "prefix")
    operands = [tensor_arg(ctx.b, a, "argument").value for a in args]
    ctx.b.create("tl.print", operands, [], {"prefix": str(prefix), "hex": bool(hex)})


@rule("device_assert")
def _device_assert(ctx, cond, msg=""):
    if not isinstance(cond, Tensor):
        if not cond:
            raise SemanticError(f"tl.device_assert on a condition that is false at compile time: {msg}")
        return
    ctx.b.create("tl.assert", [S.to_bool(ctx.b, cond).value], [], {"message": str(constexpr(msg, "msg"))})
