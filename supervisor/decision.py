"""``SupervisorDecision``: what the supervisor changes about the team after a round, why, and on what evidence.

A decision is a list of actions (add, remove or replace a role, change the protocol, set or lift a constraint,
move budget between roles, brief a role, start a role from a chosen candidate, profile before the next round,
act on knowledge notes), the signals it answers with
their evidence, and a rationale. ``apply`` turns the current team into the next one and refuses actions that
make no sense (removing the last role, a role that is not there, a constraint no PTX or SASS could tell apart,
a start from a candidate that does not exist). Decisions are shown to users as role notes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from evoteam.gpu_bench.api import checkable
from evoteam.supervisor.signals import Signal
from evoteam.supervisor.team import Protocol, Team


class DecisionError(ValueError):
    """An action that cannot be applied to the team; the message says which and why."""


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cites: list[str] = Field(default_factory=list)
    """The evidence ids it rests on (``supervisor/evidence.py``: ``signal:plateau``, ``candidate:r02-...``); a
    model supervisor's action must cite at least one, and only ids it was shown."""


class AddRole(_Action):
    action: Literal["add_role"] = "add_role"
    role: str
    before: str | None = None
    """Insert before this role (pipeline order); None: at the end."""


class RemoveRole(_Action):
    action: Literal["remove_role"] = "remove_role"
    role: str


class ReplaceRole(_Action):
    action: Literal["replace_role"] = "replace_role"
    role: str
    by: str


class SetProtocol(_Action):
    action: Literal["set_protocol"] = "set_protocol"
    protocol: Protocol


class SetConstraint(_Action):
    action: Literal["set_constraint"] = "set_constraint"
    require: list[str] = Field(default_factory=list)
    forbid: list[str] = Field(default_factory=list)


class LiftConstraint(_Action):
    action: Literal["lift_constraint"] = "lift_constraint"
    pattern: str


class SetBrief(_Action):
    action: Literal["set_brief"] = "set_brief"
    role: str
    brief: str = Field(max_length=2000)
    """A brief or sub-task for the role from the next round on; empty: none."""


class StartFrom(_Action):
    action: Literal["start_from"] = "start_from"
    role: str
    candidate: str
    """The candidate (committed, failing ones included) the role starts the next round from."""


class RetireNote(_Action):
    action: Literal["retire_note"] = "retire_note"
    note: str
    """A knowledge entry's id: it no longer shows to anyone."""


class QuarantineNote(_Action):
    action: Literal["quarantine_note"] = "quarantine_note"
    note: str
    """A knowledge entry's id: it shows only as quarantined; nobody builds on it or avoids it."""


class PromoteNote(_Action):
    action: Literal["promote_note"] = "promote_note"
    note: str
    candidate: str
    """The candidate whose measurement makes the note a verified strategy: it passed, and its interval over
    the start lies above 1."""


class Reprofile(_Action):
    action: Literal["reprofile"] = "reprofile"


class RequireCitations(_Action):
    action: Literal["require_citations"] = "require_citations"
    on: bool = True


class MoveBudget(_Action):
    action: Literal["move_budget"] = "move_budget"
    source: str = Field(alias="from")
    to: str
    fraction: float = Field(gt=0, lt=1)
    """The part of ``source``'s share that moves to ``to`` (less than all: a role leaves by ``remove_role``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


Action = Annotated[
    AddRole
    | RemoveRole
    | ReplaceRole
    | SetProtocol
    | SetConstraint
    | LiftConstraint
    | MoveBudget
    | SetBrief
    | StartFrom
    | RetireNote
    | QuarantineNote
    | PromoteNote
    | RequireCitations
    | Reprofile,
    Field(discriminator="action"),
]


class SupervisorDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    round: int = Field(ge=0)
    """The round it was made after."""
    signals: list[Signal] = Field(default_factory=list)
    actions: list[Action] = Field(default_factory=list)
    rationale: str = Field(min_length=1)
    source: Literal["rules", "llm", "fixed"] = "rules"
    rejected: list[str] = Field(default_factory=list)
    """Why answers of the model supervisor were refused before this decision (an action citing nothing, an
    unknown evidence id, an action that cannot be applied), oldest first."""

    def note(self) -> str:
        """The role note users see: the rationale, then what changed."""
        changes = "; ".join(describe(a) for a in self.actions) or "team unchanged"
        return f"Supervisor after round {self.round}: {self.rationale} ({changes})"


def describe(action: Action) -> str:
    match action:
        case AddRole(role=role):
            return f"add {role}"
        case RemoveRole(role=role):
            return f"remove {role}"
        case ReplaceRole(role=role, by=by):
            return f"replace {role} by {by}"
        case SetProtocol(protocol=protocol):
            return f"protocol {protocol}"
        case SetConstraint(require=require, forbid=forbid):
            return "constraint " + ", ".join([f"require {r}" for r in require] + [f"forbid {f}" for f in forbid])
        case LiftConstraint(pattern=pattern):
            return f"lift constraint {pattern}"
        case MoveBudget(source=source, to=to, fraction=fraction):
            return f"move {fraction:.0%} of {source}'s budget to {to}"
        case SetBrief(role=role, brief=brief):
            return f"brief {role}: {brief}" if brief else f"clear {role}'s brief"
        case StartFrom(role=role, candidate=candidate):
            return f"{role} starts from {candidate}"
        case RetireNote(note=note):
            return f"retire note {note}"
        case QuarantineNote(note=note):
            return f"quarantine note {note}"
        case PromoteNote(note=note, candidate=candidate):
            return f"promote note {note} to a verified strategy ({candidate})"
        case RequireCitations(on=on):
            return "notes must cite a candidate" if on else "notes need not cite a candidate"
        case Reprofile():
            return "profile the best before the next round"
    raise AssertionError(action)


def apply(
    team: Team,
    decision: SupervisorDecision,
    known_roles: set[str],
    candidates: set[str] | None = None,
    notes: set[str] | None = None,
    verified: set[str] | None = None,
    weights: Mapping[str, float] | None = None,
) -> Team:
    """The team after ``decision``; ``known_roles`` are the role names that can be added (built-in and user),
    ``weights`` their own budget shares (``RoleSpec.budget_share``; 1.0 where not given), from which a moved
    share starts,
    ``candidates`` the committed candidates a role may start from, ``notes`` the knowledge entries' ids,
    ``verified`` the candidates that passed with an interval over the start above 1 (each None: not
    checked). Starting points last one round; briefs stay until changed. Actions on notes change no team:
    ``knowledge_actions`` lists them for the store."""
    roles = list(team.roles)
    protocol = team.protocol
    require, forbid = list(team.constraints.require), list(team.constraints.forbid)
    shares = dict(team.budget_shares)
    briefs, starts = dict(team.briefs), dict[str, str]()
    citations = team.require_citations
    reprofile = False
    for action in decision.actions:
        match action:
            case AddRole(role=role, before=before):
                _known(role, known_roles)
                if role in roles:
                    continue
                index = roles.index(before) if before in roles else len(roles)
                roles.insert(index, role)
            case RemoveRole(role=role):
                if role not in roles:
                    raise DecisionError(f"cannot remove {role}: not in the team {roles}")
                if len(roles) == 1:
                    raise DecisionError(f"cannot remove {role}: it is the last role")
                roles.remove(role)
                shares.pop(role, None)
                briefs.pop(role, None)
                starts.pop(role, None)
            case ReplaceRole(role=role, by=by):
                _known(by, known_roles)
                if role not in roles:
                    raise DecisionError(f"cannot replace {role}: not in the team {roles}")
                roles[roles.index(role)] = by
                shares.pop(role, None)
                briefs.pop(role, None)
                starts.pop(role, None)
            case SetProtocol(protocol=new):
                protocol = new
            case SetConstraint(require=req, forbid=forb):
                for pattern in [*req, *forb]:
                    why = checkable(pattern)
                    if why is not None:
                        raise DecisionError(f"cannot constrain {pattern!r}: {why}")
                require += [r for r in req if r not in require]
                forbid += [f for f in forb if f not in forbid]
            case LiftConstraint(pattern=pattern):
                if pattern not in require and pattern not in forbid:
                    raise DecisionError(f"cannot lift {pattern!r}: the team has no such constraint")
                require = [r for r in require if r != pattern]
                forbid = [f for f in forbid if f != pattern]
            case MoveBudget(source=source, to=to, fraction=fraction):
                if source not in roles or to not in roles:
                    raise DecisionError(f"cannot move budget from {source} to {to}: both must be in the team {roles}")
                own = weights or {}
                moved = shares.get(source, own.get(source, 1.0)) * fraction
                shares[source] = shares.get(source, own.get(source, 1.0)) - moved
                shares[to] = shares.get(to, own.get(to, 1.0)) + moved
            case SetBrief(role=role, brief=brief):
                if role not in roles:
                    raise DecisionError(f"cannot brief {role}: not in the team {roles}")
                if brief.strip():
                    briefs[role] = brief.strip()
                else:
                    briefs.pop(role, None)
            case StartFrom(role=role, candidate=candidate):
                if role not in roles:
                    raise DecisionError(f"cannot start {role} from {candidate}: {role} is not in the team {roles}")
                if candidates is not None and candidate not in candidates:
                    raise DecisionError(f"cannot start {role} from {candidate!r}: no committed candidate has that id")
                starts[role] = candidate
            case RetireNote(note=note) | QuarantineNote(note=note):
                _known_note(note, notes)
            case PromoteNote(note=note, candidate=candidate):
                _known_note(note, notes)
                if verified is not None and candidate not in verified:
                    raise DecisionError(
                        f"cannot promote note {note} on {candidate!r}: it is not a candidate that passed with its "
                        "interval over the start above 1"
                    )
            case RequireCitations(on=on):
                citations = on
            case Reprofile():
                reprofile = True
    constraints = team.constraints.model_copy(update={"require": require, "forbid": forbid})
    return Team(
        roles=roles,
        protocol=protocol,
        constraints=constraints,
        budget_shares=shares,
        briefs=briefs,
        starts=starts,
        require_citations=citations,
        reprofile=reprofile,
    )


def knowledge_actions(decision: SupervisorDecision) -> list[RetireNote | QuarantineNote | PromoteNote]:
    """The decision's actions on knowledge entries, in order."""
    return [a for a in decision.actions if isinstance(a, RetireNote | QuarantineNote | PromoteNote)]


def _known_note(note: str, notes: set[str] | None) -> None:
    if notes is not None and note not in notes:
        raise DecisionError(f"no knowledge note {note!r} (cite the note:<id> items you were shown)")


def _known(role: str, known_roles: set[str]) -> None:
    if role not in known_roles:
        raise DecisionError(f"unknown role {role!r}; roles: {', '.join(sorted(known_roles))}")
