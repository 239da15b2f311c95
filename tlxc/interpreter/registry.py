"""The table of interpreter rules: one function per IR op name.

    @impl("arith.add")
    def add(ctx, op, lhs, rhs):
        return lhs + rhs

A rule receives the task context, the op and the runtime values of its
operands, and returns the op's result (one value), a sequence of results, or
None.  A rule that must wait (a barrier, a join, an async completion) is a
generator function: it ``yield``s ``Blocked``/``Preempt`` objects to the
scheduler and ``return``s its results; the executor drives it with
``yield from``.  Control-flow rules are generators too, because the regions
they run may block.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InterpreterError


@dataclass(frozen=True)
class Rule:
    name: str
    fn: Callable
    is_generator: bool


RULES: dict[str, Rule] = {}


def impl(*names: str):
    """Register ``fn`` as the interpreter rule of each op in ``names``."""
    def register(fn):
        for name in names:
            if name in RULES and RULES[name].fn is not fn:
                raise TypeError(f"interpreter rule for {name} registered twice")
            RULES[name] = Rule(name, fn, inspect.isgeneratorfunction(fn))
        return fn
    return register


def rule_for(op) -> Rule:
    rule = RULES.get(op.name)
    if rule is None:
        where = f"{op.loc.file}:{op.loc.line}" if op.loc is not None else "unknown location"
        raise InterpreterError(f"no interpreter rule for {op.name} ({where})", op.loc)
    return rule
