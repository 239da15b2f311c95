"""Rules for block-level tensor ops: ids, ranges, shapes, reductions."""
from __future__ import annotations

import numpy as np

from .registry import impl
from .values import register_dtype, round_to, scalar_of


@impl("tl.program_id")
def program_id(ctx, op):
    return np.int32(ctx.pid[op.attrs["axis"]])


@impl("tl.num_programs")
def num_programs(ctx, op):
    return np.int32(ctx.program.grid[op.attrs["axis"]])


@impl("tl.arange")
def arange(ctx, op):
    cache = ctx.plans.constants
    value = cache.get(id(op))
    if value is None:
        value = np.arange(op.attrs["start"], op.attrs["end"], dtype=np.int32)
        value.flags.writeable = False
        cache[id(op)] = value
    return value


@impl("tl.splat")
def splat(ctx, op, x):
    t = op.results[0].type
    return np.full(t.shape, x, dtype=register_dtype(t))


@impl("tl.broadcast")
def broadcast(ctx, op, x):
    return np.broadcast_to(x, op.results[0].type.shape)


@impl("tl.expand_dims")
def expand_dims(ctx, op, x):
    return np.expand_dims(x, op.attrs["axis"])


@impl("tl.reshape")
def reshape(ctx, op, x):
    return np.reshape(x, op.results[0].type.shape)


@impl("tl.split")
def split(ctx, op, x):
    return np.ascontiguousarray(x[..., 0]), np.ascontiguousarray(x[..., 1])


@impl("tl.join")
def join(ctx, op, a, b):
    return np.stack([a, b], axis=-1)


@impl("tl.trans")
def trans(ctx, op, x):
    return np.transpose(x, op.attrs["perm"])


@impl("tl.convert_layout", "tl.hint")
def identity(ctx, op, x):
    return x


def _sum(x, axis, t):
    if t.is_float:
        wide = np.float64 if t.bits == 64 else np.float32
        return round_to(np.sum(x, axis=axis, dtype=wide), t)
    return np.sum(x, axis=axis, dtype=register_dtype(t))


def _arg(reducer):
    def rule(x, axis, t):
        if t.is_float:
            return _arg_ignoring_nan(reducer, np.asarray(x), axis)
        return reducer(x, axis=axis).astype(np.int32)   # numpy returns the first index on ties
    return rule


def _arg_ignoring_nan(reducer, x, axis):
    """argmax/argmin that skip NaN, as tl.max/tl.min do: the first index of the best number;
    a slice of NaNs only gives index 0 (as the GPU's combine does)."""
    nan = np.isnan(x)
    best = (np.fmax if reducer is np.argmax else np.fmin).reduce(x, axis=axis, keepdims=True)
    hits = (x == best) & ~nan
    return np.argmax(hits, axis=axis).astype(np.int32)


def _bitwise(ufunc, logical):
    def rule(x, axis, t):
        return (logical if t.is_boolean else ufunc).reduce(x, axis=axis)
    return rule


_REDUCERS = {
    "sum": _sum,
    "max": lambda x, axis, t: np.fmax.reduce(x, axis=axis),   # NaNs ignored unless all are NaN (fmaxf, Triton)
    "min": lambda x, axis, t: np.fmin.reduce(x, axis=axis),
    "argmax": _arg(np.argmax),
    "argmin": _arg(np.argmin),
    "and": _bitwise(np.bitwise_and, np.logical_and),
    "or": _bitwise(np.bitwise_or, np.logical_or),
    "xor": _bitwise(np.bitwise_xor, np.logical_xor),
}


@impl("tl.reduce")
def reduce(ctx, op, x):
    """Sums of f16/bf16 accumulate in float32 and round once; argmax/argmin
    give the first index on ties; max/min/argmax/argmin ignore NaN (Triton's
    maxnum/minnum) unless every element is NaN."""
    t = scalar_of(op.operands[0].type)
    result = np.asarray(_REDUCERS[op.attrs["kind"]](np.asarray(x), op.attrs["axis"], t))
    return result if result.ndim else result[()]
