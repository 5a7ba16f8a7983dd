"""Tells running out of memory apart from other failures: an allocation that failed inside the worker, and a
worker the kernel's OOM killer ended (a SIGKILL that looks like any other from outside).

The kernel counts every OOM kill, of the whole machine or of a memory cgroup, in ``/proc/vmstat``'s
``oom_kill``; a worker killed by SIGKILL while that count rose was, as far as anyone here can tell, killed for
memory. Where the count cannot be read, a SIGKILL nobody here sent is still most often the OOM killer, and the
reason says so.
"""

from __future__ import annotations

from pathlib import Path

VMSTAT = Path("/proc/vmstat")

_ALLOCATION_FAILED = ("can't allocate memory", "out of memory", "cannot allocate memory")


def oom_kills(vmstat: Path = VMSTAT) -> int | None:
    """How many processes the kernel's OOM killer has ended since boot; None where it does not say."""
    try:
        for line in vmstat.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def killed_for_memory(before: int | None, after: int | None) -> str:
    """The reason for a worker that died from SIGKILL that nobody here sent, given the OOM kill counts from
    before the request and now."""
    if before is not None and after is not None and after > before:
        return (
            "out of memory: the kernel's OOM killer ended the worker (SIGKILL; the machine's OOM kill count rose "
            f"from {before} to {after}): the workload's tensors, the reference's or the candidate's allocations "
            "do not fit in this machine's memory"
        )
    if before is None or after is None:
        return "the worker died from signal SIGKILL (Killed), which is most often the kernel's OOM killer"
    return "the worker died from signal SIGKILL (Killed), not from the OOM killer (its count did not rise)"


def is_out_of_memory(exc: BaseException) -> bool:
    """An allocation failed: Python's MemoryError, torch's OutOfMemoryError (CUDA), or torch's CPU allocator
    (a RuntimeError that says it cannot allocate)."""
    if isinstance(exc, MemoryError):
        return True
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(phrase in text for phrase in _ALLOCATION_FAILED)
