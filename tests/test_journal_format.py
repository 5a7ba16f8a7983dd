"""The journal's format: every event kind round-trips through its line, the version line is written once and
checked on every read (an old, newer or foreign journal is a one-line ``JournalError``, never folded nor cut),
a torn version line is repaired, and the state folded event by event is the state of a replay."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from evoteam.gpu_bench.api import EvaluationStatus
from evoteam.roles.agent import AgentEvent
from evoteam.roles.llm import Usage
from evoteam.server.run_index import RunIndex
from evoteam.supervisor.config import RunConfig
from evoteam.supervisor.decision import AddRole, MoveBudget, SupervisorDecision
from evoteam.supervisor.events import (
    KINDS,
    AgentFinished,
    AgentStep,
    BaseCommitted,
    BestMoved,
    Committed,
    DecisionMade,
    Evaluated,
    Event,
    RoundFinished,
    RoundStarted,
    RunFinished,
    RunStarted,
    StartEvaluated,
    Submitted,
    TeamChanged,
    TokensSpent,
    parse_event,
    payload,
)
from evoteam.supervisor.journal import FORMAT_VERSION, HEADER, Entry, Journal, JournalError, MemoryFile, decode, encode
from evoteam.supervisor.records import CandidateRecord, RoundRecord, WorkloadOutcome
from evoteam.supervisor.state import apply, fold
from evoteam.supervisor.team import Team

pytestmark = pytest.mark.unit

CONFIG = RunConfig(run="k-1", kernel="k", config="evoteam.toml", rounds=2, budget=1000, llm="offline")
TEAM = Team(roles=["Optimizer", "Reviewer"])
OLD_LINE = b'{"data":{"config":{"run":"k-1"}},"kind":"run_started","seq":0}'
"""The first line of a journal of format version 1 (no version line)."""


def record(cid: str, speedup: float | None) -> CandidateRecord:
    status = EvaluationStatus.PASSED if speedup is not None else EvaluationStatus.COMPILE_ERROR
    outcome = WorkloadOutcome(uuid="w", status=status, speedup=speedup, latency_ms=1.0, reference_latency_ms=1.5)
    return CandidateRecord(
        id=cid, round=1, role="Optimizer", status=status, geomean_speedup=speedup, workloads=[outcome]
    )


def one_round() -> list[Event]:
    """A run of one round, every kind of event in it."""
    passed, failed = record("r01-optimizer-0-a", 1.5), record("r01-optimizer-0-b", None)
    solution = {"name": "s", "sources": [{"path": "kernel.cpp", "content": "int x;"}]}
    decision = SupervisorDecision(
        round=1,
        rationale="keep going",
        actions=[AddRole(role="Debugger"), MoveBudget(source="Reviewer", to="Optimizer", fraction=0.5)],
    )
    step = AgentEvent(kind="tool", role="Optimizer", agent_id="optimizer-0", turn=1, tool="profile", result="ok")
    return [
        RunStarted(config=CONFIG),
        BaseCommitted(sha="0" * 40),
        StartEvaluated(solution=solution, record=record("r00-start", 1.0).model_copy(update={"round": 0})),
        RoundStarted(round=1, team=TEAM),
        AgentStep.of(1, step),
        TokensSpent(role="Optimizer", agent="optimizer-0", model="m", usage=Usage(input_tokens=10, output_tokens=5)),
        *(
            Submitted(id=r.id, round=1, role="Optimizer", agent="optimizer-0", rationale="why", solution=solution)
            for r in (passed, failed)
        ),
        AgentFinished(round=1, agent="optimizer-0", role="Optimizer", stop="end_turn", submissions=2),
        AgentFinished(round=1, agent="reviewer-1", role="Reviewer", stop="budget"),
        Evaluated(record=passed),
        Evaluated(record=failed),
        Committed(id=passed.id, sha="1" * 40),
        Committed(id=failed.id, sha="2" * 40),
        BestMoved(id=passed.id, sha="1" * 40, speedup=1.5),
        DecisionMade(decision=decision),
        TeamChanged(team=Team(roles=["Optimizer", "Reviewer", "Debugger"])),
        RoundFinished(record=RoundRecord(round=1, roles=TEAM.roles, candidates=[passed, failed], tokens=15)),
        RunFinished(reason="rounds", best=passed.id),
    ]


def test_every_kind_round_trips_through_its_journal_line() -> None:
    events = one_round()
    assert sorted({e.kind for e in events}) == sorted(KINDS)  # the run above has every kind
    for seq, event in enumerate(events):
        line = encode(Entry(seq=seq, event=event))
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert decode(json.loads(line), "here") == Entry(seq=seq, event=event)
        assert parse_event(event.kind, payload(event)) == event
    decision = next(e for e in events if isinstance(e, DecisionMade))
    assert b'"from":"Reviewer"' in encode(Entry(seq=0, event=decision))  # a decision keeps its JSON names


def test_a_line_that_is_no_event_of_this_format_names_its_place() -> None:
    journal = Journal(Path("j.jsonl"), MemoryFile(HEADER + b'\n{"data":{},"kind":"futuristic","seq":0}\n'))
    with pytest.raises(JournalError, match=r"^j.jsonl:2: not a journal event: .*futuristic"):
        journal.events()
    agent = b'{"data":{"kind":"tool","round":1},"kind":"agent_event","seq":0}\n'  # version 1's agent_event
    with pytest.raises(JournalError, match=r"^j.jsonl:2: not a journal event"):
        Journal(Path("j.jsonl"), MemoryFile(HEADER + b"\n" + agent)).events()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (OLD_LINE + b"\n", r"^journal j.jsonl has format version 1 \(no version line.*\); this evoteam reads 2$"),
        (b'{"format":"evoteam-journal","kind":"journal","version":7}\n', r"^journal j.jsonl has format version 7; "),
        (b'{"format":"evoteam-journal","kind":"journal","version":1}', r"has format version 1; this evoteam reads 2"),
        (b"name,speedup\nk,1.5\n", r"^j.jsonl is not an evoteam journal"),
        (b'{"seq": 0}\n', r"^j.jsonl is not an evoteam journal"),
        (b"hello", r"^j.jsonl is not an evoteam journal"),
    ],
)
def test_an_old_newer_or_foreign_journal_is_a_one_line_error_and_is_left_as_it_is(content: bytes, message: str) -> None:
    file = MemoryFile(content)
    with pytest.raises(JournalError, match=message) as caught:
        Journal(Path("j.jsonl"), file).events()
    assert "\n" not in str(caught.value)
    with pytest.raises(JournalError, match=message):
        Journal(Path("j.jsonl"), file).append(RunFinished(reason="rounds"))  # never appended to, never cut
    assert file.data == content and FORMAT_VERSION == 2


@pytest.mark.parametrize("torn", [b"", HEADER[:7], HEADER])
def test_a_new_or_torn_version_line_gets_a_whole_one_with_the_first_event(torn: bytes) -> None:
    file = MemoryFile(torn)
    journal = Journal(Path("j.jsonl"), file)
    assert journal.events() == []
    journal.append(RunStarted(config=CONFIG))
    journal.append(BaseCommitted(sha="0" * 40))
    assert file.data.split(b"\n")[0] == HEADER and file.data.count(HEADER) == 1
    assert [(e.seq, e.event.kind) for e in Journal(Path("j.jsonl"), MemoryFile(file.data)).entries()] == [
        (0, "run_started"),
        (1, "base"),
    ]


def test_the_file_is_read_once_for_a_read_and_the_appends_after_it() -> None:
    file = MemoryFile()
    journal = Journal(Path("j.jsonl"), file)
    for event in one_round():
        journal.append(event)
    assert file.reads == 1  # the first append numbers from the file; the rest count on
    again = Journal(Path("j.jsonl"), file)
    assert again.events() == one_round()
    again.append(RunFinished(reason="cancelled"))
    assert file.reads == 2 and again.entries()[-1].seq == len(one_round())


def test_the_state_folded_event_by_event_is_the_replays_and_earlier_copies_stay_as_they_were() -> None:
    events = one_round()
    state, copies = fold([]), []
    for event in events:
        copies.append(state.thawed())
        apply(state, event)
    assert state == fold(events)
    assert copies[7].candidates.keys() == {"r01-optimizer-0-a"} and copies[7].round_tokens == {1: 15}
    assert all(c.record is None for c in copies[10].candidates.values())  # evaluated later, not in the copy
    assert state.round_teams == {1: TEAM} and state.team == Team(roles=["Optimizer", "Reviewer", "Debugger"])
    assert state.refused(1) is False and state.profiled_rounds == {1}
    assert all(state.veto_of(c) is None for c in state.candidates.values())
    [finished] = state.rounds_finished
    assert all(r is state.candidates[r.id].record for r in finished.candidates)  # one object per record
    assert state.finished == "rounds" and state.best == "r01-optimizer-0-a" and state.spent == 15
    assert state.start is not None and state.start.id == "r00-start" and state.start_solution is not None


def test_an_event_that_does_not_fit_the_run_is_an_error_and_changes_nothing() -> None:
    state = fold(one_round()[:3])
    before = state.model_copy(deep=True)
    with pytest.raises(JournalError, match="does not fit the run: evaluated 'ghost'"):
        apply(state, Evaluated(record=record("ghost", 2.0)))
    assert state == before


def test_the_language_servers_index_leaves_an_unreadable_journal_out_and_logs_why_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runs = tmp_path / ".evoteam" / "runs"
    for name, content in [("old", OLD_LINE + b"\n"), ("foreign", b"a,b\n")]:
        (runs / name).mkdir(parents=True)
        (runs / name / "journal.jsonl").write_bytes(content)
    good = Journal(runs / "k-1" / "journal.jsonl")
    for event in one_round()[:3]:
        good.append(event)
    index = RunIndex(tmp_path)
    with caplog.at_level(logging.WARNING, logger="evoteam.server"):
        assert index.refresh() == ["k-1"]
        assert index.refresh() == []
    assert [e.run for e in index.runs()] == ["k-1"]
    assert index.problems["old"] == f"journal {runs / 'old' / 'journal.jsonl'} has format version 1 " + (
        "(no version line: an earlier evoteam wrote it); this evoteam reads 2"
    )
    assert index.problems["foreign"].endswith(
        "is not an evoteam journal (its first line is not a journal version line)"
    )
    warnings = sorted(r.getMessage().split(":")[0] for r in caplog.records)
    assert warnings == ["run foreign is left out", "run old is left out"]


def test_a_veto_withdraws_the_candidate_its_review_named_and_an_old_one_its_round() -> None:
    state = fold([e for e in one_round() if not isinstance(e, AgentFinished)])
    candidate, other = state.round_candidates(1)[:2]
    review = AgentFinished(round=1, agent="disciplinarian-1-b", role="Disciplinarian", stop="end_turn")
    apply(state, review.model_copy(update={"veto": "two ideas at once", "reviewed": other.id}))
    assert state.veto_of(other) == "two ideas at once" and state.veto_of(candidate) is None
    apply(state, review.model_copy(update={"agent": "disciplinarian-1", "veto": "old journal"}))
    assert state.veto_of(candidate) == "old journal"  # a veto naming no candidate: its whole round
