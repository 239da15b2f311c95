"""Frontend values: what a kernel's Python variables hold while tracing.

A variable holds either a compile-time Python value (int, float, bool, None,
str, dtype, tuple, function, module: "constexpr") or a ``Tensor``: a runtime
IR value, scalar or block.
"""
from __future__ import annotations

from ..ir.core import Value
from ..ir.types import PointerType, ScalarType, TensorType, Type


class Tensor:
    """A runtime value in a kernel: a scalar or a block (register tensor)."""

    __slots__ = ("value",)

    def __init__(self, value: Value):
        self.value = value

    @property
    def type(self) -> Type:
        return self.value.type

    @property
    def is_block(self) -> bool:
        return isinstance(self.value.type, TensorType)

    @property
    def shape(self) -> tuple[int, ...]:
        t = self.value.type
        return t.shape if isinstance(t, TensorType) else ()

    @property
    def dtype(self) -> ScalarType | PointerType:
        t = self.value.type
        return t.element if isinstance(t, TensorType) else t

    def __repr__(self) -> str:
        return f"Tensor({self.type})"

    def __bool__(self):
        from ..errors import CompilationError
        raise CompilationError("a runtime tensor has no compile-time truth value")


def is_constexpr(v) -> bool:
    return not isinstance(v, Tensor)
