"""The supervisor as a model call: a valid answer, whose every action cites evidence it was shown, becomes the
decision; an invalid one is retried once with the reason, then the rules decide; refused answers are kept in
the decision; the call is charged to the run's budget as the Supervisor."""

from __future__ import annotations

import json

import pytest

from evoteam.gpu_bench.schema import EvaluationStatus as S
from evoteam.roles.backends.scripted import ScriptedLLM, text
from evoteam.roles.budget import TokenBudget
from evoteam.roles.llm import FatalLLMError, Reply
from evoteam.supervisor.decision import AddRole, SetConstraint
from evoteam.supervisor.evidence import EvidenceItem, RoundEvidence
from evoteam.supervisor.llm_decide import llm_decide
from evoteam.supervisor.records import CandidateRecord, RoundRecord, WorkloadOutcome
from evoteam.supervisor.signals import signals
from evoteam.supervisor.team import Team

pytestmark = pytest.mark.unit

KNOWN = {"Optimizer", "Debugger", "Disciplinarian"}
ROUNDS = [
    RoundRecord(
        round=1,
        roles=["Optimizer"],
        candidates=[
            CandidateRecord(
                id="c1",
                round=1,
                role="Optimizer",
                status=S.PASSED,
                geomean_speedup=1.4,
                instruction_classes=["wmma"],
                dropped_constructs=["wgmma"],
                downgrades=["wgmma → wmma"],
                workloads=[WorkloadOutcome(uuid=f"w{i}", status=S.PASSED, speedup=1.4) for i in range(50)],
            )
        ],
        profiled=True,
    )
]


def evidence_of(rounds: list[RoundRecord]) -> RoundEvidence:
    """What ``round_evidence`` shows, for these records: the last round's candidates and its signals."""
    items = [
        EvidenceItem(
            id=f"candidate:{c.id}",
            kind="candidate",
            facts={"status": c.status.value, "workloads": [w.model_dump(mode="json") for w in c.workloads]},
        )
        for c in rounds[-1].candidates
    ]
    items += [
        EvidenceItem(id=f"signal:{s.name}", kind="signal", facts=s.model_dump(mode="json")) for s in signals(rounds)
    ]
    return RoundEvidence(round=rounds[-1].round, team=Team(roles=["Optimizer"]), items=items)


EVIDENCE = evidence_of(ROUNDS)


def test_a_valid_answer_is_the_decision_and_is_charged() -> None:
    answer = {
        "actions": [
            {"action": "add_role", "role": "Disciplinarian", "before": None, "cites": ["signal:design_downgrade"]},
            {"action": "set_constraint", "require": ["wgmma"], "cites": ["candidate:c1"]},
        ],
        "rationale": "c1 fell back from wgmma to a simpler path",
    }
    llm = ScriptedLLM([text("```json\n" + json.dumps(answer) + "\n```")])
    budget = TokenBudget(100_000)
    found = signals(ROUNDS)
    decision = llm_decide(llm, "scripted", budget, Team(roles=["Optimizer"]), ROUNDS, found, KNOWN, EVIDENCE)
    assert decision.source == "llm" and decision.rejected == []
    assert decision.actions == [
        AddRole(role="Disciplinarian", cites=["signal:design_downgrade"]),
        SetConstraint(require=["wgmma"], cites=["candidate:c1"]),
    ]
    assert decision.signals == found and decision.round == 1
    assert budget.spent > 0 and set(budget.by_role()) == {"Supervisor"}
    sent = json.loads(llm.requests[0].messages[0].content[0].text)  # type: ignore[union-attr]
    assert sent == EVIDENCE.model_dump(mode="json")  # within its size budget as it is


def test_the_evidence_is_cut_to_its_budget_and_keeps_every_id() -> None:
    """Per-workload rows go first: 50 workloads a candidate would cost more than the rest of the prompt."""
    full = EVIDENCE.render()
    cut = EVIDENCE.render(limit=2_000)
    assert len(cut) <= 2_000 < len(full)
    shown = RoundEvidence.model_validate_json(cut)
    assert shown.ids() == EVIDENCE.ids()
    [candidate] = [i for i in shown.items if i.kind == "candidate"]
    assert len(candidate.facts["workloads"]) == 5


@pytest.mark.parametrize(
    ("cites", "why"),
    [([], "cites no evidence"), (["candidate:c9"], "cites ids that were not shown: ['candidate:c9']")],
)
def test_an_action_citing_nothing_or_an_unknown_id_is_refused_and_kept(cites: list[str], why: str) -> None:
    bad = {"actions": [{"action": "add_role", "role": "Debugger", "cites": cites}], "rationale": "fix it"}
    good = {"actions": [{"action": "add_role", "role": "Debugger", "cites": ["candidate:c1"]}], "rationale": "c1"}
    llm = ScriptedLLM([text(json.dumps(bad)), text(json.dumps(good))])
    team = Team(roles=["Optimizer"])
    decision = llm_decide(llm, "scripted", TokenBudget(100_000), team, ROUNDS, [], KNOWN, EVIDENCE)
    assert decision.source == "llm" and decision.actions == [AddRole(role="Debugger", cites=["candidate:c1"])]
    assert len(decision.rejected) == 1 and why in decision.rejected[0]
    retry = llm.requests[1].messages[-1].content[0]
    assert why in retry.text  # type: ignore[union-attr]


def test_an_invalid_answer_is_retried_with_the_error_then_accepted() -> None:
    good = {"actions": [{"action": "add_role", "role": "Debugger", "cites": ["candidate:c1"]}], "rationale": "fix"}
    wizard = '{"actions": [{"action": "add_role", "role": "Wizard", "cites": ["candidate:c1"]}], "rationale": "magic"}'
    llm = ScriptedLLM([text(wizard), text(json.dumps(good))])
    decision = llm_decide(llm, "scripted", TokenBudget(100_000), Team(roles=["Optimizer"]), ROUNDS, [], KNOWN, EVIDENCE)
    assert decision.source == "llm" and decision.actions == [AddRole(role="Debugger", cites=["candidate:c1"])]
    retry = llm.requests[1].messages[-1].content[0]
    assert "unknown role 'Wizard'" in retry.text  # type: ignore[union-attr]


def test_a_constraint_on_a_source_level_name_is_refused_and_retried() -> None:
    """The model is told which instruction classes a constraint can name; ``cuda::pipeline`` compiles to
    ``cp.async`` and would reject every candidate, so the answer goes back with the reason."""
    cites = ["candidate:c1"]
    bad = {"actions": [{"action": "set_constraint", "require": ["cuda::pipeline"], "cites": cites}], "rationale": "p"}
    good = {"actions": [{"action": "set_constraint", "require": ["cp.async"], "cites": cites}], "rationale": "c1"}
    llm = ScriptedLLM([text(json.dumps(bad)), text(json.dumps(good))])
    decision = llm_decide(llm, "scripted", TokenBudget(100_000), Team(roles=["Optimizer"]), ROUNDS, [], KNOWN, EVIDENCE)
    assert decision.source == "llm" and decision.actions == [SetConstraint(require=["cp.async"], cites=cites)]
    system = llm.requests[0].system[0]
    assert "tcgen05, wgmma, wmma, mma.sync, TMA" in system  # type: ignore[operator]
    retry = llm.requests[1].messages[-1].content[0]
    assert "source-level name" in retry.text  # type: ignore[union-attr]


def test_two_bad_answers_or_no_budget_fall_back_to_the_rules() -> None:
    llm = ScriptedLLM([text("no json here"), text("{not json}")])
    found = signals(ROUNDS)
    team = Team(roles=["Optimizer"])
    decision = llm_decide(llm, "scripted", TokenBudget(100_000), team, ROUNDS, found, KNOWN, EVIDENCE)
    assert decision.source == "rules" and "the model's answer failed" in decision.rationale
    assert AddRole(role="Disciplinarian", cites=["signal:design_downgrade"]) in decision.actions
    assert len(decision.rejected) == 2  # both refused answers, kept with the decision
    broke = llm_decide(ScriptedLLM([]), "scripted", TokenBudget(10), team, ROUNDS, found, KNOWN, EVIDENCE)
    assert broke.source == "rules" and "remain in the budget" in broke.rationale


def test_a_model_error_no_retry_can_fix_is_not_hidden_behind_the_rules() -> None:
    def refused(request: object) -> Reply:
        raise FatalLLMError("anthropic call failed and is not retried: 401 authentication_error: invalid x-api-key")

    llm = ScriptedLLM([refused])
    with pytest.raises(FatalLLMError, match="401 authentication_error"):  # the run stops; no decision is made
        llm_decide(llm, "scripted", TokenBudget(100_000), Team(roles=["Optimizer"]), ROUNDS, [], KNOWN, EVIDENCE)
