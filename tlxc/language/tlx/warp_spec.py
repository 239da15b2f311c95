"""``tlx.warp_spec``: helpers for warp-specialized pipelines, as in TLX
(``from tlxc.language.tlx.warp_spec import get_bufidx_phase``)."""
from __future__ import annotations

from ...runtime.jit import kernel
from .. import core as tl


@kernel
def get_bufidx_phase(accum_cnt, NUM_BUFFERS: tl.constexpr):
    """(slot, phase) of the ``accum_cnt``-th use of a ring of ``NUM_BUFFERS``."""
    return accum_cnt % NUM_BUFFERS, (accum_cnt // NUM_BUFFERS) & 1


__all__ = ["get_bufidx_phase"]
