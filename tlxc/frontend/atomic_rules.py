"""Semantic rules of the atomics (``tl.atomic_*``) and ``tl.debug_barrier``.

They follow Triton (``semantic.py``): ``sem`` defaults to ``'acq_rel'`` and
``scope`` to ``'gpu'``; any other spelling than Triton's four semantics and
three scopes is an error naming the argument (never silently relaxed).
``val`` (and ``cmp``) broadcast to the pointer's shape and convert to the
pointee type; masked-off lanes touch nothing.  Each returns the old values.
Which element types each atomic takes is ``ir.ops.memory.atomic_element_problem``.
"""
from __future__ import annotations

from ..ir.ops.memory import ATOMIC_SCOPES, ATOMIC_SEMS, atomic_element_problem
from . import semantic as S
from .builtins import RULES, _broadcasts_to, _mask, _pointer, _value_of, constexpr, rule
from .semantic import SemanticError
from .values import Tensor


def _choice(value, what: str, allowed: tuple[str, ...], default: str) -> str:
    value = constexpr(value, what)
    if value is None:
        return default
    if not isinstance(value, str) or value not in allowed:
        spelled = ", ".join(repr(a) for a in allowed)
        raise SemanticError(f"'{what}' must be one of {spelled} (or None for {default!r}), "
                            f"got {S.describe(value) if not isinstance(value, str) else repr(value)}",
                            param=what)
    return value


def sem_and_scope(sem, scope) -> dict[str, str]:
    return {"sem": _choice(sem, "sem", ATOMIC_SEMS, "acq_rel"),
            "scope": _choice(scope, "scope", ATOMIC_SCOPES, "gpu")}


def _target(b, pointer, kind: str) -> Tensor:
    pointer = _pointer(b, pointer)
    if pointer.dtype.const:
        raise SemanticError(f"cannot apply an atomic through a constant pointer ({pointer.dtype}: a parameter "
                            f"annotated tl.const, or computed from one)", param="pointer")
    if problem := atomic_element_problem(kind, pointer.dtype.pointee):
        raise SemanticError(problem, param="pointer")
    return pointer


def _operand(b, value, pointer: Tensor, what: str) -> Tensor:
    """``value`` converted to the pointee type and broadcast to the pointer's shape."""
    value_t = _value_of(b, value, pointer.dtype.pointee, what)
    if not _broadcasts_to(value_t.shape, pointer.shape):
        where = "a scalar pointer" if not pointer.is_block else f"the pointer shape {list(pointer.shape)}"
        raise SemanticError(f"'{what}' of shape {list(value_t.shape)} does not match {where}", param=what)
    return S.broadcast_to(b, value_t, pointer.shape)


def _rmw(kind: str):
    def impl(ctx, pointer, val, mask=None, sem=None, scope=None):
        b = ctx.b
        pointer = _target(b, pointer, kind)
        value_t = _operand(b, val, pointer, "val")
        mask_t = _mask(b, mask, pointer.shape)
        attrs = {"kind": kind, "has_mask": mask_t is not None, "has_other": False, **sem_and_scope(sem, scope)}
        operands = [pointer.value, value_t.value] + ([mask_t.value] if mask_t is not None else [])
        return Tensor(b.value("tl.atomic_rmw", operands, value_t.type, **attrs))
    return impl


for _kind in ("add", "max", "min", "and", "or", "xor", "xchg"):
    RULES[f"atomic_{_kind}"] = _rmw(_kind)


@rule("atomic_cas")
def _atomic_cas(ctx, pointer, cmp, val, sem=None, scope=None):
    b = ctx.b
    pointer = _target(b, pointer, "cas")
    cmp_t = _operand(b, cmp, pointer, "cmp")
    value_t = _operand(b, val, pointer, "val")
    return Tensor(b.value("tl.atomic_cas", [pointer.value, cmp_t.value, value_t.value], value_t.type,
                          **sem_and_scope(sem, scope)))


@rule("debug_barrier")
def _debug_barrier(ctx):
    ctx.b.create("tl.debug_barrier", [], [], {})
