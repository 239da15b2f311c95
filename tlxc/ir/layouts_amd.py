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
    "bf16": ((32, 8, False), (16, 16, False)),
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


__all__ = ["MfmaShape", "mfma_accumulator_layout", "mfma_operand_layout", "mfma_shape", "warp_split"]
