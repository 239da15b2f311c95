"""``dst[b, h] = src[b, h]ᵀ``: the last two dimensions of a 4-D tensor transposed, tile by tile.

The fp8 attention forward's Vᵀ (``tlxc/ops/attention.py: transposed_v``): wgmma reads an 8-bit B
K-major only, so V ``[B, Hkv, S, D]`` is copied to ``[B, Hkv, D, S]``.  torch's copy of the
transposed view moves one byte per thread and ran at ~0.17 TB/s on the H200; here a program
loads a ``[BLOCK_S, BLOCK_D]`` tile along ``D`` (16-byte loads), ``tl.trans`` goes through shared
memory (``infer-layouts``), and the ``[BLOCK_D, BLOCK_S]`` store runs along ``S``.  Program
``(i, j, bh)``: tile ``i`` of S, ``j`` of D, ``bh = b * H + h``; rows and columns past the ends
are masked.  ``col_ptr`` (varlen fp8, optional): int32 per row of ``src`` (its S index), the
column of ``dst`` it goes to (the host's own mapping), instead of its own index.  ``PERMUTE32``
(without ``col_ptr``): within each group of 32 columns, column ``f`` takes the row that
``tlx.async_dot(..., a_k_order="accumulator")`` reads at fragment position ``f``
(``k32_accumulator_order``: ``16h + 4q + 2a + b -> 16h + 8a + 2q + b``; the rows are gathered on
the load side, so the store stays along S), and the columns ``S .. S_OUT`` past the last row are
written as zeros.
"""
from ... import language as tl
from ...runtime.jit import jit


@jit
def transpose_last2_kernel(src, dst, S, D, H, stride_sb, stride_sh, stride_ss, stride_db, stride_dh, stride_dd,
                           col_ptr=None, S_OUT=None, BLOCK_S: tl.constexpr = 64, BLOCK_D: tl.constexpr = 64,
                           PERMUTE32: tl.constexpr = False):
    bh = tl.program_id(2)
    b = bh // H
    h = bh - b * H
    rs = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    rd = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    src = src + b.to(tl.int64) * stride_sb + h.to(tl.int64) * stride_sh
    dst = dst + b.to(tl.int64) * stride_db + h.to(tl.int64) * stride_dh
    if PERMUTE32:       # dst column f takes row k32_accumulator_order(f): gathered rows, a plain store
        f = rs % 32
        rows = rs - f + (f // 16) * 16 + ((f // 2) % 2) * 8 + ((f // 4) % 4) * 2 + f % 2
    else:
        rows = rs
    tile = tl.load(src + rows[:, None] * stride_ss + rd[None, :], mask=(rows[:, None] < S) & (rd[None, :] < D))
    if col_ptr is not None:
        cols = tl.load(col_ptr + rs, mask=rs < S, other=0)
    else:
        cols = rs
    if S_OUT is None:
        rows_out = S
    else:
        rows_out = S_OUT
    tl.store(dst + rd[:, None] * stride_dd + cols[None, :], tl.trans(tile),
             mask=(rd[:, None] < D) & (rs[None, :] < rows_out))
