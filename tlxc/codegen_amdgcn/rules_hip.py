"""The AMD lowering rules: the ops whose HIP differs from the shared C-style rule
(``@lowering(..., vendor="amd")``, codegen_c/lower.py).  Everything else uses the shared rule.
"""
from __future__ import annotations

from ..codegen_c.lower import RULES, elem, lowering
from ..codegen_c.rules_arith import _CUDA_MATH
from .prelude import MATH_F32, MATH_F64

_AXES = "xyz"


@lowering("tl.program_id", vendor="amd")
def program_id(lw, op):
    axis = _AXES[op.attrs["axis"]]
    init = lw.target.expr(f"tlx_workgroup_id_{axis}")
    lw.declare(op.results[0], "pid" if not op.results[0].name_hint else None, init=init)


@lowering("tl.num_programs", vendor="amd")
def num_programs(lw, op):
    lw.declare(op.results[0], init=lw.target.expr("tlx_num_workgroups", op.attrs["axis"]))


@lowering("tlx.thread_id", vendor="amd")
def thread_id(lw, op):
    if op.attrs["axis"] != 0:
        raise lw.error_unsupported(op, "a work-item id along y or z (tlxc launches 1-D work-groups)")
    lw.declare(op.results[0], init="tid")


@lowering("tl.print", "tl.assert", "tlx.dump_layout", vendor="amd")
def debug_output(lw, op):
    raise lw.error_unsupported(op, f"{op.name} (device printf/assert)")


def _checked_math(name: str):
    """The shared math rule, once the function it writes is one the HIP prelude provides
    (the others would need AMD's device library, which the offline build does not link)."""
    shared = RULES[(f"math.{name}", None)]

    def rule(lw, op):
        f32, f64 = _CUDA_MATH[name]
        is_f64 = elem(op.operands[0].type).name == "f64"
        fn = f64 if is_f64 else f32
        if fn not in (MATH_F64 if is_f64 else MATH_F32):
            raise lw.error_unsupported(op, f"{op.name} on {elem(op.operands[0].type)}")
        shared(lw, op)
    return rule


for _name in _CUDA_MATH:
    lowering(f"math.{_name}", vendor="amd")(_checked_math(_name))


@lowering("tl.dot", vendor="amd")
def dot(lw, op):
    raise lw.error_unsupported(op, "tl.dot (MFMA lowering is not written yet)")
