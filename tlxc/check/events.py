"""Protocol events: each task's barrier, named-barrier and shared-memory
operations in program order, with their slot indices and phases evaluated.

The kernel is evaluated abstractly: integer scalars are computed exactly (C
semantics, wrapped to their type), everything else -- register tensors,
floats, loads, program ids, kernel arguments -- is ``UNKNOWN``.  Data
operations are not executed.  A loop whose bounds are unknown is *pinned* to a
trip count chosen by the caller (one per scenario): the unknown bound becomes
a constant (``lb`` 0, ``step`` 1, ``ub = lb + trips * step``), recorded in
``pins`` so that every task that loops over the same bound values runs the
same number of iterations.

A task's events do not depend on how tasks interleave (a barrier wait
returns no value), so they are computed once per scenario and the
simulator (``simulate.py``) replays them under several schedules.

When the protocol depends on something unknown -- a slot index, a phase, a
predicate, or a branch around a barrier operation -- the collector raises
``Undecidable`` naming the line; ``tlxc check --run`` decides such kernels
on the interpreter.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Location
from ..ir.core import Operation, Value
from ..ir.ops.task import warp_size
from ..ir.ops.tcgen05 import place_tensor_memory, tmem_columns, tmem_groups
from ..ir.traits import BULK_STORE, CONTROL_FLOW, TERMINATOR, has_trait
from ..ir.types import ScalarType, TensorType

MAX_TRIPS = 1024              # iterations of one loop execution
MAX_QUIET_TRIPS = 64          # iterations of a loop without protocol operations worth evaluating
MAX_EVENTS = 20000            # events of one task


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


class Undecidable(Exception):
    """The protocol depends on a runtime value; ``message`` says which and where."""

    def __init__(self, message: str, loc: Location | None):
        super().__init__(message)
        self.message = message
        self.loc = loc


class TooLong(Exception):
    """The bounded unrolling exceeded its budget."""

    def __init__(self, message: str, loc: Location | None):
        super().__init__(message)
        self.message = message
        self.loc = loc


# -- what the events talk about -----------------------------------------------------------------
@dataclass(eq=False)
class BarrierArray:
    op: Operation
    name: str
    num: int
    arrive_count: int
    per_thread: bool

    @property
    def loc(self) -> Location | None:
        return self.op.loc

    def label(self, slot: int | None = None) -> str:
        return f"'{self.name}'" if slot is None else f"'{self.name}'[{slot}]"


@dataclass(eq=False)
class BufferArray:
    op: Operation
    name: str
    num: int
    shape: tuple[int, ...]

    def label(self, slot: int | None = None) -> str:
        return f"'{self.name}'" if slot is None else f"'{self.name}'[{slot}]"


@dataclass(frozen=True)
class BarrierRef:
    array: BarrierArray
    index: object


@dataclass(eq=False)
class TmemGroupArray(BufferArray):
    """The tensor memory of an alias group as one buffer of 128 lanes x its 32-bit columns;
    accesses carry the band of columns they touch as their box."""

    aliases: tuple[str, ...] = ()

    def label(self, slot: int | None = None) -> str:
        return f"'{self.name}' (tensor memory shared with {', '.join(self.aliases)})"


@dataclass(eq=False)
class TmemAlias:
    """A tensor-memory allocation of an alias group (``reuse=``, a tmem storage_alias_spec):
    its buffers are bands of ``words`` 32-bit columns of the group's one array (``group``,
    128 lanes x the group's columns), ``per`` elements to a column, so accesses through
    different members meet where their columns do."""
    group: BufferArray
    words: int
    per: int
    num: int


@dataclass(frozen=True)
class BufferRef:
    array: BufferArray
    index: object
    box: tuple | None        # ((start, size), ...) inside the slot; None: all of it
    per: int = 1             # elements per unit of the box's last axis (a tensor-memory alias: per column)


@dataclass(eq=False)
class Event:
    kind: str                # wait arrive expect nwait narrive copy commit waitgroup read write spawn join
    #                          tma tmawrite tmastore storewait fence mma mmacommit mmawait tcread tcacc tcdone
    #                          tcsync
    op: Operation | None
    task: int
    array: object = None     # BarrierArray or BufferArray
    slot: int | None = None
    parity: int = 0
    amount: int = 0          # arrive count, expected bytes, named-barrier threads, wait_group pendings
    ident: int = 0           # named barrier id
    box: tuple | None = None
    flips: int = 0           # how often the phase value was flipped since the task started
    iteration: tuple = ()    # iteration numbers of the enclosing loops
    bindings: tuple = ()     # ((name, value), ...) of the index/phase expressions' leaves
    tasks: tuple = ()        # spawn: indices of the tasks it starts

    @property
    def loc(self) -> Location | None:
        return self.op.loc if self.op is not None else None

    @property
    def key(self):
        return (self.array, self.slot)


@dataclass(eq=False)
class TaskEvents:
    index: int
    name: str
    warps: int
    replica: int | None = None
    parent: int | None = None
    events: list = field(default_factory=list)
    region: object = None
    base: str | None = None        # the label of the task it is a replica of (TaskInfo.base_label)
    lanes: int = 32                # threads per warp: 64 on AMD (ir/ops/task.py: warp_size)

    @property
    def threads(self) -> int:
        return self.warps * self.lanes

    @property
    def label(self) -> str:
        return f"task '{self.name}'"


# -- op classes ---------------------------------------------------------------------------------
SYNC_OPS = frozenset({"tlx.barrier_wait", "tlx.barrier_arrive", "tlx.barrier_expect_bytes",
                      "tlx.named_barrier_wait", "tlx.named_barrier_arrive", "tlx.async_commit_group",
                      "tlx.async_wait_group", "tlx.async_tasks", "tlx.async_descriptor_load",
                      "tlx.async_dot_wait", "tlx.tcgen05_mma", "tlx.tcgen05_commit", "tlx.async_bulk_load",
                      # they complete bytes on a barrier (a peer's, or the CLC answer's)
                      "tlx.async_remote_shmem_store", "tlx.async_remote_shmem_copy", "tlx.clc_try_cancel",
                      "tlx.barrier_complete_tx"})
DATA_OPS = frozenset({"tlx.async_load", "tlx.local_load", "tlx.local_store", "tlx.async_dot",
                      "tlx.async_descriptor_store", "tlx.fence", "tlx.async_bulk_store",
                      "tlx.async_descriptor_store_wait"})
PROTOCOL_OPS = SYNC_OPS | DATA_OPS


def contains(op: Operation, names: frozenset, memo: dict) -> bool:
    key = (id(op), names)
    if key not in memo:
        memo[key] = op.name in names or (has_trait(op, CONTROL_FLOW) or op.name == "tlx.async_tasks") and any(
            contains(inner, names, memo) for region in op.regions for inner in region.ops)
    return memo[key]


def kernel_uses_protocol(kernel: Operation) -> bool:
    return any(op.name in PROTOCOL_OPS for op in kernel.walk())


# -- integer arithmetic --------------------------------------------------------------------------
def _wrap(value: int, t) -> int:
    if not isinstance(t, ScalarType) or not t.is_integer:
        return value
    return _wrap_bits(value, t.bits, t.is_signed, t.is_boolean)


def _wrap_bits(value: int, bits: int, signed: bool, boolean: bool) -> int:
    """``value`` as an integer of ``bits`` bits (two's complement when ``signed``), or a bool."""
    if boolean:
        return int(value) & 1
    value &= (1 << bits) - 1
    if signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def _unsigned(value: int, t) -> int:
    return value & ((1 << t.bits) - 1) if isinstance(t, ScalarType) and t.is_unsigned else value


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


def _binary(name: str, a: int, b: int, t):
    if name == "add":
        return a + b
    if name == "sub":
        return a - b
    if name == "mul":
        return a * b
    if name in ("div", "rem"):
        if b == 0:
            return UNKNOWN
        a, b = _unsigned(a, t), _unsigned(b, t)
        q = _c_div(a, b)
        return q if name == "div" else a - b * q
    if name == "min":
        return min(_unsigned(a, t), _unsigned(b, t))
    if name == "max":
        return max(_unsigned(a, t), _unsigned(b, t))
    if name == "and":
        return a & b
    if name == "or":
        return a | b
    if name == "xor":
        return a ^ b
    if name == "shl":
        return 0 if b >= t.bits else a << b
    if name == "shr":
        if t.is_unsigned:
            return 0 if b >= t.bits else _unsigned(a, t) >> b
        return a >> min(b, t.bits - 1)
    return UNKNOWN


def _is_int_scalar(t) -> bool:
    return isinstance(t, ScalarType) and t.is_integer


class _ArithPlan:
    """What an ``arith.*`` op's evaluation needs that does not change between runs of it: its
    integer scalar result (None when it has none), its name after ``arith.``, its constant, its
    comparison, its attributes as part of a structural name, and the wrap to its type's width."""
    __slots__ = ("attrs_key", "bits", "boolean", "constant", "int_source", "name", "predicate", "result", "signed")

    @classmethod
    def of(cls, op: Operation) -> _ArithPlan:
        plan = cls()
        result = op.results[0] if len(op.results) == 1 else None
        plan.result = result if result is not None and _is_int_scalar(result.type) else None
        plan.name = op.name.split(".", 1)[1]
        value = op.attrs.get("value")
        plan.constant = int(value) if plan.name == "constant" and isinstance(value, (bool, int)) else UNKNOWN
        plan.int_source = bool(op.operands) and _is_int_scalar(op.operands[0].type)
        plan.predicate = _CMP.get(op.attrs.get("predicate")) if plan.name == "cmp" else None
        plan.attrs_key = repr(sorted(op.attrs.items()))
        t = plan.result.type if plan.result is not None else None
        plan.boolean = bool(t is not None and t.is_boolean)
        plan.bits = t.bits if t is not None else 0
        plan.signed = bool(t is not None and t.is_signed)
        return plan

    def wrap(self, value: int) -> int:
        """``_wrap(value, type)`` for the result's type."""
        return _wrap_bits(value, self.bits, self.signed, self.boolean)


# -- the collector -------------------------------------------------------------------
class EventCollector:
    """The protocol events of one kernel for one scenario (``trips``: iterations of every loop
    whose bounds are unknown).  ``pins`` is shared across calls so that a bound
    pinned while evaluating one task holds for the others."""

    def __init__(self, kernel: Operation, trips: int, pins: dict[int, int], memo: dict | None = None):
        self.kernel = kernel
        self.trips = trips
        self.pins = pins
        self.memo = memo if memo is not None else {}
        self.env: dict[int, object] = {}
        self.flips: dict[int, int] = {}
        self.arrays: dict = {}     # id(allocation op) -> its array; tensor-memory alias groups (tmem_alias)
        self.tasks: list[TaskEvents] = []
        self.current: TaskEvents | None = None
        self.iterations: list[int] = []
        self.recording = True
        self.pinned = False            # whether a loop bound had to be pinned
        # Unknown integers get a structural name (value numbering): the op and the names or
        # values of its operands, interned to a small int shared through ``pins``.  Two tasks
        # that compute the same bound from the same inputs (a persistent kernel's per-item
        # trip count, computed inside each task's loop) then share its pinned value.
        self.sym: dict[int, int] = {}
        self.interned = pins.setdefault("__symbols__", {})
        self.addresses: dict[int, tuple] = {}     # scalar pointer -> (base key, constant offset, other terms)
        self.arith_plans: dict[int, _ArithPlan] = self.memo.setdefault("arith plans", {})   # by id(op)
        self.live_ops: dict[int, list[Operation]] = self.memo.setdefault("live ops", {})    # by id(block)
        self.missed: dict = {}             # pin key -> lookups that found no pin (settled())
        self.pinned_keys: list = []        # the keys this run pinned, in order

    # -- driver ----------------------------------------------------------------------------------
    def collect(self) -> list[TaskEvents]:
        main = TaskEvents(0, "main", self.kernel.attrs.get("num_warps", 4), lanes=warp_size(self.kernel))
        self.tasks.append(main)
        self.current = main
        body = self.kernel.regions[0].block
        for i, arg in enumerate(body.args):
            self.env[id(arg)] = UNKNOWN
            self.name_unknown(arg, ("arg", i))
        self.run_block(body)
        return self.tasks

    def value(self, v: Value):
        name = self.sym.get(id(v))
        key = id(v) if name is None else ("sym", name)
        pinned = self.pins.get(key)
        if pinned is not None:
            return pinned
        missed = self.missed
        missed[key] = missed.get(key, 0) + 1
        return self.env.get(id(v), UNKNOWN)

    def settled(self) -> bool:
        """Whether running this scenario again with the pins now known would repeat this run: no
        lookup of a pin's key missed before the pin was set (the loop's own bound lookup aside)."""
        return len(set(self.pinned_keys)) == len(self.pinned_keys) and \
            all(self.missed.get(key, 0) == 1 for key in self.pinned_keys)

    def name_unknown(self, v: Value, key: tuple) -> None:
        """Give the unknown value ``v`` the structural name ``key``."""
        self.sym[id(v)] = self.interned.setdefault(key, len(self.interned))

    def operand_key(self, v: Value):
        value = self.value(v)
        if value is not UNKNOWN and isinstance(value, int):
            return ("c", value)
        return ("s", self.sym[id(v)]) if id(v) in self.sym else ("v", id(v))

    def set(self, v: Value, value, flips: int = 0) -> None:
        self.env[id(v)] = value
        self.sym.pop(id(v), None)        # a new value: its structural name, if any, is given after
        if flips:
            self.flips[id(v)] = flips
        else:
            self.flips.pop(id(v), None)

    def record(self, kind: str, op: Operation | None, **fields) -> Event | None:
        if not self.recording:
            return None
        task = self.current
        if len(task.events) >= MAX_EVENTS:
            raise TooLong(f"{task.label} executes more than {MAX_EVENTS} protocol operations", op.loc if op else None)
        event = Event(kind, op, task.index, iteration=tuple(self.iterations), **fields)
        task.events.append(event)
        return event

    # -- blocks ----------------------------------------------------------------------------------
    def run_block(self, block) -> list | None:
        """Run a block's ops; returns the values its terminator yields.  Ops whose run would only
        set their results unknown (tensor arithmetic, most of a kernel) are left out: a value
        nothing set reads as unknown anyway (``value``)."""
        ops = self.live_ops.get(id(block))
        if ops is None:
            ops = self.live_ops[id(block)] = [op for op in block.ops if not _inert(op)]
        for op in ops:
            if has_trait(op, TERMINATOR) and op.name != "tl.return":
                return [self.value(v) for v in op.operands]
            if op.name == "tl.return":
                return None
            self.run_op(op)
        return None

    def yielded_flips(self, block) -> list[int]:
        term = block.terminator
        return [self.flips.get(id(v), 0) for v in term.operands] if term is not None else []

    def yielded_names(self, block) -> list:
        term = block.terminator
        return [self.sym.get(id(v)) for v in term.operands] if term is not None else []

    def run_op(self, op: Operation) -> None:
        handler = _HANDLERS.get(op.name)
        if handler is not None:
            handler(self, op)
            return
        if op.name.startswith("arith."):
            self.arith(op)
            return
        for r in op.results:
            self.set(r, UNKNOWN)
        if len(op.results) != 1 or isinstance(op.results[0].type, TensorType):
            return
        if op.name in ("tl.program_id", "tl.num_programs"):
            self.name_unknown(op.results[0], (op.name, repr(sorted(op.attrs.items()))))
        elif op.name == "tl.addptr":
            self.name_address(op)
        elif op.name == "tl.load" and self.read_only(op.operands[0]):
            # a scalar loaded from memory the kernel never writes is a function of its address:
            # tasks that load the same element (a schedule table) share the value's pins
            self.name_unknown(op.results[0], (op.name, repr(sorted(op.attrs.items())),
                                              tuple(self.operand_key(v) for v in op.operands)))

    def name_address(self, op: Operation) -> None:
        """A scalar ``tl.addptr`` chain is named by its base and the sum of its offsets
        (constants added up, the other terms as a sorted list), so ``p + row + 1 + r`` and
        ``p + row + r + 1 + 0`` name the same address."""
        base, offset = op.operands[:2]
        form = self.addresses.get(id(base), (self.operand_key(base), 0, ()))
        value = self.value(offset)
        if isinstance(value, int):
            form = (form[0], form[1] + value, form[2])
        else:
            form = (form[0], form[1], tuple(sorted(form[2] + (self.operand_key(offset),), key=repr)))
        self.addresses[id(op.results[0])] = form
        self.name_unknown(op.results[0], ("address",) + form)

    def read_only(self, pointer: Value) -> bool:
        """Whether ``pointer`` derives from a kernel parameter that no store, atomic or TMA
        store of the kernel writes through (distinct parameters are assumed not to alias)."""
        written = self.memo.get("written roots")
        if written is None:
            written = self.memo["written roots"] = _written_roots(self.kernel)
        root = _pointer_root(pointer)
        return root is not None and root in self.kernel.regions[0].block.args and \
            written is not None and id(root) not in written

    # -- arithmetic ------------------------------------------------------------------------------
    def arith(self, op: Operation) -> None:
        plan = self.arith_plans.get(id(op))
        if plan is None:
            plan = self.arith_plans[id(op)] = _ArithPlan.of(op)
        result = plan.result
        if result is None:                      # no single integer scalar result: unknown
            for r in op.results:
                self.set(r, UNKNOWN)
            return
        name, t = plan.name, result.type
        out, f = UNKNOWN, 0
        if name == "constant":
            out = plan.constant
        else:
            values = [self.value(v) for v in op.operands]
            if name == "select":
                cond, a, b = values
                if cond is not UNKNOWN:
                    out, f = (a, self.flips.get(id(op.operands[1]), 0)) if cond else \
                        (b, self.flips.get(id(op.operands[2]), 0))
                elif a is not UNKNOWN and a == b:
                    out = a
            elif name == "cast":
                if values[0] is not UNKNOWN and plan.int_source:
                    out = int(values[0] != 0) if t.is_boolean else values[0]
                    f = self.flips.get(id(op.operands[0]), 0)
            elif name == "cmp":
                a, b = values
                if a is not UNKNOWN and b is not UNKNOWN:
                    src = op.operands[0].type
                    out = int(plan.predicate(_unsigned(a, src), _unsigned(b, src)))
            elif name in ("not", "neg", "abs"):
                a = values[0]
                if a is not UNKNOWN:
                    out = (1 - a if t.is_boolean else ~a) if name == "not" else (-a if name == "neg" else abs(a))
                    f = self.flips.get(id(op.operands[0]), 0) + (name == "not")
            elif len(values) == 2:
                a, b = values
                if a is not UNKNOWN and b is not UNKNOWN:
                    out = _binary(name, a, b, t)
                    f = _flips(name, a, b, out, [self.flips.get(id(v), 0) for v in op.operands])
        if out is not UNKNOWN:
            out = plan.wrap(out)
        self.set(result, out, f if out is not UNKNOWN else 0)
        if out is UNKNOWN:
            self.name_unknown(result, (op.name, plan.attrs_key, tuple(self.operand_key(v) for v in op.operands)))

    # -- allocations and views -------------------------------------------------------------------
    def alloc_barriers(self, op: Operation) -> None:
        t = op.results[0].type
        array = self.arrays.get(id(op))
        if array is None:
            array = self.arrays[id(op)] = BarrierArray(op, op.results[0].name_hint or "mbarrier", t.num,
                                                       op.attrs["arrive_count"], t.per_thread)
        self.set(op.results[0], array)

    def local_alloc(self, op: Operation) -> None:
        t = op.results[0].type
        array = self.arrays.get(id(op))
        if array is None:
            array = self.arrays[id(op)] = self.tmem_alias(op) or BufferArray(
                op, op.results[0].name_hint or "buffer", t.num, tuple(t.shape))
        self.set(op.results[0], array)

    def tmem_alias(self, op: Operation) -> TmemAlias | None:
        """A member of a tensor-memory alias group, or None (an allocation of its own)."""
        t = op.results[0].type
        if t.storage != "tmem":
            return None
        base = op.operands[0].owner if op.operands else op
        kernel = base.parent_op()
        if kernel is None:
            return None
        groups = self.arrays.setdefault("tmem groups", {})
        if id(kernel) not in groups:
            _columns, widths, _total = place_tensor_memory(kernel)
            groups[id(kernel)] = (widths, tmem_groups(kernel))
        widths, members = groups[id(kernel)]
        if id(base) not in members or id(base) not in widths:
            return None
        group = self.arrays.get(("tmem group", id(base)))
        if group is None:
            names = [m.results[0].name_hint or "?" for m in [base, *members[id(base)]]]
            group = self.arrays[("tmem group", id(base))] = TmemGroupArray(
                base, names[0], 1, (t.shape[0], widths[id(base)]), tuple(names[1:]))
        return TmemAlias(group, tmem_columns(t), 4 // t.element.bytes, t.num)

    def local_view(self, op: Operation) -> None:
        src, index = self.value(op.operands[0]), self.value(op.operands[1])
        if isinstance(src, BarrierArray):
            self.set(op.results[0], BarrierRef(src, index))
        elif isinstance(src, BufferArray):
            self.set(op.results[0], BufferRef(src, index, None))
        elif isinstance(src, TmemAlias):
            if index is UNKNOWN or not isinstance(index, int) or not 0 <= index < src.num:
                self.set(op.results[0], BufferRef(src.group, UNKNOWN, None, src.per))
                return
            lanes = src.group.shape[0]
            self.set(op.results[0], BufferRef(src.group, 0, ((0, lanes), (index * src.words, src.words)), src.per))
        else:
            self.set(op.results[0], UNKNOWN)

    def local_slice(self, op: Operation) -> None:
        src = self.value(op.operands[0])
        if not isinstance(src, BufferRef):
            self.set(op.results[0], UNKNOWN)
            return
        offsets = [self.value(v) for v in op.operands[1:]]
        shape = list(op.results[0].type.shape)
        if any(o is UNKNOWN for o in offsets):
            self.set(op.results[0], BufferRef(src.array, src.index, src.box if src.per > 1 else None, src.per))
            return
        base = src.box or tuple((0, d) for d in src.array.shape)
        if len(base) != len(offsets):
            self.set(op.results[0], BufferRef(src.array, src.index, None))
            return
        if src.per > 1:         # a packed tensor-memory alias: the box counts 32-bit columns
            if offsets[-1] % src.per or shape[-1] % src.per:
                self.set(op.results[0], BufferRef(src.array, src.index, src.box, src.per))
                return
            offsets[-1] //= src.per
            shape[-1] //= src.per
        box = tuple((start + o, size) for (start, _), o, size in zip(base, offsets, shape))
        self.set(op.results[0], BufferRef(src.array, src.index, box, src.per))

    def whole_view(self, op: Operation) -> None:
        src = self.value(op.operands[0])
        if isinstance(src, BufferRef) and isinstance(src.array, TmemGroupArray):
            # a view of a tensor-memory alias keeps its band of columns (a reinterpretation
            # moves no bits)
            self.set(op.results[0], BufferRef(src.array, src.index, src.box, src.per))
            return
        self.set(op.results[0], BufferRef(src.array, src.index, None) if isinstance(src, BufferRef) else UNKNOWN)

    # -- barriers --------------------------------------------------------------------------------
    def predicate(self, op: Operation) -> bool:
        if not op.attrs.get("has_pred"):
            return True
        value = self.value(op.operands[-1])
        if value is UNKNOWN:
            raise Undecidable(f"the predicate of {_op_label(op)} depends on runtime values", op.loc)
        return bool(value)

    def barrier(self, op: Operation, operand: int = 0) -> tuple[BarrierArray, int]:
        ref = self.value(op.operands[operand])
        if not isinstance(ref, BarrierRef):
            raise Undecidable(f"the barrier of {_op_label(op)} is not a view of a barrier array", op.loc)
        if ref.index is UNKNOWN:
            raise Undecidable(f"the slot index of {ref.array.label()} in {_op_label(op)} depends on runtime "
                              f"values", op.loc)
        return ref.array, ref.index

    def bindings(self, values: list[Value]) -> tuple:
        found: dict[str, object] = {}
        for v in values:
            _leaves(v, self, found, 4)
        return tuple(found.items())

    def barrier_wait(self, op: Operation) -> None:
        array, slot = self.barrier(op)
        phase = self.value(op.operands[1])
        if phase is UNKNOWN:
            raise Undecidable(f"the phase of {_op_label(op)} on {array.label()} depends on runtime values", op.loc)
        if self.predicate(op):
            self.record("wait", op, array=array, slot=slot, parity=phase & 1,
                        flips=self.flips.get(id(op.operands[1]), 0),
                        bindings=self.bindings([op.operands[0].owner.operands[1], op.operands[1]]
                                               if _is_view(op.operands[0]) else [op.operands[1]]))

    def remote_view(self, op: Operation) -> None:
        """Clusters are evaluated as symmetric: every CTA runs the same code, so the arrive a
        peer makes on this CTA's barrier is the one this CTA makes on the peer's: a
        remote view evaluates as the local barrier."""
        self.set(op.results[0], self.value(op.operands[0]))

    def barrier_arrive(self, op: Operation) -> None:
        array, slot = self.barrier(op)
        local = _local_barrier(op.operands[0])
        if self.predicate(op):
            self.record("arrive", op, array=array, slot=slot, amount=op.attrs.get("count", 1),
                        bindings=self.bindings([local.owner.operands[1]] if _is_view(local) else []))

    def barrier_expect_bytes(self, op: Operation) -> None:
        array, slot = self.barrier(op)
        if self.predicate(op):
            self.record("expect", op, array=array, slot=slot, amount=op.attrs.get("bytes", 0))

    def named_barrier(self, op: Operation) -> None:
        ident, threads = (self.value(v) for v in op.operands[:2])
        if ident is UNKNOWN or threads is UNKNOWN:
            raise Undecidable(f"the id or thread count of {_op_label(op)} depends on runtime values", op.loc)
        kind = "nwait" if op.name == "tlx.named_barrier_wait" else "narrive"
        self.record(kind, op, ident=ident, amount=threads)

    # -- shared memory and cp.async ------------------------------------------------------------------
    def access(self, op: Operation, kind: str, operand: int) -> None:
        ref = self.value(op.operands[operand])
        if isinstance(ref, BufferRef) and ref.index is not UNKNOWN:
            self.record(kind, op, array=ref.array, slot=ref.index, box=ref.box)
        for r in op.results:
            self.set(r, UNKNOWN)

    def async_load(self, op: Operation) -> None:
        self.access(op, "copy", 1)

    def async_descriptor_load(self, op: Operation) -> None:
        """A TMA load delivers its box's bytes to its barrier (complete_tx) when it lands;
        the simulator lets it land at once (it always does, eventually)."""
        array, slot = self.barrier(op, 2)
        boxes = 1
        if op.attrs.get("multicast"):    # symmetric cluster: a box from each CTA of the mask lands here
            mask = self.value(op.cta_mask)
            if mask is UNKNOWN:
                raise Undecidable(f"the CTA mask of {_op_label(op)} depends on runtime values", op.loc)
            boxes = (mask & 0xFFFF).bit_count()
        if self.predicate(op):
            ref = self.value(op.operands[1])
            if isinstance(ref, BufferRef) and ref.index is not UNKNOWN:
                self.record("tmawrite", op, array=ref.array, slot=ref.index, box=ref.box)
            self.record("tma", op, array=array, slot=slot, amount=boxes * op.operands[0].type.box_bytes)

    def async_descriptor_store(self, op: Operation) -> None:
        ref = self.value(op.operands[1])
        if isinstance(ref, BufferRef) and ref.index is not UNKNOWN:
            self.record("tmastore", op, array=ref.array, slot=ref.index, box=ref.box)

    def store_wait(self, op: Operation) -> None:
        """``async_descriptor_store_wait(n)``: retires the source reads of all but the
        task's ``n`` newest TMA/bulk stores."""
        self.record("storewait", op, amount=op.attrs.get("pendings", 0))

    def async_bulk_load(self, op: Operation) -> None:
        """A bulk copy delivers its byte count to its barrier, as a TMA load its box's bytes."""
        array, slot = self.barrier(op, 2)
        nbytes = self.value(op.operands[3])
        if nbytes is UNKNOWN:
            raise Undecidable("the byte count (bulk_size) of tlx.async_load(bulk=True) depends on runtime values",
                              op.loc)
        ref = self.value(op.operands[1])
        if isinstance(ref, BufferRef) and ref.index is not UNKNOWN:
            self.record("tmawrite", op, array=ref.array, slot=ref.index, box=ref.box)
        self.record("tma", op, array=array, slot=slot, amount=nbytes)

    def remote_async_store(self, op: Operation) -> None:
        """``async_remote_shmem_store`` / ``_copy`` complete their bytes on the *peer's*
        barrier.  The collector follows one CTA of a symmetric cluster: what this CTA sends a
        peer, a peer sends it, so the bytes land on its own barrier at the same place."""
        array, slot = self.barrier(op, 3)
        self.record("tma", op, array=array, slot=slot, amount=op.operands[0].type.buffer_bytes)

    def complete_tx(self, op: Operation) -> None:
        """The bytes of a box the task stored itself (a TMA load from an in-kernel descriptor)."""
        array, slot = self.barrier(op, 0)
        self.record("tma", op, array=array, slot=slot, amount=op.attrs["bytes"])

    def clc_try_cancel(self, op: Operation) -> None:
        """Cluster launch control: the 16-byte answer completes 16 bytes on the full barrier
        (with multicast, CTA 0's request completes every CTA's: the same in a symmetric cluster)."""
        array, slot = self.barrier(op, 1)
        self.record("tma", op, array=array, slot=slot, amount=16)

    def fence(self, op: Operation) -> None:
        if op.attrs.get("scope") == "async_shared":
            self.record("fence", op)

    def async_dot(self, op: Operation) -> None:
        """wgmma: each shared operand is read asynchronously until an
        async_dot_wait retires the async_dot's group."""
        for operand in op.operands[:2]:
            ref = self.value(operand)
            if isinstance(ref, BufferRef) and ref.index is not UNKNOWN:
                self.record("mma", op, array=ref.array, slot=ref.index, box=ref.box)
        self.record("mmacommit", op)
        self.set(op.results[0], UNKNOWN)

    def tcgen05_mma(self, op: Operation) -> None:
        """tcgen05: the shared operands are read, and the tensor-memory accumulator
        written, asynchronously until the MMA completes; its completion arrives on
        each barrier operand (``tcdone``) or, synchronous, is waited for (``tcsync``)."""
        if op.attrs.get("has_pred"):
            pred = self.value(op.operands[4])
            if pred is UNKNOWN:
                raise Undecidable(f"the predicate of {_op_label(op)} depends on runtime values", op.loc)
            if not pred:
                return
        operands = [*op.operands[:3], *op.scales]         # block-scaled: its scale buffers are read too
        for operand, kind in zip(operands, ("tcread", "tcread", "tcacc", "tcread", "tcread")):
            ref = self.value(operand)
            if isinstance(ref, BufferRef) and ref.index is not UNKNOWN:
                self.record(kind, op, array=ref.array, slot=ref.index, box=ref.box)
        first = 4 + bool(op.attrs.get("has_pred"))
        for i in range(first, first + len(op.barriers)):
            array, slot = self.barrier(op, i)
            self.record("tcdone", op, array=array, slot=slot, amount=1)
        if op.attrs.get("sync"):
            self.record("tcsync", op)

    def tcgen05_commit(self, op: Operation) -> None:
        array, slot = self.barrier(op)
        self.record("tcdone", op, array=array, slot=slot, amount=1)

    def async_dot_wait(self, op: Operation) -> None:
        self.record("mmawait", op, amount=op.attrs.get("pendings", 0))
        self.set(op.results[0], UNKNOWN)

    def commit(self, op: Operation) -> None:
        self.record("commit", op)

    def wait_group(self, op: Operation) -> None:
        self.record("waitgroup", op, amount=op.attrs.get("pendings", 0))

    # -- tasks -----------------------------------------------------------------------------------
    def async_tasks(self, op: Operation) -> None:
        parent = self.current
        spawn = self.record("spawn", op)
        started = []
        for region, info in zip(op.regions, op.task_infos):
            task = TaskEvents(len(self.tasks), info.label, info.warps, info.replica, parent.index,
                              region=region, base=info.base_label, lanes=parent.lanes)
            self.tasks.append(task)
            started.append(task.index)
            self.current = task
            self.run_block(region.block)
        self.current = parent
        if spawn is not None:
            spawn.tasks = tuple(started)
        self.record("join", op, tasks=tuple(started))

    # -- control flow ----------------------------------------------------------------------------
    def scf_for(self, op: Operation) -> None:
        lb_v, ub_v, step_v = op.operands[:3]
        lb, ub, step = self.value(lb_v), self.value(ub_v), self.value(step_v)
        if UNKNOWN in (lb, ub, step):
            lb, ub, step = self.pin(lb_v, ub_v, step_v, lb, ub, step)
        body = op.regions[0].block
        trips = len(range(lb, ub, step)) if step != 0 else MAX_TRIPS + 1
        protocol = contains(op, PROTOCOL_OPS, self.memo)
        if trips > MAX_TRIPS and protocol:
            raise TooLong(f"the loop at this line runs {trips} times (more than the {MAX_TRIPS} the checker "
                          f"unrolls)", op.loc)
        if trips > MAX_QUIET_TRIPS and not protocol:     # long loops without barriers: results unknown
            for r in op.results:
                self.set(r, UNKNOWN)
            return
        carried = [self.value(v) for v in op.operands[3:]]
        flips = [self.flips.get(id(v), 0) for v in op.operands[3:]]
        # the carried values' structural names (an unknown one, e.g. a persistent program's tile index
        # advanced by the program count, is named by its init and its update): two tasks that walk the
        # same values share the pins of bounds computed from them
        names = [self.sym.get(id(v)) for v in op.operands[3:]]
        self.iterations.append(0)
        try:
            for i, iv in enumerate(range(lb, ub, step)):
                self.iterations[-1] = i
                self.set(body.args[0], iv)
                for arg, value, f, name in zip(body.args[1:], carried, flips, names):
                    self.set(arg, value, f)
                    if value is UNKNOWN and name is not None:
                        self.sym[id(arg)] = name
                carried = self.run_block(body) or []
                flips = self.yielded_flips(body)
                names = self.yielded_names(body)
        finally:
            self.iterations.pop()
        if "dot_drain" in op.attrs and len(range(lb, ub, step)):
            self.record("mmawait", op, amount=0)    # passes/dot_wait_drain.py: the last iteration drains
        for r, value, f, name in zip(op.results, carried, flips, names):
            self.set(r, value, f)
            if value is UNKNOWN and name is not None:
                self.sym[id(r)] = name

    def pin(self, lb_v, ub_v, step_v, lb, ub, step):
        """Unknown bounds become constants so that the loop runs ``self.trips`` times
        (under their own value and their structural name)."""
        self.pinned = True
        if step is UNKNOWN:
            step = self.set_pin(step_v, 1)
        if lb is UNKNOWN:
            lb = self.set_pin(lb_v, 0 if ub is UNKNOWN else ub - self.trips * step)
        if ub is UNKNOWN:
            ub = self.set_pin(ub_v, lb + self.trips * step)
        return lb, ub, step

    def set_pin(self, v: Value, value: int) -> int:
        name = self.sym.get(id(v))
        key = id(v) if name is None else ("sym", name)
        self.pins[key] = value
        self.pinned_keys.append(key)
        return value

    def scf_if(self, op: Operation) -> None:
        cond = self.value(op.operands[0])
        if cond is not UNKNOWN:
            block = op.regions[0 if cond else 1].block
            values = self.run_block(block) or []
            flips = self.yielded_flips(block)
            for r, value, f in zip(op.results, values, flips):
                self.set(r, value, f)
            return
        if contains(op, SYNC_OPS, self.memo):
            inner = next(o for region in op.regions for o in _walk_region(region) if o.name in SYNC_OPS)
            raise Undecidable(f"whether {_op_label(inner)} at line {inner.loc.line if inner.loc else '?'} runs "
                              f"depends on a runtime condition", op.loc)
        saved, self.recording = self.recording, False
        try:
            outcomes = [self.run_block(region.block) or [] for region in op.regions]
        finally:
            self.recording = saved
        for i, r in enumerate(op.results):
            a, b = (o[i] if i < len(o) else UNKNOWN for o in outcomes)
            self.set(r, a if a is not UNKNOWN and a == b else UNKNOWN)

    def scf_while(self, op: Operation) -> None:
        before, after = op.regions[0].block, op.regions[1].block
        carried = [self.value(v) for v in op.operands]
        protocol = contains(op, PROTOCOL_OPS, self.memo)
        self.iterations.append(0)
        try:
            for i in range(MAX_TRIPS + 1):
                self.iterations[-1] = i
                for arg, value in zip(before.args, carried):
                    self.set(arg, value)
                cond, *forwarded = self.run_block(before) or [UNKNOWN]
                if cond is UNKNOWN:
                    if protocol:
                        raise Undecidable("the number of iterations of this while loop depends on runtime values",
                                          op.loc)
                    forwarded = [UNKNOWN] * len(op.results)
                    break
                if not cond:
                    break
                for arg, value in zip(after.args, forwarded):
                    self.set(arg, value)
                carried = self.run_block(after) or []
            else:
                raise TooLong(f"this while loop runs more than {MAX_TRIPS} times", op.loc)
        finally:
            self.iterations.pop()
        for r, value in zip(op.results, forwarded):
            self.set(r, value)


_NAMED_SCALARS = frozenset({"tl.program_id", "tl.num_programs", "tl.addptr", "tl.load"})


def _inert(op: Operation) -> bool:
    """Whether ``run_op`` would do nothing but set ``op``'s results unknown: no handler, and no
    integer scalar an ``arith`` op evaluates or a scalar ``run_op`` names (program ids, addresses,
    loads).  A terminator is never inert: ``run_block`` returns what it yields."""
    if op.name in _HANDLERS or op.name == "tl.return" or has_trait(op, TERMINATOR):
        return False
    single = op.results[0] if len(op.results) == 1 else None
    if op.name.startswith("arith."):
        return single is None or not _is_int_scalar(single.type)
    return single is None or isinstance(single.type, TensorType) or op.name not in _NAMED_SCALARS


def _flips(name: str, a: int, b: int, out, flips: list[int]) -> int:
    """How often a phase-like value has been flipped: ``p ^ 1``, ``p ^ (buf == 0)``
    when the condition holds, ``1 - p``."""
    if out is UNKNOWN:
        return 0
    if name == "xor":
        base, other = (0, 1) if flips[0] >= flips[1] else (1, 0)
        source = (a, b)[base]
        return flips[base] + flips[other] + int((out & 1) != (source & 1))
    if name == "sub" and flips[1] > flips[0]:
        return flips[1] + int((out & 1) != (b & 1))
    if name in ("and", "or", "add", "sub"):
        return max(flips)
    return 0


def _local_barrier(v: Value) -> Value:
    """The local barrier a remote view names (the value itself otherwise)."""
    owner = getattr(v, "owner", None)
    return owner.operands[0] if isinstance(owner, Operation) and owner.name == "tlx.remote_view" else v


def _is_view(v: Value) -> bool:
    owner = getattr(v, "owner", None)
    return isinstance(owner, Operation) and owner.name == "tlx.local_view"


def _leaves(v: Value, collector: EventCollector, found: dict, depth: int) -> None:
    """Named leaves (loop variables, carried values) of an index/phase expression."""
    owner = getattr(v, "owner", None)
    is_op = isinstance(owner, Operation)
    if is_op and depth > 0 and owner.name.startswith("arith.") and owner.name != "arith.constant":
        for operand in owner.operands:
            _leaves(operand, collector, found, depth - 1)
        return
    if v.name_hint and not (is_op and owner.name == "arith.constant"):
        value = collector.value(v)
        if value is not UNKNOWN:
            found.setdefault(clean_name(v.name_hint), value)


def clean_name(hint: str) -> str:
    """The user's variable name of an SSA name hint (``count_1`` → ``count``)."""
    head, sep, tail = hint.rpartition("_")
    return head if sep and tail.isdigit() and head else hint


def _walk_region(region):
    for op in region.ops:
        yield from op.walk()


_POINTER_VIEWS = frozenset({"tl.addptr", "tl.splat", "tl.broadcast", "tl.expand_dims", "tl.reshape"})


def _pointer_root(v: Value):
    """The kernel parameter (or other block argument) a pointer derives from, or None."""
    for _ in range(64):
        owner = getattr(v, "owner", None)
        if not isinstance(owner, Operation):
            return v
        if owner.name not in _POINTER_VIEWS:
            return None
        v = owner.operands[0]
    return None


def _written_roots(kernel: Operation):
    """ids of the kernel parameters written through (stores, atomics, TMA stores), or None
    if some write's target cannot be followed back to a parameter."""
    roots = set()
    for op in kernel.walk():
        if op.name == "tl.store" or has_trait(op, BULK_STORE) or \
                op.name.startswith("tl.atomic"):
            root = _pointer_root(op.operands[0])
            if root is None:
                return None
            roots.add(id(root))
    return roots


def _op_label(op: Operation) -> str:
    return "tlx." + op.name.split(".", 1)[1] if op.name.startswith("tlx.") else op.name


_HANDLERS = {
    "tlx.alloc_barriers": EventCollector.alloc_barriers,
    "tlx.local_alloc": EventCollector.local_alloc,
    "tlx.local_view": EventCollector.local_view,
    "tlx.local_slice": EventCollector.local_slice,
    "tlx.local_trans": EventCollector.whole_view,
    "tlx.local_reinterpret": EventCollector.whole_view,
    "tlx.barrier_wait": EventCollector.barrier_wait,
    "tlx.barrier_arrive": EventCollector.barrier_arrive,
    "tlx.remote_view": EventCollector.remote_view,
    "tlx.barrier_expect_bytes": EventCollector.barrier_expect_bytes,
    "tlx.named_barrier_wait": EventCollector.named_barrier,
    "tlx.named_barrier_arrive": EventCollector.named_barrier,
    "tlx.async_load": EventCollector.async_load,
    "tlx.async_descriptor_load": EventCollector.async_descriptor_load,
    "tlx.async_descriptor_store": EventCollector.async_descriptor_store,
    "tlx.async_bulk_load": EventCollector.async_bulk_load,
    "tlx.async_bulk_store": EventCollector.async_descriptor_store,
    "tlx.async_descriptor_store_wait": EventCollector.store_wait,
    "tlx.fence": EventCollector.fence,
    "tlx.async_remote_shmem_store": EventCollector.remote_async_store,
    "tlx.async_remote_shmem_copy": EventCollector.remote_async_store,
    "tlx.clc_try_cancel": EventCollector.clc_try_cancel,
    "tlx.barrier_complete_tx": EventCollector.complete_tx,
    "tlx.async_dot": EventCollector.async_dot,
    "tlx.async_dot_wait": EventCollector.async_dot_wait,
    "tlx.tcgen05_mma": EventCollector.tcgen05_mma,
    "tlx.tcgen05_commit": EventCollector.tcgen05_commit,
    "tlx.async_commit_group": EventCollector.commit,
    "tlx.async_wait_group": EventCollector.wait_group,
    "tlx.local_load": lambda self, op: self.access(op, "read", 0),
    "tlx.local_store": lambda self, op: self.access(op, "write", 0),
    "tlx.async_tasks": EventCollector.async_tasks,
    "scf.for": EventCollector.scf_for,
    "scf.if": EventCollector.scf_if,
    "scf.while": EventCollector.scf_while,
}
