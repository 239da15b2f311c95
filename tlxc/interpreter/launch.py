"""Launching a kernel on the interpreter: specialize, build IR, run the grid."""
from __future__ import annotations

import itertools
import os
import random
import weakref
from typing import Any, TextIO

import numpy as np

from .. import language as tl
from ..descriptors import TensorDescriptor, store_rule_error
from ..errors import LaunchError
from ..frontend.specialize import Specialization, specialization_from_args
from ..ir.tensormap import tma_store_targets
from ..ir.types import PointerType, ScalarType, TensorDescType
from ..runtime.launch import (
    check_cluster_grid,
    check_num_warps,
    cluster_dims,
    grid_dims,
    launch_config,
    split_launch_kwargs,
)
from .clc import WorkQueue
from .executor import KernelRunner
from .memory import GlobalMemory, element_type_of, is_array_argument, is_torch_tensor
from .values import register_dtype

_RUNNERS: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()
_CHECKED: weakref.WeakKeyDictionary[Any, set] = weakref.WeakKeyDictionary()


def _unwrap(value):
    return value.value if isinstance(value, tl.constexpr) else value


def specialize(kfn, args: tuple, kwargs: dict) -> tuple[Specialization, dict[str, Any], dict[str, Any]]:
    """(specialization, bound arguments by name, launch options) from a launch's
    actual arguments (``frontend.specialize.specialization_from_args``)."""
    options, kernel_kwargs = split_launch_kwargs(kfn, kwargs)
    try:
        bound = kfn.signature.bind(*args, **kernel_kwargs)
    except TypeError as exc:
        raise LaunchError(f"cannot launch {kfn.__name__}: {exc}") from None
    bound.apply_defaults()
    for name, value in bound.arguments.items():
        if isinstance(value, np.ndarray) and name not in kfn.constexpr_params:
            try:
                element_type_of(value)
            except LaunchError as exc:
                raise LaunchError(f"argument '{name}' of {kfn.__name__}: {exc.message}") from None
    spec = specialization_from_args(kfn, dict(bound.arguments))
    _check_pointer_annotations(kfn, spec)
    return spec, dict(bound.arguments), options


def _check_pointer_annotations(kfn, spec: Specialization) -> None:
    """As the GPU launch (``runtime/launch.py: _prepare``): a tensor whose dtype differs from
    its parameter's pointer annotation is refused, the kernel being written for that type."""
    from ..frontend.specialize import annotation_type
    for name, (_kind, t) in spec.params.items():
        annotated = annotation_type(kfn.signature.parameters[name].annotation, kfn.fn)
        if isinstance(annotated, PointerType) and isinstance(t, PointerType) and t != annotated:
            raise LaunchError(f"argument '{name}' of {kfn.__name__} is a tensor of {t.pointee}, but the kernel "
                              f"declares {annotated}")


def _address(value) -> int:
    if isinstance(value, np.ndarray):
        return value.__array_interface__["data"][0]
    return value.data_ptr()


def normalize_grid(grid, meta: dict[str, Any], name: str = "the kernel") -> tuple[int, int, int]:
    """The launch grid as three ints, checked against CUDA's limits as a GPU launch is."""
    return grid_dims(name, grid, meta)


# Programs one interpreted launch may run: each costs at least tens of microseconds in
# Python, so a grid beyond this would run for hours (TLXC_INTERPRET_MAX_PROGRAMS raises it).
MAX_PROGRAMS = 1 << 22


def _check_program_count(name: str, grid3: tuple[int, int, int]) -> None:
    raw = os.environ.get("TLXC_INTERPRET_MAX_PROGRAMS", "").strip()
    try:
        limit = int(raw) if raw else MAX_PROGRAMS
    except ValueError:
        raise LaunchError(f"TLXC_INTERPRET_MAX_PROGRAMS must be an int, got {raw!r}") from None
    count = grid3[0] * grid3[1] * grid3[2]
    if count > limit:
        raise LaunchError(f"cannot interpret {name}: its grid {grid3} has {count} programs, more than the "
                          f"interpreter runs in one launch ({limit}; one program takes tens of microseconds or "
                          f"more): launch a smaller problem, or raise TLXC_INTERPRET_MAX_PROGRAMS")


def _program_ids(grid3: tuple[int, int, int], step: tuple[int, int, int]):
    """The first CTA of every program (or cluster), x fastest, generated lazily."""
    for z in range(0, grid3[2], step[2]):
        for y in range(0, grid3[1], step[1]):
            for x in range(0, grid3[0], step[0]):
                yield (x, y, z)


def interpret_arch(arch: str | None = None) -> str:
    """The architecture the interpreter emulates (which of Hopper's and Blackwell's
    ops a kernel may use): ``arch`` if given, else ``TLXC_INTERPRET_ARCH``, else sm_90a."""
    from ..arch import ArchError, resolve
    from ..target import DEFAULT_ARCH
    arch = arch or os.environ.get("TLXC_INTERPRET_ARCH", "").strip() or DEFAULT_ARCH
    try:
        return resolve(arch).arch          # sm_100 and cuda:100 name sm_100a (tlxc/arch.py)
    except ArchError as exc:
        raise LaunchError(f"interpreter arch (TLXC_INTERPRET_ARCH or arch=): {exc}") from None


def _runner(kfn, spec: Specialization, num_warps: int, cluster=None, arch: str | None = None,
            check_barriers: bool = True, num_ctas: int = 1) -> KernelRunner:
    from ..compiler import frontend
    arch = interpret_arch(arch)
    cache = _RUNNERS.setdefault(kfn, {})
    key = (spec.key(), num_warps, cluster, arch, kfn.cache_key, num_ctas)   # (the key follows reassigned globals)
    runner = cache.get(key)
    if runner is None:
        module = frontend(kfn, spec, arch=arch, num_warps=num_warps, cluster=cluster, num_ctas=num_ctas)
        runner = cache[key] = KernelRunner(module, arch=arch)
    _static_check(kfn, key, runner.module, check_barriers)
    return runner


def _static_check(kfn, key: tuple, module, check_barriers: bool) -> None:
    """The ``check-barriers`` pass every GPU compile runs (``docs/checking.md``), on the
    interpreted launch too: a race or deadlock that this run's interleaving does not reveal
    still fails.  ``TLXC_CHECK_BARRIERS=warn|0`` (and ``TLXC_DEBUG_BARRIERS=1``) relax it as
    they relax a compile; ``check_barriers=False`` (``tlxc.interpret(..., check_barriers=False)``,
    ``tlxc check --run``, ``tlxc trace``) skips the barrier findings.  Resource errors always
    stop the launch, as they stop a compile.  Done once per specialization and mode."""
    from ..check.check_barriers import CheckBarriers, barrier_mode
    from ..compiler import copy_module
    from ..options import CompileOptions
    from ..passes.canonicalize import Canonicalize
    from ..passes.manager import PassManager
    _specialization, num_warps, cluster, arch, _kernel_key, num_ctas = key
    options = CompileOptions(num_warps=num_warps, arch=arch, cluster=cluster, check_barriers=check_barriers,
                             num_ctas=num_ctas)
    mode = barrier_mode(options)
    done = _CHECKED.setdefault(kfn, set())
    if (key, mode) in done:
        return
    PassManager([Canonicalize(), CheckBarriers()]).run(copy_module(module), options)
    done.add((key, mode))      # only once it passed: a failing check fails every launch


def _scalar_argument(name: str, value, t: ScalarType):
    dtype = register_dtype(t)
    if t.is_integer and not t.is_boolean:
        info = np.iinfo(dtype)
        if not info.min <= int(value) <= info.max:
            raise LaunchError(f"argument '{name}' = {value} does not fit in its type {t}")
        return dtype.type(int(value))
    if t.name in ("bf16", "f8e4m3", "f8e5m2"):
        from .values import round_to
        return round_to(np.float64(value), t)[()]
    return dtype.type(value)


def interpret_launch(kfn, grid, args: tuple = (), kwargs: dict | None = None, *,
                     num_warps: int | None = None, seed: int | None = None, order: str = "sequential",
                     out: TextIO | None = None, arch: str | None = None,
                     check_barriers: bool = True) -> InterpretedLaunch:
    """Run ``kfn[grid](*args, **kwargs)`` on the CPU interpreter; returns what a GPU launch
    returns in Triton, the compiled kernel's ``.metadata`` (``InterpretedLaunch``)."""
    if order not in ("sequential", "shuffled"):
        raise LaunchError(f"order must be 'sequential' or 'shuffled', got {order!r}")
    runner, grid3, memory, values = prepare_launch(kfn, grid, args, kwargs, num_warps=num_warps, arch=arch,
                                                   check_barriers=check_barriers)
    dims = cluster_dims((kwargs or {}).get("ctas_per_cga"))      # checked by prepare_launch
    if dims is not None:
        check_cluster_grid(kfn.__name__, dims, grid3)
    programs = _program_ids(grid3, dims or (1, 1, 1))
    if order == "shuffled":
        programs = list(programs)
        random.Random(seed).shuffle(programs)
    queue = WorkQueue(programs)     # tlx.clc_try_cancel takes programs from it too (clc.py)
    memory.clc_queue = queue
    while (pid := queue.take()) is not None:
        if dims is None:
            runner.run_program(pid, grid3, memory, values, program_seed(seed, pid), out)
        else:                      # the CTAs of the cluster whose first CTA is pid, in rank order
            members = [(pid[0] + x, pid[1] + y, pid[2] + z) for z, y, x in
                       itertools.product(range(dims[2]), range(dims[1]), range(dims[0]))]
            runner.run_cluster(members, dims, grid3, memory, values, program_seed(seed, pid), out)
    # (num_ctas: each program runs on the first CTA of its cluster, as compiled: the same programs)
    return InterpretedLaunch(kfn.__name__, runner.kernel.attrs.get("num_warps", 4), dims,
                             (kwargs or {}).get("num_stages"), (kwargs or {}).get("num_ctas") or 1)


class InterpretedLaunch:
    """What an interpreted launch returns, as a GPU launch returns its compiled kernel:
    ``.metadata`` with Triton's fields (``num_warps``, ``num_stages``, ``num_ctas``,
    ``cluster_dims``, ``ctas_per_cga``, ``name``, ``shared`` = 0: nothing is compiled)."""

    def __init__(self, name: str, num_warps: int, cluster: tuple[int, int, int] | None,
                 num_stages: int | None, num_ctas: int = 1):
        from ..runtime.warmup import KernelMetadata
        self.name = name
        self.metadata = KernelMetadata({"name": name, "num_warps": num_warps, "num_ctas": int(num_ctas),
                                        "cluster": list(cluster) if cluster else None}, num_stages)
        self.asm: dict = {}

    def __repr__(self) -> str:
        return f"<interpreted launch of {self.name}: {self.metadata!r}>"


def program_seed(seed: int | None, pid: tuple[int, int, int]) -> int | None:
    """The seed of one program's task interleaving, drawn from the launch's ``seed``."""
    return None if seed is None else hash((seed, pid)) & 0xFFFFFFFF


def prepare_launch(kfn, grid, args: tuple = (), kwargs: dict | None = None, *,
                   num_warps: int | None = None, arch: str | None = None,
                   check_barriers: bool = True) -> tuple[KernelRunner, tuple[int, int, int], GlobalMemory, list]:
    """What every program of a launch runs on: (runner, 3-D grid, global
    memory holding the arguments, the kernel's runtime argument values).
    ``check_barriers=False`` skips the static barrier checks (``_static_check``)."""
    spec, bound, options = specialize(kfn, tuple(args), dict(kwargs or {}))
    options.pop("interpret", None)
    config = launch_config(kfn.__name__, options)        # the GPU path's checks of every option
    warps = config.num_warps if "num_warps" in options else check_num_warps(
        kfn.__name__, num_warps if num_warps is not None else 4)
    _check_constants(kfn, spec)
    grid3 = normalize_grid(grid, {**bound, **options}, kfn.__name__)
    _check_program_count(kfn.__name__, grid3)
    runner = _runner(kfn, spec, warps, config.cluster, arch, check_barriers, config.num_ctas)
    memory = GlobalMemory()
    runtime = spec.runtime_params()
    for name, t in runtime:
        if isinstance(t, PointerType):
            _check_device(name, bound[name])
            memory.add_argument(name, bound[name])
        elif isinstance(t, TensorDescType):
            _check_device(name, bound[name].base)
            _check_descriptor_storage(kfn, name, bound[name])
    stored, _ = tma_store_targets(runner.kernel)     # the GPU launch's check (runtime/launch.py)
    for (name, t), arg in zip(runtime, runner.kernel.regions[0].block.args):
        if isinstance(t, TensorDescType) and id(arg) in stored:
            error = store_rule_error(kfn.__name__, name, bound[name])
            if error is not None:
                raise error
    values = [_runtime_value(memory, name, bound[name], t) for name, t in runtime]
    return runner, grid3, memory, values


def _check_constants(kfn, spec: Specialization) -> None:
    """Compile-time constants key the IR cache: each must be hashable (a tuple, not a list)."""
    for name, (kind, value) in spec.params.items():
        if kind != "constexpr":
            continue
        try:
            hash(value)
        except TypeError:
            raise LaunchError(f"argument '{name}' of {kfn.__name__} is {value!r} ({type(value).__name__}), "
                              f"which cannot be a compile-time constant (it is not hashable): pass a tuple"
                              ) from None


def _check_descriptor_storage(kfn, name: str, desc) -> None:
    """The descriptor's shape and strides must stay inside its tensor's storage: the
    interpreter reads through them (the GPU's TMA unit would read foreign memory)."""
    from .memory import _extent
    base = desc.base
    low, high, data, _ = _extent(base, name)
    itemsize = base.itemsize if isinstance(base, np.ndarray) else base.element_size()
    last = sum((size - 1) * stride for size, stride in zip(desc.shape, desc.strides))
    reach = data + (last + 1) * itemsize
    if reach > high or data < low:
        available = max((high - data) // itemsize, 0)
        raise LaunchError(f"argument '{name}' of {kfn.__name__}: TensorDescriptor shape {list(desc.shape)} with "
                          f"strides {list(desc.strides)} reaches element {last} of its tensor, whose storage holds "
                          f"{available} elements from the tensor's start: describe at most the tensor "
                          f"(TensorDescriptor.from_tensor(t, block_shape))")


def _runtime_value(memory: GlobalMemory, name: str, value, t):
    """A runtime parameter's interpreter value: pointers become virtual
    addresses, a TMA descriptor stays the ``TensorDescriptor`` (its ops read
    ``base``, ``shape``, ``strides``, ``block_shape`` and ``padding``)."""
    if isinstance(t, PointerType):
        return np.int64(memory.pointer_of(name))
    if isinstance(t, TensorDescType):
        return value
    return _scalar_argument(name, value, t)


def _check_device(name: str, value) -> None:
    if is_torch_tensor(value) and value.device.type != "cpu":
        raise LaunchError(f"argument '{name}' is on {value.device}; the interpreter runs on CPU tensors "
                          f"(move it with .cpu(), or launch without TLXC_INTERPRET/interpret=True)")


def _env_flag() -> bool:
    return os.environ.get("TLXC_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on")


def should_interpret(args: tuple, kwargs: dict) -> bool:
    """``interpret=`` if given; else ``TLXC_INTERPRET=1``; else whether every
    tensor argument lives on the CPU (numpy arrays and the tensors of
    ``TensorDescriptor`` arguments included)."""
    explicit = kwargs.get("interpret")
    if explicit is not None:
        return bool(explicit)
    if _env_flag():
        return True
    arguments = [a.base if isinstance(a, TensorDescriptor) else a for a in list(args) + list(kwargs.values())]
    arrays = [a for a in arguments if is_array_argument(a)]
    return bool(arrays) and all(isinstance(a, np.ndarray) or a.device.type == "cpu" for a in arrays)


def maybe_interpret(kfn, grid, args: tuple, kwargs: dict):
    """Called by the launch path: run on the interpreter and return its ``InterpretedLaunch``
    when ``should_interpret``; return False (nothing done) otherwise.  Consumes the
    ``interpret=`` keyword."""
    kwargs = dict(kwargs)
    decide = should_interpret(tuple(args), kwargs)
    kwargs.pop("interpret", None)
    if not decide:
        return False
    return interpret_launch(kfn, grid, tuple(args), kwargs)


class InterpretedKernel:
    """``tlxc.interpret(kernel)``: ``[grid](*args, **kwargs)`` runs on the CPU."""

    def __init__(self, kfn, *, seed: int | None = None, order: str = "sequential",
                 out: TextIO | None = None, check_barriers: bool = True):
        self.kfn = kfn
        self.seed = seed
        self.order = order
        self.out = out
        self.check_barriers = check_barriers

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            return interpret_launch(self.kfn, grid, args, kwargs, seed=self.seed, order=self.order,
                                    out=self.out, check_barriers=self.check_barriers)
        return launch

    def run(self, *args, grid, **kwargs):
        return self[grid](*args, **kwargs)

    def __repr__(self) -> str:
        return f"<interpreted {self.kfn!r}>"
