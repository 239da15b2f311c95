"""Cluster launch control (tlx.clc_create_context / clc_producer / clc_consumer): the
interpreter's work queue (a running program takes the programs that have not started),
sm_100a cubins (ptxas), and the frontend's located errors.  Nothing here has run on a
Blackwell GPU."""
from __future__ import annotations

import kernels_clc as K
import pytest
import torch

from tlxc.compiler import compile_kernel
from tlxc.errors import TlxcError
from tlxc.frontend.specialize import parse_signature, specialization_from_types
from tlxc.interpreter import interpret

SIG = parse_signature("x_ptr=*fp32,y_ptr=*fp32,owner_ptr=*i32,n=i32")


def _run(kernel, n=1000, block=64, seed=None, **kwargs):
    tiles = -(-n // block)
    x = torch.randn(n)
    y = torch.full((n,), float("nan"))
    owner = torch.full((tiles,), -7, dtype=torch.int32)
    interpret(kernel, (tiles,), (x, y, owner, n), {"BLOCK": block, **kwargs}, seed=seed, arch="sm_100a")
    torch.testing.assert_close(y.double(), 3 * x.double() - 1, rtol=1e-6, atol=1e-6)
    return owner


@pytest.mark.parametrize("stages", [1, 2])
def test_first_program_takes_every_tile_not_started(stages):
    # programs run one after the other on the interpreter: program 0's requests cancel all others
    owner = _run(K.clc_affine, n=1000, block=64, STAGES=stages)
    assert owner.tolist() == [0] * 16


@pytest.mark.parametrize("seed", [None, 5])
def test_two_consumer_tasks_share_each_answer(seed):
    owner = _run(K.clc_affine_ws, n=777, block=64, seed=seed)
    assert owner.tolist() == [0] * 13


def test_cluster_multicast_answer_offsets_by_rank():
    owner = _run(K.clc_affine_cluster, n=1000, block=64, ctas_per_cga=(2, 1, 1))
    assert owner.tolist() == [0, 1] * 8


def _compile(kernel, cluster=None, **consts):
    spec = specialization_from_types(kernel, SIG, consts)
    return compile_kernel(kernel, spec, arch="sm_100a", cluster=cluster, stages=("ir", "cuda", "ptx", "cubin"))


@pytest.mark.parametrize(("kernel", "consts", "cluster", "issue"), [
    (K.clc_affine, {"BLOCK": 64, "STAGES": 2}, None, "clusterlaunchcontrol.try_cancel.async.shared::cta."
                                                    "mbarrier::complete_tx::bytes.b128"),
    (K.clc_affine_ws, {"BLOCK": 64}, None, "clusterlaunchcontrol.try_cancel.async"),
    (K.clc_affine_cluster, {"BLOCK": 64}, (2, 1, 1), "multicast::cluster::all.b128"),
])
def test_sm100a_cubin(kernel, consts, cluster, issue):
    compiled = _compile(kernel, cluster, **consts)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert issue in compiled.asm["ptx"] and "query_cancel.get_first_ctaid::x" in compiled.asm["ptx"]


def test_clc_is_blackwell_only():
    spec = specialization_from_types(K.clc_affine, SIG, {"BLOCK": 64, "STAGES": 1})
    with pytest.raises(TlxcError, match=r"kernels_clc.py:\d+.*cluster launch control .* only available on "
                                        r"Blackwell"):
        compile_kernel(K.clc_affine, spec, arch="sm_90a")


@pytest.mark.parametrize(("kernel", "cluster", "errors"), [
    (K.clc_affine, None, 0),
    (K.clc_affine_ws, None, 0),
    (K.clc_affine_cluster, (2, 1, 1), 0),              # 1 task x 2 CTAs = num_consumers 2
    (K.clc_affine_ws_miscounted, None, 1),             # 2 tasks, num_consumers=1
])
def test_checker_counts_clc_consumers(kernel, cluster, errors):
    from tlxc.check import ERROR
    from tlxc.compiler import check_function
    consts = {"BLOCK": 64, **({"STAGES": 1} if kernel is K.clc_affine else {})}
    spec = specialization_from_types(kernel, SIG, consts)
    found = [f for f in check_function(kernel, spec, arch="sm_100a", cluster=cluster) if f.severity == ERROR]
    assert len(found) == errors, found
    if errors:
        assert "(num_consumers=1) but 2 task(s) call clc_consumer" in found[0].message
        assert found[0].loc.line > 0 and "kernels_clc.py" in found[0].loc.file
