"""What the supervisor is shown after a round: evidence items, each with an id a decision's actions cite.

Items (ids in brackets): the round and what is left of the run (``budget``); the incumbent and each candidate
of the round with their speedups over the start, per workload too, with intervals and status reasons, its
diff against its parent summarized, its compiled facts (instruction classes, downgrades, registers, spills)
and verdicts (``candidate:<id>``, ``best``); each agent's turn: how it ended, its summary, the tools it used,
its tokens, a veto (``agent:<round>/<agent>``); the signals (``signal:<name>``); the knowledge notes the round
added, with the start of their body (a profile's counters are in a hardware note) (``note:<id>``); earlier
rounds in one line each (``round:<n>``); the role catalog, with each role's budget share (``role:<name>``).
``render`` fits the JSON into a character budget, cutting detail in a fixed order (per-workload rows, diffs,
summaries); the ids stay.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evoteam.roles.knowledge import Entry
from evoteam.roles.spec import RoleSpec
from evoteam.supervisor.events import AgentFinished
from evoteam.supervisor.records import CandidateRecord, RoundRecord
from evoteam.supervisor.signals import Signal, signal_id
from evoteam.supervisor.state import Candidate, RunState
from evoteam.supervisor.team import Team

ItemKind = Literal["budget", "best", "candidate", "agent", "signal", "note", "round", "role"]
DIFF_LINES = 24
"""Changed lines of a candidate's diff an item keeps (the first ones); the counts cover all of them."""
EVIDENCE_CHARS = 24_000
"""The default budget of the rendered evidence, in characters."""


class EvidenceItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    kind: ItemKind
    facts: dict[str, Any] = Field(default_factory=dict)


class RoundEvidence(BaseModel):
    model_config = ConfigDict(extra="forbid")
    round: int
    team: Team
    items: list[EvidenceItem]

    def ids(self) -> set[str]:
        return {item.id for item in self.items}

    def render(self, limit: int = EVIDENCE_CHARS) -> str:
        """The evidence as JSON within ``limit`` characters: per-workload rows go first (the five slowest
        stay), then diff lines, then summaries are shortened; every id stays."""
        for cut in range(4):
            text = json.dumps(self._cut(cut).model_dump(mode="json"), indent=None, ensure_ascii=False)
            if len(text) <= limit:
                return text
        return text

    def _cut(self, level: int) -> RoundEvidence:
        if level == 0:
            return self
        items = []
        for item in self.items:
            facts = dict(item.facts)
            if "workloads" in facts:
                rows = sorted(facts["workloads"], key=lambda w: w.get("speedup") or 0.0)
                facts["workloads"] = rows[:5] if level >= 1 else rows
            if level >= 2 and "diff" in facts:
                facts["diff"] = facts["diff"][:6]
            if level >= 3:
                for key in ("summary", "description", "rationale", "body"):
                    if isinstance(facts.get(key), str):
                        facts[key] = facts[key][:80]
            items.append(item.model_copy(update={"facts": facts}))
        return self.model_copy(update={"items": items})


def round_evidence(
    state: RunState,
    number: int,
    record: RoundRecord,
    found: Iterable[Signal],
    notes: Iterable[Entry],
    roles: Mapping[str, RoleSpec],
    budget_left: int,
) -> RoundEvidence:
    """The evidence after round ``number`` (``record``); ``notes`` are the knowledge store's entries."""
    assert state.config is not None
    team = state.round_teams[number]
    items = [
        EvidenceItem(
            id="budget",
            kind="budget",
            facts={
                "round": number,
                "rounds_left": max(0, state.config.rounds - number),
                "tokens_left": budget_left,
                "tokens_this_round": record.tokens,
            }
            | _evaluations(state, number),
        )
    ]
    best = state.candidates[state.best].record if state.best is not None else state.start
    if best is not None:
        facts = _candidate_facts(best)
        facts["which"] = "the best so far" if state.best is not None else "the start kernel (no best yet)"
        items.append(EvidenceItem(id="best", kind="best", facts=facts))
    for candidate in state.round_candidates(number):
        if candidate.record is None:
            continue
        facts = _candidate_facts(candidate.record)
        facts["parent"] = candidate.parent
        facts["diff"], facts["lines_added"], facts["lines_removed"] = _diff(state, candidate)
        items.append(EvidenceItem(id=f"candidate:{candidate.id}", kind="candidate", facts=facts))
    items += _agents(state, number)
    items += [EvidenceItem(id=signal_id(s), kind="signal", facts=s.model_dump(mode="json")) for s in found]
    items += [
        EvidenceItem(
            id=f"note:{e.id}",
            kind="note",
            facts={
                "kind": e.kind.value,
                "title": e.title,
                "role": e.role,
                "evidence": e.evidence.text() if e.evidence else "",
                "body": e.body[:600],  # a hardware note's body holds the profile's counters
            },
        )
        for e in notes
        if e.round == number and e.role != "Supervisor"
    ]
    items += [
        EvidenceItem(
            id=f"round:{r.round}",
            kind="round",
            facts={
                "roles": r.roles,
                "protocol": r.protocol,
                "candidates": len(r.candidates),
                "best_geomean": r.best(),
                "decision": d.note() if (d := state.decision_after(r.round)) is not None else None,
            },
        )
        for r in state.rounds_finished
    ]
    items += [
        EvidenceItem(
            id=f"role:{name}",
            kind="role",
            facts={
                "description": spec.description,
                "tools": spec.tools,
                "can_veto": spec.can_veto,
                "in_team": name in team.roles,
                "budget_share": team.budget_shares.get(name, spec.budget_share),
            },
        )
        for name, spec in roles.items()
    ]
    return RoundEvidence(round=number, team=team, items=items)


def _evaluations(state: RunState, number: int) -> dict[str, Any]:
    """The run's evaluation budget, when it has one: what is left, and what the round used per role."""
    assert state.config is not None
    if state.config.evaluation_budget is None:
        return {}
    used = {role: n for (r, role), n in state.role_evaluations.items() if r == number}
    return {"evaluations_left": max(0, state.config.evaluation_budget - state.evaluations), "evaluations_by_role": used}


def _candidate_facts(record: CandidateRecord) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "role": record.role,
        "status": record.status.value,
        "speedup_over_start": record.geomean_speedup,
        "ci": record.geomean_ci,
        "faster": f"{record.faster}/{record.total}",
        "rationale": record.rationale[:300],
        "workloads": [
            {"name": w.name, "status": w.status.value, "speedup": w.speedup, "ci": w.ci}
            | ({"reason": w.reason} if w.reason else {})
            for w in record.workloads
        ],
    }
    optional = {
        "retimed_from": record.retimed_from,
        "instruction_classes": record.instruction_classes,
        "downgrades": record.downgrades,
        "registers": record.registers,
        "spill_bytes": record.spill_bytes,
        "violations": record.violations,
        "vetoed": record.vetoed,
        "known_failure": record.known_failure,
    }
    facts.update({k: v for k, v in optional.items() if v})
    return facts


def source_diff(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> list[str]:
    """The unified diff (``a/`` and ``b/`` headers, lines without their ends) of two journaled solutions'
    sources; ``before`` None: every line added."""
    old = {s["path"]: s["content"] for s in (before or {}).get("sources", [])}
    lines: list[str] = []
    for source in after.get("sources", []):
        path, content = source["path"], source["content"]
        old_lines, new_lines = old.get(path, "").splitlines(), content.splitlines()
        lines += difflib.unified_diff(old_lines, new_lines, f"a/{path}", f"b/{path}", lineterm="")
    return lines


def _diff(state: RunState, candidate: Candidate) -> tuple[list[str], int, int]:
    """The first changed lines of the candidate against its parent, and how many lines it adds and removes."""
    before = state.made_from(candidate)
    if before is None:
        return [], 0, 0
    lines = source_diff(before, candidate.solution)
    changed = [ln for ln in lines if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---"))]
    added = sum(1 for ln in changed if ln.startswith("+"))
    return changed[:DIFF_LINES], added, len(changed) - added


PRODUCTIVE_TOOLS = frozenset({"profile", "write_note", "submit_candidate"})
"""Tools whose use leaves evidence behind (a profile the round records, a note, a candidate): a role whose agents
used none of them (and reviewed nothing) idled. A compile or an evaluation whose result the agent kept to
itself leaves none: every candidate is evaluated by the harness anyway."""


def idle_roles(state: RunState, number: int) -> list[str]:
    """The roles of round ``number`` that added nothing, in team order: every agent of the role reviewed
    nothing, made no new candidate (a submission with its parent's content adds nothing), and, when it
    submitted nothing at all, used none of the ``PRODUCTIVE_TOOLS``; roles that sat out included."""
    idle = []
    for role in state.round_teams[number].roles:
        agents = [a for a in state.round_agents.get(number, []) if a.role == role]
        if agents and all(_added_nothing(state, number, a) for a in agents):
            idle.append(role)
    return idle


def _added_nothing(state: RunState, number: int, finished: AgentFinished) -> bool:
    if finished.reviewed is not None:
        return False
    made = [c for c in state.round_candidates(number) if c.agent == finished.agent]
    if made:
        return not any(_is_new(state, c) for c in made)
    return finished.submissions == 0 and not set(state.agent_tools.get((number, finished.agent), {})) & PRODUCTIVE_TOOLS


def _is_new(state: RunState, candidate: Candidate) -> bool:
    """Whether the candidate's content differs from its parent's (the start's where no parent was journaled)."""
    before = state.made_from(candidate)
    return before is None or _content(candidate.solution) != _content(before)


def _content(solution: Mapping[str, Any]) -> str:
    """What makes a solution's build: its sources and build spec (not its name or author)."""
    return json.dumps([solution.get("sources"), solution.get("spec")], sort_keys=True)


def _agents(state: RunState, number: int) -> list[EvidenceItem]:
    items = []
    for finished in state.round_agents.get(number, []):
        facts: dict[str, Any] = {
            "role": finished.role,
            "stop": finished.stop,
            "submissions": finished.submissions,
            "summary": finished.summary[:300],
            "tools": dict(state.agent_tools.get((number, finished.agent), {})),
            "tokens": state.agent_tokens.get((number, finished.agent), 0),
        }
        optional = (("error", finished.error), ("veto", finished.veto), ("reviewed", finished.reviewed))
        facts.update({k: v for k, v in optional if v})
        items.append(EvidenceItem(id=f"agent:{number}/{finished.agent}", kind="agent", facts=facts))
    return items
