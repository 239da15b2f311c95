"""Rules for ``tl.print`` (``tl.device_print``) and ``tl.assert`` (``tl.device_assert``)."""
from __future__ import annotations

import numpy as np

from .registry import impl
from .values import format_element, scalar_of


def _prefix(prefix: str, has_values: bool) -> str:
    """Triton's normalization: a non-empty prefix reads `` name: ``."""
    if has_values:
        if not prefix.endswith(" "):
            prefix += " "
        if not prefix.endswith(": "):
            prefix = prefix[:-1] + ": "
    if len(prefix) > 2 and not prefix.startswith(" "):
        prefix = " " + prefix
    return prefix


@impl("tl.print")
def print_(ctx, op, *values):
    """One line per element: ``pid (x, y, z) idx (i, j) prefix: value``."""
    prefix = _prefix(op.attrs.get("prefix", ""), bool(values))
    hex_ = bool(op.attrs.get("hex", False))
    pid = ", ".join(str(p) for p in ctx.pid)
    out = ctx.program.out
    lines = []
    if not values:
        lines.append(f"pid ({pid}) idx (){prefix}")
    for number, (value, operand) in enumerate(zip(values, op.operands)):
        t = scalar_of(operand.type)
        array = np.asarray(value)
        tag = f"(operand {number}) " if len(values) > 1 else ""
        for index in np.ndindex(array.shape):
            text = format_element(array[index], t, hex_)
            lines.append(f"pid ({pid}) idx ({', '.join(str(i) for i in index)}){prefix}{tag}{text}")
    out.write("\n".join(lines) + "\n")


@impl("tl.assert")
def assert_(ctx, op, condition):
    failed = ~np.asarray(condition, dtype=bool)
    if not failed.any():
        return
    message = op.attrs.get("message", "")
    where = ""
    if failed.ndim:
        index = tuple(int(i) for i in np.unravel_index(int(np.argmax(failed)), failed.shape))
        count = int(failed.sum())
        where = f" at index {index}" + (f" (and {count - 1} more)" if count > 1 else "")
    raise ctx.error(op, f"device assertion failed in {ctx.label}{where}: {message}")


@impl("tlx.dump_layout")
def dump_layout(ctx, op, value):
    """Layouts are the CUDA backend's choice (codegen_c/rules_debug.py prints them); the
    interpreter has none to show."""
    return None
