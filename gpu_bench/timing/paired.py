"""Paired, interleaved timing: the incumbent and a candidate timed alternately in one process.

A claim "B is faster than A" compares two kernels measured in the same session. Pairs come in blocks of two
in opposite orders, A B then B A or B A then A B, drawn at random for each block: neither always runs second,
and nothing in the loop that recurs with a period (the interpreter's garbage collection, say) falls on one
side's turn more than the other's. In a fixed ABBA order, identical kernels measured the second one 0.2-0.45%
faster, every time. Both see the same inputs and the same cache flush before each call. Each pair gives one
ratio ``time A / time B``, and each block the geometric mean of its two (``block_ratios``). Sampling stops,
after a whole block, when the 95% interval of the median block ratio is narrow enough (``target_noise``) or
the time cap is reached (twice ``max_time_s``: two kernels share it). Machine load is sampled while timing.

``warm_up`` and ``cpu_measure`` are the pieces the single-kernel timers (``cpu.py``, ``gpu.py``) use as well.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path

from evoteam.gpu_bench.timing.statistics import (
    PairedStats,
    TimingConfig,
    block_ratios,
    net_ms,
    paired_stats,
    relative_ci_half_width,
)

Measure = Callable[[Callable[[], object]], float]
"""Times one call in milliseconds, its cache flush before the timed region included."""
LOAD_EVERY = 8
"""Pairs between two readings of the machine's runnable tasks (read before both pairs of a block, one of each
order, so the reading's cost falls on both sides alike)."""


def time_pair(
    incumbent: Callable[[], object],
    candidate: Callable[[], object],
    config: TimingConfig,
    measure: Measure,
    warm: Callable[[Callable[[], object]], None],
    before_pair: Callable[[int], None] | None = None,
    clock: Callable[[], int] = time.perf_counter_ns,
    runnable: Callable[[], int | None] | None = None,
    overhead_ms: tuple[float, float] = (0.0, 0.0),
    order: random.Random | None = None,
) -> PairedStats:
    """Warms both kernels by time, alternating, then samples pairs in blocks of two, ABBA or BAAB as drawn
    from ``order`` for each block. ``warm(call)`` makes one untimed call (and waits for it); ``before_pair(i)``
    runs before pair i, outside the timed regions; ``overhead_ms`` (the incumbent's, the candidate's: a native
    host's round trip) is subtracted from each side's samples (``net_ms``)."""
    probe = runnable if runnable is not None else runnable_tasks
    order = order if order is not None else random.Random()
    incumbent_first = True

    def warm_both() -> None:
        warm(incumbent)
        warm(candidate)

    warm_calls = warm_up(warm_both, config, clock)
    a_ms: list[float] = []
    b_ms: list[float] = []
    ratios: list[float] = []
    loads: list[int] = []
    stop_at = clock() + int(2 * config.max_time_s * 1e9)
    while len(ratios) < config.max_samples:
        i = len(ratios)
        if i % LOAD_EVERY < 2:  # before both pairs of a block, one of each order
            reading = probe()
            if reading is not None:
                loads.append(reading)
        if before_pair is not None:
            before_pair(i)
        # a block's first pair: AB or BA, drawn; its second: the other order
        incumbent_first = order.random() < 0.5 if i % 2 == 0 else not incumbent_first
        if incumbent_first:
            a, b = measure(incumbent), measure(candidate)
        else:
            b, a = measure(candidate), measure(incumbent)
        a, b = net_ms(a, overhead_ms[0]), net_ms(b, overhead_ms[1])
        a_ms.append(a)
        b_ms.append(b)
        ratios.append(a / b if b > 0 else float("inf"))
        # The rule is worked out after every pair, though only a whole block may end sampling: work done
        # between some pairs and not others makes the pair after it start from a colder machine (its first
        # kernel waking a thread pool gone to sleep), which in a fixed order was always the same side's turn.
        done = relative_ci_half_width(block_ratios(ratios)) < config.target_noise or clock() > stop_at
        if done and len(ratios) % 2 == 0 and len(ratios) >= config.min_samples:
            break
    stats = paired_stats(a_ms, b_ms, warm_calls)
    cpus = _cpus()
    # the reading counts this worker's own running thread: subtract it, so an idle machine reads about 0
    mean_load = max(0.0, sum(loads) / len(loads) - 1) if loads else None
    sides = {
        side: stats_side.model_copy(update={"round_trip_ms": overhead})
        for side, stats_side, overhead in (
            ("incumbent", stats.incumbent, overhead_ms[0]),
            ("candidate", stats.candidate, overhead_ms[1]),
        )
        if overhead
    }
    return stats.model_copy(update={"runnable": mean_load, "cpus": cpus, **sides})


def warm_up(step: Callable[[], object], config: TimingConfig, clock: Callable[[], int]) -> int:
    """Repeats ``step`` for ``config.warmup_s`` (at least 3 times); how many times it ran."""
    steps = 0
    deadline = clock() + int(config.warmup_s * 1e9)
    while steps < 3 or clock() < deadline:
        step()
        steps += 1
    return steps


def cpu_measure(flush: Callable[[], None], clock: Callable[[], int] = time.perf_counter_ns) -> Measure:
    """perf_counter around the call, the flush before it."""

    def measure(call: Callable[[], object]) -> float:
        flush()
        start = clock()
        call()
        return (clock() - start) / 1e6

    return measure


def runnable_tasks(loadavg: Path = Path("/proc/loadavg")) -> int | None:
    """Tasks runnable on the machine right now (the 4th field of /proc/loadavg, ``running/total``)."""
    try:
        return int(loadavg.read_text().split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return None


def _cpus() -> int:
    """The machine's CPUs: the runnable count is machine-wide."""
    return os.cpu_count() or 1
