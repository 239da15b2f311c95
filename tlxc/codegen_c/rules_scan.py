"""Lowering of ``tl.scan``, ``tl.reduce_combine`` and ``tl.flip`` through shared memory.

Every thread writes its elements to the scope's scratch at their row-major flat
index; then:

* a scan runs Hillis-Steele steps over the whole tile, the scope's threads
  striding over the flat indices: at step ``d`` (1, 2, 4, ... < n) element ``k``
  of each row along the axis becomes ``combine(x[k - d], x[k])`` (``x[k + d]``
  from the end for a reverse scan), ping-ponging between two buffers with a
  barrier per step.  log2(n) steps of numel / threads combines each: simple and
  correct for any layout, not a warp-shuffle scan (docs/codegen.md);
* a combine reduction is that scan forward, each result reading the last
  element of its row;
* a flip reads each element back from its mirrored index;
* a sort runs a bitonic network along the axis (log2(n)(log2(n)+1)/2 compare-exchange
  steps, a barrier each).

The combine region (scalars) is lowered inline at each application.
"""
from __future__ import annotations

import math

from . import c_types as C
from .lower import elem, lowering

_ALIGN = 16


def _row_major(shape) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return list(reversed(strides))


def _buffers(lw, values, copies: int) -> list[list[str]]:
    """``copies`` shared arrays of numel elements for each value (declared pointers)."""
    numel = values[0].type.numel
    names, offset, declared = [], 0, []
    for v in values:
        ctype = C.storage_type(elem(v.type))
        size = -(-numel * max(1, elem(v.type).bytes) // _ALIGN) * _ALIGN
        group = []
        for _ in range(copies):
            name = lw.fresh("scan_buf")
            declared.append((name, ctype, offset))
            group.append(name)
            offset += size
        names.append(group)
    smem = lw.need_scratch(offset)
    for name, ctype, at in declared:
        lw.out.line(f"{ctype}* {name} = reinterpret_cast<{ctype}*>({smem} + {at});")
    return names


def _write_tile(lw, values, buffers) -> None:
    lw.out.line(lw.sync())                   # the scratch may still be read by an earlier op
    flat = lw.flat_expr(values[0].type.layout)
    for v, buf in zip(values, buffers):
        lw.for_registers(v, f"{buf}[{flat}] = {lw.name(v)}[i];")
    lw.out.line(lw.sync())


def _combine(lw, block, lefts: list[str], rights: list[str], store) -> None:
    """Lower the combine region on (lefts, rights); ``store(results)`` emits the uses
    of its results, inside the region's C scope."""
    lw.out.open("")
    for arg, expr in zip(block.args, lefts + rights):
        name = lw.define(arg, arg.name_hint)
        lw.out.line(f"{C.storage_type(arg.type)} {name} = {expr};")
    lw.lower_block_until_terminator(block)
    store([lw.ref(v) for v in block.terminator.operands])
    lw.out.close()


def _hillis_steele(lw, op, buffers, reverse: bool) -> list[str]:
    """The scan steps; returns the buffer names holding the result (per operand)."""
    src = op.operands[0].type
    axis = op.attrs["axis"]
    n, inner = src.shape[axis], math.prod(src.shape[axis + 1:])
    current, spare = [b[0] for b in buffers], [b[1] for b in buffers]
    d, f = lw.fresh("d"), lw.fresh("f")
    lw.out.open(f"for (int {d} = 1; {d} < {n}; {d} <<= 1)")
    lw.out.open(f"for (int {f} = {lw.scope.tid_var}; {f} < {src.numel}; {f} += {lw.scope.threads})")
    k = f"(({f} / {inner}) % {n})"
    has_partner, partner = (f"{k} + {d} < {n}", f"{f} + {d} * {inner}") if reverse else \
        (f"{k} >= {d}", f"{f} - {d} * {inner}")
    lw.out.open(f"if ({has_partner})")
    _combine(lw, op.regions[0].block, [f"{a}[{partner}]" for a in current], [f"{a}[{f}]" for a in current],
             lambda results: [lw.out.line(f"{b}[{f}] = {r};") for b, r in zip(spare, results)])
    lw.out.close()
    lw.out.open("else")
    for a, b in zip(current, spare):
        lw.out.line(f"{b}[{f}] = {a}[{f}];")
    lw.out.close()
    lw.out.close()
    lw.out.line(lw.sync())
    for a, b, v in zip(current, spare, op.operands):
        ctype = C.storage_type(elem(v.type))
        lw.out.line(f"{{ {ctype}* swap = {a}; {a} = {b}; {b} = swap; }}")
    lw.out.close()
    return current


@lowering("tl.scan")
def scan(lw, op):
    buffers = _buffers(lw, op.operands, 2)
    _write_tile(lw, op.operands, [b[0] for b in buffers])
    final = _hillis_steele(lw, op, buffers, op.attrs["reverse"])
    flat = lw.flat_expr(op.results[0].type.layout)
    for result, buf in zip(op.results, final):
        name = lw.declare(result)
        lw.for_registers(result, f"{name}[i] = {buf}[{flat}];")


def _source_index(lw, result, src_shape, axis: int, at_axis: str) -> str:
    """The flat index in ``src_shape`` of register ``i`` of ``result`` (whose shape is
    ``src_shape`` without ``axis``), with coordinate ``at_axis`` along ``axis``."""
    strides = _row_major(src_shape)
    terms = [f"({at_axis}) * {strides[axis]}"]
    rest = [d for d in range(len(src_shape)) if d != axis]
    layout = getattr(result.type, "layout", None)
    for out_dim, src_dim in enumerate(rest):
        terms.append(f"{lw.coord_expr(layout, out_dim)} * {strides[src_dim]}")
    return " + ".join(terms)


@lowering("tl.reduce_combine")
def reduce_combine(lw, op):
    src = op.operands[0].type
    axis = op.attrs["axis"]
    buffers = _buffers(lw, op.operands, 2)
    _write_tile(lw, op.operands, [b[0] for b in buffers])
    final = _hillis_steele(lw, op, buffers, reverse=False)
    last = src.shape[axis] - 1
    for result, buf in zip(op.results, final):
        name = lw.declare(result)
        if len(src.shape) == 1:
            lw.out.line(f"{name} = {buf}[{last}];")
        else:
            lw.for_registers(result, f"{name}[i] = {buf}[{_source_index(lw, result, src.shape, axis, str(last))}];")


@lowering("tl.flip")
def flip(lw, op):
    (src,), result = op.operands, op.results[0]
    axis = op.attrs["axis"]
    buf = _buffers(lw, [src], 1)[0][0]
    _write_tile(lw, [src], [buf])
    layout = result.type.layout
    shape = result.type.shape
    strides = _row_major(shape)
    terms = []
    for d, stride in enumerate(strides):
        coord = lw.coord_expr(layout, d)
        terms.append(f"({shape[d] - 1} - {coord}) * {stride}" if d == axis else f"{coord} * {stride}")
    name = lw.declare(result)
    lw.for_registers(result, f"{name}[i] = {buf}[{' + '.join(terms)}];")


@lowering("tl.sort")
def sort(lw, op):
    (src,), result = op.operands, op.results[0]
    t = src.type
    axis = op.attrs["axis"]
    n = t.shape[axis]
    inner = math.prod(t.shape[axis + 1:])
    buf = _buffers(lw, [src], 1)[0][0]
    _write_tile(lw, [src], [buf])
    element = elem(t)
    ctype = C.storage_type(element)
    size, stride, f = lw.fresh("size"), lw.fresh("stride"), lw.fresh("f")
    lw.out.open(f"for (int {size} = 2; {size} <= {n}; {size} <<= 1)")
    lw.out.open(f"for (int {stride} = {size} >> 1; {stride} > 0; {stride} >>= 1)")
    lw.out.open(f"for (int {f} = {lw.scope.tid_var}; {f} < {t.numel}; {f} += {lw.scope.threads})")
    k = f"(({f} / {inner}) % {n})"
    lw.out.line(f"const int partner = {f} + (({k} ^ {stride}) - {k}) * {inner};")
    lw.out.open(f"if (({k} ^ {stride}) > {k})")
    lw.out.line(f"const {ctype} lo = {buf}[{f}], hi = {buf}[partner];")
    # ascending runs where bit `size` of k is clear (the other half descends), flipped for descending
    ascending = f"((({k} & {size}) == 0) != {'true' if op.attrs['descending'] else 'false'})"
    before = f"({lw.target.to_compute('hi', element)} < {lw.target.to_compute('lo', element)})"
    after = f"({lw.target.to_compute('lo', element)} < {lw.target.to_compute('hi', element)})"
    lw.out.line(f"if ({ascending} ? {before} : {after}) {{ {buf}[{f}] = hi; {buf}[partner] = lo; }}")
    lw.out.close()
    lw.out.close()
    lw.out.line(lw.sync())
    lw.out.close()
    lw.out.close()
    flat = lw.flat_expr(result.type.layout)
    name = lw.declare(result)
    lw.for_registers(result, f"{name}[i] = {buf}[{flat}];")

