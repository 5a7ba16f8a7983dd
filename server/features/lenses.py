"""Inlay hints and code lenses on a task's kernel entry point: the best result over the kernel's runs (its lens
accepts it), the open file's own result when its text is one of the evaluated candidates, and the status of a
live run (its lens cancels it); a kernel without a result gets "Evolve this kernel". Everything is answered
from memory: the run index holds the folded runs, ``SourceIndex`` their candidates' sources by content hash.
The commands named here belong to the commands feature (``server/messages.py`` defines them).

The inlay hints also show, after each ``__global__`` function of any open CUDA file, the ptxas resources of its
newest compile (``server/resource_hints.py``; the diagnostics feature compiles and keeps them)."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp

from evoteam.gpu_bench.api import KernelTask
from evoteam.server.app import EvoteamServer, Feature
from evoteam.server.convert import NO_IMPROVEMENT, entry_line, result_label
from evoteam.server.messages import ACCEPT, CANCEL, EVOLVE, AcceptArgs, EvolveArgs, RunArgs
from evoteam.server.resource_hints import hints as resource_hints
from evoteam.server.run_index import RunEntry, RunIndex, running
from evoteam.server.winner import current_text
from evoteam.supervisor.state import Candidate

log = logging.getLogger("evoteam.server")


@dataclass(frozen=True)
class EntryPoint:
    """An entry source of a task as the editor has it: its task, text and the 0-based line of the entry point."""

    task: KernelTask
    text: str
    line: int

    @property
    def width(self) -> int:
        """The length of the entry point's line."""
        lines = self.text.splitlines()
        return len(lines[self.line]) if self.line < len(lines) else 0


def entry_point(ls: EvoteamServer, uri: str) -> EntryPoint | None:
    """The entry point of ``uri`` when it is a task's entry source (not an extra source), else None."""
    path = ls.path_of(uri)
    found = ls.project.task_for(path) if path is not None else None
    if found is None or found.extra:
        return None
    text = current_text(ls.workspace, uri)
    if text is None:
        return None
    return EntryPoint(found.task, text, entry_line(text, found.task.entry))


def digest(text: str) -> str:
    return hashlib.sha256(text.replace("\r\n", "\n").encode()).hexdigest()


class SourceIndex:
    """Per run: the digest of each candidate's entry source → its ids. A run's candidates only grow, so a run
    whose journal changed hashes just the new ones."""

    def __init__(self) -> None:
        self._runs: dict[str, tuple[int, dict[str, list[str]]]] = {}
        self._lock = threading.Lock()

    def _hashes(self, entry: RunEntry) -> dict[str, list[str]]:
        with self._lock:
            done, hashes = self._runs.get(entry.run, (0, {}))
        candidates = list(entry.state.candidates.values())
        if done == len(candidates):
            return hashes
        hashes = {k: list(v) for k, v in hashes.items()}
        for candidate in candidates[done:]:
            source = _entry_source(candidate)
            if source is not None:
                hashes.setdefault(digest(source), []).append(candidate.id)
        with self._lock:
            self._runs[entry.run] = (len(candidates), hashes)
        return hashes

    def matching(self, entries: Iterable[RunEntry], text: str) -> tuple[RunEntry, Candidate] | None:
        """The evaluated candidate whose entry source is ``text`` (``entries`` oldest first): the newest run's,
        its best on ties."""
        key = digest(text)
        for entry in reversed(list(entries)):
            found = [entry.state.candidates[i] for i in self._hashes(entry).get(key, [])]
            evaluated = [c for c in found if c.record is not None]
            if evaluated:
                return entry, max(evaluated, key=lambda c: c.record.geomean_speedup or 0.0)  # type: ignore[union-attr]
        return None

    def forget(self, runs: Iterable[str], index: RunIndex) -> None:
        """Drops the runs that are gone from the index."""
        with self._lock:
            for run in runs:
                if index.get(run) is None:
                    self._runs.pop(run, None)


def _entry_source(candidate: Candidate) -> str | None:
    solution = candidate.solution
    spec = solution.get("spec")
    entry = spec.get("entry_point") if isinstance(spec, dict) else None
    if not isinstance(entry, str) or "::" not in entry:
        return None
    name = entry.split("::")[0]
    for source in solution.get("sources") or []:
        if isinstance(source, dict) and source.get("path") == name and isinstance(source.get("content"), str):
            return str(source["content"])
    return None


@dataclass(frozen=True)
class KernelResults:
    """What the editor shows on an entry point."""

    best: tuple[RunEntry, Candidate] | None
    mine: tuple[RunEntry, Candidate] | None
    live: RunEntry | None
    runs: int
    finished: int = 0
    """Runs of the kernel that have finished (with a best or without one)."""


def results(ls: EvoteamServer, sources: SourceIndex, point: EntryPoint) -> KernelResults:
    entries = ls.index.for_kernel(point.task.name)
    live = [e for e in entries if running(e, ls.project.root)]
    return KernelResults(
        best=ls.index.best_for(point.task.name),
        mine=sources.matching(entries, point.text),
        live=live[-1] if live else None,
        runs=len(entries),
        finished=sum(not e.live for e in entries),
    )


def no_improvement(found: KernelResults) -> str | None:
    """``no improvement over the start (2 finished runs)``, when finished runs have no best and none is live."""
    if found.best is not None or found.live is not None or not found.finished:
        return None
    return f"{NO_IMPROVEMENT} ({found.finished} finished run{'s' if found.finished > 1 else ''})"


def live_label(entry: RunEntry) -> str:
    """``running: round 2/3 · Optimizer, Debugger · 12,345/200,000 tokens``."""
    state, config = entry.state, entry.state.config
    assert config is not None
    started = max(state.rounds_started, default=0)
    where = f"round {started}/{config.rounds}" if started else "starting"
    team = ", ".join(state.team.roles) if state.team else "no team"
    return f"running: {where} · {team} · {state.spent:,}/{config.budget:,} tokens"


def mine_label(found: KernelResults) -> str | None:
    if found.mine is None or found.mine[1].record is None:
        return None
    head = "this file (the best)" if found.best is not None and found.best[1].id == found.mine[1].id else "this file"
    return f"{head}: {result_label(found.mine[1].record)}"


def hints(point: EntryPoint, found: KernelResults) -> list[lsp.InlayHint]:
    end = lsp.Position(point.line, point.width)
    labels: list[tuple[str, str]] = []
    if found.best is not None and found.best[1].record is not None:
        entry, candidate = found.best
        labels.append((f"best: {result_label(found.best[1].record)}", f"run {entry.run}, candidate {candidate.id}"))
    mine = mine_label(found)
    if mine is not None and found.mine is not None:
        labels.append((mine, f"run {found.mine[0].run}, candidate {found.mine[1].id}"))
    if found.live is not None:
        labels.append((live_label(found.live), f"run {found.live.run}"))
    none = no_improvement(found)
    if none is not None:
        labels.append((none, "no candidate was significantly faster than the start, measured twice"))
    return [lsp.InlayHint(position=end, label=label, padding_left=True, tooltip=tip) for label, tip in labels]


def lenses(uri: str, point: EntryPoint, found: KernelResults) -> list[lsp.CodeLens]:
    where = lsp.Range(lsp.Position(point.line, 0), lsp.Position(point.line, 0))
    commands: list[lsp.Command] = []
    if found.best is not None and found.best[1].record is not None:
        entry, candidate = found.best
        commands.append(
            lsp.Command(
                title=f"best: {result_label(found.best[1].record)}",
                command=ACCEPT.name,
                arguments=ACCEPT.arguments(AcceptArgs(run=entry.run, candidate=candidate.id)),
                tooltip=f"Accept candidate {candidate.id} of run {entry.run} into the editor",
            )
        )
    mine = mine_label(found)
    if mine is not None:  # a label only: no command
        commands.append(lsp.Command(title=mine, command=""))
    if found.live is not None:
        commands.append(
            lsp.Command(
                title=live_label(found.live),
                command=CANCEL.name,
                arguments=CANCEL.arguments(RunArgs(run=found.live.run)),
                tooltip=f"Cancel run {found.live.run}",
            )
        )
    elif found.best is None:
        none = no_improvement(found)
        if none is not None:  # a label only: no command
            commands.append(lsp.Command(title=none, command=""))
        arguments = EVOLVE.arguments(EvolveArgs(uri=uri))
        commands.append(lsp.Command(title="Evolve this kernel", command=EVOLVE.name, arguments=arguments))
    return [lsp.CodeLens(range=where, command=command) for command in commands]


class Lenses(Feature):
    name = "lenses"

    def __init__(self) -> None:
        self.sources = SourceIndex()

    def register(self, server: EvoteamServer) -> None:
        @server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT, lsp.InlayHintOptions(resolve_provider=False))
        async def inlay_hint(ls: EvoteamServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint]:
            await ls.wait_ready()
            uri = params.text_document.uri
            kernels = ls.kernels.get(uri)
            found = resource_hints(current_text(ls.workspace, uri) or "", kernels, params.range) if kernels else []
            point = entry_point(ls, uri)
            if point is not None and params.range.start.line <= point.line <= params.range.end.line:
                found += hints(point, results(ls, self.sources, point))
            return found

        @server.feature(lsp.TEXT_DOCUMENT_CODE_LENS, lsp.CodeLensOptions(resolve_provider=False))
        async def code_lens(ls: EvoteamServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
            await ls.wait_ready()
            uri = params.text_document.uri
            point = entry_point(ls, uri)
            if point is None:
                return []
            return lenses(uri, point, results(ls, self.sources, point))

    async def runs_changed(self, server: EvoteamServer, runs: list[str]) -> None:
        self.sources.forget(runs, server.index)
        workspace = server.client_capabilities.workspace
        if workspace is None:
            return
        if workspace.inlay_hint is not None and workspace.inlay_hint.refresh_support:
            _logged(server.workspace_inlay_hint_refresh(None), lsp.WORKSPACE_INLAY_HINT_REFRESH)
        if workspace.code_lens is not None and workspace.code_lens.refresh_support:
            _logged(server.workspace_code_lens_refresh(None), lsp.WORKSPACE_CODE_LENS_REFRESH)


def _logged(future: Future[Any], method: str) -> None:
    """A refresh request is not awaited (the client answers when it likes); a failure is logged."""

    def done(f: Future[Any]) -> None:
        if not f.cancelled() and f.exception() is not None:
            log.warning("%s failed: %r", method, f.exception())

    future.add_done_callback(done)


FEATURE = Lenses()
