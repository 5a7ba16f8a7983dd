"""An additive model of the scores seen so far (one effect per knob value), to pick the unseen config it rates best.

Kernel-tuning landscapes are mostly main effects (this tile size is good, that unroll is bad) with interactions
on top, so a model that adds up per-value effects, fitted on score ranks, is a cheap and robust guide. Values
not tried yet get a small optimistic effect, so the model also explores. Pure; imports nothing of evoteam.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

Key = tuple[int, ...]

UNSEEN_BONUS = 0.125
"""The effect of a value never tried, on the scale of rank effects (-0.5 .. 0.5)."""
ENUMERATE_UP_TO = 20_000
"""Spaces up to this size are scored whole; larger ones through ``SAMPLES`` random configs."""
SAMPLES = 3000


def effects(sizes: Sequence[int], scores: Mapping[Key, float]) -> list[list[float]]:
    """Per knob and value: the mean rank (0 worst .. 1 best) of the configs holding it, minus 0.5, shrunk
    toward 0 as if one more config of mean rank held it."""
    ranked = sorted(scores, key=lambda k: scores[k])
    rank = {k: i / max(1, len(ranked) - 1) for i, k in enumerate(ranked)}
    out = []
    for dim, size in enumerate(sizes):
        sums, counts = [0.0] * size, [0] * size
        for key, r in rank.items():
            sums[key[dim]] += r
            counts[key[dim]] += 1
        out.append([(s + 0.5) / (n + 1) - 0.5 if n else UNSEEN_BONUS for s, n in zip(sums, counts, strict=True)])
    return out


def best_unseen(
    sizes: Sequence[int],
    scores: Mapping[Key, float],
    seen: Collection[Key],
    penalty: Callable[[Key], float],
    rng: random.Random,
    weight: float = 0.2,
) -> Key | None:
    """The unseen key with the highest predicted effect minus ``weight`` × ``penalty`` (ties broken at random);
    None with fewer than three scores (too few to fit) or when every candidate was seen."""
    if len(scores) < 3:
        return None
    table = effects(sizes, scores)
    total = 1
    for size in sizes:
        total *= size
    candidates: Iterable[Key]
    if total <= ENUMERATE_UP_TO:
        candidates = itertools.product(*(range(s) for s in sizes))
    else:
        candidates = [tuple(rng.randrange(s) for s in sizes) for _ in range(SAMPLES)]
    best: Key | None = None
    best_value = float("-inf")
    for key in candidates:
        if key in seen:
            continue
        value = sum(table[d][i] for d, i in enumerate(key)) - weight * penalty(key) + 1e-9 * rng.random()
        if value > best_value:
            best, best_value = key, value
    return best
