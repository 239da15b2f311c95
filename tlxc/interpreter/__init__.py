"""The CPU interpreter: runs tlxc's IR (not the Python source) on numpy.

    tlxc.interpret(kernel)[grid](x, y, out, n, BLOCK=1024)      # explicit
    TLXC_INTERPRET=1 python script.py                           # every launch
    interpret(kernel, grid, args, kwargs, seed=3, order="shuffled")

See ``docs/interpreter.md``.  Rules live in one module per IR domain
(``arith``, ``tensor``, ``memory_ops``, ``mma``, ``control``, ``debug``,
``shared`` (buffers, cp.async), ``tma``, ``mma_async`` (wgmma), ``barrier_ops``,
``task``); ``scheduler``,
``races`` and the mbarrier model (``ir/mbarrier.py``, shared with the checker) are the
machinery warp-group tasks build on.
"""
from __future__ import annotations

from typing import TextIO

from ..ir.mbarrier import MBarrier, alloc_barriers
from . import (  # noqa: F401  (rules)
    arith,
    barrier_ops,
    bulk,
    clc,
    cluster,
    control,
    debug,
    memory_ops,
    mma,
    mma_async,
    scan,
    shared,
    task,
    tcgen05,
    tensor,
    tensormap,
    tma,
    warp,
)
from .executor import KernelRunner, Program, TaskContext, run_block
from .launch import InterpretedKernel, interpret_launch, maybe_interpret, normalize_grid, should_interpret, specialize
from .memory import GlobalMemory
from .races import RaceTracker
from .registry import RULES, impl
from .scheduler import PREEMPT, AsyncEvent, Blocked, Scheduler, Task


def interpret(kernel_fn, grid=None, args: tuple = (), kwargs: dict | None = None, *,
              num_warps: int | None = None, seed: int | None = None, order: str = "sequential",
              out: TextIO | None = None, arch: str | None = None, check_barriers: bool = True):
    """Run ``kernel_fn[grid](*args, **kwargs)`` on the CPU interpreter.

    ``interpret(kernel)`` with no grid returns a launchable wrapper instead:
    ``interpret(kernel)[grid](*args, **kwargs)``.  ``order="shuffled"`` runs
    the programs in a permutation drawn from ``seed``; ``seed`` also picks the
    interleaving of each program's tasks.  ``out`` receives ``tl.device_print``
    lines (default: sys.stdout).  ``arch`` (default ``TLXC_INTERPRET_ARCH``, else
    sm_90a) picks the architecture whose ops the kernel may use (sm_100a: tensor
    memory and tcgen05).  Before the first run of each specialization the
    static barrier checks of every GPU compile run (``docs/checking.md``), so a
    race this run's interleaving does not reveal still fails;
    ``TLXC_CHECK_BARRIERS=warn|0`` relaxes them as for a compile, and
    ``check_barriers=False`` skips them (to watch the interpreter diagnose a
    kernel the checker rejects).
    """
    if grid is None:
        return InterpretedKernel(kernel_fn, seed=seed, order=order, out=out, check_barriers=check_barriers)
    return interpret_launch(kernel_fn, grid, tuple(args), dict(kwargs or {}), num_warps=num_warps,
                            seed=seed, order=order, out=out, arch=arch, check_barriers=check_barriers)


__all__ = [
    "PREEMPT",
    "RULES",
    "AsyncEvent",
    "Blocked",
    "GlobalMemory",
    "InterpretedKernel",
    "KernelRunner",
    "MBarrier",
    "Program",
    "RaceTracker",
    "Scheduler",
    "Task",
    "TaskContext",
    "alloc_barriers",
    "impl",
    "interpret",
    "maybe_interpret",
    "normalize_grid",
    "run_block",
    "should_interpret",
    "specialize",
]
