"""A run's configuration and layout, and its state as a fold over the journal (nothing else is kept).

Event kinds: ``run_started`` (the config), ``base`` (sha), ``round_started`` (round, team), ``agent_event`` (a
turn or tool call, summarized), ``tokens`` (role, agent, usage), ``submitted`` (candidate id, round, role,
rationale, solution), ``agent_finished`` (round, agent), ``evaluated`` (candidate record), ``committed``
(candidate, sha), ``best`` (candidate, sha, speedup), ``decision`` (a SupervisorDecision), ``round_finished``,
``run_finished`` (reason).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evoteam.roles.llm import Usage
from evoteam.supervisor.decision import SupervisorDecision
from evoteam.supervisor.journal import Event
from evoteam.supervisor.records import CandidateRecord, RoundRecord
from evoteam.supervisor.team import Team, TeamMode, initial_team

StopReason = Literal["rounds", "budget", "target", "cancelled", "error"]
LlmChoice = Literal["auto", "anthropic", "claude-code", "offline"]


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run: str
    kernel: str
    config: str
    """The evoteam.toml that defines the kernel (absolute)."""
    mode: TeamMode = "evolving"
    rounds: int = Field(default=3, ge=1)
    budget: int = Field(default=200_000, ge=0)
    llm: LlmChoice = "auto"
    runner: str = "local"
    model: str | None = None
    target_speedup: float | None = Field(default=None, gt=0)
    evaluations_per_agent: int = Field(default=6, ge=1)
    """The offline tuner's evaluations per agent and round."""
    seed: int = 0
    unsafe_no_sandbox: bool = False
    """The user let agent-generated code run without the sandbox (``--unsafe-no-sandbox``); resume keeps it."""


def new_run_id(kernel: str, now: datetime | None = None) -> str:
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in kernel)
    return f"{safe}-{stamp}-{secrets.token_hex(2)}"


def state_dir(repo_root: Path) -> Path:
    """``.evoteam/`` of the repository; it ignores itself (``.gitignore`` with ``*``), so ``git status`` of the
    user's repository does not change."""
    path = repo_root / ".evoteam"
    path.mkdir(exist_ok=True)
    ignore = path / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# evoteam's run state and knowledge (not part of your sources)\n*\n")
    return path


def task_config(repo_root: Path, journaled: str | Path) -> Path:
    """The evoteam.toml of a run in ``repo_root``: the journaled (absolute) path, or, for a repository that was
    moved or copied since the run started, the same path below ``repo_root`` (its longest tail that exists)."""
    path = Path(journaled)
    root = repo_root.resolve()
    try:
        path.resolve().relative_to(root)
        return path
    except ValueError:
        pass
    for start in range(1, len(path.parts)):
        moved = root.joinpath(*path.parts[start:])
        if moved.is_file():
            return moved
    return path


def run_dir(repo_root: Path, run: str) -> Path:
    return state_dir(repo_root) / "runs" / run


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


class RunState(BaseModel):
    model_config = ConfigDict(extra="forbid")
    config: RunConfig | None = None
    base: str | None = None
    team: Team | None = None
    rounds_started: list[int] = Field(default_factory=list)
    rounds_finished: list[RoundRecord] = Field(default_factory=list)
    candidates: dict[str, Candidate] = Field(default_factory=dict)
    finished_agents: set[tuple[int, str]] = Field(default_factory=set)
    decisions: list[SupervisorDecision] = Field(default_factory=list)
    tokens: dict[tuple[str, str], Usage] = Field(default_factory=dict)
    best: str | None = None
    best_speedup: float | None = None
    profiled_rounds: set[int] = Field(default_factory=set)
    knowledge_rounds: set[int] = Field(default_factory=set)
    finished: StopReason | None = None

    @property
    def spent(self) -> int:
        return sum(u.total for u in self.tokens.values())

    def round_candidates(self, round_number: int) -> list[Candidate]:
        return [c for c in self.candidates.values() if c.round == round_number]


def fold(events: Iterable[Event]) -> RunState:
    state = RunState()
    for event in events:
        apply(state, event)
    return state


def apply(state: RunState, event: Event) -> None:
    """One event into ``state`` (in place); unknown kinds change nothing."""
    d = event.data
    match event.kind:
        case "run_started":
            state.config = RunConfig.model_validate(d["config"])
            state.team = initial_team(state.config.mode)
        case "base":
            state.base = d["sha"]
        case "round_started":
            state.rounds_started.append(d["round"])
            state.team = Team.model_validate(d["team"])
        case "tokens":
            key = (d["role"], d["agent"])
            state.tokens[key] = state.tokens.get(key, Usage()) + Usage.model_validate(d["usage"])
        case "agent_event":
            if d.get("tool") == "profile" and not d.get("is_error"):
                state.profiled_rounds.add(d["round"])
            if d.get("tool") == "read_knowledge":
                state.knowledge_rounds.add(d["round"])
        case "submitted":
            if d["id"] not in state.candidates:
                state.candidates[d["id"]] = Candidate.model_validate(d)
        case "agent_finished":
            state.finished_agents.add((d["round"], d["agent"]))
        case "evaluated":
            record = CandidateRecord.model_validate(d["record"])
            state.candidates[record.id].record = record
        case "committed":
            state.candidates[d["id"]].sha = d["sha"]
        case "best":
            state.best, state.best_speedup = d["id"], d["speedup"]
        case "decision":
            state.decisions.append(SupervisorDecision.model_validate(d["decision"]))
        case "team":
            state.team = Team.model_validate(d["team"])
        case "round_finished":
            finished = RoundRecord.model_validate(d["record"])
            finished.candidates = [_shared(state, c) for c in finished.candidates]
            state.rounds_finished.append(finished)
        case "run_finished":
            state.finished = d["reason"]


def _shared(state: RunState, record: CandidateRecord) -> CandidateRecord:
    """The candidate's own record when the round's copy equals it (one object for both: a long run's records,
    with their per-workload outcomes, are held once)."""
    known = state.candidates.get(record.id)
    return known.record if known is not None and known.record == record else record
