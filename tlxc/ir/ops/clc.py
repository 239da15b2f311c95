"""Cluster launch control (sm_100a): a persistent kernel takes the work of CTAs that
have not started yet (TLX's ``clc_*`` API, composed in ``frontend/clc_rules.py``).

* ``tlx.clc_try_cancel(response, bar)``: one thread asks the hardware to cancel a
  cluster of the grid that has not been launched; the 16-byte answer is written to
  ``response`` (one 4 x i32 shared-memory buffer) and completes 16 transaction bytes
  on ``bar``.  With ``multicast`` every CTA of the cluster receives the answer in
  its own copy of ``response`` and ``bar``.
* ``tlx.clc_query(response) -> i32``: decodes an answer that has landed (after a
  wait on ``bar``): the x id of the cancelled cluster's first CTA, or -1 when the
  request failed (no cluster left to take).
"""
from __future__ import annotations

from ..core import Operation
from ..types import BarrierType, MemDescType, i32
from ._rules import expect_results


def _expect_response(op, t) -> None:
    if not isinstance(t, MemDescType) or t.num or t.storage != "smem" or t.shape != (4,) or t.element != i32:
        raise op.error(f"expected one 4 x i32 shared-memory response buffer (16 bytes), got {t}")


class ClcTryCancelOp(Operation):
    """Operands: response buffer, local barrier.  Attribute ``multicast`` (bool)."""

    name = "tlx.clc_try_cancel"

    def verify(self):
        expect_results(self, 0)
        if len(self.operands) != 2:
            raise self.error("expected a response buffer and a barrier")
        response, bar = (v.type for v in self.operands)
        _expect_response(self, response)
        if not isinstance(bar, BarrierType) or bar.num or bar.remote:
            raise self.error(f"expected one local mbarrier, got {bar}")
        if not isinstance(self.attrs.get("multicast"), bool):
            raise self.error("expected a bool 'multicast' attribute")


class ClcQueryOp(Operation):
    """Operand: response buffer; result: i32 (first CTA id x, or -1)."""

    name = "tlx.clc_query"

    def verify(self):
        expect_results(self, 1)
        if len(self.operands) != 1:
            raise self.error("expected a response buffer")
        _expect_response(self, self.operands[0].type)
        if self.results[0].type != i32:
            raise self.error(f"expected an i32 result, got {self.results[0].type}")
