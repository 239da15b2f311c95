"""Semantic rules of distributed shared memory, warp votes and user inline PTX:
``tlx.remote_shmem_store``, ``tlx.async_remote_shmem_store``,
``tlx.async_remote_shmem_copy`` (``ir/ops/cluster_mem.py``), ``tlx.vote_ballot_sync``
and ``tl.inline_asm_elementwise`` (``ir/ops/warp.py``), with TLX's / Triton's
signatures.  Registered from ``tlx_rules.py``.
"""
from __future__ import annotations

import math

from ..ir import types as T
from ..ir.ops.warp import CONSTRAINT_BITS, elements_per_register
from ..ir.types import PointerType, ScalarType, TensorType
from . import semantic as S
from . import tlx_rules as X
from .builtins import RULES, const_dtype, const_int, constexpr, tensor_arg
from .values import SemanticError, Tensor

MAX_CLUSTER = 16


def _local_smem(value, what: str) -> Tensor:
    view = X._memdesc(value, what, view=True)
    if view.type.storage != "smem":
        raise SemanticError(f"'{what}' must be a shared-memory buffer, got {view.type.storage} memory; the remote "
                            f"CTA's copy of this local buffer is the destination", param=what)
    return view


def _rank(b, rank) -> Tensor:
    if rank is None:
        raise SemanticError("'remote_cta_rank' is required", param="remote_cta_rank")
    if isinstance(rank, int) and not isinstance(rank, bool) and not 0 <= rank < MAX_CLUSTER:
        raise SemanticError(f"a cluster has at most {MAX_CLUSTER} CTAs; rank {rank} is out of range",
                            param="remote_cta_rank")
    return X._i32(b, rank, "remote_cta_rank")


def _barrier(barrier) -> Tensor:
    if barrier is None:
        raise SemanticError("'barrier' is required: the peer CTA waits on it for the bytes", param="barrier")
    return X._barrier(barrier, "barrier")


@X.rule("remote_shmem_store")
def _remote_shmem_store(ctx, dst, src, remote_cta_rank):
    b = ctx.b
    dst = _local_smem(dst, "dst")
    value = X.stored_value(b, dst, src)
    b.create("tlx.remote_shmem_store", [dst.value, value.value, _rank(b, remote_cta_rank).value])


@X.rule("async_remote_shmem_store")
def _async_remote_shmem_store(ctx, dst, src, remote_cta_rank, barrier=None):
    b = ctx.b
    dst = _local_smem(dst, "dst")
    value = X.stored_value(b, dst, src)
    if dst.type.element.bytes not in (4, 8):
        raise SemanticError(f"st.async stores 4- or 8-byte elements, not {dst.type.element}; for narrower "
                            f"types stage the tile in a local buffer and use tlx.async_remote_shmem_copy",
                            param="src")
    bar = _barrier(barrier)
    b.create("tlx.async_remote_shmem_store", [dst.value, value.value, _rank(b, remote_cta_rank).value, bar.value])


@X.rule("async_remote_shmem_copy")
def _async_remote_shmem_copy(ctx, dst, src, remote_cta_rank, barrier=None):
    b = ctx.b
    dst = _local_smem(dst, "dst")
    src = _local_smem(src, "src")
    if (dst.type.shape, dst.type.element) != (src.type.shape, src.type.element):
        raise SemanticError(f"'src' is a {list(src.type.shape)} {src.type.element} buffer but 'dst' a "
                            f"{list(dst.type.shape)} {dst.type.element} one; the copy moves one buffer as it is",
                            param="src")
    if dst.type.perm or src.type.perm:
        raise SemanticError("the bulk copy moves bytes in memory order; pass untransposed views", param="src")
    if src.type.buffer_bytes % 16:
        raise SemanticError(f"cp.async.bulk copies multiples of 16 bytes; the buffer has {src.type.buffer_bytes}",
                            param="src")
    bar = _barrier(barrier)
    b.create("tlx.async_remote_shmem_copy", [dst.value, src.value, _rank(b, remote_cta_rank).value, bar.value])


@X.rule("vote_ballot_sync")
def _vote_ballot_sync(ctx, mask, pred):
    b = ctx.b
    mask = const_int(mask, "mask")
    if not 0 <= mask <= 0xFFFFFFFF:
        raise SemanticError(f"'mask' is a 32-bit lane mask, got {mask:#x}", param="mask")
    pred = tensor_arg(b, pred, "pred")
    if not isinstance(pred.dtype, ScalarType):
        raise SemanticError(f"'pred' must be a boolean or a number, got {S.describe(pred)}", param="pred")
    pred = S.to_bool(b, pred)
    rtype = TensorType(pred.shape, T.i32) if pred.is_block else T.i32
    return Tensor(b.value("tlx.vote_ballot_sync", [pred.value], rtype, mask=mask))


# -- tl.inline_asm_elementwise ------------------------------------------------------------------


def _constraints(text: str, outputs: int, inputs: int) -> list[str]:
    parts = [p.strip() for p in text.split(",")]
    if any(not p for p in parts):
        raise SemanticError(f"'constraints' {text!r} has an empty entry", param="constraints")
    wanted = ["="] * outputs + [""] * inputs
    if len(parts) != len(wanted) or any(p.startswith("=") != bool(w) for p, w in zip(parts, wanted)):
        raise SemanticError(f"'constraints' {text!r} must list {outputs} output(s) ('=r', ...) then {inputs} "
                            f"input(s) ('r', ...): per result dtype and per argument, one for every register of "
                            f"a run of 'pack' elements (types narrower than 32 bits packed up to 32 bits a "
                            f"register, as Triton packs them)", param="constraints")
    letters = [p.lstrip("=") for p in parts]
    for letter in letters:
        if letter not in CONSTRAINT_BITS:
            raise SemanticError(f"constraint {letter!r} is not supported; tlxc knows register constraints "
                                f"{', '.join(sorted(CONSTRAINT_BITS))}", param="constraints")
    return letters


def _check_width(letter: str, dtype, what: str, per: int = 1) -> None:
    if isinstance(dtype, PointerType):
        if letter != "l":
            raise SemanticError(f"{what} is a pointer ({dtype}); its constraint must be 'l' (a 64-bit register), "
                                f"got '{letter}'", param="constraints")
        return
    if per == 1 and dtype.bits < 32 and letter == "r":
        return          # a narrow element in a 32-bit register (Triton's i8 results in "=r"): extended, truncated
    if dtype.bits * per != CONSTRAINT_BITS[letter]:
        held = "each element is one register" if per == 1 else \
            f"{per} elements packed in one register, as Triton packs types narrower than 32 bits"
        raise SemanticError(f"{what} is {dtype} ({dtype.bits} bits) but its constraint '{letter}' is a "
                            f"{CONSTRAINT_BITS[letter]}-bit register ({held})", param="constraints")


def _inline_asm_args(b, args) -> list[Tensor]:
    args = constexpr(args, "args")
    if isinstance(args, Tensor) or not isinstance(args, (list, tuple)):
        raise SemanticError(f"'args' must be a list of tensors, got {S.describe(args)}", param="args")
    values = [tensor_arg(b, a, "args") for a in args]
    shape = ()
    for v in values:
        if v.is_block:
            shape = S.broadcast_shapes(shape, v.shape) if shape else v.shape
    return [S.broadcast_to(b, v, shape) if shape and v.shape != shape else v for v in values]


def _inline_asm_elementwise(ctx, asm, constraints, args, dtype, is_pure, pack):
    b = ctx.b
    asm = constexpr(asm, "asm")
    constraints = constexpr(constraints, "constraints")
    if not isinstance(asm, str) or not isinstance(constraints, str):
        raise SemanticError("'asm' and 'constraints' must be compile-time strings", param="asm")
    pack = const_int(pack, "pack")
    if pack not in (1, 2, 4):
        raise SemanticError(f"'pack' must be 1, 2 or 4 (elements per run of the asm), got {pack}", param="pack")
    is_pure = constexpr(is_pure, "is_pure")
    if not isinstance(is_pure, bool):
        raise SemanticError(f"'is_pure' must be a compile-time bool, got {S.describe(is_pure)}", param="is_pure")
    dtype = constexpr(dtype, "dtype")
    dtypes = [const_dtype(d, "dtype") for d in (dtype if isinstance(dtype, (list, tuple)) else [dtype])]
    values = _inline_asm_args(b, args)
    for i, v in enumerate(values):
        if not isinstance(v.dtype, (ScalarType, PointerType)):
            raise SemanticError(f"argument {i} is {S.describe(v)}; inline asm takes numbers and pointers",
                                param="args")
    typed = [(f"result {i}", d) for i, d in enumerate(dtypes)] + [(f"argument {i}", v.dtype)
                                                                   for i, v in enumerate(values)]
    for what, d in typed:
        if isinstance(d, PointerType):
            continue
        if d.is_boolean:
            raise SemanticError(f"{what} is a boolean; inline asm takes numbers (convert to int8 or int32 first)",
                                param="args" if what.startswith("argument") else "dtype")
    # with pack=p each result and each argument has p / per operands, ``per`` elements packed in each
    # (ir/ops/warp.py elements_per_register; per = 1 at 32 bits and more): results first, then arguments
    pers = [elements_per_register(d, pack) for _, d in typed]
    counts = [pack // per for per in pers]
    letters = _constraints(constraints, sum(counts[:len(dtypes)]), sum(counts[len(dtypes):]))
    start = 0
    for (what, d), per, count in zip(typed, pers, counts):
        for letter in letters[start:start + count]:
            _check_width(letter, d, what, per)
        start += count
    shape = next((v.shape for v in values if v.is_block), None)
    if pack > 1 and (shape is None or math.prod(shape) % pack):
        raise SemanticError(f"pack={pack} runs the asm on {pack} elements at a time: the arguments must be tensors "
                            f"whose size is a multiple of {pack}, got "
                            f"{'scalars' if shape is None else list(shape)}", param="pack")
    types = [TensorType(shape, d) if shape else d for d in dtypes]
    op = b.create("tl.inline_asm_elementwise", [v.value for v in values], types,
                  {"asm": asm, "constraints": constraints, "pure": is_pure, "pack": pack})
    results = [Tensor(r) for r in op.results]
    return results[0] if not isinstance(dtype, (list, tuple)) else tuple(results)


RULES["inline_asm_elementwise"] = _inline_asm_elementwise      # tl.*, not tlx.*
