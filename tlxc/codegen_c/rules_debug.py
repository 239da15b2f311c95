"""Lowering of device-side print and assert."""
from __future__ import annotations

import json
import os
import sys

from ..ir.types import PointerType, TensorType
from .lower import elem, lowering, registers


def _format(t) -> tuple[str, str]:
    """(printf conversion, cast) for one element of type ``t``."""
    if isinstance(t, PointerType):
        return "%p", "(const void*)"
    if t.is_float:
        return "%f", "(double)"
    if t.bits == 64:
        return ("%llu" if t.is_unsigned else "%lld"), ""
    return ("%u" if t.is_unsigned else "%d"), "(int)" if t.bits < 32 else ""


@lowering("tl.print")
def device_print(lw, op):
    prefix = op.attrs.get("prefix", "")
    for value in op.operands:
        t = value.type
        fmt, cast = _format(elem(t))
        if isinstance(t, TensorType):
            coords = [lw.coord_expr(t.layout, d) for d in range(len(t.shape))]
            idx_fmt = ", ".join(["%d"] * len(coords))
            text = json.dumps(f"pid (%d, %d, %d) idx ({idx_fmt}) {prefix}{fmt}\n")
            args = ", ".join(["blockIdx.x", "blockIdx.y", "blockIdx.z"] + coords +
                             [f"{cast}{lw.target.to_compute(lw.ref(value), elem(t))}"])
            lw.for_registers(registers(t), f"printf({text}, {args});")
        else:
            text = json.dumps(f"pid (%d, %d, %d) {prefix}{fmt}\n")
            value_expr = f"{cast}{lw.target.to_compute(lw.ref(value), elem(t))}"
            lw.out.line(f"printf({text}, blockIdx.x, blockIdx.y, blockIdx.z, {value_expr});")


@lowering("tl.assert")
def device_assert(lw, op):
    (cond,) = op.operands
    where = f"{os.path.basename(op.loc.file)}:{op.loc.line}" if op.loc else "?"
    msg = json.dumps(f"{where}: device_assert failed in pid (%d, %d, %d): {op.attrs.get('message', '')}\n")
    report = f"{{ printf({msg}, blockIdx.x, blockIdx.y, blockIdx.z); {lw.target.trap()}; }}"
    if isinstance(cond.type, TensorType):
        # one report for the thread's registers (the message names the program, not the element):
        # one printf call site, not one per unrolled register
        bad = lw.fresh("assert_failed")
        lw.out.line(f"bool {bad} = false;")
        lw.for_registers(registers(cond.type), f"{bad} |= !{lw.ref(cond)};")
        lw.out.line(f"if ({bad}) {report}")
    else:
        lw.out.line(f"if (!{lw.ref(cond)}) {report}")


@lowering("tlx.dump_layout")
def dump_layout(lw, op):
    """``tlx.dump_layout(x)``: the layout chosen for ``x``, on stderr at compile time; no code."""
    (value,) = op.operands
    where = f"{os.path.basename(op.loc.file)}:{op.loc.line}" if op.loc else "?"
    name = value.name_hint or "value"
    t = value.type
    if isinstance(t, TensorType):
        text = f"registers {t}: {t.layout}"
    else:
        swizzle = lw.view_swizzle.get(id(value), 0)
        blocked = f", column blocks of {lw.view_block[id(value)][0]} elements" if id(value) in lw.view_block else ""
        kind = "row-major" if not swizzle else f"{swizzle}-byte swizzle" if isinstance(swizzle, int) else f"swizzled by {swizzle}"
        text = (f"shared {t}: {kind}{blocked}, element strides "
                f"{list(lw.views[id(value)][1])}")
    print(f"tlx.dump_layout {where}: {name}: {text}", file=sys.stderr)
    lw.out.line(f"// tlx.dump_layout {name}: {text}")
