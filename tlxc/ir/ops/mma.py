"""Matrix multiply-accumulate ops."""
from __future__ import annotations

from ..core import Operation
from ._rules import expect_operands, expect_tensor, expect_type


class DotOp(Operation):
    """Synchronous tile-level ``acc + a @ b`` (``tl.dot``).

    ``a``: MxK, ``b``: KxN, ``acc`` and result: MxN of the accumulator type.
    ``attrs.input_precision`` is ``ieee`` or ``tf32`` for f32 inputs.  The two inputs have one
    type, except fp8: e4m3 x e5m2 in either order.  ``attrs.max_num_imprecise_acc`` (fp8 only,
    optional, <= K): at most that many products (rounded up to a multiple of the MMA's K) are summed
    in the tensor cores' reduced-precision fp8 accumulator before a float32 add.
    """

    name = "tl.dot"

    def verify(self):
        expect_operands(self, 3)
        a, b, acc = (expect_tensor(self, v.type, n) for v, n in zip(self.operands, ("a", "b", "acc")))
        if a.rank != 2 or b.rank != 2 or acc.rank != 2:
            raise self.error(f"expected 2-D operands, got {a}, {b}, {acc}")
        if a.shape[1] != b.shape[0]:
            raise self.error(f"expected a's K ({a.shape[1]}) to equal b's K ({b.shape[0]})")
        if acc.shape != (a.shape[0], b.shape[1]):
            raise self.error(f"expected acc of shape {(a.shape[0], b.shape[1])}, got {acc.shape}")
        if a.element != b.element and not (a.element.is_float8 and b.element.is_float8):
            raise self.error(f"expected a and b of one element type (or both fp8), got {a.element} and "
                             f"{b.element}")
        limit = self.attrs.get("max_num_imprecise_acc")
        if limit is not None and (not a.element.is_float8 or isinstance(limit, bool) or not isinstance(limit, int)
                                  or not 0 <= limit <= a.shape[1]):
            raise self.error(f"expected max_num_imprecise_acc to be an integer in [0, K={a.shape[1]}] on fp8 "
                             f"inputs, got {limit!r} on {a.element}")
        expect_type(self, self.result.type, acc, "result")
