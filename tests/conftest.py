"""Shared pytest configuration for tlxc's tests."""
from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "gpu: needs a CUDA GPU; skipped cleanly where torch.cuda.is_available() is false")


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
