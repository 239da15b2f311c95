"""warp-pipeline-bounds: the phase shift around an AMD warp-pipelined loop.

Run on the frontend's module (the interpreter and ``tlxc check`` see the ops too).  For each
``scf.for`` whose body holds ``tlx.warp_pipeline_stage`` blocks (``tlx.warp_pipeline_begin`` /
``end``, ir/ops/warp_pipeline.py), it checks the stages sit directly in that body (not under an
``if``, in a ``while`` loop or in a loop nested in another warp-pipelined loop), numbers them,
and brackets the loop with ``tlx.warp_pipeline_enter`` / ``tlx.warp_pipeline_exit``: where the
upper half of the waves takes one extra barrier before the loop (one stage behind from then
on) and the lower half one after it (aligned again).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import CompilationError
from ..ir.builder import Builder
from ..ir.core import Module
from ..ir.ops.warp_pipeline import BEGIN, END, ENTER, EXIT
from .manager import Pass


def _created(block, index: int, name: str, attrs: dict, loc):
    op = Builder(None).create(name, [], [], attrs)
    op.loc = loc
    block.insert(index, op)
    return op


def insert_warp_pipeline_bounds(module: Module) -> Module:
    for kernel in module.kernels:
        loops = []
        for op in kernel.walk():
            if op.name not in (BEGIN, END):
                continue
            loop = op.parent_op()
            if loop is None or loop.name != "scf.for":
                raise CompilationError("tlx.warp_pipeline_stage must sit directly in the body of a for loop "
                                       "(range / tl.range; not under an 'if', in a while loop or in "
                                       "tl.static_range)", op.loc)
            if loop not in loops:
                loops.append(loop)
        for loop in loops:
            outer = loop.parent_op()
            while outer is not None:
                if outer in loops:
                    raise CompilationError("a warp-pipelined loop cannot sit inside another warp-pipelined loop",
                                           loop.loc)
                outer = outer.parent_op()
            stage = 0
            for op in loop.regions[0].block.ops:
                if op.name == BEGIN:
                    op.attrs["stage"] = stage
                elif op.name == END:
                    op.attrs["stage"] = stage
                    stage += 1
            block = loop.parent
            index = block.ops.index(loop)
            _created(block, index + 1, EXIT, {"stages": stage}, loop.loc)
            _created(block, index, ENTER, {"stages": stage}, loop.loc)
    return module


@dataclass(frozen=True)
class WarpPipelineBounds(Pass):
    """The phase shift around an AMD warp-pipelined loop.  Run with the frontend (``compiler.frontend_passes``)."""
    name = "warp-pipeline-bounds"

    def run(self, module: Module, options=None) -> Module:
        return insert_warp_pipeline_bounds(module)
