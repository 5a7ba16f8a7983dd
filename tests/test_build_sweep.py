"""A build killed mid-way (its worker past its deadline) leaves its work folder in the shared build cache;
the next build removes every work folder no running build holds (``builder.sweep``)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from evoteam.gpu_bench.build import builder

pytestmark = pytest.mark.unit


def folder(root: Path, name: str, age_s: float) -> Path:
    path = root / name
    (path / ".evoteam-tmp").mkdir(parents=True)
    (path / ".evoteam-tmp" / "ccX.o").write_bytes(b"\0" * 4096)
    os.utime(path, (1_000_000 - age_s, 1_000_000 - age_s))
    return path


def test_only_old_work_folders_that_no_build_holds_are_removed(tmp_path: Path) -> None:
    left = folder(tmp_path, "build-left", 3600)
    running = folder(tmp_path, "build-running", 3600)
    young = folder(tmp_path, "build-young", 5)  # made, maybe not locked yet
    entry = folder(tmp_path, "0123456789abcdef0123456789abcdef", 3600)  # a cache entry
    outside = folder(tmp_path / "elsewhere", "target", 3600)
    (tmp_path / "build-link").symlink_to(outside)
    (tmp_path / "build-file").write_text("not a folder")
    held = os.open(running, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        assert builder.sweep(tmp_path, now=1_000_000) == ["build-left"]
    finally:
        os.close(held)
    assert not left.exists()
    assert running.is_dir() and young.is_dir() and entry.is_dir() and outside.is_dir()
    assert (tmp_path / "build-link").is_symlink() and (tmp_path / "build-file").is_file()
    assert builder.sweep(tmp_path, now=1_000_000) == ["build-running"]  # its build ended without removing it
