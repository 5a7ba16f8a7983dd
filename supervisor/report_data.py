"""What ``evoteam report`` shows, computed from a run's journal: the data of each plot and the report's notes.

Pure functions over the events and their fold (``state.py``); nothing here draws or writes files, and nothing
imports matplotlib.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.api import EvaluationStatus
from evoteam.supervisor.decision import SupervisorDecision, describe
from evoteam.supervisor.events import AgentFinished, AgentStep, Event, RoundStarted, TokensSpent
from evoteam.supervisor.records import WorkloadOutcome
from evoteam.supervisor.state import RunState, fold

MarkKind = Literal["veto", "submitted", "withdrawn", "error", "played", "idle", "pending"]
"""What a role did in a round, strongest first: it vetoed a candidate, it submitted, it submitted but vetoes
withdrew every candidate it made, its agent failed, it worked without submitting, it was in the team and did
nothing (no behaviour with this backend), or the round has not reached it (a live or stopped run)."""
MARK_KINDS: tuple[MarkKind, ...] = ("veto", "submitted", "withdrawn", "error", "played", "idle", "pending")
NOTE_LENGTH = 48
"""Decision notes on the timeline are cut to this many characters (the table has the whole decision)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RoundPoint(_Model):
    round: int
    round_best: float | None = None
    """The best geomean speedup of the round's passing, not vetoed candidates."""
    best_so_far: float | None = None


class Winner(_Model):
    id: str
    round: int
    role: str
    agent: str
    rationale: str
    sha: str | None
    speedup: float
    workloads: list[WorkloadOutcome] = Field(default_factory=list)
    """Passed workloads by speedup (highest first), then the failed ones."""


class Mark(_Model):
    round: int
    role: str
    kind: MarkKind
    submissions: int = 0


class DecisionNote(_Model):
    round: int
    """The round the decision was made after (drawn between it and the next)."""
    text: str


class Timeline(_Model):
    rounds: list[int] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)
    """In the order they first joined the team."""
    marks: list[Mark] = Field(default_factory=list)
    decisions: list[DecisionNote] = Field(default_factory=list)


class RoleTokens(_Model):
    role: str
    agents: int
    input_tokens: int = 0
    output_tokens: int = 0
    cache_tokens: int = 0
    """Cache creation plus cache reads."""
    total: int = 0
    by_round: dict[int, int] = Field(default_factory=dict)


class ReportData(_Model):
    run: str
    kernel: str
    mode: str
    llm: str
    rounds_planned: int
    rounds_finished: int
    finished: str | None
    budget: int
    spent: int
    series: list[RoundPoint]
    winner: Winner | None
    timeline: Timeline
    tokens: list[RoleTokens]
    notes: list[str]


def report_data(events: list[Event]) -> tuple[RunState, ReportData]:
    state = fold(events)
    config = state.config
    if config is None:
        raise ValueError("the journal has no run_started event")
    data = ReportData(
        run=config.run,
        kernel=config.kernel,
        mode=config.mode,
        llm=config.llm,
        rounds_planned=config.rounds,
        rounds_finished=len(state.rounds_finished),
        finished=state.finished,
        budget=config.budget,
        spent=state.spent,
        series=speedup_series(state),
        winner=winner(state),
        timeline=timeline(events, state),
        tokens=tokens_by_role(events, state),
        notes=notes(state),
    )
    return state, data


def speedup_series(state: RunState) -> list[RoundPoint]:
    """Each round that started, with its best and the best so far (evaluated candidates of a live round count)."""
    rounds = sorted({*state.rounds_started, *(r.round for r in state.rounds_finished)})
    points, best = [], None
    for number in rounds:
        passed = [
            c.record.geomean_speedup
            for c in state.round_candidates(number)
            if c.record is not None and c.record.geomean_speedup is not None and not c.record.vetoed
        ]
        round_best = max(passed) if passed else None
        if round_best is not None and (best is None or round_best > best):
            best = round_best
        points.append(RoundPoint(round=number, round_best=round_best, best_so_far=best))
    return points


def winner(state: RunState) -> Winner | None:
    candidate = state.candidates.get(state.best) if state.best is not None else None
    if candidate is None or candidate.record is None or candidate.record.geomean_speedup is None:
        return None
    return Winner(
        id=candidate.id,
        round=candidate.round,
        role=candidate.role,
        agent=candidate.agent,
        rationale=candidate.rationale,
        sha=candidate.sha,
        speedup=candidate.record.geomean_speedup,
        workloads=sorted_workloads(candidate.record.workloads),
    )


def sorted_workloads(workloads: list[WorkloadOutcome]) -> list[WorkloadOutcome]:
    passed = [w for w in workloads if w.status == EvaluationStatus.PASSED and w.speedup is not None]
    failed = [w for w in workloads if w not in passed]
    return sorted(passed, key=lambda w: (-(w.speedup or 0.0), w.uuid)) + failed


def timeline(events: list[Event], state: RunState) -> Timeline:
    """Who played in which round (``agent_finished``, ``agent_event`` and ``tokens`` events), and the decisions."""
    teams: dict[int, list[str]] = {}
    worked: set[tuple[int, str]] = set()
    finished: list[AgentFinished] = []
    current = 0
    for event in events:
        match event:
            case RoundStarted(round=number, team=team):
                current = number
                teams[current] = list(team.roles)
            case AgentStep(round=number, role=role):
                worked.add((number, role))
            case TokensSpent(role=role, usage=usage) if usage.total > 0:
                worked.add((current, role))
            case AgentFinished():
                finished.append(event)
    roles: list[str] = []
    for number in sorted(teams):
        roles += [r for r in teams[number] if r not in roles]
    kinds: dict[tuple[int, str], Mark] = {}
    for f in finished:
        if f.role not in roles:
            roles.append(f.role)
        kind = _kind(f, (f.round, f.role) in worked)
        old = kinds.get((f.round, f.role))
        if old is not None and MARK_KINDS.index(old.kind) < MARK_KINDS.index(kind):
            kind = old.kind
        count = f.submissions + (old.submissions if old is not None else 0)
        kinds[(f.round, f.role)] = Mark(round=f.round, role=f.role, kind=kind, submissions=count)
    vetoed: dict[tuple[int, str], list[bool]] = {}  # per round and role: whether each of its candidates was
    for c in state.candidates.values():
        if c.record is not None:
            vetoed.setdefault((c.round, c.role), []).append(c.record.vetoed)
    marks = []
    for number in sorted(teams):
        for role in teams[number]:
            marks.append(kinds.pop((number, role), Mark(round=number, role=role, kind="pending")))
    marks += kinds.values()  # agents of a role that was not in the round's team (not expected; shown anyway)
    for mark in marks:
        if mark.kind == "submitted" and all(vetoed.get((mark.round, mark.role), [False])):
            mark.kind = "withdrawn"
    return Timeline(
        rounds=sorted(teams),
        roles=roles,
        marks=marks,
        decisions=[DecisionNote(round=d.round, text=decision_text(d)) for d in state.decisions],
    )


def _kind(finished: AgentFinished, worked: bool) -> MarkKind:
    if finished.veto:
        return "veto"
    if finished.submissions > 0:
        return "submitted"
    if finished.error or finished.stop == "llm_error":
        return "error"
    return "played" if worked else "idle"


def decision_text(decision: SupervisorDecision) -> str:
    """A short note for the timeline: the signals, then what changed."""
    changes = "; ".join(describe(a) for a in decision.actions) or "team kept"
    names = ", ".join(s.name for s in decision.signals)
    text = f"{names}: {changes}" if names else changes
    return text if len(text) <= NOTE_LENGTH else text[: NOTE_LENGTH - 1] + "…"


def tokens_by_role(events: list[Event], state: RunState) -> list[RoleTokens]:
    """Tokens per role (the state's totals), split by the round in which they were spent; most spent first."""
    by_round: dict[str, dict[int, int]] = {}
    current = 0
    for event in events:
        match event:
            case RoundStarted(round=number):
                current = number
            case TokensSpent(role=role, usage=usage):
                spent = by_round.setdefault(role, {})
                spent[current] = spent.get(current, 0) + usage.total
    rows: dict[str, RoleTokens] = {}
    for (role, _agent), usage in state.tokens.items():
        row = rows.setdefault(role, RoleTokens(role=role, agents=0))
        row.agents += 1
        row.input_tokens += usage.input_tokens
        row.output_tokens += usage.output_tokens
        row.cache_tokens += usage.cache_creation_input_tokens + usage.cache_read_input_tokens
        row.total += usage.total
    for row in rows.values():
        row.by_round = {r: n for r, n in sorted(by_round.get(row.role, {}).items()) if n > 0}
    return sorted(rows.values(), key=lambda r: (-r.total, r.role))


def notes(state: RunState) -> list[str]:
    """What a reader must know before the plots: a live run, no round yet, no winner, no tokens."""
    out = []
    if state.finished is None:
        out.append(
            "This run has not finished: it is still running, or it stopped without finishing "
            "(`evoteam resume RUN` continues it). The report shows what the journal holds so far."
        )
    if not state.rounds_finished:
        out.append("No round has finished yet.")
    if state.best is None:
        out.append("No candidate has passed every workload yet, so there is no winner.")
    if state.spent == 0:
        out.append("No model tokens were spent (the offline team uses no model).")
    return out
