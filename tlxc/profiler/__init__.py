"""A stand-in for Triton's profiler (``triton.profiler``, "proton") that records nothing.

TLX's tutorials import it (``import triton.profiler as proton``; ``import
triton.profiler.language as pl``) to time kernels or regions of them.  With the imports
renamed to tlxc they run: the host functions below keep proton's signatures and do no
profiling (the first call warns once that no profile is written), and the in-kernel
``pl.enter_scope`` / ``pl.exit_scope`` compile to nothing.  Nothing a kernel computes
depends on them.  For timings use ``tlxc.testing.do_bench`` or ``tlxc trace``.
"""
from __future__ import annotations

import contextlib
import functools
import warnings

from . import language

_WARNED: list[bool] = []


class ProfilerWarning(UserWarning):
    """tlxc.profiler was used: it records nothing."""


def _no_profile(what: str) -> None:
    if not _WARNED:
        _WARNED.append(True)
        warnings.warn(f"tlxc.profiler.{what}(): tlxc has no profiler; proton's calls run but record and write "
                      f"nothing (use tlxc.testing.do_bench or tlxc trace for timings)", ProfilerWarning, stacklevel=3)


def start(name=None, *, context="shadow", data="tree", backend=None, mode=None, hook=None) -> int:
    """proton.start: returns a session id (0); no session records anything."""
    _no_profile("start")
    return 0


def activate(session=None) -> None:
    _no_profile("activate")


def deactivate(session=None) -> None:
    _no_profile("deactivate")


def finalize(session=None, output_format="hatchet") -> None:
    """proton.finalize: writes no profile file."""
    _no_profile("finalize")


def enter_scope(name, *, triton_op=False, metrics=None) -> int:
    _no_profile("enter_scope")
    return 0


def exit_scope(triton_op=False, metrics=None) -> int:
    _no_profile("exit_scope")
    return 0


class scope(contextlib.ContextDecorator):
    """``with proton.scope(name):`` or ``@proton.scope(name)``: runs the body, times nothing."""

    def __init__(self, name, metrics=None):
        self.name, self.metrics = name, metrics

    def __enter__(self):
        _no_profile("scope")
        return self

    def __exit__(self, *exc) -> bool:
        return False


def profile(func=None, *, name=None, context="shadow", data="tree", backend=None, mode=None, hook=None):
    """``@proton.profile``: the function itself, unprofiled."""
    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            _no_profile("profile")
            return fn(*args, **kwargs)
        return run
    return wrap(func) if func is not None else wrap


__all__ = ["ProfilerWarning", "activate", "deactivate", "enter_scope", "exit_scope", "finalize", "language",
           "profile", "scope", "start"]
