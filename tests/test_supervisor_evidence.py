"""What the supervisor is shown after a round (``supervisor/evidence.py``), folded from a run's events: items
with ids, candidates' diffs against their parents, agents' tools and tokens, and which roles added nothing."""

from __future__ import annotations

import pytest

from evoteam.gpu_bench.api import EvaluationStatus
from evoteam.roles.agent import AgentEvent
from evoteam.roles.builtin import builtin_roles
from evoteam.roles.knowledge import Entry, Kind
from evoteam.roles.llm import Usage
from evoteam.supervisor.config import RunConfig
from evoteam.supervisor.events import (
    AgentFinished,
    AgentStep,
    Evaluated,
    Event,
    RoundStarted,
    RunStarted,
    StartEvaluated,
    Submitted,
    TokensSpent,
)
from evoteam.supervisor.evidence import idle_roles, round_evidence
from evoteam.supervisor.records import CandidateRecord, RoundRecord, WorkloadOutcome
from evoteam.supervisor.signals import signals
from evoteam.supervisor.state import fold
from evoteam.supervisor.team import Team

pytestmark = pytest.mark.unit

TEAM = Team(roles=["Optimizer", "Explorer", "Profiling Scientist", "Reviewer"], protocol="parallel")
START = {"name": "start", "sources": [{"path": "k.cpp", "content": "#define N 1\nint f() { return N; }\n"}]}
FASTER = {"name": "opt", "sources": [{"path": "k.cpp", "content": "#define N 4\nint f() { return N; }\n"}]}
SAME = {"name": "explorer's", "sources": START["sources"]}


def record(cid: str, speedup: float) -> CandidateRecord:
    workloads = [WorkloadOutcome(uuid=f"w{i}", status=EvaluationStatus.PASSED, speedup=speedup) for i in range(20)]
    return CandidateRecord(
        id=cid,
        round=1,
        role="x",
        status=EvaluationStatus.PASSED,
        geomean_speedup=speedup,
        geomean_ci=(speedup * 0.97, speedup * 1.03),
        workloads=workloads,
    )


def events() -> list[Event]:
    def step(agent: str, role: str, tool: str) -> AgentStep:
        return AgentStep.of(1, AgentEvent(kind="tool", role=role, agent_id=agent, turn=1, tool=tool, result="ok"))

    def submitted(cid: str, role: str, agent: str, solution: dict[str, object]) -> Submitted:
        return Submitted(
            id=cid, round=1, role=role, agent=agent, rationale="why", solution=solution, parent="r00-start"
        )

    return [
        RunStarted(config=RunConfig(run="k-1", kernel="k", config="t", rounds=3, budget=1000, llm="offline")),
        StartEvaluated(solution=START, record=record("r00-start", 1.0).model_copy(update={"round": 0})),
        RoundStarted(round=1, team=TEAM),
        step("optimizer-0", "Optimizer", "evaluate"),
        step("optimizer-0", "Optimizer", "evaluate"),
        TokensSpent(role="Optimizer", agent="optimizer-0", usage=Usage(input_tokens=70, output_tokens=30)),
        submitted("r01-optimizer-0-a", "Optimizer", "optimizer-0", FASTER),
        step("explorer-1", "Explorer", "evaluate"),
        submitted("r01-explorer-1-b", "Explorer", "explorer-1", SAME),  # the start again: adds nothing
        step("profiling-scientist-2", "Profiling Scientist", "profile"),
        step("reviewer-3", "Reviewer", "view"),  # read-only: no evidence left behind
        step("reviewer-3", "Reviewer", "evaluate"),  # nor does an evaluation it kept to itself
        AgentFinished(round=1, agent="optimizer-0", role="Optimizer", stop="end_turn", submissions=1),
        AgentFinished(round=1, agent="explorer-1", role="Explorer", stop="end_turn", submissions=1),
        AgentFinished(round=1, agent="profiling-scientist-2", role="Profiling Scientist", stop="end_turn"),
        AgentFinished(round=1, agent="reviewer-3", role="Reviewer", stop="end_turn", summary="looked"),
        Evaluated(record=record("r01-optimizer-0-a", 3.0)),
        Evaluated(record=record("r01-explorer-1-b", 1.0)),
    ]


def test_a_role_that_only_resubmits_its_parent_or_only_reads_added_nothing() -> None:
    state = fold(events())
    assert idle_roles(state, 1) == ["Explorer", "Reviewer"]


def test_the_evidence_names_every_item_and_the_candidates_diffs() -> None:
    state = fold(events())
    record = RoundRecord(round=1, roles=TEAM.roles, protocol="parallel", candidates=[], tokens=100)
    found = signals([record])
    evidence = round_evidence(state, 1, record, found, [], builtin_roles(), budget_left=900)
    items = {i.id: i for i in evidence.items}
    assert {"budget", "best", "candidate:r01-optimizer-0-a", "candidate:r01-explorer-1-b"} <= items.keys()
    assert {
        f"agent:1/{a}" for a in ("optimizer-0", "explorer-1", "profiling-scientist-2", "reviewer-3")
    } <= items.keys()
    assert {f"role:{name}" for name in builtin_roles()} <= items.keys()
    assert items["budget"].facts == {"round": 1, "rounds_left": 2, "tokens_left": 900, "tokens_this_round": 100}
    assert state.config is not None  # with an evaluation budget, what is left and what each role used
    state.config = state.config.model_copy(update={"evaluation_budget": 10})
    metered = round_evidence(state, 1, record, found, [], builtin_roles(), budget_left=900).items[0].facts
    assert metered["evaluations_left"] == 6
    assert metered["evaluations_by_role"] == {"Optimizer": 2, "Explorer": 1, "Reviewer": 1}
    optimizer = items["candidate:r01-optimizer-0-a"].facts
    assert optimizer["diff"] == ["-#define N 1", "+#define N 4"] and optimizer["parent"] == "r00-start"
    assert (optimizer["lines_added"], optimizer["lines_removed"], optimizer["speedup_over_start"]) == (1, 1, 3.0)
    assert items["candidate:r01-explorer-1-b"].facts["diff"] == []
    agent = items["agent:1/optimizer-0"].facts
    assert agent["tools"] == {"evaluate": 2} and agent["tokens"] == 100 and agent["submissions"] == 1
    assert items["role:Explorer"].facts["in_team"] and not items["role:Debugger"].facts["in_team"]
    assert items["role:Debugger"].facts["budget_share"] == 0.7  # the role's own weight (the team overrides none)
    assert evidence.ids() == set(items)


def test_a_profile_reaches_the_supervisor_through_its_hardware_note() -> None:
    state = fold(events())
    record = RoundRecord(round=1, roles=TEAM.roles, protocol="parallel", candidates=[], tokens=100)
    profile = "per workload: M=34 18.1 ms, 2.4 GFLOP/s; registers 32, no spills"
    notes = [
        Entry(id="h-1", kind=Kind.HARDWARE, title="profile of round 1", body=profile, role="Profiling Scientist",
              round=1, timestamp="2026-12-05T00:00:00Z"),
        Entry(id="s-0", kind=Kind.STRATEGY, title="an older note", round=0, timestamp="2026-12-04T00:00:00Z"),
    ]  # fmt: skip
    evidence = round_evidence(state, 1, record, [], notes, builtin_roles(), budget_left=900)
    items = {i.id: i for i in evidence.items}
    assert items["note:h-1"].facts["body"] == profile and "note:s-0" not in items  # only the round's notes
