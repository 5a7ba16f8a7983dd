"""What a comparison found: each run's outcome and final timing, and each arm's summary over its seeds, per task
and over all tasks (the models ``evoteam compare --json`` prints).

A run's result is the kernel it would hand the user: its best, or the start when it found nothing significant.
Every run's result is timed again at the end against the same incumbent (``compare_retime``); those final
timings, not the runs' own, make the arms' figures. A result that fails its final timing counts as failed:
it is left out of the speedup and counted in ``failed``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from evoteam.roles.budget import PricingTable
from evoteam.supervisor.compare_plan import Arm
from evoteam.supervisor.compare_stats import seeds_interval
from evoteam.supervisor.state import RunState


class FinalTiming(BaseModel):
    """A run's result timed against the incumbent in the comparison's closing session."""

    model_config = ConfigDict(extra="forbid")
    status: str
    speedup: float | None = None
    """Geomean speedup over the incumbent (every workload passed), else None."""
    ci: tuple[float, float] | None = None
    faster: int = 0
    total: int = 0
    of_baseline: float | None = None
    """The result's speed as a fraction of the task's baseline (``speedup`` times the incumbent's speedup over
    the baseline, both timed in the closing session); None when the baseline could not be timed."""


class RunResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str
    arm: str
    mode: str
    seed: int
    run: str
    stop: str | None
    wall_s: float
    tokens: int
    cost_usd: float | None
    """None when a model it used has no price (``unpriced``)."""
    unpriced: list[str] = Field(default_factory=list)
    evaluations: int
    """Its agents' ``evaluate`` calls."""
    best: str | None
    """Its best candidate, None when nothing beat the start significantly (its result is then the start)."""
    own_speedup: float | None
    """The speedup the run itself claimed for its best (its own measurements)."""
    final: FinalTiming | None = None


class Interval(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mean: float | None
    """The geometric mean over seeds (None when no seed's result passed)."""
    ci: tuple[float, float] | None


class ArmSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")
    arm: str
    mode: str
    seeds: int
    speedup: Interval
    faster_fraction: float | None
    """Workloads on which the results beat the incumbent, over all workloads of the passing results."""
    of_baseline: float | None
    """The geometric mean over seeds of the results' fraction of the task baseline's performance."""
    failed: int
    """Seeds whose result failed its final timing."""
    tokens: float
    """Mean tokens per run (per seed, over all tasks)."""
    cost_usd: float | None
    """Mean dollars per run; None when some run used a model without a price."""
    wall_s: float
    """Mean wall time per run."""
    evaluations: float
    """Mean agents' evaluations per run."""


def run_result(task: str, arm: Arm, seed: int, state: RunState, wall_s: float, pricing: PricingTable) -> RunResult:
    """A finished run's outcome, from its journal's state."""
    assert state.config is not None
    cost, unpriced = 0.0, []
    for model, usage in state.model_tokens.items():
        if usage.total == 0:
            continue
        if pricing.price(model) is None:
            unpriced.append(model or "(unnamed)")
        cost += pricing.usd(model, usage)
    return RunResult(
        task=task,
        arm=arm.name,
        mode=arm.mode,
        seed=seed,
        run=state.config.run,
        stop=state.finished,
        wall_s=wall_s,
        tokens=state.spent,
        cost_usd=None if unpriced else cost,
        unpriced=sorted(unpriced),
        evaluations=state.evaluations,
        best=state.best,
        own_speedup=state.best_speedup,
    )


def summarize_arm(arm: Arm, runs: Sequence[RunResult]) -> ArmSummary:
    """One arm's figures over its runs (one per seed, of one task)."""
    return _summary(arm, {r.seed: [r] for r in runs})


def summarize_overall(arm: Arm, runs: Sequence[RunResult]) -> ArmSummary:
    """One arm over several tasks: each seed's speedup is the geometric mean of its results over the tasks
    (a seed with a failed result on any task is failed), then the seeds are averaged as for one task."""
    by_seed: dict[int, list[RunResult]] = {}
    for r in runs:
        by_seed.setdefault(r.seed, []).append(r)
    return _summary(arm, by_seed)


def _summary(arm: Arm, by_seed: dict[int, list[RunResult]]) -> ArmSummary:
    speedups, fractions, cis, failed, faster, total = [], [], [], 0, 0, 0
    for runs in by_seed.values():
        finals = [r.final for r in runs]
        if any(f is None or f.speedup is None for f in finals):
            failed += 1
            continue
        passing = [f for f in finals if f is not None and f.speedup is not None]
        speedups.append(_geomean([f.speedup for f in passing if f.speedup is not None]))
        if all(f.of_baseline is not None for f in passing):
            fractions.append(_geomean([f.of_baseline for f in passing if f.of_baseline is not None]))
        if len(passing) == 1:
            cis.append(passing[0].ci)
        faster += sum(f.faster for f in passing)
        total += sum(f.total for f in passing)
    everything = [r for runs in by_seed.values() for r in runs]
    n = max(1, len(by_seed))
    costs = [r.cost_usd for r in everything]
    if speedups:
        mean, ci = seeds_interval(speedups, cis[0] if len(speedups) == 1 and cis else None)
    else:
        mean, ci = None, None
    return ArmSummary(
        arm=arm.name,
        mode=arm.mode,
        seeds=len(by_seed),
        speedup=Interval(mean=mean, ci=ci),
        faster_fraction=faster / total if total else None,
        of_baseline=_geomean(fractions) if fractions and len(fractions) == len(speedups) else None,
        failed=failed,
        tokens=sum(r.tokens for r in everything) / n,
        cost_usd=None if any(c is None for c in costs) else sum(c for c in costs if c is not None) / n,
        wall_s=sum(r.wall_s for r in everything) / n,
        evaluations=sum(r.evaluations for r in everything) / n,
    )


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


class Control(BaseModel):
    """The incumbent timed against itself in the closing session: it must tie (its interval holds 1)."""

    model_config = ConfigDict(extra="forbid")
    speedup: float | None
    ci: tuple[float, float] | None
    ties: bool


class TaskComparison(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str
    incumbent: str
    """What the results were timed against: ``start`` (the kernel the runs started from), or ``baseline``
    (the task's baseline, when the start itself fails)."""
    baseline: str
    """The task's baseline (``evoteam.toml``'s ``baseline``)."""
    control: Control | None
    arms: list[ArmSummary]
    runs: list[RunResult]


class Comparison(BaseModel):
    """The whole experiment, as ``--json`` prints it: ``arms`` are over every task (the one task's, with one)."""

    model_config = ConfigDict(extra="forbid")
    experiment: str
    settings: dict[str, object]
    arms: list[ArmSummary]
    tasks: list[TaskComparison]
    report: str | None = None
    """The folder of the HTML report and the plot."""
