"""Every example's script runs under TLXC_INTERPRET=1 on this (GPU-less)
machine and checks itself against a torch reference (issue 4 acceptance).

Each example's ``main()`` compares with a float64 reference at small sizes,
with NaN-poisoned outputs, and raises on a mismatch; its process must exit 0
and print its "ok" lines.

Each example runs in a process of its own, as ``python examples/<name>.py`` would: a fork of one
server process per test worker that imported torch and tlxc (with TLXC_INTERPRET=1) once, so an
example does not pay that start-up (~1.5 s of each example's ~2-5 s) again."""
from __future__ import annotations

import os
import select
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "examples"))
                  if f.endswith(".py") and not f.startswith("_"))
TIMEOUT_S = 600

# The server: reads "<example path>\t<work dir>" lines; for each, forks a child that runs the script
# as __main__ in that directory (its own compile cache there, output to files there) and answers
# with the child's exit status.
_SERVER = r"""
import os, runpy, sys, traceback
import torch, tlxc, tlxc.language  # noqa: F401  (imported once, before the forks)
sys.stdout.write("ready\n"); sys.stdout.flush()
for line in sys.stdin:
    path, work = line.rstrip("\n").split("\t")
    pid = os.fork()
    if pid == 0:
        out = os.open(os.path.join(work, "output.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1); os.dup2(out, 2)
        sys.stdout = os.fdopen(1, "w", buffering=1); sys.stderr = sys.stdout
        os.chdir(work)
        os.environ["TLXC_CACHE_DIR"] = work
        sys.path.insert(0, os.path.dirname(path))
        sys.argv = [path]
        status = 0
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            status = 1
        sys.stdout.flush()
        os._exit(status)
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(f"{os.waitstatus_to_exitcode(status)}\n"); sys.stdout.flush()
"""


@pytest.fixture(scope="module")
def server():
    env = dict(os.environ, TLXC_INTERPRET="1", CUDA_VISIBLE_DEVICES="", PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-c", _SERVER], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout.readline() == "ready\n", "the example server did not start"
    yield proc
    proc.stdin.close()
    proc.wait(timeout=60)


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_runs_under_the_interpreter(example, tmp_path, server):
    server.stdin.write(f"{os.path.join(ROOT, 'examples', f'{example}.py')}\t{tmp_path}\n")
    server.stdin.flush()
    if not select.select([server.stdout], [], [], TIMEOUT_S)[0]:
        server.kill()               # (the module's later examples then fail: "server gone")
        pytest.fail(f"{example} ran longer than {TIMEOUT_S} s")
    status = server.stdout.readline()
    output = (tmp_path / "output.txt").read_text(errors="replace")
    assert status.strip() == "0", f"exit status {status.strip() or '(server gone)'}:\n" + output[-4000:]
    assert "FAILED" not in output
    assert " ok" in output or "ok\n" in output, output[-2000:]
