"""shared-layouts: choose each shared buffer's swizzle from its consumers.

Every ``tlx.local_alloc`` gets ``attrs.swizzle`` (bytes: 0, 32, 64 or 128):

* a TMA copy (``tlx.async_descriptor_load`` / ``store``) into or out of a
  view of the buffer demands its descriptor's swizzle: the hardware writes
  (reads) the box in that pattern;
* a view fed to ``tlx.async_dot`` (wgmma) or ``tlx.tcgen05_mma`` as A or B
  demands the swizzle whose span equals the buffer's physical row (its
  innermost dimension) in bytes, when that row is 32, 64 or 128 bytes: those
  are the canonical layouts (the same for wgmma and tcgen05) tlxc builds
  descriptors for (``codegen_nvptx/rules_mma_async.py``, ``rules_tcgen05.py``).

Two consumers wanting different swizzles is a ``LayoutError`` naming both.

*Explicit layouts* (``local_alloc(..., layout=)``, ``local_reinterpret(..., layout=)``,
``ir/shared_layout.py``) are demands too, registered first: the layout's
swizzle, column-blocked when its rows are wider than 128 bytes (the frontend
checked that tlxc can store it so); a consumer that disagrees is the
``LayoutError`` naming the explicit layout's line.

*Column blocks.*  A 2-D buffer whose rows are wider than 128 bytes (a multiple
of 128, rows a multiple of 8) and that gets the 128-byte swizzle -- a TMA box
of 128-byte rows writes it piecewise, or a wgmma operand reads it -- is stored
*block-stacked*: ``attrs.column_block = 128 // element bytes`` columns per
block (64 for 16-bit types), block ``j`` holding columns ``64j .. 64j + 63`` of
all ``R`` rows as one contiguous, 128B-swizzled ``[R, 64]`` tile (``R * 128``
bytes).  Element ``(r, c)`` of a 16-bit ``[R, C]`` buffer sits at byte
``(c // 64) * R * 128 + swizzle(r * 128 + (c % 64) * 2)`` (the block
distance is a multiple of 1024, so swizzling the whole offset is the same).
A column slice at a multiple of 64 that is at most 64 wide is then a plain
128-byte-row tile (a TMA box target); wgmma reads several blocks through the
descriptor's leading byte offset (``codegen_nvptx/rules_mma_async.py``).  An explicit
layout tiled from an atom one 64- or 32-byte span wide (``explicit_block_span``) is stored
the same way with blocks of that span (``column_block = span // element bytes``), and an MMA
consumer then reads it as such (it asks for that span, not the row's).

*Padded rows* (an explicit ``PaddedSharedLayout``) change no swizzle: the codegen addresses
the buffer through its row pitch; TMA and MMA consumers and aliases of it are ``LayoutError``s.

*Boxes wider than the span.*  A TMA descriptor whose box is wider than its
128-byte swizzle (``TensorDescType.copy_box`` narrower than ``block_shape``:
the host encodes the span-wide sub-box) fills or reads a block-stacked buffer
as wide as the box, one copy per block (``codegen_nvptx/rules_tlx.py``); a buffer
that cannot be block-stacked is a ``LayoutError`` at the copy.

The swizzle is a function of the byte address, as the TMA unit and the
tensor cores apply it (CuTe's ``Swizzle<B, 4, 3>`` on bytes): within a
buffer aligned to ``SWIZZLE_PERIOD[s]`` bytes, byte offset ``o`` lives at
``swizzle_offset(o, s) = o ^ (((o >> 7) & mask) << 4)`` with mask 7, 3, 1 for
128, 64, 32 bytes.  It moves whole 16-byte chunks, so vector accesses of up
to 16 aligned bytes stay contiguous.  ``allocate-shared`` aligns swizzled
buffers to 1024 bytes (the 128-byte pattern's period; enough for all three).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import LayoutError
from ..ir.core import Module
from ..ir.shared_layout import PaddedSharedLayout, SwizzledSharedLayout, XorSwizzle, xor_swizzle_of
from ..ir.traits import VIEW, has_trait
from ..ir.types import MemDescType
from .manager import Pass

SWIZZLE_MASK = {0: 0, 32: 1, 64: 3, 128: 7}
# Bytes after which the pattern repeats: address bits 7.. (7 + log2(mask + 1)) select the XOR.
SWIZZLE_PERIOD = {0: 16, 32: 256, 64: 512, 128: 1024}
SWIZZLED_ALIGN = 1024
MMA_OPS = {"tlx.async_dot": "wgmma", "tlx.tcgen05_mma": "tcgen05"}     # op -> the unit reading A and B


def swizzle_offset(byte_offset: int, swizzle) -> int:
    """Where byte ``byte_offset`` of a buffer (aligned to its period) lives; ``swizzle`` is a
    span in bytes (NVMMA) or an ``XorSwizzle``."""
    if isinstance(swizzle, XorSwizzle):
        return swizzle.apply(byte_offset)
    mask = SWIZZLE_MASK[swizzle]
    return byte_offset ^ (((byte_offset >> 7) & mask) << 4)


def swizzle_expr(byte_offset: str, swizzle) -> str:
    """C text of ``swizzle_offset`` (``byte_offset`` an int expression)."""
    if not swizzle:
        return byte_offset
    if isinstance(swizzle, XorSwizzle):
        return (f"(({byte_offset}) ^ (((({byte_offset}) >> {swizzle.base + swizzle.shift}) & "
                f"{(1 << swizzle.bits) - 1}) << {swizzle.base}))")
    return f"(({byte_offset}) ^ (((({byte_offset}) >> 7) & {SWIZZLE_MASK[swizzle]}) << 4))"


def swizzle_period(swizzle) -> int:
    """Bytes after which the pattern repeats (a view aligned to it starts in phase)."""
    return swizzle.period if isinstance(swizzle, XorSwizzle) else SWIZZLE_PERIOD[swizzle]


def swizzle_chunk(swizzle) -> int:
    """Bytes the swizzle keeps contiguous (the widest shared access through it)."""
    return swizzle.chunk if isinstance(swizzle, XorSwizzle) else 16


def allocation_swizzle(alloc):
    """The swizzle an allocation is stored with: ``attrs.swizzle`` (an NVMMA span, 0: none), or the
    ``XorSwizzle`` of ``attrs.xor_swizzle`` ([bits, base, shift]; an explicit swizzled_shared
    layout that is no NVMMA one)."""
    xor = alloc.attrs.get("xor_swizzle")
    return XorSwizzle(*xor) if xor else alloc.attrs.get("swizzle", 0)


def physical_row_bytes(t: MemDescType) -> int:
    """Bytes of the innermost (contiguous) dimension of the allocation."""
    return t.shape[-1] * t.element.bytes


@dataclass(frozen=True)
class SharedLayouts(Pass):
    name = "shared-layouts"

    def run(self, module: Module, options) -> Module:
        from ..target import get_target
        target = get_target(options.arch) if options is not None and getattr(options, "arch", None) else None
        for kernel in module.kernels:
            choose_swizzles(kernel)
            if target is not None and not target.is_nvidia:
                choose_lds_swizzles(kernel, target)
        return module


# -- AMD: LDS swizzles chosen from the MFMA readers ----------------------------------------------
def choose_lds_swizzles(kernel, target) -> None:
    """On AMD, a buffer nothing else constrains (no explicit layout, no alias, only whole-tile
    ``local_load`` / ``local_store`` / register-staged ``async_load`` views) and that is read
    straight into MFMA operand fragments gets the XOR swizzle that makes its LDS accesses cheapest
    under the LDS bank model (``ir/layouts_amd.py: choose_lds_swizzle``): the readers' and writers'
    register layouts decide.  gfx950's direct-to-LDS copies write lane by lane in order (no
    swizzle), so there a buffer ``async_load`` fills keeps none."""
    from ..ir.layouts_amd import choose_lds_swizzle
    root: dict[int, object] = {}
    uses: dict[int, list] = {}
    for op in kernel.walk():
        if op.name == "tlx.local_alloc":
            root[id(op.results[0])] = op
            uses[id(op)] = []
        elif has_trait(op, VIEW) and op.operands and id(op.operands[0]) in root:
            root[id(op.results[0])] = root[id(op.operands[0])]
            uses[id(root[id(op.results[0])])].append(op)
        else:
            for value in op.operands:
                if id(value) in root:
                    uses[id(root[id(value)])].append(op)
    users: dict[int, list] = {}
    for op in kernel.walk():
        for value in op.operands:
            users.setdefault(id(value), []).append(op)
    aliased = {id(op.operands[0].owner) for op in kernel.walk() if op.name == "tlx.local_alloc" and op.operands}
    for op in kernel.walk():
        if op.name != "tlx.local_alloc" or op.operands or id(op) in aliased:
            continue
        t = op.results[0].type
        if (t.storage != "smem" or t.layout is not None or op.attrs.get("swizzle") or op.attrs.get("xor_swizzle")
                or op.attrs.get("column_block") or len(t.shape) < 2):
            continue
        tile = tuple(t.shape[-2:])
        readers, writers, mfma_read = [], [], False
        for use in uses[id(op)]:
            if has_trait(use, VIEW):
                if use.name != "tlx.local_view" or tuple(use.results[0].type.shape) != tile:
                    break
                continue
            if use.name == "tlx.local_load":
                readers.append(use.results[0].type.layout)
                dots = users.get(id(use.results[0]), [])
                mfma_read |= len(dots) == 1 and dots[0].attrs.get("algorithm") == "mfma"
            elif use.name == "tlx.local_store":
                writers.append(use.operands[1].type.layout)
            elif use.name == "tlx.async_load" and not target.has("lds_dma16"):
                writers.append(use.operands[0].type.layout)
            else:
                break
        else:
            tile_bytes = tile[0] * tile[1] * t.element.bytes
            if not mfma_read or any(layout is None for layout in (*readers, *writers)):
                continue
            swizzle = choose_lds_swizzle(readers, writers, tile[1] * t.element.bytes, t.element.bytes)
            if swizzle is not None and tile_bytes % swizzle.period == 0:
                op.attrs["xor_swizzle"] = [swizzle.bits, swizzle.base, swizzle.shift]


def choose_swizzles(kernel) -> None:
    root: dict[int, object] = {}          # memdesc value -> its local_alloc op
    demands: dict[int, tuple] = {}        # alloc id -> (alloc, swizzle, demanding op, why)
    split = []                            # (alloc, TMA op) of boxes copied as span-wide sub-boxes
    for op in kernel.walk():
        if op.name == "tlx.local_alloc":
            root[id(op.results[0])] = op
            op.attrs.setdefault("swizzle", 0)
            if op.results[0].type.layout is not None:
                _demand_layout(demands, op, op, op.results[0].type, "its explicit layout=")
        elif has_trait(op, VIEW) and id(op.operands[0]) in root:
            root[id(op.results[0])] = root[id(op.operands[0])]
            if op.name == "tlx.local_reinterpret" and op.results[0].type.layout is not None:
                _demand_layout(demands, root[id(op.results[0])], op, op.results[0].type,
                               "its local_reinterpret(..., layout=) view")
        elif op.name in ("tlx.async_descriptor_load", "tlx.async_descriptor_store"):
            desc, view = op.operands[0], op.operands[1]
            alloc = root.get(id(view))
            if alloc is not None:
                _demand(demands, alloc, desc.type.swizzle, op, f"its TMA descriptor {desc.type}")
                if desc.type.splits_columns:
                    split.append((alloc, op))
        elif op.name in MMA_OPS or (op.name == "tlx.local_load" and _ldmatrix_operand(root, op)):
            unit = MMA_OPS.get(op.name, "ldmatrix")
            for index, view in enumerate(op.operands[:2] if op.name in MMA_OPS else op.operands[:1]):
                alloc = root.get(id(view)) if isinstance(view.type, MemDescType) else None
                if alloc is None:
                    continue
                if op.name == "tlx.local_load":
                    index = "ab".index(alloc.attrs["dot_operand"])
                t = alloc.results[0].type
                row = physical_row_bytes(t)
                narrow = explicit_block_span(t)
                if narrow:          # an explicit layout's column blocks of a narrower swizzle
                    _demand(demands, alloc, narrow, op, f"{unit} operand {'AB'[index]} read as {narrow}-byte "
                                                        f"column blocks (its explicit layout)")
                elif row in (32, 64, 128):
                    _demand(demands, alloc, row, op, f"{unit} operand {'AB'[index]} with {row}-byte rows")
                elif _blockable(t):
                    _demand(demands, alloc, 128, op, f"{unit} operand {'AB'[index]} with {row}-byte rows "
                                                     f"(stored as 128-byte column blocks)")
    for alloc, swizzle, _, _ in _alias_groups(kernel, demands):
        if isinstance(swizzle, PaddedSharedLayout):       # padded rows: strides only (codegen_c/rules_buffers.py)
            _check_xor_alone(kernel, alloc, "a padded layout")
            alloc.attrs["swizzle"] = 0
            continue
        if isinstance(swizzle, XorSwizzle):
            _check_xor_alone(kernel, alloc)
            alloc.attrs["swizzle"], alloc.attrs["xor_swizzle"] = 0, [swizzle.bits, swizzle.base, swizzle.shift]
            continue
        alloc.attrs["swizzle"] = swizzle
        t = alloc.results[0].type
        if swizzle == 128 and physical_row_bytes(t) > 128 and _blockable(t):
            alloc.attrs["column_block"] = 128 // t.element.bytes
        elif swizzle and swizzle == explicit_block_span(t):
            alloc.attrs["column_block"] = swizzle // t.element.bytes
    _check_alias_blocks(kernel)
    _check_xor_views(kernel, root)
    for alloc, op in split:
        if "column_block" not in alloc.attrs:
            _unsplittable(alloc, op)


def _ldmatrix_operand(root: dict, op) -> bool:
    """Whether ``op`` (a ``tlx.local_load``) reads a tl.dot operand buffer of mma.sync
    (``lower-dot-to-wgmma``'s ``dot_operand`` allocation, 16-bit elements) for ldmatrix: the
    buffer then takes the wgmma operands' swizzle (span = its row), under which the eight
    16-byte rows of each ldmatrix matrix sit in eight different bank groups."""
    alloc = root.get(id(op.operands[0]))
    if alloc is None or "dot_operand" not in alloc.attrs:
        return False
    t = alloc.results[0].type
    return t.storage == "smem" and len(t.shape) == 2 and t.element.bits == 16


def _alias_groups(kernel, demands: dict) -> list[tuple]:
    """The demands spread over alias groups (``reuse=`` / ``storage_alias_spec`` peers share their
    bytes): every member of a group is stored with the group's swizzle, so that views of the same
    bytes through different members agree.  The swizzle is a function of the address, so members
    of any shape then see each byte where the row-major model (the interpreter's) puts it.
    Two members wanting different swizzles is an error naming both."""
    members: dict[int, list] = {}
    for op in kernel.walk():
        if op.name == "tlx.local_alloc" and op.results[0].type.storage == "smem":
            first = op.operands[0].owner if op.operands else op
            members.setdefault(id(first), []).append(op)
    merged: dict[int, tuple] = {}
    for group in members.values():
        for alloc in group:
            if id(alloc) in demands:
                _, swizzle, op, why = demands[id(alloc)]
                name = alloc.results[0].name_hint or "a shared buffer"
                _demand(merged, group[0], swizzle, op, why if alloc is group[0] else f"{why}, through its alias '{name}'")
    out = []
    for group in members.values():
        if id(group[0]) in merged:
            _, swizzle, op, why = merged[id(group[0])]
            out += [(alloc, swizzle, op, why) for alloc in group]
    return out


def _check_alias_blocks(kernel) -> None:
    """Column blocks (rows wider than the 128-byte swizzle) place a buffer's elements by its own
    shape, so aliases of one region must then all be that very shape."""
    groups: dict[int, list] = {}
    for op in kernel.walk():
        if op.name == "tlx.local_alloc" and op.results[0].type.storage == "smem":
            groups.setdefault(id(op.operands[0].owner if op.operands else op), []).append(op)
    for group in groups.values():
        blocked = [a for a in group if a.attrs.get("column_block")]
        shapes = {(tuple(a.results[0].type.shape), a.results[0].type.element) for a in group}
        if blocked and len(shapes) > 1:
            a = blocked[0]
            other = next(b for b in group if (tuple(b.results[0].type.shape), b.results[0].type.element) !=
                         (tuple(a.results[0].type.shape), a.results[0].type.element))
            raise LayoutError(f"shared buffer '{a.results[0].name_hint or 'a buffer'}' is stored as 128-byte column "
                              f"blocks (its rows are wider than the swizzle), which places its elements by its own "
                              f"shape; its alias '{other.results[0].name_hint or 'a buffer'}' "
                              f"({list(other.results[0].type.shape)} {other.results[0].type.element}) would see "
                              f"other bytes: alias buffers of the same shape, or keep rows within 128 bytes",
                              a.loc)


def _demand_layout(demands, alloc, op, view_type: MemDescType, why: str) -> None:
    """An explicit layout (of the allocation, or of a reinterpreting view of it) fixes the
    buffer's storage: its swizzle, and column blocks when its rows are wider than the span.
    The frontend checked that tlxc can store the layout so (``shared_layout.storable_as``);
    a consumer wanting another swizzle then conflicts with it (``_demand``).  A swizzled_shared
    layout that is no NVMMA one demands its ``XorSwizzle`` (``shared_layout.resolve_swizzled``),
    which no TMA or MMA consumer wants: only register loads and stores (and cp.async) use it."""
    layout = view_type.layout
    t = alloc.results[0].type
    if view_type.shape != t.shape or view_type.element != t.element:
        raise LayoutError(f"a layout-carrying view must cover its whole buffer ({list(t.shape)} {t.element}), "
                          f"got {list(view_type.shape)} {view_type.element}", op.loc)
    if isinstance(layout, SwizzledSharedLayout):
        _demand(demands, alloc, xor_swizzle_of(layout, tuple(t.shape), t.element), op, f"{why} {layout}")
        return
    if isinstance(layout, PaddedSharedLayout):
        if op is not alloc:
            raise LayoutError(f"local_reinterpret(..., layout={layout}): a padded layout is an allocation's own "
                              f"(local_alloc(..., layout=)), not a view of another buffer", op.loc)
        _demand(demands, alloc, layout, op, f"{why} {layout}")
        return
    if layout.swizzle and physical_row_bytes(t) > layout.swizzle and not _blockable(t, layout.swizzle):
        raise LayoutError(f"layout {layout} stores '{alloc.results[0].name_hint or 'the buffer'}' as column "
                          f"blocks, which needs a 2-D buffer with rows a multiple of 8", op.loc)
    _demand(demands, alloc, layout.swizzle, op, f"{why} {layout}")


def _blockable(t: MemDescType, span: int = 128) -> bool:
    """Can this buffer be stored as ``span``-byte-wide, ``span``-swizzled column blocks?  Each
    block must start in phase with the swizzle pattern (a multiple of 8 rows x span bytes)."""
    return (len(t.shape) == 2 and t.element.bits >= 8 and physical_row_bytes(t) % span == 0
            and t.shape[0] % 8 == 0)


def explicit_block_span(t: MemDescType) -> int:
    """The swizzle span of the column blocks an explicit layout narrower than 128 bytes stores
    ``t`` as (a ``[32, 64]`` f16 buffer made of 64-byte swizzled ``[32, 32]`` atoms:
    ``atom.tile_to_shape`` / ``make_shared_linear``); 0 when it has none.  Wider rows under a
    128-byte swizzle are column-blocked whatever asked for the swizzle (``choose_swizzles``)."""
    layout = t.layout
    span = getattr(layout, "swizzle", 0) if layout is not None else 0
    if isinstance(span, int) and span in (32, 64) and physical_row_bytes(t) > span and _blockable(t, span):
        return span
    return 0


def _unsplittable(alloc, op) -> None:
    desc_type = op.operands[0].type
    t = alloc.results[0].type
    name = alloc.results[0].name_hint or "a shared buffer"
    raise LayoutError(f"the TMA box of {desc_type} is wider than its {desc_type.swizzle}-byte swizzle and is "
                      f"copied as {desc_type.copy_box[-1]}-column sub-boxes into 128-byte column blocks, but "
                      f"shared buffer '{name}' ({'x'.join(map(str, t.shape))} {t.element}) cannot be stored so "
                      f"(it must be 2-D with rows a multiple of 8 and 128-byte multiples wide); use a 2-D "
                      f"buffer, or a descriptor with swizzle=0", op.loc)


def _check_xor_alone(kernel, alloc, what: str = "an explicit swizzled layout that is no NVMMA one") -> None:
    """An ``XorSwizzle`` (or padded rows) is stored for one buffer's own shape and element size:
    no aliases."""
    first = alloc.operands[0].owner if alloc.operands else alloc
    for op in kernel.walk():
        if op.name == "tlx.local_alloc" and op is not alloc and (op is first or (op.operands and op.operands[0].owner is first)):
            name = alloc.results[0].name_hint or "a shared buffer"
            raise LayoutError(f"shared buffer '{name}' has {what}; it cannot share its bytes with another "
                              f"allocation (reuse=): use an NVMMA layout or no reuse", alloc.loc)


def _check_xor_views(kernel, root: dict) -> None:
    """A view of an ``XorSwizzle``d buffer with elements wider than the runs the swizzle keeps
    together (``local_reinterpret`` to a wider dtype) would have its elements split apart."""
    for op in kernel.walk():
        if not has_trait(op, VIEW) or id(op.results[0]) not in root:
            continue
        xor = root[id(op.results[0])].attrs.get("xor_swizzle")
        element = op.results[0].type.element
        if xor and element.bytes > XorSwizzle(*xor).chunk:
            raise LayoutError(f"this {element} view reads a buffer stored with {XorSwizzle(*xor)}, which keeps only "
                              f"{XorSwizzle(*xor).chunk}-byte runs together: its {element.bytes}-byte elements "
                              f"would be split; view it with elements of at most {XorSwizzle(*xor).chunk} bytes",
                              op.loc)


def _swizzle_text(swizzle) -> str:
    return str(swizzle) if isinstance(swizzle, (XorSwizzle, PaddedSharedLayout)) else f"{swizzle} bytes"


def _demand(demands, alloc, swizzle, op, why: str) -> None:
    previous = demands.get(id(alloc))
    if previous is None:
        demands[id(alloc)] = (alloc, swizzle, op, why)
        return
    _, other_swizzle, other_op, other_why = previous
    padded = next((v for v in (swizzle, other_swizzle) if isinstance(v, PaddedSharedLayout)), None)
    if padded is not None and other_swizzle != swizzle:
        name = alloc.results[0].name_hint or "a shared buffer"
        user, user_why = (other_op, other_why) if isinstance(swizzle, PaddedSharedLayout) else (op, why)
        raise LayoutError(f"shared buffer '{name}' has the padded layout {padded}, but {user.name} ({user_why}) "
                          f"reads or writes dense boxes (TMA and the MMA units do not skip padding); give it an "
                          f"NVMMA layout, or use register loads and stores / cp.async with it", user.loc)
    if other_swizzle != swizzle:
        name = alloc.results[0].name_hint or "a shared buffer"
        where = f" ({other_op.loc.file.rsplit('/', 1)[-1]}:{other_op.loc.line})" if other_op.loc else ""
        raise LayoutError(f"shared buffer '{name}' is wanted with two swizzles: {_swizzle_text(swizzle)} by "
                          f"{op.name} ({why}) and {_swizzle_text(other_swizzle)} by {other_op.name}{where} "
                          f"({other_why}); "
                          f"make them agree (TensorDescriptor(..., swizzle=...) sets a descriptor's)", op.loc)


__all__ = ["SharedLayouts", "allocation_swizzle", "swizzle_chunk", "swizzle_expr", "swizzle_offset", "swizzle_period"]
