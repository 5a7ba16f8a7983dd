"""Each stagnation signal, the offline rules that answer it, and applying decisions to a team."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from evoteam.gpu_bench.schema import EvaluationStatus as S
from evoteam.supervisor.decision import (
    AddRole,
    DecisionError,
    LiftConstraint,
    MoveBudget,
    RemoveRole,
    ReplaceRole,
    Reprofile,
    SetBrief,
    SetConstraint,
    SetProtocol,
    StartFrom,
    SupervisorDecision,
    apply,
)
from evoteam.supervisor.records import CandidateRecord, RoundRecord
from evoteam.supervisor.rules import decide
from evoteam.supervisor.signals import SignalConfig, signals
from evoteam.supervisor.team import Team, initial_team

pytestmark = pytest.mark.unit

KNOWN = {
    "Optimizer",
    "Debugger",
    "Profiling Scientist",
    "Knowledge Integrator",
    "Disciplinarian",
    "Explorer",
    "Reviewer",
}


def cand(cid: str, round: int, status: S = S.PASSED, speedup: float | None = None, **extra: object) -> CandidateRecord:
    if status == S.PASSED and speedup is None:
        speedup = 1.0
    return CandidateRecord.model_validate(
        {"id": cid, "round": round, "role": "Optimizer", "status": status, "geomean_speedup": speedup, **extra}
    )


def rnd(n: int, *candidates: CandidateRecord, profiled: bool = True, tokens: int = 0, **extra: object) -> RoundRecord:
    return RoundRecord.model_validate(
        {
            "round": n,
            "roles": ["Optimizer"],
            "candidates": list(candidates),
            "profiled": profiled,
            "tokens": tokens,
            **extra,
        }
    )


def names(rounds: list[RoundRecord], **config: object) -> list[str]:
    return [s.name for s in signals(rounds, SignalConfig.model_validate(config))]


def test_plateau_fires_only_without_gain_over_k_rounds() -> None:
    flat = [rnd(1, cand("a", 1, speedup=1.3)), rnd(2, cand("b", 2, speedup=1.31)), rnd(3, cand("c", 3, speedup=1.2))]
    assert "plateau" in names(flat)
    found = signals(flat)[0]
    assert found.numbers["best"] == pytest.approx(1.31) and found.numbers["best_before"] == pytest.approx(1.3)
    rising = [rnd(1, cand("a", 1, speedup=1.1)), rnd(2, cand("b", 2, speedup=1.2)), rnd(3, cand("c", 3, speedup=1.5))]
    assert "plateau" not in names(rising)
    assert "plateau" not in names(flat[:2])  # not enough rounds yet


def test_regression_names_the_candidate_that_stepped_back() -> None:
    rounds = [rnd(1, cand("a", 1, speedup=1.5)), rnd(2, cand("b", 2, speedup=1.1), cand("c", 2, S.COMPILE_ERROR))]
    found = [s for s in signals(rounds) if s.name == "regression"]
    assert found and found[0].candidates == ["b"] and found[0].numbers == {"last": 1.1, "previous": 1.5}
    assert "regression" not in names([rnd(1, cand("a", 1, speedup=1.5)), rnd(2, cand("b", 2, speedup=1.6))])


def test_compile_failure_loop_needs_every_candidate_of_k_rounds_to_fail_compiling() -> None:
    failing = [
        rnd(1, cand("a", 1, S.COMPILE_ERROR)),
        rnd(2, cand("b", 2, S.COMPILE_ERROR), cand("c", 2, S.COMPILE_ERROR)),
    ]
    found = [s for s in signals(failing) if s.name == "compile_failure_loop"]
    assert found and found[0].candidates == ["a", "b", "c"]
    mixed = [rnd(1, cand("a", 1, S.COMPILE_ERROR)), rnd(2, cand("b", 2, S.COMPILE_ERROR), cand("c", 2))]
    assert "compile_failure_loop" not in names(mixed)


def test_correctness_failure_loop() -> None:
    rounds = [rnd(1, cand("a", 1, S.INCORRECT_NUMERICAL)), rnd(2, cand("b", 2, S.INCORRECT_SHAPE))]
    assert "correctness_failure_loop" in names(rounds)
    assert "compile_failure_loop" not in names(rounds)


def test_missing_profile_evidence() -> None:
    rounds = [rnd(1, cand("a", 1), profiled=False), rnd(2, cand("b", 2, speedup=1.5), profiled=False)]
    assert "missing_profile_evidence" in names(rounds)
    assert "missing_profile_evidence" not in names([rnd(1, cand("a", 1), profiled=False), rnd(2, cand("b", 2))])


def test_design_downgrade_from_a_dropped_construct_or_a_violation() -> None:
    fallback = {"dropped_constructs": ["wgmma", "TMA"], "downgrades": ["wgmma → wmma", "TMA lost"]}
    dropped = [rnd(1, cand("a", 1, speedup=1.4, **fallback))]
    found = signals(dropped)
    assert [s.name for s in found] == ["design_downgrade"]
    assert "dropped TMA lost, wgmma → wmma" in found[0].summary and found[0].candidates == ["a"]
    violated = [rnd(1, cand("b", 1, S.REJECTED, violations=["max_registers 128: kernel k uses 168"]))]
    assert "design_downgrade" in names(violated)


def test_repeated_known_failure_says_whether_the_store_was_read() -> None:
    rounds = [rnd(1, cand("a", 1, known_failure="f-12"), knowledge_read=False)]
    found = [s for s in signals(rounds) if s.name == "repeated_known_failure"]
    assert found and "nobody read the knowledge store" in found[0].summary


def test_budget_burn_without_candidates() -> None:
    assert "budget_burn_without_candidates" in names([rnd(1, tokens=50_000)])
    assert "budget_burn_without_candidates" not in names([rnd(1, tokens=0)])  # the offline team spends nothing


def test_rules_answer_each_signal_with_the_role_the_design_names() -> None:
    team = Team(roles=["Optimizer"])
    compile_loop = [rnd(1, cand("a", 1, S.COMPILE_ERROR)), rnd(2, cand("b", 2, S.COMPILE_ERROR))]
    decision = decide("evolving", team, compile_loop, signals(compile_loop))
    assert AddRole(role="Debugger", before="Optimizer", cites=["signal:compile_failure_loop"]) in decision.actions
    assert apply(team, decision, KNOWN).roles == ["Debugger", "Optimizer"]

    fallback = {"dropped_constructs": ["wgmma"], "downgrades": ["wgmma → wmma"]}
    downgrade = [rnd(1, cand("a", 1, speedup=1.4, **fallback))]
    decision = decide("evolving", team, downgrade, signals(downgrade))
    after = apply(team, decision, KNOWN)
    assert after.roles == ["Optimizer", "Disciplinarian"]
    assert after.constraints.require == ["wgmma"]  # the class, checked by its instructions in PTX and SASS
    assert decision.signals[0].candidates == ["a"] and "Disciplinarian" in decision.note()

    no_profile = [rnd(1, cand("a", 1), profiled=False), rnd(2, cand("b", 2, speedup=1.5), profiled=False)]
    assert (
        apply(team, decide("evolving", team, no_profile, signals(no_profile)), KNOWN).roles[0] == "Profiling Scientist"
    )

    repeat = [rnd(1, cand("a", 1, known_failure="f-1"))]
    assert apply(team, decide("evolving", team, repeat, signals(repeat)), KNOWN).roles[0] == "Knowledge Integrator"

    flat = [rnd(1, cand("a", 1, speedup=1.3)), rnd(2, cand("b", 2, speedup=1.3)), rnd(3, cand("c", 3, speedup=1.3))]
    after = apply(team, decide("evolving", team, flat, signals(flat)), KNOWN)
    assert after.roles == ["Optimizer", "Explorer"] and after.protocol == "parallel"
    back = decide("evolving", Team(roles=["Optimizer", "Explorer"]), flat, signals(flat))  # a pipeline again
    assert back.actions == [SetProtocol(protocol="parallel", cites=["signal:plateau"])]
    assert "the Explorer works beside the Optimizer again, in parallel" in back.rationale

    burn_team = Team(roles=["Optimizer", "Debugger"])
    burn = [rnd(1, tokens=10_000)]
    after = apply(burn_team, decide("evolving", burn_team, burn, signals(burn)), KNOWN)
    assert after.budget_shares == {"Debugger": 0.5, "Optimizer": 1.5}
    weights = {"Optimizer": 1.0, "Debugger": 0.7}  # the roles' own shares: half of the Debugger's 0.7 moves
    after = apply(burn_team, decide("evolving", burn_team, burn, signals(burn)), KNOWN, weights=weights)
    assert after.budget_shares == pytest.approx({"Debugger": 0.35, "Optimizer": 1.35})
    with pytest.raises(ValidationError):  # all of a share cannot move: a role leaves by remove_role
        MoveBudget.model_validate({"from": "Debugger", "to": "Optimizer", "fraction": 1.0})


def test_fixed_and_single_teams_never_change() -> None:
    rounds = [rnd(1, cand("a", 1, S.COMPILE_ERROR)), rnd(2, cand("b", 2, S.COMPILE_ERROR))]
    for mode in ("fixed", "single"):
        team = initial_team(mode)
        decision = decide(mode, team, rounds, signals(rounds))
        assert decision.actions == [] and decision.source == "fixed"
        assert apply(team, decision, KNOWN) == team
    assert initial_team("fixed").roles == ["Profiling Scientist", "Optimizer", "Debugger", "Knowledge Integrator"]


def test_every_action_applies_and_nonsense_is_refused() -> None:
    team = Team(roles=["Optimizer", "Debugger"], constraints={"require": ["wgmma.mma_async"]})
    decision = SupervisorDecision(
        round=3,
        rationale="test",
        actions=[
            ReplaceRole(role="Debugger", by="Reviewer"),
            SetProtocol(protocol="parallel"),
            SetConstraint(forbid=["wmma.mma_sync"]),
            LiftConstraint(pattern="wgmma.mma_async"),
            MoveBudget.model_validate({"from": "Optimizer", "to": "Reviewer", "fraction": 0.25}),
        ],
    )
    after = apply(team, decision, KNOWN)
    assert after.roles == ["Optimizer", "Reviewer"] and after.protocol == "parallel"
    assert after.constraints.require == [] and after.constraints.forbid == ["wmma.mma_sync"]
    assert after.budget_shares == {"Optimizer": 0.75, "Reviewer": 1.25}
    # The decision round-trips through JSON (the journal), actions included.
    assert SupervisorDecision.model_validate_json(decision.model_dump_json(by_alias=True)) == decision
    for bad, message in [
        (RemoveRole(role="Explorer"), "not in the team"),
        (AddRole(role="Wizard"), "unknown role"),
        (LiftConstraint(pattern="nope"), "no such constraint"),
    ]:
        with pytest.raises(DecisionError, match=message):
            apply(team, SupervisorDecision(round=1, rationale="x", actions=[bad]), KNOWN)
    with pytest.raises(DecisionError, match="last role"):
        apply(
            Team(roles=["Optimizer"]),
            SupervisorDecision(round=1, rationale="x", actions=[RemoveRole(role="Optimizer")]),
            KNOWN,
        )


@pytest.mark.parametrize("pattern", ["cuda::pipeline", "__pipeline_memcpy_async"])
def test_a_constraint_no_compiled_code_could_meet_is_refused(pattern: str) -> None:
    """Source-level names never appear in PTX or SASS: requiring one would reject every candidate."""
    team = Team(roles=["Optimizer"])
    for action in (SetConstraint(require=[pattern]), SetConstraint(forbid=[pattern])):
        with pytest.raises(DecisionError, match="source-level name"):
            apply(team, SupervisorDecision(round=1, rationale="test", actions=[action]), KNOWN)


def test_a_compile_loop_starts_the_debugger_from_the_latest_failure_with_a_brief() -> None:
    team = Team(roles=["Optimizer"])
    broken = {"workloads": [{"uuid": "w1", "status": S.COMPILE_ERROR, "reason": "kernel.cpp:3: expected ';'"}]}
    loop = [rnd(1, cand("a", 1, S.COMPILE_ERROR)), rnd(2, cand("b", 2, S.COMPILE_ERROR, **broken))]
    decision = decide("evolving", team, loop, signals(loop))
    cited = ["signal:compile_failure_loop"]
    assert decision.actions == [
        AddRole(role="Debugger", before="Optimizer", cites=cited),
        StartFrom(role="Debugger", candidate="b", cites=cited),
        SetBrief(role="Debugger", brief="repair b (COMPILE_ERROR): kernel.cpp:3: expected ';'", cites=cited),
    ]
    after = apply(team, decision, KNOWN, candidates={"a", "b"})
    assert after.starts == {"Debugger": "b"} and after.briefs["Debugger"].startswith("repair b")
    kept = apply(after, SupervisorDecision(round=3, rationale="keep"), KNOWN)
    assert kept.starts == {} and kept.briefs == after.briefs  # a start lasts one round, a brief until changed


def test_a_role_idle_for_two_rounds_leaves_the_team() -> None:
    team = Team(roles=["Optimizer", "Explorer", "Reviewer"])
    rounds = [rnd(1, cand("a", 1), idle_roles=["Explorer"]), rnd(2, cand("b", 2), idle_roles=["Explorer", "Reviewer"])]
    found = [s for s in signals(rounds) if s.name == "idle_role"]
    assert len(found) == 1 and found[0].roles == ["Explorer"]  # the Reviewer idled once only
    decision = decide("evolving", team, rounds, found)
    assert decision.actions == [RemoveRole(role="Explorer", cites=["signal:idle_role"])]
    assert apply(team, decision, KNOWN).roles == ["Optimizer", "Reviewer"]
    lonely = [rnd(1, idle_roles=["Optimizer"]), rnd(2, idle_roles=["Optimizer"])]
    assert decide("evolving", Team(roles=["Optimizer"]), lonely, signals(lonely)).actions == []


def test_a_parallel_round_that_finds_a_new_best_returns_the_team_to_a_pipeline() -> None:
    team = Team(roles=["Optimizer", "Explorer"], protocol="parallel")
    rounds = [rnd(1, cand("a", 1, speedup=1.3)), rnd(2, cand("b", 2, speedup=1.6), protocol="parallel")]
    found = [s for s in signals(rounds) if s.name == "new_best"]
    assert found and found[0].candidates == ["b"] and found[0].numbers == {"best": 1.6, "best_before": 1.3}
    decision = decide("evolving", team, rounds, found)
    assert decision.actions == [SetProtocol(protocol="sequential", cites=["signal:new_best"])]
    sequential = [rnd(1, cand("a", 1, speedup=1.3)), rnd(2, cand("b", 2, speedup=1.6))]
    assert "new_best" not in names(sequential)  # a pipeline's progress is no reason to reorganize


def test_briefs_and_starts_are_checked_against_the_team_and_the_candidates() -> None:
    team = Team(roles=["Optimizer", "Debugger"], briefs={"Debugger": "old"})
    for action, why in (
        (SetBrief(role="Explorer", brief="x"), "cannot brief Explorer: not in the team"),
        (StartFrom(role="Debugger", candidate="r09-nope"), "no committed candidate has that id"),
        (StartFrom(role="Explorer", candidate="a"), "Explorer is not in the team"),
    ):
        with pytest.raises(DecisionError, match=why):
            apply(team, SupervisorDecision(round=1, rationale="t", actions=[action]), KNOWN, candidates={"a"})
    cleared = apply(
        team, SupervisorDecision(round=1, rationale="t", actions=[SetBrief(role="Debugger", brief="")]), KNOWN
    )
    assert cleared.briefs == {}
    gone = apply(team, SupervisorDecision(round=1, rationale="t", actions=[RemoveRole(role="Debugger")]), KNOWN)
    assert gone.briefs == {} and gone.roles == ["Optimizer"]
    with pytest.raises(ValueError, match="briefs for roles not in the team"):
        Team(roles=["Optimizer"], briefs={"Debugger": "x"})


def test_actions_on_notes_are_checked_and_only_citations_change_the_team() -> None:
    team = Team(roles=["Optimizer"])
    checks = {"candidates": {"a", "b"}, "notes": {"n1"}, "verified": {"a"}}

    def after(*actions: object) -> Team:
        decision = SupervisorDecision.model_validate({"round": 1, "rationale": "t", "actions": list(actions)})
        return apply(team, decision, KNOWN, **checks)  # type: ignore[arg-type]

    kept = after(
        {"action": "retire_note", "note": "n1"},
        {"action": "quarantine_note", "note": "n1"},
        {"action": "promote_note", "note": "n1", "candidate": "a"},
    )
    assert kept == team
    assert after({"action": "require_citations"}).require_citations is True
    with pytest.raises(DecisionError, match="no knowledge note 'n9'"):
        after({"action": "retire_note", "note": "n9"})
    with pytest.raises(DecisionError, match="interval over the start above 1"):
        after({"action": "promote_note", "note": "n1", "candidate": "b"})


def test_missing_profiles_with_a_profiler_in_the_team_profile_the_best_before_the_next_round() -> None:
    team = Team(roles=["Profiling Scientist", "Optimizer"])
    rounds = [rnd(1, cand("a", 1), profiled=False), rnd(2, cand("b", 2, speedup=1.5), profiled=False)]
    decision = decide("evolving", team, rounds, [s for s in signals(rounds) if s.name == "missing_profile_evidence"])
    assert decision.actions == [Reprofile(cites=["signal:missing_profile_evidence"])]
    after = apply(team, decision, KNOWN)
    assert after.reprofile and after.roles == team.roles
    assert not apply(after, SupervisorDecision(round=3, rationale="keep"), KNOWN).reprofile  # for one round


def test_a_plateau_does_not_bring_back_an_explorer_that_added_nothing() -> None:
    """Otherwise a removed Explorer would be added again by the plateau it did not break, round after round."""
    team = Team(roles=["Optimizer"])
    flat = {"speedup": 1.3}
    rounds = [
        rnd(1, cand("a", 1, **flat)),
        rnd(2, cand("b", 2, **flat), idle_roles=["Explorer"]),
        rnd(3, cand("c", 3, **flat)),
    ]
    decision = decide("evolving", team, rounds, [s for s in signals(rounds) if s.name == "plateau"])
    assert decision.actions == [] and "an Explorer added nothing lately" in decision.rationale
