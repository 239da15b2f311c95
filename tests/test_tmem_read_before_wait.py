"""A tensor-memory accumulator read before the barrier its last tcgen05 MMA arrives on (the
race of TLX's GDPA tutorial, docs/ports.md): the activation task produces P blocks for an MMA
task that accumulates O += P_j @ V_j, then reads O.  Without waiting for ``o_full`` (the
MMA task's commit after its last MMA) the read may run before that MMA is issued (it then
reads a stale or never-written accumulator) or while it runs.  The interpreter reports both
orders at their lines: the MMA's write after the unordered read (a held tensor-memory read,
``interpreter/races.py``), or the read of the MMA's unordered write.  The correct kernel is
clean and matches float64."""
from __future__ import annotations

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.check import ERROR
from tlxc.compiler import check_function
from tlxc.errors import RaceError
from tlxc.frontend.specialize import specialization_from_types
from tlxc.interpreter import interpret
from tlxc.language import tlx

BM, BN, D = 128, 64, 64


@tlxc.kernel
def pv_accumulate(p_ptr: tl.pointer_type(tl.float16), v_ptr: tl.pointer_type(tl.float16),
                  out_ptr: tl.pointer_type(tl.float32), NKV: tl.int32, qlen: tl.int32,
                  BUG: tl.constexpr = False):
    """NKV (a runtime count, as GDPA's key blocks) P @ V steps into one accumulator, under a
    runtime tile condition as in GDPA (``qlen > 0``): the static checker leaves such a
    protocol to the interpreter."""
    p = tlx.local_alloc((BM, BN), tl.float16, 1)
    v = tlx.local_alloc((BN, D), tl.float16, 1)
    o = tlx.local_alloc((BM, D), tl.float32, 1, storage=tlx.storage_kind.tmem)
    p_full = tlx.alloc_barriers(1, arrive_count=1)
    p_empty = tlx.alloc_barriers(1, arrive_count=1)
    o_full = tlx.alloc_barriers(1, arrive_count=1)
    rows = tl.arange(0, BM)
    ks = tl.arange(0, BN)
    cols = tl.arange(0, D)
    with tlx.async_tasks():
        with tlx.async_task("default"):              # the activation task
            if qlen > 0:
                for j in range(NKV):
                    tlx.barrier_wait(p_empty[0], (j & 1) ^ 1)
                    tlx.local_store(p[0], tl.load(p_ptr + (j * BM + rows)[:, None] * BN + ks[None, :]))
                    tlx.local_store(v[0], tl.load(v_ptr + (j * BN + ks)[:, None] * D + cols[None, :]))
                    tlx.fence("async_shared")
                    tlx.barrier_arrive(p_full[0])
                if not BUG:
                    tlx.barrier_wait(o_full[0], 0)
                acc = tlx.local_load(o[0])  # the read of O
                tl.store(out_ptr + rows[:, None] * D + cols[None, :], acc)
        with tlx.async_task(num_warps=1):            # the MMA task
            if qlen > 0:
                for j in range(NKV):
                    tlx.barrier_wait(p_full[0], j & 1)
                    tlx.async_dot(p[0], v[0], o[0], use_acc=j > 0, mBarriers=[p_empty[0]])  # the P @ V MMA
                tlx.tcgen05_commit(o_full[0])


def _line(marker: str) -> int:
    return next(n for n, s in enumerate(open(__file__).read().splitlines(), 1) if s.rstrip().endswith(marker))


NKV = 3


def _args(nkv=NKV):
    p = torch.randn(nkv * BM, BN).half()
    v = torch.randn(nkv * BN, D).half()
    out = torch.full((BM, D), float("nan"))
    ref = sum(p[j * BM:(j + 1) * BM].double() @ v[j * BN:(j + 1) * BN].double() for j in range(nkv))
    return p, v, out, ref


@pytest.mark.parametrize("seed", [None, 1, 2, 3])
def test_correct_kernel_is_clean_and_matches_float64(seed):
    p, v, out, ref = _args()
    interpret(pv_accumulate, (1,), (p, v, out, NKV, BM), seed=seed, arch="sm_100a")
    assert ((out.double() - ref).abs().max() / ref.abs().max()).item() < 1e-5


@pytest.mark.parametrize("seed", [None, 1, 2, 3, 4, 5])
def test_read_before_wait_is_reported_in_every_order(seed):
    p, v, out, _ = _args()
    with pytest.raises(RaceError) as info:
        interpret(pv_accumulate, (1,), (p, v, out, NKV, BM), {"BUG": True}, seed=seed, arch="sm_100a")
    text = info.value.render()
    read, mma = _line("# the read of O"), _line("# the P @ V MMA")
    # both lines are named, whichever came first in this interleaving
    assert f":{read}:" in text and f":{mma}:" in text, text
    assert ("is not ordered after the tensor-memory read" in text          # the MMA after the read
            or "is not ordered after the asynchronous tcgen05 MMA accumulator write" in text), text


def test_static_checker_leaves_it_to_the_interpreter():
    """As for GDPA: the runtime tile condition makes the protocol undecidable statically (a
    note, no error), so the report comes from the interpreter."""
    spec = specialization_from_types(pv_accumulate, {}, {"BUG": True})
    findings = check_function(pv_accumulate, spec, arch="sm_100a")
    assert not [f for f in findings if f.severity == ERROR], [str(f) for f in findings]
    assert any("cannot be checked statically" in str(f) for f in findings), [str(f) for f in findings]


def test_write_after_read_message_names_the_missing_wait():
    """Seed None runs the activation task first: its read precedes the last MMA's issue."""
    p, v, out, _ = _args(1)
    with pytest.raises(RaceError) as info:
        interpret(pv_accumulate, (1,), (p, v, out, 1, BM), {"BUG": True}, arch="sm_100a")
    text = info.value.render()
    assert "tcgen05 MMA accumulator write of 'o'[0] (tensor memory) in task" in text, text
    assert "a read of a tcgen05 accumulator must wait for the barrier its last MMA arrives on" in text, text
