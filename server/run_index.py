"""Every run of the repository as its journal says, kept current cheaply: a journal is read again only when its
size or modification time changed, and then only what was appended (``RunFold``), so a request reads memory and
a refresh reads only what grew. A journal that cannot be read (another format version, not a journal, a bad
line) is left out, logged once per change with its one-line reason, and kept in ``problems``."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from evoteam.server.run_fold import RunFold
from evoteam.supervisor.journal import JournalError
from evoteam.supervisor.records import WorkloadOutcome
from evoteam.supervisor.state import Candidate, RunState

log = logging.getLogger("evoteam.server")


@dataclass(frozen=True)
class RunEntry:
    run: str
    state: RunState
    stamp: tuple[int, int]
    """(size, mtime_ns) of the journal when it was folded."""
    source: RunFold | None = None
    """Where the state came from; its records hold no per-workload outcomes (``workloads`` reads them)."""

    @property
    def kernel(self) -> str:
        assert self.state.config is not None
        return self.state.config.kernel

    @property
    def live(self) -> bool:
        """Not finished (running, or stopped without finishing; a lock file tells which)."""
        return self.state.finished is None

    def best(self) -> Candidate | None:
        return self.state.candidates.get(self.state.best) if self.state.best else None

    def workloads(self, candidate: str) -> list[WorkloadOutcome]:
        """The candidate's per-workload outcomes (read from the journal: the folded state does not keep them)."""
        if self.source is not None:
            return self.source.workloads(candidate)
        known = self.state.candidates.get(candidate)
        return list(known.record.workloads) if known is not None and known.record is not None else []


class RunIndex:
    def __init__(self, repo_root: Path) -> None:
        self.root = repo_root
        self.folder = repo_root / ".evoteam" / "runs"
        self._runs: dict[str, RunEntry] = {}
        self._folds: dict[str, RunFold] = {}
        self.problems: dict[str, str] = {}
        """Run → why its journal cannot be read (until it can)."""
        self._lock = threading.Lock()

    def refresh(self) -> list[str]:
        """Reads the journals that changed since the last refresh; returns the runs that changed (new ones too)."""
        changed = []
        seen = set()
        journals = sorted(self.folder.glob("*/journal.jsonl")) if self.folder.is_dir() else []
        for path in journals:
            run = path.parent.name
            seen.add(run)
            try:
                info = path.stat()
            except OSError:
                continue
            stamp = (info.st_size, info.st_mtime_ns)
            with self._lock:
                old = self._runs.get(run)
            if old is not None and old.stamp == stamp:
                continue
            source = self._folds.get(run) or self._folds.setdefault(run, RunFold(path))
            try:
                grew = source.update()
            except (JournalError, OSError) as exc:  # read it again on its next change
                with self._lock:
                    known = self.problems.get(run)
                    self.problems[run] = str(exc)
                if known != str(exc):
                    log.warning("run %s is left out: %s", run, exc)
                continue
            with self._lock:
                self.problems.pop(run, None)
            if source.state.config is None:
                continue
            with self._lock:
                self._runs[run] = RunEntry(run, source.state, stamp, source)
            if grew or old is None:
                changed.append(run)
        for gone in set(self._folds) - seen:
            del self._folds[gone]
        with self._lock:
            for gone in set(self._runs) - seen:
                del self._runs[gone]
                changed.append(gone)
            for gone in set(self.problems) - seen:
                del self.problems[gone]
        return changed

    def get(self, run: str) -> RunEntry | None:
        with self._lock:
            return self._runs.get(run)

    def runs(self) -> list[RunEntry]:
        """Every run, oldest first (run ids start with the kernel and a UTC timestamp)."""
        with self._lock:
            entries = list(self._runs.values())
        return sorted(entries, key=lambda e: (_started(e.run), e.run))

    def for_kernel(self, kernel: str) -> list[RunEntry]:
        return [e for e in self.runs() if e.kernel == kernel]

    def best_for(self, kernel: str) -> tuple[RunEntry, Candidate] | None:
        """The best passing candidate of any run of ``kernel`` (newest run on ties)."""
        found: tuple[RunEntry, Candidate] | None = None
        for entry in self.for_kernel(kernel):
            candidate = entry.best()
            if candidate is None or candidate.record is None or candidate.record.geomean_speedup is None:
                continue
            if found is None or candidate.record.geomean_speedup >= (found[1].record.geomean_speedup or 0.0):  # type: ignore[union-attr]
                found = (entry, candidate)
        return found

    def live(self) -> list[RunEntry]:
        return [e for e in self.runs() if e.live]


def _started(run: str) -> str:
    """``kernel-YYYYmmdd-HHMMSS-xxxx`` → its timestamp (runs sort by when they started, whatever the kernel)."""
    parts = run.rsplit("-", 3)
    return "-".join(parts[1:3]) if len(parts) == 4 else run


STARTING_S = 120.0
"""A live run whose kernel lock names no live process counts as starting (a detached run journals its start
before its process takes the lock) while its journal is younger than this."""


def running(entry: RunEntry, root: Path, now: float | None = None) -> bool:
    """Whether a live run's process is there: the kernel's lock names it and its process exists, or the run
    has just started. A run that stopped without finishing (killed, crashed) is live but not running."""
    if not entry.live:
        return False
    holder = _lock_holder(root / ".evoteam" / "locks" / f"{entry.kernel}.lock")
    alive = _alive(holder.get("pid"))
    if holder.get("run") == entry.run:
        return alive
    if alive:  # another run of the kernel holds its lock: one run per kernel, so not this one
        return False
    return (time.time() if now is None else now) - entry.stamp[1] / 1e9 < STARTING_S


def _lock_holder(path: Path) -> dict[str, object]:
    try:
        value = json.loads(path.read_bytes() or b"{}")
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True
