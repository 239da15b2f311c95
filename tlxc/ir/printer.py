"""The IR's text form.

    #L0 = linear<...>
    tl.kernel @add(%x: ptr<f32>, %n: i32) {num_warps = 4} {
      %pid = tl.program_id {axis = 0} : i32 loc("add.py":7:10)
      %acc = scf.for %lb, %ub, %step, %init : f32 loc("add.py":9:4) {
      ^(%i: i32, %a: f32):
        ...
        scf.yield %next loc("add.py":11:8)
      }
      tl.return loc("add.py":12:4)
    }

Every op prints as ``results = name operands {attrs} : result-types loc(...)``
followed by its regions; the parser (``parser.py``) reads exactly this back.
Names come from the user's variables where known, else from a counter, so
the same module always prints the same text.
"""
from __future__ import annotations

import json
import math
import os
import re
from typing import Any

from .core import Module, Operation, Value
from .types import PointerType, TensorType, Type

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


class Printer:
    def __init__(self, module: Module | None = None):
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.counter = 0
        self.layouts: dict[str, str] = {}     # layout text -> alias
        if module is not None:
            self._collect_layouts(module)

    # -- names -------------------------------------------------------------
    def name_of(self, value: Value) -> str:
        key = id(value)
        if key not in self.names:
            self.names[key] = self._fresh(value.name_hint)
        return "%" + self.names[key]

    def _fresh(self, hint: str | None) -> str:
        if hint and _IDENT.match(hint):
            name, n = hint, 0
            while name in self.used:
                n += 1
                name = f"{hint}_{n}"
        else:
            name = str(self.counter)
            self.counter += 1
            while name in self.used:
                name = str(self.counter)
                self.counter += 1
        self.used.add(name)
        return name

    def reset_names(self) -> None:
        self.names.clear()
        self.used.clear()
        self.counter = 0

    # -- types and attributes ----------------------------------------------
    def _collect_layouts(self, module: Module) -> None:
        def visit(t: Type):
            if isinstance(t, TensorType) and t.layout is not None:
                text = str(t.layout)
                if text not in self.layouts:
                    self.layouts[text] = f"L{len(self.layouts)}"
        for op in module.walk():
            for r in op.results:
                visit(r.type)
            for region in op.regions:
                for a in region.args:
                    visit(a.type)

    def type(self, t: Type) -> str:
        if isinstance(t, TensorType):
            dims = "".join(f"{d}x" for d in t.shape)
            text = f"tensor<{dims}{self.type(t.element)}"
            if t.layout is not None:
                layout = str(t.layout)
                text += ", #" + self.layouts[layout] if layout in self.layouts else ", " + layout
            return text + ">"
        if isinstance(t, PointerType):
            return f"ptr<{self.type(t.pointee)}>"
        return str(t)   # scalars, memdesc, mbarrier print themselves

    def attr(self, value: Any) -> str:
        if value is None:
            return "none"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            if math.isnan(value):
                return "nan"
            return repr(value)
        if isinstance(value, str):
            return json.dumps(value)
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(self.attr(v) for v in value) + "]"
        if isinstance(value, Type):
            return "!" + self.type(value)
        raise TypeError(f"cannot print attribute {value!r}")

    @staticmethod
    def loc(op: Operation) -> str:
        if op.loc is None:
            return ""
        file = os.path.basename(op.loc.file)
        return f" loc({json.dumps(file)}:{op.loc.line}:{op.loc.col})"

    # -- ops ---------------------------------------------------------------
    def op(self, op: Operation, indent: str) -> list[str]:
        if op.name == "tl.kernel":
            return self.kernel(op, indent)
        head = indent
        if op.results:
            head += ", ".join(self.name_of(r) for r in op.results) + " = "
        head += op.name
        if op.operands:
            head += " " + ", ".join(self.name_of(v) for v in op.operands)
        if op.attrs:
            head += " {" + ", ".join(f"{k} = {self.attr(v)}" for k, v in sorted(op.attrs.items())) + "}"
        if op.results:
            head += " : " + ", ".join(self.type(r.type) for r in op.results)
        head += self.loc(op)
        lines = [head]
        for region in op.regions:
            lines[-1] += " {"
            lines.extend(self.region_body(region, indent))
            lines.append(indent + "}")
        return lines

    def region_body(self, region, indent: str) -> list[str]:
        lines = []
        if region.args:
            args = ", ".join(f"{self.name_of(a)}: {self.type(a.type)}" for a in region.args)
            lines.append(f"{indent}^({args}):")
        for inner in region.ops:
            lines.extend(self.op(inner, indent + "  "))
        return lines

    def kernel(self, op: Operation, indent: str) -> list[str]:
        self.reset_names()
        args = ", ".join(f"{self.name_of(a)}: {self.type(a.type)}" for a in op.regions[0].args)
        attrs = {k: v for k, v in op.attrs.items() if k != "sym_name"}
        head = f"{indent}tl.kernel @{op.attrs['sym_name']}({args})"
        if attrs:
            head += " {" + ", ".join(f"{k} = {self.attr(v)}" for k, v in sorted(attrs.items())) + "}"
        head += self.loc(op) + " {"
        lines = [head]
        for inner in op.regions[0].ops:
            lines.extend(self.op(inner, indent + "  "))
        lines.append(indent + "}")
        return lines


def print_module(module: Module) -> str:
    printer = Printer(module)
    lines = [f"#{alias} = {text}" for text, alias in printer.layouts.items()]
    for kernel in module.kernels:
        lines.extend(printer.op(kernel, ""))
    return "\n".join(lines) + "\n"


def print_op(op: Operation) -> str:
    return "\n".join(Printer().op(op, ""))
