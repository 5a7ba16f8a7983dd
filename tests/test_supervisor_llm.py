"""The supervisor as a model call: a valid answer becomes the decision, an invalid one is retried once, then the
rules decide; the call is charged to the run's budget as the Supervisor."""

from __future__ import annotations

import json

import pytest

from evoteam.gpu_bench.schema import EvaluationStatus as S
from evoteam.roles.backends.scripted import ScriptedLLM, text
from evoteam.roles.budget import TokenBudget
from evoteam.supervisor.decision import AddRole, SetConstraint
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


def test_a_valid_answer_is_the_decision_and_is_charged() -> None:
    answer = {
        "actions": [
            {"action": "add_role", "role": "Disciplinarian", "before": None},
            {"action": "set_constraint", "require": ["wgmma.mma_async"]},
        ],
        "rationale": "c1 fell back from wgmma to a simpler path",
    }
    llm = ScriptedLLM([text("```json\n" + json.dumps(answer) + "\n```")])
    budget = TokenBudget(100_000)
    found = signals(ROUNDS)
    decision = llm_decide(llm, "scripted", budget, Team(roles=["Optimizer"]), ROUNDS, found, KNOWN)
    assert decision.source == "llm"
    assert decision.actions == [AddRole(role="Disciplinarian"), SetConstraint(require=["wgmma.mma_async"])]
    assert decision.signals == found and decision.round == 1
    assert budget.spent > 0 and set(budget.by_role()) == {"Supervisor"}
    sent = json.loads(llm.requests[0].messages[0].content[0].text)  # type: ignore[union-attr]
    assert sent["signals"][0]["name"] == "design_downgrade" and sent["signals"][0]["candidates"] == ["c1"]
    [candidate] = sent["rounds"][0]["candidates"]
    assert candidate["geomean_speedup"] == 1.4 and "workloads" not in candidate  # 50 workloads stay out


def test_an_invalid_answer_is_retried_with_the_error_then_accepted() -> None:
    good = {"actions": [{"action": "add_role", "role": "Debugger"}], "rationale": "fix it"}
    llm = ScriptedLLM(
        [text('{"actions": [{"action": "add_role", "role": "Wizard"}], "rationale": "magic"}'), text(json.dumps(good))]
    )
    decision = llm_decide(llm, "scripted", TokenBudget(100_000), Team(roles=["Optimizer"]), ROUNDS, [], KNOWN)
    assert decision.source == "llm" and decision.actions == [AddRole(role="Debugger")]
    retry = llm.requests[1].messages[-1].content[0]
    assert "unknown role 'Wizard'" in retry.text  # type: ignore[union-attr]


def test_a_constraint_on_a_source_level_name_is_refused_and_retried() -> None:
    """The model is told which instruction classes a constraint can name; ``cuda::pipeline`` compiles to
    ``cp.async`` and would reject every candidate, so the answer goes back with the reason."""
    bad = {"actions": [{"action": "set_constraint", "require": ["cuda::pipeline"]}], "rationale": "pipeline it"}
    good = {"actions": [{"action": "set_constraint", "require": ["cp.async"]}], "rationale": "c1 lost cp.async"}
    llm = ScriptedLLM([text(json.dumps(bad)), text(json.dumps(good))])
    decision = llm_decide(llm, "scripted", TokenBudget(100_000), Team(roles=["Optimizer"]), ROUNDS, [], KNOWN)
    assert decision.source == "llm" and decision.actions == [SetConstraint(require=["cp.async"])]
    system = llm.requests[0].system[0]
    assert "tcgen05, wgmma, wmma, mma.sync, TMA" in system  # type: ignore[operator]
    retry = llm.requests[1].messages[-1].content[0]
    assert "source-level name" in retry.text  # type: ignore[union-attr]


def test_two_bad_answers_or_no_budget_fall_back_to_the_rules() -> None:
    llm = ScriptedLLM([text("no json here"), text("{not json}")])
    found = signals(ROUNDS)
    decision = llm_decide(llm, "scripted", TokenBudget(100_000), Team(roles=["Optimizer"]), ROUNDS, found, KNOWN)
    assert decision.source == "rules" and "the model's answer failed" in decision.rationale
    assert AddRole(role="Disciplinarian") in decision.actions
    broke = llm_decide(ScriptedLLM([]), "scripted", TokenBudget(10), Team(roles=["Optimizer"]), ROUNDS, found, KNOWN)
    assert broke.source == "rules" and "remain in the budget" in broke.rationale
