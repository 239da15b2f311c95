"""The static barrier and resource checks (``docs/checking.md``): every broken
kernel of tests/check_kernels.py is caught with its message and line, on
``tlxc check`` and on every compile; the examples and the phase idioms of
tlx_api.md §2 give no finding; ``--run`` decides what is left on the
interpreter."""
from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import check_kernels as C
import kernels_tma as T
import kernels_ws as K

import tlxc
import tlxc.language as tl
from tlxc.check import ERROR, NOTE
from tlxc.cli import main
from tlxc.compiler import check_function
from tlxc.errors import BarrierError, CompilationError, ResourceError
from tlxc.frontend.specialize import parse_signature, specialization_from_types
from tlxc.language import tlx

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(C.__file__)


def _line(text: str, path: Path = CORPUS) -> int:
    """1-based line of ``path`` holding ``text`` (exactly one)."""
    found = [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(found) == 1, (text, found)
    return found[0]


def findings(kernel, signature: str | None = None, num_warps: int = 4, **constexprs):
    spec = specialization_from_types(kernel, parse_signature(signature) if signature else {}, constexprs)
    return check_function(kernel, spec, arch="sm_90a", num_warps=num_warps)


def errors(kernel, signature: str | None = None, **constexprs):
    return [f for f in findings(kernel, signature, **constexprs) if f.severity == ERROR]


# -- the corpus: (kernel, constexprs, check, message, marker of the reported line) ------------------------
# In messages, <marker> stands for the line of check_kernels.py holding the marker (tasks are shown as
# 'task@<line of their with statement>'), so that the expectations survive edits of the corpus.
C_ = "check_kernels.py"
CONSUMERS = "task@<# the consumers>"
BROKEN = [
    ("ring_rowsum", {"BUG": "producer_phase"}, "ring.producer-phase",
     ("producer task 'default' waits empty[slot] (slot = t % 3 = 0) with phase = 0, the phase a consumer waits for, "
     f"where it needs phase ^ 1: its first wait blocks, because a fresh barrier's phase 0 completes only when task "
     f"'{CONSUMERS}.0' arrives on it ({C_}:<# the consumer's release>), after waiting for full[slot] "
     f"(slot = t % 3 = 0) ({C_}:<# the consumer's wait>)"), "# BUG producer_phase"),
    ("ring_incremental", {"BUG": "start_1"}, "ring.initial-phase",
     ("producer task 'default' starts its phase at 1, so its first wait on empty[buf] (= 'empty'[0]) is for phase 0 "
     "(phase ^ 1 = 0) and blocks"), "# the incremental producer's wait"),
    ("handoff", {"BUG": "start_0"}, "ring.initial-phase",
     ("producer task 'default' starts its phase at 0, so its first wait on empty[0] is for phase 0 "
     "(producer_phase = 0) and blocks"), "# the handoff producer's wait"),
    ("ring_rowsum", {"BUG": "consumer_phase"}, "ring.initial-phase",
     (f"consumer task '{CONSUMERS}.0' waits full[slot] (slot = t % 3 = 0) with phase ^ 1 = 1 on its first use of "
     "'full'[0]: a wait for phase 1 on a fresh barrier returns at once"), "# BUG consumer_phase"),
    ("ring_rowsum", {"BUG": "no_release"}, "barrier.no-arrival",
     ("task 'default' waits for phase 0 of empty[slot] (slot = t % 3 = 0), but no task ever arrives on 'empty' "
     "(no tlx.barrier_arrive, tlx.barrier_expect_bytes, tlx.tcgen05_commit or async_dot mBarriers= names it anywhere in the kernel)"), "# the producer's wait"),
    ("delayed_release", {"BUG": "no_tail"}, "barrier.missing-arrive",
     (f"task 'task@<# the delayed consumer task>' waits on 'full' once, but none of the arrives on it "
     f"({C_}:<# the delayed arrive>) runs in this execution"), "# the delayed consumer's wait"),
    ("ring_rowsum", {"BUG": "extra_arrive"}, "barrier.extra-arrive",
     (f"task 'default' arrives on 'full' twice ({C_}:<# the producer's arrive> and {C_}:<# BUG extra_arrive>) "
     f"while task '{CONSUMERS}.0' waits on it once"), "# BUG extra_arrive"),
    ("ring_rowsum", {"BUG": "one_replica"}, "barrier.arrive-count",
     (f"'empty' counts 2 arrivals per phase, but of the replicas of task '{CONSUMERS}' only '{CONSUMERS}.0' arrives "
     f"on it ({C_}:<# BUG one_replica>); '{CONSUMERS}.1' never does"), "# BUG one_replica"),
    ("ring_rowsum", {"BUG": "count_1"}, "barrier.arrive-count",
     ("'empty' counts 1 arrival per phase (arrive_count=1), but 2 arrive per use of a slot "
     f"(task '{CONSUMERS}.0' and task '{CONSUMERS}.1'"), "# BUG count_1"),
    ("ring_rowsum", {"BUG": "count_3"}, "barrier.arrive-count",
     "'empty' counts 3 arrivals per phase (arrive_count=3), but at most 2 arrive per use of a slot",
     "# BUG count_3"),
    ("warp_barrier", {"WARPS": 1}, "barrier.arrive-count",
     ("warp barrier 'bar' counts 32 thread arrivals per phase, but task 'task@<# the warp-barrier worker>' arrives "
     f"with all its 128 threads (4 warps x 32) at {C_}:<# the warp-barrier arrive>"), "# the warp barrier"),
    ("ring_incremental", {"BUG": "no_flip"}, "ring.phase-not-flipped",
     ("task 'default' (check_kernels.py:<# the incremental producer's wait>) waits empty[buf] (= 'empty'[0]) with "
     "phase ^ 1 = 1 for its 2nd use of 'empty'[0], the same phase as for its previous use: the phase was never "
     "flipped when the slot index wrapped around"), "# the incremental producer's wait"),
    ("ring_incremental", {"BUG": "flip_twice"}, "ring.phase-flipped-twice",
     "the same phase as for its previous use: the phase was flipped twice between the two uses",
     "# the incremental producer's wait"),
    ("ring_rowsum", {"BUG": "slot_producer"}, "ring.slot-mismatch",
     (f"task 'default' ({C_}:<# BUG slot_producer>) makes its 1st arrival on 'full' at full[(t + 1) % NUM_STAGES] "
     f"((t + 1) % NUM_STAGES = (t + 1) % 3 = 1), but task '{CONSUMERS}.0' ({C_}:<# the consumer's wait>) waits "
     "for its 1st use of 'full' at full[slot] (slot = t % 3 = 0): the two sides of the ring disagree on the slot "
     "index"), "# BUG slot_producer"),
    ("ring_rowsum", {"BUG": "slot_consumer"}, "ring.slot-mismatch",
     (f"task '{CONSUMERS}.0' ({C_}:<# BUG slot_consumer>) waits for its 1st use of 'full' at "
     f"full[(t + 1) % NUM_STAGES] ((t + 1) % NUM_STAGES = (t + 1) % 3 = 1) with phase = 0, but task 'default' "
     f"({C_}:<# the producer's arrive>) makes its 1st arrival on full[slot] (slot = t % 3 = 0)"),
     "# BUG slot_consumer"),
    ("ring_rowsum", {"BUG": "no_empty_wait"}, "ring.lapped",
     ("waits for phase 0 of full[slot] (slot = t % 3 = 0) for its 1st use of the slot, but 'full'[0] has already "
     "completed 2 phases: task 'default' arrived on it twice"), "# the consumer's wait"),
    ("signal_cycle", {"BUG": "both_wait"}, "barrier.wait-cycle",
     (f"cycle of waits between tasks: task 'default' waits for phase 0 of pong[0] ({C_}:<# BUG both_wait>), which "
     f"only task 'task@<# the signal worker>' can complete, at {C_}:<# the worker's signal> after its own wait; "
     f"task 'task@<# the signal worker>' waits for phase 0 of ping[0] ({C_}:<# the worker's wait>), which only "
     f"task 'default' can complete, at {C_}:<# the default's signal> after its own wait"), "# BUG both_wait"),
    ("delayed_release", {"NUM_STAGES": 1}, "barrier.wait-cycle",
     (f"cycle of waits between tasks: task 'default' waits for phase 0 of empty[slot] (slot = count % 1 = 0) "
     f"({C_}:<# the delayed producer's wait>)"), "# the delayed producer's wait"),
    ("pingpong", {"BUG": "no_pre_arrive"}, "barrier.wait-cycle",
     "task 'task@<# the pingpong consumers>.0' waits for named barrier 9 (256 threads, bar.sync)", "# my turn"),
    ("ring_rowsum", {"BUG": "expect_bytes"}, "barrier.tx-bytes",
     (f"task '{CONSUMERS}.0' waits for phase 0 of full[slot] (slot = t % 3 = 0), which also waits for 2048 "
     "transaction bytes that no copy delivers"), "# the consumer's wait"),
    ("ring_rowsum", {"BUG": "early_arrive"}, "race.cp-async",
     (f"race: task '{CONSUMERS}.0' reads 'bufs'[0] ({C_}:<# the consumer's read>) before the cp.async copy into it "
     f"by task 'default' ({C_}:<# the producer's copy>) is known to be complete: task 'default' arrives on "
     f"'full'[0] at {C_}:<# the producer's arrive> before any async_load_wait_group retires the copy"),
     "# the consumer's read"),
    ("cp_async_pipeline", {"PENDING": 3}, "race.cp-async",
     (f"race: task 'main' reads 'bufs'[0] before the cp.async copy into it ({C_}:<# the prologue copy>) is "
     f"complete: async_load_wait_group(3) at {C_}:<# the pipelined wait> leaves the 3 newest groups in flight"),
     "# the pipelined read"),
    ("store_over_copy", {"BUG": "no_wait"}, "race.cp-async",
     (f"race: task 'main' reads 'buf'[0] before the cp.async copy into it ({C_}:<# the single copy>) is complete: "
     "no async_load_wait_group retires it first"), "# the store"),
    ("ring_rowsum", {"BUG": "early_release"}, "race.early-release",
     (f"task '{CONSUMERS}.0' releases empty[slot] (slot = t % 3 = 0) ({C_}:<# BUG early_release>) before it reads "
      f"'bufs'[0] ({C_}:<# the consumer's read>): once released, the producer may refill the slot while this read "
      "is in progress"), "# BUG early_release"),
    ("shared_handoff", {"BUG": "no_barrier"}, "race.shared",
     (f"race: task 'task@<# the reading task>' reads 'buf'[0] ({C_}:<# the handoff read>) while task 'default' "
      f"writes it ({C_}:<# the handoff write>) with nothing ordering the two accesses"), "# the handoff read"),
    ("pingpong", {"THREADS": 384}, "named.count",
     ("named barrier 9 counts 384 threads, but only task 'task@<# the pingpong consumers>.0' (128 threads) and task "
     "'task@<# the pingpong consumers>.1' (128 threads) use it: at most 256 threads can arrive in a round"),
     "# my turn"),
    # a 128-thread task on a 64-count bar.sync fills two rounds by itself (legal, as in TLX); the bug
    # is that the other uses of barrier 9 count 256
    # 96 neither covers a 128-thread task nor divides it: a warp is left waiting each round
    ("pingpong", {"BUG": "count_96"}, "named.threads",
     "named barrier 9 counts 96 threads here (bar.sync), which is fewer than the 128 threads of task", "# BUG count_96"),
    ("pingpong", {"BUG": "count_64"}, "named.count-mismatch",
     "named barrier 9 counts 64 threads here (bar.sync in task", "# BUG count_64"),
    ("pingpong", {"BUG": "mismatch"}, "named.count-mismatch",
     ("named barrier 9 counts 128 threads here (bar.arrive in task 'task@<# the pingpong consumers>.1'), but 256 at "
     f"{C_}:<# my turn> (bar.sync): every use of one named barrier must count the same threads"), "# BUG mismatch"),
    ("pingpong", {"BUG": "reserved_id"}, "frontend",
     "named barrier ids 0..6 are reserved for tlxc itself; use 7..15, got 3", "# BUG reserved_id"),
    ("pingpong", {"BUG": "id_16"}, "frontend", "named barrier ids are 0..15, got 16", "# BUG id_16"),
    ("big_ring", {"NUM_STAGES": 2}, "resource.shared-memory",
     ("the kernel's shared buffers and barriers need 262144 bytes, more than the 232448 bytes of shared memory a "
     f"block may use on sm_90a:\n  a: 2 x 128x128 f32 = 131072 bytes ({C_}:<# the A ring>)"), "def big_ring"),
    ("budgets", {"BUG": "not_multiple_of_8"}, "frontend",
     "a task's register budget must be a multiple of 8 from 24 to 256, got 100", "# BUG not_multiple_of_8"),
    ("budgets", {"BUG": "over_256"}, "frontend",
     "a task's register budget must be a multiple of 8 from 24 to 256, got 264", "# BUG over_256"),
    ("budgets", {"BUG": "pool"}, "resource.register-pool",
     ("the non-default tasks' register budgets (warps 4..7 ('task@<# BUG pool>.0'): 128 threads x 256, warps 8..11 "
      "('task@<# BUG pool>.1'): 128 "
     "threads x 256) use 65536 of the 64512 registers the block starts with (384 threads x 168), leaving the "
     "default task 0 per thread"), "# the register budgets"),
    ("budgets", {"BUG": "all_or_none"}, "frontend",
     "give every non-default task a register budget, or none of them", "# the register budgets"),
    ("many_tasks", {"REPLICAS": 6}, "resource.tasks",
     "the kernel has 7 async tasks (replicas included); tlxc supports at most 6", "# the tasks"),
    ("warp_ranges", {"BUG": "overlap"}, "frontend",
     "overlapping warp ranges: task 'task@<# BUG overlap>' uses warps [2, 6) and task 'default' uses warps [0, 4)",
     "# BUG overlap"),
    ("warp_ranges", {"BUG": "gap"}, "frontend",
     ("task 'task@<# BUG gap>' starts at warp 12, leaving warps [8, 12) to no task; tlxc packs the tasks without "
      "gaps (warp_group_start_id=8)"), "# BUG gap"),
    ("warp_ranges", {"BUG": "partial"}, "frontend",
     ("warp_group_start_id must be set for every non-default task or for none; task 'task@<# BUG partial>' has "
      "none"), "# BUG partial"),
    ("peer_done", {"BUG": "remote_wait"}, "frontend",
     ("'bar' is a remote view (a barrier of another CTA of the cluster); only barrier_arrive can use it: arrive "
     "remote, wait local"), "# BUG remote_wait"),
]


def fill(template: str) -> str:
    """``<marker>`` → the line of check_kernels.py holding the marker."""
    return re.sub(r"<((?:#|def )[^>]*)>", lambda m: str(_line(m.group(1))), template)


def _id(case) -> str:
    name, constexprs, *_ = case
    return name + "-" + "-".join(str(v) for v in constexprs.values())


def test_the_corpus_covers_the_bug_classes():
    classes = {check for _, _, check, _, _ in BROKEN}
    assert len(BROKEN) >= 25
    assert {"ring.producer-phase", "ring.initial-phase", "barrier.no-arrival", "barrier.missing-arrive",
            "barrier.extra-arrive", "barrier.arrive-count", "ring.phase-not-flipped", "ring.phase-flipped-twice",
            "ring.slot-mismatch", "barrier.wait-cycle", "race.cp-async", "race.early-release", "race.shared",
            "named.count", "named.threads",
            "resource.shared-memory", "resource.register-pool"} <= classes


@pytest.mark.parametrize("case", BROKEN, ids=_id)
def test_broken_kernel_is_caught_at_its_line(case):
    name, constexprs, check, message, marker = case
    found = errors(getattr(C, name), **constexprs)
    assert found, f"{name} {constexprs}: no finding"
    first = found[0]
    assert (first.check, first.loc.line) == (check, _line(marker)), first.render()
    assert fill(message) in first.message, first.render()


@pytest.mark.parametrize("case", [c for c in BROKEN if c[2] != "frontend"], ids=_id)
def test_every_compile_raises_it(case):
    name, constexprs, check, message, marker = case
    kind = ResourceError if check.startswith("resource.") else BarrierError
    with pytest.raises(kind) as info:
        getattr(C, name).compile(constexprs=constexprs, stages=("ir.opt",))
    assert fill(message).split("\n")[0] in info.value.message
    assert info.value.loc.line == _line(marker)


def test_findings_point_at_the_other_side():
    first = errors(C.ring_rowsum, BUG="slot_producer")[0]
    assert [(text, loc.line) for text, loc in first.notes if loc] == [
        (f"task '{fill(CONSUMERS)}.0' waits here", _line("# the consumer's wait"))]
    start = errors(C.ring_incremental, BUG="start_1")[0]
    assert ("the phase starts here", _line("# BUG start_1")) in [(t, loc.line) for t, loc in start.notes if loc]
    race = errors(C.ring_rowsum, BUG="early_arrive")[0]
    assert [loc.line for _, loc in race.notes if loc] == [_line("# the producer's copy"),
                                                         _line("# the producer's arrive")]


def test_interpreter_test_kernels_are_caught_statically():
    """The broken variants tests/test_interpreter_ws.py diagnoses at run time."""
    rowsum = "x_ptr=*fp32,out_ptr=*fp32,n_rows=i32,n_cols=i32"
    sizes = {"BLOCK_R": 16, "BLOCK_C": 32, "NUM_STAGES": 2}
    expected = {1: "ring.producer-phase", 2: "barrier.no-arrival", 3: "barrier.arrive-count", 4: "race.cp-async"}
    for bug, check in expected.items():
        assert errors(K.rowsum_ws, rowsum, **sizes, BUG=bug)[0].check == check
    ring = "x_ptr=*fp32,out_ptr=*fp32,n_cols=i32"
    assert errors(K.ring_incremental, ring, BLOCK=16, NUM_STAGES=2, FLIP=False)[0].check == "ring.phase-not-flipped"
    assert errors(K.warp_barrier_kernel, "out_ptr=*fp32", WARPS=1)[0].check == "barrier.arrive-count"
    pingpong = "x_ptr=*fp32,sums_ptr=*fp32,tickets_ptr=*i32,counter_ptr=*i32,n_tiles=i32"
    assert errors(K.pingpong_kernel, pingpong, BLOCK=32, WAIT_THREADS=384, ARRIVE_THREADS=384)[0].check == \
        "named.count"


# -- zero findings on the examples and the idioms -----------------------------------------------------------
# hopper_gemm_ws takes TensorDescriptor parameters, which have no command-line
# spelling yet; tests/test_hopper_gemm_interp.py checks it from its check_inputs().
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py")
                  if not p.name.startswith("_") and p.stem != "hopper_gemm_ws")


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_examples_are_clean(example, capsys):
    arch = ["--arch", "sm_100a"] if example.stem.startswith("blackwell") else []
    assert main(["check", str(example), *arch]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_ws_rmsnorm_is_clean_for_every_ring_size(stages):
    sys.path.insert(0, str(ROOT / "examples"))
    from ws_rmsnorm import rmsnorm_ws_kernel
    assert findings(rmsnorm_ws_kernel, BLOCK=1024, CHUNK=512, NUM_STAGES=stages) == []


RING = "x_ptr=*fp32,out_ptr=*fp32,n_cols=i32"
IDIOMS = [   # tlx_api.md §2
    ("get_bufidx_phase, replicated consumers with arrive_count 2", C.ring_rowsum, None, {}),
    ("get_bufidx_phase (tests/kernels_ws.py)", K.rowsum_ws, "x_ptr=*fp32,out_ptr=*fp32,n_rows=i32,n_cols=i32",
     {"BLOCK_R": 16, "BLOCK_C": 32}),
    ("incremental, flip on wrap", C.ring_incremental, None, {}),
    ("incremental, flip on wrap (tests/kernels_ws.py)", K.ring_incremental, RING, {"BLOCK": 16}),
    ("flip when wrapping to slot 0", K.ring_flip_on_wrap, RING, {"BLOCK": 16}),
    ("flip after the last slot", K.ring_flip_after_last, RING, {"BLOCK": 16}),
    ("delayed hand-over (ws_rmsnorm)", C.delayed_release, None, {}),
]


@pytest.mark.parametrize("stages", [1, 2, 3, 5])
@pytest.mark.parametrize("idiom", IDIOMS, ids=lambda i: i[0])
def test_phase_idioms_are_clean(idiom, stages):
    _, kernel, signature, constexprs = idiom
    if kernel is C.delayed_release and stages == 1:
        pytest.skip("one stage cannot delay the hand-over: a real deadlock (see the corpus)")
    assert findings(kernel, signature, **constexprs, NUM_STAGES=stages) == []


@pytest.mark.parametrize("kernel, signature, constexprs", [
    (C.handoff, None, {}),                                                    # separate producer/consumer phases
    (K.handoff_separate_phases, RING, {"BLOCK": 16}),
    (C.signal_cycle, None, {}),
    (C.pingpong, None, {}),                                                   # named-barrier ping-pong
    (C.warp_barrier, None, {}),
    (C.shared_handoff, None, {}),
    (C.cp_async_pipeline, None, {"NUM_STAGES": 4, "PENDING": 3}),
    (C.store_over_copy, None, {}),
    (C.budgets, None, {}),
    (C.big_ring, None, {}),
    (C.many_tasks, None, {}),
    (C.per_item_trips, None, {}),
    (C.split_diagonal_walks, None, {}),                                       # carried tile indices, split walks
    (C.table_items, None, {}),                                                # trip counts loaded from a table
    (K.views_kernel, "x_ptr=*fp32,out_t_ptr=*fp32,out_bits_ptr=*i32,out_part_ptr=*fp32,OFF=i32", {"M": 8, "N": 4}),
    (K.thread_id_kernel, "out_ptr=*i32", {}),
], ids=lambda v: getattr(v, "__name__", None))
def test_correct_kernels_are_clean(kernel, signature, constexprs):
    assert findings(kernel, signature, **constexprs) == []


def test_the_corpus_file_is_clean_at_its_defaults(capsys):
    """Every BUG defaults to the correct kernel; only the undecidable one leaves a note."""
    assert main(["check", str(CORPUS)]) == 0
    err = capsys.readouterr().err
    assert err.count(": note: the barrier protocol cannot be checked statically") == 1
    assert ": error: " not in err


@pytest.mark.parametrize("bug", ["other_item", "table_written"])
def test_loaded_trip_counts_are_related_only_when_they_must_be_equal(bug):
    """Two tasks' loads of one table entry share a pinned value; a different entry, or a
    table the kernel writes, gives independent values (and a finding)."""
    found = errors(C.table_items, BUG=bug)
    assert found and found[0].check.startswith("barrier."), found


# -- what static analysis leaves to --run ------------------------------------------------------------------
def test_runtime_predicates_are_left_to_the_interpreter():
    [note] = findings(C.runtime_pred)
    assert note.severity == NOTE and note.check == "protocol.undecidable"
    assert "the predicate of tlx.barrier_arrive depends on runtime values" in note.message


def test_run_decides_on_the_interpreter(capsys):
    assert main(["check", str(CORPUS), "--kernel", "runtime_pred"]) == 0
    capsys.readouterr()
    assert main(["check", str(CORPUS), "--kernel", "runtime_pred", "--run"]) == 1
    err = capsys.readouterr().err
    line = _line("# the runtime wait")
    assert f"{CORPUS}:{line}:4: error: deadlock in program (0, 0, 0): its only live task is blocked" in err
    assert "note: found by 'tlxc check --run' on the interpreter under the default schedule" in err


def test_run_passes_correct_kernels(capsys):
    assert main(["check", str(CORPUS), "--kernel", "ring_rowsum", "--kernel", "pingpong", "--run",
                 "--seeds", "3"]) == 0
    assert capsys.readouterr().err == ""


def test_run_needs_check_inputs(tmp_path, capsys):
    path = tmp_path / "k.py"
    path.write_text((ROOT / "examples" / "ws_vector_add.py").read_text())
    assert main(["check", str(path), "--run"]) == 2
    assert "--run needs a function check_inputs()" in capsys.readouterr().err


# -- the command line ---------------------------------------------------------------------------------
def test_check_prints_each_finding_with_notes_and_exits_1(capsys):
    code = main(["check", str(CORPUS), "--kernel", "ring_rowsum", "-D", "BUG='slot_producer'"])
    err = capsys.readouterr().err.splitlines()
    assert code == 1
    line = _line("# BUG slot_producer")
    assert err[0].startswith(f"{CORPUS}:{line}:20: error: task 'default' (check_kernels.py:{line}) makes its 1st "
                             f"arrival on 'full'")
    assert err[1].strip() == "tlx.barrier_arrive(full[(t + 1) % NUM_STAGES])  # BUG slot_producer"
    assert err[3].startswith(f"{CORPUS}:{_line('# the consumer' + chr(39) + 's wait')}:20: note: task "
                             f"'{fill(CONSUMERS)}.0' waits here")
    assert err[-1] == "note: found by running every loop whose trip count is a runtime value once (schedule: in-order)"


def test_check_reports_every_finding_of_a_kernel(capsys):
    assert main(["check", str(CORPUS), "--kernel", "pingpong", "-D", "BUG='mismatch'"]) == 1
    err = capsys.readouterr().err
    assert err.count(": error: named barrier") == 2      # ids 9 and 10


def test_an_unconsumed_named_arrival_is_an_info_remark(capsys):
    found = findings(C.pingpong, BUG="no_absorb")
    assert [(f.check, f.severity, f.loc.line) for f in found] == [("named.open-round", "info",
                                                                   _line("# the other's turn"))]
    assert found[0].message.startswith("named barrier 9 still has a round open when every task has finished: task "
                                       f"'task@{_line('# the pingpong consumers')}.1' brought 128 of the 256 threads")
    C.pingpong.compile(constexprs={"BUG": "no_absorb"}, stages=("ir.opt",))     # nor does it stop a compile
    assert main(["check", str(CORPUS), "--kernel", "pingpong", "-D", "BUG='no_absorb'"]) == 0   # TLX's idiom
    assert capsys.readouterr().err == ""
    assert main(["check", str(CORPUS), "--kernel", "pingpong", "-D", "BUG='no_absorb'", "--verbose"]) == 0
    assert ": note: named barrier 9 still has a round open" in capsys.readouterr().err


# -- compile-time policy --------------------------------------------------------------------------------
def test_compile_error_carries_the_pass_name():
    with pytest.raises(BarrierError) as info:
        C.ring_rowsum.compile(constexprs={"BUG": "producer_phase"}, stages=("ir.opt",))
    assert info.value.message.startswith("[check-barriers] producer task 'default' waits empty[slot]")
    assert isinstance(info.value, CompilationError)


def test_barrier_checks_can_be_relaxed(monkeypatch, capsys):
    broken = {"BUG": "producer_phase"}
    C.ring_rowsum.compile(constexprs=broken, stages=("ir.opt",), check_barriers=False)
    C.ring_rowsum.compile(constexprs=broken, stages=("ir.opt",), debug_barriers=True)
    assert ": warning: producer task 'default'" in capsys.readouterr().err
    monkeypatch.setenv("TLXC_CHECK_BARRIERS", "warn")
    C.ring_rowsum.compile(constexprs=broken, stages=("ir.opt",))
    assert ": warning: producer task 'default'" in capsys.readouterr().err
    monkeypatch.setenv("TLXC_CHECK_BARRIERS", "0")
    C.ring_rowsum.compile(constexprs=broken, stages=("ir.opt",))
    assert capsys.readouterr().err == ""


def test_resource_errors_are_never_relaxed(monkeypatch):
    monkeypatch.setenv("TLXC_CHECK_BARRIERS", "0")
    with pytest.raises(ResourceError, match="register budgets"):
        C.budgets.compile(constexprs={"BUG": "pool"}, stages=("ir.opt",), check_barriers=False)


def test_the_check_is_cheap():
    sys.path.insert(0, str(ROOT / "examples"))
    from ws_rmsnorm import rmsnorm_ws_kernel
    findings(rmsnorm_ws_kernel, BLOCK=1024, CHUNK=512, NUM_STAGES=3)   # warm up
    start = time.perf_counter()
    for kernel, constexprs in [(rmsnorm_ws_kernel, {"BLOCK": 1024, "CHUNK": 512, "NUM_STAGES": 4}),
                               (C.ring_rowsum, {"NUM_STAGES": 4}), (C.pingpong, {})]:
        findings(kernel, **constexprs)
    assert time.perf_counter() - start < 2.0


# -- TMA and wgmma (descriptor parameters: specialized from small descriptors) ------------------------
def _wgmma_ring_findings(**constexprs):
    import torch

    import tlxc
    from tlxc.check import check_kernel
    from tlxc.compiler import frontend
    from tlxc.frontend.specialize import specialization_from_args
    a = torch.zeros(64, 256, dtype=torch.bfloat16)
    b = torch.zeros(256, 64, dtype=torch.bfloat16)
    descs = {"a_desc": tlxc.TensorDescriptor.from_tensor(a, [64, 64]),
             "b_desc": tlxc.TensorDescriptor.from_tensor(b, [64, 64]),
             "c_desc": tlxc.TensorDescriptor.from_tensor(a, [64, 64])}
    bound = dict(descs, k_tiles=4, BM=64, BN=64, BK=64, NUM_STAGES=2, BUG="")
    bound.update(constexprs)
    module = frontend(C.wgmma_ring, specialization_from_args(C.wgmma_ring, bound))
    return [f for kernel in module.kernels for f in check_kernel(kernel) if f.severity == ERROR]


ASYNC_BROKEN = [
    ("early_release", "race.mma-early-release", "slot released before the MMA that reads it completed",
     "# the A load"),
    ("result_before_wait", "wgmma.result-before-wait", "async_dot result used before async_dot_wait",
     "# BUG result_before_wait"),
    ("expect_small", "barrier.expect-bytes", ("TMA loads deliver 16384 bytes into one phase of 'full'[0] but "
     "barrier_expect_bytes announced 8192"), "# the B load"),
    ("expect_large", "barrier.expect-bytes", ("barrier_expect_bytes posts 16512 bytes on 'full'[0] but the TMA loads "
     "that complete on it in this phase deliver 16384 bytes"), "# BUG expect_large"),
    # a producer that skips its empty wait laps the ring: reported at the consumer's wait
    ("tma_before_empty", "ring.lapped", "a producer must wait for the release of a slot",
     "# the wgmma consumer's wait"),
    # ("no_fence": tlxc inserts the proxy fence itself; tests/test_proxy_fence.py)
]


def test_store_in_flight_at_exit_is_a_note_where_tlxc_waits():
    # PTX does not promise that a CTA's exit waits for its bulk stores; TLX's tutorials end without the
    # wait, so tlxc waits at the kernel's end (rules_tlx.wait_stores_at_exit) and the check only notes it
    from tlxc.check.async_order import check_async_order
    from tlxc.check.findings import INFO
    from tlxc.compiler import frontend
    from tlxc.frontend.specialize import specialization_from_args
    assert _wgmma_ring_findings(BUG="store_in_flight") == []          # no error
    bound = {"a_desc": None, "b_desc": None, "c_desc": None}
    import torch

    import tlxc
    t = torch.zeros(256, 64, dtype=torch.bfloat16)
    bound = {k: tlxc.TensorDescriptor.from_tensor(t, [64, 64]) for k in bound}
    bound.update(k_tiles=4, BM=64, BN=64, BK=64, NUM_STAGES=2, BUG="store_in_flight")
    module = frontend(C.wgmma_ring, specialization_from_args(C.wgmma_ring, bound))
    found = [f for f in check_async_order(module.kernels[0]) if f.check == "tma.store-in-flight-at-exit"]
    assert [(f.severity, f.loc.line) for f in found] == [(INFO, _line("# the TMA store"))]
    assert "tlxc waits for the store's reads at the kernel's end" in found[0].message


def test_wgmma_ring_is_clean():
    assert _wgmma_ring_findings() == []


@pytest.mark.parametrize("bug, check, message, marker", ASYNC_BROKEN, ids=lambda c: c if isinstance(c, str) else "")
def test_tma_and_wgmma_bugs_are_caught(bug, check, message, marker):
    found = _wgmma_ring_findings(BUG=bug)
    assert found, f"{bug}: no finding"
    first = found[0]
    assert (first.check, first.loc.line) == (check, _line(marker)), first.render()
    assert message in first.message, first.render()


def test_warp_group_start_id_places_the_tasks():
    """Explicit warp ranges reorder the tasks into warp order (tlxc packs them: the
    default task's [0, 4), then [4, 8) for the two 2-warp replicas, then [8, 12))."""
    import numpy as np

    from tlxc.interpreter import interpret
    assert findings(C.warp_ranges, "out_ptr=*fp32") == []
    module = C.warp_ranges.compile("out_ptr=*fp32", stages=("ir",)).module
    tasks = next(op for op in module.kernels[0].walk() if op.name == "tlx.async_tasks").task_infos
    first, second = _line("# the first placed task"), _line("# the second placed task")
    assert [(t.line, t.replica) for t in tasks[1:]] == [(first, 0), (first, 1), (second, None)]
    out = np.full(4, np.nan, dtype=np.float32)
    interpret(C.warp_ranges, (1,), (out,))
    assert out.tolist() == [0.0, 1.0, 2.0, 2.0]
    cuda = C.warp_ranges.compile("out_ptr=*fp32", stages=("cuda",)).asm["cuda"]
    assert "__launch_bounds__(384, 1)" in cuda                      # 12 warps


@tlxc.kernel
def related_trips(x_ptr: C.F32, out_ptr: C.F32, n_cols: tl.int32, keep: tl.int32, BLOCK: tl.constexpr = 16):
    """Correct, but beyond the static check: the consumer takes the first tile, sums the
    tiles up to ``used = min(n_tiles, keep)`` and releases the rest unread (as a causal
    attention consumer skips blocks above its diagonal).  Its two loops' trip counts add
    up to the producer's, which the checker cannot see: it pins ``used`` on its own."""
    bufs = tlx.local_alloc((BLOCK,), tl.float32, 2)
    full = tlx.alloc_barriers(2, arrive_count=1)
    empty = tlx.alloc_barriers(2, arrive_count=1)
    n_tiles = tl.cdiv(n_cols, BLOCK)
    used = tl.maximum(tl.minimum(n_tiles, keep), 1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for t in range(n_tiles):
                slot, phase = tlx.get_bufidx_phase(t, 2)
                tlx.barrier_wait(empty[slot], phase ^ 1)
                C._fill(x_ptr, bufs, full, slot, 0, t, n_cols, BLOCK)
        with tlx.async_task(num_warps=4):
            tlx.barrier_wait(full[0], 0)
            acc = tlx.local_load(bufs[0])
            tlx.barrier_arrive(empty[0])
            for t in range(1, used):  # the tiles it sums
                slot, phase = tlx.get_bufidx_phase(t, 2)
                tlx.barrier_wait(full[slot], phase)
                acc += tlx.local_load(bufs[slot])
                tlx.barrier_arrive(empty[slot])
            for t in range(used, n_tiles):  # the tiles it skips
                slot, phase = tlx.get_bufidx_phase(t, 2)
                tlx.barrier_wait(full[slot], phase)
                tlx.barrier_arrive(empty[slot])
            tl.store(out_ptr + tl.arange(0, BLOCK), acc)


def test_related_trip_counts_point_to_run():
    """A known limit: trip counts that are related at run time (one task's two loops add
    up to the other's) are pinned as if independent.  The finding says so, and --run
    (the interpreter) finds the kernel correct."""
    import numpy as np

    from tlxc.check.run import run_kernel
    found = errors(related_trips, "x_ptr=*fp32,out_ptr=*fp32,n_cols=i32,keep=i32")
    assert found and any("cannot relate to each other" in text for text, _ in found[0].notes), found
    x = np.random.default_rng(0).standard_normal(100).astype(np.float32)
    for keep in (1, 3, 50):
        out = np.zeros(16, dtype=np.float32)
        assert run_kernel(related_trips, (1,), (x, out, 100, keep), {}) is None


# -- a TMA / bulk store reads its source until async_descriptor_store_wait (race.tma-store) -----------------
TMA_CORPUS = Path(T.__file__)


def _store_spec(kernel, bug: str):
    import torch

    from tlxc.frontend.specialize import specialization_from_args
    bound = {"out_desc": tlxc.TensorDescriptor.from_tensor(torch.empty(128, 32), [64, 32]), "BM": 64, "BN": 32,
             "BUG": bug}
    if kernel is T.store_then_rewrite:
        bound["in_desc"] = tlxc.TensorDescriptor.from_tensor(torch.empty(64, 32), [64, 32])
    return specialization_from_args(kernel, bound)


STORE_BUGS = [
    (T.store_then_rewrite, "wait_1", "# the rewrite",
     "tlx.async_descriptor_store_wait(1) at kernels_tma.py:{wait} leaves the 1 newest store in flight"),
    (T.store_then_rewrite, "tma_load", "# the refill by TMA",
     "overwrites 'buf'[0] with a TMA load (kernels_tma.py:{line}) while the TMA store of task 'main'"),
    (T.store_handoff, "arrive_first", "# the next owner's rewrite",
     "task 'default' arrives on 'done'[0] at kernels_tma.py:{arrive} before its tlx.async_descriptor_store_wait"),
]


@pytest.mark.parametrize("kernel, bug, marker, message", STORE_BUGS, ids=lambda c: c if isinstance(c, str) else "")
def test_rewriting_a_tma_store_source_before_its_wait_is_caught_statically(kernel, bug, marker, message):
    found = [f for f in check_function(kernel, _store_spec(kernel, bug)) if f.severity == ERROR]
    assert [f.check for f in found] == ["race.tma-store"], [f.render() for f in found]
    line = _line(marker, TMA_CORPUS)
    assert found[0].loc.line == line, found[0].render()
    wait = _line("tlx.async_descriptor_store_wait(1)", TMA_CORPUS)
    arrive = _line("# the early hand-off", TMA_CORPUS)
    assert message.format(line=line, wait=wait, arrive=arrive) in found[0].message, found[0].render()
    store = "# the first TMA store" if kernel is T.store_then_rewrite else "# the handed-off store"
    assert found[0].notes[0][1].line == _line(store, TMA_CORPUS)
    from tlxc.compiler import compile_kernel
    with pytest.raises(BarrierError, match=r"\[check-barriers\] race: .*TMA store"):     # every compile too
        compile_kernel(kernel, _store_spec(kernel, bug), arch="sm_90a", stages=("ir", "ir.opt"))


@pytest.mark.parametrize("kernel", [T.store_then_rewrite, T.store_handoff], ids=lambda k: k.__name__)
def test_waiting_for_the_tma_store_before_the_rewrite_is_clean(kernel):
    import torch
    assert [f.render() for f in check_function(kernel, _store_spec(kernel, "")) if f.severity == ERROR] == []
    out = torch.full((128, 32), float("nan"))
    x = torch.randn(64, 32)
    descs = {"out_desc": tlxc.TensorDescriptor.from_tensor(out, [64, 32])}
    if kernel is T.store_then_rewrite:
        descs["in_desc"] = tlxc.TensorDescriptor.from_tensor(x, [64, 32])
    tlxc.interpret(kernel)[(1,)](**descs, BM=64, BN=32)
    assert torch.equal(out, torch.cat([torch.full((64, 32), 1.0), torch.full((64, 32), 2.0)]))


# -- the interpreted launch runs the same checks ------------------------------------------------------------
def _unwrapped_ring(stages: int = 2, **options):
    """ring_incremental without the phase flip on wrap, on one tile: the ring never wraps at
    this size, so the interpreter's run cannot reveal the bug; the static check can."""
    import torch
    x, out = torch.randn(2, 16), torch.zeros(2)
    tlxc.interpret(K.ring_incremental, **options)[(2,)](x, out, 16, BLOCK=16, NUM_STAGES=stages, FLIP=False)
    return x, out


def test_interpreted_launch_runs_the_static_checks(monkeypatch):
    monkeypatch.delenv("TLXC_CHECK_BARRIERS", raising=False)
    monkeypatch.delenv("TLXC_DEBUG_BARRIERS", raising=False)
    with pytest.raises(BarrierError, match=r"\[check-barriers\] .*phase") as info:
        _unwrapped_ring()
    assert "kernels_ws.py" in info.value.render()
    with pytest.raises(BarrierError):           # a failing check is not remembered as passed
        _unwrapped_ring()


@pytest.mark.parametrize("how, stages", [("warn", 3), ("debug", 4)])
def test_interpreted_launch_warns_under_check_barriers_warn(monkeypatch, capfd, how, stages):
    """As on a compile: the findings are printed once per specialization, and the run goes on."""
    import torch
    monkeypatch.delenv("TLXC_CHECK_BARRIERS", raising=False)
    monkeypatch.delenv("TLXC_DEBUG_BARRIERS", raising=False)
    monkeypatch.setenv(*(("TLXC_CHECK_BARRIERS", "warn") if how == "warn" else ("TLXC_DEBUG_BARRIERS", "1")))
    x, out = _unwrapped_ring(stages)
    assert torch.allclose(out, x.sum(dim=1), rtol=1e-5, atol=1e-5)
    line = _line("# the producer's wait", Path(K.__file__))
    assert f"kernels_ws.py:{line}:16: warning: task 'default'" in capfd.readouterr().err
    monkeypatch.delenv("TLXC_CHECK_BARRIERS", raising=False)
    monkeypatch.delenv("TLXC_DEBUG_BARRIERS", raising=False)
    with pytest.raises(BarrierError):           # the warn run is not served to a default launch
        _unwrapped_ring(stages)


def test_interpreted_launch_skips_the_checks_when_told(monkeypatch, capfd):
    import torch
    monkeypatch.setenv("TLXC_CHECK_BARRIERS", "0")
    x, out = _unwrapped_ring()
    assert torch.allclose(out, x.sum(dim=1), rtol=1e-5, atol=1e-5)
    monkeypatch.delenv("TLXC_CHECK_BARRIERS")
    x, out = _unwrapped_ring(check_barriers=False)
    assert torch.allclose(out, x.sum(dim=1), rtol=1e-5, atol=1e-5)
    assert "check-barriers" not in capfd.readouterr().err
    with pytest.raises(BarrierError):
        _unwrapped_ring()


def test_interpreted_launch_keeps_resource_errors_with_checks_off(monkeypatch):
    """TLXC_CHECK_BARRIERS=0 relaxes barrier findings only, as on a compile."""
    import torch
    monkeypatch.setenv("TLXC_CHECK_BARRIERS", "0")
    with pytest.raises(ResourceError):
        tlxc.interpret(C.many_tasks)[(1,)](torch.zeros(8), REPLICAS=7)
