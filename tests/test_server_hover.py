"""Hover on the kernel entry point over stdio: the best candidate's per-workload table and the latest supervisor
decision of the kernel's latest run, with its rationale and signals (live: a decision journaled while the
session is open shows on the next hover)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsp_support import evolved_repo, lsp_session, sample_repo
from lsprotocol import types as lsp

pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed (a dev tool: pip install -e .[dev])")

from pytest_lsp import LanguageClient

from evoteam.server.convert import entry_line, result_label
from evoteam.supervisor.decision import AddRole, SupervisorDecision
from evoteam.supervisor.events import DecisionMade
from evoteam.supervisor.journal import Journal
from evoteam.supervisor.signals import Signal
from evoteam.supervisor.state import fold

pytestmark = pytest.mark.integration


@pytest.fixture
def evolved(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> tuple[Path, str]:
    return evolved_repo(tmp_path_factory.getbasetemp(), tmp_path / "repo")


async def hover_at(client: LanguageClient, path: Path, line: int) -> lsp.Hover | None:
    uri = path.as_uri()
    return await client.text_document_hover_async(
        lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line, 3))
    )


def opened(client: LanguageClient, path: Path) -> None:
    item = lsp.TextDocumentItem(uri=path.as_uri(), language_id="cpp", version=1, text=path.read_text())
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=item))


def markdown(hover: lsp.Hover | None) -> str:
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    assert hover.contents.kind == lsp.MarkupKind.Markdown
    return hover.contents.value


async def test_the_entry_point_shows_the_best_candidates_workloads_and_the_last_decision(
    evolved: tuple[Path, str],
) -> None:
    repo, run = evolved
    kernel = repo / "kernel.cpp"
    line = entry_line(kernel.read_text(), "scale_add")
    state = fold(Journal(repo / ".evoteam" / "runs" / run / "journal.jsonl").events())
    assert state.best is not None and state.decisions
    best = state.candidates[state.best].record
    assert best is not None and best.workloads
    async with lsp_session(repo) as client:
        opened(client, kernel)
        on_entry = await hover_at(client, kernel, line)
        elsewhere = await hover_at(client, kernel, line + 1)
    text = markdown(on_entry)
    assert on_entry is not None and on_entry.range is not None and on_entry.range.start.line == line
    assert elsewhere is None
    assert result_label(best) in text and f"candidate `{best.id}`" in text and f"run `{run}`" in text
    rows = [r for r in text.splitlines() if r.startswith("| `")]
    assert len(rows) == len(best.workloads)
    for row, workload in zip(rows, best.workloads, strict=True):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert workload.axes and cells[0] == "`" + ", ".join(f"{k}={v}" for k, v in workload.axes.items()) + "`"
        assert cells[1] == workload.status.value and workload.speedup is not None and workload.ci is not None
        lo, hi = workload.ci
        assert cells[2].startswith(f"{workload.speedup:.2f}x [{lo:.2f}, {hi:.2f}]")
        assert workload.latency_ms is not None and workload.reference_latency_ms is not None
        assert float(cells[3]) == pytest.approx(workload.latency_ms, rel=1e-3)
        assert float(cells[4]) == pytest.approx(workload.reference_latency_ms, rel=1e-3)
    last = state.decisions[-1]
    assert f"**Supervisor after round {last.round}** ({last.source}, run `{run}`): {last.rationale}" in text


async def test_a_new_decision_shows_with_its_rationale_and_signals(evolved: tuple[Path, str]) -> None:
    repo, run = evolved
    kernel = repo / "kernel.cpp"
    line = entry_line(kernel.read_text(), "scale_add")
    decision = SupervisorDecision(
        round=1,
        rationale="two rounds without a new best: add a Disciplinarian",
        signals=[Signal(name="plateau", summary="no new best in 2 rounds", numbers={"rounds": 2})],
        actions=[AddRole(role="Disciplinarian")],
    )
    async with lsp_session(repo) as client:
        opened(client, kernel)
        before = markdown(await hover_at(client, kernel, line))
        Journal(repo / ".evoteam" / "runs" / run / "journal.jsonl").append(DecisionMade(decision=decision))
        await asyncio.wait_for(client.wait_for_notification("evoteam/runUpdated"), timeout=10)
        after = markdown(await hover_at(client, kernel, line))
    assert decision.rationale not in before
    assert f"**Supervisor after round 1** (rules, run `{run}`): {decision.rationale}" in after
    assert "Changes: add Disciplinarian" in after
    assert "- signal `plateau`: no new best in 2 rounds (rounds=2)" in after


async def test_a_kernel_without_runs_has_no_hover(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    kernel = repo / "kernel.cpp"
    async with lsp_session(repo) as client:
        opened(client, kernel)
        found = await hover_at(client, kernel, entry_line(kernel.read_text(), "scale_add"))
    assert found is None
