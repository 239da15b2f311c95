"""Triton's standard-library functions that are compositions of other builtins: ``tl.ravel``,
``tl.interleave``, ``tl.cat``, ``tl.swizzle2d``, ``tl.reduce_or``, ``tl.softmax``.

Each is an ordinary ``@tlxc.kernel`` helper written in ``tl.*`` and inlined at its call, with
Triton's name and signature (``triton/language/standard.py``, ``core.cat``), so a kernel that
calls one ports unchanged and the interpreter and the GPU run the same operations.
"""
from __future__ import annotations

import math as _math

from ..runtime.jit import kernel
from . import core as tl
from . import math as _math_fns


@kernel
def ravel(x, can_reorder: tl.constexpr = False):
    """``x`` as a 1-D block of all its elements, in row-major order."""
    return tl.reshape(x, [_math.prod(x.shape)], can_reorder=can_reorder)


@kernel
def interleave(a, b):
    """The elements of ``a`` and ``b`` alternating along the last dimension: ``[a0, b0, a1, b1, ...]``
    (the last dimension doubles; two scalars give a block of 2)."""
    pairs = tl.join(a, b)
    if len(pairs.shape) == 1:
        return pairs
    return tl.reshape(pairs, pairs.shape[:-2] + (2 * pairs.shape[-2],))


@kernel
def cat(input, other, can_reorder: tl.constexpr = False):
    """Two 1-D blocks of one length end to end.  Triton requires ``can_reorder=True`` (its
    implementation may reorder the elements); tlxc keeps ``input``'s elements first, in order."""
    tl.static_assert(can_reorder, "tl.cat: the elements may be reordered; pass can_reorder=True (as Triton requires)")
    tl.static_assert(len(input.shape) == 1 and input.shape == other.shape,
                     "tl.cat concatenates two 1-D blocks of one length")
    halves = tl.permute(tl.join(input, other), (1, 0))                   # [2, N]: input's row, then other's
    return tl.reshape(halves, (2 * input.shape[0],))


@kernel
def swizzle2d(i, j, size_i, size_j, size_g):
    """Program ``(i, j)`` of a ``size_i x size_j`` grid, renumbered so that groups of ``size_g``
    rows are walked column by column (the last group may have fewer rows): the tile order that
    keeps a group's operands in L2.  Returns the new ``(i, j)``."""
    linear = i * size_j + j
    group_span = size_g * size_j                   # programs in one whole group of rows
    first_row = (linear // group_span) * size_g
    rows = tl.minimum(size_i - first_row, size_g)  # rows of this group
    within = linear % group_span
    return first_row + within % rows, within // rows


@kernel
def _bit_or(a, b):
    return a | b


@kernel
def reduce_or(input, axis, keep_dims: tl.constexpr = False):
    """Bitwise OR of the elements along ``axis`` (integers or booleans)."""
    return tl.reduce(input, axis, _bit_or, keep_dims=keep_dims)


@kernel
def softmax(x, dim=None, keep_dims: tl.constexpr = False, ieee_rounding: tl.constexpr = False):
    """``exp(x - max) / sum(exp(x - max))`` along ``dim`` (the first if None), in ``x``'s shape;
    ``ieee_rounding`` divides with correct rounding."""
    axis: tl.constexpr = 0 if dim is None else dim
    shifted = x - tl.max(x, axis, keep_dims=True)
    num = tl.exp(shifted)
    den = tl.sum(num, axis, keep_dims=True)
    if ieee_rounding:
        return _math_fns.div_rn(num, den)
    return num / den
