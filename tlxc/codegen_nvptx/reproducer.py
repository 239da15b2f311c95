"""NVRTC-failure reproducers, written where only their user can read or replace them.

NVRTC rejecting generated CUDA is a tlxc bug; ``toolchain.py`` reports it with
the path of a saved reproducer (the source, and a README with the target, the
options and the log).  The directory is per user: ``<cache dir>/repro``
(``$TLXC_CACHE_DIR``, else ``$XDG_CACHE_HOME/tlxc``, else ``~/.cache/tlxc``:
``runtime/cache.py: cache_dir``), never a predictable shared path under
``$TMPDIR`` that another user could create first or fill with symlinks.

Safety rules:

* the directory is created with mode 0700; an existing one is used only if it
  is a real directory (not a symlink), owned by the current user and writable
  by no one else; otherwise, or when it cannot be created, the reproducer goes
  to a fresh private ``tempfile.mkdtemp`` directory;
* each file is opened with ``O_NOFOLLOW``, mode 0600, and replaced through a
  temporary file in the same directory (``os.replace``), so a symlink planted
  at its name is replaced, never followed.

The file name hashes source, target and options: one failure always lands in
one file, so reports stay stable.
"""
from __future__ import annotations

import hashlib
import os
import re
import stat
import tempfile
from pathlib import Path


def reproducer_dir() -> Path:
    """The user's private reproducer directory (see the module docstring)."""
    from ..runtime.cache import cache_dir
    directory = cache_dir() / "repro"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if _private(directory):
            return directory
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="tlxc-repro-"))


def _private(directory: Path) -> bool:
    """A real directory of the current user that nobody else may write to."""
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode):
        return False                     # a symlink (or a file) where the directory should be
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return False
    return not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (mode 0600) without following a symlink at ``path``."""
    fd, temporary = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)      # O_EXCL, mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(temporary, path)      # replaces a symlink at path, never writes through it
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def save_reproducer(source: str, arch: str, options: list[str], log: str, name: str) -> Path:
    """Write ``<name>-<hash>.cu`` and ``<name>-<hash>.README.txt``; return the .cu path."""
    digest = hashlib.sha256("\0".join([source, arch, *options]).encode()).hexdigest()[:16]
    stem = f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name) or 'kernel'}-{digest}"
    try:
        return _write(reproducer_dir(), stem, source, arch, options, log)
    except OSError:                      # a full or read-only disk there: a fresh private directory
        return _write(Path(tempfile.mkdtemp(prefix="tlxc-repro-")), stem, source, arch, options, log)


def _write(directory: Path, stem: str, source: str, arch: str, options: list[str], log: str) -> Path:
    cu_path = directory / f"{stem}.cu"
    write_private(cu_path, source)
    write_private(directory / f"{stem}.README.txt", (
        f"tlxc reproducer: NVRTC rejected {cu_path.name} (a tlxc bug).\n"
        f"arch: {arch}\noptions: {' '.join(options)}\n"
        f"reproduce: python -c \"from tlxc.codegen_nvptx.toolchain import compile_cuda; "
        f"compile_cuda(open('{cu_path}').read(), '{arch}', [])\"\n\nNVRTC log:\n{log}\n"))
    return cu_path
