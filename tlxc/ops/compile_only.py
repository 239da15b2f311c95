"""Launch or compile: an op's ``compile_*`` helper runs the op's own host code with every
launch replaced by an sm_90a compile (CPU tensors of the real shapes are enough), to list the
kernels' registers, spills and shared memory, or to fill the disk cache before a timed run.
One :class:`CompileOnly` per op module; thread-local, so a compile in one thread never turns
another thread's launches into compiles."""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class CompileOnly:
    def __init__(self) -> None:
        self._local = threading.local()

    @property
    def active(self) -> bool:
        """Whether :meth:`collect` is running in this thread (launches compile instead)."""
        return getattr(self._local, "handles", None) is not None

    def launch(self, kernel, grid, *args, **meta) -> None:
        """``kernel[grid](*args, **meta)``, or while :meth:`collect` runs, compile it for the
        launch's specialization without launching and keep the compiled handle."""
        handles = getattr(self._local, "handles", None)
        if handles is None:
            kernel[grid](*args, **meta)
        else:
            handles.append(kernel.warmup(*args, grid=grid, **meta))

    def collect(self, op: Callable[..., Any], *args, **kwargs) -> list:
        """Run ``op(*args, **kwargs)`` with its launches compiled instead; the compiled-kernel
        handles (``.n_regs``, ``.n_spills``, ``.metadata.shared``, ``.asm``) in launch order."""
        self._local.handles = []
        try:
            op(*args, **kwargs)
            return self._local.handles
        finally:
            self._local.handles = None
