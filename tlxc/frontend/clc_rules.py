"""Semantic rules of cluster launch control (sm_100a), TLX's ``clc_*`` API:
``tlx.clc_create_context``, ``tlx.clc_producer``, ``tlx.clc_consumer``.

A context is a compile-time structure (``CLCContext``) of three allocations: the
*empty* barriers (``num_consumers`` arrivals: every consumer task of every CTA of the
cluster has read the previous answer), the *full* barriers (the answer has landed:
16 transaction bytes) and one 4 x i32 response buffer per stage.  The producer and
the consumer are composed of ordinary barrier ops around the two IR ops of
``ir/ops/clc.py``:

* ``clc_producer(ctx, phase, multi_ctas=True, k=0)``: wait ``empty[k]`` at ``phase``
  (only CTA 0 when the cluster has several CTAs), post 16 bytes on ``full[k]`` (every
  CTA: each one's copy of the answer completes its own barrier), then
  ``tlx.clc_try_cancel`` (by CTA 0 with ``multicast`` in a cluster).
* ``clc_consumer(ctx, phase, multi_ctas=True, k=0)``: wait ``full[k]`` at ``phase``,
  ``tlx.clc_query`` (in a cluster offset by the CTA's rank; -1 stays -1), a
  ``fence.proxy.async``, and one arrival on ``empty[k]`` (CTA 0's barrier in a
  cluster) unless the answer was -1; returns the tile id.

``num_consumers`` must count every task that calls ``clc_consumer``, in every CTA of
the cluster (``tlxc check`` reports a count that cannot match).  Registered from
``tlx_rules.py``.
"""
from __future__ import annotations

from ..ir import types as T
from ..ir.types import MemDescType
from . import semantic as S
from . import tlx_rules as X
from .block_ptr import Aggregate
from .builtins import const_int, constexpr
from .values import SemanticError, Tensor

RESPONSE_SHAPE = (4,)            # 16 bytes: try_cancel writes a .b128 answer


class CLCContext(Aggregate):
    kind = "CLC context"

    def __init__(self, empty: Tensor, full: Tensor, responses: Tensor, num_consumers: int, num_stages: int):
        self.empty, self.full, self.responses = empty, full, responses
        self.num_consumers, self.num_stages = num_consumers, num_stages

    def fields(self) -> tuple[str, ...]:
        return ("clc_empty", "clc_full", "clc_responses")

    def leaves(self) -> tuple:
        return (self.empty, self.full, self.responses)

    def replace(self, leaves) -> CLCContext:
        empty, full, responses = leaves
        return CLCContext(empty, full, responses, self.num_consumers, self.num_stages)

    def static_key(self) -> tuple:
        return ("clc", self.num_consumers, self.num_stages)


def _context(value) -> CLCContext:
    if not isinstance(value, CLCContext):
        raise SemanticError(f"expected the context of tlx.clc_create_context, got {S.describe(value)}",
                            param="clc_pipe_ctx")
    return value


def _stage(ctx_: CLCContext, k) -> int:
    k = const_int(k, "k")
    if not 0 <= k < ctx_.num_stages:
        raise SemanticError(f"stage k={k} is out of range: the context has {ctx_.num_stages} stage(s)", param="k")
    return k


def _multi(ctx, multi_ctas) -> bool:
    """TLX's rule: ``multi_ctas`` takes effect only when the launch has clusters of several CTAs."""
    multi = constexpr(multi_ctas, "multi_ctas")
    if not isinstance(multi, bool):
        raise SemanticError(f"'multi_ctas' must be a compile-time bool, got {S.describe(multi)}",
                            param="multi_ctas")
    dims = ctx.options.cluster
    return multi and dims is not None and dims[0] * dims[1] * dims[2] > 1


@X.rule("clc_create_context")
def _clc_create_context(ctx, num_consumers, num_stages=1):
    X._require_blackwell(ctx, "cluster launch control (tlx.clc_create_context)", "num_consumers")
    consumers = const_int(num_consumers, "num_consumers")
    stages = const_int(num_stages, "num_stages")
    if consumers < 1 or stages < 1:
        raise SemanticError(f"num_consumers and num_stages must be >= 1, got {consumers} and {stages}")
    empty = X._alloc_barriers(ctx, stages, consumers)
    full = X._alloc_barriers(ctx, stages, 1)
    t = MemDescType(RESPONSE_SHAPE, T.i32, stages, "smem")
    responses = Tensor(ctx.b.value("tlx.local_alloc", [], t))
    return CLCContext(empty, full, responses, consumers, stages)


@X.rule("clc_producer")
def _clc_producer(ctx, clc_pipe_ctx, p_producer, multi_ctas=True, k=0):
    c = _context(clc_pipe_ctx)
    k = _stage(c, k)
    multi = _multi(ctx, multi_ctas)
    b = ctx.b
    lead = S.compare(b, "eq", X._cluster_cta_rank(ctx), 0) if multi else None
    X._barrier_wait(ctx, X.local_view(ctx, c.empty, k), p_producer, pred=lead)
    full = X.local_view(ctx, c.full, k)
    X._expect_bytes(ctx, full, 16)
    response = X.local_view(ctx, c.responses, k)
    # multicast: CTA 0 issues it for the cluster (codegen and interpreter)
    b.create("tlx.clc_try_cancel", [response.value, full.value], [], {"multicast": multi})


@X.rule("clc_consumer")
def _clc_consumer(ctx, clc_pipe_ctx, p_consumer, multi_ctas=True, k=0, return_3d=False):
    c = _context(clc_pipe_ctx)
    k = _stage(c, k)
    if constexpr(return_3d, "return_3d"):
        raise SemanticError("return_3d=True (the cancelled cluster's x, y, z ids) is not supported yet; "
                            "tlxc returns the x id of 1-D grids", param="return_3d")
    multi = _multi(ctx, multi_ctas)
    b = ctx.b
    X._barrier_wait(ctx, X.local_view(ctx, c.full, k), p_consumer)
    response = X.local_view(ctx, c.responses, k)
    # the checker (check/clc.py) compares the consumers it finds with num_consumers
    tile = Tensor(b.value("tlx.clc_query", [response.value], T.i32, num_consumers=c.num_consumers, num_stages=c.num_stages,
                          multi_ctas=multi))
    valid = S.compare(b, "ge", tile, 0)
    if multi:
        tile = S.where(b, valid, S.binary(b, "add", tile, X._cluster_cta_rank(ctx)), tile)
    X._fence_async_shared(ctx)
    X._barrier_arrive(ctx, X.local_view(ctx, c.empty, k), 1, remote_cta_rank=0 if multi else None, pred=valid)
    return tile
