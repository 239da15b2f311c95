"""Lowering of in-kernel tensor maps (``ir/ops/tensormap.py``): TMA descriptors encoded on the device.

Where the map lives: 128-byte slots of the kernel's global scratch, a hidden last kernel
parameter ``tlx_global_scratch`` that the launcher fills from ``tlxc.set_allocator`` (Triton's
allocator: ``alloc(size, 128, stream)``; runtime/scratch.py), ``global_scratch_bytes`` per
program (metadata), program ``p`` (its linear CTA index) owning bytes ``[p * bytes, (p + 1) *
bytes)``.  Each ``tlx.make_tensor_descriptor`` without ``desc_ptr`` owns one slot and each
``tlx.allocate_tensor_descriptor(num)`` ``num`` consecutive ones, numbered in the kernel's op
order (``_slots``).  A map is rewritten each time its op runs (a make inside a loop re-encodes its
slot), so a copy still in flight through the old map must have been waited for: ``desc.load`` /
``desc.store`` always are; TLX code pipelining copies through re-made maps uses several slots.

How it is encoded (by the scope's thread 0, every thread of the scope running the op): the
run-time legality checks the host makes at encode time (``descriptors.py``: a 16-byte aligned
base, row strides positive multiples of 16 bytes below 2**40), each a ``__trap()`` (after a
located printf as ``tl.device_assert``'s with TLXC_DEBUG_BARRIERS=1: ``_trap``); sizes below 1
are not checked (Triton code builds such maps past a loop's last iteration without using them;
the interpreter refuses a copy through one); the 128 bytes zeroed with generic stores; every
field written with ``tensormap.replace`` (address, rank, per dimension innermost first: box
size -- the copy box, the swizzle span of a split box as on the host --, size, byte stride,
element stride 1; element type, no interleave, the swizzle, the fill);
``fence.proxy.tensormap::generic.release.gpu``.  Then the scope synchronizes and every thread
acquires the map (``fence.proxy.tensormap::generic.acquire.gpu [map], 128``) before any of
them issues a TMA copy through it.  ``tlx.reinterpret_tensor_descriptor`` only acquires.

A descriptor value is a ``const tlx_tensormap*`` in C (``c_types.storage_type``);
``tensormap_address`` gives the pointer TMA helpers take for it or for a host descriptor
parameter (a ``__grid_constant__`` struct, whose address is taken).
"""
from __future__ import annotations

import json

from ..codegen_c import c_types as C
from ..codegen_c.lower import lowering
from ..ir.tensormap import (
    ELEMTYPE_CODES,
    FILL_CODES,
    MAX_STRIDE_BYTES,
    SWIZZLE_CODES,
    TENSORMAP_BYTES,
    store_width_message,
    tma_store_targets,
)

SCRATCH_PARAM = "tlx_global_scratch"
_SLOTS = "tlx_tensormaps"          # this program's slots (a prologue pointer)


def tensormap_address(lw, desc) -> str:
    """The generic address of ``desc``'s tensor map: a kernel parameter's (the struct's address)
    or an in-kernel descriptor's (its value is the pointer)."""
    if any(desc is arg for arg in lw.kernel.regions[0].block.args):
        return f"&{lw.name(desc)}"
    return lw.name(desc)


def _slots(lw) -> dict:
    """op id -> its first slot, for every op of the kernel that owns slots; ``total`` the count.
    On first use the program's slot pointer is added to the prologue."""
    state = lw.rule_state.get("tensormap")
    if state is None:
        state, total = {}, 0
        for op in lw.kernel.walk():
            if op.name == "tlx.make_tensor_descriptor" and not op.attrs.get("has_desc_ptr"):
                state[id(op)], total = total, total + 1
            elif op.name == "tlx.allocate_tensor_descriptor":
                state[id(op)], total = total, total + op.attrs["num"]
        state["total"] = total
        lw.rule_state["tensormap"] = state
        if total:
            program = ("((unsigned long long)blockIdx.x + (unsigned long long)gridDim.x * ((unsigned long long)"
                       "blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z))")
            lw.prologue.append(f"unsigned char* const {_SLOTS} = {SCRATCH_PARAM} + {program} * "
                               f"{total * TENSORMAP_BYTES}ull;")
    return state


def global_scratch_bytes(lw) -> int:
    """Bytes of global scratch one program needs (0: no hidden parameter)."""
    state = lw.rule_state.get("tensormap")
    return state["total"] * TENSORMAP_BYTES if state else 0


def uses_tensormaps(lw) -> bool:
    return "tensormap" in lw.rule_state


def _slot_address(lw, op) -> str:
    return f"{_SLOTS} + {_slots(lw)[id(op)] * TENSORMAP_BYTES}"


def _trap(lw, op, cond: str, message: str, *args: str) -> None:
    """``if (cond) __trap();``, the located message in a comment beside it; with
    TLXC_DEBUG_BARRIERS=1 (``debug_barriers``) also printed first, as tl.device_assert reports.
    Not printed by default: a printf is a call, and ptxas serializes every wgmma of a function
    that makes one (C7510), which would cost a GEMM that builds its descriptors in the kernel
    most of its tensor-core throughput."""
    where = f"{op.loc.file}:{op.loc.line}" if op.loc is not None else "?"
    text = json.dumps(f"{where}: tl.make_tensor_descriptor in pid (%d, %d, %d): {message}\n")
    if lw.kernel.attrs.get("debug_barriers"):
        extra = "".join(f", {a}" for a in args)
        lw.out.line(f"if ({cond}) {{ printf({text}, blockIdx.x, blockIdx.y, blockIdx.z{extra}); __trap(); }}")
    else:
        lw.out.line(f"if ({cond}) __trap();  // {text[1:-3].replace('*/', '* /')}")


def _stored_through(lw, op) -> bool:
    """Whether a TMA store may write through the map ``op`` encodes: its result is stored through,
    or (its slot given, or some store's map of unknown origin) the kernel stores through a map
    that is no argument."""
    state = lw.rule_state.get("tensormap_stores")
    if state is None:
        state = lw.rule_state["tensormap_stores"] = tma_store_targets(lw.kernel)
    stored, unknown = state
    return id(op.results[0]) in stored or unknown or (
        bool(op.attrs.get("has_desc_ptr")) and bool(stored - {id(a) for a in lw.kernel.regions[0].block.args}))


@lowering("tlx.make_tensor_descriptor", vendor="nvidia")
def make_tensor_descriptor(lw, op):
    t = op.results[0].type
    rank = len(t.block_shape)
    size = t.element.bytes
    _slots(lw)
    where = f"{lw.name(op.desc_ptr)}" if op.desc_ptr is not None else _slot_address(lw, op)
    name = lw.define(op.results[0], "tmap")
    lw.out.line(f"const tlx_tensormap* {name} = (const tlx_tensormap*)({where});")
    lw.out.open(f"if ({lw.scope.tid_var} == 0)")
    base = lw.name(op.operands[0])
    _trap(lw, op, f"((unsigned long long)({base}) & 15ull) != 0ull",
          "the base address %p is not 16-byte aligned (TMA needs a 16-byte aligned base)", f"(const void*)({base})")
    for dim, stride in enumerate(op.strides[:-1]):
        nbytes = f"{lw.name(stride)} * {size}ll"
        _trap(lw, op, f"{lw.name(stride)} <= 0 || ({nbytes}) % 16 != 0 || ({nbytes}) >= {MAX_STRIDE_BYTES}ll",
              f"strides[{dim}] is %lld elements of {t.element}; TMA needs a positive multiple of 16 bytes below 2**40 "
              f"for every dimension but the last", f"(long long){lw.name(stride)}")
    if _stored_through(lw, op):     # TMA stores write whole 16-byte chunks of the inner dimension
        inner = lw.name(op.shape[-1])
        _trap(lw, op, f"((long long)({inner}) * {size}ll) % 16ll != 0ll",
              store_width_message(rank - 1, "%lld", t.element), f"(long long)({inner})")
    w = f"{name}_w"
    lw.out.line(f"tlx_tensormap* {w} = (tlx_tensormap*){name};")
    lw.out.line(f"for (int q = 0; q < 16; ++q) {w}->words[q] = 0ull;")
    calls = [("tlx_tensormap_replace_global_address", f"tlx_tensormap_replace_global_address({w}, "
                                                      f"(unsigned long long)({base}));"),
             ("tlx_tensormap_replace_rank", f"tlx_tensormap_replace_rank({w}, {rank - 1}u);")]
    copy_box = t.copy_box
    for ordinal in range(rank):                 # innermost first
        dim = rank - 1 - ordinal
        calls.append(("tlx_tensormap_replace_box_dim", f"tlx_tensormap_replace_box_dim<{ordinal}>({w}, "
                                                       f"{copy_box[dim]}u);"))
        calls.append(("tlx_tensormap_replace_global_dim", f"tlx_tensormap_replace_global_dim<{ordinal}>({w}, "
                                                          f"(unsigned){lw.name(op.shape[dim])});"))
        calls.append(("tlx_tensormap_replace_element_stride",
                      f"tlx_tensormap_replace_element_stride<{ordinal}>({w}, 1u);"))
        if ordinal:                             # byte strides of every dimension but the innermost
            calls.append(("tlx_tensormap_replace_global_stride",
                          f"tlx_tensormap_replace_global_stride<{ordinal - 1}>({w}, (unsigned long long)"
                          f"{lw.name(op.strides[dim])} * {size}ull);"))
    calls += [("tlx_tensormap_replace_elemtype",
               f"tlx_tensormap_replace_elemtype<{ELEMTYPE_CODES[str(t.element)]}>({w});"),
              ("tlx_tensormap_replace_interleave_layout", f"tlx_tensormap_replace_interleave_layout<0>({w});"),
              ("tlx_tensormap_replace_swizzle_mode", f"tlx_tensormap_replace_swizzle_mode<{SWIZZLE_CODES[t.swizzle]}>"
                                                     f"({w});"),
              ("tlx_tensormap_replace_fill_mode",
               f"tlx_tensormap_replace_fill_mode<{FILL_CODES[op.attrs.get('padding', 'zero')]}>({w});"),
              ("tlx_fence_tensormap_release", "tlx_fence_tensormap_release();")]
    for helper, call in calls:
        lw.target.use(helper)
        lw.out.line(call)
    lw.out.close()
    lw.out.line(lw.sync())
    lw.target.use("tlx_fence_tensormap_acquire")
    lw.out.line(f"tlx_fence_tensormap_acquire({name});")


@lowering("tl.descriptor_dim", vendor="nvidia")
def descriptor_dim(lw, op):
    """``desc.shape[d]`` / ``desc.strides[d]`` of descriptor argument ``desc``: a hidden parameter
    (``descriptor_dims``), one per (argument, kind, dim) the kernel reads."""
    desc = op.operands[0]
    index = next((i for i, arg in enumerate(lw.kernel.regions[0].block.args) if arg is desc), None)
    if index is None:
        from ..errors import CompilationError
        raise CompilationError("a descriptor's shape and strides are known of a descriptor argument only", op.loc)
    kind, dim = op.attrs["kind"], op.attrs["dim"]
    dims = lw.rule_state.setdefault("descriptor_dims", {})
    key = (index, kind, dim)
    if key not in dims:
        dims[key] = f"tlx_{lw.name(desc)}_{kind}{dim}"
    lw.alias(op.results[0], dims[key])


def descriptor_dims(lw) -> list[tuple[tuple[int, str, int], str]]:
    """The hidden parameters ``descriptor_dim`` asked for, ``((argument index, kind, dim), name)`` in
    that order: the kernel's parameters after its own, the launch's values in the same order."""
    return sorted(lw.rule_state.get("descriptor_dims", {}).items())


@lowering("tlx.allocate_tensor_descriptor", vendor="nvidia")
def allocate_tensor_descriptor(lw, op):
    result = op.results[0]
    lw.declare(result, "desc_slots", init=f"({C.storage_type(result.type)})({_slot_address(lw, op)})")


@lowering("tlx.reinterpret_tensor_descriptor", vendor="nvidia")
def reinterpret_tensor_descriptor(lw, op):
    _slots(lw)
    name = lw.define(op.results[0], "tmap")
    lw.out.line(f"const tlx_tensormap* {name} = (const tlx_tensormap*)({lw.name(op.operands[0])});")
    lw.target.use("tlx_fence_tensormap_acquire")
    lw.out.line(f"tlx_fence_tensormap_acquire({name});")
