"""Calls in a kernel body: builtins (``tl.*``, ``tlx.*``, tensor methods: their semantic rules,
with the arguments bound to the builtin's signature for located errors), ``min``/``max`` of
runtime values, and ``@tlxc.kernel`` helpers, inlined by building their body with a
``FunctionBuilder`` of their own.  ``Calls`` is the part of ``FunctionBuilder``
(frontend/build_ir.py) that handles them: a mixin, its methods use the visitor's ``visit``,
``error``, ``vars`` and ``ctx``."""
from __future__ import annotations

import ast
import difflib
import inspect
import os
from typing import Any

from .. import language as tl
from ..errors import CompilationError, CompileTimeAssertionFailure, TlxcError
from ..ir.types import ScalarType
from . import builtins as B
from . import semantic as S
from .semantic import SemanticError
from .values import RETURN, StaticAssertionFailed, Tensor, unwrap

MAX_INLINE_DEPTH = 32
MAX_CALL_NOTES = 4     # "in helper(), called from ..." notes kept on an error
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))     # tlxc/


def is_kernel_function(obj) -> bool:
    return getattr(obj, "__tlxc_kernel__", False)


def error_cause(exc: BaseException) -> BaseException:
    """``exc`` as the ``__cause__`` of the located ``CompilationError`` raised for it, as Triton
    chains the error a builtin or a compile-time expression raised (tests read
    ``err.__cause__``): without its traceback or its own context, so the printed report gains
    the one line of the underlying error and no compiler frames."""
    exc.__cause__, exc.__context__, exc.__suppress_context__ = None, None, True
    return exc.with_traceback(None)


class BoundMethod:
    def __init__(self, receiver, function):
        self.receiver = receiver
        self.function = function


class ArgNodes:
    """The AST nodes of a call's arguments, to point a message at one argument."""

    def __init__(self, call: ast.AST):
        self.call = call
        self.positional: list[ast.AST] = []
        self.keywords: dict[str, ast.AST] = {}
        self.receiver_count = 0        # 1 for a method call: x.to(...) binds x first

    def with_receiver(self) -> ArgNodes:
        func = getattr(self.call, "func", None)
        receiver = func.value if isinstance(func, ast.Attribute) else self.call
        result = ArgNodes(self.call)
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


def _is_library(file: str) -> bool:
    """Whether ``file`` is part of tlxc itself (its language helpers are kernels too)."""
    return os.path.abspath(file).startswith(_PACKAGE_DIR + os.sep)


class Calls:
    def visit_Call(self, node):
        fn = unwrap(self.visit(node.func))
        args, arg_nodes = [], ArgNodes(node)
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

    def call(self, fn, args, kwargs, node, arg_nodes: ArgNodes | None = None):
        arg_nodes = arg_nodes or ArgNodes(node)
        if isinstance(fn, BoundMethod):
            args = [fn.receiver] + list(args)
            arg_nodes = arg_nodes.with_receiver()
            fn = fn.function
        if getattr(fn, "__tlxc_builtin__", None) == "map_elementwise":
            return self.map_elementwise(args, kwargs, node, arg_nodes)
        if hasattr(fn, "__tlxc_builtin__"):
            return self.call_builtin(fn, args, kwargs, node, arg_nodes)
        if is_kernel_function(fn):
            return self.inline(fn, args, kwargs, node, arg_nodes)
        if isinstance(fn, type) and issubclass(fn, (tl.static_range, tl.range)):
            raise self.error(f"{fn.__name__} can only be used as the iterable of a 'for' loop", node)
        if fn is print:
            return B.RULES["static_print"](self.ctx, *args)
        if fn is isinstance:
            return self.kernel_isinstance(args, kwargs, node)
        if fn is range:
            raise self.error("range(...) can only be used as the iterable of a 'for' loop", node)
        if isinstance(fn, ScalarType):          # tl.float32(x): a conversion, as Triton accepts it
            if len(args) != 1 or kwargs:
                raise self.error(f"calling a dtype converts one value: {fn}(x), x.to({fn})", node)
            try:
                return B.call_dtype(self.ctx, fn, unwrap(args[0]))
            except SemanticError as exc:
                raise self.error(str(exc), node) from error_cause(exc)
        if isinstance(fn, type) and issubclass(fn, tuple) and hasattr(fn, "_fields"):
            try:        # a NamedTuple of kernel values (Triton builds them in kernels): tensors as they are,
                return fn(*[_field(a) for a in args], **{k: _field(v) for k, v in kwargs.items()})   # constants plain
            except TypeError as exc:
                raise self.error(f"{fn.__name__}(...): {exc}", node) from None
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
                                 node) from error_cause(exc)
        raise self.error(f"'{S.describe(fn)}' is not callable", node)

    def kernel_isinstance(self, args, kwargs, node) -> bool:
        """``isinstance(x, classes)`` at compile time, as Triton evaluates it: ``tl.tensor`` is the
        class of runtime values (language.core.tensor), ``tl.constexpr`` the class of compile-time
        numbers, strings, None and dtypes (tlxc holds those unwrapped; Triton wraps them), anything
        else Python's own test of the compile-time value (``int``, ``tuple``, ``tl.dtype``, ...)."""
        if kwargs or len(args) != 2:
            raise self.error("isinstance() takes two positional arguments: isinstance(x, classes)", node)
        value, classes = unwrap(args[0]), unwrap(args[1])
        classes = tuple(classes) if isinstance(classes, (tuple, list)) else (classes,)
        if not all(isinstance(c, type) for c in classes):
            raise self.error(f"isinstance(): the second argument must be a class or a tuple of classes, got "
                             f"{S.describe(unwrap(args[1]))}", node)
        for cls in classes:
            if cls is tl.constexpr:
                if not isinstance(value, Tensor) and (value is None or isinstance(
                        value, (bool, int, float, str, ScalarType))):
                    return True
            elif isinstance(value, cls):
                return True
        return False

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
                raise self.error(f"{name}(): {exc}", node) from error_cause(exc)
        return result

    def bind_arguments(self, display: str, signature: inspect.Signature, args, kwargs, node,
                       arg_nodes: ArgNodes) -> inspect.BoundArguments:
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
            raise self.error(f"{display}(): {message}", where) from error_cause(exc)

    def call_builtin(self, fn, args, kwargs, node, arg_nodes: ArgNodes):
        name = fn.__tlxc_builtin__
        display = arg_nodes.display(name if name.startswith(("tlx.", "proton.")) else f"tl.{name}")
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
            cls = CompileTimeAssertionFailure if isinstance(exc, StaticAssertionFailed) else CompilationError
            raise self.error(message, where, cls=cls) from error_cause(exc)

    def map_elementwise(self, args, kwargs, node, arg_nodes: ArgNodes):
        """``tl.map_elementwise(scalar_fn, *args, pack=1)``: the helper inlined once on the
        arguments broadcast to one shape (its elementwise ops then act on every element, as
        Triton's per-element calls do)."""
        pack = unwrap(kwargs.pop("pack", 1))
        if kwargs:
            raise self.error(f"tl.map_elementwise() got unexpected keyword argument(s) {', '.join(kwargs)}", node)
        if not args or not is_kernel_function(unwrap(args[0])):
            raise self.error("tl.map_elementwise(scalar_fn, *args): scalar_fn must be a @jit function", node)
        if pack != 1:
            raise self.error(f"tl.map_elementwise with pack={pack} is not supported (pack=1 calls scalar_fn "
                             f"once per element)", arg_nodes.keywords.get("pack", node))
        fn, values = unwrap(args[0]), [unwrap(a) for a in args[1:]]
        shape = ()
        for v in values:
            if isinstance(v, Tensor) and v.is_block:
                try:
                    shape = S.broadcast_shapes(shape, v.shape) if shape else v.shape
                except SemanticError as exc:
                    raise self.error(f"tl.map_elementwise: {exc}", node) from error_cause(exc)
        if shape:
            values = [S.broadcast_to(self.b, v, shape) if isinstance(v, Tensor) and v.shape != shape else v
                      for v in values]
        inner = ArgNodes(node)
        inner.positional = list(arg_nodes.positional[1:])
        return self.inline(fn, values, {}, node, inner)

    def inline(self, kfn, args, kwargs, node, arg_nodes: ArgNodes):
        src = kfn.source
        if self.ctx.depth >= MAX_INLINE_DEPTH:
            raise self.error(f"calls nested deeper than {MAX_INLINE_DEPTH} levels: recursion is not "
                             f"supported in a kernel ({src.name}() calls itself)"
                             if kfn in self.ctx.helpers else
                             f"calls nested deeper than {MAX_INLINE_DEPTH} levels", node)
        signature = inspect.signature(kfn.fn)
        bound = self.bind_arguments(arg_nodes.display(src.name), signature, args, kwargs, node, arg_nodes)
        bound.apply_defaults()
        vars: dict[str, Any] = dict(getattr(kfn, "captured", {}))     # a lambda's captured constants
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
            inner = type(self)(self.ctx, src, vars)
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


def _field(value):
    """A NamedTuple field built in a kernel: a kernel value as it is, a constant unwrapped (as the
    constant-only call of a Python function gets it)."""
    plain = unwrap(value)
    return value if isinstance(plain, Tensor) else plain
