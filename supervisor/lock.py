"""One running run per kernel: an exclusive ``flock`` on ``.evoteam/locks/<kernel>.lock``, held while it runs.

The lock file says which run and process hold it, so a second ``evolve`` on the same kernel is refused with a
message that names them. The kernel releases the lock when the process dies (``kill -9`` included), so a
killed run never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from types import TracebackType


class RunLocked(RuntimeError):
    """Another run holds the kernel's lock; the message names it."""


class KernelLock:
    def __init__(self, state_dir: Path, kernel: str, run: str) -> None:
        self.path = state_dir / "locks" / f"{kernel}.lock"
        self.kernel, self.run = kernel, run
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            run, pid = holder.get("run", "?"), holder.get("pid", "?")
            raise RunLocked(
                f"kernel {self.kernel!r} is being evolved by run {run} (pid {pid}); wait, or `evoteam cancel {run}`"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"run": self.run, "pid": os.getpid()}).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> KernelLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def _holder(fd: int) -> dict[str, object]:
    try:
        data = os.pread(fd, 4096, 0)
        value = json.loads(data or b"{}")
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):
        return {}
