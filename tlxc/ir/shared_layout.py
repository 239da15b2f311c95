"""Explicit shared-memory layouts: TLX's ``nv_mma_shared_layout_encoding`` and its tilings.

A kernel may pin the layout of a shared buffer instead of letting the
``shared-layouts`` pass choose it from the buffer's consumers::

    atom: tl.constexpr = tlx.nv_mma_shared_layout_encoding(
        (64, 64), [1, 0], tl.bfloat16, [1, 1], [1, 1], [1, 0], False, True)
    buf = tlx.local_alloc((128, 128), tl.bfloat16, 2, layout=atom.tile_to_shape((128, 128)))
    view = tlx.local_reinterpret(buf[0], tl.bfloat16, [128, 128], layout=atom, pin=False)

Both values are compile-time (hashable, frozen) and ride on ``MemDescType.layout``.

*NVMMA layout* (``NVMMASharedLayout``): the layout wgmma/tcgen05 descriptors
and TMA copies read, as Triton's ``NVMMASharedEncoding``.  Its ``shape`` (the
*atom*) only selects the swizzle: the widest of 128, 64, 32 bytes that divides
the atom's contiguous row (``shape[order[0]]`` elements), 0 when
``swizzled=False``.  Over a buffer of ``[R, C]`` it places element ``(r, c)``
at ``swizzle(r * S + c * e)`` when a row is ``S`` (the swizzle span) bytes,
and, for rows wider than ``S``, block-stacked: the columns split into blocks
``S`` bytes wide, block ``j`` holding all ``R`` rows contiguously at byte
``j * R * S`` (``passes/shared_layouts.py`` "Column blocks").

*Tiled layout* (``TiledSharedLayout``, from ``atom.tile_to_shape(shape)``):
``shape`` covered by copies of the atom's ``[ar, ac]`` tile, each tile one
contiguous NVMMA-laid-out block of ``ar * ac`` elements, tiles numbered
column-major (down the rows first, as CuTe's ``tile_to_shape``): tile
``(i, j)`` starts at element ``(i + j * R // ar) * ar * ac``.  When the atom is
exactly one swizzle span wide this is the same byte mapping as the atom's
NVMMA layout over the whole shape (the block-stacked columns *are* the tiles),
which is what lets a kernel write a buffer through the atom view (TMA) and
read per-group row slices of it (wgmma) -- the TLX attention backward does.

``byte_offsets(layout, shape, element)`` gives every element's byte offset
within its buffer; the frontend, the ``shared-layouts`` pass and the
interpreter compare those to decide whether two views of one buffer see the
same bytes.  tlxc stores a buffer only in the layouts its codegen addresses
(row-major, swizzled, column blocks one swizzle span wide), so a layout whose mapping is
none of those is a ``LayoutError`` naming it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .types import ScalarType

SWIZZLE_SPANS = (128, 64, 32)
_SWIZZLE_MASK = {0: 0, 32: 1, 64: 3, 128: 7}


class SharedLayoutError(ValueError):
    """A layout argument that cannot be built (the frontend adds the location)."""


def _ints(value, what: str) -> tuple[int, ...]:
    try:
        items = tuple(value)
    except TypeError:
        raise SharedLayoutError(f"'{what}' must be a list of integers, got {value!r}") from None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise SharedLayoutError(f"'{what}' must be a list of integers, got {list(items)}")
    return items


@dataclass(frozen=True)
class NVMMASharedLayout:
    """TLX's ``nv_mma_shared_layout_encoding(shape, order, elemType, numCTAsPerCGA,
    numCTASplit, numCTAOrder, fp4Padded, swizzled)``."""

    shape: tuple[int, ...]
    order: tuple[int, ...]
    element: ScalarType
    ctas_per_cga: tuple[int, ...]
    cta_split_num: tuple[int, ...]
    cta_order: tuple[int, ...]
    fp4_padded: bool = False
    swizzled: bool = True

    @property
    def swizzle(self) -> int:
        """The swizzle span in bytes (0: none), chosen from the atom's contiguous row."""
        if not self.swizzled:
            return 0
        row_bytes = self.shape[self.order[0]] * self.element.bits // 8
        return next((s for s in SWIZZLE_SPANS if row_bytes >= s and row_bytes % s == 0), 0)

    def tile_to_shape(self, shape) -> TiledSharedLayout:
        """The layout of ``shape`` covered by copies of this atom (column-major tile order)."""
        shape = _ints(shape, "shape")
        if len(shape) != len(self.shape):
            raise SharedLayoutError(f"tile_to_shape({list(shape)}): the atom {list(self.shape)} has rank "
                                    f"{len(self.shape)}")
        for full, part in zip(shape, self.shape):
            if full % part:
                raise SharedLayoutError(f"tile_to_shape({list(shape)}) is not a whole number of "
                                        f"{list(self.shape)} atoms")
        return TiledSharedLayout(self, shape)

    def make_shared_linear(self, tile_shape) -> TiledSharedLayout:
        """TLX's shared-linear layout of ``tile_shape`` made of this atom: ``tile_to_shape``."""
        return self.tile_to_shape(tile_shape)

    def make_permute(self, dims) -> NVMMASharedLayout:
        """TLX's permuted copy (what ``local_trans`` gives a view's type)."""
        return NVMMASharedLayout(self.shape, tuple(self.order[d] for d in dims), self.element, self.ctas_per_cga,
                                 self.cta_split_num, self.cta_order, self.fp4_padded, self.swizzled)

    def __str__(self) -> str:
        dims = "x".join(map(str, self.shape))
        text = f"#nvmma<{dims}x{self.element}, swizzle={self.swizzle}"
        # The fields the swizzle does not imply, only where they differ from TLX's usual
        # arguments, so that the IR parser rebuilds this very layout (ir/parser.py).
        rank = len(self.shape)
        row_major, ones = tuple(range(rank - 1, -1, -1)), (1,) * rank
        if self.order != row_major:
            text += ", order=[" + ",".join(map(str, self.order)) + "]"
        if (self.ctas_per_cga, self.cta_split_num, self.cta_order) != (ones, ones, row_major):
            text += "".join(f", {key}=[" + ",".join(map(str, value)) + "]" for key, value in (
                ("ctas_per_cga", self.ctas_per_cga), ("cta_split_num", self.cta_split_num),
                ("cta_order", self.cta_order)))
        if self.fp4_padded:
            text += ", fp4_padded"
        if not self.swizzled:
            text += ", unswizzled"
        return text + ">"


@dataclass(frozen=True)
class TiledSharedLayout:
    """``atom.tile_to_shape(shape)``: TLX's shared-linear layout of a tiled atom."""

    atom: NVMMASharedLayout
    shape: tuple[int, ...]

    @property
    def tile_shape(self) -> list[int]:
        return list(self.shape)

    @property
    def element(self) -> ScalarType:
        return self.atom.element

    @property
    def swizzle(self) -> int:
        return self.atom.swizzle

    def __str__(self) -> str:
        dims = "x".join(map(str, self.shape))
        return f"#tiled<{dims}, {self.atom}>"


@dataclass(frozen=True)
class SwizzledSharedLayout:
    """Triton's ``swizzled_shared`` encoding: TLX's ``swizzled_shared_layout_encoding(vectorSize,
    perPhase, maxPhase, order, ...)``, or a CuTe ``Swizzle<B, M, S>`` (``tlx.swizzled_layout``,
    ``cute`` set) over the buffer's row-major element offsets.  It has no element type: the
    frontend resolves it for a buffer to the NVMMA layout with the same bytes, or refuses it
    (``resolve_swizzled``)."""

    vec: int
    per_phase: int
    max_phase: int
    order: tuple[int, ...]
    cute: tuple[int, int, int] | None = None

    @classmethod
    def make_default(cls, rank: int) -> SwizzledSharedLayout:
        """The trivial layout (no swizzle), row-major."""
        return cls(1, 1, 1, tuple(range(int(rank) - 1, -1, -1)))

    def __str__(self) -> str:
        if self.cute is not None:
            return "#swizzle<B={}, M={}, S={}>".format(*self.cute)
        return (f"#swizzled_shared<vec={self.vec}, perPhase={self.per_phase}, maxPhase={self.max_phase}, "
                f"order={list(self.order)}>")


@dataclass(frozen=True)
class XorSwizzle:
    """A swizzle of byte offsets that is not an NVMMA one: byte ``o`` of the buffer lives at
    ``o ^ (((o >> (base + shift)) & (2**bits - 1)) << base)`` (CuTe's ``Swizzle<bits, base,
    shift>`` on bytes; the NVMMA swizzles are ``Swizzle<1..3, 4, 3>``).  Runs of ``chunk`` =
    2**base bytes stay contiguous, and the pattern repeats every ``period`` bytes."""

    bits: int
    base: int
    shift: int

    @property
    def chunk(self) -> int:
        return 1 << self.base

    @property
    def period(self) -> int:
        return 1 << (self.base + self.shift + self.bits)

    def apply(self, offsets):
        """The swizzled byte offset(s) (an int or a numpy array)."""
        return offsets ^ (((offsets >> (self.base + self.shift)) & ((1 << self.bits) - 1)) << self.base)

    def __str__(self) -> str:
        return f"xor<B={self.bits}, M={self.base}, S={self.shift}> (bytes)"


def swizzled_shared_layout(vec, per_phase, max_phase, order, ctas_per_cga=None, cta_split_num=None,
                           cta_order=None) -> SwizzledSharedLayout:
    """Build and check a swizzled_shared layout (``tlx.swizzled_shared_layout_encoding``)."""
    values = []
    for what, value in (("vectorSize", vec), ("perPhase", per_phase), ("maxPhase", max_phase)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SharedLayoutError(f"'{what}' must be a positive integer, got {value!r}")
        values.append(value)
    order = _ints(order, "order")
    if sorted(order) != list(range(len(order))):
        raise SharedLayoutError(f"'order' must be a permutation of {list(range(len(order)))}, got {list(order)}")
    for what, value in (("numCTAsPerCGA", ctas_per_cga), ("numCTASplit", cta_split_num)):
        if value is not None and any(v != 1 for v in _ints(value, what)):
            raise SharedLayoutError(f"CTA-split layouts ({what}={list(value)}) are not supported: each CTA holds its "
                                    f"whole buffer")
    return SwizzledSharedLayout(*values, order)


def cute_swizzle_layout(bits, base, shift, order=None) -> SwizzledSharedLayout:
    """``tlx.swizzled_layout(B, M, S, order)``: CuTe's ``Swizzle<B, M, S>`` (XOR element-offset bits
    ``[M, M+B)`` with bits ``[M+S, M+S+B)``)."""
    for what, value in (("B", bits), ("M", base), ("S", shift)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SharedLayoutError(f"swizzled_layout's '{what}' must be a non-negative integer, got {value!r}")
    order = _ints(order, "order") if order is not None else (1, 0)
    if bits and shift < bits:
        raise SharedLayoutError(f"Swizzle<{bits}, {base}, {shift}> overlaps its own bits (CuTe needs S >= B)")
    return SwizzledSharedLayout(1 << base, 1, 1 << bits, order, (bits, base, shift))


def _swizzled_shared_offsets(layout: SwizzledSharedLayout, shape: tuple[int, ...], element: ScalarType) -> np.ndarray:
    rank = len(shape)
    if tuple(layout.order) != tuple(range(rank - 1, -1, -1)):
        raise SharedLayoutError(f"{layout} has order {list(layout.order)}; tlxc stores shared buffers row-major "
                                f"(order {list(range(rank - 1, -1, -1))}) only")
    linear = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    if layout.cute is not None:
        bits, base, shift = layout.cute
        mask = ((1 << bits) - 1) << (base + shift)
        return (linear ^ ((linear & mask) >> shift)) * element.bytes
    cols = shape[-1]
    col = linear % cols
    row = linear // cols
    phase = (row // layout.per_phase) % layout.max_phase
    swizzled_col = ((col // layout.vec) ^ phase) * layout.vec + col % layout.vec
    return (row * cols + swizzled_col) * element.bytes


def resolve_swizzled(layout: SwizzledSharedLayout, shape: tuple[int, ...],
                     element: ScalarType) -> NVMMASharedLayout | SwizzledSharedLayout:
    """The NVMMA layout (unswizzled or swizzled) that puts every element of a ``shape`` ``element``
    buffer where ``layout`` does: tlxc addresses those.  Else ``layout`` itself when it is an
    ``XorSwizzle`` of the row-major bytes (``xor_swizzle_of``): the buffer is then stored so,
    for register loads and stores (``shared-layouts`` refuses TMA and MMA consumers of it).
    A ``SharedLayoutError`` otherwise."""
    wanted = _swizzled_shared_offsets(layout, tuple(shape), element)
    rank = len(shape)
    row_major, ones = tuple(range(rank - 1, -1, -1)), (1,) * rank
    for swizzle in (False, True):
        candidate = NVMMASharedLayout(tuple(shape), row_major, element, ones, ones, row_major, False, swizzle)
        try:
            stored = nvmma_offsets(candidate.swizzle, tuple(shape), element)
        except SharedLayoutError:
            continue
        if np.array_equal(wanted, stored):
            return candidate
    xor = xor_swizzle_of(layout, tuple(shape), element)
    if xor is not None and np.array_equal(wanted, xor.apply(nvmma_offsets(0, tuple(shape), element))):
        return layout
    raise SharedLayoutError(f"{layout} places the elements of a {list(shape)} {element} buffer at bytes tlxc's code "
                            f"does not address: it stores shared buffers row-major, with NVMMA swizzles (whole "
                            f"16-byte chunks of 128-byte lines), or with an XOR swizzle of the row-major byte "
                            f"offset that keeps each element whole and repeats within {MAX_XOR_PERIOD} bytes "
                            f"(power-of-two vec, perPhase, maxPhase and row length, vec * maxPhase <= the row)")


MAX_XOR_PERIOD = 1024        # allocate-shared aligns swizzled buffers to 1024 bytes


def xor_swizzle_of(layout: SwizzledSharedLayout, shape: tuple[int, ...], element: ScalarType) -> XorSwizzle | None:
    """``layout`` over a row-major ``shape`` buffer as an ``XorSwizzle`` of its byte offsets, when
    it is one that keeps every element in one piece and repeats within ``MAX_XOR_PERIOD``
    bytes; None otherwise.  CuTe's ``Swizzle<B, M, S>`` acts on element offsets (``M`` grows by
    log2 of the element size in bytes); Triton's (vec, perPhase, maxPhase) XORs the row's phase
    ``(row // perPhase) % maxPhase`` into the column's vec-group index, which is
    ``Swizzle<log2 maxPhase, log2 vec, log2(cols * perPhase / vec)>`` on element offsets."""
    def log2(n: int) -> int | None:
        return n.bit_length() - 1 if n > 0 and n & (n - 1) == 0 else None

    if tuple(layout.order) != tuple(range(len(shape) - 1, -1, -1)) or element.bits < 8:
        return None
    if layout.cute is not None:
        bits, base, shift = layout.cute
    else:
        cols = shape[-1]
        logs = [log2(v) for v in (layout.vec, layout.per_phase, layout.max_phase, cols)]
        if None in logs or layout.vec * layout.max_phase > cols:
            return None
        bits, base, shift = logs[2], logs[0], logs[3] + logs[1] - logs[0]
    xor = XorSwizzle(bits, base + log2(element.bytes), shift)
    if not bits or xor.period > MAX_XOR_PERIOD:
        return None
    return xor


@dataclass(frozen=True)
class PaddedSharedLayout:
    """TLX's ``padded_shared_layout_encoding.with_identity_for(pairs, shape, order)``: the
    buffer's row-major element offsets with ``pad`` elements inserted after every ``interval``
    elements, for each ``(interval, pad)`` pair (Triton's ``#ttg.padded_shared``; padding moves
    each row's start off the previous row's banks).  tlxc stores the form whose padding ends
    rows: one pair whose interval is the row length (``shape[-1]``), i.e. rows ``shape[-1] + pad``
    elements apart (``row_pitch``); register loads and stores and cp.async address it, TMA and
    MMA units read dense boxes and refuse it (``passes/shared_layouts.py``)."""

    pairs: tuple[tuple[int, int], ...]
    shape: tuple[int, ...]
    order: tuple[int, ...]

    @property
    def row_pitch(self) -> int:
        """Elements from one row's start to the next."""
        (_, pad), = self.pairs
        return self.shape[-1] + pad

    @property
    def numel(self) -> int:
        """Elements one buffer occupies, padding included (the last row's too)."""
        rows = 1
        for d in self.shape[:-1]:
            rows *= d
        return rows * self.row_pitch

    def strides(self) -> tuple[int, ...]:
        """Element strides of the buffer's dims."""
        strides, step = [1], self.row_pitch
        for d in reversed(self.shape[:-1]):
            strides.append(step)
            step *= d
        return tuple(reversed(strides))

    def __str__(self) -> str:
        pairs = ", ".join(f"({i}, {p})" for i, p in self.pairs)
        return f"#padded_shared<[{pairs}], shape={list(self.shape)}, order={list(self.order)}>"


def padded_shared_layout(pairs, shape, order) -> PaddedSharedLayout:
    """Build and check a ``PaddedSharedLayout`` (``with_identity_for``): powers of two as Triton
    requires, and the one form tlxc stores (a single pair padding each row's end)."""
    try:
        pairs = tuple(tuple(pair) for pair in pairs)
    except TypeError:
        raise SharedLayoutError(f"'interval_padding_pairs' must be a list of (interval, padding) pairs, got "
                                f"{pairs!r}") from None
    shape, order = _ints(shape, "shape"), _ints(order, "order")
    if not pairs or any(len(p) != 2 for p in pairs):
        raise SharedLayoutError(f"'interval_padding_pairs' must be a non-empty list of (interval, padding) pairs, "
                                f"got {list(pairs)}")
    for value in [v for pair in pairs for v in pair] + list(shape):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value & (value - 1):
            raise SharedLayoutError(f"padded shared layouts take powers of two for intervals, paddings and the "
                                    f"shape, got pairs {list(pairs)} and shape {list(shape)}")
    if len(order) != len(shape) or sorted(order) != list(range(len(shape))):
        raise SharedLayoutError(f"'order' must be a permutation of {list(range(len(shape)))}, got {list(order)}")
    if tuple(order) != tuple(range(len(shape) - 1, -1, -1)):
        raise SharedLayoutError(f"order {list(order)}: tlxc stores padded shared buffers row-major (order "
                                f"{list(range(len(shape) - 1, -1, -1))}) only")
    if len(pairs) != 1 or pairs[0][0] != shape[-1]:
        raise SharedLayoutError(f"padding {[list(p) for p in pairs]} over rows of {shape[-1]} elements: tlxc stores "
                                f"padded rows only (one (interval, padding) pair whose interval is the row length, "
                                f"here ({shape[-1]}, pad))")
    return PaddedSharedLayout(pairs, shape, order)


def nv_mma_shared_layout(shape, order, element, ctas_per_cga, cta_split_num, cta_order, fp4_padded=False,
                         swizzled=True) -> NVMMASharedLayout:
    """Build and check an NVMMA layout (what ``tlx.nv_mma_shared_layout_encoding`` returns)."""
    shape, order = _ints(shape, "shape"), _ints(order, "order")
    if not isinstance(element, ScalarType):
        raise SharedLayoutError(f"'elemType' must be a dtype (tl.bfloat16, tlx.dtype_of(desc), ...), got "
                                f"{element!r}")
    if not shape or any(d < 1 for d in shape):
        raise SharedLayoutError(f"'shape' must be positive integers, got {list(shape)}")
    if sorted(order) != list(range(len(shape))):
        raise SharedLayoutError(f"'order' must be a permutation of {list(range(len(shape)))}, got {list(order)}")
    if len(shape) >= 2 and order[0] != len(shape) - 1:
        raise SharedLayoutError(f"order {list(order)} makes dimension {order[0]} contiguous (an MN-major "
                                f"layout); tlxc supports row-major NVMMA layouts (order [{len(shape) - 1}, ...]) "
                                f"only: transpose a view with tlx.local_trans instead")
    ctas = (_ints(ctas_per_cga, "numCTAsPerCGA"), _ints(cta_split_num, "numCTASplit"),
            _ints(cta_order, "numCTAOrder"))
    if any(v != 1 for v in ctas[0] + ctas[1]):
        raise SharedLayoutError(f"CTA-split NVMMA layouts (numCTAsPerCGA={list(ctas[0])}, numCTASplit="
                                f"{list(ctas[1])}) are not supported: each CTA holds its whole buffer")
    if fp4_padded:
        raise SharedLayoutError("fp4Padded=True (padded fp4 operands) is not supported")
    if not isinstance(swizzled, bool):
        raise SharedLayoutError(f"'swizzled' must be True or False, got {swizzled!r}")
    return NVMMASharedLayout(shape, order, element, ctas[0], ctas[1], ctas[2], bool(fp4_padded), swizzled)


# -- byte mappings ----------------------------------------------------------------------------------------
def swizzled(offsets: np.ndarray, swizzle: int) -> np.ndarray:
    """``passes/shared_layouts.py:swizzle_offset`` on an array of byte offsets."""
    return offsets ^ (((offsets >> 7) & _SWIZZLE_MASK[swizzle]) << 4)


def nvmma_offsets(swizzle: int, shape: tuple[int, ...], element: ScalarType) -> np.ndarray:
    """Byte offset of every element of a ``shape`` buffer in the NVMMA layout of ``swizzle``
    (row-major when 0; block-stacked columns when a row is wider than the span)."""
    index = np.indices(shape, dtype=np.int64)
    row_major = np.ravel_multi_index(tuple(index), shape).astype(np.int64) * element.bytes
    if not swizzle:
        return row_major
    row_bytes = shape[-1] * element.bytes
    if len(shape) != 2:
        raise SharedLayoutError(f"a {swizzle}-byte swizzled layout of a {len(shape)}-D buffer "
                                f"{list(shape)} is not supported (2-D buffers only)")
    if row_bytes < swizzle or row_bytes % swizzle:
        raise SharedLayoutError(f"rows of {row_bytes} bytes ({shape[-1]} x {element}) are not a whole number "
                                f"of the layout's {swizzle}-byte swizzle span")
    rows, cols = index
    if row_bytes == swizzle:
        return swizzled(row_major, swizzle)
    if shape[0] % 8:
        raise SharedLayoutError(f"rows wider than the {swizzle}-byte swizzle are stored as column blocks of "
                                f"whole 8-row swizzle periods; {shape[0]} rows are not a multiple of 8")
    width = swizzle // element.bytes
    block = cols // width
    return block * shape[0] * swizzle + swizzled(rows * swizzle + (cols % width) * element.bytes, swizzle)


def byte_offsets(layout, shape: tuple[int, ...], element: ScalarType) -> np.ndarray:
    """Byte offset (within the buffer) of every element of a ``shape`` buffer laid out by ``layout``."""
    shape = tuple(shape)
    if isinstance(layout, NVMMASharedLayout):
        return nvmma_offsets(layout.swizzle, shape, element)
    if isinstance(layout, TiledSharedLayout):
        if shape != layout.shape:
            raise SharedLayoutError(f"the layout tiles {list(layout.shape)}, but the buffer is {list(shape)}")
        return _tiled_offsets(layout, element)
    if isinstance(layout, SwizzledSharedLayout):
        return _swizzled_shared_offsets(layout, shape, element)
    if isinstance(layout, PaddedSharedLayout):
        index = np.indices(shape, dtype=np.int64)
        return sum(i * s for i, s in zip(index, layout.strides())) * element.bytes
    raise SharedLayoutError(f"no byte mapping for layout {layout!r}")


def _tiled_offsets(layout: TiledSharedLayout, element: ScalarType) -> np.ndarray:
    atom = layout.atom.shape
    tile = nvmma_offsets(layout.atom.swizzle, atom, element)
    counts = [full // part for full, part in zip(layout.shape, atom)]
    index = np.indices(layout.shape, dtype=np.int64)
    tile_index = tuple(i // a for i, a in zip(index, atom))
    within = tuple(i % a for i, a in zip(index, atom))
    # Column-major tile order (the first dimension fastest), as CuTe's tile_to_shape.
    number = np.zeros(layout.shape, dtype=np.int64)
    step = 1
    for t, n in zip(tile_index, counts):
        number += t * step
        step *= n
    tile_bytes = int(np.prod(atom)) * element.bytes
    return number * tile_bytes + tile[within]


def storable_as(layout, shape: tuple[int, ...], element: ScalarType) -> tuple[int, bool]:
    """The (swizzle, column-blocked) storage tlxc's codegen addresses that has exactly
    ``layout``'s byte mapping for a ``shape`` buffer; a ``SharedLayoutError`` when none has."""
    wanted = byte_offsets(layout, shape, element)
    swizzle = layout.swizzle
    stored = nvmma_offsets(swizzle, shape, element)
    blocked = bool(swizzle) and shape[-1] * element.bytes > swizzle
    if not np.array_equal(wanted, stored):
        raise SharedLayoutError(f"layout {layout} orders the bytes of a {list(shape)} {element} buffer in a way "
                                f"tlxc cannot store (it stores row-major, swizzled, or as column blocks "
                                f"one swizzle span wide holding all rows); use an atom one swizzle span "
                                f"wide (or as wide as the buffer) of a multiple of 8 rows")
    return swizzle, blocked


def same_bytes(first, second, shape: tuple[int, ...], element: ScalarType) -> bool:
    """Whether two layouts put every element of a ``shape`` buffer at the same byte."""
    return bool(np.array_equal(byte_offsets(first, shape, element), byte_offsets(second, shape, element)))


__all__ = ["NVMMASharedLayout", "PaddedSharedLayout", "SharedLayoutError", "SwizzledSharedLayout", "TiledSharedLayout",
           "XorSwizzle", "byte_offsets", "cute_swizzle_layout", "nv_mma_shared_layout", "nvmma_offsets", "padded_shared_layout",
           "resolve_swizzled", "same_bytes", "storable_as", "swizzled_shared_layout", "xor_swizzle_of"]
