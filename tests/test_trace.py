"""Pipeline timelines (``tlxc trace``, ``tlxc.trace``): the recorder in the
interpreter and the SVG/HTML renderer, read back from the produced files."""
from __future__ import annotations

import os
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch

import tlxc
from tlxc.cli import main as cli_main
from tlxc.trace_render import COLORS

ROOT = Path(__file__).resolve().parent.parent
RMSNORM = str(ROOT / "examples" / "ws_rmsnorm.py")
PINGPONG = str(ROOT / "examples" / "ws_pingpong.py")
KERNELS_WS = str(ROOT / "tests" / "kernels_ws.py")
SVG = "{http://www.w3.org/2000/svg}"

sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, os.path.dirname(__file__))


def classes(element) -> set[str]:
    return set(element.get("class", "").split())


def find(root, cls: str) -> list:
    return [e for e in root.iter() if cls in classes(e)]


def title(element) -> str:
    node = element.find(f"{SVG}title")
    return node.text if node is not None else ""


def texts(root, cls: str) -> list[str]:
    return ["".join(e.itertext()) for e in find(root, cls)]


def trace_file(tmp_path, capsys, *argv, name="timeline.svg", expect=0):
    out = tmp_path / name
    code = cli_main(["trace", *argv, "-o", str(out)])
    captured = capsys.readouterr()
    assert code == expect, captured.err
    return out, captured.err


@pytest.fixture
def rmsnorm_svg(tmp_path, capsys):
    out, _ = trace_file(tmp_path, capsys, RMSNORM)
    return ET.parse(out).getroot()


# -- the pipeline example ------------------------------------------------------------------


def test_rmsnorm_rows_are_the_tasks(rmsnorm_svg):
    rows = [g.get("data-task") for g in find(rmsnorm_svg, "task-row")]
    assert rows[:2] == ["main", "default"]
    consumers = rows[2:]
    assert len(consumers) == 2 and re.fullmatch(r"task@\d+\.0", consumers[0]), rows
    assert consumers[1] == consumers[0][:-1] + "1"          # the two replicas of one task
    assert [b.get("data-barrier") for b in find(rmsnorm_svg, "barrier-row")] == \
        ["'full'[0]", "'full'[1]", "'empty'[0]", "'empty'[1]"]
    details = texts(rmsnorm_svg, "task-details")
    assert "replica 0" in details[2] and "replica 1" in details[3] and "200 regs" in details[2]


def test_rmsnorm_waits_on_full_and_empty_with_phases(rmsnorm_svg):
    rows = [g.get("data-task") for g in find(rmsnorm_svg, "task-row")]
    waits = [w for w in find(rmsnorm_svg, "wait") if w.tag == f"{SVG}rect"]
    seen = Counter((w.get("data-task"), w.get("data-barrier")[:6], int(w.get("data-phase"))) for w in waits)
    # the producer waits for the consumers to empty each slot ...
    assert seen[("default", "'empty", 0)] == 2
    # ... each consumer for the producer to fill a slot, in both phases of the ring
    for consumer in rows[2:]:
        assert seen[(consumer, "'full'", 0)] >= 1 and seen[(consumer, "'full'", 1)] >= 1
    for w in waits:
        start, end = int(w.get("data-start")), int(w.get("data-end"))
        assert end > start and "waited" in title(w) and "stuck" not in classes(w)
        assert title(w).startswith(f"task '{w.get('data-task')}'") and f"phase {w.get('data-phase')}" in title(w)
    # first waits on an empty slot pass at once (phase 1 of a fresh barrier)
    passes = find(rmsnorm_svg, "wait-pass")
    assert {(p.get("data-task"), p.get("data-barrier"), p.get("data-phase")) for p in passes} >= \
        {("default", "'empty'[0]", "1"), ("default", "'empty'[1]", "1")}


def test_rmsnorm_every_blocked_wait_ends_after_its_phase_completed(rmsnorm_svg):
    done = [(d.get("data-barrier"), int(d.get("data-phase")), int(d.get("data-step")))
            for d in find(rmsnorm_svg, "phase-done")]
    # four items through two slots: every barrier completes phases 0 and 1
    assert sorted((b, p) for b, p, _ in done) == sorted(
        (f"'{name}'[{slot}]", phase) for name in ("full", "empty") for slot in (0, 1) for phase in (0, 1))
    for w in (w for w in find(rmsnorm_svg, "wait") if w.tag == f"{SVG}rect"):
        barrier, parity, resumed = w.get("data-barrier"), int(w.get("data-phase")), int(w.get("data-end"))
        assert any(b == barrier and p % 2 == parity and int(w.get("data-start")) <= step < resumed
                   for b, p, step in done), (barrier, parity, resumed)


def test_rmsnorm_copies_arrives_and_groups(rmsnorm_svg):
    issues = find(rmsnorm_svg, "copy-issue")
    assert len(issues) == 8 and {i.get("data-task") for i in issues} == {"default"}   # 4 items x 2 chunks
    assert all(i.get("data-target").startswith("'rows_buf'[") for i in issues)
    flights = find(rmsnorm_svg, "copy-flight")
    assert len(flights) == 8 and all(int(f.get("data-end")) > int(f.get("data-start")) for f in flights)
    assert "landed in step" in title(flights[0])
    assert len(find(rmsnorm_svg, "commit")) == 4
    assert [g.get("data-phase") for g in find(rmsnorm_svg, "wait-group")] == ["1", "1", "1", "0"]
    arrives = Counter((a.get("data-task"), a.get("data-barrier")[:6]) for a in find(rmsnorm_svg, "arrive"))
    rows = [g.get("data-task") for g in find(rmsnorm_svg, "task-row")]
    assert arrives == Counter({("default", "'full'"): 4, (rows[2], "'empty"): 4, (rows[3], "'empty"): 4})
    assert len(find(rmsnorm_svg, "arrival")) == 12                       # ticks on the barrier rows


def test_rmsnorm_header_legend_and_computation(rmsnorm_svg):
    assert texts(rmsnorm_svg, "title")[0].startswith("rmsnorm_ws_kernel — program (0, 0, 0)")
    assert re.fullmatch(r"finished in \d+ steps", texts(rmsnorm_svg, "status")[0])
    runs = find(rmsnorm_svg, "run")
    assert {r.get("data-task") for r in runs} == {"main", "default", *[g.get("data-task") for g in
                                                                       find(rmsnorm_svg, "task-row")][2:]}
    assert any("shared load" in title(r) and "global store" in title(r) for r in runs)
    legend = " ".join(texts(rmsnorm_svg, "legend-label"))
    for words in ("computes", "waits on an mbarrier", "cp.async issued", "arrives", "phase completed"):
        assert words in legend
    assert not find(rmsnorm_svg, "stuck") and not find(rmsnorm_svg, "diagnosis")


def test_rmsnorm_html(tmp_path, capsys):
    out, err = trace_file(tmp_path, capsys, RMSNORM, name="timeline.html")
    assert "wrote" in err and "4 tasks" in err

    class Collect(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tags, self.titles, self._in_title = [], [], False

        def handle_starttag(self, tag, attrs):
            self.tags.append((tag, dict(attrs)))
            self._in_title = tag == "title"

        def handle_data(self, data):
            if self._in_title:
                self.titles.append(data)

        def handle_endtag(self, tag):
            self._in_title = False

    page = Collect()
    page.feed(out.read_text())
    tags = page.tags
    assert ("div", {"id": "tip"}) in tags and any(tag == "script" for tag, _ in tags)
    assert any(tag == "svg" and "timeline" in a.get("class", "") for tag, a in tags)
    rows = [a["data-task"] for tag, a in tags if "task-row" in a.get("class", "")]
    assert rows[:2] == ["main", "default"] and len(rows) == 4
    assert sum(1 for _, a in tags if a.get("class") == "wait") >= 6
    assert any("waits for phase 0 of barrier 'empty'[0]" in t for t in page.titles)


# -- deadlocks and errors -------------------------------------------------------------------


def test_deadlock_is_drawn_with_stuck_waits_and_diagnosis(tmp_path, capsys):
    out, err = trace_file(tmp_path, capsys, KERNELS_WS, "--kernel", "rowsum_ws", "-D", "BUG=2", expect=1)
    assert "deadlock in program (0, 0, 0): all 4 live tasks are blocked" in err
    root = ET.parse(out).getroot()
    assert texts(root, "status")[0].startswith("DEADLOCK after")
    consumers = [g.get("data-task") for g in find(root, "task-row")][2:]
    stuck = {(s.get("data-task"), s.get("data-barrier"), s.get("data-phase")) for s in find(root, "stuck")}
    assert stuck == {("main", None, None), ("default", "'empty'[0]", "0"),
                     (consumers[0], "'full'[0]", "1"), (consumers[1], "'full'[0]", "1")}
    steps = int(re.search(r"after (\d+) steps", texts(root, "status")[0]).group(1))
    for rect in find(root, "stuck"):
        assert rect.get("fill") == COLORS["stuck"] and int(rect.get("data-end")) == steps + 2
        assert title(rect).startswith("stuck at the deadlock")
    assert len(find(root, "deadlock-line")) == 1
    diagnosis = texts(root, "diagnosis-line")
    assert diagnosis[0] == "error: deadlock in program (0, 0, 0): all 4 live tasks are blocked"
    body = " ".join(line.strip() for line in diagnosis)
    assert "note: task 'default' waits for phase 0 of barrier 'empty'[0]" in body
    assert "the barrier is in phase 0 (0 phases completed), 2 of 2 arrivals pending" in body
    assert "tlx.barrier_wait(empty[slot], phase ^ 1)" in body               # the source line
    # before the deadlock the ring filled: both slots were handed to the consumers once
    assert {(d.get("data-barrier"), d.get("data-phase")) for d in find(root, "phase-done")} == \
        {("'full'[0]", "0"), ("'full'[1]", "0")}


def test_deadlock_api_returns_the_events():
    import kernels_ws as K
    x = torch.randn(16, 96)
    result = tlxc.trace(K.rowsum_ws, (1,), (x, torch.zeros(16), 16, 96),
                        {"BLOCK_R": 16, "BLOCK_C": 32, "NUM_STAGES": 2, "BUG": 1})
    assert result.deadlocked and "deadlock" in result.error.message
    stuck = [e for e in result.events if e.stuck]
    consumers = [t.name for t in result.tasks][2:]
    assert {(e.task, e.barrier, e.phase) for e in stuck} == {
        ("main", None, None), ("default", "'empty'[0]", 0), (consumers[0], "'full'[0]", 0),
        (consumers[1], "'full'[0]", 0)}
    assert all(e.end == result.steps + 2 for e in stuck)


def test_race_is_drawn_at_its_step(tmp_path, capsys):
    out, err = trace_file(tmp_path, capsys, KERNELS_WS, "--kernel", "rowsum_ws", "-D", "BUG=4", expect=1)
    assert "race in program" in err
    root = ET.parse(out).getroot()
    errors = find(root, "error")
    consumers = [g.get("data-task") for g in find(root, "task-row")][2:]
    assert len(errors) == 1 and errors[0].get("data-task") == consumers[0]
    assert "race" in title(errors[0]) and texts(root, "status")[0].startswith("stopped by an error")
    assert any(f.get("data-end") is None for f in find(root, "copy-flight"))   # the copy still in flight


# -- named barriers ----------------------------------------------------------------------------


def test_pingpong_named_barriers(tmp_path, capsys):
    out, _ = trace_file(tmp_path, capsys, PINGPONG)
    root = ET.parse(out).getroot()
    assert [b.get("data-barrier") for b in find(root, "barrier-row")] == ["named barrier 9", "named barrier 10"]
    rounds = Counter(r.get("data-barrier") for r in find(root, "round-done"))
    assert rounds == {"named barrier 9": 5, "named barrier 10": 4}     # 4 turns each + consumer 0's last sync
    waits = [w for w in find(root, "named_wait") if w.tag == f"{SVG}rect"]
    assert waits and {w.get("data-barrier") for w in waits} == {"named barrier 9", "named barrier 10"}
    # the turns alternate: the rounds of barrier 9 and 10 interleave in time
    order = sorted((int(r.get("data-step")), r.get("data-barrier")[-2:].strip()) for r in find(root, "round-done"))
    assert [b for _, b in order] == ["9", "10", "9", "10", "9", "10", "9", "10", "9"]


# -- determinism, the API, zero cost -------------------------------------------------------------


@pytest.mark.parametrize("seed", [None, 3])
@pytest.mark.parametrize("suffix", [".svg", ".html"])
def test_same_seed_same_bytes(tmp_path, capsys, seed, suffix):
    seed_args = [] if seed is None else ["--seed", str(seed)]
    first, _ = trace_file(tmp_path, capsys, RMSNORM, *seed_args, name=f"a{suffix}")
    second, _ = trace_file(tmp_path, capsys, RMSNORM, *seed_args, name=f"b{suffix}")
    assert first.read_bytes() == second.read_bytes()


def test_seeds_change_the_interleaving_not_the_result(tmp_path):
    import ws_rmsnorm
    grid, args, kwargs = ws_rmsnorm.check_inputs()
    pictures = []
    for seed in (None, 1, 2):
        out = args[0]
        out.fill_(float("nan"))
        result = tlxc.trace(ws_rmsnorm.rmsnorm_ws_kernel, grid, args, kwargs, tmp_path / f"s{seed}.svg", seed=seed)
        assert result.error is None and result.seed == seed
        x, weight = args[1].float(), args[2].float()
        expected = x * torch.rsqrt((x * x).mean(1, keepdim=True) + 1e-6) * weight
        torch.testing.assert_close(out.float(), expected, rtol=2e-2, atol=2e-2)
        pictures.append((tmp_path / f"s{seed}.svg").read_bytes())
    assert len(set(pictures)) == 3


def test_api_events_and_no_file(tmp_path):
    import ws_rmsnorm
    grid, args, kwargs = ws_rmsnorm.check_inputs()
    result = tlxc.trace(ws_rmsnorm.rmsnorm_ws_kernel, grid, args, kwargs)
    assert [t.name for t in result.tasks][:2] == ["main", "default"] and result.steps > 0
    kinds = Counter(e.kind for e in result.events)
    assert kinds["copy"] == 8 and kinds["phase"] == 8 and kinds["arrive"] == 12 and kinds["commit"] == 4
    assert [e.seq for e in result.events] == list(range(len(result.events)))
    with pytest.raises(ValueError, match=r"\.html or \.svg"):
        tlxc.trace(ws_rmsnorm.rmsnorm_ws_kernel, grid, args, kwargs, tmp_path / "t.png")


def test_untraced_runs_use_the_bare_rules():
    """Tracing costs nothing when off: plain runs execute the registry's rules."""
    import ws_rmsnorm

    from tlxc.interpreter import RULES, interpret
    from tlxc.interpreter.launch import _RUNNERS
    grid, args, kwargs = ws_rmsnorm.check_inputs()
    tlxc.trace(ws_rmsnorm.rmsnorm_ws_kernel, grid, args, kwargs)
    interpret(ws_rmsnorm.rmsnorm_ws_kernel, grid, args, kwargs)
    runners = list(_RUNNERS[ws_rmsnorm.rmsnorm_ws_kernel].values())
    plans = [plan for runner in runners for plan in runner.plans.blocks.values()]
    assert plans and all(fn is RULES[op.name].fn for plan in plans for fn, _, op, _, _ in plan.steps)


# -- the command line ----------------------------------------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["examples/vector_add.py"], "has no check_inputs()"),
    (["tests/kernels_ws.py"], "defines several kernels"),
    (["tests/kernels_ws.py", "--kernel", "nope"], "has no kernel named 'nope'"),
    (["tests/kernels_ws.py", "--kernel", "rowsum_ws", "-D", "NOPE=1"], "-D names NOPE"),
    (["tests/kernels_ws.py", "--kernel", "rowsum_ws", "--program", "1"], "program (1, 0, 0) is not in the grid"),
    (["tests/kernels_ws.py", "--kernel", "rowsum_ws", "--grid", "a"], "--grid expects"),
])
def test_command_line_errors(tmp_path, capsys, argv, message):
    argv = [str(ROOT / argv[0]), *argv[1:]]
    code = cli_main(["trace", *argv, "-o", str(tmp_path / "t.svg")])
    assert code == 2 and message in capsys.readouterr().err


def test_output_must_be_html_or_svg(tmp_path, capsys):
    assert cli_main(["trace", RMSNORM, "-o", str(tmp_path / "t.png")]) == 2
    assert ".html or .svg" in capsys.readouterr().err


def test_grid_and_program_options(tmp_path, capsys):
    out, _ = trace_file(tmp_path, capsys, RMSNORM, "--grid", "2", "--program", "1")
    root = ET.parse(out).getroot()
    assert texts(root, "title")[0].startswith("rmsnorm_ws_kernel — program (1, 0, 0) of grid (2, 1, 1)")
    # two programs share the four items: program 1 copies items 1 and 3
    assert len(find(root, "copy-issue")) == 4


def test_max_steps_stops_the_picture(tmp_path, capsys):
    out, err = trace_file(tmp_path, capsys, RMSNORM, "--max-steps", "10", expect=1)
    assert "did not finish within 10 scheduling steps" in err
    root = ET.parse(out).getroot()
    assert "did not finish within 10" in " ".join(texts(root, "diagnosis-line"))


def test_a_cluster_is_traced_with_every_cta(tmp_path):
    """With ctas_per_cga the cluster holding the program runs (its CTAs share one
    scheduler), and the remote arrivals name the peer's barrier."""
    import kernels_cluster as KC
    bm, bn = 16, 32
    x = torch.randn(4 * bm, bn)
    out = torch.empty(8 * bm, bn)
    desc = tlxc.TensorDescriptor.from_tensor(x, [bm, bn])
    result = tlxc.trace(KC.multicast_exchange, (4,), (desc, out), {"BM": bm, "BN": bn, "ctas_per_cga": (2,)},
                        tmp_path / "cluster.svg", program=(3,))
    assert result.error is None
    assert [t.name for t in result.tasks] == ["main of CTA 0", "main of CTA 1"]
    arrives = [e.text for e in result.events if e.kind == "arrive"]
    assert any("arrives on barrier 'done'[0] of CTA 1" in text for text in arrives), arrives
    assert torch.equal(out[4 * bm:], torch.cat([x[2 * bm:], x[2 * bm:]]))     # the traced pair's rows
    svg = (tmp_path / "cluster.svg").read_text()
    assert "<svg" in svg and "main of CTA 1" in svg
