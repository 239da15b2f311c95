"""The on-disk cache of compiled kernels.

One entry is one file, ``<root>/<key[:2]>/<key>.tlxc``, holding a set of named
blobs (cubin, PTX, source, metadata, ...).  The caller computes the key (a hex
digest of everything that determines the output); this module only stores and
validates.

Entry layout (all integers little-endian)::

    header   magic b"TLXC" | format u16 | file count u16 | payload length u64
             | sha256(payload) 32 bytes
    payload  per file, sorted by name: name length u32 | name (utf-8)
             | data length u64 | data

Concurrency: an entry is written to a temporary file in the same directory and
renamed over the final name with ``os.replace``, which is atomic on POSIX and
Windows.  Readers therefore see either no entry, an older complete entry or the
new complete one, never a mix, even when several processes compile the same
kernel at once (the last rename wins; the contents are equal anyway).
A writer killed between the two leaves its temporary file (``.<key>.<random>.tmp``);
``put`` deletes those older than an hour in the directory it writes to.
Corruption from other causes (a crash before data reached the disk, a full
disk, a hand-edited file) is caught by the length and checksum; such an entry
is deleted and reported as a miss, so the caller recompiles.
"""
from __future__ import annotations

import functools
import hashlib
import os
import struct
import tempfile
from pathlib import Path

from tlxc.errors import InternalCompilerError

_MAGIC = b"TLXC"
_FORMAT_VERSION = 1
_HEADER = struct.Struct("<4sHHQ32s")
_NAME_LEN = struct.Struct("<I")
_DATA_LEN = struct.Struct("<Q")
_SUFFIX = ".tlxc"
_HEX_DIGITS = frozenset("0123456789abcdef")


def cache_dir() -> Path:
    """``$TLXC_CACHE_DIR``, else ``$XDG_CACHE_HOME/tlxc``, else ``~/.cache/tlxc``."""
    explicit = os.environ.get("TLXC_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "tlxc"


def cache_disabled() -> bool:
    """``TLXC_CACHE_DISABLE=1`` (or any value but ``0``/empty) turns the disk cache off."""
    return os.environ.get("TLXC_CACHE_DISABLE", "") not in ("", "0")


class DiskCache:
    """A directory of validated, atomically written cache entries.

    The root is resolved at construction; ``TLXC_CACHE_DISABLE`` is read on
    every call so that tests and users can toggle it at run time.
    """

    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root is not None else cache_dir()

    def path_for(self, key: str) -> Path:
        _check_key(key)
        return self.root / key[:2] / f"{key}{_SUFFIX}"

    def get(self, key: str) -> dict[str, bytes] | None:
        """The files stored under ``key``, or None on a miss or a bad entry."""
        if cache_disabled():
            return None
        path = self.path_for(key)
        try:
            with open(path, "rb") as f:
                blob = f.read()
                identity = _file_identity(os.fstat(f.fileno()))
        except FileNotFoundError:
            return None
        except OSError:
            return None
        files = decode_entry(blob)
        if files is None:
            _remove_if_unchanged(path, identity)
        return files

    def put(self, key: str, files: dict[str, bytes]) -> bool:
        """Store ``files`` under ``key``; False if the cache could not be written.

        A cache that cannot be written (read-only home, full disk) must not
        fail a compilation, so OSErrors are swallowed here.
        """
        if cache_disabled():
            return False
        path = self.path_for(key)
        blob = encode_entry(files)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_atomically(path, blob)
        except OSError:
            return False
        remove_stale_temporaries(path.parent)   # a killed writer's leftovers: compiles are rare, so cheap
        return True


def encode_entry(files: dict[str, bytes]) -> bytes:
    """Serialize ``files`` into one entry (header + payload)."""
    if len(files) > 0xFFFF:
        raise InternalCompilerError(f"cache entry with {len(files)} files; at most 65535 fit")
    parts: list[bytes] = []
    for name in sorted(files):
        data = files[name]
        if not isinstance(name, str) or not isinstance(data, (bytes, bytearray, memoryview)):
            raise InternalCompilerError(
                f"cache entry files must map str to bytes, got {type(name).__name__} "
                f"-> {type(data).__name__}")
        encoded_name = name.encode("utf-8")
        parts += [_NAME_LEN.pack(len(encoded_name)), encoded_name,
                  _DATA_LEN.pack(len(data)), bytes(data)]
    payload = b"".join(parts)
    header = _HEADER.pack(_MAGIC, _FORMAT_VERSION, len(files), len(payload),
                          hashlib.sha256(payload).digest())
    return header + payload


def decode_entry(blob: bytes) -> dict[str, bytes] | None:
    """Parse an entry; None if it is truncated, corrupted or of another format."""
    if len(blob) < _HEADER.size:
        return None
    magic, version, count, payload_len, digest = _HEADER.unpack_from(blob, 0)
    if magic != _MAGIC or version != _FORMAT_VERSION:
        return None
    payload = memoryview(blob)[_HEADER.size:]
    if len(payload) != payload_len or hashlib.sha256(payload).digest() != digest:
        return None
    return _parse_payload(payload, count)


def _parse_payload(payload: memoryview, count: int) -> dict[str, bytes] | None:
    # The checksum already matched, so a parse failure here means a writer
    # bug or a deliberate forgery; treat it as corruption all the same.
    files: dict[str, bytes] = {}
    offset = 0
    try:
        for _ in range(count):
            (name_len,) = _NAME_LEN.unpack_from(payload, offset)
            offset += _NAME_LEN.size
            name = bytes(payload[offset:offset + name_len]).decode("utf-8")
            offset += name_len
            (data_len,) = _DATA_LEN.unpack_from(payload, offset)
            offset += _DATA_LEN.size
            if offset + data_len > len(payload):
                return None
            files[name] = bytes(payload[offset:offset + data_len])
            offset += data_len
    except (struct.error, UnicodeDecodeError):
        return None
    return files if offset == len(payload) else None


def _check_key(key: str) -> None:
    if len(key) < 2 or not set(key) <= _HEX_DIGITS:
        raise InternalCompilerError(
            f"cache keys must be lowercase hex strings of at least 2 digits, got {key!r}")


@functools.cache
def compiler_fingerprint() -> str:
    """A hash of tlxc's own source files.  Cache keys include it, so that a
    changed compiler (a new version, or a development checkout) never serves a
    cubin built by the old one; computed once per process."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


@functools.cache
def toolchain_fingerprint() -> str:
    """The versions of what turns generated CUDA into a cubin: NVRTC (the library in use) and
    the ``cuda-bindings`` / ``nvidia-cuda-nvrtc`` wheels.  Cache keys include it, so a new
    toolchain never serves a cubin the old one built.  ``?`` where one cannot be found (a
    machine without NVRTC compiles nothing, so its keys need not be comparable)."""
    from importlib import metadata
    parts = []
    try:
        from tlxc.codegen_nvptx.toolchain import nvrtc_version
        major, minor = nvrtc_version()
        parts.append(f"nvrtc={major}.{minor}")
    except Exception:  # noqa: BLE001 - no NVRTC here: nothing is compiled with it
        parts.append("nvrtc=?")
    for dist in ("cuda-bindings", "cuda-python", "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-nvrtc"):
        try:
            parts.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return ",".join(parts)


# A temporary file older than this is a killed writer's leftover (a live write takes
# milliseconds): ``put`` removes such files from the directory it writes to.
STALE_TMP_SECONDS = 3600


def remove_stale_temporaries(directory: Path, max_age: float = STALE_TMP_SECONDS) -> int:
    """Delete ``.*.tmp`` files (``_write_atomically``'s) older than ``max_age`` seconds in
    ``directory``; returns how many.  Errors (a file another process removed) are ignored."""
    import time
    now, removed = time.time(), 0
    try:
        candidates = list(directory.glob(".*.tmp"))
    except OSError:
        return 0
    for path in candidates:
        try:
            if now - path.stat().st_mtime > max_age:
                path.unlink()
                removed += 1
        except OSError:
            pass
    return removed


def write_atomically(path: Path, blob: bytes | str) -> None:
    """Write ``blob`` to ``path`` so that readers see the old file or the new one, never a mix."""
    _write_atomically(path, blob.encode() if isinstance(blob, str) else blob)


def _write_atomically(path: Path, blob: bytes) -> None:
    # The temporary file lives in the target directory so that os.replace is a
    # rename within one file system, hence atomic.  No fsync: atomicity
    # against concurrent writers does not need it, and a crash that loses the
    # data is caught by the checksum on the next read.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp_name, path)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except OSError:
            pass
        raise


def _file_identity(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_dev, st.st_ino, st.st_mtime_ns)


def _remove_if_unchanged(path: Path, identity: tuple[int, int, int]) -> None:
    # A concurrent writer may have renamed a good entry over the bad one since
    # we read it; only delete the file we actually judged.
    try:
        if _file_identity(os.stat(path)) == identity:
            os.unlink(path)
    except OSError:
        pass


# -- Triton's file-cache API (``triton.runtime.cache``), for code written against it -------------------
# tlxc's compiles use ``DiskCache`` above; these names let Triton code that manages files through
# Triton's cache classes (LMDeploy subclasses ``FileCacheManager`` with a file lock) import and run,
# keeping its files in a directory per key under tlxc's cache directory.

class FileCacheManager:
    """A directory of files for one ``key`` (``<cache_dir()>/triton_compat/<key>``), with Triton's
    methods: ``get_file``, ``has_file``, ``put`` (atomic), ``get_group`` / ``put_group`` (a JSON list
    of files that belong together)."""

    def __init__(self, key: str, override: bool = False, dump: bool = False):
        self.key = key
        self.lock_path = None
        self.cache_dir = str(cache_dir() / "triton_compat" / key)
        os.makedirs(self.cache_dir, exist_ok=True)

    def _make_path(self, filename: str) -> str:
        return os.path.join(self.cache_dir, filename)

    def has_file(self, filename: str) -> bool:
        return os.path.exists(self._make_path(filename))

    def get_file(self, filename: str) -> str | None:
        return self._make_path(filename) if self.has_file(filename) else None

    def get_group(self, filename: str) -> dict[str, str] | None:
        """The files the group ``filename`` lists, those that still exist; None without the group."""
        import json
        path = self.get_file(filename)
        if path is None:
            return None
        with open(path) as f:
            children = json.load(f).get("child_paths", {})
        return {name: p for name, p in children.items() if os.path.exists(p)}

    def put_group(self, filename: str, group: dict[str, str]) -> str:
        import json
        return self.put(json.dumps({"child_paths": group}), filename, binary=False)

    def put(self, data, filename: str, binary: bool = True) -> str:
        """Write ``data`` (bytes, or text with ``binary=False``) to the file atomically; its path."""
        if binary and isinstance(data, str):
            raise TypeError("FileCacheManager.put: binary=True takes bytes")
        path = Path(self._make_path(filename))
        write_atomically(path, data)
        return str(path)


def get_cache_manager(key: str) -> FileCacheManager:
    return FileCacheManager(key)


def default_cache_dir() -> str:
    return str(cache_dir())


def triton_key() -> str:
    """What Triton code hashes into its own cache keys: here the fingerprint of tlxc's sources."""
    return f"tlxc-{compiler_fingerprint()}"
