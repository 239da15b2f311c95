"""Rules for structured control flow: ``scf.for``, ``scf.while``, ``scf.if``.

They are generators, because the regions they run may block (a barrier wait
inside a loop); ``run_block`` returns the values the region's terminator
passes on (``scf.yield`` / ``scf.condition``).
"""
from __future__ import annotations

from .executor import run_block, while_iteration_limit
from .registry import impl
from .values import register_dtype


def _results(op, values: list):
    """A rule returns its one result itself, or a sequence of several."""
    return values[0] if len(op.results) == 1 else values


@impl("scf.for")
def for_(ctx, op, lb, ub, step, *inits):
    body = op.regions[0].block
    iv_type = register_dtype(op.operands[0].type).type
    lower, upper, stride = int(lb), int(ub), int(step)
    if stride <= 0:
        raise ctx.error(op, f"scf.for step must be positive, got {stride} in {ctx.label}")
    carried = list(inits)
    trips = range(lower, upper, stride)
    limit = while_iteration_limit()
    if len(trips) > limit:          # hours of interpreting: refused up front, as an endless while loop is
        raise ctx.error(op, f"this for loop has {len(trips)} iterations in {ctx.label}, more than the "
                            f"interpreter runs in one loop ({limit}; TLXC_INTERPRET_MAX_ITERATIONS raises the "
                            f"bound)")
    for iv in trips:
        carried = yield from run_block(ctx, body, [iv_type(iv)] + carried)
    drain = op.attrs.get("dot_drain")
    if drain is not None and trips:      # passes/dot_wait_drain.py: the last iteration waits for its wgmmas
        from .mma_async import retire
        carried[drain] = retire(ctx, op.loc, carried[drain], 0)
    return _results(op, carried)


@impl("scf.while")
def while_(ctx, op, *inits):
    before, after = op.regions[0].block, op.regions[1].block
    carried = list(inits)
    limit = while_iteration_limit()
    iterations = 0
    while True:
        condition, *values = yield from run_block(ctx, before, carried)
        if not condition:
            return _results(op, values)
        iterations += 1
        if iterations > limit:
            raise ctx.error(op, f"this while loop ran {limit} iterations without its condition turning false "
                                f"in {ctx.label} (an endless loop? TLXC_INTERPRET_MAX_ITERATIONS raises the "
                                f"bound)")
        carried = yield from run_block(ctx, after, values)


@impl("scf.if")
def if_(ctx, op, condition):
    region = op.regions[0] if condition else op.regions[1]
    values = yield from run_block(ctx, region.block)
    return _results(op, values)
