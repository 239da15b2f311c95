"""Every example's script runs under TLXC_INTERPRET=1 on this (GPU-less)
machine and checks itself against a torch reference (issue 4 acceptance).

Each example's ``main()`` compares with a float64 reference at small sizes,
with NaN-poisoned outputs, and raises on a mismatch; the subprocess must exit 0
and print its "ok" lines."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "examples"))
                  if f.endswith(".py") and not f.startswith("_"))


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_runs_under_the_interpreter(example, tmp_path):
    env = dict(os.environ, TLXC_INTERPRET="1", CUDA_VISIBLE_DEVICES="", TLXC_CACHE_DIR=str(tmp_path),
               PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", f"{example}.py")], env=env,
                          capture_output=True, text=True, timeout=600, cwd=str(tmp_path), check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "FAILED" not in output
    assert " ok" in output or "ok\n" in output, output[-2000:]
