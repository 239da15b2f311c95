"""The IR's core objects: values, operations, blocks, regions, modules.

Control flow is structured: every region has exactly one block, and ops that
own regions (``scf.for``, ``scf.if``, ``tl.kernel``...) end each block with a
terminator (``scf.yield``...).  Values are SSA: defined once, used after.
"""
from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, ClassVar

from ..errors import Location, VerificationError
from .types import Type

OP_REGISTRY: dict[str, type[Operation]] = {}


class Value:
    """An SSA value: an op result or a block argument."""

    __slots__ = ("index", "name_hint", "owner", "type")

    def __init__(self, type: Type, owner: Any, index: int, name_hint: str | None = None):
        self.type = type
        self.owner = owner
        self.index = index
        self.name_hint = name_hint

    def __repr__(self) -> str:
        hint = self.name_hint or "?"
        return f"<Value %{hint}: {self.type}>"


class OpResult(Value):
    __slots__ = ()


class BlockArgument(Value):
    __slots__ = ()


class Block:
    """A straight-line list of ops with typed arguments."""

    def __init__(self, arg_types: list[Type] = (), arg_names: list[str | None] | None = None):
        names = list(arg_names) if arg_names is not None else [None] * len(arg_types)
        self.args: list[BlockArgument] = [
            BlockArgument(t, self, i, names[i]) for i, t in enumerate(arg_types)]
        self.ops: list[Operation] = []
        self.parent: Region | None = None

    def append(self, op: Operation) -> Operation:
        op.parent = self
        self.ops.append(op)
        return op

    def insert(self, index: int, op: Operation) -> Operation:
        op.parent = self
        self.ops.insert(index, op)
        return op

    def add_arg(self, type: Type, name: str | None = None) -> BlockArgument:
        arg = BlockArgument(type, self, len(self.args), name)
        self.args.append(arg)
        return arg

    @property
    def terminator(self) -> Operation | None:
        return self.ops[-1] if self.ops and self.ops[-1].is_terminator else None


class Region:
    """A region holding exactly one block (structured control flow)."""

    def __init__(self, block: Block | None = None):
        self.block = block if block is not None else Block()
        self.block.parent = self
        self.parent: Operation | None = None

    @property
    def args(self) -> list[BlockArgument]:
        return self.block.args

    @property
    def ops(self) -> list[Operation]:
        return self.block.ops


class Operation:
    """Base of every op.  Subclasses set ``name`` and may override ``verify``.

    Operands, results, attributes and regions are stored generically so that
    the printer, parser and passes handle every op the same way; subclasses
    add named accessors and the verification rules of the op.
    """

    name: ClassVar[str] = ""
    is_terminator: ClassVar[bool] = False
    traits: ClassVar[frozenset[str]] = frozenset()      # ir/traits.py: VIEW, ALLOCATION, SIDE_EFFECT, ...
    num_regions: ClassVar[int] = 0

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.name:
            if cls.name in OP_REGISTRY:
                raise TypeError(f"op {cls.name} registered twice")
            OP_REGISTRY[cls.name] = cls

    def __init__(self, operands: list[Value] = (), result_types: list[Type] = (),
                 attrs: dict[str, Any] | None = None, regions: list[Region] | None = None,
                 loc: Location | None = None, result_names: list[str | None] | None = None):
        self.operands: list[Value] = list(operands)
        names = list(result_names) if result_names else [None] * len(result_types)
        self.results: list[OpResult] = [
            OpResult(t, self, i, names[i]) for i, t in enumerate(result_types)]
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.regions: list[Region] = list(regions or [])
        for region in self.regions:
            region.parent = self
        self.loc = loc
        self.parent: Block | None = None

    # -- convenience -------------------------------------------------------
    @property
    def result(self) -> OpResult:
        if len(self.results) != 1:
            raise self.error(f"expected exactly one result, got {len(self.results)}")
        return self.results[0]

    def operand(self, i: int) -> Value:
        return self.operands[i]

    def walk(self) -> Iterator[Operation]:
        """This op and every op nested in its regions, in pre-order: one generator for the whole
        walk, not one per nesting level.  Op lists are iterated in place, as before: an op that the
        consumer inserts after the one being visited is visited, and an op's regions are read
        after the consumer has seen the op (so it may rewrite them first)."""
        yield self
        stack = [iter(region.ops) for region in reversed(self.regions)]
        while stack:
            op = next(stack[-1], None)
            if op is None:
                stack.pop()
                continue
            yield op
            if op.regions:
                stack.extend(iter(region.ops) for region in reversed(op.regions))

    def parent_op(self) -> Operation | None:
        if self.parent is None or self.parent.parent is None:
            return None
        return self.parent.parent.parent

    def error(self, message: str) -> VerificationError:
        return VerificationError(f"'{self.name}' op {message}", self.loc)

    def verify(self) -> None:
        """Check the op's own typing rules; raise ``self.error(...)``."""

    def __repr__(self) -> str:
        return f"<{self.name} at {self.loc}>"


def users_by_value(root: Operation) -> dict[int, list[Operation]]:
    """The users of every value used below ``root`` (``root`` included), keyed by the value's
    ``id``: each user once, in walk order.  A pass's snapshot; it does not follow rewrites."""
    out: dict[int, list[Operation]] = {}
    for op in root.walk():
        for v in op.operands:
            users = out.setdefault(id(v), [])
            if op not in users:
                users.append(op)
    return out


class Module:
    """A list of kernels (``tl.kernel`` ops)."""

    def __init__(self, kernels: list[Operation] | None = None):
        self.kernels: list[Operation] = list(kernels or [])
        self.remarks: dict[int, str] = {}       # what passes left undone and why (pipeline.py: not_pipelined)

    def walk(self) -> Iterator[Operation]:
        for kernel in self.kernels:
            yield from kernel.walk()

    def kernel(self, name: str) -> Operation:
        for kernel in self.kernels:
            if kernel.attrs.get("sym_name") == name:
                return kernel
        raise KeyError(name)

    def __str__(self) -> str:
        from .printer import print_module
        return print_module(self)


# -- copying ------------------------------------------------------------------------------------------
_IMMUTABLE_LEAVES = (int, float, str, bool, bytes, type(None), Type, Location)


def clone_module(module: Module) -> Module:
    """A copy of ``module`` whose ops, blocks, regions and values are new objects (a pass may
    rewrite it in place while the original lives on), sharing what is immutable: types,
    locations, and attribute leaves such as ints and strings.  An attribute that names a value
    or an op of the module names its copy.  Equivalent to ``copy.deepcopy`` on the IR, at a
    fraction of its cost (it copied every type and location: ~90 ms for an attention kernel)."""
    mapping: dict[int, Any] = {}
    copied: list[tuple[Operation, Operation]] = []

    def clone_value(v: Value, owner: Any) -> Value:
        new = type(v).__new__(type(v))
        new.type, new.owner, new.index, new.name_hint = v.type, owner, v.index, v.name_hint
        mapping[id(v)] = new
        return new

    def clone_region(region: Region, parent: Operation) -> Region:
        new = type(region).__new__(type(region))
        new.__dict__.update(region.__dict__)
        new.parent = parent
        new.block = clone_block(region.block, new)
        return new

    def clone_block(block: Block, parent: Region) -> Block:
        new = type(block).__new__(type(block))
        new.__dict__.update(block.__dict__)
        new.parent = parent
        new.args = [clone_value(a, new) for a in block.args]
        new.ops = [clone_op(op, new) for op in block.ops]
        mapping[id(block)] = new
        return new

    def clone_op(op: Operation, parent: Block | None) -> Operation:
        new = type(op).__new__(type(op))
        new.__dict__.update(op.__dict__)
        new.parent = parent
        mapping[id(op)] = new
        new.results = [clone_value(r, new) for r in op.results]
        new.regions = [clone_region(r, new) for r in op.regions]
        copied.append((op, new))
        return new

    kernels = [clone_op(k, None) for k in module.kernels]
    memo = dict(mapping)     # deepcopy's memo for other attribute objects: the IR's objects map to theirs
    for op, new in copied:       # second: operands and attributes may name values defined later in walk order
        new.operands = [mapping.get(id(v), v) for v in op.operands]
        new.attrs = {k: _copy_attr(v, mapping, memo) for k, v in op.attrs.items()}
    out = Module.__new__(Module)
    out.__dict__.update(module.__dict__)
    out.kernels = kernels
    out.remarks = dict(module.remarks)
    return out


def _copy_attr(x: Any, mapping: dict[int, Any], memo: dict[int, Any]) -> Any:
    if isinstance(x, _IMMUTABLE_LEAVES):
        return x
    if isinstance(x, (Value, Operation, Block, Region)):
        return mapping.get(id(x), x)
    if type(x) is tuple:
        return tuple(_copy_attr(y, mapping, memo) for y in x)
    if type(x) is list:
        return [_copy_attr(y, mapping, memo) for y in x]
    if type(x) is dict:
        return {k: _copy_attr(y, mapping, memo) for k, y in x.items()}
    return copy.deepcopy(x, memo)
