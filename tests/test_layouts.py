"""Tests of tlxc.ir.layouts: linear layouts over GF(2).

The references here are written independently of the bases (plain integer
arithmetic from Triton's blocked-layout definition and the PTX ISA fragment
formulas), so they check the bases rather than restate them.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tlxc.ir.layouts import (
    Layout,
    blocked,
    broadcast_to,
    compose,
    conversion_kind,
    default_blocked,
    expand_dims,
    parse_layout,
    parse_layout_at,
    reshape,
    slice_layout,
    transpose,
)
from tlxc.ir.layouts_nvidia import mma_accumulator_layout, mma_operand_layout

# ---------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------

def delinearize(index: int, sizes, order) -> list[int]:
    """Split ``index`` into per-dim indices, ``order[0]`` varying fastest."""
    out = [0] * len(sizes)
    for d in order:
        out[d] = index % sizes[d]
        index //= sizes[d]
    return out


def reference_blocked(shape, spt, tpw, wpc, order) -> np.ndarray:
    """Triton's blocked semantics, element by element: [warps, lanes, regs, ndim].

    Thread (warp w, lane l) owns, along each dim, a ``spt`` run starting at
    ``(w_d * tpw_d + l_d) * spt_d``, repeated every CTA tile, all modulo the
    extent.  Registers: the spt positions (in ``order``) then the tile
    repetitions (in ``order``); a run longer than the extent keeps only the
    extent (no second copy in registers).
    """
    rank = len(shape)
    tile = [spt[d] * tpw[d] * wpc[d] for d in range(rank)]
    held = [min(spt[d], shape[d]) for d in range(rank)]
    reps = [max(1, shape[d] // tile[d]) for d in range(rank)]
    n_held = math.prod(held)
    n_regs = n_held * math.prod(reps)
    out = np.zeros((math.prod(wpc), math.prod(tpw), n_regs, rank), dtype=np.int64)
    for w, l, r in itertools.product(range(out.shape[0]), range(out.shape[1]), range(n_regs)):
        wd = delinearize(w, wpc, order)
        ld = delinearize(l, tpw, order)
        kd = delinearize(r % n_held, held, order)
        rd = delinearize(r // n_held, reps, order)
        for d in range(rank):
            start = (wd[d] * tpw[d] + ld[d]) * spt[d]
            out[w, l, r, d] = (start + kd[d] + rd[d] * tile[d]) % shape[d]
    return out


def element_counts(layout: Layout) -> np.ndarray:
    """How many hardware slots hold each element, as an array of ``shape``."""
    coords = layout.coords_table().reshape(-1, layout.ndim)
    counts = np.zeros(layout.shape, dtype=np.int64)
    np.add.at(counts, tuple(coords.T), 1)
    return counts


def ptx_mma_c(lane: int, i: int) -> tuple[int, int]:
    """PTX ISA, mma.m16n8k16 accumulator c_i (f32)."""
    group, tig = lane >> 2, lane % 4
    row = group if i < 2 else group + 8
    return row, tig * 2 + (i & 1)


def ptx_mma_a(lane: int, i: int) -> tuple[int, int]:
    """PTX ISA, mma.m16n8k16 A fragment a_i (f16/bf16)."""
    group, tig = lane >> 2, lane % 4
    row = group if (i < 2 or 4 <= i < 6) else group + 8
    col = tig * 2 + (i & 1) + (8 if i >= 4 else 0)
    return row, col


def ptx_mma_b(lane: int, i: int) -> tuple[int, int]:
    """PTX ISA, mma.m16n8k16 B fragment b_i (f16/bf16)."""
    group, tig = lane >> 2, lane % 4
    row = tig * 2 + (i & 1) + (8 if i >= 2 else 0)
    return row, group


def ptx_wgmma_d(warp_in_group: int, lane: int, i: int) -> tuple[int, int]:
    """PTX ISA figure for wgmma m64nNk16 accumulator d_i (f32)."""
    group, tig = lane >> 2, lane % 4
    row = 16 * warp_in_group + group + 8 * ((i >> 1) & 1)
    col = 8 * (i >> 2) + tig * 2 + (i & 1)
    return row, col


BLOCKED_CASES = [
    # shape, size_per_thread, threads_per_warp, warps_per_cta, order
    ((128, 64), (1, 8), (4, 8), (4, 1), (1, 0)),
    ((64, 64), (2, 4), (8, 4), (2, 2), (1, 0)),
    ((64, 64), (2, 4), (8, 4), (2, 2), (0, 1)),
    ((256,), (4,), (32,), (4,), (0,)),
    ((1024,), (4,), (32,), (4,), (0,)),          # wrap-around
    ((16,), (4,), (32,), (4,), (0,)),            # tile larger: broadcast
    ((2,), (4,), (32,), (2,), (0,)),             # spt larger than the tensor
    ((8, 8), (1, 1), (4, 8), (4, 1), (1, 0)),    # warps broadcast
    ((4, 256), (1, 4), (2, 16), (8, 1), (1, 0)),  # rows wrap, warps broadcast
    ((32, 16, 8), (1, 2, 2), (2, 4, 4), (2, 2, 1), (2, 1, 0)),
    ((4, 8, 16), (2, 1, 4), (4, 2, 4), (1, 1, 4), (0, 2, 1)),
    ((1, 64), (1, 4), (1, 32), (2, 2), (1, 0)),
    ((128, 1), (1, 1), (32, 1), (4, 1), (0, 1)),
]


def all_layouts() -> list[Layout]:
    """A variety of layouts for round-trip and property tests."""
    out = [blocked(*case) for case in BLOCKED_CASES]
    acc = mma_accumulator_layout((128, 128), 4, "mma_v2")
    wg = mma_accumulator_layout((128, 256), 8, "wgmma")
    out += [acc, wg,
            mma_operand_layout((128, 64), 0, acc, 16),
            mma_operand_layout((64, 128), 1, acc, 16),
            mma_operand_layout((128, 64), 0, wg, 16),
            default_blocked((128, 64), 4, 16),
            default_blocked((8,), 8, 32),
            slice_layout(acc, 1), slice_layout(wg, 0),
            expand_dims(slice_layout(acc, 1), 1),
            transpose(acc, (1, 0)),
            reshape(blocked(*BLOCKED_CASES[0]), (32, 4, 64)),
            Layout((4,)),
            Layout((2, 2), register=[(1, 1)], lane=[(0, 1), (0, 0)])]
    return out


# ---------------------------------------------------------------------------
# Blocked
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("case", BLOCKED_CASES, ids=lambda c: str(c))
def test_blocked_matches_reference(case):
    layout = blocked(*case)
    np.testing.assert_array_equal(layout.coords_table(), reference_blocked(*case))


def test_blocked_matches_reference_randomised():
    rng = np.random.default_rng(0)
    for _ in range(200):
        rank = int(rng.integers(1, 4))
        shape = tuple(int(2 ** rng.integers(0, 7)) for _ in range(rank))
        spt = tuple(int(2 ** rng.integers(0, 3)) for _ in range(rank))
        tpw = split_power_of_two(32, rank, rng)
        wpc = split_power_of_two(int(2 ** rng.integers(0, 4)), rank, rng)
        order = tuple(int(d) for d in rng.permutation(rank))
        layout = blocked(shape, spt, tpw, wpc, order)
        expected = reference_blocked(shape, spt, tpw, wpc, order)
        np.testing.assert_array_equal(layout.coords_table(), expected,
                                      err_msg=str((shape, spt, tpw, wpc, order)))


def split_power_of_two(total: int, parts: int, rng) -> tuple[int, ...]:
    out = [1] * parts
    for _ in range(int(math.log2(total))):
        out[int(rng.integers(0, parts))] *= 2
    return tuple(out)


@pytest.mark.parametrize("layout", all_layouts(), ids=str)
def test_surjective_layouts_cover_every_element_equally(layout):
    if not layout.is_surjective():
        pytest.skip("not surjective")
    counts = element_counts(layout)
    assert (counts == layout.duplication()).all()
    zero_bases = sum(len(bits) for bits in layout.free_bits().values())
    nonzero = [b for name in ("register", "lane", "warp") for b in layout.bases(name) if any(b)]
    if len(nonzero) == layout.matrix_rank():   # zero bases are the only duplication
        assert layout.duplication() == 2 ** zero_bases


def test_blocked_is_broadcast_free_when_tile_fits():
    layout = blocked((128, 64), (1, 8), (4, 8), (4, 1), (1, 0))
    assert layout.is_broadcast_free()
    assert layout.num_registers == 64 and layout.num_lanes == 32 and layout.num_warps == 4
    small = blocked((8, 8), (1, 1), (4, 8), (4, 1), (1, 0))
    assert not small.is_broadcast_free()
    assert small.free_bits() == {"register": (), "lane": (), "warp": (1,)}


def test_default_blocked_is_coalesced():
    layout = default_blocked((128, 64), num_warps=4, elem_bits=16)
    assert layout.contiguous_elements_per_thread(1) == 8      # 16 bytes of f16
    assert layout.contiguous_elements_per_thread(0) == 1
    # A warp's lanes 0..7 cover one 64-element row: 128 contiguous bytes.
    table = layout.coords_table()
    assert sorted(table[0, :8, 0, 1].tolist()) == list(range(0, 64, 8))
    assert layout.is_broadcast_free()
    f32 = default_blocked((16, 1024), num_warps=4, elem_bits=32)
    assert f32.contiguous_elements_per_thread(1) == 4
    assert f32.is_surjective()
    tiny = default_blocked((4,), num_warps=4, elem_bits=8)
    assert tiny.is_surjective() and tiny.num_lanes == 32 and tiny.num_warps == 4


# ---------------------------------------------------------------------------
# MMA fragments
# ---------------------------------------------------------------------------

def test_mma_v2_accumulator_single_tile_matches_ptx():
    layout = mma_accumulator_layout((16, 8), num_warps=1, version="mma_v2")
    table = layout.coords_table()
    assert layout.num_registers == 4
    for lane, i in itertools.product(range(32), range(4)):
        assert tuple(table[0, lane, i]) == ptx_mma_c(lane, i)


@pytest.mark.parametrize("shape,num_warps,wpc", [
    ((128, 128), 4, (4, 1)), ((64, 64), 4, (2, 2)), ((32, 64), 8, (2, 4)),
    ((16, 32), 4, (1, 4)), ((64, 32), 8, None)])
def test_mma_v2_accumulator_tiles_match_ptx(shape, num_warps, wpc):
    layout = mma_accumulator_layout(shape, num_warps, "mma_v2", warps_per_cta=wpc)
    wm, wn = wpc if wpc else (min(num_warps, shape[0] // 16), num_warps // min(num_warps, shape[0] // 16))
    reps_n, reps_m = shape[1] // (8 * wn), shape[0] // (16 * wm)
    table = layout.coords_table()
    assert layout.num_registers == 4 * reps_m * reps_n
    for w, lane, r in itertools.product(range(num_warps), range(32), range(layout.num_registers)):
        i, rep = r % 4, r // 4
        row, col = ptx_mma_c(lane, i)
        tile_m = (w % wm) + wm * (rep // reps_n)
        tile_n = (w // wm) + wn * (rep % reps_n)
        assert tuple(table[w, lane, r]) == (16 * tile_m + row, 8 * tile_n + col)
    assert layout.is_broadcast_free()


@pytest.mark.parametrize("shape,num_warps", [
    ((64, 8), 4), ((64, 64), 4), ((64, 256), 4), ((128, 128), 8), ((64, 256), 8),
    ((256, 64), 8), ((128, 128), 4)])
def test_wgmma_accumulator_matches_ptx(shape, num_warps):
    layout = mma_accumulator_layout(shape, num_warps, "wgmma")
    groups = num_warps // 4
    gm = min(groups, shape[0] // 64)
    gn = groups // gm
    n_per_group = shape[1] // gn
    per_instr = n_per_group // 2                       # d registers of one m64nN
    reps_m = shape[0] // (64 * gm)
    table = layout.coords_table()
    assert layout.num_registers == per_instr * reps_m
    for w, lane, r in itertools.product(range(num_warps), range(32), range(layout.num_registers)):
        group, warp_in_group = divmod(w, 4)
        row, col = ptx_wgmma_d(warp_in_group, lane, r % per_instr)
        row += 64 * (group % gm + gm * (r // per_instr))
        col += n_per_group * (group // gm)
        assert tuple(table[w, lane, r]) == (row, col)


def test_mma_operands_single_tile_match_ptx():
    acc = mma_accumulator_layout((16, 8), 1, "mma_v2")
    a = mma_operand_layout((16, 16), 0, acc, 16).coords_table()
    b = mma_operand_layout((16, 8), 1, acc, 16).coords_table()
    for lane in range(32):
        for i in range(8):
            assert tuple(a[0, lane, i]) == ptx_mma_a(lane, i)
        for i in range(4):
            assert tuple(b[0, lane, i]) == ptx_mma_b(lane, i)


@pytest.mark.parametrize("acc_shape,num_warps,version,k", [
    ((128, 128), 4, "mma_v2", 64), ((64, 64), 4, "mma_v2", 32),
    ((32, 64), 8, "mma_v2", 16), ((128, 128), 8, "wgmma", 64), ((64, 128), 4, "wgmma", 32)])
def test_mma_operands_feed_their_warps(acc_shape, num_warps, version, k):
    """Each warp holds the full K of exactly the A rows / B columns of its accumulator."""
    m, n = acc_shape
    acc = mma_accumulator_layout(acc_shape, num_warps, version)
    a = mma_operand_layout((m, k), 0, acc, 16)
    acc_table = acc.coords_table()
    a_table = a.coords_table()
    for w in range(num_warps):
        rows = set(acc_table[w, :, :, 0].ravel().tolist())
        held = {tuple(x) for x in a_table[w].reshape(-1, 2).tolist()}
        assert held == {(row, col) for row in rows for col in range(k)}
    assert a.is_surjective()
    if version == "mma_v2":
        b = mma_operand_layout((k, n), 1, acc, 16)
        b_table = b.coords_table()
        for w in range(num_warps):
            cols = set(acc_table[w, :, :, 1].ravel().tolist())
            held = {tuple(x) for x in b_table[w].reshape(-1, 2).tolist()}
            assert held == {(row, col) for row in range(k) for col in cols}


def test_wgmma_a_fragment_matches_ptx():
    """wgmma's register A: warp w of the warpgroup holds rows 16w.. like mma's A."""
    acc = mma_accumulator_layout((64, 64), 4, "wgmma")
    table = mma_operand_layout((64, 16), 0, acc, 16).coords_table()
    for w, lane, i in itertools.product(range(4), range(32), range(8)):
        row, col = ptx_mma_a(lane, i)
        assert tuple(table[w, lane, i]) == (16 * w + row, col)


@pytest.mark.parametrize("call", [
    lambda: mma_accumulator_layout((8, 8), 1, "mma_v2"),
    lambda: mma_accumulator_layout((32, 64), 4, "wgmma"),
    lambda: mma_accumulator_layout((64, 64), 2, "wgmma"),
    lambda: mma_accumulator_layout((64, 64), 4, "mma_v3"),
    lambda: mma_accumulator_layout((64, 64), 4, "mma_v2", warps_per_cta=(2, 1)),
    lambda: mma_operand_layout((64, 16), 0, mma_accumulator_layout((64, 64), 4, "mma_v2"), 8),
    lambda: mma_operand_layout((32, 16), 0, mma_accumulator_layout((64, 64), 4, "mma_v2"), 16),
    lambda: mma_operand_layout((64, 8), 0, mma_accumulator_layout((64, 64), 4, "mma_v2"), 16),
])
def test_mma_bad_arguments_raise(call):
    with pytest.raises(ValueError, match="Expected"):
        call()


# ---------------------------------------------------------------------------
# Transformations commute with the coordinate table
# ---------------------------------------------------------------------------

def kept_registers(layout: Layout, dim: int) -> list[int]:
    """Registers of ``layout`` that survive slicing along ``dim``."""
    dropped = [bit for bit, b in enumerate(layout.register)
               if not any(c for d, c in enumerate(b) if d != dim)]
    return [r for r in range(layout.num_registers) if not any(r >> bit & 1 for bit in dropped)]


@pytest.mark.parametrize("layout", [l for l in all_layouts() if l.ndim >= 2], ids=str)
def test_slice_commutes_with_table(layout):
    for dim in range(layout.ndim):
        sliced = slice_layout(layout, dim)
        others = [d for d in range(layout.ndim) if d != dim]
        expected = layout.coords_table()[:, :, kept_registers(layout, dim)][..., others]
        np.testing.assert_array_equal(sliced.coords_table(), expected)


@pytest.mark.parametrize("layout", all_layouts(), ids=str)
def test_expand_dims_transpose_reshape_commute_with_table(layout):
    table = layout.coords_table()
    for dim in range(layout.ndim + 1):
        expanded = expand_dims(layout, dim).coords_table()
        np.testing.assert_array_equal(np.delete(expanded, dim, axis=-1), table)
        assert (expanded[..., dim] == 0).all()
    for perm in itertools.permutations(range(layout.ndim)):
        np.testing.assert_array_equal(transpose(layout, perm).coords_table(),
                                      table[..., list(perm)])
    flat = np.ravel_multi_index(tuple(np.moveaxis(table, -1, 0)), layout.shape)
    for new_shape in [(layout.numel,), (2, layout.numel // 2), (layout.numel // 4, 2, 2)]:
        if 0 in new_shape or math.prod(new_shape) != layout.numel:
            continue
        new = reshape(layout, new_shape).coords_table()
        np.testing.assert_array_equal(
            np.ravel_multi_index(tuple(np.moveaxis(new, -1, 0)), new_shape), flat)


def test_broadcast_to_replicates_in_registers():
    row = expand_dims(slice_layout(blocked((64, 32), (1, 4), (8, 4), (4, 1), (1, 0)), 1), 1)
    wide = broadcast_to(row, (64, 32))
    assert wide.is_surjective()
    table = wide.coords_table()
    np.testing.assert_array_equal(table[:, :, : row.num_registers, 0],
                                  row.coords_table()[..., 0])
    # register r holds row-source register r % R, at column r // R
    source = row.coords_table()
    for r in range(wide.num_registers):
        np.testing.assert_array_equal(table[:, :, r, 0], source[:, :, r % row.num_registers, 0])
        assert (table[:, :, r, 1] == r // row.num_registers).all()


def test_broadcast_to_parent_reuses_parent():
    parent = mma_accumulator_layout((64, 64), 4, "mma_v2")
    for dim in (0, 1):
        reduced = expand_dims(slice_layout(parent, dim), dim)
        assert broadcast_to(reduced, (64, 64), parent=parent) == parent
    other = blocked((64, 64), (1, 4), (8, 4), (4, 1), (1, 0))
    with pytest.raises(ValueError, match="collapse"):
        broadcast_to(expand_dims(slice_layout(parent, 1), 1), (64, 64), parent=other)
    with pytest.raises(ValueError, match="to be 1"):
        broadcast_to(parent, (64, 128))


# ---------------------------------------------------------------------------
# Queries
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("layout", [l for l in all_layouts() if l.is_surjective()], ids=str)
def test_reduction_plan_sums_each_element_once(layout):
    rng = np.random.default_rng(1)
    values = rng.integers(0, 1000, size=layout.shape)
    coords = layout.coords_table()
    for dim in range(layout.ndim):
        if any(b[dim] and sum(map(bool, b)) > 1
               for name in ("register", "lane", "warp") for b in layout.bases(name)):
            continue          # mixed bases: rejected, see test_reduction_plan_rejects_mixed_bases
        plan = layout.reduction_plan(dim)
        held = values[tuple(np.moveaxis(coords, -1, 0))]          # [W, L, R]
        for bit in plan.register_bits:
            held = held + held[:, :, np.arange(held.shape[2]) ^ (1 << bit)]
        for mask in plan.shuffle_xor_masks:
            held = held + held[:, np.arange(held.shape[1]) ^ mask, :]
        for bit in plan.warp_bits:
            held = held + held[np.arange(held.shape[0]) ^ (1 << bit), :, :]
        total = values.sum(axis=dim)
        others = [d for d in range(layout.ndim) if d != dim]
        expected = total[tuple(np.moveaxis(coords[..., others], -1, 0))] if others else total
        np.testing.assert_array_equal(held, np.broadcast_to(expected, held.shape))
        assert plan.result == (slice_layout(layout, dim) if layout.ndim >= 2 else None)


def test_reduction_plan_of_mma_accumulator():
    acc = mma_accumulator_layout((128, 128), 4, "mma_v2")
    rows = acc.reduction_plan(1)      # row sums: registers, then threads of a quad
    assert rows.register_bits == (0, 2, 3, 4, 5) and rows.shuffle_xor_masks == (1, 2)
    assert not rows.needs_shared_memory
    cols = acc.reduction_plan(0)
    assert cols.shuffle_xor_masks == (4, 8, 16) and cols.warp_bits == (0, 1)
    assert cols.needs_shared_memory


def test_reduction_plan_rejects_mixed_bases():
    layout = Layout((4, 4), register=[(1, 1), (2, 0)], lane=[(0, 1), (0, 2)])
    with pytest.raises(ValueError, match="along dim 0 alone"):
        layout.reduction_plan(0)


def test_apply_and_codegen_helpers_agree_with_table():
    layout = blocked((64, 32), (2, 4), (8, 4), (2, 2), (1, 0))
    table = layout.coords_table()
    constants = layout.register_constants()
    for dim in range(2):
        assert layout.xor_equals_add(dim)
        terms = layout.thread_offset_bases(dim)
        for w, lane in itertools.product(range(layout.num_warps), range(layout.num_lanes)):
            index = {"lane": lane, "warp": w}
            thread_part = 0
            for name, bit, value in terms:
                thread_part ^= ((index[name] >> bit) & 1) * value
            for r in range(layout.num_registers):
                assert table[w, lane, r, dim] == thread_part ^ constants[r][dim]
                assert table[w, lane, r, dim] == thread_part + constants[r][dim]
                assert tuple(table[w, lane, r]) == layout.apply(r, lane, w)
    overlapping = Layout((8,), register=[(1,)], lane=[(3,)])
    assert not overlapping.xor_equals_add(0)
    with pytest.raises(ValueError, match="lane index"):
        layout.apply(0, 32, 0)


def test_contiguous_elements_per_thread():
    assert blocked((64, 64), (2, 4), (8, 4), (2, 2), (1, 0)).contiguous_elements_per_thread(1) == 4
    assert blocked((64, 64), (2, 4), (8, 4), (2, 2), (0, 1)).contiguous_elements_per_thread(0) == 2
    acc = mma_accumulator_layout((64, 64), 4, "mma_v2")
    assert acc.contiguous_elements_per_thread(1) == 2
    assert acc.contiguous_elements_per_thread(-1) == 2
    assert acc.contiguous_elements_per_thread(0) == 1


@pytest.mark.parametrize("layout", [l for l in all_layouts() if l.is_surjective()], ids=str)
def test_invert_is_a_right_inverse(layout):
    inverse = layout.invert()
    table = inverse.table()
    for index in np.ndindex(*layout.shape):
        reg, lane, warp = table[index]
        assert layout.apply(int(reg), int(lane), int(warp)) == index
        assert inverse.apply(index) == (reg, lane, warp)


def test_invert_requires_surjective():
    with pytest.raises(ValueError, match="surjective"):
        Layout((4, 4), register=[(0, 1)]).invert()


def test_compose_finds_the_source_slot():
    src = blocked((64, 64), (1, 4), (8, 4), (4, 1), (1, 0))
    dst = mma_accumulator_layout((64, 64), 4, "mma_v2")
    mapping = compose(src.invert(), dst)
    src_table, dst_table = src.coords_table(), dst.coords_table()
    moved = mapping.table()
    for w, lane, r in itertools.product(range(4), range(32), range(dst.num_registers)):
        sr, sl, sw = moved[w, lane, r]
        assert mapping.apply(r, lane, w) == (sr, sl, sw)
        np.testing.assert_array_equal(src_table[sw, sl, sr], dst_table[w, lane, r])


def test_equivalent_is_exact_equality():
    a = blocked((64, 64), (1, 4), (8, 4), (4, 1), (1, 0))
    assert a.equivalent(blocked((64, 64), (1, 4), (8, 4), (4, 1), (1, 0)))
    assert not a.equivalent(blocked((64, 64), (1, 4), (8, 4), (2, 2), (1, 0)))
    assert hash(a) == hash(Layout.parse(str(a)))


# ---------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------

def test_conversion_kind_hand_made_cases():
    base = Layout((8, 8), register=[(0, 1), (0, 2)], lane=[(0, 4), (1, 0), (2, 0)],
                  warp=[(4, 0)])
    assert conversion_kind(base, base) == "identity"
    swapped_regs = Layout((8, 8), register=[(0, 2), (0, 1)],
                          lane=[(0, 4), (1, 0), (2, 0)], warp=[(4, 0)])
    assert conversion_kind(base, swapped_regs) == "register_permute"
    # lane bit 0 now also flips a register's column: same per-thread sets
    skewed = Layout((8, 8), register=[(0, 1), (0, 2)], lane=[(0, 6), (1, 0), (2, 0)],
                    warp=[(4, 0)])
    assert conversion_kind(base, skewed) == "register_permute"
    swapped_lanes = Layout((8, 8), register=[(0, 1), (0, 2)],
                           lane=[(1, 0), (0, 4), (2, 0)], warp=[(4, 0)])
    assert conversion_kind(base, swapped_lanes) == "warp_shuffle"
    transposed_in_warp = Layout((8, 8), register=[(1, 0), (2, 0)],
                                lane=[(0, 1), (0, 2), (0, 4)], warp=[(4, 0)])
    assert conversion_kind(base, transposed_in_warp) == "warp_shuffle"
    warps_swapped = Layout((8, 8), register=[(0, 1), (0, 2)],
                           lane=[(0, 4), (1, 0), (4, 0)], warp=[(2, 0)])
    assert conversion_kind(base, warps_swapped) == "shared_memory"


def test_conversion_kind_real_layouts():
    a = blocked((64, 64), (1, 4), (8, 4), (4, 1), (1, 0))
    b = blocked((64, 64), (1, 4), (8, 4), (1, 4), (1, 0))
    acc = mma_accumulator_layout((64, 64), 4, "mma_v2")
    assert conversion_kind(a, b) == "shared_memory"
    assert conversion_kind(acc, a) == "shared_memory"
    # Same 16-row band per warp, registers reordered: no data leaves a thread.
    reordered = Layout(acc.shape, register=[(0, 1), (0, 8), (0, 16), (0, 32), (8, 0)],
                       lane=acc.lane, warp=acc.warp)
    assert conversion_kind(acc, reordered) == "register_permute"
    # Same band per warp, lanes walk rows first: lanes exchange data.
    rows_first = Layout(acc.shape, register=acc.register,
                        lane=[(1, 0), (2, 0), (4, 0), (0, 2), (0, 4)], warp=acc.warp)
    assert conversion_kind(acc, rows_first) == "warp_shuffle"
    assert conversion_kind(rows_first, acc) == "warp_shuffle"
    with pytest.raises(ValueError, match="equal shapes"):
        conversion_kind(a, mma_accumulator_layout((64, 32), 4, "mma_v2"))


# ---------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("layout", all_layouts(), ids=str)
def test_text_round_trip(layout):
    text = str(layout)
    assert "\n" not in text and text.startswith("linear<") and text.endswith(">")
    assert Layout.parse(text) == layout
    assert parse_layout(text) == layout
    assert str(Layout.parse(text)) == text


def test_text_syntax():
    layout = Layout((128, 64), register=[(0, 1), (0, 2), (0, 4)],
                    lane=[(0, 8), (0, 16), (0, 32), (1, 0), (2, 0)], warp=[(4, 0), (8, 0)])
    assert str(layout) == ("linear<shape=[128,64], register=[[0,1],[0,2],[0,4]], "
                           "lane=[[0,8],[0,16],[0,32],[1,0],[2,0]], warp=[[4,0],[8,0]]>")
    spaced = " linear< shape = [128, 64] , register=[[0, 1], [0,2],[0,4]], " \
             "lane=[[0,8],[0,16],[0,32],[1,0],[2,0]], warp=[ [4,0], [8,0] ] > "
    assert Layout.parse(spaced) == layout
    assert str(Layout((4,))) == "linear<shape=[4], register=[], lane=[], warp=[]>"
    embedded = "tensor<4xf32, linear<shape=[4], register=[[1],[2]], lane=[], warp=[]>>"
    parsed, end = parse_layout_at(embedded, embedded.index("linear"))
    assert parsed.num_registers == 4 and embedded[end:] == ">"


@pytest.mark.parametrize("text,message", [
    ("blocked<shape=[4]>", "Expected 'linear<'"),
    ("linear<shape=[4], lane=[], register=[], warp=[]>", "Expected 'register'"),
    ("linear<shape=[4], register=[], lane=[], warp=[]", "Expected '>'"),
    ("linear<shape=[4], register=[[1]], lane=[], warp=[]> x", "Expected end of text"),
    ("linear<shape=[6], register=[], lane=[], warp=[]>", "power-of-two"),
    ("linear<shape=[4], register=[[1,0]], lane=[], warp=[]>", "Expected 1 coordinates"),
    ("linear<shape=[4,4], register=[[4,0]], lane=[], warp=[]>", r"coordinate 0 must be in \[0, 4\)"),
    ("linear<shape=[4], register=[[-1]], lane=[], warp=[]>", "non-negative integer"),
    ("linear<shape=[4], register=[[1] [2]], lane=[], warp=[]>", "Expected ','"),
    ("linear<shape=[], register=[], lane=[], warp=[]>", "rank >= 1"),
    ("", "Expected 'linear<'"),
])
def test_parse_errors_are_clear(text, message):
    with pytest.raises(ValueError, match=message):
        Layout.parse(text)


def test_constructor_validation():
    with pytest.raises(ValueError, match="permutation"):
        blocked((4, 4), (1, 1), (4, 8), (1, 1), (0, 0))
    with pytest.raises(ValueError, match="powers of two"):
        blocked((4, 4), (3, 1), (4, 8), (1, 1), (1, 0))
    with pytest.raises(ValueError, match="rank >= 1"):
        Layout(())
    with pytest.raises(ValueError, match="rank >= 2"):
        slice_layout(Layout((4,)), 0)
