"""The varlen attention's sorted work table built on the device (kernels/attention_schedule.py,
two launches) against the torch-operations version (attention.sorted_varlen_schedule), on the
interpreter: uneven lengths with 0 and 1, causal pairs, H not a multiple of the head group,
more programs than items, random batches up to 150 sequences, the bench's batches at 132
programs; the length checks it makes on the device; sm_90a compiles and ``tlxc check``."""
from __future__ import annotations

import importlib
import os
import random
import sys

import pytest
import torch

from tlxc.errors import InterpreterError

A = importlib.import_module("tlxc.ops.attention")


def _cu(lens):
    return torch.tensor([0, *torch.tensor(lens, dtype=torch.int64).cumsum(0).tolist()], dtype=torch.int32)


def _rows(table):
    return [r[1:1 + r[0]] for r in table.tolist()]


def _both(lens_q, lens_k, H, causal, programs, group_h, block_m=128):
    cu_q, cu_k = _cu(lens_q), _cu(lens_k)
    num_m = max(1, -(-max(lens_q) // block_m))
    ref = A.sorted_varlen_schedule(cu_q, cu_k, sum(lens_q), num_m, H, block_m, causal, programs, group_h)
    got = A.device_sorted_schedule(cu_q, cu_k, sum(lens_q), sum(lens_k), max(lens_q), num_m, H, block_m, causal,
                                   programs, group_h)
    return ref, got


def _random_case(seed):
    rng = random.Random(seed)
    B = rng.randint(1, 150)
    lens_q = [rng.choice([0, 1, 5, 127, 128, 129, 300, 700]) for _ in range(B)]
    lens_k = [rng.choice([0, 3, 200, 900, 900]) for _ in range(B)]       # ties in key length
    return lens_q, lens_k, rng.choice([1, 3, 8]), seed % 2 == 1, rng.choice([5, 132]), rng.choice([2, 16])


CASES = [
    ([1, 0, 130, 64, 7], [3, 5, 0, 200, 7], 4, False, 3, 16),
    ([1, 0, 130, 64, 7], [3, 5, 0, 200, 7], 4, True, 3, 2),
    ([300, 1, 0, 1000, 129, 128], None, 5, True, 7, 2),      # H not a multiple of group_h, odd block counts
    ([300, 1, 0, 1000, 129, 128], None, 3, False, 132, 16),  # more programs than items
    ([0, 0], None, 2, True, 4, 16),                          # no real item
    *[_random_case(seed) for seed in range(4)],
]


@pytest.mark.parametrize("lens_q,lens_k,H,causal,programs,group_h", CASES, ids=lambda x: str(x)[:40])
def test_device_table_is_the_torch_table(lens_q, lens_k, H, causal, programs, group_h):
    ref, got = _both(lens_q, lens_k or lens_q, H, causal, programs, group_h)
    assert got.shape == ref.shape
    assert _rows(got) == _rows(ref)


def test_bench_batches_at_132_programs():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
    from ops_attention_bench import VARLEN_CASES, VARLEN_SEED, varlen_lengths
    for index, (_, causal) in enumerate(VARLEN_CASES):
        lens = varlen_lengths(VARLEN_SEED + index)
        ref, got = _both(lens, lens, 16, causal, 132, 16)
        assert _rows(got) == _rows(ref)


@pytest.mark.parametrize("cu_q,cu_k,max_q,message", [
    ([0, 5, 3, 9], [0, 1, 2, 3], 9, "non-decreasing"),          # a negative query length
    ([0, 5, 6, 9], [0, 4, 2, 3], 9, "non-decreasing"),          # a negative key length
    ([0, 5, 6, 9], [0, 1, 2, 3], 4, "max_seqlen_q"),            # a query length above max_seqlen_q
    ([0, 5, 6, 12], [0, 1, 2, 3], 9, "packed rows"),            # past total_q = 10
    ([0, 5, 6, 9], [-1, 1, 2, 3], 9, "packed rows"),            # a negative first offset
])
def test_rank_kernel_checks_the_lengths(cu_q, cu_k, max_q, message):
    cu_q, cu_k = torch.tensor(cu_q, dtype=torch.int32), torch.tensor(cu_k, dtype=torch.int32)
    with pytest.raises(InterpreterError, match=message):
        A.device_sorted_schedule(cu_q, cu_k, 10, 3, max_q, 1, 2, 128, False, 4, 16)
    A.device_sorted_schedule(cu_q.clamp(0, 9).sort().values, cu_k.clamp(0, 3).sort().values, 10, 3, 9, 1, 2, 128,
                             False, 4, 16)                                           # in order: fine


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_sm90a_compiles_and_check_is_clean(causal):
    from tlxc.compiler import check_function
    from tlxc.frontend.specialize import specialization_from_args
    from tlxc.ops.kernels.attention_schedule import varlen_check_kernel, varlen_rank_kernel, varlen_table_kernel
    cu = _cu([300, 1, 0, 1000])
    scratch = torch.zeros(2, 5, dtype=torch.int32)
    table = torch.zeros(132, 21, dtype=torch.int32)
    launches = [
        (varlen_rank_kernel, (1,), (cu, cu, scratch[0], scratch[1], 4, 16, 1301, 1301, 1000),
         {"BLOCK_M": 128, "BLOCK_B": A.RANK_BLOCK, "CHUNK": A.RANK_BLOCK}),
        (varlen_table_kernel, (132,), (cu, scratch[0], scratch[1], table, 4, 16, 8, 132, 10, 21, 16),
         {"BLOCK_M": 128, "SLOTS": 32, "PER": 2 if causal else 1, "CAUSAL": causal, "SEARCH_STEPS": 3}),
        (varlen_check_kernel, (1,), (cu, cu, 4, 1301, 1301, 1000), {"BLOCK": A.CHECK_BLOCK}),
    ]
    for kernel, grid, args, meta in launches:
        handle = kernel.warmup(*args, grid=grid, num_warps=4, **meta)
        assert handle.n_spills == 0
        params = dict(zip(kernel.param_names, args), **meta)
        findings = check_function(kernel, specialization_from_args(kernel, params), num_warps=4)
        assert [f for f in findings if f.severity != "note"] == []


@pytest.mark.parametrize("order", A.VARLEN_ORDERS)
def test_strided_cu_seqlens(order):
    """cu_seqlens seen every other element of a longer tensor: the kernels (attention, the
    schedule's) read the offsets they show."""
    from tlxc.ops.attention import attention_forward, reference
    cu = torch.tensor([0, -1, 70, -1, 71, -1, 200], dtype=torch.int32)[::2]
    assert cu.stride(0) == 2
    gen = torch.Generator().manual_seed(81)
    q, k, v = (torch.randn(200, 2, 64, generator=gen).bfloat16() for _ in range(3))
    o, lse = attention_forward(q, k, v, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu, varlen_order=order, programs=2)
    ref_o, ref_lse = reference(q, k, v, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu)
    assert (o.double() - ref_o).abs().max().item() < 2e-2
    assert (lse.double() - ref_lse).abs().max().item() < 1e-4
