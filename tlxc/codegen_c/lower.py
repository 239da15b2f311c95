"""Lower one kernel's IR (with layouts) to C-style source text.

Every register tensor becomes a per-thread array ``T name[R]`` (R = the
layout's registers per thread); loops over registers are fully unrolled by
the device compiler, so the arrays live in registers.  Scalars are plain C
variables.  ``RULES`` maps each (op name, vendor) to one rendering function
(``rules_*.py``); a missing rule is a clear error naming the op and line.

Lowering rules (one per op and vendor)
--------------------------------------
``@lowering("op.name", ...)`` registers the shared rule of those ops: the one
every vendor uses unless it registers its own.  ``@lowering("op.name",
vendor="nvidia")`` registers a vendor's rule (in its backend's package,
``codegen_nvptx/`` or ``codegen_amdgcn/``), which takes the place of the
shared one for kernels lowered for that vendor.  The vendor of a lowering is
its target table's ``vendor`` (``CudaTarget.vendor == "nvidia"``), the same
word as ``tlxc.target.Target.vendor``.  A rule is registered when its module
is imported: a backend's renderer imports ``codegen_c.rules`` (the shared
rules) and its own rule modules.  Registering one (op, vendor) twice is an
error: a backend changes an op's lowering by registering its own rule, never
by replacing another's.
"""
from __future__ import annotations

import keyword
import re
from collections.abc import Callable

from ..errors import InternalCompilerError
from ..ir import layouts as L
from ..ir.core import Operation, Value
from ..ir.traits import ALLOCATION, TERMINATOR, has_trait
from ..ir.types import PointerType, ScalarType, TensorType
from ..passes.axis_info import AxisAnalysis
from ..target import vendors
from . import c_types as C
from .shared_order import SharedOrder

Rule = Callable[["KernelLowering", Operation], None]

# (op name, vendor) -> rule; vendor None: the shared rule, for every vendor without its own
RULES: dict[tuple[str, str | None], Rule] = {}


def lowering(*names: str, vendor: str | None = None):
    """Decorator: the rule that lowers the ops ``names``, shared (``vendor=None``) or
    ``vendor``'s own ("nvidia", "amd"), which wins over the shared one for that vendor."""
    if vendor is not None and vendor not in vendors():
        raise ValueError(f"unknown vendor '{vendor}' (known: {', '.join(vendors())})")

    def register(fn: Rule) -> Rule:
        for name in names:
            key = (name, vendor)
            if key in RULES and RULES[key] is not fn:
                old = RULES[key]
                raise ValueError(f"two {vendor or 'shared'} lowering rules for {name}: "
                                 f"{old.__module__}.{old.__qualname__} and {fn.__module__}.{fn.__qualname__}")
            RULES[key] = fn
        return fn
    return register


def rule_for(name: str, vendor: str) -> Rule | None:
    """The rule lowering op ``name`` for ``vendor``: its own, else the shared one, else None."""
    return RULES.get((name, vendor)) or RULES.get((name, None))


_C_RESERVED = set(keyword.kwlist) | {
    "int", "float", "double", "char", "short", "long", "unsigned", "signed", "bool", "void", "auto",
    "const", "static", "struct", "union", "enum", "new", "delete", "this", "template", "typename",
    "namespace", "register", "volatile", "default", "switch", "case", "goto", "do", "inline", "extern",
    "sizeof", "typedef", "true", "false", "private", "public", "protected", "virtual", "operator",
    "friend", "explicit", "mutable", "export", "restrict", "asm", "lane", "warp", "tid",
    "threadIdx", "blockIdx", "blockDim", "gridDim", "i", "j", "k"}


# A loop over more registers than this is unrolled only partly: a per-thread array that long
# cannot live in registers (255 per thread) and goes to local memory anyway, and NVRTC's time on
# a fully unrolled one grows faster than linearly (a 2**18-element arange on 4 warps: 90 s
# fully unrolled, 0.2 s unrolled by 8).
FULL_UNROLL_LIMIT = 256
PARTIAL_UNROLL = 8
# Nested loops multiply: the copies of a loop body that unrolling makes (the product of the
# unroll factors of the loops around it) stay within this bound, so the source NVRTC sees grows
# linearly with tensor size (a 512x512 tl.dot on mma.sync: 16384 inlined MMAs fully unrolled,
# NVRTC > 250 s).  Real tiles stay far below it.
NEST_UNROLL_LIMIT = 4096
_COUNTED_FOR = re.compile(r"for \(int \w+ = 0; \w+ < (\d+);")


class Emitter:
    """Indented lines of C with ``// file.py:LINE`` markers."""

    def __init__(self):
        self.lines: list[str] = []
        self.depth = 0
        self.last_marker = None
        self.unrolled: list[tuple[int, int]] = []     # (depth, unroll factor) of the open loops

    def line(self, text: str = "") -> None:
        if text.startswith("for ("):
            factor = self._bound_unroll(text)
            if text.endswith("{"):
                self.unrolled.append((self.depth, factor))
        self.lines.append("  " * self.depth + text if text else "")

    def _bound_unroll(self, header: str) -> int:
        """Bound the ``#pragma unroll`` before the loop ``header`` (by its trip count and by the
        loops around it); the copies of its body one iteration of the enclosing loop makes."""
        pragma = self.lines[-1].strip() if self.lines else ""
        if not pragma.startswith("#pragma unroll"):
            return 1
        match = _COUNTED_FOR.match(header)
        if match is None:
            return 1
        trip = int(match.group(1))
        factor = trip if pragma == "#pragma unroll" else min(trip, int(pragma.split()[2]))
        if pragma == "#pragma unroll" and trip > FULL_UNROLL_LIMIT:
            factor = PARTIAL_UNROLL
        outer = 1
        for depth, f in self.unrolled:
            if depth < self.depth:
                outer *= f
        factor = max(1, min(factor, NEST_UNROLL_LIMIT // outer))
        if factor < trip:
            self.lines[-1] = self.lines[-1].replace(pragma, f"#pragma unroll {factor}")
        return factor

    def open(self, text: str) -> None:
        self.line(text + " {")
        self.depth += 1

    def close(self, suffix: str = "") -> None:
        self.depth -= 1
        self.unrolled = [(d, f) for d, f in self.unrolled if d < self.depth]
        self.line("}" + suffix)

    def marker(self, loc) -> None:
        if loc is None:
            return
        key = (loc.file, loc.line)
        if key != self.last_marker:
            import os
            self.line(f"// {os.path.basename(loc.file)}:{loc.line}")
            self.last_marker = key


class Scope:
    """A group of warps that runs one stretch of code: the whole CTA, or one
    warp-group task.  Barriers inside it sync only its threads; layouts index
    its warps from 0; it gets its own shared-memory scratch."""

    def __init__(self, key: str, threads: int, bar_id: int | None, warp_var: str = "warp",
                 tid_var: str = "tid", warp_start: int = 0):
        self.key = key
        self.threads = threads
        self.bar_id = bar_id          # None: the whole CTA (__syncthreads)
        self.warp_var = warp_var
        self.tid_var = tid_var
        self.warp_start = warp_start
        self.prologue: list[str] = []
        self.thread_terms: dict[tuple, str] = {}
        self.scratch_bytes = 0
        self.task_name = "main"
        self.budget = 0               # a warp-specialized task's setmaxnreg registers (0: none)


class KernelLowering:
    """State for lowering one ``tl.kernel``: names, layouts, scratch, helpers."""

    def __init__(self, kernel: Operation, target):
        self.kernel = kernel
        self.target = target
        self.num_warps = kernel.attrs.get("num_warps", 4)
        self.launch_threads = 32 * self.num_warps     # a warp-specialized kernel: all its tasks' (rules_tlx)
        self.out = Emitter()
        self.names: dict[int, str] = {}
        self.used_names: set[str] = set()
        self.warp_size = target.warp_size
        self.scope = Scope("cta", self.warp_size * self.num_warps, None)
        self.scopes: list[Scope] = [self.scope]
        self.views: dict[int, tuple[str, tuple[int, ...]]] = {}   # memdesc value -> (pointer, strides)
        self.barrier_names: dict[int, tuple[str, str]] = {}        # barrier view -> (array name, index expr)
        self.view_align: dict[int, int] = {}                       # memdesc value -> known byte alignment
        self.view_swizzle: dict[int, int] = {}                     # memdesc value -> swizzle bytes (0: none)
        self.view_block: dict[int, tuple[int, int]] = {}           # column-blocked view -> (cols, block elems)
        self.tmem_views: dict[int, str] = {}                       # tensor-memory view -> its TMEM address
        self.reserved: dict[str, int] = {}                         # dedicated shared areas -> bytes
        self.overlay_bytes = 0                                     # scratch over dead buffers (from 0)
        self.metadata_extra: dict = {}     # what the lowering adds to the kernel's metadata (rules_tlx: tasks, notes)
        self.epilogue: list[str] = []                              # lines every thread runs at the end
        self.rule_state: dict[str, object] = {}                    # per-kernel state of a rules_* module
        self.axis = AxisAnalysis(kernel)
        self.shared_order = SharedOrder(kernel, getattr(target, "arch", ""), self.warp_size)
        self.counter = 0
        self.term_counter = 0

    @property
    def prologue(self) -> list[str]:
        return self.scopes[0].prologue

    @property
    def scratch_bytes(self) -> int:
        return sum(_align16(s.scratch_bytes) for s in self.scopes) + sum(map(_align16, self.reserved.values()))

    def sync(self) -> str:
        """A barrier over the current scope's threads."""
        return self.target.group_sync(self.scope)

    # -- names ---------------------------------------------------------------------------
    def fresh(self, hint: str | None, default: str = "v") -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", hint or default)
        if base[0].isdigit():
            base = "v" + base
        if base in _C_RESERVED or base.startswith("tlx_"):
            base += "_"
        name, n = base, 0
        while name in self.used_names:
            n += 1
            name = f"{base}_{n}"
        self.used_names.add(name)
        return name

    def define(self, value: Value, hint: str | None = None) -> str:
        name = self.fresh(hint or value.name_hint, "t" if isinstance(value.type, TensorType) else "s")
        self.names[id(value)] = name
        return name

    def alias(self, value: Value, name: str) -> None:
        self.names[id(value)] = name

    def name(self, value: Value) -> str:
        try:
            return self.names[id(value)]
        except KeyError:
            raise InternalCompilerError(f"value {value!r} used before its definition in codegen "
                                        f"(a tlxc bug)") from None

    def ref(self, value: Value, index: str = "i") -> str:
        """The storage expression of ``value`` (element ``index`` for tensors)."""
        return f"{self.name(value)}[{index}]" if isinstance(value.type, TensorType) else self.name(value)

    def cref(self, value: Value, index: str = "i") -> str:
        """The compute-type expression of ``value``."""
        return self.target.to_compute(self.ref(value, index), elem(value.type))

    # -- declarations --------------------------------------------------------------------
    def declare(self, value: Value, hint: str | None = None, init: str | None = None) -> str:
        name = self.define(value, hint)
        t = value.type
        if isinstance(t, TensorType):
            self.out.line(f"{C.storage_type(t.element)} {name}[{registers(t)}];")
        else:
            self.out.line(f"{C.storage_type(t)} {name}" + (f" = {init};" if init is not None else ";"))
        return name

    def for_registers(self, value_or_count, body: str) -> None:
        count = value_or_count if isinstance(value_or_count, int) else registers(value_or_count.type)
        if count == 1:
            self.out.line(body.replace("[i]", "[0]").replace("(i)", "(0)"))
            return
        self.out.line("#pragma unroll")
        self.out.line(f"for (int i = 0; i < {count}; ++i) {body}")

    def assign_elementwise(self, result: Value, expr_of: Callable[[str], str], hint=None) -> None:
        """``result[i] = expr_of("i")`` (storage-typed expression) for every register."""
        name = self.declare(result, hint)
        if isinstance(result.type, TensorType):
            self.for_registers(result, f"{name}[i] = {expr_of('i')};")
        else:
            self.out.line(f"{name} = {expr_of('0')};")

    # -- layouts: per-thread coordinates -------------------------------------------------------
    def thread_term(self, layout: L.Layout, what: str, dim: int | None = None) -> str:
        """A prologue variable holding the lane/warp part of a coordinate
        (``what='coord'``, dimension ``dim``) or of the flat index (``'flat'``)."""
        key = (layout, what, dim)
        if key in self.scope.thread_terms:
            return self.scope.thread_terms[key]
        xor = not layout.xor_equals_add(dim) if what == "coord" else True
        terms = []
        for input_dim, var in (("lane", "lane"), ("warp", self.scope.warp_var)):
            for bit, basis in enumerate(layout.bases(input_dim)):
                value = basis[dim] if what == "coord" else flat_index(basis, layout.shape)
                if value:
                    terms.append(f"(((({var}) >> {bit}) & 1) * {value})")
        name = f"tc{self.term_counter}" if what == "coord" else f"tf{self.term_counter}"
        self.term_counter += 1
        op = " ^ " if xor else " + "
        self.scope.prologue.append(f"const int {name} = {op.join(terms) if terms else '0'};")
        self.scope.thread_terms[key] = name
        return name

    def coord_expr(self, layout: L.Layout, dim: int, reg: str = "i") -> str:
        """Coordinate along ``dim`` of register ``reg`` of this thread."""
        thread = self.thread_term(layout, "coord", dim)
        joiner = " + " if layout.xor_equals_add(dim) else " ^ "
        reg_part = register_part(layout, lambda b: b[dim], reg, joiner)
        return f"({thread}{joiner}({reg_part}))" if reg_part != "0" else thread

    def flat_expr(self, layout: L.Layout, reg: str = "i") -> str:
        thread = self.thread_term(layout, "flat")
        reg_part = register_part(layout, lambda b: flat_index(b, layout.shape), reg)
        return f"({thread} ^ ({reg_part}))" if reg_part != "0" else thread

    def need_scratch(self, nbytes: int) -> str:
        """The current scope's scratch area (conversions, reductions), at least ``nbytes``."""
        self.scope.scratch_bytes = max(self.scope.scratch_bytes, nbytes)
        return f"tlx_scratch_{self.scope.key}"

    def need_scratch_over_dead_buffers(self, op: Operation, nbytes: int) -> str:
        """Scratch for ``op`` at the start of shared memory, over the kernel's buffers, when
        they are all the compiler's own ``tl.dot`` operand buffers and every op that touches
        shared memory asynchronously or through a buffer (any ``tlx.*`` op) comes before
        ``op`` at the kernel's top level: a matmul's epilogue conversion then reuses the
        operand ring instead of adding its size.  The caller syncs before writing (every
        warp is past its wgmma and cp.async drains by then).  The ordinary scratch when not."""
        # (an area larger than the dead buffers would reach the codegen's own reserved areas)
        if self.scope is not self.scopes[0] or nbytes > self.kernel.attrs.get("shared_bytes", 0) \
                or not self._buffers_dead_before(op):
            return self.need_scratch(nbytes)
        self.overlay_bytes = max(self.overlay_bytes, nbytes)
        return "tlx_smem"

    def _buffers_dead_before(self, op: Operation) -> bool:
        top = self.kernel.regions[0].ops
        position = next((i for i, o in enumerate(top) if o is op), None)
        if position is None:
            return False
        allocs = [o for o in self.kernel.walk() if has_trait(o, ALLOCATION)]
        if not allocs or any(o.name != "tlx.local_alloc" or "dot_operand" not in o.attrs for o in allocs):
            return False
        last = max(i for i, o in enumerate(top) if any(inner.name.startswith("tlx.") for inner in o.walk()))
        return position > last

    def reserve_shared(self, name: str, nbytes: int) -> str:
        """A shared-memory area of the kernel's own (``unsigned char* name``, 16-byte aligned,
        after the user's buffers) that, unlike the scratch areas, no other use shares."""
        self.reserved[name] = max(self.reserved.get(name, 0), nbytes)
        return name

    def scratch_definitions(self, user_bytes: int) -> list[str]:
        """``unsigned char* tlx_scratch_<scope>`` for every scope, then the reserved areas,
        after the user's buffers."""
        lines, offset = [], _align16(user_bytes)
        for scope in self.scopes:
            if scope.scratch_bytes:
                lines.append(f"unsigned char* tlx_scratch_{scope.key} = tlx_smem + {offset};")
                offset += _align16(scope.scratch_bytes)
        for name, nbytes in self.reserved.items():
            lines.append(f"unsigned char* {name} = tlx_smem + {offset};")
            offset += _align16(nbytes)
        return lines

    def enter_scope(self, scope: Scope) -> tuple:
        """Lower the following code in ``scope``; returns a token for ``exit_scope``."""
        self.scopes.append(scope)
        saved = self.scope
        self.scope = scope
        return saved, len(self.out.lines), self.out.depth

    def exit_scope(self, token) -> None:
        """Insert the scope's prologue (its thread terms) where the scope began."""
        saved, start, depth = token
        lines = ["  " * depth + p for p in self.scope.prologue]
        self.out.lines[start:start] = lines
        self.scope = saved

    # -- driver ----------------------------------------------------------------------------------
    def lower_block(self, block) -> None:
        for op in block.ops:
            self.lower_op(op)

    def lower_block_until_terminator(self, block) -> None:
        for op in block.ops:
            if not op.is_terminator:
                self.lower_op(op)

    def error_unsupported(self, op: Operation, what: str):
        from ..errors import CompilationError
        return CompilationError(f"{what} is not supported on {self.target.arch}", op.loc)

    def lower_op(self, op: Operation) -> None:
        rule = rule_for(op.name, self.target.vendor)
        if rule is None:
            no_rule = getattr(self.target, "no_rule_error", None)      # a target that says why (HipTarget)
            if no_rule is not None:
                raise no_rule(op)
            where = f" ({op.loc})" if op.loc else ""
            raise InternalCompilerError(f"no {self.target.name} lowering for {op.name}{where}", op.loc)
        if not has_trait(op, TERMINATOR):
            self.out.marker(op.loc)
        self.emit_orderings(self.shared_order.before.get(id(op), ()), op)
        rule(self, op)
        self.emit_orderings(self.shared_order.after.get(id(op), ()), op)

    def emit_orderings(self, orderings, op: Operation) -> None:
        """The fences and barriers ``shared_order`` decided around ``op``."""
        why = _ORDERING_WHY.get(op.name, "")
        for what in orderings:
            text = self.target.fence("async_shared") if what == "fence" else self.sync()
            self.out.line(f"{text}  // {what}: {why}" if why else text)


_ORDERING_WHY = {
    "tlx.async_wait_group": "every thread's cp.async data, visible to all threads and the async proxy",
    "tlx.async_dot_wait": "every warpgroup's retired wgmma reads, before shared memory is refilled",
    "tlx.async_dot": "local_store data, visible to the wgmma (async proxy)",
    "tlx.async_descriptor_store": "local_store data, visible to the TMA store (async proxy)",
}


# -- layout helpers ------------------------------------------------------------------------

def _align16(n: int) -> int:
    return (n + 15) // 16 * 16


def elem(t):
    return t.element if isinstance(t, TensorType) else t


def registers(t) -> int:
    if not isinstance(t, TensorType):
        return 1
    if t.layout is None:
        raise InternalCompilerError(f"tensor {t} has no layout at codegen (a tlxc bug)")
    return t.layout.num_registers


def flat_index(coords, shape) -> int:
    flat = 0
    for c, s in zip(coords, shape):
        flat = flat * s + c
    return flat


def register_part(layout: L.Layout, project, reg: str, joiner: str = " ^ ") -> str:
    """The XOR of the projected register bases selected by the bits of ``reg``
    (a C expression that folds to a constant once the register loop unrolls)."""
    terms = []
    for bit, basis in enumerate(layout.register):
        value = project(basis)
        if value:
            terms.append(f"((({reg}) >> {bit} & 1) * {value})")
    return joiner.join(terms) if terms else "0"


def same_thread_map(src: L.Layout, dst: L.Layout, project=None) -> list[int] | None:
    """For each register of ``dst``, the register of ``src`` in the same thread
    holding that element (after ``project`` of dst coordinates), or None if some
    element lives in another thread."""
    dst_table = dst.coords_table()          # [W, Lanes, R, rank]
    src_table = src.coords_table()
    if project is not None:
        dst_table = project(dst_table)
    if dst_table.shape[:2] != src_table.shape[:2] or dst_table.shape[3:] != src_table.shape[3:]:
        return None
    # A register's coordinates in every thread, as one key: a dictionary lookup per dst
    # register keeps this linear in the tensor's size (comparing all pairs was quadratic).
    first_src = {}
    for r, key in enumerate(_register_keys(src_table)):
        first_src.setdefault(key, r)
    mapping = []
    for key in _register_keys(dst_table):
        hit = first_src.get(key)
        if hit is None:
            return None
        mapping.append(hit)
    return mapping


def _register_keys(table) -> list[bytes]:
    """Per register of a ``[W, Lanes, R, rank]`` coordinate table, its ``[W, Lanes, rank]`` slab as bytes."""
    import numpy as np
    by_register = np.ascontiguousarray(np.asarray(table, dtype=np.int64).transpose(2, 0, 1, 3))
    return [row.tobytes() for row in by_register]


def const_table(lw: KernelLowering, values: list[int], hint: str = "idx") -> str:
    """Declare a local constant index table; indexed with unrolled constants it folds away."""
    name = lw.fresh(hint)
    lw.out.line(f"const int {name}[{len(values)}] = {{{', '.join(map(str, values))}}};")
    return name


def is_identity(mapping: list[int]) -> bool:
    return mapping == list(range(len(mapping)))


__all__ = ["RULES", "KernelLowering", "PointerType", "ScalarType", "lowering", "rule_for"]
