"""Lowering of structured control flow: for, while, if, yield, return.

Values that flow through a loop or an ``if`` (loop-carried values, ``if``
results) become C variables assigned at the yields.  Register tensors are
arrays, scalars plain variables, and memory views pointers: a shared buffer
view is a ``T*`` into ``tlx_smem`` with the static strides, swizzle and column
blocking of the views it merges (which must agree), an mbarrier view an
``unsigned long long*`` (a remote one its 32-bit cluster address), a
tensor-memory view its ``unsigned`` TMEM address.  A carried buffer view's
known alignment is the gcd of what every value merged into it guarantees.
"""
from __future__ import annotations

from math import gcd

from ..errors import CompilationError
from ..ir.core import Operation
from ..ir.types import BarrierType, MemDescType, TensorType
from ..target import has_feature
from . import c_types as C
from .lower import lowering, registers
from .rules_buffers import view_pitch


def _c_type(t) -> str:
    """The C type of one value of IR type ``t`` (a tensor: of one element)."""
    if isinstance(t, TensorType):
        return C.storage_type(t.element)
    if isinstance(t, BarrierType):
        return "unsigned" if t.remote else "unsigned long long*"
    if isinstance(t, MemDescType):
        return "unsigned" if t.storage == "tmem" else C.storage_type(t.element) + "*"
    return C.storage_type(t)


def _is_view(t) -> bool:
    return isinstance(t, (BarrierType, MemDescType))


def _declare_like(lw, value, hint=None) -> str:
    name = lw.define(value, hint)
    t = value.type
    if isinstance(t, TensorType):
        lw.out.line(f"{_c_type(t)} {name}[{registers(t)}];")
    else:
        lw.out.line(f"{_c_type(t)} {name};")
    return name


def _copy(lw, dst_name: str, src, t) -> None:
    if isinstance(t, TensorType):
        lw.for_registers(registers(t), f"{dst_name}[i] = {lw.name(src)}[i];")
    else:
        lw.out.line(f"{dst_name} = {lw.name(src)};")


# -- memory views as merged values -------------------------------------------------------
def _view_shape(lw, value):
    """What the codegen knows statically about a shared buffer view: (strides, swizzle, blocking)."""
    return (lw.views[id(value)][1], lw.view_swizzle.get(id(value), 0), lw.view_block.get(id(value)))


def _barrier_label(lw, value, name: str) -> tuple[str, str]:
    """(array name, index expression) of a merged barrier view, for debug-build watchdogs."""
    label = lw.barrier_names.get(id(value), (value.name_hint or "barrier", "0"))[0]
    owner = getattr(value, "owner", None)
    if isinstance(owner, Operation) and owner.name == "tlx.local_view" and not value.type.remote:
        return label, f"(int)({name} - {lw.name(owner.operands[0])})"
    return label, "0"


def _static_align(lw, value, depth: int = 0) -> int:
    """A byte alignment ``value`` (a shared view) is known to have, computed from the IR
    alone (it may be defined later in the loop body than the point that needs it)."""
    if id(value) in lw.view_align:
        return lw.view_align[id(value)]
    element_bytes = value.type.element.bytes
    owner = getattr(value, "owner", None)
    if depth > 16 or not isinstance(owner, Operation):
        return element_bytes
    if owner.name == "tlx.local_view":
        src, idx = owner.operands
        step = view_pitch(src) * lw.axis.info(idx).divisibility[0]
        return gcd(_static_align(lw, src, depth + 1), step)
    if owner.name in ("tlx.local_trans", "tlx.local_reinterpret"):
        return gcd(_static_align(lw, owner.operands[0], depth + 1), 16)
    return element_bytes


def _adopt_view(lw, value, name: str, like, merged=()) -> None:
    """Give the merged view ``value`` (C variable ``name``) the static description of
    ``like``; ``merged`` are the other values that flow into it (for the alignment)."""
    t = value.type
    if isinstance(t, BarrierType):
        lw.barrier_names[id(value)] = _barrier_label(lw, like, name)
        return
    if t.storage == "tmem":
        lw.tmem_views[id(value)] = name
        return
    strides, swizzle, block = _view_shape(lw, like)
    lw.views[id(value)] = (name, strides)
    lw.view_swizzle[id(value)] = swizzle
    if block:
        lw.view_block[id(value)] = block
    align = _static_align(lw, like)
    for other in merged:
        align = gcd(align, _static_align(lw, other))
    lw.view_align[id(value)] = align


def _check_same_view(lw, op, merged_value, incoming) -> None:
    """A buffer view merged at a yield must be laid out like the variable it flows into."""
    t = merged_value.type
    if not isinstance(t, MemDescType) or t.storage == "tmem":
        return
    if _view_shape(lw, incoming) != _view_shape(lw, merged_value):
        raise CompilationError(
            f"a buffer view that changes in a loop or an if ({merged_value.name_hint or 'a view'}) must keep its "
            f"layout: the value assigned here is a view of a buffer with other strides, swizzle or column blocking "
            f"than the one it replaces; take every view from the same tlx.local_alloc with the same "
            f"local_view/local_slice/local_trans steps", op.loc)


def _merge_into(lw, op, names: list[str], values, targets) -> None:
    """Assign ``values`` (yielded by ``op``) to the variables ``names`` of ``targets``."""
    for value, target in zip(values, targets):
        if _is_view(target.type):
            _check_same_view(lw, op, target, value)
    _yield_into(lw, names, values, [t.type for t in targets])


def _yield_into(lw, names: list[str], values, types) -> None:
    """Parallel assignment (a loop may yield its arguments swapped)."""
    temps = []
    for value, t in zip(values, types):
        if lw.names.get(id(value)) in names:
            temp = lw.fresh("yield")
            decl = f"{_c_type(t)} {temp}[{registers(t)}];" if isinstance(t, TensorType) \
                else f"{_c_type(t)} {temp};"
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
    yields = body.terminator.operands
    carried = []
    for arg, init, result, yielded in zip(body.args[1:], inits, op.results, yields):
        name = _declare_like(lw, arg)
        _copy(lw, name, init, arg.type)
        if _is_view(arg.type):
            _adopt_view(lw, arg, name, init, [yielded])
            _adopt_view(lw, result, name, init, [yielded])
        lw.alias(result, name)
        carried.append(name)
    iv = lw.define(body.args[0], body.args[0].name_hint or "iv")
    ctype = C.storage_type(body.args[0].type)
    if "unroll" in op.attrs:                   # tl.range(..., loop_unroll_factor=N)
        lw.out.line(f"#pragma unroll {op.attrs['unroll']}")
    drain = "dot_drain" in op.attrs
    if drain:                                  # the loop leaves only by the drain's break
        lw.out.open(f"if ({lw.name(lb)} < {lw.name(ub)})")
        lw.out.open(f"for ({ctype} {iv} = {lw.name(lb)}; ; {iv} += {lw.name(step)})")
    else:
        lw.out.open(f"for ({ctype} {iv} = {lw.name(lb)}; {iv} < {lw.name(ub)}; {iv} += {lw.name(step)})")
    if _issues_wgmma(lw, op):
        lw.out.line("__syncwarp();  // converged warps at the top of a loop that issues wgmma (ptxas C7519)")
    lw.lower_block_until_terminator(body)
    _merge_into(lw, body.terminator, carried, yields, body.args[1:])
    if drain:
        _drain_dot_wait(lw, op, iv, carried)
        lw.out.close()
    lw.out.close()


def _issues_wgmma(lw, op) -> bool:
    """Whether the loop ``op`` issues wgmma (Hopper's ``tlx.async_dot``) in its body.

    Such a loop starts each iteration with ``__syncwarp()``.  Without it, ptxas 13.x
    serializes every wgmma of the kernel (note C7519, "program dependence on
    compiler-inserted WG.AR in divergent path") when the loop's back edge carries code
    it cannot prove warp-converged: single-thread barrier arrives and TMA stores, and
    barrier try-wait loops, as in a persistent kernel's tile loop (TLX's cooperative GEMM
    with 256x128 tiles, its mbarrier ping-pong GEMM).  The loop issues wgmma, which
    every thread of the warpgroup must reach together, so its top is warp-converged in
    a valid program and the sync costs one instruction."""
    if not has_feature(lw.target.arch, "wgmma"):
        return False
    return any(inner.name == "tlx.async_dot" for inner in op.walk())


def _drain_dot_wait(lw, op, iv: str, carried: list[str]) -> None:
    """A ``dot_drain`` loop (passes/dot_wait_drain.py) waits for its wgmma groups after the
    last iteration's yield and leaves by that edge, its only exit (the zero-trip case is
    the ``if`` around the loop): ptxas then keeps the loop's wgmmas in flight.  A wait
    after the loop, one that rejoins the back edge, or a second exit (the ``for``'s own
    condition) makes it serialize them or insert a wait on every iteration."""
    index = op.attrs["dot_drain"]
    ub, step = op.operands[1:3]
    lw.out.open(f"if ({iv} + {lw.name(step)} >= {lw.name(ub)})")
    lw.out.line(lw.target.dot_wait_line(lw, 0, op.results[index], carried[index]) + "  // the last iteration drains")
    if lw.shared_order.drain_syncs(op):
        lw.out.line(f"{lw.sync()}  // sync: every warpgroup's retired wgmma reads, before shared memory is refilled")
    lw.out.line("break;")
    lw.out.close()


@lowering("scf.while")
def while_loop(lw, op):
    before, after = op.regions[0].block, op.regions[1].block
    condition, body_yield = before.terminator, after.terminator
    state = []
    for arg, init, yielded in zip(before.args, op.operands, body_yield.operands):
        name = _declare_like(lw, arg)
        _copy(lw, name, init, arg.type)
        if _is_view(arg.type):
            _adopt_view(lw, arg, name, init, [yielded])
        state.append(name)
    results = []
    for result, forwarded in zip(op.results, condition.operands[1:]):
        name = _declare_like(lw, result)
        if _is_view(result.type):
            _adopt_view(lw, result, name, forwarded)
        results.append(name)
    lw.out.open("while (true)")
    lw.lower_block_until_terminator(before)
    cond = condition.operands[0]
    _merge_into(lw, condition, results, condition.operands[1:], op.results)
    lw.out.line(f"if (!{lw.name(cond)}) break;")
    for arg, result, name in zip(after.args, op.results, results):
        lw.alias(arg, name)
        if _is_view(arg.type):
            _adopt_view(lw, arg, name, result)
    lw.lower_block_until_terminator(after)
    _merge_into(lw, body_yield, state, body_yield.operands, before.args)
    lw.out.close()


@lowering("scf.if")
def if_op(lw, op):
    results = [_declare_like(lw, r) for r in op.results]
    lw.out.open(f"if ({lw.name(op.operands[0])})")
    then_block, else_block = op.regions[0].block, op.regions[1].block
    lw.lower_block_until_terminator(then_block)
    then_values = then_block.terminator.operands
    _adopt_results(lw, op, results, then_values, else_block.terminator.operands)
    _merge_into(lw, then_block.terminator, results, then_values, op.results)
    if len(else_block.ops) > 1 or results:
        lw.out.close(" else {")
        lw.out.depth += 1
        lw.lower_block_until_terminator(else_block)
        _merge_into(lw, else_block.terminator, results, else_block.terminator.operands, op.results)
    lw.out.close()


def _adopt_results(lw, op, names, then_values, else_values) -> None:
    """View results of an ``if`` are described by the then-branch's value (the else
    branch's must agree: ``_check_same_view``)."""
    for result, name, then_value, else_value in zip(op.results, names, then_values, else_values):
        if _is_view(result.type):
            _adopt_view(lw, result, name, then_value, [else_value])


@lowering("tl.return")
def ret(lw, op):
    pass
