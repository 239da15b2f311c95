"""In-kernel tensor descriptors, as Triton has them: ``tl.make_tensor_descriptor(base, shape,
strides, block_shape, padding_option='zero')`` with ``desc.load(offsets)``,
``desc.store(offsets, value)``, ``desc.block_shape`` / ``dtype`` / ``shape`` / ``strides``, and
the other spellings Triton code uses for the same calls: ``tl.load_tensor_descriptor``,
``tl.store_tensor_descriptor``, ``tl._experimental_make_tensor_descriptor`` (Triton 3.3) and
``tl._experimental_descriptor_load`` / ``_experimental_descriptor_store`` (Triton 3.1/3.2);
and TLX's ``tlx.allocate_tensor_descriptor(num)``, ``tlx.make_tensor_descriptor(desc_ptr, ...)``
and ``tlx.reinterpret_tensor_descriptor(desc_ptr, block_shape, dtype)``.

A descriptor built in the kernel is a compile-time structure (``DeviceDescriptor``) of frontend
values: the base pointer, the tensor's shape (i32 as Triton makes it) and strides (numbers or
integer scalars), the compile-time ``block_shape`` and padding, and, on a target that encodes
tensor maps on the device (feature ``tensormap``: sm_90a, sm_100a), ``tma``: the result of a
``tlx.make_tensor_descriptor`` op, a descriptor value of the same IR type a host
``tlxc.TensorDescriptor`` argument has (``tensordesc<...>``, its swizzle chosen from the box as the
host chooses it).  Every use then takes the host descriptors' TMA path
(``desc.load`` / ``desc.store`` through frontend/descriptor_methods.py, ``tlx.async_descriptor_*``,
``tlx.prefetch(desc, tensormap=True)``); the backend encodes the map into the kernel's global
scratch (``tlxc.set_allocator``) with ``tensormap.replace`` (codegen_nvptx/rules_tensormap.py).

``desc.load`` is the exception, for speed (``DESC_LOAD_BY_TMA``): a TMA box staged through a
buffer is synchronous today (load, wait, read, per call), while the element load below is what
the ``pipeline`` pass turns into a cp.async ring.  H200, Triton tutorial 09 (8192x8192x512 fp16):
the host-descriptor kernel (TMA ``desc.load``) at 7.2x torch's time, the in-kernel one (element
loads) at 2.8x (docs/ports.md, 2026-12-03).  A map no TMA op uses is removed by ``canonicalize``.

Without ``tma`` (an older target, or a box TMA cannot copy: ``ir/tensormap.py: box_error``) a
load or a store is the block pointer at ``offsets`` (frontend/block_ptr.py) loaded or stored with
``boundary_check`` on every dimension, so elements outside the tensor read as the padding (zero or
NaN) and are not written, exactly the box semantics of a TMA descriptor.

Host descriptors (``tlxc.TensorDescriptor`` kernel arguments) keep their TMA path
(frontend/descriptor_methods.py); the spellings here dispatch on the descriptor's kind.
"""
from __future__ import annotations

import os

from ..ir import types as T
from ..ir.tensormap import box_error, box_swizzle
from ..ir.types import PointerType, ScalarType, TensorDescType
from ..target import has_feature
from . import block_ptr
from . import semantic as S
from .block_ptr import Aggregate, BlockPointer
from .builtins import RULES, constexpr, rule
from .values import SemanticError, Tensor

_MAX_RANK = 5
_MIN_INNER_BYTES = 16     # Triton's rule: a descriptor's contiguous box row is at least 16 bytes
_PADDINGS = ("zero", "nan")


class DeviceDescriptor(Aggregate):
    kind = "tensor descriptor"
    __tlxc_descriptor__ = True          # isinstance(d, tl.tensor_descriptor) (language/core.py)

    def __init__(self, base: Tensor, shape: tuple, strides: tuple, block_shape: tuple[int, ...], padding: str,
                 tma: Tensor | None = None, no_tma: str = ""):
        self.base, self.shape, self.strides = base, shape, strides
        self.block_shape, self.padding = block_shape, padding
        self.tma = tma            # the encoded tensor map (a tensordesc value), or None
        self.no_tma = no_tma      # why there is none

    @property
    def rank(self) -> int:
        return len(self.block_shape)

    @property
    def element(self) -> ScalarType:
        return self.base.dtype.pointee

    def fields(self) -> tuple[str, ...]:
        dims = range(self.rank)
        return ("base", *(f"shape{i}" for i in dims), *(f"stride{i}" for i in dims),
                *(("tensormap",) if self.tma is not None else ()))

    def leaves(self) -> tuple:
        return (self.base, *self.shape, *self.strides, *((self.tma,) if self.tma is not None else ()))

    def replace(self, leaves) -> DeviceDescriptor:
        leaves, n = tuple(leaves), self.rank
        tma = leaves[1 + 2 * n] if self.tma is not None else None
        return DeviceDescriptor(leaves[0], leaves[1:1 + n], leaves[1 + n:1 + 2 * n], self.block_shape, self.padding,
                                tma, self.no_tma)

    def static_key(self) -> tuple:
        return ("tensor_desc", self.block_shape, self.padding, self.tma is not None)

    def methods(self) -> dict:
        from .descriptor_methods import METHODS  # the same signatures as a host descriptor's
        return METHODS

    def attributes(self) -> dict:
        return {"block_shape": self.block_shape, "dtype": self.element, "shape": self.shape,
                "strides": self.strides}

    def tlxc_describe(self) -> str:
        return f"an in-kernel tensor descriptor of {self.element} with block_shape {list(self.block_shape)}"

    def __repr__(self) -> str:
        return f"DeviceDescriptor({self.element}, block_shape={list(self.block_shape)})"


# Whether desc.load of an in-kernel descriptor with a tensor map is a staged TMA copy (as a host
# descriptor's) rather than the pipelinable element load: off until staged TMA loads are
# pipelined (module docstring); tlx.async_descriptor_load always copies by TMA.
DESC_LOAD_BY_TMA = False


def is_device_descriptor(value) -> bool:
    return isinstance(value, DeviceDescriptor)


def _is_host_descriptor(value) -> bool:
    return isinstance(value, Tensor) and isinstance(value.type, TensorDescType)


# -- make_tensor_descriptor ---------------------------------------------------------------
def _int_list(value) -> tuple:
    """A list argument as a tuple (a single value is a 1-tuple); ``tl.constexpr(1)`` entries
    (Triton code writes ``strides=[tl.constexpr(1)]``) are their values."""
    from ..language.core import constexpr as tl_constexpr
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    return tuple(v.value if isinstance(v, tl_constexpr) else v for v in items)


def _base(b, base) -> Tensor:
    if not isinstance(base, Tensor) or base.is_block or not isinstance(base.dtype, PointerType):
        raise SemanticError(f"'base' must be a scalar pointer (the tensor's address), got {S.describe(base)}",
                            param="base")
    elem = base.dtype.pointee
    if not isinstance(elem, ScalarType) or elem.is_boolean:
        raise SemanticError(f"'base' points to {elem}: a tensor descriptor holds numbers (bool is not "
                            f"supported, as in Triton; view the tensor as int8)", param="base")
    return base


def _check_rank(shape, strides, block_shape) -> int:
    rank = len(shape)
    if not 1 <= rank <= _MAX_RANK:
        raise SemanticError(f"a tensor descriptor has 1 to {_MAX_RANK} dimensions, but 'shape' has {rank}",
                            param="shape")
    for what, items in (("strides", strides), ("block_shape", block_shape)):
        if len(items) != rank:
            raise SemanticError(f"'{what}' has {len(items)} entries but 'shape' has {rank}", param=what)
    return rank


def _integer(value, what: str, index: int):
    if isinstance(value, Tensor):
        if value.is_block or not isinstance(value.dtype, ScalarType) or not value.dtype.is_integer or \
                value.dtype.is_boolean:
            raise SemanticError(f"'{what}' must hold integer scalars, but entry {index} is {S.describe(value)}",
                                param=what)
    elif isinstance(value, bool) or not isinstance(value, int):
        raise SemanticError(f"'{what}' must hold integers, but entry {index} is {S.describe(value)}", param=what)
    return value


def _shape_entry(b, value, index: int):
    """A dimension as Triton keeps it: a 32-bit integer."""
    value = _integer(value, "shape", index)
    if isinstance(value, Tensor):
        return value if value.dtype == T.i32 else S.cast(b, value, T.i32)
    if not 0 <= value < 2**31:
        raise SemanticError(f"'shape' entry {index} ({value}) must be a non-negative 32-bit integer", param="shape")
    return value


def _stride_entry(value, index: int, last: bool):
    value = _integer(value, "strides", index)
    if last and (isinstance(value, Tensor) or value != 1):
        got = S.describe(value) if isinstance(value, Tensor) else str(value)
        raise SemanticError(f"a tensor descriptor's last dimension must be contiguous: strides[-1] must be 1, "
                            f"got {got} (an integer argument equal to 1 is specialized to 1 at launch)",
                            param="strides")
    if not isinstance(value, Tensor) and not -2**63 <= value < 2**63:
        raise SemanticError(f"'strides' entry {index} ({value}) does not fit in 64 bits", param="strides")
    return value


def _block_shape(value, elem: ScalarType) -> tuple[int, ...]:
    block_shape = S.check_shape(tuple(constexpr(v, "block_shape") for v in _int_list(value)),
                                "block_shape")
    row_bytes = block_shape[-1] * elem.bits // 8
    if row_bytes < _MIN_INNER_BYTES:
        raise SemanticError(f"a descriptor block's last dimension must hold at least {_MIN_INNER_BYTES} bytes, "
                            f"but block_shape[-1] = {block_shape[-1]} elements of {elem} is {row_bytes} bytes",
                            param="block_shape")
    return block_shape


def _padding(value, elem: ScalarType) -> str:
    padding = constexpr(value, "padding_option")
    if padding not in _PADDINGS:
        raise SemanticError(f"'padding_option' must be 'zero' or 'nan', got {padding!r}", param="padding_option")
    if padding == "nan" and not elem.is_float:
        raise SemanticError(f"padding_option='nan' needs a floating-point tensor, but it holds {elem}",
                            param="padding_option")
    return padding


@rule("make_tensor_descriptor")
def _make_tensor_descriptor(ctx, base, shape, strides, block_shape, padding_option="zero"):
    return make(ctx, base, shape, strides, block_shape, padding_option)


def make(ctx, base, shape, strides, block_shape, padding_option="zero", desc_ptr=None) -> DeviceDescriptor:
    """The descriptor (``tl.make_tensor_descriptor``; TLX's with ``desc_ptr``, the slot its tensor
    map is encoded into): checked, and encoded as a tensor map where the target can (``tma``)."""
    b = ctx.b
    base = _base(b, base)
    shape, strides = _int_list(shape), _int_list(strides)
    block_list = _int_list(constexpr(block_shape, "block_shape"))
    rank = _check_rank(shape, strides, block_list)
    elem = base.dtype.pointee
    block_shape = _block_shape(block_list, elem)
    shape = tuple(_shape_entry(b, v, i) for i, v in enumerate(shape))
    strides = tuple(_stride_entry(v, i, i == rank - 1) for i, v in enumerate(strides))
    padding = _padding(padding_option, elem)
    if desc_ptr is not None:
        desc_ptr = _slot_pointer(desc_ptr)
    no_tma = _no_tma(ctx, block_shape, elem)
    if no_tma:
        if desc_ptr is not None:
            raise SemanticError(f"this descriptor cannot be encoded as a tensor map: {no_tma}", param="desc_ptr")
        return DeviceDescriptor(base, shape, strides, block_shape, padding, None, no_tma)
    operands = [base.value]
    operands += [S.constant(b, v, T.i32).value if isinstance(v, int) else v.value for v in shape]
    operands += [S.constant(b, v, T.i64).value if isinstance(v, int) else
                 (v if v.dtype == T.i64 else S.cast(b, v, T.i64)).value for v in strides]
    if desc_ptr is not None:
        operands.append(desc_ptr.value)
    desc_type = TensorDescType(elem, block_shape, box_swizzle(block_shape, elem.bytes))
    op = b.create("tlx.make_tensor_descriptor", operands, [desc_type],
                  {"padding": padding, "has_desc_ptr": desc_ptr is not None}, result_names=["desc"])
    tma = Tensor(op.results[0])
    if desc_ptr is not None:
        ctx.staging.setdefault("tensormaps", {})[id(desc_ptr.value)] = desc_type
    return DeviceDescriptor(base, shape, strides, block_shape, padding, tma)


def device_tensormaps() -> bool:
    """Whether in-kernel descriptors are encoded as tensor maps on the device: the default;
    ``TLXC_DEVICE_TENSORMAPS=0`` opts out (descriptors then take the element path, and TLX's
    descriptor slots are refused).  Verified on the H200 (2026-12-03, session 10: the 15 GPU
    tests of tests/test_tensormap_device.py, test_make_tensor_descriptor.py and
    test_device_desc_tma.py).  A TMA store writes the innermost dimension up to its next 16-byte
    boundary, so an encode whose map is stored through traps on a shape that is not a 16-byte
    multiple (``ir/tensormap.py: store_width_message``); the element path has no such limit."""
    return os.environ.get("TLXC_DEVICE_TENSORMAPS", "").strip() != "0"


def _no_tma(ctx, block_shape, elem) -> str:
    """Why this descriptor gets no tensor map ("" when it does)."""
    if not device_tensormaps():
        return "in-kernel tensor maps are off (TLXC_DEVICE_TENSORMAPS=0; unset it to encode them)"
    if not has_feature(ctx.options.arch, "tensormap"):
        return f"{ctx.options.arch} does not encode tensor maps in a kernel (sm_90a and sm_100a do)"
    return box_error(block_shape, elem) or ""


def tensormap_of(desc, what: str = "desc"):
    """The descriptor value TMA ops take: a host descriptor as it is, an in-kernel one's tensor
    map; None for an in-kernel descriptor without one (the caller falls back or explains)."""
    if is_device_descriptor(desc):
        return desc.tma
    return desc


def _slot_pointer(value) -> Tensor:
    if not isinstance(value, Tensor) or value.is_block or not isinstance(value.dtype, PointerType):
        raise SemanticError(f"'desc_ptr' must be a descriptor slot (tlx.allocate_tensor_descriptor(n)[i]), got "
                            f"{S.describe(value)}", param="desc_ptr")
    return value


RULES["_experimental_make_tensor_descriptor"] = _make_tensor_descriptor


# -- load / store through an in-kernel descriptor --------------------------------------------
def _box(b, desc: DeviceDescriptor, offsets) -> BlockPointer:
    """The block pointer to the box at ``offsets`` (32-bit offsets, as Triton's descriptors)."""
    if isinstance(offsets, Tensor) and offsets.is_block:
        raise SemanticError(f"'offsets' must be a list of {desc.rank} integers or integer scalars, got "
                            f"{S.describe(offsets)}", param="offsets")
    offsets = _int_list(offsets)
    if len(offsets) != desc.rank:
        raise SemanticError(f"'offsets' needs {desc.rank} entries (one per dimension of the descriptor), got "
                            f"{len(offsets)}", param="offsets")
    converted = []
    for i, value in enumerate(offsets):
        value = _integer(value, "offsets", i)
        if isinstance(value, Tensor):
            converted.append(value if value.dtype == T.i32 else S.cast(b, value, T.i32))
        elif -2**31 <= value < 2**31:
            converted.append(S.constant(b, value, T.i32))
        else:
            raise SemanticError(f"'offsets' entry {i} ({value}) does not fit in 32 bits", param="offsets")
    order = tuple(reversed(range(desc.rank)))       # row-major; order only matters to TMA-backed pointers
    return BlockPointer(desc.base, desc.shape, desc.strides, tuple(converted), desc.block_shape, order)


def load(ctx, desc: DeviceDescriptor, offsets) -> Tensor:
    box = _box(ctx.b, desc, offsets)
    every_dim = tuple(range(desc.rank))
    return RULES["load"](ctx, box, boundary_check=every_dim, padding_option=desc.padding)


def store(ctx, desc: DeviceDescriptor, offsets, value) -> None:
    box = _box(ctx.b, desc, offsets)
    value = _store_value(ctx.b, desc, value)
    RULES["store"](ctx, box, value, boundary_check=tuple(range(desc.rank)))


def atomic(ctx, desc: DeviceDescriptor, offsets, value, kind: str) -> None:
    """``desc.atomic_<kind>``: element atomics on the box's addresses, masked to the tensor."""
    box = _box(ctx.b, desc, offsets)
    value = _store_value(ctx.b, desc, value)
    mask = block_ptr.boundary_mask(ctx.b, box, tuple(range(desc.rank)))
    RULES[f"atomic_{kind}"](ctx, block_ptr.addresses(ctx.b, box), value, mask=mask)


def block_value(b, value, block: tuple, element) -> Tensor:
    """A descriptor store's value by Triton's rule, for host and in-kernel descriptors alike: a
    tensor of the block's shape, converted implicitly to the descriptor's dtype."""
    if not isinstance(value, Tensor) or not value.is_block:
        raise SemanticError(f"'value' must be a tensor of the descriptor's block shape {list(block)}, got "
                            f"{S.describe(value)}", param="value")
    if value.shape != block:
        raise SemanticError(f"'value' has shape {list(value.shape)} but the descriptor's block is {list(block)}",
                            param="value")
    return value if value.dtype == element else S.cast(b, value, element)


def _store_value(b, desc: DeviceDescriptor, value) -> Tensor:
    return block_value(b, value, desc.block_shape, desc.element)


# -- the function spellings ---------------------------------------------------------------------
def _descriptor(value, what: str = "desc"):
    if is_device_descriptor(value) or _is_host_descriptor(value):
        return value
    hint = ""
    if isinstance(value, Tensor) and isinstance(value.dtype, PointerType):
        hint = ("; tlxc does not reinterpret a pointer to an encoded tensormap as a descriptor: pass a "
                "tlxc.TensorDescriptor argument, or build one here with tl.make_tensor_descriptor")
    raise SemanticError(f"'{what}' must be a tensor descriptor (a tlxc.TensorDescriptor argument or "
                        f"tl.make_tensor_descriptor), got {S.describe(value)}{hint}", param=what)


def _descriptor_block(desc) -> tuple[tuple[int, ...], ScalarType]:
    if is_device_descriptor(desc):
        return desc.block_shape, desc.element
    return tuple(desc.type.block_shape), desc.type.element


@rule("load_tensor_descriptor")
def _load_tensor_descriptor(ctx, desc, offsets):
    return RULES["tensor_descriptor.load"](ctx, _descriptor(desc), offsets)


@rule("store_tensor_descriptor")
def _store_tensor_descriptor(ctx, desc, offsets, value):
    return RULES["tensor_descriptor.store"](ctx, _descriptor(desc), offsets, value)


def _legacy_dtype(dtype) -> ScalarType:
    dtype = constexpr(dtype, "dtype")
    if isinstance(dtype, PointerType):      # the oldest spelling passed the pointer type
        dtype = dtype.pointee
    if not isinstance(dtype, ScalarType):
        raise SemanticError(f"'dtype' must be a dtype such as tl.float16, got {S.describe(dtype)}", param="dtype")
    return dtype


def _reinterpreted(b, value: Tensor, dtype: ScalarType, mismatch: str, what: str) -> Tensor:
    """The old API reinterpreted the descriptor's bytes as another dtype: the same bits, or an error."""
    if value.dtype == dtype:
        return value
    if value.dtype.bits != dtype.bits:
        raise SemanticError(mismatch, param=what)
    return S.cast(b, value, dtype, bitcast=True)


@rule("_experimental_descriptor_load")
def _experimental_descriptor_load(ctx, desc_pointer, offsets, shape, dtype):
    desc = _descriptor(desc_pointer, "desc_pointer")
    block, elem = _descriptor_block(desc)
    shape = tuple(constexpr(v, "shape") for v in _int_list(constexpr(shape, "shape")))
    if shape != block:
        raise SemanticError(f"'shape' {list(shape)} differs from the descriptor's block_shape {list(block)}",
                            param="shape")
    dtype = _legacy_dtype(dtype)
    value = RULES["tensor_descriptor.load"](ctx, desc, offsets)
    return _reinterpreted(ctx.b, value, dtype, f"'dtype' is {dtype} ({dtype.bits} bits) but the descriptor "
                          f"holds {elem} ({elem.bits} bits)", "dtype")


@rule("_experimental_descriptor_store")
def _experimental_descriptor_store(ctx, desc_pointer, value, offsets):
    desc = _descriptor(desc_pointer, "desc_pointer")
    _, elem = _descriptor_block(desc)
    if isinstance(value, Tensor) and isinstance(value.dtype, ScalarType):
        value = _reinterpreted(ctx.b, value, elem, f"'value' holds {value.dtype} ({value.dtype.bits} bits) but "
                               f"the descriptor holds {elem} ({elem.bits} bits): convert it first", "value")
    return RULES["tensor_descriptor.store"](ctx, desc, offsets, value)


# -- TLX: descriptor slots in global memory ------------------------------------------------------
class DescriptorSlots(Aggregate):
    """``tlx.allocate_tensor_descriptor(num)``: ``num`` 128-byte tensor-map slots of the program's
    global scratch; ``slots[i]`` (a compile-time ``i``) is the pointer to slot ``i``."""

    kind = "tensor descriptor slots"

    def __init__(self, pointers: tuple):
        self.pointers = pointers

    def fields(self) -> tuple[str, ...]:
        return tuple(f"slot{i}" for i in range(len(self.pointers)))

    def leaves(self) -> tuple:
        return self.pointers

    def replace(self, leaves) -> DescriptorSlots:
        return DescriptorSlots(tuple(leaves))

    def static_key(self) -> tuple:
        return ("tensor_desc_slots", len(self.pointers))

    def __getitem__(self, index):
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"descriptor slots take a compile-time integer index, got {S.describe(index)}")
        if not -len(self.pointers) <= index < len(self.pointers):
            raise IndexError(f"slot {index} of {len(self.pointers)} (tlx.allocate_tensor_descriptor(num="
                             f"{len(self.pointers)}))")
        return self.pointers[index]

    def __len__(self) -> int:
        return len(self.pointers)

    def tlxc_describe(self) -> str:
        return f"{len(self.pointers)} tensor descriptor slots (tlx.allocate_tensor_descriptor)"


def _tlx_rule(name: str):
    def register(fn):
        RULES["tlx." + name] = fn
        return fn
    return register


def _require_tensormaps(ctx, what: str) -> None:
    if not device_tensormaps():
        raise SemanticError(f"tlx.{what} needs in-kernel tensor maps, which are off "
                            f"(TLXC_DEVICE_TENSORMAPS=0; unset it to encode them)")
    if not has_feature(ctx.options.arch, "tensormap"):
        raise SemanticError(f"tlx.{what} needs a target that encodes tensor maps in a kernel (sm_90a, sm_100a); "
                            f"this compile is for {ctx.options.arch}")


@_tlx_rule("allocate_tensor_descriptor")
def _allocate_tensor_descriptor(ctx, num):
    num = constexpr(num, "num")
    if isinstance(num, bool) or not isinstance(num, int) or num < 1:
        raise SemanticError(f"'num' must be a positive compile-time integer, got {S.describe(num)}", param="num")
    _require_tensormaps(ctx, "allocate_tensor_descriptor")
    b = ctx.b
    base = Tensor(b.create("tlx.allocate_tensor_descriptor", [], [PointerType(T.i8)], {"num": num},
                           result_names=["desc_slots"]).results[0])
    slots = tuple(base if i == 0 else S.binary(b, "add", base, S.constant(b, i * 128, T.i32)) for i in range(num))
    return DescriptorSlots(slots)


@_tlx_rule("make_tensor_descriptor")
def _tlx_make_tensor_descriptor(ctx, desc_ptr, base, shape, strides, block_shape, padding_option="zero"):
    """TLX's spelling: ``desc_ptr`` is a slot of ``allocate_tensor_descriptor`` (or None: the
    compiler's own scratch, as ``tl.make_tensor_descriptor``)."""
    if desc_ptr is not None:
        _require_tensormaps(ctx, "make_tensor_descriptor(desc_ptr=...)")
    return make(ctx, base, shape, strides, block_shape, padding_option, desc_ptr)


@_tlx_rule("reinterpret_tensor_descriptor")
def _reinterpret_tensor_descriptor(ctx, desc_ptr, block_shape, dtype):
    """The tensor map a ``tlx.make_tensor_descriptor(desc_ptr=...)`` encoded at ``desc_ptr``, as a
    descriptor of ``block_shape`` x ``dtype`` (they must be the encoded ones: checked here where
    the slot is known at compile time, and by the interpreter)."""
    _require_tensormaps(ctx, "reinterpret_tensor_descriptor")
    ptr = _slot_pointer(desc_ptr)
    elem = constexpr(dtype, "dtype")
    if isinstance(elem, PointerType):
        elem = elem.pointee
    if not isinstance(elem, ScalarType) or elem.is_boolean:
        raise SemanticError(f"'dtype' must be a numeric dtype such as tl.float16, got {S.describe(elem)}",
                            param="dtype")
    block = _block_shape(_int_list(constexpr(block_shape, "block_shape")), elem)
    why = box_error(block, elem)
    if why:
        raise SemanticError(why, param="block_shape")
    desc_type = TensorDescType(elem, block, box_swizzle(block, elem.bytes))
    encoded = ctx.staging.get("tensormaps", {}).get(id(ptr.value))
    if encoded is not None and encoded != desc_type:
        raise SemanticError(f"the tensor map at this slot was encoded for boxes of {list(encoded.block_shape)} x "
                            f"{encoded.element}, not {list(block)} x {elem}", param="block_shape")
    return Tensor(ctx.b.value("tlx.reinterpret_tensor_descriptor", [ptr.value], desc_type))


__all__ = ["DescriptorSlots", "DeviceDescriptor", "is_device_descriptor", "load", "make", "store", "tensormap_of"]
