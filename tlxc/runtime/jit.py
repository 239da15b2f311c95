"""``@tlxc.kernel``: the kernel object users decorate, launch and inspect."""
from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import inspect
import os
import sysconfig
import types
from functools import partial
from typing import Any, NamedTuple

from .. import language as tl
from ..errors import CompilationError
from ..frontend.source import FunctionSource, get_source
from ..frontend.specialize import is_constexpr_annotation
from ..target import DEFAULT_ARCH
from .launch import CALLED_DIRECTLY, FLAG, Launcher, shadowing_parameters


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
        self._guards: tuple = ()    # where the cache key's inputs were read, and what was there (Guard)
        self._env: tuple | None = None        # the compile environment the cached plans were built in
        self._generic = None        # the generated kernel-level fast path (runtime/launch.py)
        self._specialized: dict = {}          # launch key -> its generated per-specialization fast path
        self.cache: dict = {}       # launch key -> LaunchPlan, filled by runtime/launch.py
        self.fast_cache: dict = {}  # launch key -> the plan as a tuple, for the generated fast path
        self._constexpr_flags = tuple(name in self.constexpr_params for name in self.param_names)
        self._interpret: bool | None = None   # TLXC_INTERPRET=1, read at the first launch (runtime/launch.py)
        self._stream = None
        self._fast = self._first_launch   # replaced by the generated fast path
        self._other = self._first_launch  # the previous specialized path, tried when _fast does not match
        self._shadowing = shadowing_parameters(self)     # parameters named as a launch option

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
        compile-time globals it reads: recomputed when one of those globals was
        reassigned since (``guards_hold``)."""
        if self._cache_key is None or not guards_hold(self._guards):
            guards: list[Guard] = []
            h = hashlib.sha256()
            for part in _dependency_parts(self, set(), guards):
                h.update(part.encode())
                h.update(b"\0")
            self._cache_key, self._guards = h.hexdigest(), tuple(guards)
        return self._cache_key

    def __call__(self, *args, **kwargs):
        raise CompilationError(
            f"{self.__name__} is a tlxc kernel: launch it with {self.__name__}[grid](...), "
            f"or call it from inside another @tlxc.kernel")

    def __getitem__(self, grid):
        if self._shadowing:
            return partial(self._launch_flagged, grid)
        fast = self._fast
        if fast.__class__ in CALLED_DIRECTLY:     # a generated fast path or a C launcher (runtime/launch.py)
            return partial(fast, grid)            # the hot path: no Python frame in between
        return Launcher(self, grid)               # (reads _fast at each call: the first launch makes one)

    def _launch_flagged(self, grid, *args, **kwargs):
        """A launch of a kernel with parameters named as launch options (``shadowing_parameters``): the
        generated paths bind such a keyword as the parameter only, so each given by keyword is flagged
        for them to read as the option too."""
        fast = self._fast
        if kwargs and fast.__class__ in CALLED_DIRECTLY:
            for name in self._shadowing:
                if name in kwargs:
                    kwargs[FLAG + name] = True
        return fast(grid, *args, **kwargs)

    def run(self, *args, grid, warmup: bool = False, **kwargs):
        """Triton's ``JITFunction.run``: launch on ``grid``, or with ``warmup=True`` only compile
        (``warmup``)."""
        if warmup:
            return self.warmup(*args, grid=grid, **kwargs)
        return self[grid](*args, **kwargs)

    def warmup(self, *args, grid, arch: str | None = None, **kwargs):
        """Compile for these arguments and launch options without launching; returns the
        compiled-kernel handle (``.n_regs``, ``.n_spills``, ``.metadata.shared``, ``.asm``,
        ``handle[grid](*args)``: runtime/warmup.py).  CUDA tensors: exactly the first launch's
        compile, module loaded.  CPU tensors: an ahead-of-time compile for ``arch``
        (default sm_90a), while launches run on the interpreter."""
        from .warmup import warmup
        return warmup(self, args, kwargs, grid, arch)

    def compile(self, signature=None, constexprs: dict[str, Any] | None = None, *,
                arch: str = DEFAULT_ARCH, num_warps: int = 4, **options):
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
        from .launch import LaunchPlan
        unique = {id(plan): plan for plan in self.cache.values()   # several keys may share a plan
                  if isinstance(plan, LaunchPlan)}                  # (warmup handles live there too)
        return [plan.compiled for plan in unique.values()]

    def __repr__(self) -> str:
        return f"<tlxc kernel {self.__name__}>"


class Guard(NamedTuple):
    """One input of a kernel's cache key, where the compile read it: ``holder[name]`` of a
    module's globals (``cell`` False) or the contents of a closure cell (``holder``, ``cell``
    True), then the attributes ``attrs`` (``cfg.BLOCK``); ``value`` is what was there.  The
    key is stale when any guard's place holds another object (``guards_hold``); the
    generated launch paths check the same by identity (runtime/launch.py)."""

    holder: Any
    name: str
    cell: bool
    attrs: tuple[str, ...]
    value: Any

    def current(self) -> Any:
        """What the place holds now (``_MISSING`` when it no longer resolves)."""
        try:
            value = self.holder.cell_contents if self.cell else self.holder[self.name]
            for attr in self.attrs:
                value = getattr(value, attr)
        except Exception:  # noqa: BLE001 - a deleted global, an emptied cell, a failing property
            return _MISSING
        return value


_MISSING = object()


def guards_hold(guards) -> bool:
    return all(g.current() is g.value for g in guards)


def _resolve(fn, name: str) -> tuple[bool, Any, Guard | None]:
    """``FunctionSource.lookup_global`` with where the value came from (a guard without
    ``value``): closure cell, module global, else a builtin (no guard: builtins are not
    cache-key inputs)."""
    code = fn.__code__
    if fn.__closure__:
        for var, cell in zip(code.co_freevars, fn.__closure__):
            if var == name:
                try:
                    return True, cell.cell_contents, Guard(cell, name, True, (), None)
                except ValueError:
                    return False, None, None
    if name in fn.__globals__:
        return True, fn.__globals__[name], Guard(fn.__globals__, name, False, (), None)
    if hasattr(builtins, name):
        return True, getattr(builtins, name), None
    return False, None, None


def _dependency_parts(kfn: KernelFunction, seen: set[int], guards: list[Guard]):
    """Everything the compile of ``kfn`` reads from outside its own text: the kernels it
    calls, the constant globals (numbers, strings, dtypes, tuples of them) and module or
    object attributes (``cfg.BLOCK``) it names, and the source of the plain Python helpers it
    calls at compile time (with what they read in turn).  Each place one of them was read
    from goes to ``guards``."""
    if id(kfn) in seen:
        return
    seen.add(id(kfn))
    src = kfn.source
    yield f"{kfn.fn.__module__}.{kfn.__name__}"
    yield src.text
    names = sorted({n.id for n in ast.walk(src.tree) if isinstance(n, ast.Name)})
    for name in names:
        found, value, where = _resolve(kfn.fn, name)
        if found:
            _guard(guards, where, (), value)
            yield from _value_parts(name, value, seen, guards)
    chains = sorted({chain for node in ast.walk(src.tree) if isinstance(node, ast.Attribute)
                     for chain in [_attribute_chain(node)] if chain})
    for chain in chains:
        found, value, where = _resolve(kfn.fn, chain[0])
        if found and not _is_tlxc(value):
            found, value = _follow(value, chain[1:])
            if found:
                _guard(guards, where, chain[1:], value)
                yield from _value_parts(".".join(chain), value, seen, guards)


def _guard(guards: list[Guard], where: Guard | None, attrs: tuple[str, ...], value) -> None:
    """Guard a place whose value is a cache-key input (whether or not an earlier reference
    already yielded its parts)."""
    if where is not None and _is_key_input(value):
        guards.append(where._replace(attrs=attrs, value=value))


def _is_key_input(value) -> bool:
    plain = _plain(value)
    return (getattr(plain, "__tlxc_kernel__", False) or _is_constant(plain)
            or (isinstance(plain, types.FunctionType) and _is_user_function(plain)))


def _value_parts(label: str, value, seen: set[int], guards: list[Guard]):
    if isinstance(value, tl.constexpr):
        value = value.value
    if getattr(value, "__tlxc_kernel__", False):
        yield from _dependency_parts(value, seen, guards)
    elif _is_constant(value):
        yield f"{label}={value!r}"
    elif isinstance(value, types.FunctionType) and _is_user_function(value) and id(value) not in seen:
        seen.add(id(value))
        yield f"{label}=def {_function_text(value)}"
        for name in sorted(set(value.__code__.co_names)):
            if name in value.__globals__:
                found = value.__globals__[name]
                _guard(guards, Guard(value.__globals__, name, False, (), None), (), found)
                yield from _value_parts(f"{label}.{name}", found, seen, guards)


def _is_constant(value, depth: int = 0) -> bool:
    """A value whose repr determines it: what the frontend folds into the kernel."""
    if isinstance(value, (bool, int, float, str, tl.dtype)) or value is None:
        return True
    return isinstance(value, tuple) and depth < 8 and all(_is_constant(_plain(v), depth + 1) for v in value)


def _plain(value):
    return value.value if isinstance(value, tl.constexpr) else value


def _attribute_chain(node: ast.Attribute) -> tuple[str, ...] | None:
    """``cfg.tile.BLOCK`` -> ("cfg", "tile", "BLOCK"); None unless the chain starts at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return (node.id, *reversed(parts)) if isinstance(node, ast.Name) else None


def _follow(value, attrs) -> tuple[bool, Any]:
    for attr in attrs:
        try:
            value = getattr(value, attr)
        except Exception:  # noqa: BLE001 - a property that fails, a method of a runtime value
            return False, None
    return True, value


def _is_tlxc(value) -> bool:
    module = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
    return isinstance(module, str) and (module == "tlxc" or module.startswith("tlxc."))


def _is_user_function(fn) -> bool:
    """A Python function of the user's code, not of tlxc, the standard library or an installed package."""
    if _is_tlxc(fn):
        return False
    filename = os.path.abspath(fn.__code__.co_filename)
    return not any(filename.startswith(root) for root in _library_roots())


@functools.cache
def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple(os.path.abspath(paths[k]) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")
                 if k in paths)


def _function_text(fn) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):       # no source (defined in a REPL, exec): its code object instead
        code = fn.__code__
        return repr((code.co_code, code.co_consts, code.co_names))


# triton.jit's other keywords: accepted so that ported code runs, and without effect
# (docs/runtime.md, "Launch options"): tlxc's kernel names are its own (repr), it has no
# launch-metadata hooks or versions, inlines every call (noinline), and its alignment
# specialization never changes a result (do_not_specialize_on_alignment).
NO_EFFECT_KEYWORDS = ("version", "repr", "launch_metadata", "noinline", "do_not_specialize_on_alignment")


def kernel(fn=None, *, do_not_specialize=(), debug=None, **hints):
    """Decorator: ``@tlxc.kernel`` (also ``@tlxc.jit``).  ``debug`` is accepted and has no
    effect (``tl.device_assert`` is always compiled in)."""
    unknown = sorted(set(hints) - set(NO_EFFECT_KEYWORDS))
    if unknown:
        raise TypeError(f"tlxc.kernel() got unexpected keyword argument(s) {', '.join(map(repr, unknown))} "
                        f"(it takes do_not_specialize, debug and triton.jit's {', '.join(NO_EFFECT_KEYWORDS)})")

    def wrap(f):
        return KernelFunction(f, do_not_specialize=do_not_specialize, debug=debug)
    return wrap(fn) if fn is not None else wrap


jit = kernel
