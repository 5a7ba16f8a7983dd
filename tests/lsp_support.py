"""What the language-server tests share: a sample kernel repository (with a real finished offline run, made once
per session and copied), and an LSP session with ``evoteam serve`` over stdio through pytest-lsp's client."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from lsprotocol import types as lsp

from conftest import cli_env, evoteam, scale_add_repo

if TYPE_CHECKING:
    from pytest_lsp import LanguageClient

sample_repo = scale_add_repo
server_env = cli_env


_EVOLVED: dict[str, Path] = {}


def evolved_repo(
    cache: Path,
    dest: Path,
    name: str = "evolved",
    prepare: Callable[[Path], None] | None = None,
    evaluations: int = 3,
) -> tuple[Path, str]:
    """A copy of the sample repository after one real offline round (made once per ``name`` under ``cache``,
    after ``prepare`` changed and committed what it wants in it), and its run."""
    if name not in _EVOLVED:
        made = sample_repo(cache / name)
        if prepare is not None:
            prepare(made)
        (cache / "home").mkdir(exist_ok=True)
        done = evoteam(
            made, "evolve", "scale_add", "--rounds", "1", "--llm", "offline", "--evaluations", str(evaluations)
        )
        assert done.returncode == 0, done.stderr
        _EVOLVED[name] = made
    shutil.copytree(_EVOLVED[name], dest, symlinks=True)
    (dest.parent / "home").mkdir(exist_ok=True)
    [run] = [p.name for p in (dest / ".evoteam" / "runs").iterdir()]
    return dest, run


def later_run(run: str, suffix: str) -> str:
    """A run id of the same kernel started one second after ``run`` (the server orders runs by their start, so
    a copy under another suffix alone would sort by the suffix against the random one of ``run``)."""
    kernel, day, time, _ = run.rsplit("-", 3)
    started = datetime.strptime(f"{day}-{time}", "%Y%m%d-%H%M%S") + timedelta(seconds=1)
    return f"{kernel}-{started:%Y%m%d-%H%M%S}-{suffix}"


@asynccontextmanager
async def lsp_session(
    root: Path,
    settings: dict[str, Any] | None = None,
    command: Sequence[str] | None = None,
    capabilities: str = "visual-studio-code",
    initialization_options: Any = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[LanguageClient]:
    """An initialized session with ``evoteam serve`` (or ``command``) on ``root``, ``env`` added to its
    environment; shut down at the end. Skips the test where pytest-lsp (a dev tool) is not installed."""
    pytest_lsp = pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed (pip install -e .[dev])")
    config = pytest_lsp.ClientServerConfig(
        server_command=list(command or [sys.executable, "-m", "evoteam.cli.main", "serve"]),
        server_env={**server_env(root), **(env or {})},
    )
    client: LanguageClient = await config.start()  # type: ignore[assignment]
    if settings is not None:
        client.set_configuration(settings, section="evoteam")
    await client.initialize_session(
        lsp.InitializeParams(
            capabilities=pytest_lsp.client_capabilities(capabilities),
            root_uri=root.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            initialization_options=initialization_options,
        )
    )
    try:
        yield client
    finally:
        try:
            await asyncio.wait_for(client.shutdown_session(), timeout=20)
        except Exception:  # shut down by the test already (or gone): make sure it exits
            client.exit(None)
        await client.stop()


async def status(client: LanguageClient) -> dict[str, Any]:
    """The server's ``evoteam/status`` (features, broken features, root, runs, settings)."""
    answer = await client.protocol.send_request_async("evoteam/status", {})
    return _plain(answer)


def _plain(value: Any) -> Any:
    """pygls hands untyped results over as attribute objects; turn them into plain JSON values."""
    if hasattr(value, "_asdict"):  # pygls's attribute objects are named tuples
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return {k: _plain(v) for k, v in vars(value).items()}
    return value


async def raw_request(client: LanguageClient, msg_id: int | str, method: str, params: Any) -> Any:
    """Sends a request exactly as given (the typed client cannot send malformed params) and awaits its answer;
    an error answer raises ``JsonRpcException``."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    client.protocol._request_futures[msg_id] = future
    client.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return await asyncio.wait_for(future, timeout=10)
