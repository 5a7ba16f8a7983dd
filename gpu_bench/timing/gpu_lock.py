"""One timer per GPU: an ``fcntl`` file lock per physical device, held while a worker times a kernel.

Workers on one machine may share a GPU (or be started with different ``CUDA_VISIBLE_DEVICES``, under which
every worker calls its GPU "0"), so the lock is keyed by the physical device: its UUID when torch reports
one, else the index that ``CUDA_VISIBLE_DEVICES`` maps to. The kernel drops the lock when its holder dies.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

DEFAULT_WAIT_S = 300.0


class GpuLockTimeout(RuntimeError):
    """Another worker kept the GPU longer than we could wait (infrastructure, not the kernel's fault)."""


def lock_folder() -> Path:
    """``$EVOTEAM_GPU_LOCKS``, else ``evoteam-gpu-locks`` in the system's temporary folder."""
    explicit = os.environ.get("EVOTEAM_GPU_LOCKS")
    return Path(explicit) if explicit else Path(tempfile.gettempdir()) / "evoteam-gpu-locks"


def physical_key(index: int, uuid: str | None, visible: str | None) -> str:
    """A name for the physical GPU behind torch's ``index``: its UUID, else the visible-devices entry."""
    if uuid:
        return "uuid-" + _safe(uuid)
    entries = [e.strip() for e in visible.split(",") if e.strip()] if visible else []
    entry = entries[index] if index < len(entries) else str(index)
    return "gpu-" + _safe(entry)


def device_key(index: int = 0) -> str:
    """The lock key of torch's CUDA device ``index`` in this process."""
    import torch

    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    return physical_key(index, str(uuid) if uuid else None, os.environ.get("CUDA_VISIBLE_DEVICES"))


@contextlib.contextmanager
def gpu_lock(
    key: str,
    folder: Path | None = None,
    wait_s: float = DEFAULT_WAIT_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Path]:
    """Holds the exclusive lock of ``key`` for the ``with`` block; waits up to ``wait_s`` for it."""
    root = folder or lock_folder()
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{_safe(key)}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = clock() + wait_s
        while not _try_lock(fd):
            if clock() >= deadline:
                raise GpuLockTimeout(f"GPU {key} stayed locked by another worker for {wait_s:g} s ({path})")
            sleep(0.01)
        try:
            yield path
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        raise
    return True


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)
