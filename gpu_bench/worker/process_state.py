"""The worker's process state that a candidate could leave changed to sabotage the next one.

A candidate's native code runs in the worker's process, so it can install signal handlers or arm an alarm,
change the floating-point rounding mode or flush denormals to zero, move the process to other CPUs, set
environment variables (in the C ``environ``, which Python's ``os.environ`` does not see) or change the
working directory. ``capture`` reads all of it; the worker compares after every request with what it
captured when it started, and a worker whose state changed is replaced (the log says what changed).
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

_ROUNDING = {0x000: "to nearest", 0x400: "downward", 0x800: "upward", 0xC00: "toward zero"}  # x86 glibc FE_*
_TINY = 5e-324  # the smallest subnormal double
_SMALLEST_NORMAL = 2.2250738585072014e-308


@dataclass(frozen=True)
class ProcessState:
    handlers: dict[str, int] = field(default_factory=dict)
    """Raw disposition (handler address, or SIG_DFL 0 / SIG_IGN 1) of each catchable signal."""
    timers: tuple[float, ...] = ()
    """Seconds left on the real, virtual and profiling interval timers."""
    rounding: int | None = None
    subnormals: tuple[bool, bool] = (True, True)
    """Whether subnormal inputs are honoured (no DAZ) and subnormal results produced (no FTZ)."""
    cpus: frozenset[int] = frozenset()
    environ: frozenset[str] = frozenset()
    cwd: str = ""


def capture() -> ProcessState:
    """This process's state now."""
    return ProcessState(
        handlers=_handlers(),
        timers=tuple(signal.getitimer(t)[0] for t in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)),
        rounding=_rounding(),
        subnormals=(_TINY * 1.0 != 0.0, _SMALLEST_NORMAL / 2 != 0.0),
        cpus=frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset(),
        environ=_c_environ(),
        cwd=_cwd(),
    )


def differences(before: ProcessState, after: ProcessState) -> list[str]:
    """What changed, one phrase each (empty: nothing)."""
    found: list[str] = []
    changed = sorted(name for name in before.handlers if after.handlers.get(name) != before.handlers[name])
    if changed:
        found.append(f"signal handlers of {', '.join(changed)}")
    if any(left > 0 for left in after.timers) and not any(left > 0 for left in before.timers):
        found.append("an armed interval timer (an alarm)")
    if after.rounding != before.rounding:
        mode = _ROUNDING.get(after.rounding, str(after.rounding)) if after.rounding is not None else "unknown"
        found.append(f"the floating-point rounding mode ({mode})")
    if after.subnormals != before.subnormals:
        found.append("the handling of subnormal numbers (denormals-are-zero or flush-to-zero)")
    if after.cpus != before.cpus:
        found.append(f"the CPU affinity ({sorted(after.cpus)})")
    if after.environ != before.environ:
        names = sorted({entry.split("=", 1)[0] for entry in after.environ ^ before.environ})
        found.append(f"environment variables {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}")
    if after.cwd != before.cwd:
        found.append(f"the working directory ({after.cwd})")
    return found


def forbid_inspection() -> bool:
    """Makes this process non-dumpable: no other process of the same user may ptrace it or read its memory
    through ``/proc/PID/mem`` (a native host's candidate looking for the reference outputs). False where
    that is not possible."""
    try:
        return int(_libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


_PR_SET_DUMPABLE = 4


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library (and libm) as this process already has them loaded: no lookup, no ``ldconfig`` run."""
    return ctypes.CDLL(None, use_errno=True)


def _handlers() -> dict[str, int]:
    """sigaction(sig, NULL, &old) for each catchable signal: the first word of ``struct sigaction`` is the
    handler on Linux. Python's ``signal.getsignal`` does not see handlers installed from C."""
    libc = _libc()
    result: dict[str, int] = {}
    buffer = ctypes.create_string_buffer(512)  # larger than struct sigaction on every Linux ABI
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP) or not isinstance(sig, signal.Signals):
            continue
        if libc.sigaction(int(sig), None, buffer) != 0:
            continue
        result[sig.name] = ctypes.c_void_p.from_buffer(buffer).value or 0
    return result


def _rounding() -> int | None:
    try:
        return int(_libc().fegetround())  # libm is loaded in every CPython process
    except (OSError, AttributeError):
        return None


def _c_environ() -> frozenset[str]:
    """The C library's ``environ`` (what getenv reads), not Python's copy of it."""
    try:
        pointer = ctypes.POINTER(ctypes.c_char_p).in_dll(_libc(), "environ")
    except ValueError:
        return frozenset()
    entries: set[str] = set()
    i = 0
    while pointer[i] is not None:
        entries.add((pointer[i] or b"").decode(errors="replace"))
        i += 1
    return frozenset(entries)


def _cwd() -> str:
    try:
        return str(Path.cwd())
    except OSError:  # removed from under us
        return "<deleted>"
