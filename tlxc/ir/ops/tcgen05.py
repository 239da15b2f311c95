"""Blackwell's tensor memory and MMA (tcgen05): ``tlx.tcgen05_mma`` and
``tlx.tcgen05_commit`` (TLX semantics, ``tlx_api.md`` §1.2, §1.5).

Tensor memory (TMEM) is per-SM storage of 128 lanes x 512 columns of 32 bits
next to the tensor cores.  A ``tlx.local_alloc(..., storage=tmem)`` buffer
of shape [128, N] (32-bit elements) takes N columns; its rows are the
lanes.  ``tlx.local_load`` / ``tlx.local_store`` move it to and from
registers (row r of the tile in thread r of the task's warp group).

``tlx.tcgen05_mma`` issues ``acc = (use_acc ? acc : 0) + a @ b`` with ``a``
and ``b`` in shared memory and ``acc`` in tensor memory.  One thread issues
it; the MMAs of a task run in issue order.  The op returns at once: the
shared operands are read, and ``acc`` written, until the MMA completes.
Completion is observed only through mbarriers: each barrier operand gets
one arrival when this MMA and every earlier tcgen05 op of the task are done
(the ``mBarriers=`` of ``tlx.async_dot``), as does ``tlx.tcgen05_commit``'s.
A synchronous ``async_dot`` (no barriers) is the MMA followed by a wait for
its completion: ``attrs.sync``.

``attrs.two_ctas`` (``async_dot(..., two_ctas=True)``, PTX ``cta_group::2``): the
MMA of a CTA pair (ranks 2i and 2i + 1 of a cluster).  Each CTA holds its own 128
rows of A and of the accumulator and half of B's N columns (the even CTA the first
half), all at the same shared/tensor-memory places; the even CTA issues one MMA of
M = 256 for both and the odd CTA's op issues nothing.  Its completion arrives on
the barrier at the same place in both CTAs.  PTX allows one ``.cta_group`` per
kernel, so every tcgen05 MMA and commit of a kernel is 2-CTA or none is.
"""
from __future__ import annotations

from ..core import Operation
from ..traits import TCGEN05_MMA
from ..types import BarrierType, MemDescType, ScalarType, i1
from ._rules import expect_results, expect_type

INPUT_TYPES = ("f16", "bf16", "f8e4m3", "f8e5m2", "f32")
TMEM_LANES = 128
TMEM_ROWS = (128, 64)       # a buffer's rows: one per lane, or M = 64 (lanes 0-15 of each warp's 32)
TMEM_COLUMNS = 512          # 32-bit columns per SM (and per CTA: one CTA per SM when it uses them all)


FORMATS = {"f8e4m3": "e4m3", "f8e5m2": "e5m2"}   # block-scaled input element -> TLX's format name
SCALE_BLOCK = 32            # K elements one ue8m0 scale covers (mxfp8: scale_vec::1X)
SCALE_CHUNK = 512           # bytes of one cuBLAS scale chunk: 128 rows x 4 scales, [32][4][4]


def scale_shape(rows: int, k: int) -> tuple[int, ...]:
    """The shared buffer of the ue8m0 scales of ``rows`` rows (A) or columns (B) and ``k``
    K elements, in the cuBLAS block-scaling layout TLX loads by TMA: chunk [r // 128, kb // 4]
    holds scale (r, kb) at byte (r % 32) * 16 + (r % 128) // 32 * 4 + kb % 4."""
    return (1, -(-rows // 128), k // (4 * SCALE_BLOCK), 2, SCALE_CHUNK // 2)


def scale_offset(r, kb, rep_k: int):
    """The byte of scale (row ``r``, K block ``kb``) in a ``scale_shape`` buffer of ``rep_k``
    chunks along K (``r``, ``kb`` ints or numpy arrays)."""
    return ((r // 128) * rep_k + kb // 4) * SCALE_CHUNK + (r % 32) * 16 + (r % 128) // 32 * 4 + kb % 4


def scale_columns(op) -> int:
    """Tensor-memory columns a block-scaled MMA copies its scales to (``tcgen05.cp
    .32x128b.warpx4``: a 512-byte chunk into 4 columns of lanes 0-31, repeated in each
    warp's 32 lanes): A's K / 128 chunks, then B's for each of its ceil(N / 128) row blocks."""
    a_scale, b_scale = (v.type.shape for v in op.scales)
    return 4 * a_scale[2] * (a_scale[1] + b_scale[1])


def k_step(element: ScalarType) -> int:
    """K of one tcgen05.mma instruction: 16 for 16-bit inputs, 32 for fp8, 8 for tf32."""
    return {1: 32, 2: 16, 4: 8}[element.bytes]


def tmem_columns(t: MemDescType) -> int:
    """Tensor-memory columns one buffer of ``t`` takes: 32 bits of a row per column, so
    16-bit elements are packed two to a column (TLX's default ``colStride=1``) and 8-bit
    ones four."""
    return t.shape[-1] * t.element.bytes // 4


def tmem_problem(shape, element: ScalarType) -> str | None:
    """Why a tensor-memory buffer of ``shape`` x ``element`` is not supported, or None."""
    if len(shape) != 2:
        return f"tensor-memory buffers are 2-D [rows, columns], got shape {list(shape)}"
    if shape[0] not in TMEM_ROWS:
        return (f"tensor-memory buffers have {TMEM_LANES} rows (one per lane) or 64 (an M = 64 accumulator: "
                f"lanes 0-15 of each warp's 32), got {shape[0]}")
    if element.bytes not in (1, 2, 4):
        return f"tensor memory holds 8-, 16- or 32-bit elements, got {element}"
    per_column = 4 // element.bytes
    if shape[1] < 1 or shape[1] % per_column:
        return (f"{element} elements are packed {per_column} to a 32-bit tensor-memory column, so a buffer's "
                f"columns must be a multiple of {per_column}; got {shape[1]}")
    if shape[0] == 64 and (shape[1] // per_column) % 2:
        return (f"a 64-row tensor-memory buffer moves to and from registers in two halves of its 32-bit "
                f"columns (tcgen05.ld/st .16x32bx2: a warp's threads 16-31 take the second half of the rows "
                f"of threads 0-15), so it has an even number of 32-bit columns; got {shape[1]} {element} = "
                f"{shape[1] // per_column} (TLX pads such a buffer to 2 columns too)")
    if shape[1] // per_column > TMEM_COLUMNS:
        return (f"a tensor-memory buffer has at most {TMEM_COLUMNS} 32-bit columns, got {shape[1]} {element} "
                f"elements = {shape[1] // per_column} columns")
    return None


def tmem_groups(kernel) -> dict[int, list]:
    """id(first allocation) -> the tensor-memory allocations that alias it (``reuse=``)."""
    groups: dict[int, list] = {}
    for op in kernel.regions[0].ops:
        if op.name == "tlx.local_alloc" and op.operands and op.results[0].type.storage == "tmem":
            groups.setdefault(id(op.operands[0].owner), []).append(op)
    return groups


def place_tensor_memory(kernel) -> tuple[dict[int, int], dict[int, int], int]:
    """The column of every top-level tensor-memory allocation, one after another in program
    order; an allocation with ``reuse=`` starts at the column of the one it names, whose
    region is as wide as the widest member of the group.  Returns (id(op) -> first column,
    id(first op) -> the group's columns, total columns).  ``allocate-shared`` and the
    interpreter share it, so both place the bytes alike."""
    groups = tmem_groups(kernel)
    columns: dict[int, int] = {}
    widths: dict[int, int] = {}
    total = 0
    for op in kernel.regions[0].ops:
        if op.name != "tlx.local_alloc" or op.results[0].type.storage != "tmem" or op.operands:
            continue
        members = [op, *groups.get(id(op), [])]
        width = max(m.results[0].type.num * tmem_columns(m.results[0].type) for m in members)
        width = max(width, op.attrs.get("min_columns", 0))     # a sized tlx.storage_alias_spec
        for m in members:
            columns[id(m)] = total
        widths[id(op)] = width
        total += width
    return columns, widths, total


def shape_problem(m: int, n: int, k: int, element: ScalarType, pair: bool = False) -> str | None:
    """Why (M, N, K) is not a tcgen05 shape for ``element`` inputs, or None.  ``m`` is one
    CTA's rows; with ``pair`` (``cta_group::2``, M = 256 for the pair) ``n`` is the pair's
    N, of which each CTA holds half of B's columns."""
    if m not in TMEM_ROWS:
        return f"M must be 128 (one accumulator row per tensor-memory lane) or 64, got M={m}"
    if pair and m != TMEM_LANES:
        return f"a 2-CTA MMA has M = 128 rows in each CTA (M = 256 for the pair), got M={m} (not supported yet)"
    if pair and (not 32 <= n <= 256 or n % 32):
        return (f"a 2-CTA MMA (M = 256 for the pair) has N a multiple of 32 between 32 and 256, each CTA "
                f"holding N/2 columns of B; got N={n} (B's {n // 2} columns in this CTA)")
    step_n = 16 if m == 128 else 8
    if not step_n <= n <= 256 or n % step_n:
        return f"N must be a multiple of {step_n} between {step_n} and 256 for M = {m}, got N={n}"
    step = k_step(element)
    if k % step:
        return f"K must be a multiple of {step} for {element} inputs, got K={k}"
    return None


def _is_barrier_view(t) -> bool:
    return isinstance(t, BarrierType) and not t.num and not t.remote


class TcGen05MmaOp(Operation):
    """``acc = (use_acc ? acc : 0) + a @ b`` on tcgen05, asynchronously.

    Operands: ``a`` (shared, or tensor memory: M lanes, K packed along the columns, M x K),
    ``b`` (shared, K x N; a ``local_trans``
    view is stored N x K), ``acc`` (tensor memory, M x N f32), ``use_acc``
    (i1), ``pred`` (i1) when ``attrs.has_pred``, then ``attrs.num_barriers``
    mbarrier views that the completion arrives on.  ``attrs.sync``: wait for
    completion before going on.  ``attrs.input_precision``: ``ieee`` or
    ``tf32`` (f32 inputs).  No results.

    Block-scaled (``tlx.async_dot_scaled``, ``attrs.scale_formats`` = [A's, B's] of
    ``e4m3``/``e5m2``; PTX ``kind::mxf8f6f4.block_scale``): two more operands after the
    barriers, A's and B's ue8m0 scales (``u8`` shared buffers in the cuBLAS block-scaling
    layout ``SCALE_CHUNK``: [1, ceil(rows / 128), K / 128, 2, 256], one 512-byte chunk per
    128 rows x 4 scales); the product is ``(A * 2^(sa - 127)) @ (B * 2^(sb - 127))``, each
    scale covering 32 consecutive K elements of its row of A (column of B).
    """

    name = "tlx.tcgen05_mma"
    traits = frozenset({TCGEN05_MMA})

    def verify(self):
        expect_results(self, 0)
        has_pred = bool(self.attrs.get("has_pred"))
        num_barriers = self.attrs.get("num_barriers", 0)
        formats = self.attrs.get("scale_formats")
        expected = 4 + has_pred + num_barriers + 2 * bool(formats)
        if len(self.operands) != expected:
            raise self.error(f"expected {expected} operands (a, b, acc, use_acc{', pred' if has_pred else ''}, "
                             f"{num_barriers} barriers{', a_scale, b_scale' if formats else ''}), got "
                             f"{len(self.operands)}")
        a, b, acc = (v.type for v in self.operands[:3])
        for t, what, storages in ((a, "a", ("smem", "tmem")), (b, "b", ("smem",)), (acc, "acc", ("tmem",))):
            if not isinstance(t, MemDescType) or t.num or t.storage not in storages:
                raise self.error(f"expected {what} to be one {' or '.join(storages)} buffer, got {t}")
        if a.storage == "tmem" and (a.perm or self.attrs.get("two_ctas")):
            raise self.error("expected a tensor-memory A operand K-major (no perm) and a 1-CTA MMA")
        (m, k), (k2, n) = a.shape, b.shape
        pair = bool(self.attrs.get("two_ctas"))
        if pair:
            n *= 2                       # B is this CTA's half of the pair's columns
        if k != k2 or tuple(acc.shape) != (m, n):
            raise self.error(f"expected a [M, K] @ b [K, N{'/2' if pair else ''}] into acc [M, N], got {a}, {b}, "
                             f"{acc}")
        formats = self.attrs.get("scale_formats")
        if (a.element != b.element and not formats) or a.element.name not in INPUT_TYPES:
            raise self.error(f"expected a and b of one type in {', '.join(INPUT_TYPES)}, got {a.element} and "
                             f"{b.element}")
        if acc.element.name != "f32":
            raise self.error(f"expected an f32 accumulator, got {acc.element}")
        problem = shape_problem(m, n, k, a.element, pair)
        if problem:
            raise self.error(f"expected a tcgen05 shape: {problem}")
        precision = self.attrs.get("input_precision", "ieee")
        if precision not in ("ieee", "tf32") or (precision == "tf32") != (a.element.name == "f32"):
            raise self.error(f"expected input_precision 'tf32' for f32 inputs and 'ieee' otherwise, got "
                             f"{precision!r}")
        for v in self.operands[3:4 + has_pred]:
            expect_type(self, v.type, i1, "use_acc/pred")
        for v in self.barriers:
            if not _is_barrier_view(v.type):
                raise self.error(f"expected local mbarrier views, got {v.type}")
        if formats:
            self._verify_scales(formats, m, n, k)
        if self.attrs.get("sync") and num_barriers:
            raise self.error("a synchronous tcgen05 MMA has no completion barriers")
        if pair and self.attrs.get("sync"):
            raise self.error("a 2-CTA tcgen05 MMA is asynchronous (the odd CTA learns of it from a barrier)")

    def _verify_scales(self, formats, m: int, n: int, k: int) -> None:
        a = self.operands[0].type
        if (list(formats) != [FORMATS.get(a.element.name), FORMATS.get(self.operands[1].type.element.name)]
                or self.attrs.get("two_ctas") or a.storage != "smem"):
            raise self.error(f"expected block-scaled fp8 operands in shared memory matching their formats "
                             f"{formats}, 1-CTA, got {a} and {self.operands[1].type}")
        for v, rows in zip(self.scales, (m, n)):
            t = v.type
            if (not isinstance(t, MemDescType) or t.storage != "smem" or t.num or t.element.name != "u8"
                    or tuple(t.shape) != scale_shape(rows, k)):
                raise self.error(f"expected a u8 shared scale buffer {list(scale_shape(rows, k))}, got {t}")

    @property
    def barriers(self):
        first = 4 + bool(self.attrs.get("has_pred"))
        return self.operands[first:first + self.attrs.get("num_barriers", 0)]

    @property
    def scales(self):
        """(A's scales, B's scales) of a block-scaled MMA, else ()."""
        return tuple(self.operands[-2:]) if self.attrs.get("scale_formats") else ()


class TcGen05CommitOp(Operation):
    """One arrival on the barrier operand once every tcgen05 op the task issued
    before it is done.  ``attrs.two_ctas``: the even CTA of the pair commits, and the
    arrival lands on the barrier at the same place in both CTAs."""

    name = "tlx.tcgen05_commit"
    traits = frozenset({TCGEN05_MMA})

    def verify(self):
        expect_results(self, 0)
        if len(self.operands) != 1 or not _is_barrier_view(self.operands[0].type):
            raise self.error("expected one local mbarrier view")
