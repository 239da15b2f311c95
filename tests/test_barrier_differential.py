"""Barrier semantics give the same observable results on the interpreter and
the GPU (issue 5): arrive counts, phases, expect-bytes, warp barriers,
predicates.  The interpreter side always runs; the GPU side is marked."""
from __future__ import annotations

import kernels_barrier_diff as K
import pytest
import torch

import tlxc

CASES = {
    "fresh_parity_one": (K.fresh_barrier_parity_one_passes, lambda d: [torch.zeros(1, dtype=torch.int32, device=d)],
                         {}, lambda outs: outs[0].tolist() == [1]),
    "two_arrivals": (K.two_arrivals_complete_a_phase,
                     lambda d: [torch.zeros(128, dtype=torch.int32, device=d),
                                torch.arange(256, dtype=torch.int32, device=d)],
                     {}, lambda outs: outs[0].cpu().tolist() == [i + (i + 128) for i in range(128)]),
    "ring_3_stages": (K.ring_of_phases, lambda d: [torch.zeros(7 * 128, dtype=torch.int32, device=d), 7],
                      {"NUM_STAGES": 3},
                      lambda outs: outs[0].cpu().tolist() == [2 * (i // 128) + 1 for i in range(7 * 128)]),
    "ring_1_stage": (K.ring_of_phases, lambda d: [torch.zeros(5 * 128, dtype=torch.int32, device=d), 5],
                     {"NUM_STAGES": 1},
                     lambda outs: outs[0].cpu().tolist() == [2 * (i // 128) + 1 for i in range(5 * 128)]),
    "expect_zero_bytes": (K.expect_zero_bytes_is_one_arrival, lambda d: [torch.zeros(1, dtype=torch.int32, device=d)],
                          {}, lambda outs: outs[0].tolist() == [7]),
    "warp_barrier": (K.warp_barrier_counts_threads, lambda d: [torch.zeros(1, dtype=torch.int32, device=d)],
                     {}, lambda outs: outs[0].tolist() == [5]),
    "predicated_arrive_taken": (K.predicated_arrive_skips,
                                lambda d: [torch.zeros(1, dtype=torch.int32, device=d), 0],
                                {}, lambda outs: outs[0].tolist() == [3]),
    "predicated_arrive_skipped": (K.predicated_arrive_skips,
                                  lambda d: [torch.zeros(1, dtype=torch.int32, device=d), 1],
                                  {}, lambda outs: outs[0].tolist() == [4]),
}


def _run(name, device, interpret):
    kernel, make_args, meta, check = CASES[name]
    args = make_args(device)
    launcher = tlxc.interpret(kernel) if interpret else kernel
    launcher[(1,)](*args, **meta, num_warps=4)
    if device == "cuda":
        torch.cuda.synchronize()
    outs = [a.cpu() for a in args if isinstance(a, torch.Tensor)]
    assert check(outs), f"{name}: got {[o.tolist()[:16] for o in outs]}"
    return outs


@pytest.mark.parametrize("name", sorted(CASES))
def test_interpreter(name):
    _run(name, "cpu", interpret=True)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_matches_interpreter(name):
    gpu = _run(name, "cuda", interpret=False)
    cpu = _run(name, "cpu", interpret=True)
    for g, c in zip(gpu, cpu):
        assert torch.equal(g, c), name
