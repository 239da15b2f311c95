"""Lowering of structured control flow: for, while, if, yield, return."""
from __future__ import annotations

from ..ir.types import TensorType
from . import ctypes_ as C
from .lower import lowering, registers


def _declare_like(lw, value, hint=None) -> str:
    name = lw.define(value, hint)
    t = value.type
    if isinstance(t, TensorType):
        lw.out.line(f"{C.storage_type(t.element)} {name}[{registers(t)}];")
    else:
        lw.out.line(f"{C.storage_type(t)} {name};")
    return name


def _copy(lw, dst_name: str, src, t) -> None:
    if isinstance(t, TensorType):
        lw.for_registers(registers(t), f"{dst_name}[i] = {lw.name(src)}[i];")
    else:
        lw.out.line(f"{dst_name} = {lw.name(src)};")


def _yield_into(lw, names: list[str], values, types) -> None:
    """Parallel assignment (a loop may yield its arguments swapped)."""
    temps = []
    for value, t in zip(values, types):
        if lw.names.get(id(value)) in names:
            temp = lw.fresh("yield")
            decl = f"{C.storage_type(t.element)} {temp}[{registers(t)}];" if isinstance(t, TensorType) \
                else f"{C.storage_type(t)} {temp};"
            lw.out.line(decl)
            _copy_named(lw, temp, lw.name(value), t)
            temps.append(temp)
        else:
            temps.append(lw.name(value))
    for name, temp, t in zip(names, temps, types):
        if name != temp:
            _copy_named(lw, name, temp, t)


def _copy_named(lw, dst: str, src: str, t) -> None:
    if isinstance(t, TensorType):
        lw.for_registers(registers(t), f"{dst}[i] = {src}[i];")
    else:
        lw.out.line(f"{dst} = {src};")


@lowering("scf.for")
def for_loop(lw, op):
    lb, ub, step = op.operands[:3]
    inits = op.operands[3:]
    body = op.regions[0].block
    carried = []
    for arg, init, result in zip(body.args[1:], inits, op.results):
        name = _declare_like(lw, arg)
        _copy(lw, name, init, arg.type)
        lw.alias(result, name)
        carried.append(name)
    iv = lw.define(body.args[0], body.args[0].name_hint or "iv")
    ctype = C.storage_type(body.args[0].type)
    lw.out.open(f"for ({ctype} {iv} = {lw.name(lb)}; {iv} < {lw.name(ub)}; {iv} += {lw.name(step)})")
    lw.lower_block_until_terminator(body)
    _yield_into(lw, carried, body.terminator.operands, [a.type for a in body.args[1:]])
    lw.out.close()


@lowering("scf.while")
def while_loop(lw, op):
    before, after = op.regions[0].block, op.regions[1].block
    state = []
    for arg, init in zip(before.args, op.operands):
        name = _declare_like(lw, arg)
        _copy(lw, name, init, arg.type)
        state.append(name)
    results = [_declare_like(lw, r) for r in op.results]
    lw.out.open("while (true)")
    lw.lower_block_until_terminator(before)
    cond = before.terminator.operands[0]
    _yield_into(lw, results, before.terminator.operands[1:], [r.type for r in op.results])
    lw.out.line(f"if (!{lw.name(cond)}) break;")
    for arg, name in zip(after.args, results):
        lw.alias(arg, name)
    lw.lower_block_until_terminator(after)
    _yield_into(lw, state, after.terminator.operands, [a.type for a in before.args])
    lw.out.close()


@lowering("scf.if")
def if_op(lw, op):
    results = [_declare_like(lw, r) for r in op.results]
    lw.out.open(f"if ({lw.name(op.operands[0])})")
    then_block, else_block = op.regions[0].block, op.regions[1].block
    lw.lower_block_until_terminator(then_block)
    _yield_into(lw, results, then_block.terminator.operands, [r.type for r in op.results])
    if len(else_block.ops) > 1 or results:
        lw.out.close(" else {")
        lw.out.depth += 1
        lw.lower_block_until_terminator(else_block)
        _yield_into(lw, results, else_block.terminator.operands, [r.type for r in op.results])
    lw.out.close()


@lowering("tl.return")
def ret(lw, op):
    pass
