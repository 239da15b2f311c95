"""Programmatic dependent launch (``tl.extra.cuda.gdc_*``): ``tlx.gdc_wait`` waits for the
grids a ``launch_pdl=True`` launch depends on; ``tlx.gdc_launch_dependents`` lets the next
such grid start.  No operands, no results; side effects (the ``tlx.`` prefix keeps them)."""
from __future__ import annotations

from ..core import Operation


def _no_operands_or_results(op) -> None:
    if op.operands or op.results:
        raise op.error("expected no operands and no results")


class GdcWaitOp(Operation):
    name = "tlx.gdc_wait"
    verify = _no_operands_or_results


class GdcLaunchDependentsOp(Operation):
    name = "tlx.gdc_launch_dependents"
    verify = _no_operands_or_results
