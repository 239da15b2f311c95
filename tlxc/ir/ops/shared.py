"""Shared-memory ops of the orchestration layer (TLX's ``local_*`` and cp.async).

Buffers are ``memdesc`` values: ``tlx.local_alloc`` makes an array of
``num`` buffers; ``tlx.local_view`` picks one (runtime index); slices,
transposes and reinterpretations are views of it; ``tlx.local_load`` /
``tlx.local_store`` move register tensors in and out; ``tlx.async_load``
copies global memory into a buffer asynchronously (cp.async), completed by
``tlx.async_commit_group`` / ``tlx.async_wait_group``.
"""
from __future__ import annotations

from ..core import Operation
from ..traits import ALLOCATION, BULK_STORE, VIEW
from ..types import BarrierType, MemDescType, ScalarType, TensorType, i1, with_element
from ._rules import expect_operands, expect_pointer, expect_results, expect_type


def operand_type(op, index: int, what: str):
    if len(op.operands) <= index:
        raise op.error(f"expected {what} as operand #{index}, got {len(op.operands)} operands")
    return op.operands[index].type


def expect_memdesc(op, t, what: str, view: bool | None = None) -> MemDescType:
    if not isinstance(t, MemDescType):
        raise op.error(f"expected {what} to be a shared-memory buffer, got {t}")
    if view is True and t.num:
        raise op.error(f"expected {what} to be one buffer (index the array first), got an array of {t.num}")
    return t


class LocalAllocOp(Operation):
    """Allocate ``num`` buffers of ``shape`` x ``dtype`` in shared memory.
    ``attrs.offset`` (bytes into the block) is set by ``allocate-shared``.

    With one operand (TLX's ``reuse=``) the buffers alias that allocation: the
    operand is another ``tlx.local_alloc`` without an operand (the group's
    first), and every allocation of the group starts at the same offset of a
    region as large as the largest of them (bytes of shared memory, columns of
    tensor memory)."""

    name = "tlx.local_alloc"
    traits = frozenset({ALLOCATION})

    @property
    def reused(self):
        """The allocation op whose bytes these buffers share, or None."""
        return self.operands[0].owner if self.operands else None

    def verify(self):
        if len(self.operands) > 1:
            raise self.error(f"expected at most one operand (the reused allocation), got {len(self.operands)}")
        expect_results(self, 1)
        t = expect_memdesc(self, self.result.type, "result")
        if t.num < 1:
            raise self.error(f"expected at least one buffer, got num={t.num}")
        if self.operands:
            self._verify_reuse(t)

    def _verify_reuse(self, t: MemDescType) -> None:
        base = self.operands[0]
        owner = getattr(base, "owner", None)
        if getattr(owner, "name", None) != "tlx.local_alloc" or owner.operands:
            raise self.error("expected the reused buffers to be a tlx.local_alloc that reuses nothing itself "
                             "(an alias names the group's first allocation)")
        if base.type.storage != t.storage or t.storage not in ("smem", "tmem"):
            raise self.error(f"expected allocations of one storage (shared or tensor memory) to alias, got "
                             f"{base.type.storage} and {t.storage}")


class LocalViewOp(Operation):
    """Buffer (or barrier) ``idx`` of an array; ``idx`` is a runtime i32."""

    name = "tlx.local_view"
    traits = frozenset({VIEW})

    def verify(self):
        expect_operands(self, 2)
        src, idx = self.operands
        if not isinstance(idx.type, ScalarType) or not idx.type.is_integer:
            raise self.error(f"expected an integer index, got {idx.type}")
        if isinstance(src.type, BarrierType):
            if not src.type.num:
                raise self.error("expected an array of barriers to index")
            expect_type(self, self.result.type, src.type.view(), "result")
            return
        t = expect_memdesc(self, src.type, "source")
        if not t.num:
            raise self.error("expected an array of buffers to index, got a single buffer")
        expect_type(self, self.result.type, t.view(), "result")


class LocalSliceOp(Operation):
    """A same-rank sub-buffer at runtime ``offsets`` (operands 1..rank) of ``attrs.shape``."""

    name = "tlx.local_slice"
    traits = frozenset({VIEW})

    def verify(self):
        src = expect_memdesc(self, operand_type(self, 0, "source"), "source", view=True)
        result = expect_memdesc(self, self.result.type, "result", view=True)
        if len(self.operands) != 1 + len(src.shape) or len(result.shape) != len(src.shape):
            raise self.error(f"expected {len(src.shape)} offsets and a result of rank {len(src.shape)}")


class LocalTransOp(Operation):
    """A permuted view (no data movement)."""

    name = "tlx.local_trans"
    traits = frozenset({VIEW})

    def verify(self):
        expect_operands(self, 1)
        src = expect_memdesc(self, operand_type(self, 0, "source"), "source", view=True)
        perm = tuple(self.attrs.get("perm", ()))
        if sorted(perm) != list(range(len(src.shape))):
            raise self.error(f"expected a permutation of {list(range(len(src.shape)))}, got {list(perm)}")


class LocalReinterpretOp(Operation):
    """The same bytes seen with another element type and shape.  The source is one buffer, or
    a whole shared ``tlx.local_alloc`` (its buffers' bytes back to back, TLX allows it)."""

    name = "tlx.local_reinterpret"
    traits = frozenset({VIEW})

    def verify(self):
        expect_operands(self, 1)
        src = expect_memdesc(self, operand_type(self, 0, "source"), "source")
        if src.num and getattr(self.operands[0].owner, "name", None) != "tlx.local_alloc":
            raise self.error(f"expected one buffer or a whole tlx.local_alloc as the source, got an array of {src.num}")
        result = expect_memdesc(self, self.result.type, "result", view=True)
        have = src.buffer_bytes * max(src.num, 1)
        if result.buffer_bytes > have:
            raise self.error(f"expected at most {have} bytes, got {result.buffer_bytes}")


class LocalGatherOp(Operation):
    """``tlx.local_gather(buf, indices, axis)``: result[i...] = buf[i... with dim ``axis`` replaced
    by indices[i...]] (torch.gather's rule over a shared buffer); the result has the indices'
    shape and the buffer's element type."""

    name = "tlx.local_gather"

    def verify(self):
        expect_operands(self, 2)
        src = expect_memdesc(self, operand_type(self, 0, "source"), "source", view=True)
        _verify_indexed(self, src, self.operands[1].type, self.result.type)
        if not isinstance(self.result.type, TensorType) or self.result.type.element != src.element:
            raise self.error(f"expected a tensor of {src.element}, got {self.result.type}")


class LocalScatterOp(Operation):
    """``tlx.local_scatter(buf, src, indices, axis)``: buf[i... with dim ``axis`` replaced by
    indices[i...]] = src[i...]."""

    name = "tlx.local_scatter"

    def verify(self):
        expect_operands(self, 3)
        dst = expect_memdesc(self, operand_type(self, 0, "destination"), "destination", view=True)
        value = self.operands[1].type
        _verify_indexed(self, dst, self.operands[2].type, value)
        if not isinstance(value, TensorType) or value.element != dst.element:
            raise self.error(f"expected a source tensor of {dst.element}, got {value}")


def _verify_indexed(op, buf: MemDescType, indices, values) -> None:
    axis = op.attrs.get("axis")
    rank = len(buf.shape)
    if not isinstance(axis, int) or not 0 <= axis < rank:
        raise op.error(f"expected an 'axis' in [0, {rank}), got {axis!r}")
    if not isinstance(indices, TensorType) or not isinstance(indices.element, ScalarType) or not indices.element.is_integer:
        raise op.error(f"expected an integer index tensor, got {indices}")
    if len(indices.shape) != rank or any(n != m for d, (n, m) in enumerate(zip(indices.shape, buf.shape))
                                          if d != axis):
        raise op.error(f"expected indices of rank {rank} matching the buffer {list(buf.shape)} outside axis "
                       f"{axis}, got {list(indices.shape)}")
    if not isinstance(values, TensorType) or values.shape != indices.shape:
        raise op.error(f"expected values of the indices' shape {list(indices.shape)}, got {values}")


class LocalLoadOp(Operation):
    """Shared buffer → register tensor of the same shape and element type."""

    name = "tlx.local_load"

    def verify(self):
        expect_operands(self, 1)
        src = expect_memdesc(self, operand_type(self, 0, "source"), "source", view=True)
        result = self.result.type
        if not isinstance(result, TensorType) or result.shape != src.shape or result.element != src.element:
            raise self.error(f"expected tensor<{'x'.join(map(str, src.shape))}x{src.element}>, got {result}")


class LocalStoreOp(Operation):
    """Register tensor → shared buffer of the same shape and element type."""

    name = "tlx.local_store"

    def verify(self):
        expect_operands(self, 2)
        dst = expect_memdesc(self, operand_type(self, 0, "destination"), "destination", view=True)
        value = operand_type(self, 1, "value")
        if not isinstance(value, TensorType) or value.shape != dst.shape or value.element != dst.element:
            raise self.error(f"expected a value of shape {list(dst.shape)} and type {dst.element}, got {value}")


class AsyncLoadOp(Operation):
    """cp.async of the elements at ``ptrs`` into buffer ``dst``; masked-off
    elements are zero-filled.  Operands: ptrs, dst, [mask]."""

    name = "tlx.async_load"

    def verify(self):
        if len(self.operands) != 2 + bool(self.attrs.get("has_mask")):
            raise self.error("expected ptrs, dst and an optional mask")
        ptrs, dst = self.operands[:2]
        pointee = expect_pointer(self, ptrs.type, "ptrs").pointee
        d = expect_memdesc(self, dst.type, "destination", view=True)
        if not isinstance(ptrs.type, TensorType) or ptrs.type.shape != d.shape or pointee != d.element:
            raise self.error(f"expected pointers of shape {list(d.shape)} to {d.element}, got {ptrs.type}")
        if self.attrs.get("has_mask"):
            expect_type(self, self.operands[2].type, with_element(ptrs.type, i1), "mask")


class AsyncCommitGroupOp(Operation):
    """Close the group of cp.async copies this thread issued since the last commit."""

    name = "tlx.async_commit_group"


class AsyncWaitGroupOp(Operation):
    """Wait until at most ``attrs.pendings`` committed groups are in flight."""

    name = "tlx.async_wait_group"

    def verify(self):
        if not isinstance(self.attrs.get("pendings"), int) or self.attrs["pendings"] < 0:
            raise self.error(f"expected a non-negative 'pendings', got {self.attrs.get('pendings')!r}")


# -- TMA (bulk tensor copies through a descriptor) -----------------------------------------

def _check_box(op, desc_type, view_type, offsets) -> None:
    from ..types import TensorDescType
    if not isinstance(desc_type, TensorDescType):
        raise op.error(f"expected a tensor descriptor, got {desc_type}")
    if not desc_type.fits_buffer(view_type.shape, view_type.element):
        raise op.error(f"expected a buffer of the descriptor's box {list(desc_type.block_shape)} x "
                       f"{desc_type.element}, got {view_type}")
    if len(offsets) != len(desc_type.block_shape):
        raise op.error(f"expected {len(desc_type.block_shape)} offsets, got {len(offsets)}")
    for o in offsets:
        if not isinstance(o.type, ScalarType) or not o.type.is_integer:
            raise op.error(f"expected integer offsets, got {o.type}")


class AsyncDescriptorLoadOp(Operation):
    """TMA load of the box at ``offsets`` (element coordinates, outermost dim
    first) into buffer ``dst``; the box's bytes complete on ``bar`` (complete_tx),
    elements outside the tensor are zero-filled.  Operands: desc, dst, bar,
    *offsets, [cta_mask], [pred].  With ``multicast`` the box lands in ``dst``
    and completes on ``bar`` in every CTA of the cluster whose rank's bit is set
    in ``cta_mask`` (i32), at the same shared-memory addresses."""

    name = "tlx.async_descriptor_load"

    @property
    def offsets(self):
        return self.operands[3:len(self.operands) - bool(self.attrs.get("multicast"))
                             - bool(self.attrs.get("has_pred"))]

    @property
    def cta_mask(self):
        return self.operands[3 + len(self.offsets)] if self.attrs.get("multicast") else None

    def verify(self):
        if len(self.operands) < 3:
            raise self.error("expected desc, dst, barrier and offsets")
        desc, dst, bar = self.operands[:3]
        view = expect_memdesc(self, dst.type, "destination", view=True)
        if not isinstance(bar.type, BarrierType) or bar.type.num or bar.type.remote:
            raise self.error(f"expected one local mbarrier, got {bar.type}")
        _check_box(self, desc.type, view, self.offsets)


# The element types each TMA reduce-store operation takes (PTX ISA,
# cp.reduce.async.bulk.tensor): the reduction runs in the tensor map's data type, so
# i32/i64 compare signed and u32/u64 unsigned; the bitwise ops see b32 bits.  PTX lists
# b64 for the bitwise ops too, but an xor reduce-store of i64/u64 stopped the H200 with an
# illegal instruction (2026-12-01), so 64-bit bitwise reductions are refused until understood.
TMA_REDUCE_TYPES: dict[str, tuple[str, ...]] = {
    "add": ("f16", "bf16", "f32", "i32", "u32", "u64"),
    "min": ("f16", "bf16", "i32", "u32", "i64", "u64"),
    "max": ("f16", "bf16", "i32", "u32", "i64", "u64"),
    "inc": ("u32",),
    "dec": ("u32",),
    "and": ("i32", "u32"),
    "or": ("i32", "u32"),
    "xor": ("i32", "u32"),
}


def tma_reduce_error(kind: str, element) -> str | None:
    """Why a TMA reduce-store ``kind`` cannot run on ``element``, or None if it can."""
    if kind not in TMA_REDUCE_TYPES:
        return f"'{kind}' is not a TMA reduction; expected one of {', '.join(TMA_REDUCE_TYPES)}"
    allowed = TMA_REDUCE_TYPES[kind]
    if str(element) not in allowed:
        return (f"a TMA '{kind}' reduce-store takes elements of {', '.join(allowed)}, got {element} "
                f"(cp.reduce.async.bulk.tensor)")
    return None


class AsyncDescriptorStoreOp(Operation):
    """TMA store of buffer ``src`` to the box at ``offsets``; elements outside
    the tensor are not written.  Joins the thread's bulk async group.
    Operands: desc, src, *offsets.  With ``attrs.reduce`` (``add``, ``min``, ...:
    ``TMA_REDUCE_TYPES``) each element is combined atomically with the one in
    global memory instead of overwriting it (a TMA reduce-store)."""

    name = "tlx.async_descriptor_store"
    traits = frozenset({BULK_STORE})

    def verify(self):
        if len(self.operands) < 2:
            raise self.error("expected desc, src and offsets")
        desc, src = self.operands[:2]
        view = expect_memdesc(self, src.type, "source", view=True)
        _check_box(self, desc.type, view, self.operands[2:])
        kind = self.attrs.get("reduce")
        if kind is not None:
            why = tma_reduce_error(kind, desc.type.element) if isinstance(kind, str) else \
                f"expected a string 'reduce', got {kind!r}"
            if why:
                raise self.error(why)


class AsyncDescriptorPrefetchTensorOp(Operation):
    """Prefetch the box at ``offsets`` of ``desc`` into L2 (``cp.async.bulk.prefetch.tensor``):
    a hint, no shared memory, nothing to wait for.  Operands: desc, *offsets, [pred]."""

    name = "tlx.async_descriptor_prefetch_tensor"

    @property
    def offsets(self):
        return self.operands[1:len(self.operands) - bool(self.attrs.get("has_pred"))]

    def verify(self):
        from ..types import TensorDescType
        if not self.operands or not isinstance(self.operands[0].type, TensorDescType):
            raise self.error("expected a tensor descriptor and offsets")
        offsets = self.offsets
        if len(offsets) != len(self.operands[0].type.block_shape):
            raise self.error(f"expected {len(self.operands[0].type.block_shape)} offsets, got {len(offsets)}")
        for o in offsets:
            if not isinstance(o.type, ScalarType) or not o.type.is_integer:
                raise self.error(f"expected integer offsets, got {o.type}")


class AsyncDescriptorStoreWaitOp(Operation):
    """Wait until at most ``attrs.pendings`` bulk store groups still read shared memory."""

    name = "tlx.async_descriptor_store_wait"

    def verify(self):
        if not isinstance(self.attrs.get("pendings"), int) or self.attrs["pendings"] < 0:
            raise self.error(f"expected a non-negative 'pendings', got {self.attrs.get('pendings')!r}")
