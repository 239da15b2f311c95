"""Small verification helpers shared by the op domains."""
from __future__ import annotations

from ..types import PointerType, ScalarType, TensorType, Type, element_type, shape_of


def same_shape(op, a: Type, b: Type, what: str) -> None:
    if shape_of(a) != shape_of(b):
        raise op.error(f"expected {what} to have the same shape, got {a} and {b}")


def expect_type(op, got: Type, expected: Type, what: str) -> None:
    if got != expected:
        raise op.error(f"expected {what} of type {expected}, got {got}")


def expect_scalar_kind(op, t: Type, predicate, description: str, what: str) -> None:
    elem = element_type(t)
    if not isinstance(elem, ScalarType) or not predicate(elem):
        raise op.error(f"expected {what} with {description} elements, got {t}")


def expect_pointer(op, t: Type, what: str) -> PointerType:
    elem = element_type(t)
    if not isinstance(elem, PointerType):
        raise op.error(f"expected {what} to be a pointer or tensor of pointers, got {t}")
    return elem


def expect_tensor(op, t: Type, what: str) -> TensorType:
    if not isinstance(t, TensorType):
        raise op.error(f"expected {what} to be a tensor, got {t}")
    return t


def expect_operands(op, count: int) -> None:
    if len(op.operands) != count:
        raise op.error(f"expected {count} operands, got {len(op.operands)}")


def expect_results(op, count: int) -> None:
    if len(op.results) != count:
        raise op.error(f"expected {count} results, got {len(op.results)}")
