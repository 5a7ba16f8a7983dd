"""The writing roles' offline strategies on synthetic objectives: what each proposes, and in what order."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from evoteam.roles.offline.search import Config, Space
from evoteam.roles.offline.strategies import FarProbe, LocalSearch, Repair, proposer

pytestmark = pytest.mark.unit

SPACE = Space({"MR": [1, 2, 4, 8], "NR": [1, 2, 4, 8], "lanes": [1, 2, 4, 8, 16, 32]})  # 96 configs
START: Config = {"MR": 1, "NR": 1, "lanes": 1}


def drive(p: LocalSearch | FarProbe | Repair, score: Callable[[Config], float | None]) -> list[Config]:
    asked = []
    while (config := p.ask()) is not None:
        asked.append(config)
        p.tell(config, score(config))
    return asked


def slope(c: Config) -> float:
    """Better with every knob up, up to a point (MR · NR · lanes = 64), worse beyond."""
    product = int(c["MR"]) * int(c["NR"]) * int(c["lanes"])
    return float(product) if product <= 64 else 64.0 / product


def test_local_search_tries_every_neighbour_then_moves_to_the_best() -> None:
    asked = drive(LocalSearch(SPACE, 8, START), slope)
    first_ring = [{"MR": 2, "NR": 1, "lanes": 1}, {"MR": 1, "NR": 2, "lanes": 1}, {"MR": 1, "NR": 1, "lanes": 2}]
    assert asked[:4] == [START, *first_ring]  # the kernel as given, then each knob one step, in knob order
    # then the ring of the best of those (the first, on a tie), then the ring of the best of that
    assert asked[4:7] == [
        {"MR": 4, "NR": 1, "lanes": 1},
        {"MR": 2, "NR": 2, "lanes": 1},
        {"MR": 2, "NR": 1, "lanes": 2},
    ]
    assert asked[7] == {"MR": 8, "NR": 1, "lanes": 1} and slope(asked[7]) == 8


def test_one_knob_s_noise_does_not_lead_the_climb_away_from_the_others() -> None:
    noisy = {"MR": 1.01, "NR": 1.0, "lanes": 1.0}  # one step of MR measures 1% faster; lanes is the real gain

    def score(c: Config) -> float:
        return 2.0 if c["lanes"] == 2 and c["MR"] == 1 else noisy["MR"] if c["MR"] == 2 else 1.0

    asked = drive(LocalSearch(SPACE, 4, START), score)
    assert {"MR": 1, "NR": 1, "lanes": 2} in asked  # within the first ring, whatever MR's step measured


def test_local_search_takes_two_steps_from_a_local_optimum_and_skips_known_failures() -> None:
    peak = {"MR": 2, "NR": 2, "lanes": 2}
    search = LocalSearch(SPACE, 20, peak)
    search.forbid({"MR": 1, "NR": 2, "lanes": 2})
    asked = drive(search, lambda c: 1.0 if c == peak else 0.5)
    assert asked[0] == peak and {"MR": 1, "NR": 2, "lanes": 2} not in asked
    one_step = [c for c in asked if sum(abs(SPACE.key(c)[i] - SPACE.key(peak)[i]) for i in range(3)) == 1]
    assert len(one_step) == 5  # six one-knob neighbours, one known to fail
    assert any(abs(SPACE.key(c)[0] - 1) == 2 for c in asked)  # then two steps
    # and no further, whatever budget is left: a jump away from the best is the Explorer's part
    stays = drive(LocalSearch(SPACE, 200, peak), lambda c: 1.0 if c == peak else 0.5)
    assert len(stays) == 1 + 6 + 3  # the peak, its six one-step and three two-step neighbours


def test_the_explorer_probes_far_from_what_it_was_given() -> None:
    asked = drive(FarProbe(SPACE, 6, START, seed=3), slope)
    assert asked[0] == START and len(asked) == len({tuple(c.values()) for c in asked}) == 6  # what to beat
    assert asked[1] == {"MR": 8, "NR": 8, "lanes": 32}  # the farthest config of the space
    local = drive(LocalSearch(SPACE, 6, START), slope)

    def spread(configs: list[Config]) -> float:
        keys = [SPACE.key(c) for c in configs]
        return sum(sum(abs(a - b) for a, b in zip(k, SPACE.key(START), strict=True)) for k in keys) / len(keys)

    assert spread(asked[1:]) > 2 * spread(local[1:])
    assert drive(FarProbe(SPACE, 6, START, seed=3), slope) == asked  # deterministic given the seed


def test_repair_stops_when_the_kernel_passes_and_otherwise_tries_its_nearest_configs() -> None:
    assert drive(Repair(SPACE, 6, START), slope) == [START]  # nothing to repair

    broken = {"MR": 8, "NR": 1, "lanes": 1}
    asked = drive(Repair(SPACE, 6, broken), lambda c: None if int(c["MR"]) > 2 else 1.0)
    assert asked == [broken, {"MR": 4, "NR": 1, "lanes": 1}, {"MR": 8, "NR": 2, "lanes": 1},
                     {"MR": 8, "NR": 1, "lanes": 2}, {"MR": 2, "NR": 1, "lanes": 1}]  # fmt: skip
    assert drive(Repair(SPACE, 3, broken), lambda c: None) == [broken, *asked[1:3]]  # the budget holds


def test_the_search_strategy_is_the_budgeted_search() -> None:
    assert type(proposer("search", SPACE, 4, START, 0)).__name__ == "Search"
    assert isinstance(proposer("repair", SPACE, 4, START, 0), Repair)
