"""One kernel source, two compilers: load a plain-Triton file of this folder as written (tlxc)
or with its import lines swapped to Triton's, and time a launch with CUDA events.  Shared by
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


def event_ms(fn) -> float:
    """One call of ``fn`` timed with CUDA events (milliseconds)."""
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)
