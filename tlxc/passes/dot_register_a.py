"""register-a-operand: a wgmma's A operand computed in registers is read from registers.

``lower-dot-to-wgmma`` stores every operand to shared memory; when A is not a load but a
value of the registers (attention's ``p = exp2(qk - m).to(f16)`` in ``p @ v``, the
backward's ``pT`` and ``dsT``), that is a store of the whole tile, a proxy fence and a CTA
barrier per MMA.  wgmma takes A from registers (``tlx.async_dot`` with a tensor A: the
layout ``infer-layouts`` gives it, the operand layout of the accumulator's, is the
accumulator layout of an MMA of the same rows, so ``p`` computed from one wgmma's result
feeds the next one without a conversion).  This pass passes the stored value itself when
the buffer is a one-slot ``lower-dot-to-wgmma`` A buffer read by that wgmma only, the value
is 16-bit or fp8 (whose k32 fragments the codegen exchanges within each quad from the
accumulator pattern) and not a load (a loaded A is better copied by cp.async), and the store
sits in the wgmma's block.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Module, Operation, users_by_value
from ..target import has_feature
from .manager import Pass


@dataclass(frozen=True)
class RegisterAOperand(Pass):
    name = "register-a-operand"

    def run(self, module: Module, options) -> Module:
        if not has_feature(options.arch, "wgmma"):
            return module
        for kernel in module.kernels:
            users = users_by_value(kernel)
            for dot in [op for op in kernel.walk() if op.name == "tlx.async_dot"]:
                _rewrite(dot, users)
        return module


def _rewrite(dot: Operation, users) -> None:
    view = dot.operands[0].owner
    if getattr(view, "name", None) != "tlx.local_view" or view.parent is not dot.parent:
        return
    alloc = view.operands[0].owner
    if getattr(alloc, "name", None) != "tlx.local_alloc" or alloc.attrs.get("dot_operand") != "a" \
            or alloc.operands or alloc.result.type.num != 1:
        return
    if users.get(id(alloc.result), []) != [view]:
        return
    view_users = users.get(id(view.result), [])
    stores = [u for u in view_users if u.name == "tlx.local_store" and u.operands[0] is view.result]
    if len(stores) != 1 or len(view_users) != 2 or dot not in view_users:
        return
    store = stores[0]
    value = store.operands[1]
    if store.parent is not dot.parent or getattr(value.owner, "name", None) in ("tl.load", None):
        return
    if value.type.element.bits not in (8, 16) or tuple(value.type.shape) != tuple(view.result.type.shape):
        return
    block = dot.parent
    if block.ops.index(store) > block.ops.index(dot):
        return
    dot.operands[0] = value
    block.ops.remove(store)
    block.ops.remove(view)
    alloc.parent.ops.remove(alloc)



__all__ = ["RegisterAOperand"]
