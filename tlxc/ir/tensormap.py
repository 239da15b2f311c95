"""The rules of a TMA tensor map that both the host (``descriptors.py``: ``cuTensorMapEncodeTiled``)
and the device (in-kernel descriptors, ``tlx.make_tensor_descriptor``: ``tensormap.replace``) follow,
kept below both so that they agree: the box limits, the 16-byte alignments, the default swizzle of
a box, and the numbers PTX's ``tensormap.replace`` writes for the element type, swizzle and
out-of-bounds fill (the same numbering as the driver's ``CUtensorMapDataType``,
``CUtensorMapSwizzle`` and ``CUtensorMapFloatOOBfill`` enums).
"""
from __future__ import annotations

from collections.abc import Sequence

MAX_RANK = 5
MAX_BOX_DIM = 256
ALIGNMENT = 16          # bytes: base address, row strides, inner box width
TENSORMAP_BYTES = 128   # one CUtensorMap, aligned to 128 bytes in global memory
MAX_STRIDE_BYTES = 2**40

# IR element type -> the tensor map's element type (CUtensorMapDataType's numbering, which
# tensormap.replace.tile.elemtype takes).  TMA copies bits, so types without an entry of their
# own travel as unsigned ints of their width (fp8 and int8 as u8, int16 as u16), as Triton does.
ELEMTYPE_CODES: dict[str, int] = {
    "u8": 0, "i8": 0, "f8e4m3": 0, "f8e5m2": 0,
    "u16": 1, "i16": 1,
    "u32": 2, "i32": 3,
    "u64": 4, "i64": 5,
    "f16": 6, "f32": 7, "f64": 9, "bf16": 10,
}
SWIZZLE_CODES = {0: 0, 32: 1, 64: 2, 128: 3}
FILL_CODES = {"zero": 0, "nan": 1}       # NaN fill: CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA


def choose_swizzle(inner_box_bytes: int) -> int:
    """The shared-memory swizzle (bytes) of a box whose innermost dimension is
    ``inner_box_bytes`` wide: that width when it is 32, 64 or 128, else none."""
    return inner_box_bytes if inner_box_bytes in (32, 64, 128) else 0


def splits_into_spans(block_shape: Sequence[int], element_bytes: int) -> bool:
    """Whether a box wider than 128 bytes is copied as 128-byte-wide, 128B-swizzled sub-boxes:
    its inner bytes a multiple of 128 and its rows (the other dimensions) a multiple of 8, so
    that every sub-box starts in phase with the swizzle pattern (1024 bytes)."""
    inner = block_shape[-1] * element_bytes
    rows = 1
    for d in block_shape[:-1]:
        rows *= d
    return inner > 128 and inner % 128 == 0 and rows % 8 == 0


def box_swizzle(block_shape: Sequence[int], element_bytes: int) -> int:
    """The default swizzle of a box: ``choose_swizzle`` of its inner bytes, or 128 for a wide
    box that ``splits_into_spans``."""
    if splits_into_spans(block_shape, element_bytes):
        return 128
    return choose_swizzle(block_shape[-1] * element_bytes)


def box_dim_error(dim: int, box: int, name: str | None = None) -> str | None:
    """Why ``block_shape[dim] = box`` cannot be copied: TMA copies at most ``MAX_BOX_DIM`` elements
    per dimension, so a longer dimension is copied as ``MAX_BOX_DIM``-element pieces (one copy
    each, as Triton does) and must be a multiple of that.  ``name``: how the message names the
    dimension (default ``block_shape[dim]``)."""
    if box < 1 or (box > MAX_BOX_DIM and box % MAX_BOX_DIM):
        return (f"{name or f'block_shape[{dim}]'} is {box}; a TMA box has 1 to {MAX_BOX_DIM} elements per "
                f"dimension, or a multiple of {MAX_BOX_DIM} (copied as {MAX_BOX_DIM}-element pieces)")
    return None


def wide_inner_error(block_shape: Sequence[int], element_bytes: int, swizzle: int) -> str | None:
    """Why an inner box dimension of more than ``MAX_BOX_DIM`` elements cannot be copied with this
    swizzle: its pieces land as the buffer expects only as the 128-byte spans of a swizzled box
    (``splits_into_spans``) or, unswizzled, when the box is a single row (each piece contiguous)."""
    if block_shape[-1] <= MAX_BOX_DIM or (swizzle and splits_into_spans(block_shape, element_bytes)):
        return None
    rows = 1
    for d in block_shape[:-1]:
        rows *= d
    if rows == 1:
        return None
    return (f"block_shape[{len(block_shape) - 1}] is {block_shape[-1]} (over {MAX_BOX_DIM}) in a box of {rows} rows; "
            f"TMA copies such a box as pieces only along its outer dimensions, or along the inner one as "
            f"128-byte swizzled spans (128-byte multiples wide over a multiple of 8 rows) or in a single row")


def box_error(block_shape: Sequence[int], element) -> str | None:
    """Why a box of ``block_shape`` x ``element`` (with its default swizzle, ``box_swizzle``)
    cannot be a tensor map's, or None."""
    if str(element) not in ELEMTYPE_CODES:
        return f"TMA does not copy {element} elements"
    for dim, box in enumerate(block_shape):
        why = box_dim_error(dim, box)
        if why:
            return why
    inner = block_shape[-1] * element.bytes
    if inner < ALIGNMENT or inner % ALIGNMENT:
        return (f"the box's inner dimension is {block_shape[-1]} x {element} = {inner} bytes; TMA needs at "
                f"least {ALIGNMENT} bytes and a multiple of {ALIGNMENT}")
    return wide_inner_error(block_shape, element.bytes, box_swizzle(block_shape, element.bytes))


# A TMA store writes whole 16-byte chunks of the innermost dimension: past a shape whose inner
# size is not a 16-byte multiple it overwrites the rest of the last chunk (measured on an H200,
# 2026-12-03, through host maps, tlxc's device maps and Triton's alike; docs/runtime.md).  A
# store through such a map is refused: by the launch for a descriptor argument, by a trap in
# the encode for an in-kernel map, by the interpreter for both, with this text.
def store_width_message(dim: int, extent: str, element) -> str:
    """Why a TMA store may not go through a map whose ``shape[dim]`` (the innermost, ``extent``
    elements of ``element``) is not a 16-byte multiple."""
    return (f"shape[{dim}] is {extent} elements of {element}, not a multiple of {ALIGNMENT} bytes: TMA stores "
            f"write whole {ALIGNMENT}-byte chunks of the innermost dimension, so a store through this descriptor "
            f"would overwrite elements past its shape; use a shape whose innermost size is a multiple of "
            f"{ALIGNMENT} bytes, or a pointer store")


def narrow_for_stores(inner_extent: int, element_bytes: int) -> bool:
    """Whether a TMA store through a map of this innermost size would write past it."""
    return inner_extent * element_bytes % ALIGNMENT != 0


def tma_store_targets(kernel) -> tuple[set, bool]:
    """(ids of the values a ``tlx.async_descriptor_store`` of ``kernel`` writes through, whether
    one writes through a map that is neither a kernel argument nor a ``tlx.make_tensor_descriptor``
    result: a slot re-read by ``tlx.reinterpret_tensor_descriptor`` or a loop-carried value)."""
    stored = {id(op.operands[0]) for op in kernel.walk() if op.name == "tlx.async_descriptor_store"}
    known = {id(a) for a in kernel.regions[0].block.args}
    known |= {id(op.results[0]) for op in kernel.walk() if op.name == "tlx.make_tensor_descriptor"}
    return stored, bool(stored - known)


__all__ = ["ALIGNMENT", "ELEMTYPE_CODES", "FILL_CODES", "MAX_BOX_DIM", "MAX_RANK", "MAX_STRIDE_BYTES",
           "SWIZZLE_CODES", "TENSORMAP_BYTES", "box_dim_error", "box_error", "box_swizzle", "choose_swizzle",
           "narrow_for_stores", "splits_into_spans", "store_width_message", "tma_store_targets", "wide_inner_error"]
