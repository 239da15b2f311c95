"""Semantic rules of ``tl.extra.cuda.gdc_wait`` / ``gdc_launch_dependents`` (ir/ops/gdc.py), and of
the profiler's in-kernel scope markers (``tlxc/language/proton.py``), which emit nothing."""
from __future__ import annotations

from ..target import has_feature
from .builtins import rule
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
