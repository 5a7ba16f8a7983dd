"""benchmarks/self_consistency.py's chance line: how many intervals miss 1 beside what chance alone gives."""

from __future__ import annotations

import pytest

from conftest import benchmark_script

pytestmark = pytest.mark.unit


def test_the_chance_line_gives_the_expected_misses_and_the_odds_that_none_miss() -> None:
    with benchmark_script("self_consistency") as module:
        line = module.chance_line(2, 27)
    assert line.startswith("intervals missing 1: 2 of 27;")
    assert "misses 1.35 of 27 on average" in line  # 5% of 27
    assert "all 27 hold 1 in 25% of runs" in line  # 0.95 ** 27 = 0.25
