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
from dataclasses import dataclass
from typing import Any, Callable

from .. import language as tl
from ..errors import LaunchError

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "debug",
                  "launch_cooperative_grid", "launch_pdl", "interpret")


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


class Launcher:
    __slots__ = ("kfn", "grid")

    def __init__(self, kfn, grid):
        self.kfn = kfn
        self.grid = grid

    def __call__(self, *args, **kwargs):
        return launch(self.kfn, self.grid, args, kwargs)


def _torch():
    import torch
    return torch


def _key_of(value, name_is_constexpr: bool):
    """A cheap, hashable summary of one argument for the launch cache."""
    if name_is_constexpr:
        return ("c", value.value if isinstance(value, tl.constexpr) else value)
    cls = value.__class__
    if cls is int:
        return ("i", value == 1, value % 16 == 0, -2**31 <= value < 2**31)
    if cls is float:
        return ("f",)
    if cls is bool:
        return ("b",)
    ptr = getattr(value, "data_ptr", None)
    if ptr is not None:
        return ("t", value.dtype, value.get_device(), ptr() % 16 == 0)
    if value is None:
        return ("n",)
    if isinstance(value, tl.constexpr):
        return ("c", value.value)
    return ("o", cls, id(value))


def launch(kfn, grid, args: tuple, kwargs: dict):
    if kfn._interpret is None:
        kfn._interpret = os.environ.get("TLXC_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on")
    if kfn._interpret or (kwargs and kwargs.get("interpret") is not None):
        return _interpret(kfn, grid, args, kwargs)
    options = {}
    if kwargs:
        options = {k: kwargs[k] for k in LAUNCH_OPTIONS if k in kwargs and k not in kfn.signature.parameters}
        kernel_kwargs = {k: v for k, v in kwargs.items() if k not in options}
        bound = _bind(kfn, args, kernel_kwargs)
    elif len(args) == len(kfn.param_names):
        bound = args
    else:
        bound = _bind(kfn, args, {})
    num_warps = options.get("num_warps", 4)
    constexpr_flags = kfn._constexpr_flags
    key = (num_warps,) + tuple(_key_of(v, c) for v, c in zip(bound, constexpr_flags))
    plan = kfn.cache.get(key)
    if plan is None:
        if not _has_cuda_tensor(args, kwargs):
            return _interpret(kfn, grid, args, kwargs)
        plan = kfn.cache[key] = _prepare(kfn, bound, num_warps)
    if callable(grid):
        grid = grid(dict(zip(kfn.param_names, bound), **options))
    if grid.__class__ is int:
        grid3 = (grid, 1, 1)
    else:
        n = len(grid)
        grid3 = (grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1)
    if grid3[0] * grid3[1] * grid3[2] == 0:
        return None
    values = [bound[i].data_ptr() if p else bound[i] for i, p in zip(plan.runtime_index, plan.is_pointer)]
    plan.launch(grid3, plan.block, plan.smem, kfn._stream(plan.device), values)
    return plan.compiled


def _interpret(kfn, grid, args, kwargs):
    from ..interpreter import maybe_interpret
    if not maybe_interpret(kfn, grid, args, kwargs):
        raise LaunchError(f"cannot launch {kfn.__name__}: no CUDA tensor among its arguments and the "
                          f"interpreter was not asked for (TLXC_INTERPRET=1 or interpret=True)")


def _has_cuda_tensor(args, kwargs) -> bool:
    for value in list(args) + list(kwargs.values()):
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


def _prepare(kfn, bound: tuple, num_warps: int) -> LaunchPlan:
    """First launch of a key: check arguments, specialize, compile (or load from
    the disk cache), load the module, build the launcher."""
    from ..compiler import compile_kernel
    from ..frontend.specialize import annotation_type
    from ..ir.types import PointerType
    from ..interpreter.launch import specialize
    from . import driver

    torch = _torch()
    arguments = dict(zip(kfn.param_names, bound))
    device = None
    for name, value in arguments.items():
        if isinstance(value, torch.Tensor):
            if not value.is_cuda:
                raise LaunchError(f"argument '{name}' of {kfn.__name__} is a CPU tensor; launch with CUDA "
                                  f"tensors, or run on the interpreter (TLXC_INTERPRET=1)")
            if device is None:
                device = value.get_device()
            elif value.get_device() != device:
                raise LaunchError(f"argument '{name}' of {kfn.__name__} is on cuda:{value.get_device()} "
                                  f"but earlier tensor arguments are on cuda:{device}")
        param = kfn.signature.parameters[name]
        annotated = annotation_type(param.annotation, kfn.fn)
        if isinstance(annotated, PointerType) and not isinstance(value, torch.Tensor):
            raise LaunchError(f"argument '{name}' of {kfn.__name__} must be a tensor (it is declared "
                              f"{annotated}), got {type(value).__name__}")
    if device is None:
        device = torch.cuda.current_device()
    spec, _, _ = specialize(kfn, bound, {})
    for name, (kind, t) in spec.params.items():
        param = kfn.signature.parameters[name]
        annotated = annotation_type(param.annotation, kfn.fn)
        if isinstance(annotated, PointerType) and kind == "runtime" and t != annotated:
            raise LaunchError(f"argument '{name}' of {kfn.__name__} is a tensor of {t.pointee}, but the kernel "
                              f"declares {annotated}")
    major, minor = torch.cuda.get_device_capability(device)
    arch = {9: "sm_90a", 10: "sm_100a"}.get(major, "sm_89" if (major, minor) >= (8, 9) else "sm_80")
    compiled = _compile_cached(kfn, spec, arch, num_warps, compile_kernel)
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
        if not ptr and not isinstance(arguments[n], (int, float, bool)):
            raise LaunchError(f"argument '{n}' of {kfn.__name__} must be a number, got {type(arguments[n]).__name__}")
    threads = compiled.metadata["threads"]
    kfn._stream = driver.stream_getter()
    return LaunchPlan(launcher.launch, index, is_pointer, (threads, 1, 1), smem, device, compiled)


def _compile_cached(kfn, spec, arch: str, num_warps: int, compile_kernel):
    """Compile, or load the cubin and metadata from the disk cache."""
    from .. import __version__
    from .cache import DiskCache
    h = hashlib.sha256()
    for part in (__version__, kfn.cache_key, repr(spec.key()), arch, str(num_warps)):
        h.update(part.encode())
        h.update(b"\0")
    key = h.hexdigest()
    cache = DiskCache()
    entry = cache.get(key)
    if entry is not None:
        try:
            metadata = json.loads(entry["metadata.json"])
            return _Cached(kfn.__name__, arch, spec, {"cubin": entry["kernel.cubin"],
                                                     "cuda": entry["kernel.cu"].decode()}, metadata)
        except (KeyError, ValueError):
            pass   # an entry of another format: recompile and overwrite
    compiled = compile_kernel(kfn, spec, arch=arch, num_warps=num_warps)
    metadata = {k: v for k, v in compiled.metadata.items() if isinstance(v, (int, float, str, list, type(None)))}
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
