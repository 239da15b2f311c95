"""AMD warp-pipeline ("ping-pong") stages (``with tlx.warp_pipeline_stage(...)``).

* ``tlx.warp_pipeline_begin {label, priority, stage}`` / ``tlx.warp_pipeline_end {label, stage}``
  bracket one stage's ops in the body of an ``scf.for`` (``priority``: 0..3, the stage's
  ``s_setprio``, or None; ``stage``: its index in the body);
* ``tlx.amd_sched_barrier {mask}``: a compiler scheduling fence (no instruction);
* ``tlx.warp_pipeline_enter {stages}`` before such a loop and ``tlx.warp_pipeline_exit {stages}``
  after it (``passes/warp_pipeline.py`` inserts them): the phase shift that puts the upper half
  of the waves one stage behind the lower half, and the re-alignment after the loop.

The ops move no data; they schedule waves.  The interpreter runs them as no-ops (it runs the
program as one sequence of tiles); the AMD backend lowers them to ``s_setprio``,
``sched_barrier`` and barriers (``codegen_amdgcn/rules_hip.py``); other targets refuse them.
"""
from __future__ import annotations

from ..core import Operation
from ..traits import SIDE_EFFECT
from ._rules import expect_operands

BEGIN, END = "tlx.warp_pipeline_begin", "tlx.warp_pipeline_end"
SCHED_BARRIER = "tlx.amd_sched_barrier"
ENTER, EXIT = "tlx.warp_pipeline_enter", "tlx.warp_pipeline_exit"
MARKERS = (BEGIN, END, ENTER, EXIT)


class _Marker(Operation):
    traits = frozenset({SIDE_EFFECT})

    def verify(self):
        expect_operands(self, 0)
        if self.results:
            raise self.error("expected no results")
        priority = self.attrs.get("priority")
        if priority is not None and (isinstance(priority, bool) or priority not in (0, 1, 2, 3)):
            raise self.error(f"a warp-pipeline priority is 0..3 or None, got {priority!r}")


class SchedBarrierOp(_Marker):
    """``tlx.amd_sched_barrier(mask)``: a compiler scheduling fence ({mask}: the instruction
    classes that may cross it, bits 0..10)."""

    name = SCHED_BARRIER

    def verify(self):
        super().verify()
        mask = self.attrs.get("mask")
        if not isinstance(mask, int) or isinstance(mask, bool) or not 0 <= mask < 1 << 11:
            raise self.error(f"expected a sched_barrier mask of bits 0..10, got {mask!r}")


class WarpPipelineBeginOp(_Marker):
    name = BEGIN


class WarpPipelineEndOp(_Marker):
    name = END


class WarpPipelineEnterOp(_Marker):
    name = ENTER


class WarpPipelineExitOp(_Marker):
    name = EXIT


def pipelined_loop(op: Operation) -> Operation | None:
    """The warp-pipelined ``scf.for`` ``op`` sits in (at any depth), or None."""
    parent = op.parent_op()
    while parent is not None:
        if parent.name == "scf.for" and any(inner.name == BEGIN for inner in parent.regions[0].block.ops):
            return parent
        parent = parent.parent_op()
    return None
