"""Shared pytest configuration for tlxc's tests."""
from __future__ import annotations

import gc
import os
import sys

import pytest

# One OpenMP thread per test process (torch's intra-op pool; OpenBLAS reads it too), unless the caller
# set one: the suite's tensors are small, a second thread mostly spins between ops, and under -n auto
# (one worker per core) it takes the core the other worker needs. Set at the first conftest import, so
# the xdist workers inherit it before they import torch. On 2 cores, three op test files (warm cache)
# under -n 2: 68 -> 22 s of wall time (134 -> 41 s of CPU); one process: 21.6 -> 11.3 s of CPU; the
# README command cold: 442-468 -> 322 s.
_ONE_THREAD = "OMP_NUM_THREADS" not in os.environ
os.environ.setdefault("OMP_NUM_THREADS", "1")

# CUDA errors that leave the process's context unusable: every later launch in the process fails
# with the same message, so one bad kernel would show as hundreds of failures.
STICKY_CUDA_ERRORS = ("illegal instruction", "illegal memory access", "misaligned address",
                      "unspecified launch failure", "device-side assert", "hardware stack error",
                      "an illegal", "launch timed out")
_lost_context: dict[str, str] = {}
_session: dict[str, bool] = {}


def pytest_configure(config: pytest.Config) -> None:
    _session["xdist_worker"] = hasattr(config, "workerinput")       # this process is a pytest-xdist worker
    # The suite builds and drops many IR modules (cyclic object graphs): at Python's default thresholds
    # (700, 10, 10) the collector ran ~8,900 times in 86 s of test_ops_attention_bwd + test_ops_matmul_tiles,
    # 9 s of it; at these, 100 times, 2.8 s, the same peak memory (656 vs 661 MB). The suite only.
    gc.set_threshold(50_000, 20, 20)
    if _ONE_THREAD and "torch" in sys.modules:      # imported before this conftest (by a plugin): too late
        sys.modules["torch"].set_num_threads(1)        # for the variable
    config.addinivalue_line(
        "markers", "gpu: needs a CUDA GPU; skipped cleanly where torch.cuda.is_available() is false")


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    """What the suite built stays reachable until the process exits (compile caches, IR modules):
    frozen, pytest's closing collections (``gc_collect_harder``: five full ones, ~0.6 s each on
    this heap) skip it."""
    gc.freeze()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any(item.get_closest_marker("gpu") for item in items) and not _cuda_available():
        skip = pytest.mark.skip(reason="no CUDA GPU (torch.cuda.is_available() is false)")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.fixture
def interpreter_diagnosis(monkeypatch: pytest.MonkeyPatch) -> None:
    """For a test of the interpreter's own deadlock or race diagnosis: every interpreted
    launch first runs the static barrier checks of a GPU compile (``docs/checking.md``),
    which would report the kernel's deliberate bug before the interpreter runs it, so the
    test switches them off as a user would (``TLXC_CHECK_BARRIERS=0``)."""
    monkeypatch.setenv("TLXC_CHECK_BARRIERS", "0")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Remember the first test whose exception is a sticky CUDA error (a kernel trapped or faulted in
    this test or in an earlier one of this process: CUDA reports asynchronously)."""
    outcome = yield
    if call.excinfo is not None and not _lost_context:
        text = str(call.excinfo.value).lower()
        if type(call.excinfo.value).__name__ in ("AcceleratorError", "RuntimeError") and \
                any(e in text for e in STICKY_CUDA_ERRORS):
            _lost_context["test"] = item.nodeid
            _lost_context["error"] = str(call.excinfo.value).splitlines()[0]
            report = outcome.get_result()
            report.sections.append(("tlxc", "the CUDA context of this process is lost (sticky error); "
                                            "the kernel at fault ran in this test or an earlier one"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """After a sticky CUDA error, a GPU test of this process fails at once naming the first one."""
    if _lost_context and item.get_closest_marker("gpu"):
        pytest.fail(f"not run: this process's CUDA context was lost in {_lost_context['test']} "
                    f"({_lost_context['error']})", pytrace=False)


def pytest_runtest_logfinish(nodeid: str, location) -> None:
    """Under pytest-xdist, a worker whose CUDA context is lost exits after reporting the test, so
    the controller starts a fresh worker (a fresh context) for the remaining tests."""
    if _lost_context.get("test") == nodeid and _session.get("xdist_worker"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(3)
