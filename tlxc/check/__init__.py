"""Static checks of barriers and resources (``docs/checking.md``).

``check_kernel(kernel)`` runs every check on one IR kernel and returns its
findings; the ``check-barriers`` pass (``passes/check_barriers.py``) raises
the first error on every compile, and ``tlxc check`` prints them all.

One concept per module: ``trace`` (abstract evaluation of each task into a
protocol trace), ``simulate`` (replaying traces under several schedules),
``explain`` (turning a failure into a precise finding), ``async_order``
(async_dot results and TMA-store fences in program order), ``protocol`` (the
scenarios), ``named`` (named barriers), ``resources`` (tasks, warps,
registers), ``describe`` (words for messages), ``run`` (``tlxc check --run``
on the interpreter), ``findings`` (what is reported).
"""
from __future__ import annotations

from ..ir.core import Operation
from ..target import DEFAULT_ARCH
from .async_order import check_async_order
from .clc import check_clc
from .findings import ERROR, NOTE, WARNING, Finding
from .named import check_named
from .protocol import check_protocol
from .resources import check_tasks

__all__ = ["ERROR", "NOTE", "WARNING", "Finding", "check_function", "check_kernel"]


def check_kernel(kernel: Operation) -> list[Finding]:
    """Every finding of one kernel: resources first, then named barriers, then
    the barrier protocol (which only runs when the others found no error)."""
    findings = check_tasks(kernel)
    findings += check_named(kernel)
    findings += check_async_order(kernel)
    findings += check_clc(kernel)
    if not any(f.severity == ERROR for f in findings):
        findings += check_protocol(kernel)
    return findings


def check_function(kfn, spec, *, arch: str = DEFAULT_ARCH, num_warps: int = 4, cluster=None) -> list[Finding]:
    """What ``tlxc check`` reports for one specialized ``@tlxc.kernel``: a
    frontend error, or the findings of ``check_kernel`` plus shared-memory
    capacity (``allocate-shared``), without generating code."""
    from ..compiler import copy_module, frontend
    from ..errors import TlxcError
    from ..frontend.codegen import Options
    from ..passes.canonicalize import Canonicalize
    from ..passes.dot_wait_drain import DrainDotWait
    from ..passes.dot_wgmma import LowerDotToWgmma
    from ..passes.layouts import InferLayouts
    from ..passes.pipeline import PipelineLoads
    from ..passes.shared_memory import allocate_kernel
    try:
        module = frontend(kfn, spec, arch=arch, num_warps=num_warps, cluster=cluster)
        options = Options(num_warps=num_warps, arch=arch, cluster=cluster)
        module = Canonicalize().run(copy_module(module), options)
        module = PipelineLoads().run(LowerDotToWgmma().run(module, options), options)   # what sm_90a compiles
        module = DrainDotWait().run(module, options)
        module = InferLayouts().run(Canonicalize().run(module, options), options)
    except TlxcError as exc:
        return [Finding(exc.message, exc.loc, list(exc.notes), check="frontend")]
    findings = []
    for kernel in module.kernels:
        findings += check_kernel(kernel)
        try:
            allocate_kernel(kernel, arch)
        except TlxcError as exc:
            memory = "tensor-memory" if "tensor-memory" in exc.message else "shared-memory"
            findings.append(Finding(exc.message, exc.loc, list(exc.notes), check=f"resource.{memory}",
                                    kind="resource"))
    return findings
