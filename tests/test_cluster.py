"""Clusters (ctas_per_cga): rank and size, multicast TMA loads, remote arrives, the
cluster barriers tlxc adds; on the interpreter, compiled for sm_90a/sm_100a, and on the GPU."""
from __future__ import annotations

import kernels_cluster as K
import pytest
import torch

import tlxc
from tlxc.compiler import compile_kernel
from tlxc.errors import RaceError
from tlxc.frontend.specialize import specialization_from_args

BM, BN = 16, 32


def _exchange(device, pairs=2, interpret=False, seed=None):
    x = torch.randn(pairs * 2 * BM, BN, device=device)
    out = torch.full((2 * pairs, 2 * BM, BN), float("nan"), device=device)
    desc = tlxc.TensorDescriptor.from_tensor(x, [BM, BN])
    launcher = tlxc.interpret(K.multicast_exchange, seed=seed) if interpret else K.multicast_exchange
    launcher[(2 * pairs,)](desc, out, BM=BM, BN=BN, ctas_per_cga=(2, 1, 1))
    want = x.reshape(pairs, 2 * BM, BN).repeat_interleave(2, dim=0)
    return out, want


def test_rank_and_size():
    import numpy as np
    out = torch.full((8,), -1, dtype=torch.int32)
    tlxc.interpret(K.cluster_ids)[(8,)](out, ctas_per_cga=(4,))
    assert out.tolist() == [100 * (i % 4) + 4 for i in range(8)]
    tlxc.interpret(K.cluster_ids)[(8,)](out, ctas_per_cga=(np.int64(2), 1, 1))
    assert out.tolist() == [100 * (i % 2) + 2 for i in range(8)]
    tlxc.interpret(K.cluster_ids)[(8,)](out)
    assert out.tolist() == [1] * 8


@pytest.mark.parametrize("seed", [None, 0, 1, 2])
def test_multicast_lands_in_every_target_and_remote_arrives_count(seed):
    out, want = _exchange("cpu", interpret=True, seed=seed)
    assert torch.equal(out, want)


@pytest.mark.usefixtures("interpreter_diagnosis")
@pytest.mark.parametrize("seed", [None, 3])
def test_unexpected_multicast_bytes_are_a_race(seed):
    x = torch.randn(2 * BM, BN)
    out = torch.empty(BM, BN)
    desc = tlxc.TensorDescriptor.from_tensor(x, [BM, BN])
    with pytest.raises(RaceError, match="not ordered after the asynchronous TMA load issued by task 'main of CTA"):
        tlxc.interpret(K.multicast_without_expect, seed=seed)[(2,)](desc, out, BM=BM, BN=BN, ctas_per_cga=(2,))


def test_a_wait_on_a_remote_barrier_is_refused_at_its_line():
    with pytest.raises(tlxc.CompilationError, match="remote view .* arrive remote, wait local") as info:
        tlxc.interpret(K.remote_wait)[(2,)](torch.empty(1), ctas_per_cga=(2,))
    assert "kernels_cluster.py" in info.value.render() and "tlx.barrier_wait(peer, 0)" in info.value.render()


@pytest.mark.parametrize("dims,message", [((3,), "grid .* not a multiple of ctas_per_cga"),
                                          ((16,), "portable limit of 8"), ((0,), "positive ints"),
                                          ((2.0,), "positive ints"), ((True,), "positive ints"),
                                          ((2, 1, 1, 1), "positive ints")])
def test_bad_cluster_shapes_are_launch_errors(dims, message):
    with pytest.raises(tlxc.LaunchError, match=message):
        tlxc.interpret(K.cluster_ids)[(8,)](torch.empty(8, dtype=torch.int32), ctas_per_cga=dims)


def _compiled(arch):
    x = torch.randn(4 * BM, BN)
    desc = tlxc.TensorDescriptor.from_tensor(x, [BM, BN])
    spec = specialization_from_args(K.multicast_exchange, {"in_desc": desc, "out_ptr": torch.empty(1),
                                                           "BM": BM, "BN": BN})
    return compile_kernel(K.multicast_exchange, spec, arch=arch, num_warps=4, cluster=(2, 1, 1))


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_cluster_kernel_compiles(arch):
    compiled = _compiled(arch)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    cuda = compiled.asm["cuda"]
    assert "__cluster_dims__(2, 1, 1)" in cuda and "multicast::cluster" in cuda and "mapa.shared::cluster" in cuda


def test_tlxc_adds_the_cluster_barriers():
    """After the barrier inits (peers signal them) and at the end (no CTA leaves early)."""
    ir = _compiled("sm_90a").asm["ir"]
    lines = [line.strip() for line in ir.splitlines()]
    first_sync = next(i for i, line in enumerate(lines) if line.startswith("tlx.cluster_barrier"))
    assert lines[first_sync - 1].startswith("tlx.fence_mbarrier_init_cluster")
    assert "tlx.alloc_barriers" in lines[first_sync - 2] or "done" in lines[first_sync - 2]
    assert lines[-3].startswith("tlx.cluster_barrier") or any(
        line.startswith("tlx.cluster_barrier") for line in lines[-4:])


@pytest.mark.gpu
def test_gpu_multicast_and_remote_arrive():
    out, want = _exchange("cuda", pairs=33)
    torch.cuda.synchronize()
    assert torch.equal(out, want)


def _static_findings(kernel):
    from tlxc.compiler import check_function
    desc = tlxc.TensorDescriptor.from_tensor(torch.randn(4 * BM, BN), [BM, BN])
    spec = specialization_from_args(kernel, {"in_desc": desc, "out_ptr": torch.empty(1), "BM": BM, "BN": BN})
    return check_function(kernel, spec, cluster=(2, 1, 1))


def test_static_check_counts_multicast_bytes_and_remote_arrives():
    """Clusters are checked as symmetric: a multicast to k CTAs lands k boxes in each one's
    barrier, a remote arrive counts as the peer's arrive on this CTA's barrier."""
    assert _static_findings(K.multicast_exchange) == []
    found = _static_findings(K.multicast_without_expect)
    assert [f.check for f in found if f.severity == "error"] == ["barrier.expect-bytes"]
    assert "deliver 4096 bytes into one phase of 'full'[0] but barrier_expect_bytes announced 2048" in found[0].message


def test_a_peer_signal_needs_a_cluster_launch():
    from tlxc.compiler import check_function
    desc = tlxc.TensorDescriptor.from_tensor(torch.randn(4 * BM, BN), [BM, BN])
    spec = specialization_from_args(K.multicast_exchange, {"in_desc": desc, "out_ptr": torch.empty(1), "BM": BM,
                                                           "BN": BN})
    found = check_function(K.multicast_exchange, spec)
    assert found and "needs a cluster launch" in found[0].message and found[0].loc.line > 0
