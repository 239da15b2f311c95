"""The few PTX instructions the interpreter runs inside ``tl.inline_asm_elementwise``.

Inline PTX is the GPU's; the interpreter executes an asm string only when every
statement in it is one it models exactly, and refuses the whole asm otherwise
(``interpreter/warp.py`` raises the located error, naming the first statement
it cannot run).  Modelled:

* ``nanosleep.u32 t;``: a scheduling hint (the thread sleeps up to ``t`` ns); no
  value changes, so nothing happens here;
* ``mov.<type> $k, x;`` with ``$k`` an output operand and ``x`` an integer
  immediate (decimal or ``0x`` hex), a ``0f``/``0d`` hex float immediate, or an
  input operand ``$j``: the output takes ``x``'s bits, element by element
  (``pack=1``: one register per element).

Every output must be written by exactly one ``mov``: an output the asm leaves
unwritten holds garbage on the GPU, which the interpreter does not invent.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..ir.types import ScalarType

_MOV_TYPES = {"b16", "u16", "s16", "b32", "u32", "s32", "f32", "b64", "u64", "s64", "f64"}
_OPERAND = re.compile(r"\$(\d+)$")


class UnsupportedPtx(Exception):
    """A statement the interpreter does not model (its text is the message)."""


@dataclass(frozen=True)
class _Mov:
    out: int
    source: int | None          # an input operand number, or None for an immediate
    bits: int                   # the immediate's bits


def _statements(asm: str) -> list[str]:
    text = re.sub(r"//[^\n]*", "", asm)
    return [s.strip() for s in text.split(";") if s.strip()]


def _immediate(text: str, width: int) -> int:
    lowered = text.lower()
    if lowered.startswith(("0f", "0d")) and len(lowered) > 2:
        value = int(lowered[2:], 16)
    else:
        value = int(text, 0)
    return value & ((1 << width) - 1)


def _plan(asm: str, outputs: int) -> list[_Mov]:
    movs: list[_Mov] = []
    for statement in _statements(asm):
        parts = statement.split(None, 1)
        opcode, rest = parts[0], (parts[1] if len(parts) > 1 else "")
        if opcode == "nanosleep.u32":
            continue
        kind = opcode.split(".")
        if len(kind) != 2 or kind[0] != "mov" or kind[1] not in _MOV_TYPES:
            raise UnsupportedPtx(statement)
        operands = [p.strip() for p in rest.split(",")]
        target = _OPERAND.match(operands[0]) if len(operands) == 2 else None
        if target is None or int(target.group(1)) >= outputs:
            raise UnsupportedPtx(statement)
        width = int(kind[1][1:])
        source = _OPERAND.match(operands[1])
        try:
            movs.append(_Mov(int(target.group(1)), int(source.group(1)) if source else None,
                             0 if source else _immediate(operands[1], width)))
        except ValueError:
            raise UnsupportedPtx(statement) from None
    written = sorted(m.out for m in movs)
    if written != list(range(outputs)):
        raise UnsupportedPtx(f"the asm writes outputs {written} of {list(range(outputs))} (each exactly once)")
    return movs


def run_inline_ptx(asm: str, result_types: list[ScalarType], inputs: list, shape: tuple[int, ...],
                   register_dtype, outputs_count: int) -> list:
    """The outputs of ``asm`` (numpy values of ``shape``, or scalars for ``shape == ()``), or
    ``UnsupportedPtx``.  ``inputs`` are the operand values in order (after the outputs)."""
    results: list = [None] * outputs_count
    for mov in _plan(asm, outputs_count):
        t = result_types[mov.out]
        dtype = register_dtype(t)
        if dtype.itemsize * 8 != t.bits:            # f16/bf16 registers hold wider floats here
            raise UnsupportedPtx(f"mov into a {t} output")
        if mov.source is not None:
            index = mov.source - outputs_count
            if not 0 <= index < len(inputs):
                raise UnsupportedPtx(f"mov from ${mov.source}, which is no input operand")
            value = np.asarray(inputs[index])
            if value.dtype.itemsize != dtype.itemsize:
                raise UnsupportedPtx(f"mov of a {value.dtype.itemsize * 8}-bit input into a {t} output")
            value = np.broadcast_to(np.ascontiguousarray(value).view(dtype), shape).copy()
        else:
            unsigned = np.dtype(f"u{dtype.itemsize}")
            value = np.full(shape, mov.bits, dtype=unsigned).view(dtype)
        results[mov.out] = value if shape else value[()]
    return results


__all__ = ["UnsupportedPtx", "run_inline_ptx"]
