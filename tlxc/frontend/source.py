"""A kernel function's source: its AST, file, line/column offsets, names."""
from __future__ import annotations

import ast
import builtins
import hashlib
import inspect
import textwrap
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from ..errors import CompilationError, Location


@dataclass
class FunctionSource:
    fn: Any
    file: str
    first_line: int          # file line of the source's first line
    indent: int              # columns removed by dedenting
    text: str                # the dedented source
    tree: ast.FunctionDef
    lines: list[str] = field(default_factory=list)   # original file lines of the function

    @property
    def name(self) -> str:
        return self.tree.name

    def loc(self, node: ast.AST) -> Location:
        line = getattr(node, "lineno", 1) + self.first_line - 1
        col = getattr(node, "col_offset", 0) + self.indent
        end_line = getattr(node, "end_lineno", None)
        end_col = getattr(node, "end_col_offset", None)
        end = end_col + self.indent if end_col is not None and end_line == node.lineno else None
        return Location(self.file, line, col, end)

    def source_line(self, loc: Location) -> str | None:
        index = loc.line - self.first_line
        if 0 <= index < len(self.lines):
            return self.lines[index].rstrip("\n")
        return loc.source_line()

    def error(self, message: str, node: ast.AST, notes: list[tuple[str, Location | None]] | None = None,
              cls: type[CompilationError] = CompilationError) -> CompilationError:
        loc = self.loc(node)
        return cls(message, loc, notes=notes, source_line=self.source_line(loc))

    def lookup_global(self, name: str) -> tuple[bool, Any]:
        """Resolve a free name: closure cell, module global, then Python builtin."""
        code = self.fn.__code__
        if self.fn.__closure__:
            for var, cell in zip(code.co_freevars, self.fn.__closure__):
                if var == name:
                    try:
                        return True, cell.cell_contents
                    except ValueError:
                        return False, None
        if name in self.fn.__globals__:
            return True, self.fn.__globals__[name]
        if hasattr(builtins, name):
            return True, getattr(builtins, name)
        return False, None

    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


# CPython 3.11's ast.parse keeps its recursion depth in interpreter-wide state: kernels compiled
# from several threads at once (TLX's test_async_tasks_thread_safety) could fail with
# "SystemError: AST constructor recursion depth mismatch".  Parsing is cheap; one at a time.
_PARSE_LOCK = threading.Lock()


def get_source(fn) -> FunctionSource:
    try:
        lines, first_line = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or fn.__code__.co_filename
    except (OSError, TypeError) as exc:
        raise CompilationError(f"cannot read the source of {fn.__name__}: {exc} "
                               f"(tlxc compiles a kernel from its Python source file)") from None
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    first = lines[0]
    indent = len(first) - len(first.lstrip())
    if dedented.lstrip().startswith("@") or dedented.startswith("def"):
        pass
    with _PARSE_LOCK:
        tree = ast.parse(dedented)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise CompilationError(f"{fn.__name__} is not a plain function definition")
    return FunctionSource(fn, file, first_line, indent, dedented, fdef, lines)


def first_node(stmts, node_types) -> ast.AST | None:
    """The first node of one of ``node_types`` inside the statements ``stmts`` (walk order)."""
    for stmt in stmts:
        found = _first_in(stmt, node_types)
        if found is not None:
            return found
    return None


# per statement and node types: the syntax tree lives as long as its source (KernelFunction.source), and
# every loop of a kernel asks again at each build and each unrolled iteration around it
_FIRST: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_NONE = object()


def _first_in(stmt: ast.AST, node_types) -> ast.AST | None:
    known = _FIRST.setdefault(stmt, {})
    found = known.get(node_types)
    if found is None:
        found = known[node_types] = next((n for n in ast.walk(stmt) if isinstance(n, node_types)), _NONE)
    return None if found is _NONE else found
