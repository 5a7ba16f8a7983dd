"""``Supervisor``: runs a team in rounds, evaluates and commits every candidate, and reorganizes the team.

Each step is journaled before the next begins, and every step is idempotent against the journal, so ``run``
after a ``kill -9`` at any point continues where the run stopped: finished agents are not re-run, a candidate
(id = round, agent and content hash) is recorded, evaluated and committed once, decisions are not re-made.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoteam.gpu_bench.api import CandidateResult, EvaluationStatus, KernelTask, Solution
from evoteam.roles.agent import AgentEvent
from evoteam.roles.agent_api import AgentContext, AgentReport, Assignment, Submission
from evoteam.roles.budget import TokenBudget
from evoteam.roles.builtin import builtin_roles, parse_verdict
from evoteam.roles.knowledge import Evidence, Kind, KnowledgeStore
from evoteam.roles.llm import LLM, Usage
from evoteam.roles.prompt import task_prompt
from evoteam.roles.spec import RoleSpec
from evoteam.roles.tools.base import Author
from evoteam.roles.tools.candidate import kernel_files
from evoteam.roles.tools.evaluation import EvaluationCache
from evoteam.roles.tools.factory import ToolServices, build_toolbox
from evoteam.roles.workspace import Workspace
from evoteam.supervisor.agents import AgentFactory
from evoteam.supervisor.decision import apply
from evoteam.supervisor.git_store import GitStore
from evoteam.supervisor.journal import Journal
from evoteam.supervisor.llm_decide import llm_decide
from evoteam.supervisor.lock import KernelLock
from evoteam.supervisor.records import CandidateRecord, RoundRecord, WorkloadOutcome
from evoteam.supervisor.rules import decide
from evoteam.supervisor.signals import signals
from evoteam.supervisor.state import RunConfig, RunState, StopReason, fold, run_dir, state_dir
from evoteam.supervisor.team import Team

DESIGN_CONSTRUCTS = ("wgmma", "tcgen05", "cp.async.bulk", "mma_async", "cuda::pipeline", "__pipeline_memcpy_async")
"""Constructs whose disappearance from a candidate, when the best had them, is a design downgrade."""
MIN_CALL_TOKENS = 2_000
"""Below this many tokens left, a model-backed run stops for budget."""

Evaluations = Callable[[Team], EvaluationCache]
"""The evaluation cache for a team's constraints (one per distinct set, shared by every tool of the run)."""


@dataclass
class RunServices:
    task: KernelTask
    evaluations: Evaluations
    agents: AgentFactory
    supervisor_llm: tuple[LLM, str] | None = None
    """With a model backend the supervisor is a model call; None: the offline rules decide."""
    roles: dict[str, RoleSpec] = field(default_factory=builtin_roles)
    on_change: Callable[[RunState], None] | None = None
    """Called when a round starts, after every round and at the end (the CLI's live view)."""
    on_activity: Callable[[str], None] | None = None
    """Called with one line for each thing an agent does and each evaluation (from any thread)."""


class _JournaledBudget(TokenBudget):
    def __init__(self, total: int, journal: Journal) -> None:
        super().__init__(total)
        self.journal = journal

    def restore(self, usage: Usage, role: str, agent: str) -> None:
        super().charge(usage, role, agent, "")

    def charge(self, usage: Usage, role: str, agent: str, model: str) -> None:
        super().charge(usage, role, agent, model)
        self.journal.append("tokens", {"role": role, "agent": agent, "model": model, "usage": usage.model_dump()})


class _Submissions(list[Submission]):
    """The list a submit tool appends to: each submission is journaled as it is made."""

    def __init__(self, on_submit: Callable[[Submission], None]) -> None:
        super().__init__()
        self._on_submit = on_submit

    def append(self, item: Submission) -> None:
        super().append(item)
        self._on_submit(item)


def candidate_id(round_number: int, agent: str, solution: Solution) -> str:
    return f"r{round_number:02d}-{agent}-{solution.content_hash()[:10]}"


class Supervisor:
    def __init__(self, repo_root: Path, run: str, services: RunServices) -> None:
        self.root = repo_root
        self.dir = run_dir(repo_root, run)
        self.journal = Journal(self.dir / "journal.jsonl")
        self.services = services
        self.task = services.task
        self.git = GitStore(repo_root, run)
        self.knowledge = KnowledgeStore(repo_root, self.task.name)
        self.run_id = run
        self._lock = threading.Lock()

    # -- the run -----------------------------------------------------------------------------------------
    def start(self, config: RunConfig) -> None:
        start_run(self.root, self.task, config)

    def cancel_requested(self) -> bool:
        return (self.dir / "cancel").exists()

    def run(self) -> RunState:
        state = fold(self.journal.events())
        if state.config is None:
            raise RuntimeError(f"run {self.run_id} has no configuration in its journal")
        if state.finished is not None:
            return state
        with KernelLock(state_dir(self.root), self.task.name, self.run_id):
            return self._run(state.config)

    def _run(self, config: RunConfig) -> RunState:
        self._base()
        budget = _JournaledBudget(config.budget, self.journal)
        state = fold(self.journal.events())
        for (role, agent), usage in state.tokens.items():
            budget.restore(usage, role, agent)
        offline = self.services.supervisor_llm is None and config.llm == "offline"
        while True:
            state = fold(self.journal.events())
            reason = self._stop_reason(state, config, budget, offline)
            if reason is not None:
                self.journal.append("run_finished", {"reason": reason, "best": state.best})
                break
            done = {r.round for r in state.rounds_finished}
            round_number = max(done, default=0) + 1
            assert state.team is not None
            if round_number not in state.rounds_started:
                self.journal.append(
                    "round_started", {"round": round_number, "team": state.team.model_dump(mode="json")}
                )
            if self.services.on_change is not None:
                self.services.on_change(fold(self.journal.events()))
            self._round(round_number, state.team, budget)
            self._finish_round(round_number, config, budget)
            if self.services.on_change is not None:
                self.services.on_change(fold(self.journal.events()))
        final = fold(self.journal.events())
        if self.services.on_change is not None:
            self.services.on_change(final)
        return final

    def _stop_reason(self, state: RunState, config: RunConfig, budget: TokenBudget, offline: bool) -> StopReason | None:
        if self.cancel_requested():
            return "cancelled"
        if config.target_speedup is not None and (state.best_speedup or 0) >= config.target_speedup:
            return "target"
        if len(state.rounds_finished) >= config.rounds:
            return "rounds"
        if not offline and budget.remaining < MIN_CALL_TOKENS:
            return "budget"
        if not offline and state.rounds_finished and self._round_refused(state.rounds_finished[-1].round):
            return "budget"  # every agent of the last round was refused: the next round could do no better
        return None

    def _round_refused(self, round_number: int) -> bool:
        """Every agent that played ``round_number`` stopped because the budget could not pay for its call."""
        played = [
            e.data for e in self.journal.events() if e.kind == "agent_finished" and e.data["round"] == round_number
        ]
        return bool(played) and all(d["stop"] == "budget" for d in played)

    # -- git -------------------------------------------------------------------------------------------------
    def _paths(self) -> list[str]:
        return kernel_paths(self.git, self.task)

    def _base(self) -> str:
        return _base(self.root, self.task, self.run_id)

    def _files_of(self, solution: Solution) -> dict[str, bytes]:
        """The solution's sources as repository paths: its entry source is the task's source file."""
        names = dict(zip(kernel_files(self.task), self._paths(), strict=True))
        files: dict[str, bytes] = {}
        for index, source in enumerate(solution.sources):
            path = self._paths()[0] if index == 0 else names.get(source.path)
            if path is not None:
                files[path] = source.content.encode("utf-8")
        return files

    def _seed(self, root: Path, sha: str) -> Workspace:
        root.mkdir(parents=True, exist_ok=True)
        for name, path in zip(kernel_files(self.task), self._paths(), strict=True):
            (root / name).write_bytes(self.git.read(sha, path))
        return Workspace(root)

    # -- a round ---------------------------------------------------------------------------------------------
    def _round(self, round_number: int, team: Team, budget: TokenBudget) -> None:
        state = fold(self.journal.events())
        start = state.candidates[state.best].sha if state.best and state.candidates[state.best].sha else state.base
        assert start is not None
        cache = self.services.evaluations(team)
        definition = self.task.load_definition()
        prompt = task_prompt(
            self.task, definition, self.task.load_workloads(), self.knowledge.summary(), _merged(self.task, team)
        )
        services = ToolServices(
            definition=definition, evaluations=cache, knowledge=self.knowledge, constraints=_merged(self.task, team)
        )
        brief = self._brief(state, team)
        members = [(i, self.services.roles[name]) for i, name in enumerate(team.roles) if name in self.services.roles]
        shared = self._seed(self.dir / "rounds" / f"{round_number:02d}" / "team", start)

        def play(index: int, role: RoleSpec) -> None:
            agent_id = f"{_slug(role.name)}-{index}"
            if (round_number, agent_id) in state.finished_agents:
                return
            workspace = (
                shared
                if team.protocol == "sequential"
                else self._seed(self.dir / "rounds" / f"{round_number:02d}" / agent_id, start)
            )
            author = Author(role=role.name, agent_id=agent_id, round=round_number)
            submissions = _Submissions(lambda s: self._submitted(round_number, s))
            context = AgentContext(
                assignment=Assignment(
                    role=role, agent_id=agent_id, kernel=self.task.name, round=round_number, brief=brief
                ),
                workspace=workspace,
                toolbox=build_toolbox(self.task, workspace, services, author, submissions).only(role.tools),
                budget=budget,
                submissions=submissions,
                task=prompt,
            )
            agent = self.services.agents(role, round_number, index, self._sink(round_number), self.cancel_requested)
            if agent is None:
                report = AgentReport(
                    role=role.name,
                    agent_id=agent_id,
                    stop="end_turn",
                    final_text=f"{role.name} has no behaviour with this backend; it sat out",
                )
            else:
                try:
                    report = agent.run(context)
                except Exception as exc:  # a broken agent ends its turn; the run goes on
                    report = AgentReport(role=role.name, agent_id=agent_id, stop="llm_error", error=repr(exc))
            verdict = parse_verdict(report.final_text) if role.can_veto else None
            self.journal.append(
                "agent_finished",
                {
                    "round": round_number,
                    "agent": agent_id,
                    "role": role.name,
                    "stop": report.stop,
                    "error": report.error,
                    "submissions": len(report.submissions),
                    "summary": report.final_text[:500],
                    "veto": verdict.reason or "veto" if verdict is not None and verdict.decision == "veto" else None,
                },
            )

        if team.protocol == "sequential":
            for index, role in members:
                if self.cancel_requested():
                    break
                play(index, role)
        else:
            threads = [threading.Thread(target=play, args=m, daemon=True) for m in members]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        self._evaluate_and_commit(round_number, team, cache)

    def _brief(self, state: RunState, team: Team) -> str:
        lines = []
        if state.best_speedup is not None:
            lines.append(f"Best so far: {state.best} at {state.best_speedup:.3f}x geomean (your workspace holds it).")
        if state.decisions:
            lines.append(state.decisions[-1].note())
        if team.constraints.require or team.constraints.forbid:
            lines.append(
                f"Constraints set by the supervisor: require {team.constraints.require}, "
                f"forbid {team.constraints.forbid}."
            )
        return "\n".join(lines)

    def _sink(self, round_number: int) -> Callable[[AgentEvent], None]:
        def sink(event: AgentEvent) -> None:
            data: dict[str, Any] = {"round": round_number, **event.model_dump(mode="json", exclude={"data", "usage"})}
            self.journal.append("agent_event", data)
            if event.kind == "tool":
                outcome = ("error: " if event.is_error else "") + event.result
                self._activity(f"{event.role} ({event.agent_id}) {event.tool}: {outcome}"[:200])

        return sink

    def _activity(self, line: str) -> None:
        if self.services.on_activity is not None:
            self.services.on_activity(line)

    def _submitted(self, round_number: int, submission: Submission) -> None:
        cid = candidate_id(round_number, submission.agent_id, submission.solution)
        with self._lock:
            if cid in fold(self.journal.events()).candidates:
                return  # the same content from the same agent (a re-run after resume): recorded once
            self.journal.append(
                "submitted",
                {
                    "id": cid,
                    "round": round_number,
                    "role": submission.role,
                    "agent": submission.agent_id,
                    "rationale": submission.rationale,
                    "solution": submission.solution.model_dump(mode="json"),
                },
            )
        self._activity(f"{submission.role} ({submission.agent_id}) submitted {cid}: {submission.rationale}"[:200])

    def _evaluate_and_commit(self, round_number: int, team: Team, cache: EvaluationCache) -> None:
        state = fold(self.journal.events())
        vetoes = [
            e.data
            for e in self.journal.events()
            if e.kind == "agent_finished" and e.data["round"] == round_number and e.data.get("veto")
        ]
        best_source = self._best_source(state)
        for candidate in state.round_candidates(round_number):
            solution = Solution.model_validate(candidate.solution)
            if candidate.record is None:
                result = cache.evaluate(solution)
                record = _record(candidate.id, round_number, candidate.role, candidate.rationale, result)
                source = "\n".join(s.content for s in solution.sources)
                record.dropped_constructs = [c for c in DESIGN_CONSTRUCTS if c in best_source and c not in source]
                known = self.knowledge.is_known_failure(candidate.rationale)
                record.known_failure = (
                    known.id if known is not None and record.status != EvaluationStatus.PASSED else None
                )
                record.vetoed = bool(vetoes)
                self.journal.append("evaluated", {"record": record.model_dump(mode="json")})
                speed = f" {record.geomean_speedup:.3f}x" if record.geomean_speedup is not None else ""
                self._activity(f"evaluated {candidate.id}: {record.status.value}{speed}")
                candidate.record = record
            if candidate.sha is None:
                sha = self._commit(
                    round_number,
                    candidate.id,
                    candidate.role,
                    candidate.agent,
                    candidate.rationale,
                    candidate.record,
                    solution,
                )
                self.journal.append("committed", {"id": candidate.id, "sha": sha})
        state = fold(self.journal.events())
        ranked = [
            c
            for c in state.candidates.values()
            if c.record is not None
            and c.record.geomean_speedup is not None
            and not c.record.vetoed
            and c.sha is not None
        ]
        if ranked:
            top = max(ranked, key=lambda c: c.record.geomean_speedup or 0.0)  # type: ignore[union-attr]
            if top.id != state.best:
                assert top.sha is not None and top.record is not None
                self.git.set_best(top.sha)
                self.journal.append("best", {"id": top.id, "sha": top.sha, "speedup": top.record.geomean_speedup})

    def _best_source(self, state: RunState) -> str:
        """The best candidate's sources (the base's before any passed), to see what a candidate dropped."""
        if state.best is None:
            assert state.base is not None
            return "\n".join(self.git.read(state.base, p).decode("utf-8", "replace") for p in self._paths())
        return "\n".join(s["content"] for s in state.candidates[state.best].solution["sources"])

    def _commit(
        self,
        round_number: int,
        cid: str,
        role: str,
        agent: str,
        rationale: str,
        record: CandidateRecord,
        solution: Solution,
    ) -> str:
        speed = f"{record.geomean_speedup:.3f}x" if record.geomean_speedup is not None else "-"
        body = "\n".join(
            [
                f"Rationale: {rationale}",
                f"Status: {record.status.value}" + (" (vetoed)" if record.vetoed else ""),
                f"Geomean speedup: {speed}; faster on {record.faster}/{record.total} workloads",
                f"Agent: {agent}",
                *(f"Violation: {v}" for v in record.violations),
            ]
        )
        trailers = {"Evoteam-Role": role, "Evoteam-Status": record.status.value, "Evoteam-Speedup": speed}
        return self.git.commit_candidate(
            round_number, cid, self._files_of(solution), f"{role}: {rationale}", body, trailers
        )

    def _finish_round(self, round_number: int, config: RunConfig, budget: TokenBudget) -> None:
        state = fold(self.journal.events())
        if any(r.round == round_number for r in state.rounds_finished):
            return
        events = self._round_events(round_number)
        team = Team.model_validate(events[0].data["team"])  # the round's team (a later ``team`` event is the next's)

        def tokens() -> int:
            return sum(
                Usage.model_validate(e.data["usage"]).total
                for e in self._round_events(round_number)
                if e.kind == "tokens"
            )

        record = RoundRecord(
            round=round_number,
            roles=list(team.roles),
            protocol=team.protocol,
            candidates=[c.record for c in state.round_candidates(round_number) if c.record is not None],
            tokens=tokens(),
            profiled=round_number in state.profiled_rounds,
            knowledge_read=round_number in state.knowledge_rounds,
        )
        rounds = [*state.rounds_finished, record]
        known = set(self.services.roles)
        decision = next((d for d in state.decisions if d.round == round_number), None)
        if decision is None:  # not made before a kill: make it now (once, a resume reuses it)
            found = signals(rounds)
            if config.mode == "evolving" and self.services.supervisor_llm is not None:
                llm, model = self.services.supervisor_llm
                decision = llm_decide(llm, model, budget, team, rounds, found, known)
            else:
                decision = decide(config.mode, team, rounds, found)
            self.journal.append("decision", {"decision": decision.model_dump(mode="json", by_alias=True)})
            self.knowledge.add(
                Kind.ROLE_RECORD,
                f"round {round_number}: {', '.join(team.roles)}",
                decision.note(),
                evidence=Evidence(numbers={"best": state.best_speedup or 0.0}),
                role="Supervisor",
                round=round_number,
            )
        next_team = apply(team, decision, known)
        self.journal.append("team", {"team": next_team.model_dump(mode="json")})
        record.tokens = tokens()  # the supervisor's own call counts in its round
        self.journal.append("round_finished", {"record": record.model_dump(mode="json")})

    def _round_events(self, round_number: int) -> list[Any]:
        events = self.journal.events()
        start = next(
            (i for i, e in enumerate(events) if e.kind == "round_started" and e.data["round"] == round_number),
            len(events),
        )
        return events[start:]


def kernel_paths(git: GitStore, task: KernelTask) -> list[str]:
    """The repository paths of the task's files, entry source first."""
    return [git.relative(p) for p in [task.source, *task.extra_sources]]


def start_run(repo_root: Path, task: KernelTask, config: RunConfig) -> None:
    """Journals a new run's config and commits its base (the kernel files as they are now, edits included)."""
    journal = Journal(run_dir(repo_root, config.run) / "journal.jsonl")
    if journal.events():
        raise RuntimeError(f"run {config.run} already exists")
    journal.append("run_started", {"config": config.model_dump(mode="json")})
    _base(repo_root, task, config.run)


def _base(repo_root: Path, task: KernelTask, run: str) -> str:
    journal = Journal(run_dir(repo_root, run) / "journal.jsonl")
    state = fold(journal.events())
    if state.base is not None:
        return state.base
    git = GitStore(repo_root, run)
    files = {path: (repo_root / path).read_bytes() for path in kernel_paths(git, task)}
    sha = git.create_base(files, f"evoteam base of {task.name} for run {run}")
    journal.append("base", {"sha": sha})
    return sha


def _merged(task: KernelTask, team: Team) -> Any:
    c = task.constraints
    return c.model_copy(
        update={
            "require": [*c.require, *(r for r in team.constraints.require if r not in c.require)],
            "forbid": [*c.forbid, *(f for f in team.constraints.forbid if f not in c.forbid)],
        }
    )


def _record(cid: str, round_number: int, role: str, rationale: str, result: CandidateResult) -> CandidateRecord:
    passed = result.status == EvaluationStatus.PASSED
    return CandidateRecord(
        id=cid,
        round=round_number,
        role=role,
        status=result.status,
        rationale=rationale,
        geomean_speedup=result.summary.geomean_speedup if passed else None,
        faster=result.summary.faster,
        total=result.summary.total,
        violations=list(result.violations),
        workloads=[
            WorkloadOutcome(
                uuid=w.uuid,
                status=w.status,
                speedup=w.speedup if w.status == EvaluationStatus.PASSED else None,
                latency_ms=w.timing.median_ms if w.timing is not None else None,
                reference_latency_ms=w.baseline_timing.median_ms if w.baseline_timing is not None else None,
                reason=(w.reason.strip().splitlines() or [""])[0][:200],
            )
            for w in result.workloads
        ],
    )


def _slug(name: str) -> str:
    return "-".join(name.lower().split())
