"""One SSH connection to a remote host, driven from synchronous code: asyncssh's loop runs in a thread we own.

The user's keys, agent and ``~/.ssh/known_hosts`` are used unless told otherwise; a host key that is not
known is refused (``WorkerStartError`` with how to add it), never accepted silently. Transient failures
(refused, reset, timed out) are retried a bounded number of times with a growing pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import threading
import time
from collections.abc import Coroutine, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, TypeVar

import asyncssh
from pydantic import BaseModel

from evoteam.gpu_bench.remote.ssh_target import SshTarget
from evoteam.gpu_bench.runner import WorkerStartError

T = TypeVar("T")


class SshOptions(BaseModel):
    """How to reach the host; ``None`` means the user's defaults (``~/.ssh`` keys, agent, known_hosts)."""

    known_hosts: str | None = None
    client_keys: list[str] | None = None
    agent_path: str | None = None
    connect_timeout_s: float = 15.0
    keepalive_s: float = 5.0
    connect_attempts: int = 3
    backoff_s: float = 0.5


class Remote(BaseModel):
    """What a command on the host returned."""

    exit_status: int | None
    stdout: str
    stderr: str


class SshHost:
    """An asyncssh connection and the event loop thread that drives it; ``close`` ends both."""

    def __init__(self, target: SshTarget, options: SshOptions) -> None:
        self.target = target
        self.options = options
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="evoteam-ssh", daemon=True)
        self._thread.start()
        self._conn: asyncssh.SSHClientConnection | None = None

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """Runs ``coro`` on the loop and waits; ``TimeoutError`` (the coroutine cancelled) past ``timeout_s``."""
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout_s)
        except FutureTimeout:
            future.cancel()
            raise TimeoutError(f"no answer from {self.target} within {timeout_s:g} s") from None

    def spawn(self, coro: Coroutine[Any, Any, None]) -> Future[None]:
        """Runs ``coro`` on the loop in the background (a reader)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def connection(self, attempts: int | None = None) -> asyncssh.SSHClientConnection:
        """The open connection, connecting (``attempts`` tries, default the options') if there is none."""
        if self._conn is None or self._conn.is_closed():
            self._drop()
            self._conn = self._connect(attempts or self.options.connect_attempts)
        return self._conn

    def reconnect(self, attempts: int | None = None) -> None:
        self._drop()
        self.connection(attempts)

    def _connect(self, attempts: int) -> asyncssh.SSHClientConnection:
        o = self.options
        if o.known_hosts is not None and not Path(o.known_hosts).expanduser().is_file():
            raise WorkerStartError(f"{self.target}: the known_hosts file {o.known_hosts} does not exist")
        last = ""
        for attempt in range(max(1, attempts)):
            if attempt:
                time.sleep(o.backoff_s * 2 ** (attempt - 1))
            try:
                return self.call(self._open(), o.connect_timeout_s + 5)
            except asyncssh.HostKeyNotVerifiable as exc:
                known = o.known_hosts or "~/.ssh/known_hosts"
                raise WorkerStartError(
                    f"{self.target}: the host key is not trusted ({exc.reason}); check its fingerprint and add it "
                    f"to {known}, e.g. `ssh-keyscan -p {self.target.port} {self.target.host} >> {known}`"
                ) from None
            except asyncssh.PermissionDenied as exc:
                raise WorkerStartError(f"{self.target}: authentication failed ({exc.reason})") from None
            except (OSError, TimeoutError, asyncssh.Error) as exc:
                last = f"{type(exc).__name__}: {exc}"
        raise WorkerStartError(f"{self.target}: cannot connect after {attempts} attempts ({last})")

    async def _open(self) -> asyncssh.SSHClientConnection:
        o = self.options
        kwargs: dict[str, Any] = {
            "port": self.target.port,
            "connect_timeout": o.connect_timeout_s,
            "keepalive_interval": o.keepalive_s,
            "keepalive_count_max": 3,
        }
        if self.target.user is not None:
            kwargs["username"] = self.target.user
        if o.known_hosts is not None:
            kwargs["known_hosts"] = str(Path(o.known_hosts).expanduser())
        if o.client_keys is not None:
            kwargs["client_keys"] = [str(Path(k).expanduser()) for k in o.client_keys]
        if o.agent_path is not None:
            kwargs["agent_path"] = o.agent_path
        return await asyncssh.connect(self.target.host, **kwargs)

    def run(self, argv: Sequence[str], timeout_s: float = 15.0) -> Remote:
        """Runs a command on the host (each argument quoted for its shell)."""
        conn = self.connection()
        command = " ".join(shlex.quote(a) for a in argv)

        async def go() -> Remote:
            done = await conn.run(command, check=False, timeout=timeout_s)
            return Remote(exit_status=done.exit_status, stdout=_text(done.stdout), stderr=_text(done.stderr))

        return self.call(go(), timeout_s + 5)

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:

            async def shut() -> None:
                conn.close()
                await conn.wait_closed()

            with contextlib.suppress(Exception):
                self.call(shut(), 10)

    def close(self) -> None:
        self._drop()
        if self._loop.is_closed():
            return

        async def drain() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self.call(drain(), 10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()


def _text(data: object) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data if isinstance(data, str) else ""
