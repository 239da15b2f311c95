"""Asynchronous warp-group matrix multiply (Hopper wgmma): ``tlx.async_dot``
and ``tlx.async_dot_wait``.

``tlx.async_dot`` issues ``result = (use_acc ? acc : 0) + a @ b`` and returns
at once; the result may only be read after a ``tlx.async_dot_wait`` whose
``pendings`` count retires it, and the shared-memory operands are read until
then.  Each ``async_dot`` is one wgmma group of the issuing task.
"""
from __future__ import annotations

from ..core import Operation
from ..traits import ASYNC_DOT
from ..types import MemDescType, ScalarType, TensorType, i1
from ._rules import expect_results, expect_type

INPUT_TYPES = ("f16", "bf16", "f8e4m3", "f8e5m2", "f32")


def k_multiple(element: ScalarType) -> int:
    """The wgmma K step of an input type: 16 for 16-bit, 32 for fp8, 8 for tf32."""
    return {1: 32, 2: 16, 4: 8}[element.bytes]


def transposable(element: ScalarType) -> bool:
    """Whether wgmma reads ``element`` operands MN-major (imm-trans): 16-bit inputs only;
    fp8 and tf32 operands must be K-major."""
    return element.bytes == 2


def shape_problem(m: int, n: int, k: int, element: ScalarType) -> str | None:
    """Why (M, N, K) is not a wgmma shape for ``element`` inputs, or None."""
    if m % 64:
        return f"M must be a multiple of 64 (a warp group computes 64 rows per wgmma), got M={m}"
    if not 8 <= n <= 256 or n % 8:
        return f"N must be a multiple of 8 between 8 and 256, got N={n}"
    step = k_multiple(element)
    if k % step:
        return f"K must be a multiple of {step} for {element} inputs, got K={k}"
    return None


def k32_accumulator_order() -> list[int]:
    """``attrs.a_k_order == "accumulator"``: the column of A that wgmma's k32 fragment position
    ``f`` takes, within each group of 32 columns.  Position ``16h + 4q + 2a + b`` (thread ``q`` of a
    quad, byte ``2a + b`` of its register) takes column ``16h + 8a + 2q + b``, which that thread
    holds in the f32 accumulator's pattern (columns ``2q, 2q + 1`` of every 8): an fp8 A computed
    from an accumulator needs no exchange between threads."""
    return [16 * h + 8 * a + 2 * q + b for h in range(2) for q in range(4) for a in range(2) for b in range(2)]


class AsyncDotOp(Operation):
    """wgmma: ``(use_acc ? acc : 0) + a @ b``, asynchronously.

    Operands: ``a`` (a shared buffer view or a register tensor, M x K), ``b``
    (a shared buffer view, K x N; a ``local_trans`` view is stored N x K),
    ``acc`` (a register tensor M x N of f32, or f16 for f16 inputs), and an
    i1 ``use_acc`` when ``attrs.has_use_acc``.  Result: acc's type.
    ``attrs.input_precision``: ``ieee`` or ``tf32`` (f32 inputs).  ``a`` and ``b`` have one
    element type, except fp8: e4m3 x e5m2 in either order (wgmma's ``.atype`` / ``.btype``).
    ``attrs.a_k_order == "accumulator"`` (an fp8 register A, K a multiple of 32): the product is
    ``A[:, π] @ B`` with ``π`` = ``k32_accumulator_order`` in each 32-column group -- the caller
    stores B's rows in that order (``B[f] = X[π(f)]`` gives ``A @ X``).
    ``attrs.max_num_imprecise_acc`` (fp8, optional, <= K; from ``tl.dot``): each run of that many
    K elements (at least one k32 step) is summed into a zeroed accumulator and then added to the
    result in float32, as Triton's wgmma lowering does.
    """

    name = "tlx.async_dot"
    traits = frozenset({ASYNC_DOT})

    def verify(self):
        expected = 3 + bool(self.attrs.get("has_use_acc"))
        if len(self.operands) != expected:
            raise self.error(f"expected {expected} operands (a, b, acc{', use_acc' if expected == 4 else ''}), "
                             f"got {len(self.operands)}")
        expect_results(self, 1)
        a, b, acc = (v.type for v in self.operands[:3])
        if isinstance(a, MemDescType):
            if a.num:
                raise self.error(f"expected a to be one shared buffer, got an array of {a.num}")
        elif not isinstance(a, TensorType):
            raise self.error(f"expected a to be a shared buffer or a register tensor, got {a}")
        if not isinstance(b, MemDescType) or b.num:
            raise self.error(f"expected b to be one shared buffer, got {b}")
        if not isinstance(acc, TensorType):
            raise self.error(f"expected acc to be a register tensor, got {acc}")
        if len(a.shape) != 2 or len(b.shape) != 2 or len(acc.shape) != 2:
            raise self.error(f"expected 2-D operands, got {a}, {b}, {acc}")
        (m, k), (k2, n) = a.shape, b.shape
        if k != k2:
            raise self.error(f"expected a's K ({k}) to equal b's K ({k2})")
        if tuple(acc.shape) != (m, n):
            raise self.error(f"expected acc of shape {[m, n]}, got {list(acc.shape)}")
        mixed_fp8 = a.element != b.element and a.element.is_float8 and b.element.is_float8
        if (a.element != b.element and not mixed_fp8) or a.element.name not in INPUT_TYPES:
            raise self.error(f"expected a and b of one type in {', '.join(INPUT_TYPES)}, got {a.element} and "
                             f"{b.element}")
        if acc.element.name != "f32" and not (acc.element.name == "f16" and a.element.name == "f16"):
            raise self.error(f"expected an f32 accumulator (f16 allowed for f16 inputs), got {acc.element}")
        problem = shape_problem(m, n, k, a.element)
        if problem:
            raise self.error(f"expected a wgmma shape: {problem}")
        precision = self.attrs.get("input_precision", "ieee")
        if precision not in ("ieee", "tf32") or (precision == "tf32" and a.element.name != "f32"):
            raise self.error(f"expected input_precision 'ieee' (or 'tf32' for f32 inputs), got {precision!r}")
        limit = self.attrs.get("max_num_imprecise_acc")
        if limit is not None and (not a.element.is_float8 or isinstance(limit, bool) or not isinstance(limit, int)
                                  or not 0 <= limit <= k):
            raise self.error(f"expected max_num_imprecise_acc to be an integer in [0, K={k}] on fp8 inputs, "
                             f"got {limit!r} on {a.element}")
        order = self.attrs.get("a_k_order")
        if order is not None and (order != "accumulator" or isinstance(a, MemDescType) or not a.element.is_float8):
            raise self.error(f"expected a_k_order 'accumulator' on an fp8 register A only, got {order!r} with a {a}")
        if expected == 4:
            expect_type(self, self.operands[3].type, i1, "use_acc")
        expect_type(self, self.result.type, acc, "result")


class AsyncDotWaitOp(Operation):
    """Wait until at most ``attrs.pendings`` async_dot groups of this task are
    in flight; returns its operand (the accumulator), now readable if retired."""

    name = "tlx.async_dot_wait"
    traits = frozenset({ASYNC_DOT})

    def verify(self):
        if len(self.operands) != 1:
            raise self.error(f"expected one operand (the accumulator), got {len(self.operands)}")
        expect_results(self, 1)
        pendings = self.attrs.get("pendings")
        if isinstance(pendings, bool) or not isinstance(pendings, int) or pendings < 0:
            raise self.error(f"expected a non-negative 'pendings', got {pendings!r}")
        expect_type(self, self.result.type, self.operands[0].type, "result")
