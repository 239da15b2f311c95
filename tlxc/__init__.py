"""tlxc: a compiler for warp-specialized GPU kernels written in Python."""
from __future__ import annotations

from . import language
from .errors import (BarrierError, CompilationError, InternalCompilerError, LaunchError, LayoutError,
                     ResourceError, TlxcError)
from .interpreter import interpret
from .runtime.jit import KernelFunction, jit, kernel

__version__ = "0.1.0"

__all__ = ["kernel", "jit", "interpret", "KernelFunction", "language", "TlxcError", "CompilationError", "LaunchError",
           "LayoutError", "BarrierError", "ResourceError", "InternalCompilerError", "__version__"]
