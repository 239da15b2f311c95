"""NVRTC-failure reproducers go to a per-user private directory, created safely
(``tlxc/codegen_nvptx/reproducer.py``, issue 21): never a predictable shared
temp path, never through a symlink someone else planted."""
from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from tlxc.codegen_nvptx.reproducer import reproducer_dir, save_reproducer

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.delenv("TLXC_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _save(name: str = "vadd") -> Path:
    return save_reproducer("__global__ void vadd() { oops }", "sm_90a", ["-lineinfo"], "error: oops", name)


def test_reproducers_go_to_the_users_cache_directory_mode_700(home):
    path = _save()
    assert path.parent == home / "xdg" / "tlxc" / "repro"
    assert _mode(path.parent) == 0o700 and _mode(path) == 0o600
    assert path.read_text() == "__global__ void vadd() { oops }"
    readme = path.with_name(path.stem + ".README.txt")
    assert "sm_90a" in readme.read_text() and "error: oops" in readme.read_text() and _mode(readme) == 0o600
    assert _save() == path                                   # one failure, one file
    assert not str(path).startswith(tempfile.gettempdir() + "/tlxc-repro/")


def test_tlxc_cache_dir_holds_them_when_set(tmp_path, monkeypatch):
    monkeypatch.setenv("TLXC_CACHE_DIR", str(tmp_path / "cache"))
    assert _save().parent == tmp_path / "cache" / "repro"


def test_a_symlinked_directory_is_not_followed(home):
    elsewhere = home / "someone-elses"
    elsewhere.mkdir()
    (home / "xdg" / "tlxc").mkdir(parents=True)
    (home / "xdg" / "tlxc" / "repro").symlink_to(elsewhere, target_is_directory=True)
    path = _save()
    assert list(elsewhere.iterdir()) == []
    assert path.parent != home / "xdg" / "tlxc" / "repro" and _mode(path.parent) == 0o700
    shutil.rmtree(path.parent)


def test_a_directory_others_may_write_is_not_used(home):
    shared = home / "xdg" / "tlxc" / "repro"
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    path = _save()
    assert path.parent != shared and list(shared.iterdir()) == [] and _mode(path.parent) == 0o700
    shutil.rmtree(path.parent)


def test_a_symlink_planted_at_the_file_name_is_replaced_not_written_through(home):
    first = _save()
    victim = home / "victim.txt"
    victim.write_text("precious")
    first.unlink()
    first.symlink_to(victim)
    assert _save() == first
    assert victim.read_text() == "precious"
    assert not first.is_symlink() and first.read_text().startswith("__global__")


def test_an_unusable_cache_directory_falls_back_to_a_private_temporary_one(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("TLXC_CACHE_DIR", str(blocker))
    directory = reproducer_dir()
    assert directory.is_dir() and _mode(directory) == 0o700 and directory.name.startswith("tlxc-repro-")
    directory.rmdir()
