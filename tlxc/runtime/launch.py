"""``kernel[grid](*args, **kwargs)``: bind, specialize, compile once, launch.

The hot path of a launch with a seen specialization is the specialization's
generated fast path (``build_specialized_path``): the arguments compared in
place with the key it was made for (dtype, device and 16-byte alignment of
each tensor; type, ==1, divisibility by 16 and 32-bit range of each number;
constexpr types and values; the launch options), the globals the kernel read
and the ``COMPILE_ENV`` variables checked by identity, the grid, the stream,
one ``struct.pack_into`` of the launch shape and the arguments, and a ctypes
``cuLaunchKernelEx``; where a C compiler exists, a C launcher does all of that in one call
and hands it every launch it cannot serve (``_c_launch``, runtime/c_launcher.py).  A launch
the specialized path does not match goes to the kernel's generic
fast path (``build_fast_path``: a key tuple and a dict lookup), and what that
cannot serve to the slow path (``launch``), where everything else happens
(specialization, compilation, cache files, module loading, argument checks
with their error messages, forgetting plans compiled for globals or
environment variables that changed: ``_refresh``).
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import language as tl
from ..arch import ArchError, arch_for_capability
from ..descriptors import TensorDescriptor, store_rule_error
from ..errors import LaunchError, TlxcError
from ..ir.types import PointerType, ScalarType
from ..options import REFUSED_OPTIONS
from . import nvtx
from .tma_legacy import is_copy, is_legacy, resolve, resolve_copy
from .tuple_args import flatten, runtime_tuples

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "debug",
                  "launch_cooperative_grid", "launch_pdl", "interpret", "ctas_per_cga", "launch_cluster",
                  "waves_per_eu", "allow_flush_denorm", "extern_libs")


def split_launch_kwargs(kfn, kwargs: dict) -> tuple[dict, dict]:
    """A launch's keyword arguments as (launch options, kernel arguments), as Triton's ``JITFunction.run``
    reads them: every keyword named in ``LAUNCH_OPTIONS`` is an option, and one that also names a kernel
    parameter (``num_warps: tl.constexpr`` with ``num_warps=8`` at the launch) is that parameter's
    argument too.  A parameter given by position is the parameter only."""
    options = {k: kwargs[k] for k in LAUNCH_OPTIONS if k in kwargs}
    if not options:
        return options, kwargs
    params = kfn.signature.parameters
    return options, {k: v for k, v in kwargs.items() if k not in options or k in params}


def shadowing_parameters(kfn) -> tuple[str, ...]:
    """The parameters of ``kfn`` named as a launch option (Triton's 02 softmax: ``num_stages``; Liger's
    sparsemax: ``num_warps``): a keyword of that name sets both (``split_launch_kwargs``).  The generated
    paths bind it once, as the parameter, so ``kernel[grid]`` marks one given by keyword with a flag
    keyword ``_tlx_kw_<name>=True`` (``KernelFunction._launch_flagged``): the option is the parameter's
    value where the flag is, its default where not."""
    return tuple(name for name in LAUNCH_OPTIONS if name in kfn.signature.parameters)


FLAG = "_tlx_kw_"       # the flag keywords' prefix (no kernel parameter starts with _tlx_)


def _unflagged(kwargs: dict) -> dict:
    """``kwargs`` without the flag keywords (what a grid callable of such a kernel sees)."""
    return {k: v for k, v in kwargs.items() if not k.startswith(FLAG)}


def _keyword_form(kfn, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A generated path's launch handed to the slow path with flags (``shadowing_parameters``) as
    the user's own: every parameter by keyword where a flag says one was given so (it sets the
    option too), the flags dropped."""
    flagged = [k for k in kwargs if k.startswith(FLAG)]
    if not flagged:
        return args, kwargs
    given = any(kwargs[k] for k in flagged)
    kwargs = _unflagged(kwargs)
    if not given or len(args) > len(kfn.param_names):    # (too many arguments: the binding says so)
        return args, kwargs
    return (), {**dict(zip(kfn.param_names, args)), **kwargs}


MAX_CLUSTER = 8             # CTAs per cluster: the portable limit (Hopper allows 16 "non-portable")
GRID_LIMITS = (2**31 - 1, 65535, 65535)   # CUDA's largest gridDim.x, .y, .z
MAXNREG_RANGE = (16, 255)   # registers per thread ptxas can be held to (ABI minimum .. hardware maximum)


def _int_value(value):
    """``value`` as an int if it is an integer (int, numpy int, 0-d integer tensor,
    ``tl.constexpr`` of one) and not a bool; else None."""
    import operator
    if isinstance(value, tl.constexpr):
        value = value.value
    if isinstance(value, (bool, float, str)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _describe(value) -> str:
    return f"{value!r} ({type(value).__name__})"


def grid_dims(name: str, grid, meta: dict | None = None) -> tuple[int, int, int]:
    """The launch grid as three ints within CUDA's limits; ``grid`` may be an int, a
    tuple/list of 1 to 3 ints, or a callable of the arguments returning one."""
    what = "grid"
    if callable(grid):
        grid = grid(meta if meta is not None else {})
        what = "grid (returned by the grid callable)"
    dims = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    if not 1 <= len(dims) <= 3:
        raise LaunchError(f"cannot launch {name}: the {what} must have 1 to 3 dimensions, got {grid!r}")
    out = []
    for axis, dim, limit in zip("xyz", dims, GRID_LIMITS):
        value = _int_value(dim)
        if value is None:
            raise LaunchError(f"cannot launch {name}: the {what} {grid!r} has {axis} = {_describe(dim)}; grid "
                              f"dimensions are ints (e.g. tlxc.cdiv(n, BLOCK))")
        if not 0 <= value <= limit:
            raise LaunchError(f"cannot launch {name}: the {what} {grid!r} has {axis} = {value}; CUDA allows "
                              f"0 to {limit} programs along {axis}")
        out.append(value)
    return tuple(out) + (1,) * (3 - len(out))


def check_num_warps(name: str, value) -> int:
    warps = _int_value(value)
    if warps is None or warps < 1 or warps > 32 or warps & (warps - 1):
        raise LaunchError(f"cannot launch {name}: num_warps must be a power of two from 1 to 32, "
                          f"got {_describe(value)}")
    return warps


@dataclass(frozen=True)
class LaunchConfig:
    """The validated launch options that change what is compiled."""

    num_warps: int = 4
    cluster: tuple[int, int, int] | None = None
    maxnreg: int | None = None
    fp_fusion: bool = True
    num_stages: int | None = None       # pipeline-loads' depth (passes/pipeline.py); None: Triton's 3
    pdl: bool = False                   # launch_pdl=True: programmatic dependent launch (driver.Launcher)
    num_ctas: int = 1                   # Triton's CTAs per program (a cluster each): see launch_config
    waves_per_eu: int = 0               # AMD occupancy hint (amdgpu_waves_per_eu); 0: none

    def compile_options(self) -> dict:
        """Extra ``compile_kernel`` options (only the non-default ones, so keys stay stable)."""
        options = {}
        if self.maxnreg is not None:
            options["maxnreg"] = self.maxnreg
        if not self.fp_fusion:
            options["enable_fp_fusion"] = False
        if self.num_stages is not None:
            options["num_stages"] = self.num_stages
        if self.num_ctas != 1:
            options["num_ctas"] = self.num_ctas
        if self.waves_per_eu:
            options["waves_per_eu"] = self.waves_per_eu
        return options


def _flag(name: str, option: str, value) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise LaunchError(f"cannot launch {name}: {option} must be True, False or None, got {_describe(value)}")


def launch_config(name: str, options: dict) -> LaunchConfig:
    """Check every launch option (``LAUNCH_OPTIONS``) of one launch: each is honoured,
    a documented no-op hint, or refused here (docs/runtime.md, "Launch options")."""
    if not options:
        return _DEFAULT_CONFIG
    for option, why in REFUSED_OPTIONS.items():
        if options.get(option) not in (None, False):
            raise LaunchError(f"cannot launch {name}: {option}={_describe(options[option])} is not supported: {why}")
    warps = check_num_warps(name, options.get("num_warps", 4))
    stages = options.get("num_stages")
    if stages is not None and (_int_value(stages) is None or _int_value(stages) < 0):
        raise LaunchError(f"cannot launch {name}: num_stages must be a non-negative int, got {_describe(stages)}")
    ctas = options.get("num_ctas")
    num_ctas = 1 if ctas is None else _int_value(ctas)
    if num_ctas is None or not 1 <= num_ctas <= MAX_CLUSTER:
        raise LaunchError(f"cannot launch {name}: num_ctas must be an int from 1 to {MAX_CLUSTER} (CTAs per "
                          f"program, in one cluster), got {_describe(ctas)}")
    if num_ctas > 1 and cluster_dims(options.get("ctas_per_cga")) is not None:
        raise LaunchError(f"cannot launch {name}: num_ctas={num_ctas} and ctas_per_cga="
                          f"{options.get('ctas_per_cga')!r} both set the cluster: num_ctas makes each program "
                          f"a cluster of num_ctas CTAs (the grid multiplied), ctas_per_cga groups the grid's "
                          f"CTAs into clusters; pass one of them")
    maxnreg = options.get("maxnreg")
    if maxnreg is not None:
        low, high = MAXNREG_RANGE
        value = _int_value(maxnreg)
        if value is None or not low <= value <= high:
            raise LaunchError(f"cannot launch {name}: maxnreg must be an int from {low} to {high} (registers "
                              f"per thread), got {_describe(maxnreg)}")
        maxnreg = value
    fusion = _flag(name, "enable_fp_fusion", options.get("enable_fp_fusion"))
    _flag(name, "debug", options.get("debug"))                 # no-op: device_assert is always compiled in
    # no-op: TLX's older CLC tutorials ask for a cluster launch; every sm_90+ launch runs in clusters
    # (of one CTA without ctas_per_cga), which is all clusterlaunchcontrol.try_cancel needs
    _flag(name, "launch_cluster", options.get("launch_cluster"))
    pdl = _flag(name, "launch_pdl", options.get("launch_pdl")) is True
    if _flag(name, "launch_cooperative_grid", options.get("launch_cooperative_grid")):
        raise LaunchError(f"cannot launch {name}: launch_cooperative_grid=True is not supported (tlxc has no "
                          f"grid-wide synchronization)")
    # AMD's occupancy hint (Triton's HIP option): the kernel's amdgpu_waves_per_eu on gfx942/gfx950; an
    # NVIDIA kernel's occupancy follows from its launch bounds, so there (and on the interpreter) a no-op
    waves = options.get("waves_per_eu")
    waves_per_eu = 0 if waves is None else _int_value(waves)
    if waves_per_eu is None or not 0 <= waves_per_eu <= 10:
        raise LaunchError(f"cannot launch {name}: waves_per_eu must be an int from 0 (no hint) to 10 (waves "
                          f"per SIMD), got {_describe(waves)}")
    return LaunchConfig(warps, cluster_dims(options.get("ctas_per_cga")), maxnreg, fusion is not False,
                        None if stages is None else _int_value(stages), pdl, num_ctas, waves_per_eu)


_DEFAULT_CONFIG = LaunchConfig()


@dataclass(frozen=True)
class _SlowOnly:
    """The ``ctas_per_cga`` slot of the key of a launch with options that only the slow path
    reads (``enable_fp_fusion=False``): no fast-path key can equal it."""

    ctas: Any
    extras: tuple


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
    launcher: Any = None          # the driver.Launcher behind ``launch``
    cluster: tuple[int, int, int] | None = None   # ctas_per_cga (``launch`` checks the grid against it)
    direct: bool = False          # ``launch`` is ``launcher.launch`` (with the cluster check): the
                                  # specialized fast path may pack and launch through the launcher itself

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

# The classes of kfn._fast that ``kernel[grid]`` binds the grid to with a partial (no Python
# frame in between): generated functions, and the C launcher's once it is loaded.
CALLED_DIRECTLY = {type(lambda: None)}

# The grid of a launch as _tlx_g0, _tlx_g1, _tlx_g2 (every name the generated code binds
# starts with _tlx_: a kernel parameter may be called anything else): a tuple or list of 1
# to 3 dimensions, an int, or a callable of the arguments (``{meta}``) returning one;
# grid_dims explains (or accepts) anything else.  Range checks are left to the packing and
# the driver, whose refusals are explained by grid_dims.
_GRID = """
    if _tlx_grid.__class__ is not tuple:
        if _tlx_callable(_tlx_grid):
            _tlx_grid = _tlx_grid({meta})
        elif _tlx_grid.__class__ is not list:
            _tlx_grid = (_tlx_grid,)
    try:
        _tlx_n = _tlx_len(_tlx_grid)
        if _tlx_n == 1:
            _tlx_g0 = _tlx_grid[0]
            _tlx_g1 = _tlx_g2 = 1
        elif _tlx_n == 3:
            _tlx_g0, _tlx_g1, _tlx_g2 = _tlx_grid
        elif _tlx_n == 2:
            _tlx_g0, _tlx_g1 = _tlx_grid
            _tlx_g2 = 1
        else:
            raise TypeError
    except TypeError:
        _tlx_g0, _tlx_g1, _tlx_g2 = _tlx_grid_dims(_tlx_kfn.__name__, _tlx_grid)
"""

_FAST_TEMPLATE = """
def _tlx_fast(_tlx_grid, {params}, *_tlx_extra, {options}**_tlx_unknown):
    if {interpret_check}_tlx_unknown or _tlx_extra:
        return _tlx_slow(_tlx_grid, ({args}) + _tlx_extra, _tlx_dict(_tlx_unknown{option_kwargs}))
    try:
{values}
        _tlx_key = ({num_warps}, {ctas}, {maxnreg}, ({num_ctas}, {num_stages}, {launch_pdl}), {key})
        _tlx_run, _tlx_block, _tlx_smem, _tlx_device, _tlx_pick, _tlx_compiled = _tlx_cache[_tlx_key]
        _tlx_hit = {fresh}
    except Exception:   # a new specialization, or arguments only the slow path can explain
        _tlx_hit = False
    if not _tlx_hit:    # (called outside the handler: its errors carry no KeyError context)
        return _tlx_slow(_tlx_grid, ({args}), _tlx_dict({option_kwargs_first}))
    _tlx_specialized = _tlx_paths.get(_tlx_key, _tlx_MISSING)
    if _tlx_specialized is _tlx_MISSING:
        _tlx_specialized = _tlx_specialize(_tlx_kfn, _tlx_key)
    if _tlx_specialized is not None and _tlx_kfn._fast is not _tlx_specialized:
        _tlx_kfn._other = _tlx_kfn._fast        # two specializations in turn: each is tried
        _tlx_kfn._fast = _tlx_specialized       # the next kernel[grid] launches through it
""" + _GRID.replace("{meta}", "{{{meta}}}") + """
    if _tlx_g0 and _tlx_g1 and _tlx_g2:
        try:
            _tlx_run((_tlx_g0, _tlx_g1, _tlx_g2), _tlx_block, _tlx_smem, _tlx_kfn._stream(_tlx_device), _tlx_pick(({values_tuple})))
        except _tlx_TlxcError:    # costs nothing unless raised: name a bad grid dimension, if that was it
            _tlx_grid_dims(_tlx_kfn.__name__, (_tlx_g0, _tlx_g1, _tlx_g2))
            raise
    return _tlx_compiled
"""

# The fast path of one specialization (``build_specialized_path``): the key's entries
# checked one by one against the plan's, no key tuple built or hashed (first the options
# and the scalars, which differ first between two specializations used in turn, then the
# tensors and what makes caches stale); the plan's
# constants in the function's globals; the arguments and the launch shape packed by one
# pack_into into the driver launcher's buffer and one foreign call.
_SPECIALIZED_TEMPLATE = """
def _tlx_fast(_tlx_grid, {params}, *_tlx_extra, **_tlx_kw):
    try:
        _tlx_hit = not ({scalar_mismatch})
        if _tlx_hit:
{values}
            _tlx_hit = not ({mismatch})
    except Exception:   # another kind of argument: the kernel's generic fast path sorts it out
        _tlx_hit = False
    if not _tlx_hit:    # the kernel's other specialized path, if this is the first; else the generic one
        if _tlx_kfn._fast is _tlx_self:
            return _tlx_kfn._other(_tlx_grid, {args} *_tlx_extra, **_tlx_kw)
        return _tlx_generic(_tlx_grid, {args} *_tlx_extra, **_tlx_kw)
""" + _GRID.replace("{meta}", "{{{meta}, **{grid_kw}}}") + """
    if _tlx_g0 and _tlx_g1 and _tlx_g2:
{launch}
    return _tlx_compiled
"""

_DIRECT_LAUNCH = """\
{cluster_check}        _tlx_s = _tlx_stream(_tlx_device)
        try:
            _tlx_pack(_tlx_storage, _tlx_offset, _tlx_g0, _tlx_g1, _tlx_g2, {block}, {smem}, _tlx_s, {attrs}, {runtime})
        except Exception as _tlx_exc:
            _tlx_explain((_tlx_g0, _tlx_g1, _tlx_g2), ({runtime}), _tlx_exc)
        _tlx_result = _tlx_raw(_tlx_config, _tlx_function, _tlx_params, None)
        if _tlx_result:
            _tlx_failed(_tlx_result, (_tlx_g0, _tlx_g1, _tlx_g2), _tlx_s)"""

_PLAN_LAUNCH = """\
        try:
            _tlx_run((_tlx_g0, _tlx_g1, _tlx_g2), _tlx_block, _tlx_smem, _tlx_kfn._stream(_tlx_device), ({runtime}))
        except _tlx_TlxcError:
            _tlx_grid_dims(_tlx_kfn.__name__, (_tlx_g0, _tlx_g1, _tlx_g2))
            raise"""

# Launch options the fast path accepts as keywords, with their defaults.  Those that
# change the compile (num_warps, ctas_per_cga, maxnreg, num_stages), the launch (launch_pdl) or
# may be refused (num_ctas) are part of the key; interpret= goes
# to the slow path.  Every other option (LAUNCH_OPTIONS) goes to the slow path.
_FAST_OPTIONS = (("num_warps", 4), ("num_stages", None), ("num_ctas", None), ("maxnreg", None),
                 ("ctas_per_cga", None), ("launch_pdl", None), ("interpret", None))


def _fast_options(kfn) -> tuple[tuple, tuple]:
    """``_FAST_OPTIONS`` of ``kfn`` as (keywords, flagged): the (option, default) pairs the generated
    paths take as keywords of their own, and those a parameter of the option's name takes instead
    (``shadowing_parameters``), read as the parameter's value where its flag is given
    (``interpret``, read by the slow path only, is neither: its flag sends a launch there)."""
    params = kfn.signature.parameters
    keywords = tuple((o, d) for o, d in _FAST_OPTIONS if o not in params)
    flagged = tuple((o, d) for o, d in _FAST_OPTIONS if o in params and o != "interpret")
    return keywords, flagged

_NUMBERS = (int, float, bool)
# Folded into the specialization as compile-time constants (frontend/specialize.py).
_CONSTANTS = (str, tuple, tl.constexpr, ScalarType, PointerType)

# -- what else a compile reads ------------------------------------------------------------------
# The environment variables whose values change what a compile produces or whether it
# succeeds (they are in the disk cache key, _compile_cached): a launch after one of them
# changed recompiles (``_refresh``).  Read by the generated paths in os.environ's own dict:
# ``in`` for an unset one, identity for a set one (os.environ[...] = ... stores a new
# object), about 20 ns each.
COMPILE_ENV = ("TLXC_CHECK_BARRIERS", "TLXC_DEBUG_BARRIERS", "TLXC_SKIP_PASSES", "TLXC_OVERRIDE_DIR",
               "TLXC_DEVICE_TENSORMAPS", "TLXC_EPILOGUE_OVERLAP", "TLXC_RING_FROM_START",
               "TLXC_RING_COUNTER", "TLXC_RING_BASE", "TLXC_SHARED_IMM", "TLXC_CPASYNC_FENCE",
               "TLXC_WGMMA_RS_GROUP", "TLXC_WGMMA_A_LDMATRIX", "TLXC_REDUCE_TREE",
               "TLXC_REDUCE_TREE_SUM")


def _environ_reader():
    """(get, keys, by_identity): ``get(key)`` is os.environ's raw entry for each of
    ``COMPILE_ENV``'s ``keys`` (None when unset): os.environ's dict where it has one, else
    ``os.environ.get`` (whose values are compared by equality)."""
    data, encode = getattr(os.environ, "_data", None), getattr(os.environ, "encodekey", None)
    if isinstance(data, dict) and encode is not None:
        return data.get, tuple(encode(name) for name in COMPILE_ENV), True
    return os.environ.get, COMPILE_ENV, False


def _environment() -> tuple[tuple, tuple]:
    """(raw entries, values) of ``COMPILE_ENV`` now."""
    return _environment_raw(), tuple(os.environ.get(name) for name in COMPILE_ENV)


def _environment_raw() -> tuple:
    get, keys, _ = _environ_reader()
    return tuple(get(k) for k in keys)


def _environment_changed(before: tuple) -> bool:
    """Whether a ``COMPILE_ENV`` entry was set or unset since ``before`` (raw entries)."""
    now = _environment_raw()
    if _environ_reader()[2]:
        return any(a is not b for a, b in zip(now, before))
    return now != before


def _refresh(kfn) -> None:
    """Before a launch served from ``kfn.cache``: forget the plans compiled for module
    globals (``KernelFunction.cache_key``'s guards) or ``COMPILE_ENV`` values that changed
    since, and the generated fast paths that check the old ones (they would send every
    launch here)."""
    from .jit import guards_hold
    before = kfn._env
    if before is None:
        kfn._env = _environment()
        return
    regenerate = stale = False
    if _environment_changed(before[0]):
        kfn._env = _environment()
        regenerate, stale = True, kfn._env[1] != before[1]
    if kfn._guards and not guards_hold(kfn._guards):
        old = kfn._cache_key
        stale |= kfn.cache_key != old            # (recomputes the key and its guards)
        regenerate = True
    if stale:
        kfn.cache.clear()
        kfn.fast_cache.clear()
    if regenerate:
        kfn._generic = None
        kfn._specialized.clear()
        kfn._fast = kfn._other = kfn._first_launch


def _guard_checks(kfn, const) -> list[str]:
    """The generated paths' freshness checks: each is true when its input changed."""
    if kfn._env is None:
        kfn._env = _environment()
    get, keys, by_identity = _environ_reader()
    if by_identity:     # os.environ's dict: an unset variable is checked by ``in``, a set one by identity
        data = const(get.__self__)
        checks = [f"{key!r} in {data}" if value is None else f"{data}[{key!r}] is not {const(value)}"
                  for key, value in zip(keys, kfn._env[0])]
    else:
        checks = [f"{const(get)}({key!r}) != {const(value)}" for key, value in zip(keys, kfn._env[0])]
    for guard in kfn._guards:
        place = f"{const(guard.holder)}.cell_contents" if guard.cell else f"{const(guard.holder)}[{guard.name!r}]"
        checks.append(place + "".join(f".{attr}" for attr in guard.attrs) + f" is not {const(guard.value)}")
    return checks


# The builtins the generated paths call, under names no kernel parameter shadows.
_BUILTINS = {"_tlx_callable": callable, "_tlx_len": len, "_tlx_dict": dict}


class _Constants(dict):
    """Values the generated code names ``_tlx_K<n>``."""

    def __call__(self, value) -> str:
        name = f"_tlx_K{len(self)}"
        self[name] = value
        return name


def _kind(value) -> str:
    if value.__class__ in _NUMBERS:
        return "number"
    if isinstance(value, TensorDescriptor):
        return "descriptor"
    if isinstance(value, _CONSTANTS):
        return "constant"
    return "none" if value is None else "tensor"


def key_parts(kfn, bound: tuple) -> list:
    """The flat launch-cache key of ``bound`` (the fast path computes the same);
    a ``LaunchError`` naming the argument for a value no kernel parameter takes."""
    parts = []
    for name, value in zip(kfn.param_names, bound):
        if name in kfn.constexpr_params:
            parts += [value.__class__, value]
        elif value.__class__ in _NUMBERS:
            parts += [value.__class__, value == 1, value % 16 == 0, -2147483648 <= value <= 2147483647]
        elif value is None:
            parts.append(None)
        elif isinstance(value, TensorDescriptor):
            parts += [_descriptor_type_key(kfn, name, value), value.device_index]
        elif isinstance(value, _CONSTANTS):
            parts += [value.__class__, value]
        elif _is_torch_tensor(value):
            parts += [value.dtype, value.get_device(), value.data_ptr() & 15]
        else:
            raise _bad_argument(kfn, name, value)
    return parts


def launch_key(kfn, bound: tuple, config: LaunchConfig = _DEFAULT_CONFIG, options: dict | None = None) -> tuple:
    """The in-memory launch key: (num_warps, ctas_per_cga, maxnreg, (num_ctas, num_stages, launch_pdl),
    *key_parts), with the
    options as given (the fast path has no time to normalize them; every stored key was validated)."""
    options = options or {}
    ctas = options.get("ctas_per_cga")
    if not isinstance(ctas, (tuple, type(None))):     # (a list, or an int: the fast paths never see these)
        ctas = _SlowOnly(repr(ctas), ())
    if not config.fp_fusion:
        ctas = _SlowOnly(ctas, (("enable_fp_fusion", False),))
    return (options.get("num_warps", 4), ctas, options.get("maxnreg"),
            (options.get("num_ctas"), options.get("num_stages"), options.get("launch_pdl")), *key_parts(kfn, bound))


def _is_torch_tensor(value) -> bool:
    return hasattr(value, "data_ptr") and hasattr(value, "get_device") and hasattr(value, "dtype")


def _bad_argument(kfn, name: str, value) -> LaunchError:
    import numpy as np
    if isinstance(value, np.ndarray):
        hint = "numpy arrays run on the interpreter only, with no CUDA tensor among the arguments"
    elif isinstance(value, np.generic):
        hint = f"pass a Python number ({type(value.item()).__name__}(...))"
    elif isinstance(value, (list, dict, set)):
        hint = "pass a tuple (a compile-time constant) or a tensor"
    else:
        hint = "a kernel argument is a tensor, a number, None, a TensorDescriptor or a compile-time constant"
    return LaunchError(f"argument '{name}' of {kfn.__name__} is {_describe(value)}: {hint}")


def _unhashable(kfn, bound: tuple, options: dict) -> LaunchError:
    """Why a launch key could not be hashed: a list (or other mutable value) given as a constant."""
    for name, value in list(zip(kfn.param_names, bound)) + list(options.items()):
        try:
            hash(value)
        except TypeError:
            what = "launch option" if name in options else "argument"
            return LaunchError(f"{what} '{name}' of {kfn.__name__} is {_describe(value)}, which cannot be a "
                               f"compile-time constant (it is not hashable): pass a tuple, e.g. "
                               f"{name}={tuple(value) if isinstance(value, (list, set)) else '(...)'}")
    return LaunchError(f"cannot launch {kfn.__name__}: its arguments cannot form a cache key")


def _descriptor_type_key(kfn, name: str, desc: TensorDescriptor) -> int:
    """The descriptor's launch key; its box is checked here, the first time a launch uses it."""
    try:
        return desc._type_key
    except LaunchError as exc:
        raise LaunchError(f"argument '{name}' of {kfn.__name__}: {exc.message}") from None


def build_fast_path(kfn, bound: tuple):
    """Generate ``fast(grid, *params, num_warps=..., ...)`` for the argument kinds of ``bound``:
    the kernel's generic fast path (``kfn._generic``).

    Python binds the arguments natively; each tensor contributes (dtype,
    device, 16-byte alignment) to a flat key and its data pointer to the
    values, each number (type, ==1, divisibility by 16, fits in i32), each
    TMA descriptor (its IR type, device) to the key and its encoded
    ``CUtensorMap`` (cached on the descriptor) to the values, each constexpr
    its type and value.  Arguments of other kinds raise inside the ``try`` or
    miss the cache and go to the slow path, which specializes, compiles,
    checks and explains; so do launches after a global the kernel reads or a
    ``COMPILE_ENV`` variable changed (``_refresh``).  A hit makes the key's
    specialized path (``build_specialized_path``) the kernel's ``_fast``.
    """
    params, values, key, value_names, kinds = [], [], [], [], []
    for i, (name, param) in enumerate(kfn.signature.parameters.items()):
        default = "_tlx_MISSING" if param.default is param.empty else f"_tlx_defaults[{i}]"
        params.append(f"{name}={default}")
        kind = _kind(bound[i])
        if name in kfn.constexpr_params or kind == "constant":
            kind = "constant"
            key += [f"{name}.__class__", name]
            value_names.append(name)
        elif kind == "tensor":
            values.append(f"        _tlx_v{i} = {name}.data_ptr()")
            key += [f"{name}.dtype", f"{name}.get_device()", f"_tlx_v{i} & 15"]
            value_names.append(f"_tlx_v{i}")
        elif kind == "descriptor":
            values.append(f"        _tlx_v{i} = {name}.encode()")
            key += [f"{name}._type_key", f"{name}.device_index"]
            value_names.append(f"_tlx_v{i}")
        elif kind == "number":
            key += [f"{name}.__class__", f"{name} == 1", f"{name} % 16 == 0",
                    f"-2147483648 <= {name} <= 2147483647"]
            value_names.append(name)
        else:
            key.append(f"None if {name} is None else _tlx_MISSING")
            value_names.append(name)
        kinds.append(kind)
    options, flagged = _fast_options(kfn)
    option_names = [o for o, _ in options]
    keywords = option_names + [FLAG + o for o, _ in flagged]   # (the flags default to False: not given)

    defaults, flagged_names = dict(_FAST_OPTIONS), {o for o, _ in flagged}

    def value_of(option: str) -> str:           # the expression of an option's value in the key
        if option in option_names:
            return option
        if option in flagged_names:             # the parameter's value where given by keyword
            return f"({option} if {FLAG}{option} else {defaults[option]!r})"
        return repr(defaults[option])

    const = _Constants()
    fresh = _guard_checks(kfn, const)
    source = _FAST_TEMPLATE.format(
        params=", ".join(params), args=", ".join(kfn.param_names) + ",",
        options="".join(f"{o}={d!r}, " for o, d in options) + "".join(f"{FLAG}{o}=False, " for o, _ in flagged),
        interpret_check="interpret is not None or " if "interpret" in option_names else "",
        option_kwargs="".join(f", {o}={o}" for o in keywords),
        option_kwargs_first=", ".join(f"{o}={o}" for o in keywords if o != "interpret"),
        num_warps=value_of("num_warps"), ctas=value_of("ctas_per_cga"), maxnreg=value_of("maxnreg"),
        num_ctas=value_of("num_ctas"), num_stages=value_of("num_stages"), launch_pdl=value_of("launch_pdl"),
        values="\n".join(values) or "        pass", key=", ".join(key),
        fresh=f"not ({' or '.join(fresh)})" if fresh else "True",
        meta=", ".join([f"{n!r}: {n}" for n in kfn.param_names] + [f"{o!r}: {o}" for o in option_names]),
        values_tuple=", ".join(value_names) + ",")
    defaults = [p.default for p in kfn.signature.parameters.values()]
    scope = {"_tlx_MISSING": _MISSING, "_tlx_defaults": defaults, "_tlx_kfn": kfn, "_tlx_cache": kfn.fast_cache,
             "_tlx_names": kfn.param_names, "_tlx_TlxcError": TlxcError, "_tlx_grid_dims": grid_dims, **_BUILTINS,
             "_tlx_paths": kfn._specialized, "_tlx_specialize": _specialize,
             "_tlx_slow": lambda grid, args, kwargs: launch(kfn, grid, args, kwargs), **const}
    exec(compile(source, f"<tlxc launcher of {kfn.__name__}>", "exec"), scope)  # noqa: S102 (our own template)
    fast = scope["_tlx_fast"]
    fast.__qualname__ = fast.__name__ = kfn.__name__     # Python's own binding errors name the kernel
    fast.kinds, fast.options = kinds, option_names
    kfn._generic = kfn._other = fast
    kfn._specialized.clear()        # (each names the generic path it falls back to)
    return fast


def _specialize(kfn, key: tuple):
    """The specialized path of ``key`` (None unless ``kfn.cache`` holds the plan that
    ``kfn.fast_cache`` launches), kept in ``kfn._specialized``: made the first time the
    generic path serves ``key``."""
    plan, entry = kfn.cache.get(key), kfn.fast_cache.get(key)
    path = None
    if isinstance(plan, LaunchPlan) and entry is not None and plan.launch is entry[0] and kfn._generic is not None:
        path = build_specialized_path(kfn, key, plan)
    kfn._specialized[key] = path
    return path


def build_specialized_path(kfn, key: tuple, plan: LaunchPlan):
    """Generate the fast path of one specialization: ``fast(grid, *params, **options)``
    launches ``plan`` when the arguments have ``key``, else hands them to the generic path.

    Every entry of ``key`` is checked, in the order of the generic path's key, by a
    comparison with the plan's value (``is`` for types and dtypes, ``==`` for ints, the
    truth of the int and alignment tests) instead of a key tuple built, hashed and compared;
    the launch options by ``_options_check`` when any is given; the globals the kernel
    read and the ``COMPILE_ENV`` variables by identity; and the function must still be the
    kernel's ``_fast`` or ``_other`` (caches cleared or refreshed since: the generic path
    decides).  A launch that does not match the kernel's ``_fast`` tries its ``_other`` (the
    previous ``_fast``), so two specializations launched in turn both stay fast.  The
    plan's launcher, shape and constants are the function's globals; a plan launched by a
    ``driver.Launcher`` (not wrapped for NVTX) is packed and launched inline
    (``Launcher.direct``).
    """
    generic = kfn._generic
    kinds = generic.kinds
    const = _Constants()
    params, values, mismatch, scalar, names = [], [], [], [], []
    aligned, usual = [], []
    position = 4
    for i, ((name, param), kind) in enumerate(zip(kfn.signature.parameters.items(), kinds)):
        default = "_tlx_MISSING" if param.default is param.empty else f"_tlx_defaults[{i}]"
        params.append(f"{name}={default}")
        if kind == "constant":
            cls, value = key[position:position + 2]
            position += 2
            scalar.append(f"{name}.__class__ is not {const(cls)} or {name} != {const(value)}")
            names.append(name)
        elif kind == "tensor":
            dtype, device, alignment = key[position:position + 3]
            position += 3
            values.append(f"            _tlx_v{i} = {name}.data_ptr()")
            mismatch += [f"{name}.dtype is not {const(dtype)}", f"{name}.get_device() != {device!r}"]
            if alignment == 0:
                aligned.append(f"_tlx_v{i}")
            else:
                mismatch.append(f"_tlx_v{i} & 15 != {alignment!r}")
            names.append(f"_tlx_v{i}")
        elif kind == "descriptor":
            type_key, device = key[position:position + 2]
            position += 2
            values += [f"            _tlx_v{i} = {name}.base.data_ptr()",
                       f"            _tlx_v{i} = {name}._last_blob if _tlx_v{i} == {name}._last_address else {name}.encode()"]
            mismatch += [f"{name}._type_key != {type_key!r}", f"{name}.device_index != {device!r}"]
            names.append(f"_tlx_v{i}")
        elif kind == "number":
            cls, one, by16, fits = key[position:position + 4]
            position += 4
            scalar.append(f"{name}.__class__ is not {const(cls)}")
            if cls is int and by16 and fits:
                usual.append(name)                     # tested together below
            else:
                if not (cls is int and by16):          # (divisible by 16 implies not 1)
                    scalar.append(f"{name} != 1" if one else f"{name} == 1")
                scalar.append(f"{name} % 16" if by16 else f"{name} % 16 == 0")
                scalar.append(f"not -2147483648 <= {name} <= 2147483647" if fits else
                              f"-2147483648 <= {name} <= 2147483647")
            names.append(name)
        else:
            position += 1
            scalar.append(f"{name} is not None")
            names.append(name)
    if aligned:
        mismatch.append(f"({' | '.join(aligned)}) & 15")
    if usual:
        # the usual ints (i32, divisible by 16): when all are non-negative, one test of their
        # bitwise or against ~0x7FFFFFF0 (bits 0-3 and 31 up); else each in full
        exact = " or ".join(f"{n} & 15 or not -2147483648 <= {n} <= 2147483647" for n in usual)
        scalar.append(f"({' | '.join(usual)}) & -2147483633 and ({exact})")
    options, flagged = _fast_options(kfn)
    expected = _option_values(key[:4], options)
    accepted = {o: v for o, v in expected.items() if o != "interpret"}
    given = {o: v for o, v in accepted.items() if v is not dict(options)[o]}
    expected_flagged = _option_values(key[:4], flagged)
    for option, default in flagged:      # given by keyword: the parameter's value must be the key's
        value = expected_flagged[option]
        accepted[FLAG + option] = True
        if value is not default:
            given[FLAG + option] = True
        scalar.append(f"{FLAG + option!r} in _tlx_kw and ({option}.__class__ is not {const(value.__class__)} "
                      f"or {option} != {const(value)})")
    check = const(_options_check(accepted, tuple(given)))
    if given:       # usually given as exactly these keywords: one dict comparison, then their types
        types_differ = " or ".join(f"_tlx_kw[{o!r}].__class__ is not {const(v.__class__)}" for o, v in given.items())
        scalar.insert(0, f"(_tlx_kw != {const(given)} or {types_differ}) and not {check}(_tlx_kw)")
    else:
        scalar.insert(0, f"_tlx_kw and not {check}(_tlx_kw)")
    scalar.insert(0, "_tlx_extra or not _tlx_cache or _tlx_kfn._fast is not _tlx_self and _tlx_kfn._other is not _tlx_self")
    mismatch += _guard_checks(kfn, const)
    runtime = ", ".join(names[i] for i in plan.runtime_index) + ","
    scope = {"_tlx_MISSING": _MISSING, "_tlx_defaults": [p.default for p in kfn.signature.parameters.values()],
             "_tlx_kfn": kfn, "_tlx_cache": kfn.fast_cache, "_tlx_generic": generic, "_tlx_names": kfn.param_names,
             "_tlx_TlxcError": TlxcError, "_tlx_grid_dims": grid_dims, **_BUILTINS,
             "_tlx_run": plan.launch, "_tlx_block": plan.block, "_tlx_smem": plan.smem, "_tlx_device": plan.device,
             "_tlx_compiled": plan.compiled, "_tlx_unflagged": _unflagged, **const}
    if plan.direct:
        launcher = plan.launcher
        direct = launcher.direct()
        scope.update({f"_tlx_{k}": v for k, v in direct.items() if k != "failed"})
        scope.update(_tlx_pack=direct["pack_all"], _tlx_stream=kfn._stream,
                     _tlx_explain=_explainer(kfn, launcher), _tlx_failed=_failure(kfn, plan, direct["failed"]))
        cluster_check = ""
        if plan.cluster is not None:
            scope.update(_tlx_cluster=plan.cluster, _tlx_check_cluster=check_cluster_grid)
            cx, cy, cz = plan.cluster
            cluster_check = (f"        if _tlx_g0 % {cx} or _tlx_g1 % {cy} or _tlx_g2 % {cz}:\n"
                             f"            _tlx_check_cluster(_tlx_kfn.__name__, _tlx_cluster, (_tlx_g0, _tlx_g1, _tlx_g2))\n")
        body = _DIRECT_LAUNCH.format(cluster_check=cluster_check, block=", ".join(map(repr, plan.block)),
                                     smem=plan.smem, attrs=f"{direct['attrs']}, {direct['num_attrs']}",
                                     runtime=runtime)
    else:
        body = _PLAN_LAUNCH.format(runtime=runtime)
    source = _SPECIALIZED_TEMPLATE.format(params=", ".join(params), args=", ".join(kfn.param_names) + ",",
                                          values="\n".join(values) or "            pass",
                                          meta=", ".join([f"{n!r}: {n}" for n in kfn.param_names]
                                                         + [f"{o!r}: {d!r}" for o, d in options]),
                                          # (a grid callable sees the launch's keywords, not the flags)
                                          grid_kw="_tlx_unflagged(_tlx_kw)" if flagged else "_tlx_kw",
                                          scalar_mismatch="\n                or ".join(scalar),
                                          mismatch="\n                    or ".join(mismatch or ["False"]),
                                          launch=body)
    exec(compile(source, f"<tlxc launcher of {kfn.__name__}, one specialization>", "exec"), scope)  # noqa: S102
    fast = scope["_tlx_fast"]
    fast.__qualname__ = fast.__name__ = kfn.__name__
    scope["_tlx_self"] = fast       # the object the kernel launches through: this function, or
    # the C launcher that falls back to it (runtime/c_launcher.py); not for a kernel with flags, whose
    # kernel[grid] must run KernelFunction._launch_flagged (the C subscript would bypass it)
    if plan.direct and not flagged:
        c_path = _c_launch(kfn, key, plan, kinds, fast, scope, accepted, tuple(given), options)
        if c_path is not None:
            scope["_tlx_self"] = c_path
            return c_path
    return fast


def _descriptor_class_of_fields():
    """``TensorDescriptor`` when none of the fields the C launcher reads is a class attribute
    (then a descriptor of exactly that class holds them in its ``__dict__``), else None."""
    fields = ("_type_key", "device_index", "base", "_last_address", "_last_blob")
    return None if any(hasattr(TensorDescriptor, f) for f in fields) else TensorDescriptor


def _c_launch(kfn, key: tuple, plan: LaunchPlan, kinds: list, fallback, scope: dict, options: dict,
              required: tuple, meta_options: list):
    """The C launcher of one specialization (runtime/c_launcher.py), which launches what
    ``fallback`` (the generated path) would and hands it every other launch; None when the C
    module is off or not buildable, or the plan's launch is not a foreign function.
    ``options``: the launch options a keyword may give, with the key's values; ``required``:
    those a launch must give (``_options_check``); ``meta_options``: the (option, default)
    pairs a grid callable's dict holds."""
    from . import c_launcher as C
    from .jit import Guard
    raw_address = C.function_address(scope["_tlx_raw"])
    get, _, by_identity = _environ_reader()
    if raw_address is None or not by_identity:
        return None
    module = C.module()
    if module is None:
        return None
    launcher = plan.launcher
    buffer = launcher.arguments
    base = ctypes.addressof(buffer.storage) + buffer.base_offset
    slots = {param: j for j, param in enumerate(plan.runtime_index)}
    specs, position = [], 4
    for i, kind in enumerate(kinds):
        slot = slots.get(i)
        slot_kind, dest = (-1, 0) if slot is None else (C.SLOT_KINDS[buffer.kinds[slot]], base + buffer.offsets[slot])
        if kind == "constant":
            cls, value = key[position:position + 2]
            position += 2
            spec = (C.ARG_CONSTANT, cls, value, 0, 0, 0, 0, 0)
        elif kind == "tensor":
            dtype, device, alignment = key[position:position + 3]
            position += 3
            spec = (C.ARG_TENSOR, dtype, None, device, alignment, 0, 0, 0)
        elif kind == "descriptor":
            type_key, device = key[position:position + 2]
            position += 2
            spec = (C.ARG_DESCRIPTOR, type_key, _descriptor_class_of_fields(), device, 0, 0, 0, 0)
        elif kind == "number":
            cls, one, by16, fits = key[position:position + 4]
            position += 4
            if cls not in _NUMBERS:
                return None
            spec = (C.ARG_NUMBER, cls, None, 0, 0, int(bool(one)), int(bool(by16)), int(bool(fits)))
        else:
            position += 1
            spec = (C.ARG_NONE, None, None, 0, 0, 0, 0, 0)
        if slot is not None and kind in ("constant", "none"):
            return None                 # (never a runtime argument)
        specs.append(spec + (slot_kind, dest))
    env = tuple((get.__self__, k, v) for k, v in zip(_environ_reader()[1], kfn._env[0]))
    guards = tuple((g.holder, g.name, g.cell, tuple(g.attrs), g.value) for g in kfn._guards
                   if isinstance(g, Guard))
    if len(guards) != len(kfn._guards):
        return None
    cluster = plan.cluster or (0, 0, 0)
    CALLED_DIRECTLY.add(module.CLaunch)
    return module.CLaunch(
        fallback, kfn, kfn.fast_cache, tuple(specs), env, guards, kfn._stream, plan.device, plan.compiled,
        scope["_tlx_failed"], (launcher, buffer.storage),
        (scope["_tlx_config"], scope["_tlx_function"], scope["_tlx_params"], raw_address, scope["_tlx_attrs"]),
        (*plan.block, plan.smem, scope["_tlx_num_attrs"], *cluster),
        tuple(sys.intern(n) for n in kfn.param_names),
        tuple(... if p.default is p.empty else p.default for p in kfn.signature.parameters.values()),
        {sys.intern(o): v for o, v in options.items()}, tuple(sys.intern(o) for o in required),
        tuple((sys.intern(o), d) for o, d in meta_options))


def _option_values(head: tuple, options) -> dict:
    """The launch options of a key's head, by name (the kernel's own parameters left out)."""
    values = {"num_warps": head[0], "ctas_per_cga": head[1], "maxnreg": head[2], "num_ctas": head[3][0],
              "num_stages": head[3][1], "launch_pdl": head[3][2]}
    return {o: values.get(o) for o, _ in options}


def _options_check(accepted: dict, required: tuple) -> Callable[[dict], bool]:
    """Whether launch options given as keywords have the values of a key (``accepted``): the same
    types and values (``num_warps=8.0`` or ``launch_pdl=1`` is not ``8`` or ``True``: the slow path
    refuses them), every option the key has at a non-default value (``required``) given."""
    def check(kw: dict) -> bool:
        for name, value in kw.items():
            want = accepted.get(name, _MISSING)
            if want is _MISSING or value.__class__ is not want.__class__ or value != want:
                return False
        for name in required:
            if name not in kw:
                return False
        return True
    return check


def _explainer(kfn, launcher):
    """Raise the error of a direct launch whose packing failed: a bad grid dimension, else
    the argument that does not fit (``ArgumentBuffer.explain``)."""
    def explain(grid, values, exc):
        grid_dims(kfn.__name__, grid)
        raise launcher.arguments.explain(values, exc) from None
    return explain


def _failure(kfn, plan: LaunchPlan, failed):
    """A direct launch's nonzero CUresult: retried or explained as ``Launcher.launch`` does,
    a bad grid dimension named first."""
    def failure(result, grid, stream):
        try:
            failed(result, grid, plan.block, plan.smem, stream)
        except TlxcError:
            grid_dims(kfn.__name__, grid)
            raise
    return failure


def _torch():
    import torch
    return torch


def launch(kfn, grid, args: tuple, kwargs: dict):
    """The slow path: every launch the generated fast path cannot serve (the first of a key,
    the interpreter, options only this path reads, and every launch it must explain)."""
    options, kernel_kwargs = {}, kwargs
    if kwargs:
        args, kwargs = _keyword_form(kfn, args, kwargs)
        options, kernel_kwargs = split_launch_kwargs(kfn, kwargs)
    bound = args if not kernel_kwargs and len(args) == len(kfn.param_names) else _bind(kfn, args, kernel_kwargs)
    bound = tuple(_require_given(kfn, v, n) for v, n in zip(bound, kfn.param_names))
    structures = runtime_tuples(kfn, bound)
    if structures:          # tuples of tensors: one parameter per leaf, in a generated kernel (tuple_args.py)
        flat, flat_args = flatten(kfn, bound, structures)
        return flat[grid](*flat_args, **options)
    if any(is_legacy(v) or is_copy(v) for v in bound):
        # Triton <= 3.3 host-filled descriptors (and Triton 3.0's device copies of their bytes): the
        # grid function fills them (runtime/tma_legacy.py), so it runs first; each becomes the
        # TensorDescriptor its fill recorded
        grid = grid_dims(kfn.__name__, grid, {**dict(zip(kfn.param_names, bound)), **options})
        bound = tuple(resolve(kfn.__name__, n, v) if is_legacy(v) else resolve_copy(v) if is_copy(v) else v
                      for v, n in zip(bound, kfn.param_names))
        args, kwargs = bound, dict(options)
    if _runs_on_interpreter(kfn, options, bound):
        return _interpret(kfn, grid, args, kwargs)
    options.pop("interpret", None)
    config = launch_config(kfn.__name__, options)
    grid3 = grid_dims(kfn.__name__, grid, {**dict(zip(kfn.param_names, bound)), **options})
    key = launch_key(kfn, bound, config, options)
    _refresh(kfn)             # a global the kernel reads or a COMPILE_ENV variable changed: recompile
    try:
        plan = kfn.cache.get(key)
    except TypeError:
        raise _unhashable(kfn, bound, options) from None
    if plan is None:
        plan = kfn.cache[key] = _plan(kfn, bound, config)
        kfn._specialized.pop(key, None)
    if not isinstance(key[1], _SlowOnly):
        kfn.fast_cache.setdefault(key, (plan.launch, plan.block, plan.smem, plan.device, plan.pick,
                                        plan.compiled))
        if kfn._generic is None:
            build_fast_path(kfn, bound)
        if kfn._fast == kfn._first_launch:
            kfn._fast = kfn._generic
    if grid3[0] * grid3[1] * grid3[2] == 0:
        return None
    values = [bound[i].data_ptr() if p else _scalar_value(bound[i])
              for i, p in zip(plan.runtime_index, plan.is_pointer)]
    plan.launch(grid3, plan.block, plan.smem, kfn._stream(plan.device), values)
    return plan.compiled


def _plan(kfn, bound: tuple, config: LaunchConfig) -> LaunchPlan:
    """The plan of a new key: shared with an earlier key of the same compile (options spelled
    differently: num_ctas=1 or None, num_stages), else prepared."""
    compile_key = (_COMPILE_KEY, config, *key_parts(kfn, bound))   # in kfn.cache: clearing it forgets both
    plan = kfn.cache.get(compile_key)
    if plan is None:
        plan = kfn.cache[compile_key] = _prepare(kfn, bound, config)
    _check_tma_stores(kfn, bound, plan)     # before the launch key is kept: a refused launch stays slow
    return plan


def _check_tma_stores(kfn, bound: tuple, plan: LaunchPlan) -> None:
    """Refuse a descriptor argument the kernel TMA-stores through whose inner size is not a
    16-byte multiple (``descriptors.store_rule_error``).  Such descriptors have launch keys of
    their own (``TensorDescriptor._fix_box``), so this runs on the first launch of each key."""
    metadata = getattr(plan.compiled, "metadata", None) or {}      # (tests' stand-in plans have none)
    for position in metadata.get("tma_store_args", ()):
        index = plan.runtime_index[position]
        error = store_rule_error(kfn.__name__, kfn.param_names[index], bound[index])
        if error is not None:
            raise error


_COMPILE_KEY = object()       # marks the normalized keys of kfn.cache (no launch key starts with it)


def _interpret_env() -> str:
    return os.environ.get("TLXC_INTERPRET", "").strip().lower()


def _runs_on_interpreter(kfn, options: dict, bound: tuple) -> bool:
    """interpret=True, else TLXC_INTERPRET=1, else no CUDA tensor among the arguments; refused
    when the GPU was asked for (interpret=False, TLXC_INTERPRET=0) and there is nothing to run it on."""
    if kfn._interpret is None:
        kfn._interpret = _interpret_env() in ("1", "true", "yes", "on")
    explicit = options.get("interpret")
    if explicit is None and kfn._interpret:
        return True
    if explicit:
        return True
    if _has_cuda_tensor(bound, {}):
        return False
    asked = "interpret=False" if explicit is not None else (
        f"TLXC_INTERPRET={os.environ['TLXC_INTERPRET']}" if _interpret_env() in ("0", "false", "no", "off") else None)
    if asked is not None:
        raise LaunchError(f"cannot launch {kfn.__name__} on the GPU ({asked}): no argument is a CUDA tensor"
                          f"{_first_host_array(kfn, bound)}; move the tensors to the GPU (.cuda()), or run on "
                          f"the interpreter (interpret=True, or leave TLXC_INTERPRET unset)")
    return True


def _first_host_array(kfn, bound: tuple) -> str:
    import numpy as np
    for name, value in zip(kfn.param_names, bound):
        base = value.base if isinstance(value, TensorDescriptor) else value
        if isinstance(base, np.ndarray) or _is_torch_tensor(base):
            kind = "a numpy array" if isinstance(base, np.ndarray) else f"on {base.device}"
            return f" (argument '{name}' is {kind})"
    return ""


def _scalar_value(value):
    """A non-pointer runtime argument as the launcher packs it."""
    return value.encode() if isinstance(value, TensorDescriptor) else value


def _require_given(kfn, value, name):
    if value is _MISSING:
        raise LaunchError(f"cannot launch {kfn.__name__}: missing a required argument: '{name}'")
    return value


def _interpret(kfn, grid, args, kwargs):
    from ..interpreter import maybe_interpret
    launched = maybe_interpret(kfn, grid, args, kwargs)
    if not launched:
        raise LaunchError(f"cannot launch {kfn.__name__}: no CUDA tensor among its arguments and the "
                          f"interpreter was not asked for (TLXC_INTERPRET=1 or interpret=True)")
    return launched


def _has_cuda_tensor(args, kwargs) -> bool:
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, TensorDescriptor):
            value = value.base
        if getattr(value, "is_cuda", False) is True:
            return True
    return False


def _bind(kfn, args, kwargs) -> tuple:
    try:
        bound = kfn.signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise LaunchError(f"cannot launch {kfn.__name__}: {exc}") from None
    bound.apply_defaults()
    return tuple(bound.arguments[name] for name in kfn.param_names)


def _warn_performance(kfn, metadata: dict) -> None:
    """``tlxc.PerformanceWarning`` for each of the compiled kernel's ``launch_warnings`` (once per
    specialization: this runs on a launch key's first launch)."""
    import warnings

    from ..compiler import launch_warnings
    from ..errors import PerformanceWarning
    for text in launch_warnings(metadata):
        warnings.warn(f"{kfn.__name__}: {text}", PerformanceWarning, stacklevel=4)


def _prepare(kfn, bound: tuple, config: LaunchConfig = _DEFAULT_CONFIG) -> LaunchPlan:
    """First launch of a key: check arguments, specialize, compile (or load from
    the disk cache), load the module, build the launcher."""
    from ..compiler import compile_kernel
    from ..frontend.specialize import annotation_type, specialization_from_args
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
    try:
        arch = arch_for_capability(major, minor)          # tlxc/arch.py
    except ArchError as exc:
        raise LaunchError(f"cannot launch {kfn.__name__}: {exc}") from None
    cluster = config.cluster
    compiled = _compile_cached(kfn, spec, arch, config.num_warps, compile_kernel, cluster,
                               config.compile_options())
    _warn_performance(kfn, compiled.metadata)
    module = driver.CudaModule.load(compiled.asm["cubin"], device)
    function = module.function(compiled.metadata["name"], device)
    smem = compiled.metadata.get("scratch_bytes", 0)
    limit = driver.device_properties(device).max_shared_memory_per_block_optin
    if smem > limit:
        raise LaunchError(f"{kfn.__name__} needs {smem} bytes of shared memory; the device allows {limit}")
    function.set_dynamic_smem(smem)       # (when above the function's limit: the direct launches rely on it)
    launcher = function.make_launcher(compiled.metadata["params"], pdl=config.pdl)
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
    plain = run
    run = nvtx.wrap(run, compiled.metadata["name"])      # TLXC_NVTX=1: a named range per launch
    if compiled.metadata.get("global_scratch_bytes"):     # in-kernel tensor maps (runtime/scratch.py)
        from .scratch import with_global_scratch
        run = with_global_scratch(run, kfn.__name__, compiled.metadata["global_scratch_bytes"], device)
    if compiled.metadata.get("descriptor_dims"):          # desc.shape / desc.strides in the kernel
        run = with_descriptor_dims(run, compiled.metadata["descriptor_dims"])
    if config.num_ctas > 1:     # Triton's num_ctas: each program is a cluster of num_ctas CTAs along x
        run = with_ctas_per_program(run, kfn.__name__, config.num_ctas)
    return LaunchPlan(run, index, is_pointer, (threads, 1, 1), smem, device, compiled, launcher=launcher,
                      cluster=cluster, direct=run is plain)


def with_descriptor_dims(run: Callable, dims: list) -> Callable:
    """``run`` with the hidden parameters of ``desc.shape[d]`` / ``desc.strides[d]`` appended
    (``codegen_nvptx/rules_tensormap.py: descriptor_dim``): for each ``(index, kind, d)`` that
    entry of the descriptor among the launch's values, after them (a global scratch's address,
    appended by the wrapper inside this one, comes last)."""
    def launch_with_dims(grid, block, smem, stream, values):
        extra = tuple(values[i].shape[d] if kind == "shape" else values[i].strides[d] for i, kind, d in dims)
        run(grid, block, smem, stream, (*values, *extra))
    return launch_with_dims


def with_ctas_per_program(run: Callable, name: str, num_ctas: int) -> Callable:
    """``run`` for Triton's ``num_ctas``: the grid counts programs, the launch has ``num_ctas`` CTAs
    per program along x (the kernel's ``__cluster_dims__(num_ctas, 1, 1)`` groups them)."""
    def launch_clusters(grid, block, smem, stream, values):
        x = grid[0] * num_ctas
        if x > GRID_LIMITS[0]:
            raise LaunchError(f"cannot launch {name}: grid x {grid[0]} with num_ctas={num_ctas} is {x} CTAs; "
                              f"CUDA allows at most {GRID_LIMITS[0]}")
        run((x, grid[1], grid[2]), block, smem, stream, values)
    return launch_clusters


def compile_cache_key(kfn, spec, arch: str, num_warps: int, cluster, options: dict) -> str:
    """The disk cache's key of one compile: tlxc itself, the toolchain, the kernel and what it reads
    (``KernelFunction.cache_key``), the specialization, the options, and every environment variable
    the compile reads (the performance switches all of them, ``options.PERF_SWITCHES``)."""
    from .. import __version__
    from ..options import PERF_SWITCHES
    from ..passes.manager import skipped_passes
    from .cache import compiler_fingerprint, toolchain_fingerprint
    h = hashlib.sha256()
    for part in (__version__, compiler_fingerprint(), toolchain_fingerprint(), kfn.cache_key, repr(spec.key()),
                 arch, str(num_warps), str(os.environ.get("TLXC_DEBUG_BARRIERS", "") == "1"), str(cluster),
                 repr(sorted(options.items())),
                 "check_barriers=" + os.environ.get("TLXC_CHECK_BARRIERS", "").strip().lower(),
                 "skip_passes=" + ",".join(sorted(skipped_passes())),
                 "device_tensormaps=" + str(os.environ.get("TLXC_DEVICE_TENSORMAPS", "").strip() != "0"),
                 "epilogue_overlap=" + os.environ.get("TLXC_EPILOGUE_OVERLAP", "1"),
                 "ring_from_start=" + os.environ.get("TLXC_RING_FROM_START", ""),
                 *(f"{name}={os.environ.get(name, '')}" for name in PERF_SWITCHES)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _compile_cached(kfn, spec, arch: str, num_warps: int, compile_kernel, cluster=None, options=None):
    """Compile, or load the cubin and metadata from the disk cache, whose key
    (``compile_cache_key``) covers everything that changes the output or whether the compile
    succeeds."""
    from .cache import DiskCache
    options = dict(options or {})
    debug_barriers = os.environ.get("TLXC_DEBUG_BARRIERS", "") == "1"
    key = compile_cache_key(kfn, spec, arch, num_warps, cluster, options)
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
                              cluster=cluster, **options)
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
