"""Code under a branch on ``tlx.thread_id`` on the interpreter (``interpreter/divergence.py``):
tile loads, stores and atomics act only on the elements the threads that take the branch
hold in the GPU's register layout, as the generated CUDA does.  Each test checks the
interpreter against a Python model built from that layout (read from the compiled
``ir.opt``); the ``gpu``-marked test runs the same kernels on the device and compares
outputs exactly.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.errors import InterpreterError
from tlxc.interpreter import interpret
from tlxc.ir.types import TensorType
from tlxc.language import tlx

POISON = -7.0
HERE = os.path.basename(__file__)


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))


# -- kernels --------------------------------------------------------------------------------------

@tlxc.jit
def store_1d(x_ptr, out_ptr, n, WHO: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if tlx.thread_id(0) == WHO:
        tl.store(out_ptr + offs, x, mask=offs < n)


@tlxc.jit
def load_store_2d(x_ptr, out_ptr, m, n, WHO: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    mask = (rows < m) & (cols < n)
    if tlx.thread_id(0) == WHO:
        y = tl.load(x_ptr + rows * n + cols, mask=mask)
        tl.store(out_ptr + rows * n + cols, y * 2.0 + 1.0, mask=mask)


@tlxc.jit
def atomic_below(count_ptr, n, LIMIT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if tlx.thread_id(0) < LIMIT:
        tl.atomic_add(count_ptr + offs, 1, mask=offs < n, sem="relaxed")


@tlxc.jit
def store_own_slot(out_ptr):
    tl.store(out_ptr + tlx.thread_id(0), tlx.thread_id(0) * 3)


@tlxc.jit
def count_own_bucket(out_ptr):
    tl.atomic_add(out_ptr + tlx.thread_id(0) % 4, 1, sem="relaxed")


@tlxc.jit
def sum_under_branch(x_ptr, out_ptr, BLOCK: tl.constexpr):
    if tlx.thread_id(0) == 0:
        tl.store(out_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK)), axis=0))


@tlxc.jit
def value_after_branch(out_ptr, BLOCK: tl.constexpr):
    x = tl.zeros((BLOCK,), tl.int32)
    if tlx.thread_id(0) == 0:
        x = x + 1
    tl.store(out_ptr + tl.arange(0, BLOCK), x)


# -- the model: which elements a thread holds, from the GPU's layout ------------------------------

def _layout_of(kernel, signature: str, constexprs: dict, num_warps: int, op_name: str):
    """The register layout of the pointer operand of the (first) ``op_name`` in the compiled IR."""
    compiled = kernel.compile(signature, constexprs=constexprs, num_warps=num_warps, stages=("ir.opt",))
    for op in compiled.module.kernels[0].walk():
        if op.name == op_name and isinstance(op.operands[0].type, TensorType):
            return op.operands[0].type.layout
    raise AssertionError(f"no tile {op_name}")


def _held(layout, threads) -> np.ndarray:
    """How many of ``threads`` (task-relative ids) hold each element (flat, row-major)."""
    table = layout.flat_table()                     # [warps, lanes, registers] -> flat index
    counts = np.zeros(layout.numel, dtype=np.int64)
    for t in threads:
        counts[np.unique(table[t // 32, t % 32])] += 1
    return counts.reshape(layout.shape)


# -- interpreter vs. the model ---------------------------------------------------------------------

CASES_1D = [(4, 0), (4, 37), (8, 0), (8, 200)]


@pytest.mark.parametrize("num_warps,who", CASES_1D)
def test_1d_store_writes_only_the_branch_threads_elements(gen, num_warps, who):
    block, n = 64, 50
    x = torch.randn(n, generator=gen)
    out = torch.full((n,), POISON)
    interpret(store_1d, (1,), (x, out, n), {"WHO": who, "BLOCK": block}, num_warps=num_warps)
    layout = _layout_of(store_1d, "x_ptr=*fp32, out_ptr=*fp32, n=i32", {"WHO": who, "BLOCK": block},
                        num_warps, "tl.store")
    mine = _held(layout, [who])[:n] > 0
    assert mine.any() and not mine.all()
    expected = torch.where(torch.from_numpy(mine), x, torch.tensor(POISON))
    assert torch.equal(out, expected)


@pytest.mark.parametrize("num_warps,who", [(4, 0), (4, 65), (8, 0), (8, 130)])
def test_2d_load_and_store_act_only_on_the_branch_threads_elements(gen, num_warps, who):
    bm, bn, m, n = 16, 32, 13, 29
    x = torch.randn(m, n, generator=gen, dtype=torch.float64).float()
    out = torch.full((m, n), POISON)
    constexprs = {"WHO": who, "BM": bm, "BN": bn}
    interpret(load_store_2d, (1,), (x, out, m, n), constexprs, num_warps=num_warps)
    layout = _layout_of(load_store_2d, "x_ptr=*fp32, out_ptr=*fp32, m=i32, n=i32", constexprs, num_warps,
                        "tl.store")
    held = _held(layout, [who]) > 0
    flat = np.full(bm * bn, False)
    flat[:] = held.reshape(-1)
    # the kernel indexes rows * n + cols: element (r, c) of the tile is out.flat[r * n + c]
    expected = torch.full((m * n,), POISON)
    for r in range(bm):
        for c in range(bn):
            if r < m and c < n and held[r, c]:
                expected[r * n + c] = (x.double().reshape(-1)[r * n + c] * 2.0 + 1.0).float()
    assert torch.equal(out.reshape(-1), expected)


@pytest.mark.parametrize("num_warps,limit", [(4, 1), (4, 64), (8, 256)])
def test_atomic_under_a_branch_counts_every_holder(num_warps, limit):
    """The GPU code does an element's atomic in each thread that reaches it holding it
    (no election under a thread branch: rules_memory.py)."""
    block, n = 64, 60
    count = torch.zeros(n, dtype=torch.int32)
    interpret(atomic_below, (1,), (count, n), {"LIMIT": limit, "BLOCK": block}, num_warps=num_warps)
    layout = _layout_of(atomic_below, "count_ptr=*i32, n=i32", {"LIMIT": limit, "BLOCK": block}, num_warps,
                        "tl.atomic_rmw")
    expected = _held(layout, range(limit))[:n]
    assert count.tolist() == expected.tolist()


@pytest.mark.parametrize("num_warps", [1, 4])
def test_scalar_store_to_a_thread_varying_address_runs_in_every_thread(num_warps):
    threads = 32 * num_warps
    out = torch.full((threads + 3,), -1, dtype=torch.int32)
    interpret(store_own_slot, (1,), (out,), {}, num_warps=num_warps)
    assert out.tolist() == [3 * t for t in range(threads)] + [-1, -1, -1]


@pytest.mark.parametrize("num_warps", [1, 4])
def test_scalar_atomic_on_a_thread_varying_address_runs_in_every_thread(num_warps):
    threads = 32 * num_warps
    out = torch.zeros(4, dtype=torch.int32)
    interpret(count_own_bucket, (1,), (out,), {}, num_warps=num_warps)
    assert out.tolist() == [threads // 4] * 4


@tlxc.jit
def fill_from_one_thread(out_ptr, value, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if tlx.thread_id(0) == 0:
        tl.store(out_ptr + offs, value, mask=offs < n)


@pytest.mark.parametrize("num_warps, block, mine", [
    (1, 32, [0]), (4, 32, [0]), (4, 256, [0, 1]),
    (1, 256, [0, 1, 2, 3, 128, 129, 130, 131])])     # 16-byte vectors, the warp's run repeated
def test_small_tiles_spread_over_every_thread_as_in_triton(num_warps, block, mine):
    """Triton's coalescing gives each thread at most numel / threads elements before it widens
    its vectors, so thread 0 alone stores the elements `mine` of the tile (one for 32 elements
    on a warp), here and on the GPU; tlxc used to give 8 threads four each."""
    out = torch.zeros(block, dtype=torch.int32)
    interpret(fill_from_one_thread, (1,), (out, 42, block), {"BLOCK": block}, num_warps=num_warps)
    assert out.nonzero().flatten().tolist() == mine and set(out[mine].tolist()) == {42}


def test_a_reduction_under_a_thread_branch_is_a_located_error():
    x, out = torch.ones(32), torch.zeros(1)
    with pytest.raises(InterpreterError) as info:
        interpret(sum_under_branch, (1,), (x, out), {"BLOCK": 32})
    message = str(info.value)
    assert "cannot model" in message and "tlx.thread_id" in message and HERE in message


def test_a_value_that_differs_between_threads_after_a_branch_is_a_located_error():
    out = torch.zeros(32, dtype=torch.int32)
    with pytest.raises(InterpreterError) as info:
        interpret(value_after_branch, (1,), (out,), {"BLOCK": 32})
    message = str(info.value)
    assert "differs between threads" in message and HERE in message


# -- GPU vs. interpreter ----------------------------------------------------------------------------

def _gpu_runs():
    """(kernel, argument builder, constexprs, num_warps) of every kernel above that runs."""
    runs = []
    for num_warps, who in CASES_1D:
        runs.append((store_1d, lambda g: (torch.randn(50, generator=g), torch.full((50,), POISON), 50),
                     {"WHO": who, "BLOCK": 64}, num_warps))
    for num_warps, who in [(4, 0), (4, 65), (8, 130)]:
        runs.append((load_store_2d, lambda g: (torch.randn(13, 29, generator=g), torch.full((13, 29), POISON),
                                               13, 29), {"WHO": who, "BM": 16, "BN": 32}, num_warps))
    for num_warps, limit in [(4, 1), (4, 64), (8, 256)]:
        runs.append((atomic_below, lambda g: (torch.zeros(60, dtype=torch.int32), 60),
                     {"LIMIT": limit, "BLOCK": 64}, num_warps))
    runs.append((store_own_slot, lambda g: (torch.full((131,), -1, dtype=torch.int32),), {}, 4))
    for num_warps, block in [(1, 32), (4, 256), (1, 256)]:
        runs.append((fill_from_one_thread, lambda g, block=block: (torch.zeros(block, dtype=torch.int32), 42, block),
                     {"BLOCK": block}, num_warps))
    return runs


def _gpu_counting_runs():
    return [(count_own_bucket, 1), (count_own_bucket, 4)]


@pytest.mark.gpu
@pytest.mark.parametrize("index", range(len(_gpu_runs())))
def test_gpu_matches_the_interpreter_under_thread_branches(index):
    kernel, make, constexprs, num_warps = _gpu_runs()[index]
    seed = int.from_bytes(os.urandom(4), "little")
    cpu_args = make(torch.Generator().manual_seed(seed))
    gpu_args = tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in make(torch.Generator().manual_seed(seed)))
    interpret(kernel, (1,), cpu_args, constexprs, num_warps=num_warps)
    kernel[(1,)](*gpu_args, **constexprs, num_warps=num_warps)
    torch.cuda.synchronize()
    for cpu, gpu in zip(cpu_args, gpu_args):
        if isinstance(cpu, torch.Tensor):
            assert torch.equal(gpu.cpu(), cpu), (kernel.__name__, constexprs, num_warps)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, num_warps", _gpu_counting_runs())
def test_gpu_scalar_atomics_on_thread_varying_addresses_count_every_thread(kernel, num_warps):
    threads = 32 * num_warps
    out = torch.zeros(4, dtype=torch.int32, device="cuda")
    kernel[(1,)](out, num_warps=num_warps)
    assert out.cpu().tolist() == [threads // 4] * 4
