"""The disk the build cache may take (``build/cache_space.py``): what a killed build left is swept, the
entries used least recently go when the cache is over its limit, never one in use."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from evoteam.gpu_bench.build import cache_space

pytestmark = pytest.mark.unit

NOW = 1_000_000.0


def folder(root: Path, name: str, age_s: float, size: int = 4096) -> Path:
    path = root / name
    (path / ".evoteam-tmp").mkdir(parents=True)
    (path / ".evoteam-tmp" / "ccX.o").write_bytes(os.urandom(size))
    os.utime(path, (NOW - age_s, NOW - age_s))
    return path


def entry(root: Path, name: str, used_s_ago: float, size: int) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "kernel.so").write_bytes(os.urandom(size))
    (path / cache_space.MARKER).write_text(str(path / "kernel.so"))
    os.utime(path / cache_space.MARKER, (NOW - used_s_ago, NOW - used_s_ago))
    return path


def test_only_old_work_folders_that_no_build_holds_are_swept(tmp_path: Path) -> None:
    left = folder(tmp_path, "evoteam-work-left_abc", 3600)
    running = folder(tmp_path, "evoteam-work-run_abcd", 3600)
    young = folder(tmp_path, "evoteam-work-young_ab", 5)  # made, maybe not locked yet
    kept = folder(tmp_path, "0123456789abcdef0123456789abcdef", 3600)  # a cache entry
    outside = folder(tmp_path / "elsewhere", "target", 3600)
    (tmp_path / "evoteam-work-link_abc").symlink_to(outside)
    (tmp_path / "evoteam-work-file_abc").write_text("not a folder")
    users = folder(tmp_path, "evoteam-work-in-progress", 3600)  # a cache may be any folder: not a work folder's name
    held = cache_space.hold(running)
    try:
        assert cache_space.sweep(tmp_path, now=NOW) == ["evoteam-work-left_abc"]
        with pytest.raises(BlockingIOError):  # the build's lock holds against any other open of the folder
            probe = os.open(running, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(probe)
    finally:
        os.close(held)
    assert not left.exists()
    assert running.is_dir() and young.is_dir() and kept.is_dir() and outside.is_dir() and users.is_dir()
    assert (tmp_path / "evoteam-work-link_abc").is_symlink() and (tmp_path / "evoteam-work-file_abc").is_file()
    assert cache_space.sweep(tmp_path, now=NOW) == ["evoteam-work-run_abcd"]  # its build ended without removing it


def test_over_its_limit_the_cache_loses_the_entries_used_least_recently_but_none_in_use(tmp_path: Path) -> None:
    oldest = entry(tmp_path, "a" * 32, 10 * 86400, 300_000)
    older = entry(tmp_path, "b" * 32, 5 * 86400, 300_000)
    old = entry(tmp_path, "c" * 32, 2 * 86400, 300_000)
    recent = entry(tmp_path, "d" * 32, 60, 300_000)
    building = folder(tmp_path, "evoteam-work-x_abcdef", 7200, 300_000)  # a work folder is no entry
    users = folder(tmp_path, "release-notes", 9 * 86400, 300_000)  # nor is a folder of the user's
    assert cache_space.evict(tmp_path, limit=2_000_000, now=NOW) == []  # 1.2 MB of entries: under
    assert cache_space.evict(tmp_path, limit=700_000, now=NOW) == [oldest.name, older.name]
    assert old.is_dir() and recent.is_dir() and building.is_dir() and users.is_dir()
    assert cache_space.evict(tmp_path, limit=1, now=NOW) == [old.name]  # the one in use stays, over or not
    assert recent.is_dir()


def test_a_use_is_the_time_of_the_entry_s_marker(tmp_path: Path) -> None:
    hit = entry(tmp_path, "e" * 32, 10 * 86400, 1000)
    cache_space.touch(hit)
    assert abs((hit / cache_space.MARKER).stat().st_mtime - NOW) > 86400  # set to now, not to NOW
    assert cache_space.evict(tmp_path, limit=1) == []
    cache_space.touch(tmp_path / "missing")  # nothing to touch: no error


def test_the_cache_limit_is_read_from_the_environment_with_clear_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cache_space.CACHE_LIMIT_ENV, raising=False)
    assert cache_space.cache_limit() == cache_space.CACHE_LIMIT_BYTES
    monkeypatch.setenv(cache_space.CACHE_LIMIT_ENV, "1.5")
    assert cache_space.cache_limit() == 3 << 29
    for bad, said in (("lots", "is not a number of GiB"), ("0", "must be more than 0 GiB")):
        monkeypatch.setenv(cache_space.CACHE_LIMIT_ENV, bad)
        with pytest.raises(ValueError, match=said):
            cache_space.cache_limit()
