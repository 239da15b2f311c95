"""Rules for ``tl.scan``, ``tl.reduce_combine``, ``tl.flip`` and ``tl.sort``.

The combine region runs on whole slices at once: for step ``k`` along the axis its
arguments are the running values and element ``k`` of every other index (numpy
arrays of the remaining shape), left to right (from the end for a reverse scan,
so ``out[k] = combine(out[k + 1], x[k])``).  The GPU applies the same associative
function in a tree order; floats may differ in the last bits.
"""
from __future__ import annotations

import numpy as np

from .executor import run_block
from .registry import impl
from .values import register_dtype, scalar_of


def _slices(op, inputs, axis: int, reverse: bool) -> list[np.ndarray]:
    arrays = [np.moveaxis(np.asarray(x), axis, 0) for x in inputs]
    return [a[::-1] for a in arrays] if reverse else arrays


def _as(values, like: list[np.ndarray], op) -> list[np.ndarray]:
    """The region's results as arrays of the slices' shape and the operands' dtypes."""
    return [np.broadcast_to(np.asarray(v, dtype=register_dtype(scalar_of(o.type))), a.shape[1:]).copy()
            for v, a, o in zip(values, like, op.operands)]


def _fold(ctx, op, arrays: list[np.ndarray], keep_steps: bool):
    """Left fold along the first axis; yields the region's runs to the scheduler."""
    block = op.regions[0].block
    acc = [a[0].copy() for a in arrays]
    steps = [np.empty_like(a) for a in arrays] if keep_steps else None
    for k in range(arrays[0].shape[0]):
        if k:
            values = yield from run_block(ctx, block, acc + [a[k] for a in arrays])
            acc = _as(values, arrays, op)
        if keep_steps:
            for out, value in zip(steps, acc):
                out[k] = value
    return steps if keep_steps else acc


def _results(op, values: list):
    return values[0] if len(op.results) == 1 else values


@impl("tl.scan")
def scan(ctx, op, *inputs):
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]
    arrays = _slices(op, inputs, axis, reverse)
    steps = yield from _fold(ctx, op, arrays, keep_steps=True)
    outs = [np.ascontiguousarray(np.moveaxis(s[::-1] if reverse else s, 0, axis)) for s in steps]
    return _results(op, outs)


@impl("tl.reduce_combine")
def reduce_combine(ctx, op, *inputs):
    arrays = _slices(op, inputs, op.attrs["axis"], False)
    acc = yield from _fold(ctx, op, arrays, keep_steps=False)
    return _results(op, [a if a.ndim else a[()] for a in acc])


@impl("tl.flip")
def flip(ctx, op, x):
    return np.ascontiguousarray(np.flip(np.asarray(x), op.attrs["axis"]))


@impl("tl.sort")
def sort(ctx, op, x):
    """numpy's sort: the values the GPU's bitonic network gives (the order of equal
    elements cannot be told apart; NaN placement is unspecified on the GPU)."""
    values = np.sort(np.asarray(x), axis=op.attrs["axis"], kind="stable")
    if op.attrs["descending"]:
        values = np.flip(values, op.attrs["axis"])
    return np.ascontiguousarray(values)

