"""tlxc: a compiler for warp-specialized GPU kernels written in Python."""
from __future__ import annotations

# runtime, testing and tools are attributes of the package as Triton code reaches them
# (``triton.runtime.driver.active``, ``triton.testing.do_bench``, ``triton.tools.tensor_descriptor``)
from . import language, runtime, testing, tools
from .descriptors import TensorDescriptor
from .errors import (
    BarrierError,
    CompilationError,
    CompileTimeAssertionFailure,
    InternalCompilerError,
    LaunchError,
    LayoutError,
    PerformanceWarning,
    ResourceError,
    TlxcError,
)
from .host import cdiv, next_power_of_2, set_allocator
from .interpreter import interpret
from .runtime import driver as _driver  # noqa: F401  (makes tlxc.runtime.driver an attribute)
from .runtime.autotune import Autotuner, Config, Heuristics, autotune, heuristics
from .runtime.jit import KernelFunction, jit, kernel
from .tools import tensor_descriptor as _tensor_descriptor  # noqa: F401
from .torch_ops import register_custom_op
from .trace_render import trace

__version__ = "0.1.0"

__all__ = [
    "Autotuner",
    "BarrierError",
    "CompilationError",
    "CompileTimeAssertionFailure",
    "Config",
    "Heuristics",
    "InternalCompilerError",
    "KernelFunction",
    "LaunchError",
    "LayoutError",
    "PerformanceWarning",
    "ResourceError",
    "TensorDescriptor",
    "TlxcError",
    "__version__",
    "autotune",
    "cdiv",
    "heuristics",
    "interpret",
    "jit",
    "kernel",
    "language",
    "next_power_of_2",
    "register_custom_op",
    "runtime",
    "set_allocator",
    "testing",
    "tools",
    "trace",
]


def __getattr__(name: str):
    """``tlxc.ops`` is imported on first use (it needs torch; ``import tlxc`` does not)."""
    if name == "ops":          # (importlib: `from . import ops` would ask this hook for 'ops' again)
        import importlib
        return importlib.import_module(".ops", __name__)
    raise AttributeError(f"module 'tlxc' has no attribute {name!r}")
