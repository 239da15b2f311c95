"""The interpreter's task machinery: mbarriers, the scheduler (deadlock
diagnosis, seeded interleavings, async events) and the race tracker.

The orchestration ops (async_tasks, barrier_wait, TMA...) come with their own
issue; here test-only ops (``test.*``, registered below with ``@impl``) drive
the same machinery from real IR, parsed from its text form.
"""
from __future__ import annotations

import pytest

from tlxc.errors import BarrierError, DeadlockError, InterpreterError, RaceError
from tlxc.interpreter import (
    PREEMPT,
    Blocked,
    GlobalMemory,
    KernelRunner,
    MBarrier,
    RaceTracker,
    Scheduler,
    alloc_barriers,
    impl,
    run_block,
)
from tlxc.ir.core import OP_REGISTRY, Operation
from tlxc.ir.parser import parse_module

# -- MBarrier -------------------------------------------------------------------------------------


def test_fresh_barrier_is_in_phase_zero_and_wait_on_phase_one_passes():
    bar = MBarrier(2, "full", 0)
    assert bar.phase_done(1)             # "the previous phase, parity 1, has completed"
    assert not bar.phase_done(0)
    assert bar.state() == "in phase 0 (0 phases completed), 2 of 2 arrivals pending, 0 tx bytes pending"


def test_phase_completes_after_all_arrivals_and_parity_flips():
    bar = MBarrier(2)
    bar.arrive()
    assert not bar.phase_done(0) and bar.pending == 1
    bar.arrive()
    assert bar.phase_done(0) and not bar.phase_done(1)
    assert bar.completed_phases == 1 and bar.pending == 2 and bar.parity == 1
    bar.arrive(2)
    assert bar.phase_done(1) and not bar.phase_done(0) and bar.completed_phases == 2


def test_tx_bytes_hold_the_phase_until_they_land():
    bar = MBarrier(1, "full", 3)
    bar.arrive_expect_tx(4096)
    assert not bar.phase_done(0) and bar.tx_bytes == 4096 and bar.pending == 0
    bar.complete_tx(1024)
    assert not bar.phase_done(0)
    bar.complete_tx(3072)
    assert bar.phase_done(0) and bar.tx_bytes == 0 and bar.pending == 1


def test_tx_may_complete_before_it_is_expected():
    bar = MBarrier(1)
    bar.complete_tx(256)                  # the copy lands first: tx-count dips below zero
    assert bar.tx_bytes == -256 and not bar.phase_done(0)
    bar.arrive_expect_tx(256)
    assert bar.phase_done(0)


def test_too_many_arrivals_is_an_error():
    bar = MBarrier(1, "empty", 2)
    with pytest.raises(BarrierError, match=r"barrier 'empty'\[2\] received 2 arrival\(s\) but only 1 of 1"):
        bar.arrive(2)


def test_listeners_see_each_completed_phase():
    seen = []
    bar = MBarrier(1)
    bar.listeners.append(lambda b, index: seen.append(index))
    for _ in range(3):
        bar.arrive()
    assert seen == [0, 1, 2]
    assert [b.label for b in alloc_barriers(2, 1, "ready")] == ["'ready'[0]", "'ready'[1]"]


# -- the scheduler with hand-written tasks ------------------------------------------------------------


def _wait(bar: MBarrier, phase: int):
    if not bar.phase_done(phase):
        yield Blocked.on_barrier(bar, phase)


def _ping_pong(log: list, rounds: int = 3):
    """A producer fills a one-slot ring, a consumer drains it (phases alternate)."""
    full, empty = MBarrier(1, "full"), MBarrier(1, "empty")

    def producer():
        for i in range(rounds):
            yield from _wait(empty, (i & 1) ^ 1)
            log.append(f"put {i}")
            full.arrive()
            yield PREEMPT

    def consumer():
        for i in range(rounds):
            yield from _wait(full, i & 1)
            log.append(f"get {i}")
            empty.arrive()
            yield PREEMPT

    return producer(), consumer()


def test_round_robin_producer_consumer():
    log = []
    scheduler = Scheduler()
    producer, consumer = _ping_pong(log)
    scheduler.spawn("producer", producer)
    scheduler.spawn("consumer", consumer)
    scheduler.run()
    assert log == ["put 0", "get 0", "put 1", "get 1", "put 2", "get 2"]


def test_seeded_interleavings_differ_but_respect_the_protocol():
    traces = set()
    for seed in range(12):
        log = []
        scheduler = Scheduler(seed=seed)
        producer, consumer = _ping_pong(log, rounds=4)
        scheduler.spawn("producer", producer)
        scheduler.spawn("consumer", consumer)
        scheduler.spawn("bystander", (PREEMPT for _ in range(3)))
        scheduler.run()
        assert [e for e in log if e.startswith("put")] == [f"put {i}" for i in range(4)]
        for i in range(4):
            assert log.index(f"put {i}") < log.index(f"get {i}")
        traces.add(tuple(log))
    assert len(traces) == 1              # the protocol fixes the order of puts and gets ...

    orders = set()
    for seed in range(12):               # ... but not how independent tasks interleave
        log = []
        scheduler = Scheduler(seed=seed)
        for name in "abc":
            scheduler.spawn(name, (log.append(f"{name}{i}") or PREEMPT for i in range(3)))
        scheduler.run()
        orders.add(tuple(log))
    assert len(orders) > 3


def test_deadlock_names_every_blocked_task_its_barrier_and_phase():
    full, empty = MBarrier(1, "full", 0), MBarrier(1, "empty", 1)

    def producer():
        yield from _wait(empty, 0)       # bug: phase 0 of a fresh barrier never completes by itself

    def consumer():
        yield from _wait(full, 0)

    scheduler = Scheduler("program (2, 0, 0)")
    scheduler.spawn("producer", producer())
    scheduler.spawn("consumer", consumer())
    with pytest.raises(DeadlockError) as info:
        scheduler.run()
    assert str(info.value) == (
        "error: deadlock in program (2, 0, 0): all 2 live tasks are blocked\n"
        "note: task 'producer' waits for phase 0 of barrier 'empty'[1]; the barrier is in phase 0 "
        "(0 phases completed), 1 of 1 arrivals pending, 0 tx bytes pending\n"
        "note: task 'consumer' waits for phase 0 of barrier 'full'[0]; the barrier is in phase 0 "
        "(0 phases completed), 1 of 1 arrivals pending, 0 tx bytes pending")


def test_async_events_complete_when_no_task_can_run():
    bar = MBarrier(1, "full")
    log = []

    def consumer():
        yield from _wait(bar, 0)
        log.append("consumed")

    def producer(scheduler):
        bar.arrive_expect_tx(64)
        scheduler.post("copy", lambda: (log.append("landed"), bar.complete_tx(64)))
        log.append("issued")
        yield PREEMPT
        log.append("producer done")

    scheduler = Scheduler()
    scheduler.spawn("consumer", consumer())
    scheduler.spawn("producer", producer(scheduler))
    scheduler.run()
    assert log == ["issued", "producer done", "landed", "consumed"]


def test_an_event_that_never_becomes_ready_is_part_of_the_deadlock():
    bar = MBarrier(1, "full")
    scheduler = Scheduler()
    scheduler.post("copy", lambda: None, ready=lambda: False)
    scheduler.spawn("consumer", _wait(bar, 0))
    with pytest.raises(DeadlockError, match="asynchronous copy is still waiting to start"):
        scheduler.run()


def test_livelock_is_cut_by_max_steps():
    def spinner():
        while True:
            yield PREEMPT

    scheduler = Scheduler(max_steps=100)
    scheduler.spawn("spinner", spinner())
    with pytest.raises(InterpreterError, match="did not finish within 100 scheduling steps"):
        scheduler.run()


# -- the race tracker ---------------------------------------------------------------------------------


def test_read_of_an_unordered_async_write_is_a_race():
    races = RaceTracker("program (0, 0, 0)")
    bar = MBarrier(1, "full")
    access = races.begin_async_write(("a", 0), "'a'[0]", "TMA load", None, "producer")
    races.signal(access, bar)
    bar.arrive()
    with pytest.raises(RaceError) as info:
        races.read(("a", 0), "'a'[0]", "read", None, "consumer")
    assert str(info.value) == (
        "error: race in program (0, 0, 0): read of 'a'[0] in task 'consumer' is not ordered after the "
        "asynchronous TMA load issued by task 'producer' (no completed barrier wait orders that write "
        "before this read)\n"
        "note: the asynchronous TMA load of 'a'[0] was issued here")
    races.on_wait(bar, 0)                 # the consumer's wait orders the write
    races.read(("a", 0), "'a'[0]", "read", None, "consumer")
    races.read(("a", 1), "'a'[1]", "read", None, "consumer")


def test_wait_on_an_earlier_phase_does_not_order_a_later_write():
    races = RaceTracker()
    bar = MBarrier(1, "full")
    bar.arrive()                          # phase 0 completes
    access = races.begin_async_write("slot", "'a'[0]", "TMA load", None, "producer")
    races.signal(access, bar)             # lands in phase 1
    races.on_wait(bar, 0)
    with pytest.raises(RaceError):
        races.read("slot", "'a'[0]", "read", None, "consumer")


def test_overwriting_a_slot_an_async_op_still_reads_is_a_race():
    races = RaceTracker()
    access = races.begin_async_read("b1", "'b'[1]", "wgmma operand read", None, "consumer")
    with pytest.raises(RaceError, match=r"store of 'b'\[1\] in task 'producer' may overwrite the slot while "
                                        r"the asynchronous wgmma operand read issued by task 'consumer' is "
                                        r"still reading it"):
        races.write("b1", "'b'[1]", "store", None, "producer")
    races.order(access)                   # e.g. warpgroup_mma_wait(0)
    races.write("b1", "'b'[1]", "store", None, "producer")


# -- test-only ops: the machinery driven from IR ----------------------------------------------------------

def _op(name: str, regions: int = 0) -> type[Operation]:
    if name in OP_REGISTRY:
        return OP_REGISTRY[name]
    return type(name.replace(".", "_"), (Operation,), {"name": name, "num_regions": regions})


for _name in ("test.barriers", "test.tasks", "test.barrier_wait", "test.barrier_arrive", "test.barrier_expect",
              "test.async_copy", "test.smem_read"):
    _op(_name)


def _barrier(ctx, op, index):
    return ctx.program.state["barriers"][op.attrs["bar"]][int(index)]


@impl("test.barriers")
def _barriers(ctx, op):
    table = ctx.program.state.setdefault("barriers", {})
    table[op.attrs["name"]] = alloc_barriers(op.attrs["num"], op.attrs["arrive_count"], op.attrs["name"])


@impl("test.tasks")
def _tasks(ctx, op):
    tasks = [ctx.scheduler.spawn(name, run_block(ctx.fork(name), region.block), op.loc)
             for name, region in zip(op.attrs["names"], op.regions)]
    yield ctx.scheduler.join(tasks, op.loc)


@impl("test.barrier_wait")
def _barrier_wait(ctx, op, index, phase):
    bar = _barrier(ctx, op, index)
    if not bar.phase_done(int(phase)):
        yield Blocked.on_barrier(bar, int(phase), op.loc)
    ctx.races.on_wait(bar, int(phase))


@impl("test.barrier_arrive")
def _barrier_arrive(ctx, op, index):
    _barrier(ctx, op, index).arrive(op.attrs.get("count", 1), op.loc)
    yield PREEMPT


@impl("test.barrier_expect")
def _barrier_expect(ctx, op, index):
    _barrier(ctx, op, index).arrive_expect_tx(op.attrs["bytes"], 1, op.loc)
    yield PREEMPT


@impl("test.async_copy")
def _async_copy(ctx, op, slot, index):
    """Copy into smem slot ``slot``; completes into barrier ``bar[index]``."""
    bar = _barrier(ctx, op, index)
    label = f"'{op.attrs['buffer']}'[{int(slot)}]"
    access = ctx.races.begin_async_write((op.attrs["buffer"], int(slot)), label, "TMA load", op.loc,
                                         ctx.task_name)

    def land():
        ctx.races.signal(access, bar)
        bar.complete_tx(op.attrs["bytes"])

    ctx.scheduler.post("TMA load", land, op.loc)
    yield PREEMPT


@impl("test.smem_read")
def _smem_read(ctx, op, slot):
    label = f"'{op.attrs['buffer']}'[{int(slot)}]"
    ctx.races.read((op.attrs["buffer"], int(slot)), label, "read", op.loc, ctx.task_name)


PIPELINE = """
tl.kernel @pipeline() loc("ws_pipeline.tlx":1:0) {
  %c0 = arith.constant {value = 0} : i32 loc("ws_pipeline.tlx":2:4)
  %c1 = arith.constant {value = 1} : i32 loc("ws_pipeline.tlx":3:4)
  test.barriers {arrive_count = 1, name = "full", num = 2} loc("ws_pipeline.tlx":4:4)
  test.barriers {arrive_count = 1, name = "empty", num = 2} loc("ws_pipeline.tlx":5:4)
  test.tasks {names = ["producer", "consumer"]} loc("ws_pipeline.tlx":6:4) {
    test.barrier_wait %c0, %c1 {bar = "empty"} loc("ws_pipeline.tlx":8:8)
    test.barrier_expect %c0 {bar = "full", bytes = 4096} loc("ws_pipeline.tlx":9:8)
    test.async_copy %c0, %c0 {buffer = "a", bytes = 4096, bar = "full"} loc("ws_pipeline.tlx":10:8)
    test.barrier_wait %c0, %c0 {bar = "empty"} loc("ws_pipeline.tlx":11:8)
    scf.yield loc("ws_pipeline.tlx":8:8)
  } {
    test.barrier_wait %c0, %CONSUMER_PHASE {bar = "full"} loc("ws_pipeline.tlx":14:8)
    test.smem_read %c0 {buffer = "a"} loc("ws_pipeline.tlx":15:8)
    test.barrier_arrive %c0 {bar = "empty"} loc("ws_pipeline.tlx":16:8)
    scf.yield loc("ws_pipeline.tlx":14:8)
  }
  tl.return loc("ws_pipeline.tlx":1:0)
}
"""


def _run_ir(text: str, seed=None):
    runner = KernelRunner(parse_module(text, "ws_pipeline.tlx"))
    return runner.run_program((0, 0, 0), (1, 1, 1), GlobalMemory(), [], seed)


@pytest.mark.parametrize("seed", [None, 0, 1, 2, 3, 4, 5])
def test_ir_pipeline_runs_under_every_interleaving(seed):
    program = _run_ir(PIPELINE.replace("%CONSUMER_PHASE", "%c0"), seed)
    full, empty = program.state["barriers"]["full"], program.state["barriers"]["empty"]
    assert full[0].completed_phases == 1 and empty[0].completed_phases == 1
    assert all(t.done for t in program.scheduler.tasks)


@pytest.mark.parametrize("seed", [None, 0, 1, 2])
def test_ir_pipeline_deadlock_is_diagnosed_exactly(seed):
    # The consumer waits for phase 1 of full[0]: a phase that would need a second fill.
    # (A wrong parity right at the start would pass at once, which is why phases are checked.)
    text = PIPELINE.replace("%CONSUMER_PHASE", "%c0").replace(
        'test.barrier_arrive %c0 {bar = "empty"} loc("ws_pipeline.tlx":16:8)',
        'test.barrier_wait %c0, %c1 {bar = "full"} loc("ws_pipeline.tlx":16:8)\n'
        '    test.barrier_arrive %c0 {bar = "empty"} loc("ws_pipeline.tlx":17:8)')
    with pytest.raises(DeadlockError) as info:
        _run_ir(text, seed)
    assert str(info.value) == (
        "error: deadlock in program (0, 0, 0): all 3 live tasks are blocked\n"
        "ws_pipeline.tlx:6:4: note: task 'main' waits for task(s) 'producer', 'consumer' to finish\n"
        "ws_pipeline.tlx:11:8: note: task 'producer' waits for phase 0 of barrier 'empty'[0]; the barrier is "
        "in phase 0 (0 phases completed), 1 of 1 arrivals pending, 0 tx bytes pending\n"
        "ws_pipeline.tlx:16:8: note: task 'consumer' waits for phase 1 of barrier 'full'[0]; the barrier is "
        "in phase 1 (1 phase completed), 1 of 1 arrivals pending, 0 tx bytes pending")


def test_ir_missing_wait_is_a_race_with_both_lines():
    text = PIPELINE.replace(
        'test.barrier_wait %c0, %CONSUMER_PHASE {bar = "full"} loc("ws_pipeline.tlx":14:8)\n', "")
    with pytest.raises(RaceError) as info:
        _run_ir(text)
    assert str(info.value) == (
        "ws_pipeline.tlx:15:8: error: race in program (0, 0, 0): read of 'a'[0] in task 'consumer' is not "
        "ordered after the asynchronous TMA load issued by task 'producer' (no completed barrier wait orders "
        "that write before this read)\n"
        "ws_pipeline.tlx:10:8: note: the asynchronous TMA load of 'a'[0] was issued here")


def test_ir_missing_expect_bytes_shows_up_as_a_race():
    # Without expect_tx the producer's arrive completes phase 0 at once, so the
    # consumer's wait passes before the copy has landed.
    text = PIPELINE.replace("%CONSUMER_PHASE", "%c0").replace(
        'test.barrier_expect %c0 {bar = "full", bytes = 4096}', 'test.barrier_arrive %c0 {bar = "full"}')
    with pytest.raises(RaceError, match="read of 'a'\\[0\\] in task 'consumer' is not ordered after"):
        _run_ir(text)
