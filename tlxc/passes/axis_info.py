"""Axis-info analysis: what codegen may assume about integer and pointer tensors.

For every value and every dimension it computes

* ``contiguity``: length of runs of consecutive values (+1 each step) along the dim;
* ``divisibility``: a power of two dividing the first value of each run
  (elements for integers, bytes for pointers);
* ``constancy``: length of runs of equal values along the dim.

Loads and stores use them to pick vector widths (16-byte accesses need a
16-byte-aligned, contiguous run under a mask that is constant over the run).
Loop-carried values meet their initial and yielded facts (a bounded fixpoint).

A hint (``tl.multiple_of`` / ``tl.max_contiguous``) describes its operand as well as its
result, as in Triton, where the hint is an attribute of the hinted value's defining op (of
the loop for a loop-carried value): ``tl.multiple_of(a_ptrs, [16, 16])`` written as a
statement inside a K loop (Triton's grouped GEMM tutorial) makes every use of the loop's
``a_ptrs`` 16-byte aligned.  Kernel arguments are the exception, in Triton too (their
facts come from the launch's specialization).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from ..ir.core import Operation, Value
from ..ir.types import PointerType, ScalarType, TensorType

MAX_DIVISIBILITY = 1 << 30


def _pow2_divisor(n: int) -> int:
    if n == 0:
        return MAX_DIVISIBILITY
    n = abs(int(n))
    return min(n & -n, MAX_DIVISIBILITY)


@dataclass(frozen=True)
class AxisInfo:
    contiguity: tuple[int, ...]
    divisibility: tuple[int, ...]
    constancy: tuple[int, ...]
    value: int | None = None          # every element equals this known integer

    @staticmethod
    def unknown(rank: int) -> AxisInfo:
        r = max(rank, 1)
        return AxisInfo((1,) * r, (1,) * r, (1,) * r)

    def meet(self, other: AxisInfo) -> AxisInfo:
        return AxisInfo(tuple(map(min, self.contiguity, other.contiguity)),
                        tuple(map(gcd, self.divisibility, other.divisibility)),
                        tuple(map(min, self.constancy, other.constancy)))


def _shape(t) -> tuple[int, ...]:
    return t.shape if isinstance(t, TensorType) else ()


def _elem_bytes(t) -> int:
    elem = t.element if isinstance(t, TensorType) else t
    if isinstance(elem, PointerType):
        pointee = elem.pointee
        return pointee.bytes if isinstance(pointee, ScalarType) else 8
    return 1


class AxisAnalysis:
    """Run once per kernel; ``info(value)`` answers queries."""

    def __init__(self, kernel: Operation):
        self.facts: dict[int, AxisInfo] = {}
        self.hints: dict[int, list[Operation]] = {}        # hinted value -> its tl.hint ops
        for op in kernel.walk():
            if op.name == "tl.hint":
                self.hints.setdefault(id(op.operands[0]), []).append(op)
        body = kernel.regions[0].block
        divs = kernel.attrs.get("arg_divisibility", ())
        for i, arg in enumerate(body.args):
            d = divs[i] if i < len(divs) else 1
            self.facts[id(arg)] = AxisInfo((1,), (d,), (1,))
        self.visit_block(body)

    def info(self, value: Value) -> AxisInfo:
        return self.facts.get(id(value)) or AxisInfo.unknown(len(_shape(value.type)))

    # -- traversal -------------------------------------------------------------------
    def visit_block(self, block) -> None:
        for op in block.ops:
            self.visit(op)

    def visit(self, op: Operation) -> None:
        if op.name == "scf.for":
            return self.visit_loop(op, op.regions[0].block, op.operands[3:], first_arg=1)
        if op.name == "scf.while":
            for region in op.regions:
                for arg in region.block.args:
                    self.facts[id(arg)] = AxisInfo.unknown(len(_shape(arg.type)))
                self.visit_block(region.block)
            for r in op.results:
                self.facts[id(r)] = AxisInfo.unknown(len(_shape(r.type)))
            return
        if op.name == "scf.if":
            for region in op.regions:
                self.visit_block(region.block)
            for i, r in enumerate(op.results):
                a = self.info(op.regions[0].block.terminator.operands[i])
                b = self.info(op.regions[1].block.terminator.operands[i])
                self.facts[id(r)] = a.meet(b)
            return
        for region in op.regions:       # e.g. tlx.async_tasks: analyse each task's body
            self.visit_block(region.block)
        rule = _RULES.get(op.name)
        for r in op.results:
            rank = len(_shape(r.type))
            self.facts[id(r)] = self.hinted(r, rule(self, op, r) if rule else AxisInfo.unknown(rank))

    def hinted(self, value: Value, fact: AxisInfo) -> AxisInfo:
        """``fact`` with the hints applied to ``value`` itself (module docstring)."""
        for hint in self.hints.get(id(value), ()):
            fact = _apply_hint(hint, fact)
        return fact

    def visit_loop(self, op, block, inits, first_arg: int) -> None:
        iv = block.args[0]
        self.facts[id(iv)] = AxisInfo((1,), (gcd(self.info(op.operands[0]).divisibility[0],
                                                self.info(op.operands[2]).divisibility[0]),), (1,))
        carried = block.args[first_arg:]
        current = [self.info(v) for v in inits]
        for _ in range(3):
            for arg, fact in zip(carried, current):
                self.facts[id(arg)] = self.hinted(arg, fact)
            self.visit_block(block)
            yielded = [self.info(v) for v in block.terminator.operands]
            new = [c.meet(y) for c, y in zip(current, yielded)]
            if new == current:
                break
            current = new
        else:
            current = [AxisInfo.unknown(len(_shape(a.type))) for a in carried]
            for arg, fact in zip(carried, current):
                self.facts[id(arg)] = self.hinted(arg, fact)
            self.visit_block(block)
        for r, fact in zip(op.results, current):
            self.facts[id(r)] = fact


# -- rules ---------------------------------------------------------------------------------
_RULES = {}


def rule(*names):
    def register(fn):
        for n in names:
            _RULES[n] = fn
        return fn
    return register


@rule("arith.constant")
def _constant(a, op, r):
    shape = _shape(r.type) or (1,)
    value = op.attrs["value"]
    known = isinstance(value, int) and not isinstance(value, bool)
    div = _pow2_divisor(value) if known else 1
    return AxisInfo((1,) * len(shape), (div,) * len(shape), tuple(shape), value if known else None)


@rule("tl.arange")
def _arange(a, op, r):
    n = op.attrs["end"] - op.attrs["start"]
    return AxisInfo((n,), (_pow2_divisor(op.attrs["start"]),), (1,))


@rule("tl.splat")
def _splat(a, op, r):
    src = a.info(op.operands[0])
    shape = r.type.shape
    return AxisInfo((1,) * len(shape), (src.divisibility[0],) * len(shape), tuple(shape), src.value)


@rule("tl.expand_dims")
def _expand_dims(a, op, r):
    src = a.info(op.operands[0])
    axis = op.attrs["axis"]
    ins = lambda t, v: t[:axis] + (v,) + t[axis:]
    # Along the new dim every element starts a run, so its divisibility must hold for each
    # element: it does along a dim whose runs are single elements, never along a contiguous one
    # (rows[:, None] * odd_stride is not aligned).
    singles = [d for c, d in zip(src.contiguity, src.divisibility) if c == 1]
    return AxisInfo(ins(src.contiguity, 1), ins(src.divisibility, max(singles, default=1)), ins(src.constancy, 1),
                    src.value)


@rule("tl.broadcast")
def _broadcast(a, op, r):
    src = a.info(op.operands[0])
    old, new = op.operands[0].type.shape, r.type.shape
    cont = tuple(c if o == n else 1 for c, o, n in zip(src.contiguity, old, new))
    const = tuple(c if o == n else n for c, o, n in zip(src.constancy, old, new))
    return AxisInfo(cont, src.divisibility, const, src.value)


@rule("tl.convert_layout", "tl.hint_passthrough")
def _same(a, op, r):
    return a.info(op.operands[0])


@rule("tl.hint")
def _hint(a, op, r):
    return _apply_hint(op, a.info(op.operands[0]))


def _apply_hint(op, src: AxisInfo) -> AxisInfo:
    cont, div = src.contiguity, src.divisibility
    if "max_contiguous" in op.attrs:
        cont = tuple(op.attrs["max_contiguous"])
    if "multiple_of" in op.attrs:
        div = tuple(_pow2_divisor(v) for v in op.attrs["multiple_of"])
    return AxisInfo(cont, div, src.constancy)


@rule("arith.add", "arith.sub", "tl.addptr")
def _add(a, op, r):
    x, y = (a.info(v) for v in op.operands)
    scale = _elem_bytes(r.type) if op.name == "tl.addptr" else 1
    cont = tuple(max(min(cx, ky), min(kx, cy)) for cx, cy, kx, ky in
                 zip(x.contiguity, y.contiguity, x.constancy, y.constancy))
    div = tuple(gcd(dx, min(dy * scale, MAX_DIVISIBILITY)) for dx, dy in zip(x.divisibility, y.divisibility))
    if op.name == "arith.sub":
        cont = tuple(min(cx, ky) for cx, ky in zip(x.contiguity, y.constancy))
    const = tuple(map(gcd, x.constancy, y.constancy))
    return AxisInfo(cont, div, const)


@rule("arith.mul")
def _mul(a, op, r):
    x, y = (a.info(v) for v in op.operands)
    if y.value == 1:            # x * 1 (e.g. a unit stride specialized to the constant 1)
        return x
    if x.value == 1:
        return y
    cont = [1] * len(x.contiguity)     # (zipping with the two operands cut rank-3 facts short)
    div = tuple(min(dx * dy, MAX_DIVISIBILITY) for dx, dy in zip(x.divisibility, y.divisibility))
    return AxisInfo(tuple(cont), div, tuple(map(gcd, x.constancy, y.constancy)))


@rule("arith.rem")
def _rem(a, op, r):
    """``x % n`` with ``n`` constant along a dim and divisible by ``d``: a run of ``x`` starting
    at a multiple of ``g = gcd(run, d, divisibility of x)`` wraps only at multiples of ``n``, so
    runs of ``g`` stay contiguous (Triton's rule; like Triton it assumes the runs are not
    negative, where C's remainder wraps on the other side of a multiple)."""
    x, y = (a.info(v) for v in op.operands)
    cont = tuple(gcd(cx, dy, dx) if ky >= cx > 1 else 1 for cx, dx, dy, ky in
                 zip(x.contiguity, x.divisibility, y.divisibility, y.constancy))
    div = tuple(map(gcd, x.divisibility, y.divisibility))
    return AxisInfo(cont, div, tuple(map(gcd, x.constancy, y.constancy)))


@rule("arith.cmp")
def _cmp(a, op, r):
    x, y = (a.info(v) for v in op.operands)
    const = []
    for cx, kx, dx, cy, ky, dy in zip(x.contiguity, x.constancy, x.divisibility,
                                      y.contiguity, y.constancy, y.divisibility):
        c = gcd(kx, ky)
        if op.attrs["predicate"] in ("lt", "le", "gt", "ge"):
            # a contiguous run aligned to d compared with a constant aligned to d:
            # the outcome can only change at multiples of gcd(d, d').
            if cx > 1 and ky >= cx:
                c = max(c, min(cx, gcd(dx, dy)))
            if cy > 1 and kx >= cy:
                c = max(c, min(cy, gcd(dx, dy)))
        const.append(c)
    rank = len(const)
    return AxisInfo((1,) * rank, (1,) * rank, tuple(const))


@rule("arith.and", "arith.or", "arith.xor", "arith.select", "arith.not", "arith.bitcast")
def _elementwise_const(a, op, r):
    infos = [a.info(v) for v in op.operands]
    rank = len(infos[0].constancy)
    const = infos[0].constancy
    for i in infos[1:]:
        const = tuple(map(gcd, const, i.constancy))
    return AxisInfo((1,) * rank, (1,) * rank, const)


def _scalar(t):
    return t.element if isinstance(t, TensorType) else t


@rule("arith.cast")
def _cast(a, op, r):
    """A widening integer cast (i32 -> i64: block pointers' 64-bit strides) keeps every
    value, so it keeps every fact; other casts keep only constancy."""
    src, dst = _scalar(op.operands[0].type), _scalar(r.type)
    if isinstance(src, ScalarType) and isinstance(dst, ScalarType) and src.is_integer and dst.is_integer \
            and not src.is_boolean:
        widening = dst.bits > src.bits or (dst.bits == src.bits and dst.kind == src.kind)
        if widening and not (src.is_signed and dst.is_unsigned):    # negative values would change
            return a.info(op.operands[0])
    return _elementwise_const(a, op, r)
