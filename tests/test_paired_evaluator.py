"""Measurement through the real evaluator and worker: a candidate timed interleaved with its baseline in
one worker gets a median ratio with its interval, pairs and flags; an incumbent that does not load is bad
input, not the candidate's failure; the worker's thread policy is applied and recorded; the output sets the
sides trade hold no answer for the candidate to copy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import kernel_solution, quick_config
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.runner import BenchInputError, LocalRunner
from evoteam.gpu_bench.schema import Definition, EvaluationStatus, Workload
from evoteam.gpu_bench.verify.reference import reference_solution
from evoteam.gpu_bench.worker.threads import ThreadPolicy, allowed_cpus

pytestmark = pytest.mark.integration


def test_a_kernel_against_an_identical_copy_gets_intervals_around_its_ratio(
    runner: LocalRunner, definition: Definition, workloads: list[Workload]
) -> None:
    candidate = kernel_solution("honest.cpp")
    copy = candidate.model_copy(update={"name": "honest-copy"})
    seen = []
    for _ in range(3):  # a noisy neighbour can skew a quick measurement of a small kernel: measure again
        result = Evaluator(runner).evaluate(definition, workloads, candidate, copy, quick_config())
        assert result.status == EvaluationStatus.PASSED
        for w in result.workloads:
            assert w.speedup is not None and w.ci is not None and w.pairs is not None
            lo, hi = w.ci
            assert lo <= w.speedup <= hi
            assert w.pairs >= quick_config().timing.min_samples
            assert w.timing is not None and w.baseline_timing is not None
            assert w.timing.n == w.baseline_timing.n == w.pairs
        assert result.summary.geomean_ci is not None
        seen.append([w.speedup for w in result.workloads])
        if all(0.5 < (w.speedup or 0.0) < 2.0 for w in result.workloads):
            break
    # identical code: a loose bound that only catches a broken pairing, which would miss it every time
    assert all(0.5 < s < 2.0 for s in seen[-1] if s is not None), seen


def test_unpaired_evaluation_times_each_kernel_on_its_own(
    runner: LocalRunner, definition: Definition, workloads: list[Workload]
) -> None:
    candidate = kernel_solution("honest.cpp")
    copy = candidate.model_copy(update={"name": "honest-copy"})
    result = Evaluator(runner, paired=False).evaluate(definition, workloads, candidate, copy, quick_config())
    assert result.status == EvaluationStatus.PASSED
    assert all(w.ci is None and w.pairs is None and w.speedup is not None for w in result.workloads)
    assert result.summary.geomean_ci is None


def test_an_incumbent_that_does_not_load_is_bad_input(
    runner: LocalRunner, definition: Definition, workloads: list[Workload]
) -> None:
    broken = kernel_solution("compile_error.cpp")
    config = quick_config(incumbent=broken)
    with pytest.raises(BenchInputError, match="incumbent does not load"):
        runner.run(definition, workloads[:1], kernel_solution("honest.cpp"), config, None)


def test_the_thread_policy_is_applied_and_recorded(
    tmp_path: Path, definition: Definition, workloads: list[Workload]
) -> None:
    cpu = allowed_cpus()[0]
    runner = LocalRunner(cache_root=tmp_path, threads=ThreadPolicy(threads=1, cpus=[cpu]))
    try:
        result = Evaluator(runner).evaluate(
            definition,
            workloads[:1],
            kernel_solution("thread_probe.py"),
            reference_solution(definition),
            quick_config(),
        )
    finally:
        runner.close()
    assert result.status == EvaluationStatus.PASSED
    evaluation = result.traces[0].evaluation
    assert evaluation is not None
    assert f"threads=1 wait={os.environ.get('OMP_WAIT_POLICY', 'PASSIVE')}" in evaluation.log  # in its host too
    assert evaluation.environment.libs["threads"] == f"1 thread on CPUs {cpu}"
    assert evaluation.environment.libs["hosts"] == "moved to the worker's CPU before each call"
    assert evaluation.environment.libs["malloc"] == "glibc mmap threshold 32 MiB, trim threshold 256 MiB"
    assert evaluation.environment.libs["omp_wait_policy"] == os.environ.get("OMP_WAIT_POLICY", "PASSIVE")


def test_the_output_sets_are_traded_and_hold_no_answer_for_the_candidate_to_copy(
    runner: LocalRunner, definition: Definition, workloads: list[Workload]
) -> None:
    """Paired timing trades two output sets between the sides, so a C candidate's native host maps both.
    ``other_outputs.cpp`` copies a finished answer it finds in the set it was not given (the incumbent's, a
    moment old, when it runs second) instead of its slow 20-pass work; every set is poisoned before each of
    its calls, so it measures as slow as that work does (``control_slow.cpp``) against the same incumbent."""
    incumbent = kernel_solution("honest.cpp")
    large = [w for w in workloads if w.uuid == "large-65536"]
    speed: dict[str, float] = {}
    for name in ("adversarial/other_outputs.cpp", "adversarial/control_slow.cpp"):
        result = Evaluator(runner).evaluate(definition, large, kernel_solution(name), incumbent, quick_config())
        assert result.status == EvaluationStatus.PASSED, result.workloads[0].reason
        assert result.workloads[0].speedup is not None
        speed[name] = result.workloads[0].speedup
    assert speed["adversarial/other_outputs.cpp"] <= 2.0 * speed["adversarial/control_slow.cpp"], speed


def test_nothing_is_measured_against_an_incumbent_whose_timed_outputs_are_wrong(
    runner: LocalRunner, definition: Definition, workloads: list[Workload]
) -> None:
    """The incumbent's outputs are verified on the same drawn pairs as the candidate's (the same work after
    either side's call); an incumbent that writes half its output gives no speedup to measure against."""
    config = quick_config(incumbent=kernel_solution("partial_write.cpp"))
    run = runner.run(definition, workloads[:1], kernel_solution("honest.cpp"), config, None)
    outcome = run.workloads[0].outcome
    assert outcome.status == EvaluationStatus.RUNTIME_ERROR, outcome
    assert "the incumbent's outputs differ from the reference" in outcome.reason
    assert outcome.paired is None
