"""Optional NVTX ranges around kernel launches (``TLXC_NVTX=1``).

Nsight Systems already shows each kernel under its readable symbol
(``softmax_kernel_BLOCK8192``); an NVTX range adds the host side: where in the
Python timeline the launch was issued and how long the host spent in it.  The
range is named after the kernel symbol.

The decision is taken once, when a launch plan is built: ``wrap`` returns the
driver launcher itself when the variable is unset, so the hot path pays
nothing.  ``runtime/launch.py:_prepare`` wraps every plan's launcher (the
slow path and the generated fast path both call it), so the variable must be
set before a kernel's first launch of a specialization.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

ENV = "TLXC_NVTX"


def enabled() -> bool:
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def wrap(launch: Callable, name: str, *, ranges: Any = None) -> Callable:
    """``launch`` inside an NVTX range named ``name`` when ``TLXC_NVTX=1``, else ``launch``.

    ``ranges`` (``range_push``/``range_pop``) defaults to ``torch.cuda.nvtx``.
    """
    if not enabled():
        return launch
    if ranges is None:
        import torch
        ranges = torch.cuda.nvtx
    push, pop = ranges.range_push, ranges.range_pop

    def launch_in_range(*args):
        push(name)
        try:
            return launch(*args)
        finally:
            pop()
    return launch_in_range
