"""Lowering of programmatic dependent launch (ir/ops/gdc.py): one PTX helper each."""
from __future__ import annotations

from ..codegen_c.lower import lowering


@lowering("tlx.gdc_wait", vendor="nvidia")
def gdc_wait(lw, op):
    lw.out.line(lw.target.call("tlx_griddepcontrol_wait"))


@lowering("tlx.gdc_launch_dependents", vendor="nvidia")
def gdc_launch_dependents(lw, op):
    lw.out.line(lw.target.call("tlx_griddepcontrol_launch_dependents"))
