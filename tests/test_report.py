"""``evoteam report``: the plot data from hand-written journals, the files it writes (valid PNGs, an escaped HTML
page naming the winner, the decisions and the roles), live and no-pass runs, and a real offline run via the CLI."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest
from matplotlib.image import imread

from conftest import evoteam, git, scale_add_repo
from evoteam.gpu_bench.schema import EvaluationStatus, Workload
from evoteam.supervisor.config import RunConfig
from evoteam.supervisor.decision import AddRole, SupervisorDecision
from evoteam.supervisor.events import Evaluated, Event, parse_event
from evoteam.supervisor.records import CandidateRecord, RoundRecord, WorkloadOutcome
from evoteam.supervisor.report import write_report
from evoteam.supervisor.report_data import (
    Winner,
    report_data,
    sorted_workloads,
    speedup_series,
    timeline,
    tokens_by_role,
)
from evoteam.supervisor.report_plots import workloads_plot
from evoteam.supervisor.signals import Signal
from evoteam.supervisor.state import fold
from evoteam.supervisor.team import Team

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PLOTS = ("speedup.png", "workloads.png", "timeline.png", "tokens.png")


class Journal:
    """Hand-written journal events, in the order they are added."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, kind: str, **data: Any) -> None:
        self.events.append(parse_event(kind, data))

    def round(self, number: int, roles: list[str]) -> None:
        self.add("round_started", round=number, team=Team(roles=roles).model_dump(mode="json"))

    def tokens(self, role: str, agent: str, inp: int, out: int) -> None:
        self.add("tokens", role=role, agent=agent, model="m", usage={"input_tokens": inp, "output_tokens": out})

    def candidate(self, cid: str, number: int, role: str, agent: str, record: CandidateRecord | None) -> None:
        self.add("submitted", id=cid, round=number, role=role, agent=agent, rationale=f"why {cid}", solution={})
        if record is not None:
            self.add("evaluated", record=record.model_dump(mode="json"))
            self.add("committed", id=cid, sha=f"{cid}-sha".ljust(40, "0"))

    def finished(self, number: int, role: str, agent: str, submissions: int = 0, **extra: Any) -> None:
        self.add(
            "agent_finished", round=number, agent=agent, role=role, stop="end_turn", submissions=submissions, **extra
        )

    def close_round(self, number: int, roles: list[str], decision: SupervisorDecision) -> None:
        state = fold(self.events)
        records = [c.record for c in state.round_candidates(number) if c.record is not None]
        self.add("decision", decision=decision.model_dump(mode="json", by_alias=True))
        self.add(
            "round_finished", record=RoundRecord(round=number, roles=roles, candidates=records).model_dump(mode="json")
        )


def passed(cid: str, number: int, role: str, speedups: dict[str, float], geomean: float) -> CandidateRecord:
    workloads = [
        WorkloadOutcome(uuid=u, status=EvaluationStatus.PASSED, speedup=s, latency_ms=1.0 / s, reference_latency_ms=1.0)
        for u, s in speedups.items()
    ]
    return CandidateRecord(
        id=cid,
        round=number,
        role=role,
        status=EvaluationStatus.PASSED,
        geomean_speedup=geomean,
        faster=sum(s > 1 for s in speedups.values()),
        total=len(speedups),
        workloads=workloads,
    )


def failed(cid: str, number: int, role: str) -> CandidateRecord:
    return CandidateRecord(id=cid, round=number, role=role, status=EvaluationStatus.COMPILE_ERROR, total=2)


FIRST_RATIONALE = "no profile yet & the <Optimizer> stalls → add an Explorer"
SECOND_RATIONALE = "the Explorer's design won; team kept"


def two_rounds(*, finish: bool = True) -> Journal:
    """Round 1: the Profiling Scientist profiles, the Optimizer passes at 1.5x, the supervisor adds the Explorer;
    round 2: the Optimizer fails to compile, the Explorer passes at 2.5x, the Profiling Scientist does nothing."""
    j = Journal()
    config = RunConfig(run="run-x", kernel="scale_add", config="evoteam.toml", rounds=3, llm="anthropic")
    j.add("run_started", config=config.model_dump(mode="json"))
    j.add("base", sha="b" * 40)
    j.round(1, ["Profiling Scientist", "Optimizer"])
    profile = {"step": "tool", "turn": 1, "tool": "profile"}
    j.add("agent_event", round=1, role="Profiling Scientist", agent_id="profiling-scientist-0", **profile)
    j.finished(1, "Profiling Scientist", "profiling-scientist-0")
    j.tokens("Optimizer", "optimizer-1", 1000, 200)
    j.candidate("c1", 1, "Optimizer", "optimizer-1", passed("c1", 1, "Optimizer", {"w-a": 2.0, "w-b": 1.125}, 1.5))
    j.finished(1, "Optimizer", "optimizer-1", submissions=1)
    j.add("best", id="c1", sha="c1-sha".ljust(40, "0"), speedup=1.5)
    j.tokens("Supervisor", "supervisor", 250, 50)
    signal = Signal(name="missing_profile_evidence", summary="no <profile> in 2 rounds", candidates=["c1"])
    add = AddRole(role="Explorer")
    j.close_round(
        1,
        ["Profiling Scientist", "Optimizer"],
        SupervisorDecision(round=1, signals=[signal], actions=[add], rationale=FIRST_RATIONALE),
    )
    j.round(2, ["Profiling Scientist", "Optimizer", "Explorer"])
    j.finished(2, "Profiling Scientist", "profiling-scientist-0")
    j.tokens("Optimizer", "optimizer-1", 400, 100)
    j.candidate("c2", 2, "Optimizer", "optimizer-1", failed("c2", 2, "Optimizer"))
    j.finished(2, "Optimizer", "optimizer-1", submissions=1)
    if not finish:
        return j
    j.tokens("Explorer", "explorer-2", 600, 100)
    j.candidate("c3", 2, "Explorer", "explorer-2", passed("c3", 2, "Explorer", {"w-b": 1.25, "w-a": 5.0}, 2.5))
    j.finished(2, "Explorer", "explorer-2", submissions=1)
    j.add("best", id="c3", sha="c3-sha".ljust(40, "0"), speedup=2.5)
    j.close_round(
        2, ["Profiling Scientist", "Optimizer", "Explorer"], SupervisorDecision(round=2, rationale=SECOND_RATIONALE)
    )
    j.add("run_finished", reason="rounds", best="c3")
    return j


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 1000, path
    pixels = imread(path)
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100


# -- the plot data ------------------------------------------------------------------------------------------------
@pytest.mark.unit
def test_best_speedup_per_round_and_so_far() -> None:
    state = fold(two_rounds().events)
    points = [(p.round, p.round_best, p.best_so_far) for p in speedup_series(state)]
    assert points == [(1, 1.5, 1.5), (2, 2.5, 2.5)]


@pytest.mark.unit
def test_the_winner_has_its_workloads_sorted_and_failed_ones_last() -> None:
    _, data = report_data(two_rounds().events)
    assert data.winner is not None and data.winner.id == "c3" and data.winner.speedup == 2.5
    assert data.winner.role == "Explorer" and data.winner.sha is not None
    assert [(w.uuid, w.speedup) for w in data.winner.workloads] == [("w-a", 5.0), ("w-b", 1.25)]
    mixed = [
        WorkloadOutcome(uuid="slow", status=EvaluationStatus.PASSED, speedup=0.5),
        WorkloadOutcome(uuid="broken", status=EvaluationStatus.RUNTIME_ERROR, reason="segfault"),
        WorkloadOutcome(uuid="fast", status=EvaluationStatus.PASSED, speedup=3.0),
    ]
    assert [w.uuid for w in sorted_workloads(mixed)] == ["fast", "slow", "broken"]
    named = WorkloadOutcome(uuid="u", status=EvaluationStatus.PASSED, axes={"batch_size": 64, "seq_len": 128})
    assert named.name == "batch_size=64, seq_len=128" and mixed[0].name == "slow"  # no axes: the uuid
    timed = named.model_copy(update={"speedup": 1.234, "ci": (1.19, 1.27)})
    assert timed.speed() == "1.23x [1.19, 1.27]" and named.speed() == "–"


@pytest.mark.unit
def test_the_timeline_marks_who_played_and_notes_the_decisions() -> None:
    events = two_rounds().events
    line = timeline(events, fold(events))
    assert line.rounds == [1, 2]
    assert line.roles == ["Profiling Scientist", "Optimizer", "Explorer"]
    marks = {(m.round, m.role): m.kind for m in line.marks}
    assert marks == {
        (1, "Profiling Scientist"): "played",
        (1, "Optimizer"): "submitted",
        (2, "Profiling Scientist"): "idle",
        (2, "Optimizer"): "submitted",
        (2, "Explorer"): "submitted",
    }
    assert [(d.round, d.text) for d in line.decisions] == [
        (1, "missing_profile_evidence: add Explorer"),
        (2, "team kept"),
    ]


@pytest.mark.unit
def test_tokens_per_role_are_split_by_round() -> None:
    events = two_rounds().events
    rows = tokens_by_role(events, fold(events))
    assert [(t.role, t.total, t.by_round) for t in rows] == [
        ("Optimizer", 1700, {1: 1200, 2: 500}),
        ("Explorer", 700, {2: 700}),
        ("Supervisor", 300, {1: 300}),
    ]
    assert rows[0].input_tokens == 1400 and rows[0].output_tokens == 300 and rows[0].agents == 1


@pytest.mark.unit
def test_a_vetoed_round_does_not_count_and_the_timeline_shows_the_veto() -> None:
    j = two_rounds(finish=False)
    j.round(3, ["Optimizer", "Disciplinarian"])
    record = passed("c4", 3, "Optimizer", {"w-a": 9.0}, 9.0).model_copy(update={"vetoed": True})
    j.candidate("c4", 3, "Optimizer", "optimizer-0", record)
    j.finished(3, "Optimizer", "optimizer-0", submissions=1)
    j.finished(3, "Disciplinarian", "disciplinarian-1", veto="dropped wgmma")
    state = fold(j.events)
    assert [p.round_best for p in speedup_series(state)] == [1.5, None, None]
    marks = {(m.round, m.role): m.kind for m in timeline(j.events, state).marks}
    assert marks[(3, "Disciplinarian")] == "veto" and marks[(3, "Optimizer")] == "withdrawn"
    assert marks[(2, "Explorer")] == "pending"  # round 2 never reached the Explorer


# -- the files ----------------------------------------------------------------------------------------------------
@pytest.mark.unit
def test_the_report_has_valid_plots_and_a_page_naming_the_winner_decisions_and_roles(tmp_path: Path) -> None:
    page = write_report(two_rounds().events, tmp_path / "report")
    assert page == tmp_path / "report" / "report.html"
    for name in PLOTS:
        assert_png(tmp_path / "report" / name)
    text = page.read_text()
    assert "<h2>Winner: <code>c3</code></h2>" in text and "2.500x" in text
    for rationale in (FIRST_RATIONALE, SECOND_RATIONALE, "why c3"):
        assert html.escape(rationale) in text
    assert "<Optimizer>" not in text and "<profile>" not in text  # journal text is escaped
    for role in ("Profiling Scientist", "Optimizer", "Explorer", "Supervisor"):
        assert f"<td>{role}</td>" in text
    for name in PLOTS:
        assert f'src="{name}"' in text
    assert "w-a" in text and ">5.00x</td>" in text and "COMPILE_ERROR" in text
    assert "missing_profile_evidence" in text and "add Explorer" in text
    assert 'class="note"' not in text  # a finished run with a winner and tokens needs no notes


@pytest.mark.unit
def test_a_live_run_gets_a_report_that_says_so(tmp_path: Path) -> None:
    events = two_rounds(finish=False).events
    _, data = report_data(events)
    assert data.finished is None and data.rounds_finished == 1
    assert [(p.round, p.round_best, p.best_so_far) for p in data.series] == [(1, 1.5, 1.5), (2, None, 1.5)]
    assert data.winner is not None and data.winner.id == "c1"
    assert any("has not finished" in n for n in data.notes)
    page = write_report(events, tmp_path)
    text = page.read_text()
    assert "not finished" in text and "(in progress or stopped)" in text
    for name in PLOTS:
        assert_png(tmp_path / name)


@pytest.mark.unit
def test_a_run_with_no_round_and_one_with_no_pass_still_get_reports(tmp_path: Path) -> None:
    started = two_rounds().events[:2]  # run_started, base
    _, data = report_data(started)
    assert data.series == [] and data.winner is None and data.timeline.rounds == [] and data.tokens == []
    assert {"No round has finished yet.", "No candidate has passed every workload yet, so there is no winner."} <= set(
        data.notes
    )
    text = write_report(started, tmp_path / "empty").read_text()
    assert "No round has finished yet." in text and "No winner" in text
    for name in PLOTS:
        assert_png(tmp_path / "empty" / name)

    j = Journal()
    j.events = started[:]
    j.round(1, ["Optimizer"])
    j.candidate("c1", 1, "Optimizer", "optimizer-0", failed("c1", 1, "Optimizer"))
    j.finished(1, "Optimizer", "optimizer-0", submissions=1)
    j.close_round(1, ["Optimizer"], SupervisorDecision(round=1, rationale="compile errors: add a Debugger"))
    j.add("run_finished", reason="rounds", best=None)
    state, data = report_data(j.events)
    assert state.finished == "rounds" and data.winner is None
    assert [(p.round_best, p.best_so_far) for p in data.series] == [(None, None)]
    text = write_report(j.events, tmp_path / "no-pass").read_text()
    assert "No winner" in text and "compile errors: add a Debugger" in text and "COMPILE_ERROR" in text
    for name in PLOTS:
        assert_png(tmp_path / "no-pass" / name)


@pytest.mark.unit
def test_an_old_journal_without_workloads_and_a_winner_with_failed_workloads(tmp_path: Path) -> None:
    j = two_rounds()
    j.events = [  # evaluated without per-workload outcomes (as the supervisor recorded them at first)
        Evaluated(record=e.record.model_copy(update={"workloads": []})) if isinstance(e, Evaluated) else e
        for e in j.events
    ]
    _, data = report_data(j.events)
    assert data.winner is not None and data.winner.workloads == []
    assert "no per-workload results" in write_report(j.events, tmp_path / "old").read_text()
    outcomes = [
        WorkloadOutcome(uuid="fast", status=EvaluationStatus.PASSED, speedup=4.0),
        WorkloadOutcome(uuid="slow", status=EvaluationStatus.PASSED, speedup=0.25),
        WorkloadOutcome(uuid="broken", status=EvaluationStatus.TIMEOUT, reason="took too long"),
    ]
    mixed = Winner(
        id="w", round=1, role="Optimizer", agent="o", rationale="", sha=None, speedup=1.0, workloads=outcomes
    )
    assert_png(workloads_plot(mixed, tmp_path / "mixed.png"))


# -- through the command line, on a real offline run --------------------------------------------------------------
@pytest.fixture(scope="module")
def offline_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A repository with one finished 2-round offline run (its id)."""
    root = scale_add_repo(tmp_path_factory.mktemp("report") / "repo")
    done = evoteam(root, "evolve", "kernel.cpp", "--rounds", "2", "--llm", "offline", "--evaluations", "3")
    assert done.returncode == 0, done.stderr
    run = evoteam(root, "runs").stdout.split("\t")[0]
    return root, run


@pytest.mark.integration
def test_a_real_run_records_per_workload_outcomes(offline_run: tuple[Path, str], workloads: list[Workload]) -> None:
    root, run = offline_run
    uuids = {w.uuid for w in workloads}
    shown = json.loads(evoteam(root, "show", run, "--json").stdout)
    records = [c["record"] for c in shown["candidates"] if c["record"] is not None]
    assert records
    axes = {w.uuid: w.axes for w in workloads}
    for record in records:
        assert {w["uuid"] for w in record["workloads"]} == uuids
        assert all(w["axes"] == axes[w["uuid"]] for w in record["workloads"])  # the editor names them by axes
        for w in record["workloads"]:
            if w["status"] == "PASSED":
                assert w["speedup"] > 0 and w["latency_ms"] > 0 and w["reference_latency_ms"] > 0
                lo, hi = w["ci"]  # paired timing: the median per-pair ratio lies in its interval
                assert lo <= w["speedup"] <= hi and isinstance(w["flags"], list)
            else:
                assert w["speedup"] is None


@pytest.mark.integration
def test_evoteam_report_writes_the_report_of_a_real_run(offline_run: tuple[Path, str]) -> None:
    root, run = offline_run
    done = evoteam(root, "report", run)
    assert done.returncode == 0, done.stderr
    page = Path(done.stdout.strip())
    assert page == root / ".evoteam" / "runs" / run / "report" / "report.html"
    for name in PLOTS:
        assert_png(page.parent / name)
    shown = json.loads(evoteam(root, "show", run, "--json").stdout)
    text = page.read_text()
    assert shown["best"] and f"Winner: <code>{shown['best']}</code>" in text
    for decision in shown["decisions"]:
        assert html.escape(decision["rationale"]) in text
    for role in shown["rounds"][0]["roles"]:
        assert role in text
    assert "n=1000" in text  # the winner's per-workload table, its workloads named by their axes
    assert git(root, "status", "--porcelain") == ""  # the report lives under .evoteam/


@pytest.mark.integration
def test_report_out_folder_and_an_unknown_run(offline_run: tuple[Path, str], tmp_path: Path) -> None:
    root, run = offline_run
    done = evoteam(root, "report", run, "--out", str(tmp_path / "elsewhere"))
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == tmp_path / "elsewhere" / "report.html"
    assert_png(tmp_path / "elsewhere" / "timeline.png")
    unknown = evoteam(root, "report", "nope")
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert unknown.stderr.strip().splitlines() == ["evoteam: no run 'nope' here (`evoteam runs` lists them)"]
