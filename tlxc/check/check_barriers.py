"""check-barriers: the static barrier and resource checks on every compile.

Runs ``tlxc.check.check_kernel`` (``docs/checking.md``) and raises its first
error as a ``BarrierError`` or ``ResourceError`` at the user's line, with notes
pointing at the other side of the mismatch.

Barrier findings (not resource ones) can be relaxed:

* ``TLXC_CHECK_BARRIERS=warn`` (or a ``TLXC_DEBUG_BARRIERS`` build, made to
  watch a protocol run on the GPU) prints them as warnings and compiles;
* ``TLXC_CHECK_BARRIERS=0`` or ``compile(..., check_barriers=False)`` skips
  the protocol checks.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from ..ir.core import Module
from ..passes.manager import Pass
from . import check_kernel
from .findings import ERROR
from .resources import check_tasks


def barrier_mode(options) -> str:
    """``error``, ``warn`` or ``off`` for barrier findings."""
    env = os.environ.get("TLXC_CHECK_BARRIERS", "").strip().lower()
    if env in ("0", "off", "false", "no") or options.check_barriers is False:
        return "off"
    if env == "warn" or options.debug_barriers or os.environ.get("TLXC_DEBUG_BARRIERS") == "1":
        return "warn"
    return "error"


@dataclass(frozen=True)
class CheckBarriers(Pass):
    """Its option: ``mode`` for barrier findings, ``error``, ``warn`` or ``off`` (None: from the
    compile options and the environment, ``barrier_mode``)."""
    name = "check-barriers"
    mode: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in (None, "error", "warn", "off"):
            raise ValueError(f"check-barriers mode must be 'error', 'warn' or 'off', got {self.mode!r}")

    def run(self, module: Module, options) -> Module:
        mode = self.mode if self.mode is not None else barrier_mode(options)
        for kernel in module.kernels:
            findings = check_kernel(kernel) if mode != "off" else check_tasks(kernel)
            for finding in findings:
                if finding.severity != ERROR:
                    continue
                if finding.kind == "barrier" and mode == "warn":
                    sys.stderr.write(finding.render().replace(": error: ", ": warning: ", 1) + "\n")
                    continue
                raise finding.to_error()
        return module
