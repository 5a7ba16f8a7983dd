"""The offline supervisor: each signal maps to the reorganization that answers it, with the signal as evidence.

compile or correctness failure loop → add a Debugger (first in the pipeline); missing profile evidence → add a
Profiling Scientist first; design downgrade → add a Disciplinarian (last, to review) and require the dropped
constructs; repeated known failure → add a Knowledge Integrator first; plateau → add an Explorer and run in
parallel; regression → add a Reviewer; budget burn without candidates → move half of the busiest non-Optimizer
role's share to the Optimizer, or remove it when the team is large. Each action cites the signal it answers
(``signal:<name>``). ``fixed`` and ``single`` teams never change.
"""

from __future__ import annotations

from collections.abc import Sequence

from evoteam.supervisor.decision import (
    Action,
    AddRole,
    MoveBudget,
    SetConstraint,
    SetProtocol,
    SupervisorDecision,
)
from evoteam.supervisor.records import RoundRecord
from evoteam.supervisor.signals import Signal, signal_id
from evoteam.supervisor.team import Team, TeamMode


def decide(mode: TeamMode, team: Team, rounds: Sequence[RoundRecord], found: Sequence[Signal]) -> SupervisorDecision:
    last = rounds[-1].round if rounds else 0
    if mode != "evolving":
        why = "; ".join(s.summary for s in found) or "no signal"
        return SupervisorDecision(
            round=last, signals=list(found), rationale=f"{mode} team: kept as it is ({why})", source="fixed"
        )
    actions: list[Action] = []
    reasons: list[str] = []
    roles = set(team.roles)
    first = team.roles[0]

    def add(role: str, before: str | None, reason: str) -> None:
        if role not in roles:
            actions.append(AddRole(role=role, before=before))
            roles.add(role)
            reasons.append(reason)

    for signal in found:
        answered = len(actions)
        match signal.name:
            case "compile_failure_loop" | "correctness_failure_loop":
                add("Debugger", first, f"{signal.summary} → a Debugger goes first")
            case "missing_profile_evidence":
                add("Profiling Scientist", first, f"{signal.summary} → a Profiling Scientist measures first")
            case "design_downgrade":
                add("Disciplinarian", None, f"{signal.summary} → a Disciplinarian reviews every change")
                dropped = sorted({d for r in rounds[-1:] for c in r.candidates for d in c.dropped_constructs})
                new = [d for d in dropped if d not in team.constraints.require]
                if new:
                    actions.append(SetConstraint(require=new))
                    reasons.append(f"require {', '.join(new)} again")
            case "repeated_known_failure":
                add("Knowledge Integrator", first, f"{signal.summary} → a Knowledge Integrator briefs the team first")
            case "plateau":
                add("Explorer", None, f"{signal.summary} → an Explorer tries a different design beside the Optimizer")
                if team.protocol != "parallel":
                    actions.append(SetProtocol(protocol="parallel"))
            case "regression":
                add("Reviewer", None, f"{signal.summary} → a Reviewer checks the new candidates")
            case "budget_burn_without_candidates":
                others = [r for r in team.roles if r != "Optimizer"]
                if "Optimizer" in team.roles and others:
                    busiest = max(others, key=lambda r: team.budget_shares.get(r, 1.0))
                    actions.append(MoveBudget.model_validate({"from": busiest, "to": "Optimizer", "fraction": 0.5}))
                    reasons.append(f"{signal.summary} → half of {busiest}'s share goes to the Optimizer")
        for action in actions[answered:]:
            action.cites = [signal_id(signal)]
    rationale = (
        "; ".join(reasons)
        if reasons
        else (
            "no stagnation signal: team kept"
            if not found
            else "signals seen, the team already has the roles that answer them"
        )
    )
    return SupervisorDecision(round=last, signals=list(found), actions=actions, rationale=rationale, source="rules")
