"""A budgeted search over a product of knob domains: ``ask`` for a config to try, ``tell`` its score.

Latin-hypercube starts (after any given start configs; a quarter of the budget, 2 to 8), then a mix of: the
unseen config a model of the scores so far rates best (``surrogate``: an additive rank model for the first few
scores, then a Gaussian process with pairwise interactions on log scores, by expected improvement); local moves
(one knob to a neighbouring value, around the best configs, continuing in a direction that just paid off);
uniform recombination of the best configs with a little mutation; and a few random probes. Nothing is proposed
twice; a config that failed (score None) is never retried and configs near failures are proposed later than
others.
Pure and deterministic given the seed: no I/O, no clock; imports nothing of evoteam but ``surrogate``."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from evoteam.roles.offline.surrogate import best_expected, best_unseen

Value = int | str
Config = dict[str, Value]
Key = tuple[int, ...]

# The operator a proposal tries first, by a uniform roll: below _MODEL the model's pick, below _LOCAL a local move,
# below _RECOMBINE a recombination, else a random probe (each falls through to the next when it finds nothing).
_MODEL, _LOCAL, _RECOMBINE = 0.7, 0.9, 0.97
GP_FROM = 4
"""From this many scored configs on, the model is a Gaussian process (``best_expected``); before, the additive
rank model (``best_unseen``)."""


class Space:
    """The knobs' domains in a fixed order; a config is addressed by the index of each value in its domain."""

    def __init__(self, domains: Mapping[str, Sequence[Value]]) -> None:
        self.names = list(domains)
        self.domains = [list(domains[n]) for n in self.names]
        for name, values in zip(self.names, self.domains, strict=True):
            if not values or len(set(values)) != len(values):
                raise ValueError(f"knob {name!r} needs distinct values, got {values}")
        self.size = math.prod(len(d) for d in self.domains)

    def key(self, config: Mapping[str, Value]) -> Key:
        if set(config) != set(self.names):
            raise ValueError(f"config {dict(config)} does not set exactly the knobs {self.names}")
        try:
            return tuple(d.index(config[n]) for n, d in zip(self.names, self.domains, strict=True))
        except ValueError:
            raise ValueError(f"config {dict(config)} has a value outside its knob's domain") from None

    def config(self, key: Key) -> Config:
        return {n: d[i] for n, d, i in zip(self.names, self.domains, key, strict=True)}

    def contains(self, config: Mapping[str, Value]) -> bool:
        return set(config) == set(self.names) and all(
            config[n] in d for n, d in zip(self.names, self.domains, strict=True)
        )

    def neighbours(self, key: Key, step: int) -> list[Key]:
        """Keys that differ from ``key`` in one knob by exactly ``step`` positions."""
        out = []
        for dim, size in enumerate(len(d) for d in self.domains):
            for delta in (-step, step):
                if 0 <= key[dim] + delta < size:
                    out.append(_with(key, dim, key[dim] + delta))
        return out

    def all_keys(self) -> Iterator[Key]:
        """Every key, in order (the last knob changing fastest)."""
        return itertools.product(*(range(len(d)) for d in self.domains))

    def random_key(self, rng: random.Random) -> Key:
        return tuple(rng.randrange(len(d)) for d in self.domains)


@dataclass(frozen=True)
class Trial:
    config: Config
    score: float | None
    """As told (None: the config failed)."""


class Search:
    """``budget`` evaluations at most; ``maximize`` False for times (lower is better)."""

    def __init__(
        self,
        space: Space,
        budget: int,
        seed: int = 0,
        starts: Sequence[Mapping[str, Value]] = (),
        maximize: bool = True,
        initial: int | None = None,
    ) -> None:
        self.space = space
        self.budget = budget
        self.maximize = maximize
        self.trials: list[Trial] = []
        self._rng = random.Random(seed)
        self._good: dict[Key, float] = {}  # key → score, higher is better
        self._failed: set[Key] = set()
        self._pending: set[Key] = set()
        self._moves: dict[Key, tuple[Key, int, int]] = {}  # key → (parent, dim, delta) of the local move that made it
        count = initial if initial is not None else max(2, min(8, budget // 4))
        self._queue: list[Key] = [space.key(s) for s in starts if space.contains(s)] + self._latin(count)

    @property
    def evaluations(self) -> int:
        return len(self.trials)

    @property
    def best(self) -> Trial | None:
        good = [(t.score if self.maximize else -t.score, i) for i, t in enumerate(self.trials) if t.score is not None]
        return self.trials[max(good)[1]] if good else None

    def ask(self) -> Config | None:
        """The next config to evaluate, or None when the budget (or the space) is used up."""
        if self.evaluations + len(self._pending) >= self.budget or len(self._seen) >= self.space.size:
            return None
        key = self._next()
        if key is None:
            return None
        self._pending.add(key)
        return self.space.config(key)

    def tell(self, config: Mapping[str, Value], score: float | None) -> None:
        key = self.space.key(config)
        if key in self._good or key in self._failed:
            raise ValueError(f"config {dict(config)} was already told")
        self._pending.discard(key)
        self.trials.append(Trial(config=self.space.config(key), score=score))
        if score is None or math.isnan(score):
            self._failed.add(key)
            return
        value = score if self.maximize else -score
        best_before = max(self._good.values(), default=-math.inf)
        self._good[key] = value
        move = self._moves.get(key)
        if move is not None and value > best_before and value > self._good.get(move[0], -math.inf):
            _, dim, delta = move  # it paid off: take one more step the same way, next
            ahead = key[dim] + delta
            if 0 <= ahead < len(self.space.domains[dim]):
                step = _with(key, dim, ahead)
                self._moves[step] = (key, dim, delta)
                self._queue.insert(0, step)

    def forbid(self, config: Mapping[str, Value]) -> None:
        """A config known to fail (from an earlier run): never proposed, and not counted in the budget."""
        if self.space.contains(config):
            self._failed.add(self.space.key(config))

    @property
    def _seen(self) -> set[Key]:
        return self._good.keys() | self._failed | self._pending

    def _latin(self, count: int) -> list[Key]:
        strata = [self._rng.sample(range(count), count) for _ in self.space.domains]
        return [
            tuple(
                int((s[i] + self._rng.random()) * len(d) / count)
                for s, d in zip(strata, self.space.domains, strict=True)
            )
            for i in range(count)
        ]

    def _penalty(self, key: Key) -> float:
        """How close ``key`` lies to failed configs (1 for each at distance 1, 0.3 at distance 2)."""
        total = 0.0
        for bad in self._failed:
            distance = sum(abs(a - b) for a, b in zip(key, bad, strict=True))
            total += 1.0 if distance == 1 else 0.3 if distance == 2 else 0.0
        return total

    def _pick(self, keys: Sequence[Key]) -> Key | None:
        seen = self._seen
        fresh = list(dict.fromkeys(k for k in keys if k not in seen))
        self._rng.shuffle(fresh)
        return min(fresh, key=self._penalty) if fresh else None

    def _elites(self) -> list[Key]:
        return sorted(self._good, key=lambda k: -self._good[k])

    def _next(self) -> Key | None:
        seen = self._seen
        while self._queue:
            key = self._queue.pop(0)
            if key not in seen:
                return key
        operators: list[Callable[[], Key | None]] = [self._model, self._local, self._recombine, self._random]
        if self._good:
            roll = self._rng.random()
            first = 0 if roll < _MODEL else 1 if roll < _LOCAL else 2 if roll < _RECOMBINE else 3
            operators = operators[first:] + operators[:first]
        for operator in operators:
            found = operator()
            if found is not None:
                return found
        return self._sweep()

    def _model(self) -> Key | None:
        sizes = [len(d) for d in self.space.domains]
        if len(self._good) < GP_FROM:
            return best_unseen(sizes, self._good, self._seen, self._penalty, self._rng)
        extra = [n for e in self._elites()[:4] for step in (1, 2) for n in self.space.neighbours(e, step)]
        return best_expected(sizes, self._model_values(), self._seen, self._penalty, self._rng, extra=extra)

    def _model_values(self) -> dict[Key, float]:
        """The scores as the model sees them (higher is better): the log of times or speedups when all are
        positive (kernel timings vary by factors, not offsets), else as told."""
        if all(v != 0 for v in self._good.values()) and (
            all(v > 0 for v in self._good.values()) or all(v < 0 for v in self._good.values())
        ):
            return {k: math.log(abs(v)) if v > 0 else -math.log(-v) for k, v in self._good.items()}
        return self._good

    def _local(self) -> Key | None:
        elites = self._elites()[:4]
        if not elites:
            return None
        start = min(len(elites) - 1, int(self._rng.random() ** 2 * len(elites)))  # mostly the best
        for step in (1, 2):
            for elite in elites[start:] + elites[:start]:
                neighbours = self.space.neighbours(elite, step)
                key = self._pick(neighbours)
                if key is not None:
                    dim = next(d for d in range(len(key)) if key[d] != elite[d])
                    self._moves[key] = (elite, dim, key[dim] - elite[dim])
                    return key
        return None

    def _recombine(self) -> Key | None:
        elites = self._elites()[: max(2, min(8, len(self._good) // 2))]
        if len(elites) < 2:
            return None
        children = []
        for _ in range(12):
            a, b = self._rng.sample(elites, 2)
            child = [self._rng.choice(pair) for pair in zip(a, b, strict=True)]
            for dim, size in enumerate(len(d) for d in self.space.domains):
                if self._rng.random() < 1 / len(child):
                    child[dim] = min(size - 1, max(0, child[dim] + self._rng.choice((-1, 1))))
            children.append(tuple(child))
            if len(set(children) - self._seen) >= 3:
                break
        return self._pick(children)

    def _random(self) -> Key | None:
        return self._pick([self.space.random_key(self._rng) for _ in range(6)])

    def _sweep(self) -> Key | None:
        """Any unseen key, from a random offset: for when the operators only find configs already seen."""
        for _ in range(200):
            key = self.space.random_key(self._rng)
            if key not in self._seen:
                return key
        if self.space.size > 1_000_000:
            return None
        seen = self._seen
        return next((key for key in self.space.all_keys() if key not in seen), None)


def _with(key: Key, dim: int, index: int) -> Key:
    """``key`` with knob ``dim`` at ``index``."""
    return (*key[:dim], index, *key[dim + 1 :])


def run(
    objective: Callable[[Config], float | None],
    space: Space,
    budget: int,
    seed: int = 0,
    maximize: bool = True,
    starts: Sequence[Mapping[str, Value]] = (),
) -> Search:
    """Runs a search to its budget on ``objective`` (None: the config failed); returns it for its trials."""
    search = Search(space, budget, seed=seed, starts=starts, maximize=maximize)
    while (config := search.ask()) is not None:
        search.tell(config, objective(config))
    return search
