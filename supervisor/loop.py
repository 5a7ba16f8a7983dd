"""``Supervisor``: runs a team in rounds until a stop reason, each round played, committed and decided.

The run's journal is read and folded once, when ``run`` opens it; every step after records its events through
the run's ``RunLog`` (appended, fsynced, applied to the in-memory state), and every step is idempotent against
that state, so ``run`` after a ``kill -9`` at any point continues where the run stopped: finished agents are not
re-run, a candidate (id = round, agent and content hash) is recorded, evaluated and committed once, decisions are
not re-made. A round: ``round_play`` (the agents), ``round_commit`` (evaluations, commits, best),
``round_decide`` (the decision and the next team); the reporter is told at each round's start and end.
"""

from __future__ import annotations

from pathlib import Path

from evoteam.gpu_bench.api import KernelTask
from evoteam.roles.budget import PricingTable, TokenBudget
from evoteam.roles.knowledge import KnowledgeStore
from evoteam.roles.llm import FatalLLMError
from evoteam.supervisor.config import RunConfig, StopReason, journal_path, run_dir, state_dir
from evoteam.supervisor.events import BaseCommitted, RoundStarted, RunFinished, RunStarted
from evoteam.supervisor.git_store import CandidateStore, GitStore
from evoteam.supervisor.journal import Journal
from evoteam.supervisor.lock import KernelLock
from evoteam.supervisor.round_commit import ensure_start, evaluate_and_commit
from evoteam.supervisor.round_decide import finish_round
from evoteam.supervisor.round_play import play_round
from evoteam.supervisor.run_log import JournaledBudget, RunLog
from evoteam.supervisor.services import Evaluations as Evaluations
from evoteam.supervisor.services import RunContext
from evoteam.supervisor.services import RunServices as RunServices
from evoteam.supervisor.services import kernel_paths as kernel_paths
from evoteam.supervisor.state import RunState

MIN_CALL_TOKENS = 2_000
"""Below this many tokens left, a model-backed run stops for budget."""


class Supervisor:
    """Run ``run`` of the repository at ``repo_root``. ``store`` (default: the repository's git branches) and
    ``journal`` (default: the run's journal file) are where its commits and events go."""

    def __init__(
        self,
        repo_root: Path,
        run: str,
        services: RunServices,
        store: CandidateStore | None = None,
        journal: Journal | None = None,
    ) -> None:
        self.root = repo_root
        self.run_id = run
        self.dir = run_dir(repo_root, run)
        self.journal = journal if journal is not None else Journal(journal_path(repo_root, run))
        self.services = services
        self.task = services.task
        self.store: CandidateStore = store if store is not None else GitStore(repo_root, run)

    def start(self, config: RunConfig) -> None:
        """Journals the new run's config and commits its base."""
        start_run(self.root, self.task, config, self.store, self.journal)

    def cancel_requested(self) -> bool:
        return (self.dir / "cancel").exists()

    def run(self) -> RunState:
        """Runs (or resumes) the run to its end; the final state."""
        log = RunLog.open(self.journal)
        config = log.state.config
        if config is None:
            raise RuntimeError(f"run {self.run_id} has no configuration in its journal")
        if log.state.finished is not None:
            return log.state
        with KernelLock(state_dir(self.root), self.task.name, self.run_id):
            if isinstance(self.store, GitStore):  # a process killed mid ref update left its lock behind
                for stale in self.store.clear_stale_locks():
                    self.services.reporter.activity(f"removed the stale git lock {stale}")
            return self._run(log, config)

    def _run(self, log: RunLog, config: RunConfig) -> RunState:
        knowledge = KnowledgeStore(self.root, config.knowledge or self.task.name)
        run = RunContext(self.run_id, self.dir, self.services, log, self.store, knowledge)
        ensure_base(log, self.store, self.root, self.task, self.run_id)
        incumbent = ensure_start(run)
        budget = JournaledBudget(config.budget, log, PricingTable.with_overrides(config.prices))
        reporter = self.services.reporter
        while (reason := self._stop_reason(run, config, budget)) is None:
            number = max((r.round for r in log.state.rounds_finished), default=0) + 1
            if number not in log.state.rounds_started:
                assert log.state.team is not None
                log.record(RoundStarted(round=number, team=log.state.team))
            team = log.state.round_teams[number]
            reporter.update(log.snapshot())
            cache = self.services.evaluations(team, incumbent)
            play_round(run, number, team, budget, cache)
            evaluate_and_commit(run, number, cache)  # what the agents made before a fault is kept
            if run.fault.message is not None:
                continue
            try:
                finish_round(run, number, config, budget)
            except FatalLLMError as exc:  # the model supervisor's call
                run.fault.set(str(exc))
                continue
            reporter.update(log.snapshot())
        log.record(RunFinished(reason=reason, best=log.state.best, error=run.fault.message))
        reporter.update(log.snapshot())
        return log.state

    def _stop_reason(self, run: RunContext, config: RunConfig, budget: TokenBudget) -> StopReason | None:
        state = run.log.state
        offline = self.services.supervisor_llm is None and config.llm == "offline"
        if run.fault.message is not None:
            return "error"
        if run.cancel_requested():
            return "cancelled"
        if config.target_speedup is not None and (state.best_speedup or 0) >= config.target_speedup:
            return "target"
        if len(state.rounds_finished) >= config.rounds:
            return "rounds"
        if config.evaluation_budget is not None and state.evaluations >= config.evaluation_budget:
            return "budget"
        if not offline and budget.remaining < MIN_CALL_TOKENS:
            return "budget"
        if not offline and state.rounds_finished and state.refused(state.rounds_finished[-1].round):
            return "budget"  # every agent of the last round was refused: the next round could do no better
        return None


def start_run(
    repo_root: Path,
    task: KernelTask,
    config: RunConfig,
    store: CandidateStore | None = None,
    journal: Journal | None = None,
) -> None:
    """Journals a new run's config and commits its base (the kernel files as they are now, edits included)."""
    log = RunLog.open(journal if journal is not None else Journal(journal_path(repo_root, config.run)))
    if log.state.config is not None:
        raise RuntimeError(f"run {config.run} already exists")
    log.record(RunStarted(config=config))
    ensure_base(log, store if store is not None else GitStore(repo_root, config.run), repo_root, task, config.run)


def ensure_base(log: RunLog, store: CandidateStore, repo_root: Path, task: KernelTask, run: str) -> str:
    """The run's base commit: the journaled one, else made now from the kernel files and journaled."""
    if log.state.base is not None:
        return log.state.base
    files = {path: (repo_root / path).read_bytes() for path in kernel_paths(store, task)}
    sha = store.create_base(files, f"evoteam base of {task.name} for run {run}")
    log.record(BaseCommitted(sha=sha))
    return sha
