"""SASS of a cubin for the tests that read it: cuobjdump from PATH, else the nvidia-cu13 wheel's;
the test skips where neither exists."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess

import pytest


def cuobjdump() -> str | None:
    tool = shutil.which("cuobjdump")
    if tool is not None:
        return tool
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidate = os.path.join(root, "cu13", "bin", "cuobjdump")
        if os.path.exists(candidate):
            return candidate
    return None


def sass(cubin: bytes, tmp_path) -> str:
    """``cuobjdump --dump-sass`` of ``cubin`` (written under ``tmp_path``)."""
    tool = cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not installed")
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    return subprocess.run([tool, "--dump-sass", str(path)], capture_output=True, text=True, check=True).stdout
