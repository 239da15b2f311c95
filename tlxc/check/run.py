"""``tlxc check --run``: what static analysis cannot decide, decided by running
the kernel on the CPU interpreter at small sizes under several interleavings.

The file provides the launch: a module-level ``check_inputs()`` returning

* ``(grid, args)`` or ``(grid, args, kwargs)`` -- one launch, for the one
  kernel being checked; or
* ``{kernel_name: (grid, args[, kwargs]), ...}`` -- a launch per kernel
  (kernels without an entry are not run).

``args`` are the launch's positional arguments (torch CPU tensors or numpy
arrays for pointers, Python numbers for scalars); ``kwargs`` holds constexprs
and launch options (``num_warps=``).  ``-D NAME=VALUE`` values are added to
``kwargs``.  Each seed runs on fresh copies of the tensors, so kernels that
accumulate (atomic counters) start from the same state every time.  The
interpreter's diagnoses (deadlock, race, out-of-bounds access, barrier
misuse) are the findings.
"""
from __future__ import annotations

import copy
from typing import Any

from ..errors import TlxcError

SEEDS = (None, 0, 1, 2, 3)


class RunSetupError(Exception):
    """``check_inputs`` is missing or returns something unusable."""


INPUTS_HOOK = "check_inputs"     # the one name of a file's launch inputs (check --run, check, compile, trace)
_OLD_HOOK = "trace_inputs"       # its former name for 'tlxc trace', still read


def inputs_hook(module):
    """The file's ``check_inputs`` (or its former name ``trace_inputs``), or None."""
    for name in (INPUTS_HOOK, _OLD_HOOK):
        provider = getattr(module, name, None)
        if callable(provider):
            return provider
    return None


def call_inputs_hook(provider, kernel_name: str):
    """``check_inputs()``, or ``check_inputs(kernel_name)`` when it takes a parameter."""
    import inspect
    try:
        takes_name = bool(inspect.signature(provider).parameters)
        return provider(kernel_name) if takes_name else provider()
    except Exception as exc:  # noqa: BLE001 (the user's helper; reported in one line)
        raise RunSetupError(f"{provider.__name__}() failed: {type(exc).__name__}: {exc}") from None


def launches(module, names: list[str]) -> dict[str, tuple]:
    """{kernel name: (grid, args, kwargs)} from the file's ``check_inputs()``."""
    provider = inputs_hook(module)
    if provider is None:
        raise RunSetupError("--run needs a function check_inputs() in the file, returning (grid, args[, kwargs]) "
                            "or {kernel name: (grid, args[, kwargs])} with small inputs (see docs/checking.md)")
    if _takes_kernel_name(provider):
        return {name: _launch(call_inputs_hook(provider, name), name) for name in names}
    spec = call_inputs_hook(provider, "")
    if isinstance(spec, dict):
        return {name: _launch(entry, name) for name, entry in spec.items()}
    if len(names) != 1:
        raise RunSetupError(f"check_inputs() returned one launch but {len(names)} kernels are checked "
                            f"({', '.join(names)}): return a dict by kernel name, or pass --kernel")
    return {names[0]: _launch(spec, names[0])}


def _takes_kernel_name(provider) -> bool:
    import inspect
    try:
        return bool(inspect.signature(provider).parameters)
    except (TypeError, ValueError):
        return False


def _launch(entry, name: str) -> tuple:
    if not isinstance(entry, (tuple, list)) or len(entry) not in (2, 3):
        raise RunSetupError(f"check_inputs() entry for '{name}' must be (grid, args) or (grid, args, kwargs), "
                            f"got {type(entry).__name__}")
    grid, args, *rest = entry
    kwargs = dict(rest[0]) if rest else {}
    return grid, tuple(args), kwargs


def _fresh(value: Any) -> Any:
    if hasattr(value, "clone") and hasattr(value, "data_ptr"):
        return value.clone()
    if hasattr(value, "copy") and hasattr(value, "__array_interface__"):
        return value.copy()
    return copy.copy(value)


def run_kernel(kfn, grid, args: tuple, kwargs: dict, *, seeds=SEEDS, num_warps: int | None = None,
               arch: str | None = None) -> TlxcError | None:
    """The first interpreter diagnosis over ``seeds``, or None."""
    from ..interpreter import interpret
    kwargs = dict(kwargs)
    if num_warps is not None:
        kwargs.setdefault("num_warps", num_warps)
    for seed in seeds:
        try:
            interpret(kfn, grid, tuple(_fresh(a) for a in args), dict(kwargs), seed=seed, arch=arch,
                      check_barriers=False)     # 'tlxc check' reports the static findings itself
        except TlxcError as exc:
            schedule = "the default schedule" if seed is None else f"the interleaving of seed {seed}"
            exc.notes.append((f"found by 'tlxc check --run' on the interpreter under {schedule}", None))
            if exc.loc is None:            # a deadlock: report it at the first blocked wait
                exc.loc = next((loc for text, loc in exc.notes if loc is not None and " waits " in text
                                and "to finish" not in text), None)
            return exc
    return None
