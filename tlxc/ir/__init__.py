"""tlxc's IR: types, values, ops with regions, builder, verifier, text form."""
from . import ops  # noqa: F401  (registers every op)
from .core import OP_REGISTRY, Block, BlockArgument, Module, Operation, OpResult, Region, Value
from .parser import parse_module
from .printer import print_module
from .types import PointerType, ScalarType, TensorType, Type

__all__ = [
           "OP_REGISTRY",
           "Block",
           "BlockArgument",
           "Module",
           "OpResult",
           "Operation",
           "PointerType",
           "Region",
           "ScalarType",
           "TensorType",
           "Type",
           "Value",
           "parse_module",
           "print_module",
]
