"""Where the worker process may write once it serves: its own folders, never the shared build cache.

Candidates that run in the worker's process (CUDA kernels, Python candidates on a GPU, anything with
``--no-isolate``) can do whatever the worker can. Before this, the worker could write the build cache (and
so could they: an entry rewritten with its manifest to match, for every later worker and run to load) and
the timing's flush library beside it (loaded by every later worker). So, after starting its build helper
(``build_helper.py``, the one writer of the cache) and making sure the flush library exists, and before it
loads torch or any candidate, the worker restricts itself with Landlock (``sandbox/landlock.py``, for the
worker and everything it starts): files may change only beneath its own folder (its log, its temporary
folder, what Python candidates build at run time, one folder per solution) and ``/dev/shm``; in the GPU
lock folder that every worker of the machine shares it may make and write lock files but never remove,
rename or link one (a lock file removed while another worker holds it would let a third time beside it);
existing device files stay writable. A kernel without Landlock leaves the worker as it was, and the
environment it reports says so.

In the sandbox ``/dev/shm`` is the worker's own (a tmpfs that ends with it, capped: ``sandbox/bwrap.py``),
shared by the candidates it runs in turn. What a request leaves there (``shared_memory_left``) holds memory
until the worker ends and could fill it for the next candidate, whose named semaphores (``torch.compile``'s
compile workers) would then fail: the worker answers and is replaced. Outside a sandbox ``/dev/shm`` is the
machine's, where other programs come and go: nothing is looked at.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from evoteam.gpu_bench.sandbox import landlock
from evoteam.gpu_bench.sandbox.policy import IN_SANDBOX_ENV

SHARED_MEMORY = Path("/dev/shm")


def shared_memory_entries() -> frozenset[str] | None:
    """The names in the sandbox's ``/dev/shm`` now; None outside a sandbox (the machine's is not ours)."""
    if os.environ.get(IN_SANDBOX_ENV) != "1":
        return None
    try:
        return frozenset(path.name for path in SHARED_MEMORY.iterdir())
    except OSError:
        return None


def shared_memory_left(before: frozenset[str] | None) -> str | None:
    """What was made in ``/dev/shm`` since ``before`` (``shared_memory_entries``) and is still there, said in
    a few words (how many entries, the memory they hold); None when nothing."""
    now = shared_memory_entries()
    if before is None or now is None or not now - before:
        return None
    new = sorted(now - before)
    paths = [SHARED_MEMORY / name for name in new]
    paths += [
        Path(root) / f for name in new for root, dirs, files in os.walk(SHARED_MEMORY / name) for f in dirs + files
    ]
    held = 0
    for path in paths:
        with contextlib.suppress(OSError):
            held += path.lstat().st_blocks * 512
    shown = ", ".join(new[:3]) + (f" and {len(new) - 3} more" if len(new) > 3 else "")
    return f"{len(new)} entr{'y' if len(new) == 1 else 'ies'} in /dev/shm ({shown}; {held / 2**20:.1f} MiB)"


def private_tmpdir(folder: Path) -> Path:
    """``TMPDIR`` (and Python's ``tempfile``) inside ``folder``, the worker's own, where it is not already
    (a worker without a sandbox inherits the machine's ``/tmp``, where the cache may lie too)."""
    current = Path(os.environ.get("TMPDIR") or tempfile.gettempdir()).resolve()
    own = folder.resolve()
    if current == own or own in current.parents:
        return current
    private = own / "tmp"
    private.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(private)
    tempfile.tempdir = str(private)
    return private


def writable_folders(folder: Path, builds: Path | None, extra: list[Path]) -> list[Path]:
    """The worker's own ``folder`` (log, temporary folder), its run-time ``builds`` (where its owner put them)
    and ``extra`` (a Triton cache named by hand), and ``/dev/shm`` where there is one."""
    found = [folder, *([builds] if builds is not None else []), *extra]
    return [*found, *([SHARED_MEMORY] if SHARED_MEMORY.is_dir() else [])]


def confine(folders: list[Path], locks: Path) -> str:
    """Restricts this process's writes to ``folders``, and in the GPU ``locks`` folder every worker of the
    machine shares to making and writing lock files, never removing or replacing one (another worker's lock
    would then lock nothing); one line saying what holds, for the worker's log and the environment it
    reports."""
    threads = landlock.threads_now()
    try:
        confined = landlock.restrict_writes(folders, lasting=[locks])
    except OSError as exc:
        return f"not confined: Landlock refused ({exc})"
    if not confined:
        return "not confined: this Linux kernel has no Landlock (5.13 or later, enabled)"
    held = f"confined (Landlock ABI {landlock.version()}): the build cache is written by the build helper alone"
    return held if threads == 1 else f"{held}, but {threads - 1} thread(s) started before are not held"
