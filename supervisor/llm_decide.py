"""The supervisor as a model call: the round's evidence in (``evidence.py``); a validated ``SupervisorDecision``
out.

The model answers with one JSON object (``actions`` and ``rationale``), every action citing the ids of the
evidence items it rests on. An answer that is not valid JSON, fails validation, has an action that cites
nothing or an id it was not shown, or cannot be applied to the team gets one more call with the error; if
that fails too, the offline rules decide, and the decision says so in its rationale. Every refused answer's
reason is kept in the decision (``rejected``). The call is checked against and charged to the run's one
budget, under the role ``Supervisor``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evoteam.gpu_bench.api import INSTRUCTION_CLASSES
from evoteam.roles.budget import BudgetExhausted, TokenBudget
from evoteam.roles.llm import LLM, FatalLLMError, LLMError, Message, Request, TextBlock
from evoteam.supervisor.decision import Action, DecisionError, SupervisorDecision, apply
from evoteam.supervisor.evidence import EVIDENCE_CHARS, RoundEvidence
from evoteam.supervisor.records import RoundRecord
from evoteam.supervisor.rules import decide
from evoteam.supervisor.signals import Signal
from evoteam.supervisor.team import Team

ROLE = "Supervisor"
_SYSTEM = """You supervise a team of coding agents that optimize one kernel in rounds. After each round you read
the evidence and decide how the team changes for the next round. Answer with exactly one JSON object, no prose:
{"actions": [...], "rationale": "one or two sentences naming the evidence"}
Every action cites the evidence it rests on: "cites": [ids of evidence items you were shown]; an action that
cites nothing, or an id not shown, is refused.
Actions (each an object, each with "cites"): {"action": "add_role", "role": R, "before": R-or-null},
{"action": "remove_role", "role": R}, {"action": "replace_role", "role": R, "by": R},
{"action": "set_protocol", "protocol": "sequential"|"parallel"},
{"action": "set_constraint", "require": [pattern...], "forbid": [pattern...]},
{"action": "lift_constraint", "pattern": P}, {"action": "move_budget", "from": R, "to": R, "fraction": 0..1},
{"action": "set_brief", "role": R, "brief": "a sub-task, e.g. the workloads with batch_size <= 16"},
{"action": "start_from", "role": R, "candidate": "a candidate id (failing ones too), for the next round"},
{"action": "retire_note", "note": ID}, {"action": "quarantine_note", "note": ID},
{"action": "promote_note", "note": ID, "candidate": "a candidate that passed with its interval above 1"},
{"action": "require_citations", "on": true|false} (notes must name an evaluated candidate),
{"action": "reprofile"} (profile the best before the next round; every member sees it).
A constraint pattern is an instruction class ({classes}) or a PTX/SASS instruction (wgmma.mma_async, HGMMA):
checked on the compiled code, never a source-level name (cuda::pipeline compiles to cp.async).
An empty action list keeps the team. Roles you may use: {roles}."""


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    actions: list[Action] = Field(default_factory=list)
    rationale: str = Field(min_length=1)


def llm_decide(
    llm: LLM,
    model: str,
    budget: TokenBudget,
    team: Team,
    rounds: Sequence[RoundRecord],
    found: Sequence[Signal],
    known_roles: set[str],
    evidence: RoundEvidence,
    max_tokens: int = 1024,
    evidence_chars: int = EVIDENCE_CHARS,
    candidates: set[str] | None = None,
    notes: set[str] | None = None,
    verified: set[str] | None = None,
) -> SupervisorDecision:
    """``rounds`` and ``found`` are what the rules fall back on; the model sees ``evidence``, rendered within
    ``evidence_chars`` characters; ``candidates``, ``notes`` and ``verified`` check its actions (``apply``)."""
    last = rounds[-1].round if rounds else evidence.round
    shown = evidence.ids()
    messages = [Message(role="user", content=[TextBlock(text=evidence.render(evidence_chars))])]
    rejected: list[str] = []
    classes = ", ".join(c.name for c in INSTRUCTION_CLASSES)
    system = [_SYSTEM.replace("{roles}", ", ".join(sorted(known_roles))).replace("{classes}", classes)]
    error = ""
    for _attempt in range(2):
        request = Request(model=model, system=system, messages=messages, max_tokens=max_tokens, temperature=0.0)
        try:
            budget.check(llm.count_tokens(request) + max_tokens, ROLE)
        except BudgetExhausted as exc:
            error = f"no model call, the budget cannot pay for it: {exc}"
            break
        try:
            reply = llm.complete(request)
        except FatalLLMError:
            raise  # the run stops: no decision is made on a key or model that cannot work
        except LLMError as exc:
            error = f"the model call failed: {exc or type(exc).__name__}"
            break
        budget.charge(reply.usage, ROLE, "supervisor", reply.model)
        text = "".join(b.text for b in reply.content if isinstance(b, TextBlock))
        try:
            answer = _Answer.model_validate_json(_json_object(text))
            _check_citations(answer.actions, shown)
            decision = SupervisorDecision(
                round=last,
                signals=list(found),
                actions=answer.actions,
                rationale=answer.rationale,
                source="llm",
                rejected=rejected,
            )
            apply(team, decision, known_roles, candidates, notes, verified)
            return decision
        except (ValidationError, DecisionError, ValueError) as exc:
            problem = str(exc).splitlines()[0]
            rejected.append(problem)
            error = f"the model's answer failed: {problem}"
            messages = [
                *messages,
                Message(role="assistant", content=[TextBlock(text=text or "(empty)")]),
                Message(role="user", content=[TextBlock(text=f"That answer is invalid: {problem}. Answer again.")]),
            ]
    fallback = decide("evolving", team, rounds, found)
    return fallback.model_copy(update={"rationale": f"{fallback.rationale} (rules: {error})", "rejected": rejected})


def _check_citations(actions: Sequence[Action], shown: set[str]) -> None:
    """A ``DecisionError`` naming the first action that cites nothing or an id that was not shown."""
    for number, action in enumerate(actions, 1):
        if not action.cites:
            raise DecisionError(f"action {number} ({action.action}) cites no evidence: give the ids it rests on")
        unknown = [c for c in action.cites if c not in shown]
        if unknown:
            raise DecisionError(f"action {number} ({action.action}) cites ids that were not shown: {unknown}")


def _json_object(text: str) -> str:
    """The JSON object in ``text`` (models sometimes wrap it in a code fence)."""
    match = re.search(r"\{.*\}", text, re.S)
    if match is None:
        raise ValueError("the answer holds no JSON object")
    return match.group(0)
