"""The interpreter on warp-specialized kernels (tests/kernels_ws.py): async
tasks, shared-memory buffers, cp.async, mbarriers and named barriers.

Correct kernels run under the default schedule and several seeded
interleavings and match a torch reference; the broken variants of the
pipeline are diagnosed with exact messages (task, barrier, phase, line); those tests
switch off the static checks that precede every interpreted launch (the
``interpreter_diagnosis`` fixture of conftest.py), which would report the bug first.
"""
from __future__ import annotations

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

import kernels_ws as K

from tlxc.errors import BarrierError, DeadlockError, InterpreterError, RaceError, TlxcError
from tlxc.interpreter import interpret

SEEDS = [None, 0, 1, 2, 3]


def _line(text: str) -> int:
    """1-based line of kernels_ws.py holding ``text`` (exactly one)."""
    with open(K.__file__) as f:
        found = [number for number, line in enumerate(f, 1) if text in line]
    assert len(found) == 1, (text, found)
    return found[0]


def _diagnostic(error: TlxcError) -> list[str]:
    """``LINE: error: message`` then ``LINE: note: text`` per note (no paths, no carets)."""
    def at(loc):
        return f"{loc.line}: " if loc is not None else ""
    return [f"{at(error.loc)}error: {error.message}"] + [f"{at(loc)}note: {text}" for text, loc in error.notes]


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))


# -- correct kernels -------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 100, 1000])
@pytest.mark.parametrize("seed", [None, 0, 1])
def test_two_task_vector_add(n, seed, gen):
    x, y, a, b = (torch.randn(n, generator=gen) for _ in range(4))
    out1, out2 = torch.full((n,), float("nan")), torch.full((n,), float("nan"))
    interpret(K.add2_kernel, (cdiv(n, 64),), (x, y, out1, a, b, out2, n), {"BLOCK": 64}, seed=seed)
    assert torch.equal(out1, x + y) and torch.equal(out2, a + b)


ROWSUM_SHAPES = [
    # n_rows, n_cols, BLOCK_R, BLOCK_C, NUM_STAGES
    (20, 100, 16, 32, 2),     # neither dimension a multiple of the tile; the ring wraps
    (16, 64, 16, 32, 3),      # 2 tiles < 3 stages
    (5, 10, 16, 32, 4),       # one partial tile in one partial block
    (37, 300, 8, 16, 3),      # many wraps
]


@pytest.mark.parametrize("shape", ROWSUM_SHAPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_producer_consumer_rowsum(shape, seed, gen):
    n_rows, n_cols, block_r, block_c, stages = shape
    x = torch.randn(n_rows, n_cols, generator=gen)
    out = torch.full((n_rows + 3,), float("nan"))
    interpret(K.rowsum_ws, (cdiv(n_rows, block_r),), (x, out, n_rows, n_cols),
              {"BLOCK_R": block_r, "BLOCK_C": block_c, "NUM_STAGES": stages}, seed=seed)
    torch.testing.assert_close(out[:n_rows], x.sum(1), rtol=1e-5, atol=1e-5)
    assert torch.isnan(out[n_rows:]).all()


@pytest.mark.parametrize("kernel", [K.ring_incremental, K.ring_flip_on_wrap, K.ring_flip_after_last],
                         ids=["incremental", "flip_on_wrap_to_0", "flip_after_last"])
@pytest.mark.parametrize("n_cols, stages", [(100, 3), (20, 3), (64, 2), (16, 1)])
@pytest.mark.parametrize("seed", SEEDS)
def test_ring_phase_idioms(kernel, n_cols, stages, seed, gen):
    x = torch.randn(4, n_cols, generator=gen)
    out = torch.full((4,), float("nan"))
    interpret(kernel, (4,), (x, out, n_cols), {"BLOCK": 16, "NUM_STAGES": stages}, seed=seed)
    torch.testing.assert_close(out, x.sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n_cols", [16, 100])
@pytest.mark.parametrize("seed", SEEDS)
def test_separate_producer_and_consumer_phases(n_cols, seed, gen):
    x = torch.randn(3, n_cols, generator=gen)
    out = torch.full((3,), float("nan"))
    interpret(K.handoff_separate_phases, (3,), (x, out, n_cols), {"BLOCK": 16}, seed=seed)
    torch.testing.assert_close(out, x.sum(1), rtol=1e-5, atol=1e-5)


def _pingpong(n_tiles: int, seed, gen, **constexprs):
    x = torch.randn(n_tiles * 32, generator=gen)
    sums = torch.full((n_tiles,), float("nan"))
    tickets = torch.full((n_tiles,), -1, dtype=torch.int32)
    counter = torch.zeros(1, dtype=torch.int32)
    interpret(K.pingpong_kernel, (1,), (x, sums, tickets, counter, n_tiles), {"BLOCK": 32, **constexprs},
              seed=seed)
    torch.testing.assert_close(sums, x.view(n_tiles, 32).sum(1), rtol=1e-5, atol=1e-5)
    return tickets.tolist()


@pytest.mark.parametrize("n_tiles", [1, 6, 7])
@pytest.mark.parametrize("seed", SEEDS + [4, 5, 6, 7])
def test_pingpong_named_barriers_alternate_the_groups(n_tiles, seed, gen):
    assert _pingpong(n_tiles, seed, gen) == list(range(n_tiles))


def test_pingpong_without_named_barriers_interleaves_freely(gen):
    orders = {tuple(_pingpong(8, seed, gen, ORDERED=False)) for seed in range(12)}
    assert len(orders) > 1


def test_shared_memory_views(gen):
    m, n, off = 8, 4, 3
    x = torch.randn(m, n, generator=gen)
    out_t = torch.full((n, m), float("nan"))
    bits = torch.zeros(m, n, dtype=torch.int32)
    part = torch.full((m // 2, n), float("nan"))
    interpret(K.views_kernel, (1,), (x, out_t, bits, part, off), {"M": m, "N": n})
    assert torch.equal(out_t, x.T)
    assert torch.equal(bits, x.view(torch.int32))
    assert torch.equal(part, x[off:off + m // 2])


def test_warp_barrier_counts_every_thread_of_the_task():
    out = torch.zeros(1)
    interpret(K.warp_barrier_kernel, (1,), (out,), {"WARPS": 4})
    assert out.item() == 1.0


def test_thread_id_is_the_tasks_first_thread():
    out = torch.full((3,), -1, dtype=torch.int32)
    interpret(K.thread_id_kernel, (1,), (out,), {}, num_warps=4)
    assert out.tolist() == [0, 128, 192]


def test_barrier_wait_with_a_false_predicate_does_nothing():
    out = torch.zeros(1)
    interpret(K.lone_barrier_kernel, (1,), (out, 0), {})
    assert out.item() == 1.0


def test_cp_async_then_wait_then_store_is_ordered(gen):
    x, out = torch.randn(16, generator=gen), torch.zeros(16)
    interpret(K.overwrite_kernel, (1,), (x, out), {"BLOCK": 16, "WAIT": True})
    assert torch.equal(out, torch.full((16,), 2.0))


# -- broken pipelines: exact diagnoses ---------------------------------------------------------

PRODUCER_WAIT = _line("tlx.barrier_wait(empty[slot], phase ^ 1)")
CONSUMER_WAIT = _line("tlx.barrier_wait(full[slot], phase)")
ASYNC_TASKS = _line("with tlx.async_tasks():  # rowsum")
CONSUMER = f"task@{_line('with tlx.async_task(num_warps=4, registers=232, replicate=2):')}"
MAIN_WAITS = f"{ASYNC_TASKS}: note: task 'main' waits for task(s) 'default', '{CONSUMER}.0', '{CONSUMER}.1' to finish"


def _rowsum(bug: int, seed=None, n_cols: int = 100):
    x, out = torch.randn(20, n_cols), torch.zeros(20)
    interpret(K.rowsum_ws, (2,), (x, out, 20, n_cols),
              {"BLOCK_R": 16, "BLOCK_C": 32, "NUM_STAGES": 2, "BUG": bug}, seed=seed)


def _producer_waits(line: int, state: str) -> str:
    return f"{line}: note: task 'default' waits for phase 0 of barrier 'empty'[0]; the barrier is {state}"


def _consumers_wait(phase: int, state: str) -> list[str]:
    return [f"{CONSUMER_WAIT}: note: task '{CONSUMER}.{r}' (replica {r}) waits for phase {phase} of barrier "
            f"'full'[0]; the barrier is {state}" for r in (0, 1)]


@pytest.mark.usefixtures("interpreter_diagnosis")
def test_wrong_initial_phase_deadlocks_the_producer_at_once():
    with pytest.raises(DeadlockError) as info:
        _rowsum(bug=1)
    assert _diagnostic(info.value) == [
        "error: deadlock in program (0, 0, 0): all 4 live tasks are blocked",
        MAIN_WAITS,
        _producer_waits(_line("# BUG 1"), "in phase 0 (0 phases completed), 2 of 2 arrivals pending, "
                                          "0 tx bytes pending"),
        *_consumers_wait(0, "in phase 0 (0 phases completed), 1 of 1 arrivals pending, 0 tx bytes pending"),
    ]


@pytest.mark.usefixtures("interpreter_diagnosis")
def test_missing_arrive_deadlocks_the_producer_when_the_ring_wraps():
    with pytest.raises(DeadlockError) as info:
        _rowsum(bug=2)
    assert _diagnostic(info.value) == [
        "error: deadlock in program (0, 0, 0): all 4 live tasks are blocked",
        MAIN_WAITS,
        _producer_waits(PRODUCER_WAIT, "in phase 0 (0 phases completed), 2 of 2 arrivals pending, "
                                       "0 tx bytes pending"),
        *_consumers_wait(1, "in phase 1 (1 phase completed), 1 of 1 arrivals pending, 0 tx bytes pending"),
    ]


@pytest.mark.usefixtures("interpreter_diagnosis")
def test_arrive_count_two_with_one_arriving_group_deadlocks():
    with pytest.raises(DeadlockError) as info:
        _rowsum(bug=3)
    assert _diagnostic(info.value)[2] == _producer_waits(
        PRODUCER_WAIT, "in phase 0 (0 phases completed), 1 of 2 arrivals pending, 0 tx bytes pending")


@pytest.mark.usefixtures("interpreter_diagnosis")
@pytest.mark.parametrize("bug", [1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_deadlocks_are_found_under_every_interleaving(bug, seed):
    with pytest.raises(DeadlockError, match="task 'default' waits for phase 0 of barrier 'empty'"):
        _rowsum(bug, seed)


@pytest.mark.usefixtures("interpreter_diagnosis")
def test_read_before_the_copy_was_waited_is_a_race_with_both_lines():
    with pytest.raises(RaceError) as info:
        _rowsum(bug=4)
    read, arrive, wait = _line("# the consumers' read"), _line("# the producer's arrive"), _line("# BUG 4")
    issue = _line("tlx.async_load(ptrs, bufs[slot], mask=m)")
    assert _diagnostic(info.value) == [
        (f"{read}: error: race in program (0, 0, 0): read of 'bufs'[0][0:8, 0:32] in task '{CONSUMER}.0' is not "
         f"ordered after the asynchronous cp.async copy issued by task 'default' (task 'default' arrived on "
         f"barrier 'full'[0] at kernels_ws.py:{arrive}:16 before its async_load_wait_group at "
         f"kernels_ws.py:{wait}:20 retired the copy)"),
        f"{issue}: note: the asynchronous cp.async copy of 'bufs'[0] was issued here",
    ]


@pytest.mark.usefixtures("interpreter_diagnosis")
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_the_race_is_found_under_every_interleaving(seed):
    with pytest.raises(RaceError, match=r"read of 'bufs'\[\d\]\[\d+:\d+, 0:32\] in task 'task@\d+\.\d' is not "
                                        r"ordered after the asynchronous cp.async copy issued by task 'default'"):
        _rowsum(bug=4, seed=seed)


@pytest.mark.usefixtures("interpreter_diagnosis")
def test_phase_not_flipped_on_wrap_deadlocks_with_a_hint_at_the_producer():
    x, out = torch.randn(2, 64), torch.zeros(2)
    with pytest.raises(DeadlockError) as info:
        interpret(K.ring_incremental, (2,), (x, out, 64), {"BLOCK": 16, "NUM_STAGES": 2, "FLIP": False})
    tasks, consumer_wait = _line("with tlx.async_tasks():  # incremental"), _line("# the consumer's wait")
    producer_wait, consumer = _line("# the producer's wait"), f"task@{_line('# incremental consumer')}"
    hint = ("note: task 'default' passed this wait for phase 1 of barrier 'empty'[{}] again on the same "
            "completed phase as its previous wait on that barrier (no new phase of parity 1 completed in "
            "between): a ring index that wrapped without flipping its phase?")
    assert _diagnostic(info.value) == [
        "error: deadlock in program (0, 0, 0): all 2 live tasks are blocked",
        f"{tasks}: note: task 'main' waits for task(s) 'default', '{consumer}' to finish",
        (f"{consumer_wait}: note: task '{consumer}' waits for phase 0 of barrier 'full'[0]; the barrier is in "
         f"phase 0 (2 phases completed), 1 of 1 arrivals pending, 0 tx bytes pending"),
        f"{producer_wait}: {hint.format(0)}",
        f"{producer_wait}: {hint.format(1)}",
    ]


@pytest.mark.usefixtures("interpreter_diagnosis")
def test_named_barrier_count_too_high_deadlocks_both_groups():
    with pytest.raises(DeadlockError) as info:
        _pingpong(4, None, None, WAIT_THREADS=384, ARRIVE_THREADS=384)
    task = f"task@{_line('with tlx.async_task(num_warps=4, replicate=2):  # pingpong')}"
    wait = _line("# my turn")
    assert _diagnostic(info.value)[2:] == [
        (f"{wait}: note: task '{task}.0' (replica 0) waits at named barrier 9 (bar.sync, 384 threads); the "
         f"barrier is at 256 of 384 threads: task '{task}.0' (128, bar.sync), task '{task}.1' (128, bar.arrive)"),
        (f"{wait}: note: task '{task}.1' (replica 1) waits at named barrier 10 (bar.sync, 384 threads); the "
         f"barrier is at 128 of 384 threads: task '{task}.1' (128, bar.sync)"),
    ]


@pytest.mark.usefixtures("interpreter_diagnosis")
def test_named_barrier_counts_must_agree():
    with pytest.raises(BarrierError) as info:
        _pingpong(4, None, None, WAIT_THREADS=384)
    task = f"task@{_line('with tlx.async_task(num_warps=4, replicate=2):  # pingpong')}"
    assert _diagnostic(info.value) == [
        (f"{_line('tlx.named_barrier_arrive(9, ARRIVE_THREADS)')}: error: mismatched thread counts on named "
         f"barrier 9 in program (0, 0, 0): task '{task}.1' uses 256 (bar.arrive) but task '{task}.0' arrived "
         f"with 384")]


@pytest.mark.usefixtures("interpreter_diagnosis")
def test_warp_barrier_arrivals_beyond_its_count_are_an_error():
    with pytest.raises(BarrierError) as info:
        interpret(K.warp_barrier_kernel, (1,), (torch.zeros(1),), {"WARPS": 1})
    task = f"task@{_line('with tlx.async_task(num_warps=4):  # warp barrier')}"
    assert _diagnostic(info.value) == [
        (f"{_line('# the warp barrier arrive')}: error: too many arrivals on barrier 'bar'[0] in phase 0 in "
         f"program (0, 0, 0): task '{task}' arrives 128 time(s) but only 32 of 32 arrivals are pending (a warp "
         f"barrier counts every thread: this task's 4 warp(s) x 32 threads; alloc_warp_barrier's num_warps must "
         f"match the arriving task)")]


def test_expect_bytes_holds_the_phase_for_bytes_cp_async_never_signals():
    with pytest.raises(DeadlockError) as info:
        interpret(K.lone_barrier_kernel, (1,), (torch.zeros(1), 8), {"EXPECT": 64})
    assert _diagnostic(info.value) == [
        "error: deadlock in program (0, 0, 0): its only live task is blocked",
        (f"{_line('# the lone wait')}: note: task 'main' waits for phase 0 of barrier 'bar'[0]; the barrier is in "
         f"phase 0 (0 phases completed), 0 of 1 arrivals pending, 64 tx bytes pending")]


@pytest.mark.usefixtures("interpreter_diagnosis")
def test_store_over_a_copy_in_flight_is_a_race():
    with pytest.raises(RaceError) as info:
        interpret(K.overwrite_kernel, (1,), (torch.zeros(16), torch.zeros(16)), {"BLOCK": 16, "WAIT": False})
    assert _diagnostic(info.value) == [
        (f"{_line('# the store')}: error: race in program (0, 0, 0): store of 'buf'[0] in task 'main' may "
         f"overwrite the slot while the asynchronous cp.async copy issued by task 'main' is still writing it (no "
         f"wait orders that write before this write)"),
        f"{_line('# the copy')}: note: the asynchronous cp.async copy of 'buf'[0] was issued here"]


def test_slice_outside_its_buffer_is_an_error():
    args = (torch.zeros(8, 4), torch.zeros(4, 8), torch.zeros(8, 4, dtype=torch.int32), torch.zeros(4, 4), 5)
    with pytest.raises(InterpreterError) as info:
        interpret(K.views_kernel, (1,), args, {"M": 8, "N": 4})
    assert _diagnostic(info.value) == [
        (f"{_line('# the slice')}: error: shared-memory slice out of bounds in program (0, 0, 0): dimension 0 "
         f"takes [5, 9) of 'buf'[1], whose extent is 8 (offsets [5, 0], shape [4, 4])")]


def test_read_of_unwritten_shared_memory_is_an_error():
    with pytest.raises(InterpreterError) as info:
        interpret(K.uninitialized_kernel, (1,), (torch.zeros(16),), {"BLOCK": 16})
    assert _diagnostic(info.value) == [
        (f"{_line('# reads the unwritten half')}: error: read of uninitialized shared memory in program "
         f"(0, 0, 0): task 'main' reads 'buf'[0] at index (8,), which nothing has written yet (the GPU would "
         f"return garbage)")]


@pytest.mark.parametrize("n_cols, stages", [(100, 3), (16, 2), (300, 4)])
def test_single_task_cp_async_pipeline(n_cols, stages, gen):
    x, out = torch.randn(3, n_cols, generator=gen), torch.full((3,), float("nan"))
    interpret(K.cp_async_pipeline, (3,), (x, out, n_cols), {"BLOCK": 16, "NUM_STAGES": stages,
                                                             "PENDING": stages - 1})
    torch.testing.assert_close(out, x.sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("interpreter_diagnosis")
def test_single_task_reading_a_tile_it_has_not_waited_for_is_a_race():
    with pytest.raises(RaceError) as info:
        interpret(K.cp_async_pipeline, (1,), (torch.zeros(1, 100), torch.zeros(1), 100),
                  {"BLOCK": 16, "NUM_STAGES": 3, "PENDING": 3})
    assert _diagnostic(info.value) == [
        (f"{_line('# the pipelined read')}: error: race in program (0, 0, 0): read of 'bufs'[0] in task 'main' "
         f"is not ordered after the asynchronous cp.async copy issued by task 'main' (task 'main' has not waited "
         f"for it with async_load_wait_group, so no barrier can order it yet)"),
        f"{_line('# the prologue copy')}: note: the asynchronous cp.async copy of 'bufs'[0] was issued here"]
