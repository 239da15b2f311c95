"""Typing rules and IR construction for the blocked-tensor language.

The rules follow Triton's: Python literals are "weak" (they do not widen a
tensor of the same or a higher kind), float16/bfloat16 ``/`` and ``%`` compute
in float32, integer promotion picks the wider type (unsigned wins at equal
width), ``//`` and ``%`` on integers have C semantics (truncation).

Functions raise ``SemanticError`` with a sentence; the code generator turns it
into a ``CompilationError`` at the user's line.
"""
from __future__ import annotations

import builtins
import math
from typing import Any

from ..ir import types as T
from ..ir.builder import Builder
from ..ir.types import PointerType, ScalarType, TensorType, Type
from .values import SemanticError, Tensor

__all__ = ["SemanticError", "binary", "cast", "compare", "constant", "describe", "where"]

# How each binary op is spelled in the user's source, for messages.
OP_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
              "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>", "pow": "**",
              "min": "tl.minimum", "max": "tl.maximum"}


def op_symbol(op: str) -> str:
    symbol = OP_SYMBOLS.get(op, op)
    return symbol if symbol.startswith("tl.") else f"'{symbol}'"


_WEAK_KIND_ORDER = {"bool": 0, "uint": 1, "int": 1, "float": 2}     # a literal against a tensor (Triton's KIND)


# -- constants ----------------------------------------------------------------

def literal_type(value) -> ScalarType:
    """The type a Python literal takes when it becomes a runtime value."""
    if isinstance(value, bool):
        return T.i1
    if isinstance(value, int):
        if 2**31 <= value < 2**32:     # Triton's to_tensor: 0xCD9E8D57 is a uint32, not an int64
            return T.u32
        t = T.integer_type(value)
        if t is None:
            raise SemanticError(f"integer literal {value} does not fit in 64 bits")
        return t
    if isinstance(value, float):
        return T.f32
    raise SemanticError(f"cannot use {describe(value)} as a runtime value")


def constant(b: Builder, value, type: Type) -> Tensor:
    scalar = type.element if isinstance(type, TensorType) else type
    if not isinstance(value, (bool, int, float)):
        raise SemanticError(f"expected a number or a tensor, got {describe(value)}")
    if isinstance(scalar, PointerType):
        raise SemanticError(f"cannot use the number {value!r} as a {scalar} (pointers come from kernel "
                            f"arguments and pointer arithmetic)")
    if isinstance(scalar, ScalarType) and scalar.is_float:
        value = float(value)
    elif isinstance(scalar, ScalarType) and scalar.is_boolean:
        value = bool(value)
    elif isinstance(scalar, ScalarType):
        if isinstance(value, float) and not math.isfinite(value):
            raise SemanticError(f"cannot use the number {value!r} as an {scalar} value (integers have no "
                                f"NaN or infinity)")
        value = int(value)
        lo, hi = int_range(scalar)
        if not lo <= value <= hi:
            raise SemanticError(f"value {value} does not fit in {scalar}")
    return Tensor(b.value("arith.constant", [], type, value=value))


def int_range(t: ScalarType) -> tuple[int, int]:
    if t.is_boolean:
        return 0, 1
    if t.is_unsigned:
        return 0, 2**t.bits - 1
    return -2**(t.bits - 1), 2**(t.bits - 1) - 1


def to_tensor(b: Builder, value, type: Type | None = None) -> Tensor:
    """Materialize a Python number (or pass a Tensor through)."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (bool, int, float)):
        return constant(b, value, type or literal_type(value))
    raise SemanticError(f"expected a tensor or a number, got {describe(value)}")


def describe(value) -> str:
    """A value as a message shows it: 'a tensor of type tensor<16xf32>', 'str 'a''..."""
    if isinstance(value, Tensor):
        if value.is_block:
            return f"a tensor of type {value.type}"
        return f"a runtime scalar of type {value.type}"
    if value is None:
        return "None"
    if hasattr(type(value), "tlxc_describe"):      # frontend structures (frontend/block_ptr.py)
        return value.tlxc_describe()
    if isinstance(value, (ScalarType, PointerType)):
        return f"the dtype {value}"
    if isinstance(value, tuple) and any(isinstance(v, Tensor) for v in value):
        return "a tuple holding runtime values (" + ", ".join(
            str(v.type) if isinstance(v, Tensor) else repr(v) for v in value) + ")"
    if callable(value) and hasattr(value, "__name__"):
        return f"the function {value.__name__}"
    return f"{type(value).__name__} {value!r}"


# -- promotion ----------------------------------------------------------------

def integer_promote(a: ScalarType, b: ScalarType) -> ScalarType:
    if a == b:
        return a
    a_signed, b_signed = a.kind != "uint", b.kind != "uint"
    if a_signed == b_signed:
        return a if a.bits >= b.bits else b
    unsigned, signed = (b, a) if a_signed else (a, b)
    return unsigned if unsigned.bits >= signed.bits else signed


def computation_type(a: ScalarType, a_weak: bool, b: ScalarType, b_weak: bool,
                     div_or_mod: bool) -> ScalarType:
    """The type both operands of an arithmetic op are converted to."""
    if a_weak != b_weak:
        weak, strong = (a, b) if a_weak else (b, a)
        # Triton ranks kinds bool < integral < floating here: a literal int adopts an unsigned
        # tensor's type as it does a signed one's (``u32 // 4`` is u32)
        if _WEAK_KIND_ORDER[weak.kind] <= _WEAK_KIND_ORDER[strong.kind]:
            if div_or_mod and strong in (T.f16, T.bf16):
                return T.f32
            return strong
    if T.f64 in (a, b):
        return T.f64
    if T.f32 in (a, b):
        return T.f32
    if a.is_float8 or b.is_float8:
        if a == b and not div_or_mod:
            raise SemanticError(f"arithmetic on {a} is not supported; convert to float16/float32 first")
        return T.f32
    if a.is_float or b.is_float:
        if a == b and not div_or_mod:
            return a
        if {a, b} == {T.f16, T.bf16} or div_or_mod:
            return T.f32
        return a if a.is_float else b
    if div_or_mod and a.kind != b.kind and not (a.is_boolean or b.is_boolean):
        raise SemanticError(f"cannot use /, // or % on integers of mixed signedness ({a} and {b}); "
                            f"convert one operand with .to(...)")
    return integer_promote(a, b)


# -- shapes -------------------------------------------------------------------

def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    # Triton's broadcast_impl_value: the lower-rank operand gains leading dimensions
    # of size 1 ([32, 64] * [64] is [32, 64] * [1, 64]).
    rank = builtins.max(len(a), len(b))
    padded_a, padded_b = (1,) * (rank - len(a)) + tuple(a), (1,) * (rank - len(b)) + tuple(b)
    out = []
    for x, y in zip(padded_a, padded_b):
        if x != y and x != 1 and y != 1:
            raise SemanticError(f"shape mismatch: cannot broadcast {list(a)} and {list(b)} "
                                f"(dimension {len(out)}: {x} vs {y})")
        out.append(builtins.max(x, y))
    return tuple(out)


def broadcast_to(b: Builder, x: Tensor, shape: tuple[int, ...]) -> Tensor:
    if x.shape == shape:
        return x
    if not x.is_block:
        return Tensor(b.value("tl.splat", [x.value], TensorType(shape, x.type)))
    if len(x.shape) > len(shape):
        raise SemanticError(f"cannot broadcast {list(x.shape)} to {list(shape)}: the target has fewer dimensions")
    while len(x.shape) < len(shape):      # leading dimensions of size 1, as broadcast_shapes adds them
        x = Tensor(b.value("tl.expand_dims", [x.value], TensorType((1,) + x.shape, x.dtype), axis=0))
    if x.shape == shape:
        return x
    for s, d in zip(x.shape, shape):
        if s != d and s != 1:
            raise SemanticError(f"cannot broadcast {list(x.shape)} to {list(shape)}")
    return Tensor(b.value("tl.broadcast", [x.value], TensorType(shape, x.dtype)))


def cast(b: Builder, x: Tensor, dtype: ScalarType | PointerType, bitcast: bool = False) -> Tensor:
    require_number(x, "a conversion (.to)")
    if x.dtype == dtype:
        return x
    result = T.with_element(x.type, dtype)
    src_ptr, dst_ptr = isinstance(x.dtype, PointerType), isinstance(dtype, PointerType)
    if src_ptr != dst_ptr and not bitcast:
        scalar = dtype if src_ptr else x.dtype
        if not (isinstance(scalar, ScalarType) and scalar.is_integer and scalar.bits == 64):
            raise SemanticError(f"cannot convert {x.dtype} to {dtype}: a pointer converts only to another "
                                f"pointer type or to a 64-bit integer")
    if bitcast or src_ptr or dst_ptr:
        src_bits = x.dtype.bits if isinstance(x.dtype, ScalarType) else 64
        dst_bits = dtype.bits if isinstance(dtype, ScalarType) else 64
        if src_bits != dst_bits:
            raise SemanticError(f"cannot bitcast {x.dtype} ({src_bits} bits) to {dtype} ({dst_bits} bits)")
        return Tensor(b.value("arith.bitcast", [x.value], result))
    return Tensor(b.value("arith.cast", [x.value], result))


# -- binary ops ---------------------------------------------------------------

def not_a_number(v) -> str | None:
    """What ``v`` is when it is a runtime value no arithmetic applies to (a barrier, a
    shared-memory buffer, a descriptor: ``'an mbarrier array (mbarrier<2>)'``), else None."""
    if not isinstance(v, Tensor) or isinstance(v.dtype, (ScalarType, PointerType)):
        return None
    t = v.type
    if isinstance(t, T.BarrierType):
        what = "an mbarrier array" if t.num else "an mbarrier"
    elif isinstance(t, T.MemDescType):
        what = "a buffer array" if t.num else "a buffer"
        what += " in tensor memory" if t.storage == "tmem" else " in shared memory"
    elif isinstance(t, T.TensorDescType):
        what = "a tensor descriptor"
    else:
        what = "a value"
    return f"{what} ({t})"


def require_number(v, op: str):
    """``v`` unless it is a barrier, buffer or descriptor, which no arithmetic,
    comparison or truth test applies to."""
    what = not_a_number(v)
    if what is not None:
        hint = "; index it and load it first (tlx.local_load)" if "buffer" in what else ""
        raise SemanticError(f"{op} needs numbers, tensors or pointers, got {what}{hint}")
    return v


def _scalar_of(v, op: str = "this operation") -> tuple[ScalarType, bool]:
    """(type, weak) of an operand; weak = a Python literal."""
    if isinstance(v, Tensor):
        require_number(v, op)
        return v.dtype, False
    return literal_type(v), True


def _unify(b: Builder, lhs, rhs, target: ScalarType) -> tuple[Tensor, Tensor]:
    shape = broadcast_shapes(lhs.shape if isinstance(lhs, Tensor) else (),
                             rhs.shape if isinstance(rhs, Tensor) else ())
    out = []
    for v in (lhs, rhs):
        t = cast(b, v, target) if isinstance(v, Tensor) else constant(b, v, target)
        out.append(broadcast_to(b, t, shape))
    return out[0], out[1]


def binary(b: Builder, op: str, lhs, rhs) -> Tensor:
    """``lhs <op> rhs`` for op in add sub mul truediv floordiv mod and or xor
    shl shr min max, with promotion and broadcasting."""
    symbol = op_symbol(op)
    lt, lw = _scalar_of(lhs, symbol)
    rt, rw = _scalar_of(rhs, symbol)
    if isinstance(lt, PointerType) or isinstance(rt, PointerType):
        return _pointer_arith(b, op, lhs, rhs)
    if op in ("and", "or", "xor", "shl", "shr"):
        if not (lt.is_integer and rt.is_integer):
            raise SemanticError(f"{op_symbol(op)} needs integer operands, got {lt} and {rt}")
        target = computation_type(lt, lw, rt, rw, False)
    elif op == "truediv":
        target = computation_type(lt, lw, rt, rw, True)
        if target.is_integer:
            target = T.f32
        op = "div"
    elif op == "floordiv":
        target = computation_type(lt, lw, rt, rw, True)
        if not target.is_integer:
            raise SemanticError(f"'//' needs integer operands, got {lt} and {rt} "
                                f"(use tl.floor(x / y) for floats)")
        op = "div"
    elif op == "mod":
        target = computation_type(lt, lw, rt, rw, True)
        op = "rem"
    else:
        target = computation_type(lt, lw, rt, rw, False)
    for value, weak in ((lhs, lw), (rhs, rw)):
        if weak and target.kind == "uint" and isinstance(value, (int, float)) and value < 0:
            raise SemanticError(f"cannot {symbol} an unsigned tensor ({target}) and a negative literal "
                                f"({value}); convert the tensor to a signed type first")
    # booleans: a product stays boolean (Triton's i1 multiply, a logical and: LightLLM builds masks as
    # ``(n < N)[None, :] * (m < M)[:, None]``); sums, differences and remainders count in i32
    if target.is_boolean and op in ("add", "sub", "rem"):
        target = T.i32
    x, y = _unify(b, lhs, rhs, target)
    if op == "shr" and target.kind == "uint" and lt.kind == "int":
        # Triton keys >> on the left operand's signedness: a signed value shifts arithmetically even
        # where the promoted type is unsigned (int8 >> uint8: the bits of the int8, sign-filled)
        signed = ScalarType(f"i{target.bits}")
        shifted = Tensor(b.value("arith.shr", [cast(b, x, signed, bitcast=True).value,
                                               cast(b, y, signed, bitcast=True).value],
                                 _with_element(x.type, signed)))
        return cast(b, shifted, target, bitcast=True)
    return Tensor(b.value(f"arith.{op}", [x.value, y.value], x.type))


def _with_element(t, element: ScalarType):
    return TensorType(t.shape, element) if isinstance(t, TensorType) else element


def min_max(b: Builder, op: str, lhs, rhs, propagate_nan: bool = False) -> Tensor:
    """``tl.minimum``/``tl.maximum``: a NaN operand is ignored (IEEE minNum/maxNum, as
    Triton's default ``PropagateNan.NONE``); with ``propagate_nan`` a NaN operand wins."""
    result = binary(b, op, lhs, rhs)
    if not (propagate_nan and isinstance(result.dtype, ScalarType) and result.dtype.is_float):
        return result
    x, y = _unify(b, lhs, rhs, result.dtype)
    either_nan = binary(b, "or", compare(b, "ne", x, x), compare(b, "ne", y, y))
    nan = constant(b, math.nan, result.type)
    return Tensor(b.value("arith.select", [either_nan.value, nan.value, result.value], result.type))


def _pointer_arith(b: Builder, op: str, lhs, rhs) -> Tensor:
    lt, _ = _scalar_of(lhs)
    rt, _ = _scalar_of(rhs)
    if op == "sub" and isinstance(lt, PointerType) and isinstance(rt, ScalarType):
        rhs = negate(b, to_tensor(b, rhs))
        op = "add"
    if op != "add":
        raise SemanticError(f"{op_symbol(op)} is not defined on pointers ({lt} and {rt}); pointers "
                            f"support only pointer + integer and pointer - integer")
    ptr, offset = (lhs, rhs) if isinstance(lt, PointerType) else (rhs, lhs)
    off_type, _ = _scalar_of(offset)
    if not isinstance(off_type, ScalarType) or not off_type.is_integer:
        raise SemanticError(f"pointer offsets must be integers, got {off_type}")
    offset = to_tensor(b, offset)
    shape = broadcast_shapes(ptr.shape, offset.shape)
    ptr = broadcast_to(b, ptr, shape)
    offset = broadcast_to(b, offset, shape)
    return Tensor(b.value("tl.addptr", [ptr.value, offset.value], ptr.type))


def compare(b: Builder, pred: str, lhs, rhs) -> Tensor:
    lt, lw = _scalar_of(lhs, "a comparison")
    rt, rw = _scalar_of(rhs, "a comparison")
    if isinstance(lt, PointerType) or isinstance(rt, PointerType):
        if lt != rt:
            raise SemanticError(f"cannot compare {lt} with {rt}: a pointer compares only with a "
                                f"pointer of the same type")
        target = lt
        shape = broadcast_shapes(lhs.shape, rhs.shape)
        x, y = broadcast_to(b, lhs, shape), broadcast_to(b, rhs, shape)
    else:
        target = computation_type(lt, lw, rt, rw, False)
        x, y = _unify(b, lhs, rhs, target)
    return Tensor(b.value("arith.cmp", [x.value, y.value], T.with_element(x.type, T.i1),
                          predicate=pred))


def negate(b: Builder, x: Tensor) -> Tensor:
    require_number(x, "unary '-'")
    if isinstance(x.dtype, PointerType):
        raise SemanticError("cannot negate a pointer")
    if x.dtype.is_boolean:
        x = cast(b, x, T.i32)
    return Tensor(b.value("arith.neg", [x.value], x.type))


def invert(b: Builder, x: Tensor) -> Tensor:
    require_number(x, "'~'")
    if not (isinstance(x.dtype, ScalarType) and x.dtype.is_integer):
        raise SemanticError(f"'~' needs an integer operand, got {x.dtype}")
    return Tensor(b.value("arith.not", [x.value], x.type))


def logical_not(b: Builder, x: Tensor) -> Tensor:
    require_number(x, "'not'")
    if isinstance(x.dtype, PointerType):
        raise SemanticError(f"cannot use 'not' on a pointer ({x.dtype}); compare it first")
    return compare(b, "eq", x, 0 if x.dtype.is_integer else 0.0) if not x.dtype.is_boolean \
        else Tensor(b.value("arith.not", [x.value], x.type))


def to_bool(b: Builder, x: Tensor) -> Tensor:
    require_number(x, "a condition")
    if isinstance(x.dtype, PointerType) and not x.is_block:
        # a scalar pointer is true when it is not null, as in Triton (``if mean_ptr:`` guards an optional
        # output; None passed instead folds the branch away at compile time)
        return compare(b, "ne", cast(b, x, T.i64), 0)
    if x.dtype == T.i1:
        return x
    if isinstance(x.dtype, PointerType):
        raise SemanticError(f"cannot use a tensor of pointers ({x.type}) as a condition; compare it first")
    return compare(b, "ne", x, 0.0 if x.dtype.is_float else 0)


def require_mask(x: Tensor, param: str = "mask") -> Tensor:
    """A load/store/copy mask must already be boolean, as in Triton ("Mask must have boolean scalar
    type"): an integer or float tensor is not read as "non-zero", which would hide a missing
    comparison (``mask=offs`` instead of ``mask=offs < n``)."""
    if x.dtype != T.i1:
        raise SemanticError(f"'{param}' must be a boolean tensor (a comparison such as offs < n), "
                            f"got {describe(x)}", param=param)
    return x


def where(b: Builder, cond, x, y) -> Tensor:
    cond = to_bool(b, to_tensor(b, cond))
    xt, xw = _scalar_of(x, "tl.where")
    yt, yw = _scalar_of(y, "tl.where")
    if isinstance(xt, PointerType) or isinstance(yt, PointerType):
        if xt != yt:
            raise SemanticError(f"tl.where needs x and y of one pointer type, got {xt} and {yt}")
        target = xt
    else:
        target = computation_type(xt, xw, yt, yw, False)
    shape = broadcast_shapes(cond.shape, broadcast_shapes(
        x.shape if isinstance(x, Tensor) else (), y.shape if isinstance(y, Tensor) else ()))
    vals = []
    for v in (x, y):
        t = cast(b, v, target) if isinstance(v, Tensor) else constant(b, v, target)
        vals.append(broadcast_to(b, t, shape))
    cond = broadcast_to(b, cond, shape)
    return Tensor(b.value("arith.select", [cond.value, vals[0].value, vals[1].value], vals[0].type))


def unary_float(b: Builder, fn: str, x) -> Tensor:
    """math.<fn>; integers are converted to float32 first (as Triton)."""
    x = require_number(to_tensor(b, x), f"tl.{fn}")
    if isinstance(x.dtype, PointerType):
        raise SemanticError(f"tl.{fn} needs a numeric operand, got {x.dtype}")
    if not x.dtype.is_float:
        x = cast(b, x, T.f32)
    if x.dtype.is_float8:
        raise SemanticError(f"tl.{fn} on {x.dtype} is not supported; convert to float32 first")
    return Tensor(b.value(f"math.{fn}", [x.value], x.type))


def fold_python(op: str, a, c):
    """Evaluate a binary op on two compile-time values (Python semantics,
    except ``//``/``%`` on ints, which stay Python's: they are constexpr)."""
    import operator
    table = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
             "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
             "and": operator.and_, "or": operator.or_, "xor": operator.xor,
             "shl": operator.lshift, "shr": operator.rshift, "pow": operator.pow}
    return table[op](a, c)


def is_power_of_two(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def check_shape(shape: Any, what: str) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise SemanticError(f"'{what}' must be a tuple of compile-time integers, got {describe(shape)}",
                            param=what)
    for i, d in enumerate(shape):
        if isinstance(d, Tensor):
            raise SemanticError(f"'{what}' must be a tuple of compile-time integers, but dimension {i} is "
                                f"{describe(d)}; shapes must be tl.constexpr", param=what)
        if isinstance(d, bool) or not isinstance(d, int):
            raise SemanticError(f"'{what}' must be a tuple of compile-time integers, but dimension {i} is "
                                f"{describe(d)}", param=what)
    for d in shape:
        if not is_power_of_two(d):
            raise SemanticError(f"'{what}' must have power-of-two dimensions, got {list(shape)}", param=what)
    numel = math.prod(shape)
    if numel > T.MAX_TENSOR_NUMEL:
        raise SemanticError(f"'{what}' {list(shape)} has {numel} elements, more than the "
                            f"{T.MAX_TENSOR_NUMEL} a block may hold")
    return tuple(shape)
