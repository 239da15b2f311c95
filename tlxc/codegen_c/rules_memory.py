"""Lowering of global-memory ops: pointer arithmetic, vectorized loads and
stores, atomics.

A load/store over a tensor groups each thread's registers into vectors of
``width`` consecutive elements along the layout's fastest dim (``vector_dim``: the
last dim, or dim 0 of a column-major tile) when the layout, the pointer's contiguity
and alignment (axis info) and the mask's constancy all allow it, up to 16 bytes,
and issues one predicated vector access per group.  Cache hints (cache_modifier=,
eviction_policy=, volatile=) change the instruction, never the grouping.
"""
from __future__ import annotations

from ..errors import InternalCompilerError
from ..ir.core import OpResult
from ..ir.types import PointerType, TensorType
from ..passes.uniformity import Uniformity
from . import c_types as C
from .lower import elem, lowering, register_part, registers


@lowering("tl.addptr")
def addptr(lw, op):
    p, off = op.operands
    users = _users(lw).get(id(op.results[0]), [])
    if users and all(user.name in ("tl.load", "tl.store") and index == 0 and _row_form(user.operands[0])
                     for user, index in users):
        # only loads and stores use these pointers, and they address the row themselves
        # (_pointer): no per-register pointers; the operands count as used
        lw.out.line(f"(void){lw.ref(p, '0')}; (void){lw.ref(off, '0')};")
        return
    if op.attrs.get("opaque_base"):
        # (passes/pipeline.py, TLXC_RING_BASE) the base through the target's opaque copy: the
        # device compiler adds the offset to it instead of re-deriving it from its parts
        lw.assign_elementwise(op.results[0],
                              lambda i: f"({lw.target.opaque_pointer(lw.ref(p, i))} + {lw.ref(off, i)})")
        return
    lw.assign_elementwise(op.results[0], lambda i: f"({lw.ref(p, i)} + {lw.ref(off, i)})")


def _users(lw) -> dict[int, list]:
    """id(value) -> [(op, operand index)] of the ops that read it (computed once per kernel)."""
    found = lw.rule_state.get("memory.users")
    if found is None:
        found = {}
        for user in lw.kernel.walk():
            for index, v in enumerate(user.operands):
                found.setdefault(id(v), []).append((user, index))
        lw.rule_state["memory.users"] = found
    return found


def _pointer(lw, ptr) -> str:
    """The C pointer of register ``i`` of the tensor of pointers ``ptr``.

    A row ``p + tl.arange(start, end)`` (``p`` one pointer splat over the row, the arange in
    the row's layout) is addressed from one pointer per thread, ``p + start + the thread's
    part``, plus the register's part, a constant once the register loop unrolls: NVVM folds it
    into the instruction's immediate offset.  From the per-register pointers, NVVM would
    compute each ``row * stride + column`` as a 64-bit value, share it between the loads and
    stores of the row and keep all of them live across the row's reductions (a softmax row
    kernel: 8 such pairs; 44 registers instead of 32, 10 CTAs of 4 warps per SM instead of 16).
    """
    form = _row_form(ptr)
    if form is None:
        return lw.ref(ptr)
    base, arange, scalar = form
    layout = ptr.type.layout
    offset = f"{arange.attrs['start']} + {lw.thread_term(layout, 'coord', 0)}"
    if scalar is not None:
        offset = f"{lw.name(scalar)} + ({offset})"
    name = lw.fresh("row")
    lw.out.line(f"{C.storage_type(ptr.type.element)} {name} = {lw.name(base)} + ({offset});")
    part = register_part(layout, lambda b: b[0], "i", " + ")
    return f"({name} + ({part}))" if part != "0" else name


def _row_form(ptr):
    """(scalar pointer, arange, scalar offset or None) when the tensor of pointers ``ptr`` is
    ``splat(pointer) + arange`` or ``splat(pointer) + (splat(offset) + arange)``, 1-D, in one
    layout whose bases add like they XOR; None otherwise."""
    add = _defined_by(ptr, "tl.addptr")
    if add is None or not isinstance(ptr.type, TensorType):
        return None
    layout = ptr.type.layout
    if len(layout.shape) != 1 or not layout.xor_equals_add(0):
        return None
    base, offsets = add.operands
    splat = _defined_by(base, "tl.splat")
    row = _row_offsets(offsets, layout)
    if splat is None or row is None:
        return None
    return (splat.operands[0],) + row


def _defined_by(value, name: str):
    op = value.owner if isinstance(value, OpResult) else None
    return op if op is not None and op.name == name else None


def _row_offsets(offsets, layout):
    """(arange, scalar or None) when ``offsets`` is ``tl.arange`` or ``scalar + tl.arange``
    (either order, ``scalar`` splat) in ``layout``; None otherwise."""
    if offsets.type.layout != layout:
        return None
    arange = _defined_by(offsets, "tl.arange")
    if arange is not None:
        return arange, None
    add = _defined_by(offsets, "arith.add")
    if add is None:
        return None
    for a, b in (add.operands, reversed(add.operands)):
        arange, splat = _defined_by(a, "tl.arange"), _defined_by(b, "tl.splat")
        if arange is not None and splat is not None and a.type.layout == layout:
            return arange, splat.operands[0]
    return None


def vector_dim(layout) -> int:
    """The dim a thread's consecutive registers run along: that of its first register
    basis (a blocked layout's fastest dim, e.g. dim 0 of a column-major tile's load
    layout), else the last dim."""
    rank = len(layout.shape)
    if layout.register:
        first = tuple(layout.register[0])
        nonzero = [d for d in range(rank) if first[d]]
        if len(nonzero) == 1 and first[nonzero[0]] == 1:
            return nonzero[0]
    return rank - 1


def vector_width(lw, ptr, mask, elem_bytes: int) -> int:
    """Elements per access (a power of two), at most 16 bytes, along ``vector_dim``."""
    layout = ptr.type.layout
    dim = vector_dim(layout)
    width = layout.contiguous_elements_per_thread(dim)
    info = lw.axis.info(ptr)
    width = min(width, info.contiguity[dim], max(1, info.divisibility[dim] // elem_bytes), 16 // elem_bytes)
    if mask is not None:
        width = min(width, lw.axis.info(mask).constancy[dim])
    w = 1
    while w * 2 <= width:
        w *= 2
    # Targets pack vectors into 32-bit words; a narrower group (two 8-bit
    # elements) goes element by element.
    return w if w * elem_bytes >= 4 else 1


def _operands(op):
    has_mask, has_other = op.attrs.get("has_mask"), op.attrs.get("has_other")
    mask = op.operands[1 if op.name == "tl.load" else 2] if has_mask else None
    other = op.operands[-1] if has_other else None
    return mask, other


def _hinted(op) -> bool:
    """Whether a load/store carries cache hints (cache_modifier=, eviction_policy=, volatile=):
    the target then issues it through its hinted accesses, vectorized as an unhinted one."""
    return any(op.attrs.get(key) for key in ("cache", "eviction", "volatile"))


@lowering("tl.load")
def load(lw, op):
    ptr = op.operands[0]
    mask, other = _operands(op)
    result = op.results[0]
    t = elem(result.type)
    if not isinstance(ptr.type, TensorType):
        init = C.constant_literal(0, t) if other is None else lw.ref(other)
        name = lw.declare(result, init=init)
        if _hinted(op):
            pred = lw.ref(mask) if mask is not None else "true"
            lw.out.line(lw.target.load_hinted([name], lw.ref(ptr), pred, [name], t, op.attrs))
            return
        guard = f"if ({lw.ref(mask)}) " if mask is not None else ""
        lw.out.line(f"{guard}{name} = *{lw.ref(ptr)};")
        return
    name = lw.declare(result)
    width = vector_width(lw, ptr, mask, t.bytes)
    count = registers(ptr.type)
    address = _pointer(lw, ptr)
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int i = 0; i < {count}; i += {width})")
    pred = lw.ref(mask) if mask is not None else "true"
    fill = lw.ref(other) if other is not None else C.constant_literal(0, t)
    lw.out.line(lw.target.load_vector(name, address, pred, fill, t, width, op.attrs))
    lw.out.close()


@lowering("tl.store")
def store(lw, op):
    # Each element is written by one slot only, as Triton does: a scalar by the scope's first
    # thread, a tensor element by the owner among its layout's replicas.  Were every copy to
    # write, a replica that loads an address after another has stored to it (the read-modify-
    # write of Liger's cross-entropy, `x = tl.load(p); tl.store(p, x + d)`, or the in-place
    # tiles of its RoPE over a layout that repeats a tile across warps) would apply it twice.
    # Under a branch on tlx.thread_id the user picked the threads, and an address or value
    # derived from it differs between threads: then each thread stores.
    ptr, value = op.operands[:2]
    mask, _ = _operands(op)
    t = elem(value.type)
    owner = _store_owner(lw, op, ptr.type)
    if not isinstance(ptr.type, TensorType):
        terms = [c for c in (owner, lw.ref(mask) if mask is not None else None) if c]
        if _hinted(op):
            pred = " && ".join(terms) or "true"
            lw.out.line(lw.target.store_hinted([lw.ref(value)], lw.ref(ptr), pred, t, op.attrs))
            return
        guard = f"if ({' && '.join(terms)}) " if terms else ""
        lw.out.line(f"{guard}*{lw.ref(ptr)} = {lw.ref(value)};")
        return
    width = vector_width(lw, ptr, mask, t.bytes)
    count = registers(ptr.type)
    address = _pointer(lw, ptr)
    lw.out.line("#pragma unroll")
    lw.out.open(f"for (int i = 0; i < {count}; i += {width})")
    pred = " && ".join(c for c in (owner, lw.ref(mask) if mask is not None else None) if c) or "true"
    lw.out.line(lw.target.store_vector(lw.name(value), address, pred, t, width, op.attrs))
    lw.out.close()


def _store_owner(lw, op, t) -> str | None:
    """The condition selecting the slots that write a store's elements (None: all of them)."""
    if _uniformity(lw).per_thread(op):
        return None
    try:
        return _owner(lw, t)
    except InternalCompilerError:
        return None          # elements repeated through non-zero bases: every copy writes, as before


# -- atomics ---------------------------------------------------------------------------------
# Each element is updated exactly once: only the thread (and register) that owns
# an element in the result's layout performs its atomic, the replicas do not; a
# scalar atomic runs on the scope's first thread.  Where the old values are used,
# the owners publish them through shared memory so that every replica reads them
# (a spin on tl.atomic_cas sees one answer in every thread).
#
# ``sem`` has its tile-level meaning, the interpreter's: a program is one thread of
# tiles.  A release (release, acq_rel) orders every earlier access of the program,
# whichever thread made it, so a barrier over the scope precedes the atomic; an
# acquire (acquire, acq_rel) orders every later access, so one follows it.  A
# relaxed atomic has neither (docs/language.md, "Atomics").


@lowering("tl.atomic_rmw")
def atomic_rmw(lw, op):
    ptr, value = op.operands[:2]
    mask, _ = _operands(op)
    template = lw.target.atomic(op.attrs["kind"], elem(value.type), op.attrs["sem"], op.attrs["scope"])
    _emit_atomic(lw, op, mask, lambda i: template.format(p=lw.ref(ptr, i), v=lw.ref(value, i)))


@lowering("tl.atomic_cas")
def atomic_cas(lw, op):
    ptr, cmp, value = op.operands
    template = lw.target.atomic("cas", elem(value.type), op.attrs["sem"], op.attrs["scope"])
    _emit_atomic(lw, op, None, lambda i: template.format(p=lw.ref(ptr, i), c=lw.ref(cmp, i),
                                                          v=lw.ref(value, i)))


def _emit_atomic(lw, op, mask, call_of) -> None:
    result = op.results[0]
    t = elem(result.type)
    name = lw.declare(result)
    # Under a branch on tlx.thread_id the threads that get here are the user's choice:
    # each performs its atomic, and no barrier may run (the others never arrive).
    # An address or operand derived from tlx.thread_id differs between threads: each performs
    # its own atomic and keeps its own result (no owner, nothing to publish).
    uniform = not _uniformity(lw).divergent(op)
    owner = _owner(lw, result.type) if not _uniformity(lw).per_thread(op) else None
    pred = " && ".join(p for p in (owner, lw.ref(mask) if mask is not None else None) if p) or "true"
    zero = C.constant_literal(0, t)
    sem = op.attrs["sem"] if uniform else "relaxed"
    if sem in ("release", "acq_rel"):
        lw.out.line(lw.sync())
    if isinstance(result.type, TensorType):
        lw.for_registers(result, f"{name}[i] = ({pred}) ? {call_of('i')} : {zero};")
    else:
        lw.out.line(f"{name} = ({pred}) ? {call_of('0')} : {zero};")
    if owner is not None and id(result) in _used_values(lw):
        _publish(lw, result, owner)         # ends with a barrier
    elif sem in ("acquire", "acq_rel"):
        lw.out.line(lw.sync())


def _owner(lw, t) -> str | None:
    """The C condition selecting the one slot that holds each element of a value of
    type ``t`` (None: every slot holds a distinct element)."""
    if not isinstance(t, TensorType):
        return f"({lw.scope.tid_var} == 0)"
    layout = t.layout
    free = layout.free_bits()
    if layout.duplication() != 1 << sum(len(bits) for bits in free.values()):
        raise InternalCompilerError(f"an atomic on layout {layout}, which duplicates elements through "
                                    f"non-zero bases (a tlxc bug: the layout rule must not pick it)")
    terms = []
    for dim, var in (("register", "i"), ("lane", "lane"), ("warp", lw.scope.warp_var)):
        bits = sum(1 << b for b in free[dim])
        if bits:
            terms.append(f"(({var}) & {bits}) == 0")
    return "(" + " && ".join(terms) + ")" if terms else None


def _publish(lw, result, owner: str) -> None:
    """Owners write the old values to shared memory; every slot reads its element back."""
    t = result.type
    ctype = C.storage_type(elem(t))
    numel = t.numel if isinstance(t, TensorType) else 1
    buf = lw.fresh("atom_old")
    smem = lw.need_scratch(numel * max(1, elem(t).bytes))
    lw.out.line(f"{ctype}* {buf} = reinterpret_cast<{ctype}*>({smem});")
    lw.out.line(lw.sync())
    name = lw.name(result)
    if not isinstance(t, TensorType):
        lw.out.line(f"if {owner} {buf}[0] = {name};")
        lw.out.line(lw.sync())
        lw.out.line(f"{name} = {buf}[0];")
        return
    flat = lw.flat_expr(t.layout)
    lw.for_registers(result, f"if {owner} {buf}[{flat}] = {name}[i];")
    lw.out.line(lw.sync())
    lw.for_registers(result, f"{name}[i] = {buf}[{flat}];")


def _uniformity(lw) -> Uniformity:
    found = lw.rule_state.get("memory.uniformity")
    if found is None:
        found = lw.rule_state["memory.uniformity"] = Uniformity(lw.kernel)
    return found


def _used_values(lw) -> set[int]:
    """ids of the values some op of the kernel reads (computed once per kernel)."""
    used = lw.rule_state.get("memory.used")
    if used is None:
        used = {id(v) for op in lw.kernel.walk() for v in op.operands}
        lw.rule_state["memory.used"] = used
    return used


@lowering("tl.debug_barrier")
def debug_barrier(lw, op):
    lw.out.line(lw.sync())


__all__ = ["PointerType"]
