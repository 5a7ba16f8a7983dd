"""Owns one worker process: starts it, sends a request, waits with a deadline, kills and reports on failure.

A worker that crashes (segfault, abort) or outlives its deadline is killed with its whole process group and
described as a ``WorkerLost``; the caller turns that into a status and starts a new worker. Nothing here
ever lets a candidate's failure escape as a crash of the caller.

``LineWorker`` is the protocol over any line transport (request ids, deadlines, ``Ready``, ``worker_exiting``);
``WorkerProcess`` is its local subprocess, and the SSH runner adds a remote one.

A GPU worker sees exactly one GPU (``CUDA_VISIBLE_DEVICES``) and runs without an address-space limit: CUDA
reserves far more virtual memory than any limit that still protects the machine would allow.

A kernel's output goes to the worker's log, a file that the worker empties before each workload and reads the
tail of after it. While a request runs the owner keeps it under ``LOG_LIMIT_BYTES``: a kernel that printed in an
endless loop (a debugging ``printf`` left in) wrote 544 MiB in its 10 s before the timeout here, and would have
written gigabytes in the default 60 s, and more on a faster disk. The owner empties it each time it finds it over
the limit (writers append, so what is printed next lands at the new end: the tail shown is what was printed
since the last emptying, little when that was a moment before the end), and the answer says so. It also
watches what the worker's candidates write to disk (``disk.DiskWatch``): a worker over its bounds is stopped,
its folder emptied, and the request answered with the reason.

A local worker runs inside this process's sandbox (``evoteam.gpu_bench.sandbox.current()``): it may write only
its build cache and its own scratch folder, sees no network and no secrets, and everything it starts dies
with it. Its process limit is this user's task count plus a headroom, which stops a fork bomb.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from evoteam.gpu_bench import sandbox
from evoteam.gpu_bench.build.builder import default_cache_root
from evoteam.gpu_bench.schema import Environment
from evoteam.gpu_bench.timing.gpu_lock import lock_folder
from evoteam.gpu_bench.worker import allocator, disk, extension_dirs
from evoteam.gpu_bench.worker.memory import killed_for_memory, oom_kills
from evoteam.gpu_bench.worker.protocol import (
    RESPONSE,
    BuildRequest,
    Built,
    Evaluated,
    EvaluateRequest,
    Failed,
    Ready,
    ShutdownRequest,
)
from evoteam.gpu_bench.worker.strays import process_limit
from evoteam.gpu_bench.worker.threads import ThreadPolicy, wait_environment

STARTUP_TIMEOUT_S = 120.0
LOG_LIMIT_BYTES = 64 * 1024 * 1024
"""The most the worker's log holds while a request runs, give or take what is printed in half a second."""
LINE_LIMIT_CHARS = 16 * 1024 * 1024
"""The longest line the owner reads from the worker's protocol. An answer is a few kilobytes (its log is a
20 KB tail); a candidate in the worker's process can find the protocol's pipe and write to it, and one that
wrote 1.5 GiB with no newline made the owner hold it (3.3 GB resident where it had 0.2 GB) until the worker
was replaced: the owner may be the editor's language server."""
OVERSIZED = "\0a line over the limit\0"
"""Put in the queue of lines in place of a line longer than ``LINE_LIMIT_CHARS`` (a real line ends in a
newline); nothing more is read after it."""


class WorkerLost(RuntimeError):
    """The worker died or was killed while answering; ``timed_out`` tells which, ``tampered`` whether it was
    killed for an answer that did not belong to the request (something in it wrote to the protocol)."""

    def __init__(self, reason: str, timed_out: bool, log_tail: str, tampered: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out
        self.log_tail = log_tail
        self.tampered = tampered


def worker_command() -> list[str]:
    return [sys.executable, "-m", "evoteam.gpu_bench.worker"]


def worker_environment(gpu: int | None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The worker's environment: ours, with ``CUDA_VISIBLE_DEVICES`` set to the one GPU it may use, and where ours
    leaves them unset, glibc's heap thresholds fixed (``allocator``) and OpenMP's threads waiting passively
    (``threads``)."""
    env = dict(os.environ if base is None else base)
    env.update(allocator.environment(env))
    env.update(wait_environment(env))
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    return env


def signal_death(name: str) -> str:
    """How a worker killed by signal ``name`` (``SIGSEGV`` or ``SEGV``) is described, here and remotely."""
    full = name if name.startswith("SIG") else f"SIG{name}"
    try:
        text = signal.strsignal(signal.Signals[full]) or full
    except KeyError:
        text = "unknown signal"
    return f"the worker died from signal {full} ({text})"


BUILDS = "builds"
"""The folder, in a worker's private one, of what its Python candidates build at run time."""


def confined(cmd: list[str], env: dict[str, str], folder: Path, cache: Path) -> tuple[list[str], dict[str, str]]:
    """``cmd`` (a worker) in this process's sandbox: writable are ``folder`` (its log; its ``TMPDIR`` below it),
    the build ``cache`` (its build helper's: the worker itself gives up writing there, ``writes.py``),
    evoteam's cache folder (the flush helper) and the GPU lock folder, which stays the one every worker and
    profiler of this machine shares (not one inside the private ``TMPDIR``).

    What Python candidates build at run time goes below ``folder``, one folder per solution
    (``extension_dirs``): torch's C++/CUDA extensions (``load_inline``, ``cpp_extension.load``:
    ``TORCH_EXTENSIONS_DIR``), torch.compile's Inductor and Triton's kernels. Their defaults under the home
    folder are read-only in the sandbox. The interpreter's own folder leads ``PATH``,
    so the ninja that torch's extension builder calls is the one installed beside evoteam."""
    locks = lock_folder()
    env = {**env, "EVOTEAM_GPU_LOCKS": str(locks)}
    env["TORCH_EXTENSIONS_DIR"] = str(folder / BUILDS / extension_dirs.EXTENSIONS)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(folder / BUILDS / extension_dirs.INDUCTOR)
    env["TRITON_CACHE_DIR"] = str(folder / BUILDS / extension_dirs.TRITON)
    scripts = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(
        [scripts, *(p for p in env.get("PATH", os.defpath).split(os.pathsep) if p != scripts)]
    )
    writable = [folder, cache, default_cache_root().parent, locks]
    return sandbox.current().wrap(cmd, writable=writable, tmpdir=folder / "tmp", env=env)


class LineWorker(ABC):
    """The worker protocol over a line transport; not thread-safe (one request at a time).

    A subclass launches the process (its stdout lines go to ``self._lines``, ``None`` at the end), writes a
    line, tells whether it is alive, describes its death, reads its log and kills it.
    """

    def __init__(self) -> None:
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._next_id = 1
        self.environment: Environment | None = None
        self.starts = 0
        self._emptied: list[int] = []
        """The size of the log each time ``_tend`` emptied it during the request now running."""

    @property
    @abstractmethod
    def alive(self) -> bool: ...

    @abstractmethod
    def _launch(self) -> None:
        """Starts the process; its output lines go to ``self._lines`` (a fresh queue)."""

    @abstractmethod
    def _write(self, line: str) -> None:
        """Sends one line (with its newline); ``OSError`` when the worker's input is closed."""

    @abstractmethod
    def _death(self) -> str:
        """Why the worker's output ended (waits briefly for it to exit)."""

    @abstractmethod
    def log_tail(self, limit: int = 4000) -> str: ...

    @abstractmethod
    def kill(self) -> None:
        """Kills the worker and every process it started (its own process group)."""

    def _tend(self) -> str | None:
        """Called about twice a second while a request runs, and once after its answer: keeps the log in bounds
        and watches the disk (``WorkerProcess``; a remote worker's, on its own machine, are not watched).
        Returns why the worker was stopped (it was killed: the request is lost), or None."""
        return None

    def _log_note(self) -> str:
        """What ``_tend`` did to the log during this request, as a line for the answer's log; empty if nothing."""
        if not self._emptied:
            return ""
        return (
            f"[evoteam: the kernel printed more than {LOG_LIMIT_BYTES >> 20} MiB; the log was emptied "
            f"{len(self._emptied)} time(s) while it ran ({sum(self._emptied) / 2**20:.0f} MiB dropped), so what "
            "is shown is what it printed since]"
        )

    def start(self) -> None:
        self._lines = queue.Queue()
        self._launch()
        self.starts += 1
        ready = self._receive(STARTUP_TIMEOUT_S, "starting")
        if not isinstance(ready, Ready):
            self.kill()
            raise WorkerLost(f"worker sent {ready.kind} instead of ready", False, self.log_tail())
        self.environment = ready.environment

    def build(self, request: BuildRequest, timeout_s: float) -> Built | Failed:
        response = self._call(request, timeout_s)
        if isinstance(response, Evaluated):
            raise self._lost("the worker answered a build request with an evaluation", timed_out=False)
        return response

    def evaluate(self, request: EvaluateRequest, timeout_s: float) -> Evaluated | Failed:
        response = self._call(request, timeout_s)
        if isinstance(response, Built):
            raise self._lost("the worker answered an evaluate request with a build", timed_out=False)
        return response

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def retire(self) -> None:
        """Ends the worker (and what it started); the next request starts a fresh one."""
        if self.alive:
            self.kill()

    def _call(self, request: BuildRequest | EvaluateRequest, timeout_s: float) -> Built | Evaluated | Failed:
        try:
            response = self._answer(request, timeout_s)
        except WorkerLost:
            self._audit(request)
            raise
        removed = self._audit(request)
        if removed and isinstance(response, Evaluated):
            return response.model_copy(update={"log": f"{response.log}\n{_removed_note(removed)}\n"})
        if removed and isinstance(response, Built):
            build = response.build
            note = _removed_note(removed)
            return response.model_copy(
                update={"build": build.model_copy(update={"log": f"{note}\n{build.log}" if build.log else note})}
            )
        return response

    def _audit(self, request: BuildRequest | EvaluateRequest) -> list[str]:
        """After a request: what of other solutions' run-time builds it changed, now removed (none here)."""
        return []

    def _answer(self, request: BuildRequest | EvaluateRequest, timeout_s: float) -> Built | Evaluated | Failed:
        if not self.alive:
            self.start()
        self._emptied = []
        try:
            self._write(request.model_dump_json() + "\n")
        except OSError:
            raise self._lost("the worker closed its input", timed_out=False) from None
        while True:
            response = self._receive(timeout_s, f"{request.kind} request")
            if isinstance(response, Ready):
                continue
            if response.id != request.id:  # only the worker's own answer to this request counts
                lost = self._lost(
                    f"the worker's answer did not belong to the request (id {response.id}, expected {request.id}): "
                    "something in the worker wrote to its protocol (a candidate forging its verdict, or a "
                    "protocol error); the worker was replaced",
                    timed_out=False,
                )
                lost.tampered = True
                raise lost
            stopped = self._tend()  # what it wrote in its last half second counts too
            if stopped is not None:
                raise self._lost(stopped, timed_out=False)
            if isinstance(response, Evaluated | Built) and response.worker_exiting:
                self.kill()  # it is exiting on purpose; the next request starts a clean one
            note = self._log_note()
            if note and isinstance(response, Evaluated):
                return response.model_copy(update={"log": f"{response.log}\n{note}\n"})
            return response

    def _receive(self, timeout_s: float, what: str) -> Ready | Built | Evaluated | Failed:
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._lost(f"no answer to the {what} within {timeout_s:g} s", timed_out=True)
            try:
                line = self._lines.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                if not self.alive:
                    raise self._lost(self._death(), timed_out=False) from None
                stopped = self._tend()
                if stopped is not None:
                    raise self._lost(stopped, timed_out=False) from None
                continue
            if line is None:
                raise self._lost(self._death(), timed_out=False)
            if line == OVERSIZED:
                raise self._lost(
                    f"the worker sent a line of more than {LINE_LIMIT_CHARS >> 20} MiB (something in its process "
                    "wrote to its protocol, or an answer that large); the worker was replaced",
                    timed_out=False,
                )
            try:
                return RESPONSE.validate_json(line)
            except ValidationError:
                raise self._lost(f"worker sent an unreadable line: {line[:200]!r}", timed_out=False) from None

    def _lost(self, reason: str, timed_out: bool) -> WorkerLost:
        self.kill()
        note = self._log_note()
        return WorkerLost(reason, timed_out, f"{self.log_tail()}\n{note}" if note else self.log_tail())

    def _shutdown_line(self) -> str:
        return ShutdownRequest().model_dump_json() + "\n"


class WorkerProcess(LineWorker):
    """One ``evoteam worker`` child of this process."""

    def __init__(
        self,
        cache_root: Path | None = None,
        memory_limit_mb: int | None = None,
        gpu: int | None = None,
        threads: ThreadPolicy | None = None,
        disk_limits: disk.DiskLimits | None = None,
    ) -> None:
        super().__init__()
        self._threads = threads
        self._cache_root = cache_root
        self._memory_limit_mb = None if gpu is not None else memory_limit_mb
        self.gpu = gpu
        self._proc: subprocess.Popen[str] | None = None
        self._wrapped = False
        self._oom_mark: int | None = None
        """The machine's OOM kill count when the last request was sent (``memory.oom_kills``)."""
        self._log_dir = Path(tempfile.mkdtemp(prefix="evoteam-worker-"))
        self._log = self._log_dir / "worker.log"
        self._builds = extension_dirs.ExtensionAudit(self._log_dir / BUILDS)
        self._disk = disk.DiskWatch(self._log_dir, disk_limits)
        self._removal = weakref.finalize(self, shutil.rmtree, self._log_dir, ignore_errors=True)
        """Removes the folder when this object goes, or at exit, where ``close`` was never called."""

    def _audit(self, request: BuildRequest | EvaluateRequest) -> list[str]:
        owners = [request.solution.content_hash()]
        if isinstance(request, EvaluateRequest) and request.config.incumbent is not None:
            owners.append(request.config.incumbent.content_hash())
        return self._builds.after(owners)

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _launch(self) -> None:
        cache = self._cache_root or default_cache_root()
        cmd = [*worker_command(), "--log", str(self._log), "--cache", str(cache)]
        if self._memory_limit_mb:
            cmd += ["--memory-limit-mb", str(self._memory_limit_mb)]
        cmd += ["--max-processes", str(process_limit())]
        cmd += ["--max-file-mb", str(max(1, self._disk.limits.file_bytes // disk.MIB))]
        cmd += self._threads.arguments() if self._threads is not None else []
        self._log.write_bytes(b"")
        env = worker_environment(self.gpu)
        env.update(self._threads.environment() if self._threads is not None else {})
        argv, env = confined(cmd, env, self._log_dir, cache)
        self._wrapped = argv[: len(cmd)] != cmd
        self._proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            start_new_session=True,
        )
        assert self._proc.stdout is not None
        threading.Thread(target=_pump, args=(self._proc.stdout, self._lines), daemon=True).start()

    def _write(self, line: str) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._oom_mark = oom_kills()
        self._disk.begin()
        self._proc.stdin.write(line)
        self._proc.stdin.flush()

    def _death(self) -> str:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the worker closed its output but did not exit"
        if self._wrapped and code > 128:  # bubblewrap exits with 128 + the signal that killed its child
            code = 128 - code
        if code == -signal.SIGKILL:  # not ours: a timeout is reported before the worker is killed
            return killed_for_memory(self._oom_mark, oom_kills())
        if code < 0:
            try:
                return signal_death(signal.Signals(-code).name)
            except ValueError:
                return f"the worker died from signal {-code} (unknown signal)"
        return f"the worker exited with code {code}"

    def log_tail(self, limit: int = 4000) -> str:
        try:
            with self._log.open("rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - 4 * limit))  # UTF-8: at most 4 bytes a character
                data = log.read()
        except OSError:
            return ""
        text = data.decode(errors="replace")
        return text[-limit:]

    def _tend(self) -> str | None:
        try:
            size = self._log.stat().st_size
            if size > LOG_LIMIT_BYTES:
                os.truncate(self._log, 0)
                self._emptied.append(size)
        except OSError:
            pass
        stopped = self._disk.check()
        if stopped is not None:  # nothing of the worker may write while its folder is emptied
            self.kill()
            disk.empty(self._log_dir, keep=(self._log.name,))
            self._builds = extension_dirs.ExtensionAudit(self._log_dir / BUILDS)
        return stopped

    def kill(self) -> None:
        proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):  # the group may outlive its leader
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        self._proc = None

    def close(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.write(self._shutdown_line())
                proc.stdin.flush()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self.kill()
        self._removal()


def _removed_note(removed: list[str]) -> str:
    shown = ", ".join(removed[:5]) + (f" and {len(removed) - 5} more" if len(removed) > 5 else "")
    return (
        f"[evoteam: this request changed what another solution built at run time ({shown}): removed, so that "
        "solution builds its own again]"
    )


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    """The worker's protocol lines into ``lines`` (``OVERSIZED`` for one too long, then nothing more), then
    None at the end."""
    try:
        while line := stream.readline(LINE_LIMIT_CHARS + 1):
            if len(line) > LINE_LIMIT_CHARS:
                lines.put(OVERSIZED)
                return
            lines.put(line)
    except (OSError, ValueError):
        pass
    lines.put(None)


class LineSplitter:
    """Text that arrives in pieces, as lines, none longer than ``limit`` characters (a transport without a
    bounded ``readline``: the SSH worker's)."""

    def __init__(self, limit: int = LINE_LIMIT_CHARS) -> None:
        self.limit = limit
        self._parts: list[str] = []
        self._pending = 0
        """Characters in ``_parts``: the line begun and not yet ended."""

    def feed(self, text: str) -> list[str]:
        """The whole lines ``text`` completes, each with its newline, ending with ``OVERSIZED`` where a line
        grew past the limit (feed nothing more after it)."""
        found: list[str] = []
        while (cut := text.find("\n")) >= 0:
            line = "".join([*self._parts, text[: cut + 1]])
            self._parts, self._pending, text = [], 0, text[cut + 1 :]
            if len(line) > self.limit:
                return [*found, OVERSIZED]
            found.append(line)
        self._parts.append(text)
        self._pending += len(text)
        return [*found, OVERSIZED] if self._pending > self.limit else found

    def rest(self) -> list[str]:
        """What is pending at the end of the stream (a last line without its newline)."""
        return ["".join(self._parts)] if self._pending else []
