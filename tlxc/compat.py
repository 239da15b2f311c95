"""Triton's top-level names, from tlxc: run a Triton file by changing its imports only.

    import tlxc.compat as triton              # was: import triton
    from tlxc.compat import language as tl    # was: import triton.language as tl

``triton.jit``, ``triton.autotune``, ``triton.Config``, ``triton.heuristics``,
``triton.cdiv``, ``triton.next_power_of_2``, ``triton.set_allocator``,
``triton.language`` (tlxc.language itself: ``tl.extra.cuda.libdevice``, ``tl.extra.cuda.gdc_wait``),
``triton.testing`` (``do_bench``), ``triton.runtime`` (``runtime.driver.active``) and
``triton.tools`` (``tools.tensor_descriptor.TensorDescriptor``) are tlxc's own objects, not
copies.  This is a plain module that re-exports them: it never installs itself as
``triton`` (no ``sys.modules`` aliasing), so a real Triton in the same process is untouched
and every file says which one it uses.  ``triton._C`` is tlxc._C: only the cuBLAS handle Triton's
tutorials time against (``_C.libtriton.nvidia.cublas.CublasLt``).  A Triton name tlxc lacks
(``triton.compile``...) raises an AttributeError that says so, rather than answering with
something else.  docs/runtime.md, "Running Triton files".
"""
from __future__ import annotations

from . import _C, language, runtime, testing, tools
from .errors import CompilationError, CompileTimeAssertionFailure, TlxcError
from .host import cdiv, next_power_of_2, set_allocator
from .runtime.autotune import Autotuner, Config, Heuristics, autotune, heuristics
from .runtime.jit import KernelFunction, jit

JITFunction = KernelFunction        # what isinstance checks of Triton code name
TritonError = TlxcError             # the base class of every error tlxc raises (Triton's base exception)


def reinterpret(tensor, dtype):
    """Triton's ``triton.reinterpret(tensor, dtype)``: ``tensor``'s bits as elements of the
    ``tl`` dtype ``dtype`` (the same width), so a kernel argument points to ``dtype``.  tlxc
    returns torch's view of those bits (``tensor.view(torch dtype)``), which every launch
    path reads as Triton's wrapper; a dtype torch lacks (``tl.float8e4b15``) is refused."""
    import torch

    from .frontend.builtins import const_dtype
    from .ir.arg_types import torch_dtype_name
    try:
        t = const_dtype(dtype, "dtype")
    except Exception:  # noqa: BLE001  (a SemanticError outside a kernel: say it in the host's terms)
        raise TypeError(f"triton.reinterpret: 'dtype' must be a tl dtype, got {dtype!r}") from None
    name = torch_dtype_name(t)
    if name is None:
        raise TypeError(f"triton.reinterpret: torch has no dtype holding {t} elements, so tlxc cannot pass "
                        f"a tensor of them")
    target = getattr(torch, name)
    if target.itemsize != tensor.element_size():
        raise TypeError(f"triton.reinterpret: {tensor.dtype} elements are {tensor.element_size()} bytes, {t} "
                        f"elements {target.itemsize}; reinterpret keeps the bits, so the widths must match")
    return tensor.view(target)


class _Namespace:
    def __init__(self, **names):
        self.__dict__.update(names)


# ``triton.compiler.errors.CompilationError`` / ``triton.compiler.CompilationError``: the class
# Triton code catches (tlxc has no other part of Triton's compiler package).
compiler = _Namespace(CompilationError=CompilationError, CompileTimeAssertionFailure=CompileTimeAssertionFailure,
                      errors=_Namespace(CompilationError=CompilationError,
                                        CompileTimeAssertionFailure=CompileTimeAssertionFailure))
# The Triton release whose language tlxc follows (the device's baseline, triton 3.6): Triton code gates
# features on ``triton.__version__`` (vLLM's prefix_prefill defines its kernels only under
# ``if triton.__version__ >= "2.1.0":``), so through this module it takes the branches written for that
# release.  tlxc's own version stays ``tlxc.__version__``.
__version__ = "3.6.0"

__all__ = ["_C", "Autotuner", "CompilationError", "Config", "Heuristics", "JITFunction", "TritonError", "__version__",
           "autotune", "cdiv", "compiler", "heuristics", "jit", "language", "next_power_of_2", "reinterpret", "runtime",
           "set_allocator", "testing", "tools"]


def __getattr__(name: str):
    if name.startswith("__"):                 # __path__, __version__ ...: the ordinary answer
        raise AttributeError(name)
    raise AttributeError(f"tlxc.compat has no {name!r}: triton.{name} is not part of tlxc's Triton surface "
                         f"(it offers {', '.join(__all__)})")
