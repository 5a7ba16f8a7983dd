"""How each writing role proposes configs offline, so that roles differ by what they do, not by their name.

Each is a proposer with ``Search``'s interface (``ask``, ``tell``, ``forbid``, ``best``, ``evaluations``):

- ``LocalSearch`` (the Optimizer): steepest-ascent hill climbing from the config it was given (the best so
  far): that config, then all its one-knob neighbours (in knob order, the lower value first), then the same
  around the best config found; from a config none of its neighbours beat, its two-step neighbours, and no
  further: a jump away from the best is the Explorer's part, so the two roles stay distinct.
- ``FarProbe`` (the Explorer): the given config (what a probe must beat), then configs as unlike it as the
  space allows: farthest first (in knob positions) from it and from each other, over a seeded sample.
- ``Repair`` (the Debugger): the given config first; if it passes there is nothing to repair and it proposes
  nothing more; if it fails, its nearest configs (one knob, then two) until one passes.

Pure and deterministic given the seed, like ``search``; ``STRATEGIES`` names them for ``OfflineTunerAgent``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Literal

from evoteam.roles.offline.search import Config, Key, Search, Space, Trial, Value

StrategyName = Literal["search", "local", "explore", "repair"]
STRATEGIES: dict[str, StrategyName] = {"Optimizer": "local", "Explorer": "explore", "Debugger": "repair"}
"""The strategy of each built-in writing role; any other role that writes code uses ``search``."""
SAMPLE = 256
"""Configs ``FarProbe`` picks from (all of them in a smaller space)."""


class _Proposer:
    """The bookkeeping the proposers share: trials, the budget, keys seen or forbidden."""

    def __init__(self, space: Space, budget: int, start: Mapping[str, Value]) -> None:
        self.space, self.budget = space, budget
        self.start: Key = space.key(start)
        self.trials: list[Trial] = []
        self._told: dict[Key, float | None] = {}
        self._forbidden: set[Key] = set()
        self._pending: set[Key] = set()

    @property
    def evaluations(self) -> int:
        return len(self.trials)

    @property
    def best(self) -> Trial | None:
        good = [t for t in self.trials if t.score is not None]
        return max(good, key=lambda t: t.score or 0.0) if good else None

    def forbid(self, config: Mapping[str, Value]) -> None:
        """A config known to fail (from an earlier round): never proposed, not counted in the budget."""
        if self.space.contains(config):
            self._forbidden.add(self.space.key(config))

    def tell(self, config: Mapping[str, Value], score: float | None) -> None:
        key = self.space.key(config)
        if key in self._told:
            raise ValueError(f"config {dict(config)} was already told")
        self._pending.discard(key)
        self._told[key] = score
        self.trials.append(Trial(config=self.space.config(key), score=score))

    def ask(self) -> Config | None:
        if self.evaluations + len(self._pending) >= self.budget:
            return None
        key = self._next()
        if key is None:
            return None
        self._pending.add(key)
        return self.space.config(key)

    def _open(self, key: Key) -> bool:
        return key not in self._told and key not in self._forbidden and key not in self._pending

    def _next(self) -> Key | None:
        raise NotImplementedError


class LocalSearch(_Proposer):
    """Steepest-ascent hill climbing from the given config: every one-knob neighbour of the center is tried
    before the climb moves to the best config found (so one knob's noise cannot lead it away from the others);
    from a center that none beat, its two-step neighbours, and no further (a jump is the Explorer's part)."""

    def __init__(self, space: Space, budget: int, start: Mapping[str, Value]) -> None:
        super().__init__(space, budget, start)
        self._center = self.start

    def _next(self) -> Key | None:
        if self._open(self.start):
            return self.start
        while True:
            for step in (1, 2):
                ring = self.space.neighbours(self._center, step)
                fresh = [k for k in ring if self._open(k)]
                if fresh:
                    return fresh[0]
                if any(k in self._pending for k in ring):
                    return None  # wait for the ring's last result before moving on
                best = self._best_key()
                if best is not None and best != self._center:
                    self._center = best
                    break
            else:
                return None

    def _best_key(self) -> Key | None:
        scored = {k: s for k, s in self._told.items() if s is not None}
        return max(scored, key=lambda k: scored[k]) if scored else None


class FarProbe(_Proposer):
    """Configs far from the given one and from each other (farthest-first traversal of a seeded sample)."""

    def __init__(self, space: Space, budget: int, start: Mapping[str, Value], seed: int = 0) -> None:
        super().__init__(space, budget, start)
        rng = random.Random(seed)
        if space.size <= SAMPLE:
            sample = list(space.all_keys())
            rng.shuffle(sample)
        else:
            sample = list({space.random_key(rng) for _ in range(SAMPLE)})
        self._sample = [k for k in sample if k != self.start]

    def _next(self) -> Key | None:
        if self._open(self.start):
            return self.start
        chosen = [self.start, *self._told, *self._pending]
        open_keys = [k for k in self._sample if self._open(k)]
        if not open_keys:
            return None
        return max(open_keys, key=lambda k: min(_distance(self.space, k, c) for c in chosen))


class Repair(_Proposer):
    """The given config; when it fails, its nearest configs until one passes."""

    def _next(self) -> Key | None:
        if self._open(self.start):
            return self.start
        if any(s is not None for s in self._told.values()):
            return None  # something passes (the given config itself, or a repair): done
        for step in (1, 2):
            for key in self.space.neighbours(self.start, step):
                if self._open(key):
                    return key
        return None


def proposer(
    strategy: StrategyName, space: Space, budget: int, start: Config, seed: int
) -> Search | LocalSearch | FarProbe | Repair:
    """The proposer of ``strategy`` over ``space``, ``budget`` evaluations at most, from ``start``."""
    match strategy:
        case "local":
            return LocalSearch(space, budget, start)
        case "explore":
            return FarProbe(space, budget, start, seed)
        case "repair":
            return Repair(space, budget, start)
        case "search":
            return Search(space, budget, seed=seed, starts=[start])


def _distance(space: Space, a: Key, b: Key) -> float:
    """Knob positions apart, each knob scaled to its domain (0 to 1 per knob)."""
    return sum(abs(x - y) / max(1, len(d) - 1) for x, y, d in zip(a, b, space.domains, strict=True))
