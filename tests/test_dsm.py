"""Distributed shared memory (tlx.remote_shmem_store, async_remote_shmem_store,
async_remote_shmem_copy) and cluster barriers run by every task: interpreter, sm_90a
cubins, and the H200 (gpu marker; clusters of 2 CTAs)."""
from __future__ import annotations

import kernels_dsm as K
import pytest
import torch

import tlxc
from tlxc.compiler import compile_kernel
from tlxc.errors import CompilationError, DeadlockError, InterpreterError
from tlxc.frontend.specialize import specialization_from_args


def _swap(device, n=200, block=64, interpret=False):
    x = torch.randn(n, device=device)
    y = torch.full((n,), float("nan"), device=device)
    launcher = tlxc.interpret(K.dsm_swap) if interpret else K.dsm_swap
    launcher[(2 * cdiv(n, 2 * block),)](x, y, n, BLOCK=block, ctas_per_cga=(2, 1, 1))
    blocks = torch.arange(n, device=device) // block
    return y, x.double() * 2 + (blocks % 2).double()


def cdiv(a, b):
    return (a + b - 1) // b


def _row_sums(device, m=50, n=64, block_m=64, interpret=False):
    x = torch.randn(m, n, device=device)
    out = torch.full((m,), float("nan"), device=device)
    launcher = tlxc.interpret(K.dsm_row_sums) if interpret else K.dsm_row_sums
    launcher[(cdiv(m, block_m), 2)](x, out, m, N=n, BLOCK_M=block_m, num_warps=1, ctas_per_cga=(1, 2, 1))
    return out, x.double().sum(1)


def _bulk(device, n=300, block=128, interpret=False, wait=True, seed=None):
    x = torch.randn(n, device=device)
    y = torch.full((n,), float("nan"), device=device)
    launcher = tlxc.interpret(K.dsm_bulk_forward, seed=seed) if interpret else K.dsm_bulk_forward
    launcher[(2 * cdiv(n, block),)](x, y, n, BLOCK=block, WAIT=wait, num_warps=1, ctas_per_cga=(2, 1, 1))
    return y, x


def test_remote_store_lands_in_the_peer():
    y, want = _swap("cpu", interpret=True)
    assert torch.allclose(y.double(), want)


@pytest.mark.parametrize("seed", [None, 1])
def test_async_remote_store_completes_bytes_on_the_peers_barrier(seed):
    out, want = _row_sums("cpu", interpret=True)
    assert torch.allclose(out.double(), want, atol=1e-5)


def test_bulk_copy_to_the_peer():
    y, x = _bulk("cpu", interpret=True)
    assert torch.equal(y, x)


def test_reading_before_the_copy_lands_is_an_error():
    with pytest.raises(InterpreterError, match="uninitialized shared memory|not ordered"):
        _bulk("cpu", interpret=True, wait=False)


def test_async_store_of_narrow_elements_is_refused_at_its_line():
    with pytest.raises(CompilationError, match="st.async stores 4- or 8-byte elements") as info:
        tlxc.interpret(K.dsm_async_store_f16)[(2,)](torch.zeros(64, dtype=torch.float16), ctas_per_cga=(2, 1, 1))
    assert "kernels_dsm.py" in info.value.render()


def test_a_rank_outside_any_cluster_is_refused():
    with pytest.raises(CompilationError, match="at most 16 CTAs; rank 17"):
        tlxc.interpret(K.dsm_store_rank_17)[(2,)](torch.zeros(64), ctas_per_cga=(2, 1, 1))


def _compile(kfn, args, cluster, num_warps=4):
    spec = specialization_from_args(kfn, args)
    return compile_kernel(kfn, spec, arch="sm_90a", num_warps=num_warps, cluster=cluster)


def test_dsm_kernels_compile_to_sm90a_cubins():
    x = torch.empty(8)
    swap = _compile(K.dsm_swap, {"x_ptr": x, "y_ptr": x, "n": 8, "BLOCK": 64}, (2, 1, 1))
    sums = _compile(K.dsm_row_sums, {"x_ptr": x, "out_ptr": x, "m": 8, "N": 64, "BLOCK_M": 64}, (1, 2, 1), 1)
    bulk = _compile(K.dsm_bulk_forward, {"x_ptr": x, "y_ptr": x, "n": 8, "BLOCK": 128, "WAIT": True}, (2, 1, 1), 1)
    for compiled in (swap, sums, bulk):
        assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert "tlx_st_shared_cluster_b32(" in swap.asm["cuda"]
    # each element is stored once (its owner in the replicated sum layout), so the bytes that
    # complete on the peer's barrier are the buffer's
    store = next(line for line in sums.asm["cuda"].splitlines() if "tlx_st_async_cluster_b32(" in line
                 and "static" not in line)
    assert "if (" in store
    assert "tlx_cp_async_bulk_cluster(" in bulk.asm["cuda"]
    # tlxc adds the fence + cluster barrier after the barrier inits (peers complete bytes on them)
    assert "tlx.fence_mbarrier_init_cluster" in bulk.asm["ir"]


def test_cluster_barrier_run_by_every_task():
    x = torch.randn(300)
    y = torch.full((300,), float("nan"))
    tlxc.interpret(K.cluster_barrier_in_tasks)[(4,)](x, y, 300, BLOCK=128, SKIP_IDLE=False, ctas_per_cga=(2, 1, 1))
    assert torch.equal(y, x + 1)


def test_a_task_that_skips_the_cluster_barrier_deadlocks():
    x = torch.randn(256)
    with pytest.raises(DeadlockError, match="cluster barrier"):
        tlxc.interpret(K.cluster_barrier_in_tasks)[(2,)](x, x.clone(), 256, BLOCK=128, SKIP_IDLE=True,
                                                        ctas_per_cga=(2, 1, 1))


def test_cluster_barrier_in_tasks_compiles():
    x = torch.empty(8)
    compiled = _compile(K.cluster_barrier_in_tasks, {"x_ptr": x, "y_ptr": x, "n": 8, "BLOCK": 128,
                                                     "SKIP_IDLE": False}, (2, 1, 1))
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert compiled.asm["cuda"].count("tlx_cluster_arrive();") >= 4      # 3 tasks + tlxc's closing one


@pytest.mark.gpu
def test_gpu_dsm_stores_and_copies():
    y, want = _swap("cuda", n=1000)
    assert torch.allclose(y.double(), want)
    out, want = _row_sums("cuda", m=300)
    assert torch.allclose(out.double(), want, atol=1e-4)
    y, x = _bulk("cuda", n=5000)
    assert torch.equal(y, x)


@pytest.mark.gpu
def test_gpu_cluster_barrier_in_every_task():
    x = torch.randn(1000, device="cuda")
    y = torch.full((1000,), float("nan"), device="cuda")
    K.cluster_barrier_in_tasks[(8,)](x, y, 1000, BLOCK=128, SKIP_IDLE=False, ctas_per_cga=(2, 1, 1))
    assert torch.equal(y, x + 1)



# -- st.async into a buffer the peer allocates later; the checker counts st.async bytes -------------
def test_async_store_into_a_peer_buffer_allocated_later():
    from tlxc.interpreter import interpret
    x = torch.randn(4, 64)
    out = torch.full((4,), float("nan"))
    interpret(K.dsm_late_alloc_sums, (4,), (x, out), {"BLOCK": 64, "ctas_per_cga": (2, 1, 1)}, arch="sm_100a")
    pair = x.double().sum(1).view(2, 2).sum(1)
    torch.testing.assert_close(out.double(), pair.repeat_interleave(2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_checker_counts_async_remote_store_bytes(arch):
    from tlxc.check import ERROR
    from tlxc.compiler import check_function
    from tlxc.frontend.specialize import parse_signature, specialization_from_types
    spec = specialization_from_types(K.dsm_late_alloc_sums, parse_signature("x_ptr=*fp32,out_ptr=*fp32"),
                                     {"BLOCK": 64})
    findings = check_function(K.dsm_late_alloc_sums, spec, arch=arch, cluster=(2, 1, 1))
    assert not [f for f in findings if f.severity == ERROR], findings
    compiled = compile_kernel(K.dsm_late_alloc_sums, spec, arch=arch, cluster=(2, 1, 1))
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
