"""Builder: creates ops at an insertion point, carrying the current location."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from ..errors import CompilationError, Location
from .core import OP_REGISTRY, Block, Operation, Value
from .types import MAX_TENSOR_NUMEL, TensorType, Type


class Builder:
    def __init__(self, block: Block | None = None):
        self.block = block
        self.loc: Location | None = None

    @contextmanager
    def at(self, block: Block):
        saved = self.block
        self.block = block
        try:
            yield
        finally:
            self.block = saved

    @contextmanager
    def location(self, loc: Location | None):
        saved = self.loc
        self.loc = loc if loc is not None else saved
        try:
            yield
        finally:
            self.loc = saved

    def create(self, name: str, operands: list[Value] = (), result_types: list[Type] = (),
               attrs: dict[str, Any] | None = None, regions=None,
               result_names: list[str | None] | None = None) -> Operation:
        for t in result_types:
            check_tensor_size(t, self.loc)
        op = OP_REGISTRY[name](list(operands), list(result_types), attrs, regions, self.loc,
                               result_names)
        if self.block is not None:
            self.block.append(op)
        return op

    def value(self, name: str, operands: list[Value], result_type: Type, **attrs) -> Value:
        """Create a one-result op and return its result."""
        return self.create(name, operands, [result_type], attrs).results[0]


def check_tensor_size(t: Type, loc: Location | None) -> None:
    """Refuse a register tensor beyond ``MAX_TENSOR_NUMEL`` elements, whichever op makes it
    (an arange, a broadcast, a reshape, a dot): compiling one would take minutes."""
    if isinstance(t, TensorType) and t.numel > MAX_TENSOR_NUMEL:
        raise CompilationError(f"this operation makes a tensor of shape {list(t.shape)} ({t.numel} elements), "
                               f"more than the "
                               f"{MAX_TENSOR_NUMEL} (2**20) a block may hold; use smaller blocks", loc)
