"""The disk the build cache may take: what killed builds left, the size of one entry, the size of the whole.

The cache is shared by every worker, run and session of the machine, and kept: before 2026-12-07 nothing
bounded it. Three bounds, each applied by the builder (the build helper, in a worker):

- **What a killed build left** (``sweep``): a build runs in a work folder of its own in the cache
  (``evoteam-work-*``), renamed into its entry or removed when the build ends. A build killed with its worker (past
  the deadline, or a crash) removed nothing: a candidate with a 2 GB array and a source that kept the compiler
  busy left 1.9 GiB in the cache at each try, for good. Each build holds a lock on its work folder
  (``hold``), and each build first removes the work folders that no build holds and that are over
  ``UNLOCKED_GRACE_S`` old.
- **One entry** (``ENTRY_LIMIT_BYTES``): a build that leaves more than this is refused, not kept. A kernel's
  library is megabytes; a 2 GB initialised array built in 16 s and took 1.9 GiB of the cache for good.
- **The whole cache** (``evict``): after an entry is added, while the cache holds more than ``limit``
  (``EVOTEAM_CACHE_LIMIT_GB``, default ``CACHE_LIMIT_BYTES``), the entries used least recently are removed,
  never one used in the last ``EVICT_AFTER_S`` (a worker may be loading it). An entry's use is the time of its
  ``artifact`` marker, which each cache hit sets (``touch``). An evicted entry is built again when next asked
  for.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import time
from pathlib import Path

from evoteam.gpu_bench.build.folder_usage import usage

WORK_PREFIX = "evoteam-work-"
WORK_NAME = re.compile(r"evoteam-work-[a-z0-9_]{8}")
"""A work folder's name (``tempfile.mkdtemp``'s): a cache may be any folder a user names (``--cache``), so
nothing else is ever swept."""
ENTRY_NAME = re.compile(r"[0-9a-f]{32}")
"""An entry's name (``builder.build_key``): nothing else is ever evicted."""
UNLOCKED_GRACE_S = 60.0
"""A work folder is made, then locked: one younger than this may be a build between the two, and is left."""
ENTRY_LIMIT_BYTES = 1 << 30
CACHE_LIMIT_BYTES = 20 << 30
CACHE_LIMIT_ENV = "EVOTEAM_CACHE_LIMIT_GB"
EVICT_AFTER_S = 3600.0
MARKER = "artifact"
WALK_LIMIT = 1_000_000
"""The most entries a measure of one folder looks at (a build makes a handful)."""


def hold(work: Path) -> int:
    """Locks the work folder ``work`` for the build now running; the lock ends when the returned descriptor is
    closed, or when this process dies."""
    held = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX)
    return held


def sweep(root: Path, now: float | None = None) -> list[str]:
    """Removes the work folders in the cache ``root`` that no running build holds (their builder was killed),
    once they are ``UNLOCKED_GRACE_S`` old; returns their names."""
    now = time.time() if now is None else now
    removed: list[str] = []
    for path in root.glob(f"{WORK_PREFIX}*"):
        if not WORK_NAME.fullmatch(path.name):
            continue
        try:
            if now - path.lstat().st_mtime < UNLOCKED_GRACE_S:
                continue
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:  # gone, a link, or not a folder: no build's
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
        except OSError:  # a build runs there
            continue
        finally:
            os.close(fd)
    return removed


def allocated(folder: Path) -> int:
    """The bytes allocated below ``folder`` (links not followed, sparse files by what they take), as far as
    ``WALK_LIMIT`` entries."""
    return usage(folder, WALK_LIMIT).bytes


def shown(n: int) -> str:
    """``n`` bytes, for a message."""
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n / 1024:.0f} KiB"


def touch(entry: Path) -> None:
    """Records a use of ``entry`` (a cache hit); a cache this process may not write keeps its old time."""
    with contextlib.suppress(OSError):
        os.utime(entry / MARKER)


def cache_limit() -> int:
    """``EVOTEAM_CACHE_LIMIT_GB`` in bytes where set (a number; ``ValueError`` says what is wrong), else
    ``CACHE_LIMIT_BYTES``."""
    value = os.environ.get(CACHE_LIMIT_ENV)
    if not value:
        return CACHE_LIMIT_BYTES
    try:
        gib = float(value)
    except ValueError:
        raise ValueError(f"{CACHE_LIMIT_ENV}={value!r} is not a number of GiB") from None
    if gib <= 0:
        raise ValueError(f"{CACHE_LIMIT_ENV}={value!r}: the cache's limit must be more than 0 GiB")
    return int(gib * (1 << 30))


def evict(root: Path, limit: int, now: float | None = None) -> list[str]:
    """Removes the entries of the cache ``root`` used least recently while it holds more than ``limit``
    bytes, none used in the last ``EVICT_AFTER_S``; returns their names."""
    now = time.time() if now is None else now
    entries: list[tuple[float, int, Path]] = []
    total = 0
    for path in root.iterdir():
        if not ENTRY_NAME.fullmatch(path.name) or path.is_symlink() or not path.is_dir():
            continue
        size = allocated(path)
        total += size
        try:
            used = (path / MARKER).stat().st_mtime
        except OSError:  # half-written by a killed build, or being written: its own time
            used = path.lstat().st_mtime
        entries.append((used, size, path))
    removed: list[str] = []
    for used, size, path in sorted(entries, key=lambda e: e[0]):
        if total <= limit or now - used < EVICT_AFTER_S:
            break
        shutil.rmtree(path, ignore_errors=True)
        total -= size
        removed.append(path.name)
    return removed
