"""One kernel source, two compilers: load a plain-Triton file of this folder as written (tlxc)
or with its import lines swapped to Triton's, and time a launch with CUDA events (call time, or
kernel time with the host's launch work hidden).  Shared by
bench/triton_matmul_bench.py and bench/triton_memory_bench.py."""
from __future__ import annotations

import importlib.util
import os
import tempfile
import time

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


def pinned_launch(kfn, env: dict, grid, *args, **kwargs):
    """A function launching tlxc kernel ``kfn`` compiled with the environment variables
    ``env`` set (compile switches such as TLXC_RING_BASE=1), whatever the environment when it
    is called: it launches the compiled kernel's plan directly, so several variants of one
    kernel can be timed in turn in one process.  Use a fresh ``kfn`` per variant (load_source
    again): its caches hold the variant's compile."""
    from tlxc.runtime import launch as L
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        compiled = kfn[grid](*args, **kwargs)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    plan = next(p for p in kfn.cache.values() if isinstance(p, L.LaunchPlan) and p.compiled is compiled)
    bound = kfn.signature.bind(*args, **{k: v for k, v in kwargs.items() if k in kfn.param_names})
    bound.apply_defaults()
    values = tuple(bound.arguments[n] for n in kfn.param_names)
    runtime = [values[i].data_ptr() if p else L._scalar_value(values[i])
               for i, p in zip(plan.runtime_index, plan.is_pointer)]
    grid3 = tuple(grid) + (1,) * (3 - len(grid))
    stream = kfn._stream

    def run():
        plan.launch(grid3, plan.block, plan.smem, stream(plan.device), runtime)
    return run


def event_ms(fn, hide_launch: bool = False, spin_cycles: int | None = None) -> float:
    """One call of ``fn`` timed with CUDA events (milliseconds).

    By default the GPU is idle when ``fn`` is called, so the time includes the host's launch
    work between the start event and the kernel's start (Triton 3.6's launcher spends ~20-35 µs
    there with a dozen arguments, tlxc's ~10 µs): the "call" time.  ``hide_launch`` first queues
    a ~0.5 ms spin on the GPU, so the host's launch work overlaps it and the events bracket the
    kernel alone: the "kernel" time; ``spin_cycles`` (``spin_for``) a longer spin for calls whose
    host work is longer (an autograd backward: 0.5-2.6 ms on the H200's host)."""
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if hide_launch:
        torch.cuda._sleep(spin_cycles or _SPIN_CYCLES)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def host_ms(fn) -> float:
    """The host's wall time of one call of ``fn`` queued behind a ~20 ms GPU spin (so the call never
    waits for the GPU): its launch work, Python and autograd included."""
    import torch
    torch.cuda._sleep(40_000_000)
    t0 = time.perf_counter()
    fn()
    t = time.perf_counter() - t0
    torch.cuda.synchronize()
    return t * 1e3


def spin_for(fns: dict) -> tuple[int, dict]:
    """(spin cycles, {name: host ms}): a spin that outlasts 1.5x the longest host time of ``fns``'
    calls (median of 3 each; at least the default spin), so ``event_ms(fn, True, cycles)`` brackets
    the GPU's work alone for each of them."""
    import torch
    host = {name: sorted(host_ms(fn) for _ in range(3))[1] for name, fn in fns.items()}
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(_SPIN_CYCLES)
    end.record()
    end.synchronize()
    per_ms = _SPIN_CYCLES / max(start.elapsed_time(end), 1e-3)
    return max(_SPIN_CYCLES, int(1.5 * max(host.values()) * per_ms)), host


TIMINGS = ("kernel", "call")    # event_ms(hide_launch=True), event_ms(hide_launch=False)
_SPIN_CYCLES = 1_000_000        # 0.5-1 ms at 1-2 GHz: longer than any launcher's host work


def paired_times(fns: dict, rounds: int, hide_launch: bool, host: dict | None = None) -> dict:
    """{name: [ms per round]}: each round times every fn once, back to back (paired samples).
    ``host`` (a dict; kernel time only): the spin is sized by ``spin_for`` to outlast every fn's
    host work, whose ms per call go into ``host``."""
    spin = None
    if hide_launch and host is not None:
        spin, measured = spin_for(fns)
        host.update(measured)
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(event_ms(fn, hide_launch, spin))
    return times
