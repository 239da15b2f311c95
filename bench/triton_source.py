"""One kernel source, two compilers: load a plain-Triton file of this folder as written (tlxc)
or with its import lines swapped to Triton's, and time a launch with CUDA events (call time, or
kernel time with the host's launch work hidden).  Shared by
bench/triton_matmul_bench.py and bench/triton_memory_bench.py."""
from __future__ import annotations

import importlib.util
import os
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

_TO_TRITON = (("import tlxc.language as tl", "import triton.language as tl"),
              ("from tlxc.language.extra import libdevice", "from triton.language.extra import libdevice"),
              ("import tlxc\n", "import triton\n"),
              ("@tlxc.jit", "@triton.jit"))


def load_source(filename: str, triton: bool):
    """The module of ``bench/<filename>``, compiled by tlxc or (``triton``) by Triton."""
    with open(os.path.join(HERE, filename)) as f:
        text = f.read()
    if triton:
        for ours, theirs in _TO_TRITON:
            text = text.replace(ours, theirs)
    name = os.path.splitext(filename)[0] + ("_triton" if triton else "_tlxc")
    path = os.path.join(tempfile.mkdtemp(prefix="tlxc_bench_"), name + ".py")
    with open(path, "w") as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def event_ms(fn, hide_launch: bool = False) -> float:
    """One call of ``fn`` timed with CUDA events (milliseconds).

    By default the GPU is idle when ``fn`` is called, so the time includes the host's launch
    work between the start event and the kernel's start (Triton 3.6's launcher spends ~20-35 µs
    there with a dozen arguments, tlxc's ~10 µs): the "call" time.  ``hide_launch`` first queues
    a ~0.5 ms spin on the GPU, so the host's launch work overlaps it and the events bracket the
    kernel alone: the "kernel" time."""
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if hide_launch:
        torch.cuda._sleep(_SPIN_CYCLES)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


TIMINGS = ("kernel", "call")    # event_ms(hide_launch=True), event_ms(hide_launch=False)
_SPIN_CYCLES = 1_000_000        # 0.5-1 ms at 1-2 GHz: longer than any launcher's host work


def paired_times(fns: dict, rounds: int, hide_launch: bool) -> dict:
    """{name: [ms per round]}: each round times every fn once, back to back (paired samples)."""
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(event_ms(fn, hide_launch))
    return times
