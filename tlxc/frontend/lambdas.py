"""Lambdas in a kernel (``combine_fn=lambda a, b: a + b``, ``f = lambda x: x * SCALE``), as Triton
takes them: a ``KernelLambda`` is a kernel helper whose body is the lambda's expression, inlined
where it is called (``Calls.inline``) or built into a reduce / scan region (``scan_rules``).

It captures the enclosing function's compile-time values it names when it is made; naming a
runtime value of the enclosing function is an error there ("lambda can only capture constexpr
values", Triton's words): the lambda runs in another region (a reduction's combine), where that
value does not exist."""
from __future__ import annotations

import ast
import dataclasses
import inspect
from typing import Any

from .source import FunctionSource
from .values import Tensor, unwrap


class KernelLambda:
    __tlxc_kernel__ = True          # inlined like a @tlxc.jit helper (calls.is_kernel_function)

    def __init__(self, source: FunctionSource, fn, captured: dict[str, Any]):
        self.source, self.fn, self.captured = source, fn, captured
        self.__name__ = "<lambda>"

    def __repr__(self) -> str:
        return "<kernel lambda>"


def _free_names(node: ast.Lambda) -> list[str]:
    params = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
    for extra in (node.args.vararg, node.args.kwarg):
        if extra is not None:
            params.add(extra.arg)
    seen: list[str] = []
    for sub in ast.walk(node.body):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id not in params and \
                sub.id not in seen:
            seen.append(sub.id)
    return seen


def make_lambda(builder, node: ast.Lambda) -> KernelLambda:
    """The ``KernelLambda`` of ``node`` in ``builder``'s function (its compile-time captures)."""
    if node.args.vararg or node.args.kwarg or node.args.kwonlyargs or node.args.defaults or \
            node.args.kw_defaults:
        raise builder.error("a kernel lambda takes plain positional parameters (no defaults, *args or **kwargs)",
                            node)
    captured: dict[str, Any] = {}
    for name in _free_names(node):
        if name not in builder.vars:
            continue                            # a global (tl, a helper, a constant): resolved when it runs
        value = unwrap(builder.vars[name])
        if isinstance(value, Tensor) or not _compile_time(value):
            raise builder.error(f"lambda can only capture constexpr values; '{name}' is a runtime value of the "
                                f"enclosing function (pass it as an argument, or use a @tlxc.jit helper)", node)
        captured[name] = value
    names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
    tree = ast.FunctionDef(name="<lambda>", args=node.args, body=[ast.Return(value=node.body)], decorator_list=[],
                           returns=None, type_comment=None, type_params=[])
    ast.copy_location(tree, node)
    ast.copy_location(tree.body[0], node.body)
    ast.fix_missing_locations(tree)

    def signature_only(*args):          # (inspect.signature reads __signature__)
        raise TypeError("a kernel lambda runs inside a kernel only")
    signature_only.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    return KernelLambda(dataclasses.replace(builder.src, tree=tree), signature_only, captured)


def _compile_time(value) -> bool:
    """Values a lambda may capture: anything but a runtime value or an aggregate holding one."""
    if isinstance(value, (tuple, list)):
        return all(_compile_time(unwrap(v)) for v in value)
    return not getattr(type(value), "__tlxc_runtime_value__", False) and \
        not getattr(type(value), "__tlxc_descriptor__", False)
