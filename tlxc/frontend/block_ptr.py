"""Block pointers, as Triton has them: ``tl.make_block_ptr``, ``tl.advance``, and
``tl.load`` / ``tl.store`` through a block pointer with ``boundary_check`` and
``padding_option``.

A block pointer is a compile-time structure (``BlockPointer``) of frontend values:
the base pointer, the parent tensor's shape and strides (runtime scalars or
numbers), the block's offsets (i32 runtime scalars), and the compile-time
``block_shape`` and ``order``.  It never becomes an IR value of its own: a load or
a store through it is rewritten here into a tensor of pointers and a mask built
from ``tl.arange`` (what Triton's RewriteTensorPointer pass does), so the layout,
axis and vectorization analyses, the interpreter and the codegen see ordinary
``tl.load`` / ``tl.store`` ops.  In a runtime loop or ``if``, the code generator
carries the structure's runtime fields (``Aggregate`` below) and rebuilds it.

Integer widths follow Triton's semantics (offsets are 32-bit; shapes and strides
are 64-bit) without paying 64-bit arithmetic where the result is exact in 32 bits:
a stride known at compile time (a unit stride specialized to 1, a constexpr) keeps
the per-element offsets in i32 when ``(block - 1) * |stride|`` fits, and a 32-bit
signed shape is compared in i32 (an index that overflows i32 wraps negative and
fails the ``>= 0`` check, as it is out of bounds anyway).
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.types import PointerType, ScalarType, TensorType
from . import semantic as S
from .builtins import RULES, constexpr, expand_dims, rule
from .values import SemanticError, Tensor

_I32_MAX = 2**31 - 1


class Aggregate:
    """A compile-time structure whose fields are frontend values (runtime tensors or
    compile-time numbers).  The code generator carries its runtime fields through
    ``scf.for`` / ``scf.while`` / ``scf.if`` and rebuilds it with ``replace``; its
    compile-time part (``static_key`` and the compile-time fields) must not change
    across a loop body or between the branches of an ``if``."""

    kind = "aggregate"

    def fields(self) -> tuple[str, ...]:
        """The fields' names (SSA name hints and messages), one per ``leaves()`` entry."""
        raise NotImplementedError

    def leaves(self) -> tuple:
        raise NotImplementedError

    def replace(self, leaves) -> Aggregate:
        raise NotImplementedError

    def static_key(self) -> tuple:
        raise NotImplementedError

    def methods(self) -> dict:
        """``x.name(...)`` methods: name → builtin."""
        return {}

    def attributes(self) -> dict:
        """``x.name`` compile-time or runtime attributes: name → value."""
        return {}


class BlockPointer(Aggregate):
    kind = "block pointer"
    __tlxc_runtime_value__ = True      # isinstance(p, tl.tensor): Triton's block pointer is a tl.tensor

    def __init__(self, base: Tensor, shape: tuple, strides: tuple, offsets: tuple[Tensor, ...],
                 block_shape: tuple[int, ...], order: tuple[int, ...]):
        self.base, self.shape, self.strides, self.offsets = base, shape, strides, offsets
        self.block_shape, self.order = block_shape, order

    @property
    def rank(self) -> int:
        return len(self.block_shape)

    @property
    def element(self):
        return self.base.dtype.pointee

    def fields(self) -> tuple[str, ...]:
        dims = range(self.rank)
        return ("base", *(f"shape{i}" for i in dims), *(f"stride{i}" for i in dims),
                *(f"offset{i}" for i in dims))

    def leaves(self) -> tuple:
        return (self.base, *self.shape, *self.strides, *self.offsets)

    def replace(self, leaves) -> BlockPointer:
        n = self.rank
        leaves = tuple(leaves)
        return BlockPointer(leaves[0], leaves[1:1 + n], leaves[1 + n:1 + 2 * n], leaves[1 + 2 * n:],
                            self.block_shape, self.order)

    def static_key(self) -> tuple:
        return ("block_ptr", self.block_shape, self.order)

    def methods(self) -> dict:
        from ..language import core as tl
        return {"advance": tl.advance}

    def attributes(self) -> dict:
        """``p.dtype`` / ``p.type``: a pointer to the element type, so that Triton's
        ``x.to(p.dtype.element_ty)`` casts to what the block pointer stores (Triton's type is a
        pointer to a block type, whose scalar a cast takes)."""
        return {"dtype": PointerType(self.element), "type": PointerType(self.element),
                "block_shape": tuple(self.block_shape)}

    def tlxc_describe(self) -> str:
        return (f"a block pointer to {self.element} with block_shape {list(self.block_shape)} "
                f"and order {list(self.order)}")

    def __repr__(self) -> str:
        return f"BlockPointer({self.element}, block_shape={list(self.block_shape)})"


def is_block_pointer(value) -> bool:
    return isinstance(value, BlockPointer)


# -- argument checks ------------------------------------------------------------------
def _int_tuple(value, what: str) -> tuple[int, ...]:
    """A compile-time tuple of integers (a single integer is a 1-tuple)."""
    value = constexpr(value, what)
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    for i, v in enumerate(items):
        if isinstance(v, bool) or not isinstance(v, int):
            raise SemanticError(f"'{what}' must hold compile-time integers, but element {i} is "
                                f"{S.describe(v)}", param=what)
    return items


def _runtime_tuple(value, what: str, rank: int) -> tuple:
    """One integer (a number or an integer scalar) per dimension."""
    if isinstance(value, Tensor) or not isinstance(value, (tuple, list)):
        value = (value,)
    items = tuple(value)
    if len(items) != rank:
        raise SemanticError(f"'{what}' has {len(items)} element{'s' if len(items) != 1 else ''} but the block "
                            f"has rank {rank} (block_shape has {rank} dimensions)", param=what)
    for i, v in enumerate(items):
        if isinstance(v, Tensor):
            if v.is_block or not isinstance(v.dtype, ScalarType) or not v.dtype.is_integer or v.dtype.is_boolean:
                raise SemanticError(f"'{what}' must hold integer scalars, but element {i} is {S.describe(v)}",
                                    param=what)
        elif isinstance(v, bool) or not isinstance(v, int):
            raise SemanticError(f"'{what}' must hold integers, but element {i} is {S.describe(v)}", param=what)
    return items


def _offset(b, value, what: str, index: int) -> Tensor:
    """An offset as an i32 runtime scalar (Triton's block pointers have 32-bit offsets)."""
    if isinstance(value, Tensor):
        if value.dtype.bits == 64:
            raise SemanticError(f"'{what}' element {index} is {S.describe(value)}, but block pointer offsets are "
                                f"32-bit: convert it with .to(tl.int32)", param=what)
        return S.cast(b, value, T.i32)
    if not -2**31 <= value <= _I32_MAX:
        raise SemanticError(f"'{what}' element {index} ({value}) does not fit in the 32 bits of a block pointer "
                            f"offset", param=what)
    return S.constant(b, value, T.i32)


def _extent(value, what: str, index: int):
    """A shape or stride: kept as given (a number or an integer scalar); 64-bit range."""
    if not isinstance(value, Tensor) and not -2**63 <= value < 2**63:
        raise SemanticError(f"'{what}' element {index} ({value}) does not fit in 64 bits", param=what)
    return value


def _block_pointer(value, what: str) -> BlockPointer:
    if not isinstance(value, BlockPointer):
        raise SemanticError(f"'{what}' must be a block pointer (from tl.make_block_ptr), got {S.describe(value)}",
                            param=what)
    return value


# -- make_block_ptr / advance -------------------------------------------------------------
@rule("make_block_ptr")
def _make_block_ptr(ctx, base, shape, strides, offsets, block_shape, order):
    b = ctx.b
    if not isinstance(base, Tensor) or base.is_block or not isinstance(base.dtype, PointerType):
        raise SemanticError(f"'base' must be a scalar pointer (the parent tensor's address), got "
                            f"{S.describe(base)}", param="base")
    if base.dtype.pointee == T.i1:      # as Triton: booleans live in memory as bytes
        base = S.cast(b, base, PointerType(T.i8))
    block_shape = S.check_shape(_int_tuple(block_shape, "block_shape"), "block_shape")
    rank = len(block_shape)
    order = _int_tuple(order, "order")
    if sorted(order) != list(range(rank)):
        raise SemanticError(f"'order' must be a permutation of {list(range(rank))} (one entry per block "
                            f"dimension), got {list(order)}", param="order")
    shape = tuple(_extent(v, "shape", i) for i, v in enumerate(_runtime_tuple(shape, "shape", rank)))
    strides = tuple(_extent(v, "strides", i) for i, v in enumerate(_runtime_tuple(strides, "strides", rank)))
    offsets = tuple(_offset(b, v, "offsets", i) for i, v in enumerate(_runtime_tuple(offsets, "offsets", rank)))
    return BlockPointer(base, shape, strides, offsets, block_shape, order)


@rule("advance")
def _advance(ctx, base, offsets):
    bp = _block_pointer(base, "base")
    deltas = _runtime_tuple(offsets, "offsets", bp.rank)
    moved = []
    for i, (old, delta) in enumerate(zip(bp.offsets, deltas)):
        if not isinstance(delta, Tensor) and delta == 0:
            moved.append(old)
            continue
        moved.append(S.binary(ctx.b, "add", old, _offset(ctx.b, delta, "offsets", i)))
    return BlockPointer(bp.base, bp.shape, bp.strides, tuple(moved), bp.block_shape, bp.order)


# -- load / store rewriting -------------------------------------------------------------------
def boundary_dims(value, rank: int) -> tuple[int, ...]:
    """``boundary_check`` as sorted dimensions (Triton's canonical form)."""
    dims = _int_tuple(value, "boundary_check") if value not in ((), None) else ()
    for d in dims:
        if not 0 <= d < rank:
            raise SemanticError(f"'boundary_check' dimension {d} is out of range for a block of rank {rank} "
                                f"(dimensions are 0..{rank - 1})", param="boundary_check")
    if len(set(dims)) != len(dims):
        raise SemanticError(f"'boundary_check' names a dimension twice: {list(dims)}", param="boundary_check")
    return tuple(sorted(dims))


def _index(b, bp: BlockPointer, dim: int) -> Tensor:
    """``tl.arange(0, block_shape[dim])`` shaped to broadcast along dimension ``dim``."""
    n = bp.block_shape[dim]
    r = Tensor(b.value("tl.arange", [], TensorType((n,), T.i32), start=0, end=n))
    for axis in range(bp.rank):
        if axis != dim:
            r = expand_dims(b, r, axis)
    return r


def _scaled(b, index: Tensor, stride, extent: int) -> Tensor | None:
    """``index * stride`` (None when the stride is 0); i32 when a compile-time stride makes
    it exact in 32 bits, else i64 as Triton computes it."""
    if isinstance(stride, int):
        if stride == 0:
            return None
        if stride == 1:
            return index
        if (extent - 1) * abs(stride) <= _I32_MAX:
            return S.binary(b, "mul", index, stride)
        return S.binary(b, "mul", S.cast(b, index, T.i64), stride)
    return S.binary(b, "mul", S.cast(b, index, T.i64), S.cast(b, stride, T.i64))


def addresses(b, bp: BlockPointer) -> Tensor:
    """The block's element pointers: ``base + sum_i (offset_i + arange_i) * stride_i``, with the
    scalar part (the offsets) added once before the per-element part."""
    ptr = bp.base
    for offset, stride in zip(bp.offsets, bp.strides):
        if isinstance(stride, int) and stride in (0, 1):
            ptr = ptr if stride == 0 else S.binary(b, "add", ptr, offset)
            continue
        step = stride if isinstance(stride, int) else S.cast(b, stride, T.i64)
        ptr = S.binary(b, "add", ptr, S.binary(b, "mul", S.cast(b, offset, T.i64), step))
    for dim, stride in enumerate(bp.strides):
        term = _scaled(b, _index(b, bp, dim), stride, bp.block_shape[dim])
        if term is not None:
            ptr = S.binary(b, "add", ptr, term)
    return S.broadcast_to(b, ptr, bp.block_shape)


def _in_bounds(b, bp: BlockPointer, dim: int) -> Tensor:
    """``0 <= offset + arange < shape`` along ``dim``."""
    shape = bp.shape[dim]
    narrow = (isinstance(shape, int) and shape <= _I32_MAX) or \
        (isinstance(shape, Tensor) and shape.dtype.is_signed and shape.dtype.bits <= 32)
    index, offset = _index(b, bp, dim), bp.offsets[dim]
    if narrow:
        if isinstance(shape, Tensor):
            shape = S.cast(b, shape, T.i32)
        position = S.binary(b, "add", offset, index)
    else:
        if isinstance(shape, Tensor):
            shape = S.cast(b, shape, T.i64)
        position = S.binary(b, "add", S.cast(b, offset, T.i64), S.cast(b, index, T.i64))
    low = S.compare(b, "ge", position, 0)
    high = S.compare(b, "lt", position, shape)
    return S.binary(b, "and", low, high)


def boundary_mask(b, bp: BlockPointer, dims: tuple[int, ...]) -> Tensor | None:
    mask = None
    for dim in dims:
        inside = _in_bounds(b, bp, dim)
        mask = inside if mask is None else S.binary(b, "and", mask, inside)
    return None if mask is None else S.broadcast_to(b, mask, bp.block_shape)


_PADDINGS = ("", "zero", "nan")


def rewrite_load(b, bp: BlockPointer, mask, other, boundary_check, padding_option):
    """A load through a block pointer as (pointers, mask, other) for the plain ``tl.load``.
    Lanes outside the checked dimensions read ``padding_option``: 0, NaN, or, with '',
    what a masked load without ``other`` reads (0 in tlxc; Triton leaves it undefined)."""
    if mask is not None:
        raise SemanticError("'mask' cannot be given with a block pointer: use boundary_check=(dims...) "
                            "to mask the elements outside the parent tensor", param="mask")
    if other is not None:
        raise SemanticError("'other' cannot be given with a block pointer: use padding_option='zero' or "
                            "'nan' for the elements outside the parent tensor", param="other")
    padding = constexpr(padding_option, "padding_option")
    if padding not in _PADDINGS:
        raise SemanticError(f"'padding_option' must be '', 'zero' or 'nan', got {padding!r}",
                            param="padding_option")
    if padding == "nan" and not bp.element.is_float:
        raise SemanticError(f"padding_option='nan' needs a floating-point block, but it holds {bp.element}",
                            param="padding_option")
    dims = boundary_dims(boundary_check, bp.rank)
    pointers = addresses(b, bp)
    mask = boundary_mask(b, bp, dims)
    fill = None
    if mask is not None and padding:
        fill = 0 if padding == "zero" else float("nan")
    return pointers, mask, fill


def rewrite_store(b, bp: BlockPointer, value, mask, boundary_check):
    """A store through a block pointer as (pointers, value, mask) for the plain ``tl.store``:
    ``value`` is a tensor of ``block_shape`` and the block's dtype, or a scalar."""
    if mask is not None:
        raise SemanticError("'mask' cannot be given with a block pointer: use boundary_check=(dims...) "
                            "to skip the elements outside the parent tensor", param="mask")
    elem = bp.element
    if isinstance(value, Tensor):
        if value.is_block and value.shape != bp.block_shape:
            raise SemanticError(f"'value' has shape {list(value.shape)} but the block pointer's block_shape is "
                                f"{list(bp.block_shape)}", param="value")
        if value.dtype != elem:
            raise SemanticError(f"'value' holds {value.dtype} but the block pointer points to {elem}; convert "
                                f"it with .to({_dtype_name(elem)})", param="value")
    elif isinstance(value, (bool, int, float)):
        value = S.constant(b, value, elem)
    else:
        raise SemanticError(f"'value' must be a tensor or a number, got {S.describe(value)}", param="value")
    value = S.broadcast_to(b, value, bp.block_shape)
    dims = boundary_dims(boundary_check, bp.rank)
    return addresses(b, bp), value, boundary_mask(b, bp, dims)


def _dtype_name(t) -> str:
    names = {T.f16: "float16", T.bf16: "bfloat16", T.f32: "float32", T.f64: "float64", T.i8: "int8",
             T.i16: "int16", T.i32: "int32", T.i64: "int64"}
    return f"tl.{names[t]}" if t in names else str(t)


__all__ = ["RULES", "Aggregate", "BlockPointer", "addresses", "is_block_pointer", "rewrite_load", "rewrite_store"]
