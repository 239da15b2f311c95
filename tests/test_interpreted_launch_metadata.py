"""An interpreted launch returns what a GPU launch returns: an object whose ``.metadata`` has
Triton's fields, with the launch's cluster shape under TLX's name ``ctas_per_cga`` too."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tlxc
import tlxc.language as tl


@tlxc.jit
def bump_each(counter_ptr):
    tl.atomic_add(counter_ptr + tl.program_id(0) * 0, 1)


def test_plain_launch_reports_its_warps_and_no_cluster():
    counter = torch.zeros(1, dtype=torch.int32)
    launched = bump_each[(6,)](counter, num_warps=2, interpret=True)
    assert counter.item() == 6
    meta = launched.metadata
    assert meta.num_warps == 2 and meta.num_ctas == 1
    assert meta.cluster_dims == (1, 1, 1) and meta.ctas_per_cga == (1, 1, 1)
    assert meta.name == "bump_each"


def test_cluster_launch_regroups_the_grid_and_reports_the_cluster():
    counter = torch.zeros(1, dtype=torch.int32)
    launched = bump_each[(10,)](counter, ctas_per_cga=(2, 1, 1), interpret=True)
    assert counter.item() == 10                     # the cluster groups programs, it does not add any
    assert launched.metadata.ctas_per_cga == (2, 1, 1)
    assert tuple(launched.metadata.cluster_dims) == (2, 1, 1)
    assert launched.metadata.num_ctas == 1


def test_interpret_wrapper_returns_the_same_handle():
    counter = torch.zeros(1, dtype=torch.int32)
    launched = tlxc.interpret(bump_each)[(3,)](counter)
    assert counter.item() == 3 and launched.metadata.num_warps == 4
    with pytest.raises(AttributeError, match="no field 'n_registers'"):
        getattr(launched.metadata, "n_registers")  # noqa: B009
