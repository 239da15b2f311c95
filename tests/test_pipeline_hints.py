"""pipeline-loads and the loads' cache hints: a volatile or `.cv` (don't cache) load stays a
synchronous load; an eviction policy and `.ca` move onto the cp.async that replaces the load."""
from __future__ import annotations

import pytest

import tlxc
import tlxc.language as tl
from tlxc.compiler import compile_kernel
from tlxc.frontend.specialize import parse_signature, specialization_from_types

SIG = ("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32,K=i32,stride_am=i32:16,stride_bk=i32:16,stride_cm=i32:16")


@tlxc.kernel
def hinted_matmul(a_ptr, b_ptr, c_ptr, K, stride_am, stride_bk, stride_cm, CACHE: tl.constexpr,
                  EVICT: tl.constexpr, VOLATILE: tl.constexpr, BM: tl.constexpr = 64, BN: tl.constexpr = 64,
                  BK: tl.constexpr = 32):
    rows, cols, ks = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :]
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k * BK, other=0.0, cache_modifier=CACHE,
                    eviction_policy=EVICT, volatile=VOLATILE)
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], acc)


def _ir(cache="", evict="", volatile=False) -> str:
    spec = specialization_from_types(hinted_matmul, parse_signature(SIG),
                                     {"CACHE": cache, "EVICT": evict, "VOLATILE": volatile})
    return compile_kernel(hinted_matmul, spec, arch="sm_90a", num_warps=4, stages=("ir", "ir.opt")).asm["ir.opt"]


@pytest.mark.parametrize("hints", [{"volatile": True}, {"cache": ".cv"}])
def test_volatile_and_uncached_loads_are_not_pipelined(hints):
    text = _ir(**hints)
    loads = [line for line in text.splitlines() if "= tl.load" in line]
    # A stays a synchronous load (B alone may get a ring from pipeline-operand-loads)
    assert len(loads) == 1 and ("volatile = true" in loads[0].lower() or '".cv"' in loads[0]), loads
    assert all("64x32xf16" not in line for line in text.splitlines() if "tlx.async_load" in line)


def test_eviction_policy_and_ca_move_to_the_cp_async():
    text = _ir(cache=".ca", evict="evict_last")
    copies = [line for line in text.splitlines() if "tlx.async_load" in line]
    assert copies and any('eviction = "evict_last"' in line and 'cache = ".ca"' in line for line in copies)
    assert any("eviction" not in line for line in copies)      # the unhinted B operand stays unhinted
