"""``tlx.storage_alias_spec`` / ``tlx.reuse_group`` / ``set_buffer_overlap``: several shared- or
tensor-memory allocations placed in one region by a declared overlap scheme (shared/reference/tlx_api.md
§1.3).

TLX's model, which tlxc follows:
- ``spec = tlx.storage_alias_spec()`` names a region; every ``local_alloc(..., reuse=spec)`` is a
  peer in it (they all start at the region's first byte until an overlap is declared).
- ``spec.set_buffer_overlap(tlx.reuse_group(...))`` declares a tree: a ``shared`` group puts its
  children at the same offset (its size is the largest child's, times ``group_size``), a
  ``distinct`` group puts them one after another (its size is the sum).  The root's size is the
  stride between consecutive buffer indices ("bytes between buffer groups").
- A peer whose buffers are smaller than that stride, or that sits at an offset in it, keeps its
  own buffer size and is indexed through ``X[i] -> X[scale*i + offset (+ i % group_size)]`` with
  ``scale = stride / buffer bytes`` and ``offset = its byte offset / buffer bytes``; its array is
  extended so that the last such index exists.  Both must divide evenly (else a located error,
  as TLX's lowering gives).

Tensor memory is measured in the same bytes, as TLX does: a buffer of 128 rows is 512 bytes per
32-bit column (so a [128, N] fp16 buffer, packed two to a column, is half of a [128, N] fp32 one),
and distinct peers start at whole columns.  A 64-row buffer (M = 64) takes whole columns too (its
rows are half of each column's lanes), so it is measured as 512 bytes per column as well; aliases
have one row count (``check_tmem_rows``).

In tlxc the first peer is a plain ``tlx.local_alloc`` and the others alias it (``reuse=``,
``ir/ops/shared.py``), so ``allocate-shared`` sizes the region as its largest peer; the index
rewrite happens here, where ``buf[i]`` / ``tlx.local_view`` is built, which is why the overlap must
be declared before any peer is indexed.
"""
from __future__ import annotations

from ..ir.ops.tcgen05 import tmem_columns
from ..ir.types import MemDescType
from ..language import tlx
from . import semantic as S
from .block_ptr import Aggregate
from .builtins import RULES, const_int
from .values import SemanticError, Tensor

BUFFER_ALIGN = 128      # offsets of distinct peers inside the region (allocate-shared's buffer alignment)
TMEM_COLUMN_BYTES = 128 * 4     # one tensor-memory column: 128 lanes x 32 bits


def rule(name: str):
    def register(fn):
        RULES["tlx." + name] = fn
        return fn
    return register


class StorageAliasSpec(Aggregate):
    """A compile-time region description (no runtime fields)."""

    kind = "storage_alias_spec"

    def __init__(self, size: int | None, storage: str = "smem"):
        self.size = size
        self.storage = storage          # "smem" or "tmem"
        self.peers: list[Tensor] = []
        self.overlap_set = False

    def fields(self) -> tuple[str, ...]:
        return ()

    def leaves(self) -> tuple:
        return ()

    def replace(self, leaves) -> StorageAliasSpec:
        return self

    def static_key(self) -> tuple:
        return ("storage_alias_spec", id(self))

    def methods(self) -> dict:
        return {"set_buffer_overlap": tlx.set_buffer_overlap}

    def tlxc_describe(self) -> str:
        return f"a storage_alias_spec with {len(self.peers)} allocation{'s' if len(self.peers) != 1 else ''}"


class ReuseGroup:
    """A node of an overlap tree: allocations (buffer arrays) and sub-groups."""

    def __init__(self, elements: tuple, shared: bool, group_size: int):
        self.elements, self.shared, self.group_size = elements, shared, group_size

    def tlxc_describe(self) -> str:
        return f"a reuse_group ({'shared' if self.shared else 'distinct'}, {len(self.elements)} elements)"


class Peer:
    """What the frontend knows of an allocation in a spec: its array length as written and,
    once the overlap is declared, how its indices map onto the region's slots."""

    def __init__(self, spec: StorageAliasSpec, num: int):
        self.spec, self.num = spec, num
        self.scale, self.offset, self.group = 1, 0, 1
        self.indexed_at = None          # where it was first indexed (must follow set_buffer_overlap)

    @property
    def remapped(self) -> bool:
        return self.scale > 1 or self.offset > 0


# -- builtins --------------------------------------------------------------------------------
@rule("storage_alias_spec")
def _storage_alias_spec(ctx, storage=tlx.storage_kind.smem, buffer_size_bytes=None):
    if storage is tlx.storage_kind.smemCluster:
        raise SemanticError("smemCluster storage is not supported for storage_alias_spec", param="storage")
    if storage not in (tlx.storage_kind.smem, tlx.storage_kind.tmem):
        raise SemanticError(f"'storage' must be a tlx.storage_kind, got {S.describe(storage)}", param="storage")
    kind = "tmem" if storage is tlx.storage_kind.tmem else "smem"
    size = None
    if buffer_size_bytes is not None:
        size = const_int(buffer_size_bytes, "buffer_size_bytes")
        if size < 1:
            raise SemanticError(f"'buffer_size_bytes' must be positive, got {size}", param="buffer_size_bytes")
        if kind == "tmem" and size % TMEM_COLUMN_BYTES:
            raise SemanticError(f"a tensor-memory region is whole columns of {TMEM_COLUMN_BYTES} bytes (128 lanes "
                                f"x 32 bits); buffer_size_bytes={size} is not a multiple", param="buffer_size_bytes")
    return StorageAliasSpec(size, kind)


@rule("reuse_group")
def _reuse_group(ctx, *elements, group_type=tlx.reuse_group_type.shared, group_size=1):
    if not elements:
        raise SemanticError("a reuse_group needs at least one element")
    for e in elements:
        if isinstance(e, ReuseGroup):
            continue
        if not isinstance(e, Tensor) or not isinstance(e.type, MemDescType) or id(e.value) not in ctx.alias_peers:
            raise SemanticError(f"reuse_group elements must be allocations made with reuse=<a storage_alias_spec> "
                                f"(or reuse_groups of them), got {S.describe(e)}")
    if not isinstance(group_type, tlx.reuse_group_type):
        raise SemanticError(f"'group_type' must be tlx.reuse_group_type.shared or .distinct, got "
                            f"{S.describe(group_type)}", param="group_type")
    group_size = const_int(group_size, "group_size")
    if group_size < 1:
        raise SemanticError(f"'group_size' must be at least 1, got {group_size}", param="group_size")
    shared = group_type is tlx.reuse_group_type.shared
    if group_size > 1 and not shared:
        raise SemanticError("'group_size' subdivides a shared group's slots; a distinct group takes group_size=1",
                            param="group_size")
    return ReuseGroup(tuple(elements), shared, group_size)


@rule("set_buffer_overlap")
def _set_buffer_overlap(ctx, spec, overlap):
    if not isinstance(spec, StorageAliasSpec):
        raise SemanticError(f"'spec' must be a tlx.storage_alias_spec, got {S.describe(spec)}", param="spec")
    if not isinstance(overlap, ReuseGroup):
        raise SemanticError(f"'overlap' must be a tlx.reuse_group(...), got {S.describe(overlap)}", param="overlap")
    if spec.overlap_set:
        raise SemanticError("storage_alias_spec already has a set_buffer_overlap defined; each spec can only "
                            "have one overlap definition")
    leaves = list(_leaves(overlap))
    seen = set()
    for leaf in leaves:
        if id(leaf.value) in seen:
            raise SemanticError(f"reuse_group tree contains duplicate elements ('{_name(leaf)}' twice)")
        seen.add(id(leaf.value))
        peer = ctx.alias_peers[id(leaf.value)]
        if peer.spec is not spec:
            raise SemanticError(f"all allocations in the reuse_group must reference the same storage_alias_spec: "
                                f"'{_name(leaf)}' was allocated with reuse= another spec")
    for t in spec.peers:
        peer = ctx.alias_peers[id(t.value)]
        if peer.indexed_at is not None:
            raise SemanticError(f"'{_name(t)}' was already indexed (line {peer.indexed_at}) before the overlap was "
                                f"set; call set_buffer_overlap(...) right after the allocations that use the spec, "
                                f"before any of them is indexed")
    align = _unit(spec)
    stride = _align(_size(ctx, overlap, align), align)
    placements: dict[int, tuple[int, int, int]] = {}
    _place(ctx, overlap, 0, stride, 1, placements, align)
    for leaf in leaves:
        offset, between, group = placements[id(leaf.value)]
        buffer = region_bytes(leaf.type)
        if between % buffer:
            raise SemanticError(f"units_between_buffer_groups ({between}) must be a multiple of the original buffer "
                                f"size ({buffer}) of '{_name(leaf)}'")
        if offset % buffer:
            raise SemanticError(f"buffer_offset ({offset}) must be a multiple of the original buffer size ({buffer}) "
                                f"of '{_name(leaf)}'")
        peer = ctx.alias_peers[id(leaf.value)]
        peer.scale, peer.offset, peer.group = between // buffer, offset // buffer, group
        if peer.remapped:
            last = peer.num - 1
            _retype(leaf, peer.scale * last + peer.offset + last % peer.group + 1)
    if spec.size is not None:
        need = max(t.type.num * region_bytes(t.type) for t in spec.peers)
        if need > spec.size:
            raise SemanticError(f"the overlap scheme needs {need} bytes but the storage_alias_spec was declared with "
                                f"buffer_size_bytes={spec.size}")
    spec.overlap_set = True


# -- local_alloc(reuse=spec) and buf[i] ---------------------------------------------------------
def region_bytes(t: MemDescType) -> int:
    """Bytes of the region one buffer of ``t`` takes: its bytes in shared memory; whole
    columns of 128 lanes in tensor memory (a 64-row buffer uses half the lanes of its
    columns, ``ir/ops/tcgen05.py``)."""
    return tmem_columns(t) * TMEM_COLUMN_BYTES if t.storage == "tmem" else t.buffer_bytes


def check_tmem_rows(first: MemDescType, t: MemDescType) -> None:
    """Aliases in tensor memory have one row count: a 64-row buffer's rows are lanes 0-15 of
    each warp's 32 (the M = 64 data path), a 128-row buffer's are all lanes, so a mixed group
    would see the other's rows in a different order."""
    if t.storage == "tmem" and first.storage == "tmem" and first.shape[0] != t.shape[0]:
        raise SemanticError(f"this tensor-memory buffer of {t.shape[0]} rows aliases one of {first.shape[0]} "
                            f"rows: aliases in tensor memory must have the same number of rows (64-row buffers "
                            f"use lanes 0-15 of each warp's 32, 128-row buffers all lanes)", param="reuse")


def alloc_peer(ctx, spec: StorageAliasSpec, t: MemDescType) -> Tensor:
    """``local_alloc(..., reuse=spec)``: the spec's first allocation owns the region, later ones
    alias it (``ir/ops/shared.py``)."""
    if spec.overlap_set:
        raise SemanticError("allocate every buffer of a storage_alias_spec before its set_buffer_overlap(...)",
                            param="reuse")
    if t.storage != spec.storage:
        names = {"smem": "shared memory (tlx.storage_kind.smem)", "tmem": "tensor memory (tlx.storage_kind.tmem)"}
        raise SemanticError(f"the storage_alias_spec is for {names[spec.storage]} but this allocation is in "
                            f"{names[t.storage]}: they must match", param="reuse")
    operands = [spec.peers[0].value] if spec.peers else []
    if operands:
        check_tmem_rows(operands[0].type, t)
    value = ctx.b.value("tlx.local_alloc", operands, t)
    if spec.size is not None:
        if t.num * region_bytes(t) > spec.size:
            raise SemanticError(f"{t.num} x {region_bytes(t)} bytes do not fit the storage_alias_spec's "
                                f"buffer_size_bytes={spec.size}", param="reuse")
        first = (spec.peers[0].value if spec.peers else value).owner
        if spec.storage == "tmem":
            first.attrs["min_columns"] = spec.size // TMEM_COLUMN_BYTES
        else:
            first.attrs["min_bytes"] = spec.size
    result = Tensor(value)
    spec.peers.append(result)
    ctx.alias_peers[id(value)] = Peer(spec, t.num)
    return result


def peer_index(ctx, buf: Tensor, idx):
    """The region slot ``buf[idx]`` names: ``idx`` itself, or ``scale*idx + offset (+ idx %
    group_size)`` for a peer the overlap scheme spreads out.  Returns (index, logical count)."""
    peer = ctx.alias_peers.get(id(buf.value))
    if peer is None:
        return idx, buf.type.num
    if peer.indexed_at is None:
        peer.indexed_at = ctx.b.loc.line if ctx.b.loc else "?"
    if not peer.remapped:
        return idx, peer.num
    if isinstance(idx, int) and not isinstance(idx, bool):
        if not 0 <= idx < peer.num:
            return idx, peer.num           # local_view reports the range error
        return peer.scale * idx + peer.offset + idx % peer.group, peer.num
    b = ctx.b
    slot = S.binary(b, "mul", idx, peer.scale) if peer.scale > 1 else idx
    if peer.offset:
        slot = S.binary(b, "add", slot, peer.offset)
    if peer.group > 1:
        slot = S.binary(b, "add", slot, S.binary(b, "mod", idx, peer.group))
    return slot, peer.num


# -- the overlap tree ----------------------------------------------------------------------------
def _leaves(node):
    if isinstance(node, ReuseGroup):
        for e in node.elements:
            yield from _leaves(e)
    else:
        yield node


def _unit(spec: StorageAliasSpec) -> int:
    """Where distinct peers may start: a 128-byte boundary of shared memory, a whole
    column of tensor memory."""
    return TMEM_COLUMN_BYTES if spec.storage == "tmem" else BUFFER_ALIGN


def _size(ctx, node, align: int = BUFFER_ALIGN) -> int:
    """Bytes one buffer index of ``node`` takes: an allocation's buffer; a shared group's
    largest child times group_size; a distinct group's children one after another."""
    if not isinstance(node, ReuseGroup):
        return region_bytes(node.type)
    if node.shared:
        return max(_size(ctx, e, align) for e in node.elements) * node.group_size
    total = 0
    for e in node.elements:
        total = _align(total, align) + _size(ctx, e, align)
    return total


def _place(ctx, node, offset: int, between: int, group: int, out: dict, align: int = BUFFER_ALIGN) -> None:
    if not isinstance(node, ReuseGroup):
        out[id(node.value)] = (offset, between, group)
        return
    if node.shared:
        for e in node.elements:
            _place(ctx, e, offset, between // node.group_size, group * node.group_size, out, align)
        return
    running = offset
    for e in node.elements:
        running = _align(running, align)
        _place(ctx, e, running, between, group, out, align)
        running += _size(ctx, e, align)
    if running - offset > between:
        raise SemanticError(f"not enough space for distinct allocations: need {running - offset} bytes, have "
                            f"{between} bytes")


def _retype(t: Tensor, num: int) -> None:
    """Extend the allocation's array to ``num`` slots (the op is already emitted; the region
    grows with it when allocate-shared sizes the group)."""
    old = t.type
    t.value.type = MemDescType(old.shape, old.element, num, old.storage, old.perm, old.layout)


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


def _name(t: Tensor) -> str:
    return t.value.name_hint or "buffer"


__all__ = ["Peer", "ReuseGroup", "StorageAliasSpec", "alloc_peer", "peer_index"]
