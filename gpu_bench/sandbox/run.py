"""Running a compiler on candidate sources inside the sandbox: it may write only its build folder (so an
``#include`` of a secret finds nothing, and nothing lands outside), with a cleared environment and no network.
Landlock holds its writes to that folder too (``landlocked.py``), which is all that holds them where no
sandbox wraps it (inside one already, as the worker's build helper is, or none at all).

What the compiler prints is the candidate's to choose: a source of a few lines whose macros expand to a
hundred thousand ``#pragma message`` made g++ print 288 MB in 4.5 s, and a few more lines would make it print
for the whole build time limit. Whoever compiles holds that output: the build helper, the agents' compile tool
in the supervisor's process, the language server checking a file. Before 2026-12-07 ``check_solution`` of a
source of a million such messages (2.7 GB) had its caller at 11.2 GB resident after 10 minutes, not yet
returned; now it returns in about 4 s. So each stream is read as it comes, at most
``OUTPUT_LIMIT_BYTES`` of it is kept, and a compiler that prints more is stopped (its whole process group),
with a note in the output it returns. Its input is empty (``/dev/null``): a compiler that reads
``#include "/dev/stdin"`` finds nothing, not its caller's input (the build helper's protocol).

Its memory is bounded too: a source can make ``cc1plus`` take gigabytes (300,000 expanded ``#pragma message``
took 1.4 GB), and nothing stopped it but the kernel's OOM killer, after the machine had run short. So every
compiler runs through ``landlocked`` (inside bubblewrap as well), which limits its address space to
``compiler_memory()``: half the machine's memory, at least 4 GiB; g++ then says ``virtual memory exhausted``.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import time
from pathlib import Path

from evoteam.gpu_bench.sandbox import landlocked
from evoteam.gpu_bench.sandbox.choose import current

OUTPUT_LIMIT_BYTES = 1 << 20
"""The most kept of each of a compiler's two streams; past it the compiler is stopped. A real build's log
is kilobytes; the log travels in one protocol line, which the owner reads up to 16 MiB."""


MIN_COMPILER_MEMORY_BYTES = 4 << 30


def compiler_memory() -> int:
    """The address space a compiler may take: half of this machine's memory, at least 4 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return MIN_COMPILER_MEMORY_BYTES
    return max(MIN_COMPILER_MEMORY_BYTES, total // 2)


def run_confined(cmd: list[str], work: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``cmd`` run in ``work``, confined, its output bounded (see the module's docstring); raises
    ``subprocess.TimeoutExpired`` past ``timeout_s`` (the process group killed) and ``OSError`` when it cannot
    start."""
    scratch = work / ".evoteam-tmp"
    held = landlocked.command(work, cmd, memory=compiler_memory())
    argv, env = current().wrap(held, writable=[work], tmpdir=scratch, env=os.environ)
    if argv == held:  # not wrapped: its writes held by Landlock alone, its temporary files in the build folder
        scratch.mkdir(parents=True, exist_ok=True)
        env = {**env, "TMPDIR": str(scratch)}
    try:
        return bounded_run(argv, work, env, timeout_s)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def bounded_run(
    argv: list[str], cwd: Path, env: dict[str, str], timeout_s: float, limit: int = OUTPUT_LIMIT_BYTES
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)`` that keeps at most ``limit``
    bytes of each stream and stops the process (and its group) when either goes past it."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    streams = (proc.stdout.fileno(), proc.stderr.fileno())
    kept = {fd: bytearray() for fd in streams}
    seen = dict.fromkeys(streams, 0)
    deadline = time.monotonic() + timeout_s
    try:
        with selectors.DefaultSelector() as selector:
            for fd in streams:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map() and max(seen.values()) <= limit:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    _stop(proc)
                    raise subprocess.TimeoutExpired(argv, timeout_s)
                for key, _ in selector.select(min(remaining, 1.0)):
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        selector.unregister(key.fd)
                    seen[key.fd] += len(chunk)
                    kept[key.fd] += chunk[: max(0, limit - len(kept[key.fd]))]
        over = max(seen.values()) > limit
        if over:
            _stop(proc)
        try:
            code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _stop(proc)
            raise subprocess.TimeoutExpired(argv, timeout_s) from None
    finally:
        proc.stdout.close()
        proc.stderr.close()
    out, err = (kept[fd].decode(errors="replace") for fd in streams)
    if over:
        err += (
            f"\n[evoteam: the compiler printed more than {limit >> 10} KiB on one stream; it was stopped, and what "
            "it printed first is above]\n"
        )
    return subprocess.CompletedProcess(argv, code, out, err)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kills ``proc``'s process group (it leads one) and reaps it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
