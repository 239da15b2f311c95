"""Lowering rules for clusters (``ir/ops/cluster.py``).

A remote barrier (``tlx.remote_view``) is held as its 32-bit address in the
cluster's shared window (``mapa``); arrivals on it use the ``.shared::cluster``
form of ``mbarrier.arrive`` (``rules_tlx.barrier_arrive``).  The cluster
barrier is ``barrier.cluster.arrive`` + ``wait`` (``.aligned``), which every
thread of every CTA must reach: in a warp-specialized kernel the one after the
barrier inits belongs to the uniform prologue and the closing one is lowered
after the task branches (``rules_tlx.lower_warp_specialized``), so every warp
runs both.
"""
from __future__ import annotations

from ..codegen_c.lower import lowering


@lowering("tlx.cluster_cta_rank", vendor="nvidia")
def cluster_cta_rank(lw, op):
    lw.declare(op.results[0], init=lw.target.expr("tlx_cluster_ctarank"))


@lowering("tlx.cluster_size", vendor="nvidia")
def cluster_size(lw, op):
    lw.declare(op.results[0], init=lw.target.expr("tlx_cluster_nctarank"))


@lowering("tlx.cluster_barrier", vendor="nvidia")
def cluster_barrier(lw, op):
    lw.out.line(f"{lw.target.call('tlx_cluster_arrive')} {lw.target.call('tlx_cluster_wait')}")


@lowering("tlx.fence_mbarrier_init_cluster", vendor="nvidia")
def fence_mbarrier_init_cluster(lw, op):
    lw.out.line(lw.target.call("tlx_fence_mbarrier_init_cluster"))


@lowering("tlx.remote_view", vendor="nvidia")
def remote_view(lw, op):
    bar, rank = op.operands
    r = op.results[0]
    lw.out.line(f"const unsigned {lw.define(r)} = {lw.target.expr('tlx_mapa_shared', lw.name(bar), lw.name(rank))};")
    if id(bar) in lw.barrier_names:
        lw.barrier_names[id(r)] = lw.barrier_names[id(bar)]


# -- distributed shared memory (ir/ops/cluster_mem.py) -------------------------------------------
# Each element is stored once: only the slot that owns it in the value's layout stores it
# (``rules_memory._owner``), so the bytes an async store completes on the peer's barrier are
# the buffer's bytes, which is what the peer's barrier_expect_bytes posts.
_UNSIGNED = {1: "unsigned char", 2: "unsigned short", 4: "unsigned", 8: "unsigned long long"}


def _element_stores(lw, op, store_of) -> None:
    """``if (owner) store_of(remote address, bits)`` for every register of the stored value."""
    from ..codegen_c.rules_buffers import _offset_expr, shared_address
    from ..codegen_c.rules_memory import _owner
    view, value, rank = op.operands[:3]
    t = value.type.element
    strides = lw.views[id(view)][1]
    offset = _offset_expr(lw, value.type.layout, strides, block=lw.view_block.get(id(view)))
    local = shared_address(lw, view, offset, t)
    remote = lw.target.expr("tlx_mapa_shared", local, lw.name(rank))
    bits = f"*reinterpret_cast<const {_UNSIGNED[t.bytes]}*>(&{lw.name(value)}[i])"
    owner = _owner(lw, value.type)
    store = store_of(remote, bits)
    lw.for_registers(value, f"if {owner} {store}" if owner else store)


@lowering("tlx.remote_shmem_store", vendor="nvidia")
def remote_shmem_store(lw, op):
    helper = f"tlx_st_shared_cluster_b{op.operands[1].type.element.bits}"
    _element_stores(lw, op, lambda addr, bits: lw.target.call(helper, addr, bits))


@lowering("tlx.async_remote_shmem_store", vendor="nvidia")
def async_remote_shmem_store(lw, op):
    bar, rank = op.operands[3], op.operands[2]
    remote_bar = lw.fresh("remote_bar")
    lw.out.line(f"const unsigned {remote_bar} = {lw.target.expr('tlx_mapa_shared', lw.name(bar), lw.name(rank))};")
    helper = f"tlx_st_async_cluster_b{op.operands[1].type.element.bits}"
    _element_stores(lw, op, lambda addr, bits: lw.target.call(helper, addr, bits, remote_bar))


@lowering("tlx.async_remote_shmem_copy", vendor="nvidia")
def async_remote_shmem_copy(lw, op):
    dst, src, rank, bar = op.operands
    nbytes = src.type.buffer_bytes
    # Every thread's writes of the source (fenced into the async proxy by the kernel's
    # tlx.fence("async_shared"), as in TLX) come before the one thread that issues the copy.
    lw.out.line(lw.sync())
    remote_dst = lw.target.expr("tlx_mapa_shared", lw.views[id(dst)][0], lw.name(rank))
    remote_bar = lw.target.expr("tlx_mapa_shared", lw.name(bar), lw.name(rank))
    copy = lw.target.call("tlx_cp_async_bulk_cluster", remote_dst, lw.views[id(src)][0], f"{nbytes}u", remote_bar)
    lw.out.line(f"if ({lw.scope.tid_var} == 0) {copy}")


# -- cluster launch control (ir/ops/clc.py) -------------------------------------------------------
# One thread asks (with multicast: CTA 0's, for the whole cluster); every thread decodes the
# answer after its wait on the full barrier.  The response buffer is 128-byte aligned
# (passes/shared_memory.py), the instruction wants 16.
@lowering("tlx.clc_try_cancel", vendor="nvidia")
def clc_try_cancel(lw, op):
    response, bar = op.operands
    multicast = op.attrs["multicast"]
    helper = "tlx_clc_try_cancel_multicast" if multicast else "tlx_clc_try_cancel"
    cond = f"{lw.scope.tid_var} == 0"
    if multicast:
        cond += f" && {lw.target.expr('tlx_cluster_ctarank')} == 0"
    lw.out.line(f"if ({cond}) {lw.target.call(helper, lw.views[id(response)][0], lw.name(bar))}")


@lowering("tlx.clc_query", vendor="nvidia")
def clc_query(lw, op):
    lw.declare(op.results[0], init=lw.target.expr("tlx_clc_query", lw.views[id(op.operands[0])][0]))
