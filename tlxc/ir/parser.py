"""Parse the text form written by ``printer.py`` back into a ``Module``.

A hand-written recursive-descent parser over the raw text (the type syntax
``tensor<128x64xf32>`` is context dependent, so there is no separate lexer).
Errors name the line and column of the text being parsed.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ..errors import Location, VerificationError
from . import ops as _ops  # noqa: F401  (registers every op)
from .core import OP_REGISTRY, Block, Module, Operation, Region, Value
from .types import SCALAR_TYPES, BarrierType, MemDescType, PointerType, TensorDescType, TensorType, Type

# Extra types register a parser here: keyword -> fn(parser) -> Type, called
# with the position just after the keyword.
TYPE_PARSERS: dict[str, Callable[[Parser], Type]] = {}

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_VALUE = re.compile(r"%[A-Za-z0-9_]+")
_NUMBER = re.compile(r"-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+|inf)")
_DIM = re.compile(r"(\d+)x")
_ATTRS_START = re.compile(r"\{[ \t]*(?:\}|[A-Za-z_][A-Za-z0-9_]*[ \t]*=[^=])")


class IRParseError(VerificationError):
    pass


class Parser:
    def __init__(self, text: str, filename: str = "<ir>"):
        self.text = text
        self.pos = 0
        self.filename = filename
        self.scopes: list[dict[str, Value]] = []
        self.layouts: dict[str, Any] = {}

    # -- low level ---------------------------------------------------------
    def error(self, message: str, pos: int | None = None) -> IRParseError:
        """An error at ``pos`` (default: the current position) of the text."""
        pos = self.pos if pos is None else pos
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1)
        lines = self.text.split("\n")
        src = lines[line - 1] if line <= len(lines) else ""
        return IRParseError(message, Location(self.filename, line, col), source_line=src)

    def skip_ws(self) -> None:
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c in " \t\r\n":
                self.pos += 1
            elif self.text.startswith("//", self.pos):
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            else:
                break

    def peek(self, s: str) -> bool:
        self.skip_ws()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str) -> None:
        if not self.accept(s):
            found = self.text[self.pos:self.pos + 12].split("\n")[0]
            raise self.error(f"expected '{s}', found '{found}'")

    def match(self, pattern: re.Pattern, what: str) -> str:
        self.skip_ws()
        m = pattern.match(self.text, self.pos)
        if not m:
            found = self.text[self.pos:self.pos + 12].split("\n")[0]
            raise self.error(f"expected {what}, found '{found}'")
        self.pos = m.end()
        return m.group(0)

    # -- types -------------------------------------------------------------
    def parse_type(self) -> Type:
        word = self.match(_WORD, "a type")
        if word in SCALAR_TYPES:
            return SCALAR_TYPES[word]
        if word == "ptr":
            self.expect("<")
            pointee = self.parse_type()
            self.expect(">")
            return PointerType(pointee)
        if word == "tensor":
            self.expect("<")
            shape = self.parse_dims()
            element = self.parse_type()
            layout = None
            if self.accept(","):
                layout = self.parse_layout_ref()
            self.expect(">")
            return TensorType(tuple(shape), element, layout)
        if word == "memdesc":
            return self.parse_memdesc()
        if word == "mbarrier":
            return self.parse_mbarrier()
        if word == "tensordesc":
            return self.parse_tensordesc()
        if word in TYPE_PARSERS:
            return TYPE_PARSERS[word](self)
        raise self.error(f"unknown type '{word}'")

    def parse_dims(self) -> list[int]:
        """The ``128x64x`` prefix of a shaped type."""
        dims = []
        while True:
            m = _DIM.match(self.text, self.pos)
            if not m:
                return dims
            dims.append(int(m.group(1)))
            self.pos = m.end()

    def parse_memdesc(self) -> Type:
        self.expect("<")
        dims = self.parse_dims()
        element = self.parse_type()
        self.expect(",")
        storage = self.match(_WORD, "a storage kind")
        num, perm, layout = 0, None, None
        while self.accept(","):
            key = self.match(_WORD, "num=, perm= or layout=")
            self.expect("=")
            if key == "num":
                num = int(self.match(_NUMBER, "a buffer count"))
            elif key == "perm":
                perm = tuple(self.parse_attr_value())
            elif key == "layout":
                layout = self.parse_shared_layout()
            else:
                raise self.error(f"unknown memdesc field '{key}'")
        self.expect(">")
        return MemDescType(tuple(dims), element, num, storage, perm, layout)

    def parse_shared_layout(self) -> Any:
        """An explicit shared layout as ``shared_layout.py`` prints it: ``#nvmma<...>`` or
        ``#tiled<128x128, #nvmma<...>>``; checked as the frontend checks the user's."""
        from .shared_layout import SharedLayoutError
        start = self.pos
        self.expect("#")
        kind = self.match(_WORD, "a shared layout (nvmma or tiled)")
        self.expect("<")
        try:
            if kind == "nvmma":
                return self.parse_nvmma_fields(start)
            if kind == "tiled":
                shape = self.parse_dims()
                shape.append(int(self.match(_NUMBER, "a dimension")))
                self.expect(",")
                atom = self.parse_shared_layout()
                self.expect(">")
                if not hasattr(atom, "tile_to_shape"):
                    raise self.error(f"#tiled needs an #nvmma atom, got {atom}", start)
                return atom.tile_to_shape(shape)
        except SharedLayoutError as exc:
            raise self.error(f"bad shared layout: {exc}", start) from None
        raise self.error(f"unknown shared layout '#{kind}' (expected #nvmma or #tiled)", start)

    def parse_nvmma_fields(self, start: int) -> Any:
        """The rest of ``#nvmma<64x64xbf16, swizzle=128[, order=[..]][, ctas_per_cga=[..], ...]
        [, fp4_padded][, unswizzled]>``; fields left out have TLX's usual values."""
        from .shared_layout import nv_mma_shared_layout
        dims = self.parse_dims()
        element = self.parse_type()
        self.expect(",")
        self.expect("swizzle")
        self.expect("=")
        swizzle = int(self.match(_NUMBER, "a swizzle width"))
        rank = len(dims)
        row_major, ones = tuple(range(rank - 1, -1, -1)), (1,) * rank
        fields: dict[str, Any] = {"order": row_major, "ctas_per_cga": ones, "cta_split_num": ones,
                                  "cta_order": row_major, "fp4_padded": False, "swizzled": True}
        while self.accept(","):
            key = self.match(_WORD, "a layout field")
            if key == "fp4_padded":
                fields[key] = True
            elif key == "unswizzled":
                fields["swizzled"] = False
            elif key in ("order", "ctas_per_cga", "cta_split_num", "cta_order"):
                self.expect("=")
                fields[key] = tuple(self.parse_attr_value())
            else:
                raise self.error(f"unknown #nvmma field '{key}'")
        self.expect(">")
        layout = nv_mma_shared_layout(tuple(dims), fields["order"], element, fields["ctas_per_cga"],
                                      fields["cta_split_num"], fields["cta_order"], fields["fp4_padded"],
                                      fields["swizzled"])
        if layout.swizzle != swizzle:
            raise self.error(f"#nvmma swizzle={swizzle} is not its atom's swizzle: {list(dims)} x {element} rows "
                             f"swizzle by {layout.swizzle} bytes", start)
        return layout

    def parse_tensordesc(self) -> Type:
        self.expect("<")
        dims = self.parse_dims()
        element = self.parse_type()
        self.expect(",")
        self.expect("swizzle")
        self.expect("=")
        swizzle = int(self.match(_NUMBER, "a swizzle width"))
        self.expect(">")
        return TensorDescType(element, tuple(dims), swizzle)

    def parse_mbarrier(self) -> Type:
        num, per_thread, remote = 0, False, False
        if self.accept("<"):
            while not self.accept(">"):
                if self.accept("per_thread"):
                    per_thread = True
                elif self.accept("remote"):
                    remote = True
                else:
                    num = int(self.match(_NUMBER, "a barrier count"))
                self.accept(",")
        return BarrierType(num, per_thread, remote)

    def parse_layout_ref(self) -> Any:
        self.skip_ws()
        if self.accept("#"):
            alias = self.match(_WORD, "a layout alias")
            if alias not in self.layouts:
                raise self.error(f"undefined layout #{alias}")
            return self.layouts[alias]
        return self.parse_layout_text(self.balanced_until((">",)))

    def balanced_until(self, stops: tuple[str, ...]) -> str:
        """Raw text up to the first stop character at bracket depth zero."""
        self.skip_ws()
        start, depth = self.pos, 0
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if depth == 0 and (c in stops or c == "\n"):
                break
            if c in "<[(":
                depth += 1
            elif c in ">])":
                depth -= 1
            self.pos += 1
        return self.text[start:self.pos].strip()

    def parse_layout_text(self, text: str) -> Any:
        from .layouts import parse_layout
        try:
            return parse_layout(text)
        except ValueError as exc:
            raise self.error(f"bad layout '{text}': {exc}") from None

    # -- attributes --------------------------------------------------------
    def parse_attr_value(self) -> Any:
        self.skip_ws()
        if self.accept("["):
            items = []
            if not self.accept("]"):
                items.append(self.parse_attr_value())
                while self.accept(","):
                    items.append(self.parse_attr_value())
                self.expect("]")
            return tuple(items)
        if self.accept("!"):
            return self.parse_type()
        if self.peek('"'):
            return self.parse_string()
        for word, value in (("true", True), ("false", False), ("none", None), ("nan", float("nan"))):
            if self.text.startswith(word, self.pos) and not self.text[self.pos + len(word)].isalnum():
                self.pos += len(word)
                return value
        token = self.match(_NUMBER, "an attribute value")
        if token.lstrip("-") == "inf":
            return float(token)
        return float(token) if any(c in token for c in ".eE") else int(token)

    def parse_string(self) -> str:
        self.expect('"')
        start = self.pos
        while self.text[self.pos] != '"':
            self.pos += 2 if self.text[self.pos] == "\\" else 1
        self.pos += 1
        return json.loads(self.text[start - 1:self.pos])

    def at_attrs(self) -> bool:
        """Whether a ``{`` here opens an attribute dictionary rather than a region:
        ``{name = ...`` or an empty ``{}`` on one line."""
        if not self.peek("{"):
            return False
        return bool(_ATTRS_START.match(self.text, self.pos))

    def parse_attrs(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        if not self.at_attrs():
            return attrs
        self.expect("{")
        if self.accept("}"):
            return attrs
        while True:
            key = self.match(_WORD, "an attribute name")
            self.expect("=")
            attrs[key] = self.parse_attr_value()
            if self.accept("}"):
                return attrs
            self.expect(",")

    def parse_loc(self) -> Location | None:
        if not self.accept("loc("):
            return None
        file = self.parse_string()
        self.expect(":")
        line = int(self.match(_NUMBER, "a line"))
        self.expect(":")
        col = int(self.match(_NUMBER, "a column"))
        self.expect(")")
        return Location(file, line, col)

    # -- values ------------------------------------------------------------
    def define(self, name: str, value: Value, pos: int | None = None) -> None:
        if name in self.scopes[-1]:
            raise self.error(f"value {name} defined twice", pos)
        value.name_hint = None if name[1:].isdigit() else name[1:]
        self.scopes[-1][name] = value

    def lookup(self, name: str) -> Value:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise self.error(f"use of undefined value {name}")

    # -- ops and regions ---------------------------------------------------
    def parse_op(self) -> Operation:
        self.skip_ws()
        start = self.pos
        results: list[str] = []
        if self.peek("%"):
            results.append(self.match(_VALUE, "a result name"))
            while self.accept(","):
                results.append(self.match(_VALUE, "a result name"))
            self.expect("=")
        name = self.match(_WORD, "an op name")
        cls = OP_REGISTRY.get(name)
        if cls is None:
            raise self.error(f"unknown op '{name}'")
        operands = []
        if self.peek("%"):
            operands.append(self.lookup(self.match(_VALUE, "an operand")))
            while self.accept(","):
                operands.append(self.lookup(self.match(_VALUE, "an operand")))
        attrs = self.parse_attrs()
        types: list[Type] = []
        if self.accept(":"):
            types.append(self.parse_type())
            while self.accept(","):
                types.append(self.parse_type())
        if len(types) != len(results):
            raise self.error(f"{name}: {len(results)} results but {len(types)} result types", start)
        loc = self.parse_loc()
        regions = []
        while self.peek("{"):
            regions.append(self.parse_region())
        op = cls(operands, types, attrs, regions, loc)
        for value_name, result in zip(results, op.results):
            self.define(value_name, result, start)
        return op

    def parse_region(self, arg_names_types=None) -> Region:
        self.expect("{")
        block = Block()
        self.scopes.append({})
        if arg_names_types is None and self.accept("^("):
            arg_names_types = []
            if not self.accept(")"):
                while True:
                    arg = self.match(_VALUE, "a block argument")
                    self.expect(":")
                    arg_names_types.append((arg, self.parse_type()))
                    if self.accept(")"):
                        break
                    self.expect(",")
            self.expect(":")
        for arg_name, arg_type in arg_names_types or []:
            self.define(arg_name, block.add_arg(arg_type))
        while not self.accept("}"):
            if self.pos >= len(self.text):
                raise self.error("unexpected end of input inside a region")
            block.append(self.parse_op())
        self.scopes.pop()
        return Region(block)

    def parse_kernel(self) -> Operation:
        self.expect("tl.kernel")
        self.expect("@")
        sym = self.match(_WORD, "a kernel name")
        self.expect("(")
        args = []
        if not self.accept(")"):
            while True:
                arg = self.match(_VALUE, "a parameter")
                self.expect(":")
                args.append((arg, self.parse_type()))
                if self.accept(")"):
                    break
                self.expect(",")
        attrs = self.parse_attrs()
        loc = self.parse_loc()
        self.scopes.append({})
        body = self.parse_region(args)
        self.scopes.pop()
        return OP_REGISTRY["tl.kernel"]([], [], {"sym_name": sym, **attrs}, [body], loc)

    def parse_module(self) -> Module:
        module = Module()
        while True:
            self.skip_ws()
            if self.pos >= len(self.text):
                return module
            if self.accept("#"):
                alias = self.match(_WORD, "a layout alias")
                self.expect("=")
                self.layouts[alias] = self.parse_layout_text(self.balanced_until(()))
            else:
                module.kernels.append(self.parse_kernel())


def parse_module(text: str, filename: str = "<ir>") -> Module:
    return Parser(text, filename).parse_module()
