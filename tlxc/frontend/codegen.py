"""Python AST → tlxc IR.

One ``FunctionCodegen`` per traced function (the kernel, and each inlined
helper).  Compile-time values (numbers, dtypes, tuples, ``tl.constexpr``
parameters) are folded while tracing; runtime values become IR.  Python
control flow on runtime values becomes ``scf.for`` / ``scf.while`` /
``scf.if`` with explicit loop-carried and yielded values.
"""
from __future__ import annotations

import ast
import difflib
import inspect
import os
import types as pytypes
from dataclasses import dataclass, field
from typing import Any

from .. import language as tl
from ..errors import CompilationError, InternalCompilerError, Location, TlxcError
from ..ir import types as T
from ..ir.builder import Builder
from ..ir.core import Block, Module, Region
from ..ir.types import PointerType, ScalarType, TensorType
from ..options import CompileOptions
from . import atomic_rules, descriptor_methods, gdc_rules, math_rules, scan_rules, storage_alias, tlx_rules  # noqa: F401,E501  (they register rules)
from . import builtins as B
from . import semantic as S
from .block_ptr import Aggregate  # (block_ptr also registers the block-pointer rules)
from .control_flow import ControlFlow
from .naming import kernel_symbol
from .semantic import SemanticError
from .source import FunctionSource, get_source
from .tasks import TaskStatements
from .values import RETURN, Tensor, Undefined, unwrap

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
           ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.BitAnd: "and", ast.BitOr: "or",
           ast.BitXor: "xor", ast.LShift: "shl", ast.RShift: "shr", ast.Pow: "pow"}
_CMPOPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
_PY_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
           "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}

# Python builtins a kernel may call on compile-time values.
_PY_BUILTINS_OK = {len, min, max, int, float, bool, abs, isinstance, tuple, list, zip, enumerate,
                   getattr, hasattr, str, round, divmod, all, any, sorted, reversed}

_TENSOR_METHODS = {"to": "cast", "reshape": "reshape", "view": "view", "trans": "trans",
                   "permute": "permute", "expand_dims": "expand_dims", "broadcast_to": "broadcast_to",
                   "sum": "sum", "max": "max", "min": "min", "argmax": "argmax", "argmin": "argmin",
                   "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt",
                   "abs": "abs", "sigmoid": "sigmoid", "xor_sum": "xor_sum", "cast": "cast"}

MAX_INLINE_DEPTH = 32
MAX_CALL_NOTES = 4     # "in helper(), called from ..." notes kept on an error

# Python syntax a kernel cannot contain, by AST node: what to call it in a message.
_UNSUPPORTED_SYNTAX = {
    "ClassDef": "class definitions are not supported in a kernel",
    "AsyncFunctionDef": "async functions are not supported in a kernel",
    "AsyncFor": "'async for' is not supported in a kernel",
    "AsyncWith": "'async with' is not supported in a kernel",
    "Await": "'await' is not supported in a kernel",
    "Yield": "'yield' is not supported: a kernel is not a generator",
    "YieldFrom": "'yield from' is not supported: a kernel is not a generator",
    "NamedExpr": "assignment expressions (:=) are not supported in a kernel; assign on a separate line",
    "Set": "sets are not supported in a kernel",
    "Match": "'match' statements are not supported in a kernel; use if/elif",
    "TryStar": "'try' is not supported in a kernel",
}


@dataclass
class Context:
    b: Builder
    options: CompileOptions
    depth: int = 0
    helpers: list = field(default_factory=list)
    replica_id: int | None = None          # inside a replicated async task
    captured: frozenset = frozenset()      # ids of register tensors defined outside the current task
    entry: Block | None = None             # the kernel's top-level block (its uniform prologue)
    task: tuple | None = None              # (the task's with-node, replica) being traced; None outside
    staging: dict = field(default_factory=dict)   # descriptor_methods' buffers, per (task, box)
    staging_allocs: int = 0                # how many of them lead the entry block
    alias_peers: dict = field(default_factory=dict)   # id(alloc value) -> storage_alias.Peer
    cta_group: dict = field(default_factory=dict)     # tcgen05's .cta_group for the kernel: {"group", "loc"}


def is_kernel_function(obj) -> bool:
    return getattr(obj, "__tlxc_kernel__", False)


def _ends_with_return(stmts: list[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Return)



class FunctionCodegen(TaskStatements, ControlFlow, ast.NodeVisitor):
    def __init__(self, ctx: Context, src: FunctionSource, vars: dict[str, Any]):
        self.ctx = ctx
        self.src = src
        self.vars = vars
        self.returned = False
        self.partial_return = False   # some, not all, paths of the last statement returned
        self.def_locs: dict[str, Location] = {}   # name -> its latest assignment, for notes

    @property
    def b(self) -> Builder:
        return self.ctx.b

    # -- errors and locations ----------------------------------------------------------
    def error(self, message: str, node: ast.AST | Location,
              notes: list[tuple[str, Location | None]] | None = None) -> CompilationError:
        """A ``CompilationError`` at ``node`` (an AST node or a ``Location``)."""
        if isinstance(node, Location):
            return CompilationError(message, node, notes=notes, source_line=self.src.source_line(node))
        return self.src.error(message, node, notes=notes)

    def visit(self, node: ast.AST):
        with self.b.location(self.src.loc(node)):
            try:
                return super().visit(node)
            except SemanticError as exc:
                raise self.error(str(exc), node) from _cause(exc)
            except TlxcError as exc:
                if exc.loc is None:     # raised without a location: it happened here
                    exc.loc = self.src.loc(node)
                    exc.source_line = self.src.source_line(exc.loc)
                raise
            except RecursionError:
                raise self.error("expression nested too deeply", node) from None
            except Exception as exc:  # a tlxc bug: keep the user's location
                if os.environ.get("TLXC_DEBUG") == "1":
                    raise
                loc = self.src.loc(node)
                raise InternalCompilerError(
                    f"internal compiler error ({type(exc).__name__}: {exc}); this is a tlxc bug, "
                    f"rerun with TLXC_DEBUG=1 for the traceback", loc,
                    source_line=self.src.source_line(loc)) from None

    def generic_visit(self, node):
        kind = type(node).__name__
        message = _UNSUPPORTED_SYNTAX.get(kind, f"unsupported Python syntax in a kernel: {kind}")
        raise self.error(message, node)

    # -- statements --------------------------------------------------------------------
    def visit_stmts(self, stmts: list[ast.stmt]) -> None:
        for i, stmt in enumerate(stmts):
            if self.returned:
                break
            if self.partial_return:
                raise self.error("code after an 'if' that returns on some of its paths is not "
                                 "supported; move it into an 'else' branch", stmt)
            rest = stmts[i + 1:]
            if isinstance(stmt, ast.If) and rest and \
                    _ends_with_return(stmt.body) != _ends_with_return(stmt.orelse):
                # `if c: ...; return` followed by more code: the rest joins the branch
                # that does not return, so every path ends at a return or the end.
                if _ends_with_return(stmt.body):
                    merged = ast.If(test=stmt.test, body=stmt.body, orelse=stmt.orelse + rest)
                else:
                    merged = ast.If(test=stmt.test, body=stmt.body + rest, orelse=stmt.orelse)
                ast.copy_location(merged, stmt)
                self.visit(merged)
                return
            self.visit(stmt)

    def visit_Pass(self, node):
        pass

    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.visit(node.value)

    def visit_Assign(self, node):
        value = self.visit(node.value)
        for target in node.targets:
            self.assign(target, value, node)

    def visit_AnnAssign(self, node):
        if node.value is None:
            return
        value = self.visit(node.value)
        annotation = self.eval_annotation(node.annotation)
        if annotation is tl.constexpr and isinstance(value, Tensor):
            raise self.error(f"'{ast.unparse(node.target)}' is annotated tl.constexpr but its value "
                             f"is a runtime value", node.value)
        self.assign(node.target, value, node)

    def eval_annotation(self, node):
        try:
            return unwrap(self.visit(node))
        except CompilationError:
            return None

    def visit_AugAssign(self, node):
        target = node.target
        if not isinstance(target, ast.Name):
            self.assign(target, None, node)    # raises the message of that kind of target
        current = self.load_name(target.id, target)
        op = _BINOPS.get(type(node.op))
        if op is None:
            if isinstance(node.op, ast.MatMult):
                raise self.error("'@=' is not supported in a kernel; use tl.dot(a, b)", node)
            raise self.error(f"unsupported operator {type(node.op).__name__}", node)
        value = self.binop(op, current, self.visit(node.value), node)
        self.assign(target, value, node)

    def assign(self, target: ast.AST, value, stmt: ast.AST | None = None) -> None:
        if isinstance(target, ast.Name):
            if target.id in ("tl", "tlx", "tlxc"):
                raise self.error(f"cannot assign to '{target.id}': it names the language module", target)
            if isinstance(value, Tensor) and value.value.name_hint is None:
                value.value.name_hint = target.id   # readable IR: %offs, %mask, ...
            self.vars[target.id] = value
            self.def_locs[target.id] = self.src.loc(stmt if stmt is not None else target)
        elif isinstance(target, (ast.Tuple, ast.List)):
            starred = next((e for e in target.elts if isinstance(e, ast.Starred)), None)
            if starred is not None:
                raise self.error("starred assignment (a, *rest = ...) is not supported in a kernel; "
                                 "unpack into a fixed number of names", starred)
            if not isinstance(value, tuple):
                raise self.error(f"cannot unpack {S.describe(value)} into {len(target.elts)} names", target)
            if len(value) != len(target.elts):
                raise self.error(f"cannot unpack {len(value)} values into {len(target.elts)} names", target)
            for t, v in zip(target.elts, value):
                self.assign(t, v, stmt)
        elif isinstance(target, ast.Subscript):
            raise self.error("tensors are immutable: item assignment is not supported "
                             "(use tl.where or tl.store)", target)
        elif isinstance(target, ast.Attribute):
            raise self.error("attribute assignment is not supported in a kernel", target)
        else:
            raise self.error(f"unsupported assignment target {type(target).__name__}", target)

    def visit_Return(self, node):
        value = self.visit(node.value) if node.value is not None else None
        self.vars[RETURN] = value
        self.returned = True

    def visit_Assert(self, node):
        cond = self.visit(node.test)
        msg = unwrap(self.visit(node.msg)) if node.msg is not None else ast.unparse(node.test)
        if isinstance(cond, Tensor):
            B.RULES["device_assert"](self.ctx, cond, str(msg))
        elif not cond:
            raise self.error(f"assertion failed: {msg}", node.test)

    def visit_Break(self, node):
        raise self.error("'break' is not supported in a kernel loop (use a while loop with a flag)", node)

    def visit_Continue(self, node):
        raise self.error("'continue' is not supported in a kernel loop (use an if around the body)", node)

    def visit_FunctionDef(self, node):
        raise self.error("nested function definitions are not supported in a kernel; "
                         "define a separate @tlxc.kernel helper", node)

    def visit_Raise(self, node):
        raise self.error("'raise' is not supported in a kernel (use tl.static_assert or tl.device_assert)", node)

    def visit_Try(self, node):
        raise self.error("'try' is not supported in a kernel", node)

    def visit_Import(self, node):
        raise self.error("imports are not supported inside a kernel; import at module level", node)

    visit_ImportFrom = visit_Import

    def visit_Global(self, node):
        raise self.error("'global' is not supported in a kernel", node)

    visit_Nonlocal = visit_Global

    def visit_Delete(self, node):
        raise self.error("'del' is not supported in a kernel", node)

    # -- if ----------------------------------------------------------------------------
    def visit_Constant(self, node):
        return node.value

    def visit_JoinedStr(self, node):
        parts = []
        for value in node.values:
            v = self.visit(value)
            if isinstance(v, Tensor):
                raise self.error("f-strings may only contain compile-time values", value)
            parts.append(str(unwrap(v)))
        return "".join(parts)

    def visit_FormattedValue(self, node):
        v = unwrap(self.visit(node.value))
        if isinstance(v, Tensor):
            return v
        spec = self.visit(node.format_spec) if node.format_spec else ""
        return format(v, spec)

    def visit_Name(self, node):
        return self.load_name(node.id, node)

    def load_name(self, name: str, node):
        if name in self.vars:
            value = self.vars[name]
            if isinstance(value, Undefined):
                raise self.error(f"'{name}' may be undefined here: {value.reason}", node)
            if isinstance(value, Tensor) and id(value.value) in self.ctx.captured:
                raise self.error(f"register tensor '{name}' is defined outside this async task and cannot be "
                                 f"captured by it; compute it inside the task (scalars, pointers, buffers and "
                                 f"barriers can be captured)", node)
            return value
        found, value = self.src.lookup_global(name)
        if not found:
            known = [n for n in self.vars if n != RETURN] + list(self.src.fn.__globals__)
            raise self.error(f"undefined name '{name}'{_did_you_mean(name, known)}", node)
        return self.check_global(name, value, node)

    def check_global(self, name, value, node):
        value = unwrap(value) if isinstance(value, tl.constexpr) else value
        if isinstance(value, (bool, int, float, str, type(None), ScalarType, PointerType, tuple,
                              pytypes.ModuleType)) or callable(value):
            return value
        raise self.error(f"global '{name}' of type {type(value).__name__} cannot be used in a kernel; "
                         f"only compile-time constants (ints, floats, dtypes, tl.constexpr), modules "
                         f"and functions can", node)

    def visit_Tuple(self, node):
        return tuple(self.visit(e) for e in node.elts)

    visit_List = visit_Tuple

    def visit_Attribute(self, node):
        base = self.visit(node.value)
        base = unwrap(base)
        attr = node.attr
        if isinstance(base, Tensor):
            return self.tensor_attribute(base, attr, node)
        if isinstance(base, Aggregate):     # p.advance(...) on a block pointer, desc.load(...), desc.dtype
            methods, attributes = base.methods(), base.attributes()
            if attr in methods:
                return _BoundMethod(base, methods[attr])
            if attr in attributes:
                return attributes[attr]
            known = [*attributes, *methods]
            raise self.error(f"a {base.kind} has no attribute '{attr}'{_did_you_mean(attr, known)}"
                             f" (it has: {', '.join(known) or 'nothing'})", node)
        try:
            return getattr(base, attr)
        except AttributeError:
            if isinstance(base, pytypes.ModuleType):
                owner = f"module '{ast.unparse(node.value)}'"
                known = [n for n in dir(base) if not n.startswith("_")]
            else:
                owner, known = S.describe(base), [n for n in dir(base) if not n.startswith("_")]
            listing = getattr(base, "__tlxc_namespace__", None)   # tl.math, libdevice: say what exists
            listed = f" (it has: {', '.join(listing)})" if listing else ""
            raise self.error(f"{owner} has no attribute '{attr}'{_did_you_mean(attr, known)}{listed}",
                             node) from None

    def tensor_attribute(self, t: Tensor, attr: str, node):
        if descriptor_methods.is_descriptor(t):
            method = descriptor_methods.METHODS.get(attr)
            return _BoundMethod(t, method) if method else descriptor_methods.attribute(t, attr)
        if isinstance(t.type, T.MemDescType):
            return self.buffer_attribute(t, attr, node)
        if attr == "shape":
            return t.shape
        if attr == "dtype":
            return t.dtype
        if attr == "type":         # Triton's x.type: the scalar type, or the block's (x.type.element_ty)
            return t.dtype if not t.is_block else _BlockType(tuple(t.shape), t.dtype)
        if attr == "T":
            return B.permute(self.b, t, (1, 0)) if len(t.shape) == 2 else \
                B.permute(self.b, t, tuple(reversed(range(len(t.shape)))))
        if attr in _TENSOR_METHODS:
            return _BoundMethod(t, tl.BUILTINS[_TENSOR_METHODS[attr]])
        known = ["shape", "dtype", "type", "T", *_TENSOR_METHODS]
        raise self.error(f"a tensor has no attribute '{attr}'{_did_you_mean(attr, known)}", node)

    def buffer_attribute(self, buf: Tensor, attr: str, node):
        """TLX's ``buffered_tensor`` attributes: ``shape`` is one buffer's shape
        (an array's ``num`` is not part of it), ``dtype`` its element type."""
        if attr == "shape":
            return tuple(buf.type.shape)
        if attr == "dtype":
            return buf.type.element
        memory = "tensor-memory" if buf.type.storage == "tmem" else "shared-memory"
        raise self.error(f"a {memory} buffer has no attribute '{attr}'"
                         f"{_did_you_mean(attr, ['shape', 'dtype'])} (it has shape and dtype)", node)

    def visit_UnaryOp(self, node):
        operand = unwrap(self.visit(node.operand))
        op = type(node.op)
        if not isinstance(operand, Tensor):
            try:
                return {ast.USub: lambda v: -v, ast.UAdd: lambda v: +v, ast.Not: lambda v: not v,
                        ast.Invert: lambda v: ~v}[op](operand)
            except TypeError as exc:
                raise self.error(f"invalid operand for unary operator: {exc}", node) from _cause(exc)
        if op is ast.USub:
            return S.negate(self.b, operand)
        if op is ast.UAdd:
            return operand
        if op is ast.Invert:
            return S.invert(self.b, operand)
        return S.logical_not(self.b, S.to_bool(self.b, operand))

    def visit_BinOp(self, node):
        lhs = unwrap(self.visit(node.left))
        rhs = unwrap(self.visit(node.right))
        op = _BINOPS.get(type(node.op))
        if op is None:
            if isinstance(node.op, ast.MatMult):
                raise self.error("'@' is not supported in a kernel; use tl.dot(a, b)", node)
            raise self.error(f"unsupported operator {type(node.op).__name__}", node)
        return self.binop(op, lhs, rhs, node)

    def binop(self, op: str, lhs, rhs, node):
        lhs, rhs = unwrap(lhs), unwrap(rhs)
        if not isinstance(lhs, Tensor) and not isinstance(rhs, Tensor):
            try:
                return S.fold_python(op, lhs, rhs)
            except Exception as exc:  # noqa: BLE001 (any failure of the user's constant expression)
                raise self.error(f"invalid compile-time operation: {exc}", node) from _cause(exc)
        if op == "pow":
            raise self.error("'**' is not supported on runtime values (use tl.exp2/tl.log2 or repeated "
                             "multiplication)", node)
        for v in (lhs, rhs):
            if not isinstance(v, (Tensor, bool, int, float)):
                raise self.error(f"unsupported operands for {S.op_symbol(op)}: {S.describe(lhs)} and "
                                 f"{S.describe(rhs)}", node)
        return S.binary(self.b, op, lhs, rhs)

    def visit_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        result = None
        for value_node in node.values:
            value = unwrap(self.visit(value_node))
            if not isinstance(value, Tensor):
                if is_and and not value:
                    return value if result is None else S.constant(self.b, False, T.i1)
                if not is_and and value:
                    return value if result is None else S.constant(self.b, True, T.i1)
                continue
            if value.is_block:
                raise self.error(f"'{'and' if is_and else 'or'}' on a tensor is ambiguous; use "
                                 f"'{'&' if is_and else '|'}' for elementwise logic", value_node)
            value = S.to_bool(self.b, value)
            result = value if result is None else S.binary(self.b, "and" if is_and else "or", result, value)
        return result if result is not None else is_and

    def visit_Compare(self, node):
        result = None
        left = unwrap(self.visit(node.left))
        for op_node, right_node in zip(node.ops, node.comparators):
            right = unwrap(self.visit(right_node))
            value = self.compare_one(op_node, left, right, node)
            if result is None:
                result = value
            elif isinstance(result, Tensor) or isinstance(value, Tensor):
                result = S.binary(self.b, "and", S.to_tensor(self.b, result), S.to_tensor(self.b, value))
            else:
                result = result and value
            left = right
        return result

    def compare_one(self, op_node, left, right, node):
        if isinstance(op_node, (ast.Is, ast.IsNot)):
            if isinstance(left, Tensor) and right is None or isinstance(right, Tensor) and left is None:
                same = False
            elif isinstance(left, Tensor) or isinstance(right, Tensor):
                raise self.error("'is' compares compile-time values only", node)
            else:
                same = left is right or (left == right and isinstance(left, ScalarType))
            return same if isinstance(op_node, ast.Is) else not same
        if isinstance(op_node, (ast.In, ast.NotIn)):
            if isinstance(left, Tensor) or isinstance(right, Tensor):
                raise self.error("'in' works on compile-time values only", node)
            return (left in right) if isinstance(op_node, ast.In) else (left not in right)
        pred = _CMPOPS[type(op_node)]
        if not isinstance(left, Tensor) and not isinstance(right, Tensor):
            try:
                return _PY_CMP[pred](left, right)
            except TypeError as exc:
                raise self.error(f"invalid compile-time comparison: {exc}", node) from _cause(exc)
        for v in (left, right):
            if v is None:
                raise self.error("cannot compare a runtime value with None (use 'is None' to test a "
                                 "compile-time value)", node)
            if not isinstance(v, (Tensor, bool, int, float)):
                raise self.error(f"cannot compare {S.describe(left)} with {S.describe(right)}", node)
        return S.compare(self.b, pred, left, right)

    def visit_IfExp(self, node):
        cond = unwrap(self.visit(node.test))
        if not isinstance(cond, Tensor):
            return self.visit(node.body if cond else node.orelse)
        return S.where(self.b, cond, unwrap(self.visit(node.body)), unwrap(self.visit(node.orelse)))

    def visit_Subscript(self, node):
        base = unwrap(self.visit(node.value))
        if isinstance(base, Tensor) and getattr(base.type, "num", 0):
            index = unwrap(self.visit(node.slice))      # buf[i] / bars[i]: tlx.local_view
            try:
                return tlx_rules.local_view(self.ctx, base, index)
            except SemanticError as exc:
                raise self.error(str(exc), node.slice) from _cause(exc)
        if isinstance(base, Tensor) and isinstance(base.type, T.MemDescType) and \
                not isinstance(node.slice, (ast.Slice, ast.Tuple)):
            index = unwrap(self.visit(node.slice))      # view[i]: one element (1-D) or row of a buffer
            try:
                return tlx_rules.element_view(self.ctx, base, index)
            except SemanticError as exc:
                raise self.error(str(exc), node.slice) from _cause(exc)
        if isinstance(base, Tensor):
            return self.tensor_subscript(base, node.slice, node)
        index = unwrap(self.visit(node.slice))
        if isinstance(index, Tensor):
            raise self.error("cannot index a compile-time value with a runtime value", node.slice)
        try:
            return base[index]
        except (IndexError, KeyError, TypeError) as exc:
            raise self.error(f"invalid subscript: {exc}", node) from _cause(exc)

    def tensor_subscript(self, t: Tensor, slice_node, node):
        elements = slice_node.elts if isinstance(slice_node, ast.Tuple) else [slice_node]
        result, dim = t, 0
        for element in elements:
            if isinstance(element, ast.Slice):
                if element.lower or element.upper or element.step:
                    raise self.error("only full slices ':' are supported when indexing a tensor", element)
                dim += 1
                continue
            value = unwrap(self.visit(element))
            if value is None:
                result = B.expand_dims(self.b, result, dim)
                dim += 1
                continue
            raise self.error("tensors can only be indexed with ':' and None (e.g. x[:, None]); "
                             "use tl.load for memory accesses", element)
        if dim > max(len(t.shape), 1) + (len(elements) - 1):
            raise self.error(f"too many indices for a tensor of rank {len(t.shape)}", node)
        return result

    def visit_Slice(self, node):
        raise self.error("slices are only supported inside a tensor subscript", node)

    def visit_Starred(self, node):
        raise self.error("starred expressions are only supported in call arguments", node)

    def visit_ListComp(self, node):
        raise self.error("list comprehensions are not supported in a kernel; use tl.static_range", node)

    visit_GeneratorExp = visit_ListComp
    visit_DictComp = visit_ListComp
    visit_SetComp = visit_ListComp

    def visit_Lambda(self, node):
        raise self.error("lambdas are not supported in a kernel; define a @tlxc.kernel helper", node)

    def visit_Dict(self, node):
        raise self.error("dicts are not supported in a kernel", node)

    # -- calls ---------------------------------------------------------------------------
    def visit_Call(self, node):
        fn = unwrap(self.visit(node.func))
        args, arg_nodes = [], _ArgNodes(node)
        for a in node.args:
            if isinstance(a, ast.Starred):
                value = unwrap(self.visit(a.value))
                if not isinstance(value, tuple):
                    raise self.error(f"cannot unpack {S.describe(value)} with *", a)
                args.extend(value)
                arg_nodes.positional.extend([a] * len(value))
            else:
                args.append(self.visit(a))
                arg_nodes.positional.append(a)
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                raise self.error("**kwargs unpacking is not supported in a kernel", k)
            kwargs[k.arg] = self.visit(k.value)
            arg_nodes.keywords[k.arg] = k.value
        return self.call(fn, args, kwargs, node, arg_nodes)

    def call(self, fn, args, kwargs, node, arg_nodes: _ArgNodes | None = None):
        arg_nodes = arg_nodes or _ArgNodes(node)
        if isinstance(fn, _BoundMethod):
            args = [fn.receiver] + list(args)
            arg_nodes = arg_nodes.with_receiver()
            fn = fn.function
        if hasattr(fn, "__tlxc_builtin__"):
            return self.call_builtin(fn, args, kwargs, node, arg_nodes)
        if is_kernel_function(fn):
            return self.inline(fn, args, kwargs, node, arg_nodes)
        if isinstance(fn, type) and issubclass(fn, (tl.static_range, tl.range)):
            raise self.error(f"{fn.__name__} can only be used as the iterable of a 'for' loop", node)
        if fn is print:
            return B.RULES["static_print"](self.ctx, *args)
        if fn is range:
            raise self.error("range(...) can only be used as the iterable of a 'for' loop", node)
        if isinstance(fn, ScalarType):          # tl.float32(x): a conversion, as Triton accepts it
            if len(args) != 1 or kwargs:
                raise self.error(f"calling a dtype converts one value: {fn}(x), x.to({fn})", node)
            try:
                return B.call_dtype(self.ctx, fn, unwrap(args[0]))
            except SemanticError as exc:
                raise self.error(str(exc), node) from _cause(exc)
        if callable(fn):
            values = [unwrap(a) for a in args] + [unwrap(v) for v in kwargs.values()]
            runtime = [v for v in values if isinstance(v, Tensor)]
            if fn in (min, max) and len(values) == 1 and isinstance(values[0], (tuple, list)):
                runtime = [v for v in values[0] if isinstance(unwrap(v), Tensor)]
            name = getattr(fn, "__name__", repr(fn))
            if runtime:
                if fn in (min, max):
                    return self.runtime_min_max(fn, args, kwargs, node)
                raise self.error(f"cannot call Python function '{name}' with runtime values; "
                                 f"decorate it with @tlxc.kernel to use it in a kernel", node)
            try:
                return fn(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in kwargs.items()})
            except TlxcError:
                raise
            except Exception as exc:  # noqa: BLE001 (the user's own Python function failed)
                raise self.error(f"call to '{name}' failed at compile time: {type(exc).__name__}: {exc}",
                                 node) from _cause(exc)
        raise self.error(f"'{S.describe(fn)}' is not callable", node)

    def runtime_min_max(self, fn, args, kwargs, node):
        """Python's ``min``/``max`` on runtime values, as Triton allows: ``tl.minimum`` /
        ``tl.maximum`` folded left over the arguments (or over one tuple argument)."""
        name = fn.__name__
        if kwargs:
            raise self.error(f"Python's {name}() on runtime values takes no keyword arguments "
                             f"(got {', '.join(sorted(kwargs))}); use tl.{name}imum", node)
        values = list(args)
        if len(values) == 1 and isinstance(unwrap(values[0]), (tuple, list)):
            values = list(unwrap(values[0]))
        values = [unwrap(v) for v in values]
        if len(values) < 2:
            raise self.error(f"Python's {name}() needs at least two values here, got {len(values)}", node)
        rule = B.RULES["minimum" if fn is min else "maximum"]
        result = values[0]
        for value in values[1:]:
            try:
                result = rule(self.ctx, result, value)
            except SemanticError as exc:
                raise self.error(f"{name}(): {exc}", node) from _cause(exc)
        return result

    def bind_arguments(self, display: str, signature: inspect.Signature, args, kwargs, node,
                       arg_nodes: _ArgNodes) -> inspect.BoundArguments:
        """``signature.bind`` with the mismatch reported at the user's call."""
        try:
            return signature.bind(*args, **kwargs)
        except TypeError as exc:
            message, where = str(exc), node
            unexpected = next((k for k in kwargs if k not in signature.parameters), None)
            has_var_kw = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
            if unexpected is not None and not has_var_kw:
                names = [n for n, p in signature.parameters.items() if p.kind is not p.VAR_POSITIONAL]
                message = f"got an unexpected keyword argument '{unexpected}'"
                close = difflib.get_close_matches(unexpected, names, n=1)
                if close:
                    message += f"; did you mean '{close[0]}'?"
                where = arg_nodes.keywords.get(unexpected, node)
            elif "too many positional arguments" in message:
                positional = [n for n, p in signature.parameters.items()
                              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
                skip = arg_nodes.receiver_count
                given = len(args) - skip
                shown = positional[skip:]
                message = (f"takes {len(shown)} positional argument{'s' if len(shown) != 1 else ''} "
                           f"({', '.join(shown)}) but {given} {'were' if given != 1 else 'was'} given")
                if len(arg_nodes.positional) > len(positional):
                    where = arg_nodes.positional[len(positional)]
            raise self.error(f"{display}(): {message}", where) from _cause(exc)

    def call_builtin(self, fn, args, kwargs, node, arg_nodes: _ArgNodes):
        name = fn.__tlxc_builtin__
        display = arg_nodes.display(name if name.startswith("tlx.") else f"tl.{name}")
        signature = inspect.signature(fn.__tlxc_signature__)
        bound = self.bind_arguments(display, signature, args, kwargs, node, arg_nodes)
        values = [unwrap(v) for v in bound.args]
        kw = {k: unwrap(v) for k, v in bound.kwargs.items()}
        rule = B.RULES.get(name)
        if rule is None:
            raise self.error(f"{display} is not supported yet", node)
        try:
            return rule(self.ctx, *values, **kw)
        except SemanticError as exc:
            message = str(exc)
            if not message.startswith(("tl.", "tlx.")):
                message = f"{display}: {message}"
            where = arg_nodes.node_of(signature, exc.param) if exc.param else node
            raise self.error(message, where) from _cause(exc)

    def inline(self, kfn, args, kwargs, node, arg_nodes: _ArgNodes):
        src = kfn.source
        if self.ctx.depth >= MAX_INLINE_DEPTH:
            raise self.error(f"calls nested deeper than {MAX_INLINE_DEPTH} levels: recursion is not "
                             f"supported in a kernel ({src.name}() calls itself)"
                             if kfn in self.ctx.helpers else
                             f"calls nested deeper than {MAX_INLINE_DEPTH} levels", node)
        signature = inspect.signature(kfn.fn)
        bound = self.bind_arguments(arg_nodes.display(src.name), signature, args, kwargs, node, arg_nodes)
        bound.apply_defaults()
        vars: dict[str, Any] = {}
        for param_name, value in bound.arguments.items():
            param = signature.parameters[param_name]
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise self.error(f"{src.name}(): *args/**kwargs parameters are not supported in a kernel",
                                 node)
            # As in Triton, a helper's tl.constexpr annotation does not make its argument one: a
            # runtime value stays runtime (tutorial 06 passes offset tensors so), and a use that
            # needs a constant is an error at that use, with the call in the notes.
            vars[param_name] = unwrap(value)
        vars[RETURN] = None
        self.ctx.depth += 1
        self.ctx.helpers.append(kfn)
        try:
            inner = FunctionCodegen(self.ctx, src, vars)
            inner.visit_stmts(src.tree.body)
        except TlxcError as exc:
            call_loc = self.src.loc(node)
            if _is_library(src.file) and not _is_library(self.src.file) and exc.loc is not None:
                # An error inside tlxc's own helpers (tl.rand's Philox, ...) is the user's
                # call's: point at it, keep where inside the library as a note.
                exc.notes.insert(0, (f"inside tlxc's {src.name}()", exc.loc))
                del exc.notes[MAX_CALL_NOTES:]
                exc.loc, exc.source_line = call_loc, self.src.source_line(call_loc)
                raise
            # Show the call chain, as a traceback would, but only the user's frames
            # (once per call site, so recursion does not repeat itself).
            if exc.loc is not None and exc.loc != call_loc and len(exc.notes) < MAX_CALL_NOTES and \
                    all(where != call_loc for _, where in exc.notes):
                exc.notes.append((f"in {src.name}(), called from here", call_loc))
            raise
        finally:
            self.ctx.depth -= 1
        return inner.vars.get(RETURN)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _is_library(file: str) -> bool:
    """Whether ``file`` is part of tlxc itself (its language helpers are kernels too)."""
    return os.path.abspath(file).startswith(_PACKAGE_DIR + os.sep)


@dataclass(frozen=True)
class _BlockType:
    """Triton's ``block_type`` as kernels read it: ``x.type.shape``, ``x.type.element_ty``
    (the element dtype, as Triton's block type names it), ``x.type.scalar``."""
    shape: tuple
    element_ty: Any

    @property
    def scalar(self):
        return self.element_ty

    def is_block(self) -> bool:
        return True


class _ArgNodes:
    """The AST nodes of a call's arguments, to point a message at one argument."""

    def __init__(self, call: ast.AST):
        self.call = call
        self.positional: list[ast.AST] = []
        self.keywords: dict[str, ast.AST] = {}
        self.receiver_count = 0        # 1 for a method call: x.to(...) binds x first

    def with_receiver(self) -> _ArgNodes:
        func = getattr(self.call, "func", None)
        receiver = func.value if isinstance(func, ast.Attribute) else self.call
        result = _ArgNodes(self.call)
        result.positional = [receiver] + self.positional
        result.keywords = dict(self.keywords)
        result.receiver_count = 1
        return result

    def display(self, default: str) -> str:
        """How the user spelled the callee: ``tl.load``, ``x.to``, ``helper``."""
        func = getattr(self.call, "func", None)
        return ast.unparse(func) if func is not None else default

    def node_of(self, signature: inspect.Signature, param: str | None) -> ast.AST:
        try:
            bound = signature.bind_partial(*self.positional, **self.keywords)
        except TypeError:
            return self.call
        node = bound.arguments.get(param)
        if isinstance(node, tuple):      # a *args parameter: point at its first element
            node = node[0] if node else None
        return node if isinstance(node, ast.AST) else self.call


class _BoundMethod:
    def __init__(self, receiver, function):
        self.receiver = receiver
        self.function = function


def _cause(exc: BaseException) -> BaseException:
    """``exc`` as the ``__cause__`` of the located ``CompilationError`` raised for it, as Triton
    chains the error a builtin or a compile-time expression raised (tests read
    ``err.__cause__``): without its traceback or its own context, so the printed report gains
    the one line of the underlying error and no compiler frames."""
    exc.__cause__, exc.__context__, exc.__suppress_context__ = None, None, True
    return exc.with_traceback(None)


def _did_you_mean(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""




def build_kernel_ir(kfn, spec, options: CompileOptions) -> Module:
    """Trace ``kfn`` under one specialization into a one-kernel module.

    ``spec`` maps every parameter to either ``("constexpr", value)`` or
    ``("runtime", ir_type)``; runtime parameters become the kernel's arguments.

    A user error surfaces as a ``CompilationError`` whose traceback starts here:
    the message already points at the user's line, and tlxc's own frames
    (dozens of nested ``visit`` calls) would only bury it.  ``TLXC_DEBUG=1``
    keeps the full traceback.
    """
    try:
        return _build_kernel_ir(kfn, spec, options)
    except TlxcError as exc:
        if os.environ.get("TLXC_DEBUG") == "1":
            raise
        raise exc.with_traceback(None) from exc.__cause__


def _build_kernel_ir(kfn, spec, options: CompileOptions) -> Module:
    src = kfn.source
    runtime = [(name, t) for name, (kind, t) in spec.params.items() if kind == "runtime"]
    body = Block([t for _, t in runtime], [name for name, _ in runtime])
    kernel_loc = src.loc(src.tree)
    attrs = {"sym_name": src.name, "num_warps": options.num_warps,
             "arg_divisibility": tuple(spec.divisibility.get(name, 1) for name, _ in runtime)}
    if options.cluster is not None:
        attrs["cluster_dims"] = tuple(options.cluster)
    symbol = kernel_symbol(src.name, spec, getattr(kfn, "constexpr_params", ()))
    if symbol != src.name:
        attrs["symbol"] = symbol     # the readable CUDA symbol (frontend/naming.py)
    kernel = Builder().create("tl.kernel", [], [], attrs, [Region(body)])
    kernel.loc = kernel_loc
    ctx = Context(Builder(body), options, entry=body)
    vars: dict[str, Any] = {RETURN: None}
    args = iter(body.args)
    for name, (kind, value) in spec.params.items():
        vars[name] = Tensor(next(args)) if kind == "runtime" else value
    codegen = FunctionCodegen(ctx, src, vars)
    codegen.visit_stmts(src.tree.body)
    if codegen.vars.get(RETURN) is not None:
        raise src.error("a kernel cannot return a value (store results through a pointer)",
                        _find_value_return(src.tree) or src.tree)
    with ctx.b.location(kernel_loc):
        ctx.b.create("tl.return")
    return Module([kernel])


def _find_value_return(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and node.value is not None:
            return node
    return None


__all__ = ["FunctionCodegen", "TensorType", "build_kernel_ir", "get_source"]
