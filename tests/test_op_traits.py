"""Op traits (ir/traits.py) replace lists of op names (issue 20 item 7), and the named-barrier
ops verify their operands."""
from __future__ import annotations

import pytest

from tlxc.errors import VerificationError
from tlxc.ir import ops  # noqa: F401  (registers every op)
from tlxc.ir.core import OP_REGISTRY
from tlxc.ir.traits import (
    ALLOCATION,
    ASYNC_DOT,
    BULK_STORE,
    CONTROL_FLOW,
    ELEMENTWISE,
    NAMED_BARRIER,
    PURE,
    REMOTE_VIEW,
    SIDE_EFFECT,
    TCGEN05_MMA,
    TERMINATOR,
    VIEW,
    has_trait,
)
from tlxc.ir.types import i1, i32


def _with(trait):
    return {name for name, cls in OP_REGISTRY.items() if trait in cls.traits}


def test_the_traits_name_the_ops_the_lists_named():
    assert _with(VIEW) == {"tlx.local_view", "tlx.local_slice", "tlx.local_trans", "tlx.local_reinterpret"}
    assert _with(REMOTE_VIEW) == {"tlx.remote_view"}
    assert _with(ALLOCATION) == {"tlx.local_alloc", "tlx.alloc_barriers"}
    assert _with(SIDE_EFFECT) == {"tl.store", "tl.atomic_rmw", "tl.atomic_cas", "tl.debug_barrier", "tl.print",
                                  "tl.assert", "scf.yield", "scf.condition", "tl.return",
                                  # AMD's warp-pipeline markers and scheduling barrier (ir/ops/warp_pipeline.py)
                                  "tlx.warp_pipeline_begin", "tlx.warp_pipeline_enter", "tlx.warp_pipeline_exit",
                                  "tlx.warp_pipeline_end", "tlx.amd_sched_barrier"}
    assert _with(ELEMENTWISE) == {name for name in OP_REGISTRY if name.startswith(("arith.", "math.")) and
                                  name != "arith.constant"} | {"tl.addptr", "tl.hint"}
    assert has_trait("tlx.local_view", VIEW) and not has_trait("tl.load", SIDE_EFFECT)
    # the lists the passes, checker, interpreter and codegen restated (pipeline.PURE + arith/math, ...)
    assert _with(PURE) == {name for name in OP_REGISTRY if name.startswith(("arith.", "math."))} | {
        "tl.program_id", "tl.num_programs", "tl.arange", "tl.splat", "tl.broadcast", "tl.expand_dims", "tl.reshape",
        "tl.trans", "tl.hint", "tl.addptr"}
    assert _with(CONTROL_FLOW) == {"scf.for", "scf.while", "scf.if"}
    assert _with(TERMINATOR) == {"scf.yield", "scf.condition", "tl.return"}
    assert _with(NAMED_BARRIER) == {"tlx.named_barrier_wait", "tlx.named_barrier_arrive"}
    assert _with(BULK_STORE) == {"tlx.async_descriptor_store", "tlx.async_bulk_store"}
    assert _with(ASYNC_DOT) == {"tlx.async_dot", "tlx.async_dot_wait"}
    assert _with(TCGEN05_MMA) == {"tlx.tcgen05_mma", "tlx.tcgen05_commit"}
    # a pure op neither writes memory nor syncs
    assert not _with(PURE) & _with(SIDE_EFFECT)
    assert not has_trait("no.such_op", VIEW)


def _constant(value, t=i32):
    return OP_REGISTRY["arith.constant"]([], [t], {"value": value})


@pytest.mark.parametrize("name", ["tlx.named_barrier_wait", "tlx.named_barrier_arrive"])
def test_named_barrier_ops_verify_id_and_thread_count(name):
    make = OP_REGISTRY[name]
    make([_constant(9).result, _constant(256).result]).verify()
    with pytest.raises(VerificationError, match="named barrier id in 0..15, got 16"):
        make([_constant(16).result, _constant(256).result]).verify()
    with pytest.raises(VerificationError, match="positive multiple of 32, got 100"):
        make([_constant(9).result, _constant(100).result]).verify()
    with pytest.raises(VerificationError, match="expected an i32 id"):
        make([_constant(1, i1).result, _constant(256).result]).verify()
    with pytest.raises(VerificationError, match="expected 2 operands"):
        make([_constant(9).result]).verify()
