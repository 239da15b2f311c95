"""tests/conftest.py's handling of a sticky CUDA error (a kernel that traps leaves the process's
context unusable): later GPU tests of the process fail at once naming the first, and under
pytest-xdist the worker is replaced so the remaining tests run in a fresh process."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")

TESTS = textwrap.dedent('''
    import os
    import pytest

    def test_a_kernel_traps():
        raise RuntimeError("CUDA error: an illegal instruction was encountered")

    @pytest.mark.gpu
    def test_after_it():
        assert os.environ.get("PYTEST_XDIST_WORKER") is not None, "ran in the poisoned process"
''')


def _run(tmp_path: Path, *args: str) -> str:
    # the project's hooks without its collection rule (which skips gpu tests where CUDA is missing)
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f'''
        import importlib.util
        spec = importlib.util.spec_from_file_location("tlxc_conftest", {str(CONFTEST)!r})
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        pytest_configure = m.pytest_configure
        pytest_runtest_makereport = m.pytest_runtest_makereport
        pytest_runtest_setup = m.pytest_runtest_setup
        pytest_runtest_logfinish = m.pytest_runtest_logfinish
    '''))
    (tmp_path / "test_fake.py").write_text(TESTS)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-rf", *args, str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")})
    return done.stdout + done.stderr


def test_later_gpu_tests_name_the_first_failure(tmp_path):
    out = _run(tmp_path, "-p", "no:xdist")
    assert "test_a_kernel_traps FAILED" in out
    assert "not run: this process's CUDA context was lost in test_fake.py::test_a_kernel_traps" in out
    assert "1 passed" not in out


def test_an_xdist_worker_is_replaced(tmp_path):
    pytest.importorskip("xdist")
    out = _run(tmp_path, "-n", "1", "-p", "xdist")
    assert "test_a_kernel_traps" in out and "crashed" in out, out[-2000:]
    assert "1 passed" in out, out[-2000:]
