"""The knob search on synthetic objectives: budget, no repeats, failures, determinism, and finding optima."""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from evoteam.roles.offline.search import Config, Search, Space, run
from evoteam.roles.offline.surrogate import UNSEEN_BONUS, best_expected, best_unseen, effects, fit

pytestmark = pytest.mark.unit

SPACE3 = Space({"a": list(range(8)), "b": list(range(8)), "c": list(range(8))})  # 512 configs
SPACE4 = Space({k: list(range(9)) for k in "wxyz"})  # 6561 configs


def bowl(optimum: dict[str, int]) -> Callable[[Config], float]:
    """A separable quadratic with its maximum 0 at ``optimum``."""
    return lambda c: -sum((int(c[k]) - v) ** 2 for k, v in optimum.items())


def rugged(seed: int) -> Callable[[Config], float]:
    """A broad bowl with a ripple of period 3 and independent noise per config: many local optima."""
    rng = random.Random(seed)
    noise: dict[tuple[int, ...], float] = {}

    def f(c: Config) -> float:
        x = [int(c[k]) for k in sorted(c)]
        key = tuple(x)
        if key not in noise:
            noise[key] = rng.random()
        return -sum((v - 4.3) ** 2 for v in x) / 4 + sum(math.cos(2 * math.pi * v / 3) for v in x) + 1.5 * noise[key]

    return f


def random_search(objective: Callable[[Config], float], space: Space, budget: int, seed: int) -> float:
    rng = random.Random(seed)
    keys: set[tuple[int, ...]] = set()
    while len(keys) < budget:
        keys.add(space.random_key(rng))
    return max(objective(space.config(k)) for k in keys)


def test_space_addresses_configs_by_value_index() -> None:
    space = Space({"BLOCK": [64, 128, 256], "MODE": ["static", "dynamic"]})
    assert space.size == 6
    assert space.key({"BLOCK": 256, "MODE": "static"}) == (2, 0)
    assert space.config((1, 1)) == {"BLOCK": 128, "MODE": "dynamic"}
    assert space.contains({"BLOCK": 64, "MODE": "static"}) and not space.contains({"BLOCK": 32, "MODE": "static"})
    assert sorted(space.neighbours((1, 0), 1)) == [(0, 0), (1, 1), (2, 0)]
    with pytest.raises(ValueError, match="outside its knob's domain"):
        space.key({"BLOCK": 32, "MODE": "static"})
    with pytest.raises(ValueError, match="exactly the knobs"):
        space.key({"BLOCK": 64})
    with pytest.raises(ValueError, match="distinct values"):
        Space({"BLOCK": [64, 64]})


def test_it_keeps_to_its_budget_and_never_proposes_a_config_twice() -> None:
    search = run(rugged(0), SPACE4, budget=60, seed=3)
    keys = [SPACE4.key(t.config) for t in search.trials]
    assert len(keys) == 60 == search.evaluations and len(set(keys)) == 60
    assert search.ask() is None


def test_a_small_space_is_covered_once_and_then_it_stops() -> None:
    space = Space({"a": [1, 2, 3], "b": [1, 2]})
    search = run(lambda c: float(int(c["a"]) * int(c["b"])), space, budget=50, seed=0)
    assert sorted(space.key(t.config) for t in search.trials) == [(i, j) for i in range(3) for j in range(2)]
    assert search.best is not None and search.best.config == {"a": 3, "b": 2}


def test_the_same_seed_gives_the_same_search_and_another_seed_another() -> None:
    def configs(seed: int) -> list[Config]:
        return [t.config for t in run(rugged(7), SPACE4, budget=30, seed=seed).trials]

    assert configs(5) == configs(5)
    assert configs(5) != configs(6)


def test_start_configs_are_evaluated_first() -> None:
    start = {"a": 7, "b": 0, "c": 3}
    search = Search(SPACE3, budget=5, seed=0, starts=[start, {"a": 99, "b": 0, "c": 0}])  # outside: ignored
    assert search.ask() == start


def test_it_finds_the_optimum_of_a_separable_bowl_within_budget() -> None:
    for seed in range(10):
        optimum = {"a": 6, "b": 1, "c": 3} if seed % 2 else {"a": 0, "b": 7, "c": 4}
        best = run(bowl(optimum), SPACE3, budget=40, seed=seed).best
        assert best is not None and best.config == optimum, (seed, best)


def test_minimizing_a_time_finds_the_fastest_config() -> None:
    space = Space({"BLOCK": [16, 32, 64, 128, 256, 512, 1024], "UNROLL": [1, 2, 4, 8]})

    def time_ms(c: Config) -> float:
        return 1.0 + abs(math.log2(int(c["BLOCK"]) / 128)) + 0.5 * abs(math.log2(int(c["UNROLL"]) / 4))

    for seed in range(5):
        best = run(time_ms, space, budget=15, seed=seed, maximize=False).best
        assert best is not None and best.config == {"BLOCK": 128, "UNROLL": 4} and best.score == 1.0


def test_it_beats_random_search_on_average_on_a_rugged_landscape() -> None:
    ours, theirs = [], []
    for seed in range(30):
        ours.append(max(t.score for t in run(rugged(seed), SPACE4, budget=40, seed=seed).trials if t.score))
        theirs.append(random_search(rugged(seed), SPACE4, budget=40, seed=seed + 1000))
    wins = sum(o > r for o, r in zip(ours, theirs, strict=True))
    assert statistics.mean(ours) > statistics.mean(theirs) + 0.5, (statistics.mean(ours), statistics.mean(theirs))
    assert wins >= 20, wins


def test_failed_configs_are_never_retried_and_still_the_best_passing_one_is_found() -> None:
    def objective(c: Config) -> float | None:  # every config with a >= 5 fails to build
        return None if int(c["a"]) >= 5 else bowl({"a": 4, "b": 2, "c": 6})(c)

    search = run(objective, SPACE3, budget=60, seed=1)
    failed = [SPACE3.key(t.config) for t in search.trials if t.score is None]
    assert failed and len(failed) == len(set(failed))
    assert search.best is not None and search.best.config == {"a": 4, "b": 2, "c": 6}


def test_configs_next_to_failures_are_proposed_less_often() -> None:
    space = Space({"a": list(range(10)), "b": list(range(10))})
    wall = [{"a": 5, "b": b} for b in range(10)]
    beside = {4, 6}
    near, total = 0, 0
    for seed in range(20):
        search = Search(space, budget=30, seed=seed)
        for config in wall:
            search.forbid(config)  # known failures: never proposed, not counted in the budget
        rng = random.Random(seed)
        while (proposal := search.ask()) is not None:
            assert int(proposal["a"]) != 5
            near += int(proposal["a"]) in beside
            total += 1
            search.tell(proposal, rng.random())
        assert search.evaluations == 30
    share_in_space = 20 / 90
    assert near / total < 0.7 * share_in_space, near / total


def test_telling_a_config_twice_is_an_error() -> None:
    search = Search(SPACE3, budget=3, seed=0)
    config = search.ask()
    assert config is not None
    search.tell(config, 1.0)
    with pytest.raises(ValueError, match="already told"):
        search.tell(config, 2.0)


def test_the_additive_model_rates_values_by_the_ranks_of_the_configs_holding_them() -> None:
    scores = {(0, 0): 1.0, (1, 0): 3.0, (0, 1): 2.0, (1, 1): 4.0}  # knob 0: value 1 better; knob 1: value 1 better
    table = effects([3, 2], scores)
    assert table[0][1] > 0 > table[0][0] and table[1][1] > 0 > table[1][0]
    assert table[0][2] == UNSEEN_BONUS  # never tried: mildly optimistic
    rng = random.Random(0)
    assert best_unseen([3, 2], scores, set(scores), lambda k: 0.0, rng) == (2, 1)  # untried value, best other knob
    assert best_unseen([3, 2], scores, set(scores), lambda k: 10.0 * (k == (2, 1)), rng) == (2, 0)  # near a failure
    assert best_unseen([3, 2], dict(list(scores.items())[:2]), set(), lambda k: 0.0, rng) is None  # too few to fit


def test_the_gaussian_process_sees_an_interaction_the_additive_model_misses() -> None:
    # the score peaks along the diagonal a == b: no main effect, all interaction
    scores = {(a, b): -float((a - b) ** 2) for a in range(4) for b in range(4) if (a, b) not in {(3, 3), (0, 3)}}
    seen = set(scores)
    assert best_unseen([4, 4], scores, seen, lambda k: 0.0, random.Random(0)) == (0, 3)  # misled
    assert best_expected([4, 4], scores, seen, lambda k: 0.0, random.Random(0)) == (3, 3)
    assert best_expected([4, 4], scores, seen, lambda k: 10.0 * (k == (3, 3)), random.Random(0)) == (0, 3)
    assert best_expected([4, 4], dict(list(scores.items())[:2]), set(), lambda k: 0.0, random.Random(0)) is None
    assert best_expected([4, 4], scores, seen | {(3, 3), (0, 3)}, lambda k: 0.0, random.Random(0)) is None


def test_the_gaussian_process_fit_follows_the_scores_it_was_given() -> None:
    keys = [(a, b, c) for a in range(3) for b in range(3) for c in (0, 2)]
    values = [float(a + 2 * b - c) for a, b, c in keys]
    model = fit([3, 3, 3], keys, values)
    mean, spread = model.predict(np.array(keys))
    assert np.corrcoef(mean, values)[0, 1] > 0.99
    _, unseen_spread = model.predict(np.array([(1, 1, 1)]))
    assert unseen_spread[0] > spread.max()  # less sure where it has no data


def test_the_initial_design_is_a_latin_hypercube_of_a_quarter_of_the_budget() -> None:
    space = Space({k: list(range(4)) for k in "abc"})
    search = Search(space, budget=16, seed=4)
    first = []
    for _ in range(4):
        config = search.ask()
        assert config is not None
        first.append(config)
        search.tell(config, 0.0)
    for knob in "abc":
        assert sorted(c[knob] for c in first) == [0, 1, 2, 3]  # each value once


def test_on_kernel_like_times_it_finds_the_optimum_in_a_tenth_of_the_space_on_average() -> None:
    # log-time is main effects plus pairwise interactions, as with tile sizes; 192 configs, budget 20
    space = Space({"i": [4, 8, 16, 32], "j": [32, 64, 128, 256], "k": [16, 32, 64, 128], "u": [1, 2, 4]})
    rels = []
    for seed in range(12):
        rng = random.Random(seed)
        main = {(n, v): rng.gauss(0, 0.35) for n in space.names for v in space.domains[space.names.index(n)]}
        pair = {(n, v, m, w): rng.gauss(0, 0.2) for n in space.names for m in space.names if n < m
                for v in space.domains[space.names.index(n)] for w in space.domains[space.names.index(m)]}  # fmt: skip

        def time_ms(c: Config, main: dict[Any, float] = main, pair: dict[Any, float] = pair) -> float:
            log_time = sum(main[n, c[n]] for n in c) + sum(pair[n, c[n], m, c[m]] for n in c for m in c if n < m)
            return math.exp(log_time)

        optimum = min(time_ms(space.config(k)) for k in itertools.product(*(range(len(d)) for d in space.domains)))
        best = run(time_ms, space, budget=20, seed=seed, maximize=False).best
        assert best is not None and best.score is not None
        rels.append(best.score / optimum)
    assert statistics.mean(rels) < 1.15, rels
