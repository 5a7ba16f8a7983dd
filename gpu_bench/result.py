"""``CandidateResult``: per-workload traces of one candidate plus the summary users see."""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from evoteam.gpu_bench.build.builder import BuildResult
from evoteam.gpu_bench.schema import EvaluationStatus, KernelResources, Trace
from evoteam.gpu_bench.timing.statistics import TimingStats


class WorkloadResult(BaseModel):
    uuid: str
    axes: dict[str, int]
    status: EvaluationStatus
    reason: str = ""
    timing: TimingStats | None = None
    baseline_timing: TimingStats | None = None
    speedup: float | None = None
    """Baseline time / candidate time: with paired timing, the median of per-pair ratios."""
    ci: tuple[float, float] | None = None
    """95% confidence interval of ``speedup`` (paired timing only)."""
    pairs: int | None = None
    """Pairs the paired timing sampled."""
    flags: list[str] = Field(default_factory=list)
    """Why not to trust ``speedup`` as it stands: ``noise`` (the interval does not support the effect claimed),
    ``excessive`` (over ``EXCESSIVE_SPEEDUP``x), ``contended`` (more runnable tasks than CPUs while timing),
    ``fixed-inputs`` (some inputs are a dataset's fixed values, not fresh random ones), ``stream-unchecked``
    (CUDA: the stream audit could not tell whether the kernel works on the stream it is given)."""


MIN_EFFECT = 0.02
"""A speedup within 2% of 1 claims nothing; beyond it the interval must exclude 1."""
EXCESSIVE_SPEEDUP = 10.0
"""KernelBench's rule: a speedup above 10x over the task's baseline is suspect until looked at."""


def workload_flags(
    speedup: float | None,
    ci: tuple[float, float] | None,
    runnable: float | None = None,
    cpus: int | None = None,
    min_effect: float = MIN_EFFECT,
) -> list[str]:
    """The flags a speedup earns: ``noise``, ``excessive``, ``contended`` (see ``WorkloadResult.flags``)."""
    flags: list[str] = []
    if speedup is None:
        return flags
    if ci is not None:
        lo, hi = ci
        claims = abs(speedup - 1.0) >= min_effect
        if (claims and lo <= 1.0 <= hi) or (hi > 0 and lo > 0 and hi / lo > 1.0 + 10 * min_effect):
            flags.append("noise")
    if speedup > EXCESSIVE_SPEEDUP:
        flags.append("excessive")
    if runnable is not None and cpus is not None and runnable > cpus:
        flags.append("contended")
    return flags


class Worst(BaseModel):
    uuid: str
    status: EvaluationStatus
    speedup: float | None = None
    reason: str = ""


class Summary(BaseModel):
    geomean_speedup: float | None
    """Geometric mean of per-workload speedups; None unless every workload passed."""
    mean_speedup: float | None
    """Arithmetic mean (FlashInfer-Bench's score); None unless every workload passed."""
    geomean_ci: tuple[float, float] | None = None
    """95% bootstrap interval of the geomean (paired timing, every workload passed)."""
    faster: int
    """Workloads where the candidate beat the baseline."""
    total: int
    passed: int
    worst: Worst | None
    fast_p: dict[str, float] = Field(default_factory=dict)
    """KernelBench's fast_p for p in ``FAST_P``: the share of workloads that PASSED with a speedup over p
    (``fast_0`` is the share that passed), keys ``fast_0``, ``fast_1``, ``fast_1.5``, ``fast_2``."""


FAST_P = (0.0, 1.0, 1.5, 2.0)


def fast_p(results: list[WorkloadResult]) -> dict[str, float]:
    """KernelBench's fast_p over ``results``: correct (PASSED) and, for p > 0, a speedup (the point estimate)
    over p, as a share of all of them."""
    if not results:
        return {}
    shares: dict[str, float] = {}
    for p in FAST_P:
        hits = sum(
            1
            for r in results
            if r.status == EvaluationStatus.PASSED and (p == 0 or (r.speedup is not None and r.speedup > p))
        )
        shares[f"fast_{p:g}"] = hits / len(results)
    return shares


class CandidateResult(BaseModel):
    status: EvaluationStatus
    solution: str
    baseline: str
    summary: Summary
    traces: list[Trace]
    workloads: list[WorkloadResult]
    build: BuildResult
    load_error: str | None = None
    resources: list[KernelResources] = Field(default_factory=list)
    """ptxas facts per kernel (CUDA)."""
    violations: list[str] = Field(default_factory=list)
    """Constraints the generated code breaks (then the status is REJECTED and no workload ran)."""


def overall_status(statuses: list[EvaluationStatus]) -> EvaluationStatus:
    """PASSED only when every workload passed; otherwise the first failure's status."""
    for status in statuses:
        if status != EvaluationStatus.PASSED:
            return status
    return EvaluationStatus.PASSED


def summarize(results: list[WorkloadResult], geomean_ci: tuple[float, float] | None = None) -> Summary:
    """The summary of per-workload results; ``geomean_ci`` is kept only when the geomean exists."""
    passed = [r for r in results if r.status == EvaluationStatus.PASSED and r.speedup is not None]
    speedups = [r.speedup for r in passed if r.speedup is not None]
    everything = len(passed) == len(results) and bool(results)
    failures = [r for r in results if r.status != EvaluationStatus.PASSED]
    worst: Worst | None = None
    if failures:
        f = failures[0]
        worst = Worst(uuid=f.uuid, status=f.status, reason=f.reason)
    elif passed:
        w = min(passed, key=lambda r: r.speedup or 0.0)
        worst = Worst(uuid=w.uuid, status=w.status, speedup=w.speedup)
    return Summary(
        geomean_speedup=geomean(speedups) if everything else None,
        geomean_ci=geomean_ci if everything else None,
        mean_speedup=sum(speedups) / len(speedups) if everything else None,
        faster=sum(1 for s in speedups if s > 1.0),
        total=len(results),
        passed=len(passed),
        worst=worst,
        fast_p=fast_p(results),
    )


def geomean(values: list[float]) -> float:
    if not values or any(v <= 0 for v in values):
        return 0.0
    return math.exp(sum(math.log(v) for v in values) / len(values))
