"""Inlay hints and code lenses on the kernel entry point over stdio: the best result (its lens accepts it), the
open file's own result, a live run's status (its lens cancels it, and the client is asked to refresh when it
appears), and "Evolve this kernel" on a kernel without runs."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from lsp_support import evolved_repo, later_run, lsp_session, sample_repo
from lsprotocol import types as lsp

pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed (a dev tool: pip install -e .[dev])")

from pytest_lsp import LanguageClient

from evoteam.gpu_bench.schema.trace import EvaluationStatus
from evoteam.server.convert import entry_line, result_label
from evoteam.supervisor.events import Evaluated, Submitted
from evoteam.supervisor.journal import Journal
from evoteam.supervisor.records import CandidateRecord
from evoteam.supervisor.state import Candidate, RunState, fold

pytestmark = pytest.mark.integration


@pytest.fixture
def evolved(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> tuple[Path, str]:
    return evolved_repo(tmp_path_factory.getbasetemp(), tmp_path / "repo")


def journal_state(repo: Path, run: str) -> RunState:
    return fold(Journal(repo / ".evoteam" / "runs" / run / "journal.jsonl").events())


def best_of(state: RunState) -> Candidate:
    assert state.best is not None
    return state.candidates[state.best]


def source_of(candidate: Candidate) -> str:
    [source] = [s["content"] for s in candidate.solution["sources"] if s["path"] == "kernel.cpp"]
    return str(source)


def open_file(client: LanguageClient, path: Path, text: str, version: int = 1) -> str:
    uri = path.as_uri()
    item = lsp.TextDocumentItem(uri=uri, language_id="cpp", version=version, text=text)
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=item))
    return uri


async def hint_labels(client: LanguageClient, uri: str, lines: int = 100) -> list[tuple[int, str]]:
    found = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(lsp.Position(0, 0), lsp.Position(lines, 0)),
        )
    )
    return [(h.position.line, str(h.label)) for h in found or []]


async def lens_commands(client: LanguageClient, uri: str) -> list[tuple[int, lsp.Command]]:
    found = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )
    out = []
    for lens in found or []:
        assert lens.command is not None
        out.append((lens.range.start.line, lens.command))
    return out


async def test_the_best_result_is_shown_on_the_entry_point_and_its_lens_accepts_it(evolved: tuple[Path, str]) -> None:
    repo, run = evolved
    text = (repo / "kernel.cpp").read_text()
    line = entry_line(text, "scale_add")
    state = journal_state(repo, run)
    best = best_of(state)
    assert best.record is not None
    # the offline tuner may have submitted the file as it is: then that candidate is "this file"
    mine = [c for c in state.candidates.values() if c.record is not None and source_of(c) == text]
    expected = [f"best: {result_label(best.record)}"]
    if mine and mine[0].record is not None:
        expected.append(
            f"{'this file (the best)' if mine[0].id == best.id else 'this file'}: {result_label(mine[0].record)}"
        )
    async with lsp_session(repo) as client:
        uri = open_file(client, repo / "kernel.cpp", text)
        hints = await hint_labels(client, uri)
        lenses = await lens_commands(client, uri)
        outside = await hint_labels(client, uri, lines=line - 1) if line > 0 else []
    assert hints == [(line, label) for label in expected]
    assert outside == []  # a range that does not hold the entry point has none
    (at, accept), *rest = lenses
    assert at == line and accept.title == f"best: {result_label(best.record)}"
    assert accept.command == "evoteam.accept" and list(accept.arguments or []) == [run, best.id]
    assert [(n, c.title, c.command) for n, c in rest] == [(line, label, "") for label in expected[1:]]


def add_candidate(repo: Path, run: str, text: str, speedup: float) -> CandidateRecord:
    """Journals one more evaluated candidate of round 1 whose entry source is ``text``."""
    journal = Journal(repo / ".evoteam" / "runs" / run / "journal.jsonl")
    best = best_of(fold(journal.events()))
    solution = {**best.solution, "sources": [{"path": "kernel.cpp", "content": text}]}
    record = CandidateRecord(
        id="r01-tester-9-0123456789",
        round=1,
        role="Tester",
        status=EvaluationStatus.PASSED,
        geomean_speedup=speedup,
        faster=1,
        total=3,
    )
    journal.append(
        Submitted(id=record.id, round=1, role="Tester", agent="tester-9", rationale="a test", solution=solution)
    )
    journal.append(Evaluated(record=record))
    return record


async def test_the_open_files_own_result_follows_its_text(evolved: tuple[Path, str]) -> None:
    repo, run = evolved
    best = best_of(journal_state(repo, run))
    assert best.record is not None
    mine = (repo / "kernel.cpp").read_text() + "// the Tester's version\n"
    record = add_candidate(repo, run, mine, 1.25)
    async with lsp_session(repo) as client:
        uri = open_file(client, repo / "kernel.cpp", mine)
        as_mine = [label for _, label in await hint_labels(client, uri)]
        lenses = [c.title for _, c in await lens_commands(client, uri)]
        change = lsp.TextDocumentContentChangeWholeDocument(text=source_of(best))
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2), content_changes=[change]
            )
        )
        as_best = [label for _, label in await hint_labels(client, uri)]
        change = lsp.TextDocumentContentChangeWholeDocument(text=mine + "// edited\n")
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=3), content_changes=[change]
            )
        )
        edited = [label for _, label in await hint_labels(client, uri)]
    assert as_mine == [f"best: {result_label(best.record)}", f"this file: {result_label(record)}"]
    assert f"this file: {result_label(record)}" in lenses
    assert as_best == [f"best: {result_label(best.record)}", f"this file (the best): {result_label(best.record)}"]
    assert edited == [f"best: {result_label(best.record)}"]


async def test_a_live_run_shows_its_status_cancels_from_its_lens_and_asks_for_a_refresh(
    evolved: tuple[Path, str], tmp_path: Path
) -> None:
    repo, run = evolved
    runs = repo / ".evoteam" / "runs"
    live = later_run(run, "1ive")
    # the run as it was before it finished, its process holding the kernel's lock (this test's process)
    lines = (runs / run / "journal.jsonl").read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "round_finished")
    (tmp_path / live).mkdir()
    (tmp_path / live / "journal.jsonl").write_text("".join(lines[:cut]))
    locks = repo / ".evoteam" / "locks"
    locks.mkdir(exist_ok=True)
    (locks / "scale_add.lock").write_text(json.dumps({"run": live, "pid": os.getpid()}))
    state = fold(Journal(tmp_path / live / "journal.jsonl").events())
    assert state.config is not None and state.team is not None
    expected = (
        f"running: round 1/{state.config.rounds} · {', '.join(state.team.roles)} · "
        f"{state.spent:,}/{state.config.budget:,} tokens"
    )
    seen: list[str] = []
    refreshed = asyncio.Event()
    async with lsp_session(repo) as client:

        @client.feature("evoteam/runUpdated")
        def updated(ls: LanguageClient, params: Any) -> None:
            seen.append(params.run)

        @client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)
        def refresh(ls: LanguageClient, params: None) -> None:
            if live in seen:  # asked after the server learnt of the live run
                refreshed.set()

        uri = open_file(client, repo / "kernel.cpp", (repo / "kernel.cpp").read_text())
        before = [c for _, c in await lens_commands(client, uri) if c.command]
        shutil.move(tmp_path / live, runs / live)  # as a run started from the CLI would appear
        await asyncio.wait_for(refreshed.wait(), timeout=10)
        after = [c for _, c in await lens_commands(client, uri) if c.command]
        hints = [label for _, label in await hint_labels(client, uri)]
    assert [c.command for c in before] == ["evoteam.accept"]
    assert [c.command for c in after] == ["evoteam.accept", "evoteam.cancel"]
    assert after[1].title == expected and list(after[1].arguments or []) == [live]
    assert hints[-1] == expected


async def test_finished_runs_without_a_best_say_there_is_no_improvement(evolved: tuple[Path, str]) -> None:
    """The run's best taken out of its journal (as if no candidate were significantly faster than the start):
    the entry point says so, and offers to evolve again."""
    repo, run = evolved
    path = repo / ".evoteam" / "runs" / run / "journal.jsonl"
    kept = []
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "best":
            continue
        if event["kind"] == "run_finished":
            event["data"]["best"] = None
        kept.append(json.dumps(event))
    path.write_text("\n".join(kept) + "\n")
    assert journal_state(repo, run).best is None and journal_state(repo, run).finished is not None
    kernel = repo / "kernel.cpp"
    async with lsp_session(repo) as client:
        uri = open_file(client, kernel, kernel.read_text())
        titles = [command.title for _, command in await lens_commands(client, uri)]
        hints = [label for _, label in await hint_labels(client, uri)]
    said = "no improvement over the start (1 finished run)"
    assert said in titles and "Evolve this kernel" in titles and said in hints
    assert not any(title.startswith("best:") for title in titles)


async def test_a_kernel_without_runs_offers_evolve_and_other_files_get_nothing(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    (repo / "notes.cpp").write_text('extern "C" int scale_add(int x) { return x; }\n')
    async with lsp_session(repo) as client:
        uri = open_file(client, repo / "kernel.cpp", (repo / "kernel.cpp").read_text())
        lenses = await lens_commands(client, uri)
        hints = await hint_labels(client, uri)
        other = open_file(client, repo / "notes.cpp", (repo / "notes.cpp").read_text())
        other_lenses = await lens_commands(client, other)
        other_hints = await hint_labels(client, other)
    [(line, evolve)] = lenses
    assert line == entry_line((repo / "kernel.cpp").read_text(), "scale_add")
    assert (
        evolve.title == "Evolve this kernel"
        and evolve.command == "evoteam.evolve"
        and list(evolve.arguments or []) == [uri]
    )
    assert hints == [] and other_lenses == [] and other_hints == []
