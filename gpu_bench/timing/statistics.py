"""What timing samples say: the sampling rules (``TimingConfig``), the summary (``TimingStats``) and the noise.

Shared by CPU timing (``cpu.py``) and GPU timing (``gpu.py``): median, p20/p80, and the median's relative 95%
confidence half-width, which decides when sampling stops.
"""

from __future__ import annotations

import math
import statistics
from typing import Literal

import numpy as np
from pydantic import BaseModel


class TimingConfig(BaseModel):
    warmup_s: float = 0.05
    """Warm-up runs for at least this long (and at least 3 calls)."""
    min_samples: int = 10
    max_samples: int = 500
    max_time_s: float = 2.0
    """Stop sampling after this much wall time, noisy or not."""
    target_noise: float = 0.01
    """Stop once the 95% confidence half-width of the median, relative to the median, is below this."""
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
