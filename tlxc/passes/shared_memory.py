"""allocate-shared: place every shared buffer and mbarrier in the kernel's one
dynamic shared-memory block, and check the total against the target.

Buffers are 128-byte aligned (enough for vector access and unswizzled async
copies), swizzled ones (``attrs.swizzle`` or ``attrs.xor_swizzle`` from ``shared-layouts``) 1024-byte
aligned so that the address-based swizzle pattern starts at the buffer;
barriers are 8-byte aligned.  An allocation with ``reuse=`` (an operand)
gets the offset of the allocation it reuses, whose region is sized for the
largest member of the group.  Tensor-memory allocations get columns instead
(``attrs.column``, ``ir/ops/tcgen05.py: place_tensor_memory``), aliases the
column of the allocation they reuse; a block-scaled MMA (``tlx.async_dot_scaled``) gets the
columns its scales are copied to after them (``attrs.scale_column``).  The allocations whose
products ``fuse-dot-pairs`` fused (``attrs.interleave`` = (group, byte offset in a buffer)) share
one region, buffer i of each side by side, ``attrs.buffer_pitch`` bytes from one buffer index to
the next (``buffer_pitch``).  ``attrs.offset`` of each allocation and
``kernel.attrs.shared_bytes`` record the result; codegen puts its own scratch
space (layout conversions, reductions) after it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import CompilationError, ResourceError
from ..ir.core import Module
from ..ir.ops.tcgen05 import TMEM_COLUMNS, place_tensor_memory, scale_columns, tmem_groups
from ..ir.traits import ALLOCATION, has_trait
from ..target import get_target, target_of
from .manager import Pass

BUFFER_ALIGN = 128
SWIZZLED_BUFFER_ALIGN = 1024
BARRIER_BYTES = 8


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


@dataclass(frozen=True)
class AllocateShared(Pass):
    name = "allocate-shared"

    def run(self, module: Module, options) -> Module:
        arch = target_of(options).name
        for kernel in module.kernels:
            allocate_kernel(kernel, arch)
        return module


def allocate_kernel(kernel, arch: str) -> None:
    top_level = {id(op) for op in kernel.regions[0].ops}
    offset, entries = 0, []
    tmem_entries = []
    tmem_placement, tmem_widths, columns = place_tensor_memory(kernel)
    tmem_aliases = tmem_groups(kernel)
    aliases = _aliases(kernel)
    interleaved: dict[int, int] = {}        # fuse-dot-pairs group -> the offset of its buffer 0
    for op in kernel.walk():
        if not has_trait(op, ALLOCATION):
            continue
        if id(op) not in top_level:
            raise CompilationError(f"{op.name.replace('tlx.', 'tlx.')} must be at the top level of the kernel, "
                                   f"not inside a loop, branch or async task (allocations are static)", op.loc)
        t = op.results[0].type
        if op.name == "tlx.local_alloc" and t.storage == "tmem":
            op.attrs["column"] = tmem_placement[id(op)]
            if op.operands:
                continue                # reuse=: the group's columns
            what = f"{t.num} x {'x'.join(map(str, t.shape))} {t.element}"
            members = tmem_aliases.get(id(op), [])
            if members:
                what += f", shared with {', '.join(m.results[0].name_hint or '?' for m in members)} (reuse=)"
            tmem_entries.append((op.results[0].name_hint or "?", what, tmem_widths[id(op)], op.loc))
            continue
        if op.name == "tlx.local_alloc" and op.operands:
            op.attrs["offset"] = op.operands[0].owner.attrs["offset"]     # reuse=: the group's bytes
            continue
        if op.name == "tlx.local_alloc" and "interleave" in op.attrs:
            group, at = op.attrs["interleave"]
            if group in interleaved:                    # the group's later allocation: inside its region
                op.attrs["offset"] = interleaved[group] + at
                continue
            t = op.results[0].type
            size, align = t.num * op.attrs["buffer_pitch"], SWIZZLED_BUFFER_ALIGN
            what = f"{t.num} x {'x'.join(map(str, t.shape))} {t.element}, interleaved with the rings of the products fused with its own (fuse-dot-pairs)"
            offset = _align(offset, align)
            interleaved[group] = offset
            op.attrs["offset"] = offset + at
            entries.append((op.results[0].name_hint or "?", what, size, op.loc))
            offset += size
            continue
        if op.name == "tlx.local_alloc":
            size, align, what = _alias_group_footprint(op, aliases.get(id(op), []))
        else:
            size, align = t.num * BARRIER_BYTES, BARRIER_BYTES
            what = f"{t.num} mbarrier{'s' if t.num > 1 else ''}"
        offset = _align(offset, align)
        op.attrs["offset"] = offset
        entries.append((op.results[0].name_hint or "?", what, size, op.loc))
        offset += size
    kernel.attrs["shared_bytes"] = offset
    for op in kernel.walk():
        if op.name == "tlx.tcgen05_mma" and op.attrs.get("scale_formats"):
            # block-scaled: the tcgen05.cp copies of its scales, a region per MMA op (one task's
            # copies and MMAs run in issue order, so the next copy waits for the MMA that reads it)
            op.attrs["scale_column"] = columns
            width = scale_columns(op)
            tmem_entries.append(("scales", f"ue8m0 scales of the async_dot_scaled at line "
                                           f"{op.loc.line if op.loc else '?'}", width, op.loc))
            columns += width
    if tmem_entries:
        kernel.attrs["tmem_columns"] = tmem_allocation(columns)
    if columns > TMEM_COLUMNS:
        raise ResourceError(f"the kernel's tensor-memory buffers need {columns} columns, more than the "
                            f"{TMEM_COLUMNS} columns (128 lanes x 32 bits each) of tensor memory on {arch}:\n"
                            + "\n".join(_entry_lines(tmem_entries, "columns")), kernel.loc)
    limit = get_target(arch).shared_limit      # the largest dynamic shared memory per block (opt-in)
    if offset > limit:
        raise ResourceError(f"the kernel's shared buffers and barriers need {offset} bytes, more than the "
                            f"{limit} bytes of shared memory a block may use on {arch}:\n"
                            + "\n".join(_entry_lines(entries, "bytes")), kernel.loc)


def buffer_pitch(alloc) -> int:
    """Bytes from one buffer of allocation ``alloc`` (a ``tlx.local_alloc``) to the next: its
    buffer's size, or ``attrs.buffer_pitch`` when another allocation's buffers are interleaved
    with its own (``passes/dot_pairs.py``)."""
    return alloc.attrs.get("buffer_pitch") or alloc.results[0].type.buffer_bytes


def _aliases(kernel) -> dict[int, list]:
    """id(first allocation) -> the allocations that reuse its bytes (``reuse=``)."""
    groups: dict[int, list] = {}
    for op in kernel.walk():
        if op.name == "tlx.local_alloc" and op.operands:
            groups.setdefault(id(op.operands[0].owner), []).append(op)
    return groups


def _alias_group_footprint(first, others: list) -> tuple[int, int, str]:
    """Bytes, alignment and description of an allocation and its aliases: as
    in TLX, the group's region is as large as its largest member (the first
    allocation grows if an alias needs more), aligned for the strictest one."""
    size = align = 0
    names = []
    for op in [first, *others]:
        t = op.results[0].type
        size = max(size, t.num * t.buffer_bytes)
        swizzled = op.attrs.get("swizzle") or op.attrs.get("xor_swizzle")
        align = max(align, SWIZZLED_BUFFER_ALIGN if swizzled else BUFFER_ALIGN)
        names.append(op.results[0].name_hint or "?")
    size = max(size, first.attrs.get("min_bytes", 0))      # a sized tlx.storage_alias_spec
    t = first.results[0].type
    what = f"{t.num} x {'x'.join(map(str, t.shape))} {t.element}"
    if others:
        what += f", shared with {', '.join(names[1:])} (reuse=)"
    return size, align, what


def _entry_lines(entries, unit: str) -> list[str]:
    return [f"  {name}: {what} = {size} {unit} ({os.path.basename(loc.file)}:{loc.line})" if loc else
            f"  {name}: {what} = {size} {unit}" for name, what, size, loc in entries]


def tmem_allocation(columns: int) -> int:
    """Columns to ``tcgen05.alloc`` for ``columns`` used: a power of two, at least 32."""
    n = 32
    while n < columns:
        n *= 2
    return n
