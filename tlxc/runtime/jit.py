"""``@tlxc.kernel``: the kernel object users decorate, launch and inspect."""
from __future__ import annotations

import ast
import hashlib
import inspect
from functools import partial
from typing import Any

from .. import language as tl
from ..errors import CompilationError
from ..frontend.source import FunctionSource, get_source
from ..frontend.specialize import is_constexpr_annotation
from .launch import Launcher


class KernelFunction:
    """A Python function compiled by tlxc.

    ``kernel[grid](*args, **meta)`` launches it; calling it from another
    kernel inlines it; ``kernel.compile(...)`` compiles without launching.
    """

    __tlxc_kernel__ = True

    def __init__(self, fn, *, do_not_specialize=(), debug: bool | None = None):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.__wrapped__ = fn
        self.signature = inspect.signature(fn)
        self.param_names = list(self.signature.parameters)
        self.constexpr_params = {name for name, p in self.signature.parameters.items()
                                 if is_constexpr_annotation(p.annotation, fn)}
        self.do_not_specialize = {p if isinstance(p, str) else self.param_names[p]
                                  for p in do_not_specialize}
        self.debug = debug
        self._source: FunctionSource | None = None
        self._cache_key: str | None = None
        self.cache: dict = {}       # launch key -> LaunchPlan, filled by runtime/launch.py
        self.fast_cache: dict = {}  # launch key -> the plan as a tuple, for the generated fast path
        self._constexpr_flags = tuple(name in self.constexpr_params for name in self.param_names)
        self._interpret: bool | None = None
        self._stream = None
        self._fast = self._first_launch   # replaced by the generated fast path

    def _first_launch(self, grid, *args, **kwargs):
        """Until the first GPU launch builds the generated fast path (runtime/launch.py)."""
        from .launch import launch
        return launch(self, grid, args, kwargs)

    @property
    def source(self) -> FunctionSource:
        if self._source is None:
            self._source = get_source(self.fn)
        return self._source

    @property
    def src(self) -> str:
        return self.source.text

    @property
    def cache_key(self) -> str:
        """Hash of this kernel's source, every helper it calls and the
        compile-time globals it reads."""
        if self._cache_key is None:
            h = hashlib.sha256()
            for part in _dependency_parts(self, set()):
                h.update(part.encode())
                h.update(b"\0")
            self._cache_key = h.hexdigest()
        return self._cache_key

    def __call__(self, *args, **kwargs):
        raise CompilationError(
            f"{self.__name__} is a tlxc kernel: launch it with {self.__name__}[grid](...), "
            f"or call it from inside another @tlxc.kernel")

    def __getitem__(self, grid):
        if self._fast is not self._first_launch:
            return partial(self._fast, grid)      # the hot path: no Python frame in between
        return Launcher(self, grid)

    def run(self, *args, grid, **kwargs):
        return self[grid](*args, **kwargs)

    def compile(self, signature=None, constexprs: dict[str, Any] | None = None, *,
                arch: str = "sm_90a", num_warps: int = 4, **options):
        """Compile ahead of time (no GPU needed) → ``CompiledKernel``."""
        from ..compiler import compile_kernel
        from ..frontend.specialize import parse_signature, signature_hints, specialization_from_types
        types = parse_signature(signature) if isinstance(signature, str) else dict(signature or {})
        hints = signature_hints(signature) if isinstance(signature, str) else {}
        spec = specialization_from_types(self, types, dict(constexprs or {}), hints)
        return compile_kernel(self, spec, arch=arch, num_warps=num_warps, **options)

    def compiled_kernels(self) -> list:
        """The kernels GPU launches compiled so far, oldest first: each has ``.asm`` and
        ``.metadata`` (loaded from the disk cache: ``asm`` holds only ``cuda`` and ``cubin``).
        A launch also returns its compiled kernel: ``k = kernel[grid](...)``."""
        return [plan.compiled for plan in self.cache.values()]

    def __repr__(self) -> str:
        return f"<tlxc kernel {self.__name__}>"


def _dependency_parts(kfn: KernelFunction, seen: set[int]):
    if id(kfn) in seen:
        return
    seen.add(id(kfn))
    src = kfn.source
    yield f"{kfn.fn.__module__}.{kfn.__name__}"
    yield src.text
    names = sorted({n.id for n in ast.walk(src.tree) if isinstance(n, ast.Name)})
    for name in names:
        found, value = src.lookup_global(name)
        if not found:
            continue
        if isinstance(value, tl.constexpr):
            value = value.value
        if getattr(value, "__tlxc_kernel__", False):
            yield from _dependency_parts(value, seen)
        elif isinstance(value, (bool, int, float, str, tl.dtype)):
            yield f"{name}={value!r}"
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            found, base = src.lookup_global(node.value.id)
            value = getattr(base, node.attr, None) if found else None
            if getattr(value, "__tlxc_kernel__", False):
                yield from _dependency_parts(value, seen)


def kernel(fn=None, *, do_not_specialize=(), debug=None, **unused):
    """Decorator: ``@tlxc.kernel`` (also ``@tlxc.jit``)."""
    def wrap(f):
        return KernelFunction(f, do_not_specialize=do_not_specialize, debug=debug)
    return wrap(fn) if fn is not None else wrap


jit = kernel
