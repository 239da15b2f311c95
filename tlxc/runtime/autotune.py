"""``@tlxc.autotune`` and ``@tlxc.heuristics``, in the spirit of ``triton.autotune``.

    @tlxc.autotune(configs=[tlxc.Config({"BLOCK": 512}, num_warps=4),
                            tlxc.Config({"BLOCK": 1024}, num_warps=8)],
                   key=["n"], reset_to_zero=["out"])
    @tlxc.kernel
    def add(x, y, out, n, BLOCK: tl.constexpr): ...

    add[lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)](x, y, out, n)

On a launch whose tuning key (the values of the ``key`` arguments plus the
dtype of every tensor argument) has no best config yet, the autotuner prunes
the configs (``prune_configs_by``), benchmarks each one (a config that fails to
compile or to launch is skipped with a one-line warning), keeps the fastest,
stores it on disk and launches with it.  Later launches of that key cost one
dict lookup on top of the kernel's own launch; later processes read the choice
from ``cache_dir()/autotune/<kernel cache key>/<key hash>.json`` without
benchmarking.  ``TLXC_AUTOTUNE_REFRESH=1`` ignores stored choices (and
overwrites them); ``TLXC_PRINT_AUTOTUNING=1`` prints each choice and its time;
``TLXC_CACHE_DISABLE=1`` keeps everything in memory.

Timing is injectable (``do_bench=``): any ``fn -> milliseconds`` callable (or
one returning a sequence whose first item is the median, as
``triton.testing.do_bench(..., quantiles=...)`` does).  The default times with
CUDA events (L2 flushed between runs, warm-up, median) when the launch has a
CUDA tensor, and with the wall clock otherwise (the CPU interpreter: the
choice means little there, but the machinery is the same).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import CompileTimeAssertionFailure, LaunchError, TlxcError
from .cache import cache_dir, cache_disabled, remove_stale_temporaries, write_atomically

PROGRESS_MIN_CONFIGS = 4        # show a progress bar when tuning at least this many configs
_ENV_REFRESH = "TLXC_AUTOTUNE_REFRESH"
_ENV_PRINT = "TLXC_PRINT_AUTOTUNING"


_DEFAULT = object()      # a key argument left to its default


class AutotuneWarning(UserWarning):
    """A config was skipped while autotuning (it failed to compile or to launch), or an
    autotune argument tlxc cannot honour was given (an unknown ``key`` name, say)."""


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


# -- configs ---------------------------------------------------------------------------------------

class Config:
    """One point of the search space: constexpr values plus launch options.

    ``kwargs`` are passed to the kernel as keyword arguments (its
    ``tl.constexpr`` parameters); ``num_warps``, ``num_stages``, ``num_ctas``,
    ``maxnreg`` and ``ctas_per_cga`` (passed only when set) as launch options.
    ``pre_hook(nargs)`` runs before every launch with this config, benchmark
    runs included; ``nargs`` maps every argument name (config values included)
    to its value.
    """

    def __init__(self, kwargs: dict[str, Any], num_warps: int = 4, num_stages: int = 3, num_ctas: int = 1,
                 maxnreg: int | None = None, pre_hook: Callable[[dict[str, Any]], None] | None = None,
                 ir_override: str | None = None, *, ctas_per_cga: tuple[int, ...] | None = None):
        if ir_override is not None:
            raise TypeError("tlxc.Config(ir_override=...): tlxc compiles from the Python source and cannot "
                            "take a Triton IR file; use TLXC_OVERRIDE_DIR to replace the generated CUDA")
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.ctas_per_cga = tuple(ctas_per_cga) if ctas_per_cga is not None else None
        self.pre_hook = pre_hook

    def launch_options(self) -> dict[str, Any]:
        options = {"num_warps": self.num_warps, "num_stages": self.num_stages, "num_ctas": self.num_ctas,
                   "maxnreg": self.maxnreg, "ctas_per_cga": self.ctas_per_cga}
        return {name: value for name, value in options.items() if value is not None}

    def all_kwargs(self) -> dict[str, Any]:
        """What a launch with this config passes: the kwargs and the launch options."""
        return {**self.kwargs, **self.launch_options()}

    def _identity(self) -> tuple:
        return tuple((name, _hashable(value)) for name, value in self.all_kwargs().items())

    def __eq__(self, other) -> bool:
        return isinstance(other, Config) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __str__(self) -> str:
        return ", ".join(f"{name}: {value}" for name, value in self.all_kwargs().items())

    def __repr__(self) -> str:
        return f"Config({self})"


def _hashable(value) -> Any:
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


# -- wrappers that stack on top of @tlxc.kernel -------------------------------------------------------

class KernelWrapper:
    """Something launched like a kernel (``w[grid](*args, **kwargs)``) that wraps
    a ``KernelFunction`` or another wrapper (``.fn``)."""

    def __init__(self, fn):
        if not (getattr(fn, "__tlxc_kernel__", False) or isinstance(fn, KernelWrapper)):
            raise TypeError(f"{type(self).__name__} wraps a tlxc kernel: put @tlxc.kernel (or another "
                            f"@tlxc.autotune/@tlxc.heuristics) below it, got {fn!r}")
        self.fn = fn
        self.kernel = fn.kernel if isinstance(fn, KernelWrapper) else fn
        self.arg_names: list[str] = list(self.kernel.param_names)
        self.__name__ = self.kernel.__name__
        self.__doc__ = self.kernel.__doc__
        self.__wrapped__ = fn

    @property
    def base_fn(self):
        """The decorated Python function under every wrapper (Triton's ``Autotuner.base_fn``)."""
        return self.kernel.fn

    def __getitem__(self, grid):
        return functools.partial(self.run, grid=grid)

    def run(self, *args, grid, **kwargs):
        raise NotImplementedError

    def named_arguments(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        """The kernel arguments of a launch by name (positional and keyword; no defaults)."""
        named = dict(zip(self.arg_names, args))
        named.update((name, value) for name, value in kwargs.items() if name in self.kernel.signature.parameters)
        return named

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self.fn!r}>"


class Heuristics(KernelWrapper):
    """``@tlxc.heuristics({"EVEN_N": lambda args: args["n"] % args["BLOCK"] == 0})``: each value is
    computed from the launch's named arguments (earlier heuristics included) and passed as a
    keyword argument."""

    def __init__(self, fn, values: dict[str, Callable[[dict[str, Any]], Any]]):
        super().__init__(fn)
        self.values = dict(values)

    def run(self, *args, grid, **kwargs):
        for name, rule in self.values.items():
            kwargs[name] = rule({**dict(zip(self.arg_names, args)), **kwargs})
        return self.fn.run(*args, grid=grid, **kwargs)


def heuristics(values: dict[str, Callable[[dict[str, Any]], Any]]):
    """Decorator: ``@tlxc.heuristics({name: lambda args: value})`` above ``@tlxc.kernel``."""
    def decorator(fn):
        return Heuristics(fn, values)
    return decorator


# -- the autotuner -----------------------------------------------------------------------------------

class Autotuner(KernelWrapper):
    """``@tlxc.autotune(...)`` applied to a kernel; see the module docstring.

    After a launch: ``best_config`` (the config that launch used),
    ``configs_timings`` (config → median ms of the last tuning, ``inf`` for
    skipped configs; read back from disk when the choice was), ``bench_time``
    (seconds the last tuning took), ``cache`` (tuning key → config).
    """

    def __init__(self, fn, configs: Sequence[Config], key: Sequence[str], *,
                 prune_configs_by: dict[str, Any] | None = None, reset_to_zero: Sequence[str] | None = None,
                 restore_value: Sequence[str] | None = None, pre_hook: Callable | None = None,
                 post_hook: Callable | None = None, warmup: float | None = None, rep: float | None = None,
                 use_cuda_graph: bool = False, do_bench: Callable | None = None, cache_results: bool = True):
        super().__init__(fn)
        self.configs = list(configs) or [Config({})]
        for config in self.configs:
            if not isinstance(config, Config):
                raise TypeError(f"autotune configs must be tlxc.Config objects, got {config!r}")
        self.keys = self._known_keys(key)
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        for name in self.reset_to_zero + self.restore_value:
            if name not in self.arg_names:
                raise ValueError(f"@tlxc.autotune: {self.__name__} has no argument named '{name}' "
                                 f"(its arguments: {', '.join(self.arg_names)})")
        prune = dict(prune_configs_by or {})
        unknown = set(prune) - {"perf_model", "top_k", "early_config_prune"}
        if unknown:
            raise ValueError(f"prune_configs_by has unknown key(s) {', '.join(sorted(unknown))} "
                             f"(expected perf_model, top_k, early_config_prune)")
        self.perf_model = prune.get("perf_model")
        self.configs_top_k = prune.get("top_k", 10)
        self.early_config_prune = prune.get("early_config_prune")
        self.user_pre_hook = pre_hook
        self.user_post_hook = post_hook
        self.warmup = 25 if warmup is None else warmup
        self.rep = (20 if use_cuda_graph else 100) if rep is None else rep
        self.use_cuda_graph = bool(use_cuda_graph)
        self.user_do_bench = do_bench
        self.cache_results = cache_results
        self.cache: dict[tuple, Config] = {}      # tuning key -> the chosen config
        self._launches: dict[tuple, tuple[Config, dict[str, Any]]] = {}   # _launch_key -> (config, launch kwargs)
        self._single: dict[tuple, tuple[Config, dict[str, Any], bool]] = {}   # one config: _single_entry
        self._key_positions = [(self.arg_names.index(name), name) for name in self.keys]
        self.best_config: Config | None = None
        self.configs_timings: dict[Config, float] = {}
        self.bench_time = 0.0
        self._restore_copies: dict[str, Any] = {}
        self._bench_takes_quantiles = False

    def _known_keys(self, key: Sequence[str]) -> list[str]:
        """The ``key`` names that are arguments; Triton ignores the others, tlxc warns naming them."""
        if isinstance(key, str):
            key = [key]
        unknown = [name for name in key if name not in self.arg_names]
        if unknown:
            warnings.warn(f"@tlxc.autotune of {self.__name__}: key {', '.join(repr(n) for n in unknown)} "
                          f"{'is' if len(unknown) == 1 else 'are'} no argument of the kernel and "
                          f"{'is' if len(unknown) == 1 else 'are'} ignored (its arguments: "
                          f"{', '.join(self.arg_names)})", AutotuneWarning, stacklevel=4)
        return [name for name in key if name in self.arg_names]

    # -- the launch ---------------------------------------------------------------------------------
    def run(self, *args, grid, **kwargs):
        configs = self.configs
        if len(configs) == 1:       # one config: nothing to tune, no tuning key (the usual tutorial)
            entry = self._single.get(tuple(kwargs))
            if entry is None or entry[0] is not configs[0]:
                entry = self._single_entry(kwargs)
            config, launch_kwargs, params_only = entry
        else:
            try:
                config, launch_kwargs = self._launches[self._launch_key(args, kwargs)]
            except KeyError:
                config, launch_kwargs = self._first_launch_of_key(args, kwargs, grid)
            params_only = False
        self.best_config = config
        if config.pre_hook is not None:      # Triton's nargs: the arguments, the config's values and options
            nargs = dict(zip(self.arg_names, args))
            if kwargs:
                nargs.update(kwargs if params_only else self.named_arguments((), kwargs))
            nargs.update(launch_kwargs)
            config.pre_hook(nargs)
        if kwargs:
            launch_kwargs = {**kwargs, **launch_kwargs}
            if "warmup" in kwargs:
                return self.fn.run(*args, grid=grid, **launch_kwargs)
        # (the wrapped kernel's kernel[grid]: its generated fast path, without run()'s frame)
        return self.fn[grid](*args, **launch_kwargs)

    def _single_entry(self, kwargs: dict) -> tuple[Config, dict[str, Any], bool]:
        """A launch of a one-config autotuner with these keyword names: (the config, its launch
        keywords, whether every keyword is a kernel parameter), kept by ``run`` per keyword names
        until ``configs`` changes."""
        self._refuse_conflicts(kwargs)      # also with one config, which would silently win
        config = self.configs[0]
        parameters = self.kernel.signature.parameters
        entry = self._single[tuple(kwargs)] = (config, config.all_kwargs(), all(k in parameters for k in kwargs))
        return entry

    def _launch_key(self, args: tuple, kwargs: dict) -> tuple:
        """Cheap stand-in for ``tuning_key`` (same information, no strings, no dicts): the
        per-launch cost of a tuned kernel is this and one dict lookup."""
        parts = []
        for index, name in self._key_positions:
            value = args[index] if index < len(args) else kwargs.get(name, _DEFAULT)
            parts.append(value if value.__class__ in (int, bool, str) else _key_value(value))
        parts += [getattr(value, "dtype", None) for value in args]
        if kwargs:
            parts += [(name, getattr(value, "dtype", None)) for name, value in kwargs.items()]
        return tuple(parts)

    def _first_launch_of_key(self, args: tuple, kwargs: dict, grid) -> tuple[Config, dict[str, Any]]:
        self._refuse_conflicts(kwargs)      # also with one config, which would silently win
        if len(self.configs) == 1:
            config = self.configs[0]
        else:
            nargs = self.named_arguments(args, kwargs)
            key = self.tuning_key(nargs)
            config = self.cache.get(key)
            if config is None:
                config = self.cache[key] = self._choose(key, args, kwargs, grid, nargs)
        entry = self._launches[self._launch_key(args, kwargs)] = (config, config.all_kwargs())
        return entry

    def tuning_key(self, nargs: dict[str, Any]) -> tuple:
        """The values of the ``key`` arguments (defaults filled in), then every tensor argument's dtype."""
        parameters = self.kernel.signature.parameters
        values = []
        for name in self.keys:
            if name in nargs:
                values.append(_key_value(nargs[name]))
            else:
                default = parameters[name].default
                values.append(None if default is parameters[name].empty else _key_value(default))
        values += [str(value.dtype) for value in nargs.values() if hasattr(value, "dtype")]
        return tuple(values)

    def prune_configs(self, nargs: dict[str, Any], kwargs: dict[str, Any]) -> list[Config]:
        """``early_config_prune(configs, nargs, **kwargs)``, then the ``top_k`` configs by
        ``perf_model(**nargs, **kwargs, **config.all_kwargs())`` (an int, or a fraction ≤ 1)."""
        configs = self.configs
        if self.early_config_prune is not None:
            configs = list(self.early_config_prune(configs, nargs, **kwargs))
            if not configs:
                raise LaunchError(f"autotuning {self.__name__}: early_config_prune kept no config")
        if self.perf_model is not None:
            top_k = self.configs_top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(self.configs) * top_k))
            elif not isinstance(top_k, int):
                raise TypeError(f"prune_configs_by['top_k'] must be an int or a float ≤ 1, got {top_k!r}")
            if len(configs) > top_k:
                estimates = {config: self.perf_model(**nargs, **kwargs, **config.all_kwargs())
                             for config in configs}
                configs = sorted(configs, key=estimates.__getitem__)[:top_k]
        return configs

    def _refuse_conflicts(self, kwargs: dict) -> None:
        for config in self.configs:
            conflicts = sorted(set(kwargs) & set(config.kwargs))
            if conflicts:
                raise ValueError(f"conflicting meta-parameters: {', '.join(conflicts)} are set both by the "
                                 f"launch and by autotune configs of {self.__name__}; don't pass auto-tuned "
                                 f"values yourself")

    # -- choosing a config --------------------------------------------------------------------------
    def _choose(self, key: tuple, args: tuple, kwargs: dict, grid, nargs: dict) -> Config:
        store = self._store_path(key, nargs) if self.cache_results and not cache_disabled() else None
        if store is not None and not _env_flag(_ENV_REFRESH):
            stored = self._load(store)
            if stored is not None:
                self._report(key, stored, f"read from {store}")
                return stored
        configs = self.prune_configs(nargs, kwargs)
        if not configs:
            why = "its configs list is empty" if not self.configs else "prune_configs_by's top_k kept none"
            raise LaunchError(f"autotuning {self.__name__}: no config to benchmark ({why})")
        start = time.perf_counter()
        timings, failures = self._benchmark_all(configs, args, kwargs, grid, nargs)
        self.bench_time = time.perf_counter() - start
        if not timings:
            reasons = "\n".join(f"  {config}: {reason}" for config, (reason, _) in failures.items())
            first = next(iter(failures.values()))[1]
            raise LaunchError(f"autotuning {self.__name__}: every config failed\n{reasons}") from first
        best = min(timings, key=timings.__getitem__)
        self.configs_timings = {**timings, **{config: float("inf") for config in failures}}
        self._reset(nargs)     # leave zeroed outputs for the real launch, as before tuning
        if store is not None:
            self._save(store, key, best, self.configs_timings)
        self._report(key, best, f"{len(configs)} configs benchmarked in {self.bench_time:.2f} s")
        return best

    def _benchmark_all(self, configs: list[Config], args: tuple, kwargs: dict, grid, nargs: dict):
        timings: dict[Config, float] = {}
        failures: dict[Config, tuple[str, BaseException]] = {}
        bench = self._bench_function(args, kwargs)
        self._restore_copies = {name: nargs[name].clone() for name in self.restore_value if name in nargs}
        try:
            with _Progress(len(configs), f"tlxc autotune {self.__name__}") as progress:
                for config in configs:
                    try:
                        timings[config] = self._bench_one(bench, config, args, kwargs, grid, nargs)
                    except TlxcError as exc:
                        reason = one_line_reason(exc)
                        failures[config] = (reason, exc)
                        if not isinstance(exc, CompileTimeAssertionFailure):   # (the kernel's own refusal of
                            warnings.warn(f"tlxc autotune {self.__name__}: skipping config {config}: {reason}",
                                          AutotuneWarning, stacklevel=4)     # the config: quiet, as Triton)
                    progress.step()
        finally:
            self._restore_copies = {}
        return timings, failures

    def _bench_one(self, bench: Callable, config: Config, args: tuple, kwargs: dict, grid, nargs: dict) -> float:
        full_nargs = {**nargs, **config.all_kwargs()}
        launch_kwargs = {**kwargs, **config.all_kwargs()}

        def kernel_call():
            if config.pre_hook is not None:
                config.pre_hook(full_nargs)
            self._pre_hook(full_nargs)
            exception = None
            try:
                self.fn.run(*args, grid=grid, **launch_kwargs)
            except BaseException as exc:
                exception = exc
                raise
            finally:
                self._post_hook(full_nargs, exception)

        result = bench(kernel_call, quantiles=(0.5, 0.2, 0.8)) if self._bench_takes_quantiles else bench(kernel_call)
        if isinstance(result, (tuple, list)):
            result = result[0]
        return float(result)

    def _bench_function(self, args: tuple, kwargs: dict) -> Callable:
        """The user's ``do_bench`` (called as Triton calls it: ``do_bench(fn, quantiles=(0.5, 0.2, 0.8))``
        when it takes ``quantiles``), else CUDA-graph replays (``use_cuda_graph``), CUDA events,
        or, for CPU launches (the interpreter, where no graph exists), the wall clock."""
        self._bench_takes_quantiles = False
        if self.user_do_bench is not None:
            self._bench_takes_quantiles = _accepts_keyword(self.user_do_bench, "quantiles")
            return self.user_do_bench
        on_gpu = any(getattr(_tensor_of(value), "is_cuda", False) for value in (*args, *kwargs.values()))
        if not on_gpu:
            return functools.partial(wall_clock_bench, warmup=self.warmup, rep=self.rep)
        timer = cuda_graph_bench if self.use_cuda_graph else cuda_event_bench
        return functools.partial(timer, warmup=self.warmup, rep=self.rep)

    def _pre_hook(self, nargs: dict[str, Any]) -> None:
        self._reset(nargs)
        if self.user_pre_hook is not None:
            self.user_pre_hook(nargs)

    def _post_hook(self, nargs: dict[str, Any], exception: BaseException | None) -> None:
        for name, saved in self._restore_copies.items():
            nargs[name].copy_(saved)
        if self.user_post_hook is not None:
            self.user_post_hook(nargs, exception)

    def _reset(self, nargs: dict[str, Any]) -> None:
        for name in self.reset_to_zero:
            if name in nargs:
                nargs[name].zero_()

    def _report(self, key: tuple, config: Config, how: str) -> None:
        if _env_flag(_ENV_PRINT):
            timing = self.configs_timings.get(config)
            timing_text = f"{timing:.4f} ms" if timing is not None else "no timing"
            print(f"tlxc autotune {self.__name__}: key {key} -> {config} ({timing_text}; {how})", flush=True)

    # -- the disk store -----------------------------------------------------------------------------
    def _store_path(self, key: tuple, nargs: dict[str, Any]) -> Path | None:
        from .. import __version__
        try:
            kernel_key = self.kernel.cache_key
        except (OSError, TlxcError):
            return None     # no source to hash (a kernel defined in a REPL): keep choices in memory
        identity = json.dumps({"tlxc": __version__, "kernel": self.__name__, "key": repr(key),
                               "configs": [str(config) for config in self.configs],
                               "device": _device_description(nargs.values())}, sort_keys=True)
        digest = hashlib.sha256(identity.encode()).hexdigest()[:32]
        return cache_dir() / "autotune" / kernel_key / f"{digest}.json"

    def _load(self, path: Path) -> Config | None:
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        by_name = {str(config): config for config in self.configs}
        choice = entry.get("config") if isinstance(entry, dict) else None
        best = by_name.get(choice) if isinstance(choice, str) else None
        timings = entry.get("timings_ms", {}) if isinstance(entry, dict) else None
        if best is None or not isinstance(timings, dict) or not all(
                isinstance(ms, (int, float)) and not isinstance(ms, bool) for ms in timings.values()):
            # valid JSON of another shape (hand-edited, another version): tune again, and overwrite it
            warnings.warn(f"tlxc autotune {self.__name__}: ignoring the stored choice {path} (not a choice "
                          f"among this kernel's configs); tuning again", AutotuneWarning, stacklevel=2)
            return None
        self.configs_timings = {by_name[name]: float(ms) for name, ms in timings.items() if name in by_name}
        self.bench_time = 0.0
        return best

    def _save(self, path: Path, key: tuple, best: Config, timings: dict[Config, float]) -> None:
        measured = {str(config): ms for config, ms in timings.items() if ms != float("inf")}
        entry = {"kernel": self.__name__, "key": repr(key), "config": str(best), "timings_ms": measured,
                 "bench_seconds": self.bench_time}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temporaries(path.parent)     # a killed writer's leftovers (as DiskCache.put)
            write_atomically(path, json.dumps(entry, indent=1) + "\n")
        except OSError:
            pass     # a read-only cache must not fail a launch: the choice stays in memory


def autotune(configs: Sequence[Config], key: Sequence[str], prune_configs_by: dict[str, Any] | None = None,
             reset_to_zero: Sequence[str] | None = None, restore_value: Sequence[str] | None = None,
             pre_hook: Callable | None = None, post_hook: Callable | None = None, warmup: float | None = None,
             rep: float | None = None, use_cuda_graph: bool = False, do_bench: Callable | None = None,
             cache_results: bool = True):
    """Decorator: ``@tlxc.autotune(configs=[tlxc.Config(...)], key=[...])`` above ``@tlxc.kernel``.

    - ``key``: argument names whose values select a tuning (plus every tensor's dtype); a name
      that is no argument is ignored with an ``AutotuneWarning`` (Triton ignores it silently).
    - ``prune_configs_by``: ``{"early_config_prune": fn(configs, nargs, **kwargs) -> configs,
      "perf_model": fn(**nargs, **kwargs, **config.all_kwargs()) -> estimated ms,
      "top_k": int or fraction}``.
    - ``reset_to_zero``: tensor arguments zeroed before each benchmark run (and once after tuning).
    - ``restore_value``: tensor arguments restored to their values after each benchmark run.
    - ``pre_hook(nargs)`` / ``post_hook(nargs, exception)``: called around each benchmark run, in
      addition to (not instead of) ``reset_to_zero`` / ``restore_value``.
    - ``warmup``, ``rep``: milliseconds of warm-up and of measurement for the default timer
      (25 and 100; with ``use_cuda_graph`` ``rep`` defaults to 20 and ``warmup`` is not needed).
    - ``use_cuda_graph``: time each config by replaying a CUDA graph of its launch
      (``cuda_graph_bench``: host overhead excluded), as Triton's ``do_bench_cudagraph``; launches on
      CPU tensors (the interpreter) have no graph and use the wall clock.
    - ``do_bench``: replaces the timer: ``do_bench(fn, quantiles=(0.5, 0.2, 0.8))`` when it takes
      ``quantiles`` (Triton's call), else ``do_bench(fn)``; ms, or a sequence whose first item is used.
    - ``cache_results``: store the choice on disk (default True).
    """
    def decorator(fn):
        return Autotuner(fn, configs, key, prune_configs_by=prune_configs_by, reset_to_zero=reset_to_zero,
                         restore_value=restore_value, pre_hook=pre_hook, post_hook=post_hook, warmup=warmup,
                         rep=rep, use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results)
    return decorator


# -- helpers -----------------------------------------------------------------------------------------

def one_line_reason(exc: BaseException) -> str:
    """``ResourceError: k.py:12:4: error: needs 300 KiB of shared memory`` (first line only)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else '(no message)'}"


def _accepts_keyword(fn: Callable, name: str) -> bool:
    import inspect
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in parameters)


def _tensor_of(value) -> Any:
    """A TMA descriptor's tensor, or the value itself."""
    base = getattr(value, "base", None)
    return base if hasattr(base, "is_cuda") else value


def _key_value(value) -> Any:
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        return ("tensor", str(value.dtype), tuple(value.shape))
    if isinstance(value, list):
        return tuple(_key_value(v) for v in value)
    return _hashable(value)


def _device_description(values: Iterable[Any]) -> str:
    for value in values:
        value = _tensor_of(value)
        if getattr(value, "is_cuda", False):
            import torch
            index = value.get_device()
            major, minor = torch.cuda.get_device_capability(index)
            return f"{torch.cuda.get_device_name(index)} sm_{major}{minor}"
    return "cpu (interpreter)"


class _Progress:
    """A tqdm bar when tqdm is importable, else a counter on stderr; silent for a few configs."""

    def __init__(self, total: int, label: str):
        self.total = total
        self.label = label
        self.done = 0
        self.bar = None
        self.enabled = total >= PROGRESS_MIN_CONFIGS

    def __enter__(self):
        if self.enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                self._print()
            else:
                self.bar = tqdm(total=self.total, desc=self.label, unit="config", leave=False, file=sys.stderr)
        return self

    def step(self) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.enabled:
            self._print()

    def __exit__(self, *exc_info) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()

    def _print(self) -> None:
        sys.stderr.write(f"\r{self.label}: {self.done}/{self.total} configs")
        sys.stderr.flush()


# -- timers ------------------------------------------------------------------------------------------

def cuda_event_times(fn: Callable[[], Any], warmup: float = 25, rep: float = 100, *, flush_l2: bool = True,
                     grad_to_none: Sequence[Any] | None = None) -> list[float]:
    """Milliseconds of each measured ``fn()`` on the current CUDA stream.

    The first call (compilation, module load) is not timed; ``warmup`` and
    ``rep`` are milliseconds, converted to iteration counts from a 5-call
    estimate; a 256 MiB memset between runs evicts L2, outside the timed span;
    the ``.grad`` of each tensor of ``grad_to_none`` is reset before each run
    (so that backward passes do not accumulate).
    """
    import torch
    fn()
    torch.cuda.synchronize()
    flush = torch.empty(256 * 1024 * 1024 if flush_l2 else 0, dtype=torch.int8, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(max(1, int(warmup / estimate))):
        fn()
    repeats = max(1, int(rep / estimate))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for begin, finish in zip(starts, ends):
        _clear_grads(grad_to_none)
        flush.zero_()
        begin.record()
        fn()
        finish.record()
    torch.cuda.synchronize()
    return [begin.elapsed_time(finish) for begin, finish in zip(starts, ends)]


def cuda_event_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100, *,
                     flush_l2: bool = True) -> float:
    """Median milliseconds of ``fn()`` on the current CUDA stream (``cuda_event_times``)."""
    return statistics.median(cuda_event_times(fn, warmup, rep, flush_l2=flush_l2))


def cuda_graph_times(fn: Callable[[], Any], rep: float = 20, *,
                     grad_to_none: Sequence[Any] | None = None) -> list[float]:
    """Milliseconds per ``fn()`` replayed from a CUDA graph, one value per replay of 10.

    As Triton's ``do_bench_cudagraph``: on a side stream, one eager call (it
    compiles and loads the module: neither may happen during a capture), one
    captured call to estimate the time, then a graph of enough unrolled calls
    to last ``rep`` ms, replayed 10 times.  Host-side work in ``fn`` (hooks,
    descriptor encodes) runs at capture only, so it is not timed; a ``fn``
    whose launch cannot be captured raises ``LaunchError``.
    """
    import torch
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
        torch.cuda.synchronize()
        try:
            graph = _capture(fn, 1, grad_to_none)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            repeats = max(1, int(rep / max(start.elapsed_time(end), 1e-3)))
            graph = _capture(fn, repeats, grad_to_none)
        except RuntimeError as exc:      # torch reports capture failures as RuntimeError
            raise LaunchError(f"use_cuda_graph: the launch could not be captured in a CUDA graph ({exc}); "
                              f"pass use_cuda_graph=False to time it with CUDA events") from None
        times = []
        for _ in range(10):
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / repeats)
    return times


def _capture(fn: Callable[[], Any], repeats: int, grad_to_none):
    import torch
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(repeats):
            _clear_grads(grad_to_none)
            fn()
    torch.cuda.synchronize()
    return graph


def cuda_graph_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100) -> float:
    """Mean milliseconds of ``fn()`` replayed from a CUDA graph (``cuda_graph_times``; the
    autotuner's timer under ``use_cuda_graph=True``; ``warmup`` is not needed: replays are warm)."""
    return statistics.fmean(cuda_graph_times(fn, rep))


def wall_clock_times(fn: Callable[[], Any], warmup: float = 25, rep: float = 100, *,
                     grad_to_none: Sequence[Any] | None = None) -> list[float]:
    """Wall-clock milliseconds of each measured ``fn()`` (CPU launches: the interpreter)."""
    start = time.perf_counter()
    fn()      # the first call compiles: time it only to size the loops
    estimate = max((time.perf_counter() - start) * 1e3, 1e-3)
    for _ in range(min(int(warmup / estimate), 100)):
        fn()
    times = []
    for _ in range(max(1, min(int(rep / estimate), 1000))):
        _clear_grads(grad_to_none)
        begin = time.perf_counter()
        fn()
        times.append((time.perf_counter() - begin) * 1e3)
    return times


def wall_clock_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100) -> float:
    """Median wall-clock milliseconds of ``fn()`` (CPU launches: the interpreter)."""
    return statistics.median(wall_clock_times(fn, warmup, rep))


def _clear_grads(tensors) -> None:
    for tensor in tensors or ():
        tensor.grad = None


__all__ = ["AutotuneWarning", "Autotuner", "Config", "Heuristics", "KernelWrapper", "autotune",
           "cuda_event_bench", "cuda_event_times", "cuda_graph_bench", "cuda_graph_times", "heuristics",
           "one_line_reason", "wall_clock_bench", "wall_clock_times"]
