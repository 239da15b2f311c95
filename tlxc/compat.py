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
and every file says which one it uses.  A Triton name tlxc lacks (``triton.profiler``,
``triton._C``, ``triton.compile``...) raises an AttributeError that says so, rather than
answering with something else.  docs/runtime.md, "Running Triton files".
"""
from __future__ import annotations

from . import language, runtime, testing, tools
from .errors import CompilationError
from .host import cdiv, next_power_of_2, set_allocator
from .runtime.autotune import Autotuner, Config, Heuristics, autotune, heuristics
from .runtime.jit import KernelFunction, jit

JITFunction = KernelFunction        # what isinstance checks of Triton code name
# The Triton release whose language tlxc follows (the device's baseline, triton 3.6): Triton code gates
# features on ``triton.__version__`` (vLLM's prefix_prefill defines its kernels only under
# ``if triton.__version__ >= "2.1.0":``), so through this module it takes the branches written for that
# release.  tlxc's own version stays ``tlxc.__version__``.
__version__ = "3.6.0"

__all__ = ["Autotuner", "CompilationError", "Config", "Heuristics", "JITFunction", "__version__", "autotune", "cdiv",
           "heuristics", "jit", "language", "next_power_of_2", "runtime", "set_allocator", "testing", "tools"]


def __getattr__(name: str):
    if name.startswith("__"):                 # __path__, __version__ ...: the ordinary answer
        raise AttributeError(name)
    raise AttributeError(f"tlxc.compat has no {name!r}: triton.{name} is not part of tlxc's Triton surface "
                         f"(it offers {', '.join(__all__)})")
