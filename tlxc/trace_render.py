"""Pipeline timelines: run one program in the interpreter and draw what its
warp-group tasks do, step by step (``tlxc trace``, ``tlxc.trace``).

    trace = tlxc.trace(kernel, grid, args, kwargs, "timeline.html", seed=None)

One row per task (the kernel body ``main``, then the ``async_task``s in warp
order): when it computes, when it waits on which barrier for which phase and
for how long, its arrives, cp.async issues (with each copy's flight until it
lands), commit/wait groups; below, one row per barrier with its arrivals and
phase completions.  A deadlocked run is drawn up to the deadlock, the stuck
waits in red, with the diagnosis under the chart.

The output is SVG (``.svg``: native tooltips through ``<title>``) or HTML
(``.html``: the same SVG inline, with a tooltip that follows the mouse and
highlighting of everything touching the hovered barrier).  It depends only on
the trace, so the same launch and seed give the same bytes.  Elements carry
``class`` and ``data-*`` attributes (``data-task``, ``data-barrier``,
``data-phase``, ``data-start``, ``data-end``, ``data-line``) so that tests
and tools can read the picture back.
"""
from __future__ import annotations

import os
import textwrap
from collections import defaultdict
from pathlib import Path
from xml.sax.saxutils import escape

from .interpreter.trace import Trace, TraceEvent, TraceTask, trace_launch

# Geometry (pixels).
LEFT = 200            # task and barrier labels
RIGHT = 70            # room for the deadlock label
TOP = 84              # title, subtitle, axis
MARK_LANE = 12        # glyphs above a task's bar
BAR = 16              # the bar band of a task row
COPY_LANE = 4         # one lane of in-flight copies
ROW_GAP = 10
BARRIER_ROW = 20
MAX_COPY_LANES = 6
MIN_WIDTH = 980

COLORS = {
    "run": "#4c78a8", "wait": "#f2a541", "named_wait": "#b279a2", "join": "#c7c2bd", "blocked": "#c7c2bd",
    "stuck": "#d62728", "copy": "#3d9a3d", "arrive": "#222222", "phase": "#17867f", "round": "#8e4f86",
    "error": "#d62728", "text": "#222222", "muted": "#6b6b6b", "grid": "#e6e6e6",
}
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"

STYLE = f"""
text {{ font-family: {FONT}; }}
.mono {{ font-family: {MONO}; }}
.run, .wait, .named_wait, .join, .blocked, .copy-flight, .mark {{ cursor: default; }}
.run:hover, .wait:hover, .named_wait:hover, .join:hover, .blocked:hover, .mark:hover,
.hl {{ stroke: #000; stroke-width: 1.5px; }}
.copy-flight:hover {{ stroke-width: 3px; }}
"""

SCRIPT = """
(function () {
  var tip = document.getElementById("tip");
  var svg = document.querySelector("svg.timeline");
  svg.querySelectorAll("title").forEach(function (t) {
    t.parentNode.setAttribute("data-tip", t.textContent); t.parentNode.removeChild(t);
  });
  var lit = [];
  function clear() { lit.forEach(function (e) { e.classList.remove("hl"); }); lit = []; }
  svg.addEventListener("mousemove", function (ev) {
    var el = ev.target.closest("[data-tip]");
    if (!el) { tip.style.display = "none"; clear(); return; }
    tip.textContent = el.getAttribute("data-tip");
    tip.style.display = "block";
    tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8) + "px";
    tip.style.top = (ev.clientY + 16) + "px";
    clear();
    var bar = el.getAttribute("data-barrier");
    if (bar) {
      svg.querySelectorAll("[data-barrier]").forEach(function (e) {
        if (e.getAttribute("data-barrier") === bar && e.tagName !== "g") { e.classList.add("hl"); lit.push(e); }
      });
    }
  });
  svg.addEventListener("mouseleave", function () { tip.style.display = "none"; clear(); });
})();
"""

PAGE_STYLE = f"""
body {{ font-family: {FONT}; margin: 16px; background: #fff; color: {COLORS['text']}; }}
#tip {{ position: fixed; display: none; max-width: 520px; padding: 6px 8px; background: #fffbe6;
       border: 1px solid #999; border-radius: 4px; font-size: 12px; white-space: pre-wrap;
       pointer-events: none; box-shadow: 0 2px 6px rgba(0,0,0,.2); }}
.scroll {{ overflow-x: auto; }}
"""


# -- the public entry points -----------------------------------------------------------------


def trace(kernel, grid, args: tuple = (), kwargs: dict | None = None, path: str | os.PathLike | None = None, *,
          program: tuple[int, ...] = (0, 0, 0), seed: int | None = None, num_warps: int | None = None,
          max_steps: int | None = 20000, out=None) -> Trace:
    """Run ``program`` of ``kernel[grid](*args, **kwargs)`` on the interpreter,
    draw its timeline into ``path`` (``.html`` or ``.svg``; None: draw
    nothing) and return the ``Trace`` (``.events``, ``.tasks``,
    ``.barriers``, ``.error``).  A deadlock or an error inside the kernel
    does not raise: the timeline stops there and ``Trace.error`` holds it."""
    result = trace_launch(kernel, grid, args, kwargs, program=program, seed=seed, num_warps=num_warps,
                          max_steps=max_steps, out=out)
    if path is not None:
        write_timeline(result, path)
    return result


def write_timeline(result: Trace, path: str | os.PathLike) -> None:
    """Write ``result`` as ``.svg`` or ``.html``, chosen by the extension."""
    suffix = Path(path).suffix.lower()
    if suffix == ".svg":
        text = render_svg(result, standalone=True)
    elif suffix in (".html", ".htm"):
        text = render_html(result)
    else:
        raise ValueError(f"a timeline is written as .html or .svg, not '{suffix or path}'")
    Path(path).write_text(text, encoding="utf-8")


def render_html(result: Trace) -> str:
    """A self-contained page: the SVG inline, a tooltip, barrier highlighting."""
    title = escape(f"tlxc timeline: {result.kernel} {_pid(result.program)}")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{title}</title>\n<style>{PAGE_STYLE}</style>\n</head>\n<body>\n"
            f"<div class=\"scroll\">\n{render_svg(result, standalone=False)}</div>\n"
            f"<div id=\"tip\"></div>\n<script>{SCRIPT}</script>\n</body>\n</html>\n")


def render_svg(result: Trace, standalone: bool = True) -> str:
    return _Drawing(result).render(standalone)


# -- drawing ---------------------------------------------------------------------------------


def _pid(pid) -> str:
    return "(" + ", ".join(str(p) for p in pid) + ")"


def _attr(value) -> str:
    return escape(str(value), {'"': "&quot;"})


def _num(value: float) -> str:
    text = f"{value:.1f}"
    return text.removesuffix(".0")


def _short(label: str | None) -> str:
    """``'full'[1]`` → ``full[1]`` for labels inside bars."""
    return (label or "").replace("'", "")


def _where(loc) -> str:
    if loc is None or loc.line <= 0:
        return ""
    return f"{os.path.basename(loc.file)}:{loc.line}:{loc.col}: "


def _line_of(loc) -> str:
    """A tooltip's last line: ``line 47: tlx.barrier_wait(empty[slot], phase ^ 1)``."""
    if loc is None or loc.line <= 0:
        return ""
    source = loc.source_line()
    return f"\nline {loc.line}" + (f": {source.strip()}" if source else "")


MARK_KINDS = ("wait", "named_wait", "arrive", "expect", "copy", "commit", "wait_group", "named_arrive", "error")


class _Drawing:
    """Lays out one trace and emits its SVG elements."""

    def __init__(self, result: Trace):
        self.trace = result
        # Columns: one per step, plus the deadlock's (stuck waits end in it).
        self.steps = max([result.steps] + [e.end - 1 for e in result.events])
        self.step_width = max(4.0, min(48.0, round(1100.0 / max(self.steps, 1) * 2) / 2))
        self.width = max(LEFT + self.steps * self.step_width + RIGHT, MIN_WIDTH)
        self.parts: list[str] = []
        self.mark_x: dict[int, float] = {}           # event seq -> x of its mark
        self.copy_lanes = {task.name: self._assign_copy_lanes(task.name) for task in result.tasks}
        self._place_marks()

    # -- coordinates ---------------------------------------------------------------
    def x(self, step: float) -> float:
        return LEFT + (step - 1) * self.step_width

    def _is_mark(self, event: TraceEvent) -> bool:
        if event.kind in ("wait", "named_wait"):
            return not event.blocked
        return event.kind in MARK_KINDS

    def _place_marks(self) -> None:
        """Marks of one task in one step are spread over the step, in order."""
        groups: dict[tuple, list[TraceEvent]] = defaultdict(list)
        for event in self.trace.events:
            if event.task is not None and self._is_mark(event):
                groups[(event.task, event.start)].append(event)
        for (_, step), events in groups.items():
            for k, event in enumerate(events):
                self.mark_x[event.seq] = self.x(step) + self.step_width * (k + 1) / (len(events) + 1)
        # A phase completion sits on the arrival that completed it (if any).
        last_arrival: dict[tuple, float] = {}
        for event in self.trace.events:
            if event.kind in ("arrive", "expect", "named_arrive", "named_wait") and event.seq in self.mark_x:
                last_arrival[(event.barrier, event.start)] = self.mark_x[event.seq]
            elif event.kind in ("phase", "round"):
                self.mark_x[event.seq] = last_arrival.get((event.barrier, event.start),
                                                          self.x(event.start) + self.step_width / 2)

    def _assign_copy_lanes(self, task: str) -> dict[int, int]:
        """Greedy lanes so that copies in flight at once do not overlap."""
        lanes: list[int] = []            # end step of the last copy in each lane
        assigned = {}
        for event in self.trace.events:
            if event.kind != "copy" or event.task != task:
                continue
            for lane, end in enumerate(lanes):
                if end < event.start:
                    lanes[lane] = event.end
                    assigned[event.seq] = lane
                    break
            else:
                lane = min(len(lanes), MAX_COPY_LANES - 1)
                if lane == len(lanes):
                    lanes.append(event.end)
                else:
                    lanes[lane] = max(lanes[lane], event.end)
                assigned[event.seq] = lane
        return assigned

    def _row_height(self, task: str) -> float:
        lanes = self.copy_lanes.get(task) or {}
        band = (max(lanes.values()) + 1) * COPY_LANE + 4 if lanes else 0
        return MARK_LANE + BAR + band + ROW_GAP

    # -- emitting --------------------------------------------------------------------
    def add(self, tag: str, attrs: dict, title: str | None = None, text: str | None = None) -> None:
        if tag == "text" and "fill" not in attrs:
            muted = "muted" in attrs.get("class", "").split()
            attrs = {**attrs, "fill": COLORS["muted"] if muted else COLORS["text"]}
        attributes = " ".join(f'{k.replace("_", "-")}="{_attr(v)}"' for k, v in attrs.items() if v is not None)
        inner = ""
        if title is not None:
            inner += f"<title>{escape(title)}</title>"
        if text is not None:
            inner += escape(text)
        self.parts.append(f"<{tag} {attributes}>{inner}</{tag}>" if inner else f"<{tag} {attributes}/>")

    def render(self, standalone: bool) -> str:
        y = self._header()
        y = self._task_rows(y)
        y = self._barrier_rows(y)
        y = self._legend(y + 10)
        y = self._diagnosis(y)
        height = y + 16
        head = ""
        if standalone:
            head = '<?xml version="1.0" encoding="UTF-8"?>\n'
        svg_open = (f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{_num(self.width)}" '
                    f'height="{_num(height)}" viewBox="0 0 {_num(self.width)} {_num(height)}" font-size="11">\n')
        background = (f'<rect class="background" x="0" y="0" width="{_num(self.width)}" height="{_num(height)}" '
                      f'fill="#ffffff"/>\n')
        return (head + svg_open + f"<style>{STYLE}</style>\n" + background
                + "\n".join(self.parts) + "\n</svg>\n")

    # -- header and axis -------------------------------------------------------------
    def _header(self) -> float:
        t = self.trace
        schedule = ("round-robin schedule (seed=None)" if t.seed is None
                    else f"seeded interleaving (seed={t.seed})")
        self.add("text", {"class": "title", "x": 12, "y": 22, "font_size": 15, "font_weight": "bold"},
                 text=f"{t.kernel} — program {_pid(t.program)} of grid {_pid(t.grid)}")
        if t.error is None:
            status, color = f"finished in {t.steps} steps", COLORS["phase"]
        elif t.deadlocked:
            status, color = f"DEADLOCK after {t.steps} steps", COLORS["stuck"]
        else:
            status, color = f"stopped by an error in step {t.steps}", COLORS["stuck"]
        self.add("text", {"class": "status", "x": 12, "y": 41, "font_size": 12, "font_weight": "bold",
                          "fill": color}, text=status)
        self.add("text", {"class": "subtitle muted", "x": 12 + 7.5 * len(status) + 14, "y": 41, "font_size": 11},
                 text=f"{schedule}; time is the interpreter's scheduling step: one task runs, or one copy "
                      f"lands, per step")
        axis_y = TOP - 12
        tick = self._tick()
        grid_top, grid_bottom = TOP - 4, self._content_bottom()
        for step in range(1, self.trace.steps + 1):
            if step % tick and step != 1 or step != 1 and step < 1 + tick / 2:
                continue
            x = self.x(step)
            self.add("line", {"class": "grid", "x1": _num(x), "y1": grid_top, "x2": _num(x), "y2": _num(grid_bottom),
                              "stroke": COLORS["grid"], "stroke_width": 1})
            self.add("text", {"class": "tick muted", "x": _num(x + 2), "y": axis_y, "font_size": 10},
                     text=str(step))
        self.add("text", {"class": "axis-label muted", "x": 12, "y": axis_y, "font_size": 10}, text="step")
        return TOP

    def _tick(self) -> int:
        for tick in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000):
            if tick * self.step_width >= 34:
                return tick
        return 20000

    def _content_bottom(self) -> float:
        rows = sum(self._row_height(task.name) for task in self.trace.tasks)
        barriers = (len(self.trace.barriers) * BARRIER_ROW + 20) if self.trace.barriers else 0
        return TOP + rows + barriers

    # -- task rows ---------------------------------------------------------------------
    def _task_rows(self, y: float) -> float:
        by_task: dict[str, list[TraceEvent]] = defaultdict(list)
        for event in self.trace.events:
            if event.task is not None:
                by_task[event.task].append(event)
        for task in self.trace.tasks:
            height = self._row_height(task.name)
            self.parts.append(f'<g class="task-row" data-task="{_attr(task.name)}">')
            self._task_label(task, y)
            events = by_task.get(task.name, [])
            self._runs(task, [e for e in events if e.kind == "run"], y)
            for event in events:
                if event.kind in ("wait", "named_wait", "join", "blocked") and event.blocked:
                    self._wait_bar(event, y)
            for event in events:
                if event.kind == "copy":
                    self._copy(event, y)
            for event in events:
                if event.seq in self.mark_x:
                    self._mark(event, self.mark_x[event.seq], y)
            self.parts.append("</g>")
            y += height
        return y

    def _task_label(self, task: TraceTask, y: float) -> None:
        details = []
        if task.name == "main":
            details.append("kernel body")
        elif task.name == "default":
            details.append("default task")
        elif task.replica is not None and "(replica" in task.title:
            details.append(f"replica {task.replica}")
        if task.warps is not None:
            details.append(f"{task.warps} warps")
        if task.registers:
            details.append(f"{task.registers} regs")
        self.add("text", {"class": "task-name", "x": 12, "y": _num(y + MARK_LANE + 8), "font_size": 12,
                          "font_weight": "bold"}, text=task.name)
        self.add("text", {"class": "task-details muted", "x": 12, "y": _num(y + MARK_LANE + 21), "font_size": 10},
                 text=" · ".join(details))
        self.add("line", {"class": "row-base", "x1": LEFT, "y1": _num(y + MARK_LANE + BAR / 2),
                          "x2": _num(self.x(self.steps + 1)), "y2": _num(y + MARK_LANE + BAR / 2),
                          "stroke": "#d0d0d0", "stroke_width": 1})

    def _runs(self, task: TraceTask, runs: list[TraceEvent], y: float) -> None:
        """Consecutive steps of a task are drawn as one bar."""
        spans: list[list[TraceEvent]] = []
        for run in runs:
            if spans and spans[-1][-1].end == run.start:
                spans[-1].append(run)
            else:
                spans.append([run])
        for span in spans:
            start, end = span[0].start, span[-1].end
            ops: dict[str, int] = defaultdict(int)
            lines = [line for run in span for line in run.lines]
            for run in span:
                for name, n in run.ops.items():
                    ops[name] += n
            total = sum(ops.values())
            notable = ", ".join(f"{n} {name}" for name, n in sorted(ops.items()) if name != "other")
            steps = f"step {start}" if end - start == 1 else f"steps {start}–{end - 1}"
            where = f" at lines {min(lines)}–{max(lines)}" if lines else ""
            title = f"task '{task.name}' computes, {steps}: {total} op(s){where}" + (f" ({notable})" if notable else "")
            self.add("rect", {"class": "run", "data_task": task.name, "data_start": start, "data_end": end,
                              "x": _num(self.x(start)), "y": _num(y + MARK_LANE),
                              "width": _num((end - start) * self.step_width), "height": BAR,
                              "fill": COLORS["run"]}, title=title)

    def _wait_bar(self, event: TraceEvent, y: float) -> None:
        kind = "stuck" if event.stuck else event.kind
        x0, x1 = self.x(event.start), self.x(event.end)
        width = max(x1 - x0, 2.0)
        classes = f"{event.kind}" + (" stuck" if event.stuck else "")
        self.add("rect", {"class": classes, "data_task": event.task, "data_barrier": event.barrier,
                          "data_phase": event.phase, "data_start": event.start, "data_end": event.end,
                          "data_line": event.line, "x": _num(x0), "y": _num(y + MARK_LANE + 1),
                          "width": _num(width), "height": BAR - 2, "rx": 2, "fill": COLORS[kind],
                          "stroke": "#8b0000" if event.stuck else None,
                          "stroke_width": 1.5 if event.stuck else None},
                 title=event.text + _line_of(event.loc))
        for label in self._wait_labels(event):
            if len(label) * 6.2 + 6 <= width:
                fill = "#ffffff" if event.stuck else COLORS["text"]
                self.add("text", {"class": "wait-label", "x": _num(x0 + 4), "y": _num(y + MARK_LANE + 12),
                                  "font_size": 10, "fill": fill, "pointer_events": "none"}, text=label)
                break

    def _wait_labels(self, event: TraceEvent) -> list[str]:
        """Labels for a wait bar, longest first: the first that fits is drawn."""
        if event.kind == "wait":
            what = f"{_short(event.barrier)} φ{event.phase}"
        elif event.kind == "named_wait" and event.barrier:
            what = f"bar.sync {event.barrier.split()[-1]}"
        elif event.kind == "join":
            what = "join"
        else:
            what = "blocked"
        if event.stuck:
            return [f"STUCK {what}", what, "STUCK"]
        steps = event.end - event.start
        return [f"{what} · {steps} step{'s' if steps != 1 else ''}", what]

    def _copy(self, event: TraceEvent, y: float) -> None:
        lane = self.copy_lanes[event.task].get(event.seq, 0)
        ly = y + MARK_LANE + BAR + 4 + lane * COPY_LANE
        x0 = self.mark_x.get(event.seq, self.x(event.start))
        landed = event.end > event.start      # a copy lands in a later step than it is issued in
        x1 = self.x(event.end) + self.step_width / 2 if landed else self.x(self.steps + 1)
        x1 = max(x1, x0 + 2)
        attrs = {"class": "copy-flight", "data_task": event.task, "data_start": event.start,
                 "data_end": event.end if landed else None, "data_line": event.line,
                 "x1": _num(x0), "y1": _num(ly), "x2": _num(x1), "y2": _num(ly),
                 "stroke": COLORS["copy"], "stroke_width": 2,
                 "stroke_dasharray": None if landed else "3 2"}
        self.add("line", attrs, title=event.text + _line_of(event.loc))
        if landed:
            self.add("circle", {"class": "copy-land", "data_task": event.task, "data_step": event.end,
                                "cx": _num(x1), "cy": _num(ly), "r": 2, "fill": COLORS["copy"]},
                     title=event.text + _line_of(event.loc))

    def _mark(self, event: TraceEvent, x: float, y: float) -> None:
        top, bottom = y + 1, y + MARK_LANE - 2
        mid = (top + bottom) / 2
        common = {"data_task": event.task, "data_barrier": event.barrier, "data_phase": event.phase,
                  "data_step": event.start, "data_line": event.line}
        title = event.text + _line_of(event.loc)
        kind = event.kind
        if kind in ("arrive", "expect", "named_arrive"):
            color = COLORS["round"] if kind == "named_arrive" else COLORS["arrive"]
            fill = "#ffffff" if kind == "expect" else color
            d = f"M{_num(x - 4)},{_num(bottom)} L{_num(x + 4)},{_num(bottom)} L{_num(x)},{_num(top)} Z"
            self.add("path", {"class": f"mark {kind.replace('_', '-')}", **common, "d": d, "fill": fill,
                              "stroke": color, "stroke_width": 1}, title=title)
        elif kind == "copy":
            d = f"M{_num(x - 4)},{_num(top)} L{_num(x + 4)},{_num(top)} L{_num(x)},{_num(bottom)} Z"
            self.add("path", {"class": "mark copy-issue", **common, "data_target": event.target, "d": d,
                              "fill": COLORS["copy"]}, title=title)
        elif kind == "commit":
            self.add("rect", {"class": "mark commit", **common, "x": _num(x - 1), "y": _num(top),
                              "width": 2, "height": _num(bottom - top), "fill": COLORS["copy"]}, title=title)
        elif kind == "wait_group":
            d = (f"M{_num(x - 3.5)},{_num(top)} L{_num(x - 3.5)},{_num(bottom)} L{_num(x + 3.5)},{_num(bottom)} "
                 f"L{_num(x + 3.5)},{_num(top)}")
            self.add("path", {"class": "mark wait-group", **common, "d": d, "fill": "none",
                              "stroke": COLORS["copy"], "stroke_width": 1.5}, title=title)
        elif kind in ("wait", "named_wait"):
            color = COLORS["wait"] if kind == "wait" else COLORS["named_wait"]
            self.add("circle", {"class": f"mark {kind.replace('_', '-')}-pass", **common, "cx": _num(x),
                                "cy": _num(mid), "r": 3.5, "fill": color, "stroke": "#7a5200", "stroke_width": 0.8},
                     title=title)
        elif kind == "error":
            by = y + MARK_LANE + BAR / 2
            d = (f"M{_num(x - 6)},{_num(by - 6)} L{_num(x + 6)},{_num(by + 6)} "
                 f"M{_num(x - 6)},{_num(by + 6)} L{_num(x + 6)},{_num(by - 6)}")
            self.add("path", {"class": "mark error", **common, "d": d, "stroke": COLORS["error"],
                              "stroke_width": 3, "fill": "none"}, title=title)

    # -- barrier rows --------------------------------------------------------------------
    def _barrier_rows(self, y: float) -> float:
        if not self.trace.barriers:
            return y
        self.add("text", {"class": "section muted", "x": 12, "y": _num(y + 14), "font_size": 10,
                          "font_weight": "bold"}, text="BARRIERS")
        y += 20
        arrivals = defaultdict(list)
        completions = defaultdict(list)
        for event in self.trace.events:
            if event.kind in ("arrive", "expect", "named_arrive") or (event.kind == "named_wait"):
                arrivals[event.barrier].append(event)
            elif event.kind in ("phase", "round"):
                completions[event.barrier].append(event)
        for barrier in self.trace.barriers:
            mid = y + BARRIER_ROW / 2
            self.parts.append(f'<g class="barrier-row" data-barrier="{_attr(barrier.label)}">')
            self.add("text", {"class": "barrier-name", "x": 12, "y": _num(mid + 4), "font_size": 11},
                     text=barrier.label)
            if barrier.kind == "mbarrier":
                self.add("text", {"class": "barrier-details muted", "x": LEFT - 10, "y": _num(mid + 4),
                                  "font_size": 9.5, "text_anchor": "end"}, text=f"arrive count {barrier.arrive_count}")
            self.add("line", {"class": "row-base", "x1": LEFT, "y1": _num(mid), "x2": _num(self.x(self.steps + 1)),
                              "y2": _num(mid), "stroke": "#bdbdbd", "stroke_width": 1})
            for event in arrivals[barrier.label]:
                x = self.mark_x.get(event.seq)
                if x is None:       # a bar.sync that blocked: it arrived at the end of the step before
                    x = self.x(event.start) - min(3.0, self.step_width / 4)
                self.add("line", {"class": "arrival", "data_barrier": barrier.label, "data_task": event.task,
                                  "data_step": event.start, "x1": _num(x), "y1": _num(mid - 5), "x2": _num(x),
                                  "y2": _num(mid + 5), "stroke": "#555555", "stroke_width": 1.5},
                         title=event.text + _line_of(event.loc))
            for event in completions[barrier.label]:
                self._completion(event, self.mark_x[event.seq], mid)
            self.parts.append("</g>")
            y += BARRIER_ROW
        return y

    def _completion(self, event: TraceEvent, x: float, mid: float) -> None:
        color = COLORS["phase"] if event.kind == "phase" else COLORS["round"]
        d = f"M{_num(x)},{_num(mid - 6)} L{_num(x + 6)},{_num(mid)} L{_num(x)},{_num(mid + 6)} L{_num(x - 6)},{_num(mid)} Z"
        self.add("path", {"class": f"mark {'phase-done' if event.kind == 'phase' else 'round-done'}",
                          "data_barrier": event.barrier, "data_phase": event.phase, "data_step": event.start,
                          "d": d, "fill": color, "stroke": "#ffffff", "stroke_width": 1}, title=event.text)
        if self.step_width >= 8:
            self.add("text", {"class": "phase-index", "x": _num(x + 7), "y": _num(mid - 3), "font_size": 9,
                              "fill": color, "pointer_events": "none"}, text=str(event.phase))

    # -- legend and diagnosis ------------------------------------------------------------
    def _legend(self, y: float) -> float:
        present = {e.kind for e in self.trace.events}
        present |= {"pass" for e in self.trace.events if e.kind == "wait" and not e.blocked}
        present |= {"stuck" for e in self.trace.events if e.stuck}
        present |= {"blocked-wait" for e in self.trace.events if e.kind == "wait" and e.blocked}
        items = [
            ("run", "computes (the task ran in that step)", True),
            ("blocked-wait", "waits on an mbarrier (barrier, phase parity φ)", True),
            ("pass", "wait that passed at once", "pass" in present),
            ("named_wait", "waits at a named barrier", "named_wait" in present),
            ("join", "waits for its tasks (join)", "join" in present),
            ("stuck", "stuck at the deadlock", "stuck" in present),
            ("arrive", "arrives", "arrive" in present),
            ("expect", "expect-bytes + arrive", "expect" in present),
            ("named_arrive", "named-barrier arrive", "named_arrive" in present),
            ("copy", "cp.async issued → in flight → landed", "copy" in present),
            ("commit", "commit group", "commit" in present),
            ("wait_group", "async_load_wait_group", "wait_group" in present),
            ("phase", "barrier phase completed (its index)", "phase" in present),
            ("round", "named-barrier round completed", "round" in present),
            ("error", "error", "error" in present),
        ]
        x, row_y = 12.0, y + 12
        self.add("text", {"class": "section muted", "x": 12, "y": _num(y), "font_size": 10, "font_weight": "bold"},
                 text="LEGEND")
        row_y += 4
        self.parts.append('<g class="legend">')
        for key, label, shown in items:
            if not shown:
                continue
            width = 34 + len(label) * 6.0
            if x + width > self.width - 12:
                x, row_y = 12.0, row_y + 18
            self._legend_glyph(key, x, row_y)
            self.add("text", {"class": "legend-label", "x": _num(x + 26), "y": _num(row_y + 4), "font_size": 10.5},
                     text=label)
            x += width
        self.parts.append("</g>")
        return row_y + 18

    def _legend_glyph(self, key: str, x: float, y: float) -> None:
        box = {"x": _num(x), "y": _num(y - 5), "width": 20, "height": 10, "rx": 2}
        if key in ("run", "blocked-wait", "named_wait", "join", "stuck"):
            color = {"run": COLORS["run"], "blocked-wait": COLORS["wait"], "named_wait": COLORS["named_wait"],
                     "join": COLORS["join"], "stuck": COLORS["stuck"]}[key]
            self.add("rect", {"class": "legend-glyph", **box, "fill": color})
        elif key == "pass":
            self.add("circle", {"class": "legend-glyph", "cx": _num(x + 10), "cy": _num(y), "r": 3.5,
                                "fill": COLORS["wait"], "stroke": "#7a5200", "stroke_width": 0.8})
        elif key in ("arrive", "expect", "named_arrive"):
            color = COLORS["round"] if key == "named_arrive" else COLORS["arrive"]
            fill = "#ffffff" if key == "expect" else color
            self.add("path", {"class": "legend-glyph", "d": f"M{_num(x + 6)},{_num(y + 4)} L{_num(x + 14)},"
                              f"{_num(y + 4)} L{_num(x + 10)},{_num(y - 4)} Z", "fill": fill, "stroke": color})
        elif key == "copy":
            self.add("path", {"class": "legend-glyph", "d": f"M{_num(x)},{_num(y - 4)} L{_num(x + 6)},{_num(y - 4)} "
                              f"L{_num(x + 3)},{_num(y + 2)} Z", "fill": COLORS["copy"]})
            self.add("line", {"class": "legend-glyph", "x1": _num(x + 3), "y1": _num(y + 4), "x2": _num(x + 19),
                              "y2": _num(y + 4), "stroke": COLORS["copy"], "stroke_width": 2})
            self.add("circle", {"class": "legend-glyph", "cx": _num(x + 19), "cy": _num(y + 4), "r": 2,
                                "fill": COLORS["copy"]})
        elif key == "commit":
            self.add("rect", {"class": "legend-glyph", "x": _num(x + 9), "y": _num(y - 5), "width": 2, "height": 10,
                              "fill": COLORS["copy"]})
        elif key == "wait_group":
            self.add("path", {"class": "legend-glyph", "d": f"M{_num(x + 6.5)},{_num(y - 5)} L{_num(x + 6.5)},"
                              f"{_num(y + 4)} L{_num(x + 13.5)},{_num(y + 4)} L{_num(x + 13.5)},{_num(y - 5)}",
                              "fill": "none", "stroke": COLORS["copy"], "stroke_width": 1.5})
        elif key in ("phase", "round"):
            color = COLORS[key]
            self.add("path", {"class": "legend-glyph", "d": f"M{_num(x + 10)},{_num(y - 6)} L{_num(x + 16)},{_num(y)} "
                              f"L{_num(x + 10)},{_num(y + 6)} L{_num(x + 4)},{_num(y)} Z", "fill": color})
        elif key == "error":
            self.add("path", {"class": "legend-glyph", "d": f"M{_num(x + 5)},{_num(y - 5)} L{_num(x + 15)},"
                              f"{_num(y + 5)} M{_num(x + 5)},{_num(y + 5)} L{_num(x + 15)},{_num(y - 5)}",
                              "stroke": COLORS["error"], "stroke_width": 3})

    def _diagnosis(self, y: float) -> float:
        error = self.trace.error
        if error is None:
            return y
        if self.trace.deadlocked:
            x = self.x(self.trace.steps + 1)
            self.add("line", {"class": "deadlock-line", "x1": _num(x), "y1": TOP - 4, "x2": _num(x),
                              "y2": _num(self._content_bottom()), "stroke": COLORS["stuck"], "stroke_width": 1.5,
                              "stroke_dasharray": "4 3"})
            self.add("text", {"class": "deadlock-label", "x": _num(x + 4), "y": TOP - 4, "font_size": 10,
                              "font_weight": "bold", "fill": COLORS["stuck"]}, text="deadlock")
        columns = max(int((self.width - 24) / 6.6), 60)
        lines = []
        for kind, text, loc, source in _diagnostic_entries(error):
            for k, piece in enumerate(textwrap.wrap(f"{_where(loc)}{kind}: {text}", columns,
                                                    subsequent_indent="    ")):
                lines.append(("error" if kind == "error" and k == 0 else "text", piece))
            if source:
                lines.append(("source", "    " + source.strip()))
        self.parts.append('<g class="diagnosis">')
        y += 6
        for style, line in lines:
            y += 14
            attrs = {"class": "diagnosis-line mono", "x": 12, "y": _num(y), "font_size": 11,
                     "xml:space": "preserve"}
            if style == "error":
                attrs["fill"] = COLORS["stuck"]
                attrs["font_weight"] = "bold"
            elif style == "source":
                attrs["fill"] = COLORS["muted"]
            self.add("text", attrs, text=line)
        self.parts.append("</g>")
        return y


def _diagnostic_entries(error) -> list[tuple[str, str, object, str | None]]:
    """(kind, text, location, source line) for the error and each note."""
    def source(loc):
        return loc.source_line() if loc is not None and loc.line > 0 else None
    entries = [("error", error.message, error.loc, error.source_line or source(error.loc))]
    for text, loc in error.notes:
        entries.append(("note", text, loc, source(loc)))
    return entries
