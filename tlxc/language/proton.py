"""In-kernel scopes of Triton's profiler (``triton.profiler.language``, "proton"):
``pl.enter_scope(name)`` / ``pl.exit_scope(name)`` mark a region of a kernel for
proton's intra-kernel timing.  tlxc records no profile: inside a kernel they compile to
nothing (``frontend/gdc_rules.py``), which changes no result; ``tlxc.profiler`` says so
on the host.  Reached through ``tlxc.profiler.language``."""
from __future__ import annotations

import functools

from .core import outside_kernel_error


def _builtin(fn):
    @functools.wraps(fn)
    def outside_kernel(*args, **kwargs):
        raise outside_kernel_error(f"proton.{fn.__name__}")

    outside_kernel.__tlxc_builtin__ = "proton." + fn.__name__
    outside_kernel.__tlxc_signature__ = fn
    return outside_kernel


@_builtin
def enter_scope(name):
    """Open the timing scope ``name`` (a compile-time string); records nothing in tlxc."""


@_builtin
def exit_scope(name):
    """Close the timing scope ``name``; records nothing in tlxc."""


__all__ = ["enter_scope", "exit_scope"]
