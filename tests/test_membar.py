"""Barriers between conflicting shared-memory accesses of one task (``codegen_c/shared_order.py``,
``_Membar``; docs/codegen.md "Ordering shared memory").

A tile stored by every thread and read back through a transposed view is read by other threads
than the ones that wrote it: the CUDA must have a barrier of the task's threads between the two
(read after write), and, in a loop, before the next iteration's store (write after read).  A
read back in the layout it was stored in needs none (each thread reads its own elements).  The
interpreter runs a task's threads as one unit, so only the generated code and the GPU show it."""
from __future__ import annotations

import re

import pytest
import torch

import tlxc
import tlxc.language as tl
from tlxc.codegen_c import shared_order
from tlxc.language import tlx

F32 = tl.pointer_type(tl.float32)
B = 32


@tlxc.kernel
def transpose_once(x_ptr: F32, y_ptr: F32, n: tl.int32, B: tl.constexpr):
    buf = tlx.local_alloc((B, B), tl.float32, 1)
    rows = tl.arange(0, B)[:, None]
    cols = tl.arange(0, B)[None, :]
    mask = (rows < n) & (cols < n)
    tlx.local_store(buf[0], tl.load(x_ptr + rows * n + cols, mask=mask, other=0.0))  # the store
    t = tlx.local_load(tlx.local_trans(buf[0]))  # the transposed read
    tl.store(y_ptr + rows * n + cols, t, mask=mask)


@tlxc.kernel
def round_trip(x_ptr: F32, y_ptr: F32, n: tl.int32, B: tl.constexpr):
    """Stored and read in one layout: every thread reads back its own elements."""
    buf = tlx.local_alloc((B, B), tl.float32, 1)
    rows = tl.arange(0, B)[:, None]
    cols = tl.arange(0, B)[None, :]
    mask = (rows < n) & (cols < n)
    tlx.local_store(buf[0], tl.load(x_ptr + rows * n + cols, mask=mask, other=0.0))  # the round-trip store
    t = tlx.local_load(buf[0])  # the same-layout read
    tl.store(y_ptr + rows * n + cols, t * 2.0, mask=mask)


@tlxc.kernel
def transpose_in_task(x_ptr: F32, y_ptr: F32, z_ptr: F32, n: tl.int32, B: tl.constexpr, WARPS: tl.constexpr):
    """The default task transposes x into y, a task of WARPS warps x into z (own buffers)."""
    a = tlx.local_alloc((B, B), tl.float32, 1)
    b = tlx.local_alloc((B, B), tl.float32, 1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            rows = tl.arange(0, B)[:, None]
            cols = tl.arange(0, B)[None, :]
            mask = (rows < n) & (cols < n)
            tlx.local_store(a[0], tl.load(x_ptr + rows * n + cols, mask=mask, other=0.0))  # the default store
            tl.store(y_ptr + rows * n + cols, tlx.local_load(tlx.local_trans(a[0])), mask=mask)  # the default read
        with tlx.async_task(num_warps=WARPS):
            rows2 = tl.arange(0, B)[:, None]
            cols2 = tl.arange(0, B)[None, :]
            mask2 = (rows2 < n) & (cols2 < n)
            tlx.local_store(b[0], tl.load(x_ptr + rows2 * n + cols2, mask=mask2, other=0.0))  # the task store
            tl.store(z_ptr + rows2 * n + cols2, tlx.local_load(tlx.local_trans(b[0])), mask=mask2)  # the task read


@tlxc.kernel
def transpose_loop(x_ptr: F32, y_ptr: F32, n: tl.int32, iters: tl.int32, B: tl.constexpr,
                   VARIANT: tl.constexpr = 0):
    """y[program] = sum over i of (x + i)^T through one buffer: each iteration's store must wait
    for the previous iteration's transposed read by the other threads (the loop's back edge).
    (VARIANT only tells the GPU control's compilation apart.)"""
    buf = tlx.local_alloc((B, B), tl.float32, 1)
    rows = tl.arange(0, B)[:, None]
    cols = tl.arange(0, B)[None, :]
    mask = (rows < n) & (cols < n)
    x = tl.load(x_ptr + rows * n + cols, mask=mask, other=0.0)
    acc = tl.zeros((B, B), tl.float32)
    for i in range(iters):
        tlx.local_store(buf[0], x + i)  # the loop store
        acc += tlx.local_load(tlx.local_trans(buf[0]))  # the loop read
    tl.store(y_ptr + tl.program_id(0) * n * n + rows * n + cols, acc, mask=mask)


@tlxc.kernel
def transpose_after_if(x_ptr: F32, y_ptr: F32, n: tl.int32, sign: tl.int32, B: tl.constexpr):
    """y = (x or -x)^T: the store is in either branch, the read after the if."""
    buf = tlx.local_alloc((B, B), tl.float32, 1)
    rows = tl.arange(0, B)[:, None]
    cols = tl.arange(0, B)[None, :]
    mask = (rows < n) & (cols < n)
    x = tl.load(x_ptr + rows * n + cols, mask=mask, other=0.0)
    if sign > 0:
        tlx.local_store(buf[0], x)  # the then store
    else:
        tlx.local_store(buf[0], -x)  # the else store
    tl.store(y_ptr + rows * n + cols, tlx.local_load(tlx.local_trans(buf[0])), mask=mask)  # the read after if


@tlxc.kernel
def store_under_thread_branch(x_ptr: F32, y_ptr: F32, n: tl.int32, B: tl.constexpr):
    """A read, then a store that only threads 0..63 make (a branch on tlx.thread_id): the
    barrier cannot go inside the branch (the other threads never reach it), so it goes before."""
    buf = tlx.local_alloc((B, B), tl.float32, 1)
    rows = tl.arange(0, B)[:, None]
    cols = tl.arange(0, B)[None, :]
    mask = (rows < n) & (cols < n)
    tlx.local_store(buf[0], tl.load(x_ptr + rows * n + cols, mask=mask, other=0.0))
    t = tlx.local_load(tlx.local_trans(buf[0]))  # the first read
    if tlx.thread_id(0) < 64:  # the thread branch
        tlx.local_store(buf[0], t)  # the branch store
    tl.store(y_ptr + rows * n + cols, t, mask=mask)


# -- helpers ------------------------------------------------------------------------------------
def _cuda(kernel, num_warps=4, **constexprs):
    return kernel.compile(constexprs={"B": B, **constexprs}, num_warps=num_warps, stages=("cuda",)).asm["cuda"]


def _line(tag: str) -> int:
    """The source line of the statement tagged ``# tag`` in this file."""
    with open(__file__) as f:
        for number, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# {tag}"):
                return number
    raise AssertionError(tag)


def _between(cuda: str, first: str, second: str) -> str:
    """The CUDA from the first marker of the statement tagged ``first`` to the end of the
    statement tagged ``second`` (the next marker of another line)."""
    start = cuda.index(f"// test_membar.py:{_line(first)}\n")
    end = cuda.index(f"// test_membar.py:{_line(second)}\n", start)
    for marker in MARKER.finditer(cuda, end):
        if int(marker.group(1)) != _line(second):
            return cuda[start:marker.start()]
    return cuda[start:]


MARKER = re.compile(r"// test_membar\.py:(\d+)\n")
BARRIER = re.compile(r"__syncthreads\(\);|tlx_bar_sync\(\d+, \d+\);")


def _barriers(text: str) -> list[str]:
    return BARRIER.findall(text)


def _x(n):
    return torch.randn(n, n)


# -- the generated CUDA ---------------------------------------------------------------------------
def test_a_transposed_read_after_a_store_gets_one_barrier():
    cuda = _cuda(transpose_once)
    assert _barriers(_between(cuda, "the store", "the transposed read")) == ["__syncthreads();"]


def test_a_read_in_the_stored_layout_gets_none():
    cuda = _cuda(round_trip)
    assert _barriers(cuda[cuda.index(f"// test_membar.py:{_line('the round-trip store')}\n"):]) == []


@pytest.mark.parametrize("warps", [4, 8])
def test_inside_a_task_the_barrier_is_the_tasks_named_barrier(warps):
    cuda = _cuda(transpose_in_task, WARPS=warps)
    default = _barriers(_between(cuda, "the default store", "the default read"))
    task = _barriers(_between(cuda, "the task store", "the task read"))
    assert default == ["tlx_bar_sync(1, 128);"]
    assert task == [f"tlx_bar_sync(2, {32 * warps});"]


def test_a_loop_gets_a_barrier_for_the_read_and_one_for_the_back_edge():
    cuda = _cuda(transpose_loop)
    store = _between(cuda, "the loop store", "the loop store")
    read = _between(cuda, "the loop read", "the loop read")
    assert _barriers(store) == ["__syncthreads();"]           # after the previous iteration's read
    assert store.index("__syncthreads();") < store.index("tlx_st_shared")
    assert _barriers(read) == ["__syncthreads();"]            # after this iteration's store


def test_after_an_if_the_read_waits_for_either_branch():
    cuda = _cuda(transpose_after_if)
    branches = _between(cuda, "the then store", "the read after if")
    assert _barriers(branches) == ["__syncthreads();"]
    assert branches.rindex("__syncthreads();") > branches.index(f"// test_membar.py:{_line('the else store')}")


def test_under_a_thread_branch_the_barrier_goes_before_the_branch():
    cuda = _cuda(store_under_thread_branch)
    around = _between(cuda, "the thread branch", "the branch store")
    assert _barriers(around) == ["__syncthreads();"]
    assert around.index("__syncthreads();") < around.index("if (")
    inside = cuda[cuda.index(f"// test_membar.py:{_line('the branch store')}\n"):]
    assert _barriers(inside[:inside.index("\n  }\n")]) == []


def test_the_kernels_compile_to_sm90a_cubins():
    for kernel, extra in ((transpose_once, {}), (transpose_in_task, {"WARPS": 8}), (transpose_loop, {}),
                          (transpose_after_if, {}), (store_under_thread_branch, {})):
        compiled = kernel.compile(constexprs={"B": B, **extra}, stages=("cuda", "cubin"))
        assert compiled.asm["cubin"][:4] == b"\x7fELF"


# -- the interpreter -----------------------------------------------------------------------------
def test_the_interpreter_transposes():
    n = 27
    x = _x(n)
    y = torch.full((n, n), float("nan"))
    tlxc.interpret(transpose_once)[(1,)](x, y, n, B=B)
    assert torch.equal(y, x.T)


def test_the_interpreter_runs_the_loop_and_the_tasks():
    n = 27
    x = _x(n).double().float()
    y = torch.full((n, n), float("nan"))
    tlxc.interpret(transpose_loop)[(1,)](x, y, n, 3, B=B)
    torch.testing.assert_close(y, (x.double() * 3 + 3).T.float())
    y, z = torch.full((n, n), float("nan")), torch.full((n, n), float("nan"))
    tlxc.interpret(transpose_in_task)[(1,)](x, y, z, n, B=B, WARPS=8)
    assert torch.equal(y, x.T) and torch.equal(z, x.T)


# -- on the GPU ------------------------------------------------------------------------------------
def _loop_on_gpu(iters: int, variant: int):
    n, programs = 30, 264
    x = torch.randint(-8, 9, (n, n), device="cuda").float()    # integer sums: exact in f32
    y = torch.full((programs, n, n), float("nan"), device="cuda")
    transpose_loop[(programs,)](x, y, n, iters, B=B, num_warps=8, VARIANT=variant)
    torch.cuda.synchronize()
    expected = (x.double() * iters + iters * (iters - 1) / 2).T.float().expand(programs, n, n)
    return y, expected


@pytest.mark.gpu
def test_gpu_the_loop_through_shared_memory_is_exact():
    y, expected = _loop_on_gpu(2000, variant=0)
    assert torch.equal(y, expected)


@pytest.mark.gpu
def test_gpu_without_the_barriers_the_loop_reads_stale_data(monkeypatch):
    """The control: the same kernel with the analysis switched off races (other warps'
    elements are read before they are written, or after the next iteration overwrote them)."""
    monkeypatch.setenv("TLXC_CACHE_DISABLE", "1")
    monkeypatch.setattr(shared_order, "_Membar", lambda *args: None)
    y, expected = _loop_on_gpu(2000, variant=1)
    assert not torch.equal(y, expected)
