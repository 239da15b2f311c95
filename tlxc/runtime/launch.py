"""``kernel[grid](*args, **kwargs)``: bind, specialize, compile once, launch.

The hot path of a launch with a seen specialization is: build a key from the
arguments (dtype, device and 16-byte alignment of each tensor; int-ness, ==1
and divisibility by 16 of each int; constexpr values), one dict lookup, the
grid, the stream, and a ctypes ``cuLaunchKernelEx``.  Everything else
(specialization, compilation, cache files, module loading, argument checks
with their error messages) happens on the first launch of a key.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import LaunchError
from .tma import TensorDescriptor

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "debug",
                  "launch_cooperative_grid", "launch_pdl", "interpret", "ctas_per_cga")

MAX_CLUSTER = 8             # CTAs per cluster: the portable limit (Hopper allows 16 "non-portable")


def cluster_dims(value) -> tuple[int, int, int] | None:
    """``ctas_per_cga`` as (x, y, z), or None for a launch without clusters."""
    if value is None:
        return None
    import operator
    dims = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    try:
        if isinstance(value, bool) or any(isinstance(d, bool) for d in dims):
            raise TypeError
        dims = tuple(operator.index(d) for d in dims)        # ints, numpy ints, 0-d integer tensors
    except TypeError:
        raise LaunchError(f"ctas_per_cga must be 1 to 3 positive ints, got {value!r}") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise LaunchError(f"ctas_per_cga must be 1 to 3 positive ints, got {value!r}")
    dims = dims + (1,) * (3 - len(dims))
    if dims[0] * dims[1] * dims[2] > MAX_CLUSTER:
        raise LaunchError(f"ctas_per_cga={dims} makes clusters of {dims[0] * dims[1] * dims[2]} CTAs; "
                          f"tlxc supports the portable limit of {MAX_CLUSTER}")
    return None if dims == (1, 1, 1) else dims


def check_cluster_grid(name: str, dims: tuple[int, int, int], grid: tuple[int, int, int]) -> None:
    """Every cluster is a full box of CTAs: the grid must be a multiple of the cluster shape."""
    if any(g % d for g, d in zip(grid, dims)):
        raise LaunchError(f"cannot launch {name}: grid {grid} is not a multiple of ctas_per_cga={dims} in every "
                          f"dimension (each cluster is a full box of CTAs)")


@dataclass
class LaunchPlan:
    """Everything a cached launch needs."""

    launch: Callable              # driver launcher: (grid, block, smem, stream, values)
    runtime_index: list[int]      # positions (in the bound parameter list) of runtime params
    is_pointer: list[bool]
    block: tuple[int, int, int]
    smem: int
    device: int
    compiled: Any
    pick: Callable = None         # all argument values -> the runtime ones, in order

    def __post_init__(self):
        import operator
        if len(self.runtime_index) == 1:
            index = self.runtime_index[0]
            self.pick = lambda values: (values[index],)
        elif self.runtime_index:
            self.pick = operator.itemgetter(*self.runtime_index)
        else:
            self.pick = lambda values: ()


class Launcher:
    """``kernel[grid]``: calling it launches (see ``build_fast_path``)."""

    __slots__ = ("grid", "kfn")

    def __init__(self, kfn, grid):
        self.kfn = kfn
        self.grid = grid

    def __call__(self, *args, **kwargs):
        return self.kfn._fast(self.grid, *args, **kwargs)


_MISSING = object()

_FAST_TEMPLATE = """
def _tlx_fast(_tlx_grid, {params}, *, {options}**_tlx_unknown):
    if {interpret_check}_tlx_unknown:
        return _tlx_slow(_tlx_grid, ({args}), dict(_tlx_unknown{option_kwargs}))
    try:
{values}
        _tlx_run, _tlx_block, _tlx_smem, _tlx_device, _tlx_pick, _tlx_compiled = _tlx_cache[({num_warps}, {ctas}, {key})]
    except Exception:   # a new specialization, or arguments only the slow path can explain
        return _tlx_slow(_tlx_grid, ({args}), dict({option_kwargs_first}))
    if _tlx_grid.__class__ is not tuple:
        _tlx_grid = _tlx_grid(dict(zip(_tlx_names, ({args})){option_kwargs})) if callable(_tlx_grid) \\
            else (_tlx_grid,)
    _tlx_n = len(_tlx_grid)
    if _tlx_n == 1:
        _tlx_grid = (_tlx_grid[0], 1, 1)
    elif _tlx_n == 2:
        _tlx_grid = (_tlx_grid[0], _tlx_grid[1], 1)
    if _tlx_grid[0] and _tlx_grid[1] and _tlx_grid[2]:
        _tlx_run(_tlx_grid, _tlx_block, _tlx_smem, _tlx_kfn._stream(_tlx_device), _tlx_pick(({values_tuple})))
    return _tlx_compiled
"""

# Launch options the fast path accepts as keywords (unless the kernel has a
# parameter of that name, which then wins), with their defaults.
_FAST_OPTIONS = (("num_warps", 4), ("num_stages", None), ("num_ctas", None), ("maxnreg", None),
                 ("ctas_per_cga", None), ("interpret", None))


def _kind(value) -> str:
    if value.__class__ in (int, float, bool):
        return "number"
    if isinstance(value, TensorDescriptor):
        return "descriptor"
    return "none" if value is None else "tensor"


def key_parts(kfn, bound: tuple) -> list:
    """The flat launch-cache key of ``bound`` (the fast path computes the same)."""
    parts = []
    for name, value in zip(kfn.param_names, bound):
        if name in kfn.constexpr_params:
            parts.append(value)
        elif value.__class__ in (int, float, bool):
            parts += [value.__class__, value == 1, value % 16 == 0, -2147483648 <= value <= 2147483647]
        elif value is None:
            parts.append(None)
        elif isinstance(value, TensorDescriptor):
            parts += [_descriptor_type_key(kfn, name, value), value.device_index]
        else:
            parts += [value.dtype, value.get_device(), value.data_ptr() & 15]
    return parts


def _descriptor_type_key(kfn, name: str, desc: TensorDescriptor) -> int:
    """The descriptor's launch key; its box is checked here, the first time a launch uses it."""
    try:
        return desc._type_key
    except LaunchError as exc:
        raise LaunchError(f"argument '{name}' of {kfn.__name__}: {exc.message}") from None


def build_fast_path(kfn, bound: tuple):
    """Generate ``fast(grid, *params, num_warps=..., ...)`` for the argument kinds of ``bound``.

    Python binds the arguments natively; each tensor contributes (dtype,
    device, 16-byte alignment) to a flat key and its data pointer to the
    values, each number (type, ==1, divisibility by 16, fits in i32), each
    TMA descriptor (its IR type, device) to the key and its encoded
    ``CUtensorMap`` (cached on the descriptor) to the values, each constexpr
    its value.  Arguments of other kinds raise inside the ``try`` or
    miss the cache and go to the slow path, which specializes, compiles,
    checks and explains.
    """
    params, values, key, value_names = [], [], [], []
    for i, (name, param) in enumerate(kfn.signature.parameters.items()):
        default = "_tlx_MISSING" if param.default is param.empty else f"_tlx_defaults[{i}]"
        params.append(f"{name}={default}")
        kind = _kind(bound[i])
        if name in kfn.constexpr_params:
            key.append(name)
            value_names.append(name)
        elif kind == "tensor":
            values.append(f"        v{i} = {name}.data_ptr()")
            key += [f"{name}.dtype", f"{name}.get_device()", f"v{i} & 15"]
            value_names.append(f"v{i}")
        elif kind == "descriptor":
            values.append(f"        v{i} = {name}.encode()")
            key += [f"{name}._type_key", f"{name}.device_index"]
            value_names.append(f"v{i}")
        elif kind == "number":
            key += [f"{name}.__class__", f"{name} == 1", f"{name} % 16 == 0",
                    f"-2147483648 <= {name} <= 2147483647"]
            value_names.append(name)
        else:
            key.append(f"None if {name} is None else _tlx_MISSING")
            value_names.append(name)
    options = [(o, d) for o, d in _FAST_OPTIONS if o not in kfn.signature.parameters]
    option_names = [o for o, _ in options]
    source = _FAST_TEMPLATE.format(
        params=", ".join(params), args=", ".join(kfn.param_names) + ",",
        options="".join(f"{o}={d!r}, " for o, d in options),
        interpret_check="interpret is not None or " if "interpret" in option_names else "",
        option_kwargs="".join(f", {o}={o}" for o in option_names),
        option_kwargs_first=", ".join(f"{o}={o}" for o in option_names if o != "interpret"),
        num_warps="num_warps" if "num_warps" in option_names else "4",
        ctas="ctas_per_cga" if "ctas_per_cga" in option_names else "None",
        values="\n".join(values) or "        pass", key=", ".join(key),
        values_tuple=", ".join(value_names) + ",")
    defaults = [p.default for p in kfn.signature.parameters.values()]
    scope = {"_tlx_MISSING": _MISSING, "_tlx_defaults": defaults, "_tlx_kfn": kfn, "_tlx_cache": kfn.fast_cache,
             "_tlx_names": kfn.param_names,
             "_tlx_slow": lambda grid, args, kwargs: launch(kfn, grid, args, kwargs)}
    exec(compile(source, f"<tlxc launcher of {kfn.__name__}>", "exec"), scope)  # noqa: S102 (our own template)
    return scope["_tlx_fast"]


def _torch():
    import torch
    return torch


def launch(kfn, grid, args: tuple, kwargs: dict):
    if kfn._interpret is None:
        kfn._interpret = os.environ.get("TLXC_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on")
    if kfn._interpret or (kwargs and kwargs.get("interpret") is not None):
        from ..interpreter import maybe_interpret
        if maybe_interpret(kfn, grid, args, kwargs):
            return None
        kwargs = {k: v for k, v in kwargs.items() if k != "interpret"}   # interpret=False: the GPU
    options = {}
    if kwargs:
        options = {k: kwargs[k] for k in LAUNCH_OPTIONS if k in kwargs and k not in kfn.signature.parameters}
        kernel_kwargs = {k: v for k, v in kwargs.items() if k not in options}
        bound = _bind(kfn, args, kernel_kwargs)
    elif len(args) == len(kfn.param_names):
        bound = args
    else:
        bound = _bind(kfn, args, {})
    bound = tuple(_require_given(kfn, v, n) for v, n in zip(bound, kfn.param_names))
    num_warps = options.get("num_warps", 4)
    ctas = options.get("ctas_per_cga")
    key = tuple([num_warps, ctas if isinstance(ctas, (tuple, type(None))) else repr(ctas)] + key_parts(kfn, bound))
    plan = kfn.cache.get(key)
    if plan is None:
        if not _has_cuda_tensor(args, kwargs):
            return _interpret(kfn, grid, args, kwargs)
        plan = kfn.cache[key] = _prepare(kfn, bound, num_warps, cluster_dims(ctas))
        kfn.fast_cache[key] = (plan.launch, plan.block, plan.smem, plan.device, plan.pick, plan.compiled)
        if kfn._fast == kfn._first_launch:
            kfn._fast = build_fast_path(kfn, bound)
    if callable(grid):
        grid = grid(dict(zip(kfn.param_names, bound), **options))
    if grid.__class__ is int:
        grid3 = (grid, 1, 1)
    else:
        n = len(grid)
        grid3 = (grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1)
    if grid3[0] * grid3[1] * grid3[2] == 0:
        return None
    values = [bound[i].data_ptr() if p else _scalar_value(bound[i])
              for i, p in zip(plan.runtime_index, plan.is_pointer)]
    plan.launch(grid3, plan.block, plan.smem, kfn._stream(plan.device), values)
    return plan.compiled


def _scalar_value(value):
    """A non-pointer runtime argument as the launcher packs it."""
    return value.encode() if isinstance(value, TensorDescriptor) else value


def _require_given(kfn, value, name):
    if value is _MISSING:
        raise LaunchError(f"cannot launch {kfn.__name__}: missing a required argument: '{name}'")
    return value


def _interpret(kfn, grid, args, kwargs):
    from ..interpreter import maybe_interpret
    if not maybe_interpret(kfn, grid, args, kwargs):
        raise LaunchError(f"cannot launch {kfn.__name__}: no CUDA tensor among its arguments and the "
                          f"interpreter was not asked for (TLXC_INTERPRET=1 or interpret=True)")


def _has_cuda_tensor(args, kwargs) -> bool:
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, TensorDescriptor):
            value = value.base
        if getattr(value, "is_cuda", False):
            return True
    return False


def _bind(kfn, args, kwargs) -> tuple:
    try:
        bound = kfn.signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise LaunchError(f"cannot launch {kfn.__name__}: {exc}") from None
    bound.apply_defaults()
    return tuple(bound.arguments[name] for name in kfn.param_names)


def _prepare(kfn, bound: tuple, num_warps: int, cluster: tuple[int, int, int] | None = None) -> LaunchPlan:
    """First launch of a key: check arguments, specialize, compile (or load from
    the disk cache), load the module, build the launcher."""
    from ..compiler import compile_kernel
    from ..frontend.specialize import annotation_type, specialization_from_args
    from ..ir.types import PointerType
    from . import driver

    torch = _torch()
    arguments = dict(zip(kfn.param_names, bound))
    device = None
    for name, value in arguments.items():
        tensor, what = value, ""
        if isinstance(value, TensorDescriptor):
            tensor, what = value.base, "a TensorDescriptor of "
        if isinstance(tensor, torch.Tensor):
            if not tensor.is_cuda:
                raise LaunchError(f"argument '{name}' of {kfn.__name__} is {what}a CPU tensor; launch with CUDA "
                                  f"tensors, or run on the interpreter (TLXC_INTERPRET=1)")
            if device is None:
                device = tensor.get_device()
            elif tensor.get_device() != device:
                raise LaunchError(f"argument '{name}' of {kfn.__name__} is {what}a tensor on "
                                  f"cuda:{tensor.get_device()} but earlier tensor arguments are on cuda:{device}")
        param = kfn.signature.parameters[name]
        annotated = annotation_type(param.annotation, kfn.fn)
        if isinstance(annotated, PointerType) and not isinstance(value, torch.Tensor):
            raise LaunchError(f"argument '{name}' of {kfn.__name__} must be a tensor (it is declared "
                              f"{annotated}), got {type(value).__name__}")
    if device is None:
        device = torch.cuda.current_device()
    spec = specialization_from_args(kfn, arguments)
    for name, (kind, t) in spec.params.items():
        param = kfn.signature.parameters[name]
        annotated = annotation_type(param.annotation, kfn.fn)
        if isinstance(annotated, PointerType) and isinstance(t, PointerType) and t != annotated:
            raise LaunchError(f"argument '{name}' of {kfn.__name__} is a tensor of {t.pointee}, but the kernel "
                              f"declares {annotated}")
    major, minor = torch.cuda.get_device_capability(device)
    arch = {9: "sm_90a", 10: "sm_100a"}.get(major, "sm_89" if (major, minor) >= (8, 9) else "sm_80")
    compiled = _compile_cached(kfn, spec, arch, num_warps, compile_kernel, cluster)
    module = driver.CudaModule.load(compiled.asm["cubin"], device)
    function = module.function(compiled.metadata["name"], device)
    smem = compiled.metadata.get("scratch_bytes", 0)
    limit = driver.device_properties(device).max_shared_memory_per_block_optin
    if smem > limit:
        raise LaunchError(f"{kfn.__name__} needs {smem} bytes of shared memory; the device allows {limit}")
    if smem > 48 * 1024:
        function.set_dynamic_smem(smem)
    launcher = function.make_launcher(compiled.metadata["params"])
    runtime_names = [n for n, _ in spec.runtime_params()]
    index = [kfn.param_names.index(n) for n in runtime_names]
    is_pointer = [isinstance(t, PointerType) for _, t in spec.runtime_params()]
    for n, ptr in zip(runtime_names, is_pointer):
        if not ptr and not isinstance(arguments[n], (int, float, bool, TensorDescriptor)):
            raise LaunchError(f"argument '{n}' of {kfn.__name__} must be a number, got {type(arguments[n]).__name__}")
    threads = compiled.metadata["threads"]
    kfn._stream = driver.stream_getter()
    run = launcher.launch
    if cluster is not None:          # compiled with __cluster_dims__: the grid must tile into clusters
        def run(grid, block, smem, stream, values, _launch=launcher.launch):
            check_cluster_grid(kfn.__name__, cluster, grid)
            _launch(grid, block, smem, stream, values)
    return LaunchPlan(run, index, is_pointer, (threads, 1, 1), smem, device, compiled)


def _compile_cached(kfn, spec, arch: str, num_warps: int, compile_kernel, cluster=None):
    """Compile, or load the cubin and metadata from the disk cache."""
    from .. import __version__
    from .cache import DiskCache, compiler_fingerprint
    debug_barriers = os.environ.get("TLXC_DEBUG_BARRIERS", "") == "1"
    h = hashlib.sha256()
    for part in (__version__, compiler_fingerprint(), kfn.cache_key, repr(spec.key()), arch, str(num_warps),
                 str(debug_barriers), str(cluster)):
        h.update(part.encode())
        h.update(b"\0")
    key = h.hexdigest()
    cache = DiskCache()
    # A dump must see a real compile, and a hand-edited override must neither be
    # hidden by nor leak into the cache.
    bypass = bool(os.environ.get("TLXC_DUMP_DIR") or os.environ.get("TLXC_OVERRIDE_DIR"))
    entry = None if bypass else cache.get(key)
    if entry is not None:
        try:
            metadata = json.loads(entry["metadata.json"])
            return _Cached(kfn.__name__, arch, spec, {"cubin": entry["kernel.cubin"],
                                                     "cuda": entry["kernel.cu"].decode()}, metadata)
        except (KeyError, ValueError):
            pass   # an entry of another format: recompile and overwrite
    compiled = compile_kernel(kfn, spec, arch=arch, num_warps=num_warps, debug_barriers=debug_barriers,
                              cluster=cluster)
    metadata = {k: v for k, v in compiled.metadata.items() if isinstance(v, (int, float, str, list, type(None)))}
    if not os.environ.get("TLXC_OVERRIDE_DIR"):
            cache.put(key, {"metadata.json": json.dumps(metadata).encode(), "kernel.cubin": compiled.asm["cubin"],
                        "kernel.cu": compiled.asm["cuda"].encode()})
    return compiled


@dataclass
class _Cached:
    name: str
    arch: str
    spec: Any
    asm: dict
    metadata: dict
