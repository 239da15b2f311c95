"""Semantic rules of ``tl.extra.cuda.gdc_wait`` / ``gdc_launch_dependents`` (ir/ops/gdc.py), of its
special registers (``globaltimer``, ``smid``, ``num_threads``, ``num_warps``), and of the profiler's
in-kernel scope markers (``tlxc/language/proton.py``), which emit nothing."""
from __future__ import annotations

from ..ir import types as T
from ..target import has_feature
from .builtins import RULES, rule
from .semantic import SemanticError


def _require_hopper(ctx, what: str) -> None:
    arch = ctx.options.arch
    if not has_feature(arch, "gdc"):
        raise SemanticError(f"{what} (griddepcontrol) needs sm_90 or newer; compiling for {arch}")


@rule("extra.cuda.gdc_wait")
def _gdc_wait(ctx):
    _require_hopper(ctx, "tl.extra.cuda.gdc_wait")
    ctx.b.create("tlx.gdc_wait", [], [], {})


@rule("extra.cuda.gdc_launch_dependents")
def _gdc_launch_dependents(ctx):
    _require_hopper(ctx, "tl.extra.cuda.gdc_launch_dependents")
    ctx.b.create("tlx.gdc_launch_dependents", [], [], {})


# tl.extra.cuda's special registers, as Triton writes them: inline PTX of one ``mov`` (the interpreter
# answers %globaltimer with the host's clock, %smid with 0: interpreter/inline_ptx.py)
@rule("extra.cuda.globaltimer")
def _globaltimer(ctx):
    return RULES["inline_asm_elementwise"](ctx, "mov.u64 $0, %globaltimer;", "=l", [], T.i64, False, 1)


@rule("extra.cuda.smid")
def _smid(ctx):
    return RULES["inline_asm_elementwise"](ctx, "mov.u32 $0, %smid;", "=r", [], T.i32, True, 1)


@rule("extra.cuda.num_warps")
def _num_warps(ctx):
    return ctx.options.num_warps


@rule("extra.cuda.num_threads")
def _num_threads(ctx):
    return ctx.options.num_warps * 32


def _scope_name(name, what: str) -> None:
    from .builtins import constexpr
    if not isinstance(constexpr(name, "name"), str):
        raise SemanticError(f"{what}: 'name' must be a compile-time string")


@rule("proton.enter_scope")
def _proton_enter_scope(ctx, name):
    _scope_name(name, "proton.enter_scope")     # tlxc records no profile: no op


@rule("proton.exit_scope")
def _proton_exit_scope(ctx, name):
    _scope_name(name, "proton.exit_scope")
