"""Ends a round: its record, the supervisor's decision about the team, and the next round's team.

The decision is made once (a resumed round that has one reuses it): offline by the rules, with a model backend
by one model call charged to the run's budget on the round's evidence (``evidence.round_evidence``;
``llm_decide``, which falls back to the rules). It is journaled
(``decision``) and written to the knowledge store as a role record; then the next team (``team``) and the
round's record (``round_finished``, its tokens including the supervisor's own call) are journaled.
"""

from __future__ import annotations

from evoteam.roles.budget import TokenBudget
from evoteam.roles.knowledge import Evidence, Kind
from evoteam.supervisor.config import RunConfig
from evoteam.supervisor.decision import (
    PromoteNote,
    QuarantineNote,
    RetireNote,
    SupervisorDecision,
    apply,
    knowledge_actions,
)
from evoteam.supervisor.events import DecisionMade, RoundFinished, TeamChanged
from evoteam.supervisor.evidence import idle_roles, round_evidence
from evoteam.supervisor.llm_decide import llm_decide
from evoteam.supervisor.records import RoundRecord
from evoteam.supervisor.rules import decide
from evoteam.supervisor.services import RunContext
from evoteam.supervisor.signals import signals
from evoteam.supervisor.state import RunState
from evoteam.supervisor.team import Team


def finish_round(run: RunContext, number: int, config: RunConfig, budget: TokenBudget) -> None:
    state = run.log.state
    if state.round_done(number):
        return
    team = state.round_teams[number]  # the round's own (a ``team`` event journaled after it is the next's)
    record = RoundRecord(
        round=number,
        roles=list(team.roles),
        protocol=team.protocol,
        candidates=[c.record for c in state.round_candidates(number) if c.record is not None],
        tokens=state.round_tokens.get(number, 0),
        profiled=number in state.profiled_rounds or team.reprofile,
        knowledge_read=number in state.knowledge_rounds,
        idle_roles=idle_roles(state, number),
    )
    known = set(run.services.roles)
    decision = state.decision_after(number)
    if decision is None:  # not made before a kill: make it now (once, a resume reuses it)
        decision = _decide(run, config, budget, team, number, record, known)
        run.log.record(DecisionMade(decision=decision))
        run.knowledge.add(
            Kind.ROLE_RECORD,
            f"round {number}: {', '.join(team.roles)}",
            decision.note(),
            evidence=Evidence(numbers={"best": state.best_speedup or 0.0}),
            role="Supervisor",
            round=number,
        )
    enact_knowledge_policy(run, decision, number)
    weights = {name: spec.budget_share for name, spec in run.services.roles.items()}
    next_team = apply(team, decision, known, committed(state), note_ids(run), verified(state), weights)
    run.log.record(TeamChanged(team=next_team))
    spent = state.round_tokens.get(number, 0)  # the supervisor's own call counts in its round
    run.log.record(RoundFinished(record=record.model_copy(update={"tokens": spent})))


def _decide(
    run: RunContext,
    config: RunConfig,
    budget: TokenBudget,
    team: Team,
    number: int,
    record: RoundRecord,
    known: set[str],
) -> SupervisorDecision:
    state = run.log.state
    rounds = [*state.rounds_finished, record]
    found = signals(rounds)
    if config.mode == "evolving" and run.services.supervisor_llm is not None:
        llm, model = run.services.supervisor_llm
        evidence = round_evidence(
            state,
            number,
            record,
            found,
            run.knowledge.entries(),
            run.services.roles,
            budget.remaining,
        )
        return llm_decide(
            llm,
            model,
            budget,
            team,
            rounds,
            found,
            known,
            evidence,
            candidates=committed(state),
            notes=note_ids(run),
            verified=verified(state),
        )
    return decide(config.mode, team, rounds, found)


def committed(state: RunState) -> set[str]:
    """The candidates a role may start from: every committed one, failing ones included."""
    return {cid for cid, c in state.candidates.items() if c.sha is not None}


def verified(state: RunState) -> set[str]:
    """The candidates a note may be promoted on: passed, with an interval over the start above 1."""
    return {
        cid
        for cid, c in state.candidates.items()
        if c.record is not None and c.record.geomean_ci is not None and c.record.geomean_ci[0] > 1.0
    }


def note_ids(run: RunContext) -> set[str]:
    return {e.id for e in run.knowledge.entries(raw=True)}


def enact_knowledge_policy(run: RunContext, decision: SupervisorDecision, number: int) -> None:
    """The decision's actions on notes, written to the store's policy (again after a resume: a status the
    entry already has is not written twice)."""
    state = run.log.state
    for action in knowledge_actions(decision):
        match action:
            case RetireNote(note=note):
                run.knowledge.set_status(note, "retired", decision.rationale[:300], round=number)
            case QuarantineNote(note=note):
                run.knowledge.set_status(note, "quarantined", decision.rationale[:300], round=number)
            case PromoteNote(note=note, candidate=candidate):
                record = state.candidates[candidate].record
                assert record is not None
                evidence = Evidence(
                    candidate=candidate,
                    status=record.status.value,
                    speedup=record.geomean_speedup,
                    ci=record.geomean_ci,
                    over="the start",
                )
                run.knowledge.set_status(note, "verified", decision.rationale[:300], evidence, round=number)
