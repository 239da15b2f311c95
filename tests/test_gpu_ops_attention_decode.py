"""tlxc.ops.attention_decode on the GPU (marked gpu): paged and contiguous caches against float64
math (GQA / MQA / MHA, head dims 64-256, page sizes below, at and above the key block, lengths
0 and 1, default and forced split counts), sliding windows and softcapping, a CUDA graph replayed
with new lengths, and the device-side block-table check."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from tlxc.ops import attention_decode
from tlxc.ops.attention_decode import reference

pytestmark = pytest.mark.gpu

TOL = {torch.bfloat16: 2e-2, torch.float16: 4e-3}


def _paged(lens, page, Hkv, D, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    need = [-(-n // page) for n in lens]
    num_pages = sum(need) + 2
    order = torch.randperm(num_pages, generator=gen)
    table = torch.full((len(lens), max(1, max(need))), -1, dtype=torch.int32)
    used = 0
    for b, n in enumerate(need):
        table[b, :n] = order[used:used + n].to(torch.int32)
        used += n
    k = torch.randn(num_pages, page, Hkv, D, generator=gen).to(dtype).cuda()
    v = torch.randn(num_pages, page, Hkv, D, generator=gen).to(dtype).cuda()
    return k, v, table.cuda()


def _check(o, lse, ref_o, ref_lse, dtype):
    finite = torch.isfinite(ref_lse)
    assert torch.isfinite(o).all()
    assert (o.double() - ref_o).abs().max().item() < TOL[dtype]
    assert (lse[finite].double() - ref_lse[finite]).abs().max().item() < 1e-3
    assert (lse[~finite] == float("-inf")).all()


CASES = [  # D, H, Hkv, page, splits, dtype, combine
    (128, 32, 8, 16, None, torch.bfloat16, "inline"),      # the bench's layout, default splits
    (128, 32, 8, 16, None, torch.float16, "kernel"),
    (64, 8, 1, 64, 3, torch.bfloat16, "inline"),           # MQA, pages of a whole block
    (96, 4, 4, 256, None, torch.float16, "inline"),        # MHA, padded head dim, big pages
    (256, 80, 1, 8, 2, torch.bfloat16, "inline"),          # two head tiles per kv head, tiny pages
    (256, 16, 2, 32, 5, torch.bfloat16, "kernel"),
]


@pytest.mark.parametrize("D,window,softcap,splits,combine", [
    (128, (1000, 0), None, None, "kernel"),       # the split count of the capacity: most splits before the window
    (128, (63, -1), 30.0, 3, "inline"),           # a window inside one block, softcap
    (64, None, 5.0, None, "kernel"),              # softcap alone
    (256, (300, 0), 50.0, 2, "kernel"),
], ids=str)
def test_window_and_softcap_match_float64(D, window, softcap, splits, combine):
    """Sliding windows (the last token sees keys len - 1 - left ..) and logit softcapping, GQA 4:1,
    16-row pages, against float64 math."""
    lens = [0, 1, 700, 5000, 129]
    k, v, table = _paged(lens, 16, 2, D, torch.bfloat16, seed=D + 7)
    q = torch.randn(len(lens), 8, D, device="cuda", dtype=torch.bfloat16)
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    o, lse = attention_decode(q, k, v, seqlens, block_table=table, window=window, softcap=softcap, num_splits=splits,
                              combine=combine)
    _check(o, lse, *reference(q, k, v, seqlens, block_table=table, window=window, softcap=softcap),
           torch.bfloat16)


@pytest.mark.parametrize("D,H,Hkv,page,splits,dtype,combine", CASES, ids=lambda x: str(x).replace("torch.", ""))
def test_paged_matches_float64(D, H, Hkv, page, splits, dtype, combine):
    lens = [0, 1, 700, 5000, 129]
    k, v, table = _paged(lens, page, Hkv, D, dtype, seed=D + H)
    q = torch.randn(len(lens), H, D, device="cuda", dtype=dtype)
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    for _ in range(2):                      # the inline combine's counters are zero again for the second call
        o, lse = attention_decode(q, k, v, seqlens, block_table=table, num_splits=splits, combine=combine)
        _check(o, lse, *reference(q, k, v, seqlens, block_table=table), dtype)


STREAM = [  # D, H, Hkv, page, lens: the persistent schedule (rows cut by 264 programs' boundaries)
    (128, 32, 8, 16, [0, 1, 700, 5000, 129]),
    (128, 64, 8, 16, [32768]),                 # one sequence: each row over ~33 programs
    (64, 8, 1, 64, [3, 0, 17, 9000, 1, 64]),
    (128, 32, 32, 16, [4096] * 16),            # MHA, equal lengths (the bench's case)
    (96, 80, 1, 8, [1000, 77]),                # two head tiles per kv head, padded head dim, tiny pages
    (128, 4, 2, 12, [5] * 300),                # many short sequences: rows of one block, 300 > 264 programs
]


@pytest.mark.parametrize("D,H,Hkv,page,lens", STREAM, ids=str)
def test_stream_schedule_matches_float64(D, H, Hkv, page, lens):
    k, v, table = _paged(lens, page, Hkv, D, torch.bfloat16, seed=D + H + len(lens))
    q = torch.randn(len(lens), H, D, device="cuda", dtype=torch.bfloat16)
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    o, lse = attention_decode(q, k, v, seqlens, block_table=table, schedule="stream")
    _check(o, lse, *reference(q, k, v, seqlens, block_table=table), torch.bfloat16)


@pytest.mark.parametrize("D,H,Hkv,page,lens", [c for c in STREAM if c[1] <= 64 and c[2] >= 2], ids=str)
def test_stream_all_heads_blocks(D, H, Hkv, page, lens):
    """_heads=True: a row per sequence, blocks of 64 / Hkv keys x every kv head."""
    k, v, table = _paged(lens, page, Hkv, D, torch.bfloat16, seed=D + H + len(lens) + 1)
    q = torch.randn(len(lens), H, D, device="cuda", dtype=torch.bfloat16)
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    o, lse = attention_decode(q, k, v, seqlens, block_table=table, schedule="stream", _heads=True)
    _check(o, lse, *reference(q, k, v, seqlens, block_table=table), torch.bfloat16)


def test_contiguous_cache():
    k = torch.randn(4, 3000, 2, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    q = torch.randn(4, 1, 16, 128, device="cuda", dtype=torch.bfloat16)
    seqlens = torch.tensor([3000, 17, 0, 2048], dtype=torch.int32, device="cuda")
    o, lse = attention_decode(q, k, v, seqlens)
    _check(o, lse, *reference(q, k, v, seqlens), torch.bfloat16)


@pytest.mark.parametrize("schedule", ["split", "stream"])
def test_graph_replay_with_new_lengths(schedule):
    """The grids come from the shapes (the stream schedule counts the blocks on the device): a
    captured decode step replays with new lengths and a new block table, with either schedule."""
    k, v, table = _paged([2000, 2000, 2000], 16, 8, 128, torch.bfloat16, seed=5)     # room for 2000 keys each
    q = torch.randn(3, 32, 128, device="cuda", dtype=torch.bfloat16)
    seqlens = torch.tensor([900, 40, 2000], dtype=torch.int32, device="cuda")
    attention_decode(q, k, v, seqlens, block_table=table, schedule=schedule)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o, lse = attention_decode(q, k, v, seqlens, block_table=table, schedule=schedule)
    seqlens.copy_(torch.tensor([1, 2000, 333], dtype=torch.int32))
    table.copy_(table.flip(0).clone())      # the same pages, dealt to other sequences
    graph.replay()
    torch.cuda.synchronize()
    _check(o, lse, *reference(q, k, v, seqlens, block_table=table), torch.bfloat16)


def test_bad_block_table_entry_traps():
    """A block-table entry in use past the cache stops the kernel (a child process: the trap
    poisons the CUDA context)."""
    code = (
        "import torch\n"
        "from tlxc.ops import attention_decode\n"
        "k = torch.zeros(4, 16, 1, 64, device='cuda', dtype=torch.bfloat16)\n"
        "table = torch.tensor([[0, 9]], dtype=torch.int32, device='cuda')\n"
        "q = torch.zeros(1, 2, 64, device='cuda', dtype=torch.bfloat16)\n"
        "attention_decode(q, k, k, torch.tensor([20], dtype=torch.int32, device='cuda'), block_table=table)\n"
        "torch.cuda.synchronize()\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode != 0
    assert "block_table entry in use is outside" in run.stdout + run.stderr


@pytest.mark.parametrize("variant", [0, 1, 3, 4, 7, 23])
@pytest.mark.parametrize("combine,page,splits", [("inline", 64, 3), ("kernel", 64, 3), ("kernel", 64, 1),
                                                 ("inline", 16, 3)])
def test_split_variants_match_float64(variant, combine, page, splits):
    """Session 13's three split-kernel changes (``_variant`` bits: 1 copy mask in the copy layout,
    2 ``[BLOCK_N, 1]`` page loads, 4 length mask on the last block only) on the case that failed on
    the H200 with all three (max error 0.44; the interpreter matched; cause: ptxas 13.0 reused the
    loop-invariant register-A fragments of Q for P, fixed in codegen): the error per sequence says
    which change and which sequences.  Variants 0 (the plain kernel), 7 (the default) and 23 (the
    default asking for evict_first copies: its hinted cp.async stopped the H100 with an illegal
    instruction before the lowering dropped the policy, session 38) always run; the others only with
    TLXC_DECODE_PROBE=1."""
    if variant not in (0, 7, 23) and os.environ.get("TLXC_DECODE_PROBE") != "1":
        pytest.skip("a probe of reverted kernel changes: TLXC_DECODE_PROBE=1 runs it")
    lens = [0, 1, 700, 5000, 129]
    k, v, table = _paged(lens, page, 1, 64, torch.bfloat16, seed=72)
    q = torch.randn(len(lens), 8, 64, device="cuda", dtype=torch.bfloat16)
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    ref_o, ref_lse = reference(q, k, v, seqlens, block_table=table)
    for i in range(5):                      # (5 calls: a race would not show on every one)
        o, lse = attention_decode(q, k, v, seqlens, block_table=table, num_splits=splits, combine=combine,
                                  _variant=variant)
        err = [round(e, 4) for e in (o.double() - ref_o).abs().amax(dim=(1, 2)).tolist()]
        assert max(err) < TOL[torch.bfloat16], (f"variant {variant} {combine} page {page} splits {splits} call {i}: max error per "
                                                f"sequence {err}")
        _check(o, lse, ref_o, ref_lse, torch.bfloat16)


@pytest.mark.parametrize("D,H,Hkv,page,splits,dtype,combine", [c for c in CASES if c[3] >= 8 and c[0] <= 128],
                         ids=lambda x: str(x).replace("torch.", ""))
def test_tma_ring_matches_float64(D, H, Hkv, page, splits, dtype, combine):
    """``_tma=True`` (one TMA copy per page box): the cache rows no sequence owns hold NaN (boxes past
    a length read zeros, the last block's V rows past it are zeroed)."""
    lens = [0, 1, 700, 5000, 129]
    k, v, table = _paged(lens, page, Hkv, D, dtype, seed=D + H + 3)
    owned = torch.zeros(k.shape[:2], dtype=torch.bool)
    tcpu = table.cpu()
    for b, n in enumerate(lens):
        rows = torch.arange(n)
        owned[tcpu[b, rows // page].long(), rows % page] = True
    owned = owned.cuda()
    k[~owned], v[~owned] = float("nan"), float("nan")
    q = torch.randn(len(lens), H, D, device="cuda", dtype=dtype)
    seqlens = torch.tensor(lens, dtype=torch.int32, device="cuda")
    ref = reference(q, k, v, seqlens, block_table=table)
    for _ in range(2):
        o, lse = attention_decode(q, k, v, seqlens, block_table=table, num_splits=splits, combine=combine, _tma=True)
        _check(o, lse, *ref, dtype)
