"""NVIDIA's register fragments as linear layouts (``ir/layouts.py``): the accumulators
of ``mma.sync m16n8`` and ``wgmma m64nN``, the A/B operands of ``mma.sync m16n8k16``
(and wgmma's A from registers), and the registers of a ``tcgen05.ld/st`` 32x32b
tensor-memory access, per the PTX ISA.  The layout core (``Layout``, ``blocked``,
conversions) is vendor-neutral; another vendor's fragments (AMD's MFMA) go in a
module of their own beside this one.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .layouts import (
    Coords,
    Layout,
    _axis_bases,
    _check_per_dim,
    _check_shape,
    _fit_to_shape,
    _is_pow2,
    _unit,
    blocked,
)

# Fragment of one mma.m16n8 instruction inside a warp, per the PTX ISA
# (groupID = lane >> 2, threadID_in_group = lane % 4).  Coordinates (row, col).
# Accumulator c0..c3: row = groupID + 8*(i >= 2), col = 2*tig + (i & 1).
_ACC_REGISTER = ((0, 1), (8, 0))
_ACC_LANE = ((0, 2), (0, 4), (1, 0), (2, 0), (4, 0))
# A (16x16, f16/bf16) a0..a7: row = groupID + 8*((i >> 1) & 1),
# col = 2*tig + (i & 1) + 8*(i >= 4).
_A_REGISTER = ((0, 1), (8, 0), (0, 8))
_A_LANE = _ACC_LANE
# B (16x8, f16/bf16) b0..b3: row = 2*tig + (i & 1) + 8*(i >= 2), col = groupID.
_B_REGISTER = ((1, 0), (8, 0))
_B_LANE = ((2, 0), (4, 0), (0, 1), (0, 2), (0, 4))
# mma.m16n8k8 with .tf32 (32-bit elements): A (16x8) a0..a3: row = groupID + 8*(i & 1),
# col = tig + 4*(i >= 2); B (8x8) b0, b1: row = tig + 4*i, col = groupID.
_A_REGISTER_TF32 = ((8, 0), (0, 4))
_A_LANE_TF32 = ((0, 1), (0, 2), (1, 0), (2, 0), (4, 0))
_B_REGISTER_TF32 = ((4, 0),)
_B_LANE_TF32 = ((1, 0), (2, 0), (0, 1), (0, 2), (0, 4))
# mma.m16n8k32 with .s8 (8-bit elements, four to a register): A (16x32) a0..a15: row = groupID + 8*((i >> 2) & 1),
# col = 4*tig + (i & 3) + 16*(i >= 8); B (32x8) b0..b7: row = 4*tig + (i & 3) + 16*(i >= 4), col = groupID.
_A_REGISTER_I8 = ((0, 1), (0, 2), (8, 0), (0, 16))
_A_LANE_I8 = ((0, 4), (0, 8), (1, 0), (2, 0), (4, 0))
_B_REGISTER_I8 = ((1, 0), (2, 0), (16, 0))
_B_LANE_I8 = ((4, 0), (8, 0), (0, 1), (0, 2), (0, 4))
_OPERAND_BASES = {16: (_A_REGISTER, _A_LANE, _B_REGISTER, _B_LANE, 16),
                  32: (_A_REGISTER_TF32, _A_LANE_TF32, _B_REGISTER_TF32, _B_LANE_TF32, 8),
                  8: (_A_REGISTER_I8, _A_LANE_I8, _B_REGISTER_I8, _B_LANE_I8, 32)}


def mma_accumulator_layout(shape: Sequence[int], num_warps: int, version: str,
                           warps_per_cta: Sequence[int] | None = None) -> Layout:
    """Accumulator of ``mma.sync m16n8`` (``"mma_v2"``) or ``wgmma m64nN`` (``"wgmma"``).

    ``warps_per_cta`` = (warps along M, warps along N); by default warps go
    along M as far as M allows.  For wgmma, each group of 4 consecutive warps
    is a warpgroup covering 64 rows (warp w of the group: rows 16w..16w+15),
    and one instruction spans the warpgroup's whole N (up to 256).
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) != 2:
        raise ValueError(f"Expected a rank-2 accumulator, got shape {list(shape)}")
    _check_shape(shape)
    if not _is_pow2(num_warps):
        raise ValueError(f"Expected a power-of-two num_warps, got {num_warps}")
    if version == "mma_v2":
        return _mma_v2_accumulator(shape, num_warps, warps_per_cta)
    if version == "wgmma":
        return _wgmma_accumulator(shape, num_warps, warps_per_cta)
    raise ValueError(f"Expected version 'mma_v2' or 'wgmma', got {version!r}")


def _warp_split(num_warps: int, warps_per_cta: Sequence[int] | None,
                default_m: int) -> tuple[int, int]:
    if warps_per_cta is None:
        return default_m, num_warps // default_m
    wm, wn = _check_per_dim("warps_per_cta", warps_per_cta, 2)
    if wm * wn != num_warps:
        raise ValueError(f"Expected warps_per_cta to multiply to {num_warps}, "
                         f"got {list(warps_per_cta)}")
    return wm, wn


def _mma_v2_accumulator(shape: Coords, num_warps: int,
                        warps_per_cta: Sequence[int] | None) -> Layout:
    m, n = shape
    if m < 16 or n < 8:
        raise ValueError(f"Expected an mma_v2 accumulator of at least 16x8, got {list(shape)}")
    wm, wn = _warp_split(num_warps, warps_per_cta, min(num_warps, m // 16))
    warp = _axis_bases(2, 0, 16, wm) + _axis_bases(2, 1, 8, wn)
    return _fit_to_shape(shape, list(_ACC_REGISTER), list(_ACC_LANE), warp, (1, 0))


def _wgmma_accumulator(shape: Coords, num_warps: int,
                       warps_per_cta: Sequence[int] | None) -> Layout:
    m, n = shape
    if num_warps % 4:
        raise ValueError(f"Expected a multiple of 4 warps for wgmma, got {num_warps}")
    if m < 64:
        raise ValueError(f"Expected a wgmma accumulator with at least 64 rows, got {list(shape)}")
    groups = num_warps // 4
    wm, wn = _warp_split(num_warps, warps_per_cta, 4 * min(groups, m // 64))
    if wm % 4:
        raise ValueError(f"Expected warps along M to be a multiple of 4 (whole "
                         f"warpgroups), got warps_per_cta={[wm, wn]}")
    n_per_group = n // wn
    if n_per_group < 8:
        raise ValueError(f"Expected at least 8 columns per warpgroup, got N={n} over {wn} "
                         f"warpgroups along N")
    instr_n = min(n_per_group, 256)
    register = list(_ACC_REGISTER) + _axis_bases(2, 1, 8, instr_n // 8)
    warp = (_axis_bases(2, 0, 16, 4) + _axis_bases(2, 0, 64, wm // 4)
            + _axis_bases(2, 1, n_per_group, wn))
    return _fit_to_shape(shape, register, list(_ACC_LANE), warp, (1, 0))


def tmem_layout(shape: Sequence[int], num_warps: int) -> Layout:
    """Registers of a tcgen05.ld / tcgen05.st of a tensor-memory tile.

    [128, N] (shape 32x32b): row r in thread r of the warp group (lane r % 32 of
    warp r // 32, the lanes that warp may access), its N columns in that
    thread's registers.  [64, N] (an M = 64 accumulator, rows at lanes 0-15 of
    each warp's 32; shape 16x32bx2): row 16 * w + (l % 16) in lane l of warp w,
    lanes 0-15 holding its first N / 2 columns and lanes 16-31 the other half."""
    shape = tuple(int(s) for s in shape)
    if len(shape) != 2 or shape[0] not in (128, 64):
        raise ValueError(f"expected a [128, N] or [64, N] tensor-memory tile, got {list(shape)}")
    if num_warps != 4:
        raise ValueError(f"tensor memory moves to and from the registers of one warp group (4 warps, one row "
                         f"per thread), not {num_warps} warps")
    if shape[0] == 64:
        if shape[1] % 2:
            raise ValueError(f"a [64, N] tensor-memory tile splits each row's N columns over two threads; N must "
                             f"be even, got {shape[1]}")
        return blocked(shape, [1, shape[1] // 2], [16, 2], [4, 1], [0, 1])
    return blocked(shape, [1, shape[1]], [32, 1], [4, 1], [1, 0])


def mma_operand_layout(shape: Sequence[int], op_idx: int, parent_acc_layout: Layout,
                       elem_bits: int) -> Layout:
    """Register layout of the A (``op_idx=0``, [M, K]) or B (``op_idx=1``, [K, N])
    operand of ``mma.sync m16n8k16`` (16-bit elements), ``mma.sync m16n8k8`` (32-bit: tf32) or
    ``mma.sync m16n8k32`` (8-bit integers) feeding ``parent_acc_layout``.

    Each warp holds the A rows / B columns of its own accumulator tile and
    copies of the rest (warps along the other dim broadcast).  Because wgmma's
    register A fragment is the same per-warp pattern, this also gives the
    wgmma A-from-registers layout when the parent is a wgmma accumulator
    (wgmma's B always comes from shared memory).
    """
    shape = tuple(int(s) for s in shape)
    _check_shape(shape)
    if elem_bits not in _OPERAND_BASES:
        raise ValueError(f"Expected 16-bit (f16/bf16, m16n8k16), 32-bit (tf32, m16n8k8) or 8-bit (s8, m16n8k32) "
                         f"operands, got elem_bits={elem_bits}")
    if len(shape) != 2 or parent_acc_layout.ndim != 2:
        raise ValueError(f"Expected rank-2 operand and accumulator, got {list(shape)} "
                         f"and {list(parent_acc_layout.shape)}")
    if op_idx == 0:
        return _operand_a(shape, parent_acc_layout, elem_bits)
    if op_idx == 1:
        return _operand_b(shape, parent_acc_layout, elem_bits)
    raise ValueError(f"Expected op_idx 0 (A) or 1 (B), got {op_idx}")


def _warp_bases_along(parent: Layout, acc_dim: int, operand_dim: int) -> list[Coords]:
    """The parent's warp bases along ``acc_dim``, moved to ``operand_dim``;
    warps along the other accumulator dim broadcast."""
    out = []
    for bit, basis in enumerate(parent.warp):
        if basis[1 - acc_dim] and basis[acc_dim]:
            raise ValueError(f"Expected accumulator warp bases along one dim, got warp "
                             f"bit {bit} = {list(basis)}")
        out.append(_unit(2, operand_dim, basis[acc_dim]))
    return out


def _operand_a(shape: Coords, parent: Layout, elem_bits: int = 16) -> Layout:
    m, k = shape
    register, lane, _, _, k_min = _OPERAND_BASES[elem_bits]
    if m != parent.shape[0] or m < 16 or k < k_min:
        raise ValueError(f"Expected A of shape [M={parent.shape[0]}, K>={k_min}], got {list(shape)}")
    warp = _warp_bases_along(parent, acc_dim=0, operand_dim=0)
    return _fit_to_shape(shape, list(register), list(lane), warp, (1, 0))


def _operand_b(shape: Coords, parent: Layout, elem_bits: int = 16) -> Layout:
    k, n = shape
    _, _, register, lane, k_min = _OPERAND_BASES[elem_bits]
    if n != parent.shape[1] or k < k_min or n < 8:
        raise ValueError(f"Expected B of shape [K>={k_min}, N={parent.shape[1]}], got {list(shape)}")
    warp = _warp_bases_along(parent, acc_dim=1, operand_dim=1)
    return _fit_to_shape(shape, list(register), list(lane), warp, (0, 1))


# -- explicit NVMMA register layouts (TLX's ``tlx.nv_mma_layout``) ------------------------------
@dataclass(frozen=True)
class NvMmaLayout:
    """An MMA accumulator register layout a kernel asks for by name (TLX's
    ``tlx.nv_mma_layout(warps_per_cta, instr_shape)``): Triton's ``#nvidia_mma`` encoding.
    ``version`` 3 is Hopper's wgmma fragment (each warp 16 rows x ``instr_shape[1]`` columns),
    2 the ``mma.sync m16n8`` one; warps step along M by 16 rows, then along N by the instruction's
    width, and the tile repeats over (or is broadcast onto) the tensor's shape.  Unlike the
    layout tlxc gives a wgmma accumulator, the warps need not form whole warpgroups: a value in
    such a layout is converted where an MMA consumes it, as TLX does."""

    warps_per_cta: tuple[int, int]
    instr_shape: tuple[int, ...]
    version: tuple[int, int] = (3, 0)

    def __str__(self) -> str:
        return (f"#nvidia_mma<version={list(self.version)}, warpsPerCTA={list(self.warps_per_cta)}, "
                f"instrShape={list(self.instr_shape)}>")

    def attrs(self) -> dict:
        """The layout as IR attributes (lists of ints: printable and parsable)."""
        return {"mma_version": list(self.version), "warps_per_cta": list(self.warps_per_cta),
                "instr_shape": list(self.instr_shape)}

    @classmethod
    def from_attrs(cls, attrs: dict) -> NvMmaLayout:
        return cls(tuple(attrs["warps_per_cta"]), tuple(attrs["instr_shape"]), tuple(attrs["mma_version"]))


def nv_mma_layout(warps_per_cta, instr_shape, version=(3, 0)) -> NvMmaLayout:
    """Build and check an ``NvMmaLayout`` (``ValueError`` naming the bad argument)."""
    def ints(value, what: str, least: int = 1) -> tuple[int, ...]:
        try:
            items = tuple(value)
        except TypeError:
            raise ValueError(f"'{what}' must be a list of integers, got {value!r}") from None
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= least for v in items):
            raise ValueError(f"'{what}' must be integers of at least {least}, got {list(items)}")
        return items

    version = ints((version,) if isinstance(version, int) else version, "version", 0)
    version = (version + (0,))[:2] if len(version) == 1 else version
    if len(version) != 2 or version[0] not in (2, 3):
        raise ValueError(f"'version' must be 2 (mma.sync) or 3 (Hopper's wgmma), got {list(version)}")
    warps = ints(warps_per_cta, "warps_per_cta")
    if len(warps) != 2 or not all(_is_pow2(w) for w in warps):
        raise ValueError(f"'warps_per_cta' must be two powers of two (warps along M, N), got {list(warps)}")
    instr = ints(instr_shape, "instr_shape")
    if version[0] == 3:
        if len(instr) != 3 or instr[0] != 16 or instr[1] % 8 or not 8 <= instr[1] <= 256 or not _is_pow2(instr[1]):
            raise ValueError(f"'instr_shape' of a version-3 (wgmma) layout is [16, N, K] with N a power of two "
                             f"from 8 to 256 (per warp: 16 rows of the m64nNkK instruction), got {list(instr)}")
    elif instr[:2] != (16, 8) or len(instr) not in (2, 3):
        raise ValueError(f"'instr_shape' of a version-2 (mma.sync) layout is [16, 8] or [16, 8, K], got "
                         f"{list(instr)}")
    return NvMmaLayout(warps, instr, version)


def nv_mma_register_layout(spec: NvMmaLayout, shape: Sequence[int], num_warps: int) -> Layout:
    """The register layout of a ``shape`` tensor in ``spec`` for ``num_warps`` warps."""
    shape = tuple(int(s) for s in shape)
    if len(shape) != 2:
        raise ValueError(f"an NVMMA layout lays out rank-2 tensors, got shape {list(shape)}")
    _check_shape(shape)
    wm, wn = spec.warps_per_cta
    if wm * wn != num_warps:
        raise ValueError(f"warps_per_cta={list(spec.warps_per_cta)} is {wm * wn} warps, but the code runs on "
                         f"{num_warps}")
    if spec.version[0] == 2:
        return mma_accumulator_layout(shape, num_warps, "mma_v2", (wm, wn))
    instr_n = spec.instr_shape[1]
    register = list(_ACC_REGISTER) + _axis_bases(2, 1, 8, instr_n // 8)
    warp = _axis_bases(2, 0, 16, wm) + _axis_bases(2, 1, instr_n, wn)
    return _fit_to_shape(shape, register, list(_ACC_LANE), warp, (1, 0))


__all__ = ["NvMmaLayout", "mma_accumulator_layout", "mma_operand_layout", "nv_mma_layout", "nv_mma_register_layout",
           "tmem_layout"]


def wgmma_tiles(layout: Layout) -> tuple[int, list[Coords]]:
    """How a wgmma accumulator ``layout`` splits into ``m64nN`` instructions: N (the
    register bases along N after the fragment's own (0, 1) and (8, 0), up to 256) and the
    (row, column) of each instruction's tile as thread 0 of the warpgroup holds it, in
    register order (tile t is registers ``t * N/2 ..``)."""
    instr_n = 8
    for basis in layout.register[2:]:
        if basis[0] == 0 and basis[1] == instr_n and instr_n < 256:
            instr_n *= 2
        else:
            break
    per_tile = instr_n // 2
    return instr_n, [tuple(layout.apply(register=t * per_tile))
                     for t in range(layout.num_registers // per_tile)]
