"""Interpreter vs CUDA text, on every interpreted launch of a test run (a pytest plugin, opt-in):

    PYTHONPATH=tests python -m pytest -p emu_shadow tests/test_tma.py ...   (EMU_SHADOW_LOG=x.jsonl, EMU_SHADOW_GRID=16)

Each launch the interpreter runs is also compiled for sm_90a, and its CUDA text runs on the CPU emulation
(``codegen_nvptx/emu``) over copies of the arguments that keep their storage, offsets and strides (views
of one storage share one copy). The tensors are then compared: exactly for integers, to 2e-3 relative
for floats. Each launch appends a line to the log: ``ok``, ``MISMATCH`` (the first differing elements
of each argument) or ``skip`` (no emulation: clusters, tcgen05, a helper it lacks, grids of more than
``EMU_SHADOW_GRID`` programs). A summary prints at the end.

A mismatch is a lead, not a verdict. Racing atomics, shuffled program orders, 1-ulp bf16 differences of
reordered sums and stored pointer values differ by design. The rest is a GPU-vs-interpreter disagreement
(session 31 found a TMA copy into a column slice of a wider buffer this way), or a bug of the emulation
(it found two of those too)."""
from __future__ import annotations

import collections
import json
import os
import re

import torch

import tlxc.interpreter as interpreter_package
import tlxc.interpreter.launch as interpreter_launch
from tlxc.codegen_nvptx.emu import run as emu
from tlxc.descriptors import TensorDescriptor

LOG = os.environ.get("EMU_SHADOW_LOG", "emu_shadow.jsonl")
MAX_PROGRAMS = int(os.environ.get("EMU_SHADOW_GRID", "16"))
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "ctas_per_cga", "launch_pdl",
                  "enable_fp_fusion", "debug", "launch_cooperative_grid", "launch_cluster")
_interpret = interpreter_launch.interpret_launch
_inside = [False]
_copies: dict = {}
_counts: collections.Counter = collections.Counter()


def _same_layout(t: torch.Tensor) -> torch.Tensor:
    key = t.untyped_storage().data_ptr()
    if key not in _copies:
        _copies[key] = t.untyped_storage().clone()
    out = torch.empty(0, dtype=t.dtype)
    out.set_(_copies[key], t.storage_offset(), t.size(), t.stride())
    return out


def _copy(v):
    if isinstance(v, torch.Tensor):
        return _same_layout(v)
    if isinstance(v, TensorDescriptor):
        return TensorDescriptor(_same_layout(v.base), list(v.shape), list(v.strides), list(v.block_shape), v.padding)
    return v


def _tensor(v):
    return v.base if isinstance(v, TensorDescriptor) else v


def _log(entry: dict) -> None:
    _counts[entry["status"]] += 1
    with open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\n")


def _differences(originals, copies) -> list:
    bad = []
    for i, (a, c) in enumerate(zip(originals, copies)):
        a, c = _tensor(a), _tensor(c)
        if not isinstance(a, torch.Tensor) or a.shape != c.shape:
            continue
        if a.dtype.is_floating_point:
            same = torch.isclose(a.double(), c.double(), rtol=2e-3, atol=1e-5, equal_nan=True)
        else:
            same = a == c
        if not bool(same.all()):
            where = (~same).nonzero()[:3].tolist()
            bad.append({"arg": i, "count": int((~same).sum()), "of": a.numel(), "at": where,
                        "interpreter": [float(a[tuple(j)]) for j in where],
                        "emulation": [float(c[tuple(j)]) for j in where]})
    return bad


def shadowed(kfn, grid, args=(), kwargs=None, **options):
    if _inside[0] or options.get("arch") not in (None, "sm_90a"):
        return _interpret(kfn, grid, args, kwargs, **options)
    kwargs = dict(kwargs or {})
    if options.get("num_warps") and "num_warps" not in kwargs:
        kwargs["num_warps"] = options["num_warps"]
    _copies.clear()
    copies, kcopies = [_copy(a) for a in args], {k: _copy(v) for k, v in kwargs.items()}
    result = _interpret(kfn, grid, args, kwargs, **{k: v for k, v in options.items() if k != "num_warps"})
    _inside[0] = True
    name = kfn.__name__
    try:
        meta = {**dict(zip(kfn.param_names, args)), **kwargs}
        g = grid(meta) if callable(grid) else grid
        g3 = (*((g,) if isinstance(g, int) else tuple(g)), 1, 1)[:3]
        if g3[0] * g3[1] * g3[2] > MAX_PROGRAMS:
            _log({"kernel": name, "status": "skip", "why": f"grid {g3} over {MAX_PROGRAMS} programs"})
            return result
        text = kfn.warmup(*copies, grid=g3, **kcopies).asm["cuda"]
        bounds = re.search(r"__launch_bounds__\((\d+)", text)
        threads = int(bounds.group(1)) if bounds else 32 * kwargs.get("num_warps", 4)
        bound = kfn.signature.bind(*copies, **{k: v for k, v in kcopies.items() if k not in LAUNCH_OPTIONS})
        bound.apply_defaults()
        emu.build(text).run(dict(bound.arguments), grid=g3, threads=threads)
        bad = _differences(list(args) + list(kwargs.values()), copies + list(kcopies.values()))
        _log({"kernel": name, "file": kfn.fn.__code__.co_filename, "grid": g3,
              "status": "MISMATCH" if bad else "ok", "bad": bad})
    except Exception as exc:  # noqa: BLE001 (a launch the emulation cannot run is a skip, named)
        lines = str(exc).splitlines()
        errors = [line.split("error: ", 1)[1] for line in lines if "error: " in line][:3]  # a host compile's
        _log({"kernel": name, "status": "skip", "why": f"{type(exc).__name__}: {lines[0][:200]}",
              **({"errors": errors} if errors else {})})
    finally:
        _inside[0] = False
    return result


def pytest_configure(config) -> None:
    interpreter_launch.interpret_launch = shadowed
    interpreter_package.interpret_launch = shadowed        # (tlxc.interpreter.interpret calls it by this name)


def pytest_terminal_summary(terminalreporter) -> None:
    terminalreporter.write_line(f"emu_shadow: {dict(_counts)} (this process; details in {LOG})")
