"""The evaluator's front door: a candidate and a baseline in, a ``CandidateResult`` with traces out.

The baseline's timings are cached per (baseline, definition, workloads, config), so a stream of candidates
pays for the baseline once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from evoteam.gpu_bench.build.builder import BuildResult
from evoteam.gpu_bench.build.check import CheckResult, check_solution, unverified_constraints
from evoteam.gpu_bench.build.cuda.constraints import Constraints
from evoteam.gpu_bench.environment import environment
from evoteam.gpu_bench.result import CandidateResult, WorkloadResult, overall_status, summarize, workload_flags
from evoteam.gpu_bench.runner import BenchInputError, Progress, Runner, SolutionRun, WorkloadRun
from evoteam.gpu_bench.schema import (
    Correctness,
    Definition,
    Environment,
    Evaluation,
    EvaluationStatus,
    Language,
    Performance,
    SafetensorsInput,
    Solution,
    Trace,
    Workload,
)
from evoteam.gpu_bench.timing.statistics import geomean_ci
from evoteam.gpu_bench.worker.evaluate import EvalConfig

Clock = Callable[[], datetime]


def _now() -> datetime:
    return datetime.now(UTC)


class Evaluator:
    """Evaluates candidates against a baseline through one runner (whose worker stays warm).

    The baseline is verified once (cached); each candidate that passes is then timed interleaved with it in
    the same worker (``paired``, the default): its speedup is the median of per-pair ratios, with a 95%
    interval per workload and a bootstrap interval of the geomean."""

    def __init__(
        self, runner: Runner, clock: Clock = _now, cache_root: Path | None = None, paired: bool = True
    ) -> None:
        self._runner = runner
        self._paired = paired
        self._clock = clock
        self._cache_root = cache_root
        """Where constraint checks build (here, without a GPU); a local runner on the same cache reuses it."""
        self._baselines: dict[str, SolutionRun] = {}

    def evaluate(
        self,
        definition: Definition,
        workloads: list[Workload],
        candidate: Solution,
        baseline: Solution,
        config: EvalConfig,
        blob_root: Path | None = None,
        progress: Progress | None = None,
        constraints: Constraints | None = None,
    ) -> CandidateResult:
        """Constraints are checked on the generated code first: a candidate that breaks one is REJECTED
        without running (and the baseline is held to nothing)."""
        if candidate.definition != definition.name:
            raise BenchInputError(
                f"solution {candidate.name!r} is for definition {candidate.definition!r}, not {definition.name!r}"
            )
        checked: CheckResult | None = None
        if constraints is not None and not constraints.is_empty():
            checked = check_solution(candidate, constraints, self._cache_root)
            if checked.ok and checked.violations:
                return self._rejected(definition, workloads, candidate, baseline, checked.violations, checked)
        base = self.baseline_run(definition, workloads, baseline, config, blob_root)
        timed = config.model_copy(update={"incumbent": baseline}) if self._paired and config.measure else config
        run = self._runner.run(definition, workloads, candidate, timed, blob_root, progress)
        cuda = candidate.spec.language == Language.CUDA
        if constraints is not None and checked is not None and not checked.ok and run.ok and cuda:
            # it built where it ran (another host) but not here: hold it to what can still be checked
            why = next((line for line in checked.log.splitlines() if line.strip()), "no compiler output")
            violations = unverified_constraints(constraints, run.build.resources, why[:300])
            if violations:
                built = run.build
                remote = CheckResult(
                    ok=True, log=built.log, diagnostics=built.diagnostics, resources=built.resources, arch=built.arch
                )
                return self._rejected(definition, workloads, candidate, baseline, violations, remote)
        return self._result(definition, workloads, run, base)

    def _rejected(
        self,
        definition: Definition,
        workloads: list[Workload],
        candidate: Solution,
        baseline: Solution,
        violations: list[str],
        checked: CheckResult,
    ) -> CandidateResult:
        timestamp = self._clock().isoformat()
        env = environment()  # the constraints were checked here, on this machine
        reason = "constraint violated: " + "; ".join(violations)
        status = EvaluationStatus.REJECTED
        results = [WorkloadResult(uuid=w.uuid, axes=w.axes, status=status, reason=reason) for w in workloads]
        traces = [_trace(definition, w, candidate, status, env, timestamp, reason) for w in workloads]
        build = BuildResult(
            ok=True, log=checked.log, diagnostics=checked.diagnostics, resources=checked.resources, arch=checked.arch
        )
        return CandidateResult(
            status=status,
            solution=candidate.name,
            baseline=baseline.name,
            summary=summarize(results),
            traces=traces,
            workloads=results,
            build=build,
            resources=checked.resources,
            violations=violations,
        )

    def baseline_run(
        self,
        definition: Definition,
        workloads: list[Workload],
        baseline: Solution,
        config: EvalConfig,
        blob_root: Path | None,
        progress: Progress | None = None,
    ) -> SolutionRun:
        """The baseline verified and timed on every workload (once per evaluator: cached); ``progress`` hears
        of each workload when this call does the work."""
        key = hashlib.sha256(
            "\0".join(
                [
                    baseline.content_hash(),
                    definition.model_dump_json(),
                    *(w.model_dump_json() for w in workloads),
                    config.model_dump_json(),
                    str(blob_root),
                ]
            ).encode()
        ).hexdigest()
        if key not in self._baselines:
            run = self._runner.run(definition, workloads, baseline, config, blob_root, progress)
            if not run.ok:
                why = run.load_error or run.build.log.strip()[-2000:]
                raise BenchInputError(f"baseline {baseline.name!r} cannot be built or loaded: {why}")
            for w in run.workloads:
                if w.outcome.status != EvaluationStatus.PASSED:
                    raise BenchInputError(
                        f"baseline {baseline.name!r} fails on workload {w.workload.uuid}: "
                        f"{w.outcome.status.value}: {w.outcome.reason}"
                    )
            self._baselines[key] = run
        return self._baselines[key]

    def _result(
        self, definition: Definition, workloads: list[Workload], run: SolutionRun, base: SolutionRun
    ) -> CandidateResult:
        timestamp = self._clock().isoformat()
        env = run.environment
        traces: list[Trace] = []
        results: list[WorkloadResult] = []
        if not run.ok:
            log = run.load_error or run.build.log
            for w in workloads:
                traces.append(_trace(definition, w, run.solution, EvaluationStatus.COMPILE_ERROR, env, timestamp, log))
                results.append(
                    WorkloadResult(uuid=w.uuid, axes=w.axes, status=EvaluationStatus.COMPILE_ERROR, reason=log[-500:])
                )
        else:
            base_by_uuid = {w.workload.uuid: w for w in base.workloads}
            for done in run.workloads:
                result = _workload_result(done, base_by_uuid.get(done.workload.uuid))
                results.append(result)
                traces.append(_trace_of(definition, done, result, run.solution, env, timestamp))
        pairs = [w.outcome.paired.blocks for w in run.workloads if w.outcome.paired is not None]
        interval = geomean_ci(pairs) if pairs and len(pairs) == len(results) else None
        return CandidateResult(
            status=overall_status([r.status for r in results]) if run.ok else EvaluationStatus.COMPILE_ERROR,
            solution=run.solution.name,
            baseline=base.solution.name,
            summary=summarize(results, interval),
            traces=traces,
            workloads=results,
            build=run.build,
            load_error=run.load_error,
            resources=run.build.resources,
        )


def _workload_result(run: WorkloadRun, base: WorkloadRun | None) -> WorkloadResult:
    """Paired: the median ratio and its interval; otherwise the ratio of the two runs' medians."""
    o = run.outcome
    result = WorkloadResult(
        uuid=run.workload.uuid, axes=run.workload.axes, status=o.status, reason=o.reason, timing=o.timing
    )
    paired = o.paired if o.status == EvaluationStatus.PASSED else None
    if paired is not None:
        flags = workload_flags(paired.ratio, paired.ci, paired.runnable, paired.cpus) + _unchecked(run)
        update = {"baseline_timing": paired.incumbent, "speedup": paired.ratio, "ci": paired.ci}
        return result.model_copy(update={**update, "pairs": paired.pairs, "flags": flags})
    base_timing = base.outcome.timing if base is not None else None
    speedup = None
    if o.status == EvaluationStatus.PASSED and o.timing is not None and base_timing is not None:
        speedup = base_timing.median_ms / o.timing.median_ms if o.timing.median_ms > 0 else 0.0
    flags = workload_flags(speedup, None) + _unchecked(run)
    return result.model_copy(update={"baseline_timing": base_timing, "speedup": speedup, "flags": flags})


def _unchecked(run: WorkloadRun) -> list[str]:
    """What the evaluation could not check of this workload: ``fixed-inputs``, ``stream-unchecked``."""
    stream = ["stream-unchecked"] if run.outcome.stream_unchecked is not None else []
    return _fixed(run) + stream


def _fixed(run: WorkloadRun) -> list[str]:
    """``fixed-inputs`` when some input comes from a blob (the same values every time: a candidate could have
    answers for them, where random inputs are fresh per trial) and the kernel could not be verified and
    memo-checked on perturbed copies of them (nothing to perturb, or the definition does not allow it)."""
    fixed = any(isinstance(s, SafetensorsInput) for s in run.workload.inputs.values())
    return ["fixed-inputs"] if fixed and not run.outcome.perturbed else []


def _trace_of(
    definition: Definition,
    run: WorkloadRun,
    result: WorkloadResult,
    solution: Solution,
    env: Environment,
    timestamp: str,
) -> Trace:
    o = run.outcome
    log = "\n".join(part for part in (o.reason, run.log) if part)
    correctness = None
    if o.status in (EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL):
        correctness = Correctness(
            max_relative_error=o.max_relative_error if o.max_relative_error is not None else float("nan"),
            max_absolute_error=o.max_absolute_error if o.max_absolute_error is not None else float("nan"),
        )
    performance = None
    if o.status == EvaluationStatus.PASSED:
        # FlashInfer-Bench's own definition: reference latency / latency (with paired timing, the medians of
        # the two kernels' interleaved samples; the result's speedup is the median of per-pair ratios)
        latency = result.timing.median_ms if result.timing else 0.0
        reference = result.baseline_timing.median_ms if result.baseline_timing else 0.0
        performance = Performance(
            latency_ms=latency,
            reference_latency_ms=reference,
            speedup_factor=reference / latency if latency > 0 else 0.0,
        )
    evaluation = Evaluation(
        status=o.status,
        environment=env,
        timestamp=timestamp,
        log=log,
        correctness=correctness,
        performance=performance,
    )
    return Trace(definition=definition.name, workload=run.workload, solution=solution.name, evaluation=evaluation)


def _trace(
    definition: Definition,
    workload: Workload,
    solution: Solution,
    status: EvaluationStatus,
    env: Environment,
    timestamp: str,
    log: str,
) -> Trace:
    evaluation = Evaluation(status=status, environment=env, timestamp=timestamp, log=log)
    return Trace(definition=definition.name, workload=workload, solution=solution.name, evaluation=evaluation)
