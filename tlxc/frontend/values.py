"""Frontend values: what a kernel's Python variables hold while their IR is built.

A variable holds either a compile-time Python value (int, float, bool, None,
str, dtype, tuple, function, module: "constexpr") or a ``Tensor``: a runtime
IR value, scalar or block.
"""
from __future__ import annotations

from ..ir.core import Value
from ..ir.types import PointerType, ScalarType, TensorType, Type
from ..language.core import constexpr


class SemanticError(Exception):
    """A user error detected by a typing rule; rendered at the current node.

    ``param`` names the builtin parameter at fault, when there is one, so the
    caret can point at that argument rather than at the whole call.
    """

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


class StaticAssertionFailed(SemanticError):
    """``tl.static_assert`` was false: located as a ``CompileTimeAssertionFailure``."""


class Tensor:
    """A runtime value in a kernel: a scalar or a block (register tensor); an instance of
    ``tl.tensor`` for the kernel's ``isinstance`` (language.core.tensor)."""

    __slots__ = ("value",)
    __tlxc_runtime_value__ = True

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
        raise SemanticError("a runtime value has no compile-time truth value; this needs a "
                            "compile-time constant (tl.constexpr)")


def is_constexpr(v) -> bool:
    return not isinstance(v, Tensor)


def unwrap(value):
    """The Python value of a ``tl.constexpr`` (anything else as it is)."""
    return value.value if isinstance(value, constexpr) else value


RETURN = "__return__"      # the variable under which the frontend tracks a function's return value


class Undefined:
    """Marks a name that is not defined on every path reaching this point."""

    def __init__(self, reason: str):
        self.reason = reason
