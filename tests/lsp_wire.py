"""``evoteam serve`` on raw stdio pipes, for the fuzz tests: frames out (well formed with ``Wire.send``, or any bytes
at all with ``Wire.write``), frames in, and the methods, commands and broken bodies the fuzzers draw from.

The client is a few lines over asyncio pipes on purpose: a real LSP client cannot send most of what the fuzzers
send."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsp_support import server_env

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
NOT_INITIALIZED = -32002
INTERNAL_ERROR = -32603

REQUESTS = [
    "textDocument/hover",
    "textDocument/inlayHint",
    "textDocument/codeLens",
    "textDocument/codeAction",
    "textDocument/completion",
    "textDocument/definition",
    "textDocument/documentSymbol",
    "textDocument/formatting",
    "textDocument/diagnostic",
    "textDocument/semanticTokens/full",
    "codeLens/resolve",
    "inlayHint/resolve",
    "workspace/executeCommand",
    "workspace/symbol",
    "evoteam/status",
]
NOTIFICATIONS = [
    "textDocument/didOpen",
    "textDocument/didChange",
    "textDocument/didSave",
    "textDocument/didClose",
    "workspace/didChangeConfiguration",
    "workspace/didChangeWatchedFiles",
    "window/workDoneProgress/cancel",
    "$/cancelRequest",
    "$/setTrace",
]
COMMANDS = [
    "evoteam.evolve",
    "evoteam.cancel",
    "evoteam.runs",
    "evoteam.rounds",
    "evoteam.candidateDiff",
    "evoteam.accept",
    "evoteam.createTaskEntry",
    "evoteam.noSuchCommand",
]
INVALID_BODIES = [
    b'{"jsonrpc": "2.0", "id": 1, "method": ',
    b"}{",
    b"{'jsonrpc': '2.0'}",
    b'{"jsonrpc": "2.0", "method": "textDocument/hover", "params": {]}',
    b"\xff\xfe\x00 not text",
    b"[1, 2,,]",
    b'"unterminated',
    b"nul",
]


def encode(message: Any) -> bytes:
    """A message's body: bytes as they are, anything else as JSON."""
    return message if isinstance(message, bytes) else json.dumps(message, allow_nan=False).encode()


class Wire:
    """``evoteam serve`` on pipes: frames out, frames in. Answers the server's own requests with null."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.responses: list[dict[str, Any]] = []
        self.notifications: list[dict[str, Any]] = []
        self.changed = asyncio.Event()
        self.reader = asyncio.create_task(self._read())

    def send(self, message: Any) -> None:
        body = encode(message)
        header = f"Content-Length: {len(body)}\r\n"
        if len(body) % 3 == 0:  # the optional header, now and then
            header += "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
        self.write(header.encode() + b"\r\n" + body)

    def write(self, raw: bytes) -> None:
        """Bytes to the server's stdin as they are (headers and all)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw)

    async def drain(self) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.drain()

    async def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = await out.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode().partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            assert length is not None, "a frame without Content-Length from the server"
            message = json.loads(await out.readexactly(length))
            if "method" in message and "id" in message:  # the server asks the client: say nothing useful
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif "method" in message:
                self.notifications.append(message)
            else:
                self.responses.append(message)
            self.changed.set()

    async def until(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            assert left > 0 and not self.reader.done(), f"timed out waiting for {what}"
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))

    def answers(self, msg_id: Any) -> list[dict[str, Any]]:
        return [r for r in self.responses if r.get("id") == msg_id and type(r.get("id")) is type(msg_id)]

    async def call(self, msg_id: Any, method: str, params: Any, timeout: float = 30) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        await self.drain()
        await self.until(lambda: bool(self.answers(msg_id)), timeout, f"the answer to {method}")
        [answer] = self.answers(msg_id)
        return answer


async def start(repo: Path, log: Path) -> Wire:
    """``evoteam serve`` in ``repo`` on pipes, its stderr to ``log``."""
    with log.open("wb") as stderr:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "evoteam.cli.main",
            "serve",
            cwd=repo,
            env=server_env(repo),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            limit=2**24,
        )
    return Wire(proc)


async def stop(wire: Wire) -> None:
    if wire.proc.returncode is None:
        wire.proc.kill()
        await wire.proc.wait()
