"""Plays one round: each member of the team runs as an agent on a workspace seeded from the best so far.

Protocol ``sequential``: the members run in order on one workspace, so each sees what the ones before it did;
``parallel``: all at once, each on its own copy. A member the supervisor started from another candidate works
on its own copy of that one, with its brief. Then each member that can veto (the Disciplinarian) reviews every
candidate of the round, one at a time: its workspace holds the candidate and its brief the candidate's diff
against its parent (the round's start, or the candidate its role was started from); a veto withdraws that
candidate only. A team told to re-profile gets the round's start profiled first, in every brief. What an agent
does is journaled as it happens: its steps (``agent_event``, by the sink it was built with), its submissions
(``submitted``, with their parent, by the submit tool of its toolbox, before the agent reads the result), its
tokens (``tokens``, by the run's budget) and how it ended (``agent_finished``). An agent the journal says
finished is not run again (a resumed round). Each role spends from its share of the round (``role_shares``): a
call over it is refused, and the agent stops for budget.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from evoteam.gpu_bench.api import (
    BenchInputError,
    Constraints,
    EvaluationStatus,
    KernelTask,
    Solution,
    machine_facts,
)
from evoteam.roles.agent import AgentEvent
from evoteam.roles.agent_api import AgentContext, AgentReport, Assignment, Submission
from evoteam.roles.budget import EvaluationShare, RoleShare, TokenBudget, split, split_whole
from evoteam.roles.builtin import parse_verdict
from evoteam.roles.knowledge import Kind
from evoteam.roles.llm import FatalLLMError
from evoteam.roles.prompt import TaskPrompt, task_prompt
from evoteam.roles.spec import RoleSpec
from evoteam.roles.tools.base import Author, Tool, ToolResult
from evoteam.roles.tools.candidate import kernel_files
from evoteam.roles.tools.evaluation import EvaluationCache, MeteredEvaluate
from evoteam.roles.tools.factory import ToolServices, build_toolbox
from evoteam.roles.tools.history import START, HistoryEntry
from evoteam.roles.tools.profiling import TimingProfiler, render_report
from evoteam.roles.tools.submit import candidate_name
from evoteam.roles.workspace import Workspace
from evoteam.supervisor.events import AgentFinished, AgentStep, Submitted
from evoteam.supervisor.evidence import source_diff
from evoteam.supervisor.reporting import step_line, submitted_line
from evoteam.supervisor.services import RunContext
from evoteam.supervisor.state import START_ID, Candidate, RunState
from evoteam.supervisor.team import Team


def candidate_id(round_number: int, agent: str, solution: Solution) -> str:
    """The journal's id of a submission: the name the submit tool gave it (``candidate_name``)."""
    return candidate_name(round_number, agent, solution)


def play_round(run: RunContext, number: int, team: Team, budget: TokenBudget, cache: EvaluationCache) -> None:
    """Runs every member of ``team`` that has not finished round ``number`` yet."""
    state = run.log.state
    start = state.candidates[state.best].sha if state.best and state.candidates[state.best].sha else state.base
    assert start is not None
    folder = run.folder / "rounds" / f"{number:02d}"
    definition = run.task.load_definition()
    constraints = merged_constraints(run.task, team)
    workloads = run.task.load_workloads()

    def prompt() -> TaskPrompt:
        """The task as an agent starting now gets it: what the team knows is read again for each agent."""
        return task_prompt(
            run.task,
            definition,
            workloads,
            run.knowledge.summary(),
            constraints,
            machine=machine_text(state.config.runner if state.config is not None else "local"),
            incumbent=incumbent_text(state),
            build=run.services.build,
        )

    parent = parent_solution(state) if state.best is not None else None  # else the start, the cache's incumbent
    tools = ToolServices(
        definition=definition,
        evaluations=cache,
        knowledge=run.knowledge,
        constraints=constraints,
        parent=parent,
        require_citations=team.require_citations,
        history=RunHistory(run),
    )
    profiled = reprofile(run, number, cache) if team.reprofile else ""
    starts = {role: state.candidates[c].sha for role, c in team.starts.items() if state.candidates[c].sha is not None}
    members = [(i, run.services.roles[name]) for i, name in enumerate(team.roles) if name in run.services.roles]
    shares = role_shares(state, team, budget, number, [role for _, role in members])
    metered = evaluation_shares(state, team, number, [role for _, role in members])
    makers = [(i, role) for i, role in members if not role.can_veto]
    reviewers = [(i, role) for i, role in members if role.can_veto]
    shared = seed_workspace(run, folder / "team", start) if team.protocol == "sequential" else None

    def play(index: int, role: RoleSpec, review: Candidate | None = None) -> None:
        agent_id = f"{_slug(role.name)}-{index}" + (f"-on-{review.id}" if review else "")
        if (number, agent_id) in state.finished_agents:
            return
        # the brief as of now: a later agent of a sequential round sees the best and the hand-off so far
        brief = "\n".join(part for part in (round_brief(state, team), profiled, handoff(state, number)) if part)
        if review is not None:
            workspace = seed_candidate(run, folder / agent_id, _parent_commit(state, review, start), review)
            given = f"{brief}\n\n{review_brief(state, review)}".strip()
        else:
            own = starts.get(role.name)
            if own is not None:
                workspace = seed_workspace(run, folder / agent_id, own)
            else:
                workspace = shared if shared is not None else seed_workspace(run, folder / agent_id, start)
            given = "\n".join(part for part in (brief, role_brief(team, role.name)) if part)
        author = Author(role=role.name, agent_id=agent_id, round=number)
        made: list[Submission] = []
        toolbox = build_toolbox(run.task, workspace, tools, author, made).only(role.tools)
        parent_id = (
            (team.starts[role.name] if role.name in starts and review is None else None) or state.best or START_ID
        )
        toolbox = toolbox.wrapped("submit_candidate", lambda tool: JournaledSubmit(tool, made, run, number, parent_id))
        evaluations = metered.get(role.name)
        if evaluations is not None:
            toolbox = toolbox.wrapped("evaluate", lambda tool: MeteredEvaluate(tool, evaluations))
        turns = {} if state.config is None or state.config.max_turns is None else {"max_turns": state.config.max_turns}
        rounds = state.config.rounds if state.config is not None else 0
        assignment = Assignment(
            role=role, agent_id=agent_id, kernel=run.task.name, round=number, rounds=rounds, brief=given, **turns
        )
        context = AgentContext(
            assignment=assignment,
            workspace=workspace,
            toolbox=toolbox,
            budget=shares[role.name],
            submissions=made,
            task=prompt(),
            evaluations=evaluations.remaining if evaluations is not None else None,
        )
        report = _run_agent(run, role, number, index, context)
        verdict = parse_verdict(report.final_text) if role.can_veto else None
        veto = (verdict.reason or "veto") if verdict is not None and verdict.decision == "veto" else None
        run.log.record(
            AgentFinished(
                round=number,
                agent=agent_id,
                role=role.name,
                stop=report.stop,
                error=report.error,
                submissions=len(report.submissions),
                summary=report.final_text[:500],
                veto=veto,
                reviewed=review.id if review is not None else None,
            )
        )

    if team.protocol == "sequential":
        for index, role in makers:
            if run.halted():
                break
            play(index, role)
    else:
        threads = [threading.Thread(target=play, args=m, daemon=True) for m in makers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for candidate in state.round_candidates(number) if reviewers else []:
        for index, role in reviewers:
            if not run.halted():
                play(index, role, candidate)


@functools.cache
def machine_text(runner: str) -> str:
    """The facts of the machine candidates run on: this one for the local runner (read once per process);
    a remote runner's machine is not this one, so it is not described by this one's facts."""
    if runner != "local":
        return f"candidates run through the runner {runner}; that machine's facts are not gathered here"
    return machine_facts().text()


def incumbent_text(state: RunState) -> str:
    """What the round's candidates are timed against, in words."""
    if state.start is not None and state.start.status != EvaluationStatus.PASSED:
        return "the task's baseline (the start kernel fails its own evaluation, so it cannot be the incumbent)"
    return "the start kernel (r00-start: the kernel files as the run found them)"


def role_shares(
    state: RunState, team: Team, budget: TokenBudget, number: int, roles: list[RoleSpec]
) -> dict[str, RoleShare]:
    """Each role's share of what round ``number`` started with (the tokens left now plus what the round spent
    before a resume), in proportion to its weight: the team's override (``Team.budget_shares``, which the
    supervisor moves), else the role's own (``RoleSpec.budget_share``). What a role spent in the round before a
    resume counts against its share."""
    spent = {role: n for (r, role), n in state.role_tokens.items() if r == number}
    pool = budget.remaining + sum(spent.values())
    caps = split(pool, {r.name: team.budget_shares.get(r.name, r.budget_share) for r in roles})
    return {name: RoleShare(budget, name, cap, spent.get(name, 0)) for name, cap in caps.items()}


def evaluation_shares(state: RunState, team: Team, number: int, roles: list[RoleSpec]) -> dict[str, EvaluationShare]:
    """Each evaluating role's share of round ``number``'s evaluations, when the run has an evaluation budget
    (else none): what the run has left from before this round, divided by the rounds left, split between the
    roles with the ``evaluate`` tool by their weights (as ``role_shares`` splits tokens). What a role evaluated
    in the round before a resume counts against its share; what a round leaves goes to the rounds after it."""
    config = state.config
    if config is None or config.evaluation_budget is None:
        return {}
    evaluating = [r for r in roles if "evaluate" in r.tools]
    if not evaluating:
        return {}
    spent = {role: n for (r, role), n in state.role_evaluations.items() if r == number}
    before = state.evaluations - sum(spent.values())
    rounds_left = max(1, config.rounds - len([r for r in state.rounds_finished if r.round < number]))
    pool = max(0, config.evaluation_budget - before) // rounds_left
    caps = split_whole(pool, {r.name: team.budget_shares.get(r.name, r.budget_share) for r in evaluating})
    return {name: EvaluationShare(name, cap, spent.get(name, 0)) for name, cap in caps.items()}


def _run_agent(run: RunContext, role: RoleSpec, number: int, index: int, context: AgentContext) -> AgentReport:
    """The agent's report; a role without an agent sits out, and a broken agent ends its turn (the run goes on)."""
    agent = run.services.agents(role, number, index, step_sink(run, number), run.halted)
    a = context.assignment
    if agent is None:
        text = f"{role.name} has no behaviour with this backend; it sat out"
        return AgentReport(role=role.name, agent_id=a.agent_id, stop="end_turn", final_text=text)
    try:
        return agent.run(context)
    except FatalLLMError as exc:  # no agent's call can succeed: the run stops after this round's commits
        run.fault.set(str(exc))
        return AgentReport(role=role.name, agent_id=a.agent_id, stop="llm_error", error=str(exc))
    except Exception as exc:
        return AgentReport(role=role.name, agent_id=a.agent_id, stop="llm_error", error=repr(exc))


def step_sink(run: RunContext, number: int) -> Callable[[AgentEvent], None]:
    """Where an agent of round ``number`` reports its steps: journaled, and its tool calls shown."""

    def sink(event: AgentEvent) -> None:
        step = AgentStep.of(number, event)
        run.log.record(step)
        line = step_line(step)
        if line is not None:
            run.reporter.activity(line)

    return sink


class RunHistory:
    """The run's candidates for the agents' history and diff tools, read from a snapshot of the run's state at
    each call (agents of the round see the candidates submitted before they ask)."""

    def __init__(self, run: RunContext) -> None:
        self.run = run

    def entries(self) -> list[HistoryEntry]:
        state = self.run.log.snapshot()
        out = []
        for c in sorted(state.candidates.values(), key=lambda c: (c.round, c.id)):
            r = c.record
            out.append(
                HistoryEntry(
                    id=c.id,
                    round=c.round,
                    role=c.role,
                    parent=c.parent,
                    status=r.status.value if r is not None else None,
                    speedup=r.geomean_speedup if r is not None else None,
                    ci=r.geomean_ci if r is not None else None,
                    best=c.id == state.best,
                    vetoed=bool(r is not None and r.vetoed),
                    rationale=c.rationale,
                )
            )
        return out

    def files(self, version: str) -> dict[str, str] | None:
        state = self.run.log.snapshot()
        if version in (START, START_ID):
            solution = state.start_solution
        else:
            candidate = state.candidates.get(version)
            solution = candidate.solution if candidate is not None else None
        if solution is None:
            return None
        return {str(s["path"]): str(s["content"]) for s in solution.get("sources", [])}


class JournaledSubmit:
    """An agent's submit tool for one round: what the tool submits is journaled (``submitted``; a candidate
    known already, as a re-run after a resume makes it, once) before the agent reads the result."""

    def __init__(self, tool: Tool, made: list[Submission], run: RunContext, number: int, parent: str) -> None:
        self.tool, self.made, self.run_context, self.number, self.parent = tool, made, run, number, parent
        self.name, self.description = tool.name, tool.description
        self.input_model: type[BaseModel] = tool.input_model

    def run(self, args: Any) -> ToolResult:
        before = len(self.made)
        result = self.tool.run(args)
        for submission in self.made[before:]:
            event = Submitted(
                id=candidate_id(self.number, submission.agent_id, submission.solution),
                round=self.number,
                role=submission.role,
                agent=submission.agent_id,
                rationale=submission.rationale,
                solution=submission.solution.model_dump(mode="json"),
                parent=self.parent,
            )
            if self.run_context.log.record_submission(event):
                self.run_context.reporter.activity(submitted_line(event))
        return result


def role_brief(team: Team, role: str) -> str:
    """What the supervisor asked of this role: its brief, and the candidate it starts from."""
    lines = []
    if role in team.briefs:
        lines.append(f"Your brief from the supervisor: {team.briefs[role]}")
    if role in team.starts:
        lines.append(
            f"The supervisor started you from candidate {team.starts[role]} (your workspace holds it), not from "
            "the best: see its evaluation before you change it."
        )
    return "\n".join(lines)


HANDOFF_CHARS = 500
"""How much of an agent's last words the next agent is given (what the journal keeps of them)."""


def handoff(state: RunState, number: int) -> str:
    """What the agents before this one said when they stopped: the last one of round ``number`` (a sequential
    team's previous member), else the last three of the round before. Reviews are not hand-offs."""
    done = [a for a in state.round_agents.get(number, []) if a.reviewed is None][-1:]
    if not done and number > 1:
        done = [a for a in state.round_agents.get(number - 1, []) if a.reviewed is None][-3:]
    lines = []
    for agent in done:
        made = [_made(c) for c in state.round_candidates(agent.round) if c.agent == agent.agent]
        words = " ".join(agent.summary.split())[:HANDOFF_CHARS] or "(nothing)"
        lines.append(
            f"- {agent.role} ({agent.agent}, round {agent.round}) stopped ({agent.stop}); submitted: "
            f"{', '.join(made) or 'nothing'}. Its last words: {words}"
        )
    return "Hand-off from the agent(s) before you:\n" + "\n".join(lines) if lines else ""


def _made(candidate: Candidate) -> str:
    record = candidate.record
    if record is None:
        return f"{candidate.id} (not evaluated yet)"
    speed = f" {record.geomean_speedup:.3f}x" if record.geomean_speedup is not None else ""
    return f"{candidate.id} ({record.status.value}{speed})"


def round_brief(state: RunState, team: Team) -> str:
    lines = []
    if state.best_speedup is not None:
        lines.append(f"Best so far: {state.best} at {state.best_speedup:.3f}x geomean (your workspace holds it).")
    if state.decisions:
        lines.append(state.decisions[-1].note())
    if team.constraints.require or team.constraints.forbid:
        lines.append(
            f"Constraints set by the supervisor: require {team.constraints.require}, forbid {team.constraints.forbid}."
        )
    return "\n".join(lines)


PROFILE_LIMIT = 4_000
"""Characters of a re-profile a round brief holds."""


def reprofile(run: RunContext, number: int, cache: EvaluationCache) -> str:
    """Profiles the round's start (the best, or the start kernel) for a team the supervisor asked to: the
    profile, for every member's brief, also kept in the knowledge store as a hardware observation (once per
    round, a resumed round included)."""
    state = run.log.state
    start = parent_solution(state)
    if start is None:
        return ""
    which = state.best or START_ID
    try:
        report = TimingProfiler(cache).profile(start)
    except BenchInputError as exc:
        return f"The supervisor asked for a profile of {which}; it could not be made: {exc}"
    text = render_report(report)
    title = f"re-profile of {which} before round {number}"
    if not any(e.title == title for e in run.knowledge.entries(raw=True)):
        run.knowledge.add(Kind.HARDWARE, title, text, role="Supervisor", round=number)
    shown = text if len(text) <= PROFILE_LIMIT else text[:PROFILE_LIMIT] + "\n... (cut)"
    return f"The supervisor had the round's start ({which}) profiled before this round:\n{shown}"


DIFF_LIMIT = 12_000
"""Characters of a candidate's diff a review brief holds; a longer diff is cut and says so."""


def _parent_commit(state: RunState, candidate: Candidate, start: str) -> str:
    """The commit a candidate was made from: its parent's, else the round's start (commit ``start``)."""
    parent = state.candidates.get(candidate.parent or "")
    return parent.sha if parent is not None and parent.sha is not None else start


def parent_solution(state: RunState) -> Solution | None:
    """The round's start as a solution: the best candidate, else the start kernel."""
    found = state.candidates[state.best].solution if state.best is not None else state.start_solution
    return Solution.model_validate(found) if found is not None else None


def review_brief(state: RunState, candidate: Candidate) -> str:
    """What a reviewer is given about one candidate: its id, author and rationale, and its unified diff
    against the solution it was made from (``RunState.made_from``), build settings included."""
    before = state.made_from(candidate)
    lines = source_diff(before, candidate.solution)
    if before is not None:
        before_spec, after_spec = before.get("spec", {}), candidate.solution.get("spec", {})
        lines += [
            f"build setting {key}: {json.dumps(before_spec.get(key))} -> {json.dumps(value)}"
            for key, value in after_spec.items()
            if before_spec.get(key) != value
        ]
    unchanged = "(no change: the candidate's files and build settings are its parent's)\n"
    diff = "".join(f"{line}\n" for line in lines) or unchanged
    if len(diff) > DIFF_LIMIT:
        diff = diff[:DIFF_LIMIT] + f"\n... (cut: the diff has {len(diff)} characters)\n"
    parent = candidate.parent or START_ID
    return (
        f"Review candidate {candidate.id} (by {candidate.role}): {candidate.rationale}\n"
        f"Your workspace holds it. Its diff against its parent ({parent}):\n"
        f"```diff\n{diff}```\n"
        "A veto withdraws this candidate only."
    )


def seed_candidate(run: RunContext, root: Path, parent: str, candidate: Candidate) -> Workspace:
    """A workspace at ``root`` holding the candidate's files (its parent's where it has none)."""
    workspace = seed_workspace(run, root, parent)
    for source in Solution.model_validate(candidate.solution).sources:
        if source.path in kernel_files(run.task):
            (root / source.path).write_text(source.content)
    return workspace


def merged_constraints(task: KernelTask, team: Team) -> Constraints:
    """The task's constraints plus the ones the supervisor set for the team."""
    c = task.constraints
    return c.model_copy(
        update={
            "require": [*c.require, *(r for r in team.constraints.require if r not in c.require)],
            "forbid": [*c.forbid, *(f for f in team.constraints.forbid if f not in c.forbid)],
        }
    )


def seed_workspace(run: RunContext, root: Path, sha: str) -> Workspace:
    """A workspace at ``root`` holding the kernel files as commit ``sha`` has them."""
    root.mkdir(parents=True, exist_ok=True)
    for name, path in zip(kernel_files(run.task), run.paths(), strict=True):
        (root / name).write_bytes(run.store.read(sha, path))
    return Workspace(root)


def _slug(name: str) -> str:
    return "-".join(name.lower().split())
