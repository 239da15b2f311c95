"""async-dot-on-mfma: TLX's ``tlx.async_dot`` on AMD, where the MFMA units are synchronous.

On gfx942 / gfx950 ``%r = tlx.async_dot %a, %b, %acc`` (shared-memory views, or a register A)
becomes::

    %av = tlx.local_load %a        (a view; a register A is used as it is)
    %bv = tlx.local_load %b
    %r  = tl.dot %av, %bv, %acc

and ``tlx.async_dot_wait %x`` becomes ``%x``: the product is complete when issued, a valid early
completion of TLX's asynchronous semantics (the wait then has nothing to wait for).  The loads
read LDS straight into the MFMA operand fragments (``infer-layouts``: ``mfma_operand_of``), the
codegen's barriers order them after the stores (``codegen_c/shared_order.py``), and the LDS
swizzle comes from these readers (``shared-layouts``).  ``use_acc=`` is refused at its line.
The interpreter and ``tlxc check`` run the TLX ops themselves.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import CompilationError
from ..ir.builder import Builder
from ..ir.core import Module, Operation
from ..ir.types import MemDescType, TensorType
from ..target import get_target
from .manager import Pass


def _op(name: str, operands, result_types, attrs, loc, names=None) -> Operation:
    op = Builder(None).create(name, operands, result_types, attrs, result_names=names)
    op.loc = loc
    return op


def _replace_uses(root: Operation, old, new) -> None:
    for op in root.walk():
        op.operands = [new if v is old else v for v in op.operands]


@dataclass(frozen=True)
class AsyncDotOnMfma(Pass):
    name: ClassVar[str] = "async-dot-on-mfma"

    def run(self, module: Module, options) -> Module:
        nvidia = get_target(options.arch).is_nvidia
        for kernel in module.kernels:
            ops = [op for op in kernel.walk() if op.name in ("tlx.async_dot", "tlx.async_dot_wait")]
            if nvidia and any(op.name == "tlx.async_dot" and not op.attrs.get("mma_sync") for op in ops):
                ops = _mma_sync_dots(ops)       # a hand-written async_dot stays (and is refused on sm_80)
            elif nvidia and not any(op.attrs.get("mma_sync") for op in ops):
                continue
            for op in ops:
                block = op.parent
                at = block.ops.index(op)
                if op.name == "tlx.async_dot_wait":
                    block.ops[at:at + 1] = []
                    _replace_uses(kernel, op.results[0], op.operands[0])
                    continue
                if op.attrs.get("has_use_acc"):
                    raise CompilationError(f"tlx.async_dot(use_acc=...) is not supported on {options.arch} yet: "
                                           f"pass the accumulator (tl.zeros for a fresh one)", op.loc)
                new_ops, operands = [], []
                for value in op.operands[:2]:
                    if isinstance(value.type, MemDescType):
                        load = _op("tlx.local_load", [value], [TensorType(tuple(value.type.shape), value.type.element)],
                                   {}, op.loc)
                        new_ops.append(load)
                        value = load.results[0]
                    operands.append(value)
                acc = op.operands[2]
                attrs = {k: op.attrs[k] for k in ("input_precision", "max_num_imprecise_acc") if k in op.attrs}
                dot = _op("tl.dot", [*operands, acc], [TensorType(tuple(acc.type.shape), acc.type.element)], attrs,
                          op.loc, [op.results[0].name_hint])
                new_ops.append(dot)
                block.ops[at:at + 1] = []
                for offset, new in enumerate(new_ops):
                    block.insert(at + offset, new)
                _replace_uses(kernel, op.results[0], dot.results[0])
        return module


def _mma_sync_dots(ops: list[Operation]) -> list[Operation]:
    """The ``tlx.async_dot`` ops marked ``mma_sync`` and the waits on them (through other waits)."""
    chosen: list[Operation] = []
    marked: set[int] = set()
    for op in ops:
        if op.name == "tlx.async_dot" and op.attrs.get("mma_sync"):
            chosen.append(op)
            marked.add(id(op.results[0]))
        elif op.name == "tlx.async_dot_wait" and id(op.operands[0]) in marked:
            chosen.append(op)
            marked.add(id(op.results[0]))
    return chosen
