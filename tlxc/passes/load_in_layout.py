"""load-in-use-layout: a load whose only use is a layout conversion loads in the target layout.

``infer-layouts`` gives a load the layout of its pointers and converts the result where a
consumer wants another (``m = tl.load(M + offs_m)`` of an attention backward, read in a
row of the MMA accumulator's layout: every iteration a round trip through shared memory
between two CTA barriers).  When the pointers (and mask and other) are computed only from
scalars by ``tl.splat``, ``tl.arange``, tensor constants and elementwise ``arith`` /
``tl.addptr`` ops, and the load is a 1-D row of at most 512 elements (a 2-D tile keeps its
coalesced 16-byte load and the conversion: loading it in an MMA operand layout would
scatter it into narrow accesses), that computation is repeated in the target layout and the load
issued there -- each thread loads the elements it needs (a broadcast layout loads an
element in several threads), as Triton's layout-conversion removal does by
rematerialising the address computation.  The new ops are placed right before the old
load, which, with the conversion, goes away.

The same holds for a ``tlx.local_load`` of at most 512 elements from shared memory whose only use
is a conversion (a row of statistics that a TMA copy put there, read by the attention backward
in its product's layout): it reads the buffer in the target layout (any layout addresses shared
memory alike); larger tiles keep their vector reads and conversion, tensor memory its own layouts.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.builder import Builder
from ..ir.core import Module, Operation, Value, users_by_value
from ..ir.types import TensorType
from .manager import Pass

_SHAPE_FREE = ("tl.splat", "tl.arange", "tl.addptr")
MAX_ELEMENTS = 512          # a row of per-row statistics; a 2-D tile keeps its coalesced load


@dataclass(frozen=True)
class LoadInUseLayout(Pass):
    name = "load-in-use-layout"

    def run(self, module: Module, options) -> Module:
        for kernel in module.kernels:
            users = users_by_value(kernel)
            for convert in [op for op in kernel.walk() if op.name == "tl.convert_layout"]:
                load = getattr(convert.operands[0], "owner", None)
                if getattr(load, "name", None) not in ("tl.load", "tlx.local_load") \
                        or users.get(id(load.result)) != [convert]:
                    continue
                if load.parent is not convert.parent or load.attrs.get("volatile"):
                    continue
                if load.name == "tlx.local_load":
                    users = _read_in_layout(load, convert, kernel) or users
                    continue
                t = load.operands[0].type
                if not isinstance(t, TensorType) or len(t.shape) != 1 or t.shape[0] > MAX_ELEMENTS:
                    continue          # a block pointer, or a tile: its coalesced vector load stays
                layout = convert.result.type.layout
                clones: list[Operation] = []
                memo: dict[int, Value] = {}
                try:
                    operands = [_remat(v, layout, clones, memo, load.parent) for v in load.operands]
                except _Unsupported:
                    continue
                new = _op(load.name, operands, [convert.result.type], dict(load.attrs), load.loc,
                          [convert.result.name_hint])
                block = load.parent
                at = block.ops.index(load)
                for offset, op in enumerate(clones + [new]):
                    block.insert(at + offset, op)
                block.ops.remove(load)
                block.ops.remove(convert)
                for op in kernel.walk():
                    op.operands = [new.result if v is convert.result else v for v in op.operands]
                users = users_by_value(kernel)
        return module


def _read_in_layout(load: Operation, convert: Operation, kernel) -> dict | None:
    """``load`` (a ``tlx.local_load``) replaced by one that reads in ``convert``'s layout, and
    ``convert`` removed; the new users map, or None when it does not apply."""
    src = load.operands[0].type
    if getattr(src, "storage", None) != "smem" or _elements(convert.result.type) > MAX_ELEMENTS:
        return None
    new = _op(load.name, list(load.operands), [convert.result.type], dict(load.attrs), load.loc,
              [convert.result.name_hint])
    block = load.parent
    block.insert(block.ops.index(load), new)
    block.ops.remove(load)
    block.ops.remove(convert)
    for op in kernel.walk():
        op.operands = [new.result if v is convert.result else v for v in op.operands]
    return users_by_value(kernel)


def _elements(t: TensorType) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n


class _Unsupported(Exception):
    pass


def _remat(value: Value, layout, clones: list, memo: dict, block) -> Value:
    """``value`` computed in ``layout`` (scalars as they are)."""
    if not isinstance(value.type, TensorType):
        return value
    if id(value) in memo:
        return memo[id(value)]
    op = value.owner
    name = getattr(op, "name", None)
    if not isinstance(op, Operation) or len(op.results) != 1 or op.regions:
        raise _Unsupported()
    if name == "arith.constant" or name in _SHAPE_FREE or (name.startswith("arith.") and _elementwise(op)):
        operands = [_remat(v, layout, clones, memo, block) for v in op.operands]
        clone = _op(name, operands, [value.type.with_layout(layout)], dict(op.attrs), op.loc, [value.name_hint])
        clones.append(clone)
        memo[id(value)] = clone.result
        return clone.result
    raise _Unsupported()


def _elementwise(op: Operation) -> bool:
    shape = tuple(op.results[0].type.shape)
    return all(not isinstance(v.type, TensorType) or tuple(v.type.shape) == shape for v in op.operands)


def _op(name, operands, result_types, attrs, loc, names) -> Operation:
    op = Builder(None).create(name, operands, result_types, attrs, result_names=names)
    op.loc = loc
    return op



__all__ = ["LoadInUseLayout"]
