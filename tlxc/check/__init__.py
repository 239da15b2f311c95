"""Static checks of barriers and resources (``docs/checking.md``).

``check_kernel(kernel)`` runs every check on one IR kernel and returns its
findings; the ``check-barriers`` pass (``check/check_barriers.py``) raises
the first error on every compile, and ``tlxc check`` prints them all.

One concept per module: ``events`` (abstract evaluation of each task into its
protocol events), ``simulate`` (replaying them under several schedules),
``explain`` (turning a failure into a precise finding), ``async_order``
(async_dot results and TMA-store fences in program order), ``protocol`` (the
scenarios), ``named`` (named barriers), ``resources`` (tasks, warps,
registers), ``describe`` (words for messages), ``run`` (``tlxc check --run``
on the interpreter), ``findings`` (what is reported), ``check_barriers``
(the pass the compile driver puts in every pipeline).
"""
from __future__ import annotations

from ..ir.core import Operation
from .async_order import check_async_order
from .clc import check_clc
from .findings import ERROR, NOTE, WARNING, Finding
from .named import check_named
from .pair import check_pairs
from .protocol import check_protocol
from .resources import check_tasks

__all__ = ["ERROR", "NOTE", "WARNING", "Finding", "check_kernel"]


def check_kernel(kernel: Operation) -> list[Finding]:
    """Every finding of one kernel: resources first, then named barriers, then
    the barrier protocol (which only runs when the others found no error)."""
    findings = check_tasks(kernel)
    findings += check_named(kernel)
    findings += check_async_order(kernel)
    findings += check_clc(kernel)
    findings += check_pairs(kernel)
    if not any(f.severity == ERROR for f in findings):
        findings += check_protocol(kernel)
    return findings
