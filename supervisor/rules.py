"""The offline supervisor: each signal maps to the reorganization that answers it, with the signal as evidence.

Compile or correctness failure loop → add a Debugger (first in the pipeline), started from the latest failing
candidate with a brief to repair it; missing profile evidence → add a Profiling Scientist first (when there is
one already: profile the best before the next round); design downgrade → add a Disciplinarian (last, to
review) and require the lost instruction classes; repeated known failure → add a Knowledge Integrator first;
plateau → add an Explorer and run in parallel; regression → add a Reviewer; budget burn without candidates →
move half of the busiest non-Optimizer role's share to the Optimizer; a role idle for rounds (``idle_role``) →
remove it (never the Optimizer or the last role); a parallel round's new best → back to sequential. Each action
cites the signal it answers (``signal:<name>``). ``fixed`` and ``single`` teams never change.
"""

from __future__ import annotations

from collections.abc import Sequence

from evoteam.roles.builtin import builtin_roles
from evoteam.supervisor.decision import (
    Action,
    AddRole,
    MoveBudget,
    RemoveRole,
    Reprofile,
    SetBrief,
    SetConstraint,
    SetProtocol,
    StartFrom,
    SupervisorDecision,
)
from evoteam.supervisor.records import CandidateRecord, RoundRecord
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
                failing = _latest_failure(rounds, signal.candidates)
                if failing is not None and "Debugger" in roles:
                    actions.append(StartFrom(role="Debugger", candidate=failing.id))
                    brief = f"repair {failing.id} ({failing.status.value}): {_first_reason(failing)}"
                    actions.append(SetBrief(role="Debugger", brief=brief[:300]))
                    reasons.append(f"the Debugger starts from {failing.id}")
            case "missing_profile_evidence":
                if "Profiling Scientist" in roles:
                    actions.append(Reprofile())
                    reasons.append(f"{signal.summary} → the best is profiled before the next round")
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
                if any("Explorer" in r.idle_roles for r in rounds[-2:]):
                    reasons.append(f"{signal.summary}; an Explorer added nothing lately: not added again")
                    continue
                if "Explorer" in roles and team.protocol != "parallel":
                    reasons.append(f"{signal.summary} → the Explorer works beside the Optimizer again, in parallel")
                add("Explorer", None, f"{signal.summary} → an Explorer tries a different design beside the Optimizer")
                if team.protocol != "parallel":
                    actions.append(SetProtocol(protocol="parallel"))
            case "regression":
                add("Reviewer", None, f"{signal.summary} → a Reviewer checks the new candidates")
            case "idle_role":
                for role in signal.roles:
                    if role in roles and role != "Optimizer" and len(roles) > 1:
                        actions.append(RemoveRole(role=role))
                        roles.discard(role)
                        reasons.append(f"{signal.summary} → {role} leaves the team")
            case "new_best":
                if team.protocol == "parallel":
                    actions.append(SetProtocol(protocol="sequential"))
                    reasons.append(f"{signal.summary} → back to a pipeline around the new best")
            case "budget_burn_without_candidates":
                others = [r for r in team.roles if r != "Optimizer"]
                if "Optimizer" in team.roles and others:
                    own = {name: spec.budget_share for name, spec in builtin_roles().items()}
                    busiest = max(others, key=lambda r: team.budget_shares.get(r, own.get(r, 1.0)))
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


def _latest_failure(rounds: Sequence[RoundRecord], ids: list[str]) -> CandidateRecord | None:
    """The most recent of the failing candidates ``ids`` (the signal's evidence)."""
    failing = [c for r in rounds for c in r.candidates if c.id in ids]
    return failing[-1] if failing else None


def _first_reason(record: CandidateRecord) -> str:
    reasons = [w.reason for w in record.workloads if w.reason]
    return reasons[0] if reasons else "see its evaluation"
