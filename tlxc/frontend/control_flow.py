"""Control flow in a kernel body: ``if`` (compile-time, or ``scf.if`` with its results merged
value by value, structures field by field), ``for`` (``static_range`` unrolled, or ``scf.for``
with its loop-carried values) and ``while`` (``scf.while``).  ``ControlFlow`` is the part of
``FunctionBuilder`` (frontend/build_ir.py) that handles them: a mixin, its methods use the
visitor's ``visit``, ``error``, ``vars``, ``ctx`` and ``b``."""
from __future__ import annotations

import ast
import weakref

from .. import language as tl
from ..ir import types as T
from ..ir.core import Block, Region
from ..ir.types import ScalarType, TensorType
from . import semantic as S
from .block_ptr import Aggregate
from .semantic import SemanticError
from .source import first_node
from .values import RETURN, Tensor, Undefined, unwrap


class _Missing:
    pass


class IfResult:
    """An aggregate field merged by an ``scf.if``: the index of its result."""

    def __init__(self, index: int):
        self.index = index


MISSING = _Missing()


def assigned_names(stmts: list[ast.stmt]) -> list[str]:
    """Names a statement list may (re)bind, in first-assignment order."""
    names: list[str] = []
    for s in stmts:
        for name in _assigned_by(s):
            if name not in names:
                names.append(name)
    return names


# a kernel's syntax tree lives as long as its source (KernelFunction.source): what a statement binds is
# found once, not at every loop, branch and unrolled iteration that contains it
_ASSIGNED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _assigned_by(stmt: ast.stmt) -> tuple[str, ...]:
    found = _ASSIGNED.get(stmt)
    if found is not None:
        return found
    names: list[str] = []

    def add(name):
        if name not in names:
            names.append(name)

    class Visitor(ast.NodeVisitor):
        def visit_Name(self, node):
            if isinstance(node.ctx, ast.Store):
                add(node.id)

        def visit_Return(self, node):
            add(RETURN)
            self.generic_visit(node)

        def visit_FunctionDef(self, node):
            pass

        def visit_Lambda(self, node):
            pass

    Visitor().visit(stmt)
    found = _ASSIGNED[stmt] = tuple(names)
    return found


def literal_fits(value, t) -> bool:
    """Whether the Python number ``value`` converts to type ``t`` without changing
    kind (an int fits a float tensor; a float does not fit an int tensor)."""
    elem = t.element if isinstance(t, TensorType) else t
    if not isinstance(elem, ScalarType) or not isinstance(value, (bool, int, float)):
        return False
    try:
        return S.computation_type(elem, False, S.literal_type(value), True, False) == elem
    except SemanticError:
        return False


def same_constexpr(a, b) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 (arbitrary user objects may not compare)
        return a is b


class ControlFlow:
    def visit_If(self, node):
        cond = self.visit(node.test)
        if not isinstance(cond, Tensor):
            branch = node.body if unwrap(cond) else node.orelse
            self.visit_stmts(branch)
            return
        if cond.is_block:
            raise self.error(f"an 'if' condition must be a scalar, got a tensor of shape {list(cond.shape)} "
                             f"(use tl.where for elementwise selection)", node.test)
        cond = S.to_bool(self.b, cond)
        self.runtime_if(node, cond)

    def run_branch(self, stmts, block: Block) -> tuple[dict, bool, bool, dict]:
        saved = self.vars, self.returned, self.partial_return, self.def_locs
        self.vars, self.returned, self.partial_return = dict(saved[0]), False, False
        self.def_locs = dict(saved[3])
        with self.b.at(block):
            self.visit_stmts(stmts)
        result = (self.vars, self.returned, self.partial_return, self.def_locs)
        self.vars, self.returned, self.partial_return, self.def_locs = saved
        return result

    def runtime_if(self, node: ast.If, cond: Tensor) -> None:
        then_block, else_block = Block(), Block()
        then_vars, then_ret, then_partial, then_locs = self.run_branch(node.body, then_block)
        else_vars, else_ret, else_partial, else_locs = self.run_branch(node.orelse, else_block)
        self.def_locs.update(then_locs)
        self.def_locs.update(else_locs)
        names = assigned_names(node.body + node.orelse)
        results, then_vals, else_vals = [], [], []
        plain, merged = [], []      # results that are variables; aggregates rebuilt from results
        for name in names:
            tv, ev = then_vars.get(name, MISSING), else_vars.get(name, MISSING)
            if tv is MISSING or ev is MISSING or isinstance(tv, Undefined) or isinstance(ev, Undefined):
                if name == RETURN:
                    continue
                self.vars[name] = Undefined(f"'{name}' is assigned in only one branch of the "
                                             f"'if' at line {self.src.loc(node).line}")
                continue
            if not isinstance(tv, Tensor) and not isinstance(ev, Tensor) and same_constexpr(tv, ev):
                self.vars[name] = tv
                continue
            if isinstance(tv, Aggregate) and isinstance(ev, Aggregate) and type(tv) is type(ev) and \
                    tv.static_key() == ev.static_key():
                # a block pointer: merge field by field; the fields both branches share stay as they are
                leaves = []
                for field_name, a, c in zip(tv.fields(), tv.leaves(), ev.leaves()):
                    if (a is c or (isinstance(a, Tensor) and isinstance(c, Tensor) and a.value is c.value)
                            or (not isinstance(a, Tensor) and not isinstance(c, Tensor) and same_constexpr(a, c))):
                        leaves.append(a)
                        continue
                    a, c = self.unify_branch_values(f"{name}.{field_name}", a, c, then_block, else_block, node,
                                                    (then_locs, else_locs))
                    leaves.append(IfResult(len(results)))
                    results.append(f"{name}_{field_name}")
                    then_vals.append(a)
                    else_vals.append(c)
                merged.append((name, tv, leaves))
                continue
            tv, ev = self.unify_branch_values(name, tv, ev, then_block, else_block, node,
                                              (then_locs, else_locs))
            results.append(name)
            plain.append(len(results) - 1)
            then_vals.append(tv)
            else_vals.append(ev)
        with self.b.at(then_block):
            self.b.create("scf.yield", [v.value for v in then_vals])
        with self.b.at(else_block):
            self.b.create("scf.yield", [v.value for v in else_vals])
        op = self.b.create("scf.if", [cond.value], [v.type for v in then_vals], {},
                           [Region(then_block), Region(else_block)],
                           result_names=[n if n != RETURN else None for n in results])
        for i in plain:
            self.vars[results[i]] = Tensor(op.results[i])
        for name, template, leaves in merged:
            self.vars[name] = template.replace([Tensor(op.results[leaf.index]) if isinstance(leaf, IfResult) else leaf
                                                for leaf in leaves])
        if then_ret and else_ret:
            self.returned = True
        elif then_ret or else_ret or then_partial or else_partial:
            self.partial_return = True

    def unify_branch_values(self, name, tv, ev, then_block, else_block, node, branch_locs):
        shown = "the return value" if name == RETURN else \
            "the conditional expression" if name.startswith("__ifexp_") else f"'{name}'"
        then_locs, else_locs = branch_locs
        notes = []
        if name in then_locs and name in else_locs and then_locs[name] != else_locs[name]:
            notes = [(f"{shown} is set to {S.describe(tv)} here", then_locs[name]),
                     (f"and to {S.describe(ev)} here", else_locs[name])]
        for v in (tv, ev):
            if not isinstance(v, (Tensor, bool, int, float)):
                raise self.error(f"{shown} takes different compile-time values in the two branches of "
                                 f"this runtime 'if' ({S.describe(tv)} and {S.describe(ev)})", node, notes)
        mismatch = (f"{shown} has type {{}} in the then-branch but {{}} in the else-branch; both branches "
                    f"must give it one type (convert one with .to(...))")
        if isinstance(tv, Tensor) and isinstance(ev, Tensor):
            pass
        elif isinstance(tv, Tensor):
            if not literal_fits(ev, tv.type):
                raise self.error(mismatch.format(tv.type, S.describe(ev)), node, notes)
            with self.b.at(else_block):
                ev = S.constant(self.b, ev, tv.type)
        elif isinstance(ev, Tensor):
            if not literal_fits(tv, ev.type):
                raise self.error(mismatch.format(S.describe(tv), ev.type), node, notes)
            with self.b.at(then_block):
                tv = S.constant(self.b, tv, ev.type)
        else:
            target = S.computation_type(S.literal_type(tv), True, S.literal_type(ev), True, False)
            with self.b.at(then_block):
                tv = S.constant(self.b, tv, target)
            with self.b.at(else_block):
                ev = S.constant(self.b, ev, target)
        if tv.type != ev.type:
            raise self.error(mismatch.format(tv.type, ev.type), node, notes)
        return tv, ev

    # -- loops -------------------------------------------------------------------------
    def visit_For(self, node):
        if node.orelse:
            raise self.error("'for ... else' is not supported in a kernel", node)
        if bad := first_node(node.body, (ast.Return,)):
            raise self.error("'return' inside a loop is not supported in a kernel", bad)
        it = node.iter
        if not isinstance(it, ast.Call):
            raise self.error("a kernel 'for' loop must iterate over range(...), tl.range(...) or "
                             "tl.static_range(...)", it)
        fn = unwrap(self.visit(it.func))
        args = [unwrap(self.visit(a)) for a in it.args]
        kwargs = {k.arg: unwrap(self.visit(k.value)) for k in it.keywords}
        if fn is tl.static_range:
            return self.static_for(node, args, kwargs)
        if fn is not range and fn is not tl.range:
            raise self.error("a kernel 'for' loop must iterate over range(...), tl.range(...) or "
                             "tl.static_range(...)", it.func)
        if not 1 <= len(args) <= 3:
            raise self.error(f"range expects 1 to 3 arguments, got {len(args)}", it)
        unknown = set(kwargs) - {"num_stages", "loop_unroll_factor", "flatten", "warp_specialize",
                                 "disallow_acc_multi_buffer"}
        if unknown or (kwargs and fn is range):
            raise self.error(f"unexpected keyword argument(s) to range: {', '.join(sorted(kwargs))}", it)
        loop_attrs = self.range_hints(kwargs, it)
        lb, ub, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
        for v, what in ((lb, "start"), (ub, "end"), (step, "step")):
            if not isinstance(v, Tensor) and not (isinstance(v, int) and not isinstance(v, bool)):
                raise self.error(f"range's {what} must be an integer, got {S.describe(v)}", it)
            if isinstance(v, Tensor) and (v.is_block or not isinstance(v.dtype, ScalarType) or not v.dtype.is_integer):
                raise self.error(f"range's {what} must be an integer scalar, got {v.type}", it)
        if not isinstance(step, Tensor) and step == 0:
            raise self.error("range's step must not be zero", it)
        if not isinstance(node.target, ast.Name):
            raise self.error("the loop variable must be a plain name", node.target)
        bound_type = T.i32
        for v in (lb, ub, step):
            v_type = v.dtype if isinstance(v, Tensor) else S.literal_type(v)
            if v_type.bits == 64:
                bound_type = T.i64
        bounds = [S.cast(self.b, v, bound_type) if isinstance(v, Tensor) else S.constant(self.b, v, bound_type)
                  for v in (lb, ub, step)]
        iv_map = None
        if not isinstance(step, Tensor) and step < 0:
            # a negative constant step (``range(K, 0, -BLOCK_K)``, ``range(n - 1, -1, -1)``), as Triton
            # lowers it: the loop counts iv' = ub, ub - step, ... < lb and the body sees lb + ub - iv',
            # i.e. lb, lb + step, ... > ub (the same iterations as Python's range)
            start, stop = bounds[0], bounds[1]
            bounds = [stop, start, S.constant(self.b, -step, bound_type)]

            def iv_map(iv):
                return S.binary(self.b, "sub", S.binary(self.b, "add", start, stop), iv)
        self.runtime_loop(node, node.body, bounds=bounds, iv_name=node.target.id, loop_attrs=loop_attrs,
                          iv_map=iv_map)

    def range_hints(self, kwargs: dict, it: ast.Call) -> dict:
        """``tl.range``'s keyword arguments, checked; the scf.for attributes they give.
        ``loop_unroll_factor`` becomes ``unroll`` (``#pragma unroll N``); the others are
        accepted hints that change nothing yet (docs/language.md)."""
        where = {k.arg: k.value for k in it.keywords}
        attrs = {}
        for name, value in kwargs.items():
            if name in ("num_stages", "loop_unroll_factor"):
                if value is None:
                    continue
                least = 0 if name == "num_stages" else 1
                if isinstance(value, bool) or not isinstance(value, int) or value < least:
                    raise self.error(f"tl.range's {name} must be a compile-time integer >= {least}, got "
                                     f"{S.describe(value)}", where[name])
                attrs["unroll" if name == "loop_unroll_factor" else name] = value
            elif not isinstance(value, bool):
                raise self.error(f"tl.range's {name} must be a compile-time bool, got {S.describe(value)}",
                                 where[name])
        return attrs

    def static_for(self, node, args, kwargs):
        # Triton's static_range(arg1, arg2=None, step=None): the keywords by those names
        names = ("arg1", "arg2", "step")
        if set(kwargs) - set(names):
            raise self.error(f"tl.static_range takes arg1, arg2 and step; got {', '.join(sorted(kwargs))}", node.iter)
        if kwargs:
            given = dict(zip(names, args))
            for name, value in kwargs.items():
                if name in given:
                    raise self.error(f"tl.static_range got '{name}' twice", node.iter)
                given[name] = value
            if "step" in given and given.get("arg2") is None:
                raise self.error("tl.static_range's step needs a start and an end: static_range(start, end, step)",
                                 node.iter)
            args = [given[n] for n in names if given.get(n) is not None]
        for i, a in enumerate(args):
            a_node = node.iter.args[i] if i < len(node.iter.args) else node.iter
            if isinstance(a, Tensor):
                raise self.error(f"tl.static_range bounds must be compile-time constants, got "
                                 f"{S.describe(a)} (use range(...) for a runtime loop)", a_node)
            if isinstance(a, bool) or not isinstance(a, int):
                raise self.error(f"tl.static_range bounds must be integers, got {S.describe(a)}", a_node)
        if not 1 <= len(args) <= 3:
            raise self.error(f"tl.static_range expects 1 to 3 arguments, got {len(args)}", node.iter)
        if len(args) == 3 and args[2] == 0:
            raise self.error("tl.static_range's step must not be zero",
                             node.iter.args[2] if len(node.iter.args) > 2 else node.iter)
        values = range(*args)
        step = values.step
        count = max(0, (values.stop - values.start + step - 1) // step if step > 0 else
                    (values.start - values.stop - step - 1) // -step)      # len() overflows past 2**63
        if count > 4096:
            raise self.error(f"tl.static_range unrolls {count} iterations; at most 4096 are allowed",
                             node.iter)
        for value in values:
            self.assign(node.target, value)
            self.visit_stmts(node.body)

    def visit_While(self, node):
        if node.orelse:
            raise self.error("'while ... else' is not supported in a kernel", node)
        if bad := first_node(node.body, (ast.Return,)):
            raise self.error("'return' inside a loop is not supported in a kernel", bad)
        self.runtime_loop(node, node.body, cond_node=node.test)

    def loop_carried(self, node, body, iv_name=None) -> list[str]:
        carried = []
        for name in assigned_names(body):
            if name == iv_name or name not in self.vars:
                continue
            value = self.vars[name]
            if isinstance(value, (Tensor, bool, int, float, Aggregate)) and not isinstance(value, Undefined):
                carried.append(name)
        return carried

    # A carried Aggregate (a block pointer) travels as its runtime fields, one loop value
    # each, named after the variable and the field; its compile-time part stays as it was.
    def carried_slots(self, carried: list[str]) -> tuple[list[str], list[Tensor], list[bool]]:
        """The loop values for ``carried``: their names, initial values, and whether each is an
        aggregate's field (which ``drop_invariant_fields`` may turn back into a plain value)."""
        names, inits, fields = [], [], []
        for name in carried:
            v = self.vars[name]
            if isinstance(v, Aggregate):
                for field_name, leaf in zip(v.fields(), v.leaves()):
                    if isinstance(leaf, Tensor):
                        names.append(f"{name}_{field_name}")
                        inits.append(leaf)
                        fields.append(True)
                continue
            names.append(name)
            inits.append(v if isinstance(v, Tensor) else S.constant(self.b, v, S.literal_type(v)))
            fields.append(False)
        return names, inits, fields

    @staticmethod
    def drop_invariant_fields(fields: list[bool], inits: list[Tensor], yields: list[Tensor],
                              blocks: list[Block]) -> set[int]:
        """The aggregate fields the body yields unchanged (a block pointer's base, shape and
        strides, which tl.advance keeps) stop being loop values: their uses read the value
        from before the loop, so the loop carries only what changes.  ``blocks`` are the
        loop's blocks (the body last), each ending its arguments with the carried ones."""
        n = len(inits)
        body_args = blocks[-1].args[len(blocks[-1].args) - n:]
        dropped = {i for i in range(n) if fields[i] and yields[i].value is body_args[i]}
        if not dropped:
            return dropped
        for block in blocks:
            first = len(block.args) - n
            replace = {id(block.args[first + i]): inits[i].value for i in dropped}
            for op in block.ops:
                for inner in op.walk():
                    inner.operands = [replace.get(id(v), v) for v in inner.operands]
                    if inner.name == "scf.condition" and inner.parent is block:   # forwards the args
                        inner.operands = [v for j, v in enumerate(inner.operands) if j - 1 not in dropped]
            block.args = [a for j, a in enumerate(block.args) if j - first not in dropped]
            for j, arg in enumerate(block.args):
                arg.index = j
        return dropped

    def bind_carried(self, carried: list[str], originals: dict, values) -> None:
        """Point each carried name at its loop values (block arguments or loop results)."""
        values = iter(values)
        for name in carried:
            original = originals[name]
            if isinstance(original, Aggregate):
                leaves = [Tensor(next(values)) if isinstance(leaf, Tensor) else leaf for leaf in original.leaves()]
                self.vars[name] = original.replace(leaves)
            else:
                self.vars[name] = Tensor(next(values))

    def aggregate_yields(self, name: str, original: Aggregate, value, where, notes) -> list[Tensor]:
        """The values a loop body yields for a carried aggregate: its runtime fields, which
        keep their types; its compile-time fields and shape must not change."""
        kind = original.kind
        if not isinstance(value, Aggregate) or type(value) is not type(original) or \
                value.static_key() != original.static_key():
            raise self.error(f"loop-carried {kind} '{name}' is {S.describe(original)} before the loop but "
                             f"{S.describe(value)} at the end of its body; a runtime loop cannot change "
                             f"its compile-time shape", where, notes)
        yields = []
        for field_name, before, after in zip(original.fields(), original.leaves(), value.leaves()):
            if not isinstance(before, Tensor):
                if isinstance(after, Tensor) or not same_constexpr(before, after):
                    raise self.error(f"loop-carried {kind} '{name}' has the compile-time {field_name} {before!r} "
                                     f"before the loop but {S.describe(after)} inside it; give it its final "
                                     f"value before the loop", where, notes)
                continue
            if not isinstance(after, Tensor):
                if not literal_fits(after, before.type):
                    raise self.error(f"loop-carried {kind} '{name}': its {field_name} has type {before.type} "
                                     f"before the loop but becomes {S.describe(after)} inside it", where, notes)
                after = S.constant(self.b, after, before.type)
            if after.type != before.type:
                raise self.error(f"loop-carried {kind} '{name}': its {field_name} has type {before.type} before "
                                 f"the loop but {after.type} at the end of its body. Please make sure that the "
                                 f"type stays consistent across iterations", where, notes)
            yields.append(after)
        return yields

    def carried_change_site(self, name: str, loop: ast.AST, init_locs: dict):
        """Where a variable changed inside ``loop`` (its last assignment there, else the
        loop itself), and notes pointing at its value before the loop."""
        inside = self.def_locs.get(name)
        before = init_locs.get(name)
        notes = []
        if before is not None:
            notes.append((f"'{name}' is set before the loop here", before))
        if inside is None or inside == before:
            return self.src.loc(loop), notes
        notes.append(("in this loop", self.src.loc(loop)))
        return inside, notes

    def runtime_loop(self, node, body, bounds=None, iv_name=None, cond_node=None, loop_attrs=None, iv_map=None):
        carried = self.loop_carried(node, body, iv_name)
        slots, inits, fields = self.carried_slots(carried)
        constexprs_before = {k: v for k, v in self.vars.items() if not isinstance(v, (Tensor, Undefined))}
        init_types = [v.type for v in inits]
        init_locs = dict(self.def_locs)
        originals = {name: self.vars[name] for name in carried}
        saved_vars = self.vars
        self.vars = dict(saved_vars)

        if cond_node is not None:   # while: before region computes the condition
            before = Block(init_types, slots)
            self.bind_carried(carried, originals, before.args)
            with self.b.at(before):
                cond = self.visit(cond_node)
                if not isinstance(cond, Tensor):
                    cond = S.constant(self.b, bool(cond), T.i1)
                if cond.is_block:
                    raise self.error(f"a 'while' condition must be a scalar, got a tensor of shape "
                                     f"{list(cond.shape)} (reduce it first, e.g. with tl.max)", cond_node)
                cond = S.to_bool(self.b, cond)
                self.b.create("scf.condition", [cond.value] + list(before.args))
            body_block = Block(init_types, slots)
            args = body_block.args
        else:
            body_block = Block([bounds[0].type] + init_types, [iv_name] + slots)
            self.vars[iv_name] = Tensor(body_block.args[0])
            args = body_block.args[1:]
        self.bind_carried(carried, originals, args)
        with self.b.at(body_block):
            if iv_map is not None:          # the loop variable as the body sees it (a negative step)
                self.vars[iv_name] = iv_map(self.vars[iv_name])
            self.visit_stmts(body)
            yields = []
            for name in carried:
                v = self.vars.get(name)
                where, notes = self.carried_change_site(name, node, init_locs)
                if isinstance(originals[name], Aggregate):
                    yields.extend(self.aggregate_yields(name, originals[name], v, where, notes))
                    continue
                init = inits[len(yields)]
                if not isinstance(v, Tensor):
                    if not isinstance(v, (bool, int, float)):
                        raise self.error(f"loop-carried variable '{name}' holds {S.describe(originals[name])} "
                                         f"before the loop but becomes {S.describe(v)} inside it; a runtime "
                                         f"loop can only change numbers and tensors", where, notes)
                    if not literal_fits(v, init.type):
                        raise self.error(f"loop-carried variable '{name}' has type {init.type} before the loop "
                                         f"but becomes {S.describe(v)} inside it; give it its final type "
                                         f"before the loop", where, notes)
                    v = S.constant(self.b, v, init.type)
                if v.type != init.type:
                    hint = ("keep the buffers in their own variable and give the view another name"
                            if isinstance(init.type, T.MemDescType) else
                            "give it its final type before the loop (e.g. tl.zeros(..., dtype=...) or an "
                            "explicit .to(...))")
                    raise self.error(f"loop-carried variable '{name}' has type {init.type} before the loop "
                                     f"but {v.type} at the end of its body. Please make sure that the type "
                                     f"stays consistent across iterations: {hint}", where, notes)
                yields.append(v)
            loop_blocks = [before, body_block] if cond_node is not None else [body_block]
            dropped = self.drop_invariant_fields(fields, inits, yields, loop_blocks)
            self.b.create("scf.yield", [v.value for i, v in enumerate(yields) if i not in dropped])
        all_inits = inits
        slots = [v for i, v in enumerate(slots) if i not in dropped]
        inits = [v for i, v in enumerate(inits) if i not in dropped]
        init_types = [v.type for v in inits]
        body_vars = self.vars
        self.vars = saved_vars
        for name, value in body_vars.items():
            if name not in constexprs_before or name in carried or name == iv_name:
                continue
            previous = constexprs_before[name]
            if isinstance(value, Tensor) or not same_constexpr(value, previous):
                where, notes = self.carried_change_site(name, node, init_locs)
                raise self.error(f"'{name}' holds a compile-time value ({S.describe(previous)}) before this "
                                 f"runtime loop but {S.describe(value)} inside it; only numbers and "
                                 f"tensors can change in a runtime loop (use tl.static_range to unroll it)",
                                 where, notes)
        if cond_node is not None:
            op = self.b.create("scf.while", [v.value for v in inits], init_types, {},
                               [Region(before), Region(body_block)], result_names=slots)
        else:
            op = self.b.create("scf.for", [v.value for v in bounds + inits], init_types, dict(loop_attrs or {}),
                               [Region(body_block)], result_names=slots)
        results = iter(op.results)
        self.bind_carried(carried, originals,
                          [init.value if i in dropped else next(results) for i, init in enumerate(all_inits)])
        for name in assigned_names(body):
            if name not in carried and name not in saved_vars:
                self.vars[name] = Undefined(f"'{name}' is defined inside the loop at line "
                                             f"{self.src.loc(node).line} and not before it")
        if iv_name and iv_name not in saved_vars:
            self.vars[iv_name] = Undefined(f"the loop variable '{iv_name}' is not available after the loop")
