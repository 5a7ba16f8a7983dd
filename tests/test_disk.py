"""The owner's watch over what a worker's candidates write to disk (``worker/disk.py``): when it walks the
worker's folder, what it counts, and the floor that protects the disk itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evoteam.gpu_bench.worker import disk
from evoteam.gpu_bench.worker.disk import MIB, DiskLimits, DiskWatch, Space, Usage

pytestmark = pytest.mark.unit

LIMITS = DiskLimits(
    limit_bytes=100 * MIB,
    limit_entries=1000,
    walk_after_bytes=10 * MIB,
    walk_after_entries=100,
    floor_bytes=500 * MIB,
    floor_drop_bytes=50 * MIB,
)


class FakeDisk:
    """A file system whose free space the test sets, and a folder whose usage it sets; counts the walks."""

    def __init__(self) -> None:
        self.free: Space | None = Space(10_000 * MIB, 1_000_000)
        self.held = Usage(0, 0)
        self.walked = 0

    def space(self, path: Path) -> Space | None:
        return self.free

    def usage(self, path: Path, limit: int) -> Usage:
        self.walked += 1
        return self.held

    def write(self, n_bytes: int, entries: int = 0) -> None:
        assert self.free is not None and self.free.free_entries is not None
        self.free = Space(self.free.free_bytes - n_bytes, self.free.free_entries - entries)
        self.held = Usage(self.held.bytes + n_bytes, self.held.entries + entries)


def watch(fake: FakeDisk, limits: DiskLimits = LIMITS) -> DiskWatch:
    return DiskWatch(Path("/worker"), limits, free=fake.space, measure=fake.usage)


def test_the_folder_is_walked_only_after_the_disk_has_lost_space_or_inodes_since_the_last_walk() -> None:
    fake = FakeDisk()
    w = watch(fake)
    w.begin()
    fake.write(9 * MIB, entries=99)
    assert w.check() is None and fake.walked == 0  # one statvfs, no walk
    fake.write(2 * MIB)
    assert w.check() is None and fake.walked == 1  # 11 MiB fell: walked, under the limit
    assert w.check() is None and fake.walked == 1  # measured from the last walk
    fake.write(0, entries=100)
    assert w.check() is None and fake.walked == 2  # inodes count too (empty files take no block)


def test_over_its_bytes_or_its_entries_the_worker_is_stopped_and_writes_add_up_across_requests() -> None:
    fake = FakeDisk()
    w = watch(fake)
    for _ in range(9):  # nine requests of 11 MiB each: 99 MiB, under the limit
        w.begin()
        fake.write(11 * MIB)
        assert w.check() is None
    w.begin()
    fake.write(11 * MIB)
    reason = w.check()
    assert reason is not None and "wrote 110 MiB in the worker's folder" in reason and "100 MiB it may" in reason
    many = FakeDisk()
    w = watch(many)
    w.begin()
    many.write(0, entries=1001)
    reason = w.check()
    assert reason is not None and "more than 1000 files and folders" in reason


def test_space_another_program_frees_or_takes_is_not_the_candidate_s() -> None:
    fake = FakeDisk()
    w = watch(fake)
    w.begin()
    assert fake.free is not None
    fake.free = Space(fake.free.free_bytes + 5000 * MIB, 1_000_000)  # freed elsewhere
    assert w.check() is None and fake.walked == 0
    fake.free = Space(fake.free.free_bytes - 3000 * MIB, 1_000_000)  # taken elsewhere: walked, folder empty
    assert w.check() is None and fake.walked == 1


def test_the_disk_falling_below_its_floor_during_a_request_stops_the_worker() -> None:
    """A file deleted but kept open takes space no walk finds: the floor catches it."""
    fake = FakeDisk()
    fake.free = Space(540 * MIB, 1_000_000)
    w = watch(fake)
    w.begin()
    fake.free = Space(520 * MIB, 1_000_000)
    assert w.check() is None  # above the floor
    fake.free = Space(495 * MIB, 1_000_000)
    assert w.check() is None  # below it, but by less than the drop that counts: it was nearly full before
    fake.free = Space(480 * MIB, 1_000_000)
    fake.held = Usage(0, 3)
    reason = w.check()
    assert reason is not None and "fell to 480 MiB free during this request (from 540 MiB" in reason
    assert "files it deleted but kept open" in reason
    w.begin()  # a later request on a disk that was already low: measured from its own start
    assert w.check() is None


def test_where_free_space_cannot_be_read_the_folder_is_walked_every_few_checks() -> None:
    fake = FakeDisk()
    fake.free = None
    w = watch(fake)
    w.begin()
    reasons = [w.check() for _ in range(disk.UNKNOWN_SPACE_EVERY * 2)]
    assert reasons == [None] * len(reasons) and fake.walked == 2
    fake.held = Usage(200 * MIB, 5)
    for _ in range(disk.UNKNOWN_SPACE_EVERY - 1):
        assert w.check() is None
    assert w.check() is not None


def test_usage_counts_allocated_blocks_and_entries_without_following_links(tmp_path: Path) -> None:
    root = tmp_path / "worker"
    (root / "tmp" / "deep").mkdir(parents=True)
    (root / "tmp" / "deep" / "data").write_bytes(os.urandom(1 << 20))
    with (root / "sparse").open("wb") as sparse:
        sparse.truncate(1 << 40)  # a terabyte that takes nothing
    outside = tmp_path / "outside"
    outside.write_bytes(os.urandom(4 << 20))
    (root / "link").symlink_to(outside)
    held = disk.usage(root, 100)
    assert held.entries == 5  # tmp, deep, data, sparse, link
    assert 1 << 20 <= held.bytes < 2 << 20
    for n in range(20):
        (root / f"empty{n}").touch()
    capped = disk.usage(root, 10)
    assert capped.entries == 11  # stopped past the limit: "more than 10"


def test_emptying_keeps_the_log_alone(tmp_path: Path) -> None:
    (tmp_path / "tmp" / "a").mkdir(parents=True)
    (tmp_path / "builds").mkdir()
    (tmp_path / "worker.log").write_text("kept\n")
    (tmp_path / "stray").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    disk.empty(tmp_path, keep=("worker.log",))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["worker.log"]
    assert (tmp_path / "worker.log").read_text() == "kept\n"


def test_a_real_file_system_reports_its_free_space(tmp_path: Path) -> None:
    found = disk.space(tmp_path)
    assert found is not None and found.free_bytes > 0
    assert disk.space(tmp_path / "missing") is None
