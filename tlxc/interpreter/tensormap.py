"""In-kernel tensor maps (``tlx.make_tensor_descriptor`` and TLX's descriptor slots) on the
interpreter.

A tensor map encoded in the kernel becomes an ``EncodedDescriptor``: the fields the TMA rules
(``tma.py``) read from a host ``tlxc.TensorDescriptor`` -- ``base`` (a numpy view of the global
memory the map describes, writes going through), ``shape``, ``strides``, ``block_shape``,
``padding`` -- so every TMA op runs on it exactly as on a host descriptor.  What the GPU's
encoder traps on (``codegen_nvptx/rules_tensormap.py``: a 16-byte aligned base, row strides that are
positive multiples of 16 bytes below 2**40), a size below 1, and, which the GPU cannot see, a
shape and strides reaching past the base's allocation are refused when a copy uses the map
(``check_usable``), located at the copy: the GPU encodes only the maps a TMA op uses
(``canonicalize`` removes the others), and Triton code builds maps past a loop's last iteration
that nothing uses.

``tlx.allocate_tensor_descriptor(num)`` maps ``num`` zeroed 128-byte slots for the program;
``make_tensor_descriptor(desc_ptr=slot)`` records its map at the slot and
``reinterpret_tensor_descriptor(slot, block_shape, dtype)`` finds it there, refusing a slot
nothing was encoded at and a box or dtype other than the encoded one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.tensormap import ALIGNMENT, MAX_STRIDE_BYTES, TENSORMAP_BYTES, narrow_for_stores, store_width_message
from .registry import impl
from .values import storage_dtype


@dataclass
class EncodedDescriptor:
    base: np.ndarray            # the described memory from its first element, as storage elements
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    block_shape: tuple[int, ...]
    padding: str
    element: object
    address: int                # virtual address of the first element (messages)
    error: str = ""             # why a copy through this map is refused (found when encoded)
    loc: object = None          # where it was encoded


def check_usable(ctx, op, desc) -> None:
    """A TMA copy through an in-kernel map that breaks TMA's rules is an error, located at the
    copy and naming the line that built the map."""
    error = getattr(desc, "error", "")
    if error:
        raise ctx.error(op, f"a TMA copy in {ctx.label} uses the tensor map built at line "
                            f"{desc.loc.line if desc.loc else '?'}: {error}")


def check_storable(ctx, op, desc) -> None:
    """A TMA store through an in-kernel map whose inner size is not a 16-byte multiple is an
    error (the GPU's encode traps: ``ir/tensormap.py: store_width_message``)."""
    if isinstance(desc, EncodedDescriptor) and desc.shape and \
            narrow_for_stores(desc.shape[-1], desc.element.bytes):
        message = store_width_message(len(desc.shape) - 1, str(desc.shape[-1]), desc.element)
        raise ctx.error(op, f"a TMA store in {ctx.label} uses the tensor map built at line "
                            f"{desc.loc.line if desc.loc else '?'}: tl.make_tensor_descriptor: {message}")


@impl("tlx.make_tensor_descriptor")
def make_tensor_descriptor(ctx, op, base, *rest):
    t = op.results[0].type
    rank = len(t.block_shape)
    shape = tuple(int(v) for v in rest[:rank])
    strides = tuple(int(v) for v in rest[rank:2 * rank])
    desc = _encode(ctx, op, int(base), shape, strides, t)
    if op.attrs.get("has_desc_ptr"):
        slot = int(rest[2 * rank])
        if slot % TENSORMAP_BYTES:
            raise ctx.error(op, f"desc_ptr in {ctx.label} is not {TENSORMAP_BYTES}-byte aligned: a tensor map slot "
                                f"comes from tlx.allocate_tensor_descriptor(n)[i]")
        ctx.memory.tensormaps[slot] = desc
    return desc


def _encode(ctx, op, address: int, shape, strides, t) -> EncodedDescriptor:
    """The map, or one that remembers why no copy may use it (``check_usable``): the GPU checks
    only the maps a TMA op uses (``canonicalize`` removes the others), so the interpreter refuses
    a map when a copy uses it, not when it is built."""
    element = t.element
    size = element.bytes
    where = f"tl.make_tensor_descriptor in {ctx.label}"
    problems = []
    for dim, stride in enumerate(strides[:-1]):
        nbytes = stride * size
        if stride <= 0 or nbytes % ALIGNMENT or nbytes >= MAX_STRIDE_BYTES:
            problems.append(f"strides[{dim}] is {stride} elements of {element} = {nbytes} bytes; TMA needs a "
                            f"positive multiple of {ALIGNMENT} bytes below 2**40 for every dimension but the last")
    for dim, extent in enumerate(shape):
        if extent < 1:      # Triton code builds such maps past a loop's last iteration and never uses them
            problems.append(f"shape[{dim}] is {extent}; a tensor map's dimensions hold at least 1 element")
    memory = ctx.memory
    index, inside = memory.locate(np.array([address], dtype=np.int64), size)
    if not inside[0]:
        problems.append(f"base is {memory.describe_address(address, element)}, which is no tensor")
        return EncodedDescriptor(np.zeros(0, storage_dtype(element)), shape, strides, tuple(t.block_shape),
                                 op.attrs.get("padding", "zero"), element, address,
                                 f"{where}: {problems[0]}", op.loc)
    alloc = memory.allocations[int(index[0])]
    offset = address - alloc.base
    misaligned = (alloc.host + offset) % ALIGNMENT
    if misaligned:
        problems.insert(0, f"base is {memory.describe_address(address, element)}, {misaligned} bytes past a "
                           f"{ALIGNMENT}-byte boundary; TMA needs a {ALIGNMENT}-byte aligned base")
    last = sum((max(extent, 1) - 1) * max(stride, 0) for extent, stride in zip(shape, strides))
    end = offset + (last + 1) * size
    if end > alloc.nbytes:
        problems.append(f"shape {list(shape)} with strides {list(strides)} from "
                        f"{memory.describe_address(address, element)} reaches element {last}, past the end of its "
                        f"allocation ({alloc.nbytes - offset} bytes from the base): the map would read and write "
                        f"foreign memory on the GPU")
        end = offset + (alloc.nbytes - offset) // size * size
    base = alloc.bytes()[offset:end].view(storage_dtype(element))
    error = f"{where}: {problems[0]}" if problems else ""
    return EncodedDescriptor(base, shape, strides, tuple(t.block_shape), op.attrs.get("padding", "zero"), element,
                             address, error, op.loc)


@impl("tl.descriptor_dim")
def descriptor_dim(ctx, op, desc):
    """``desc.shape[dim]`` / ``desc.strides[dim]`` of a descriptor argument (the host TensorDescriptor)."""
    if op.attrs["kind"] == "shape":
        return np.int32(desc.shape[op.attrs["dim"]])
    return np.int64(desc.strides[op.attrs["dim"]])


@impl("tlx.allocate_tensor_descriptor")
def allocate_tensor_descriptor(ctx, op):
    num = op.attrs["num"]
    return np.int64(ctx.memory.add_scratch(f"tensor descriptor slots of {ctx.label}", num * TENSORMAP_BYTES,
                                           TENSORMAP_BYTES))


@impl("tlx.reinterpret_tensor_descriptor")
def reinterpret_tensor_descriptor(ctx, op, desc_ptr):
    slot = int(desc_ptr)
    desc = ctx.memory.tensormaps.get(slot)
    t = op.results[0].type
    if desc is None:
        raise ctx.error(op, f"tlx.reinterpret_tensor_descriptor in {ctx.label}: no tensor map was encoded at this "
                            f"desc_ptr (tlx.make_tensor_descriptor(desc_ptr=...) must run first)")
    if tuple(t.block_shape) != desc.block_shape or t.element != desc.element:
        raise ctx.error(op, f"tlx.reinterpret_tensor_descriptor in {ctx.label}: the tensor map at this desc_ptr was "
                            f"encoded for boxes of {list(desc.block_shape)} x {desc.element}, not "
                            f"{list(t.block_shape)} x {t.element}")
    return desc
