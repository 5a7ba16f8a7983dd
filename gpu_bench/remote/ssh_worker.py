"""The worker protocol over an SSH channel: ``evoteam worker`` on a remote host, killed by process group.

sshd starts each command as the leader of a new session, and the command ``exec``s the worker, so the worker's
pid is its process group: a timeout kills that group over a second channel (``kill -s KILL -- -PID``). A
dropped connection is ``Disconnected`` (not the candidate's fault): the worker reconnects, kills the group
it lost (it may still be spinning in a kernel) and runs the request again, a bounded number of times.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import signal
from concurrent.futures import Future

import asyncssh

from evoteam.gpu_bench.remote.ssh_host import SshHost
from evoteam.gpu_bench.runner import WorkerStartError
from evoteam.gpu_bench.worker.client import OVERSIZED, LineSplitter, LineWorker, WorkerLost, signal_death
from evoteam.gpu_bench.worker.protocol import BuildRequest, Built, Evaluated, EvaluateRequest, Failed

_PID_TAG = "evoteam-worker-pid"
_Process = asyncssh.SSHClientProcess[str]


class Disconnected(Exception):
    """The SSH connection went away under a request; the request is to be run again after reconnecting."""


class SshWorker(LineWorker):
    """One remote ``evoteam worker``; ``reruns`` bounds how often a request is re-run after a disconnect."""

    def __init__(
        self,
        host: SshHost,
        command: list[str],
        gpu: int | None = None,
        memory_limit_mb: int | None = None,
        cache: str | None = None,
        reruns: int = 2,
    ) -> None:
        super().__init__()
        self._host = host
        self._command = command
        self.gpu = gpu
        self._memory_limit_mb = None if gpu is not None else memory_limit_mb
        self._cache = cache
        self._reruns = reruns
        self._proc: _Process | None = None
        self._pid: int | None = None
        self._stale: list[int] = []
        self._dir: str | None = None
        self.stderr = ""
        self._stderr_done: Future[None] | None = None
        self.reconnects = 0

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None and self._host.connected

    @property
    def log(self) -> str:
        assert self._dir is not None
        return f"{self._dir}/worker.log"

    def remote_command(self) -> str:
        """The shell line the worker runs as (it reports its pid on stderr, then ``exec``s the worker)."""
        argv = [*self._command, "--log", self.log, "--sandbox"]
        if self._cache is not None:
            argv += ["--cache", self._cache]
        if self._memory_limit_mb:
            argv += ["--memory-limit-mb", str(self._memory_limit_mb)]
        gpu = f"CUDA_VISIBLE_DEVICES={self.gpu}; export CUDA_VISIBLE_DEVICES; " if self.gpu is not None else ""
        return f"echo {_PID_TAG} $$ >&2; {gpu}exec " + " ".join(shlex.quote(a) for a in argv)

    def start(self) -> None:
        for attempt in range(self._reruns + 1):
            try:
                super().start()
                return
            except Disconnected as lost:
                self._recover(lost, attempt)

    def build(self, request: BuildRequest, timeout_s: float) -> Built | Failed:
        for attempt in range(self._reruns + 1):
            try:
                return super().build(request, timeout_s)
            except Disconnected as lost:
                self._recover(lost, attempt)
        raise AssertionError("unreachable")

    def evaluate(self, request: EvaluateRequest, timeout_s: float) -> Evaluated | Failed:
        for attempt in range(self._reruns + 1):
            try:
                return super().evaluate(request, timeout_s)
            except Disconnected as lost:
                self._recover(lost, attempt)
        raise AssertionError("unreachable")

    def _recover(self, lost: Disconnected, attempt: int) -> None:
        """Forgets the lost worker, reconnects and kills what it left; ``WorkerStartError`` when out of tries."""
        self._forget()
        if attempt >= self._reruns:
            raise WorkerStartError(f"{self._host.target}: the connection dropped {attempt + 1} times ({lost})")
        self._host.reconnect()
        self.reconnects += 1
        self._reap()

    def _launch(self) -> None:
        self._reap()
        if self._dir is None:
            made = self._host.run(["mktemp", "-d", "-t", "evoteam-worker.XXXXXX"])
            if made.exit_status != 0:
                raise WorkerStartError(f"{self._host.target}: cannot make a temporary folder: {made.stderr.strip()}")
            self._dir = made.stdout.strip()
        conn = self._host.connection()
        self.stderr, self._pid = "", None
        command = self.remote_command()

        async def open_process() -> _Process:
            return await conn.create_process(command, encoding="utf-8")

        proc = self._proc = self._host.call(open_process(), 30)
        lines = self._lines

        async def out() -> None:
            splitter = LineSplitter()  # a flood with no newline stops at the limit, not in this process's memory
            try:
                while text := await proc.stdout.read(1 << 16):
                    for line in splitter.feed(text):
                        lines.put(line)
                        if line == OVERSIZED:
                            return
                for line in splitter.rest():
                    lines.put(line)
            except (asyncssh.Error, OSError, asyncio.IncompleteReadError):
                pass
            finally:
                lines.put(None)

        async def err() -> None:
            with contextlib.suppress(asyncssh.Error, OSError, asyncio.IncompleteReadError):
                while line := await proc.stderr.readline():
                    tag, _, pid = line.strip().partition(" ")
                    if tag == _PID_TAG and pid.isdigit() and self._pid is None:
                        self._pid = int(pid)
                    elif len(self.stderr) < 8000:
                        self.stderr += line

        self._host.spawn(out())
        self._stderr_done = self._host.spawn(err())

    def startup_errors(self) -> str:
        """What the shell and the worker printed on stderr before the worker took it over."""
        if self._stderr_done is not None:
            with contextlib.suppress(Exception):
                self._stderr_done.result(3)
        return self.stderr.strip()

    def _write(self, line: str) -> None:
        proc = self._proc
        assert proc is not None

        async def send() -> None:
            proc.stdin.write(line)
            await proc.stdin.drain()

        try:
            self._host.call(send(), 30)
        except (asyncssh.Error, BrokenPipeError, ConnectionError, TimeoutError) as exc:
            if not self._host.connected:
                raise Disconnected(f"while sending: {exc}") from None
            raise OSError(str(exc)) from None

    def _death(self) -> str:
        proc = self._proc
        assert proc is not None
        with contextlib.suppress(Exception):
            self._host.call(proc.wait_closed(), 5)
        if proc.exit_signal is not None:
            return signal_death(proc.exit_signal[0])
        if proc.exit_status is not None and proc.exit_status > 128:  # bubblewrap: 128 + its child's signal
            with contextlib.suppress(ValueError):
                return signal_death(signal.Signals(proc.exit_status - 128).name)
        if proc.exit_status is not None:
            return f"the worker exited with code {proc.exit_status}"
        if not self._host.connected:
            raise Disconnected("the connection closed while the worker was running")
        return "the worker closed its output but did not exit"

    def _lost(self, reason: str, timed_out: bool) -> WorkerLost:
        if not self._host.connected:  # the connection, not the candidate, failed: run it again
            self._forget()
            raise Disconnected(reason)
        return super()._lost(reason, timed_out)

    def log_tail(self, limit: int = 4000) -> str:
        if self._dir is None or not self._host.connected:
            return ""
        try:
            return self._host.run(["tail", "-c", str(limit), self.log], 15).stdout
        except Exception:  # a log we cannot read is an empty log, never a second failure
            return ""

    def _forget(self) -> None:
        """Drops the process without talking to the host (it is unreachable); its group is killed later."""
        if self._pid is not None:
            self._stale.append(self._pid)
        self._proc, self._pid = None, None

    def _reap(self) -> None:
        """Kills the process groups of workers lost with an earlier connection."""
        while self._stale and self._host.connected:
            self._kill_group(self._stale.pop())

    def _kill_group(self, pid: int) -> None:
        with contextlib.suppress(Exception):
            self._host.run(["kill", "-s", "KILL", "--", f"-{pid}"], 15)

    def kill(self) -> None:
        proc, pid = self._proc, self._pid
        if proc is None:
            return
        if not self._host.connected:
            self._forget()
            return
        if pid is not None:
            self._kill_group(pid)
        with contextlib.suppress(Exception):
            proc.close()
            self._host.call(proc.wait_closed(), 10)
        self._proc, self._pid = None, None

    def close(self) -> None:
        proc = self._proc
        if proc is not None and self.alive:
            with contextlib.suppress(Exception):
                self._write(self._shutdown_line())
                self._host.call(proc.wait_closed(), 5)
        self.kill()
        if (self._stale or self._dir is not None) and not self._host.connected:
            with contextlib.suppress(Exception):  # one try to clean up what a dropped connection left
                self._host.reconnect(attempts=1)
        self._reap()
        if self._dir is not None and self._host.connected:
            with contextlib.suppress(Exception):
                self._host.run(["rm", "-rf", self._dir], 15)
            self._dir = None
