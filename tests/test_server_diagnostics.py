"""Diagnostics over stdio: compiler messages at their exact ranges (cleared when the file is clean), the failed
workloads of the file's last evaluation, role notes at ``FILE:LINE``, the supervisor's decision on the entry
point. (Kernel files that are no task: ``test_server_file_diagnostics.py``.)"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from lsp_support import evolved_repo, later_run, lsp_session, sample_repo, status
from lsprotocol import types as lsp

pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed (a dev tool: pip install -e .[dev])")

from pytest_lsp import LanguageClient

from evoteam.roles.knowledge import Kind, KnowledgeStore
from evoteam.server.convert import entry_line
from evoteam.supervisor.events import RunStarted, Submitted, parse_event
from evoteam.supervisor.journal import Journal
from evoteam.supervisor.state import fold

pytestmark = pytest.mark.integration

# line 7 (0-based 6) starts with a tab: gcc counts it as 8 columns, the editor as 1 character
BROKEN = """#include <cstdint>
// scale_add with a mistake on line 7
extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = 2.0f * x[i] + y[i];
  }
\tconst int64_t k = undefined_name + 1;
  return 0;
}
"""
CLEAN = BROKEN.replace("\tconst int64_t k = undefined_name + 1;\n", "")


@pytest.fixture
def evolved(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> tuple[Path, str]:
    return evolved_repo(tmp_path_factory.getbasetemp(), tmp_path / "repo")


def open_file(client: LanguageClient, path: Path, text: str | None = None) -> str:
    uri = path.as_uri()
    item = lsp.TextDocumentItem(uri=uri, language_id="cpp", version=1, text=path.read_text() if text is None else text)
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=item))
    return uri


def save_as(client: LanguageClient, uri: str, text: str, version: int) -> None:
    """The editor's text becomes ``text`` and is saved."""
    document = lsp.VersionedTextDocumentIdentifier(uri=uri, version=version)
    change = lsp.TextDocumentContentChangeWholeDocument(text=text)
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(text_document=document, content_changes=[change]))
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))


async def published(client: LanguageClient, uri: str, timeout: float = 60) -> list[lsp.Diagnostic]:
    """The diagnostics of the next publish for ``uri``."""
    async with asyncio.timeout(timeout):
        while True:
            params = await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
            if params.uri == uri:
                return list(params.diagnostics)


def of_kind(diagnostics: list[lsp.Diagnostic], kind: str) -> list[lsp.Diagnostic]:
    return [d for d in diagnostics if isinstance(d.data, dict) and d.data.get("kind") == kind]


async def test_a_compile_error_is_shown_at_its_exact_range_and_a_clean_save_clears_it(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    async with lsp_session(repo) as client:
        uri = open_file(client, repo / "kernel.cpp", BROKEN)
        found = await published(client, uri)
        errors = [d for d in found if d.severity == lsp.DiagnosticSeverity.Error]
        assert errors, found
        error = errors[0]
        line = BROKEN.splitlines()[6]
        start = line.index("undefined_name")
        assert error.range == lsp.Range(lsp.Position(6, start), lsp.Position(6, start + len("undefined_name")))
        assert "undefined_name" in error.message and error.source == "evoteam"
        assert error.data == {"kind": "compile", "tool": "gcc"}

        save_as(client, uri, CLEAN, version=2)  # no runs, no notes: nothing left to show
        assert await published(client, uri) == []

        save_as(client, uri, BROKEN, version=3)
        assert any(d.severity == lsp.DiagnosticSeverity.Error for d in await published(client, uri))
        client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri=uri)))
        assert await published(client, uri) == []


async def test_a_compile_check_that_crashes_is_a_diagnostic_and_the_server_goes_on(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    (repo / "scale_add.json").write_text("{ not json")  # the task loads; building its solution raises
    async with lsp_session(repo) as client:
        uri = open_file(client, repo / "kernel.cpp")
        [warning] = await published(client, uri)
        assert warning.severity == lsp.DiagnosticSeverity.Warning and warning.data == {"kind": "compile"}
        assert "compile check of scale_add failed" in warning.message and "TaskError" in warning.message
        assert any("compile check of scale_add failed" in m.message for m in client.log_messages)
        assert (await status(client))["root"] == str(repo.resolve())


def failing_run(repo: Path, run: str, new: str, texts: dict[str, str]) -> None:
    """A copy of ``run`` as ``new`` with one more evaluated candidate per text (in order), each failing the
    workload ``large-65536`` numerically and breaking a constraint. Written beside the runs, then moved in."""
    runs = repo / ".evoteam" / "runs"
    work = repo / ".evoteam" / f"tmp-{new}"
    journal = Journal(work / "journal.jsonl")
    for event in Journal(runs / run / "journal.jsonl").events():
        if isinstance(event, RunStarted):
            event = RunStarted(config=event.config.model_copy(update={"run": new}))
        journal.append(event)
    state = fold(journal.events())
    solution = next(iter(state.candidates.values())).solution
    for name, text in texts.items():
        candidate = f"r02-optimizer-{name}"
        sources = [{"path": "kernel.cpp", "content": text}]
        journal.append(
            Submitted(
                id=candidate,
                round=2,
                role="Optimizer",
                agent="optimizer-9",
                rationale=f"try {name}",
                solution={**solution, "name": candidate, "sources": sources},
            )
        )
        workloads = [
            {"uuid": "small-1000", "status": "PASSED", "speedup": 1.5},
            {"uuid": "large-65536", "status": "INCORRECT_NUMERICAL", "reason": f"max abs error 3.5 ({name})"},
        ]
        record = {
            "id": candidate,
            "round": 2,
            "role": "Optimizer",
            "status": "INCORRECT_NUMERICAL",
            "total": 2,
            "violations": [f"max_registers 64: uses 80 ({name})"],
            "workloads": workloads,
        }
        journal.append(parse_event("evaluated", {"record": record}))
    work.rename(runs / new)


async def test_failed_workloads_of_the_last_evaluation_appear_when_the_run_does(evolved: tuple[Path, str]) -> None:
    repo, run = evolved
    kernel = repo / "kernel.cpp"
    original = kernel.read_text()
    older, newer = original.replace("BLOCK 256", "BLOCK 32"), original.replace("BLOCK 256", "BLOCK 16")
    new = later_run(run, "beef")
    async with lsp_session(repo) as client:
        uri = open_file(client, kernel, older)
        assert of_kind(await published(client, uri), "evaluation") == []  # the evolved run's newest one passed
        failing_run(repo, run, new, {"older": older, "newer": newer})
        async with asyncio.timeout(60):  # re-published when the watcher sees the run
            while not of_kind(found := await published(client, uri), "evaluation"):
                pass
    line = entry_line(older, "scale_add")
    evaluation = of_kind(found, "evaluation")
    assert {d.range.start.line for d in evaluation} == {line}
    assert all(d.severity == lsp.DiagnosticSeverity.Warning and d.source == "evoteam" for d in evaluation)
    [workload] = [d for d in evaluation if d.code == "INCORRECT_NUMERICAL"]
    assert workload.message.startswith("workload large-65536: INCORRECT_NUMERICAL: max abs error 3.5 (older)")
    assert f"candidate r02-optimizer-older (round 2, Optimizer) of run {new}" in workload.message
    assert "the last evaluation of this text" in workload.message
    [violation] = [d for d in evaluation if d.code == "constraint"]
    assert "max_registers 64: uses 80 (older)" in violation.message


async def test_a_text_no_candidate_has_gets_the_newest_evaluation_of_the_latest_run(evolved: tuple[Path, str]) -> None:
    repo, run = evolved
    kernel = repo / "kernel.cpp"
    original = kernel.read_text()
    new = later_run(run, "beef")
    failing_run(repo, run, new, {"older": original.replace("256", "32"), "newer": original.replace("256", "16")})
    async with lsp_session(repo) as client:
        uri = open_file(client, kernel, original + "// edited\n")
        evaluation = of_kind(await published(client, uri), "evaluation")
    messages = [d.message for d in evaluation]
    assert len(messages) == 2, messages  # one failed workload, one violation: of "newer" only
    assert all("candidate r02-optimizer-newer" in m and "this text differs" in m for m in messages)
    assert any(m.startswith("workload large-65536: INCORRECT_NUMERICAL") and "(newer)" in m for m in messages)


async def test_role_notes_at_file_line_and_the_decision_are_shown(evolved: tuple[Path, str]) -> None:
    repo, run = evolved
    kernel = repo / "kernel.cpp"
    text = kernel.read_text()
    decision = fold(Journal(repo / ".evoteam" / "runs" / run / "journal.jsonl").events()).decisions[-1].note()
    async with lsp_session(repo) as client:
        uri = open_file(client, kernel)
        first = await published(client, uri)
        [shown] = of_kind(first, "decision")
        assert shown.message == f"{decision} [run {run}]" and shown.severity == lsp.DiagnosticSeverity.Information
        assert shown.range.start.line == entry_line(text, "scale_add") and shown.source == "evoteam"
        assert of_kind(first, "note") == []

        store = KnowledgeStore(repo, "scale_add")
        store.add(Kind.STRATEGY, "hoist the bound out of the loop", body="see kernel.cpp:8 and other.cpp:3", round=2)
        async with asyncio.timeout(60):  # the knowledge store changed on disk: re-published
            while not of_kind(found := await published(client, uri), "note"):
                pass
    [note] = of_kind(found, "note")
    assert note.range.start.line == 7 and note.range.end == lsp.Position(7, len(text.splitlines()[7]))
    assert note.severity == lsp.DiagnosticSeverity.Information and note.source == "evoteam"
    assert note.code == "strategy" and "hoist the bound out of the loop" in note.message
    assert of_kind(found, "decision") == [shown]


async def test_a_copied_kernel_file_outside_the_task_is_not_a_task(evolved: tuple[Path, str], tmp_path: Path) -> None:
    repo, _ = evolved
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copyfile(repo / "kernel.cpp", elsewhere / "kernel.cpp")  # same name, no evoteam.toml above it
    async with lsp_session(repo) as client:
        stray = open_file(client, elsewhere / "kernel.cpp")
        uri = open_file(client, repo / "kernel.cpp")
        assert of_kind(await published(client, uri), "decision")
        await status(client)
        assert stray not in client.diagnostics
