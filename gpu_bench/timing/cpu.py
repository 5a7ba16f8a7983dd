"""CPU timing: warm-up by time, cache flush outside the timed region, samples until the noise is low.

The sampling rules and statistics live in ``statistics.py`` (shared with GPU timing, ``gpu.py``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from evoteam.gpu_bench.timing.flush import buffer_flusher
from evoteam.gpu_bench.timing.paired import cpu_measure, warm_up
from evoteam.gpu_bench.timing.statistics import TimingConfig, TimingStats, net_ms, relative_noise, summarize_samples


def time_call(
    call: Callable[[], object],
    config: TimingConfig,
    before_sample: Callable[[int], None] | None = None,
    clock: Callable[[], int] = time.perf_counter_ns,
    flush: Callable[[], None] | None = None,
    overhead_ms: float = 0.0,
) -> TimingStats:
    """Times ``call``; ``before_sample(i)`` runs before sample i, outside the timed region, and so does
    ``flush`` (default: the big-buffer flush when ``config.flush_cache``); ``overhead_ms`` (a native host's
    round trip) is subtracted from every sample (``net_ms``). Exceptions of ``call`` propagate."""
    if flush is None or not config.flush_cache:
        flush = buffer_flusher() if config.flush_cache else _no_flush
    measure = cpu_measure(flush, clock)
    warm_calls = warm_up(call, config, clock)
    samples: list[float] = []
    stop_at = clock() + int(config.max_time_s * 1e9)
    noise = math.inf
    while len(samples) < config.max_samples:
        if before_sample is not None:
            before_sample(len(samples))
        samples.append(net_ms(measure(call), overhead_ms))
        if len(samples) >= config.min_samples:
            noise = relative_noise(samples)
            if noise < config.target_noise or clock() > stop_at:
                break
    stats = summarize_samples(samples, warm_calls)
    return stats.model_copy(update={"round_trip_ms": overhead_ms}) if overhead_ms else stats


def _no_flush() -> None:
    return None
