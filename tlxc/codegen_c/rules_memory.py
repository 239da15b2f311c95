"""Lowering of global-memory ops: pointer arithmetic, vectorized loads and
stores, atomics.

A load/store over a tensor groups each thread's registers into vectors of
``width`` consecutive elements when the layout, the pointer's contiguity and
alignment (axis info) and the mask's constancy all allow it, up to 16 bytes,
and issues one predicated vector access per group.
"""
from __future__ import annotations

from ..ir.types import PointerType, TensorType
from . import ctypes_ as C
from .lower import elem, lowering, registers


@lowering("tl.addptr")
def addptr(lw, op):
    p, off = op.operands
    lw.assign_elementwise(op.results[0], lambda i: f"({lw.ref(p, i)} + {lw.ref(off, i)})")


def vector_width(lw, ptr, mask, elem_bytes: int) -> int:
    """Elements per access (a power of two), at most 16 bytes."""
    layout = ptr.type.layout
    dim = len(ptr.type.shape) - 1
    width = layout.contiguous_elements_per_thread(dim)
    info = lw.axis.info(ptr)
    width = min(width, info.contiguity[dim], max(1, info.divisibility[dim] // elem_bytes), 16 // elem_bytes)
    if mask is not None:
        width = min(width, lw.axis.info(mask).constancy[dim])
    w = 1
    while w * 2 <= width:
        w *= 2
    # Targets pack vectors into 32-bit words; a narrower group (two 8-bit
    # elements) goes element by element.
    return w if w * elem_bytes >= 4 else 1


def _operands(op):
    has_mask, has_other = op.attrs.get("has_mask"), op.attrs.get("has_other")
    mask = op.operands[1 if op.name == "tl.load" else 2] if has_mask else None
    other = op.operands[-1] if has_other else None
    return mask, other


@lowering("tl.load")
def load(lw, op):
    ptr = op.operands[0]
    mask, other = _operands(op)
    result = op.results[0]
    t = elem(result.type)
    if not isinstance(ptr.type, TensorType):
        init = C.constant_literal(0, t) if other is None else lw.ref(other)
        name = lw.declare(result, init=init)
        guard = f"if ({lw.ref(mask)}) " if mask is not None else ""
        lw.out.line(f"{guard}{name} = *{lw.ref(ptr)};")
        return
    name = lw.declare(result)
    width = vector_width(lw, ptr, mask, t.bytes)
    count = registers(ptr.type)
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int i = 0; i < {count}; i += {width})")
    pred = lw.ref(mask) if mask is not None else "true"
    fill = lw.ref(other) if other is not None else C.constant_literal(0, t)
    lw.out.line(lw.target.load_vector(name, lw.ref(ptr), pred, fill, t, width, op.attrs))
    lw.out.close()


@lowering("tl.store")
def store(lw, op):
    ptr, value = op.operands[:2]
    mask, _ = _operands(op)
    t = elem(value.type)
    if not isinstance(ptr.type, TensorType):
        guard = f"if ({lw.ref(mask)}) " if mask is not None else ""
        lw.out.line(f"{guard}*{lw.ref(ptr)} = {lw.ref(value)};")
        return
    width = vector_width(lw, ptr, mask, t.bytes)
    count = registers(ptr.type)
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int i = 0; i < {count}; i += {width})")
    pred = lw.ref(mask) if mask is not None else "true"
    lw.out.line(lw.target.store_vector(lw.name(value), lw.ref(ptr), pred, t, width, op.attrs))
    lw.out.close()


@lowering("tl.atomic_rmw")
def atomic_rmw(lw, op):
    ptr, value = op.operands[:2]
    mask, _ = _operands(op)
    result = op.results[0]
    t = elem(value.type)
    fn = lw.target.atomic(op.attrs["kind"], t, op)
    name = lw.declare(result)
    zero = C.constant_literal(0, t)
    pred = lw.ref(mask) if mask is not None else "true"
    call = fn.format(p=lw.ref(ptr), v=lw.ref(value))
    body = f"{lw.ref(result) if isinstance(result.type, TensorType) else name} = ({pred}) ? {call} : {zero};"
    if isinstance(result.type, TensorType):
        lw.for_registers(result, body)
    else:
        lw.out.line(body)


__all__ = ["PointerType"]
