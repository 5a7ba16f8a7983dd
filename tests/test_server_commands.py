"""The ``evoteam.*`` commands over stdio: start a run and see it finish, cancel one, list runs and rounds, a
candidate's diff, accept a winner through the client's ``workspace/applyEdit``, and error answers for bad
arguments."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from lsp_support import _plain, evolved_repo, lsp_session, raw_request, sample_repo
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException

pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed (a dev tool: pip install -e .[dev])")

from pytest_lsp import LanguageClient

from conftest import SCALE_ADD_TOML, git

pytestmark = pytest.mark.integration


def _large_block(repo: Path) -> None:
    kernel = repo / "kernel.cpp"
    kernel.write_text(kernel.read_text().replace("#define BLOCK 256", "#define BLOCK 8192"))
    git(repo, "commit", "-q", "-am", "a large BLOCK")


def tuned_repo(cache: Path, dest: Path) -> tuple[Path, str]:
    """A copy of the sample repository whose slow kernel (64 passes) starts with BLOCK 8192, after one real
    offline round of 4 evaluations per agent: a winner is significantly faster only with PASSES 1. Made once
    per session."""
    return evolved_repo(cache, dest, name="tuned", prepare=_large_block, evaluations=4)


@pytest.fixture
def tuned(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> tuple[Path, str]:
    return tuned_repo(tmp_path_factory.getbasetemp(), tmp_path / "repo")


async def command(client: LanguageClient, name: str, *arguments: Any) -> Any:
    answer = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command=name, arguments=list(arguments))
    )
    return _plain(answer)


async def wait_finished(client: LanguageClient, run: str, timeout: float = 240) -> dict[str, Any]:
    """The run's summary once it has finished: woken by ``evoteam/runUpdated``, checked with ``evoteam.runs``."""

    async def finished() -> dict[str, Any]:
        while True:
            [summary] = [s for s in await command(client, "evoteam.runs") if s["run"] == run]
            if summary["finished"] is not None:
                return summary
            with contextlib.suppress(TimeoutError):  # one that came between the check and the wait: check again
                await asyncio.wait_for(client.wait_for_notification("evoteam/runUpdated"), timeout=5)

    return await asyncio.wait_for(finished(), timeout)


def apply_edits(text: str, edits: list[lsp.TextEdit]) -> str:
    """``text`` with LSP text edits applied (ASCII text: characters are UTF-16 units)."""
    lines = text.split("\n")

    def offset(position: lsp.Position) -> int:
        return sum(len(line) + 1 for line in lines[: position.line]) + position.character

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        start, end = offset(edit.range.start), offset(edit.range.end)
        text = text[:start] + edit.new_text + text[end:]
    return text


async def test_evolve_starts_a_detached_run_that_finishes(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    settings = {"llm": "offline", "evaluations": 2, "rounds": 2}
    async with lsp_session(repo, settings=settings) as client:
        started = await command(client, "evoteam.evolve", (repo / "kernel.cpp").as_uri(), {"rounds": 1})
        run = started["run"]
        assert run.startswith("scale_add-") and (repo / ".evoteam" / "runs" / run / "journal.jsonl").is_file()
        summary = await wait_finished(client, run)
        assert summary["finished"] == "rounds" and summary["rounds"] == 1 and summary["llm"] == "offline"
        assert summary["roundsFinished"] == 1 and summary["candidates"] >= 1
        again = await command(client, "evoteam.cancel", run)
    assert again == {"run": run, "cancelled": False, "finished": "rounds"}
    first = json.loads((repo / ".evoteam" / "runs" / run / "journal.jsonl").read_text().splitlines()[1])
    config = first["data"]["config"]  # the options given, the rest from the settings
    assert (config["rounds"], config["evaluations_per_agent"], config["llm"]) == (1, 2, "offline")


async def test_cancel_stops_a_live_run(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    async with lsp_session(repo, settings={"llm": "offline", "evaluations": 2}) as client:
        run = (
            await command(client, "evoteam.evolve", {"uri": (repo / "kernel.cpp").as_uri(), "options": {"rounds": 20}})
        )["run"]
        cancel = await command(client, "evoteam.cancel", {"run": run})
        assert cancel == {"run": run, "cancelled": True, "finished": None}
        assert (repo / ".evoteam" / "runs" / run / "cancel").is_file()
        summary = await wait_finished(client, run)
    assert summary["finished"] == "cancelled" and summary["roundsFinished"] < 20


async def test_runs_rounds_and_the_candidate_diff(tuned: tuple[Path, str]) -> None:
    repo, run = tuned
    async with lsp_session(repo) as client:
        [summary] = await command(client, "evoteam.runs")
        rounds = await command(client, "evoteam.rounds", run)
        best = summary["best"]
        diff = await command(client, "evoteam.candidateDiff", run, best)
    assert summary["run"] == run and summary["finished"] == "rounds" and summary["bestSpeedup"] > 0
    [first] = rounds["rounds"]
    assert first["round"] == 1 and first["branch"] == f"evoteam/{run}/round-01" and first["finished"]
    shas = git(repo, "log", "--format=%H", f"evoteam/{run}/base..evoteam/{run}/round-01").split()
    assert sorted(c["sha"] for c in first["candidates"]) == sorted(shas)
    [winner] = [c for c in first["candidates"] if c["best"]]
    assert winner["id"] == best and winner["status"] == "PASSED" and winner["speedup"] == summary["bestSpeedup"]
    assert (
        winner["role"] in first["roles"]
        and rounds["base"]["sha"] == git(repo, "rev-parse", f"evoteam/{run}/base").strip()
    )
    assert rounds["best"]["sha"] == winner["sha"] == git(repo, "rev-parse", f"evoteam/{run}/best").strip()
    assert diff["paths"] == ["kernel.cpp"] and diff["sha"] == winner["sha"] and Path(diff["root"]) == repo
    assert diff["diff"] == git(repo, "diff", "--no-color", rounds["base"]["sha"], winner["sha"], "--", "kernel.cpp")
    changed = [line for line in diff["diff"].splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert "-#define PASSES 64" in changed and "+#define PASSES 1" in changed  # what made it faster
    assert all(line[1:].startswith(("#define BLOCK ", "#define PASSES ")) for line in changed)  # the knobs alone


async def test_accept_applies_the_winner_through_the_client(tuned: tuple[Path, str]) -> None:
    repo, run = tuned
    received: list[lsp.ApplyWorkspaceEditParams] = []
    async with lsp_session(repo) as client:

        @client.feature(lsp.WORKSPACE_APPLY_EDIT)
        def apply(params: lsp.ApplyWorkspaceEditParams) -> lsp.ApplyWorkspaceEditResult:
            received.append(params)
            return lsp.ApplyWorkspaceEditResult(applied=True)

        answer = await command(client, "evoteam.accept", run)
    [params] = received
    assert answer["applied"] is True and answer["files"] == ["kernel.cpp"] and answer["speedup"] > 0
    assert params.edit.changes is not None
    [(uri, edits)] = params.edit.changes.items()
    assert uri == (repo / "kernel.cpp").as_uri()
    winner = git(repo, "show", f"{answer['sha']}:kernel.cpp")
    assert apply_edits((repo / "kernel.cpp").read_text(), list(edits)) == winner
    assert "#define PASSES 1\n" in winner and answer["sha"] == git(repo, "rev-parse", f"evoteam/{run}/best").strip()


async def test_accept_refuses_a_run_without_a_passing_candidate(tuned: tuple[Path, str]) -> None:
    repo, run = tuned
    runs = repo / ".evoteam" / "runs"
    bare = run.replace(run.rsplit("-", 1)[1], "0bad")
    (runs / bare).mkdir()
    lines = (runs / run / "journal.jsonl").read_text().splitlines(keepends=True)
    (runs / bare / "journal.jsonl").write_text("".join(lines[:3]))  # version, started, base: nothing evaluated
    async with lsp_session(repo) as client:
        with pytest.raises(JsonRpcException) as raised:
            await command(client, "evoteam.accept", bare)
    assert raised.value.code == lsp.LSPErrorCodes.RequestFailed and "no passing candidate" in str(raised.value)


async def test_report_writes_the_runs_page_with_its_plots(tuned: tuple[Path, str]) -> None:
    repo, run = tuned
    async with lsp_session(repo) as client:
        answer = await command(client, "evoteam.report", run)
    page = Path(answer["page"])
    assert answer["run"] == run and answer["uri"] == page.as_uri()
    assert page == repo / ".evoteam" / "runs" / run / "report" / "report.html"
    assert run in page.read_text() and sorted(p.name for p in page.parent.glob("*.png")) == [
        "speedup.png",
        "timeline.png",
        "tokens.png",
        "workloads.png",
    ]


BAD_ARGUMENTS: list[tuple[str, list[Any], str]] = [
    ("evoteam.evolve", ["README"], "is not a kernel task"),
    ("evoteam.evolve", ["KERNEL", {"rounds": 0}], "options.rounds"),
    ("evoteam.evolve", ["KERNEL", {"colour": "red"}], "options.colour"),
    ("evoteam.evolve", [], "uri: Field required"),
    ("evoteam.cancel", [], "run: Field required"),
    ("evoteam.cancel", ["no-such-run"], "no run 'no-such-run'"),
    ("evoteam.rounds", ["../etc"], "run: String should match pattern"),
    ("evoteam.candidateDiff", ["RUN", "nope"], "has no candidate 'nope'"),
    ("evoteam.candidateDiff", ["RUN"], "candidate: Field required"),
    ("evoteam.accept", ["RUN", "a", "b"], "takes at most 2 arguments"),
    ("evoteam.accept", [{"run": "RUN", "extra": 1}], "extra: Extra inputs are not permitted"),
    ("evoteam.runs", ["x"], "takes no arguments"),
    ("evoteam.report", [], "run: Field required"),
    ("evoteam.report", ["no-such-run"], "no run 'no-such-run'"),
]


async def test_bad_arguments_get_an_error_answer(tuned: tuple[Path, str]) -> None:
    repo, run = tuned
    (repo / "README").write_text("not a kernel\n")
    names = {"README": (repo / "README").as_uri(), "KERNEL": (repo / "kernel.cpp").as_uri(), "RUN": run}

    def fill(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return names.get(value, value) if isinstance(value, str) else value

    async with lsp_session(repo) as client:
        for number, (name, arguments, expected) in enumerate(BAD_ARGUMENTS):
            with pytest.raises(JsonRpcException) as raised:
                await command(client, name, *[fill(a) for a in arguments])
            assert raised.value.code == -32602 and expected in str(raised.value), (name, arguments)
            with pytest.raises(JsonRpcException) as malformed:  # arguments that are not a list at all
                await raw_request(
                    client, 900 + number, lsp.WORKSPACE_EXECUTE_COMMAND, {"command": name, "arguments": 5}
                )
            assert malformed.value.code == -32602
        assert [s["run"] for s in await command(client, "evoteam.runs")] == [run]  # still serving
    assert not (repo / ".evoteam" / "runs" / run / "cancel").exists()


FLAT = """#include <cstdint>
extern "C" int scale_add(const float* x, const float* y, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  return 0;
}
"""


async def test_evolve_refuses_offline_a_kernel_with_nothing_to_tune_and_says_why(tmp_path: Path) -> None:
    """Before the run starts, not found in the journal after it: the editor gets the CLI's reason."""
    repo = sample_repo(
        tmp_path / "repo", toml=SCALE_ADD_TOML.replace("knobs = { PASSES = [1, 64], BLOCK = [256] }\n", "")
    )
    (repo / "kernel.cpp").write_text(FLAT)
    async with lsp_session(repo, settings={"llm": "offline"}) as client:
        with pytest.raises(JsonRpcException) as raised:
            await command(client, "evoteam.evolve", (repo / "kernel.cpp").as_uri())
    assert raised.value.code == lsp.LSPErrorCodes.RequestFailed
    assert "the offline team has nothing to tune in kernel.cpp" in str(raised.value)
    assert not (repo / ".evoteam" / "runs").exists() or not any((repo / ".evoteam" / "runs").iterdir())
