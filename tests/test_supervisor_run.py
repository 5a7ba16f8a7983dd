"""The round loop end to end with the offline team on a real kernel: candidates evaluated, committed once each
on round branches, best followed, decisions journaled, the user's dirty tree untouched, cancel and resume."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from conftest import KERNELS, git, init_repo, quick_config, scale_add_task
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.schema import Solution
from evoteam.gpu_bench.task import KernelTask
from evoteam.roles.agent import AgentEvent, EventSink, first_message
from evoteam.roles.agent_api import AgentContext, AgentReport
from evoteam.roles.backends.scripted import ScriptedLLM, text
from evoteam.roles.budget import EVALUATIONS_REFUSED, BudgetExhausted, ShareExhausted, TokenBudget
from evoteam.roles.builtin import builtin_role
from evoteam.roles.knowledge import Kind, KnowledgeStore
from evoteam.roles.llm import Reply, Request, Usage
from evoteam.roles.tools.evaluation import EvaluationCache, TaskEvaluations
from evoteam.supervisor.agents import backend_factory
from evoteam.supervisor.config import RunConfig
from evoteam.supervisor.events import (
    AgentFinished,
    AgentStep,
    Committed,
    DecisionMade,
    Evaluated,
    RoundStarted,
    Submitted,
)
from evoteam.supervisor.git_store import GitStore
from evoteam.supervisor.journal import Journal
from evoteam.supervisor.loop import RunServices, Supervisor
from evoteam.supervisor.round_play import role_shares
from evoteam.supervisor.state import RunState, fold
from evoteam.supervisor.team import Team

pytestmark = pytest.mark.integration


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = init_repo(tmp_path / "repo")
    shutil.copyfile(KERNELS / "slow_scale_add.cpp", root / "kernel.cpp")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "kernel")
    with (root / "kernel.cpp").open("a") as handle:
        handle.write("// an uncommitted edit of the user\n")
    return root


def task_of(repo: Path) -> KernelTask:
    """The task of ``repo``'s kernel: the slow scale_add (64 passes) and its declared knob PASSES, whose steps
    down (to 8, then 1) are improvements no busy machine hides, so the offline Optimizer's climb surely submits
    one per round until it reaches 1 (its first ring holds only 8). The source's other knob, BLOCK, is declared
    with its one value, so the climb never spends an evaluation on it (a block size's few percent, up or down
    with the machine's load, would make which candidate a round submits a matter of luck)."""
    return scale_add_task(source=repo / "kernel.cpp", knobs={"PASSES": [1, 8, 64], "BLOCK": [256]})


def snapshot(repo: Path) -> dict[str, str]:
    files = {
        p.relative_to(repo).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and not {".git", ".evoteam"} & set(p.relative_to(repo).parts)
    }
    return {
        **files,
        "index": hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest(),
        "HEAD": git(repo, "rev-parse", "HEAD") + (repo / ".git" / "HEAD").read_text(),
        "status": git(repo, "status", "--porcelain=v2", "--untracked-files=all"),
        "stash": git(repo, "stash", "list"),
    }


def services(task: KernelTask, evaluator: Evaluator, evaluations: int = 3) -> RunServices:
    caches: dict[str, EvaluationCache] = {}

    def evaluations_for(team: Team, incumbent: Solution | None) -> EvaluationCache:
        key = team.constraints.model_dump_json() + (incumbent.content_hash() if incumbent else "")
        if key not in caches:
            caches[key] = EvaluationCache(TaskEvaluations(evaluator, task, quick_config(), baseline=incumbent))
        return caches[key]

    return RunServices(
        task=task, evaluations=evaluations_for, agents=backend_factory("offline", task, {}, None, evaluations, seed=0)
    )


def test_an_offline_evolving_run_commits_every_candidate_once_and_leaves_the_tree_alone(
    repo: Path, evaluator: Evaluator
) -> None:
    task = task_of(repo)
    before = snapshot(repo)
    supervisor = Supervisor(repo, "run-a", services(task, evaluator))
    supervisor.start(RunConfig(run="run-a", kernel="scale_add", config=str(repo), rounds=2, budget=0, llm="offline"))
    state = supervisor.run()

    assert snapshot(repo) == before
    assert state.finished == "rounds" and [r.round for r in state.rounds_finished] == [1, 2]
    assert state.candidates, "the offline Optimizer's climb from PASSES 64 submits"
    store = GitStore(repo, "run-a")
    commits = store.candidates()
    assert sorted(c.trailers["Evoteam-Candidate"] for c in commits) == sorted(state.candidates)
    for commit in commits:
        candidate = state.candidates[commit.trailers["Evoteam-Candidate"]]
        assert candidate.sha == commit.sha and commit.trailers["Evoteam-Role"] == candidate.role
        assert candidate.record is not None and commit.trailers["Evoteam-Status"] == candidate.record.status.value
    base = store.ref("evoteam/run-a/base")
    assert base is not None and b"an uncommitted edit" in store.read(base, "kernel.cpp")
    assert state.start is not None and state.start.id == "r00-start"  # the incumbent, evaluated once
    if state.best is not None:  # only a candidate significantly faster than the start is the best
        assert store.ref("evoteam/run-a/best") == state.candidates[state.best].sha
        record = state.candidates[state.best].record
        assert record is not None and record.geomean_speedup is not None and record.geomean_speedup > 1.02
        assert record.retimed_from is not None  # named on its re-timing, journaled before the best moved
        kinds = [(e.kind, getattr(getattr(e, "record", None), "id", None)) for e in supervisor.journal.events()]
        assert kinds.index(("retimed", state.best)) < kinds.index(("best", None))
    else:  # no candidate significantly faster than the start: no best branch
        assert store.ref("evoteam/run-a/best") is None
    assert len(state.decisions) == 2 and all(d.rationale for d in state.decisions)
    finished = [e for e in supervisor.journal.events() if isinstance(e, AgentFinished)]
    assert {e.role for e in finished} >= {"Optimizer", "Profiling Scientist"}
    assert state.profiled_rounds == {1, 2}  # the offline Profiling Scientist profiled every round
    # Running it again does nothing: the journal says it is finished.
    assert Supervisor(repo, "run-a", services(task, evaluator)).run().candidates.keys() == state.candidates.keys()


def test_a_run_resumed_mid_round_records_nothing_twice(repo: Path, evaluator: Evaluator) -> None:
    task = task_of(repo)
    config = RunConfig(
        run="run-b", kernel="scale_add", config=str(repo), rounds=2, budget=0, llm="offline", mode="single"
    )
    first = Supervisor(repo, "run-b", services(task, evaluator, evaluations=2))  # PASSES 8, then 1 in round 2
    first.start(config)
    first.run()
    events = first.journal.events()
    # Cut the journal just after round 2's first submission, as a kill -9 there would leave it.
    cut = next(i for i, e in enumerate(events) if isinstance(e, Submitted) and e.round == 2) + 1
    lines = first.journal.path.read_text().splitlines(keepends=True)
    first.journal.path.write_text("".join(lines[: cut + 1]))  # the version line, then the events
    kept = fold(first.journal.events()).candidates  # what the journal held at the "kill"
    resumed = Supervisor(repo, "run-b", services(task, evaluator, evaluations=2)).run()
    assert resumed.finished == "rounds" and [r.round for r in resumed.rounds_finished] == [1, 2]
    assert set(kept) <= set(resumed.candidates)  # nothing lost
    # The re-run agent may pick another config (timings are noisy); whatever it adds is recorded once.
    events = Supervisor(repo, "run-b", services(task, evaluator, evaluations=2)).journal.events()
    for kind in (Submitted, Committed):
        ids = [e.id for e in events if isinstance(e, kind)]
        assert sorted(ids) == sorted(resumed.candidates), kind
    evaluated = [e.record.id for e in events if isinstance(e, Evaluated)]
    assert sorted(evaluated) == sorted(resumed.candidates)
    commits = GitStore(repo, "run-b").candidates()
    assert sorted(c.trailers["Evoteam-Candidate"] for c in commits) == sorted(resumed.candidates)


def test_cancel_stops_before_the_next_round(repo: Path, evaluator: Evaluator) -> None:
    task = task_of(repo)
    supervisor = Supervisor(repo, "run-c", services(task, evaluator))
    supervisor.start(
        RunConfig(run="run-c", kernel="scale_add", config=str(repo), rounds=5, budget=0, llm="offline", mode="single")
    )
    (supervisor.dir / "cancel").write_text("")
    state = supervisor.run()
    assert state.finished == "cancelled" and state.rounds_finished == []


def test_a_run_killed_after_its_decision_does_not_decide_again(repo: Path, evaluator: Evaluator) -> None:
    task = task_of(repo)
    config = RunConfig(
        run="run-d", kernel="scale_add", config=str(repo), rounds=1, budget=0, llm="offline", mode="single"
    )
    first = Supervisor(repo, "run-d", services(task, evaluator))
    first.start(config)
    first.run()
    lines = first.journal.path.read_text().splitlines(keepends=True)
    cut = next(i for i, e in enumerate(first.journal.events()) if isinstance(e, DecisionMade)) + 1
    first.journal.path.write_text("".join(lines[: cut + 1]))  # killed between the decision and the round's end
    resumed = Supervisor(repo, "run-d", services(task, evaluator)).run()
    assert resumed.finished == "rounds" and len(resumed.decisions) == 1
    kinds = [e.kind for e in first.journal.events()]
    assert kinds.count("decision") == 1 and kinds.count("round_finished") == 1 and kinds.count("team") == 1


class RefusedAgent:
    """A model-backed agent whose first call the budget cannot pay for."""

    def run(self, context: AgentContext) -> AgentReport:
        a = context.assignment
        return AgentReport(role=a.role.name, agent_id=a.agent_id, stop="budget", error="needs up to 9000 tokens")


def test_a_round_whose_agents_were_all_refused_ends_the_run_for_budget(repo: Path, evaluator: Evaluator) -> None:
    task = task_of(repo)
    run_services = services(task, evaluator)
    run_services.agents = lambda role, round_number, index, sink, stop: RefusedAgent()
    supervisor = Supervisor(repo, "run-e", run_services)
    supervisor.start(
        RunConfig(run="run-e", kernel="scale_add", config=str(repo), rounds=5, budget=50_000, llm="anthropic")
    )
    state = supervisor.run()
    assert state.finished == "budget" and [r.round for r in state.rounds_finished] == [1]  # not 4 more empty rounds


@pytest.mark.slow
@pytest.mark.parametrize("fraction", [0.15, 0.35, 0.55, 0.75, 0.95])
def test_a_journal_cut_anywhere_resumes_to_every_candidate_exactly_once(
    repo: Path, evaluator: Evaluator, fraction: float
) -> None:
    """What a kill leaves at any point: the journal up to some event (the git refs may be further along)."""
    task = task_of(repo)
    config = RunConfig(
        run="run-f", kernel="scale_add", config=str(repo), rounds=2, budget=0, llm="offline", mode="fixed"
    )
    first = Supervisor(repo, "run-f", services(task, evaluator, evaluations=2))
    first.start(config)
    first.run()
    lines = first.journal.path.read_text().splitlines(keepends=True)
    cut = max(2, int(len(lines) * fraction))
    first.journal.path.write_text("".join(lines[:cut]))
    kept = fold(first.journal.events())
    resumed = Supervisor(repo, "run-f", services(task, evaluator, evaluations=2)).run()
    assert resumed.finished == "rounds" and [r.round for r in resumed.rounds_finished] == [1, 2]
    assert set(kept.candidates) <= set(resumed.candidates)
    assert [d.round for d in resumed.decisions] == [1, 2]
    events = first.journal.events()
    for kind in (Submitted, Committed):
        ids = [e.id for e in events if isinstance(e, kind)]
        assert sorted(ids) == sorted(resumed.candidates), kind
    assert sorted(e.record.id for e in events if isinstance(e, Evaluated)) == sorted(resumed.candidates)
    trailers = [c.trailers["Evoteam-Candidate"] for c in GitStore(repo, "run-f").candidates()]
    # each candidate is committed once, those committed past the cut included (the cut journal's run may then
    # have gone another way: commits of the first run it did not repeat stay on the branches, as no real kill
    # could leave them)
    assert all(trailers.count(cid) == 1 for cid in resumed.candidates)
    assert all(resumed.candidates[cid].sha for cid in resumed.candidates)


class Auditor:
    """A reviewer that keeps what it was given and vetoes the Explorer's candidates only."""

    def __init__(self) -> None:
        self.given: list[tuple[str, str]] = []  # (brief, the kernel in its workspace)

    def run(self, context: AgentContext) -> AgentReport:
        brief = context.assignment.brief
        self.given.append((brief, (context.workspace.root / "kernel.cpp").read_text()))
        verdict = "VERDICT: veto — two ideas at once" if "(by Explorer)" in brief else "VERDICT: approve"
        a = context.assignment
        return AgentReport(role=a.role.name, agent_id=a.agent_id, stop="end_turn", final_text=verdict)


def test_the_disciplinarian_reviews_each_candidate_and_its_veto_withdraws_that_one_only(
    repo: Path, evaluator: Evaluator
) -> None:
    """A parallel team: the Disciplinarian does not review a copy of the old best but each candidate of the
    round, with its diff against its parent; vetoing the Explorer's leaves the Optimizer's standing."""
    task = task_of(repo)
    auditor = Auditor()
    offline = backend_factory("offline", task, {}, None, 3, seed=0)

    def agents(role, number, index, sink, cancel):  # type: ignore[no-untyped-def]
        return auditor if role.name == "Disciplinarian" else offline(role, number, index, sink, cancel)

    supervisor = Supervisor(
        repo, "run-r", RunServices(task=task, evaluations=services(task, evaluator).evaluations, agents=agents)
    )
    supervisor.start(RunConfig(run="run-r", kernel="scale_add", config=str(repo), rounds=1, budget=0, llm="offline"))
    team = Team(roles=["Optimizer", "Explorer", "Disciplinarian"], protocol="parallel")
    supervisor.journal.append(RoundStarted(round=1, team=team))
    state = supervisor.run()

    assert state.start_solution is not None
    start = Solution.model_validate(state.start_solution)
    made = state.round_candidates(1)
    assert {c.role for c in made} == {"Optimizer", "Explorer"}, [c.role for c in made]
    reviews = [e for e in supervisor.journal.events() if isinstance(e, AgentFinished) and e.role == "Disciplinarian"]
    assert sorted(r.reviewed or "" for r in reviews) == sorted(c.id for c in made)  # one review per candidate
    for candidate in made:
        record = candidate.record
        assert record is not None and record.vetoed == (candidate.role == "Explorer")
        [(brief, kernel)] = [g for g in auditor.given if f"Review candidate {candidate.id} " in g[0]]
        solution = Solution.model_validate(candidate.solution)
        assert kernel == solution.sources[0].content  # its workspace holds the candidate, not the old best
        assert "```diff\n" in brief and candidate.rationale in brief
        changed = solution.sources[0].content != start.sources[0].content  # the tuner rewrites its #define
        if solution.spec.compile_flags != start.spec.compile_flags:
            assert f"build setting compile_flags: {json.dumps(start.spec.compile_flags)} -> " in brief
        assert ("--- a/kernel.cpp\n+++ b/kernel.cpp\n" in brief) == changed, brief
        assert ("(no change:" in brief) == (not changed and solution.spec == start.spec), brief
    assert state.best is None or state.candidates[state.best].role == "Optimizer"


class Recorder:
    """An agent that keeps its brief and the kernel its workspace started with, and does nothing else."""

    def __init__(self) -> None:
        self.given: dict[int, tuple[str, str]] = {}  # round → (brief, kernel)

    def run(self, context: AgentContext) -> AgentReport:
        a = context.assignment
        self.given[a.round] = (a.brief, (context.workspace.root / "kernel.cpp").read_text())
        return AgentReport(role=a.role.name, agent_id=a.agent_id, stop="end_turn", final_text="looked")


class NoteTaker:
    """An agent that records a hardware note through its tools and stops with some last words."""

    def run(self, context: AgentContext) -> AgentReport:
        a = context.assignment
        result = context.toolbox.call("write_note", {"kind": "hardware", "title": "one row fits in L1 here"})
        assert not result.is_error, result.content
        words = "rows of 4096 floats stay in L1; try fewer passes next"
        return AgentReport(role=a.role.name, agent_id=a.agent_id, stop="end_turn", final_text=words)


class Reader:
    """An agent that keeps what it was given: its assignment and the task's knowledge, and does nothing else."""

    def __init__(self) -> None:
        self.given: list[tuple[AgentContext, str]] = []

    def run(self, context: AgentContext) -> AgentReport:
        assert context.task is not None
        self.given.append((context, context.task.knowledge))
        a = context.assignment
        return AgentReport(role=a.role.name, agent_id=a.agent_id, stop="end_turn", final_text="read it")


def test_each_agent_gets_the_knowledge_as_it_starts_the_hand_off_before_it_and_the_rounds(
    repo: Path, evaluator: Evaluator
) -> None:
    """A sequential team: the Debugger, after the Optimizer, sees the note the Optimizer wrote this round (not the
    store as the round found it), the Optimizer's hand-off (its last words), and how many rounds the run has."""
    task = task_of(repo)
    reader = Reader()

    def agents(role, number, index, sink, cancel):  # type: ignore[no-untyped-def]
        return NoteTaker() if role.name == "Optimizer" else reader

    base = services(task, evaluator)
    run_services = RunServices(task=task, evaluations=base.evaluations, agents=agents)
    supervisor = Supervisor(repo, "run-h", run_services)
    supervisor.start(
        RunConfig(run="run-h", kernel="scale_add", config=str(repo), rounds=2, budget=10**6, llm="offline")
    )
    supervisor.journal.append(RoundStarted(round=1, team=Team(roles=["Optimizer", "Debugger"], protocol="sequential")))
    supervisor.run()

    (first, knowledge), (second, _) = reader.given[:2]
    assert "one row fits in L1 here" in knowledge  # written by the agent before, in the same round
    brief = first.assignment.brief
    assert "Hand-off from the agent(s) before you:" in brief
    assert "Optimizer (optimizer-0, round 1) stopped (end_turn); submitted: nothing." in brief
    assert "rows of 4096 floats stay in L1; try fewer passes next" in brief
    assert (first.assignment.round, first.assignment.rounds) == (1, 2)
    assert first_message(first, 1000).startswith("Round 1 of 2 (1 more after this one). Your brief")
    assert first_message(second, 1000).startswith("Round 2 of 2 (the last one). Your brief")
    assert "rows of 4096 floats" in second.assignment.brief  # round 2's Optimizer spoke last


def test_the_supervisor_can_brief_a_role_and_start_it_from_a_chosen_candidate(repo: Path, evaluator: Evaluator) -> None:
    """A model supervisor's ``start_from`` and ``set_brief``, citing the evidence it was shown: the next round
    the Debugger works on that candidate (not the best) with the brief, and what it submits names it as parent."""
    task = task_of(repo)
    recorder = Recorder()
    offline = backend_factory("offline", task, {}, None, 3, seed=0)

    def agents(role, number, index, sink, cancel):  # type: ignore[no-untyped-def]
        return recorder if role.name == "Debugger" else offline(role, number, index, sink, cancel)

    chosen: list[str] = []

    def supervise(request: Request) -> Reply:
        evidence = json.loads(request.messages[0].content[0].text)  # type: ignore[union-attr]
        candidate = next(i["id"] for i in evidence["items"] if i["kind"] == "candidate")
        chosen.append(candidate.removeprefix("candidate:"))
        actions = [
            {"action": "start_from", "role": "Debugger", "candidate": chosen[0], "cites": [candidate]},
            {"action": "set_brief", "role": "Debugger", "brief": "the small workloads only", "cites": ["budget"]},
        ]
        return text(json.dumps({"actions": actions, "rationale": "look at it"}))

    llm = ScriptedLLM([supervise, text('{"actions": [], "rationale": "done"}')])
    run_services = RunServices(
        task=task, evaluations=services(task, evaluator).evaluations, agents=agents, supervisor_llm=(llm, "scripted")
    )
    supervisor = Supervisor(repo, "run-s", run_services)
    supervisor.start(
        RunConfig(run="run-s", kernel="scale_add", config=str(repo), rounds=2, budget=10**6, llm="offline")
    )
    supervisor.journal.append(RoundStarted(round=1, team=Team(roles=["Optimizer", "Debugger"])))
    state = supervisor.run()

    assert state.finished == "rounds" and len(chosen) == 1
    assert state.round_teams[2].starts == {"Debugger": chosen[0]}
    assert state.round_teams[2].briefs == {"Debugger": "the small workloads only"}
    brief, kernel = recorder.given[2]
    picked = Solution.model_validate(state.candidates[chosen[0]].solution)
    assert kernel == picked.sources[0].content
    assert "Your brief from the supervisor: the small workloads only" in brief
    assert f"started you from candidate {chosen[0]}" in brief
    assert "Your brief from the supervisor" not in recorder.given[1][0]
    assert state.decisions[0].actions[0].cites == [f"candidate:{chosen[0]}"]


def test_the_supervisors_knowledge_policy_is_written_to_the_store(repo: Path, evaluator: Evaluator) -> None:
    """A model supervisor quarantines a note the round added (cited from its evidence) and requires notes to
    cite candidates: the store says so, and the next round's team carries the policy."""
    task = task_of(repo)
    quarantined: list[str] = []

    def supervise(request: Request) -> Reply:
        evidence = json.loads(request.messages[0].content[0].text)  # type: ignore[union-attr]
        note = next(i["id"] for i in evidence["items"] if i["kind"] == "note")
        quarantined.append(note.removeprefix("note:"))
        actions = [
            {"action": "quarantine_note", "note": quarantined[0], "cites": [note]},
            {"action": "require_citations", "on": True, "cites": [note]},
        ]
        return text(json.dumps({"actions": actions, "rationale": "that note rests on one noisy measurement"}))

    llm = ScriptedLLM([supervise, text('{"actions": [], "rationale": "done"}')])
    base = services(task, evaluator)
    run_services = RunServices(task=task, evaluations=base.evaluations, agents=base.agents, supervisor_llm=(llm, "s"))
    supervisor = Supervisor(repo, "run-k", run_services)
    supervisor.start(
        RunConfig(run="run-k", kernel="scale_add", config=str(repo), rounds=2, budget=10**6, llm="offline")
    )
    supervisor.journal.append(RoundStarted(round=1, team=Team(roles=["Optimizer"])))
    state = supervisor.run()

    store = KnowledgeStore(repo, "scale_add")
    [note] = quarantined
    assert store.statuses()[note].status == "quarantined" and store.statuses()[note].round == 1
    assert next(e for e in store.entries() if e.id == note).kind == Kind.QUARANTINED
    assert state.round_teams[2].require_citations and not state.round_teams[1].require_citations


def test_a_team_told_to_reprofile_sees_the_profile_of_its_start(repo: Path, evaluator: Evaluator) -> None:
    task = task_of(repo)
    recorder = Recorder()
    supervisor = Supervisor(
        repo,
        "run-p",
        RunServices(task=task, evaluations=services(task, evaluator).evaluations, agents=lambda *a: recorder),
    )
    supervisor.start(RunConfig(run="run-p", kernel="scale_add", config=str(repo), rounds=1, budget=0, llm="offline"))
    supervisor.journal.append(RoundStarted(round=1, team=Team(roles=["Debugger"], reprofile=True)))
    state = supervisor.run()

    brief = recorder.given[1][0]
    assert "The supervisor had the round's start (r00-start) profiled before this round:" in brief
    assert "profile (timing): PASSED" in brief and "workload | median ms" in brief
    [note] = [e for e in KnowledgeStore(repo, "scale_add").entries() if e.kind == Kind.HARDWARE]
    assert note.title == "re-profile of r00-start before round 1" and note.role == "Supervisor"
    assert state.rounds_finished[0].profiled


class Spender:
    """A model-backed agent that pays 1000 tokens a call until a call is refused."""

    def run(self, context: AgentContext) -> AgentReport:
        a = context.assignment
        calls = 0
        while True:
            try:
                context.budget.check(1000, f"{a.role.name}/{a.agent_id}")
            except BudgetExhausted as exc:
                return AgentReport(role=a.role.name, agent_id=a.agent_id, turns=calls, stop="budget", error=str(exc))
            context.budget.charge(Usage(input_tokens=1000), a.role.name, a.agent_id, "scripted")
            calls += 1


def test_each_role_spends_no_more_than_its_share_of_the_round(repo: Path, evaluator: Evaluator) -> None:
    task = task_of(repo)
    run_services = services(task, evaluator)
    run_services.agents = lambda role, round_number, index, sink, stop: Spender()
    supervisor = Supervisor(repo, "run-s", run_services)
    # the fixed team's shares (Profiling Scientist 0.6, Optimizer 1.0, Debugger 0.7, Knowledge Integrator 0.3)
    # split 26 500 tokens 6115 / 10 192 / 7134 / 3057: each role stops at the last whole call its share pays for
    config = RunConfig(run="run-s", kernel="scale_add", config=str(repo), rounds=1, budget=26_500, llm="anthropic")
    supervisor.start(config.model_copy(update={"mode": "fixed"}))
    state = supervisor.run()
    spent = {role: n for (_, role), n in state.role_tokens.items()}
    assert spent == {"Profiling Scientist": 6000, "Optimizer": 10_000, "Debugger": 7000, "Knowledge Integrator": 3000}
    stops = {a.role: a for a in state.round_agents[1]}
    assert all(a.stop == "budget" for a in stops.values())
    assert stops["Optimizer"].error is not None
    assert "remain of Optimizer's share of this round (10192 tokens)" in stops["Optimizer"].error


class Evaluating:
    """An agent that calls ``evaluate`` until a call is refused, reporting each call to the round's sink."""

    def __init__(self, sink: EventSink) -> None:
        self.sink = sink

    def run(self, context: AgentContext) -> AgentReport:
        a = context.assignment
        calls = 0
        while calls < 50:
            result = context.toolbox.call("evaluate", {})
            first = result.content.splitlines()[0] if result.content else ""
            self.sink(
                AgentEvent(
                    kind="tool",
                    role=a.role.name,
                    agent_id=a.agent_id,
                    turn=calls,
                    tool="evaluate",
                    result=first,
                    is_error=result.is_error,
                )
            )
            if result.is_error:
                break
            calls += 1
        text = f"{calls} evaluations, told {context.evaluations}, turns {a.max_turns}"
        return AgentReport(role=a.role.name, agent_id=a.agent_id, turns=calls, stop="budget", final_text=text)


def test_the_agents_evaluate_no_more_than_the_runs_evaluation_budget(repo: Path, evaluator: Evaluator) -> None:
    task = task_of(repo)
    run_services = services(task, evaluator)
    run_services.agents = lambda role, round_number, index, sink, stop: Evaluating(sink)
    supervisor = Supervisor(repo, "run-e", run_services)
    config = RunConfig(
        run="run-e",
        kernel="scale_add",
        config=str(repo),
        rounds=2,
        llm="offline",
        mode="fixed",
        evaluation_budget=11,
        max_turns=200,
    )
    supervisor.start(config)
    state = supervisor.run()
    # round 1: 11 // 2 = 5, split Profiling Scientist 0.6, Optimizer 1.0, Debugger 0.7 (largest remainders);
    # round 2: the 6 left; the Knowledge Integrator has no evaluate tool
    assert state.role_evaluations == {
        (1, "Profiling Scientist"): 1,
        (1, "Optimizer"): 2,
        (1, "Debugger"): 2,
        (2, "Profiling Scientist"): 1,
        (2, "Optimizer"): 3,
        (2, "Debugger"): 2,
    }
    assert state.evaluations == 11
    told = {(a.round, a.role): a.summary for a in (x for r in state.round_agents.values() for x in r)}
    assert told[(2, "Optimizer")] == "3 evaluations, told 3, turns 200"  # the run's max_turns reaches it
    assert told[(1, "Knowledge Integrator")] == "0 evaluations, told None, turns 200"
    refusals = [
        e
        for e in Journal(repo / ".evoteam" / "runs" / "run-e" / "journal.jsonl").events()
        if isinstance(e, AgentStep) and e.result.startswith(EVALUATIONS_REFUSED)
    ]
    assert len(refusals) == 6  # each evaluating role, once a round, and not counted


def test_a_moved_share_is_what_the_role_may_spend_and_a_resumed_round_counts_what_was_spent() -> None:
    team = Team(roles=["Optimizer", "Debugger"], budget_shares={"Optimizer": 1.5, "Debugger": 0.5})
    budget = TokenBudget(20_000)
    roles = [builtin_role("Optimizer"), builtin_role("Debugger")]
    found = role_shares(RunState(), team, budget, 1, roles)
    assert {r: s.cap for r, s in found.items()} == {"Optimizer": 15_000, "Debugger": 5000}
    found["Debugger"].charge(Usage(input_tokens=4500), "Debugger", "debugger-1", "scripted")
    with pytest.raises(ShareExhausted, match="needs up to 1000 tokens but 500 remain of Debugger's share"):
        found["Debugger"].check(1000, "Debugger/debugger-1")
    found["Optimizer"].check(14_000)  # the other role's share is untouched
    assert budget.spent == 4500 and found["Optimizer"].remaining == 15_000

    # resumed after the Debugger's 4500 tokens: the round's pool is what it was, and the Debugger's share spent
    state = RunState(role_tokens={(1, "Debugger"): 4500, (0, "Optimizer"): 999})
    again = role_shares(state, team, budget, 1, roles)
    assert {r: (s.cap, s.spent) for r, s in again.items()} == {"Optimizer": (15_000, 0), "Debugger": (5000, 4500)}


class HistoryReader:
    """Reads the run's history and diffs the best against the start, then ends its turn with what it saw."""

    def run(self, context: AgentContext) -> AgentReport:
        a = context.assignment
        seen = context.toolbox.call("history", {})
        best = (seen.data or {}).get("best")
        diff = context.toolbox.call("diff", {"a": "start", "b": best or "start"})
        changed = [line for line in diff.content.splitlines() if line.startswith(("---", "+++", "-#", "+#"))]
        text = f"{seen.content}\n=====\n" + "\n".join(changed)
        return AgentReport(role=a.role.name, agent_id=a.agent_id, stop="end_turn", final_text=text)


def test_agents_of_a_later_round_see_the_runs_candidates_and_diff_them(repo: Path, evaluator: Evaluator) -> None:
    task = task_of(repo)
    run_services = services(task, evaluator)
    offline = run_services.agents
    run_services.agents = lambda role, number, index, sink, stop: (
        offline(role, number, index, sink, stop) if number == 1 else HistoryReader()
    )
    supervisor = Supervisor(repo, "run-h", run_services)
    supervisor.start(
        RunConfig(run="run-h", kernel="scale_add", config=str(repo), rounds=2, llm="offline", mode="single")
    )
    state = supervisor.run()
    assert state.best is not None and state.best.startswith("r01-optimizer-0-")
    [reader] = [a for a in state.round_agents[2]]
    seen, diff = reader.summary.split("\n=====\n")
    assert seen.startswith(f"- {state.best}: round 1, Optimizer from r00-start: PASSED ") and "★ best" in seen
    assert diff.splitlines()[:2] == ["--- start/kernel.cpp", f"+++ {state.best}/kernel.cpp"]
    removed = [line for line in diff.splitlines()[2:] if line.startswith("-#define ")]
    added = [line for line in diff.splitlines()[2:] if line.startswith("+#define ")]
    assert len(removed) == len(added) >= 1  # the knob the climb moved, as it was and as it is in the best
