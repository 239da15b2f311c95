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

Older TLX spelling (a ``DeprecationWarning`` naming the current calls): TLX's
``clc_create_scheduler(num_stages)`` allocated one barrier and one response per stage,
and ``clc_fetch_next_worker(scheduler, phase)`` posted 16 bytes on barrier 0, issued
``try_cancel`` into response 0 from the calling CTA, waited for barrier 0 at ``phase``
and decoded response 0.  That is ``clc_create_context(1, num_stages)`` and
``clc_producer(ctx, phase ^ 1, multi_ctas=False)`` + ``clc_consumer(ctx, phase,
multi_ctas=False)`` in one task: the current pair adds an *empty* barrier that the
consumer's arrival completes before the next fetch's producer waits on it (so it never
blocks a task that fetches one tile at a time), and the same answers come out in the
same order.  The older ``clc_producer_wait`` and the older argument orders of
``clc_producer`` / ``clc_consumer`` / ``clc_create_context`` cannot be accepted: the
calls of both orders take the same positional integers (docs/ports.md).
"""
from __future__ import annotations

import warnings

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


def _deprecated(ctx, old: str, current: str) -> None:
    loc = ctx.b.loc
    warnings.warn_explicit(f"tlx.{old} is an older TLX spelling; tlxc runs it as {current} (TLX's current "
                           f"cluster launch control API)", DeprecationWarning,
                           loc.file if loc else "<kernel>", loc.line if loc else 0)


@X.rule("clc_create_scheduler")
def _clc_create_scheduler(ctx, num_stages=1):
    """Older TLX: ``clc_create_context(1, num_stages)`` (one consumer: the fetching task)."""
    _deprecated(ctx, "clc_create_scheduler(num_stages)", "tlx.clc_create_context(1, num_stages)")
    return _clc_create_context(ctx, 1, num_stages)


@X.rule("clc_fetch_next_worker")
def _clc_fetch_next_worker(ctx, scheduler, phase):
    """Older TLX: ask for the next tile and wait for the answer, in the calling task."""
    c = _context(scheduler)
    if c.num_consumers != 1:
        raise SemanticError(f"clc_fetch_next_worker takes the context of clc_create_scheduler (one consumer); this "
                            f"one has num_consumers={c.num_consumers}: call clc_producer / clc_consumer",
                            param="scheduler")
    _deprecated(ctx, "clc_fetch_next_worker(scheduler, phase)",
                "tlx.clc_producer(ctx, phase ^ 1, multi_ctas=False) + tlx.clc_consumer(ctx, phase, multi_ctas=False)")
    flipped = phase ^ 1 if isinstance(phase, int) else S.binary(ctx.b, "xor", phase, 1)
    _clc_producer(ctx, c, flipped, multi_ctas=False)
    return _clc_consumer(ctx, c, phase, multi_ctas=False)
