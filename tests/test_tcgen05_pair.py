"""2-CTA tcgen05 MMA (``async_dot(..., two_ctas=True)``, ``tcgen05_commit(..., two_ctas=True)``,
PTX cta_group::2): the interpreter's pair semantics against float64 torch, sm_100a cubins
through ptxas, and the frontend's located refusals.  Nothing here has run on a Blackwell GPU."""
from __future__ import annotations

import re

import kernels_tcgen05_pair as K
import pytest
import torch

from tlxc.compiler import compile_kernel
from tlxc.errors import TlxcError
from tlxc.frontend.specialize import parse_signature, specialization_from_types
from tlxc.interpreter import interpret

SIG = parse_signature("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32,M=i32")


def _run(kernel, M, K_, N, seed=None, check_barriers=True, **consts):
    a = torch.randn(M, K_, dtype=torch.float16)
    b = torch.randn(K_, N, dtype=torch.float16)
    c = torch.full((M, N), float("nan"))
    programs = 2 * -(-M // 256)                      # whole pairs
    interpret(kernel, (programs,), (a, b, c, M), {"K": K_, "N": N, "ctas_per_cga": (2, 1, 1), **consts}, seed=seed,
              arch="sm_100a", check_barriers=check_barriers)
    ref = a.double() @ b.double()
    return (c.double() - ref).abs().max().item() / ref.abs().max().item()


@pytest.mark.parametrize(("M", "K_", "N", "seed"), [(256, 32, 64, None), (300, 64, 128, 3), (200, 32, 256, 7)])
def test_pair_gemm_matches_float64(M, K_, N, seed):
    # every row of C, the odd CTA's included, is its A rows times both CTAs' halves of B
    assert _run(K.pair_gemm, M, K_, N, seed=seed) < 1e-5


def test_pair_commit_covers_both_mmas():
    assert _run(K.pair_commit, 256, 64, 64) < 1e-5


def test_leader_that_does_not_wait_for_its_peer_is_caught():
    # the static check reports it first (test_checker_reports_...); without it, an interleaving where
    # CTA 0 issues before CTA 1 stored its half of B (the interpreter does not track plain shared
    # stores as races, so only such an interleaving shows it)
    with pytest.raises(TlxcError, match="pair.unordered-peer-operands|reads the odd CTA's operands"):
        _run(K.pair_gemm, 256, 32, 64, BUG="leader_does_not_wait")
    errors = []
    for seed in range(12):
        try:
            _run(K.pair_gemm, 256, 32, 64, seed=seed, check_barriers=False, BUG="leader_does_not_wait")
        except TlxcError as exc:
            errors.append(str(exc))
    assert errors and all("reads operand B from 'b'[0] of CTA 1" in e and "multiply garbage" in e for e in errors)


def _compile(kernel, cluster=(2, 1, 1), **consts):
    spec = specialization_from_types(kernel, SIG, consts)
    return compile_kernel(kernel, spec, arch="sm_100a", cluster=cluster, stages=("ir", "cuda", "ptx", "cubin"))


@pytest.mark.parametrize("kernel", [K.pair_gemm, K.pair_commit])
def test_sm100a_cubin_is_cta_group_2_throughout(kernel):
    compiled = _compile(kernel, K=64, N=128)
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert "tcgen05.mma.cta_group::2.kind::f16" in ptx
    assert "tcgen05.alloc.cta_group::2" in ptx and "tcgen05.dealloc.cta_group::2" in ptx
    assert "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64" in ptx
    assert "cta_group::1" not in ptx                 # PTX: one .cta_group per kernel
    # the pair's M is 256 and N the whole of B (idesc bits 24-28: M >> 4; bits 17-22: N >> 3)
    idesc = int(re.search(r"cta_group::2.kind::f16: 256x128x16 .* idesc (0x[0-9a-f]+)", compiled.asm["cuda"])[1], 16)
    assert (idesc >> 24) & 0x1F == 256 >> 4 and (idesc >> 17) & 0x3F == 128 >> 3


@pytest.mark.parametrize(("kernel", "consts", "cluster", "text"), [
    (K.pair_gemm, {"K": 32, "N": 64}, None, "with two_ctas=True runs on a CTA pair (cta_group::2): launch "
                                            "clusters of an even number of CTAs"),
    (K.pair_gemm, {"K": 32, "N": 64}, (3, 1, 1), "clusters of 3 CTA(s)"),
    (K.pair_gemm, {"K": 32, "N": 16}, (2, 1, 1), "a 2-CTA MMA (M = 256 for the pair) has N a multiple of 32"),
    (K.pair_commit, {"K": 32, "N": 64, "MIX": True}, (2, 1, 1), "every tcgen05 MMA and commit of a kernel runs on "
                                                                "one CTA or on the CTA pair"),
])
def test_refusals_are_located(kernel, consts, cluster, text):
    spec = specialization_from_types(kernel, SIG, consts)
    with pytest.raises(TlxcError, match=r"kernels_tcgen05_pair.py:\d+") as info:
        compile_kernel(kernel, spec, arch="sm_100a", cluster=cluster, stages=("ir",))
    assert text in info.value.message


def _check(kernel, **consts):
    from tlxc.compiler import check_function
    spec = specialization_from_types(kernel, SIG, consts)
    return [f for f in check_function(kernel, spec, arch="sm_100a", cluster=(2, 1, 1)) if f.severity == "error"]


def test_checker_accepts_the_pair_kernels():
    assert _check(K.pair_gemm, K=32, N=64) == []
    assert _check(K.pair_commit, K=32, N=64) == []


def test_checker_reports_a_leader_that_does_not_wait_for_its_peer():
    found = _check(K.pair_gemm, K=32, N=64, BUG="leader_does_not_wait")
    assert [f.check for f in found] == ["pair.unordered-peer-operands"]
    assert "async_dot(a[0], b[0], acc[0]" in found[0].render()           # located at the pair's MMA
    assert "reads the odd CTA's operands" in found[0].message


@pytest.mark.gpu
def test_gpu_pair_gemm():
    from tlxc._internal_testing import is_blackwell
    if not is_blackwell():
        pytest.skip("2-CTA tcgen05 needs a Blackwell (sm_100a) GPU; none has run this yet")
    M, K_, N = 300, 64, 128
    a = torch.randn(M, K_, dtype=torch.float16, device="cuda")
    b = torch.randn(K_, N, dtype=torch.float16, device="cuda")
    c = torch.full((M, N), float("nan"), device="cuda")
    K.pair_gemm[(2 * -(-M // 256),)](a, b, c, M, K=K_, N=N, ctas_per_cga=(2, 1, 1))
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert (c.double() - ref).abs().max().item() / ref.abs().max().item() < 1e-5
