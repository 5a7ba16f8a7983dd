"""``RunState``: what a run's journal says, folded one event at a time (``apply``); nothing else is kept.

The supervisor folds the journal once when it starts (a resume is a replay) and then applies each event it
appends (``RunLog``), so it never reads its journal again; ``evoteam show`` folds a journal once; the language
server folds what was appended since its last read (``server/run_fold.py``). Every one of them applies the
same typed events (``events.py``) with the same ``apply``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evoteam.roles.llm import Usage
from evoteam.supervisor.config import LlmChoice as LlmChoice
from evoteam.supervisor.config import RunConfig as RunConfig
from evoteam.supervisor.config import StopReason as StopReason
from evoteam.supervisor.config import new_run_id as new_run_id
from evoteam.supervisor.config import run_dir as run_dir
from evoteam.supervisor.config import state_dir as state_dir
from evoteam.supervisor.config import task_config as task_config
from evoteam.supervisor.decision import SupervisorDecision
from evoteam.supervisor.events import (
    AgentFinished,
    AgentStep,
    BaseCommitted,
    BestMoved,
    Committed,
    DecisionMade,
    Evaluated,
    Event,
    Retimed,
    RoundFinished,
    RoundStarted,
    RunFinished,
    RunStarted,
    StartEvaluated,
    Submitted,
    TeamChanged,
    TokensSpent,
)
from evoteam.supervisor.journal import JournalError
from evoteam.supervisor.records import CandidateRecord, RoundRecord
from evoteam.supervisor.team import Team, initial_team

START_ID = "r00-start"
"""The start kernel's id: the run's incumbent, and the parent of the first round's candidates."""


class Candidate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    round: int
    role: str
    agent: str
    rationale: str
    solution: dict[str, Any]
    record: CandidateRecord | None = None
    sha: str | None = None
    parent: str | None = None
    """The candidate its round started from, or ``r00-start`` (None: a journal from before it was kept)."""


class RunState(BaseModel):
    model_config = ConfigDict(extra="forbid")
    config: RunConfig | None = None
    base: str | None = None
    team: Team | None = None
    """The current team: the round's while it runs, the next round's after its decision."""
    rounds_started: list[int] = Field(default_factory=list)
    round_teams: dict[int, Team] = Field(default_factory=dict)
    """The team each round started with."""
    rounds_finished: list[RoundRecord] = Field(default_factory=list)
    candidates: dict[str, Candidate] = Field(default_factory=dict)
    finished_agents: set[tuple[int, str]] = Field(default_factory=set)
    round_agents: dict[int, list[AgentFinished]] = Field(default_factory=dict)
    """How each agent of a round ended, by round."""
    decisions: list[SupervisorDecision] = Field(default_factory=list)
    tokens: dict[tuple[str, str], Usage] = Field(default_factory=dict)
    round_tokens: dict[int, int] = Field(default_factory=dict)
    """Tokens spent while each round was the last one started (its agents and the decision after it)."""
    agent_tokens: dict[tuple[int, str], int] = Field(default_factory=dict)
    """Tokens by (round last started, agent)."""
    role_tokens: dict[tuple[int, str], int] = Field(default_factory=dict)
    """Tokens by (round last started, role): what each role's share of a round has paid for."""
    model_tokens: dict[str, Usage] = Field(default_factory=dict)
    """Tokens by model (what the run's dollars are counted from)."""
    role_evaluations: dict[tuple[int, str], int] = Field(default_factory=dict)
    """Agents' ``evaluate`` calls that evaluated, by (round, role) (an error result, a refusal by the evaluation
    budget included, is not one)."""
    agent_tools: dict[tuple[int, str], dict[str, int]] = Field(default_factory=dict)
    """Successful tool calls by (round, agent): how often each tool was used."""
    start: CandidateRecord | None = None
    """The start kernel's record against the task's baseline (``r00-start``)."""
    start_solution: dict[str, Any] | None = None
    """The start kernel, the incumbent every candidate is timed against."""
    best: str | None = None
    """The candidate significantly faster than the start (its interval above 1 + the minimum effect) with the
    highest geomean; None: no improvement over the start."""
    best_speedup: float | None = None
    profiled_rounds: set[int] = Field(default_factory=set)
    knowledge_rounds: set[int] = Field(default_factory=set)
    finished: StopReason | None = None
    finished_error: str | None = None
    """What stopped a run that finished with reason ``error``."""

    @property
    def evaluations(self) -> int:
        """The agents' ``evaluate`` calls of the whole run."""
        return sum(self.role_evaluations.values())

    @property
    def spent(self) -> int:
        return sum(u.total for u in self.tokens.values())

    def round_candidates(self, round_number: int) -> list[Candidate]:
        return [c for c in self.candidates.values() if c.round == round_number]

    def round_done(self, round_number: int) -> bool:
        return any(r.round == round_number for r in self.rounds_finished)

    def decision_after(self, round_number: int) -> SupervisorDecision | None:
        return next((d for d in self.decisions if d.round == round_number), None)

    def veto_of(self, candidate: Candidate) -> str | None:
        """Why a review vetoed the candidate (journals from before reviews named their candidate: any veto in
        its round), or None."""
        for finished in self.round_agents.get(candidate.round, []):
            if finished.veto and finished.reviewed in (None, candidate.id):
                return finished.veto
        return None

    def made_from(self, candidate: Candidate) -> dict[str, Any] | None:
        """The solution the candidate was made from, as journaled: its parent's, or the start kernel's where
        its parent is the start (or was not journaled)."""
        parent = self.candidates.get(candidate.parent or "")
        return parent.solution if parent is not None else self.start_solution

    def refused(self, round_number: int) -> bool:
        """Every agent that played the round stopped because the budget could not pay for its call."""
        played = self.round_agents.get(round_number, [])
        return bool(played) and all(a.stop == "budget" for a in played)

    def thawed(self) -> RunState:
        """A copy that applying more events to leaves this state as it is (its containers copied, and the
        candidates that can still change); what is shared never changes."""
        candidates = {
            cid: c if c.record is not None and c.sha is not None else c.model_copy()
            for cid, c in self.candidates.items()
        }
        return self.model_copy(
            update={
                "rounds_started": list(self.rounds_started),
                "round_teams": dict(self.round_teams),
                "rounds_finished": list(self.rounds_finished),
                "candidates": candidates,
                "finished_agents": set(self.finished_agents),
                "round_agents": {r: list(agents) for r, agents in self.round_agents.items()},
                "decisions": list(self.decisions),
                "tokens": dict(self.tokens),
                "round_tokens": dict(self.round_tokens),
                "agent_tokens": dict(self.agent_tokens),
                "role_tokens": dict(self.role_tokens),
                "model_tokens": dict(self.model_tokens),
                "role_evaluations": dict(self.role_evaluations),
                "agent_tools": {key: dict(used) for key, used in self.agent_tools.items()},
                "profiled_rounds": set(self.profiled_rounds),
                "knowledge_rounds": set(self.knowledge_rounds),
            }
        )


def fold(events: Iterable[Event]) -> RunState:
    state = RunState()
    for event in events:
        apply(state, event)
    return state


def apply(state: RunState, event: Event) -> None:
    """One event into ``state`` (in place). An event that does not fit the run (a record of a candidate never
    submitted) is a JournalError, and leaves ``state`` as it was."""
    match event:
        case RunStarted(config=config):
            state.config, state.team = config, initial_team(config.mode)
        case BaseCommitted(sha=sha):
            state.base = sha
        case StartEvaluated(solution=solution, record=record):
            state.start_solution, state.start = solution, record
        case RoundStarted(round=number, team=team):
            state.rounds_started.append(number)
            state.round_teams[number] = state.team = team
        case TokensSpent(role=role, agent=agent, usage=usage, model=model):
            key = (role, agent)
            state.model_tokens[model] = state.model_tokens.get(model, Usage()) + usage
            state.tokens[key] = state.tokens.get(key, Usage()) + usage
            current = state.rounds_started[-1] if state.rounds_started else 0
            state.round_tokens[current] = state.round_tokens.get(current, 0) + usage.total
            state.agent_tokens[(current, agent)] = state.agent_tokens.get((current, agent), 0) + usage.total
            state.role_tokens[(current, role)] = state.role_tokens.get((current, role), 0) + usage.total
        case AgentStep(round=number, tool=tool, is_error=is_error, agent_id=agent_id, role=role):
            if tool == "evaluate" and event.step == "tool" and not is_error:
                state.role_evaluations[(number, role)] = state.role_evaluations.get((number, role), 0) + 1
            if tool is not None and not is_error:
                used = state.agent_tools.setdefault((number, agent_id), {})
                used[tool] = used.get(tool, 0) + 1
            if tool == "profile" and not is_error:
                state.profiled_rounds.add(number)
            if tool == "read_knowledge":
                state.knowledge_rounds.add(number)
        case Submitted():
            if event.id not in state.candidates:
                state.candidates[event.id] = Candidate(
                    id=event.id,
                    round=event.round,
                    role=event.role,
                    agent=event.agent,
                    rationale=event.rationale,
                    solution=event.solution,
                    parent=event.parent,
                )
        case AgentFinished(round=number, agent=agent):
            state.finished_agents.add((number, agent))
            state.round_agents.setdefault(number, []).append(event)
        case Evaluated(record=record):
            _candidate(state, record.id, "evaluated").record = record
        case Committed(id=cid, sha=sha):
            _candidate(state, cid, "committed").sha = sha
        case Retimed(record=record):
            _candidate(state, record.id, "retimed").record = record
        case BestMoved(id=cid, speedup=speedup):
            state.best, state.best_speedup = cid, speedup
        case DecisionMade(decision=decision):
            state.decisions.append(decision)
        case TeamChanged(team=team):
            state.team = team
        case RoundFinished(record=record):
            shared = [_shared(state, c) for c in record.candidates]
            state.rounds_finished.append(record.model_copy(update={"candidates": shared}))
        case RunFinished(reason=reason, error=error):
            state.finished, state.finished_error = reason, error


def _candidate(state: RunState, cid: str, kind: str) -> Candidate:
    candidate = state.candidates.get(cid)
    if candidate is None:
        raise JournalError(f"an event that does not fit the run: {kind} {cid!r}, a candidate never submitted")
    return candidate


def _shared(state: RunState, record: CandidateRecord) -> CandidateRecord:
    """The candidate's own record when the round's copy equals it (one object for both: a long run's records,
    with their per-workload outcomes, are held once)."""
    known = state.candidates.get(record.id)
    return known.record if known is not None and known.record is not None and known.record == record else record
