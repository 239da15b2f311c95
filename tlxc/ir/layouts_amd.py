"""AMD register layouts: the MFMA operand and accumulator fragments, as linear layouts.

One MFMA block (``M_BLK`` x ``N_BLK``, square: 16 or 32) over one wave of 64 lanes, K step
``K_INS``, ``P = K_INS * M_BLK / 64`` consecutive k per lane (CDNA3/CDNA4 ISA, "Matrix fused
multiply-add"):

- A (M x K):  element (i, k) in lane ``i + M_BLK * (k // P)``, register ``k % P``;
- B (K x N):  element (k, j) in lane ``j + N_BLK * (k // P)``, register ``k % P``;
- D (M x N):  32x32: register r of lane l holds (8 (r // 4) + 4 (l // 32) + r % 4, l % 32);
              16x16: (4 (l // 16) + r, l % 16).

A tile is covered by ``WM x WN`` waves (wave w = wm + WM * wn; waves along M first) and then
by repeating the block in registers: the accumulator's registers are the block's, then N
blocks, then M blocks; A's are P, then K steps, then M blocks; B's P, then K steps, then N
blocks (``rules_hip.py`` indexes them so).  The CPU emulation (codegen_amdgcn/emu) implements
the instructions from the ISA independently of these tables.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .layouts import Layout

WAVE = 64


@dataclass(frozen=True)
class MfmaShape:
    block: int          # M_BLK = N_BLK
    k: int              # K per instruction

    @property
    def per_lane(self) -> int:
        return self.k * self.block // WAVE

    @property
    def acc_registers(self) -> int:
        return self.block * self.block // WAVE


# Per element type, the instructions in order of preference: (block, k, needs the gfx950 set)
_CANDIDATES = {
    "f16": ((32, 16, True), (16, 32, True), (32, 8, False), (16, 16, False)),
    "bf16": ((32, 16, True), (16, 32, True), (32, 8, False), (16, 16, False)),
    "f8e4m3": ((32, 16, False), (16, 32, False)),     # fp8: OCP on gfx950, FNUZ on gfx942 (amdgcn.py)
    "f8e5m2": ((32, 16, False), (16, 32, False)),
}


def mfma_shape(element: str, m: int, n: int, k: int, cdna4: bool) -> MfmaShape | None:
    """The MFMA instruction for a ``m x n x k`` dot of ``element`` inputs (f32 accumulate), or None
    when none tiles it (the dot then runs on FMA)."""
    for block, k_ins, needs_cdna4 in _CANDIDATES.get(element, ()):
        if needs_cdna4 and not cdna4:
            continue
        if m % block == 0 and n % block == 0 and k % k_ins == 0:
            return MfmaShape(block, k_ins)
    return None


def _bits(n: int) -> list[int]:
    return [1 << b for b in range(n.bit_length() - 1)]


def warp_split(m: int, num_warps: int, block: int) -> tuple[int, int]:
    """(WM, WN): waves along M as far as M has blocks, the rest along N."""
    wm = 1
    while wm < num_warps and wm * 2 * block <= m:
        wm *= 2
    return wm, num_warps // wm


def _fit(basis: tuple[int, int], shape: tuple[int, int]) -> tuple[int, int]:
    """A wave basis past the tile broadcasts (the surplus waves compute copies)."""
    return basis if basis[0] < shape[0] and basis[1] < shape[1] else (0, 0)


def mfma_accumulator_layout(shape: Sequence[int], num_warps: int, mfma: MfmaShape) -> Layout:
    m, n = (int(s) for s in shape)
    blk = mfma.block
    wm, wn = warp_split(m, num_warps, blk)
    if blk == 32:
        block_regs = [(1, 0), (2, 0), (8, 0), (16, 0)]
        lanes = [(0, 1), (0, 2), (0, 4), (0, 8), (0, 16), (4, 0)]
    else:
        block_regs = [(1, 0), (2, 0)]
        lanes = [(0, 1), (0, 2), (0, 4), (0, 8), (4, 0), (8, 0)]
    n_blocks = max(1, n // (blk * wn))
    m_blocks = max(1, m // (blk * wm))
    registers = block_regs + [(0, blk * wn * b) for b in _bits(n_blocks)] + [(blk * wm * b, 0) for b in _bits(m_blocks)]
    warps = [_fit((blk * b, 0), (m, n)) for b in _bits(wm)] + [_fit((0, blk * b), (m, n)) for b in _bits(wn)]
    return Layout((m, n), tuple(registers), tuple(lanes), tuple(warps))


def mfma_operand_layout(shape: Sequence[int], op_idx: int, acc_shape: Sequence[int], num_warps: int,
                        mfma: MfmaShape) -> Layout:
    """A (``op_idx`` 0, M x K) or B (1, K x N) of the dot whose accumulator is ``acc_shape``."""
    rows, cols = (int(s) for s in shape)
    m, n = (int(s) for s in acc_shape)
    blk, p = mfma.block, mfma.per_lane
    wm, wn = warp_split(m, num_warps, blk)
    k = cols if op_idx == 0 else rows

    def at(outer: int, kk: int) -> tuple[int, int]:      # (M or N coordinate, k) -> (row, col)
        return (outer, kk) if op_idx == 0 else (kk, outer)
    outer_blocks = max(1, (m // (blk * wm)) if op_idx == 0 else (n // (blk * wn)))
    ways = wm if op_idx == 0 else wn
    registers = ([at(0, b) for b in _bits(p)] + [at(0, mfma.k * b) for b in _bits(k // mfma.k)]
                 + [at(blk * ways * b, 0) for b in _bits(outer_blocks)])
    lanes = [at(b, 0) for b in _bits(blk)] + [at(0, p * b) for b in _bits(WAVE // blk)]
    along = [_fit(at(blk * b, 0), (rows, cols)) for b in _bits(ways)]
    across = [(0, 0)] * len(_bits(wn if op_idx == 0 else wm))
    warps = along + across if op_idx == 0 else across + along
    return Layout((rows, cols), tuple(registers), tuple(lanes), tuple(warps))


# -- LDS bank conflicts ---------------------------------------------------------------------------
# The LDS of CDNA3 / CDNA4 (ISA, "Local data share"): 32 banks of 4 bytes; one ds_read / ds_write of
# ``v`` bytes per lane serves 128 bytes per cycle, so the wave's lanes go in groups of 128 / v (b32: 32
# lanes, b64: 16, b128: 8); within a group, distinct 4-byte words in one bank take a cycle each (the
# same word is broadcast).  The cost of an access is the cycles summed over its groups; a
# conflict-free access takes one cycle per group.
LDS_BANKS = 32
LDS_GROUP_BYTES = 128


def lds_vector_bytes(layout: Layout, elem_bytes: int, chunk: int = 16) -> int:
    """Bytes one lane moves per LDS instruction for a row-major buffer read or written in ``layout``
    (the codegen's rule: registers consecutive along the last dim, at most 16 bytes and at most the
    swizzle's contiguous ``chunk``)."""
    width = max(1, min(layout.contiguous_elements_per_thread(layout.ndim - 1), 16 // elem_bytes,
                       max(1, chunk // elem_bytes)))
    return width * elem_bytes


def lds_access_cycles(layout: Layout, elem_bytes: int, swizzle=None) -> tuple[int, int]:
    """(cycles, conflict-free cycles) of reading or writing a row-major LDS tile of ``layout``'s shape
    in ``layout`` (every warp, every register vector), with byte offsets mapped by ``swizzle`` (an
    ``XorSwizzle`` or None)."""
    chunk = swizzle.chunk if swizzle is not None else 16
    vec = lds_vector_bytes(layout, elem_bytes, chunk)
    width = vec // elem_bytes
    offsets = layout.flat_table().astype(np.int64) * elem_bytes         # [warps, lanes, registers]
    if swizzle is not None:
        offsets = swizzle.apply(offsets)
    words = max(1, vec // 4)
    group = max(1, min(WAVE, LDS_GROUP_BYTES // max(vec, 4)))
    cycles = ideal = 0
    warps, lanes, regs = offsets.shape
    for w in range(warps):
        for g in range(0, regs, width):
            first = offsets[w, :, g] // 4                              # each lane's first word
            touched = (first[:, None] + np.arange(words)[None, :])     # [lanes, words]
            for start in range(0, lanes, group):
                unique = np.unique(touched[start:start + group])
                cycles += int(np.bincount(unique % LDS_BANKS, minlength=LDS_BANKS).max())
                ideal += 1
    return cycles, ideal


def lds_swizzle_candidates(row_bytes: int):
    """XOR swizzles of a buffer with ``row_bytes``-byte rows: the chunk index within a row (chunks of
    4, 8 or 16 bytes) xored with the low bits of the row index (or of the row pair index)."""
    from .shared_layout import XorSwizzle
    if row_bytes & (row_bytes - 1) or row_bytes < 8:
        return []
    row_bits = row_bytes.bit_length() - 1
    out = []
    for base in (2, 3, 4):
        for shift in (row_bits - base, row_bits - base + 1):
            for bits in range(1, min(4, row_bits - base) + 1):
                if shift >= bits:
                    out.append(XorSwizzle(bits, base, shift))
    return out


def choose_lds_swizzle(readers, writers, row_bytes: int, elem_bytes: int):
    """The XOR swizzle (or None) that makes the LDS accesses of a buffer cheapest: ``readers`` /
    ``writers`` are the register layouts it is read / written in.  Only swizzles that keep the
    readers' vectors whole are candidates (a split vector is more instructions); readers weigh as
    much as writers; a swizzle is taken only when it costs strictly fewer cycles than none (ties:
    the first candidate, fewer bits)."""
    def cost(swizzle):
        return sum(lds_access_cycles(layout, elem_bytes, swizzle)[0] for layout in (*readers, *writers))
    widest = max((lds_vector_bytes(layout, elem_bytes) for layout in readers), default=4)
    best, best_cost = None, cost(None)
    for candidate in lds_swizzle_candidates(row_bytes):
        if candidate.chunk < widest:
            continue
        c = cost(candidate)
        if c < best_cost:
            best, best_cost = candidate, c
    return best


__all__ = ["LDS_BANKS", "MfmaShape", "choose_lds_swizzle", "lds_access_cycles", "lds_swizzle_candidates",
           "lds_vector_bytes", "mfma_accumulator_layout", "mfma_operand_layout", "mfma_shape", "warp_split"]
