"""What timing samples say: the sampling rules (``TimingConfig``), the summary (``TimingStats``) and the noise.

Shared by CPU timing (``cpu.py``) and GPU timing (``gpu.py``): median, p20/p80, and the median's relative 95%
confidence half-width, which decides when sampling stops.
"""

from __future__ import annotations

import math
import statistics
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field


class TimingConfig(BaseModel):
    warmup_s: float = 0.05
    """Warm-up runs for at least this long (and at least 3 calls)."""
    min_samples: int = 10
    max_samples: int = 500
    max_time_s: float = 2.0
    """Stop sampling after this much wall time, noisy or not."""
    target_noise: float = 0.01
    """Stop once the 95% confidence half-width of the median (paired: of the median ratio), relative to it, is
    below this."""
    flush_cache: bool = True
    flush_method: Literal["operands", "buffer"] = "operands"
    """``operands`` evicts exactly the kernel's buffers; ``buffer`` writes twice the last-level cache.
    On a GPU both write a buffer of twice the L2 cache (a GPU has no per-line flush)."""


class TimingStats(BaseModel):
    median_ms: float
    p20_ms: float
    p80_ms: float
    n: int
    noise: float
    """Relative 95% confidence half-width of the median when sampling stopped."""
    warmup_calls: int
    clock: Literal["cpu", "cuda_events"] = "cpu"
    """``cpu``: perf_counter around each call; ``cuda_events``: CUDA events on the current stream."""
    wall_per_call_ms: float | None = None
    """GPU only: wall-clock time per call of back-to-back calls, the cross-check of the events."""
    sm_clock_mhz: int | None = None
    """GPU only: the SM clock after sampling (None when NVML is unavailable)."""
    flush_bytes: int | None = None
    """GPU only: bytes written before each sample to evict L2 (None: no flush)."""
    launch_ms: float | None = None
    """GPU only: the median host time of one call (its launch), which the events do not include."""
    round_trip_ms: float | None = None
    """Native host only: the empty kernel's fastest round trip, subtracted from every sample (``net_ms``)."""


NET_FLOOR = 0.05
"""A call less a fixed overhead is never taken for less than this share of what the clock measured."""


def net_ms(measured_ms: float, overhead_ms: float) -> float:
    """A call's time less a fixed overhead that is not the kernel's (the native host's round trip, a lower
    bound of it); at least ``NET_FLOOR`` of the measured time, as a kernel cannot take less than nothing."""
    return max(measured_ms - overhead_ms, NET_FLOOR * measured_ms)


def summarize_samples(samples: list[float], warmup_calls: int) -> TimingStats:
    """Median, p20, p80, n and the final noise of per-call latencies in milliseconds."""
    return TimingStats(
        median_ms=statistics.median(samples),
        p20_ms=_quantile(samples, 0.2),
        p80_ms=_quantile(samples, 0.8),
        n=len(samples),
        noise=relative_noise(samples),
        warmup_calls=warmup_calls,
    )


def relative_noise(samples: list[float]) -> float:
    """1.57 * IQR / sqrt(n) / median: the notch half-width, a robust 95% interval for the median."""
    if len(samples) < 4:
        return math.inf
    median = statistics.median(samples)
    if median <= 0:
        return math.inf
    iqr = _quantile(samples, 0.75) - _quantile(samples, 0.25)
    return 1.57 * iqr / math.sqrt(len(samples)) / median


def _quantile(samples: list[float], q: float) -> float:
    return float(np.quantile(np.asarray(samples), q))


class PairedStats(BaseModel):
    """An incumbent (A) and a candidate (B) timed alternately on the same inputs, in blocks of two pairs in
    opposite orders: per-pair ratios ``A / B`` (above 1: the candidate is faster), combined per block; the
    median block ratio and its distribution-free 95% confidence interval."""

    ratio: float
    """Median of the block ratios (incumbent time / candidate time): the candidate's speedup."""
    ci: tuple[float, float]
    """95% confidence interval of that median (order statistics of the block ratios; no normality assumed)."""
    pairs: int
    ratios: list[float] = Field(default_factory=list, repr=False)
    """Every pair's ratio, in order: pairs 2k and 2k + 1 (a block) ran in opposite orders."""
    blocks: list[float] = Field(default_factory=list, repr=False)
    """Every block's ratio (``block_ratios``), in order; the geomean's interval over workloads resamples
    them."""
    incumbent: TimingStats
    """The incumbent's own samples, summarized."""
    candidate: TimingStats
    """The candidate's own samples, summarized."""
    runnable: float | None = None
    """Mean number of runnable tasks on the machine while sampling (Linux /proc/loadavg), None elsewhere."""
    cpus: int | None = None
    """The machine's CPUs: above this many runnable tasks the machine was contended."""


def median_ci(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median: the order statistics that bracket it with
    probability ``level`` (normal approximation of the binomial). Fewer than 6 values: their whole range."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return (math.nan, math.nan)
    if n < 6:
        return (ordered[0], ordered[-1])
    z = statistics.NormalDist().inv_cdf(0.5 + level / 2)
    k = max(0, math.floor((n - z * math.sqrt(n)) / 2) - 1)
    return (ordered[k], ordered[n - 1 - k])


def block_ratios(ratios: list[float]) -> list[float]:
    """One ratio per block: the geometric mean of its two pairs' ratios, one pair run incumbent first and the
    other candidate first. That cancels what running first or second does to a call (a warm thread pool, a
    cache the other side left, a clock that ramps: each worth a few percent on a CPU, in either direction).
    Taken pair by pair, such an effect splits the ratios in two clusters, and their median falls in whichever
    holds one more pair: identical kernels measured 1-3% apart with intervals that excluded 1. A last unpaired
    pair is left out; with no whole block, the pairs themselves are the blocks."""
    if len(ratios) < 2:
        return list(ratios)
    return [math.sqrt(first * second) for first, second in zip(ratios[0::2], ratios[1::2], strict=False)]


def paired_stats(incumbent_ms: list[float], candidate_ms: list[float], warmup_calls: int) -> PairedStats:
    """The ratio of each pair (incumbent / candidate) and of each block, the blocks' median and the median's
    interval."""
    ratios = [a / b if b > 0 else math.inf for a, b in zip(incumbent_ms, candidate_ms, strict=True)]
    blocks = block_ratios(ratios)
    return PairedStats(
        ratio=statistics.median(blocks),
        ci=median_ci(blocks),
        pairs=len(ratios),
        ratios=ratios,
        blocks=blocks,
        incumbent=summarize_samples(incumbent_ms, warmup_calls),
        candidate=summarize_samples(candidate_ms, warmup_calls),
    )


def relative_ci_half_width(ratios: list[float]) -> float:
    """Half the width of the median's interval, relative to the median (math.inf below 6 ratios)."""
    if len(ratios) < 6:
        return math.inf
    lo, hi = median_ci(ratios)
    median = statistics.median(ratios)
    return (hi - lo) / 2 / median if median > 0 else math.inf


def geomean_ci(
    per_workload: list[list[float]], level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Bootstrap interval of the geometric mean over workloads of each workload's median ratio: each resample
    draws every workload's ratios (its blocks') with replacement. Deterministic for a given ``seed``."""
    usable = [np.asarray(r, dtype=float) for r in per_workload if len(r) > 0]
    if not usable or any(bool((r <= 0).any()) or not bool(np.isfinite(r).all()) for r in usable):
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    logs = np.zeros(resamples)
    for ratios in usable:
        picks = rng.integers(0, len(ratios), size=(resamples, len(ratios)))
        logs += np.log(np.median(ratios[picks], axis=1))
    means = np.exp(logs / len(usable))
    tail = (1 - level) / 2
    return (float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail)))
