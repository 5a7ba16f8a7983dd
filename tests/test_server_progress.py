"""``$/progress`` over stdio for real detached runs: begun when the run appears, reported as it goes (round,
team, best, tokens of the budget), ended when it finishes; and cancelled from the client's progress UI
(``window/workDoneProgress/cancel``), which stops the run."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest
from lsp_support import evolved_repo, evoteam, lsp_session
from lsprotocol import types as lsp

pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed (a dev tool: pip install -e .[dev])")

from pytest_lsp import LanguageClient

from evoteam.server.features.progress import token_of
from evoteam.supervisor.journal import Journal
from evoteam.supervisor.state import RunState, fold
from evoteam.supervisor.team import initial_team

pytestmark = pytest.mark.integration

RUN_TIMEOUT = 240.0


@pytest.fixture
def evolved(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> tuple[Path, str]:
    return evolved_repo(tmp_path_factory.getbasetemp(), tmp_path / "repo")


async def start_run(repo: Path, rounds: int) -> str:
    """``evoteam evolve --detach`` (off the event loop, so the session keeps reading); the run's id."""
    args = ("evolve", "scale_add", "--rounds", str(rounds), "--llm", "offline", "--evaluations", "2", "--detach")
    done = await asyncio.to_thread(evoteam, repo, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


async def reports_until(client: LanguageClient, token: str, kind: str, timeout: float = RUN_TIMEOUT) -> list[object]:
    """The progress values of ``token`` once one of ``kind`` (begin, report, end) arrived."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        values = client.progress_reports.get(token, [])
        if any(getattr(v, "kind", None) == kind for v in values):
            return list(values)
        await asyncio.sleep(0.2)
    raise AssertionError(f"no {kind} for {token} in {timeout:.0f} s; got {client.progress_reports.get(token)}")


def journal_state(repo: Path, run: str) -> RunState:
    return fold(Journal(repo / ".evoteam" / "runs" / run / "journal.jsonl").events())


async def test_a_detached_run_begins_reports_and_ends_its_progress(evolved: tuple[Path, str]) -> None:
    repo, _ = evolved
    async with lsp_session(repo) as client:
        run = await start_run(repo, rounds=2)
        values = await reports_until(client, token_of(run), "end")
    state = journal_state(repo, run)
    assert state.finished == "rounds" and state.config is not None and state.best_speedup is not None
    begin, *reports, end = values
    assert isinstance(begin, lsp.WorkDoneProgressBegin) and begin.title == f"evoteam {run}" and begin.cancellable
    assert isinstance(end, lsp.WorkDoneProgressEnd) and end.message == f"rounds · best {state.best_speedup:.2f}x"
    assert reports and all(isinstance(r, lsp.WorkDoneProgressReport) for r in reports)
    messages = [r.message or "" for r in reports if isinstance(r, lsp.WorkDoneProgressReport)]
    shape = re.compile(
        rf"^(starting|round [12]/2) · (.+) · (no best yet|best \d+\.\d\dx) · [\d,]+/{state.config.budget:,} tokens$"
    )
    matched = [shape.match(m) for m in messages]
    assert all(matched), messages
    # the first report is the run's first team (the mode's initial one), before any reorganization
    assert next(m.group(2) for m in matched if m) == ", ".join(initial_team(state.config.mode).roles)
    rounds = [int(m.group(1).split()[1][0]) if m.group(1) != "starting" else 0 for m in matched if m]
    assert rounds == sorted(rounds)  # reported as it went, never back
    percentages = [r.percentage for r in reports if isinstance(r, lsp.WorkDoneProgressReport)]
    assert percentages == sorted(percentages)  # never goes back


async def test_cancelling_the_progress_cancels_the_run(evolved: tuple[Path, str]) -> None:
    repo, _ = evolved
    async with lsp_session(repo) as client:
        run = await start_run(repo, rounds=3)
        token = token_of(run)
        await reports_until(client, token, "begin", timeout=60)
        client.protocol.notify(lsp.WINDOW_WORK_DONE_PROGRESS_CANCEL, lsp.WorkDoneProgressCancelParams(token=token))
        values = await reports_until(client, token, "end")
    end = values[-1]
    assert isinstance(end, lsp.WorkDoneProgressEnd) and end.message is not None
    assert end.message.startswith("cancelled · ")
    assert journal_state(repo, run).finished == "cancelled"
    assert (repo / ".evoteam" / "runs" / run / "cancel").is_file()
