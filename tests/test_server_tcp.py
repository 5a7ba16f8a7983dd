"""``evoteam serve --tcp PORT``: the same server on 127.0.0.1 only, spoken to over a plain socket with
Content-Length framed JSON-RPC (initialize, a hover with the best result, shutdown, exit); a bad port is refused."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from lsp_support import evolved_repo, server_env

from conftest import evoteam
from evoteam.server.convert import entry_line

pytestmark = pytest.mark.integration


class Wire:
    """One JSON-RPC connection: requests by id; the server's notifications skipped, its requests answered null."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.next_id = reader, writer, 0

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def receive(self) -> dict[str, Any]:
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        assert length, "the connection closed"
        message: dict[str, Any] = json.loads(await self.reader.readexactly(length))
        return message

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()

    async def request(self, method: str, params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        while True:
            message = await asyncio.wait_for(self.receive(), timeout=30)
            if "method" in message and "id" in message:  # a request of the server's
                self.send({"id": message["id"], "result": None})
            elif message.get("id") == self.next_id:
                return message


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def listening(port: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp writes them) listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.append(address)
    return found


async def connect(port: int, server: subprocess.Popen[bytes]) -> Wire:
    deadline = time.monotonic() + 30
    while True:
        try:
            return Wire(*await asyncio.open_connection("127.0.0.1", port))
        except OSError:
            assert server.poll() is None, f"the server exited: {server.stderr.read() if server.stderr else ''!r}"
            assert time.monotonic() < deadline, "the server did not listen within 30 s"
            await asyncio.sleep(0.1)


async def test_a_client_over_tcp_gets_the_same_answers_on_loopback_only(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    repo, run = evolved_repo(tmp_path_factory.getbasetemp(), tmp_path / "repo")
    port = free_port()
    command = [sys.executable, "-m", "evoteam.cli.main", "serve", "--tcp", str(port)]
    server = subprocess.Popen(command, cwd=repo, env=server_env(repo), stderr=subprocess.PIPE)
    wire: Wire | None = None
    try:
        wire = await connect(port, server)
        assert listening(port) == ["0100007F"]  # 127.0.0.1, nothing else
        init = await wire.request("initialize", {"processId": None, "rootUri": repo.as_uri(), "capabilities": {}})
        assert init["result"]["capabilities"]["hoverProvider"] is True
        wire.send({"method": "initialized", "params": {}})
        kernel = repo / "kernel.cpp"
        text = kernel.read_text()
        item = {"uri": kernel.as_uri(), "languageId": "cpp", "version": 1, "text": text}
        wire.send({"method": "textDocument/didOpen", "params": {"textDocument": item}})
        at = {"line": entry_line(text, "scale_add"), "character": 4}
        hover = await wire.request("textDocument/hover", {"textDocument": {"uri": kernel.as_uri()}, "position": at})
        assert f"run `{run}`" in hover["result"]["contents"]["value"]
        bad = await wire.request("textDocument/hover", {"textDocument": {}})
        assert bad["error"]["code"] == -32602  # invalid params, answered over TCP too
        assert (await wire.request("shutdown", None))["result"] is None
        wire.send({"method": "exit"})
        assert server.wait(timeout=30) == 0
    finally:
        if wire is not None:
            await wire.close()
        if server.poll() is None:
            server.kill()
            server.wait()
        if server.stderr is not None:
            server.stderr.close()


def test_a_port_out_of_range_is_refused(tmp_path: Path) -> None:
    done = evoteam(tmp_path, "serve", "--tcp", "70000", timeout=60)
    assert done.returncode == 2 and "--tcp 70000 is not a port" in done.stderr
