"""``tlxc.testing``: the benchmarking and comparison helpers Triton code calls
as ``triton.testing.*``, with Triton's signatures and meanings.

- ``do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None,
  return_mode="mean")``: milliseconds of ``fn()``; CUDA events with an L2
  flush between runs on a machine with a GPU, the wall clock without one.
  Like Triton, the default summary is the **mean**; ``quantiles=[0.5, 0.2,
  0.8]`` gives the median and the 20th/80th percentiles instead.
- ``do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None,
  return_mode="mean")``: the same from CUDA-graph replays.
- ``assert_close(x, y, atol=None, rtol=None, err_msg="")``: numpy's
  ``assert_allclose`` on float64 copies (defaults atol 1e-2, rtol 0, as Triton).
- ``Benchmark`` / ``perf_report``: run a function over a grid of sizes and
  print (``print_data=True``), return (``return_df=True``: a pandas DataFrame
  when pandas is installed, else a list of dicts), save (``save_path``: CSV,
  and a PNG when matplotlib is installed) or show (``show_plots=True``, needs
  matplotlib; without it a warning says so) the table.
"""
from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .runtime.autotune import cuda_event_times, cuda_graph_times, wall_clock_times

RETURN_MODES = ("min", "max", "mean", "median", "all")


def _on_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and torch.cuda.device_count() > 0


def do_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100, grad_to_none: Sequence[Any] | None = None,
             quantiles: Sequence[float] | None = None, return_mode: str = "mean"):
    """Milliseconds of ``fn()`` (see the module docstring): a float, or a list for
    ``quantiles`` (one value per quantile; a single quantile gives a float) or
    ``return_mode="all"``."""
    _check_summary(quantiles, return_mode)
    if _on_gpu():
        times = cuda_event_times(fn, warmup, rep, grad_to_none=grad_to_none)
    else:
        times = wall_clock_times(fn, warmup, rep, grad_to_none=grad_to_none)
    return _summarize(times, quantiles, return_mode)


def do_bench_cudagraph(fn: Callable[[], Any], rep: float = 20, grad_to_none: Sequence[Any] | None = None,
                       quantiles: Sequence[float] | None = None, return_mode: str = "mean"):
    """Milliseconds of ``fn()`` replayed from a CUDA graph (a GPU is required)."""
    _check_summary(quantiles, return_mode)
    if not _on_gpu():
        raise RuntimeError("tlxc.testing.do_bench_cudagraph needs a CUDA device (use do_bench on the CPU)")
    return _summarize(cuda_graph_times(fn, rep, grad_to_none=grad_to_none), quantiles, return_mode)


def _check_summary(quantiles, return_mode: str) -> None:
    if return_mode not in RETURN_MODES:
        raise ValueError(f"return_mode must be one of {', '.join(RETURN_MODES)}, got {return_mode!r}")
    for q in quantiles or ():
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantiles must lie in [0, 1], got {q}")


def _summarize(times: list[float], quantiles, return_mode: str):
    if quantiles is not None:
        values = [_quantile(sorted(times), q) for q in quantiles]
        return values[0] if len(values) == 1 else values
    if return_mode == "all":
        return list(times)
    return {"min": min, "max": max, "mean": statistics.fmean, "median": statistics.median}[return_mode](times)


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (torch.quantile's default)."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def assert_close(x, y, atol: float | None = None, rtol: float | None = None, err_msg: str = "") -> None:
    """Fail (``AssertionError``) unless ``|x - y| <= atol + rtol * |y|`` elementwise."""
    import numpy as np
    atol = 1e-2 if atol is None else atol
    rtol = 0.0 if rtol is None else rtol
    np.testing.assert_allclose(_as_float64(x), _as_float64(y), atol=atol, rtol=rtol, equal_nan=True,
                               err_msg=err_msg)


def _as_float64(value):
    import numpy as np
    if hasattr(value, "detach"):          # a torch tensor (any device, any dtype)
        value = value.detach().to("cpu")
        import torch
        if value.dtype == torch.bool:
            value = value.to(torch.int8)
        return value.to(torch.float64).numpy()
    return np.asarray(value, dtype=np.float64)


# -- perf_report ----------------------------------------------------------------------------------

class Benchmark:
    """One table of ``perf_report``: x values (``x_names`` take each of ``x_vals``), one
    column per ``line_vals`` entry (passed as ``line_arg``), fixed ``args``."""

    def __init__(self, x_names: Sequence[str], x_vals: Sequence[Any], line_arg: str, line_vals: Sequence[Any],
                 line_names: Sequence[str], plot_name: str, args: dict[str, Any], xlabel: str = "",
                 ylabel: str = "", x_log: bool = False, y_log: bool = False, styles=None):
        self.x_names = list(x_names)
        self.x_vals = list(x_vals)
        self.line_arg = line_arg
        self.line_vals = list(line_vals)
        self.line_names = list(line_names)
        self.plot_name = plot_name
        self.args = dict(args)
        self.xlabel = xlabel
        self.ylabel = ylabel
        self.x_log = x_log
        self.y_log = y_log
        self.styles = styles


class Mark:
    """What ``@perf_report(benchmarks)`` returns: ``.run(...)`` runs the tables."""

    def __init__(self, fn: Callable[..., Any], benchmarks):
        self.fn = fn
        self.benchmarks = benchmarks

    def run(self, show_plots: bool = False, print_data: bool = False, save_path: str = "", return_df: bool = False,
            **kwargs):
        benchmarks = self.benchmarks if isinstance(self.benchmarks, (list, tuple)) else [self.benchmarks]
        tables = [self._run(bench, save_path, show_plots, print_data, **kwargs) for bench in benchmarks]
        if return_df:
            return tables[0] if len(tables) == 1 else tables
        return None

    def _run(self, bench: Benchmark, save_path: str, show_plots: bool, print_data: bool, diff_col: bool = False,
             save_precision: int = 6, **kwargs):
        rows = [self._row(bench, x, kwargs) for x in bench.x_vals]
        columns = self._columns(bench)
        if diff_col and len(bench.line_names) == 2:
            first, second = bench.line_names
            for row in rows:
                row["Diff"] = row[second] - row[first]
            columns.append("Diff")
        if print_data:
            print(f"{bench.plot_name}:")
            print(_format_table(columns, rows, save_precision))
        if save_path:
            self._save(bench, columns, rows, Path(save_path), save_precision)
        if show_plots or save_path:
            self._plot(bench, rows, save_path, show_plots)
        return _as_dataframe(columns, rows)

    def _row(self, bench: Benchmark, x, kwargs: dict) -> dict[str, Any]:
        values = list(x) if isinstance(x, (list, tuple)) else [x] * len(bench.x_names)
        x_args = dict(zip(bench.x_names, values))
        row = dict(x_args)
        for line_val, line_name in zip(bench.line_vals, bench.line_names):
            result = self.fn(**x_args, **{bench.line_arg: line_val}, **bench.args, **kwargs)
            y, y_min, y_max = (tuple(result) + (None, None))[:3] if isinstance(result, (list, tuple)) \
                else (result, None, None)
            row[line_name] = y
            row[f"{line_name}-min"] = y_min
            row[f"{line_name}-max"] = y_max
        return row

    @staticmethod
    def _columns(bench: Benchmark) -> list[str]:
        return list(bench.x_names) + list(bench.line_names)

    @staticmethod
    def _save(bench: Benchmark, columns, rows, directory: Path, precision: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        lines = [",".join(columns)] + [",".join(_cell(row[c], precision) for c in columns) for row in rows]
        (directory / f"{bench.plot_name}.csv").write_text("\n".join(lines) + "\n")

    @staticmethod
    def _plot(bench: Benchmark, rows, save_path: str, show: bool) -> None:
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            warnings.warn("tlxc.testing.perf_report: matplotlib is not installed, so no plot was drawn "
                          "(print_data=True prints the table)", stacklevel=4)
            return
        figure, axes = plt.subplots()
        xs = [row[bench.x_names[0]] for row in rows]
        for index, name in enumerate(bench.line_names):
            style = bench.styles[index] if bench.styles else None
            kwargs = {"color": style[0], "linestyle": style[1]} if style else {}
            axes.plot(xs, [row[name] for row in rows], label=name, **kwargs)
        axes.set_xlabel(bench.xlabel or bench.x_names[0])
        axes.set_ylabel(bench.ylabel)
        axes.set_xscale("log" if bench.x_log else "linear")
        axes.set_yscale("log" if bench.y_log else "linear")
        axes.legend()
        if save_path:
            figure.savefig(Path(save_path) / f"{bench.plot_name}.png")
        if show:
            plt.show()
        plt.close(figure)


def perf_report(benchmarks):
    """Decorator: ``@tlxc.testing.perf_report(Benchmark(...) or [Benchmark(...), ...])``."""
    def decorator(fn):
        return Mark(fn, benchmarks)
    return decorator


def _cell(value, precision: int) -> str:
    if isinstance(value, float):
        return f"{value:.{precision}g}"
    return "" if value is None else str(value)


def _format_table(columns, rows, precision: int) -> str:
    cells = [[_cell(row[c], precision) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)


def _as_dataframe(columns, rows):
    try:
        import pandas
    except ImportError:
        return [{c: row[c] for c in columns} for row in rows]
    return pandas.DataFrame([{c: row[c] for c in columns} for row in rows], columns=columns)


__all__ = ["Benchmark", "Mark", "assert_close", "do_bench", "do_bench_cudagraph", "perf_report"]
