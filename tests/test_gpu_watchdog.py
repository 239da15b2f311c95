"""TLXC_DEBUG_BARRIERS=1: a deadlocked barrier wait traps with a diagnosis instead of hanging."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu
HERE = os.path.dirname(os.path.abspath(__file__))


def test_deadlocked_wait_traps_with_a_message_within_five_seconds(tmp_path):
    env = dict(os.environ, TLXC_DEBUG_BARRIERS="1", TLXC_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), HERE]))
    proc = subprocess.run([sys.executable, "kernels_deadlock.py"], env=env, cwd=HERE, capture_output=True, check=False,
                          text=True, timeout=60)
    end = time.monotonic()      # CLOCK_MONOTONIC is shared with the child: time from its launch to its end
    output = proc.stdout + proc.stderr
    launched = [float(line.split()[-1]) for line in proc.stdout.splitlines() if line.startswith("launching at ")]
    assert launched, output
    elapsed = end - launched[0]
    assert proc.returncode != 0, output
    assert "finished?" not in output
    assert "tlxc watchdog: block (0, 0, 0) warp 0, task 'main', is stuck at kernels_deadlock.py:10 " \
           "waiting for phase 0 of barrier bars[1]" in output, output
    assert elapsed < 5, f"the stuck kernel ran {elapsed:.1f} s after its launch"   # the budget is 2 s


def test_normal_build_has_no_watchdog():
    import kernels_deadlock as k
    plain = k.wait_forever.compile(arch="sm_90a", check_barriers=False)   # the checker rejects it
    debug = k.wait_forever.compile(arch="sm_90a", debug_barriers=True)
    assert "watchdog" not in plain.asm["cuda"]
    assert "tlx_mbarrier_wait_watchdog" in debug.asm["cuda"]
