"""Words for the checker's messages: source text of an op's arguments, IR
expressions rendered as Python, ordinals, task and barrier labels."""
from __future__ import annotations

import ast
import linecache
import os
import re

from ..errors import Location
from ..ir.core import BlockArgument, Operation, Value
from .events import Event, TaskEvents, clean_name

_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "//", "rem": "%", "and": "&", "or": "|", "xor": "^",
            "shl": "<<", "shr": ">>"}
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def where(loc: Location | None) -> str:
    return f"{os.path.basename(loc.file)}:{loc.line}" if loc is not None and loc.line > 0 else "?"


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def times(n: int) -> str:
    return "once" if n == 1 else "twice" if n == 2 else f"{n} times"


def task_label(task: TaskEvents) -> str:
    return f"task '{task.name}'"


def call_arguments(loc: Location | None) -> list[str] | None:
    """Source text of the positional arguments of the call starting at ``loc``."""
    if loc is None or loc.line <= 0:
        return None
    lines = [linecache.getline(loc.file, loc.line + i) for i in range(8)]
    text = "".join(lines)[loc.col:] if lines[0] else ""
    start = text.find("(")
    if start < 0:
        return None
    depth, end = 0, None
    for i in range(start, len(text)):
        if text[i] in "([{":
            depth += 1
        elif text[i] in ")]}":
            depth -= 1
            if depth == 0:
                end = i + 1
                break
    if end is None:
        return None
    snippet = text[:end]
    try:
        call = ast.parse(snippet.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call):
        return None
    source = snippet.strip()
    return [ast.get_source_segment(source, arg) or "?" for arg in call.args]


def argument(event: Event, index: int, fallback: str) -> str:
    args = call_arguments(event.loc)
    return args[index] if args and index < len(args) else fallback


def expression(value: Value, depth: int = 4) -> str:
    """An integer IR expression as Python text (``count % 3``)."""
    return _expr(value, depth, top=True)


def _expr(value: Value, depth: int, top: bool = False) -> str:
    owner = getattr(value, "owner", None)
    if isinstance(value, BlockArgument) or not isinstance(owner, Operation):
        return clean_name(value.name_hint) if value.name_hint else "?"
    if owner.name == "arith.constant":
        v = owner.attrs.get("value")
        return str(int(v)) if isinstance(v, bool) else str(v)
    if owner.name == "arith.cast" and owner.operands:
        return _expr(owner.operands[0], depth, top)
    name = owner.name.split(".", 1)[1] if "." in owner.name else owner.name
    if depth <= 0 and value.name_hint:
        return clean_name(value.name_hint)
    if name in _SYMBOLS and len(owner.operands) == 2:
        text = f"{_expr(owner.operands[0], depth - 1)} {_SYMBOLS[name]} {_expr(owner.operands[1], depth - 1)}"
    elif name == "cmp":
        symbol = _CMP.get(owner.attrs.get("predicate"), "?")
        text = f"{_expr(owner.operands[0], depth - 1)} {symbol} {_expr(owner.operands[1], depth - 1)}"
    elif value.name_hint:
        return clean_name(value.name_hint)
    else:
        return "?"
    return text if top else f"({text})"


def bindings(event: Event, skip: set[str] = frozenset()) -> str:
    """``count = 4, t = 1``: the loop variables the event's index and phase came from."""
    return ", ".join(f"{name} = {value}" for name, value in event.bindings if name not in skip)


def index_value(event: Event) -> Value | None:
    bar = event.op.operands[0] if event.op is not None and event.op.operands else None
    owner = getattr(bar, "owner", None)
    if isinstance(owner, Operation) and owner.name == "tlx.local_view":
        return owner.operands[1]
    return None


def barrier_use(event: Event) -> str:
    """``full[slot] (slot = count % 3 = 1)`` for a barrier operation."""
    source = argument(event, 0, f"{event.array.name}[{event.slot}]")
    index = index_value(event)
    if index is None:
        return source
    subscript = source[source.find("[") + 1:source.rfind("]")] if "[" in source else None
    if subscript is not None and subscript.strip().isdigit():
        return source
    expr = expression(index)
    if subscript == expr or expr in ("?", str(event.slot)):
        return f"{source} (= {event.array.label(event.slot)})"
    return f"{source} ({subscript} = {expr} = {event.slot})" if subscript else f"{source} (= {event.slot})"


def phase_use(event: Event) -> str:
    """``phase ^ 1 = 0`` (``phase 0`` for a literal) for a wait."""
    source = argument(event, 1, str(event.parity))
    if source.strip().lstrip("-").isdigit():
        return f"phase {source}"
    return f"{source} = {event.parity}"


def assignment_location(loc: Location | None, name: str, value: int) -> Location | None:
    """Where ``name = value`` is written last before ``loc`` (the frontend
    materializes a Python constant where it is first used, e.g. at the loop
    that carries it, so the IR cannot say)."""
    if loc is None or loc.line <= 0:
        return None
    pattern = re.compile(rf"^(\s*){re.escape(name)}\s*=\s*{value}\b")
    for line in range(loc.line - 1, max(loc.line - 40, 0), -1):
        text = linecache.getline(loc.file, line)
        if text.lstrip().startswith(("def ", "with ")):
            break
        match = pattern.match(text)
        if match:
            return Location(loc.file, line, len(match.group(1)))
    return None
