"""tlxc: a compiler for warp-specialized GPU kernels written in Python."""
from __future__ import annotations

from . import language
from .errors import (
    BarrierError,
    CompilationError,
    InternalCompilerError,
    LaunchError,
    LayoutError,
    ResourceError,
    TlxcError,
)
from .interpreter import interpret
from .runtime.autotune import Autotuner, Config, Heuristics, autotune, heuristics
from .runtime.jit import KernelFunction, jit, kernel
from .runtime.tma import TensorDescriptor
from .torch_ops import register_custom_op
from .trace_render import trace

__version__ = "0.1.0"

__all__ = [
    "Autotuner",
    "BarrierError",
    "CompilationError",
    "Config",
    "Heuristics",
    "InternalCompilerError",
    "KernelFunction",
    "LaunchError",
    "LayoutError",
    "ResourceError",
    "TensorDescriptor",
    "TlxcError",
    "__version__",
    "autotune",
    "heuristics",
    "interpret",
    "jit",
    "kernel",
    "language",
    "register_custom_op",
    "trace",
]
