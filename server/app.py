"""``EvoteamServer``: the language server, its shared state, and the features registered on it once.

The server owns the document lifecycle (open, change, save, close), the settings and the run index, and hands
each event to every feature inside a try/except that logs: one broken feature never takes the others or the
server down. Blocking work (folding journals, compilers, git) runs on the server's own executor, never on the
event loop and never on pygls's thread pool (which also reads stdin). Runs are separate processes
(``evoteam evolve --detach``), so nothing a kernel does can crash the editor's server.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types as lsp
from pydantic import BaseModel
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from evoteam.server import messages
from evoteam.server.messages import RUN_UPDATED, STATUS, Notification, RunRemoved, RunUpdate, ServerStatus
from evoteam.server.project import Project
from evoteam.server.protocol import EvoteamProtocol
from evoteam.server.resource_hints import KernelFacts
from evoteam.server.run_index import RunIndex
from evoteam.server.settings import SECTION, Settings, parse_settings
from evoteam.server.watch import FileWatcher, Watcher

log = logging.getLogger("evoteam.server")
R = TypeVar("R")
P = TypeVar("P", bound=BaseModel)

FEATURES: tuple[str, ...] = ("commands", "code_actions", "lenses", "hover", "progress", "diagnostics")
"""Modules of ``evoteam.server.features`` whose ``FEATURE`` is registered, in this order."""


class Feature:
    """One capability of the server. ``register`` adds its LSP methods (each method belongs to one feature);
    the hooks are called on events the server owns. Every hook is optional."""

    name = "feature"

    def register(self, server: EvoteamServer) -> None:
        """Add LSP request handlers and commands with ``server.feature`` / ``server.command``."""

    async def initialized(self, server: EvoteamServer) -> None:
        """The client is ready and the project, settings and runs are loaded."""

    async def opened(self, server: EvoteamServer, uri: str) -> None: ...

    async def changed(self, server: EvoteamServer, uri: str) -> None: ...

    async def saved(self, server: EvoteamServer, uri: str) -> None: ...

    async def closed(self, server: EvoteamServer, uri: str) -> None: ...

    async def runs_changed(self, server: EvoteamServer, runs: list[str]) -> None:
        """Runs whose journal changed (new, grown, removed); ``server.index`` already holds their new state."""

    async def files_changed(self, server: EvoteamServer, paths: set[Path]) -> None:
        """Files outside ``.evoteam/`` changed on disk (a kernel file, an evoteam.toml)."""

    async def knowledge_changed(self, server: EvoteamServer, paths: set[Path]) -> None:
        """Files of a knowledge store (``.evoteam/knowledge/``) changed on disk."""

    async def settings_changed(self, server: EvoteamServer) -> None: ...

    def stop(self, server: EvoteamServer) -> None:
        """The server is shutting down: end background work."""


WatcherFactory = Callable[[Callable[[set[Path]], None]], Watcher]


class EvoteamServer(LanguageServer):
    def __init__(self, watcher_factory: WatcherFactory = FileWatcher, workers: int = 4) -> None:
        super().__init__("evoteam", _version(), protocol_cls=EvoteamProtocol, max_workers=8)
        self.project = Project(Path.cwd())
        self.index = RunIndex(self.project.root)
        self.settings = Settings()
        self.features: list[Feature] = []
        self.broken: dict[str, str] = {}
        """Features that failed to register (name → error): logged, left out, the rest works."""
        self.work = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="evoteam-work")
        self.loop: asyncio.AbstractEventLoop | None = None
        self._watcher_factory = watcher_factory
        self.watcher: Watcher | None = None
        self._refreshing = asyncio.Lock()
        self.ready = asyncio.Event()
        """Set when ``initialized`` has loaded the settings and the runs (requests that need them wait)."""
        self.kernels: dict[str, list[KernelFacts]] = {}
        """The ptxas facts of each open CUDA file's newest compile, by URI: the diagnostics feature keeps them,
        the inlay hints show them."""

    # -- features ------------------------------------------------------------------------------------------
    def add(self, feature: Feature) -> None:
        try:
            feature.register(self)
        except Exception as exc:  # a feature that cannot register is left out; the server goes on
            log.exception("feature %s failed to register", feature.name)
            self.broken[feature.name] = f"{type(exc).__name__}: {exc}"
            return
        self.features.append(feature)

    async def emit(self, hook: str, *args: Any) -> None:
        for feature in list(self.features):
            try:
                await getattr(feature, hook)(self, *args)
            except Exception as exc:
                log.exception("feature %s failed in %s", feature.name, hook)
                self.window_log_message(
                    lsp.LogMessageParams(
                        type=lsp.MessageType.Error, message=f"evoteam: {feature.name} failed in {hook}: {exc!r}"
                    )
                )

    def report_server_error(self, error: Exception, source: Any) -> None:
        """pygls's error hook. Its reader loop reports a body it could not parse with ``JsonRpcException`` as the
        source (the protocol handles everything else itself): that gets JSON-RPC's ParseError answer."""
        if source is JsonRpcException and isinstance(self.protocol, EvoteamProtocol):
            self.protocol.parse_error(error)
            return
        super().report_server_error(error, source)

    async def in_background(self, fn: Callable[..., R], *args: Any) -> R:
        """``fn(*args)`` on the server's executor, awaited from the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self.work, fn, *args)

    # -- runs and files ----------------------------------------------------------------------------------
    async def refresh_runs(self) -> list[str]:
        """Reads changed journals, tells the client and every feature which runs changed."""
        from evoteam.server.convert import run_summary

        async with self._refreshing:
            changed = await self.in_background(self.index.refresh)
        for run in changed:
            entry = self.index.get(run)
            update = run_summary(entry) if entry else RunRemoved(run=run, removed=True)
            self.send(RUN_UPDATED, RunUpdate(update))
        if changed:
            await self.emit("runs_changed", changed)
        return changed

    def send(self, message: Notification[P], params: P) -> None:
        """A custom notification of ``messages`` to the client, its params built from the message's model."""
        if message is not messages.by_name().get(message.name):
            raise ValueError(f"{message.name} is not a message of evoteam.server.messages")
        self.protocol.notify(message.name, message.payload(params))

    def _on_disk_change(self, paths: set[Path]) -> None:
        """From the watcher's thread: hand over to the event loop."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self._disk_changed(paths), loop)

    async def _disk_changed(self, paths: set[Path]) -> None:
        state = self.project.root / ".evoteam"
        if any(_under(p, state / "runs") for p in paths):
            await self.refresh_runs()
        knowledge = {p for p in paths if _under(p, state / "knowledge")}
        if knowledge:
            await self.emit("knowledge_changed", knowledge)
        outside = {p for p in paths if not _under(p, state)}
        if outside:
            await self.emit("files_changed", outside)

    async def wait_ready(self, timeout: float = 10.0) -> None:
        """Until start-up is done (at most ``timeout`` seconds: then answer with what is there)."""
        try:
            await asyncio.wait_for(self.ready.wait(), timeout)
        except TimeoutError:
            log.warning("start-up is taking over %.0f s; answering with what is loaded", timeout)

    def watch_file(self, path: Path) -> None:
        """Watch the folder of a kernel file (and so the file) from now on."""
        if self.watcher is not None:
            self.watcher.watch(path.parent, recursive=False)

    # -- settings --------------------------------------------------------------------------------------------
    async def load_settings(self) -> None:
        """Asks the client for the ``evoteam`` section; a client that cannot answer keeps what it sent in
        ``initializationOptions`` (or the defaults)."""
        capabilities = self.client_capabilities.workspace
        if capabilities is None or not capabilities.configuration:
            return
        try:
            answer = await asyncio.wait_for(
                self.workspace_configuration_async(
                    lsp.ConfigurationParams(items=[lsp.ConfigurationItem(section=SECTION)])
                ),
                timeout=5.0,
            )
        except Exception as exc:
            log.warning("workspace/configuration failed: %r", exc)
            return
        if answer and answer[0] is not None:  # nothing set in the editor: keep what initialize brought
            self.apply_settings(answer[0])

    def apply_settings(self, raw: Any) -> None:
        self.settings, problems = parse_settings(raw)
        if problems:
            self.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message="; ".join(problems)))

    def path_of(self, uri: str) -> Path | None:
        path = to_fs_path(uri)
        return Path(path) if path else None


def _under(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("evoteam")
    except metadata.PackageNotFoundError:
        return "0"


def build_server(features: Sequence[str] | None = None, watcher_factory: WatcherFactory = FileWatcher) -> EvoteamServer:
    """The server with the lifecycle handlers and every feature module of ``features`` (default ``FEATURES``)."""
    server = EvoteamServer(watcher_factory)
    _lifecycle(server)
    for name in FEATURES if features is None else features:
        try:
            module = importlib.import_module(f"evoteam.server.features.{name}")
            feature: Feature = module.FEATURE
        except Exception as exc:
            log.exception("feature module %s failed to load", name)
            server.broken[name] = f"{type(exc).__name__}: {exc}"
            continue
        server.add(feature)
    return server


def _lifecycle(server: EvoteamServer) -> None:
    @server.feature(lsp.INITIALIZE)
    def initialize(ls: EvoteamServer, params: lsp.InitializeParams) -> None:
        folder = ls.workspace.root_path
        if folder:
            ls.project = Project.open(Path(folder))
            ls.index = RunIndex(ls.project.root)
        if isinstance(params.initialization_options, dict):
            ls.apply_settings(params.initialization_options.get(SECTION))

    @server.feature(lsp.INITIALIZED)
    async def initialized(ls: EvoteamServer, params: lsp.InitializedParams) -> None:
        ls.loop = asyncio.get_running_loop()
        await ls.load_settings()
        try:
            ls.watcher = ls._watcher_factory(ls._on_disk_change)
            (ls.project.root / ".evoteam").mkdir(exist_ok=True)
            ls.watcher.watch(ls.project.root / ".evoteam", recursive=True)
        except Exception:  # no watcher (inotify limits...): runs still show on open, save and refresh
            log.exception("cannot watch %s", ls.project.root)
        await ls.refresh_runs()
        for entry in ls.index.runs():
            if entry.state.config is not None:
                ls.watch_file(Path(entry.state.config.config))
        ls.ready.set()
        await ls.emit("initialized")

    @server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def configuration(ls: EvoteamServer, params: lsp.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if isinstance(settings, dict) and SECTION in settings:
            ls.apply_settings(settings[SECTION])
        else:
            await ls.load_settings()
        await ls.emit("settings_changed")

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: EvoteamServer, params: lsp.DidOpenTextDocumentParams) -> None:
        path = ls.path_of(params.text_document.uri)
        if path is not None:
            ls.watch_file(path)
        await ls.emit("opened", params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: EvoteamServer, params: lsp.DidChangeTextDocumentParams) -> None:
        await ls.emit("changed", params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: EvoteamServer, params: lsp.DidSaveTextDocumentParams) -> None:
        await ls.emit("saved", params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: EvoteamServer, params: lsp.DidCloseTextDocumentParams) -> None:
        await ls.emit("closed", params.text_document.uri)

    @server.feature(lsp.SHUTDOWN)
    def shutdown(ls: EvoteamServer, params: None) -> None:
        for feature in ls.features:
            try:
                feature.stop(ls)
            except Exception:
                log.exception("feature %s failed to stop", feature.name)
        if ls.watcher is not None:
            ls.watcher.stop()
        ls.work.shutdown(wait=False, cancel_futures=True)

    @server.feature(STATUS.name)
    async def status(ls: EvoteamServer, params: Any) -> Any:
        """What the server runs: its features, the ones that failed to load, the project and its runs."""
        await ls.wait_ready()
        return STATUS.answer(
            ServerStatus(
                version=ls.version or "0",
                root=str(ls.project.root),
                features=[f.name for f in ls.features],
                broken=dict(ls.broken),
                runs=[e.run for e in ls.index.runs()],
                settings=ls.settings,
            )
        )
