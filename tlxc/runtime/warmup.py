"""``kernel.warmup(*args, grid=..., **meta)``: compile without launching, and the
compiled-kernel handle Triton code inspects and launches (tutorial 02's
``kernel = softmax_kernel.warmup(...); kernel._init_handles(); kernel.n_regs;
kernel.metadata.shared; kernel[(n, 1, 1)](*args)``).

With CUDA tensors among the arguments, warmup prepares exactly what the first launch of
those arguments would (compile, load the module, fill the launch cache): the handle's
numbers are the launch's.  Without (CPU tensors: the interpreter runs the launches),
warmup compiles the same specialization ahead of time for the default target
(``sm_90a``, or ``arch=``), so ``n_regs`` and ``metadata.shared`` describe the GPU
kernel; launching the handle then runs the interpreter.

Tutorial 02 warms up on every call of its host function, so warmup has a fast path
like the launch's: a repeated warmup (the same arguments up to the launch cache's key:
dtypes, devices, 16-byte alignments, integer specialization classes, constexpr values,
options, grid, arch) returns the handle of the first from ``kfn.cache`` (clearing it
forgets them too) without binding, specializing or compiling again; and a handle launched
with every argument positional checks its constexprs without ``inspect``.  Before
(2026-12-03), each call of tutorial 02's ``softmax`` spent ~100 us of host time here
(its kernel runs ~5 us): 2.9x Triton's time in the issue-18 table.
"""
from __future__ import annotations

import os
from typing import Any

from ..errors import LaunchError
from ..target import DEFAULT_ARCH


class KernelMetadata:
    """Triton's ``CompiledKernel.metadata`` fields as attributes (``.shared``, ``.num_warps``,
    ``.num_stages``, ``.name``, ``.num_ctas``, ``.cluster_dims`` and TLX's ``.ctas_per_cga``); tlxc's own metadata keys
    (``registers``, ``spills_bytes``, ``threads``...) as attributes and items too."""

    def __init__(self, raw: dict, num_stages: int | None):
        self._raw = dict(raw)
        cluster = raw.get("cluster") or [1, 1, 1]
        self._triton = {"shared": raw.get("shared_bytes", raw.get("scratch_bytes", 0)) or 0,
                        "num_warps": raw.get("num_warps"), "num_stages": num_stages if num_stages is not None else 3,
                        "name": raw.get("name"), "num_ctas": raw.get("num_ctas", 1), "cluster_dims": tuple(cluster),
                        "ctas_per_cga": tuple(cluster)}

    def __getattr__(self, name: str):
        for table in (self.__dict__.get("_triton", {}), self.__dict__.get("_raw", {})):
            if name in table:
                return table[name]
        raise AttributeError(f"compiled kernel metadata has no field {name!r} (it has "
                             f"{', '.join(sorted(set(self._triton) | set(self._raw)))})")

    def __getitem__(self, name: str):
        return self.__getattr__(name)

    def __repr__(self) -> str:
        return f"KernelMetadata({self._triton})"


class CompiledKernelHandle:
    """What ``warmup`` returns: Triton's ``CompiledKernel`` surface.

    ``n_regs`` (registers per thread), ``n_spills`` (spilled 4-byte registers: the local
    memory bytes / 4, as Triton counts), ``perf_warnings`` (ptxas's spill and wgmma
    serialization reports, tlxc's own), ``metadata``, ``asm`` (``cuda``, ``cubin``, ``ir``...),
    ``_init_handles()`` (loads the module on the GPU; already done by warmup), and
    ``handle[grid](*args)``: a launch with the warmup's options.  The arguments are all of
    the kernel's, constexprs included (as Triton passes them); a constexpr that differs from
    the warmup's is refused (it would be another kernel)."""

    def __init__(self, kfn, compiled, options: dict, constexprs: dict[str, Any]):
        self.kfn = kfn
        self.compiled = compiled
        self.options = dict(options)
        self.constexprs = dict(constexprs)
        self.metadata = KernelMetadata(compiled.metadata, options.get("num_stages"))
        self._constexpr_at = [(kfn.param_names.index(n), n, v) for n, v in self.constexprs.items()
                              if n in kfn.param_names]

    @property
    def asm(self) -> dict:
        return self.compiled.asm

    @property
    def name(self) -> str:
        return self.compiled.metadata.get("name", self.kfn.__name__)

    @property
    def n_regs(self) -> int:
        return self.compiled.metadata.get("registers") or 0

    @property
    def n_spills(self) -> int:
        return (self.compiled.metadata.get("spills_bytes") or 0) // 4

    @property
    def perf_warnings(self) -> list[str]:
        """ptxas's reasons this kernel runs slower than it could: spills, wgmma serialization
        (``tlxc.compiler.perf_warnings``); empty when there are none."""
        from ..compiler import perf_warnings
        return perf_warnings(self.compiled.metadata)

    @property
    def n_max_threads(self) -> int:
        return self.compiled.metadata.get("threads") or 32 * (self.metadata.num_warps or 4)

    def _init_handles(self) -> None:
        """Triton loads the module here; warmup already did (on the GPU) or there is none to
        load (the interpreter runs the launches)."""

    def __getitem__(self, grid):
        def launch(*args, stream=None, **kwargs):
            if stream is not None:
                raise LaunchError(f"cannot launch {self.kfn.__name__}: stream= is not supported (tlxc launches "
                                  f"on torch's current stream: use `with torch.cuda.stream(s):`)")
            self._check_constexprs(args, kwargs)
            shared = [name for name in self.options if name in self.kfn.signature.parameters]
            if not shared:
                return self.kfn[grid](*args, **kwargs, **self.options)
            # a parameter of an option's name (Triton's 02 softmax: num_stages): by keyword, it sets both
            # again, as at the warmup; the handle launches what it compiled
            bound = _bind(self.kfn, args, kwargs)
            for name in shared:
                if bound[name] != self.options[name]:
                    raise LaunchError(f"cannot launch the compiled {self.kfn.__name__}: it was compiled with "
                                      f"{name}={self.options[name]!r} and is launched with {name}={bound[name]!r}")
            return self.kfn[grid](**bound, **{k: v for k, v in self.options.items() if k not in shared})
        return launch

    def _check_constexprs(self, args: tuple, kwargs: dict) -> None:
        if not kwargs and len(args) == len(self.kfn.param_names):      # all positional: no inspect
            if all(args[i] is v or args[i] == v for i, _n, v in self._constexpr_at):
                return
        bound = _bind(self.kfn, args, kwargs)
        for name, value in self.constexprs.items():
            if name in bound and bound[name] != value:
                raise LaunchError(f"cannot launch the compiled {self.kfn.__name__}: it was compiled with "
                                  f"{name}={value!r} and is launched with {name}={bound[name]!r} (warm up "
                                  f"that value, or launch {self.kfn.__name__}[grid](...) directly)")

    def __repr__(self) -> str:
        return f"<tlxc compiled kernel {self.name} ({self.compiled.arch})>"


def _bind(kfn, args: tuple, kwargs: dict) -> dict:
    try:
        bound = kfn.signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise LaunchError(f"cannot launch {kfn.__name__}: {exc}") from None
    bound.apply_defaults()
    return dict(bound.arguments)


_WARM_KEY = object()      # marks warmup handles in kfn.cache (no launch key starts with it)
_MISSING = object()


def _warm_key(kfn, args: tuple, kwargs: dict, grid, arch) -> tuple | None:
    """The key of a repeated warmup (module docstring); None when only the full path can
    tell (defaults, a callable grid, values the launch key refuses: that path explains)."""
    if grid.__class__ is not tuple or len(args) > len(kfn.param_names):
        return None
    index = kfn.__dict__.get("_param_index")
    if index is None:
        index = kfn._param_index = {n: i for i, n in enumerate(kfn.param_names)}
    values = list(args) + [_MISSING] * (len(kfn.param_names) - len(args))
    options = []
    from .launch import LAUNCH_OPTIONS, key_parts
    for name, value in kwargs.items():
        i = index.get(name)
        if i is None or name in LAUNCH_OPTIONS:     # (a parameter of an option's name: both, split_launch_kwargs)
            options.append((name, value))
        if i is None:
            continue
        if i < len(args) or values[i] is not _MISSING:
            return None
        values[i] = value
    if any(v is _MISSING for v in values):
        return None
    try:
        key = (_WARM_KEY, arch, grid, tuple(sorted(options, key=lambda kv: kv[0])), *key_parts(kfn, tuple(values)))
        hash(key)
    except Exception:         # noqa: BLE001 -- an argument only the full path can explain
        return None
    return key


def warmup(kfn, args: tuple, kwargs: dict, grid, arch: str | None = None) -> CompiledKernelHandle:
    """Compile ``kfn`` for these arguments without launching it (module docstring).  Tuples of
    tensors among them: the generated flat kernel's handle (runtime/tuple_args.py), which
    launches with the tuples' leaves in their place."""
    from .launch import _refresh, split_launch_kwargs
    from .tuple_args import flatten, runtime_tuples
    _refresh(kfn)             # compiled for globals or environment variables that changed since: forgotten
    key = _warm_key(kfn, args, kwargs, grid, arch)
    if key is not None:
        handle = kfn.cache.get(key)
        if handle is not None:
            return handle
    if any(isinstance(v, tuple) for v in (*args, *kwargs.values())):     # (never cached under this key)
        options, kernel_kwargs = split_launch_kwargs(kfn, kwargs)
        bound = _bind(kfn, args, kernel_kwargs)
        structures = runtime_tuples(kfn, tuple(bound.get(n) for n in kfn.param_names))
        if structures:
            flat, flat_args = flatten(kfn, tuple(bound[n] for n in kfn.param_names), structures)
            return flat.warmup(*flat_args, grid=grid, arch=arch, **options)
    handle = _warmup(kfn, args, kwargs, grid, arch)
    if key is not None:
        kfn.cache[key] = handle
    return handle


def _warmup(kfn, args: tuple, kwargs: dict, grid, arch: str | None) -> CompiledKernelHandle:
    from . import launch as L
    spec, bound, options, config = _specialized(kfn, args, kwargs, grid)
    constexprs = {name: value for name, (kind, value) in spec.params.items() if kind == "constexpr"}
    values = tuple(bound[name] for name in kfn.param_names)
    if L._has_cuda_tensor(values, {}) and arch is None:
        compiled = _prepare_gpu(kfn, values, config)
    else:
        from ..compiler import compile_kernel
        compiled = L._compile_cached(kfn, spec, arch or DEFAULT_ARCH, config.num_warps, compile_kernel,
                                     config.cluster, config.compile_options())
    return CompiledKernelHandle(kfn, compiled, options, constexprs)


def _specialized(kfn, args: tuple, kwargs: dict, grid):
    """A warmup's specialization: (spec, bound arguments, launch options, launch config), the
    arguments and grid checked as a launch would check them."""
    from ..interpreter.launch import specialize
    from . import launch as L
    args, kwargs = _resolve_legacy_descriptors(kfn, tuple(args), dict(kwargs), grid)
    spec, bound, options = specialize(kfn, tuple(args), dict(kwargs))
    options.pop("interpret", None)
    config = L.launch_config(kfn.__name__, options)
    L.grid_dims(kfn.__name__, grid, {**bound, **options})            # checked as a launch would
    return spec, bound, options, config


def cuda_source(kfn, args: tuple, kwargs: dict, grid, arch: str = DEFAULT_ARCH) -> str:
    """The CUDA C++ a warmup of these arguments compiles for ``arch``, without NVRTC (nothing is
    cached or loaded): for the CPU emulation of generated code (codegen_nvptx/emu), which needs the
    text only.  ``TLXC_DEBUG_BARRIERS=1`` is honoured as by a compile."""
    from ..compiler import compile_kernel
    spec, _, _, config = _specialized(kfn, args, kwargs, grid)
    compiled = compile_kernel(kfn, spec, arch=arch, num_warps=config.num_warps, cluster=config.cluster,
                              stages=("ir", "ir.opt", "cuda"),
                              debug_barriers=os.environ.get("TLXC_DEBUG_BARRIERS", "") == "1",
                              **config.compile_options())
    return compiled.asm["cuda"]


def _resolve_legacy_descriptors(kfn, args: tuple, kwargs: dict, grid) -> tuple[tuple, dict]:
    """Triton <= 3.3 host-filled descriptors (objects with ``tma_desc_cpu_ptr()``, or Triton 3.0's
    copies of their bytes) become the ``TensorDescriptor`` their fill recorded, as a launch does (``launch.launch``): the grid
    function fills them, so it runs first.  Other arguments pass through unchanged."""
    from . import launch as L
    from .tma_legacy import is_copy, is_legacy, resolve, resolve_copy
    if not any(is_legacy(v) or is_copy(v) for v in (*args, *kwargs.values())):
        return args, kwargs
    options, kernel_kwargs = L.split_launch_kwargs(kfn, kwargs)
    bound = L._bind(kfn, args, kernel_kwargs)
    bound = tuple(L._require_given(kfn, v, n) for v, n in zip(bound, kfn.param_names))
    L.grid_dims(kfn.__name__, grid, {**dict(zip(kfn.param_names, bound)), **options})
    return tuple(resolve(kfn.__name__, n, v) if is_legacy(v) else resolve_copy(v) if is_copy(v) else v
                 for v, n in zip(bound, kfn.param_names)), options


def _prepare_gpu(kfn, bound: tuple, config):
    """The plan the first launch of these arguments would build, kept under its compile key
    (``launch._plan``): that first launch finds it and still builds the fast path."""
    from . import launch as L
    return L._plan(kfn, bound, config).compiled
