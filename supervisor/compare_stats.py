"""The statistics of a comparison: an arm's speedup over its seeds with a 95% interval, and Pareto fronts.

Speedups are ratios, so seeds are averaged on the log scale: the arm's figure is the geometric mean of its
seeds' geomean speedups, and its interval is Student's t interval of the mean log speedup, taken back with
``exp``. One seed has no spread between seeds: its interval is the one its own paired timing gave.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131)
"""Student's t 97.5% quantile for 1..15 degrees of freedom."""


def t_quantile_975(df: int) -> float:
    """Student's t 97.5% quantile (two-sided 95%): the table to 15 degrees of freedom, then the
    Cornish-Fisher expansion around the normal quantile (within 0.002 of the exact value from there on)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = statistics.NormalDist().inv_cdf(0.975)
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def seeds_interval(
    speedups: Sequence[float], single_ci: tuple[float, float] | None = None
) -> tuple[float, tuple[float, float] | None]:
    """The geometric mean of ``speedups`` (one per seed) and its 95% interval; with one seed, ``single_ci``
    (that run's own interval). Raises on an empty list or a speedup that is not positive."""
    if not speedups:
        raise ValueError("no speedups to average")
    if any(not (s > 0 and math.isfinite(s)) for s in speedups):
        raise ValueError(f"speedups must be positive and finite: {list(speedups)}")
    logs = [math.log(s) for s in speedups]
    mean = statistics.fmean(logs)
    if len(logs) == 1:
        return math.exp(mean), single_ci
    half = t_quantile_975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), (math.exp(mean - half), math.exp(mean + half))


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two intervals share a point."""
    return a[0] <= b[1] and b[0] <= a[1]


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points (cost, speedup) no other point beats: none costs at most as much and is at least
    as fast while better in one. Sorted by cost."""
    front = []
    for i, (cost, speed) in enumerate(points):
        beaten = any(c <= cost and s >= speed and (c < cost or s > speed) for j, (c, s) in enumerate(points) if j != i)
        if not beaten:
            front.append(i)
    return sorted(front, key=lambda i: (points[i][0], -points[i][1]))
