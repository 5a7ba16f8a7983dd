"""Diagnostics of kernel files: what the compiler says, for a task's files and for any other ``.cu``, ``.cuh``
or C++ file of the workspace (``server/file_check.py``), and, for a task's files, the failed workloads and
constraint violations of the file's last evaluation and the notes the team attached to its lines (knowledge
notes that name ``FILE:LINE``, the supervisor's latest decision). The ptxas resources of the newest compile go
to ``server.kernels`` for the inlay hints.

Compiles run on open and save and, debounced, while typing (``evoteam.compileOnChange``): at most one compile
per file is in flight; a result for a text that has changed since is dropped, and the newest text is compiled
after it. Every diagnostic has the source ``evoteam``; what produced it is in ``data["kind"]`` (``compile``,
``evaluation``, ``note``, ``decision``) and, for compiler messages, ``data["tool"]`` (``gcc``, ``nvcc``,
``ptxas``...). A file outside the workspace or of another language gets none. A compile that crashes or runs
too long is a diagnostic and a log message, never the server's end. Imports no torch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import tempfile
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.uris import from_fs_path

from evoteam.gpu_bench.api import (
    CheckResult,
    Diagnostic,
    EvaluationStatus,
    KernelTask,
    Severity,
    Solution,
    SourceFile,
    demangle,
)
from evoteam.roles.knowledge import Entry, KnowledgeStore
from evoteam.server.app import EvoteamServer, Feature
from evoteam.server.convert import entry_line
from evoteam.server.file_check import (
    CompileDatabase,
    FileCheck,
    check_text,
    find_database,
    is_kernel_file,
    plan,
    read_database,
)
from evoteam.server.file_check import local_arch as detect_arch
from evoteam.server.project import TaskFile
from evoteam.server.resource_hints import KernelFacts, utf16_length
from evoteam.server.run_index import RunEntry, RunIndex
from evoteam.server.winner import current_text, open_uris
from evoteam.supervisor.state import Candidate

log = logging.getLogger("evoteam.server")
SOURCE = "evoteam"
COMPILE_TIMEOUT_S = 420.0
"""The longest a compile check may take before the file gets a diagnostic saying so (the compiler itself is
stopped by the build after 300 s)."""
DEBOUNCE_S = 0.6
"""How long typing must pause before the text is compiled."""
TABSTOP = 8
"""gcc and nvcc count columns on screen: a tab reaches the next multiple of 8."""
_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
    Severity.NOTE: lsp.DiagnosticSeverity.Information,
}


@dataclass
class Compiled:
    """One compile's diagnostics and the ptxas facts of its kernels."""

    diagnostics: list[lsp.Diagnostic]
    kernels: list[KernelFacts] = field(default_factory=list)


@dataclass
class _Shown:
    """What is published for one open kernel file: the compile part and the rest, each from its newest check,
    and the compile under way."""

    compile: list[lsp.Diagnostic] = field(default_factory=list)
    results: list[lsp.Diagnostic] = field(default_factory=list)
    refreshes: int = 0
    compiles: int = 0
    """Compiles finished (published or dropped)."""
    running: asyncio.Task[None] | None = None
    running_version: int | None = None
    again: bool = False
    """A newer text asked for a compile while one was running."""
    saved_version: int | None = None
    """The document version last opened or saved: a task's text of that version compiles through the
    evaluator's build cache (a later bench of it is a cache hit), an unsaved one through a throwaway cache."""
    timer: asyncio.TimerHandle | None = None


class Diagnostics(Feature):
    name = "diagnostics"

    def __init__(self) -> None:
        self.shown: dict[str, _Shown] = {}
        self.checks: set[asyncio.Task[None]] = set()
        """Checks under way: tasks of their own, so a slow compile holds up no other feature's hook."""
        self.arch: str | None = None
        self.arch_known = False
        self.database: tuple[tuple[Path, int] | None, CompileDatabase] | None = None

    async def opened(self, server: EvoteamServer, uri: str) -> None:
        self.start(server, uri)

    async def saved(self, server: EvoteamServer, uri: str) -> None:
        shown = self.shown.get(uri)
        if shown is not None and shown.timer is not None:  # the saved text is the newest: compiled now
            shown.timer.cancel()
            shown.timer = None
        self.start(server, uri)

    async def changed(self, server: EvoteamServer, uri: str) -> None:
        shown = self.shown.get(uri)
        if shown is None or not server.settings.compileOnChange:
            return
        if shown.timer is not None:
            shown.timer.cancel()
        shown.timer = asyncio.get_running_loop().call_later(DEBOUNCE_S, self._typed, server, uri, shown)

    def _typed(self, server: EvoteamServer, uri: str, shown: _Shown) -> None:
        shown.timer = None
        if self.shown.get(uri) is shown:
            self.compile_soon(server, uri, shown)

    def start(self, server: EvoteamServer, uri: str) -> None:
        self._spawn(self.check(server, uri))

    def _spawn(self, work: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(work)
        self.checks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self.checks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("diagnostics check failed", exc_info=task.exception())

    def stop(self, server: EvoteamServer) -> None:
        for shown in self.shown.values():
            if shown.timer is not None:
                shown.timer.cancel()
        for task in list(self.checks):
            task.cancel()

    async def closed(self, server: EvoteamServer, uri: str) -> None:
        shown = self.shown.pop(uri, None)
        server.kernels.pop(uri, None)
        if shown is not None:
            if shown.timer is not None:
                shown.timer.cancel()
            _publish(server, uri, [])

    async def runs_changed(self, server: EvoteamServer, runs: list[str]) -> None:
        await self.refresh_all(server)

    async def knowledge_changed(self, server: EvoteamServer, paths: set[Path]) -> None:
        await self.refresh_all(server)

    async def refresh_all(self, server: EvoteamServer) -> None:
        for uri in list(self.shown):
            task = _task(server, uri)
            if task is not None:
                await self.refresh(server, uri, task)

    async def check(self, server: EvoteamServer, uri: str) -> None:
        """Compile the file from the editor's texts and refresh the rest."""
        await server.wait_ready()
        if uri not in server.workspace.text_documents:  # closed meanwhile
            return
        task = _task(server, uri)
        if task is None and not self.standalone(server, uri):
            if self.shown.pop(uri, None) is not None:  # it was a kernel file: take back what it showed
                server.kernels.pop(uri, None)
                _publish(server, uri, [])
            return
        shown = self.shown.setdefault(uri, _Shown())
        if task is None and shown.results:  # it was a task's file and is no more
            shown.results = []
        shown.saved_version = _version(server, uri)
        if task is not None:  # quick (from memory): the compile's publish carries it
            await self.refresh(server, uri, task, publish=False)
        self.compile_soon(server, uri, shown)

    def compile_soon(self, server: EvoteamServer, uri: str, shown: _Shown) -> None:
        """Compile the file's current text now, or after the compile under way when that one's text is older."""
        if shown.running is not None and not shown.running.done():
            shown.again = shown.again or _version(server, uri) != shown.running_version
            return
        shown.running = self._spawn(self.compiling(server, uri, shown))

    async def compiling(self, server: EvoteamServer, uri: str, shown: _Shown) -> None:
        while True:
            shown.again = False
            version = shown.running_version = _version(server, uri)
            compiled = await self.compile(server, uri, saved=version == shown.saved_version)
            shown.compiles += 1
            if self.shown.get(uri) is not shown:  # closed meanwhile
                return
            if shown.again:
                continue
            if _version(server, uri) != version and server.settings.compileOnChange:
                return  # stale: the text has changed since, and its own compile is on the way
            shown.compile = compiled.diagnostics
            server.kernels[uri] = compiled.kernels
            _publish(server, uri, shown.compile + shown.results)
            _refresh_hints(server)
            return

    def standalone(self, server: EvoteamServer, uri: str) -> bool:
        """A kernel file of the workspace that is no task: compiled on its own."""
        path = server.path_of(uri)
        if path is None or not is_kernel_file(path):
            return False
        try:
            inside = path.resolve().relative_to(server.project.root)
        except ValueError:
            return False
        return inside.parts[:1] != (".evoteam",)

    async def refresh(self, server: EvoteamServer, uri: str, task: TaskFile, publish: bool = True) -> None:
        """The evaluation, role notes and decision of the file (no compile)."""
        shown = self.shown.get(uri)
        path = server.path_of(uri)
        text = current_text(server.workspace, uri)
        if shown is None or path is None or text is None:
            return
        shown.refreshes += 1
        number = shown.refreshes
        try:
            found = await server.in_background(results, server.project.root, server.index, task, path, text)
        except Exception:  # a journal or note this code does not expect: the compile part still shows
            log.exception("diagnostics of %s from its runs and notes failed", path)
            found = []
        if self.shown.get(uri) is shown and shown.refreshes == number:
            shown.results = found
            if publish:
                _publish(server, uri, shown.compile + shown.results)

    async def compile(self, server: EvoteamServer, uri: str, saved: bool = True) -> Compiled:
        path = server.path_of(uri)
        assert path is not None
        task = _task(server, uri)
        name = task.task.name if task is not None else path.name
        try:
            if task is not None:
                texts = {
                    p: t for p, u in open_uris(server.workspace).items() if (t := current_text(server.workspace, u))
                }
                work = server.in_background(compile_diagnostics, task.task, path, texts, saved)
            else:
                text = current_text(server.workspace, uri) or ""
                arch, database = await self.target(server), self.compile_database(server)
                check = plan(path, text, arch, self.includes(server), database)
                work = server.in_background(file_diagnostics, check, text)
            return await asyncio.wait_for(work, COMPILE_TIMEOUT_S)
        except TimeoutError:
            why = f"the compile check of {name} did not finish within {COMPILE_TIMEOUT_S:.0f} s"
        except Exception as exc:  # a crash of the build or the parser is the check's, not the server's
            log.exception("compile check of %s failed", path)
            why = f"the compile check of {name} failed: {type(exc).__name__}: {exc}"
        server.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Warning, message=f"evoteam: {why}"))
        return Compiled([_diagnostic(_top(), why, "compile", lsp.DiagnosticSeverity.Warning)])

    async def target(self, server: EvoteamServer) -> str | None:
        """``evoteam.cudaArch``, else the local GPU's architecture (asked once), else None (the default)."""
        if server.settings.cudaArch:
            return server.settings.cudaArch
        if not self.arch_known:
            self.arch = await server.in_background(detect_arch)
            self.arch_known = True
        return self.arch

    def includes(self, server: EvoteamServer) -> list[Path]:
        return [server.project.root / p for p in server.settings.includePaths]

    def compile_database(self, server: EvoteamServer) -> CompileDatabase:
        """The workspace's compile_commands.json, read again when it changes; a bad one is logged once."""
        path = find_database(server.project.root)
        stamp = None
        if path is not None:
            with contextlib.suppress(OSError):
                stamp = (path, path.stat().st_mtime_ns)
        if self.database is None or self.database[0] != stamp:
            fresh = read_database(path) if path is not None else CompileDatabase()
            if fresh.problem:
                log.warning("%s", fresh.problem)
                server.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Warning, message=fresh.problem))
            self.database = (stamp, fresh)
        return self.database[1]


def _task(server: EvoteamServer, uri: str) -> TaskFile | None:
    path = server.path_of(uri)
    return server.project.task_for(path) if path is not None else None


def _publish(server: EvoteamServer, uri: str, diagnostics: list[lsp.Diagnostic]) -> None:
    server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))


def _version(server: EvoteamServer, uri: str) -> int | None:
    document = server.workspace.text_documents.get(uri)
    return document.version if document is not None else None


def _refresh_hints(server: EvoteamServer) -> None:
    """Ask the client to ask again for inlay hints (the resources changed), when it can be asked."""
    workspace = server.client_capabilities.workspace
    if workspace is None or workspace.inlay_hint is None or not workspace.inlay_hint.refresh_support:
        return

    def done(f: Any) -> None:
        if not f.cancelled() and f.exception() is not None:
            log.warning("inlay hint refresh failed: %r", f.exception())

    server.workspace_inlay_hint_refresh(None).add_done_callback(done)


# -- compile ----------------------------------------------------------------------------------------------------
def task_solution(task: KernelTask, texts: dict[Path, str]) -> Solution:
    """The task's sources as the editor has them (``texts``: resolved path → text; the rest from disk)."""
    sources = []
    for path in [task.source, *task.extra_sources]:
        text = texts.get(path.resolve())
        sources.append(SourceFile(path=path.name, content=text if text is not None else path.read_text()))
    name = task.load_definition().name
    return Solution(name=task.name, definition=name, author="user", spec=task.build_spec(), sources=sources)


def compile_diagnostics(task: KernelTask, path: Path, texts: dict[Path, str], saved: bool = True) -> Compiled:
    """Compile only: the compiler's messages on ``path`` at their ranges, messages on the task's other files and
    on no file at line 1 with their place, constraint violations, and the kernels' ptxas facts. A ``saved`` text
    goes through the evaluator's build cache, an unsaved one (typing) through a throwaway one."""
    from evoteam.gpu_bench.api import check_solution

    solution = task_solution(task, texts)
    if saved:
        result = check_solution(solution, task.constraints)
    else:
        with tempfile.TemporaryDirectory(prefix="evoteam-editor-check-") as cache:
            result = check_solution(solution, task.constraints, Path(cache))
    files = {p.name: p for p in [task.source, *task.extra_sources]}
    found = _compiled(result, path, next(s.content for s in solution.sources if s.path == path.name), files)
    for violation in result.violations:
        message = f"constraint violated: {violation}"
        found.diagnostics.append(
            _diagnostic(_top(), message, "compile", lsp.DiagnosticSeverity.Error, code="constraint")
        )
    return found


def file_diagnostics(check: FileCheck, text: str) -> Compiled:
    """Compile a kernel file that is no task on its own (``server/file_check.py``); the first line says how."""
    result = check_text(check, text)
    found = _compiled(result, check.path, text, {check.path.name: check.path})
    for note in result.notes:
        found.diagnostics.append(_diagnostic(_top(), note, "compile", lsp.DiagnosticSeverity.Information))
    return found


def _compiled(result: CheckResult, path: Path, text: str, files: dict[str, Path]) -> Compiled:
    lines = _lines(text)
    found = [_compiler_diagnostic(d, path, lines, files) for d in result.diagnostics]
    if not result.ok and not any(d.severity == Severity.ERROR for d in result.diagnostics):
        tail = "\n".join(result.log.strip().splitlines()[-15:])
        found.append(_diagnostic(_top(), f"the build failed:\n{tail}", "compile", lsp.DiagnosticSeverity.Error))
    spelled = demangle(sorted({r.name for r in result.resources}))
    return Compiled(found, [KernelFacts(spelled.get(r.name, r.name), r) for r in result.resources])


def _compiler_diagnostic(d: Diagnostic, path: Path, lines: list[str], files: dict[str, Path]) -> lsp.Diagnostic:
    message = d.message
    context = [r.message for r in d.related if r.line == 0]
    if context:
        message += "\n" + "\n".join(context)
    if d.file == path.name and d.line > 0:
        text = lines[d.line - 1] if d.line <= len(lines) else ""
        start = _character(text, d.column) if d.column else _indent(text)
        end = _character(text, d.end_column) if d.end_column > d.column else utf16_length(text)
        where = lsp.Range(lsp.Position(d.line - 1, start), lsp.Position(d.line - 1, max(end, start)))
    else:
        place = f"{d.file}:{d.line}" + (f":{d.column}" if d.column else "") if d.file else d.tool
        message = f"{place}: {message}"
        where = _top()
    related = []
    for r in d.related:
        other = path if r.file == path.name else files.get(Path(r.file).name)
        uri = from_fs_path(str(other)) if other is not None and r.line > 0 else None
        if uri:
            at = lsp.Position(r.line - 1, max(r.column - 1, 0))
            related.append(lsp.DiagnosticRelatedInformation(lsp.Location(uri, lsp.Range(at, at)), r.message))
    return lsp.Diagnostic(
        range=where,
        message=message,
        severity=_SEVERITY[d.severity],
        code=d.code,
        source=SOURCE,
        related_information=related or None,
        data={"kind": "compile", "tool": d.tool},
    )


def _character(line: str, column: int) -> int:
    """The LSP character (UTF-16 units) at the compiler's 1-based column on screen (tabs to ``TABSTOP``, wide
    characters two columns); past the end of the line, the end."""
    screen, units = 1, 0
    for char in line:
        width = TABSTOP - (screen - 1) % TABSTOP if char == "\t" else _width(char)
        if screen + width > column:
            return units
        screen += width
        units += 2 if ord(char) > 0xFFFF else 1
    return units


def _width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _indent(text: str) -> int:
    return utf16_length(text) - utf16_length(text.lstrip())


def _lines(text: str) -> list[str]:
    return text.split("\n")


# -- evaluation, notes, decision --------------------------------------------------------------------------------
def results(root: Path, index: RunIndex, task: TaskFile, path: Path, text: str) -> list[lsp.Diagnostic]:
    """What the runs and the knowledge store say about the file (its current ``text``)."""
    lines = _lines(text)
    entry = _line_range(lines, entry_line(text, task.task.entry))
    runs = index.for_kernel(task.task.name)
    found = evaluation_diagnostics(runs, path.name, text, entry)
    found += note_diagnostics(_notes(root, task.task.name), path.name, lines)
    decisions = runs[-1].state.decisions if runs else []
    if decisions and not task.extra:
        note = f"{decisions[-1].note()} [run {runs[-1].run}]"
        found.append(_diagnostic(entry, note, "decision", lsp.DiagnosticSeverity.Information, code="decision"))
    return found


def last_evaluation(runs: list[RunEntry], name: str, text: str) -> tuple[RunEntry, Candidate, bool] | None:
    """The newest evaluated candidate whose file ``name`` is ``text`` (True), else the newest evaluated candidate
    of the latest run (False); ``runs`` oldest first."""
    for entry in reversed(runs):
        for candidate in reversed(list(entry.state.candidates.values())):
            if candidate.record is not None and _source(candidate, name) == text:
                return entry, candidate, True
    if runs:
        evaluated = [c for c in runs[-1].state.candidates.values() if c.record is not None]
        if evaluated:
            return runs[-1], evaluated[-1], False
    return None


def evaluation_diagnostics(runs: list[RunEntry], name: str, text: str, at: lsp.Range) -> list[lsp.Diagnostic]:
    found = last_evaluation(runs, name, text)
    if found is None:
        return []
    entry, candidate, exact = found
    record = candidate.record
    assert record is not None
    which = f"candidate {candidate.id} (round {candidate.round}, {candidate.role}) of run {entry.run}: " + (
        "the last evaluation of this text" if exact else "the newest evaluation of the latest run; this text differs"
    )
    out = []
    failed = [w for w in entry.workloads(candidate.id) if w.status != EvaluationStatus.PASSED]
    for w in failed:
        message = f"workload {w.name}: {w.status.value}" + (f": {w.reason}" if w.reason else "") + f" [{which}]"
        out.append(_diagnostic(at, message, "evaluation", lsp.DiagnosticSeverity.Warning, code=w.status.value))
    if record.status != EvaluationStatus.PASSED and not failed:
        message = f"evaluation {record.status.value}" + (" (vetoed)" if record.vetoed else "") + f" [{which}]"
        out.append(_diagnostic(at, message, "evaluation", lsp.DiagnosticSeverity.Warning, code=record.status.value))
    for violation in record.violations:
        message = f"constraint violated: {violation} [{which}]"
        out.append(_diagnostic(at, message, "evaluation", lsp.DiagnosticSeverity.Warning, code="constraint"))
    return out


def note_diagnostics(entries: list[Entry], name: str, lines: list[str]) -> list[lsp.Diagnostic]:
    """A note per ``NAME:LINE`` (1-based) in an entry's title or body, on that line (the last one if the file is
    shorter now)."""
    pattern = re.compile(rf"(?<![\w.-]){re.escape(name)}:(\d+)")
    out = []
    for entry in entries:
        numbers = dict.fromkeys(int(m) for m in pattern.findall(f"{entry.title}\n{entry.body}"))
        for number in numbers:
            if number < 1:
                continue
            at = _line_range(lines, min(number, len(lines)) - 1)
            message = entry.line().removeprefix("- ")
            out.append(_diagnostic(at, message, "note", lsp.DiagnosticSeverity.Information, code=entry.kind.value))
    return out


def _notes(root: Path, kernel: str) -> list[Entry]:
    try:
        return KnowledgeStore(root, kernel).entries()
    except (OSError, ValueError) as exc:
        log.warning("cannot read the knowledge store of %s: %s", kernel, exc)
        return []


def _source(candidate: Candidate, name: str) -> str | None:
    for source in candidate.solution.get("sources", []):
        if isinstance(source, dict) and Path(str(source.get("path", ""))).name == name:
            content = source.get("content")
            return content if isinstance(content, str) else None
    return None


def _line_range(lines: list[str], number: int) -> lsp.Range:
    text = lines[number] if 0 <= number < len(lines) else ""
    return lsp.Range(lsp.Position(number, _indent(text)), lsp.Position(number, utf16_length(text)))


def _top() -> lsp.Range:
    """The start of the file: where what has no line of this file goes."""
    return lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))


def _diagnostic(
    at: lsp.Range, message: str, kind: str, severity: lsp.DiagnosticSeverity, code: str | None = None
) -> lsp.Diagnostic:
    data: dict[str, Any] = {"kind": kind}
    return lsp.Diagnostic(range=at, message=message, severity=severity, code=code, source=SOURCE, data=data)


FEATURE = Diagnostics()
