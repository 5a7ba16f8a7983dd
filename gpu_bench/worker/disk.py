"""What a worker's candidates may write to disk: a limit on each file, set in the worker, and the owner's
watch over the worker's folder and the disk that holds it.

Everything a local worker's candidates may write lies in the worker's own folder (its temporary folder, its
run-time builds, its log) or, through its build helper, in the build cache. Until 2026-12-07 only the log
was bounded: a candidate could write until its time limit, at the disk's speed (gigabytes a second into the
page cache), and fill the disk the user's repository, the build cache and every other program share.

- **Each file** (``limit_file_size``): the worker sets ``RLIMIT_FSIZE`` (soft and hard: a sandboxed process
  holds no capability to raise it) before it starts anything, so its build helper, the compilers it runs and
  every host inherit it. A write or truncation past the limit fails (``EFBIG``; a process that does not
  ignore ``SIGXFSZ``, as Python does, is killed by it). A ``fallocate`` that keeps the file's size is the
  one way to take space past it; the hosts' and the worker's seccomp programs refuse it (``confine.py``).
  No process of the worker dumps core (``RLIMIT_CORE`` 0): a core file is as large as what its process held.
- **The worker's folder** (``DiskWatch``, in the owner, out of the candidates' reach): walking a folder
  costs time, so the owner looks at the free space of the folder's file system (``statvfs``, one system
  call) about twice a second while a request runs and once after it. Only after the free space (or the free
  inodes) has fallen by ``walk_after_bytes`` (``walk_after_entries``) since its last walk (or since it last
  rose: space another program frees hides nothing) does it walk the folder: more than ``limit_bytes``
  allocated, or more than ``limit_entries`` entries, stops the worker. It may overshoot by what is written
  between two looks: ``walk_after_bytes`` and half a second of writing.
- **The disk** (the same watch): a file a candidate deleted but keeps open takes space no walk finds, and so
  does a write outside the folder where there is no sandbox. So a request during which the free space fell
  by at least ``floor_drop_bytes`` to less than ``floor_bytes`` stops the worker too (its processes end, and
  what they held open is freed). The free space is the file system's, so another program's writes count:
  the reason says so.

A worker stopped by the watch answers its request with a runtime error that says which bound was crossed;
its folder is emptied but for its log (its solutions build again). The SSH runner's remote worker has the
per-file limit but no watch (its folder is on its own machine), as its log has no bound.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from evoteam.gpu_bench.build.folder_usage import Usage, usage

MIB = 1 << 20
GIB = 1 << 30


class DiskLimits(BaseModel):
    """The bounds of one local worker (bytes and entries)."""

    model_config = ConfigDict(frozen=True)

    file_bytes: int = 2 * GIB
    """The largest file any process of the worker may write (``RLIMIT_FSIZE``). A shared library or object
    file of a kernel is megabytes; past 2 GiB the linker's usual code model fails anyway."""
    limit_bytes: int = 4 * GIB
    """The most the worker's folder may hold (allocated blocks, so a sparse file counts what it takes)."""
    limit_entries: int = 200_000
    """The most files, folders and links the worker's folder may hold; also the most one walk looks at."""
    walk_after_bytes: int = 256 * MIB
    walk_after_entries: int = 20_000
    floor_bytes: int = 1 * GIB
    floor_drop_bytes: int = 1 * GIB


def limit_file_size(limit: int) -> int:
    """Sets this process's ``RLIMIT_FSIZE`` (soft and hard) to ``limit`` bytes, or to the hard limit where
    that is lower, and its ``RLIMIT_CORE`` to 0 (soft and hard); returns the file size limit that holds.

    A core dump is a file no file size limit bounds, as large as what the crashing process held, written where
    the kernel's pattern says (often the process's current folder: the user's, for a worker started from a
    repository). The hosts are non-dumpable and the native host may write no file, but a host may make itself
    dumpable again and raise its own soft limit up to the hard one; a hard limit of 0 leaves it nothing to
    raise."""
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return limit


def describe_file_limit() -> str:
    """This process's file size limit, for the environment a worker reports."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    size = "no limit" if soft == resource.RLIM_INFINITY else f"each file at most {_size(soft)}"
    core = resource.getrlimit(resource.RLIMIT_CORE)
    return f"{size}; {'no core dumps' if core == (0, 0) else 'core dumps allowed'}"


class Space(NamedTuple):
    """What a file system has free for an unprivileged process: bytes, and inodes (None where it does not
    count them)."""

    free_bytes: int
    free_entries: int | None


def space(path: Path) -> Space | None:
    """The free space of the file system holding ``path``; None where it cannot be read or is not counted."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    if st.f_blocks == 0:  # a file system that does not count its blocks (some network and virtual ones)
        return None
    return Space(st.f_bavail * st.f_frsize, st.f_favail if st.f_files else None)


UNKNOWN_SPACE_EVERY = 8
"""Where the free space cannot be read, the folder is walked every this many checks (about every 4 s)."""


class DiskWatch:
    """The owner's watch over one worker's ``folder`` (see the module's docstring). ``begin`` at each request,
    ``check`` about twice a second while it runs and once after it: a reason to stop the worker, or None."""

    def __init__(
        self,
        folder: Path,
        limits: DiskLimits | None = None,
        free: Callable[[Path], Space | None] = space,
        measure: Callable[[Path, int], Usage] = usage,
    ) -> None:
        self.folder = folder
        self.limits = limits or DiskLimits()
        self._free = free
        self._measure = measure
        self._start: Space | None = None
        """The free space when the request now running began (the floor's reference)."""
        self._mark: Space | None = None
        """The free space at the last walk (kept from one request to the next: writes add up)."""
        self._checks = 0
        self.walks = 0

    def begin(self) -> None:
        self._start = self._free(self.folder)
        if self._mark is None:
            self._mark = self._start

    def check(self) -> str | None:
        limits = self.limits
        now = self._free(self.folder)
        self._checks += 1
        if now is None or self._mark is None:
            self._mark = now
            return self._walk() if self._checks % UNKNOWN_SPACE_EVERY == 0 else None
        start = self._start
        if start is not None and now.free_bytes < limits.floor_bytes:
            dropped = start.free_bytes - now.free_bytes
            if dropped >= limits.floor_drop_bytes:
                return (
                    f"the disk that holds the worker's folder fell to {_size(now.free_bytes)} free during this "
                    f"request (from {_size(start.free_bytes)}; the floor is {_size(limits.floor_bytes)}): the "
                    "candidate's writes, files it deleted but kept open among them, or another program's; the "
                    "worker was stopped, which frees what its processes held"
                )
        mark = self._mark = _highest(self._mark, now)  # space freed since is measured from where it rose to
        fell = mark.free_bytes - now.free_bytes
        fell_entries = (
            mark.free_entries - now.free_entries
            if mark.free_entries is not None and now.free_entries is not None
            else 0
        )
        if fell < limits.walk_after_bytes and fell_entries < limits.walk_after_entries:
            return None
        self._mark = now
        return self._walk()

    def _walk(self) -> str | None:
        limits = self.limits
        self.walks += 1
        held = self._measure(self.folder, limits.limit_entries)
        if held.entries > limits.limit_entries:
            return (
                f"the candidate made more than {limits.limit_entries} files and folders in the worker's folder; "
                "the worker was stopped and its folder emptied"
            )
        if held.bytes > limits.limit_bytes:
            return (
                f"the candidate wrote {_size(held.bytes)} in the worker's folder (its temporary and build "
                f"folders), more than the {_size(limits.limit_bytes)} it may; the worker was stopped and its "
                "folder emptied"
            )
        return None


def _highest(a: Space, b: Space) -> Space:
    entries = None if a.free_entries is None or b.free_entries is None else max(a.free_entries, b.free_entries)
    return Space(max(a.free_bytes, b.free_bytes), entries)


def empty(folder: Path, keep: tuple[str, ...]) -> None:
    """Removes everything in ``folder`` but the entries named in ``keep`` (a stopped worker's folder)."""
    try:
        listing = list(os.scandir(folder))
    except OSError:
        return
    for entry in listing:
        if entry.name in keep:
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                Path(entry.path).unlink()


def _size(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / MIB:.0f} MiB"
