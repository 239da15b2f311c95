"""On-disk cache: round trips, corruption detection, atomic concurrent writes."""
from __future__ import annotations

import hashlib
import multiprocessing
from pathlib import Path

import pytest

from tlxc.errors import InternalCompilerError
from tlxc.runtime.cache import DiskCache, cache_dir

KEY = hashlib.sha256(b"some kernel").hexdigest()
FILES = {"cubin": b"\x7fELF" + bytes(range(256)) * 4, "ptx": b".version 8.0\n", "empty": b""}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DiskCache:
    monkeypatch.delenv("TLXC_CACHE_DISABLE", raising=False)
    return DiskCache(tmp_path / "cache")


def test_round_trip(cache: DiskCache) -> None:
    assert cache.get(KEY) is None
    assert cache.put(KEY, FILES)
    assert cache.get(KEY) == FILES
    assert cache.path_for(KEY) == cache.root / KEY[:2] / f"{KEY}.tlxc"


def test_overwrite_replaces_the_entry(cache: DiskCache) -> None:
    cache.put(KEY, FILES)
    cache.put(KEY, {"cubin": b"new"})
    assert cache.get(KEY) == {"cubin": b"new"}


def test_entries_are_deterministic(cache: DiskCache) -> None:
    cache.put(KEY, dict(sorted(FILES.items())))
    first = cache.path_for(KEY).read_bytes()
    cache.put(KEY, dict(reversed(list(FILES.items()))))
    assert cache.path_for(KEY).read_bytes() == first


@pytest.mark.parametrize("position", [0, 10, 60, -1])
def test_flipped_byte_is_a_miss_and_the_entry_is_removed(cache: DiskCache, position: int) -> None:
    cache.put(KEY, FILES)
    path = cache.path_for(KEY)
    blob = bytearray(path.read_bytes())
    blob[position] ^= 0x40
    path.write_bytes(bytes(blob))
    assert cache.get(KEY) is None
    assert not path.exists()
    assert cache.put(KEY, FILES) and cache.get(KEY) == FILES  # recompiles cleanly


@pytest.mark.parametrize("keep", [0, 5, 50, -1])
def test_truncated_entry_is_a_miss(cache: DiskCache, keep: int) -> None:
    cache.put(KEY, FILES)
    path = cache.path_for(KEY)
    blob = path.read_bytes()
    path.write_bytes(blob[:keep] if keep >= 0 else blob[:-1])
    assert cache.get(KEY) is None
    assert not path.exists()
    cache.put(KEY, FILES)
    assert cache.get(KEY) == FILES


def test_appended_garbage_is_a_miss(cache: DiskCache) -> None:
    cache.put(KEY, FILES)
    path = cache.path_for(KEY)
    path.write_bytes(path.read_bytes() + b"x")
    assert cache.get(KEY) is None


def test_disable_switch(cache: DiskCache, monkeypatch: pytest.MonkeyPatch) -> None:
    cache.put(KEY, FILES)
    monkeypatch.setenv("TLXC_CACHE_DISABLE", "1")
    assert cache.get(KEY) is None
    assert not cache.put(KEY, {"cubin": b"other"})
    monkeypatch.setenv("TLXC_CACHE_DISABLE", "0")
    assert cache.get(KEY) == FILES


def test_bad_keys_are_refused(cache: DiskCache) -> None:
    for key in ["", "a", "../../etc", "ABCDEF", "zz11"]:
        with pytest.raises(InternalCompilerError, match="hex"):
            cache.path_for(key)


def test_unwritable_cache_does_not_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TLXC_CACHE_DISABLE", raising=False)
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the cache directory should be")
    assert DiskCache(blocker).put(KEY, FILES) is False


def test_cache_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TLXC_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "tlxc"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "tlxc"
    monkeypatch.setenv("TLXC_CACHE_DIR", str(tmp_path / "explicit"))
    assert cache_dir() == tmp_path / "explicit"
    assert DiskCache().root == tmp_path / "explicit"


# --------------------------------------------------------------------------
# Concurrency: writers race on one key while readers check every read.

WRITERS, WRITES_EACH = 4, 20


def _payload(writer: int, iteration: int) -> dict[str, bytes]:
    # Large enough that a torn write would be likely if writes were not atomic;
    # the digest file lets a reader check that a read is one writer's whole entry.
    body = hashlib.sha256(f"{writer}:{iteration}".encode()).digest() * 8192  # 256 KiB
    return {"cubin": body, "digest": hashlib.sha256(body).digest(),
            "who": f"{writer}:{iteration}".encode()}


def _writer(root: str, writer: int) -> None:
    cache = DiskCache(root)
    for iteration in range(WRITES_EACH):
        assert cache.put(KEY, _payload(writer, iteration))


def _reader(root: str, stop_file: str) -> int:
    """Read until the writers are done; -1 if any read was not a whole entry."""
    cache = DiskCache(root)
    hits = 0
    for _ in range(1_000_000):
        if Path(stop_file).exists():
            break
        files = cache.get(KEY)
        if files is None:
            continue
        writer, iteration = map(int, files["who"].decode().split(":"))
        if files != _payload(writer, iteration):
            return -1
        hits += 1
    return hits


def test_concurrent_writers_never_expose_a_torn_entry(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TLXC_CACHE_DISABLE", raising=False)
    root = str(tmp_path / "cache")
    stop_file = tmp_path / "writers_done"
    context = multiprocessing.get_context("spawn")
    with context.Pool(WRITERS + 2) as pool:
        readers = [pool.apply_async(_reader, (root, str(stop_file))) for _ in range(2)]
        writers = [pool.apply_async(_writer, (root, n)) for n in range(WRITERS)]
        for job in writers:
            job.get(timeout=120)
        stop_file.touch()
        hits = [job.get(timeout=120) for job in readers]
    assert all(h >= 0 for h in hits), "a reader saw an entry that no single writer wrote"
    assert sum(hits) > 0, "the readers never overlapped the writers"
    final = DiskCache(root).get(KEY)
    assert final is not None and final["who"] in {f"{w}:{WRITES_EACH - 1}".encode()
                                                    for w in range(WRITERS)}
    leftovers = [p.name for p in Path(root).rglob("*")
                 if p.is_file() and p.suffix != ".tlxc"]
    assert leftovers == [], "temporary files were left behind"


def test_triton_file_cache_api(tmp_path, monkeypatch):
    """Triton's ``triton.runtime.cache`` names exist in tlxc.runtime.cache (LMDeploy subclasses
    ``FileCacheManager``): files per key under tlxc's cache directory, written atomically, groups."""
    from tlxc.runtime import cache as C
    monkeypatch.setenv("TLXC_CACHE_DIR", str(tmp_path))

    class Locked(C.FileCacheManager):           # as a subclass adds a lock around the base methods
        def put(self, data, filename, binary=True):
            return super().put(data, filename, binary)

    m = Locked("abc123")
    assert m.cache_dir.startswith(str(tmp_path)) and m.get_file("k.cubin") is None
    path = m.put(b"\x00\x01", "k.cubin")
    assert m.get_file("k.cubin") == path and open(path, "rb").read() == b"\x00\x01"
    meta = m.put('{"n": 1}', "k.json", binary=False)
    group = m.put_group("__grp__k.json", {"k.cubin": path, "k.json": meta})
    assert m.get_group("__grp__k.json") == {"k.cubin": path, "k.json": meta} and group.endswith(".json")
    with pytest.raises(TypeError):
        m.put("text", "x.bin")
    assert C.get_cache_manager("abc123").get_file("k.cubin") == path
    assert C.default_cache_dir() == str(tmp_path) and C.triton_key().startswith("tlxc-")
