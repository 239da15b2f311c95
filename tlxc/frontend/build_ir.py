"""Python AST → tlxc IR.

One ``FunctionBuilder`` per function whose IR it builds (the kernel, and each inlined
helper).  Compile-time values (numbers, dtypes, tuples, ``tl.constexpr``
parameters) are folded while building; runtime values become IR.  Python
control flow on runtime values becomes ``scf.for`` / ``scf.while`` /
``scf.if`` with explicit loop-carried and yielded values.
"""
from __future__ import annotations

import ast
import difflib
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
from ..target import get_target
from . import atomic_rules, descriptor_methods, gdc_rules, math_rules, scan_rules, storage_alias, tlx_rules  # noqa: F401,E501  (they register rules)
from . import builtins as B
from . import semantic as S
from .block_ptr import Aggregate  # (block_ptr also registers the block-pointer rules)
from .calls import BoundMethod, Calls, error_cause
from .control_flow import ControlFlow
from .lambdas import make_lambda
from .naming import kernel_symbol
from .semantic import SemanticError
from .source import FunctionSource, get_source
from .tasks import TaskStatements
from .values import RETURN, Tensor, Undefined, unwrap
from .warp_pipeline import WarpPipelineStatements

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
                   "abs": "abs", "sigmoid": "sigmoid", "xor_sum": "xor_sum", "cast": "cast", "split": "split",
                   "reduce": "reduce"}


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
    task: tuple | None = None              # (the task's with-node, replica) being built; None outside
    staging: dict = field(default_factory=dict)   # descriptor_methods' buffers, per (task, box)
    staging_allocs: int = 0                # how many of them lead the entry block
    alias_peers: dict = field(default_factory=dict)   # id(alloc value) -> storage_alias.Peer
    cta_group: dict = field(default_factory=dict)     # tcgen05's .cta_group for the kernel: {"group", "loc"}


def _always_returns(stmts: list[ast.stmt]) -> bool:
    """Whether every path through ``stmts`` ends at a ``return`` (its own, or both branches' of a
    final ``if``)."""
    if not stmts:
        return False
    last = stmts[-1]
    return isinstance(last, ast.Return) or \
        (isinstance(last, ast.If) and _always_returns(last.body) and _always_returns(last.orelse))


def _may_return(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` is an ``if`` with a ``return`` on some path, at any depth of nested ``if``s."""
    return isinstance(stmt, ast.If) and any(
        isinstance(s, ast.Return) or _may_return(s) for s in stmt.body + stmt.orelse)


def _then_rest(stmts: list[ast.stmt], rest: list[ast.stmt]) -> list[ast.stmt]:
    """``stmts`` followed by ``rest`` on the paths that do not return (``visit_stmts`` folds ``rest``
    into an inner ``if`` that returns on some of its paths)."""
    return stmts if _always_returns(stmts) else stmts + rest



class FunctionBuilder(TaskStatements, WarpPipelineStatements, ControlFlow, Calls, ast.NodeVisitor):
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
              notes: list[tuple[str, Location | None]] | None = None,
              cls: type[CompilationError] = CompilationError) -> CompilationError:
        """A ``CompilationError`` (or ``cls``) at ``node`` (an AST node or a ``Location``)."""
        if isinstance(node, Location):
            return cls(message, node, notes=notes, source_line=self.src.source_line(node))
        return self.src.error(message, node, notes=notes, cls=cls)

    def visit(self, node: ast.AST):
        with self.b.location(self.src.loc(node)):
            try:
                return super().visit(node)
            except SemanticError as exc:
                raise self.error(str(exc), node) from error_cause(exc)
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
            if rest and _may_return(stmt) and not _always_returns([stmt]):
                # `if c: ...; return` (at any depth of nested ifs) followed by more code: the rest
                # joins every path that does not return, so each path ends at a return or the end
                # (as Triton allows early returns outside loops).  A path that continues in both
                # branches of a runtime `if` builds the rest in each.
                merged = ast.If(test=stmt.test, body=_then_rest(stmt.body, rest),
                                orelse=_then_rest(stmt.orelse, rest))
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
                return BoundMethod(base, methods[attr])
            if attr in attributes:
                return attributes[attr]
            known = [*attributes, *methods]
            raise self.error(f"a {base.kind} has no attribute '{attr}'{_did_you_mean(attr, known)}"
                             f" (it has: {', '.join(known) or 'nothing'})", node)
        try:
            return getattr(base, attr)
        except AttributeError as exc:
            if attr == "value" and not isinstance(base, pytypes.ModuleType):
                return base     # Triton's constexpr.value: tlxc holds compile-time values unwrapped
            if isinstance(base, (bool, int, float)):
                # a number the kernel assigned (``acc = 0; acc.to(tl.int64)``, ``v = 1; v.dtype``): Triton
                # makes it a scalar tensor of the literal's type, whose attributes these are
                return self.tensor_attribute(S.to_tensor(self.b, base), attr, node)
            if hasattr(type(base), attr):     # it exists but does not apply (a float's int_bitwidth)
                raise self.error(str(exc), node) from None
            if isinstance(base, pytypes.ModuleType):
                owner = f"module '{ast.unparse(node.value)}'"
                known = [n for n in dir(base) if not n.startswith("_")]
            else:
                owner, known = S.describe(base), [n for n in dir(base) if not n.startswith("_")]
            removed = getattr(base, "__tlxc_removed__", {}).get(attr)  # an older spelling: say why not
            if removed:
                raise self.error(f"{ast.unparse(node.value)}.{attr} is not supported: {removed}", node) from None
            listing = getattr(base, "__tlxc_namespace__", None)   # tl.math, libdevice: say what exists
            listed = f" (it has: {', '.join(listing)})" if listing else ""
            raise self.error(f"{owner} has no attribute '{attr}'{_did_you_mean(attr, known)}{listed}",
                             node) from None

    def tensor_attribute(self, t: Tensor, attr: str, node):
        if descriptor_methods.is_descriptor(t):
            method = descriptor_methods.METHODS.get(attr)
            return BoundMethod(t, method) if method else descriptor_methods.attribute(t, attr, self.ctx)
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
            return BoundMethod(t, tl.BUILTINS[_TENSOR_METHODS[attr]])
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
                raise self.error(f"invalid operand for unary operator: {exc}", node) from error_cause(exc)
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
                raise self.error(f"invalid compile-time operation: {exc}", node) from error_cause(exc)
        if op == "pow":
            raise self.error("'**' is not supported on runtime values (use tl.exp2/tl.log2 or repeated "
                             "multiplication)", node)
        for v in (lhs, rhs):
            if not isinstance(v, (Tensor, bool, int, float)):
                raise self.error(f"unsupported operands for {S.op_symbol(op)}: {S.describe(lhs)} and "
                                 f"{S.describe(rhs)}", node)
        return S.binary(self.b, op, lhs, rhs)

    def visit_BoolOp(self, node):
        """``and`` / ``or``: on compile-time values Python's (short-circuit); on runtime values, as
        Triton's ``logical_and`` / ``logical_or``, the elementwise logic of both operands as booleans
        (non-zero is true), blocks broadcast (``m[:, None] < M and n[None, :] < N`` is a mask)."""
        is_and = isinstance(node.op, ast.And)
        result = None
        last = is_and
        for value_node in node.values:
            value = unwrap(self.visit(value_node))
            if not isinstance(value, Tensor):
                if is_and and not value:
                    return value if result is None else S.constant(self.b, False, T.i1)
                if not is_and and value:
                    return value if result is None else S.constant(self.b, True, T.i1)
                last = value
                continue
            value = S.to_bool(self.b, value)
            result = value if result is None else S.binary(self.b, "and" if is_and else "or", result, value)
        return result if result is not None else last      # all compile-time: Python's value (the last one)

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
                raise self.error(f"invalid compile-time comparison: {exc}", node) from error_cause(exc)
        for v in (left, right):
            if v is None:
                raise self.error("cannot compare a runtime value with None (use 'is None' to test a "
                                 "compile-time value)", node)
            if not isinstance(v, (Tensor, bool, int, float)):
                raise self.error(f"cannot compare {S.describe(left)} with {S.describe(right)}", node)
        return S.compare(self.b, pred, left, right)

    def visit_IfExp(self, node):
        """``a if c else b``: a compile-time ``c`` picks one branch; a runtime scalar ``c`` runs only
        the branch it picks (an ``scf.if``, as Triton lowers it: a branch's loads, stores and atomics
        happen only when taken); a block ``c`` selects elementwise (``tl.where``) between both."""
        cond = unwrap(self.visit(node.test))
        if not isinstance(cond, Tensor):
            return self.visit(node.body if cond else node.orelse)
        if cond.is_block:
            return S.where(self.b, cond, unwrap(self.visit(node.body)), unwrap(self.visit(node.orelse)))
        result = f"__ifexp_{len(self.vars)}_{node.lineno}_{node.col_offset}"
        branch = ast.If(test=node.test, body=[ast.Assign(targets=[ast.Name(result, ast.Store())], value=node.body)],
                        orelse=[ast.Assign(targets=[ast.Name(result, ast.Store())], value=node.orelse)])
        for made in ast.walk(branch):
            if made is not node.body and made is not node.orelse and made is not node.test and \
                    not hasattr(made, "lineno"):
                ast.copy_location(made, node)
        self.runtime_if(branch, S.to_bool(self.b, cond))
        self.def_locs.pop(result, None)
        return self.vars.pop(result)

    def visit_Subscript(self, node):
        base = unwrap(self.visit(node.value))
        if isinstance(base, Tensor) and getattr(base.type, "num", 0):
            index = unwrap(self.visit(node.slice))      # buf[i] / bars[i]: tlx.local_view
            try:
                return tlx_rules.local_view(self.ctx, base, index)
            except SemanticError as exc:
                raise self.error(str(exc), node.slice) from error_cause(exc)
        if isinstance(base, Tensor) and isinstance(base.type, T.MemDescType) and \
                not isinstance(node.slice, (ast.Slice, ast.Tuple)):
            index = unwrap(self.visit(node.slice))      # view[i]: one element (1-D) or row of a buffer
            try:
                return tlx_rules.element_view(self.ctx, base, index)
            except SemanticError as exc:
                raise self.error(str(exc), node.slice) from error_cause(exc)
        if isinstance(base, Tensor):
            return self.tensor_subscript(base, node.slice, node)
        if isinstance(node.slice, ast.Slice) and isinstance(base, (tuple, list, str)):
            # xs[a:b:c] of a compile-time tuple (TLX's recursive _join_n halves one)
            bounds = []
            for part in (node.slice.lower, node.slice.upper, node.slice.step):
                value = None if part is None else unwrap(self.visit(part))
                if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                    raise self.error(f"a slice of a compile-time {type(base).__name__} needs compile-time integer "
                                     f"bounds, got {S.describe(value)}", part)
                bounds.append(value)
            return base[slice(*bounds)]
        index = unwrap(self.visit(node.slice))
        if isinstance(index, Tensor):
            raise self.error("cannot index a compile-time value with a runtime value", node.slice)
        try:
            return base[index]
        except (IndexError, KeyError, TypeError) as exc:
            raise self.error(f"invalid subscript: {exc}", node) from error_cause(exc)

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
        """``[expr for v in seq if cond]`` over a compile-time sequence (a tuple of values, a range of
        constants): unrolled, as Triton does (``tl.tuple([v + 1 for v in values])``); each ``if``
        must be compile-time.  The loop variables do not leak into the kernel's scope."""
        saved = dict(self.vars)
        try:
            return list(self._comprehension(node, node.generators))
        finally:
            self.vars = saved

    def _comprehension(self, node, generators):
        if not generators:
            yield self.visit(node.elt)
            return
        first = generators[0]
        if first.is_async:
            raise self.error("async comprehensions are not supported in a kernel", first)
        seq = self._comprehension_range(first.iter)
        if seq is None:
            seq = unwrap(self.visit(first.iter))
        if isinstance(seq, Tensor) or not isinstance(seq, (tuple, list, range)):
            raise self.error(f"a comprehension in a kernel iterates over a compile-time tuple, list or range, got "
                             f"{S.describe(seq)} (use tl.static_range, or a loop)", first.iter)
        for item in seq:
            self.assign(first.target, item)
            keep = True
            for cond_node in first.ifs:
                cond = unwrap(self.visit(cond_node))
                if isinstance(cond, Tensor):
                    raise self.error("a comprehension's 'if' must be a compile-time condition", cond_node)
                keep = keep and bool(cond)
            if keep:
                yield from self._comprehension(node, generators[1:])

    def _comprehension_range(self, node):
        """``range(...)`` / ``tl.static_range(...)`` of compile-time integers as a comprehension's
        iterable: the Python range (None for any other iterable)."""
        if not isinstance(node, ast.Call) or node.keywords:
            return None
        fn = unwrap(self.visit(node.func))
        if fn is not range and fn is not tl.static_range:
            return None
        bounds = [unwrap(self.visit(a)) for a in node.args]
        if any(isinstance(v, bool) or not isinstance(v, int) for v in bounds) or not 1 <= len(bounds) <= 3:
            raise self.error("a comprehension's range(...) takes 1 to 3 compile-time integers", node)
        return range(*bounds)

    def visit_GeneratorExp(self, node):
        raise self.error("generator expressions are not supported in a kernel; use a list comprehension over a "
                         "compile-time tuple, or tl.static_range", node)

    def visit_DictComp(self, node):
        raise self.error("dict comprehensions are not supported in a kernel", node)

    visit_SetComp = visit_DictComp

    def visit_Lambda(self, node):
        """A kernel helper made of the lambda's expression (frontend/lambdas.py)."""
        return make_lambda(self, node)

    def visit_Dict(self, node):
        raise self.error("dicts are not supported in a kernel", node)

    # -- calls ---------------------------------------------------------------------------




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


def _did_you_mean(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""




def build_kernel_ir(kfn, spec, options: CompileOptions) -> Module:
    """Build the IR of ``kfn`` under one specialization into a one-kernel module.

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
    if options.num_ctas > 1:
        attrs["num_ctas"] = options.num_ctas     # one program per cluster of num_ctas CTAs (codegen_nvptx/cuda.py)
    lanes = get_target(options.arch).warp_size
    if lanes != 32:
        attrs["warp_size"] = lanes       # AMD's wave64 (ir/ops/task.py: warp_size); NVIDIA's 32 is implied
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
    builder = FunctionBuilder(ctx, src, vars)
    builder.visit_stmts(src.tree.body)
    if builder.vars.get(RETURN) is not None:
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


__all__ = ["FunctionBuilder", "TensorType", "build_kernel_ir", "get_source"]
