"""IR types: scalars, pointers, register tensors.

Types are frozen and hashable; ``str(t)`` is the text form used by the printer
and accepted by the parser (``i32``, ``bf16``, ``ptr<f16>``,
``tensor<128x64xf32>``, ``tensor<128xf32, #L0>`` once a layout is assigned).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .tensormap import MAX_BOX_DIM


class Type:
    """Base of all IR types."""

    @property
    def is_tensor(self) -> bool:
        return False

    @property
    def scalar(self) -> Type:
        """The element type for tensors, the type itself for scalars/pointers."""
        return self


@dataclass(frozen=True)
class ScalarType(Type):
    """A number: signed/unsigned ints, bool (i1), IEEE and fp8 floats."""

    name: str
    # Triton's lists of dtype names (``tl.dtype.SINT_TYPES``...: its tests parametrize over them)
    SINT_TYPES: ClassVar[tuple[str, ...]] = ("int8", "int16", "int32", "int64")
    UINT_TYPES: ClassVar[tuple[str, ...]] = ("int1", "uint8", "uint16", "uint32", "uint64")
    FP_TYPES: ClassVar[tuple[str, ...]] = ("fp8e4b15", "fp8e4nv", "fp8e4b8", "fp8e5", "fp8e5b16", "fp16", "bf16",
                                           "fp32", "fp64")
    STANDARD_FP_TYPES: ClassVar[tuple[str, ...]] = ("fp16", "bf16", "fp32", "fp64")
    OTHER_TYPES: ClassVar[tuple[str, ...]] = ("void",)

    def __post_init__(self):
        if self.name not in _SCALAR_INFO:
            raise ValueError(f"unknown scalar type {self.name!r}")

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__

    @property
    def bits(self) -> int:
        return _SCALAR_INFO[self.name][1]

    @property
    def kind(self) -> str:
        """'bool', 'int', 'uint' or 'float'."""
        return _SCALAR_INFO[self.name][0]

    @property
    def is_boolean(self) -> bool:
        return self.kind == "bool"

    @property
    def is_integer(self) -> bool:
        """True for every integer type, bool included (as Triton's ``is_int()``)."""
        return self.kind in ("bool", "int", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind == "int"

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "uint"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_float8(self) -> bool:
        return self.name in ("f8e4m3", "f8e5m2")

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8)


# name -> (kind, bits)
_SCALAR_INFO: dict[str, tuple[str, int]] = {
    "i1": ("bool", 1),
    "i8": ("int", 8), "i16": ("int", 16), "i32": ("int", 32), "i64": ("int", 64),
    "u8": ("uint", 8), "u16": ("uint", 16), "u32": ("uint", 32), "u64": ("uint", 64),
    "f8e4m3": ("float", 8), "f8e5m2": ("float", 8),
    "f16": ("float", 16), "bf16": ("float", 16), "f32": ("float", 32), "f64": ("float", 64),
}

i1 = ScalarType("i1")
i8, i16, i32, i64 = (ScalarType(n) for n in ("i8", "i16", "i32", "i64"))
u8, u16, u32, u64 = (ScalarType(n) for n in ("u8", "u16", "u32", "u64"))
f8e4m3, f8e5m2 = ScalarType("f8e4m3"), ScalarType("f8e5m2")
f16, bf16, f32, f64 = (ScalarType(n) for n in ("f16", "bf16", "f32", "f64"))

SCALAR_TYPES: dict[str, ScalarType] = {n: ScalarType(n) for n in _SCALAR_INFO}


@dataclass(frozen=True)
class PointerType(Type):
    """A pointer into global memory to elements of ``pointee``; ``const`` (a parameter annotated
    ``tl.const``, and pointers computed from it): stores and atomics through it are errors."""

    pointee: Type
    const: bool = False

    @property
    def element_ty(self) -> Type:
        """Triton's name for the pointee (``x_ptr.dtype.element_ty``)."""
        return self.pointee

    def is_ptr(self) -> bool:
        """Triton's query: a pointer type (its number queries, ``is_floating()``... are False)."""
        return True

    def __str__(self) -> str:
        return f"ptr<{'const ' if self.const else ''}{self.pointee}>"

    __repr__ = __str__


# The most elements one register tensor (a block) may hold, as Triton's TRITON_MAX_TENSOR_NUMEL.
MAX_TENSOR_NUMEL = 2**20


@dataclass(frozen=True)
class TensorType(Type):
    """A register tensor (a "block") of scalars or pointers.

    ``layout`` is None until layout inference assigns a distributed layout
    (an object from ``tlxc.ir.layouts``; anything hashable with ``str()``).
    """

    shape: tuple[int, ...]
    element: Type
    layout: Any = None

    @property
    def is_tensor(self) -> bool:
        return True

    @property
    def scalar(self) -> Type:
        return self.element

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def rank(self) -> int:
        return len(self.shape)

    def with_element(self, element: Type) -> TensorType:
        return TensorType(self.shape, element, self.layout)

    def with_layout(self, layout: Any) -> TensorType:
        return TensorType(self.shape, self.element, layout)

    def with_shape(self, shape: tuple[int, ...]) -> TensorType:
        return TensorType(tuple(shape), self.element, None)

    def __str__(self) -> str:
        dims = "".join(f"{d}x" for d in self.shape)
        text = f"tensor<{dims}{self.element}"
        if self.layout is not None:
            text += f", {layout_ref(self.layout)}"
        return text + ">"

    __repr__ = __str__


def layout_ref(layout: Any) -> str:
    """A layout's text inside a type.  The printer substitutes ``#aliases``
    for long layouts; a bare ``str(type)`` shows the layout inline."""
    return str(layout)


def integer_type(value: int) -> ScalarType | None:
    """The type a Python int takes at run time, as in Triton: i32 if it fits,
    else i64, else u64; None if it needs more than 64 bits."""
    if -2**31 <= value < 2**31:
        return i32
    if -2**63 <= value < 2**63:
        return i64
    if 0 <= value < 2**64:
        return u64
    return None


def element_type(t: Type) -> Type:
    return t.element if isinstance(t, TensorType) else t


def shape_of(t: Type) -> tuple[int, ...]:
    return t.shape if isinstance(t, TensorType) else ()


def with_element(t: Type, element: Type) -> Type:
    """Same shape (and layout) as ``t`` with another element type."""
    return t.with_element(element) if isinstance(t, TensorType) else element


# -- Triton-compatible dtype queries (user code calls these on ``x.dtype``) --
# Triton's dtype methods and attributes, with its names: ``is_fp16()``, ``is_int()``, ``int_bitwidth``,
# ``fp_mantissa_width``, ``get_int_max_value()``...  (tlxc's own properties are ``is_integer``,
# ``is_boolean``, ``is_float8``, ``is_float``, ``bits``, ``kind``.)
_TRITON_NAMES = {"i1": "int1", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
                 "u16": "uint16", "u32": "uint32", "u64": "uint64", "f8e4m3": "fp8e4nv", "f8e5m2": "fp8e5",
                 "f16": "fp16", "bf16": "bf16", "f32": "fp32", "f64": "fp64"}
_MANTISSA_BITS = {"f8e4m3": 3, "f8e5m2": 2, "f16": 10, "bf16": 7, "f32": 23, "f64": 52}
_EXPONENT_BIAS = {"f8e4m3": 7, "f8e5m2": 15, "f16": 15, "bf16": 127, "f32": 127, "f64": 1023}


def _name_query(triton_name: str):
    return lambda self: _TRITON_NAMES[self.name] == triton_name


for _name in _TRITON_NAMES.values():     # is_int8(), is_uint32(), is_fp16(), is_bf16(), is_fp8e4nv(), ...
    setattr(ScalarType, f"is_{_name}", _name_query(_name))
ScalarType.is_fp8 = lambda self: self.is_float8
ScalarType.is_fp8e4b15 = ScalarType.is_fp8e4b8 = ScalarType.is_fp8e5b16 = lambda self: False   # AMD/older fp8s
ScalarType.is_floating = lambda self: self.is_float
ScalarType.is_standard_floating = lambda self: self.name in ("f16", "bf16", "f32", "f64")
ScalarType.is_int = lambda self: self.is_integer
ScalarType.is_bool = lambda self: self.is_boolean
ScalarType.is_int_signed = lambda self: self.kind == "int"
ScalarType.is_int_unsigned = lambda self: self.kind in ("uint", "bool")     # Triton counts int1 unsigned
ScalarType.is_ptr = ScalarType.is_block = ScalarType.is_void = ScalarType.is_const = lambda self: False
ScalarType.primitive_bitwidth = property(lambda self: self.bits)


def _int_only(what: str, fn):
    def get(self):
        if not self.is_integer:
            raise AttributeError(f"the dtype {self} has no attribute '{what}' (an integer type's)")
        return fn(self)
    return get


def _float_only(what: str, table: dict):
    def get(self):
        if self.name not in table:
            raise AttributeError(f"the dtype {self} has no attribute '{what}' (a floating-point type's)")
        return table[self.name]
    return get


ScalarType.int_bitwidth = property(_int_only("int_bitwidth", lambda self: self.bits))
ScalarType.fp_mantissa_width = property(_float_only("fp_mantissa_width", _MANTISSA_BITS))
ScalarType.exponent_bias = property(_float_only("exponent_bias", _EXPONENT_BIAS))


def _int_max(self: ScalarType) -> int:
    return (1 << (self.bits - 1)) - 1 if self.kind == "int" else (1 << self.bits) - 1


def _int_min(self: ScalarType) -> int:
    return -(1 << (self.bits - 1)) if self.kind == "int" else 0


ScalarType.get_int_max_value = _int_only("get_int_max_value", _int_max)     # methods, as in Triton
ScalarType.get_int_min_value = _int_only("get_int_min_value", _int_min)

# a pointer type answers Triton's number queries with False (``is_ptr()`` is its own method)
for _query in ("is_fp8", "is_fp16", "is_bf16", "is_fp32", "is_fp64", "is_floating", "is_standard_floating", "is_int",
               "is_bool", "is_int_signed", "is_int_unsigned", "is_block", "is_void", "is_const"):
    setattr(PointerType, _query, lambda self: False)


@dataclass(frozen=True)
class MemDescType(Type):
    """Shared (or tensor) memory: an array of ``num`` buffers of ``shape``, or
    (``num == 0``) one buffer.  ``perm`` maps logical dims to the physical
    row-major dims (``local_trans`` views); None means identity.

    Text: ``memdesc<128x64xbf16, smem, num=3>``; a view ``memdesc<128x64xbf16, smem>``;
    a transposed view ``memdesc<64x128xbf16, smem, perm=[1,0]>``.

    ``layout`` is an explicit shared layout the kernel pinned (``local_alloc(...,
    layout=)``, ``local_reinterpret(..., layout=)``; ``ir/shared_layout.py``), in the
    buffer's physical (untransposed) dims; None lets ``shared-layouts`` choose.
    """

    shape: tuple[int, ...]
    element: Type
    num: int = 0
    storage: str = "smem"
    perm: tuple[int, ...] | None = None
    layout: Any = None

    @property
    def buffer_numel(self) -> int:
        """Elements one buffer occupies: its shape's, or a padded layout's (padding included)."""
        padded = getattr(self.layout, "numel", None)
        if padded is not None:
            return padded
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def buffer_bytes(self) -> int:
        return self.buffer_numel * self.element.bytes

    def view(self) -> MemDescType:
        return MemDescType(self.shape, self.element, 0, self.storage, self.perm, self.layout)

    def __str__(self) -> str:
        dims = "".join(f"{d}x" for d in self.shape)
        text = f"memdesc<{dims}{self.element}, {self.storage}"
        if self.num:
            text += f", num={self.num}"
        if self.perm is not None:
            text += ", perm=[" + ",".join(map(str, self.perm)) + "]"
        if self.layout is not None:
            text += f", layout={self.layout}"
        return text + ">"

    __repr__ = __str__


@dataclass(frozen=True)
class BarrierType(Type):
    """An array of ``num`` mbarriers in shared memory, or (``num == 0``) one.
    ``per_thread`` barriers (``alloc_warp_barrier``) count every thread's
    arrival; the others one arrival per arriving warp group.  A ``remote``
    barrier (``tlx.remote_view``) is one in a peer CTA of the cluster: it can
    be arrived on, never waited on."""

    num: int = 0
    per_thread: bool = False
    remote: bool = False        # tlx.remote_view: the same barrier in another CTA of the cluster

    def view(self) -> BarrierType:
        return BarrierType(0, self.per_thread, self.remote)

    def __str__(self) -> str:
        args = [str(self.num)] if self.num else []
        if self.per_thread:
            args.append("per_thread")
        if self.remote:
            args.append("remote")
        return "mbarrier" + (f"<{', '.join(args)}>" if args else "")

    __repr__ = __str__


@dataclass(frozen=True)
class TensorDescType(Type):
    """A TMA tensor descriptor (a host-encoded ``CUtensorMap`` passed by value):
    the element type, the box (``block_shape``) one copy moves, and the shared
    memory swizzle (bytes: 0, 32, 64 or 128) the box lands with.

    Text: ``tensordesc<64x64xbf16, swizzle=128>``.
    """

    element: Type
    block_shape: tuple[int, ...]
    swizzle: int = 0

    @property
    def box_bytes(self) -> int:
        n = self.element.bytes
        for d in self.block_shape:
            n *= d
        return n

    @property
    def squeezed_box(self) -> tuple[int, ...]:
        """The box without its leading 1s: a [1, 64, 64] box of a 3-D descriptor also
        fills (or is stored from) a [64, 64] buffer."""
        box = tuple(self.block_shape)
        while len(box) > 1 and box[0] == 1:
            box = box[1:]
        return box

    @property
    def copy_box(self) -> tuple[int, ...]:
        """The box one TMA copy moves (the host map's ``boxDim``): ``block_shape``, but at most
        256 elements per dimension (``ir/tensormap.py: box_dim_error``: a ``[512, 32]`` box is two
        ``[256, 32]`` copies) and, when the inner box is wider than its swizzle span (a
        128B-swizzled ``[64, 256]`` f16 box), the span-wide sub-box; the compiler issues one copy
        per piece (``codegen_nvptx/rules_tlx.py: _tma_pieces``, ``passes/shared_layouts.py``)."""
        span = self.swizzle // self.element.bytes if self.swizzle else MAX_BOX_DIM
        return (*(min(d, MAX_BOX_DIM) for d in self.block_shape[:-1]), min(self.block_shape[-1], span))

    @property
    def splits_columns(self) -> bool:
        """Whether the box is copied as span-wide column pieces of a swizzled box (into a
        column-blocked buffer), rather than whole rows."""
        return bool(self.swizzle) and self.copy_box[-1] != self.block_shape[-1]

    def fits_buffer(self, shape, element) -> bool:
        """Whether a buffer of ``shape`` x ``element`` holds exactly one box."""
        return element == self.element and tuple(shape) in (tuple(self.block_shape), self.squeezed_box)

    def __str__(self) -> str:
        dims = "".join(f"{d}x" for d in self.block_shape)
        return f"tensordesc<{dims}{self.element}, swizzle={self.swizzle}>"

    __repr__ = __str__
