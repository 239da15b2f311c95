"""``tlxc.language.extra.cuda`` (Triton's ``triton.language.extra.cuda``): ``libdevice`` and
programmatic dependent launch.

``gdc_wait()`` (PTX ``griddepcontrol.wait``) waits until the kernels this launch depends on
have finished and their memory is visible; ``gdc_launch_dependents()``
(``griddepcontrol.launch_dependents``) lets the next kernel on the stream start early.  Both
matter only for a launch with ``launch_pdl=True`` (and for its successor launched that way);
otherwise they return at once.  The interpreter runs launches one after another, so both are
no-ops there (docs/runtime.md, "Programmatic dependent launch").
"""
from __future__ import annotations

import functools

from ...core import outside_kernel_error
from . import libdevice  # noqa: F401


def _builtin(fn):
    """A kernel-only function of this namespace (frontend rule ``extra.cuda.<name>``)."""
    @functools.wraps(fn)
    def outside_kernel(*args, **kwargs):
        raise outside_kernel_error(f"tl.extra.cuda.{fn.__name__}")

    outside_kernel.__tlxc_builtin__ = f"extra.cuda.{fn.__name__}"
    outside_kernel.__tlxc_signature__ = fn
    return outside_kernel


@_builtin
def gdc_wait():
    """Wait for the grids this launch depends on (``launch_pdl=True``) to complete, their
    memory visible (``griddepcontrol.wait``)."""


@_builtin
def gdc_launch_dependents():
    """Allow the next ``launch_pdl=True`` kernel on the stream to begin
    (``griddepcontrol.launch_dependents``); orders no memory."""


@_builtin
def globaltimer():
    """The GPU's global nanosecond timer (``%globaltimer``), an int64; the interpreter answers
    with the host's clock."""


@_builtin
def smid():
    """The index of the multiprocessor running the program (``%smid``), an int32; 0 on the
    interpreter."""


@_builtin
def num_threads():
    """The threads of the program (``num_warps * 32``), a compile-time value."""


@_builtin
def num_warps():
    """The warps of the program, a compile-time value."""


__all__ = ["gdc_launch_dependents", "gdc_wait", "globaltimer", "libdevice", "num_threads", "num_warps", "smid"]
