"""Cheaper ``tl.dot`` operands and accumulators: three small rewrites around the wgmma lowering.

*fold-dot-add* (before ``lower-dot-to-wgmma``; every target): ``x + tl.dot(a, b)`` -- the
dot's accumulator a zero constant, its result used by this add only -- becomes
``tl.dot(a, b, x)``, as Triton's combine pass does.  The MMA then accumulates into ``x``'s
registers instead of filling a second accumulator that an elementwise add folds in
(``dv += tl.dot(p, do)`` in an attention backward held 64 more f32 registers per thread
at 128x64 over 4 warps).

*hoist-operand-stores* (after ``pipeline-loads``; sm_90a): a ``local_store`` of a loop-
invariant value into a dot operand buffer inside a loop (``q`` of an attention forward,
``k``/``v`` of its backward: ``lower-dot-to-wgmma`` stores each operand right before its
MMA) moves before the loop, with its view, when the buffer has no other writer.  The
tile is then copied to shared memory once instead of once per iteration, and its
registers die before the loop.

*share-operand-buffers* (after that; sm_90a):

- two stores of the same bytes into two dot operand buffers of one type in one block
  (``k`` before each of two loops once hoisted; ``qT`` stored through a transposed view
  for ``k @ qT`` and ``tl.trans(qT)`` stored plainly for ``ds @ tl.trans(qT)``) keep the
  first: the second buffer's readers read the first, which nothing rewrites in between;
- dot operand buffers whose live ranges (from their first to their last use, counted in
  the kernel's top-level ops, a loop being one op) do not overlap share their bytes
  through ``reuse=`` (the attention backward's four loops each had their own buffers:
  211 KB of shared memory, one CTA per SM).  Members of a group have the same element
  type and the same row width in bytes, so the wgmma swizzle every member wants is one.
  The codegen's shared-memory ordering sees the aliasing (``shared_order``'s reuse
  groups) and puts a barrier between the last wgmma read of one member and the first
  store of the next.

Only buffers of ``lower-dot-to-wgmma`` (``dot_operand`` attribute, one slot, no alias)
whose uses are views, stores and wgmmas waited with ``pendings = 0`` are touched; a
pipelined ring or a hand-written TLX buffer is left alone.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.builder import Builder
from ..ir.core import Block, Module, Operation, Value, users_by_value
from ..ir.types import TensorType
from ..target import has_feature
from .canonicalize import Canonicalize
from .dot_wgmma import replace_uses
from .manager import Pass
from .pipeline import OPERAND_VIEWS


@dataclass(frozen=True)
class FoldDotAdd(Pass):
    name = "fold-dot-add"

    def run(self, module: Module, options) -> Module:
        for kernel in module.kernels:
            uses = users_by_value(kernel)
            for add in [op for op in kernel.walk() if op.name == "arith.add"]:
                for index in (0, 1):
                    dot = getattr(add.operands[index], "owner", None)
                    other = add.operands[1 - index]
                    if (getattr(dot, "name", None) == "tl.dot" and dot.parent is add.parent
                            and len(uses.get(id(dot.result), ())) == 1
                            and _is_zero_tensor(dot.operands[2]) and other.type == dot.result.type
                            and isinstance(other.type, TensorType) and other is not dot.result
                            and not dot.attrs.get("max_num_imprecise_acc")):
                        _fold(kernel, add, dot, other)
                        uses = users_by_value(kernel)
                        break
        return module


def _fold(kernel: Operation, add: Operation, dot: Operation, acc: Value) -> None:
    """The dot moves to the add's place (``acc`` is defined there) with ``acc`` as accumulator."""
    block = add.parent
    dot.parent.ops.remove(dot)
    dot.operands[2] = acc
    block.insert(block.ops.index(add), dot)
    dot.result.name_hint = add.result.name_hint or dot.result.name_hint
    block.ops.remove(add)
    replace_uses(kernel, add.result, dot.result)


def _is_zero_tensor(value: Value) -> bool:
    op = getattr(value, "owner", None)
    if getattr(op, "name", None) == "tl.splat":
        op = getattr(op.operands[0], "owner", None)
    return getattr(op, "name", None) == "arith.constant" and op.attrs.get("value") in (0, 0.0) \
        and not _negative_zero(op.attrs.get("value"))


def _negative_zero(v) -> bool:
    return isinstance(v, float) and str(v).startswith("-")


# -- hoisting ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HoistOperandStores(Pass):
    name = "hoist-operand-stores"

    def run(self, module: Module, options) -> Module:
        if not has_feature(options.arch, "wgmma"):
            return module
        for kernel in module.kernels:
            changed = True
            while changed:
                changed = False
                uses = users_by_value(kernel)
                for store in [op for op in kernel.walk() if op.name == "tlx.local_store"]:
                    if _hoist(store, uses):
                        changed = True
                        break
        return module


def _operand_chain(store: Operation, uses: dict):
    """(alloc, [view ops from the alloc to the stored target]) when ``store`` writes a dedicated
    dot operand buffer: a one-slot ``lower-dot-to-wgmma`` allocation, reached through one
    ``local_view`` (and possibly a ``local_trans``) used by this store and by wgmmas only."""
    chain = []
    target = store.operands[0]
    op = getattr(target, "owner", None)
    while getattr(op, "name", None) in OPERAND_VIEWS:
        chain.insert(0, op)
        op = getattr(op.operands[0], "owner", None)
    if getattr(op, "name", None) != "tlx.local_alloc" or "dot_operand" not in op.attrs or op.operands:
        return None
    alloc = op
    if alloc.result.type.num != 1 or not chain or chain[0].name != "tlx.local_view":
        return None
    if len(uses.get(id(alloc.result), ())) != 1 or any(_aliased(alloc, u) for u in uses.get(id(alloc.result), ())):
        return None
    for view in chain:
        if view.parent is not store.parent:
            return None
        for user in uses.get(id(view.result), ()):
            if user is store or user.name in OPERAND_VIEWS and user in chain:
                continue
            if user.name != "tlx.async_dot" or not _waited_at_once(user, uses):
                return None
            if view.result not in user.operands[:2]:
                return None
    return alloc, chain


def _aliased(alloc: Operation, user: Operation) -> bool:
    return user.name == "tlx.local_alloc"


def _waited_at_once(dot: Operation, uses: dict) -> bool:
    users = uses.get(id(dot.result), ())
    return len(users) == 1 and users[0].name == "tlx.async_dot_wait" and users[0].attrs.get("pendings") == 0 \
        and users[0].parent is dot.parent


def _hoist(store: Operation, uses: dict) -> bool:
    block = store.parent
    loop = block.parent.parent if block.parent is not None else None
    if getattr(loop, "name", None) != "scf.for":
        return False
    found = _operand_chain(store, uses)
    if found is None:
        return False
    value = store.operands[1]
    if _defined_inside(value, loop):
        return False
    _, chain = found
    moved = []
    for view in chain:
        for operand in view.operands[1:]:            # the slot index: a constant of the body
            owner = getattr(operand, "owner", None)
            if not isinstance(owner, Operation) or not _defined_inside(operand, loop):
                continue
            if owner.name != "arith.constant":
                return False
            moved.append(_clone(owner))
            view.operands = [moved[-1].result if v is operand else v for v in view.operands]
        moved.append(view)
    moved.append(store)
    for op in chain + [store]:
        block.ops.remove(op)
    outer = loop.parent
    at = outer.ops.index(loop)
    for offset, op in enumerate(moved):
        outer.insert(at + offset, op)
    return True


def _clone(constant: Operation) -> Operation:
    op = Builder(None).create(constant.name, [], [constant.result.type], dict(constant.attrs))
    op.loc = constant.loc
    return op


def _defined_inside(value: Value, loop: Operation) -> bool:
    owner = value.owner
    block = owner if isinstance(owner, Block) else owner.parent
    while block is not None:
        op = block.parent.parent if block.parent is not None else None
        if op is loop:
            return True
        if op is None:
            return False
        block = op.parent
    return False


# -- sharing -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DedupeOperandStores(Pass):
    name = "dedupe-operand-stores"

    def run(self, module: Module, options) -> Module:
        if not has_feature(options.arch, "wgmma"):
            return module
        for kernel in module.kernels:
            _dedupe(kernel)
        return Canonicalize().run(module, options)       # the tl.trans a dropped store read is dead


@dataclass(frozen=True)
class ShareOperandBuffers(Pass):
    name = "share-operand-buffers"

    def run(self, module: Module, options) -> Module:
        if not has_feature(options.arch, "wgmma"):
            return module
        for kernel in module.kernels:
            _reuse(kernel)
        return module


def _content(store: Operation, chain: list) -> tuple:
    """What the buffer holds in row-major order: (the stored value's root through
    ``tl.trans``, whether it is transposed)."""
    flips = sum(1 for op in chain if op.name == "tlx.local_trans")
    value = store.operands[1]
    while getattr(value.owner, "name", None) == "tl.trans" and tuple(value.owner.attrs.get("perm", ())) == (1, 0):
        flips += 1
        value = value.owner.operands[0]
    return id(value), flips % 2


def _dedupe(kernel: Operation) -> None:
    changed = True
    while changed:
        changed = False
        uses = users_by_value(kernel)
        seen: dict[tuple, tuple] = {}
        for store in [op for op in kernel.walk() if op.name == "tlx.local_store"]:
            found = _operand_chain(store, uses)
            if found is None:
                continue
            alloc, chain = found
            t = alloc.result.type
            key = (id(store.parent), _content(store, chain), t.shape, t.element, t.layout)
            if key not in seen:
                seen[key] = (alloc, store)
                continue
            first_alloc, first_store = seen[key]
            block = store.parent
            if block.ops.index(first_store) > block.ops.index(store):
                continue
            readers = [u for v in chain for u in uses.get(id(v.result), ()) if u.name == "tlx.async_dot"]
            if any(_ancestor_index(r, block) is None or _ancestor_index(r, block) < block.ops.index(store)
                   for r in readers):
                continue
            view = chain[0]
            view.operands = [first_alloc.result if v is alloc.result else v for v in view.operands]
            block.ops.remove(store)
            alloc.parent.ops.remove(alloc)
            changed = True
            break


def _ancestor_index(op: Operation, block: Block):
    """Index in ``block`` of the op of ``block`` that is or holds ``op`` (None: outside it)."""
    while op is not None and op.parent is not block:
        op = op.parent_op()
    return None if op is None else block.ops.index(op)


def _top_index(op: Operation, top: dict) -> int:
    while id(op) not in top:
        op = op.parent_op()
    return top[id(op)]


def _reuse(kernel: Operation) -> None:
    entry = kernel.regions[0].block
    top = {id(op): i for i, op in enumerate(entry.ops)}
    uses = users_by_value(kernel)
    candidates = []
    for alloc in entry.ops:
        if alloc.name != "tlx.local_alloc" or "dot_operand" not in alloc.attrs or alloc.operands:
            continue
        t = alloc.result.type
        if t.storage != "smem" or t.layout is not None or len(t.shape) != 2:
            continue
        span = _live_span(alloc, uses, top)
        if span is None:
            continue
        row = t.shape[-1] * t.element.bytes
        if row > 128:                 # column-blocked buffers alias only buffers of their own shape
            continue
        candidates.append((alloc, span, (t.element, row)))
    groups: list[list] = []
    for alloc, span, key in sorted(candidates, key=lambda c: -c[0].result.type.buffer_bytes):
        for group in groups:
            if group[0][2] == key and all(span[1] < s[0] or s[1] < span[0] for _, s, _ in group):
                group.append((alloc, span, key))
                break
        else:
            groups.append([(alloc, span, key)])
    for group in groups:
        if len(group) < 2:
            continue
        members = sorted((a for a, _, _ in group), key=lambda a: entry.ops.index(a))
        leader = members[0]
        for member in members[1:]:
            member.operands = [leader.result]


def _live_span(alloc: Operation, uses: dict, top: dict):
    """First and last top-level op index using ``alloc`` (through views, stores and waited
    wgmmas), or None when it has a use of another kind."""
    lo, hi, ring = None, None, False
    work = [alloc.result]
    while work:
        value = work.pop()
        for user in uses.get(id(value), ()):
            if user.name in OPERAND_VIEWS:
                work.append(user.result)
            elif user.name == "tlx.local_store" and user.operands[0] is value:
                pass
            elif user.name == "tlx.async_load" and user.operands[1] is value and _then_drained(user, top):
                ring = True           # copies land until the async_wait_group {pendings = 0} after the loop
            elif user.name == "tlx.async_dot" and value in user.operands[:2] and _waited_at_once(user, uses):
                pass
            else:
                return None
            i = _top_index(user, top)
            lo = i if lo is None else min(lo, i)
            hi = i if hi is None else max(hi, i)
    return None if lo is None else (lo, hi + 1 if ring else hi)


def _then_drained(copy: Operation, top: dict) -> bool:
    """Whether the cp.async ``copy`` (of a ring of ``pipeline-loads`` / ``pipeline-operand-loads``)
    is retired by an ``async_wait_group {pendings = 0}`` right after its top-level op, or is
    itself before the loop whose drain that is."""
    entry = copy
    while entry.parent_op() is not None and entry.parent_op().name != "tl.kernel":
        entry = entry.parent_op()
    block = entry.parent
    at = block.ops.index(entry)
    for op in block.ops[at:]:
        if op.name == "scf.for":
            nxt = block.ops[block.ops.index(op) + 1] if block.ops.index(op) + 1 < len(block.ops) else None
            return getattr(nxt, "name", None) == "tlx.async_wait_group" and nxt.attrs.get("pendings") == 0
        if op is not entry and op.name not in ("tlx.async_load", "tlx.async_commit_group", "tlx.local_view",
                                               "tlx.local_trans", "tlx.local_store") \
                and not op.name.startswith(("arith.", "tl.")):
            return False
    return False



__all__ = ["DedupeOperandStores", "FoldDotAdd", "HoistOperandStores", "ShareOperandBuffers"]
