"""Paired timing's statistics and loop, on scripted clocks and samples: the median ratio's interval, the
geomean's bootstrap interval, blocks of two pairs in opposite orders, the stopping rules, machine load, and
the flags a speedup earns."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from evoteam.gpu_bench.result import WorkloadResult, summarize, workload_flags
from evoteam.gpu_bench.schema import EvaluationStatus
from evoteam.gpu_bench.timing.paired import cpu_measure, runnable_tasks, time_pair
from evoteam.gpu_bench.timing.statistics import (
    NET_FLOOR,
    TimingConfig,
    block_ratios,
    geomean_ci,
    median_ci,
    net_ms,
    paired_stats,
    relative_ci_half_width,
)

pytestmark = pytest.mark.unit


def test_the_median_interval_is_a_pair_of_order_statistics_around_the_median() -> None:
    values = [float(v) for v in range(1, 101)]
    lo, hi = median_ci(values)
    assert (lo, hi) == (40.0, 61.0)  # k = floor((100 - 1.96 * 10) / 2) - 1 = 39 (0-based)
    assert median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few: the whole range
    assert all(math.isnan(v) for v in median_ci([]))


def test_the_median_interval_covers_the_true_median_about_95_percent_of_the_time() -> None:
    rng = random.Random(7)
    covered = 0
    for _ in range(400):
        sample = [rng.lognormvariate(0.0, 0.5) for _ in range(60)]  # true median exp(0) = 1
        lo, hi = median_ci(sample)
        covered += lo <= 1.0 <= hi
    assert 0.92 <= covered / 400 <= 0.995


def test_paired_stats_are_ratios_of_incumbent_over_candidate() -> None:
    stats = paired_stats([2.0, 4.0, 6.0, 2.0, 4.0, 6.0], [1.0, 2.0, 3.0, 1.0, 2.0, 3.0], warmup_calls=3)
    assert stats.ratio == 2.0 and stats.ci == (2.0, 2.0) and stats.pairs == 6
    assert stats.incumbent.median_ms == 4.0 and stats.candidate.median_ms == 2.0
    assert relative_ci_half_width(stats.ratios) == 0.0
    assert relative_ci_half_width([1.0, 2.0]) == math.inf


def test_the_geomean_interval_brackets_the_geomean_and_is_deterministic() -> None:
    rng = random.Random(1)
    workloads = [[rng.uniform(1.9, 2.1) for _ in range(50)], [rng.uniform(0.45, 0.55) for _ in range(50)]]
    lo, hi = geomean_ci(workloads)
    assert lo < 1.0 < hi and hi - lo < 0.1  # geomean of about 2 and 0.5 is 1
    assert geomean_ci(workloads) == (lo, hi)
    assert all(math.isnan(v) for v in geomean_ci([[1.0, -1.0]]))


class ScriptedClock:
    """A nanosecond clock that advances only when a scripted call runs."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now

    def kernel(self, ms: float, trace: list[str], name: str) -> Callable[[], object]:
        def call() -> None:
            trace.append(name)
            self.now += int(ms * 1e6)

        return call


def test_blocks_run_their_pairs_in_opposite_orders_and_stop_once_the_interval_is_narrow() -> None:
    clock = ScriptedClock()
    trace: list[str] = []
    a, b = clock.kernel(2.0, trace, "A"), clock.kernel(1.0, trace, "B")
    config = TimingConfig(warmup_s=0.0, min_samples=10, max_samples=100, max_time_s=10.0, target_noise=0.01)
    rotations: list[int] = []
    measure = cpu_measure(lambda: None, clock)
    order = random.Random(11)
    stats = time_pair(a, b, config, measure, lambda c: c(), rotations.append, clock, lambda: 1, order=order)
    assert stats.pairs == 12  # identical samples: zero-wide at the first chance, 6 blocks (the fewest)
    assert stats.ratio == 2.0 and stats.ci == (2.0, 2.0) and len(stats.blocks) == 6
    timed = trace[6:]  # three warm-up rounds of A, B first
    blocks = ["".join(timed[k : k + 4]) for k in range(0, len(timed), 4)]
    assert set(blocks) == {"ABBA", "BAAB"}  # each block AB then BA, or BA then AB, as drawn
    assert rotations == list(range(12))
    assert stats.runnable == 0.0  # the reading counts the timing thread itself


def test_each_side_s_round_trip_is_subtracted_but_no_sample_falls_below_its_floor() -> None:
    """A native host's round trip (0.5 ms here, the candidate's side) is not the kernel's time: 1.5 ms
    measured is 1.0 ms; a call measured within the round trip keeps ``NET_FLOOR`` of what was measured."""
    clock = ScriptedClock()
    trace: list[str] = []
    a, b = clock.kernel(2.0, trace, "A"), clock.kernel(1.5, trace, "B")
    config = TimingConfig(warmup_s=0.0, min_samples=6, max_samples=6, max_time_s=10.0)
    stats = time_pair(a, b, config, cpu_measure(lambda: None, clock), lambda c: c(), None, clock, lambda: 1, (0.0, 0.5))
    assert stats.ratio == 2.0 and stats.candidate.median_ms == 1.0 and stats.incumbent.median_ms == 2.0
    assert stats.candidate.round_trip_ms == 0.5 and stats.incumbent.round_trip_ms is None
    assert net_ms(1.5, 0.5) == 1.0 and net_ms(0.4, 0.5) == NET_FLOOR * 0.4


def test_a_block_cancels_what_running_first_does_to_a_call() -> None:
    """Identical kernels whose first call after the pause between pairs takes 25% longer: pair by pair the
    ratios are 1.25 and 0.8, and their median lands on whichever holds one more pair; per block, 1."""
    clock = ScriptedClock()
    first = [True]

    def kernel() -> None:
        clock.now += int((1.25 if first[0] else 1.0) * 1e6)
        first[0] = False

    def pause(i: int) -> None:
        first[0] = True

    config = TimingConfig(warmup_s=0.0, min_samples=10, max_samples=13, max_time_s=10.0, target_noise=0.0)
    a, b = (lambda: kernel()), (lambda: kernel())
    stats = time_pair(a, b, config, cpu_measure(lambda: None, clock), lambda c: c(), pause, clock, lambda: 1)
    assert sorted(stats.ratios[:2]) == sorted(stats.ratios[2:4]) == [0.8, 1.25]  # one pair of each order
    assert stats.pairs == 13  # max_samples ends sampling, whole block or not
    assert block_ratios([1.25, 0.8, 1.25]) == [1.0]  # an unpaired last pair is left out
    assert stats.ratio == pytest.approx(1.0) and stats.ci == pytest.approx((1.0, 1.0))
    assert block_ratios([2.0]) == [2.0]


def test_sampling_ends_only_after_a_whole_block() -> None:
    """Narrow from the start, but the rule may end sampling only after an even number of pairs: each side ran
    first as often as second."""
    clock = ScriptedClock()
    trace: list[str] = []
    config = TimingConfig(warmup_s=0.0, min_samples=13, max_samples=100, max_time_s=10.0, target_noise=0.01)
    a, b = clock.kernel(1.0, trace, "A"), clock.kernel(1.0, trace, "B")
    stats = time_pair(a, b, config, cpu_measure(lambda: None, clock), lambda c: c(), None, clock, lambda: 1)
    assert stats.pairs == 14 and stats.ratio == 1.0


def test_the_median_block_interval_covers_identical_kernels_with_a_position_effect() -> None:
    """Simulated identical kernels, lognormal noise and a 25% penalty on the first call after each pause:
    the interval of the median block ratio holds 1 in about 95% of measurements, and no side is favoured."""
    rng = random.Random(5)
    clock = ScriptedClock()
    first = [True]

    def kernel() -> None:
        clock.now += int(6000 * (1.25 if first[0] else 1.0) * rng.lognormvariate(0.0, 0.15))
        first[0] = False

    def pause(i: int) -> None:
        first[0] = True
        clock.now += 20_000

    config = TimingConfig(warmup_s=0.0, max_samples=200)
    covered, logs = 0, []
    for _ in range(200):
        stats = time_pair(kernel, kernel, config, cpu_measure(lambda: None, clock), lambda c: c(), pause, clock)
        covered += stats.ci[0] <= 1.0 <= stats.ci[1]
        logs.append(math.log(stats.ratio))
    assert 0.9 <= covered / 200 <= 0.995
    assert abs(sum(logs) / len(logs)) < 0.005


def test_noisy_pairs_stop_at_the_time_cap() -> None:
    clock = ScriptedClock()
    rng = random.Random(3)
    trace: list[str] = []

    def noisy() -> None:
        trace.append("B")
        clock.now += int(rng.uniform(0.5, 5.0) * 1e6)

    config = TimingConfig(warmup_s=0.0, min_samples=10, max_samples=10_000, max_time_s=0.5, target_noise=0.001)
    stats = time_pair(clock.kernel(1.0, trace, "A"), noisy, config, cpu_measure(lambda: None, clock), lambda c: c())
    assert 10 <= stats.pairs < 10_000
    assert clock.now >= int(2 * config.max_time_s * 1e9)  # both kernels share twice the cap


def test_runnable_tasks_reads_the_fourth_field_of_loadavg(tmp_path: Path) -> None:
    path = tmp_path / "loadavg"
    path.write_text("0.50 0.40 0.30 3/812 12345\n")
    assert runnable_tasks(path) == 3
    path.write_text("garbage")
    assert runnable_tasks(path) is None


@pytest.mark.parametrize(
    ("speedup", "ci", "runnable", "expected"),
    [
        (1.0, (0.99, 1.01), 0.0, []),
        (1.10, (1.05, 1.15), 0.0, []),
        (1.10, (0.95, 1.25), 0.0, ["noise"]),  # claims 10%, the interval holds 1
        (1.01, (0.70, 1.40), 0.0, ["noise"]),  # no claim, but too wide to tell anything
        (12.0, (11.5, 12.5), 0.0, ["excessive"]),
        (1.0, (0.99, 1.01), 5.0, ["contended"]),
    ],
)
def test_flags(speedup: float, ci: tuple[float, float], runnable: float, expected: list[str]) -> None:
    assert workload_flags(speedup, ci, runnable, cpus=2) == expected


def test_the_summary_keeps_the_geomean_interval_only_when_every_workload_passed() -> None:
    ok = WorkloadResult(uuid="a", axes={}, status=EvaluationStatus.PASSED, speedup=1.0)
    bad = WorkloadResult(uuid="b", axes={}, status=EvaluationStatus.RUNTIME_ERROR)
    assert summarize([ok], (0.9, 1.1)).geomean_ci == (0.9, 1.1)
    assert summarize([ok, bad], (0.9, 1.1)).geomean_ci is None
