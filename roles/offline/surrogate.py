"""Models of the scores seen so far, to pick the unseen config they rate best.

Kernel-tuning landscapes are mostly main effects (this tile size is good, that unroll is bad) with interactions
on top. ``best_unseen``: a model that adds up per-value effects, fitted on score ranks, a cheap and robust guide
from three scores on; values not tried yet get a small optimistic effect, so it also explores. ``best_expected``:
a Gaussian process whose kernel has the same main effects plus pairwise interactions and a decay over a knob's
ordered values, scored by expected improvement, for when a few more scores are in. Pure; imports nothing of
evoteam (numpy only)."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

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


# A Gaussian-process model over the knob indices, for when enough configs were scored to fit one: each knob's
# kernel mixes "same value" with a decay over the distance between value positions (knob domains are ordered,
# mostly sizes), and the config kernel adds those up and adds their pairwise products (main effects plus pairwise
# interactions, the shape of kernel-tuning landscapes). Its few hyperparameters are chosen by marginal likelihood
# on a small grid, so the model leans on interactions only when the data show them.

GP_LENGTHS = (0.25, 0.6)
"""Decay lengths over a knob's value positions (0 .. 1) tried by the fit."""
GP_PAIRS = (0.25, 1.0, 4.0)
"""Weights of the pairwise-interaction part relative to the additive part tried by the fit."""
GP_NOISES = (0.01, 0.1)
"""Noise variances (of standardized scores) tried by the fit."""


def _knob_kernels(sizes: Sequence[int], length: float) -> list[np.ndarray]:
    out = []
    for size in sizes:
        position = np.arange(size) / max(1, size - 1)
        distance = np.abs(position[:, None] - position[None, :])
        out.append(0.5 * (distance == 0) + 0.5 * np.exp(-distance / length))
    return out


def _kernel(a: np.ndarray, b: np.ndarray, knobs: list[np.ndarray], pairs: float) -> np.ndarray:
    """The config kernel between the rows of ``a`` and of ``b`` (index arrays, one column per knob), 1 on
    the diagonal."""
    parts = [k[a[:, d][:, None], b[:, d][None, :]] for d, k in enumerate(knobs)]
    dims = len(parts)
    additive = sum(parts) / dims
    if dims < 2:
        return additive  # type: ignore[no-any-return]
    total = sum(parts)
    squares = sum(p * p for p in parts)
    pairwise = (total * total - squares) / (dims * (dims - 1))  # mean over pairs of the products
    return (additive + pairs * pairwise) / (1 + pairs)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Fit:
    knobs: list[np.ndarray]
    pairs: float
    x: np.ndarray
    chol: np.ndarray
    alpha: np.ndarray
    scale: float

    def predict(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation (in standardized score units) at the rows of ``keys``."""
        cross = _kernel(keys, self.x, self.knobs, self.pairs)
        mean = cross @ self.alpha
        v = np.linalg.solve(self.chol, cross.T)
        var = np.maximum(1.0 - np.sum(v * v, axis=0), 1e-12)
        return mean, np.sqrt(var) * self.scale


def fit(sizes: Sequence[int], keys: Sequence[Key], values: Sequence[float]) -> Fit:
    """The GP fit (hyperparameters by marginal likelihood on the grids above) of standardized ``values``."""
    x = np.array(keys, dtype=np.intp).reshape(len(keys), len(sizes))
    y = np.array(values, dtype=float)
    y = (y - y.mean()) / (y.std() or 1.0)
    best: tuple[float, Fit] | None = None
    for length in GP_LENGTHS:
        knobs = _knob_kernels(sizes, length)
        for pairs in GP_PAIRS:
            gram = _kernel(x, x, knobs, pairs)
            for noise in GP_NOISES:
                # a signal variance s² scales the kernel; its maximum-likelihood value is yᵀK⁻¹y / n
                chol = np.linalg.cholesky(gram + noise * np.eye(len(y)))
                alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, y))
                signal = max(float(y @ alpha) / len(y), 1e-6)
                likelihood = -0.5 * len(y) * np.log(signal) - float(np.sum(np.log(np.diag(chol))))
                if best is None or likelihood > best[0]:
                    best = (likelihood, Fit(knobs, pairs, x, chol, alpha, float(np.sqrt(signal))))
    assert best is not None
    return best[1]


def best_expected(
    sizes: Sequence[int],
    scores: Mapping[Key, float],
    seen: Collection[Key],
    penalty: Callable[[Key], float],
    rng: random.Random,
    explore: float = 1.0,
    extra: Iterable[Key] = (),
) -> Key | None:
    """The unseen key of highest expected improvement over the best score under the GP fit (higher scores are
    better), shrunk by ``1 + penalty``; ``explore`` (0 .. 1) scales the posterior spread, so a search can turn
    to exploiting the model as its budget runs out. Spaces up to ``ENUMERATE_UP_TO`` are scored whole, larger
    ones through ``SAMPLES`` random keys and ``extra`` ones. None with fewer than three scores."""
    if len(scores) < 3:
        return None
    total = math.prod(sizes)
    if total <= ENUMERATE_UP_TO:
        pool: Iterable[Key] = itertools.product(*(range(s) for s in sizes))
    else:
        pool = itertools.chain(extra, (tuple(rng.randrange(s) for s in sizes) for _ in range(SAMPLES)))
    candidates = [k for k in dict.fromkeys(pool) if k not in seen]
    if not candidates:
        return None
    told = list(scores)
    model = fit(sizes, told, [scores[k] for k in told])
    mean, spread = model.predict(np.array(candidates, dtype=np.intp).reshape(len(candidates), len(sizes)))
    y = np.array([scores[k] for k in told], dtype=float)
    incumbent = (float(y.max()) - float(y.mean())) / (float(y.std()) or 1.0)
    sigma = np.maximum(spread * max(explore, 1e-3), 1e-9)
    z = (mean - incumbent) / sigma
    improvement = sigma * (z * _normal_cdf(z) + np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi))
    shrink = np.array([1.0 + penalty(k) for k in candidates])
    value = improvement / shrink + 1e-12 * np.array([rng.random() for _ in candidates])
    return candidates[int(np.argmax(value))]


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))  # type: ignore[no-any-return]
