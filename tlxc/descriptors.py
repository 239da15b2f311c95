"""Host-side TMA tensor descriptors: ``tlxc.TensorDescriptor``.

A descriptor names a global tensor (base address, shape, strides in elements)
and the box (``block_shape``) that one TMA copy moves between global and
shared memory.  It is checked against the hardware's rules when it is built
(each violation is a ``LaunchError`` naming the argument and the rule), typed
for the compiler by ``ir_type()`` (``tensordesc<64x64xbf16, swizzle=128>``),
and encoded into the 128-byte ``CUtensorMap`` that the kernel receives as a
``__grid_constant__`` parameter by ``encode()``, lazily and once per
(address, shape, strides, box, swizzle): a repeated launch reuses the bytes.

Swizzle rule (shared memory layout of the box, chosen from the width in bytes
of the innermost box dimension, the only one a TMA swizzle acts on):

    inner box bytes == 128  ->  swizzle 128
    inner box bytes ==  64  ->  swizzle 64
    inner box bytes ==  32  ->  swizzle 32
    anything else           ->  swizzle 0 (none)

TMA requires the inner box of a swizzled copy to be no wider than the swizzle
span.  A wider inner box that is a multiple of 128 bytes, over a multiple of 8
rows (the product of the other box dimensions), e.g. ``[64, 256]`` f16, gets
the 128-byte swizzle anyway (``box_swizzle``): the map is encoded with the
128-byte-wide sub-box (``TensorDescType.copy_box``) and the kernel issues one
copy per sub-box into consecutive 128B-swizzled column blocks of the buffer,
the layout wgmma/tcgen05 read (``passes/shared_layouts.py``); the IR type keeps
the whole box, so ``expect_bytes`` still counts all of it.  Other wide boxes
get no swizzle.  ``swizzle=0`` turns the split off.  Encoding is lazy so that
descriptors of CPU tensors work on the interpreter, which reads the tensor itself.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from operator import index as _index
from typing import Any

from .errors import CudaError, LaunchError

# the box rules the device encoder (in-kernel descriptors) shares: ir/tensormap.py
from .ir.tensormap import (  # noqa: F401
    ALIGNMENT,
    MAX_BOX_DIM,
    MAX_RANK,
    box_dim_error,
    box_swizzle,
    choose_swizzle,
    narrow_for_stores,
    splits_into_spans,
    store_width_message,
    wide_inner_error,
)
from .ir.types import ScalarType, TensorDescType

# IR element type -> CUtensorMapDataType enumerator name.  TMA copies bits, so
# types without an enumerator of their own travel as unsigned ints of their
# width (fp8 and int8 as UINT8, int16 as UINT16), as Triton does.
TMA_DATA_TYPES: dict[str, str] = {
    "f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
    "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
    "f32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
    "f64": "CU_TENSOR_MAP_DATA_TYPE_FLOAT64",
    "f8e4m3": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "f8e5m2": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "i8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "u8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "i16": "CU_TENSOR_MAP_DATA_TYPE_UINT16",
    "u16": "CU_TENSOR_MAP_DATA_TYPE_UINT16",
    "i32": "CU_TENSOR_MAP_DATA_TYPE_INT32",
    "u32": "CU_TENSOR_MAP_DATA_TYPE_UINT32",
    "i64": "CU_TENSOR_MAP_DATA_TYPE_INT64",
    "u64": "CU_TENSOR_MAP_DATA_TYPE_UINT64",
}

SWIZZLE_ENUMS = {0: "CU_TENSOR_MAP_SWIZZLE_NONE", 32: "CU_TENSOR_MAP_SWIZZLE_32B",
                 64: "CU_TENSOR_MAP_SWIZZLE_64B", 128: "CU_TENSOR_MAP_SWIZZLE_128B"}

# padding= -> CUtensorMapFloatOOBfill: "zero" fills out-of-bounds elements with
# zeros (FILL_NONE), "nan" with NaN (floats only).
PADDING_ENUMS = {"zero": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",
                 "nan": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA"}


def _fail(argument: str, message: str) -> LaunchError:
    return LaunchError(f"TensorDescriptor: '{argument}' {message}")


# Attributes a launch derives from the box, computed when the box is first used (see __getattr__).
_BOX_DERIVED = ("swizzle", "_ir_type", "_type_key", "_gid")
# Attributes users may assign (Triton's TensorDescriptor is a plain dataclass of these).
_GEOMETRY = ("base", "shape", "strides", "block_shape", "padding")


class TensorDescriptor:
    """A TMA descriptor of ``base`` seen as ``shape``/``strides`` (elements),
    copied in boxes of ``block_shape``; Triton's
    ``triton.tools.tensor_descriptor.TensorDescriptor(base, shape, strides,
    block_shape, padding="zero")``, also importable as
    ``tlxc.tools.tensor_descriptor.TensorDescriptor``.

    ``padding`` is what out-of-bounds box elements read as: ``"zero"`` or
    ``"nan"`` (floating-point tensors only).  Stores clip at the bounds.

    The rules on the tensor, shape and strides are checked when they are set
    (construction or assignment).  The box may be a placeholder until the
    launch, as in Triton code that builds ``TensorDescriptor(a, shape,
    strides, [1, 1])`` and lets an autotune ``pre_hook`` assign
    ``desc.block_shape = [BM, BK]``: its rank and per-dimension range are
    checked when it is set, and so is its swizzle when it is wide enough for
    TMA; a box narrower than 16 bytes (a placeholder) is refused only when it
    is used (launch, ``ir_type()``, ``encode()``), with the same errors.
    Assigning any of ``base``, ``shape``, ``strides``, ``block_shape``,
    ``padding`` forgets the derived IR type and encoded map, so the next
    launch keys, compiles and encodes for the new geometry.
    """

    def __init__(self, base: Any, shape: Sequence[int], strides: Sequence[int],
                 block_shape: Sequence[int], padding: str = "zero", swizzle: int | None = None):
        try:        # the usual case, on every call of a wrapper: a torch tensor and a geometry seen before
            address = base.data_ptr()
            template, last = _BUILT[base.dtype, padding, swizzle, address % ALIGNMENT, len(shape), len(strides),
                                   tuple(map(_index, (*shape, *strides, *block_shape)))]    # (floats refused)
            storage = base.untyped_storage()
            if last < (storage.data_ptr() + storage.nbytes() - address) // base.element_size():
                # every rule held for this geometry before; what it does not hold is read from this
                # tensor: its dtype, address mod 16 (both in the key), storage size, device
                fields = self.__dict__
                fields.update(template)
                fields["base"], fields["device_index"] = base, base.get_device()
                if "_gid" in template:          # a final box (not a placeholder)
                    self._reuse_map(template["_gid"])
                return
        except Exception:        # (anything else, or a refusal: the full path explains it)
            pass
        fields = self.__dict__          # (set directly: __setattr__ re-describes on every geometry change)
        shape, strides, block_shape = _ints(shape), _ints(strides), _ints(block_shape)
        fields.update(base=base, shape=shape, strides=strides, block_shape=block_shape, padding=padding,
                      _requested_swizzle=swizzle)
        self._describe()
        self._remember_built(len(shape), len(strides))

    def _remember_built(self, rank: int, strides: int) -> None:
        """After a construction that passed every rule: the fields a later construction of the
        same geometry over a torch tensor copies (``_BUILT``), keyed as ``__init__`` looks them up."""
        fields = self.__dict__
        base = fields["base"]
        if not hasattr(base, "untyped_storage") or base.dtype not in _TORCH_ELEMENTS:
            return
        known = _KNOWN.get(self._geometry())
        if known is None:
            return
        template = {name: value for name, value in fields.items() if name not in ("base", "device_index")}
        if len(_BUILT) >= _ENCODED_MAX:
            _BUILT.clear()
        _BUILT[base.dtype, fields["padding"], fields["_requested_swizzle"], fields["_head"][-1], rank, strides,
               (*fields["shape"], *fields["strides"], *fields["block_shape"])] = (template, known[1])

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "block_shape":       # (first: an autotune pre_hook assigns it on every launch)
            fields = self.__dict__
            box = _ints(value)
            if box == fields["block_shape"] and "_gid" in fields:
                return          # the box it has (a pre_hook on descriptors built once): the map stays
            known = _KNOWN.get((fields["_head"], box))
            if known is not None and known[0] is not None:
                # an autotune pre_hook's assignment (on every call) to a geometry that passed every
                # rule before: only the box-derived fields change (the tensor, shape and strides
                # were checked when they were set, and the storage holds the same elements)
                checked = known[0]
                fields["swizzle"], fields["_ir_type"], fields["_type_key"], fields["_gid"] = checked
                fields["block_shape"] = box
                self._reuse_map(checked[3])
                return
        elif name in _BOX_DERIVED or name in ("dtype", "device_index"):
            raise AttributeError(f"TensorDescriptor.{name} follows from the tensor and the box; set "
                                 f"'base' or 'block_shape' instead")
        elif name not in _GEOMETRY:
            object.__setattr__(self, name, value)
            return
        previous = self.__dict__[name]
        self.__dict__[name] = _ints(value) if name in ("shape", "strides", "block_shape") else value
        try:
            self._describe()
        except LaunchError:
            self.__dict__[name] = previous       # a refused assignment leaves the descriptor as it was
            self._describe()
            raise

    def __getattr__(self, name: str) -> Any:
        # only reached for attributes not in __dict__: the box-derived ones before the box is used
        if name in _BOX_DERIVED:
            self._fix_box()
            return self.__dict__[name]
        raise AttributeError(f"'TensorDescriptor' object has no attribute '{name}'")

    @classmethod
    def from_tensor(cls, tensor: Any, block_shape: Sequence[int], padding: str = "zero",
                    swizzle: int | None = None) -> TensorDescriptor:
        """A descriptor of the whole of ``tensor`` (its shape and element strides);
        ``swizzle=None`` picks it from the box (``box_swizzle``), 0 turns it off."""
        _element_type(tensor)               # not a tensor: refused before its shape is read
        return cls(tensor, tuple(tensor.shape), _element_strides(tensor), block_shape, padding, swizzle)

    def ir_type(self) -> TensorDescType:
        """The kernel parameter's IR type: element, box and swizzle (checks the box)."""
        return self._ir_type

    def __repr__(self) -> str:
        swizzle = self.__dict__.get("swizzle", "unchecked")
        return (f"TensorDescriptor(shape={list(self.shape)}, strides={list(self.strides)}, "
                f"block_shape={list(self.block_shape)}, dtype={self.dtype}, swizzle={swizzle})")

    # -- describing the geometry ----------------------------------------------------------
    def _describe(self) -> None:
        """Check what does not depend on the box's final value and forget everything derived."""
        fields = self.__dict__
        base = fields["base"]
        dtype = _element_type(base)
        get_device = getattr(base, "get_device", None)
        # Every rule depends only on this geometry (the box, and ``_head``: the element type,
        # shape, strides, padding, requested swizzle and the address modulo 16) and on the
        # storage's size: a wrapper that builds the same descriptor on every call checks it once.
        head = (dtype.name, fields["shape"], fields["strides"], fields["padding"], fields["_requested_swizzle"],
                _address(base) % ALIGNMENT)
        fields.update(dtype=dtype, device_index=get_device() if get_device is not None else -1, _head=head,
                      _last_address=None, _last_blob=b"")
        for name in _BOX_DERIVED:
            fields.pop(name, None)
        known = _KNOWN.get((head, fields["block_shape"]))
        if known is not None:           # checked before: a usable box, or a placeholder (None)
            checked, last = known
            self._check_storage(last)   # (the geometry does not hold the storage's size)
            if checked is not None:
                fields["swizzle"], fields["_ir_type"], fields["_type_key"], fields["_gid"] = checked
            return
        self._check()
        last = _last_element(self.shape, self.strides)
        self._check_storage(last)
        try:
            self._check_box_width()
        except LaunchError:
            # a placeholder box (e.g. [1, 1]): checked when a launch uses it. TLX's wrappers
            # build three on every call, so the rules above run once per geometry
            _remember(self._geometry(), None, last)
            return
        self._fix_box()     # a usable box: its swizzle is checked (and the geometry cached) now

    def _geometry(self) -> tuple:
        return (self._head, self.block_shape)

    def _fix_box(self) -> None:
        """The box is final (a launch uses it): check it, choose the swizzle, derive the IR type."""
        self._check_box_width()
        inner = self.block_shape[-1] * self.dtype.bytes
        swizzle = self._requested_swizzle
        if swizzle is None:
            swizzle = box_swizzle(self.block_shape, self.dtype.bytes)
        elif swizzle not in (0, 32, 64, 128) or (swizzle and inner != swizzle and not (
                swizzle == 128 and splits_into_spans(self.block_shape, self.dtype.bytes))):
            raise LaunchError(f"TensorDescriptor: 'swizzle' must be 0, or the inner box width in bytes "
                              f"({inner}) when that is 32, 64 or 128, or 128 for a wider box of 128-byte "
                              f"multiples over a multiple of 8 rows; got {swizzle}")
        why = wide_inner_error(self.block_shape, self.dtype.bytes, swizzle)
        if why:
            raise LaunchError(f"TensorDescriptor: 'block_shape' {list(self.block_shape)} of {self.dtype} with "
                              f"swizzle {swizzle}: {why}")
        ir_type = TensorDescType(self.dtype, self.block_shape, swizzle)
        # a shape TMA stores overrun (store_rule_error) keys launches apart: the first launch of
        # a kernel with such a descriptor takes the slow path, which refuses it if the kernel
        # stores through it; the fast paths see only keys that passed
        narrow = bool(self.shape) and narrow_for_stores(self.shape[-1], self.dtype.bytes)
        # (the last entry numbers the geometry: encode() keys its maps on it, never reused)
        checked = (swizzle, ir_type, _TYPE_KEYS.setdefault((ir_type, narrow), len(_TYPE_KEYS)), next(_GEOMETRY_IDS))
        _remember(self._geometry(), checked, _last_element(self.shape, self.strides))
        self.__dict__["swizzle"], self.__dict__["_ir_type"], self.__dict__["_type_key"], self.__dict__["_gid"] = checked

    # -- legality --------------------------------------------------------------------
    def _check(self) -> None:
        rank = len(self.shape)
        if not 1 <= rank <= MAX_RANK:
            raise _fail("shape", f"must have 1 to {MAX_RANK} dimensions (TMA tensors are at most "
                                 f"{MAX_RANK}-D), got {rank}: {list(self.shape)}")
        for argument, values in (("strides", self.strides), ("block_shape", self.block_shape)):
            if len(values) != rank:
                raise _fail(argument, f"must have one entry per dimension of 'shape' ({rank}), "
                                      f"got {len(values)}: {list(values)}")
        if self.padding not in PADDING_ENUMS:
            raise _fail("padding", f"must be 'zero' or 'nan', got {self.padding!r}")
        if self.padding == "nan" and not self.dtype.is_float:
            raise _fail("padding", f"'nan' needs a floating-point tensor, got {self.dtype}")
        self._check_tensor()
        self._check_shape_and_strides()
        self._check_box_dims()

    def _check_tensor(self) -> None:
        address = _address(self.base)
        if address % ALIGNMENT:
            raise _fail("tensor", f"base address 0x{address:x} is not 16-byte aligned (it is "
                                  f"{address % ALIGNMENT} bytes past a 16-byte boundary; TMA requires a "
                                  f"16-byte aligned base: a view that starts mid-row, e.g. t[1:] of a "
                                  f"tensor with an odd row size, cannot be described)")

    def _check_shape_and_strides(self) -> None:
        for dim, size in enumerate(self.shape):
            if not 1 <= size <= 2**32:
                raise _fail("shape", f"dimension {dim} is {size}; TMA requires 1 to 2**32 elements per dimension")
        for dim, stride in enumerate(self.strides):
            if stride <= 0:
                raise _fail("strides", f"must be positive: stride {stride} of dim {dim} (TMA cannot describe "
                                       f"broadcast or reversed dimensions)")
        if self.strides[-1] != 1:
            raise _fail("strides", f"must end in 1 (TMA requires a unit stride in the last dimension), got "
                                   f"{list(self.strides)}: a transposed or otherwise non-contiguous last "
                                   f"dimension needs .contiguous() or a descriptor of the transposed layout")
        size = self.dtype.bytes
        for dim, stride in enumerate(self.strides[:-1]):
            if stride * size % ALIGNMENT:
                raise _fail("strides", f"must give a 16-byte multiple for every dimension but the last: stride "
                                       f"{stride} of dim {dim} is {stride * size} bytes (TMA requires "
                                       f"16-byte aligned row strides)")
            if stride * size >= 2**40:
                raise _fail("strides", f"stride {stride} of dim {dim} is {stride * size} bytes; TMA requires "
                                       f"less than 2**40")

    def _check_storage(self, last: int) -> None:
        """Every element the shape and strides describe (the ``last``-th element from the
        tensor's start is the furthest) lies in the tensor's storage: TMA reads and writes
        through them, so a larger descriptor would touch foreign memory."""
        available = _elements_in_storage(self.base)
        if available is None or last < available:
            return
        raise _fail("shape", f"{list(self.shape)} with strides {list(self.strides)} reaches element {last} of "
                             f"the tensor, whose storage holds {available} elements from the tensor's start: "
                             f"describe at most the tensor (TensorDescriptor.from_tensor(t, block_shape))")

    def _check_box_dims(self) -> None:
        for dim, box in enumerate(self.block_shape):
            why = box_dim_error(dim, box, f"dimension {dim}")
            if why:
                raise _fail("block_shape", why)

    def _check_box_width(self) -> None:
        inner = self.block_shape[-1] * self.dtype.bytes
        if inner < ALIGNMENT or inner % ALIGNMENT:
            raise _fail("block_shape", f"inner dimension is {self.block_shape[-1]} x {self.dtype} = {inner} "
                                       f"bytes; TMA requires at least 16 bytes and a multiple of 16 (a "
                                       f"placeholder box such as [1, 1] must be replaced before the launch, "
                                       f"e.g. by an autotune pre_hook: desc.block_shape = [BM, BK])")

    # -- encoding ----------------------------------------------------------------------
    def _reuse_map(self, gid: int) -> None:
        """The map a launch encoded before for geometry ``gid`` at this tensor's address (a
        wrapper's fresh descriptor of the same tensor), as if ``encode()`` had run: the launch
        then packs it without calling ``encode()``.  None cached: ``encode()`` runs at the launch."""
        fields = self.__dict__
        base, device = fields["base"], fields["device_index"]
        if device >= 0 and getattr(base, "is_cuda", False):       # (encode() refuses the others)
            address = base.data_ptr()
            blob = _ENCODED.get((gid, address, device))
            if blob is not None:
                fields["_last_address"], fields["_last_blob"] = address, blob
                return
        fields["_last_address"], fields["_last_blob"] = None, b""

    def encode(self) -> bytes:
        """The 128-byte ``CUtensorMap`` (encoded once per address/shape/strides/box/swizzle)."""
        try:
            address = self.base.data_ptr()
        except AttributeError:
            raise _fail("tensor", "is a numpy array; descriptors of arrays run only on the interpreter") from None
        if address == self._last_address:          # every launch but the first (the launch fast path)
            return self._last_blob
        if not getattr(self.base, "is_cuda", False):
            raise _fail("tensor", "is not on a CUDA device; a descriptor of a CPU tensor runs only "
                                  "on the interpreter (TLXC_INTERPRET=1)")
        key = (self._gid, address, self.device_index)     # (the geometry's number: shape, strides, box...)
        blob = _ENCODED.get(key)
        if blob is None:
            if len(_ENCODED) >= _ENCODED_MAX:
                _ENCODED.clear()
            blob = _ENCODED[key] = EncodedMap(encode_tiled(self.dtype, address, self.shape, self.strides,
                                                           self.block_shape, self.swizzle, self.padding))
            blob.shape, blob.strides = tuple(self.shape), tuple(self.strides)
        fields = self.__dict__      # (not through __setattr__: these follow from the geometry)
        fields["_last_address"], fields["_last_blob"] = address, blob
        return blob


class EncodedMap(bytes):
    """A descriptor's 128-byte ``CUtensorMap`` as the launch passes it, carrying the global ``shape``
    and ``strides`` it encodes: a kernel that reads ``desc.shape`` / ``desc.strides`` takes them as
    hidden parameters (``runtime/launch.py: with_descriptor_dims``).  A bytes subclass: the C launch
    path copies it as bytes (``c_launcher.py`` checks ``PyBytes_Check``, not the exact type)."""


class DescriptorPlaceholder(TensorDescriptor):
    """A descriptor of an element type and no tensor, for ahead-of-time compiles
    (``tlxc compile --signature 'a_desc=tensordesc<fp16>'``): an autotune config's
    ``pre_hook`` assigns its ``block_shape`` as it would a real descriptor's, and
    ``ir_type()`` then gives the kernel parameter's type.  It cannot be launched."""

    def __init__(self, element: ScalarType, block_shape: Sequence[int] = ()):
        fields = self.__dict__
        fields.update(base=None, shape=(), strides=(), block_shape=_ints(block_shape), padding="zero",
                      _requested_swizzle=None, _element=element)
        self._describe()

    def _describe(self) -> None:
        self.__dict__.update(dtype=self._element, device_index=-1, _head=("placeholder", self._element.name),
                             _last_address=None, _last_blob=b"")
        for name in _BOX_DERIVED:
            self.__dict__.pop(name, None)
        self._check_box_dims()

    def _fix_box(self) -> None:
        if not self.block_shape:
            raise _fail("block_shape", "of an ahead-of-time descriptor was never set: give the box in the "
                                       "signature (tensordesc<128x64xfp16>) or let a config's pre_hook "
                                       "assign desc.block_shape")
        super()._fix_box()

    def encode(self) -> bytes:
        raise _fail("tensor", "is missing: an ahead-of-time descriptor placeholder cannot be launched")


# Encoded maps by everything they encode, shared by descriptors: a wrapper that builds
# new descriptors of the same tensors on every call (as Triton code does) encodes once.
# The maps are 128 bytes; the cache is emptied when it reaches _ENCODED_MAX entries.
_ENCODED: dict[tuple, bytes] = {}
_ENCODED_MAX = 4096
# Geometries (``_geometry()``: the head and the box) that passed every rule but the storage's
# size -> ((swizzle, IR type, type key, geometry number), or None for a placeholder box that passed every other
# rule; the index of the last element the shape and strides reach, checked against each tensor).
_KNOWN: dict[tuple, tuple] = {}
# Constructions that passed every rule, over torch tensors: (torch dtype, padding, requested
# swizzle, address mod 16, rank, number of strides, the shape's, strides' and box's ints) ->
# (the descriptor's fields but its tensor and device, the last element the shape reaches).
# ``TensorDescriptor(t, shape, strides, block_shape)`` on a key seen before copies the fields
# and reads only ``t``'s storage size and device: a wrapper builds three on every call.
_BUILT: dict[tuple, tuple] = {}


def _remember(geometry: tuple, checked: tuple | None, last: int) -> None:
    if len(_KNOWN) >= _ENCODED_MAX:
        _KNOWN.clear()
    _KNOWN[geometry] = (checked, last)


def _last_element(shape: Sequence[int], strides: Sequence[int]) -> int:
    """The offset in elements of the furthest element that ``shape``/``strides`` reach."""
    return sum((size - 1) * stride for size, stride in zip(shape, strides))
_GEOMETRY_IDS = itertools.count()   # a checked geometry's number (encode()'s key), never reused
_TYPE_KEYS: dict[tuple, int] = {}   # (IR type, narrow for stores) -> key; never emptied: a key keeps its meaning


def store_rule_error(kernel_name: str, name: str, desc: TensorDescriptor) -> LaunchError | None:
    """The error of a launch of ``kernel_name`` whose TMA stores write through descriptor
    argument ``name`` = ``desc``, when the shape's inner size is not a 16-byte multiple (TMA
    stores would overwrite elements past it: ``ir/tensormap.py: store_width_message``)."""
    if not desc.shape or not narrow_for_stores(desc.shape[-1], desc.dtype.bytes):
        return None
    return LaunchError(f"argument '{name}' of {kernel_name}: TensorDescriptor "
                       f"{store_width_message(len(desc.shape) - 1, str(desc.shape[-1]), desc.dtype)}")


def tma_arguments(dtype: ScalarType, address: int, shape: Sequence[int], strides: Sequence[int],
                  block_shape: Sequence[int], swizzle: int, padding: str) -> dict[str, Any]:
    """The arguments of ``cuTensorMapEncodeTiled``, by name, with plain ints and
    enumerator names: dimensions innermost first, global strides in bytes
    without the innermost one (always the element size)."""
    return {
        "tensorDataType": TMA_DATA_TYPES[dtype.name],
        "tensorRank": len(shape),
        "globalAddress": address,
        "globalDim": [int(d) for d in reversed(shape)],
        "globalStrides": [int(s) * dtype.bytes for s in reversed(strides[:-1])],
        "boxDim": [int(b) for b in reversed(TensorDescType(dtype, tuple(block_shape), swizzle).copy_box)],
        "elementStrides": [1] * len(shape),
        "interleave": "CU_TENSOR_MAP_INTERLEAVE_NONE",
        "swizzle": SWIZZLE_ENUMS[swizzle],
        "l2Promotion": "CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
        "oobFill": PADDING_ENUMS[padding],
    }


def encode_tiled(dtype: ScalarType, address: int, shape: Sequence[int], strides: Sequence[int],
                 block_shape: Sequence[int], swizzle: int, padding: str) -> bytes:
    """Call ``cuTensorMapEncodeTiled`` (cuda.bindings) and return the map's 128 bytes."""
    from cuda.bindings import driver as cu
    args = tma_arguments(dtype, address, shape, strides, block_shape, swizzle, padding)
    _init_driver(cu)
    result, tensor_map = cu.cuTensorMapEncodeTiled(
        getattr(cu.CUtensorMapDataType, args["tensorDataType"]),
        args["tensorRank"],
        args["globalAddress"],
        [cu.cuuint64_t(d) for d in args["globalDim"]],
        [cu.cuuint64_t(s) for s in args["globalStrides"]],
        [cu.cuuint32_t(b) for b in args["boxDim"]],
        [cu.cuuint32_t(e) for e in args["elementStrides"]],
        getattr(cu.CUtensorMapInterleave, args["interleave"]),
        getattr(cu.CUtensorMapSwizzle, args["swizzle"]),
        getattr(cu.CUtensorMapL2promotion, args["l2Promotion"]),
        getattr(cu.CUtensorMapFloatOOBfill, args["oobFill"]))
    if result != cu.CUresult.CUDA_SUCCESS:
        shown = ", ".join(f"{k}={v if k != 'globalAddress' else hex(v)}" for k, v in args.items())
        raise CudaError(f"cuTensorMapEncodeTiled failed: {_result_name(result)} ({shown})")
    return _map_bytes(tensor_map)


_DRIVER_READY = []


def _init_driver(cu) -> None:
    if not _DRIVER_READY:
        (result,) = cu.cuInit(0)
        if result != cu.CUresult.CUDA_SUCCESS:
            raise CudaError(f"cuInit failed: {_result_name(result)}")
        _DRIVER_READY.append(True)


def _result_name(result) -> str:
    return getattr(result, "name", None) or f"CUresult {int(result)}"


def _map_bytes(tensor_map) -> bytes:
    """The 128 bytes of a ``CUtensorMap`` (16 little-endian 64-bit words)."""
    words = [int(w) for w in tensor_map.opaque]
    blob = b"".join(w.to_bytes(8, "little") for w in words)
    if len(blob) != 128:
        raise CudaError(f"cuTensorMapEncodeTiled returned a {len(blob)}-byte map, expected 128")
    return blob


# -- tensors (torch or numpy) ------------------------------------------------------------
def _element_type(tensor: Any) -> ScalarType:
    element = _TORCH_ELEMENTS.get(getattr(tensor, "dtype", None)) if hasattr(tensor, "data_ptr") else None
    if element is not None:          # a torch tensor of a dtype seen before
        return element
    element = _element_type_checked(tensor)
    if hasattr(tensor, "data_ptr"):
        _TORCH_ELEMENTS[tensor.dtype] = element
    return element


_TORCH_ELEMENTS: dict[Any, ScalarType] = {}


def _element_type_checked(tensor: Any) -> ScalarType:
    if not hasattr(tensor, "dtype") or not (hasattr(tensor, "data_ptr") or hasattr(tensor, "__array_interface__")):
        raise _fail("tensor", f"must be a torch tensor (or numpy array), got {type(tensor).__name__}")
    if hasattr(tensor, "data_ptr"):
        from .ir.arg_types import pointee_of_tensor
        try:
            element = pointee_of_tensor(tensor)
        except LaunchError:
            element = None
    else:
        from .ir.arg_types import pointee_of_array
        try:
            element = pointee_of_array(tensor)
        except LaunchError:
            element = None
    if element is None or element.name not in TMA_DATA_TYPES:
        supported = "float16, bfloat16, float32, float64, float8_e4m3fn, float8_e5m2, (u)int8/16/32/64"
        raise _fail("tensor", f"has dtype {tensor.dtype}, which TMA cannot copy (supported: {supported})")
    return element


def _address(tensor: Any) -> int:
    if hasattr(tensor, "data_ptr"):
        return tensor.data_ptr()
    return tensor.__array_interface__["data"][0]


def _ints(values: Sequence[int]) -> tuple[int, ...]:
    """Shapes, strides and boxes as tuples of Python ints (lists, torch.Size and numpy ints
    alike); a float (64.5, or 64.0) is refused, not truncated."""
    try:
        return tuple(map(_index, values))
    except TypeError:
        raise LaunchError(f"TensorDescriptor: expected a sequence of ints, got {values!r}") from None


def _elements_in_storage(tensor: Any) -> int | None:
    """How many elements the storage behind ``tensor`` holds from its first element (None
    when the object does not say: the check is then left to the launch)."""
    storage = getattr(tensor, "untyped_storage", None)
    if storage is not None:
        storage = storage()
        return (storage.data_ptr() + storage.nbytes() - tensor.data_ptr()) // tensor.element_size()
    if hasattr(tensor, "__array_interface__") and hasattr(tensor, "base"):
        import numpy as np
        try:
            from numpy.lib.array_utils import byte_bounds
        except ImportError:  # pragma: no cover - numpy 1.x
            byte_bounds = np.byte_bounds
        owner = tensor
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        _low, high = byte_bounds(owner)
        return (high - tensor.__array_interface__["data"][0]) // tensor.itemsize
    return None


def _element_strides(tensor: Any) -> tuple[int, ...]:
    if hasattr(tensor, "data_ptr"):
        return tuple(tensor.stride())
    return tuple(s // tensor.itemsize for s in tensor.strides)


__all__ = ["DescriptorPlaceholder", "TensorDescriptor", "box_swizzle", "choose_swizzle", "encode_tiled", "splits_into_spans",
           "tma_arguments"]
