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

Arithmetic on 32-bit registers (``_Machine``: the packed-f32 helpers of TLX's Blackwell
kernels, ``pack=2``): a ``{ ... }`` block, ``.reg .b32`` / ``.reg .b64`` declarations,
``mov.b64 r, {$a, $b}`` / ``mov.b64 {$a, $b}, r`` (two 32-bit words into / out of a 64-bit
register, the first the low word) and ``mov.b32``; ``add``, ``sub``, ``mul`` (``.f32``,
``.f32x2``, rounding ``.rn`` or none), ``fma.rn`` (``.f32``, ``.f32x2``; computed in float64
and rounded once more to float32, which can differ from the hardware's single rounding in
the last bit), ``tanh.approx.f32`` and ``ex2.approx[.ftz].f32`` (computed exactly in
float32: the hardware's approximations are within about 2^-11 relative of that); the
32-bit integer operations ``and``, ``or``, ``xor``, ``not``, ``shl`` (``.b32``), ``shr``
(``.b32``/``.u32`` logical, ``.s32`` arithmetic; shifts past 31 clamp as PTX says),
``add``/``sub``/``mul.lo`` (``.u32``/``.s32``, wrapping), ``prmt.b32`` (the default mode:
byte selectors, bit 3 of a selector replicating the byte's sign) and ``lop3.b32`` (any
truth table).  An output operand is a register: the asm may read it after writing it,
and its last write is the result.  With ``pack=p`` a run is ``p`` consecutive elements
(row-major), which an elementwise asm cannot tell from the GPU's register runs; a
result or operand narrower than 32 bits has ``min(32 // bits, p)`` of them packed in
each 32-bit word (the first in the lowest bits, as Triton packs them; ``ir/ops/warp.py``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..ir.ops.warp import elements_per_register
from ..ir.types import ScalarType
from .values import from_storage, round_to, storage_dtype, to_storage

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


def _special_register(name: str, width: int) -> int | None:
    """A ``mov`` source that is a special register the interpreter can answer: ``%globaltimer``
    (nanoseconds of the host's clock), ``%clock`` / ``%clock64`` (a counter that grows), ``%smid``
    (0: the interpreter is one multiprocessor); None for anything else."""
    import time
    if name == "%globaltimer":
        value = time.time_ns()
    elif name in ("%clock", "%clock64"):
        value = time.perf_counter_ns()
    elif name == "%smid":
        value = 0
    else:
        return None
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
        special = _special_register(operands[1], width) if operands[1].startswith("%") else None
        try:
            movs.append(_Mov(int(target.group(1)), int(source.group(1)) if source else None,
                             0 if source else special if special is not None else _immediate(operands[1], width)))
        except ValueError:
            raise UnsupportedPtx(statement) from None
    written = sorted(m.out for m in movs)
    if written != list(range(outputs)):
        raise UnsupportedPtx(f"the asm writes outputs {written} of {list(range(outputs))} (each exactly once)")
    return movs


# -- 32-bit register arithmetic (f32 / f32x2) ---------------------------------------------------------
_REG_DECL = re.compile(r"\.reg\s+\.(b32|b64|f32|u32|s32)\s+(.+)$", re.S)
_ARITH = {"add": 2, "sub": 2, "mul": 2, "fma": 3, "tanh": 1, "ex2": 1}


def _operands(text: str) -> list[str]:
    """Comma-separated operands, a ``{a, b}`` vector kept whole."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


class _Machine:
    """Runs a block of 32-bit register PTX on numpy vectors: every register holds a list of
    uint32 word arrays (one for .b32, two for .b64, low word first)."""

    def __init__(self, inputs: dict[int, np.ndarray], outputs: int, size: int):
        self.inputs, self.outputs, self.size = inputs, outputs, size
        self.regs: dict[str, list | None] = {}
        self.widths: dict[str, int] = {}
        self.written: dict[int, np.ndarray] = {}

    def run(self, asm: str) -> None:
        for statement in _statements(asm):
            text = statement.strip()
            while text[:1] in ("{", "}"):
                text = text[1:].strip()
            if not text:
                continue
            declared = _REG_DECL.match(text)
            if declared:
                for name in _operands(declared.group(2)):
                    self.regs[name] = None
                    self.widths[name] = int(declared.group(1)[1:])
                continue
            parts = text.split(None, 1)
            opcode, operands = parts[0], _operands(parts[1] if len(parts) > 1 else "")
            self.execute(opcode, operands, text)

    def execute(self, opcode: str, operands: list[str], statement: str) -> None:
        kind = opcode.split(".")
        if kind[0] == "nanosleep":
            return
        if kind[0] == "mov" and len(kind) == 2 and kind[1] in ("b32", "b64", "f32", "u32", "s32") and \
                len(operands) == 2:
            self.assign(operands[0], self.words(operands[1], statement), statement)
            return
        if kind[0] in _INTEGER and len(kind) >= 2 and kind[-1] in ("b32", "u32", "s32"):
            self.integer(kind, operands, statement)
            return
        if kind[0] in ("add", "sub", "mul", "fma") and kind[-1] in ("bf16x2", "f16x2"):
            self.half2(kind, operands, statement)
            return
        if kind[0] not in _ARITH or kind[-1] not in ("f32", "f32x2"):
            raise UnsupportedPtx(statement)
        modifiers = set(kind[1:-1])
        allowed = {"tanh": {"approx"}, "ex2": {"approx", "ftz"}, "fma": {"rn"}}.get(kind[0], {"rn"})
        if not modifiers <= allowed or (kind[0] in ("tanh", "ex2") and "approx" not in modifiers) or \
                (kind[0] == "fma" and "rn" not in modifiers) or \
                (kind[0] in ("tanh", "ex2") and kind[-1] != "f32") or len(operands) != 1 + _ARITH[kind[0]]:
            raise UnsupportedPtx(statement)
        lanes = 2 if kind[-1] == "f32x2" else 1
        sources = [self.words(o, statement) for o in operands[1:]]
        if any(len(w) != lanes for w in sources):
            raise UnsupportedPtx(statement)
        result = []
        with np.errstate(all="ignore"):
            for lane in range(lanes):
                x = [w[lane].view(np.float32) for w in sources]
                if kind[0] == "add":
                    y = x[0] + x[1]
                elif kind[0] == "sub":
                    y = x[0] - x[1]
                elif kind[0] == "mul":
                    y = x[0] * x[1]
                elif kind[0] == "fma":
                    y = (x[0].astype(np.float64) * x[1] + x[2]).astype(np.float32)
                elif kind[0] == "tanh":
                    y = np.tanh(x[0])
                else:
                    src = np.where(np.abs(x[0]) < np.finfo(np.float32).tiny, np.float32(0), x[0]) \
                        if "ftz" in modifiers else x[0]
                    y = np.exp2(src).astype(np.float32)
                    if "ftz" in modifiers:
                        y = np.where(np.abs(y) < np.finfo(np.float32).tiny, np.float32(0), y)
                result.append(np.asarray(y, dtype=np.float32).view(np.uint32))
        self.assign(operands[0], result, statement)

    def integer(self, kind: list[str], operands: list[str], statement: str) -> None:
        """The 32-bit integer operations (``_INTEGER``: operand counts), wrapping as the hardware does."""
        op, suffix, modifiers = kind[0], kind[-1], kind[1:-1]
        allowed = {"and": "b", "or": "b", "xor": "b", "not": "b", "shl": "b", "shr": "bus", "add": "us",
                   "sub": "us", "mul": "us", "prmt": "b", "lop3": "b"}[op]
        if suffix[0] not in allowed or modifiers != (["lo"] if op == "mul" else []) or \
                len(operands) != 1 + _INTEGER[op]:
            raise UnsupportedPtx(statement)
        sources = [self.words(o, statement) for o in operands[1:]]
        if any(len(w) != 1 for w in sources):
            raise UnsupportedPtx(statement)
        x = [w[0].astype(np.uint64) for w in sources]
        mask = np.uint64(0xFFFFFFFF)
        if op in ("and", "or", "xor"):
            y = {"and": x[0] & x[1], "or": x[0] | x[1], "xor": x[0] ^ x[1]}[op]
        elif op == "not":
            y = ~x[0] & mask
        elif op == "shl":
            y = np.where(x[1] > 31, 0, (x[0] << np.minimum(x[1], 31)) & mask)
        elif op == "shr" and suffix == "s32":
            signed = x[0].astype(np.uint32).view(np.int32).astype(np.int64)
            y = (signed >> np.minimum(x[1], 31).astype(np.int64)).astype(np.uint64) & mask
        elif op == "shr":
            y = np.where(x[1] > 31, 0, x[0] >> np.minimum(x[1], 31))
        elif op in ("add", "sub", "mul"):
            y = {"add": x[0] + x[1], "sub": x[0] - x[1], "mul": x[0] * x[1]}[op] & mask
        elif op == "prmt":
            y = _prmt(x[0], x[1], x[2])
        else:
            y = _lop3(x[0], x[1], x[2], x[3])
        self.assign(operands[0], [np.asarray(y, dtype=np.uint64).astype(np.uint32)], statement)

    def half2(self, kind: list[str], operands: list[str], statement: str) -> None:
        """``add``/``sub``/``mul``/``fma.rn`` on ``.bf16x2`` / ``.f16x2``: two 16-bit lanes of a 32-bit
        register (the first the low half), each computed in float64 and rounded once to the lane's
        type (round to nearest even)."""
        op, suffix, modifiers = kind[0], kind[-1], set(kind[1:-1])
        if not modifiers <= {"rn"} or (op == "fma" and "rn" not in modifiers) or \
                len(operands) != 1 + _ARITH[op]:
            raise UnsupportedPtx(statement)
        sources = [self.words(o, statement) for o in operands[1:]]
        if any(len(w) != 1 for w in sources):
            raise UnsupportedPtx(statement)
        t = _HALF_TYPES[suffix]
        word = np.zeros(self.size, dtype=np.uint32)
        with np.errstate(all="ignore"):
            for lane in range(2):
                x = [from_storage(((w[0] >> np.uint32(16 * lane)) & np.uint32(0xFFFF)).astype(np.uint16)
                                  .view(storage_dtype(t)), t).astype(np.float64) for w in sources]
                if op == "fma":
                    y = x[0] * x[1] + x[2]
                else:
                    y = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op](x[0], x[1])
                word |= _unsigned_bits(round_to(y, t), t) << np.uint32(16 * lane)
        self.assign(operands[0], [word], statement)

    def words(self, text: str, statement: str) -> list[np.ndarray]:
        text = text.strip()
        if text.startswith("{") and text.endswith("}"):
            words = []
            for part in _operands(text[1:-1]):
                words += self.words(part, statement)
            return words
        operand = _OPERAND.match(text)
        if operand:
            n = int(operand.group(1))
            if n in self.written:                   # an output register, read back after its write
                return [self.written[n]]
            if n not in self.inputs:
                raise UnsupportedPtx(f"{statement} (reads ${n}, which is no 32-bit input operand"
                                     f"{' or written output' if n < self.outputs else ''})")
            return [self.inputs[n]]
        if text in self.regs:
            if self.regs[text] is None:
                raise UnsupportedPtx(f"{statement} (reads {text} before it is written)")
            return self.regs[text]
        try:
            bits = _immediate(text, 32)
        except ValueError:
            raise UnsupportedPtx(statement) from None
        return [np.full(self.size, bits, dtype=np.uint32)]

    def assign(self, text: str, words: list[np.ndarray], statement: str) -> None:
        text = text.strip()
        if text.startswith("{") and text.endswith("}"):
            targets = _operands(text[1:-1])
            if len(targets) != len(words):
                raise UnsupportedPtx(statement)
            for target, word in zip(targets, words):
                self.assign(target, [word], statement)
            return
        operand = _OPERAND.match(text)
        if operand:
            n = int(operand.group(1))
            if n >= self.outputs or len(words) != 1:
                raise UnsupportedPtx(f"{statement} (writes ${n}, which is no 32-bit output operand)")
            self.written[n] = words[0]
            return
        if text not in self.regs or self.widths[text] != 32 * len(words):
            raise UnsupportedPtx(statement)
        self.regs[text] = [np.array(w, dtype=np.uint32) for w in words]


def _prmt(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``prmt.b32`` default mode: result byte i is byte ``c[4i+2:4i]`` of ``{b, a}`` (a's bytes 0-3,
    b's 4-7), or that byte's sign bit replicated when ``c[4i+3]`` is set."""
    pool = a | (b << np.uint64(32))
    out = np.zeros_like(a)
    for i in range(4):
        selector = (c >> np.uint64(4 * i)) & np.uint64(0xF)
        byte = (pool >> ((selector & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
        byte = np.where(selector & np.uint64(8), np.where(byte & np.uint64(0x80), np.uint64(0xFF), np.uint64(0)),
                        byte)
        out |= byte << np.uint64(8 * i)
    return out


def _lop3(a: np.ndarray, b: np.ndarray, c: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """``lop3.b32``: bit k of the result is bit ``(a_k << 2) | (b_k << 1) | c_k`` of the table."""
    mask = np.uint64(0xFFFFFFFF)
    out = np.zeros_like(a)
    for index in range(8):
        term = np.where((lut >> np.uint64(index)) & np.uint64(1), mask, np.uint64(0))
        for bit, x in ((4, a), (2, b), (1, c)):
            term = term & (x if index & bit else ~x & mask)
        out |= term
    return out


_HALF_TYPES = {"bf16x2": ScalarType("bf16"), "f16x2": ScalarType("f16")}
_INTEGER = {"and": 2, "or": 2, "xor": 2, "not": 1, "shl": 2, "shr": 2, "add": 2, "sub": 2, "mul": 2, "prmt": 3,
            "lop3": 4}


def _unsigned_bits(values, t: ScalarType) -> np.ndarray:
    """``t``'s register values as their bits, widened to uint32 (``t`` of 32 bits or fewer)."""
    bits = np.ascontiguousarray(to_storage(values, t))
    return bits.view(f"u{bits.dtype.itemsize}").astype(np.uint32)


def _run_machine(asm: str, result_types, inputs: list, shape: tuple[int, ...], outputs_count: int,
                 pack: int, input_types=None) -> list:
    size = max(1, int(np.prod(shape))) if shape else 1
    if size % pack:
        raise UnsupportedPtx(f"pack={pack} over {size} elements")
    runs = size // pack
    # the operand numbers: every result's registers, then every input's (``per`` elements packed in each)
    out_regs = []
    for r, t in enumerate(result_types):
        if t.bits > 32:
            raise UnsupportedPtx(f"a {t} output (arithmetic runs on 32-bit registers)")
        per = elements_per_register(t, pack)          # (per = 1 below 32 bits: the element widened, "=r")
        out_regs += [(r, j, per) for j in range(0, pack, per)]
    words: dict[int, np.ndarray] = {}
    n = len(out_regs)
    for a, value in enumerate(inputs):
        flat = np.ascontiguousarray(np.broadcast_to(np.asarray(value), shape or ())).reshape(-1)
        t = input_types[a] if input_types is not None else None
        if t is None:                       # (untyped: 32-bit registers as they are)
            if flat.dtype.itemsize != 4:
                raise UnsupportedPtx(f"a {flat.dtype.itemsize * 8}-bit input (arithmetic runs on 32-bit registers)")
            bits, per, width = flat.view(np.uint32), 1, 32
        else:
            if not isinstance(t, ScalarType) or t.bits > 32:
                raise UnsupportedPtx(f"a {t} input (arithmetic runs on 32-bit registers)")
            per, width = elements_per_register(t, pack), t.bits
            bits = _unsigned_bits(flat, t)
        for j in range(0, pack, per):
            word = np.zeros(runs, dtype=np.uint32)
            for e in range(per):
                word |= bits[j + e::pack] << np.uint32(e * width)
            words[n] = word
            n += 1
    machine = _Machine(words, len(out_regs), runs)
    machine.run(asm)
    missing = [k for k in range(len(out_regs)) if k not in machine.written]
    if missing:
        raise UnsupportedPtx(f"the asm leaves outputs {missing} unwritten")
    results = []
    for r, t in enumerate(result_types):
        raw = np.empty(size, dtype=np.uint32)
        for k, (rr, j, per) in enumerate(out_regs):
            if rr != r:
                continue
            for e in range(per):
                raw[j + e::pack] = (machine.written[k] >> np.uint32(e * t.bits)) & np.uint32((1 << t.bits) - 1)
        storage = storage_dtype(t)
        value = from_storage(raw.astype(f"u{storage.itemsize}").view(storage), t)
        results.append(value.reshape(shape) if shape else value[0])
    return results


def run_inline_ptx(asm: str, result_types: list[ScalarType], inputs: list, shape: tuple[int, ...],
                   register_dtype, outputs_count: int, pack: int = 1, input_types=None) -> list:
    """The outputs of ``asm`` (numpy values of ``shape``, or scalars for ``shape == ()``), or
    ``UnsupportedPtx``.  ``inputs`` are the operand values in order (after the outputs), of
    ``input_types`` (element types; None: 32-bit registers as they are)."""
    try:
        if pack != 1:
            raise UnsupportedPtx("pack")
        plan = _plan(asm, outputs_count)
    except UnsupportedPtx as first:
        try:
            return _run_machine(asm, result_types, inputs, shape, outputs_count, pack, input_types)
        except UnsupportedPtx as exc:
            raise (first if pack == 1 and str(first) != "pack" and _only_movs(asm) else exc) from None
    return _run_plan(plan, result_types, inputs, shape, register_dtype, outputs_count)


def _only_movs(asm: str) -> bool:
    return all(s.split(None, 1)[0].startswith(("mov.", "nanosleep")) for s in _statements(asm))


def _run_plan(plan, result_types, inputs, shape, register_dtype, outputs_count) -> list:
    results: list = [None] * outputs_count
    for mov in plan:
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
