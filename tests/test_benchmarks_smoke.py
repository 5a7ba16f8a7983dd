"""Smoke test of benchmarks/evaluator_vs_kernel_tuner.py: its measurement functions on a tiny size."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from conftest import benchmark_script
from evoteam.gpu_bench.bench import Evaluator
from evoteam.gpu_bench.runner import LocalRunner
from evoteam.gpu_bench.timing.statistics import TimingConfig

pytestmark = pytest.mark.integration

pytest.importorskip("kernel_tuner", reason="kernel-tuner is not installed")

TINY = TimingConfig(warmup_s=0.002, min_samples=5, max_samples=20, max_time_s=0.05)


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    with benchmark_script("evaluator_vs_kernel_tuner") as module:
        yield module


def test_our_evaluator_measures_the_kernel(bench: ModuleType, tmp_path: Path) -> None:
    ours = bench.load_ours(size=1)
    assert ours.workload.axes == {"batch_size": 1}
    runner = LocalRunner(cache_root=tmp_path)
    try:
        evaluator = Evaluator(runner)
        first = bench.measure_ours(evaluator, ours, bench.eval_config(ours, TINY))
        again = bench.measure_ours(
            evaluator, ours, bench.eval_config(ours, TINY.model_copy(update={"flush_cache": False}))
        )
    finally:
        runner.close()
    for ms, samples in (first, again):
        assert ms > 0
        assert TINY.min_samples <= samples <= TINY.max_samples


def test_kernel_tuner_measures_the_kernel_and_its_output_is_right(bench: ModuleType) -> None:
    ours = bench.load_ours(size=2)
    inputs = bench.KtInputs.random(2)
    ms, times = bench.measure_kernel_tuner(ours.task.source.read_text(), inputs, ["-O3"], iterations=3)
    assert len(times) == 3 and min(times) > 0
    assert ms == pytest.approx(statistics.mean(times), rel=1e-6)  # Kernel Tuner reports the mean
    assert inputs.output.any()  # the kernel wrote the caller's array
    assert inputs.wrong_elements(1e-2, 1e-2) == 0
    good = inputs.output.copy()
    inputs.output[0, :] = 0x4000  # bf16 2.0 everywhere in row 0
    assert inputs.wrong_elements(1e-2, 1e-2) > 0
    inputs.output[:] = good
    inputs.output[1, 0] = 0x7FC0  # one NaN
    assert inputs.wrong_elements(1e-2, 1e-2) == 1


def test_call_overhead_is_positive_and_small(bench: ModuleType, tmp_path: Path) -> None:
    ours = bench.load_ours(size=1)
    us = bench.call_overhead_us(ours.definition, 1, ["-O3"], tmp_path)
    assert 0 < us < 1e6  # microseconds per call: a second would be a unit mistake, not a busy machine


def test_statistics(bench: ModuleType) -> None:
    assert bench.first_run_bias([2.0, 1.0, 1.0, 3.0]) == pytest.approx(2.0 / 1.0 - 1)
    assert bench.cv([1.0, 2.0, 3.0]) == pytest.approx(statistics.stdev([1.0, 2.0, 3.0]) / 2.0)
