"""Runs a comparison: per task, every arm's runs in the interleaved order of the plan, each to its end, then the
closing session that times every run's result against the same incumbent; returns the ``Comparison``.

Starting a run and opening an evaluation session are side effects behind the ``StartRun`` and ``OpenSession``
protocols (the command line passes the real ones; tests pass fakes).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from evoteam.gpu_bench.api import EvaluationStatus, KernelTask, Solution
from evoteam.roles.budget import PricingTable
from evoteam.roles.tools.evaluation import EvaluationService
from evoteam.supervisor.compare_plan import (
    Arm,
    Settings,
    interleave,
    run_config,
    seed_knowledge,
    snapshot_knowledge,
)
from evoteam.supervisor.compare_result import (
    Comparison,
    RunResult,
    TaskComparison,
    run_result,
    summarize_arm,
    summarize_overall,
)
from evoteam.supervisor.compare_retime import Announce, closing_session
from evoteam.supervisor.config import RunConfig, journal_path
from evoteam.supervisor.journal import Journal
from evoteam.supervisor.state import RunState, fold


class StartRun(Protocol):
    def __call__(self, config: RunConfig, task: KernelTask) -> int:
        """Starts the run and runs it to its end; its exit code (0: it ran)."""
        ...


OpenSession = Callable[[KernelTask], AbstractContextManager[EvaluationService]]
"""An evaluation session for a task (one evaluator, one warm worker), closed when the ``with`` ends."""


class ExperimentError(RuntimeError):
    """A run of the experiment could not run, or its runs did not start from the same kernel."""


def run_experiment(
    repo_root: Path,
    experiment: str,
    config_path: Path,
    tasks: list[KernelTask],
    arms: list[Arm],
    seeds: int,
    settings: Settings,
    start: StartRun,
    session: OpenSession,
    announce: Announce = lambda line: None,
) -> Comparison:
    pricing = PricingTable.with_overrides(settings.prices)
    compared = []
    for task in tasks:
        snapshot = snapshot_knowledge(repo_root, task.name, experiment) if settings.knowledge == "snapshot" else None
        runs: list[tuple[RunResult, RunState]] = []
        plan = interleave(arms, seeds)
        for done, (seed, arm) in enumerate(plan, 1):
            config = run_config(settings, experiment, task.name, config_path, arm, seed)
            assert config.knowledge is not None
            seed_knowledge(repo_root, snapshot, config.knowledge)
            announce(f"{task.name}: run {done}/{len(plan)}: {arm.name}, seed {seed} ({config.run})")
            began = time.monotonic()
            code = start(config, task)
            wall = time.monotonic() - began
            if code != 0:
                raise ExperimentError(f"run {config.run} ({arm.name}, seed {seed}) could not run (exit code {code})")
            state = fold(Journal(journal_path(repo_root, config.run)).events())
            runs.append((run_result(task.name, arm, seed, state, wall, pricing), state))
        compared.append(_close(task, arms, runs, settings, session, announce))
    everything = [r for t in compared for r in t.runs]
    overall = (
        [summarize_overall(a, [r for r in everything if r.arm == a.name]) for a in arms]
        if len(compared) > 1
        else compared[0].arms
    )
    shown = settings.model_dump(mode="json", exclude={"prices", "unsafe_no_sandbox"})
    shown |= {"arms": [a.name for a in arms], "seeds": seeds, "tasks": [t.name for t in tasks]}
    if settings.prices:
        shown["prices"] = sorted(settings.prices)
    return Comparison(experiment=experiment, settings=shown, arms=overall, tasks=compared)


def _close(
    task: KernelTask,
    arms: list[Arm],
    runs: list[tuple[RunResult, RunState]],
    settings: Settings,
    session: OpenSession,
    announce: Announce,
) -> TaskComparison:
    """The task's closing session and its arms' figures."""
    starts = {s.start_solution and Solution.model_validate(s.start_solution).content_hash() for _, s in runs}
    if len(starts) != 1 or None in starts:
        raise ExperimentError(
            f"{task.name}: the runs did not all start from the same kernel (was the file edited during the "
            "comparison?); their results cannot be compared"
        )
    first = runs[0][1]
    assert first.start_solution is not None and first.start is not None
    start = Solution.model_validate(first.start_solution)
    incumbent = start if first.start.status == EvaluationStatus.PASSED else None
    results = [_result_solution(state, start) for _, state in runs]
    announce(f"{task.name}: closing session: {len(results)} results against the start, in one worker")
    with session(task) as service:
        control, _, finals = closing_session(
            service, incumbent, task.baseline == "source", results, settings.seed, announce
        )
    timed = [r.model_copy(update={"final": f}) for (r, _), f in zip(runs, finals, strict=True)]
    return TaskComparison(
        task=task.name,
        incumbent="start" if incumbent is not None else "baseline",
        baseline=task.baseline,
        control=control,
        arms=[summarize_arm(a, [r for r in timed if r.arm == a.name]) for a in arms],
        runs=timed,
    )


def _result_solution(state: RunState, start: Solution) -> Solution:
    """What the run hands the user: its best, else the start."""
    if state.best is None:
        return start
    return Solution.model_validate(state.candidates[state.best].solution)
