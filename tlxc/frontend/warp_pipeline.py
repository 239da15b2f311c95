"""``with tlx.warp_pipeline_stage(label, priority=P):`` in a loop body (AMD warp pipelines):
the stage's statements are built in place between a ``tlx.warp_pipeline_begin`` and a
``tlx.warp_pipeline_end`` (ir/ops/warp_pipeline.py), so the values they assign are the loop's
as usual.  ``WarpPipelineStatements`` is the part of ``FunctionBuilder`` (frontend/build_ir.py)
that handles them; ``passes/warp_pipeline.py`` checks where the stages sit."""
from __future__ import annotations

from ..ir.ops.warp_pipeline import BEGIN, END
from .values import unwrap


class WarpPipelineStatements:
    def warp_pipeline_stage(self, node, call) -> None:
        if node.items[0].optional_vars is not None:
            raise self.error("tlx.warp_pipeline_stage() does not bind a name ('as ...')", node.items[0].optional_vars)
        if len(call.args) > 1:
            raise self.error("tlx.warp_pipeline_stage takes one positional argument (the label)", call.args[1])
        label = unwrap(self.visit(call.args[0])) if call.args else None
        priority = None
        for kw in call.keywords:
            if kw.arg == "label" and not call.args:
                label = unwrap(self.visit(kw.value))
            elif kw.arg == "priority":
                priority = unwrap(self.visit(kw.value))
            else:
                raise self.error(f"tlx.warp_pipeline_stage() got an unexpected keyword argument '{kw.arg}'", kw)
        if label is not None and not isinstance(label, str):
            raise self.error(f"tlx.warp_pipeline_stage's label must be a string or None, got {label!r}", call)
        if priority is not None and (isinstance(priority, bool) or priority not in (0, 1, 2, 3)):
            raise self.error(f"tlx.warp_pipeline_stage's priority must be a compile-time 0..3 (s_setprio) or None, "
                             f"got {priority!r}", call)
        if getattr(self, "in_pipeline_stage", False):
            raise self.error("tlx.warp_pipeline_stage blocks do not nest", node)
        self.b.create(BEGIN, [], [], {"label": label, "priority": priority}).loc = self.src.loc(node)
        self.in_pipeline_stage = True
        try:
            self.visit_stmts(node.body)
        finally:
            self.in_pipeline_stage = False
        self.b.create(END, [], [], {"label": label}).loc = self.src.loc(node)
