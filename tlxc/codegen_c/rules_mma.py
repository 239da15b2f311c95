"""Lowering of ``tl.dot``: tensor-core mma.sync fragments or an FMA fallback.

The operand layouts come from ``passes/layouts.py:dot_layouts``; register
numbering follows ``ir/layouts.py``: accumulator c0..c3 then N tiles then M
tiles; A a0..a7 then K tiles then M tiles; B b0..b3 then K tiles then N tiles.
"""
from __future__ import annotations

import numpy as np

from ..errors import InternalCompilerError
from . import c_types as C
from .lower import FULL_UNROLL_LIMIT, PARTIAL_UNROLL, const_table, lowering, registers


@lowering("tl.dot")
def dot(lw, op):
    a, b, acc = op.operands
    result = op.results[0]
    if op.attrs.get("algorithm") == "mma_v2":
        return _dot_mma(lw, op, a, b, acc, result)
    return _dot_fma(lw, op, a, b, acc, result)


def _accumulate_copy(lw, acc, result) -> str:
    """A float32 working copy of the accumulator."""
    work = lw.fresh("dacc")
    n = registers(acc.type)
    lw.out.line(f"float {work}[{n}];")
    lw.for_registers(n, f"{work}[i] = {lw.target.to_compute(lw.ref(acc), acc.type.element)};")
    return work


def _dot_mma(lw, op, a, b, acc, result):
    """One ``mma.sync`` per (M, N, K) tile: m16n8k16 on 16-bit operands (A 8, B 4 elements a
    tile), m16n8k8 on float32 ones as tf32 (A 4, B 2; the operands rounded to tf32 first, as the
    FMA path and the interpreter do), m16n8k32 on int8 ones (A 16, B 8, packed four to a register;
    an int32 accumulator)."""
    kind = {"f32": "tf32", "i8": "s8"}.get(a.type.element.name, "16")
    step, per_a, per_b = {"tf32": (8, 4, 2), "s8": (32, 16, 8), "16": (16, 8, 4)}[kind]
    kt = a.type.shape[1] // step
    ra, rb, rc = registers(a.type), registers(b.type), registers(acc.type)
    mt, nt = ra // (per_a * kt), rb // (per_b * kt)
    if mt * nt * 4 != rc or mt * per_a * kt != ra:
        raise InternalCompilerError(f"mma fragment counts do not match (A {ra}, B {rb}, C {rc}, "
                                    f"K tiles {kt}): a tlxc layout bug", op.loc)
    if kind == "s8":
        work = lw.fresh("dacc")
        lw.out.line(f"int {work}[{rc}];")
        lw.for_registers(rc, f"{work}[i] = (int){lw.ref(acc)};")
    else:
        work = _accumulate_copy(lw, acc, result)
    if kind == "s8":
        fn = lw.target.mma_m16n8k32_s8()
        operands = []
        for value, count in ((a, ra), (b, rb)):
            packed = lw.fresh(f"{lw.name(value)}_s8")
            src = lw.name(value)
            lw.out.line(f"unsigned {packed}[{count // 4}];")
            lw.for_registers(count // 4, f"{packed}[i] = " + " | ".join(
                f"((unsigned)(unsigned char){src}[4 * i + {j}] << {8 * j})" for j in range(4)) + ";")
            operands.append(packed)
        a_name, b_name = operands
        per_a, per_b = per_a // 4, per_b // 4          # registers, not elements
    elif kind == "tf32":
        fn = lw.target.mma_m16n8k8_tf32()
        operands = []
        for value, count in ((a, ra), (b, rb)):
            rounded = lw.fresh(f"{lw.name(value)}_tf32")
            lw.out.line(f"float {rounded}[{count}];")
            lw.for_registers(count, f"{rounded}[i] = {lw.target.round_tf32(f'{lw.name(value)}[i]')};")
            operands.append(rounded)
        a_name, b_name = operands
    else:
        fn = lw.target.mma_m16n8k16(a.type.element)
        a_name, b_name = lw.name(a), lw.name(b)
    # Fragments beyond the register file live in local memory whatever the unrolling: then only
    # the K loop unrolls, which keeps NVRTC's time linear in the tile (a 512x512 tile: 10 s, not
    # minutes).
    outer = "#pragma unroll" if max(ra, rb, rc) <= FULL_UNROLL_LIMIT else "#pragma unroll 1"
    lw.out.line(outer)
    lw.out.open(f"for (int mi = 0; mi < {mt}; ++mi)")
    lw.out.line(outer)
    lw.out.open(f"for (int ni = 0; ni < {nt}; ++ni)")
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int ki = 0; ki < {kt}; ++ki)")
    lw.out.line(f"{fn}(&{work}[4 * (ni + {nt} * mi)], &{a_name}[{per_a} * (ki + {kt} * mi)], "
                f"&{b_name}[{per_b} * (ki + {kt} * ni)]);")
    lw.out.close()
    lw.out.close()
    lw.out.close()
    t = result.type.element
    if kind == "s8":
        lw.assign_elementwise(result, lambda i: f"{work}[{i}]")
    else:
        lw.assign_elementwise(result, lambda i: lw.target.from_compute(f"{work}[{i}]", t))


def _dot_fma(lw, op, a, b, acc, result):
    """acc[r] += sum_k A[row(r), k] * B[k, col(r)], all in this thread's registers."""
    k = a.type.shape[1]
    acc_table = acc.type.layout.coords_table()[0, 0]          # [R, 2] for thread (0, 0)
    a_rows = a.type.layout.coords_table()[0, 0][::k, 0]        # A registers: k fastest, then rows
    b_cols = b.type.layout.coords_table()[0, 0][::k, 1]
    row_slot = [int(np.nonzero(a_rows == r)[0][0]) for r in acc_table[:, 0]]
    col_slot = [int(np.nonzero(b_cols == c)[0][0]) for c in acc_table[:, 1]]
    work = _accumulate_copy(lw, acc, result)
    rows = const_table(lw, row_slot, "arow")
    cols = const_table(lw, col_slot, "bcol")
    ta, tb = a.type.element, b.type.element
    prod_t = "float" if not (ta.is_integer and tb.is_integer) else "int"
    if prod_t == "int":
        lw.out.line(f"int {work}_i[{registers(acc.type)}];")
        lw.for_registers(registers(acc.type), f"{work}_i[i] = (int){work}[i];")
    target = f"{work}_i" if prod_t == "int" else work
    av = lw.target.to_compute(f"{lw.name(a)}[{rows}[i] * {k} + kk]", ta)
    bv = lw.target.to_compute(f"{lw.name(b)}[{cols}[i] * {k} + kk]", tb)
    if a.type.element.name == "f32" and op.attrs.get("input_precision") == "tf32":
        av, bv = lw.target.round_tf32(av), lw.target.round_tf32(bv)
    big = registers(acc.type) > FULL_UNROLL_LIMIT       # in local memory: unroll only the K loop, by 8
    lw.out.line("#pragma unroll 1" if big else "#pragma unroll")
    lw.out.open(f"for (int i = 0; i < {registers(acc.type)}; ++i)")
    lw.out.line(f"#pragma unroll {PARTIAL_UNROLL}" if big else "#pragma unroll")
    lw.out.line(f"for (int kk = 0; kk < {k}; ++kk) {target}[i] += ({prod_t})({av}) * ({prod_t})({bv});")
    lw.out.close()
    t = result.type.element
    if prod_t == "int":
        lw.assign_elementwise(result, lambda i: f"{target}[{i}]")
    else:
        lw.assign_elementwise(result, lambda i: lw.target.from_compute(f"{work}[{i}]", t))


__all__ = ["C"]
