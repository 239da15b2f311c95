"""Distributed register layouts as linear maps over GF(2).

Every register layout in tlxc (blocked, mma/wgmma accumulators and operands,
slices left by reductions, reshapes, ...) is one ``Layout``: a map from the
bits of three hardware indices -- ``register`` (the slot inside a thread),
``lane`` (the thread inside a warp) and ``warp`` (the warp inside the CTA) --
to tensor coordinates.  The idea is Triton's "linear layouts"
(arXiv 2505.23819); the code here is written from scratch.
NVIDIA's instruction fragments (mma/wgmma/tcgen05) are built in ``layouts_nvidia.py``.

The model
---------
A layout of a tensor of power-of-two ``shape`` stores, for each input dim, one
*basis* per bit of that input: a tuple of tensor coordinates.  The element
held at ``(register, lane, warp)`` is the XOR of the bases of all set bits::

    coords(r, l, w) = XOR_{i: r>>i&1} register[i]
                    ^ XOR_{i: l>>i&1} lane[i]
                    ^ XOR_{i: w>>i&1} warp[i]

(XOR per coordinate, on the integer coordinates).  Because every extent is a
power of two, XOR of coordinates is XOR of row-major flat indices, so a layout
is a matrix over GF(2) from hardware bits to flat-index bits, and conversions,
vector widths, reduction shuffles and broadcast all follow from rank and span
computations on that matrix.

A zero basis means the bit duplicates data (broadcast): the threads that
differ only in that bit hold the same elements.

XOR versus +
------------
Codegen rebuilds a coordinate at run time as ``thread_part ^ register_part``
(see ``thread_offset_bases`` and ``register_constants``).  XOR equals ``+``
whenever the bases contributing to a coordinate have pairwise disjoint set
bits; ``Layout.xor_equals_add(dim)`` says so.  That holds for everything the
constructors here build (each basis is a distinct power of two or zero), so
codegen may emit ``+`` -- which folds better into address arithmetic.  It
stops holding only for hand-written or swizzled layouts whose bases overlap;
there ``^`` is the only correct operator.

Register order
--------------
Register numbering is part of the layout (codegen's register ``r`` is slot
``r``).  Conventions used by the constructors:

* ``blocked``: the ``size_per_thread`` bits of each dim in ``order`` (fastest
  first), then wrap-around repetitions of each dim in ``order``.
* mma/wgmma accumulators: the PTX fragment order inside one instruction tile
  (``c0..c3``; for wgmma ``d0..d(N/2-1)``), then repetitions along N, then
  along M.
* mma operands: the fragment order (``a0..a7`` / ``b0..b3``), then K
  repetitions, then M (for A) or N (for B) repetitions.

Warps of mma/wgmma accumulators: low warp bits walk M, high ones N; for
wgmma warp ``w`` is warp ``w % 4`` of warpgroup ``w // 4`` (rows 16*(w % 4)).

Text form (one line, round-trips through ``Layout.parse``/``str``)::

    linear<shape=[128,64], register=[[0,1],[0,2]], lane=[[0,4],...], warp=[]>
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

INPUT_DIMS = ("register", "lane", "warp")
LANES_PER_WARP = 32

Coords = tuple[int, ...]
Bases = tuple[Coords, ...]


# ---------------------------------------------------------------------------
# Small helpers: powers of two, flat indices, GF(2) elimination
# ---------------------------------------------------------------------------

def _is_pow2(n: int) -> bool:
    return isinstance(n, (int, np.integer)) and n >= 1 and (n & (n - 1)) == 0


def _log2(n: int) -> int:
    return int(n).bit_length() - 1


def _unit(rank: int, dim: int, value: int) -> Coords:
    """The basis that moves only along ``dim``, by ``value``."""
    return tuple(value if d == dim else 0 for d in range(rank))


def _dim_shifts(shape: Sequence[int]) -> tuple[int, ...]:
    """Bit offset of each coordinate inside the row-major flat index."""
    shifts, acc = [], 0
    for extent in reversed(shape):
        shifts.append(acc)
        acc += _log2(extent)
    return tuple(reversed(shifts))


def _flatten(coords: Sequence[int], shape: Sequence[int]) -> int:
    flat = 0
    for c, shift in zip(coords, _dim_shifts(shape)):
        flat |= int(c) << shift
    return flat


def _unflatten(flat: int, shape: Sequence[int]) -> Coords:
    return tuple((flat >> shift) & (extent - 1)
                 for extent, shift in zip(shape, _dim_shifts(shape)))


def _xor_table(vectors: Sequence[int]) -> np.ndarray:
    """XOR of every subset of ``vectors``, indexed by the subset's bitmask."""
    table = np.zeros(1, dtype=np.int64)
    for v in vectors:
        table = np.concatenate([table, table ^ v])
    return table


class _Eliminator:
    """Incremental Gaussian elimination over GF(2) on int bit-vectors.

    Each stored row remembers which inserted vectors it combines, so that a
    vector in the span can be written back as a combination of the inputs
    (that is how right inverses are built).  Rows are keyed by their highest
    set bit, which makes membership a greedy reduction.
    """

    def __init__(self) -> None:
        self._rows: dict[int, tuple[int, int]] = {}

    @property
    def rank(self) -> int:
        return len(self._rows)

    def reduce(self, vector: int) -> tuple[int, int]:
        """(residual, combination); residual is 0 iff ``vector`` is in the span."""
        combination = 0
        while vector:
            row = self._rows.get(vector.bit_length() - 1)
            if row is None:
                break
            vector ^= row[0]
            combination ^= row[1]
        return vector, combination

    def add(self, vector: int, tag: int = 0) -> bool:
        """Insert ``vector`` (known as combination ``tag``); True if independent."""
        residual, combination = self.reduce(vector)
        if residual == 0:
            return False
        self._rows[residual.bit_length() - 1] = (residual, combination ^ tag)
        return True

    def contains(self, vector: int) -> bool:
        return self.reduce(vector)[0] == 0


def _span_rank(vectors: Sequence[int]) -> int:
    elim = _Eliminator()
    for v in vectors:
        elim.add(v)
    return elim.rank


def _same_span(a: Sequence[int], b: Sequence[int]) -> bool:
    rank_a = _span_rank(a)
    return rank_a == _span_rank(b) == _span_rank(list(a) + list(b))


# ---------------------------------------------------------------------------
# The layout
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ReductionPlan:
    """How to combine the copies of a thread's data to reduce along ``dim``.

    Combine, in this order: registers ``r`` and ``r ^ (1 << b)`` for each
    ``register_bits`` entry, then a butterfly ``shfl.xor`` with each of
    ``shuffle_xor_masks``, then (if ``warp_bits``) exchange partial results
    between warps through shared memory.  Bits whose basis is zero, or
    repeats data already covered, are left out: combining them would count
    an element twice.  ``result`` is the layout of the reduced tensor (None
    when reducing a rank-1 tensor to a scalar).
    """

    dim: int
    register_bits: tuple[int, ...]
    lane_bits: tuple[int, ...]
    warp_bits: tuple[int, ...]
    result: Layout | None

    @property
    def shuffle_xor_masks(self) -> tuple[int, ...]:
        return tuple(1 << bit for bit in self.lane_bits)

    @property
    def needs_shared_memory(self) -> bool:
        return bool(self.warp_bits)


@dataclass(frozen=True, repr=False)
class Layout:
    """A distributed register layout: (register, lane, warp) bits -> coords.

    ``register``/``lane``/``warp`` hold one basis per bit of that hardware
    index; the number of bits fixes the number of registers, lanes and warps.
    Frozen and hashable so it can sit inside IR types; lists passed in are
    normalised to tuples.
    """

    shape: Coords
    register: Bases = ()
    lane: Bases = ()
    warp: Bases = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        _check_shape(self.shape)
        for name in INPUT_DIMS:
            bases = tuple(tuple(int(c) for c in b) for b in getattr(self, name))
            for bit, basis in enumerate(bases):
                _check_basis(basis, self.shape, name, bit)
            object.__setattr__(self, name, bases)

    # -- sizes ---------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape))

    @property
    def num_registers(self) -> int:
        return 1 << len(self.register)

    @property
    def num_lanes(self) -> int:
        return 1 << len(self.lane)

    @property
    def num_warps(self) -> int:
        return 1 << len(self.warp)

    def bases(self, input_dim: str) -> Bases:
        if input_dim not in INPUT_DIMS:
            raise ValueError(f"Expected one of {INPUT_DIMS}, got {input_dim!r}")
        return getattr(self, input_dim)

    def _all_bases(self) -> Iterator[tuple[str, int, Coords]]:
        for name in INPUT_DIMS:
            for bit, basis in enumerate(self.bases(name)):
                yield name, bit, basis

    def _flat_columns(self) -> list[int]:
        """Flat-index image of every input bit: register, then lane, then warp."""
        return [_flatten(b, self.shape) for _, _, b in self._all_bases()]

    # -- evaluation ----------------------------------------------------------
    def apply(self, register: int = 0, lane: int = 0, warp: int = 0) -> Coords:
        """Tensor coordinates of the element held at this hardware index."""
        flat = 0
        for name, index in zip(INPUT_DIMS, (register, lane, warp)):
            bases = self.bases(name)
            if not 0 <= index < (1 << len(bases)):
                raise ValueError(f"Expected {name} index in [0, {1 << len(bases)}), "
                                 f"got {index}")
            for bit, basis in enumerate(bases):
                if index >> bit & 1:
                    flat ^= _flatten(basis, self.shape)
        return _unflatten(flat, self.shape)

    def flat_table(self) -> np.ndarray:
        """Row-major flat index held at every hardware index, [warps, lanes, registers]."""
        tables = [_xor_table([_flatten(b, self.shape) for b in self.bases(n)])
                  for n in INPUT_DIMS]
        reg, lane, warp = tables
        return warp[:, None, None] ^ lane[None, :, None] ^ reg[None, None, :]

    def coords_table(self) -> np.ndarray:
        """Coordinates held at every hardware index, [warps, lanes, registers, ndim]."""
        flat = self.flat_table()
        columns = [(flat >> shift) & (extent - 1)
                   for extent, shift in zip(self.shape, _dim_shifts(self.shape))]
        return np.stack(columns, axis=-1)

    # -- structure -----------------------------------------------------------
    def matrix_rank(self) -> int:
        """Rank of the GF(2) matrix: log2 of the number of distinct elements held."""
        return _span_rank(self._flat_columns())

    def is_surjective(self) -> bool:
        """Every tensor element is held somewhere."""
        return self.matrix_rank() == _log2(self.numel)

    def is_injective(self) -> bool:
        """No element is held twice."""
        return self.matrix_rank() == len(self._flat_columns())

    def duplication(self) -> int:
        """How many hardware slots hold each held element (same for all)."""
        return 1 << (len(self._flat_columns()) - self.matrix_rank())

    def free_bits(self) -> dict[str, tuple[int, ...]]:
        """Input bits whose basis is zero: flipping them changes no coordinate."""
        return {name: tuple(bit for bit, b in enumerate(self.bases(name)) if not any(b))
                for name in INPUT_DIMS}

    def is_broadcast_free(self) -> bool:
        """No zero basis and no other duplication: every slot holds a distinct element."""
        return self.is_injective()

    def equivalent(self, other: Layout) -> bool:
        """Same function on the same hardware domain.

        A linear map is fixed by its bases, so this is exact basis equality
        (the same as ``==``); it exists to say that in the name.
        """
        return isinstance(other, Layout) and self == other

    def contiguous_elements_per_thread(self, dim: int) -> int:
        """Elements consecutive along ``dim`` held in registers 0, 1, 2, ...

        This is the vector width for loads/stores along ``dim`` (before
        alignment and the 16-byte limit are applied by the caller).
        """
        dim = self._check_dim(dim)
        width = 0
        for basis in self.register:
            if basis != _unit(self.ndim, dim, 1 << width):
                break
            width += 1
        return 1 << width

    def xor_equals_add(self, dim: int) -> bool:
        """True when ``^`` and ``+`` agree for combining bases along ``dim``."""
        dim = self._check_dim(dim)
        seen = 0
        for _, _, basis in self._all_bases():
            if basis[dim] & seen:
                return False
            seen |= basis[dim]
        return True

    # -- codegen helpers ---------------------------------------------------------
    def thread_offset_bases(self, dim: int) -> tuple[tuple[str, int, int], ...]:
        """(input_dim, bit, value) for lane/warp bits that move along ``dim``.

        Codegen emits ``((lane >> bit) & 1) * value ^ ...`` (or ``+`` when
        ``xor_equals_add``) and combines it with ``register_constants``.
        """
        dim = self._check_dim(dim)
        return tuple((name, bit, basis[dim])
                     for name in ("lane", "warp")
                     for bit, basis in enumerate(self.bases(name)) if basis[dim])

    def register_constants(self) -> tuple[Coords, ...]:
        """Coordinates of every register of thread (lane 0, warp 0)."""
        table = self.coords_table()[0, 0]
        return tuple(tuple(int(c) for c in row) for row in table)

    def reduction_plan(self, dim: int) -> ReductionPlan:
        """Which register/lane/warp bits to combine to reduce along ``dim``."""
        dim = self._check_dim(dim)
        span = _Eliminator()
        chosen: dict[str, list[int]] = {name: [] for name in INPUT_DIMS}
        for name, bit, basis in self._all_bases():
            if basis[dim] == 0:
                continue
            if any(c for d, c in enumerate(basis) if d != dim):
                raise ValueError(
                    f"Expected every basis to move along dim {dim} alone or not at all, "
                    f"got {name} bit {bit} = {list(basis)}: such a layout cannot be "
                    f"reduced by a butterfly; convert it first")
            if span.add(basis[dim]):
                chosen[name].append(bit)
        result = slice_layout(self, dim) if self.ndim > 1 else None
        return ReductionPlan(dim, tuple(chosen["register"]), tuple(chosen["lane"]),
                             tuple(chosen["warp"]), result)

    def invert(self) -> InverseLayout:
        """A right inverse: for each element, one hardware slot that holds it.

        Needs a surjective layout.  Where an element is held more than once,
        the slot is chosen using register bits before lane bits before warp
        bits (earlier independent bits win), so broadcast copies resolve to
        the lowest lane/warp.
        """
        if not self.is_surjective():
            raise ValueError(f"Expected a surjective layout to invert, got {self}: "
                             f"only {1 << self.matrix_rank()} of {self.numel} "
                             f"elements are held")
        elim = _Eliminator()
        for position, column in enumerate(self._flat_columns()):
            elim.add(column, 1 << position)
        bases = []
        for dim, extent in enumerate(self.shape):
            per_bit = []
            for bit in range(_log2(extent)):
                target = _flatten(_unit(self.ndim, dim, 1 << bit), self.shape)
                _, combination = elim.reduce(target)
                per_bit.append(self._split_hardware(combination))
            bases.append(tuple(per_bit))
        return InverseLayout(self.shape, tuple(bases))

    def _split_hardware(self, combination: int) -> tuple[int, int, int]:
        """Split a mask over all input bits into (register, lane, warp) indices."""
        n_reg, n_lane = len(self.register), len(self.lane)
        return (combination & ((1 << n_reg) - 1),
                (combination >> n_reg) & ((1 << n_lane) - 1),
                combination >> (n_reg + n_lane))

    def _check_dim(self, dim: int) -> int:
        if not -self.ndim <= dim < self.ndim:
            raise ValueError(f"Expected a dim in [0, {self.ndim}), got {dim}")
        return dim % self.ndim

    # -- text ------------------------------------------------------------------
    def __str__(self) -> str:
        def bases_text(bases: Bases) -> str:
            return "[" + ",".join(_int_list(b) for b in bases) + "]"
        return (f"linear<shape={_int_list(self.shape)}, "
                f"register={bases_text(self.register)}, "
                f"lane={bases_text(self.lane)}, warp={bases_text(self.warp)}>")

    def __repr__(self) -> str:
        return f"Layout.parse({str(self)!r})"

    @staticmethod
    def parse(text: str) -> Layout:
        """Parse the text form; raises ValueError saying what was expected."""
        layout, end = parse_layout_at(text, 0)
        if text[end:].strip():
            raise ValueError(_parse_message(text, end, "end of text", text[end:].strip()[:10]))
        return layout


def _int_list(values: Sequence[int]) -> str:
    return "[" + ",".join(str(v) for v in values) + "]"


def _check_shape(shape: Coords) -> None:
    if not shape:
        raise ValueError("Expected a tensor of rank >= 1, got shape []: scalars have no layout")
    for extent in shape:
        if not _is_pow2(extent):
            raise ValueError(f"Expected power-of-two extents, got shape {list(shape)}")


def _check_basis(basis: Coords, shape: Coords, name: str, bit: int) -> None:
    if len(basis) != len(shape):
        raise ValueError(f"Expected {len(shape)} coordinates in {name} bit {bit}, "
                         f"got {list(basis)} for shape {list(shape)}")
    for dim, (c, extent) in enumerate(zip(basis, shape)):
        if not 0 <= c < extent:
            raise ValueError(f"Expected {name} bit {bit} = {list(basis)} inside shape "
                             f"{list(shape)}: coordinate {dim} must be in [0, {extent})")


parse_layout = Layout.parse


# ---------------------------------------------------------------------------
# Inverse and composition
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class InverseLayout:
    """Tensor coordinates -> (register, lane, warp): a layout's right inverse.

    ``bases[d][i]`` is the hardware index (register, lane, warp) holding the
    element one-hot at bit ``i`` of coordinate ``d``; like a layout, the
    slot of any element is the XOR of the bases of its set coordinate bits.
    """

    shape: Coords
    bases: tuple[tuple[tuple[int, int, int], ...], ...]

    def apply(self, coords: Sequence[int]) -> tuple[int, int, int]:
        if len(coords) != len(self.shape):
            raise ValueError(f"Expected {len(self.shape)} coordinates, got {list(coords)}")
        reg = lane = warp = 0
        for c, per_bit in zip(coords, self.bases):
            for bit, (r, l, w) in enumerate(per_bit):
                if c >> bit & 1:
                    reg, lane, warp = reg ^ r, lane ^ l, warp ^ w
        return reg, lane, warp

    def table(self) -> np.ndarray:
        """Hardware index of every element, shape ``shape + (3,)``."""
        return _triple_table(self.bases)


@dataclass(frozen=True)
class HardwareMap:
    """(register, lane, warp) -> (register, lane, warp), linear over GF(2).

    Built by ``compose(invert(src), dst)``: for every slot of ``dst`` it
    names a slot of ``src`` holding the same element, which is what a layout
    conversion has to move.
    """

    register: tuple[tuple[int, int, int], ...]
    lane: tuple[tuple[int, int, int], ...]
    warp: tuple[tuple[int, int, int], ...]

    def apply(self, register: int = 0, lane: int = 0, warp: int = 0) -> tuple[int, int, int]:
        out = (0, 0, 0)
        for bases, index in zip((self.register, self.lane, self.warp), (register, lane, warp)):
            for bit, image in enumerate(bases):
                if index >> bit & 1:
                    out = tuple(a ^ b for a, b in zip(out, image))
        return out

    def table(self) -> np.ndarray:
        """Image of every input slot, [warps, lanes, registers, 3]."""
        return _triple_table((self.warp, self.lane, self.register))


def _triple_table(axes: Sequence[Sequence[tuple[int, int, int]]]) -> np.ndarray:
    """XOR-combine per-bit (register, lane, warp) images over a grid of axes.

    ``axes[a]`` lists the images of the bits of grid axis ``a``; the result
    has one grid axis per entry (of size 2**bits) and a last axis of 3.
    """
    grid = tuple(1 << len(bits) for bits in axes)
    out = np.zeros(grid + (3,), dtype=np.int64)
    for component in range(3):
        for axis, bits in enumerate(axes):
            values = _xor_table([image[component] for image in bits])
            view = [1] * len(axes)
            view[axis] = -1
            out[..., component] ^= values.reshape(view)
    return out


def compose(inverse: InverseLayout, layout: Layout) -> HardwareMap:
    """``inverse`` after ``layout``: maps each slot of ``layout`` to a slot of
    the layout ``inverse`` was built from that holds the same element."""
    if tuple(inverse.shape) != layout.shape:
        raise ValueError(f"Expected equal shapes to compose, got {list(inverse.shape)} "
                         f"and {list(layout.shape)}")
    images = [tuple(inverse.apply(b) for b in layout.bases(name)) for name in INPUT_DIMS]
    return HardwareMap(*images)


# ---------------------------------------------------------------------------
# Constructors
# ---------------------------------------------------------------------------

def _axis_bases(rank: int, dim: int, start: int, count: int) -> list[Coords]:
    """Bases walking ``dim`` by start, 2*start, ... for log2(count) bits."""
    return [_unit(rank, dim, start << i) for i in range(_log2(count))]


def _fits(basis: Coords, shape: Coords) -> bool:
    return all(c < extent for c, extent in zip(basis, shape))


def _fit_to_shape(shape: Coords, register: list[Coords], lane: list[Coords],
                  warp: list[Coords], fill_order: Sequence[int]) -> Layout:
    """Clip a tile to ``shape`` and repeat it until it covers ``shape``.

    Thread bits that would step outside the tensor wrap around onto data
    already held (zero basis = broadcast); register bits that would do so are
    dropped instead, since a thread gains nothing from a second copy.  Then
    each dim in ``fill_order`` gets register bits for the powers of two that
    no basis covers yet (the tile repeats along it).
    """
    rank = len(shape)
    zero = (0,) * rank
    register = [b for b in register if _fits(b, shape)]
    lane = [b if _fits(b, shape) else zero for b in lane]
    warp = [b if _fits(b, shape) else zero for b in warp]
    for dim in fill_order:
        covered = 0
        for basis in register + lane + warp:
            covered |= basis[dim]
        for bit in range(_log2(shape[dim])):
            if not covered >> bit & 1:
                register.append(_unit(rank, dim, 1 << bit))
    return Layout(shape, tuple(register), tuple(lane), tuple(warp))


def _check_per_dim(name: str, values: Sequence[int], rank: int) -> tuple[int, ...]:
    values = tuple(int(v) for v in values)
    if len(values) != rank:
        raise ValueError(f"Expected {rank} entries in {name}, got {list(values)}")
    if not all(_is_pow2(v) for v in values):
        raise ValueError(f"Expected powers of two in {name}, got {list(values)}")
    return values


def blocked(shape: Sequence[int], size_per_thread: Sequence[int],
            threads_per_warp: Sequence[int], warps_per_cta: Sequence[int],
            order: Sequence[int]) -> Layout:
    """Triton's blocked layout; ``order`` lists dims fastest first.

    A thread holds a ``size_per_thread`` block, lanes tile blocks in
    ``order``, warps tile warp tiles in ``order``.  A tensor larger than the
    CTA tile wraps around (more registers); a smaller one makes the surplus
    lanes/warps hold copies (zero bases).
    """
    shape = tuple(int(s) for s in shape)
    _check_shape(shape)
    rank = len(shape)
    spt = _check_per_dim("size_per_thread", size_per_thread, rank)
    tpw = _check_per_dim("threads_per_warp", threads_per_warp, rank)
    wpc = _check_per_dim("warps_per_cta", warps_per_cta, rank)
    order = tuple(int(d) for d in order)
    if sorted(order) != list(range(rank)):
        raise ValueError(f"Expected order to be a permutation of 0..{rank - 1}, got {list(order)}")
    register = [b for d in order for b in _axis_bases(rank, d, 1, spt[d])]
    lane = [b for d in order for b in _axis_bases(rank, d, spt[d], tpw[d])]
    warp = [b for d in order for b in _axis_bases(rank, d, spt[d] * tpw[d], wpc[d])]
    return _fit_to_shape(shape, register, lane, warp, order)


def default_blocked(shape: Sequence[int], num_warps: int, elem_bits: int,
                    vector_bytes: int = 16, order: Sequence[int] | None = None,
                    lanes: int = LANES_PER_WARP) -> Layout:
    """A coalesced blocked layout: ``vector_bytes`` vectors along the fastest dim.

    ``order`` lists the dims fastest first (default: the last dim first, row-major);
    ``infer-layouts`` passes the order of a pointer tensor's contiguity, so that a
    column-major tile (``b = w.t()``) is read in 16-byte runs along its dim 0.
    Lanes, then warps, are spread fastest dim first as far as the tensor
    allows; whatever does not fit lands on the slowest dim and broadcasts.
    ``lanes`` is the target's warp width (64: an AMD wave64).
    """
    shape = tuple(int(s) for s in shape)
    _check_shape(shape)
    if not (_is_pow2(num_warps) and _is_pow2(elem_bits) and _is_pow2(vector_bytes)):
        raise ValueError(f"Expected powers of two, got num_warps={num_warps}, "
                         f"elem_bits={elem_bits}, vector_bytes={vector_bytes}")
    rank = len(shape)
    order = tuple(reversed(range(rank))) if order is None else tuple(int(d) for d in order)
    if sorted(order) != list(range(rank)):
        raise ValueError(f"Expected order to be a permutation of 0..{rank - 1}, got {list(order)}")
    spt = [1] * rank
    spt[order[0]] = min(max(1, vector_bytes * 8 // elem_bits), shape[order[0]])
    if not _is_pow2(lanes):
        raise ValueError(f"Expected a power-of-two warp width, got {lanes}")
    tpw = _spread(lanes, [shape[d] // spt[d] for d in range(rank)], order)
    wpc = _spread(num_warps, [max(1, shape[d] // (spt[d] * tpw[d])) for d in range(rank)],
                  order)
    return blocked(shape, spt, tpw, wpc, order)


def _spread(count: int, capacity: Sequence[int], order: Sequence[int]) -> list[int]:
    """Give each dim in ``order`` as many of ``count`` as it has room for;
    the rest goes to the slowest dim."""
    out = [1] * len(capacity)
    for dim in order:
        out[dim] = max(1, min(count, capacity[dim]))
        count //= out[dim]
    out[order[-1]] *= count
    return out


# ---------------------------------------------------------------------------
# Transformations
# ---------------------------------------------------------------------------

def _map_bases(layout: Layout, shape: Sequence[int], fn, drop_zero_registers: bool = False
               ) -> Layout:
    """Apply ``fn`` to every basis; optionally drop registers that became zero."""
    register = [fn(b) for b in layout.register]
    if drop_zero_registers:
        register = [b for b in register if any(b)]
    return Layout(tuple(shape), tuple(register), tuple(fn(b) for b in layout.lane),
                  tuple(fn(b) for b in layout.warp))


def slice_layout(layout: Layout, dim: int) -> Layout:
    """Layout of the result of reducing ``layout`` along ``dim``.

    The coordinate is dropped.  Lane/warp bits that only moved along ``dim``
    become zero (after the reduction those threads hold the same value);
    register bits that only moved along ``dim`` are removed, because a thread
    keeps one copy, not several.  Register ``r`` of the result is the parent
    register whose removed bits are zero and whose other bits spell ``r``.
    """
    dim = layout._check_dim(dim)
    if layout.ndim == 1:
        raise ValueError("Expected a layout of rank >= 2 to slice: reducing a rank-1 "
                         "tensor gives a scalar")
    keep = [d for d in range(layout.ndim) if d != dim]
    shape = [layout.shape[d] for d in keep]
    return _map_bases(layout, shape, lambda b: tuple(b[d] for d in keep),
                      drop_zero_registers=True)


def dim_in_registers(layout: Layout, dim: int) -> bool:
    """Whether every step along ``dim`` is a register bit of ``layout`` (no lane or warp
    moves along it, and registers cover it): one thread holds the whole extent."""
    dim = layout._check_dim(dim)
    if any(b[dim] for b in list(layout.lane) + list(layout.warp)):
        return False
    covered = 0
    for b in layout.register:
        if b[dim] and any(x for d, x in enumerate(b) if d != dim):
            return False            # a register step that also moves along another dim
        covered |= b[dim]
    return covered == layout.shape[dim] - 1


def join_layout(layout: Layout) -> Layout:
    """``layout`` with a new last dim of size 2 as its highest register bit (``tl.join``)."""
    def widen(b):
        return tuple(b) + (0,)
    return Layout(tuple(layout.shape) + (2,),
                  tuple(widen(b) for b in layout.register) + ((0,) * layout.ndim + (1,),),
                  tuple(widen(b) for b in layout.lane), tuple(widen(b) for b in layout.warp))


def expand_dims(layout: Layout, dim: int) -> Layout:
    """Insert a size-1 dim at position ``dim`` (0..ndim)."""
    if not 0 <= dim <= layout.ndim:
        raise ValueError(f"Expected a position in [0, {layout.ndim}], got {dim}")
    shape = layout.shape[:dim] + (1,) + layout.shape[dim:]
    return _map_bases(layout, shape, lambda b: b[:dim] + (0,) + b[dim:])


def transpose(layout: Layout, perm: Sequence[int]) -> Layout:
    """Permute dims like ``numpy.transpose``: result dim i is source dim perm[i]."""
    perm = tuple(int(p) for p in perm)
    if sorted(perm) != list(range(layout.ndim)):
        raise ValueError(f"Expected a permutation of 0..{layout.ndim - 1}, got {list(perm)}")
    shape = tuple(layout.shape[p] for p in perm)
    return _map_bases(layout, shape, lambda b: tuple(b[p] for p in perm))


def reshape(layout: Layout, new_shape: Sequence[int]) -> Layout:
    """Same elements in row-major order, viewed with ``new_shape``.

    With power-of-two extents the row-major flat index is the bit
    concatenation of the coordinates, so each basis keeps its flat index.
    """
    new_shape = tuple(int(s) for s in new_shape)
    _check_shape(new_shape)
    if int(np.prod(new_shape)) != layout.numel:
        raise ValueError(f"Expected {layout.numel} elements in the new shape, got "
                         f"{list(new_shape)}")
    return _map_bases(layout, new_shape,
                      lambda b: _unflatten(_flatten(b, layout.shape), new_shape))


def _project(layout: Layout, dims: Sequence[int]) -> Layout:
    """Collapse ``dims`` to size 1 (keeping the rank), like slice + expand_dims."""
    shape = tuple(1 if d in dims else s for d, s in enumerate(layout.shape))
    return _map_bases(layout, shape,
                      lambda b: tuple(0 if d in dims else c for d, c in enumerate(b)),
                      drop_zero_registers=True)


def broadcast_to(layout: Layout, new_shape: Sequence[int],
                 parent: Layout | None = None) -> Layout:
    """Layout of ``broadcast_to`` from ``layout`` (size-1 dims grow to ``new_shape``).

    Without ``parent`` every thread replicates its values in new registers
    appended after the existing ones (register ``r`` copies source register
    ``r % num_registers``): always free, never moves data.  With ``parent``
    the result is ``parent`` itself, allowed when collapsing the broadcast
    dims of ``parent`` gives back ``layout`` (as it does when ``layout`` came
    from ``slice_layout(parent, d)`` + ``expand_dims``): every thread then
    already holds the values it needs.
    """
    new_shape = tuple(int(s) for s in new_shape)
    _check_shape(new_shape)
    if len(new_shape) != layout.ndim:
        raise ValueError(f"Expected rank {layout.ndim} target, got {list(new_shape)}")
    grown = []
    for d, (old, new) in enumerate(zip(layout.shape, new_shape)):
        if old != new and old != 1:
            raise ValueError(f"Expected dim {d} of {list(layout.shape)} to be 1 or "
                             f"{new} to broadcast to {list(new_shape)}")
        if old != new:
            grown.append(d)
    if parent is not None:
        if parent.shape != new_shape or _project(parent, grown) != layout:
            raise ValueError(f"Expected a parent of shape {list(new_shape)} whose "
                             f"dims {grown} collapse to {layout}, got {parent}")
        return parent
    register = list(layout.register)
    for d in grown:
        register += _axis_bases(layout.ndim, d, 1, new_shape[d])
    return Layout(new_shape, tuple(register), layout.lane, layout.warp)


# ---------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------

def _flat_bases(layout: Layout, name: str) -> list[int]:
    return [_flatten(b, layout.shape) for b in layout.bases(name)]


def _same_sets_per_group(src: Layout, dst: Layout, inner: Sequence[str],
                         outer: Sequence[str]) -> bool:
    """Does every group (fixed ``outer`` indices) hold the same set of elements?

    A group's set is (its outer offset) XOR span(inner bases), so the sets
    agree when the inner spans agree and each outer basis differs between
    the layouts only by something inside that span.
    """
    if any(len(src.bases(n)) != len(dst.bases(n)) for n in outer):
        return False
    src_inner = [v for n in inner for v in _flat_bases(src, n)]
    dst_inner = [v for n in inner for v in _flat_bases(dst, n)]
    if not _same_span(src_inner, dst_inner):
        return False
    span = _Eliminator()
    for v in src_inner:
        span.add(v)
    return all(span.contains(a ^ b)
               for n in outer for a, b in zip(_flat_bases(src, n), _flat_bases(dst, n)))


def conversion_kind(src: Layout, dst: Layout) -> str:
    """The cheapest mechanism that turns ``src`` into ``dst``.

    "identity": same layout.  "register_permute": every thread already
    holds the elements it needs, in other registers.  "warp_shuffle": every
    warp holds what it needs; lanes exchange via shuffles.  "shared_memory":
    anything else.
    """
    if src.shape != dst.shape:
        raise ValueError(f"Expected equal shapes, got {list(src.shape)} and {list(dst.shape)}")
    if src == dst:
        return "identity"
    if _same_sets_per_group(src, dst, ("register",), ("lane", "warp")):
        return "register_permute"
    if _same_sets_per_group(src, dst, ("register", "lane"), ("warp",)):
        return "warp_shuffle"
    return "shared_memory"


# ---------------------------------------------------------------------------
# Text parsing
# ---------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<int>\d+)|(?P<name>[A-Za-z_]\w*)|(?P<punct>[\[\],=<>])"
                    r"|(?P<other>\S))")


def _parse_message(text: str, pos: int, expected: str, got: str) -> str:
    return f"Expected {expected} at column {pos} of {text!r}, got {got!r}"


class _Parser:
    """Recursive descent over the one-line text form."""

    def __init__(self, text: str, pos: int) -> None:
        self.text, self.pos = text, pos

    def _peek(self) -> tuple[str, str, int]:
        match = _TOKEN.match(self.text, self.pos)
        if match is None:
            return "end", "end of text", len(self.text)
        kind = match.lastgroup or "end"
        return kind, match.group(kind), match.start(kind)

    def _take(self, kind: str, value: str | None, expected: str) -> str:
        got_kind, got, start = self._peek()
        if got_kind != kind or (value is not None and got != value):
            raise ValueError(_parse_message(self.text, start, expected, got))
        self.pos = _TOKEN.match(self.text, self.pos).end()
        return got

    def punct(self, char: str) -> None:
        self._take("punct", char, f"'{char}'")

    def keyword(self, word: str) -> None:
        self._take("name", word, f"'{word}'")
        self.punct("=")

    def int_list(self) -> list[int]:
        self.punct("[")
        values: list[int] = []
        while self._peek()[1] != "]":
            if values:
                self.punct(",")
            values.append(int(self._take("int", None, "a non-negative integer")))
        self.punct("]")
        return values

    def bases(self) -> list[list[int]]:
        self.punct("[")
        out: list[list[int]] = []
        while self._peek()[1] != "]":
            if out:
                self.punct(",")
            out.append(self.int_list())
        self.punct("]")
        return out


def parse_layout_at(text: str, pos: int = 0) -> tuple[Layout, int]:
    """Parse one layout starting at ``pos``; returns it and the end position,
    so that type parsers can embed layouts."""
    parser = _Parser(text, pos)
    parser._take("name", "linear", "'linear<'")
    parser.punct("<")
    parser.keyword("shape")
    shape = parser.int_list()
    fields = {}
    for name in INPUT_DIMS:
        parser.punct(",")
        parser.keyword(name)
        fields[name] = parser.bases()
    parser.punct(">")
    try:
        layout = Layout(tuple(shape), **{k: tuple(map(tuple, v)) for k, v in fields.items()})
    except ValueError as exc:
        raise ValueError(f"Invalid layout {text[pos:parser.pos]!r}: {exc}") from None
    return layout, parser.pos


def collapse_dims(layout: Layout, dims: Sequence[int]) -> Layout:
    """The layout of a broadcast's operand: ``dims`` collapsed to size 1, each
    thread keeping one copy (the inverse of ``broadcast_to(..., parent=layout)``)."""
    return _project(layout, tuple(dims))
