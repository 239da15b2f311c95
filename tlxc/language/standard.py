"""Triton's library functions that tlxc writes as compositions of other builtins: ``tl.ravel``,
``tl.interleave``, ``tl.cat``, ``tl.swizzle2d``, ``tl.reduce_or``, ``tl.softmax``, ``tl.gather``,
``tl.histogram`` (the last two as selections over every position: exact, not fast), ``tl.topk``.

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


@kernel
def _pick(src, hits, axis: tl.constexpr):
    """The one element of ``src`` (broadcast against ``hits``) that each slice along ``axis`` of
    ``hits`` selects (0 where none does), in ``src``'s type."""
    return tl.sum(tl.where(hits, src, tl.zeros_like(src)), axis).to(src.dtype)


@kernel
def gather(src, index, axis: tl.constexpr):
    """``out[..., i, ...] = src[..., index[..., i, ...], ...]`` along ``axis`` (rank 1 or 2; the
    other dimension of ``index`` matches ``src``'s); an index outside ``src`` gives 0.  Computed
    by comparing every index with every position along ``axis`` (an ``index.numel x
    src.shape[axis]`` selection): exact, but its cost grows with both sizes."""
    tl.static_assert(len(src.shape) == len(index.shape), "tl.gather: src and index must have the same rank")
    tl.static_assert(len(src.shape) <= 2, "tl.gather: tlxc gathers from blocks of rank 1 or 2")
    n = tl.arange(0, src.shape[axis])
    if len(src.shape) == 1:
        return _pick(src[None, :], index[:, None] == n[None, :], 1)
    elif axis == 0:
        return _pick(src[None, :, :], index[:, None, :] == n[None, :, None], 1)
    else:
        return _pick(src[:, None, :], index[:, :, None] == n[None, None, :], 2)


@kernel
def histogram(input, num_bins: tl.constexpr, mask=None):
    """Counts (int32, ``[num_bins]``) of the values ``0 .. num_bins - 1`` in the 1-D block ``input``
    (bins of width 1 from 0; other values, and masked-off elements, are not counted).  Computed
    by comparing every element with every bin: exact, its cost ``input.numel x num_bins``."""
    tl.static_assert(len(input.shape) == 1, "tl.histogram counts a 1-D block")
    hits = input[:, None] == tl.arange(0, num_bins)[None, :]
    if mask is not None:
        hits = hits & mask[:, None]
    return tl.sum(hits.to(tl.int32), 0)


@kernel
def topk(x, k: tl.constexpr, dim: tl.constexpr = None, descending: tl.constexpr = True):
    """The ``k`` largest elements along the last dimension (``dim`` must be it, as in Triton; ``k`` a
    power of two), largest first: ``x.shape[:-1] + (k,)``; with ``descending=False`` the ``k``
    smallest, smallest first.  ``tl.sort`` in that order, then the first ``k`` of each row."""
    last: tl.constexpr = len(x.shape) - 1
    tl.static_assert(dim is None or dim == last or dim == -1, "tl.topk works along the last dimension")
    tl.static_assert(k <= x.shape[last], "tl.topk: k is larger than the dimension")
    ordered = tl.sort(x, descending=descending)
    if k == x.shape[last]:
        return ordered
    groups: tl.constexpr = x.shape[last] // k
    rows = tl.reshape(ordered, x.shape[:-1] + (groups, k))
    first = tl.arange(0, groups) == 0
    if len(x.shape) == 1:
        return _pick(rows, first[:, None], 0)
    return _pick(rows, first[None, :, None], len(x.shape) - 1)
