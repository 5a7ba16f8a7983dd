"""The journal's event kinds: one pydantic model per kind, one discriminated union (``Event``) over them.

This is the only definition of what a journal line may say; the supervisor writes these models, and every
reader (the supervisor's fold, ``evoteam show`` and ``report``, the language server's incremental fold) reads
them back through ``parse_event``. Events are facts: frozen once made. A change under which journals already
written would not parse (a field removed, renamed or made required) is a new journal format version
(``journal.FORMAT_VERSION``); a new field with a default is not (older journals read as before).

Kinds, in the order a round writes them: ``run_started`` (the config), ``base`` (its commit), ``start`` (the
start kernel as the incumbent, and its record against the task's baseline), ``round_started``
(round, team), ``agent_event`` (a turn or tool call, summarized), ``tokens`` (role, agent, usage; they count in
the round last started), ``submitted`` (a candidate: id, round, role, agent, rationale, solution),
``agent_finished`` (how an agent's turn ended, its veto), ``evaluated`` (the candidate's record), ``committed``
(its commit), ``best`` (the new best), ``decision`` (a ``SupervisorDecision``), ``team`` (the next round's),
``round_finished`` (the round's record), ``run_finished`` (why it stopped).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from evoteam.roles.agent import AgentEvent
from evoteam.roles.agent_api import StopReason as AgentStop
from evoteam.roles.llm import Usage
from evoteam.supervisor.config import RunConfig, StopReason
from evoteam.supervisor.decision import SupervisorDecision
from evoteam.supervisor.records import CandidateRecord, RoundRecord
from evoteam.supervisor.team import Team


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunStarted(_Event):
    kind: Literal["run_started"] = "run_started"
    config: RunConfig


class BaseCommitted(_Event):
    """The run's base commit: the kernel files as they were when it started."""

    kind: Literal["base"] = "base"
    sha: str


class StartEvaluated(_Event):
    """The start kernel (the base's files), the run's incumbent: its solution, which every candidate is timed
    against, and its own record against the task's baseline (id ``r00-start``)."""

    kind: Literal["start"] = "start"
    solution: dict[str, Any]
    record: CandidateRecord


class RoundStarted(_Event):
    kind: Literal["round_started"] = "round_started"
    round: int = Field(ge=1)
    team: Team


class AgentStep(_Event):
    """One thing an agent did (a model call, a tool call, its stop), without the payloads a long run would pile
    up in the journal (the tool's structured data, the call's usage: ``tokens`` events carry that)."""

    kind: Literal["agent_event"] = "agent_event"
    round: int
    step: Literal["turn", "tool", "stop"]
    role: str
    agent_id: str
    turn: int
    stop_reason: str | None = None
    tool: str | None = None
    input: str = ""
    is_error: bool = False
    result: str = ""
    stop: AgentStop | None = None
    error: str | None = None

    @classmethod
    def of(cls, round_number: int, event: AgentEvent) -> AgentStep:
        fields = event.model_dump(mode="json", exclude={"data", "usage", "kind"})
        return cls(round=round_number, step=event.kind, **fields)


class TokensSpent(_Event):
    """A model call charged to the budget; it counts in the round last started."""

    kind: Literal["tokens"] = "tokens"
    role: str
    agent: str
    model: str = ""
    usage: Usage


class Submitted(_Event):
    kind: Literal["submitted"] = "submitted"
    id: str
    round: int = Field(ge=1)
    role: str
    agent: str
    rationale: str
    solution: dict[str, Any]
    """The candidate's ``Solution`` as JSON (validated where it is built or evaluated, not on every read)."""
    parent: str | None = None
    """The candidate its round started from (the best so far), or ``r00-start``; None in older journals."""


class AgentFinished(_Event):
    kind: Literal["agent_finished"] = "agent_finished"
    round: int = Field(ge=1)
    agent: str
    role: str
    stop: AgentStop
    error: str | None = None
    submissions: int = 0
    summary: str = ""
    """The start of the agent's final text."""
    veto: str | None = None
    """A Disciplinarian's veto (its reason): the candidate it reviewed is withdrawn (in journals from before
    reviews named their candidate, every candidate of the round)."""
    reviewed: str | None = None
    """The candidate a reviewing role (one that can veto) was given, with its diff against its parent."""


class Evaluated(_Event):
    kind: Literal["evaluated"] = "evaluated"
    record: CandidateRecord


class Committed(_Event):
    kind: Literal["committed"] = "committed"
    id: str
    sha: str


class Retimed(_Event):
    """A contender for best timed again against the start (a fresh evaluation): its record now holds those
    figures, with the first measurement's geomean in ``retimed_from``."""

    kind: Literal["retimed"] = "retimed"
    record: CandidateRecord


class BestMoved(_Event):
    kind: Literal["best"] = "best"
    id: str
    sha: str
    speedup: float | None


class DecisionMade(_Event):
    kind: Literal["decision"] = "decision"
    decision: SupervisorDecision


class TeamChanged(_Event):
    """The team of the next round (after a decision was applied)."""

    kind: Literal["team"] = "team"
    team: Team


class RoundFinished(_Event):
    kind: Literal["round_finished"] = "round_finished"
    record: RoundRecord


class RunFinished(_Event):
    kind: Literal["run_finished"] = "run_finished"
    reason: StopReason
    best: str | None = None
    error: str | None = None
    """Reason ``error``: what stopped the run (a model error no retry could fix, such as a refused key)."""


Event = Annotated[
    RunStarted
    | BaseCommitted
    | StartEvaluated
    | RoundStarted
    | AgentStep
    | TokensSpent
    | Submitted
    | AgentFinished
    | Evaluated
    | Committed
    | Retimed
    | BestMoved
    | DecisionMade
    | TeamChanged
    | RoundFinished
    | RunFinished,
    Field(discriminator="kind"),
]
"""Any journal event; ``event.kind`` says which."""

EVENT: TypeAdapter[Event] = TypeAdapter(Event)
KINDS: tuple[str, ...] = tuple(
    t.model_fields["kind"].default
    for t in (
        RunStarted,
        BaseCommitted,
        StartEvaluated,
        RoundStarted,
        AgentStep,
        TokensSpent,
        Submitted,
        AgentFinished,
        Evaluated,
        Committed,
        BestMoved,
        DecisionMade,
        TeamChanged,
        RoundFinished,
        RunFinished,
    )
)


def parse_event(kind: str, data: Mapping[str, Any]) -> Event:
    """The event of kind ``kind`` with the fields ``data`` (a journal line's ``kind`` and ``data``); raises
    pydantic's ValidationError for an unknown kind or fields that do not fit it."""
    return EVENT.validate_python({**data, "kind": kind})


def payload(event: Event) -> dict[str, Any]:
    """The event's fields as JSON values, without its kind (a journal line's ``data``)."""
    return event.model_dump(mode="json", by_alias=True, exclude={"kind"})
