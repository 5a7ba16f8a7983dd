"""Processes a candidate leaves behind: the worker adopts them (it is a child subreaper) and kills them after
every request, and a process limit keeps a fork bomb from taking the machine. What the worker's process
starts stays its descendant (``keep_descendants``: ``clone`` with ``CLONE_PARENT`` is refused), so the kill
reaches everything a candidate in that process started.

``task_count`` counts this user's tasks (threads included, as ``RLIMIT_NPROC`` does); the owner of a worker
sets the worker's limit to that count plus ``PROCESS_HEADROOM`` (root is exempt from the limit outside a
sandbox; bubblewrap drops the capability, so inside one the limit holds for root too).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import threading
import time
from collections.abc import Collection
from pathlib import Path

PROCESS_HEADROOM = 1024
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def keep_descendants() -> str:
    """Installs the worker's seccomp program (``bindings/confine.worker_instructions``) on all its threads:
    nothing it starts from now on can be made its sibling, beyond the kill of strays. One line saying what
    holds, for the environment the worker reports."""
    from evoteam.gpu_bench.bindings import confine

    try:
        installed = confine.install_filter(confine.worker_program())
    except OSError as exc:
        return f"not confined: the seccomp program was refused ({exc})"
    if not installed:
        return "not confined: no seccomp program for this machine"
    return "what it starts stays its descendant (clone with CLONE_PARENT refused)"


def task_count(uid: int | None = None) -> int:
    """Tasks (processes and threads) of ``uid`` (default: ours) that this process can see."""
    uid = os.getuid() if uid is None else uid
    total = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields["Threads"])
        except (OSError, KeyError, ValueError):
            continue
    return total


def process_limit() -> int:
    return task_count() + PROCESS_HEADROOM


def limit_processes(limit: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (limit, hard))


def become_subreaper() -> bool:
    """Orphans of our descendants become our children (Linux); False where that is not possible."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def die_with(parent: int) -> bool:
    """This process is killed (SIGKILL) when the thread of ``parent`` that started it ends; False where
    ``parent`` is already gone (the death signal came too late to fire), and the caller should exit."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    return os.getppid() == parent


def children(pid: int | None = None) -> list[int]:
    """The children of every thread of ``pid`` (this process by default). Read with plain ``os`` calls: the
    worker asks this around every timed call of a Python host (its CPU time, the memo check)."""
    pid = os.getpid() if pid is None else pid
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")  # noqa: PTH208 - a tenth of pathlib's cost here
    except OSError:
        return found
    for task in tasks:  # os.open and os.read: half the cost of open() (a Python host's look took 15 µs)
        try:
            fd = os.open(f"/proc/{pid}/task/{task}/children", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            listing = chunk = os.read(fd, 65536)
            while len(chunk) == 65536:  # one read but for thousands of children
                chunk = os.read(fd, 65536)
                listing += chunk
        except OSError:
            continue
        finally:
            os.close(fd)
        found += [int(p) for p in listing.split()]
    return found


def kill_strays(rounds: int = 200, keep: Collection[int] = ()) -> int:
    """Kills every process we started that is still there (adopted orphans included), but those in ``keep``
    (hosts kept between requests); how many."""
    killed = 0
    for _ in range(rounds):
        kids = [kid for kid in children() if kid not in keep]
        if not kids:
            break
        for kid in kids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(kid, signal.SIGKILL)
                killed += 1
        for kid in kids:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(kid, 0)
    return killed


def exit_with_parent(poll_s: float = 0.2) -> threading.Thread:
    """Ends this worker (and what it adopted) once its parent is gone, however the parent died (SIGKILL and
    SIGTERM included, sandbox or not): a daemon thread watches for the reparenting. ``PR_SET_PDEATHSIG``
    would fire when the spawning *thread* exits, which a runner shared between threads cannot rule out."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        kill_strays()
        os._exit(0)

    thread = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    thread.start()
    return thread
